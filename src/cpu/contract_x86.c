/* contract_x86.c — the exact A16 row dot (SPEC §4) with AVX2, chosen at run time when the CPU
 * has it and not the AVX-512 path (cpu_path.c). Only the order-free integer part is vectorized:
 * the group dots and the super-block total Σ dot·q9 are exact integer sums whatever the order,
 * and the total goes through the same pinned f32 epilogue (fp4_a16_epilogue), so the result is
 * the portable path's bits; test_cpu_paths checks every path against an element-by-element
 * reimplementation.
 *
 * Per 32 payload bytes (4 groups): the nibbles are looked up (vpshufb) as signed E2M1 values in
 * units of 2^-1 (-12..12), given the sign of their activation (vpsignb), and multiplied by |a|
 * (vpmaddubsw, u8 × s8, |pair| <= 2·127·12). For that the activations are rearranged once per
 * column (fp4_a16_act_avx2): per 32 payload bytes, the 32 even elements (low nibbles) then the 32
 * odd ones, once as they are and once as |a|. Per super-block the 16 group dots (|dot| <=
 * 16·12·127, int16) meet q9 split as q9 = hi·2^9 + lo (lo = q9 & 511, hi = q9 >> 9, both int16):
 * vpmaddwd sums dot·lo and dot·hi in int32 without overflow, and total = Σhi·2^9 + Σlo in int64. */
#include "cpu/cpu_impl.h"
#include <math.h>
#include <stdlib.h>

void fp4_a16_act_avx2(const fp4_block_q8_K *xq, int64_t nsb, int8_t *act, uint8_t *aabs) {
    for (int64_t sb = 0; sb < nsb; sb++)
        for (int k = 0; k < 4; k++)
            for (int j = 0; j < 32; j++)
                for (int odd = 0; odd < 2; odd++) {
                    const int8_t v = xq[sb].qs[64 * k + 2 * j + odd];
                    const int64_t at = sb * FP4_QK_K + 64 * k + 32 * odd + j;
                    act[at] = v;
                    aabs[at] = (uint8_t)abs(v);
                }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define FP4_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))

/* (float)(half)f through F16C: fp4_round_f16's bits (contract_avx512.c's twin; fp4_cpu_best_path
 * requires F16C for this path) */
FP4_TARGET_AVX2 float fp4_round_f16_avx2(float f) {
    return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtps_ph(_mm_set_ss(f), _MM_FROUND_TO_NEAREST_INT)));
}

/* E2M1 values in units of 2^-1, indexed by the code (SPEC §1), for vpshufb */
#define E2M1_Q1 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12
#define LOAD256(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))

/* q9 (fp4_e4m3fn_q9) of 8 scale bytes as int32: E == 0: m, else (8 + m) << (E - 1); the sign
 * bit negates; the NaN bytes give 0 */
FP4_TARGET_AVX2 static inline __m256i q9_8_avx2(__m128i s8) {
    const __m256i b = _mm256_cvtepu8_epi32(s8);
    const __m256i e = _mm256_and_si256(_mm256_srli_epi32(b, 3), _mm256_set1_epi32(15));
    const __m256i m = _mm256_and_si256(b, _mm256_set1_epi32(7));
    const __m256i normal = _mm256_cmpgt_epi32(e, _mm256_setzero_si256());
    const __m256i mant = _mm256_or_si256(m, _mm256_and_si256(normal, _mm256_set1_epi32(8)));
    const __m256i sh = _mm256_and_si256(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), normal);
    __m256i v = _mm256_sllv_epi32(mant, sh);
    v = _mm256_sign_epi32(v, _mm256_or_si256(_mm256_slli_epi32(b, 24), _mm256_set1_epi32(1)));
    const __m256i nan =
        _mm256_cmpeq_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x7F)), _mm256_set1_epi32(0x7F));
    return _mm256_andnot_si256(nan, v);
}

/* the 16 q9 scales of a super-block split as q9 = hi·2^9 + lo (int16 each), in the group order of
 * the packed dots */
