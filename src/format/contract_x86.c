/* contract_x86.c — the exact A16 row dot with AVX2, chosen at run time when the CPU has it
 * (cpu_path.c). Only the order-free integer part is vectorized (the group dots are exact int32 sums whatever
 * the order), so the result is the same bits as the portable path in contract.c; test_contract
 * checks both paths against an element-by-element reimplementation. */
#include "fp4_impl.h"
#include <math.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* E2M1 magnitudes in units of 2^-1, indexed by code & 7 (SPEC §1), for pshufb */
#define MAG8 0, 1, 2, 3, 4, 6, 8, 12, 0, 1, 2, 3, 4, 6, 8, 12

__attribute__((target("avx2"))) float fp4_dot_a16_avx2(const uint8_t *payload_row, const uint8_t *scales_row,
                                                         float scale2, const fp4_block_q8_K *xq, int64_t n_in,
                                                         const int32_t *q9) {
    const __m256i lut = _mm256_setr_epi8(MAG8, MAG8);
    const __m128i low4 = _mm_set1_epi8(0x0F);
    const __m256i seven = _mm256_set1_epi8(7), ones = _mm256_set1_epi16(1);
    float acc = 0.0f;
    for (int64_t sb = 0; sb < n_in / FP4_QK_K; sb++) {
        const fp4_block_q8_K *q = &xq[sb];
        if (q->d == 0.0f) continue; /* an all-zero super-block contributes nothing */
        const uint8_t *p = payload_row + sb * (FP4_QK_K / 2);
        int64_t total = 0;
        for (int g2 = 0; g2 < 8; g2++) { /* two 16-groups per step: 16 payload bytes, 32 activations */
            __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(p + g2 * 16));
            __m128i lo = _mm_and_si128(b, low4), hi = _mm_and_si128(_mm_srli_epi16(b, 4), low4);
            __m256i codes = _mm256_set_m128i(_mm_unpackhi_epi8(lo, hi), _mm_unpacklo_epi8(lo, hi)); /* element order */
            __m256i mag = _mm256_shuffle_epi8(lut, codes);            /* |e2m1_q1|, codes 8..15 reuse 0..7 */
            __m256i neg = _mm256_cmpgt_epi8(codes, seven);            /* sign bit of the code */
            __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)(q->qs + g2 * 32));
            a = _mm256_sub_epi8(_mm256_xor_si256(a, neg), neg);       /* a or -a: |a| <= 127, no overflow */
            __m256i s32 = _mm256_madd_epi16(_mm256_maddubs_epi16(mag, a), ones); /* 4 products per int32 */
            __m128i s = _mm_hadd_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
            s = _mm_hadd_epi32(s, s); /* [group 2·g2, group 2·g2+1, ...] */
            total += (int64_t)_mm_cvtsi128_si32(s) * q9[scales_row[sb * 16 + g2 * 2]];
            total += (int64_t)_mm_extract_epi32(s, 1) * q9[scales_row[sb * 16 + g2 * 2 + 1]];
        }
        acc = fp4_a16_epilogue(total, q->d, scale2, acc);
    }
    return fp4_round_f16(acc);
}

#else
float fp4_dot_a16_avx2(const uint8_t *payload_row, const uint8_t *scales_row, float scale2, const fp4_block_q8_K *xq,
                       int64_t n_in, const int32_t *q9) {
    (void)payload_row, (void)scales_row, (void)scale2, (void)xq, (void)n_in, (void)q9;
    return NAN;
}
#endif
