/* attend_heads_x86.c — the pinned attention (fp4p_attend, src/format/pinned.h) of several query
 * heads of one column at once, with AVX-512, the same bits as fp4p_attend head by head.
 *
 * Why several heads: the KV cache holds a position's heads side by side ([pos][NKV*D] halves), so
 * one head's K strip is D halves every NKV*D: a strided walk that the caches and prefetchers serve
 * badly once the weights have streamed through them (on llama-160m at 500 positions a head-at-a-
 * time attention took half of the CPU's decode step, its loads stalled). Here positions run
 * outside and heads inside, so each position's row segment for the heads is read in one
 * contiguous run, once for every query head that shares its KV head. Heads are independent, so
 * the order of the heads changes no value; within a head every float operation is fp4p_attend's:
 *   scores: s[j] = butterfly(lanes) * scale, lanes l = Σ_{d ≡ l mod 32} q[d] k_j[d] (one multiply,
 *     one add, increasing d; two zmm of partials), the butterfly p[l] += p[l + off], off = 16 .. 1,
 *     in registers (halves of vectors: the same pairs added);
 *   max: the scalar rule (j == 0 or s[j] > m);
 *   exp: fp4p_exp, sixteen at a time, the same operations on each lane (NaN, overflow and
 *     underflow lanes blended from the same rules);
 *   den: fp4p_sum (32 lanes of increasing j, then the butterfly);
 *   o[d] = butterfly over l = j mod 32 of Σ s[j] v_j[d], / den: the partials P[l][d] as in
 *     attend_x86.c, positions outside.
 * K and V widened by vcvtph2ps with NaN lanes rebuilt as fp4p_f16_to_f32 builds them (attend_x86.c).
 * As there, a NaN may carry another NaN's payload (the GPU twin's NaN is canonical). head_dim not a
 * multiple of 16, or above FP4_ATTEND_MAX_HD, takes fp4_attend_avx512 head by head. */
#include "cpu/cpu_impl.h"
#include "format/pinned.h"
#include "cpu/pinned_x86.h"
#include "cpu/attend_heads.h"
#include <string.h>

/* the portable walk: fp4p_attend head by head */
static void attend_one_portable(const float *q, const uint16_t *k0, const uint16_t *v0, int64_t row_stride,
                                int64_t n, int head_dim, float scale, float *s, float *o) {
    fp4p_attend(q, k0, v0, row_stride, n, head_dim, scale, s, o);
}
void fp4_attend_heads_portable(const float *q, const uint16_t *k0, const uint16_t *v0, int64_t row_stride,
                               int64_t n, int head_dim, int64_t hq0, int nh, int group, float scale, float *s,
                               float *P, float *o) {
    (void)P;
    fp4_heads_each(attend_one_portable, q, k0, v0, row_stride, n, head_dim, hq0, nh, group, scale, s, o);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define FP4_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))
#define FP4_INLINE static inline __attribute__((always_inline))

/* fp4p_butterfly of the 32 lanes lo (0..15) and hi (16..31): off 16 is lo + hi, off 8 the vector's
 * low half plus its high half, and so on: the same pairs as p[l] += p[l + off] */
FP4_INLINE FP4_TARGET_AVX512 float butterfly32(__m512 lo, __m512 hi) {
    const __m512 b = _mm512_add_ps(lo, hi);
    const __m256 c = _mm256_add_ps(_mm512_castps512_ps256(b),
                                   _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(b), 1)));
    const __m128 d = _mm_add_ps(_mm256_castps256_ps128(c), _mm256_extractf128_ps(c, 1));
    const __m128 e = _mm_add_ps(d, _mm_movehl_ps(d, d));
    return _mm_cvtss_f32(_mm_add_ss(e, _mm_shuffle_ps(e, e, 1)));
}

FP4_INLINE __mmask16 first_lanes(int64_t k) {
    return k >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << k) - 1u);
}

/* s[j] = fp4p_exp(s[j] - m) for j < n, and fp4p_sum(s, n, 1) of the results */
FP4_INLINE FP4_TARGET_AVX512 float softmax_weights(float *s, int64_t n, float m) {
    const __m512 vm = _mm512_set1_ps(m);
    for (int64_t j = 0; j < n; j += 16) {
        const __mmask16 k = first_lanes(n - j);
        _mm512_mask_storeu_ps(s + j, k, fp4x_exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + j), vm)));
    }
    __m512 a0 = _mm512_setzero_ps(), a1 = a0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm512_add_ps(a0, _mm512_loadu_ps(s + i));
        a1 = _mm512_add_ps(a1, _mm512_loadu_ps(s + i + 16));
    }
    if (i < n) { /* lanes past the end keep their partial (no add at all) */
        const __mmask16 k0 = first_lanes(n - i), k1 = n - i > 16 ? first_lanes(n - i - 16) : 0;
        a0 = _mm512_mask_add_ps(a0, k0, a0, _mm512_maskz_loadu_ps(k0, s + i));
        a1 = _mm512_mask_add_ps(a1, k1, a1, _mm512_maskz_loadu_ps(k1, s + i + 16));
    }
    return butterfly32(a0, a1);
}