FP4_TARGET_AVX2 static inline void q9_split_avx2(const uint8_t *scales16, __m256i *q9lo, __m256i *q9hi) {
    const __m128i gorder = _mm_setr_epi8(0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15);
    const __m128i s16 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(const void *)scales16), gorder);
    const __m256i qa = q9_8_avx2(s16), qb = q9_8_avx2(_mm_unpackhi_epi64(s16, s16));
    *q9lo = _mm256_packs_epi32(_mm256_and_si256(qa, _mm256_set1_epi32(511)),
                               _mm256_and_si256(qb, _mm256_set1_epi32(511)));
    *q9hi = _mm256_packs_epi32(_mm256_srai_epi32(qa, 9), _mm256_srai_epi32(qb, 9));
}

/* a super-block's int64 total Σ dot·q9 from its group sums: h01 / h23 the hadds of chunks 0, 1 and
 * 2, 3 (per 128-bit half, group sums of two chunks); packs: the 16 dots as int16 in the order
 * 0 1 4 5 8 9 12 13 | 2 3 6 7 10 11 14 15 */
FP4_TARGET_AVX2 static inline int64_t sb_total_avx2(__m256i h01, __m256i h23, __m256i q9lo, __m256i q9hi) {
    const __m256i dots = _mm256_packs_epi32(h01, h23);
    const __m256i s = _mm256_hadd_epi32(_mm256_madd_epi16(dots, q9lo), _mm256_madd_epi16(dots, q9hi));
    __m128i t = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    t = _mm_hadd_epi32(t, t); /* [Σ dot·lo, Σ dot·hi, ...] */
    return (int64_t)_mm_extract_epi32(t, 1) * 512 + _mm_cvtsi128_si32(t);
}

FP4_TARGET_AVX2 float fp4_dot_a16_avx2(const uint8_t *payload_row, const uint8_t *scales_row, float scale2,
                                       const int8_t *act, const uint8_t *aabs, const float *d, int64_t n_in) {
    const __m256i lut = _mm256_setr_epi8(E2M1_Q1, E2M1_Q1);
    const __m256i low4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    float acc = 0.0f;
    for (int64_t sb = 0; sb < n_in / FP4_QK_K; sb++) {
        if (d[sb] == 0.0f) continue; /* an all-zero super-block contributes nothing */
        const uint8_t *p = payload_row + sb * (FP4_QK_K / 2);
        const int8_t *a = act + sb * FP4_QK_K;
        const uint8_t *u = aabs + sb * FP4_QK_K;
        __m256i m[4]; /* chunk k: int32 2g, 2g+1 = halves of group 4k + g */
        for (int k = 0; k < 4; k++) {
            const __m256i b = LOAD256(p + 32 * k);
            const __m256i lo = _mm256_and_si256(b, low4),
                          hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), low4);
            const __m256i wlo = _mm256_sign_epi8(_mm256_shuffle_epi8(lut, lo), LOAD256(a + 64 * k));
            const __m256i whi = _mm256_sign_epi8(_mm256_shuffle_epi8(lut, hi), LOAD256(a + 64 * k + 32));
            const __m256i pr = _mm256_add_epi16(_mm256_maddubs_epi16(LOAD256(u + 64 * k), wlo),
                                                _mm256_maddubs_epi16(LOAD256(u + 64 * k + 32), whi));
            m[k] = _mm256_madd_epi16(pr, ones);
        }
        __m256i q9lo, q9hi;
        q9_split_avx2(scales_row + sb * 16, &q9lo, &q9hi);
        const int64_t total =
            sb_total_avx2(_mm256_hadd_epi32(m[0], m[1]), _mm256_hadd_epi32(m[2], m[3]), q9lo, q9hi);
        acc = fp4_a16_epilogue(total, d[sb], scale2, acc);
    }
    return fp4_round_f16_avx2(acc);
}
/* Several columns of one row (contract_avx512.c's fp4_dot_a16_cols_avx512 for AVX2): the signed
 * weights (-12..12, the code's sign in the table) decoded once per 32 payload bytes for NC columns;
 * each column's activations offset to unsigned (fp4_a16_actu_avx512: act ^ 0x80, on act's AVX2
 * layout), so vpmaddubsw gives (a + 128)·w + (a' + 128)·w' per int16 (|.| <= 6120: no saturation)
 * and 128·(w + w') of the weights alone is taken off: the same int16 pair sums as the one-column
 * dot's |a|·sign(a)w, then its own tail (dots, q9 split, int64 total) and epilogue per column. */
