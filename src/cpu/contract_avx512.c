/* contract_avx512.c — the exact A16 (SPEC §4) and W4A4 (SPEC §5) row dots with AVX-512 (F, BW,
 * VL, VNNI), chosen at run time (cpu_path.c). Only the order-free integer part is vectorized: the 16 group
 * dots of a super-block are exact int32 sums and the super-block total Σ dot·q9 is an exact int64 sum,
 * whatever the order; the total then goes through the same pinned f32 epilogue
 * (fp4_a16_epilogue), super-blocks in index order. So the result is the portable path's bits;
 * test_cpu_paths checks every path against an element-by-element reimplementation. W4A4 is the
 * same integer scheme with decoded activation codes and one int64 row total (its f32 epilogue
 * copied operation for operation from contract.c).
 *
 * Per super-block (128 payload bytes, 256 int8 activations, 16 scale bytes), in two halves of 64
 * payload bytes: the low and high nibbles are looked up (vpshufb) as E2M1 magnitudes in units of
 * 2^-1 (0..12, unsigned), the code's sign bit is moved onto the activation (masked 0 - a; |a| <=
 * 127 so it cannot overflow), and vpdpbusd sums 4 products per int32. For that the activations
 * are rearranged once per column (fp4_a16_act_avx512): per half, the 64 even elements (low
 * nibbles) then the 64 odd ones (high nibbles). int32 k of a half then holds part of group k/2;
 * adjacent pairs are added and multiplied by the group's q9 scale as int64 (vpmuldq: |dot| <=
 * 16·12·127, |q9| <= 448·2^9, the product < 2^33). The function is compiled for those ISA
 * extensions by a target attribute; nothing else in the library uses them, and cpu_path.c only
 * calls it on a CPU that has them. */
#include "cpu/cpu_impl.h"
#include <math.h>

void fp4_a16_act_avx512(const fp4_block_q8_K *xq, int64_t nsb, int8_t *dst) {
    for (int64_t sb = 0; sb < nsb; sb++, dst += FP4_QK_K)
        for (int h = 0; h < 2; h++)
            for (int j = 0; j < 64; j++) {
                dst[128 * h + j] = xq[sb].qs[128 * h + 2 * j];
                dst[128 * h + 64 + j] = xq[sb].qs[128 * h + 2 * j + 1];
            }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define FP4_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512dq,fma,f16c")))

/* (float)(half)f through F16C (vcvtps2ph with round to nearest even, vcvtph2ps): fp4_round_f16's
 * bits for every f32 (NaNs quieted keeping the top payload bits, as the C code does; test_cpu_paths,
 * and every one of the 2^32 patterns in bench/receipts/s6-cpu/round_f16.txt). The row dots end with
 * it; the C version's two calls and branches were 7 % of an exact CPU decode. */
FP4_TARGET_AVX512 float fp4_round_f16_avx512(float f) {
    return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtps_ph(_mm_set_ss(f), _MM_FROUND_TO_NEAREST_INT)));
}

/* E2M1 magnitudes in units of 2^-1, indexed by code & 7 (SPEC §1), once per 128-bit lane */
#define MAG8 0, 1, 2, 3, 4, 6, 8, 12, 0, 1, 2, 3, 4, 6, 8, 12

/* q9 (E4M3FN in units of 2^-9, fp4_e4m3fn_q9) of 8 scale bytes, one per int64 lane:
 * E = bits 3..6, m = bits 0..2; E == 0: m, else (8 + m) << (E - 1); the sign bit negates; the
 * NaN bytes (0x7F, 0xFF) give 0. */