enum { PF_AHEAD = 4 };

FP4_TARGET_AVX512 void fp4_attend_heads_avx512(const float *q, const uint16_t *k0, const uint16_t *v0,
                                               int64_t row_stride, int64_t n, int head_dim, int64_t hq0,
                                               int nh, int group, float scale, float *s, float *P, float *o) {
    const int D = head_dim;
    if (D % 16 || D > FP4_ATTEND_MAX_HD || nh > FP4_ATTEND_MAX_HEADS) {
        fp4_heads_each(fp4_attend_avx512, q, k0, v0, row_stride, n, D, hq0, nh, group, scale, s, o);
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
            __m512 p0 = _mm512_setzero_ps(), p1 = p0;
            int d0 = 0;
            for (; d0 + FP4P_LANES <= D; d0 += FP4P_LANES) {
                p0 = _mm512_add_ps(p0, _mm512_mul_ps(_mm512_loadu_ps(qh + d0), fp4x_f16x16(kh + d0)));
                const __m512 kb16 = fp4x_f16x16(kh + d0 + 16);
                p1 = _mm512_add_ps(p1, _mm512_mul_ps(_mm512_loadu_ps(qh + d0 + 16), kb16));
            }
            if (d0 < D) /* 16 tail dims: lanes 0..15 */
                p0 = _mm512_add_ps(p0, _mm512_mul_ps(_mm512_loadu_ps(qh + d0), fp4x_f16x16(kh + d0)));
            const float sj = fp4p_mul(butterfly32(p0, p1), scale);
            s[h * n + j] = sj;
            if (j == 0 || sj > m[h]) m[h] = sj;
        }
    }
    float den[FP4_ATTEND_MAX_HEADS];
    for (int h = 0; h < nh; h++)
        den[h] = softmax_weights(s + h * n, n, m[h]);
    const int nc = D / 16;
    memset(P, 0, sizeof(float) * FP4P_LANES * (size_t)D * (size_t)nh);
    for (int64_t j = 0; j < n; j++) {
        fp4_heads_prefetch(vb, j, PF_AHEAD, n, row_stride, hs.span);
        const uint16_t *vr = vb + j * row_stride;
        for (int h = 0; h < nh; h++) {
            float *pl = P + ((int64_t)h * FP4P_LANES + j % FP4P_LANES) * D;
            const uint16_t *vh = vr + off[h];
            const __m512 sj = _mm512_set1_ps(s[h * n + j]);
            for (int c = 0; c < nc; c++)
                _mm512_storeu_ps(pl + 16 * c, _mm512_add_ps(_mm512_loadu_ps(pl + 16 * c),
                                                            _mm512_mul_ps(sj, fp4x_f16x16(vh + 16 * c))));
        }
    }
    for (int h = 0; h < nh; h++) {
        float *ph = P + (int64_t)h * FP4P_LANES * D;
        for (int o_ = FP4P_LANES / 2; o_ >= 1; o_ >>= 1)
            for (int l = 0; l < o_; l++)
                for (int c = 0; c < nc; c++) {
                    float *a = ph + l * D + 16 * c;
                    _mm512_storeu_ps(a, _mm512_add_ps(_mm512_loadu_ps(a), _mm512_loadu_ps(a + o_ * D)));
                }
        const __m512 dv = _mm512_set1_ps(den[h]);
        for (int c = 0; c < nc; c++)
            _mm512_storeu_ps(o + (int64_t)h * D + 16 * c, _mm512_div_ps(_mm512_loadu_ps(ph + 16 * c), dv));
    }
}

#else
void fp4_attend_heads_avx512(const float *q, const uint16_t *k0, const uint16_t *v0, int64_t row_stride,
                             int64_t n, int head_dim, int64_t hq0, int nh, int group, float scale, float *s,
                             float *P, float *o) {
    fp4_attend_heads_portable(q, k0, v0, row_stride, n, head_dim, hq0, nh, group, scale, s, P, o);
}
#endif
