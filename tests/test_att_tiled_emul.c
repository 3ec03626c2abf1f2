/* test_att_tiled_emul.c — att_tiled.cuh's loops run on the host, so that the device run is not the
 * first check of their indices: the key tiles of ATT_T_KEYS rows (rows past the last repeat it),
 * each (warp, lane)'s key and head in the score pass and its 32 pinned dot lanes (d = 32m + 8i8 + i
 * into lane 8i8 + i), the per-head maximum over the warps, the exponentials in place, den over warp
 * g's lanes, and the P.V threads (head tid / ATT_T_PV, outputs (tid % ATT_T_PV) * D/64 + k) whose
 * lane is the tile row % 32. Every (head dim, group, length) must equal fp4p_attend bit for bit:
 * lengths around 32 and the tile, groups of 1 to 4 heads, head dims 64 and 128. */
#include "check.h"
#include "cuda/step/att_tiled.h"
#include "format/pinned.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { MAXD = 128, MAXN = 300 };

/* one block's attention as the kernel computes it: q [nhb][D], rows [n][D] of K and V (row stride D) */
static void emul_block(const float *q, const uint16_t *k, const uint16_t *v, int n, int D, int nhb,
                       float scale, float *o) {
    static float sc[ATT_T_HEADS][MAXN + ATT_T_KEYS];
    static uint16_t stage[ATT_T_KEYS][MAXD];
    float red[ATT_T_THREADS / 32], hm[ATT_T_HEADS], hden[ATT_T_HEADS];
    const int ntile = (n + ATT_T_KEYS - 1) / ATT_T_KEYS;
    for (int w = 0; w < ATT_T_THREADS / 32; w++)
        red[w] = -INFINITY;
    for (int t = 0; t < ntile; t++) {
        /* the stage copy: rows past n - 1 repeat it */
        for (int r = 0; r < ATT_T_KEYS; r++) {
            const int u = t * ATT_T_KEYS + r < n ? t * ATT_T_KEYS + r : n - 1;
            memcpy(stage[r], k + (size_t)u * D, 2 * (size_t)D);
        }
        for (int w = 0; w < ATT_T_THREADS / 32; w++) {
            const int g = w & 3, half = w >> 2;
            if (g >= nhb) continue;
            for (int lane = 0; lane < 32; lane++) {
                const int r = half * 32 + lane, u = t * ATT_T_KEYS + r;
                float p[32] = {0};
                for (int m = 0; m < D / 32; m++)
                    for (int i8 = 0; i8 < 4; i8++)
                        for (int i = 0; i < 8; i++) {
                            const int d = 32 * m + 8 * i8 + i;
                            p[8 * i8 + i] = fp4p_add(p[8 * i8 + i],
                                                     fp4p_mul(q[g * D + d], fp4p_f16_to_f32(stage[r][d])));
                        }
                const float s = fp4p_mul(fp4p_butterfly(p), scale);
                if (u < n) {
                    sc[g][u] = s;
                    red[w] = fmaxf(red[w], s);
                }
            }
        }
    }
    for (int g = 0; g < ATT_T_HEADS; g++)
        hm[g] = fmaxf(red[g], red[g + 4]);
    for (int g = 0; g < nhb; g++) {
        for (int u = 0; u < n; u++)
            sc[g][u] = fp4p_exp(fp4p_sub(sc[g][u], hm[g]));
        float lanes[32];
        for (int l = 0; l < 32; l++) {
            lanes[l] = 0.0f;
            for (int u = l; u < n; u += 32)
                lanes[l] = fp4p_add(lanes[l], sc[g][u]);
        }
        hden[g] = fp4p_butterfly(lanes);
    }
    const int DPT = D / ATT_T_PV;
    for (int tid = 0; tid < ATT_T_THREADS; tid++) {
        const int pg = tid / ATT_T_PV, pi = tid % ATT_T_PV;
        if (pg >= nhb) continue;
        float acc[2][32] = {{0}};
        for (int t = 0; t < ntile; t++) {
            const int rows = n - t * ATT_T_KEYS;
            for (int r = 0; r < ATT_T_KEYS && r < rows; r++)
                for (int kk = 0; kk < DPT; kk++) {
                    const float vv = fp4p_f16_to_f32(v[(size_t)(t * ATT_T_KEYS + r) * D + pi * DPT + kk]);
                    acc[kk][r % 32] = fp4p_add(acc[kk][r % 32], fp4p_mul(sc[pg][t * ATT_T_KEYS + r], vv));
                }
        }
        for (int kk = 0; kk < DPT; kk++)
            o[pg * D + pi * DPT + kk] = fp4p_div(fp4p_butterfly(acc[kk]), hden[pg]);
    }
}

static void check_case(int D, int nhb, int n, uint64_t seed) {
    test_rng r = {seed};
    static float q[ATT_T_HEADS * MAXD], want[ATT_T_HEADS * MAXD], got[ATT_T_HEADS * MAXD], s[MAXN];
    static uint16_t k[MAXN * MAXD], v[MAXN * MAXD];
    const float ksd = 2.5f / sqrtf(sqrtf((float)D)), scale = 1.0f / sqrtf((float)D);
    for (int i = 0; i < nhb * D; i++)
        q[i] = rng_uniform(&r) * 4.0f - 2.0f;
    for (int i = 0; i < n * D; i++) {
        k[i] = fp4p_f32_to_f16((rng_uniform(&r) * 2.0f - 1.0f) * ksd * (i % 97 ? 1.0f : -0.0f));
        v[i] = fp4p_f32_to_f16(i % 89 ? rng_uniform(&r) * 2.0f - 1.0f : 3e-6f);
    }
    for (int g = 0; g < nhb; g++)
        fp4p_attend(q + g * D, k, v, D, n, D, scale, s, want + g * D);
    emul_block(q, k, v, n, D, nhb, scale, got);
    int bad = 0;
    for (int i = 0; i < nhb * D; i++)
        bad += f32_bits(want[i]) != f32_bits(got[i]);
    CHECK_MSG(bad == 0, "d %d heads %d keys %d: %d of %d outputs differ from fp4p_attend", D, nhb, n, bad,
              nhb * D);
}

int main(void) {
    CHECK(att_t_fits(128, 4096) && att_t_fits(64, 9000) && !att_t_fits(256, 512) && !att_t_fits(128, 20000));
    CHECK(att_t_smem(128, 512) == 4 * 128 * 4 + 4 * 512 * 4 + 2 * 64 * 272);
    static const int lens[] = {1, 2, 31, 32, 33, 63, 64, 65, 129, 200, 300};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        check_case(128, 4, lens[i], 11 + i);
        check_case(64, 1 + (int)(i % 4), lens[i], 101 + i);
    }
    return check_report();
}