FP4_TARGET_AVX512 static inline __m512i q9_8_avx512(__m128i s8) {
    const __m512i b = _mm512_cvtepu8_epi64(s8);
    const __m512i e = _mm512_and_si512(_mm512_srli_epi64(b, 3), _mm512_set1_epi64(15));
    const __m512i m = _mm512_and_si512(b, _mm512_set1_epi64(7));
    const __mmask8 normal = _mm512_test_epi64_mask(e, e);
    const __m512i mant = _mm512_mask_or_epi64(m, normal, m, _mm512_set1_epi64(8));
    const __m512i sh = _mm512_maskz_sub_epi64(normal, e, _mm512_set1_epi64(1));
    __m512i v = _mm512_sllv_epi64(mant, sh);
    const __mmask8 neg = _mm512_test_epi64_mask(b, _mm512_set1_epi64(0x80));
    v = _mm512_mask_sub_epi64(v, neg, _mm512_setzero_si512(), v);
    const __mmask8 nan =
        _mm512_cmpeq_epi64_mask(_mm512_and_si512(b, _mm512_set1_epi64(0x7F)), _mm512_set1_epi64(0x7F));
    return _mm512_maskz_mov_epi64((__mmask8)~nan, v);
}

/* the same for the 16 scale bytes of a super-block, one per int32 lane. The constants come from
 * memory (k: 15, 7, 8, 1, 0x80, 0x7F per int32), so that the compiler does not rebuild them with
 * broadcasts inside the loop. */
static const int32_t q9_consts[6][16] __attribute__((aligned(64))) = {
#define C16(v)                                                                                               \
    { v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v }
    C16(15),   C16(7),   C16(8), C16(1),
    C16(0x80), C16(0x7F)
#undef C16
};
FP4_TARGET_AVX512 static inline __m512i q9_16_avx512(__m128i s16, const __m512i k[6]) {
    const __m512i b = _mm512_cvtepu8_epi32(s16);
    const __m512i e = _mm512_and_si512(_mm512_srli_epi32(b, 3), k[0]);
    const __m512i m = _mm512_and_si512(b, k[1]);
    const __mmask16 normal = _mm512_test_epi32_mask(e, e);
    const __m512i mant = _mm512_mask_or_epi32(m, normal, m, k[2]);
    const __m512i sh = _mm512_maskz_sub_epi32(normal, e, k[3]);
    __m512i v = _mm512_sllv_epi32(mant, sh); /* <= 15 << 14: no overflow */
    const __mmask16 neg = _mm512_test_epi32_mask(b, k[4]);
    v = _mm512_mask_sub_epi32(v, neg, _mm512_setzero_si512(), v);
    const __mmask16 nan = _mm512_cmpeq_epi32_mask(_mm512_and_si512(b, k[5]), k[5]);
    return _mm512_maskz_mov_epi32((__mmask16)~nan, v);
}

