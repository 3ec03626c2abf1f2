/* kquant_avx512.c — the Q4_K · Q8_K and Q6_K · Q8_K dots with AVX-512 (F, BW, VL, VNNI, VBMI),
 * chosen at run time (cpu_path.c); Q6_K's is described at its code below. The same bits as
 * kquant_dot.c's q4K_dot, which follows ggml's portable ggml_vec_dot_q4_K_q8_K_generic: per block,
 * eight int32 lane sums (lane l: the products at positions ≡ l mod 8, each weighted by its
 * 32-value sub-block scale), then sums[l] += (fp16(d)·y.d) · lane[l] (a multiply, then an add: no
 * FMA), total -= (fp16(dmin)·y.d) · Σ bsums·mins, and at the end total += sums[0..7] in order. The
 * lanes and the mins sum are exact integers, so only their order of summation is free; the f32
 * operations are the same, in the same order (the eight lanes in one vector, element-wise), and a
 * NaN result is the same canonical NaN (fp4_canonical_nan).
 *
 * Lanes with vectors: a block's 128 nibble bytes are 4 chunks of 32 (chunk c, byte t: the low
 * nibble is position 64c + t, the high one 64c + 32 + t, both in lane t mod 8). vpermb regroups
 * each 64-byte half so that the 4 bytes of one (chunk, lane) are adjacent: out[32cl + 4l + k] =
 * in[32cl + l + 8k]. vpmaddubsw (nibble u8 × activation s8, |pair| <= 2·15·128) then adds 2
 * products of one lane, and vpdpwssd adds 2 of those times the sub-block scale into the int32 of
 * (chunk, lane). The activations are rearranged the same way once per column
 * (fp4_q4K_act_avx512), or per block in the single-dot entry point. */
#include "cpu/cpu_impl.h"
#include <math.h>
#include <stddef.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define FP4_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")))

/* the 8 sub-block scales (bytes 0..7) and mins (bytes 8..15), 6 bits each, of a block's 12 packed
 * bytes (layout: fp4_q4K_scale_min). With w0..w2 its 32-bit words: scales 0..3 = w0 & 0x3F (per
 * byte), 4..7 = (w2 & 0x0F) | (w0 >> 6) << 4; mins 0..3 = w1 & 0x3F, 4..7 = (w2 >> 4) | (w1 >> 6) << 4.
 * Reads 16 bytes from s: the block's scales and the first 4 bytes of its qs. */
FP4_TARGET_AVX512 static inline __m128i q4K_scales_mins(const uint8_t *s) {
    const __m128i v = _mm_loadu_si128((const __m128i *)(const void *)s);
    const __m128i a = _mm_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0)); /* w0 w2 w1 w2 */
    const __m128i b = _mm_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 0, 0)); /* w0 w0 w1 w1 */
    const __m128i low = _mm_and_si128(_mm_srlv_epi32(a, _mm_setr_epi32(0, 0, 0, 4)),
                                      _mm_setr_epi32(0x3F3F3F3F, 0x0F0F0F0F, 0x3F3F3F3F, 0x0F0F0F0F));
    const __m128i top = _mm_and_si128(_mm_srli_epi32(b, 2), _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
    return _mm_or_si128(low, top);
}

/* vpermb / vpermt2b index tables, in memory order */
#define GRP(base, l) base + l, base + l + 8, base + l + 16, base + l + 24
#define GRP8(base)                                                                                           \
    GRP(base, 0), GRP(base, 1), GRP(base, 2), GRP(base, 3), GRP(base, 4), GRP(base, 5), GRP(base, 6),        \
        GRP(base, 7)
#define R4(j) j, j, j, j
#define R32(j) R4(j), R4(j), R4(j), R4(j), R4(j), R4(j), R4(j), R4(j)
/* weights: out byte 32cl + 4l + k <- in byte 32cl + l + 8k */
static const uint8_t wperm_tab[64] = {GRP8(0), GRP8(32)};
/* activations of half h from X = qs[128h..+63] (chunk 2h) and Y = qs[128h+64..+127] (chunk 2h+1),
 * index bit 6 choosing Y: the low-nibble partners (positions 64c + t), then the high ones */
static const uint8_t aperm_tab[2][64] = {{GRP8(0), GRP8(64)}, {GRP8(32), GRP8(96)}};
/* the sub-block scale per int16 (bytes 0..7 of the scales/mins vector; odd bytes masked to 0):
 * half h, low nibbles: chunks 2h, 2h+1 -> scales 4h, 4h+2; high nibbles: 4h+1, 4h+3 */
static const uint8_t sidx_tab[4][64] = {
    {R32(0), R32(2)}, {R32(1), R32(3)}, {R32(4), R32(6)}, {R32(5), R32(7)}};
/* the min per bsums int16 j: mins[j/2] (bytes 8..15) */
static const uint8_t midx_tab[32] = {R4(8), R4(9), R4(10), R4(11), R4(12), R4(13), R4(14), R4(15)};

#define LOAD512(p) _mm512_loadu_si512((const void *)(p))
#define LOAD128(p) _mm_loadu_si128((const __m128i *)(const void *)(p))
/* the rows kernels prefetch the weights this many rows ahead (into L1); the address is formed as an
 * integer, since it may lie past the end of the weights (a prefetch never faults) */
#ifndef KQ_PF_ROWS
#define KQ_PF_ROWS 8
#endif
#define PF_AHEAD(p, rb, off) ((const char *)((uintptr_t)(p) + KQ_PF_ROWS * (rb) + (off)))

