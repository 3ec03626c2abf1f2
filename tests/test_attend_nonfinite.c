/* test_attend_nonfinite.c — the softmax maximum of the CUDA attention kernels (stk_att_scores /
 * stk_att_pv, att_cluster_kernel: fmaxf from -inf over blocks and shuffles, which drops a NaN) against
 * fp4p_attend's (the first score, then any strictly greater one, which keeps a NaN only at j = 0),
 * emulated on the host with the same pinned operations otherwise: the two maxima differ only where a
 * score is NaN, and there that score's weight, the denominator and so every output are NaN on both;
 * everywhere else the outputs are the same bits. Caches of f16 infinities, NaN and the largest
 * finite halves beside ordinary values, at random rows and columns. */
#include "check.h"
#include "format/pinned.h"
#include <math.h>
#include <string.h>

enum { MAXN = 80, MAXD = 64 };

/* fp4p_attend with the CUDA kernels' maximum */
static void attend_fmax(const float *q, const uint16_t *k0, const uint16_t *v0, int64_t n, int hd,
                        float scale, float *s, float *o, float *m_out) {
    float kv[MAXD];
    float m = -INFINITY;
    for (int64_t j = 0; j < n; j++) {
        for (int d = 0; d < hd; d++)
            kv[d] = fp4p_f16_to_f32(k0[j * hd + d]);
        s[j] = fp4p_mul(fp4p_dot(q, kv, hd), scale);
        m = fmaxf(m, s[j]);
    }
    for (int64_t j = 0; j < n; j++)
        s[j] = fp4p_exp(fp4p_sub(s[j], m));
    const float den = fp4p_sum(s, n, 1);
    for (int d = 0; d < hd; d++) {
        float p[FP4P_LANES];
        for (int l = 0; l < FP4P_LANES; l++)
            p[l] = 0.0f;
        for (int64_t j = 0; j < n; j++)
            p[j % FP4P_LANES] = fp4p_add(p[j % FP4P_LANES], fp4p_mul(s[j], fp4p_f16_to_f32(v0[j * hd + d])));
        o[d] = fp4p_div(fp4p_butterfly(p), den);
    }
    *m_out = m;
}

static uint16_t special(test_rng *r) {
    static const uint16_t h[] = {0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7BFF, 0xFBFF, 0x0000, 0x8000};
    return h[rng_u64(r) % (sizeof h / sizeof h[0])];
}

static uint16_t ordinary(test_rng *r) {
    return fp4p_f32_to_f16((float)((double)(rng_u64(r) % 2001) / 500.0 - 2.0));
}

int main(void) {
    test_rng r = {0x6E6F6E66696E6974ull};
    static uint16_t k[MAXN * MAXD], v[MAXN * MAXD];
    float q[MAXD], s1[MAXN], s2[MAXN], o1[MAXD], o2[MAXD];
    int differ = 0, nan_out = 0, same_bits = 1, both_nan = 1;
    for (int it = 0; it < 600; it++) {
        const int hd = it % 2 ? 64 : 32, n = 1 + (int)(rng_u64(&r) % MAXN);
        const float scale = (float)(1.0 / sqrt((double)hd));
        for (int d = 0; d < hd; d++)
            q[d] = fp4p_f16_to_f32(ordinary(&r));
        for (int i = 0; i < n * hd; i++)
            k[i] = ordinary(&r), v[i] = ordinary(&r);
        const int kind = it % 6; /* 0: finite; 1: a K value; 2: a whole K row; 3: every K row
                                  * (the crafted snapshot); 4: a V value; 5: row 0 of K */
        const int64_t j = (int64_t)(rng_u64(&r) % (uint64_t)n);
        const uint16_t h = special(&r);
        if (kind == 1) k[j * hd + (int)(rng_u64(&r) % (uint64_t)hd)] = h;
        for (int d = 0; d < hd && (kind == 2 || kind == 5); d++)
            k[(kind == 5 ? 0 : j) * hd + d] = h;
        for (int i = 0; kind == 3 && i < n * hd; i++)
            k[i] = h, v[i] = h;
        if (kind == 4) v[j * hd + (int)(rng_u64(&r) % (uint64_t)hd)] = h;
        float m2;
        fp4p_attend(q, k, v, hd, n, hd, scale, s1, o1);
        attend_fmax(q, k, v, n, hd, scale, s2, o2, &m2);
        int any_nan_score = 0;
        for (int jj = 0; jj < n; jj++) {
            float kv[MAXD];
            for (int d = 0; d < hd; d++)
                kv[d] = fp4p_f16_to_f32(k[jj * hd + d]);
            any_nan_score |= isnan(fp4p_mul(fp4p_dot(q, kv, hd), scale));
        }
        for (int d = 0; d < hd; d++) {
            const int n1 = isnan(o1[d]) != 0, n2 = isnan(o2[d]) != 0;
            nan_out += n1;
            if (n1 != n2 || (!n1 && fp4p_bits(o1[d]) != fp4p_bits(o2[d]))) {
                same_bits = 0;
                CHECK_MSG(0, "iteration %d (kind %d, half 0x%04x) d %d: cpu %08x, fmaxf %08x", it, kind, h, d,
                          fp4p_bits(o1[d]), fp4p_bits(o2[d]));
                break;
            }
            if (any_nan_score && !n1) both_nan = 0;
        }
        /* where the maxima differ (a NaN first score) the outputs are NaN on both sides */
        float kv0[MAXD];
        for (int d = 0; d < hd; d++)
            kv0[d] = fp4p_f16_to_f32(k[d]);
        const float m1_first = fp4p_mul(fp4p_dot(q, kv0, hd), scale);
        if (isnan(m1_first) && !isnan(m2)) differ++;
    }
    CHECK(same_bits);
    CHECK_MSG(both_nan, "a NaN score left a finite output");
    CHECK_MSG(differ > 10 && nan_out > 1000, "coverage: %d cases of different maxima, %d NaN outputs", differ,
              nan_out);
    return check_report();
}