FP4_TARGET_AVX512 float fp4_dot_a16_avx512(const uint8_t *payload_row, const uint8_t *scales_row,
                                           float scale2, const int8_t *act, const float *d, int64_t n_in) {
    const __m512i lut = _mm512_broadcast_i32x4(_mm_setr_epi8(MAG8));
    const __m512i low4 = _mm512_set1_epi8(0x0F), sign4 = _mm512_set1_epi8(0x08),
                  zero = _mm512_setzero_si512();
    __m512i k[6];
    for (int i = 0; i < 6; i++)
        k[i] = _mm512_load_si512((const void *)q9_consts[i]);
    /* opaque to the compiler: kept in registers, not rebuilt by broadcasts in the loop */
    __asm__("" : "+v"(k[0]), "+v"(k[1]), "+v"(k[2]), "+v"(k[3]), "+v"(k[4]), "+v"(k[5]));
    __m512i low4c = low4, sign4c = sign4;
    __asm__("" : "+v"(low4c), "+v"(sign4c));
    float acc = 0.0f;
    for (int64_t sb = 0; sb < n_in / FP4_QK_K; sb++) {
        if (d[sb] == 0.0f) continue; /* an all-zero super-block contributes nothing */
        const uint8_t *p = payload_row + sb * (FP4_QK_K / 2);
        const int8_t *a = act + sb * FP4_QK_K;
        __m512i tot = zero;
        /* q9 of the 16 groups; per half, groups 8h..8h+7 widened to int64 lanes for vpmuldq */
        const __m512i q9 =
            q9_16_avx512(_mm_loadu_si128((const __m128i *)(const void *)(scales_row + sb * 16)), k);
        const __m512i q9h[2] = {_mm512_cvtepi32_epi64(_mm512_castsi512_si256(q9)),
                                _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(q9, 1))};
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m512i b = _mm512_loadu_si512((const void *)(p + 64 * h));
            const __m512i lo = _mm512_and_si512(b, low4c);
            const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(b, 4), low4c);
            __m512i alo = _mm512_loadu_si512((const void *)(a + 128 * h));
            __m512i ahi = _mm512_loadu_si512((const void *)(a + 128 * h + 64));
            alo = _mm512_mask_sub_epi8(alo, _mm512_test_epi8_mask(lo, sign4c), zero, alo);
            ahi = _mm512_mask_sub_epi8(ahi, _mm512_test_epi8_mask(hi, sign4c), zero, ahi);
            __m512i s = _mm512_dpbusd_epi32(zero, _mm512_shuffle_epi8(lut, lo), alo);
            s = _mm512_dpbusd_epi32(s, _mm512_shuffle_epi8(lut, hi), ahi);
            s = _mm512_add_epi32(s, _mm512_srli_epi64(s, 32)); /* low int32 of int64 lane q: group 8h + q */
            tot = _mm512_add_epi64(tot, _mm512_mul_epi32(s, q9h[h]));
        }
        acc = fp4_a16_epilogue(_mm512_reduce_add_epi64(tot), d[sb], scale2, acc);
    }
    return fp4_round_f16_avx512(acc);
}

/* fp4_dot_a16_avx512's super-blocks, each one's epilogue term kept instead of summed: c[sb] =
 * fp4_a16_epilogue(total_sb, d[sb], scale2, 0), +0 where d[sb] is 0. The row-parallel split
 * (tp_shard.c) gathers these and replays the sum, so it needs them unrounded; the same integer
 * arithmetic as the dot above, so the same totals. */
FP4_TARGET_AVX512 void fp4_a16_terms_avx512(const uint8_t *payload_row, const uint8_t *scales_row,
                                            float scale2, const int8_t *act, const float *d, int64_t nsb,
                                            float *c) {
    const __m512i lut = _mm512_broadcast_i32x4(_mm_setr_epi8(MAG8));
    const __m512i low4 = _mm512_set1_epi8(0x0F), sign4 = _mm512_set1_epi8(0x08),
                  zero = _mm512_setzero_si512();
    __m512i k[6];
    for (int i = 0; i < 6; i++)
        k[i] = _mm512_load_si512((const void *)q9_consts[i]);
    for (int64_t sb = 0; sb < nsb; sb++) {
        if (d[sb] == 0.0f) {
            c[sb] = 0.0f;
            continue;
        }
        const uint8_t *p = payload_row + sb * (FP4_QK_K / 2);
        const int8_t *a = act + sb * FP4_QK_K;
        __m512i tot = zero;
        const __m512i q9 =
            q9_16_avx512(_mm_loadu_si128((const __m128i *)(const void *)(scales_row + sb * 16)), k);
        const __m512i q9h[2] = {_mm512_cvtepi32_epi64(_mm512_castsi512_si256(q9)),
                                _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(q9, 1))};
        for (int h = 0; h < 2; h++) {
            const __m512i b = _mm512_loadu_si512((const void *)(p + 64 * h));
            const __m512i lo = _mm512_and_si512(b, low4);
            const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(b, 4), low4);
            __m512i alo = _mm512_loadu_si512((const void *)(a + 128 * h));
            __m512i ahi = _mm512_loadu_si512((const void *)(a + 128 * h + 64));
            alo = _mm512_mask_sub_epi8(alo, _mm512_test_epi8_mask(lo, sign4), zero, alo);
            ahi = _mm512_mask_sub_epi8(ahi, _mm512_test_epi8_mask(hi, sign4), zero, ahi);
            __m512i s = _mm512_dpbusd_epi32(zero, _mm512_shuffle_epi8(lut, lo), alo);
            s = _mm512_dpbusd_epi32(s, _mm512_shuffle_epi8(lut, hi), ahi);
            s = _mm512_add_epi32(s, _mm512_srli_epi64(s, 32));
            tot = _mm512_add_epi64(tot, _mm512_mul_epi32(s, q9h[h]));
        }
        c[sb] = fp4_a16_epilogue(_mm512_reduce_add_epi64(tot), d[sb], scale2, 0.0f);
    }
}

