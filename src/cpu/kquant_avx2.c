/* kquant_avx2.c — the Q4_K · Q8_K and Q6_K · Q8_K dots with AVX2, chosen at run time (cpu_path.c)
 * on a CPU without the AVX-512 path (Q6_K's is described at its code below). The same bits as
 * kquant_dot.c's q4K_dot (ggml's generic f32 order; see kquant_avx512.c for why only integer order
 * changes): the eight int32 lane sums are exact, then the same f32 multiplies and adds, in the
 * same order, and the same canonical NaN.
 *
 * Lanes with 128-bit shuffles: chunk c of a block (32 nibble bytes, byte t holding positions
 * 64c + t and 64c + 32 + t, both in lane t mod 8) is shuffled within each 16-byte half so that
 * bytes t and t + 8 sit side by side (vpshufb): vpmaddubsw then gives, per half, the 8 lane pair
 * sums as int16 (|sum| <= 2·15·128). The low- and high-nibble sums are interleaved (vpunpck*wd)
 * so that vpmaddwd with the pair (scale 2c, scale 2c+1) gives one int32 per lane: lanes 0..3
 * from the unpacklo, 4..7 from the unpackhi, in each 128-bit half; the halves are added at the
 * end of the block. The activations are shuffled the same way once per column
 * (fp4_q4K_act_avx2: per chunk, the 32 low-nibble partners then the 32 high ones; then the pair
 * sums of bsums, which save a cross-lane widening in Σ bsums·mins), or per block
 * in the single-dot entry point. */
#include "cpu/cpu_impl.h"
#include <math.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define FP4_TARGET_AVX2 __attribute__((target("avx2,f16c")))

/* within each 16 bytes: t, t + 8 side by side */
#define PAIRS 0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15
#define LOAD256(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))

FP4_TARGET_AVX2 void fp4_q4K_act_avx2(const fp4_block_q8_K *x, int64_t nb, int8_t *dst) {
    const __m256i pairs = _mm256_setr_epi8(PAIRS, PAIRS);
    for (int64_t b = 0; b < nb; b++) {
        int8_t *d = dst + b * FP4_Q4K_ACT_BYTES;
        for (int r = 0; r < 8; r++)
            _mm256_storeu_si256((__m256i *)(void *)(d + 32 * r),
                                _mm256_shuffle_epi8(LOAD256(x[b].qs + 32 * r), pairs));
        for (int k = 0; k < 8; k++) {
            const int16_t pair = (int16_t)(x[b].bsums[2 * k] + x[b].bsums[2 * k + 1]);
            memcpy(d + 256 + 2 * k, &pair, 2);
        }
    }
}

/* the 8 scales (bytes 0..7) and 8 mins (bytes 8..15) of a block's 12 packed bytes, as in
 * kquant_avx512.c (reads 16 bytes: the scales and the first 4 bytes of qs) */
FP4_TARGET_AVX2 static inline __m128i scales_mins(const uint8_t *s) {
    const __m128i v = _mm_loadu_si128((const __m128i *)(const void *)s);
    const __m128i a = _mm_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0)); /* w0 w2 w1 w2 */
    const __m128i b = _mm_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 0, 0)); /* w0 w0 w1 w1 */
    const __m128i low = _mm_and_si128(_mm_srlv_epi32(a, _mm_setr_epi32(0, 0, 0, 4)),
                                      _mm_setr_epi32(0x3F3F3F3F, 0x0F0F0F0F, 0x3F3F3F3F, 0x0F0F0F0F));
    const __m128i top = _mm_and_si128(_mm_srli_epi32(b, 2), _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
    return _mm_or_si128(low, top);
}