/* rearranged activations of one block, 64 bytes each: half 0's low-nibble partners, its high ones,
 * then half 1's */
#define Q4K_ACT_BLOCK(qs, a0, a1, a2, a3)                                                                    \
    do {                                                                                                     \
        const __m512i x0_ = LOAD512((qs)), y0_ = LOAD512((qs) + 64);                                         \
        const __m512i x1_ = LOAD512((qs) + 128), y1_ = LOAD512((qs) + 192);                                  \
        a0 = _mm512_permutex2var_epi8(x0_, LOAD512(aperm_tab[0]), y0_);                                      \
        a1 = _mm512_permutex2var_epi8(x0_, LOAD512(aperm_tab[1]), y0_);                                      \
        a2 = _mm512_permutex2var_epi8(x1_, LOAD512(aperm_tab[0]), y1_);                                      \
        a3 = _mm512_permutex2var_epi8(x1_, LOAD512(aperm_tab[1]), y1_);                                      \
    } while (0)

FP4_TARGET_AVX512 void fp4_q4K_act_avx512(const fp4_block_q8_K *x, int64_t nb, int8_t *dst) {
    for (int64_t b = 0; b < nb; b++) {
        __m512i a0, a1, a2, a3;
        Q4K_ACT_BLOCK(x[b].qs, a0, a1, a2, a3);
        int8_t *d = dst + b * FP4_Q4K_ACT_BYTES;
        _mm512_storeu_si512((void *)d, a0);
        _mm512_storeu_si512((void *)(d + 64), a1);
        _mm512_storeu_si512((void *)(d + 128), a2);
        _mm512_storeu_si512((void *)(d + 192), a3);
        for (int k = 0; k < 8; k++) {
            const int16_t pair = (int16_t)(x[b].bsums[2 * k] + x[b].bsums[2 * k + 1]);
            memcpy(d + 256 + 2 * k, &pair, 2);
        }
    }
}

/* pre: act holds the rearranged activations (else they are rearranged here, block by block) */
FP4_TARGET_AVX512 static inline __attribute__((always_inline)) float
q4K_dot_avx512(const fp4_block_q4_K *w, const fp4_block_q8_K *x, const int8_t *act, int64_t nb,
               const int pre) {
    const __m512i wperm = LOAD512(wperm_tab);
    const __m512i sidx0 = LOAD512(sidx_tab[0]), sidx1 = LOAD512(sidx_tab[1]);
    const __m512i sidx2 = LOAD512(sidx_tab[2]), sidx3 = LOAD512(sidx_tab[3]);
    const __m256i midx = _mm256_loadu_si256((const __m256i *)(const void *)midx_tab);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __mmask64 even = 0x5555555555555555ull;
    __m256 sums = _mm256_setzero_ps();
    float total = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        const fp4_block_q4_K *b = w + i;
        const fp4_block_q8_K *a = x + i;
        __m512i av0, av1, av2, av3;
        if (pre) {
            const int8_t *ap = act + i * FP4_Q4K_ACT_BYTES;
            av0 = LOAD512(ap), av1 = LOAD512(ap + 64), av2 = LOAD512(ap + 128), av3 = LOAD512(ap + 192);
        } else {
            Q4K_ACT_BLOCK(a->qs, av0, av1, av2, av3);
        }
        const __m128i sm = q4K_scales_mins(b->scales);
        const __m512i smz = _mm512_castsi128_si512(sm);
        const __m512i q0 = _mm512_permutexvar_epi8(wperm, LOAD512(b->qs));
        const __m512i q1 = _mm512_permutexvar_epi8(wperm, LOAD512(b->qs + 64));
        /* int32 (chunk cl, lane l) of each half: Σ over the lane's 4 positions in that chunk's two
         * sub-blocks, times their scales; two independent chains (the halves), added at the end */
        __m512i acc0 = _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_and_si512(q0, m4), av0),
                                         _mm512_maskz_permutexvar_epi8(even, sidx0, smz));
        __m512i acc1 = _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_and_si512(q1, m4), av2),
                                         _mm512_maskz_permutexvar_epi8(even, sidx2, smz));
        acc0 = _mm512_dpwssd_epi32(acc0,
                                   _mm512_maddubs_epi16(_mm512_and_si512(_mm512_srli_epi16(q0, 4), m4), av1),
                                   _mm512_maskz_permutexvar_epi8(even, sidx1, smz));
        acc1 = _mm512_dpwssd_epi32(acc1,
                                   _mm512_maddubs_epi16(_mm512_and_si512(_mm512_srli_epi16(q1, 4), m4), av3),
                                   _mm512_maskz_permutexvar_epi8(even, sidx3, smz));
        const __m512i acc = _mm512_add_epi32(acc0, acc1);
        const __m256i lane = _mm256_add_epi32(_mm512_castsi512_si256(acc), _mm512_extracti64x4_epi64(acc, 1));
        __m128i m4s; /* Σ bsums·mins, 4 partial int32 */
        if (pre) {   /* 8 mins against the 8 pair sums of bsums */
            m4s = _mm_madd_epi16(
                _mm_cvtepu8_epi16(_mm_unpackhi_epi64(sm, sm)),
                _mm_loadu_si128((const __m128i *)(const void *)(act + i * FP4_Q4K_ACT_BYTES + 256)));
        } else { /* 16 bsums against mins j/2 */
            const __m256i mins16 =
                _mm256_maskz_permutexvar_epi8((__mmask32)even, midx, _mm512_castsi512_si256(smz));
            const __m256i m8 =
                _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(const void *)a->bsums), mins16);
            m4s = _mm_add_epi32(_mm256_castsi256_si128(m8), _mm256_extracti128_si256(m8, 1));
        }
        m4s = _mm_add_epi32(m4s, _mm_unpackhi_epi64(m4s, m4s));
        m4s = _mm_add_epi32(m4s, _mm_srli_epi64(m4s, 32));
        const float msum = _mm_cvtss_f32(_mm_cvtepi32_ps(m4s)); /* int32 0, converted as (float)msum */
        /* f16 -> f32 (exact) with AVX-512F's own vcvtph2ps */
        const __m128 dd = _mm512_castps512_ps128(_mm512_cvtph_ps(
            _mm256_castsi128_si256(_mm_cvtsi32_si128((int)(b->d | ((uint32_t)b->dmin << 16))))));
        const float d = _mm_cvtss_f32(dd) * a->d;
        sums = _mm256_add_ps(sums, _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(lane)));
        const float dmin = _mm_cvtss_f32(_mm_movehdup_ps(dd)) * a->d;
        total -= dmin * msum;
    }
    float s[8];
    _mm256_storeu_ps(s, sums);
    for (int l = 0; l < 8; l++)
        total += s[l];
    return fp4_canonical_nan(total);
}