/* 64 payload bytes as signed E2M1 values in units of 2^-1 (the code's sign on the magnitude; low
 * nibbles in *wlo, high in *whi) and, per int32 lane, -128 times the sum of its four weights of each:
 * the term that takes the +128 offset of unsigned activations off vpdpbusd's sums (the columns'
 * kernels below) */
FP4_TARGET_AVX512 static inline void signed_weights(__m512i b, __m512i lut, __m512i low4, __m512i sign4,
                                                   __m512i k80, __m512i *wlo, __m512i *whi, __m512i *ncorr) {
    const __m512i zero = _mm512_setzero_si512();
    const __m512i lo = _mm512_and_si512(b, low4);
    const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(b, 4), low4);
    *wlo = _mm512_shuffle_epi8(lut, lo), *whi = _mm512_shuffle_epi8(lut, hi);
    *wlo = _mm512_mask_sub_epi8(*wlo, _mm512_test_epi8_mask(lo, sign4), zero, *wlo);
    *whi = _mm512_mask_sub_epi8(*whi, _mm512_test_epi8_mask(hi, sign4), zero, *whi);
    *ncorr = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, k80, *wlo), k80, *whi));
}

/* W4A4: groups g0 .. g0+7 of a row (64 payload bytes, 8 scale bytes), those past ng read as 0 */
FP4_TARGET_AVX512 static inline void w4a4_load8(const uint8_t *payload_row, const uint8_t *scales_row,
                                                int64_t g0, int64_t ng, __m512i *b, __m128i *sc) {
    const int64_t left = ng - g0;
    if (left >= 8) {
        *b = _mm512_loadu_si512((const void *)(payload_row + g0 * 8));
        *sc = _mm_loadl_epi64((const __m128i *)(const void *)(scales_row + g0));
    } else {
        *b = _mm512_maskz_loadu_epi8(((__mmask64)1 << (8 * left)) - 1, (const void *)(payload_row + g0 * 8));
        *sc = _mm_maskz_loadu_epi8((__mmask16)((1u << left) - 1), scales_row + g0);
    }
}

/* ---- several columns of one row (a prefill chunk, a batch, a verify step) ----
 * The weights' share of fp4_dot_a16_avx512 — nibbles, magnitudes, signs, the q9 scales — once per
 * super-block for NC columns; per column only the activation loads, two vpdpbusd and the sums. The
 * sign goes onto the weight (s8, -12..12) and the activation is offset to unsigned (a + 128,
 * fp4_a16_actu_avx512), so vpdpbusd sums (a + 128)·w = a·w + 128·w per product: each int32 lane
 * starts at -128·Σw of its four weights (one vpdpbusd of 0x80 bytes, once per super-block). The
 * group dots are the same exact int32 values, the totals the same int64 ones, and each column runs
 * the same epilogue in super-block order (skipping the super-blocks whose d is 0, as the one-column
 * dot does): each column's result has fp4_dot_a16_avx512's bits. */