FP4_TARGET_AVX2 static inline __attribute__((always_inline)) float
q4K_dot_avx2(const fp4_block_q4_K *w, const fp4_block_q8_K *x, const int8_t *act, int64_t nb, const int pre) {
    const __m256i pairs = _mm256_setr_epi8(PAIRS, PAIRS);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 sums = _mm256_setzero_ps();
    float total = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        const fp4_block_q4_K *b = w + i;
        const fp4_block_q8_K *a = x + i;
        const __m128i sm = scales_mins(b->scales);
        /* int32 c = (scale 2c, scale 2c+1) as two int16, for vpmaddwd; int16 j of mn16 = min j/2 */
        int32_t sp[4] __attribute__((aligned(16)));
        _mm_store_si128((__m128i *)(void *)sp, _mm_cvtepu8_epi16(sm));
        __asm__ volatile("" ::: "memory"); /* broadcast from memory, not by shuffles */
        __m256i acc_lo = _mm256_setzero_si256(), acc_hi = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const __m256i q = _mm256_shuffle_epi8(LOAD256(b->qs + 32 * c), pairs);
            __m256i alo, ahi;
            if (pre) {
                alo = LOAD256(act + i * FP4_Q4K_ACT_BYTES + 64 * c),
                ahi = LOAD256(act + i * FP4_Q4K_ACT_BYTES + 64 * c + 32);
            } else {
                alo = _mm256_shuffle_epi8(LOAD256(a->qs + 64 * c), pairs);
                ahi = _mm256_shuffle_epi8(LOAD256(a->qs + 64 * c + 32), pairs);
            }
            const __m256i plo = _mm256_maddubs_epi16(_mm256_and_si256(q, m4), alo);
            const __m256i phi = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), ahi);
            const __m256i s = _mm256_set1_epi32(sp[c]);
            acc_lo = _mm256_add_epi32(acc_lo, _mm256_madd_epi16(_mm256_unpacklo_epi16(plo, phi), s));
            acc_hi = _mm256_add_epi32(acc_hi, _mm256_madd_epi16(_mm256_unpackhi_epi16(plo, phi), s));
        }
        /* lanes 0..3 in each half of acc_lo, 4..7 in each half of acc_hi */
        const __m256i lane = _mm256_add_epi32(_mm256_permute2x128_si256(acc_lo, acc_hi, 0x20),
                                              _mm256_permute2x128_si256(acc_lo, acc_hi, 0x31));
        const __m128i mn = _mm_unpackhi_epi64(sm, sm);
        __m128i m4s; /* Σ bsums·mins, 4 partial int32 */
        if (pre) {   /* 8 mins against the 8 pair sums of bsums */
            m4s = _mm_madd_epi16(
                _mm_cvtepu8_epi16(mn),
                _mm_loadu_si128((const __m128i *)(const void *)(act + i * FP4_Q4K_ACT_BYTES + 256)));
        } else { /* 16 bsums against mins j/2 */
            const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mn, mn));
            const __m256i m8 = _mm256_madd_epi16(LOAD256(a->bsums), mins16);
            m4s = _mm_add_epi32(_mm256_castsi256_si128(m8), _mm256_extracti128_si256(m8, 1));
        }
        m4s = _mm_add_epi32(m4s, _mm_unpackhi_epi64(m4s, m4s));
        m4s = _mm_add_epi32(m4s, _mm_srli_epi64(m4s, 32));
        const float msum = _mm_cvtss_f32(_mm_cvtepi32_ps(m4s)); /* int32 0, converted as (float)msum */
        const __m128 dd =
            _mm_cvtph_ps(_mm_cvtsi32_si128((int)(b->d | ((uint32_t)b->dmin << 16)))); /* exact */
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

FP4_TARGET_AVX2 float fp4_q4K_dot_avx2(const fp4_block_q4_K *w, const fp4_block_q8_K *x, const int8_t *act,
                                       int64_t nb) {
    return act ? q4K_dot_avx2(w, x, act, nb, 1) : q4K_dot_avx2(w, x, NULL, nb, 0);
}
/* ---- Q6_K · Q8_K (kquant_dot.c's q6K_dot: the same lanes, the same f32 order) ----
 * Eight vectors of 32 weights q (0..63), vector j holding positions 32j..32j+31: scale groups
 * a = 2j (bytes 0..15) and b = 2j+1 (16..31). LANE6 (vpermd by dwords, then vpshufb) puts the 4
 * bytes of lane l side by side: a_l, a_l+8, b_l, b_l+8, lanes 0..3 in the low 128 bits and 4..7 in
 * the high ones; it moves bytes only, so it is applied to ql and qh before the nibbles and bits are
 * put together. vpmaddubsw (q u8 × activation s8, |pair| <= 2·63·128) minus the same with q = 32
 * (precomputed per column) gives Σ (q - 32)·a of each (group, lane) as int16, exact; vpmaddwd with
 * the pair (scale a, scale b) then gives the lane's int32 of the 32 positions, lanes 0..7 in order.
 * The activations are rearranged the same way once per column (fp4_q6K_act_avx2: the 8 vectors,
 * then the 8 bias vectors 32·(a + a') as int16), or per block in the single-dot entry point. */
