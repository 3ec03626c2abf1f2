/* attend_heads_avx2.c — fp4_attend_heads_avx512's walk (attend_heads_x86.c: a column's heads
 * position by position, their K/V row segments contiguous) with AVX2, the same bits as
 * fp4p_attend head by head: the 32 score lanes are four ymm of partials (one multiply, q first, one
 * add per 32 dims; tail dims 8, 16 or 24 into lanes 0..), the butterfly in registers (off 16: ymm t
 * plus ymm t + 2; off 8: the two sums; then the halves), the exp eight lanes at a time
 * (fp4x_exp8) with the last n mod 8 scalar, the pinned sum's lanes in four ymm and its tail and
 * butterfly scalar, the value partials P[l][d] with positions outside. head_dim not a multiple of
 * 8, or above FP4_ATTEND_MAX_HD, and more than FP4_ATTEND_MAX_HEADS heads take fp4_attend_avx2
 * head by head. */
#include "cpu/cpu_impl.h"
#include "format/pinned.h"
#include "cpu/pinned_x86.h"
#include "cpu/attend_heads.h"
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#define FP4_TARGET_AVX2 __attribute__((target("avx2,f16c")))
#define FP4_INLINE static inline __attribute__((always_inline))

FP4_INLINE FP4_TARGET_AVX2 float butterfly32_avx2(const __m256 p[4]) {
    const __m256 b = _mm256_add_ps(_mm256_add_ps(p[0], p[2]), _mm256_add_ps(p[1], p[3])); /* 16, 8 */
    const __m128 d = _mm_add_ps(_mm256_castps256_ps128(b), _mm256_extractf128_ps(b, 1));  /* 4 */
    const __m128 e = _mm_add_ps(d, _mm_movehl_ps(d, d));                                  /* 2 */
    return _mm_cvtss_f32(_mm_add_ss(e, _mm_shuffle_ps(e, e, 1)));                         /* 1 */
}

/* s[j] = fp4p_exp(s[j] - m) for j < n, and fp4p_sum(s, n, 1) of the results */
FP4_INLINE FP4_TARGET_AVX2 float softmax_weights_avx2(float *s, int64_t n, float m) {
    const __m256 vm = _mm256_set1_ps(m);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(s + j, fp4x_exp8(_mm256_sub_ps(_mm256_loadu_ps(s + j), vm)));
    for (; j < n; j++)
        s[j] = fp4p_exp(fp4p_sub(s[j], m));
    __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int t = 0; t < 4; t++)
            a[t] = _mm256_add_ps(a[t], _mm256_loadu_ps(s + i + 8 * t));
    if (i == n) return butterfly32_avx2(a);
    float p[FP4P_LANES];
    for (int t = 0; t < 4; t++)
        _mm256_storeu_ps(p + 8 * t, a[t]);
    for (int l = 0; i + l < n; l++)
        p[l] = fp4p_add(p[l], s[i + l]);
    return fp4p_butterfly(p);
}

enum { PF_AHEAD = 4 };

FP4_TARGET_AVX2 void fp4_attend_heads_avx2(const float *q, const uint16_t *k0, const uint16_t *v0,
                                           int64_t row_stride, int64_t n, int head_dim, int64_t hq0, int nh,
                                           int group, float scale, float *s, float *P, float *o) {
    const int D = head_dim;
    if (D % 8 || D > FP4_ATTEND_MAX_HD || nh > FP4_ATTEND_MAX_HEADS) {
        fp4_heads_each(fp4_attend_avx2, q, k0, v0, row_stride, n, D, hq0, nh, group, scale, s, o);
        return;
    }
    fp4_heads_span hs;
    fp4_heads_span_init(&hs, k0, v0, hq0, nh, group, D);
    const uint16_t *kb = hs.kb, *vb = hs.vb;
    const int64_t *off = hs.off;
    float m[FP4_ATTEND_MAX_HEADS];
    for (int h = 0; h < nh; h++)
        m[h] = 0.0f;
    for (int64_t j = 0; j < n; j++) {
        fp4_heads_prefetch(kb, j, PF_AHEAD, n, row_stride, hs.span);
        const uint16_t *kr = kb + j * row_stride;
        for (int h = 0; h < nh; h++) {
            const float *qh = q + (int64_t)h * D;
            const uint16_t *kh = kr + off[h];
            __m256 p[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                           _mm256_setzero_ps()};
            int d0 = 0;
            for (; d0 + FP4P_LANES <= D; d0 += FP4P_LANES)
#pragma GCC unroll 4
                for (int t = 0; t < 4; t++)
                    p[t] = _mm256_add_ps(
                        p[t], _mm256_mul_ps(_mm256_loadu_ps(qh + d0 + 8 * t), fp4x_f16x8(kh + d0 + 8 * t)));
            for (int t = 0; d0 + 8 * t < D; t++) /* 8 .. 24 tail dims: lanes 0 .. */
                p[t] = _mm256_add_ps(
                    p[t], _mm256_mul_ps(_mm256_loadu_ps(qh + d0 + 8 * t), fp4x_f16x8(kh + d0 + 8 * t)));
            const float sj = fp4p_mul(butterfly32_avx2(p), scale);
            s[h * n + j] = sj;
            if (j == 0 || sj > m[h]) m[h] = sj;
        }
    }
    float den[FP4_ATTEND_MAX_HEADS];
    for (int h = 0; h < nh; h++)
        den[h] = softmax_weights_avx2(s + h * n, n, m[h]);
    const int nc = D / 8;
    memset(P, 0, sizeof(float) * FP4P_LANES * (size_t)D * (size_t)nh);
    for (int64_t j = 0; j < n; j++) {
        fp4_heads_prefetch(vb, j, PF_AHEAD, n, row_stride, hs.span);
        const uint16_t *vr = vb + j * row_stride;
        for (int h = 0; h < nh; h++) {
            float *pl = P + ((int64_t)h * FP4P_LANES + j % FP4P_LANES) * D;
            const uint16_t *vh = vr + off[h];
            const __m256 sj = _mm256_set1_ps(s[h * n + j]);
            for (int c = 0; c < nc; c++)
                _mm256_storeu_ps(pl + 8 * c, _mm256_add_ps(_mm256_loadu_ps(pl + 8 * c),
                                                           _mm256_mul_ps(sj, fp4x_f16x8(vh + 8 * c))));
        }
    }
    for (int h = 0; h < nh; h++) {
        float *ph = P + (int64_t)h * FP4P_LANES * D;
        for (int o_ = FP4P_LANES / 2; o_ >= 1; o_ >>= 1)
            for (int l = 0; l < o_; l++)
                for (int c = 0; c < nc; c++) {
                    float *a = ph + l * D + 8 * c;
                    _mm256_storeu_ps(a, _mm256_add_ps(_mm256_loadu_ps(a), _mm256_loadu_ps(a + o_ * D)));
                }
        const __m256 dv = _mm256_set1_ps(den[h]);
        for (int c = 0; c < nc; c++)
            _mm256_storeu_ps(o + (int64_t)h * D + 8 * c, _mm256_div_ps(_mm256_loadu_ps(ph + 8 * c), dv));
    }
}
#else
void fp4_attend_heads_avx2(const float *q, const uint16_t *k0, const uint16_t *v0, int64_t row_stride,
                           int64_t n, int head_dim, int64_t hq0, int nh, int group, float scale, float *s,
                           float *P, float *o) {
    fp4_attend_heads_portable(q, k0, v0, row_stride, n, head_dim, hq0, nh, group, scale, s, P, o);
}
#endif
