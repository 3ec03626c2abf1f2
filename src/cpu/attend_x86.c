/* attend_x86.c — the pinned attention of one (column, head), fp4p_attend (src/format/pinned.h),
 * with AVX2 and AVX-512, chosen at run time (cpu_path.c; step_cpu.c), the same bits.
 *
 * fp4p_attend's float operations, each in its own order, element by element:
 *   scores: s[j] = fp4p_dot(q, k_j) * scale — the pinned 32-lane dot over head_dim: here the lanes
 *     are two zmm / four ymm of partials (one multiply, q first, then one add, partial first, per
 *     32 dims), the tail dims and the butterfly the portable scalar code on the stored lanes;
 *   max, exp and the denominator: the portable scalar code itself;
 *   o[d] = butterfly over lanes l = j mod 32 of Σ s[j] * v_j[d], then / den: the portable loop
 *     runs d outside and j inside; here j runs outside and 16 / 8 dims d at a time inside, with
 *     the 32 lanes' partials of every d kept in P[l][d] — the same adds into the same partials
 *     in the same order of j; then the butterfly over l and the division, d-wise in vectors.
 * K and V are f16: widened with vcvtph2ps, which gives fp4p_f16_to_f32's value for every f16 but
 * a NaN; NaN lanes are rebuilt as fp4p_f16_to_f32 builds them (sign | 0x7F800000 | m << 13), so the
 * widened values are the same bits. head_dim not a multiple of 16 (AVX-512) / 8 (AVX2) takes the
 * portable fp4p_attend. No FMA (-ffp-contract=off, separate multiplies and adds). Every value is
 * the portable one's bits except that a NaN may carry another NaN's payload: which of two NaNs an
 * add or multiply keeps depends on the operand order, which the compiler picks for the portable
 * scalar code (and the GPU twin's NaN is canonical). */
#include "cpu/cpu_impl.h"
#include "format/pinned.h"
#include "cpu/pinned_x86.h"
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define FP4_TARGET_AVX2 __attribute__((target("avx2,f16c")))
#define FP4_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

enum { MAX_HD = 512 };

/* The K rows are read one position at a time, row_stride halves apart, mostly from memory (the
 * weights streamed through the caches since the last step): ask for K row j + PF_AHEAD, and for
 * V row j, which the value loop reads after all the scores. Hints only: no value changes. */
enum { PF_AHEAD = 8 };
static inline __attribute__((always_inline)) void prefetch_rows(const uint16_t *k0, const uint16_t *v0,
                                                                 int64_t row_stride, int64_t j, int64_t n,
                                                                 int head_dim) {
    const int64_t jk = j + PF_AHEAD < n ? j + PF_AHEAD : n - 1;
    for (int b = 0; b < head_dim * 2; b += 64) {
        __builtin_prefetch((const char *)(k0 + jk * row_stride) + b, 0, 3);
        __builtin_prefetch((const char *)(v0 + j * row_stride) + b, 0, 3);
    }
}

/* the tail dims and the butterfly of fp4p_dot(q, kv), from lanes p after i0 dims */
static inline __attribute__((always_inline)) float dot_tail(float *p, const float *q, const float *kv,
                                                             int64_t i0, int64_t n) {
    for (int l = 0; i0 + l < n; l++)
        p[l] = fp4p_add(p[l], fp4p_mul(q[i0 + l], kv[i0 + l]));
    return fp4p_butterfly(p);
}

/* the softmax weights of fp4p_attend, s[j] = exp(score_j - max), and their pinned sum */
static inline __attribute__((always_inline)) float softmax_tail(float *s, int64_t n, float m) {
    for (int64_t j = 0; j < n; j++)
        s[j] = fp4p_exp(fp4p_sub(s[j], m));
    return fp4p_sum(s, n, 1);
}