void fp4_a16_actu_avx512(const int8_t *act, int64_t n, uint8_t *dst) {
    for (int64_t i = 0; i < n; i++)
        dst[i] = (uint8_t)(act[i] ^ (int8_t)0x80);
}

#define FP4_A16_NC_MAX 4

/* the four int64 totals of t[0..3] (each the sum of its eight lanes; integer adds, so any order is
 * the same sum), as one vector: a transpose-and-add tree instead of four horizontal reductions */
FP4_TARGET_AVX512 static inline __m256i sum4_epi64(const __m512i t[4]) {
    const __m512i a = _mm512_add_epi64(_mm512_unpacklo_epi64(t[0], t[1]), _mm512_unpackhi_epi64(t[0], t[1]));
    const __m512i b = _mm512_add_epi64(_mm512_unpacklo_epi64(t[2], t[3]), _mm512_unpackhi_epi64(t[2], t[3]));
    /* 128-bit chunks: a holds (t0, t1) partials, b (t2, t3); e = a0 a2 b0 b2, f = a1 a3 b1 b3 */
    const __m512i g = _mm512_add_epi64(_mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(2, 0, 2, 0)),
                                       _mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512i h = _mm512_add_epi64(g, _mm512_shuffle_i64x2(g, g, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm512_castsi512_si256(_mm512_permutexvar_epi64(_mm512_setr_epi64(0, 1, 4, 5, 0, 1, 4, 5), h));
}

FP4_TARGET_AVX512 static inline __attribute__((always_inline)) void
a16_cols_nc(const uint8_t *payload_row, const uint8_t *scales_row, float scale2, const uint8_t *actu,
            int64_t act_stride, const float *d, int64_t d_stride, int64_t n_in, float *out, const int NC) {
    const __m512i lut = _mm512_broadcast_i32x4(_mm_setr_epi8(MAG8));
    const __m512i zero = _mm512_setzero_si512();
    __m512i low4 = _mm512_set1_epi8(0x0F), sign4 = _mm512_set1_epi8(0x08), k80 = _mm512_set1_epi8((char)0x80);
    __asm__("" : "+v"(low4), "+v"(sign4), "+v"(k80));
    __m512i k[6];
    for (int i = 0; i < 6; i++)
        k[i] = _mm512_load_si512((const void *)q9_consts[i]);
    __asm__("" : "+v"(k[0]), "+v"(k[1]), "+v"(k[2]), "+v"(k[3]), "+v"(k[4]), "+v"(k[5]));
    /* the epilogue (fp4_a16_epilogue) of the four columns in the lanes of one vector: the same four
     * IEEE operations per lane as the scalar fmaf's, the (float) of the total by vcvtqq2ps (round to
     * nearest, as the scalar conversion); a column whose d is 0 keeps its acc (the skip) */
    const __m128 z4 = _mm_setzero_ps(), one4 = _mm_set1_ps(1.0f), k10 = _mm_set1_ps(0x1p-10f),
                 s24 = _mm_set1_ps(scale2);
    __m128 acc = z4;
    for (int64_t sb = 0; sb < n_in / FP4_QK_K; sb++) {
        float dv[FP4_A16_NC_MAX] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++)
            dv[c] = d[c * d_stride + sb];
        const __m128 d4 = _mm_loadu_ps(dv);
        const __mmask8 live = _mm_cmp_ps_mask(d4, z4, _CMP_NEQ_UQ);
        if (!live) continue; /* all-zero super-blocks in every column: nothing to add */
        const uint8_t *p = payload_row + sb * (FP4_QK_K / 2);
        const __m512i q9 =
            q9_16_avx512(_mm_loadu_si128((const __m128i *)(const void *)(scales_row + sb * 16)), k);
        const __m512i q9h[2] = {_mm512_cvtepi32_epi64(_mm512_castsi512_si256(q9)),
                                _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(q9, 1))};
        __m512i tot[FP4_A16_NC_MAX] = {zero, zero, zero, zero};
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m512i wlo, whi, ncorr;
            signed_weights(_mm512_loadu_si512((const void *)(p + 64 * h)), lut, low4, sign4, k80, &wlo, &whi,
                           &ncorr);
#pragma GCC unroll 4
            for (int c = 0; c < NC; c++) {
                const uint8_t *a = actu + c * act_stride + sb * FP4_QK_K + 128 * h;
                __m512i s = _mm512_dpbusd_epi32(ncorr, _mm512_loadu_si512((const void *)a), wlo);
                s = _mm512_dpbusd_epi32(s, _mm512_loadu_si512((const void *)(a + 64)), whi);
                s = _mm512_add_epi32(s, _mm512_srli_epi64(s, 32)); /* low int32 of lane q: group 8h + q */
                tot[c] = _mm512_add_epi64(tot[c], _mm512_mul_epi32(s, q9h[h]));
            }
        }
        __m128 c4 = _mm256_cvtepi64_ps(sum4_epi64(tot));
        c4 = _mm_fmadd_ps(c4, k10, z4);
        c4 = _mm_fmadd_ps(c4, d4, z4);
        c4 = _mm_fmadd_ps(c4, s24, z4);
        acc = _mm_mask3_fmadd_ps(one4, c4, acc, live);
    }
    float r[FP4_A16_NC_MAX];
    _mm_storeu_ps(r, _mm_cvtph_ps(_mm_cvtps_ph(acc, _MM_FROUND_TO_NEAREST_INT))); /* fp4_round_f16's bits */
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++)
        out[c] = r[c];
}