FP4_TARGET_AVX512 float fp4_q4K_dot_avx512(const fp4_block_q4_K *w, const fp4_block_q8_K *x,
                                           const int8_t *act, int64_t nb) {
    return act ? q4K_dot_avx512(w, x, act, nb, 1) : q4K_dot_avx512(w, x, NULL, nb, 0);
}

/* ---- Q4_K, up to four rows at a time (the matvec's kernel) ----
 * Each row's integer lanes are the generic code's (exact, so their order is free), and each row's
 * f32 operations are the generic code's, in the same order: the rows' d, dmin and totals sit in the
 * elements of vectors, rows 0-1 and 2-3 share a 512-bit vector of lane sums (8 per row), so every
 * element-wise multiply, add and subtract is the scalar one of its row; at the end a transpose puts
 * lane l of the four rows in one vector and total += lane 0, ..., lane 7 in order.
 *
 * Layout (not q4K_dot_avx512's): each 64 bytes of qs (chunks 2j, 2j+1) are permuted so that int32
 * d = 8k + l (half k, lane l) holds, in its bytes 0-1, the two bytes of chunk 2j at t = l + 16k and
 * t + 8 and, in bytes 2-3, the same two of chunk 2j+1. Their low nibbles are positions of sub-blocks
 * 4j and 4j+2, their high ones of 4j+1 and 4j+3, all in lane l; vpmaddubsw against the activations
 * rearranged alike (fp4_q4K_act4_avx512) gives int16 pairs (sub-block 4j, sub-block 4j+2) of one
 * lane, so vpmaddwd / vpdpwssd take the scales as ONE broadcast int32 (sc_4j | sc_4j+2 << 16) for the
 * whole vector, a memory operand, where q4K_dot_avx512 spends a vpermb on each scale vector. Lane l
 * is then the sum of int32 l and l + 8. Shared by the rows: the activation loads, the constants,
 * and the work on their first 16 bytes (d, dmin and the packed scales, one 128-bit lane per row):
 * the 6-bit unpacking, the f16 conversion, the Σ bsums·mins. */
#define W4(l, k) 16 * k + l, 16 * k + l + 8, 32 + 16 * k + l, 32 + 16 * k + l + 8
#define W4K(k) W4(0, k), W4(1, k), W4(2, k), W4(3, k), W4(4, k), W4(5, k), W4(6, k), W4(7, k)
static const uint8_t wperm4_tab[64] = {W4K(0), W4K(1)};
/* the activations of the low nibbles of chunks 2j, 2j+1 (X = qs[128j..+63], Y = qs[128j+64..+127],
 * index bit 6 choosing Y), then of the high ones */
#define A4(l, k, o) o + 16 * k + l, o + 16 * k + l + 8, 64 + o + 16 * k + l, 64 + o + 16 * k + l + 8
#define A4K(k, o)                                                                                            \
    A4(0, k, o), A4(1, k, o), A4(2, k, o), A4(3, k, o), A4(4, k, o), A4(5, k, o), A4(6, k, o), A4(7, k, o)
static const uint8_t aperm4_tab[2][64] = {{A4K(0, 0), A4K(1, 0)}, {A4K(0, 32), A4K(1, 32)}};
/* per row (128-bit lane) the int32 scale pairs sc0|sc2<<16, sc1|sc3<<16, sc4|sc6<<16, sc5|sc7<<16 */
#define Z 0x80
#define SP4 0, Z, 2, Z, 1, Z, 3, Z, 4, Z, 6, Z, 5, Z, 7, Z
static const uint8_t spair_tab[64] = {SP4, SP4, SP4, SP4};
#undef Z
/* the 8 mins of each row as int16 (bytes 8..15 of its lane; odd bytes masked) */
#define M8W(b) b, 0, b + 1, 0, b + 2, 0, b + 3, 0, b + 4, 0, b + 5, 0, b + 6, 0, b + 7, 0
static const uint8_t midx4_tab[64] = {M8W(8), M8W(24), M8W(40), M8W(56)};
/* lane l of rows 0..3 from [row 0 | row 1] and [row 2 | row 3] (permutex2var): lanes 0-3, then 4-7 */
#define TR4(l) l, l + 8, l + 16, l + 24
static const int32_t tr4_tab[2][16] = {{TR4(0), TR4(1), TR4(2), TR4(3)}, {TR4(4), TR4(5), TR4(6), TR4(7)}};

