/* dense_x86.c — the dense-row dots of project.c (BF16 LM heads and other dense weights) with AVX2
 * and AVX-512, chosen at run time (cpu_path.c), each giving the portable bits.
 *
 * Both portable orders are lane-structured, so they map onto vector lanes as they are:
 *   pinned (exact mode, fp4p_dot in src/format/pinned.h): 32 lanes, lane l adds the rounded
 *   products a[i]*b[i], i ≡ l mod 32, in increasing i from +0.0f, then the fixed butterfly.
 *   Here the 32 lanes are two zmm (AVX-512) or four ymm (AVX2) of partials: one vmulps and one
 *   vaddps per 16 / 8 lanes per step of 32 values, the row operand first in the multiply and the
 *   partial first in the add (as fp4p_add(p[l], fp4p_mul(a[i], b[i]))). The last n mod 32 values
 *   and the butterfly are the portable scalar code itself (fp4p_butterfly), on the stored lanes.
 *   native (fp4_cpu_dot_f32, native.c): 8 lanes, p[l] += a[i]*b[i], i ≡ l mod 8, then
 *   ((p0+p4)+(p2+p6))+((p1+p5)+(p3+p7)): one ymm of partials, the tail and the final sum scalar.
 * No FMA: the file is built with -ffp-contract=off like all of src/, and the intrinsics are
 * separate multiplies and adds. The _bf16 variants read the weight row as bf16 (little-endian
 * halves) and widen each value exactly (bits << 16) as it is loaded, the same f32 values that
 * project.c's dense_row makes, so the dot of a BF16 row needs no f32 copy of it. A NaN result is
 * the NaN 0xFFC00000 (fp4_canonical_nan), as project.c's portable dense dots return it: which NaN
 * an add of two NaNs keeps depends on operand order, which the compiler picks. */
#include "cpu/cpu_impl.h"
#include "cpu/native.h"
#include "format/pinned.h"
#include <math.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define FP4_TARGET_AVX2 __attribute__((target("avx2")))
#define FP4_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

/* the portable tail and butterfly of fp4p_dot, from lanes p after i0 values */
static inline __attribute__((always_inline)) float pinned_tail(float *p, const float *a, const uint8_t *w16,
                                                                const float *b, int64_t i0, int64_t n) {
    for (int l = 0; i0 + l < n; l++) {
        float av;
        if (w16) {
            uint16_t h;
            memcpy(&h, w16 + 2 * (i0 + l), 2);
            av = fp4_bf16_to_f32(h);
        } else {
            av = a[i0 + l];
        }
        p[l] = fp4p_add(p[l], fp4p_mul(av, b[i0 + l]));
    }
    return fp4_canonical_nan(fp4p_butterfly(p));
}

/* the portable tail and final sum of fp4_cpu_dot_f32 */
static inline __attribute__((always_inline)) float dot8_tail(float *p, const float *a, const uint8_t *w16,
                                                              const float *b, int64_t i, int64_t n) {
    for (; i < n; i++) {
        float av;
        if (w16) {
            uint16_t h;
            memcpy(&h, w16 + 2 * i, 2);
            av = fp4_bf16_to_f32(h);
        } else {
            av = a[i];
        }
        p[i & 7] += av * b[i];
    }
    return fp4_canonical_nan(((p[0] + p[4]) + (p[2] + p[6])) + ((p[1] + p[5]) + (p[3] + p[7])));
}

FP4_TARGET_AVX2 static inline __m256 bf16x8_avx2(const uint8_t *w) {
    const __m128i h = _mm_loadu_si128((const __m128i *)(const void *)w);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
FP4_TARGET_AVX512 static inline __m512 bf16x16_avx512(const uint8_t *w) {
    const __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)w);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

FP4_TARGET_AVX2 static inline __attribute__((always_inline)) float
pinned_avx2(const float *a, const uint8_t *w16, const float *b, int64_t n) {
    __m256 p0 = _mm256_setzero_ps(), p1 = p0, p2 = p0, p3 = p0;
    int64_t i0 = 0;
    for (; i0 + FP4P_LANES <= n; i0 += FP4P_LANES) {
        __m256 a0, a1, a2, a3;
        if (w16) {
            a0 = bf16x8_avx2(w16 + 2 * i0), a1 = bf16x8_avx2(w16 + 2 * i0 + 16);
            a2 = bf16x8_avx2(w16 + 2 * i0 + 32), a3 = bf16x8_avx2(w16 + 2 * i0 + 48);
        } else {
            a0 = _mm256_loadu_ps(a + i0), a1 = _mm256_loadu_ps(a + i0 + 8);
            a2 = _mm256_loadu_ps(a + i0 + 16), a3 = _mm256_loadu_ps(a + i0 + 24);
        }
        p0 = _mm256_add_ps(p0, _mm256_mul_ps(a0, _mm256_loadu_ps(b + i0)));
        p1 = _mm256_add_ps(p1, _mm256_mul_ps(a1, _mm256_loadu_ps(b + i0 + 8)));
        p2 = _mm256_add_ps(p2, _mm256_mul_ps(a2, _mm256_loadu_ps(b + i0 + 16)));
        p3 = _mm256_add_ps(p3, _mm256_mul_ps(a3, _mm256_loadu_ps(b + i0 + 24)));
    }
    float p[FP4P_LANES];
    _mm256_storeu_ps(p, p0), _mm256_storeu_ps(p + 8, p1), _mm256_storeu_ps(p + 16, p2);
    _mm256_storeu_ps(p + 24, p3);
    return pinned_tail(p, a, w16, b, i0, n);
}