FP4_TARGET_AVX512 void fp4_dot_a16_cols_avx512(const uint8_t *payload_row, const uint8_t *scales_row,
                                               float scale2, const uint8_t *actu, int64_t act_stride,
                                               const float *d, int64_t d_stride, int64_t n_in, int nc,
                                               float *out) {
    FP4_NC_DISPATCH(nc, a16_cols_nc, payload_row, scales_row, scale2, actu, act_stride, d, d_stride, n_in,
                    out);
}

/* ---- W4A4 (SPEC §5) ---- */

void fp4_w4a4_act_avx512(const uint8_t *codes, const uint8_t *scales, int64_t n_in, int8_t *act,
                         int64_t *q9a) {
    const int64_t ng = n_in / 16, nh = (ng + 7) / 8; /* halves of 8 groups, the last one padded */
    memset(act, 0, (size_t)(nh * 128));
    memset(q9a, 0, (size_t)(nh * 8) * sizeof *q9a);
    for (int64_t j = 0; j < n_in / 2; j++) { /* byte j: elements 2j (low nibble), 2j + 1 */
        const int64_t h = j / 64, r = j % 64;
        act[128 * h + r] = (int8_t)fp4_e2m1_q1((uint8_t)(codes[j] & 15));
        act[128 * h + 64 + r] = (int8_t)fp4_e2m1_q1((uint8_t)(codes[j] >> 4));
    }
    for (int64_t g = 0; g < ng; g++)
        q9a[g] = fp4_e4m3fn_q9(scales[g]);
}