FP4_TARGET_AVX512 void fp4_q4K_act4_avx512(const fp4_block_q8_K *x, int64_t nb, int8_t *dst) {
    const __m512i lo = LOAD512(aperm4_tab[0]), hi = LOAD512(aperm4_tab[1]);
    for (int64_t b = 0; b < nb; b++) {
        int8_t *d = dst + b * FP4_Q4K_ACT_BYTES;
        for (int j = 0; j < 2; j++) {
            const __m512i xv = LOAD512(x[b].qs + 128 * j), yv = LOAD512(x[b].qs + 128 * j + 64);
            _mm512_storeu_si512((void *)(d + 128 * j), _mm512_permutex2var_epi8(xv, lo, yv));
            _mm512_storeu_si512((void *)(d + 128 * j + 64), _mm512_permutex2var_epi8(xv, hi, yv));
        }
        for (int k = 0; k < 8; k++) {
            const int16_t pair = (int16_t)(x[b].bsums[2 * k] + x[b].bsums[2 * k + 1]);
            memcpy(d + 256 + 2 * k, &pair, 2);
        }
    }
}

/* y[r] = total[r] + lane 0 + ... + lane 7 of row r, in that order, r < n (<= 4); the lanes of rows 0,
 * 1 in [row 0 | row 1], of rows 2, 3 in [row 2 | row 3] */
FP4_TARGET_AVX512 static inline void rows4_finish(__m512 sums01, __m512 sums23, __m128 total, int n,
                                                  float *y) {
    /* t0 = lanes 0..3 of rows 0..3 (one 128-bit lane each), t1 = lanes 4..7 */
    const __m512 t0 = _mm512_permutex2var_ps(sums01, LOAD512(tr4_tab[0]), sums23);
    const __m512 t1 = _mm512_permutex2var_ps(sums01, LOAD512(tr4_tab[1]), sums23);
    total = _mm_add_ps(total, _mm512_castps512_ps128(t0));
    total = _mm_add_ps(total, _mm512_extractf32x4_ps(t0, 1));
    total = _mm_add_ps(total, _mm512_extractf32x4_ps(t0, 2));
    total = _mm_add_ps(total, _mm512_extractf32x4_ps(t0, 3));
    total = _mm_add_ps(total, _mm512_castps512_ps128(t1));
    total = _mm_add_ps(total, _mm512_extractf32x4_ps(t1, 1));
    total = _mm_add_ps(total, _mm512_extractf32x4_ps(t1, 2));
    total = _mm_add_ps(total, _mm512_extractf32x4_ps(t1, 3));
    float t[4];
    _mm_storeu_ps(t, total);
    for (int r = 0; r < n; r++)
        y[r] = fp4_canonical_nan(t[r]);
}

/* the byte offsets of rows 0..3 (n < 4: the last row stands in for the missing ones) */
static inline void rows4_offsets(size_t row_bytes, int n, size_t off[4]) {
    for (int r = 0; r < 4; r++)
        off[r] = (size_t)(r < n ? r : n - 1) * row_bytes;
}

/* The four-row kernel for NC columns (1..4) at once: the rows' heads (d, dmin, scales, mins) and
 * their permuted nibbles decoded once per block for the NC columns; per column only its activation
 * loads and the arithmetic that involves them, each column's f32 operations exactly those of the
 * one-column call (column c: x + c·nb blocks, act + c·nb·FP4_Q4K_ACT_BYTES, y + c·y_stride). */
