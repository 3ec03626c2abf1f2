/* pinned_x86.h — pinned.h's element-wise operations on AVX2 / AVX-512 lanes, the same float
 * operations per lane as the scalar functions (no FMA: -ffp-contract=off), for the CPU paths
 * (attend_heads_x86.c, pinned_x86.c). Include after <immintrin.h> where __x86_64__ && __GNUC__. */
#ifndef FP4_CPU_PINNED_X86_H
#define FP4_CPU_PINNED_X86_H
#if defined(__x86_64__) && defined(__GNUC__)
#include "format/pinned.h"
#include <immintrin.h>
#include <stdint.h>

/* fp4p_exp on sixteen lanes: the regular path's operations on every lane, then the NaN, overflow
 * and underflow lanes replaced as fp4p_exp's early returns give them (constants: pinned.h's) */
static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl"))) __m512
fp4x_exp16(__m512 x) {
    const __m512 magic = _mm512_set1_ps(12582912.0f);
    const __m512 t = _mm512_add_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269502162933349609375f)), magic);
    const __m512 kf = _mm512_sub_ps(t, magic);
    const __m512 r = _mm512_sub_ps(_mm512_sub_ps(x, _mm512_mul_ps(kf, _mm512_set1_ps(0.693145751953125f))),
                                   _mm512_mul_ps(kf, _mm512_set1_ps(1.428606765330187045e-06f)));
    __m512 p = _mm512_set1_ps(1.98412698e-4f);
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.38888889e-3f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(8.33333377e-3f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(4.16666679e-2f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.66666672e-1f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(0.5f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f));
    const __m512i k = _mm512_cvttps_epi32(kf);
    const __m512i k1 = _mm512_srai_epi32(_mm512_add_epi32(k, _mm512_srli_epi32(k, 31)), 1); /* k / 2 */
    const __m512i k2 = _mm512_sub_epi32(k, k1), b127 = _mm512_set1_epi32(127);
    const __m512 w1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k1, b127), 23));
    const __m512 w2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k2, b127), 23));
    __m512 y = _mm512_mul_ps(_mm512_mul_ps(p, w1), w2);
    y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(FP4P_EXP_HI), _CMP_GT_OQ), y,
                             _mm512_castsi512_ps(_mm512_set1_epi32(0x7F800000)));
    y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(FP4P_EXP_LO), _CMP_LT_OQ), y,
                             _mm512_setzero_ps());
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), y, x);
}

/* the same on eight AVX2 lanes */
static inline __attribute__((always_inline, target("avx2"))) __m256 fp4x_exp8(__m256 x) {
    const __m256 magic = _mm256_set1_ps(12582912.0f);
    const __m256 t = _mm256_add_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269502162933349609375f)), magic);
    const __m256 kf = _mm256_sub_ps(t, magic);
    const __m256 r = _mm256_sub_ps(_mm256_sub_ps(x, _mm256_mul_ps(kf, _mm256_set1_ps(0.693145751953125f))),
                                   _mm256_mul_ps(kf, _mm256_set1_ps(1.428606765330187045e-06f)));
    __m256 p = _mm256_set1_ps(1.98412698e-4f);
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.38888889e-3f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(8.33333377e-3f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(4.16666679e-2f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.66666672e-1f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(0.5f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f));
    const __m256i k = _mm256_cvttps_epi32(kf);
    const __m256i k1 = _mm256_srai_epi32(_mm256_add_epi32(k, _mm256_srli_epi32(k, 31)), 1); /* k / 2 */
    const __m256i k2 = _mm256_sub_epi32(k, k1), b127 = _mm256_set1_epi32(127);
    const __m256 w1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, b127), 23));
    const __m256 w2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, b127), 23));
    __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, w1), w2);
    y = _mm256_blendv_ps(y, _mm256_castsi256_ps(_mm256_set1_epi32(0x7F800000)),
                         _mm256_cmp_ps(x, _mm256_set1_ps(FP4P_EXP_HI), _CMP_GT_OQ));
    y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, _mm256_set1_ps(FP4P_EXP_LO), _CMP_LT_OQ));
    return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}
/* 8 / 16 f16 -> f32 with fp4p_f16_to_f32's bits: vcvtph2ps gives them for every f16 but a NaN, whose
 * lanes are rebuilt as fp4p_f16_to_f32 builds them (sign | 0x7F800000 | m << 13, not quieted) */
static inline __attribute__((always_inline, target("avx2,f16c"))) __m256 fp4x_f16x8(const uint16_t *h) {
    const __m128i x = _mm_loadu_si128((const __m128i *)(const void *)h);
    __m256 v = _mm256_cvtph_ps(x);
    const __m128i nan16 = _mm_cmpgt_epi16(_mm_and_si128(x, _mm_set1_epi16(0x7FFF)), _mm_set1_epi16(0x7C00));
    if (_mm_movemask_epi8(nan16)) {
        const __m256i w = _mm256_cvtepu16_epi32(x);
        const __m256i bits = _mm256_or_si256(
            _mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x8000)), 16),
                            _mm256_set1_epi32(0x7F800000)),
            _mm256_slli_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x3FF)), 13));
        v = _mm256_blendv_ps(v, _mm256_castsi256_ps(bits), _mm256_castsi256_ps(_mm256_cvtepi16_epi32(nan16)));
    }
    return v;
}
static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl"))) __m512
fp4x_f16x16(const uint16_t *h) {
    const __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)h);
    __m512 v = _mm512_cvtph_ps(x);
    const __mmask16 nan =
        _mm256_cmpgt_epi16_mask(_mm256_and_si256(x, _mm256_set1_epi16(0x7FFF)), _mm256_set1_epi16(0x7C00));
    if (nan) {
        const __m512i w = _mm512_cvtepu16_epi32(x);
        const __m512i bits = _mm512_or_si512(
            _mm512_or_si512(_mm512_slli_epi32(_mm512_and_si512(w, _mm512_set1_epi32(0x8000)), 16),
                            _mm512_set1_epi32(0x7F800000)),
            _mm512_slli_epi32(_mm512_and_si512(w, _mm512_set1_epi32(0x3FF)), 13));
        v = _mm512_mask_blend_ps(nan, v, _mm512_castsi512_ps(bits));
    }
    return v;
}
#endif
#endif