FP4_TARGET_AVX512 float fp4_dot_w4a4_avx512(const uint8_t *payload_row, const uint8_t *scales_row,
                                            float scale2, const int8_t *act, const int64_t *q9a,
                                            float input_scale_inv, int64_t n_in) {
    const __m512i lut = _mm512_broadcast_i32x4(_mm_setr_epi8(MAG8));
    const __m512i low4 = _mm512_set1_epi8(0x0F), sign4 = _mm512_set1_epi8(0x08),
                  zero = _mm512_setzero_si512();
    const int64_t ng = n_in / 16;
    __m512i tot = zero;
    for (int64_t g0 = 0; g0 < ng; g0 += 8) { /* 8 groups: 64 payload bytes, the last ones masked */
        __m512i b;
        __m128i sc;
        w4a4_load8(payload_row, scales_row, g0, ng, &b, &sc);
        const __m512i lo = _mm512_and_si512(b, low4);
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(b, 4), low4);
        __m512i alo = _mm512_loadu_si512((const void *)(act + g0 * 16));
        __m512i ahi = _mm512_loadu_si512((const void *)(act + g0 * 16 + 64));
        alo = _mm512_mask_sub_epi8(alo, _mm512_test_epi8_mask(lo, sign4), zero, alo);
        ahi = _mm512_mask_sub_epi8(ahi, _mm512_test_epi8_mask(hi, sign4), zero, ahi);
        __m512i s = _mm512_dpbusd_epi32(zero, _mm512_shuffle_epi8(lut, lo), alo);
        s = _mm512_dpbusd_epi32(s, _mm512_shuffle_epi8(lut, hi), ahi);
        s = _mm512_add_epi32(s,
                             _mm512_srli_epi64(s, 32)); /* int64 lane q: dot of group g0 + q, |dot| <= 2304 */
        /* dot · q9(w) fits in int32 (<= 2304 · 229376), so a second vpmuldq by q9(a) is exact */
        const __m512i p = _mm512_mul_epi32(s, q9_8_avx512(sc));
        tot = _mm512_add_epi64(tot, _mm512_mul_epi32(p, _mm512_loadu_si512((const void *)(q9a + g0))));
    }
    const float input_scale = 1.0f / input_scale_inv;
    float y = (float)_mm512_reduce_add_epi64(tot) * 0x1p-20f;
    y = y * scale2;
    y = y * input_scale;
    return fp4_round_f16_avx512(y);
}
/* Several columns of one W4A4 row (a prefill chunk, a batch): the weights' nibbles, magnitudes,
 * signs and q9 scales decoded once per 8 groups for NC columns, the sign on the weight and each
 * column's decoded activation codes offset to unsigned (fp4_a16_actu_avx512 of the act above: its
 * padding bytes 0 become 0x80, against weight bytes masked to 0), 128·Σw taken off as in the A16
 * kernel. The same int32 group dots, the same two exact products per group and the same int64
 * total; the same f32 tail per column: fp4_dot_w4a4_avx512's bits. */
FP4_TARGET_AVX512 static inline __attribute__((always_inline)) void
w4a4_cols_nc(const uint8_t *payload_row, const uint8_t *scales_row, float scale2, const uint8_t *actu,
             const int64_t *q9a, int64_t act_stride, float input_scale_inv, int64_t n_in, float *out,
             const int NC) {
    const __m512i lut = _mm512_broadcast_i32x4(_mm_setr_epi8(MAG8));
    const __m512i zero = _mm512_setzero_si512();
    __m512i low4 = _mm512_set1_epi8(0x0F), sign4 = _mm512_set1_epi8(0x08), k80 = _mm512_set1_epi8((char)0x80);
    __asm__("" : "+v"(low4), "+v"(sign4), "+v"(k80));
    const int64_t ng = n_in / 16, q9_stride = act_stride / 16; /* act_stride = w4a4_padded(n_in) */
    __m512i tot[4] = {zero, zero, zero, zero};
    for (int64_t g0 = 0; g0 < ng; g0 += 8) {
        __m512i b, wlo, whi, ncorr;
        __m128i sc;
        w4a4_load8(payload_row, scales_row, g0, ng, &b, &sc);
        signed_weights(b, lut, low4, sign4, k80, &wlo, &whi, &ncorr);
        const __m512i q9w = q9_8_avx512(sc);
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) {
            const uint8_t *a = actu + c * act_stride + g0 * 16;
            __m512i s = _mm512_dpbusd_epi32(ncorr, _mm512_loadu_si512((const void *)a), wlo);
            s = _mm512_dpbusd_epi32(s, _mm512_loadu_si512((const void *)(a + 64)), whi);
            s = _mm512_add_epi32(s, _mm512_srli_epi64(s, 32)); /* int64 lane q: dot of group g0 + q */
            const __m512i p = _mm512_mul_epi32(s, q9w);
            tot[c] = _mm512_add_epi64(
                tot[c], _mm512_mul_epi32(p, _mm512_loadu_si512((const void *)(q9a + c * q9_stride + g0))));
        }
    }
    const float input_scale = 1.0f / input_scale_inv;
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) {
        float y = (float)_mm512_reduce_add_epi64(tot[c]) * 0x1p-20f;
        y = y * scale2;
        y = y * input_scale;
        out[c] = fp4_round_f16_avx512(y);
    }
}