FP4_TARGET_AVX512 static inline __attribute__((always_inline)) void
q4K_rows4_core(const uint8_t *w, size_t row_bytes, int n, const fp4_block_q8_K *x, const int8_t *act,
               int64_t nb, float *y, int64_t y_stride, const int NC) {
    size_t off[4];
    rows4_offsets(row_bytes, n, off);
    const __m512i wperm = LOAD512(wperm4_tab), midx4 = LOAD512(midx4_tab), spair = LOAD512(spair_tab);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __mmask64 even = 0x5555555555555555ull;
    const __m512i didx = _mm512_setr_epi32(0, 4, 8, 12, 0, 4, 8, 12, 0, 4, 8, 12, 0, 4, 8, 12);
    const __m256i deint = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    const __m512i pair01 = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const __m512i pair23 = _mm512_setr_epi32(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    __m512 sums01[4], sums23[4];
    __m128 total[4];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++)
        sums01[c] = _mm512_setzero_ps(), sums23[c] = _mm512_setzero_ps(), total[c] = _mm_setzero_ps();
    int32_t sc[16] __attribute__((aligned(64)));
    const int64_t astride = nb * FP4_Q4K_ACT_BYTES;
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *b0 = w + i * (int64_t)sizeof(fp4_block_q4_K);
        /* bytes 0..15 of the four rows' blocks (d, dmin, scales[0..11]), row r in lane r */
        /* two independent halves: a short dependency chain */
        const __m256i h01 =
            _mm256_inserti128_si256(_mm256_castsi128_si256(LOAD128(b0 + off[0])), LOAD128(b0 + off[1]), 1);
        const __m256i h23 =
            _mm256_inserti128_si256(_mm256_castsi128_si256(LOAD128(b0 + off[2])), LOAD128(b0 + off[3]), 1);
        const __m512i head = _mm512_inserti64x4(_mm512_castsi256_si512(h01), h23, 1);
        /* q4K_scales_mins of each lane: words w0 w1 w2 = dwords 1 2 3 of head */
        const __m512i sa = _mm512_shuffle_epi32(head, _MM_SHUFFLE(3, 2, 3, 1)); /* w0 w2 w1 w2 */
        const __m512i sb = _mm512_shuffle_epi32(head, _MM_SHUFFLE(2, 2, 1, 1)); /* w0 w0 w1 w1 */
        const __m512i low =
            _mm512_and_si512(_mm512_srlv_epi32(sa, _mm512_set4_epi32(4, 0, 0, 0)),
                             _mm512_set4_epi32(0x0F0F0F0F, 0x3F3F3F3F, 0x0F0F0F0F, 0x3F3F3F3F));
        const __m512i top =
            _mm512_and_si512(_mm512_srli_epi32(sb, 2), _mm512_set4_epi32(0x30303030, 0, 0x30303030, 0));
        const __m512i sm = _mm512_or_si512(low, top);
        _mm512_store_si512((void *)sc, _mm512_shuffle_epi8(sm, spair));
        /* keep sc in memory: broadcast loads (no shuffle port), not extractions from the register */
        __asm__("" : "+m"(sc));
        const __m512i mins = _mm512_maskz_permutexvar_epi8(even, midx4, sm);
        /* [d0 dmin0 d1 dmin1 ...] -> f32 (exact), before the column's y.d */
        const __m256 dh = _mm512_castps512_ps256(
            _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi32(didx, head))));
        __m512i acc[4][4];
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            const uint8_t *qs = b0 + off[r] + offsetof(fp4_block_q4_K, qs);
            _mm_prefetch(PF_AHEAD(qs, row_bytes, 0), _MM_HINT_T0);
            _mm_prefetch(PF_AHEAD(qs, row_bytes, 64), _MM_HINT_T0);
            _mm_prefetch(PF_AHEAD(qs, row_bytes, 127), _MM_HINT_T0);
            const __m512i q0 = _mm512_permutexvar_epi8(wperm, LOAD512(qs));
            const __m512i q1 = _mm512_permutexvar_epi8(wperm, LOAD512(qs + 64));
            const __m512i q0l = _mm512_and_si512(q0, m4), q1l = _mm512_and_si512(q1, m4);
            const __m512i q0h = _mm512_and_si512(_mm512_srli_epi16(q0, 4), m4);
            const __m512i q1h = _mm512_and_si512(_mm512_srli_epi16(q1, 4), m4);
#pragma GCC unroll 4
            for (int c = 0; c < NC; c++) {
                const int8_t *ap = act + c * astride + i * FP4_Q4K_ACT_BYTES;
                __m512i acc0 =
                    _mm512_madd_epi16(_mm512_maddubs_epi16(q0l, LOAD512(ap)), _mm512_set1_epi32(sc[4 * r]));
                __m512i acc1 = _mm512_madd_epi16(_mm512_maddubs_epi16(q1l, LOAD512(ap + 128)),
                                                 _mm512_set1_epi32(sc[4 * r + 2]));
                acc0 = _mm512_dpwssd_epi32(acc0, _mm512_maddubs_epi16(q0h, LOAD512(ap + 64)),
                                           _mm512_set1_epi32(sc[4 * r + 1]));
                acc1 = _mm512_dpwssd_epi32(acc1, _mm512_maddubs_epi16(q1h, LOAD512(ap + 192)),
                                           _mm512_set1_epi32(sc[4 * r + 3]));
                acc[c][r] = _mm512_add_epi32(acc0, acc1);
            }
        }
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) {
            const int8_t *ap = act + c * astride + i * FP4_Q4K_ACT_BYTES;
            /* Σ bsums·mins per row: 4 partial int32 in its lane, then summed (exact) to element r */
            __m512i ms = _mm512_madd_epi16(
                mins, _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)(ap + 256))));
            ms = _mm512_add_epi32(ms, _mm512_shuffle_epi32(ms, _MM_SHUFFLE(1, 0, 3, 2)));
            ms = _mm512_add_epi32(ms, _mm512_shuffle_epi32(ms, _MM_SHUFFLE(2, 3, 0, 1)));
            const __m128i msum = _mm512_castsi512_si128(_mm512_permutexvar_epi32(didx, ms));
            /* the 8 int32 lanes of rows 0, 1 in one vector, of rows 2, 3 in another */
            const __m512i lane01 = _mm512_add_epi32(_mm512_shuffle_i64x2(acc[c][0], acc[c][1], 0x44),
                                                    _mm512_shuffle_i64x2(acc[c][0], acc[c][1], 0xEE));
            const __m512i lane23 = _mm512_add_epi32(_mm512_shuffle_i64x2(acc[c][2], acc[c][3], 0x44),
                                                    _mm512_shuffle_i64x2(acc[c][2], acc[c][3], 0xEE));
            /* times y.d -> [d0..d3 | dmin0..dmin3] */
            const __m256 dv =
                _mm256_permutevar8x32_ps(_mm256_mul_ps(dh, _mm256_set1_ps(x[c * nb + i].d)), deint);
            const __m512 dz = _mm512_castps256_ps512(dv);
            sums01[c] = _mm512_add_ps(
                sums01[c], _mm512_mul_ps(_mm512_permutexvar_ps(pair01, dz), _mm512_cvtepi32_ps(lane01)));
            sums23[c] = _mm512_add_ps(
                sums23[c], _mm512_mul_ps(_mm512_permutexvar_ps(pair23, dz), _mm512_cvtepi32_ps(lane23)));
            total[c] = _mm_sub_ps(total[c], _mm_mul_ps(_mm256_extractf128_ps(dv, 1), _mm_cvtepi32_ps(msum)));
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++)
        rows4_finish(sums01[c], sums23[c], total[c], n, y + c * y_stride);
}