FP4_TARGET_AVX512 void fp4_attend_avx512(const float *q, const uint16_t *k0, const uint16_t *v0,
                                         int64_t row_stride, int64_t n, int head_dim, float scale, float *s,
                                         float *o) {
    if (head_dim % 16 || head_dim > MAX_HD) {
        fp4p_attend(q, k0, v0, row_stride, n, head_dim, scale, s, o);
        return;
    }
    const int nc = head_dim / 16;
    float kv[MAX_HD], lanes[FP4P_LANES];
    float m = 0.0f;
    for (int64_t j = 0; j < n; j++) {
        const uint16_t *kr = k0 + j * row_stride;
        prefetch_rows(k0, v0, row_stride, j, n, head_dim);
        __m512 p0 = _mm512_setzero_ps(), p1 = p0;
        int d0 = 0;
        for (; d0 + FP4P_LANES <= head_dim; d0 += FP4P_LANES) {
            const __m512 ka = fp4x_f16x16(kr + d0), kb = fp4x_f16x16(kr + d0 + 16);
            p0 = _mm512_add_ps(p0, _mm512_mul_ps(_mm512_loadu_ps(q + d0), ka));
            p1 = _mm512_add_ps(p1, _mm512_mul_ps(_mm512_loadu_ps(q + d0 + 16), kb));
        }
        if (d0 < head_dim) _mm512_storeu_ps(kv + d0, fp4x_f16x16(kr + d0)); /* 16 tail dims */
        _mm512_storeu_ps(lanes, p0), _mm512_storeu_ps(lanes + 16, p1);
        s[j] = fp4p_mul(dot_tail(lanes, q, kv, d0, head_dim), scale);
        if (j == 0 || s[j] > m) m = s[j];
    }
    const float den = softmax_tail(s, n, m);
    float P[FP4P_LANES * MAX_HD] __attribute__((aligned(64)));
    memset(P, 0, sizeof(float) * FP4P_LANES * (size_t)head_dim);
    for (int64_t j = 0; j < n; j++) {
        float *pl = P + (j % FP4P_LANES) * head_dim;
        const uint16_t *vr = v0 + j * row_stride;
        const __m512 sj = _mm512_set1_ps(s[j]);
        for (int c = 0; c < nc; c++)
            _mm512_store_ps(pl + 16 * c, _mm512_add_ps(_mm512_load_ps(pl + 16 * c),
                                                       _mm512_mul_ps(sj, fp4x_f16x16(vr + 16 * c))));
    }
    for (int off = FP4P_LANES / 2; off >= 1; off >>= 1)
        for (int l = 0; l < off; l++)
            for (int c = 0; c < nc; c++) {
                float *a = P + l * head_dim + 16 * c;
                _mm512_store_ps(a, _mm512_add_ps(_mm512_load_ps(a), _mm512_load_ps(a + off * head_dim)));
            }
    const __m512 dv = _mm512_set1_ps(den);
    for (int c = 0; c < nc; c++)
        _mm512_storeu_ps(o + 16 * c, _mm512_div_ps(_mm512_load_ps(P + 16 * c), dv));
}

FP4_TARGET_AVX2 void fp4_attend_avx2(const float *q, const uint16_t *k0, const uint16_t *v0,
                                     int64_t row_stride, int64_t n, int head_dim, float scale, float *s,
                                     float *o) {
    if (head_dim % 8 || head_dim > MAX_HD) {
        fp4p_attend(q, k0, v0, row_stride, n, head_dim, scale, s, o);
        return;
    }
    const int nc = head_dim / 8;
    float kv[MAX_HD], lanes[FP4P_LANES];
    float m = 0.0f;
    for (int64_t j = 0; j < n; j++) {
        const uint16_t *kr = k0 + j * row_stride;
        prefetch_rows(k0, v0, row_stride, j, n, head_dim);
        __m256 p[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
        int d0 = 0;
        for (; d0 + FP4P_LANES <= head_dim; d0 += FP4P_LANES)
#pragma GCC unroll 4
            for (int t = 0; t < 4; t++)
                p[t] = _mm256_add_ps(
                    p[t], _mm256_mul_ps(_mm256_loadu_ps(q + d0 + 8 * t), fp4x_f16x8(kr + d0 + 8 * t)));
        for (int d = d0; d < head_dim; d += 8) /* 8..24 tail dims */
            _mm256_storeu_ps(kv + d, fp4x_f16x8(kr + d));
#pragma GCC unroll 4
        for (int t = 0; t < 4; t++)
            _mm256_storeu_ps(lanes + 8 * t, p[t]);
        s[j] = fp4p_mul(dot_tail(lanes, q, kv, d0, head_dim), scale);
        if (j == 0 || s[j] > m) m = s[j];
    }
    const float den = softmax_tail(s, n, m);
    float P[FP4P_LANES * MAX_HD] __attribute__((aligned(32)));
    memset(P, 0, sizeof(float) * FP4P_LANES * (size_t)head_dim);
    for (int64_t j = 0; j < n; j++) {
        float *pl = P + (j % FP4P_LANES) * head_dim;
        const uint16_t *vr = v0 + j * row_stride;
        const __m256 sj = _mm256_set1_ps(s[j]);
        for (int c = 0; c < nc; c++)
            _mm256_store_ps(pl + 8 * c, _mm256_add_ps(_mm256_load_ps(pl + 8 * c),
                                                      _mm256_mul_ps(sj, fp4x_f16x8(vr + 8 * c))));
    }
    for (int off = FP4P_LANES / 2; off >= 1; off >>= 1)
        for (int l = 0; l < off; l++)
            for (int c = 0; c < nc; c++) {
                float *a = P + l * head_dim + 8 * c;
                _mm256_store_ps(a, _mm256_add_ps(_mm256_load_ps(a), _mm256_load_ps(a + off * head_dim)));
            }
    const __m256 dv = _mm256_set1_ps(den);
    for (int c = 0; c < nc; c++)
        _mm256_storeu_ps(o + 8 * c, _mm256_div_ps(_mm256_load_ps(P + 8 * c), dv));
}
#else
void fp4_attend_avx512(const float *q, const uint16_t *k0, const uint16_t *v0, int64_t row_stride, int64_t n,
                       int head_dim, float scale, float *s, float *o) {
    fp4p_attend(q, k0, v0, row_stride, n, head_dim, scale, s, o);
}
void fp4_attend_avx2(const float *q, const uint16_t *k0, const uint16_t *v0, int64_t row_stride, int64_t n,
                     int head_dim, float scale, float *s, float *o) {
    fp4p_attend(q, k0, v0, row_stride, n, head_dim, scale, s, o);
}
#endif
