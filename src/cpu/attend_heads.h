/* attend_heads.h — what the multi-head attention walks (attend_heads_x86.c, attend_heads_avx2.c)
 * share: the KV heads a run of query heads reads, and the prefetch of a position's row segment. */
#ifndef FP4_CPU_ATTEND_HEADS_H
#define FP4_CPU_ATTEND_HEADS_H
#include "cpu/cpu_impl.h"

typedef struct fp4_heads_span {
    const uint16_t *kb, *vb;           /* K / V of the first KV head read, position 0           */
    int64_t span;                      /* halves of a row read: the KV heads hk_lo .. hk_hi      */
    int64_t off[FP4_ATTEND_MAX_HEADS]; /* query head h's K/V offset from kb / vb, halves          */
} fp4_heads_span;

/* query heads hq0 .. hq0 + nh - 1 (nh <= FP4_ATTEND_MAX_HEADS), KV head (hq0 + h) / group */
static inline void fp4_heads_span_init(fp4_heads_span *hs, const uint16_t *k0, const uint16_t *v0,
                                       int64_t hq0, int nh, int group, int head_dim) {
    const int64_t hk_lo = hq0 / group;
    hs->span = ((hq0 + nh - 1) / group - hk_lo + 1) * head_dim;
    hs->kb = k0 + hk_lo * head_dim, hs->vb = v0 + hk_lo * head_dim;
    for (int h = 0; h < nh; h++)
        hs->off[h] = ((hq0 + h) / group - hk_lo) * head_dim;
}

/* a hint for the row segment of position j + ahead (clamped to n - 1): no value changes */
static inline void fp4_heads_prefetch(const uint16_t *base, int64_t j, int64_t ahead, int64_t n,
                                      int64_t row_stride, int64_t span) {
    const int64_t jp = j + ahead < n ? j + ahead : n - 1;
    for (int64_t b = 0; b < span * 2; b += 64)
        __builtin_prefetch((const char *)(base + jp * row_stride) + b, 0, 3);
}

/* a one-head attention (fp4p_attend's signature) over query heads hq0 .. hq0 + nh - 1 in turn */
typedef void (*fp4_attend_one_fn)(const float *q, const uint16_t *k0, const uint16_t *v0, int64_t row_stride,
                                  int64_t n, int head_dim, float scale, float *s, float *o);
static inline void fp4_heads_each(fp4_attend_one_fn one, const float *q, const uint16_t *k0,
                                  const uint16_t *v0, int64_t row_stride, int64_t n, int head_dim,
                                  int64_t hq0, int nh, int group, float scale, float *s, float *o) {
    for (int h = 0; h < nh; h++) {
        const int64_t hk = (hq0 + h) / group;
        one(q + (int64_t)h * head_dim, k0 + hk * head_dim, v0 + hk * head_dim, row_stride, n, head_dim, scale,
            s, o + (int64_t)h * head_dim);
    }
}
#endif