FP4_TARGET_AVX512 void fp4_q4K_rows4_avx512(const uint8_t *w, size_t row_bytes, int n,
                                            const fp4_block_q8_K *x, const int8_t *act, int64_t nb,
                                            float *y) {
    q4K_rows4_core(w, row_bytes, n, x, act, nb, y, 0, 1);
}

FP4_TARGET_AVX512 void fp4_q4K_rows4_cols_avx512(const uint8_t *w, size_t row_bytes, int n,
                                                 const fp4_block_q8_K *x, const int8_t *act, int64_t nb,
                                                 int nc, float *y, int64_t y_stride) {
    FP4_NC_DISPATCH(nc, q4K_rows4_core, w, row_bytes, n, x, act, nb, y, y_stride);
}

/* ---- Q6_K · Q8_K (kquant_dot.c's q6K_dot: the same lanes, the same f32 order) ----
 * The 256 weights q (0..63) are rebuilt in position order, 64 per vector (vector v: positions
 * 64v..64v+63, scale groups 4v..4v+3): low or high nibbles of ql, or-ed with the matching two bits
 * of qh. lane6_512 (vpermd by dwords, then vpshufb; the byte order of wperm_tab, by two cheaper
 * shuffles) puts the 4 bytes of (32-byte half gp, lane l) side by side: positions
 * 32gp + l + 8k, k = 0..3, i.e. the lane's two positions of scale group 4v + 2gp, then those of
 * group 4v + 2gp + 1. vpmaddubsw (q u8 × activation s8, |pair| <= 2·63·128) gives the lane's pair
 * sum per group; minus the same with q = 32 (precomputed per column) it is Σ (q - 32)·a, exact
 * (|·| <= 2·32·128); vpmaddwd / vpdpwssd times the two groups' scales (int32 word 2v + gp of the
 * scales widened to int16) add into int32 (gp, l). The activations are permuted once per column
 * (fp4_q6K_act_avx512: the 4 permuted vectors, then the 4 bias vectors 32·(a + a') as int16). */
#define LANE6_SHUF 0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15
static const int32_t lane6_didx[16] = {0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15};
FP4_TARGET_AVX512 static inline __m512i lane6_512(__m512i v, __m512i didx, __m512i shuf) {
    return _mm512_shuffle_epi8(_mm512_permutexvar_epi32(didx, v), shuf);
}

FP4_TARGET_AVX512 void fp4_q6K_act_avx512(const fp4_block_q8_K *x, int64_t nb, int8_t *dst) {
    const __m512i didx = LOAD512(lane6_didx), m32 = _mm512_set1_epi8(32);
    const __m512i shuf = _mm512_broadcast_i32x4(_mm_setr_epi8(LANE6_SHUF));
    for (int64_t b = 0; b < nb; b++) {
        int8_t *d = dst + b * FP4_Q6K_ACT_BYTES;
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) {
            const __m512i a = lane6_512(LOAD512(x[b].qs + 64 * v), didx, shuf);
            _mm512_storeu_si512((void *)(d + 64 * v), a);
            _mm512_storeu_si512((void *)(d + 256 + 64 * v), _mm512_maddubs_epi16(m32, a));
        }
    }
}

FP4_TARGET_AVX512 static inline __attribute__((always_inline)) float
q6K_dot_avx512(const fp4_block_q6_K *w, const fp4_block_q8_K *x, const int8_t *act, int64_t nb,
               const int pre) {
    const __m512i didx = LOAD512(lane6_didx);
    const __m512i shuf = _mm512_broadcast_i32x4(_mm_setr_epi8(LANE6_SHUF));
    const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(0x30), m32 = _mm512_set1_epi8(32);
    /* qh bits 0-1 to 4-5 in the low 256 bits, bits 2-3 in the high ones; bits 4-5 / 6-7 likewise */
    const __m512i shl = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
    const __m512i shr = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    /* vector v's scales: int32 word 2v in the low 256 bits, 2v + 1 in the high ones */
    const __m512i sidx = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi32(1), 1);
    __m256 sums = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const fp4_block_q6_K *b = w + i;
        const fp4_block_q8_K *a = x + i;
        const __m512i s16 = _mm512_castsi256_si512(
            _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)b->scales)));
        __m512i acc0 = _mm512_setzero_si512(), acc1 = _mm512_setzero_si512();
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m512i ql = LOAD512(b->ql + 64 * h);
            const __m512i qh =
                _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(const void *)(b->qh + 32 * h)));
            const __m512i lo =
                _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_and_si512(_mm512_sllv_epi16(qh, shl), m2));
            const __m512i hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                               _mm512_and_si512(_mm512_srlv_epi16(qh, shr), m2));