#define LANE6_SHUF 0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15
FP4_TARGET_AVX2 static inline __m256i lane6(__m256i v, __m256i didx, __m256i shuf) {
    return _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(v, didx), shuf);
}

FP4_TARGET_AVX2 void fp4_q6K_act_avx2(const fp4_block_q8_K *x, int64_t nb, int8_t *dst) {
    const __m256i didx = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    const __m256i shuf = _mm256_setr_epi8(LANE6_SHUF, LANE6_SHUF), m32 = _mm256_set1_epi8(32);
    for (int64_t b = 0; b < nb; b++) {
        int8_t *d = dst + b * FP4_Q6K_ACT_BYTES;
        for (int j = 0; j < 8; j++) {
            const __m256i a = lane6(LOAD256(x[b].qs + 32 * j), didx, shuf);
            _mm256_storeu_si256((__m256i *)(void *)(d + 32 * j), a);
            _mm256_storeu_si256((__m256i *)(void *)(d + 256 + 32 * j), _mm256_maddubs_epi16(m32, a));
        }
    }
}

FP4_TARGET_AVX2 static inline __attribute__((always_inline)) float
q6K_dot_avx2(const fp4_block_q6_K *w, const fp4_block_q8_K *x, const int8_t *act, int64_t nb, const int pre) {
    const __m256i didx = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    const __m256i shuf = _mm256_setr_epi8(LANE6_SHUF, LANE6_SHUF);
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x30), m32 = _mm256_set1_epi8(32);
    __m256 sums = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const fp4_block_q6_K *b = w + i;
        const fp4_block_q8_K *a = x + i;
        /* int32 j = (scale 2j, scale 2j+1) as two int16, broadcast from memory */
        int32_t sp[8] __attribute__((aligned(32)));
        _mm256_store_si256((__m256i *)(void *)sp,
                           _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)b->scales)));
        __asm__ volatile("" ::: "memory");
        __m256i acc = _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m256i l0 = lane6(LOAD256(b->ql + 64 * h), didx, shuf);
            const __m256i l1 = lane6(LOAD256(b->ql + 64 * h + 32), didx, shuf);
            const __m256i qh = lane6(LOAD256(b->qh + 32 * h), didx, shuf);
            __m256i q[4];
            q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m2));
            q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m2));
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(qh, m2));
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                   _mm256_and_si256(_mm256_srli_epi16(qh, 2), m2));
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                const int j = 4 * h + k;
                __m256i av, bv;
                if (pre) {
                    av = LOAD256(act + i * FP4_Q6K_ACT_BYTES + 32 * j);
                    bv = LOAD256(act + i * FP4_Q6K_ACT_BYTES + 256 + 32 * j);
                } else {
                    av = lane6(LOAD256(a->qs + 32 * j), didx, shuf);
                    bv = _mm256_maddubs_epi16(m32, av);
                }
                const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(q[k], av), bv);
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi32(sp[j])));
            }
        }
        const float d = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128((int)b->d))) * a->d; /* exact */
        sums = _mm256_add_ps(sums, _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(acc)));
    }
    float s[8], total = 0.0f;
    _mm256_storeu_ps(s, sums);
    for (int l = 0; l < 8; l++)
        total += s[l];
    return fp4_canonical_nan(total);
}

FP4_TARGET_AVX2 float fp4_q6K_dot_avx2(const fp4_block_q6_K *w, const fp4_block_q8_K *x, const int8_t *act,
                                       int64_t nb) {
    return act ? q6K_dot_avx2(w, x, act, nb, 1) : q6K_dot_avx2(w, x, NULL, nb, 0);
}
#else
void fp4_q6K_act_avx2(const fp4_block_q8_K *x, int64_t nb, int8_t *dst) {
    (void)x, (void)nb, (void)dst;
}
float fp4_q6K_dot_avx2(const fp4_block_q6_K *w, const fp4_block_q8_K *x, const int8_t *act, int64_t nb) {
    (void)w, (void)x, (void)act, (void)nb;
    return NAN;
}
void fp4_q4K_act_avx2(const fp4_block_q8_K *x, int64_t nb, int8_t *dst) {
    (void)x, (void)nb, (void)dst;
}
float fp4_q4K_dot_avx2(const fp4_block_q4_K *w, const fp4_block_q8_K *x, const int8_t *act, int64_t nb) {
    (void)w, (void)x, (void)act, (void)nb;
    return NAN;
}
#endif