FP4_TARGET_AVX512 void fp4_dot_w4a4_cols_avx512(const uint8_t *payload_row, const uint8_t *scales_row,
                                                float scale2, const uint8_t *actu, const int64_t *q9a,
                                                int64_t act_stride, float input_scale_inv, int64_t n_in,
                                                int nc, float *out) {
    FP4_NC_DISPATCH(nc, w4a4_cols_nc, payload_row, scales_row, scale2, actu, q9a, act_stride, input_scale_inv,
                    n_in, out);
}
#else
void fp4_dot_w4a4_cols_avx512(const uint8_t *payload_row, const uint8_t *scales_row, float scale2,
                              const uint8_t *actu, const int64_t *q9a, int64_t act_stride,
                              float input_scale_inv, int64_t n_in, int nc, float *out) {
    (void)payload_row, (void)scales_row, (void)scale2, (void)actu, (void)q9a, (void)act_stride,
        (void)input_scale_inv, (void)n_in;
    for (int c = 0; c < nc; c++)
        out[c] = NAN;
}
void fp4_w4a4_act_avx512(const uint8_t *codes, const uint8_t *scales, int64_t n_in, int8_t *act,
                         int64_t *q9a) {
    (void)codes, (void)scales, (void)n_in, (void)act, (void)q9a;
}
float fp4_dot_w4a4_avx512(const uint8_t *payload_row, const uint8_t *scales_row, float scale2,
                          const int8_t *act, const int64_t *q9a, float input_scale_inv, int64_t n_in) {
    (void)payload_row, (void)scales_row, (void)scale2, (void)act, (void)q9a, (void)input_scale_inv,
        (void)n_in;
    return NAN;
}
float fp4_dot_a16_avx512(const uint8_t *payload_row, const uint8_t *scales_row, float scale2,
                         const int8_t *act, const float *d, int64_t n_in) {
    (void)payload_row, (void)scales_row, (void)scale2, (void)act, (void)d, (void)n_in;
    return NAN;
}
void fp4_a16_terms_avx512(const uint8_t *payload_row, const uint8_t *scales_row, float scale2,
                          const int8_t *act, const float *d, int64_t nsb, float *c) {
    (void)payload_row, (void)scales_row, (void)scale2, (void)act, (void)d;
    for (int64_t sb = 0; sb < nsb; sb++)
        c[sb] = NAN;
}
void fp4_a16_actu_avx512(const int8_t *act, int64_t n, uint8_t *dst) {
    for (int64_t i = 0; i < n; i++)
        dst[i] = (uint8_t)(act[i] ^ (int8_t)0x80);
}
void fp4_dot_a16_cols_avx512(const uint8_t *payload_row, const uint8_t *scales_row, float scale2,
                             const uint8_t *actu, int64_t act_stride, const float *d, int64_t d_stride,
                             int64_t n_in, int nc, float *out) {
    (void)payload_row, (void)scales_row, (void)scale2, (void)actu, (void)act_stride, (void)d, (void)d_stride,
        (void)n_in;
    for (int c = 0; c < nc; c++)
        out[c] = NAN;
}
#endif