#pragma GCC unroll 2
            for (int k = 0; k < 2; k++) {
                const int v = 2 * h + k;
                __m512i av, bv;
                if (pre) {
                    av = LOAD512(act + i * FP4_Q6K_ACT_BYTES + 64 * v);
                    bv = LOAD512(act + i * FP4_Q6K_ACT_BYTES + 256 + 64 * v);
                } else {
                    av = lane6_512(LOAD512(a->qs + 64 * v), didx, shuf);
                    bv = _mm512_maddubs_epi16(m32, av);
                }
                const __m512i pv =
                    _mm512_sub_epi16(_mm512_maddubs_epi16(lane6_512(k ? hi : lo, didx, shuf), av), bv);
                const __m512i sv =
                    _mm512_permutexvar_epi32(_mm512_add_epi32(sidx, _mm512_set1_epi32(2 * v)), s16);
                if (k)
                    acc1 = _mm512_dpwssd_epi32(acc1, pv, sv);
                else
                    acc0 = _mm512_dpwssd_epi32(acc0, pv, sv);
            }
        }
        const __m512i acc = _mm512_add_epi32(acc0, acc1);
        const __m256i lane = _mm256_add_epi32(_mm512_castsi512_si256(acc), _mm512_extracti64x4_epi64(acc, 1));
        const float dw = _mm_cvtss_f32(_mm512_castps512_ps128(
            _mm512_cvtph_ps(_mm256_castsi128_si256(_mm_cvtsi32_si128((int)b->d))))); /* exact */
        const float d = dw * a->d;
        sums = _mm256_add_ps(sums, _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(lane)));
    }
    float s[8], total = 0.0f;
    _mm256_storeu_ps(s, sums);
    for (int l = 0; l < 8; l++)
        total += s[l];
    return fp4_canonical_nan(total);
}

FP4_TARGET_AVX512 float fp4_q6K_dot_avx512(const fp4_block_q6_K *w, const fp4_block_q8_K *x,
                                           const int8_t *act, int64_t nb) {
    return act ? q6K_dot_avx512(w, x, act, nb, 1) : q6K_dot_avx512(w, x, NULL, nb, 0);
}

/* ---- Q6_K, four rows at a time (the matvec's kernel when act is given) ----
 * Each row's integer lanes are q6K_dot_avx512's and its f32 operations are too, in the same order
 * (the layout of fp4_q4K_rows4_avx512: d in the elements of a vector, rows 0-1 and 2-3 sharing a
 * 512-bit vector of lane sums, the transpose and total += lane 0..7 at the end). */
/* The four-row kernel for NC columns (1..4) at once: the rows' 6-bit weights rebuilt, permuted and
 * their scales widened once per block for the NC columns; per column only its activation loads and
 * what involves them, each column's f32 operations those of the one-column call (column c: x + c·nb
 * blocks, act + c·nb·FP4_Q6K_ACT_BYTES, y + c·y_stride). */
FP4_TARGET_AVX512 static inline __attribute__((always_inline)) void
q6K_rows4_core(const uint8_t *w, size_t row_bytes, int n, const fp4_block_q8_K *x, const int8_t *act,
               int64_t nb, float *y, int64_t y_stride, const int NC) {
    size_t off[4];
    rows4_offsets(row_bytes, n, off);
    const __m512i didx = LOAD512(lane6_didx);
    const __m512i shuf = _mm512_broadcast_i32x4(_mm_setr_epi8(LANE6_SHUF));
    const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(0x30);
    const __m512i shl = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
    const __m512i shr = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    const __m512i sidx = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi32(1), 1);
    const __m512i pair01 = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const __m512i pair23 = _mm512_setr_epi32(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const int64_t astride = nb * FP4_Q6K_ACT_BYTES;
    __m512 sums01[4], sums23[4];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++)
        sums01[c] = _mm512_setzero_ps(), sums23[c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *b0 = w + i * (int64_t)sizeof(fp4_block_q6_K);
        __m512i acc[4][4];
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            const fp4_block_q6_K *b = (const fp4_block_q6_K *)(const void *)(b0 + off[r]);
            _mm_prefetch(PF_AHEAD(b, row_bytes, 0), _MM_HINT_T0);
            _mm_prefetch(PF_AHEAD(b, row_bytes, 64), _MM_HINT_T0);
            _mm_prefetch(PF_AHEAD(b, row_bytes, 128), _MM_HINT_T0);
            _mm_prefetch(PF_AHEAD(b, row_bytes, 209), _MM_HINT_T0);
            const __m512i s16 = _mm512_castsi256_si512(
                _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)b->scales)));
            __m512i acc0[4], acc1[4];
#pragma GCC unroll 4
            for (int c = 0; c < NC; c++)
                acc0[c] = _mm512_setzero_si512(), acc1[c] = _mm512_setzero_si512();
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                const __m512i ql = LOAD512(b->ql + 64 * h);
                const __m512i qh = _mm512_broadcast_i64x4(
                    _mm256_loadu_si256((const __m256i *)(const void *)(b->qh + 32 * h)));
                const __m512i lo = _mm512_or_si512(_mm512_and_si512(ql, m4),
                                                   _mm512_and_si512(_mm512_sllv_epi16(qh, shl), m2));
                const __m512i hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                                   _mm512_and_si512(_mm512_srlv_epi16(qh, shr), m2));
#pragma GCC unroll 2
                for (int k = 0; k < 2; k++) {
                    const int v = 2 * h + k;
                    const __m512i q6 = lane6_512(k ? hi : lo, didx, shuf);
                    const __m512i sv =
                        _mm512_permutexvar_epi32(_mm512_add_epi32(sidx, _mm512_set1_epi32(2 * v)), s16);
#pragma GCC unroll 4
                    for (int c = 0; c < NC; c++) {
                        const int8_t *ap = act + c * astride + i * FP4_Q6K_ACT_BYTES;
                        const __m512i av = LOAD512(ap + 64 * v), bv = LOAD512(ap + 256 + 64 * v);
                        const __m512i pv = _mm512_sub_epi16(_mm512_maddubs_epi16(q6, av), bv);
                        if (k)
                            acc1[c] = _mm512_dpwssd_epi32(acc1[c], pv, sv);
                        else
                            acc0[c] = _mm512_dpwssd_epi32(acc0[c], pv, sv);
                    }
                }
            }