FP4_TARGET_AVX2 static inline __attribute__((always_inline)) void
a16_cols_nc_avx2(const uint8_t *payload_row, const uint8_t *scales_row, float scale2, const uint8_t *actu,
                 int64_t act_stride, const float *d, int64_t d_stride, int64_t n_in, float *out,
                 const int NC) {
    const __m256i lut = _mm256_setr_epi8(E2M1_Q1, E2M1_Q1);
    const __m256i low4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1),
                  k80 = _mm256_set1_epi8((char)0x80);
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int64_t sb = 0; sb < n_in / FP4_QK_K; sb++) {
        int any = 0;
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++)
            any |= d[c * d_stride + sb] != 0.0f;
        if (!any) continue;
        const uint8_t *p = payload_row + sb * (FP4_QK_K / 2);
        __m256i h[4][2]; /* column c: hadd of chunks 0, 1 and of chunks 2, 3 */
        for (int k2 = 0; k2 < 2; k2++) {
            __m256i m[4][2];
#pragma GCC unroll 2
            for (int kk = 0; kk < 2; kk++) {
                const int k = 2 * k2 + kk;
                const __m256i b = LOAD256(p + 32 * k);
                const __m256i lo = _mm256_and_si256(b, low4),
                              hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), low4);
                const __m256i wlo = _mm256_shuffle_epi8(lut, lo), whi = _mm256_shuffle_epi8(lut, hi);
                const __m256i corr =
                    _mm256_add_epi16(_mm256_maddubs_epi16(k80, wlo), _mm256_maddubs_epi16(k80, whi));
#pragma GCC unroll 4
                for (int c = 0; c < NC; c++) {
                    const uint8_t *u = actu + c * act_stride + sb * FP4_QK_K + 64 * k;
                    const __m256i pr = _mm256_add_epi16(_mm256_maddubs_epi16(LOAD256(u), wlo),
                                                        _mm256_maddubs_epi16(LOAD256(u + 32), whi));
                    m[c][kk] = _mm256_madd_epi16(_mm256_sub_epi16(pr, corr), ones);
                }
            }
#pragma GCC unroll 4
            for (int c = 0; c < NC; c++)
                h[c][k2] = _mm256_hadd_epi32(m[c][0], m[c][1]);
        }
        __m256i q9lo, q9hi;
        q9_split_avx2(scales_row + sb * 16, &q9lo, &q9hi);
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) {
            const float dc = d[c * d_stride + sb];
            if (dc != 0.0f)
                acc[c] = fp4_a16_epilogue(sb_total_avx2(h[c][0], h[c][1], q9lo, q9hi), dc, scale2, acc[c]);
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++)
        out[c] = fp4_round_f16_avx2(acc[c]);
}

FP4_TARGET_AVX2 void fp4_dot_a16_cols_avx2(const uint8_t *payload_row, const uint8_t *scales_row,
                                           float scale2, const uint8_t *actu, int64_t act_stride,
                                           const float *d, int64_t d_stride, int64_t n_in, int nc,
                                           float *out) {
    FP4_NC_DISPATCH(nc, a16_cols_nc_avx2, payload_row, scales_row, scale2, actu, act_stride, d, d_stride,
                    n_in, out);
}
#else
void fp4_dot_a16_cols_avx2(const uint8_t *payload_row, const uint8_t *scales_row, float scale2,
                           const uint8_t *actu, int64_t act_stride, const float *d, int64_t d_stride,
                           int64_t n_in, int nc, float *out) {
    (void)payload_row, (void)scales_row, (void)scale2, (void)actu, (void)act_stride, (void)d, (void)d_stride,
        (void)n_in;
    for (int c = 0; c < nc; c++)
        out[c] = NAN;
}
float fp4_dot_a16_avx2(const uint8_t *payload_row, const uint8_t *scales_row, float scale2, const int8_t *act,
                       const uint8_t *aabs, const float *d, int64_t n_in) {
    (void)payload_row, (void)scales_row, (void)scale2, (void)act, (void)aabs, (void)d, (void)n_in;
    return NAN;
}
#endif