FP4_TARGET_AVX512 static inline __attribute__((always_inline)) float
pinned_avx512(const float *a, const uint8_t *w16, const float *b, int64_t n) {
    __m512 p0 = _mm512_setzero_ps(), p1 = p0;
    int64_t i0 = 0;
    for (; i0 + FP4P_LANES <= n; i0 += FP4P_LANES) {
        __m512 a0, a1;
        if (w16) {
            a0 = bf16x16_avx512(w16 + 2 * i0), a1 = bf16x16_avx512(w16 + 2 * i0 + 32);
        } else {
            a0 = _mm512_loadu_ps(a + i0), a1 = _mm512_loadu_ps(a + i0 + 16);
        }
        p0 = _mm512_add_ps(p0, _mm512_mul_ps(a0, _mm512_loadu_ps(b + i0)));
        p1 = _mm512_add_ps(p1, _mm512_mul_ps(a1, _mm512_loadu_ps(b + i0 + 16)));
    }
    float p[FP4P_LANES];
    _mm512_storeu_ps(p, p0), _mm512_storeu_ps(p + 16, p1);
    return pinned_tail(p, a, w16, b, i0, n);
}

FP4_TARGET_AVX2 static inline __attribute__((always_inline)) float
dot8_avx2(const float *a, const uint8_t *w16, const float *b, int64_t n) {
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 av = w16 ? bf16x8_avx2(w16 + 2 * i) : _mm256_loadu_ps(a + i);
        acc = _mm256_add_ps(acc, _mm256_mul_ps(av, _mm256_loadu_ps(b + i)));
    }
    float p[8];
    _mm256_storeu_ps(p, acc);
    return dot8_tail(p, a, w16, b, i, n);
}

FP4_TARGET_AVX2 float fp4_pinned_dot_f32_avx2(const float *a, const float *b, int64_t n) {
    return pinned_avx2(a, NULL, b, n);
}
FP4_TARGET_AVX2 float fp4_pinned_dot_bf16_avx2(const uint8_t *w, const float *b, int64_t n) {
    return pinned_avx2(NULL, w, b, n);
}
FP4_TARGET_AVX512 float fp4_pinned_dot_f32_avx512(const float *a, const float *b, int64_t n) {
    return pinned_avx512(a, NULL, b, n);
}
FP4_TARGET_AVX512 float fp4_pinned_dot_bf16_avx512(const uint8_t *w, const float *b, int64_t n) {
    return pinned_avx512(NULL, w, b, n);
}
FP4_TARGET_AVX2 float fp4_dot8_f32_avx2(const float *a, const float *b, int64_t n) {
    return dot8_avx2(a, NULL, b, n);
}
FP4_TARGET_AVX2 float fp4_dot8_bf16_avx2(const uint8_t *w, const float *b, int64_t n) {
    return dot8_avx2(NULL, w, b, n);
}
#else
float fp4_pinned_dot_f32_avx2(const float *a, const float *b, int64_t n) {
    return fp4_canonical_nan(fp4p_dot(a, b, n));
}
float fp4_pinned_dot_bf16_avx2(const uint8_t *w, const float *b, int64_t n) {
    (void)w, (void)b, (void)n;
    return NAN;
}
float fp4_pinned_dot_f32_avx512(const float *a, const float *b, int64_t n) {
    return fp4_canonical_nan(fp4p_dot(a, b, n));
}
float fp4_pinned_dot_bf16_avx512(const uint8_t *w, const float *b, int64_t n) {
    (void)w, (void)b, (void)n;
    return NAN;
}
float fp4_dot8_f32_avx2(const float *a, const float *b, int64_t n) {
    return fp4_canonical_nan(fp4_cpu_dot_f32(a, b, n));
}
float fp4_dot8_bf16_avx2(const uint8_t *w, const float *b, int64_t n) {
    (void)w, (void)b, (void)n;
    return NAN;
}
#endif