#pragma GCC unroll 4
            for (int c = 0; c < NC; c++)
                acc[c][r] = _mm512_add_epi32(acc0[c], acc1[c]);
        }
        /* the four d (f16 -> f32, exact), element r; times each column's y.d below */
        const size_t od = offsetof(fp4_block_q6_K, d);
        uint16_t d0, d1, d2, d3;
        memcpy(&d0, b0 + off[0] + od, 2), memcpy(&d1, b0 + off[1] + od, 2);
        memcpy(&d2, b0 + off[2] + od, 2), memcpy(&d3, b0 + off[3] + od, 2);
        const __m128i dh = _mm_setr_epi16((short)d0, (short)d1, (short)d2, (short)d3, 0, 0, 0, 0);
        const __m256 df = _mm512_castps512_ps256(_mm512_cvtph_ps(_mm256_castsi128_si256(dh)));
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) {
            const __m512i lane01 = _mm512_add_epi32(_mm512_shuffle_i64x2(acc[c][0], acc[c][1], 0x44),
                                                    _mm512_shuffle_i64x2(acc[c][0], acc[c][1], 0xEE));
            const __m512i lane23 = _mm512_add_epi32(_mm512_shuffle_i64x2(acc[c][2], acc[c][3], 0x44),
                                                    _mm512_shuffle_i64x2(acc[c][2], acc[c][3], 0xEE));
            const __m512 dz = _mm512_castps256_ps512(_mm256_mul_ps(df, _mm256_set1_ps(x[c * nb + i].d)));
            sums01[c] = _mm512_add_ps(
                sums01[c], _mm512_mul_ps(_mm512_permutexvar_ps(pair01, dz), _mm512_cvtepi32_ps(lane01)));
            sums23[c] = _mm512_add_ps(
                sums23[c], _mm512_mul_ps(_mm512_permutexvar_ps(pair23, dz), _mm512_cvtepi32_ps(lane23)));
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++)
        rows4_finish(sums01[c], sums23[c], _mm_setzero_ps(), n, y + c * y_stride);
}

FP4_TARGET_AVX512 void fp4_q6K_rows4_avx512(const uint8_t *w, size_t row_bytes, int n,
                                            const fp4_block_q8_K *x, const int8_t *act, int64_t nb,
                                            float *y) {
    q6K_rows4_core(w, row_bytes, n, x, act, nb, y, 0, 1);
}

FP4_TARGET_AVX512 void fp4_q6K_rows4_cols_avx512(const uint8_t *w, size_t row_bytes, int n,
                                                 const fp4_block_q8_K *x, const int8_t *act, int64_t nb,
                                                 int nc, float *y, int64_t y_stride) {
    FP4_NC_DISPATCH(nc, q6K_rows4_core, w, row_bytes, n, x, act, nb, y, y_stride);
}
#else
void fp4_q6K_act_avx512(const fp4_block_q8_K *x, int64_t nb, int8_t *dst) {
    (void)x, (void)nb, (void)dst;
}
float fp4_q6K_dot_avx512(const fp4_block_q6_K *w, const fp4_block_q8_K *x, const int8_t *act, int64_t nb) {
    (void)w, (void)x, (void)act, (void)nb;
    return NAN;
}
float fp4_q4K_dot_avx512(const fp4_block_q4_K *w, const fp4_block_q8_K *x, const int8_t *act, int64_t nb) {
    (void)w, (void)x, (void)act, (void)nb;
    return NAN;
}
void fp4_q4K_act4_avx512(const fp4_block_q8_K *x, int64_t nb, int8_t *dst) {
    (void)x, (void)nb, (void)dst;
}
void fp4_q6K_rows4_cols_avx512(const uint8_t *w, size_t row_bytes, int n, const fp4_block_q8_K *x,
                               const int8_t *act, int64_t nb, int nc, float *y, int64_t y_stride) {
    (void)w, (void)row_bytes, (void)x, (void)act, (void)nb;
    for (int c = 0; c < nc; c++)
        for (int r = 0; r < n; r++)
            y[c * y_stride + r] = NAN;
}
void fp4_q4K_rows4_cols_avx512(const uint8_t *w, size_t row_bytes, int n, const fp4_block_q8_K *x,
                               const int8_t *act, int64_t nb, int nc, float *y, int64_t y_stride) {
    (void)w, (void)row_bytes, (void)x, (void)act, (void)nb;
    for (int c = 0; c < nc; c++)
        for (int r = 0; r < n; r++)
            y[c * y_stride + r] = NAN;
}
void fp4_q4K_rows4_avx512(const uint8_t *w, size_t row_bytes, int n, const fp4_block_q8_K *x,
                          const int8_t *act, int64_t nb, float *y) {
    (void)w, (void)row_bytes, (void)x, (void)act, (void)nb;
    for (int r = 0; r < n; r++)
        y[r] = NAN;
}
void fp4_q6K_rows4_avx512(const uint8_t *w, size_t row_bytes, int n, const fp4_block_q8_K *x,
                          const int8_t *act, int64_t nb, float *y) {
    (void)w, (void)row_bytes, (void)x, (void)act, (void)nb;
    for (int r = 0; r < n; r++)
        y[r] = NAN;
}
#endif
