/* attn_emul.cu — a host-only replay of the step's attention kernels (stk_att_scores and
 * stk_att_pv of src/cuda/step/step_kernels.cuh, round 3), thread by thread: which lanes and rows each
 * thread takes, the team shuffles (a shuffle reads the partner's value before the step), the
 * warp-uniform trips with their clamped rows, the stage ring of stk_att_pv (a chunk is in its
 * stage when the loop reaches it: what the wait and the barrier guarantee), the exp in place, the
 * strips' merge; the grid planner is the step's own (stk_att_gx). Each output is compared bit for
 * bit with fp4p_attend. It needs no GPU: it checks the kernels' order of operations and index
 * arithmetic on a machine without one (the device test is tests/gpu/test_gpu_attention.cu; what
 * this cannot check: races, cp.async, launches). Shapes and positions as the device test, several
 * SM counts (so several score grids).
 *   attn_emul [quick]     exit 1 if any output differs */
#include "cuda/step/step_kernels.cuh"
#include "fp4_rng.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct emu {
    int D, NH, NKV;
    int64_t n_ctx, kvd, slot_stride, q_cs;
    const uint16_t *kc, *vc;
    const float *q;
    float scale;
    const int32_t *slot, *pos;
    float *scores, *bmax, *strips, *den, *o;
    int gx;
} emu;

static float h2f(uint16_t h) {
    return fp4p_f16_to_f32(h);
}

static void group_of(const emu *e, int y, int *c, int *hk, int *h0, int *nhb) {
    const int G = e->NH / e->NKV, ngb = (G + STK_GB - 1) / STK_GB, gb = y % ngb;
    *hk = (y / ngb) % e->NKV;
    *c = y / (ngb * e->NKV);
    *h0 = *hk * G + gb * STK_GB;
    *nhb = G - gb * STK_GB < STK_GB ? G - gb * STK_GB : STK_GB;
}

/* stk_att_scores, block (bx, y) */
static void emu_scores(const emu *e, int bx, int y) {
    const int D = e->D, nd = D / 32;
    int c, hk, h0, nhb;
    group_of(e, y, &c, &hk, &h0, &nhb);
    const int64_t pos = e->pos[c];
    static float qs[STK_GB * FP4_ARCH_MAX_HEAD_DIM];
    for (int i = 0; i < STK_GB * D; i++)
        qs[i] = i < nhb * D ? e->q[(int64_t)c * e->q_cs + (int64_t)h0 * D + i] : 0.0f;
    float wmax[STK_SC_THREADS / 32][STK_GB];
    const int64_t step = (int64_t)e->gx * STK_SC_TEAMS;
    const uint16_t *k0 = e->kc + e->slot[c] * e->slot_stride + hk * D;
    float *srow = e->scores + (int64_t)y * e->n_ctx * STK_GB;
    for (int w = 0; w < STK_SC_THREADS / 32; w++) {
        float mx[32][STK_GB];
        for (int l = 0; l < 32; l++)
            for (int g = 0; g < STK_GB; g++)
                mx[l][g] = -INFINITY;
        for (int64_t jb = (int64_t)bx * STK_SC_TEAMS + 8 * w; jb <= pos; jb += step) {
            float p[32][STK_GB][8];
            for (int lane = 0; lane < 32; lane++) {
                const int t = lane & 3;
                const int64_t j = jb + (lane >> 2), row = j <= pos ? j : pos;
                for (int g = 0; g < STK_GB; g++)
                    for (int i = 0; i < 8; i++)
                        p[lane][g][i] = 0.0f;
                for (int m = 0; m < nd; m++)
                    for (int g = 0; g < nhb; g++)
                        for (int i = 0; i < 8; i++) {
                            const float kf = h2f(k0[row * e->kvd + 8 * t + 32 * m + i]);
                            p[lane][g][i] =
                                fp4p_add(p[lane][g][i], fp4p_mul(qs[g * D + 32 * m + 8 * t + i], kf));
                        }
            }
            for (int g = 0; g < nhb; g++) {
                for (int x = 2; x >= 1; x >>= 1) { /* the two shuffle steps: xor 2, then xor 1 */
                    float before[32][8];
                    for (int lane = 0; lane < 32; lane++)
                        for (int i = 0; i < 8; i++)
                            before[lane][i] = p[lane][g][i];
                    for (int lane = 0; lane < 32; lane++)
                        for (int i = 0; i < 8; i++)
                            p[lane][g][i] = fp4p_add(before[lane][i], before[lane ^ x][i]);
                }
                for (int lane = 0; lane < 32; lane++) {
                    float *v = p[lane][g];
                    for (int i = 0; i < 4; i++)
                        v[i] = fp4p_add(v[i], v[i + 4]);
                    v[0] = fp4p_add(v[0], v[2]);
                    v[1] = fp4p_add(v[1], v[3]);
                    const float s = fp4p_mul(fp4p_add(v[0], v[1]), e->scale);
                    const int64_t j = jb + (lane >> 2);
                    if (j <= pos) {
                        if ((lane & 3) == g) srow[j * STK_GB + g] = s;
                        mx[lane][g] = fmaxf(mx[lane][g], s);
                    }
                }
            }
        }
        for (int g = 0; g < STK_GB; g++) {
            float m = -INFINITY;
            for (int l = 0; l < 32; l++)
                m = fmaxf(m, mx[l][g]);
            wmax[w][g] = m;
        }
    }
    for (int g = 0; g < nhb; g++) {
        float m = wmax[0][g];
        for (int w = 1; w < STK_SC_THREADS / 32; w++)
            m = fmaxf(m, wmax[w][g]);
        e->bmax[((int64_t)c * e->NH + h0 + g) * STK_MAX_GX + bx] = m;
    }
}

/* stk_att_pv<NS>, block (l, y); the stages hold stale values where the kernel copies nothing */
static void emu_pv(const emu *e, int l, int y, int NS, unsigned char *smem) {
    const int D = e->D, R = stk_pv_rows(D), SB = stk_pv_stage_bytes(D);
    int c, hk, h0, nhb;
    group_of(e, y, &c, &hk, &h0, &nhb);
    const int64_t n = (int64_t)e->pos[c] + 1, nu = (n - l + 31) / 32, ch0 = (int64_t)c * e->NH + h0;
    const int64_t nchunk = (nu + R - 1) / R;
    const uint16_t *vl = e->vc + e->slot[c] * e->slot_stride + hk * D + l * e->kvd;
    const float *sl = e->scores + ((int64_t)y * e->n_ctx + l) * STK_GB;
    float ms[STK_GB];
    for (int g = 0; g < STK_GB; g++) {
        float m = -INFINITY;
        if (g < nhb)
            for (int b = 0; b < e->gx; b++)
                m = fmaxf(m, e->bmax[(ch0 + g) * STK_MAX_GX + b]);
        ms[g] = m;
    }
    for (int64_t k = 0; k < nchunk + NS - 1; k++) { /* issue k, consume k - (NS - 1) */
        if (k < nchunk) {
            unsigned char *stage = smem + (k % NS) * SB;
            const int64_t u0 = k * R;
            const int rows = nu - u0 < R ? (int)(nu - u0) : R;
            uint16_t *vs = (uint16_t *)stage;
            float *ss = (float *)(stage + R * D * 2);
            for (int r = 0; r < rows; r++) {
                memcpy(vs + r * D, vl + (u0 + r) * 32 * e->kvd, (size_t)D * 2);
                memcpy(ss + r * STK_GB, sl + (u0 + r) * 32 * STK_GB, 16); /* one 16-byte copy */
            }
        }
        const int64_t kc = k - (NS - 1);
        if (kc < 0) continue;
        if (kc >= nchunk) break;
        unsigned char *stage = smem + (kc % NS) * SB;
        const int rows = nu - kc * R < R ? (int)(nu - kc * R) : R;
        float *es = (float *)(stage + R * D * 2);
        for (int i = 0; i < rows * STK_GB; i++)
            es[i] = i % STK_GB < nhb ? fp4p_exp(fp4p_sub(es[i], ms[i % STK_GB])) : 0.0f;
        const uint16_t *vs = (const uint16_t *)stage;
        for (int d = 0; d < D; d++) {
            float *p = e->strips + (ch0 * STK_LANES + l) * D + d; /* p[g * 32 * D]: head g's strip */
            for (int r = 0; r < rows; r++) {
                const float v = h2f(vs[r * D + d]);
                for (int g = 0; g < nhb; g++)
                    p[g * STK_LANES * D] = fp4p_add(p[g * STK_LANES * D], fp4p_mul(es[r * STK_GB + g], v));
                if (d < STK_GB) {
                    float *dn = e->den + ch0 * STK_LANES + l;
                    if (d < nhb) dn[d * STK_LANES] = fp4p_add(dn[d * STK_LANES], es[r * STK_GB + (d & 3)]);
                }
            }
        }
    }
}

/* the last block's merge for group y */
static void emu_merge(const emu *e, int y) {
    const int D = e->D;
    int c, hk, h0, nhb;
    group_of(e, y, &c, &hk, &h0, &nhb);
    const int64_t ch0 = (int64_t)c * e->NH + h0;
    for (int g = 0; g < nhb; g++) {
        float v[32];
        for (int l = 0; l < 32; l++)
            v[l] = e->den[(ch0 + g) * STK_LANES + l];
        for (int off = 16; off >= 1; off >>= 1) { /* the warp butterfly: every lane */
            float b[32];
            memcpy(b, v, sizeof b);
            for (int l = 0; l < 32; l++)
                v[l] = fp4p_add(b[l], b[l ^ off]);
        }
        const float dg = v[0];
        for (int d = 0; d < D; d++) {
            float s[32];
            for (int k = 0; k < 32; k++)
                s[k] = e->strips[((ch0 + g) * STK_LANES + k) * D + d];
            for (int k = 0; k < 16; k++)
                s[k] = fp4p_add(s[k], s[k + 16]);
            for (int k = 0; k < 8; k++)
                s[k] = fp4p_add(s[k], s[k + 8]);
            for (int k = 0; k < 4; k++)
                s[k] = fp4p_add(s[k], s[k + 4]);
            s[0] = fp4p_add(s[0], s[2]);
            s[1] = fp4p_add(s[1], s[3]);
            e->o[(ch0 + g) * D + d] = fp4p_div(fp4p_add(s[0], s[1]), dg);
        }
    }
}

static uint16_t f16_of(uint64_t *s, float sd, size_t i) {
    const uint64_t x = fp4_splitmix64(s);
    const float u = (float)(x & 0xFFFF) + (float)((x >> 16) & 0xFFFF) + (float)((x >> 32) & 0xFFFF);
    float f = (u - 98302.5f) / 32768.0f * sd;
    if (i % 97 == 0) f = -0.0f;
    if (i % 89 == 0) f = 3e-6f * (float)(i % 7) - 1e-5f;
    return fp4p_f32_to_f16(f);
}

/* one shape, ncol columns (slot[c], pos[c]), score grids of the given SM count; returns the
 * number of differing outputs */
static int64_t emu_case(int D, int NH, int NKV, int64_t n_ctx, int ncol, const int32_t *slot,
                        const int32_t *pos, int sms, int NS, const uint16_t *kc, const uint16_t *vc) {
    emu e;
    memset(&e, 0, sizeof e);
    e.D = D, e.NH = NH, e.NKV = NKV, e.n_ctx = n_ctx, e.kvd = (int64_t)NKV * D, e.slot_stride = n_ctx * e.kvd;
    e.q_cs = (int64_t)NH * D + 2 * e.kvd, e.kc = kc, e.vc = vc, e.slot = slot, e.pos = pos;
    e.scale = (float)(1.0 / sqrt((double)D));
    float *q = (float *)malloc(sizeof(float) * (size_t)(ncol * e.q_cs));
    uint64_t s = (uint64_t)(D * 7 + NH + ncol * 3 + pos[0]);
    for (int64_t i = 0; i < ncol * e.q_cs; i++)
        q[i] = (float)((int64_t)(fp4_splitmix64(&s) >> 40) - (1 << 23)) / (float)(1 << 22);
    e.q = q;
    const size_t no = (size_t)(ncol * NH * D);
    const int64_t groups = stk_att_groups(ncol, NH, NKV), nsc = groups * STK_GB * n_ctx;
    e.scores = (float *)malloc(sizeof(float) * (size_t)nsc);
    e.bmax = (float *)malloc(sizeof(float) * (size_t)(ncol * NH * STK_MAX_GX));
    e.strips = (float *)calloc((size_t)(ncol * NH * STK_LANES * D), sizeof(float));
    e.den = (float *)calloc((size_t)(ncol * NH * STK_LANES), sizeof(float));
    e.o = (float *)malloc(sizeof(float) * no);
    for (int64_t i = 0; i < nsc; i++)
        e.scores[i] = NAN; /* never written: a group's unused head slots */
    e.gx = stk_att_gx(groups, n_ctx, sms);
    unsigned char *smem = (unsigned char *)malloc((size_t)(NS * stk_pv_stage_bytes(D)));
    memset(smem, 0x7F, (size_t)(NS * stk_pv_stage_bytes(D))); /* stale stage contents: NaN-ish */
    for (int y = 0; y < groups; y++) {
        for (int bx = 0; bx < e.gx; bx++)
            emu_scores(&e, bx, y);
    }
    for (int y = 0; y < groups; y++) {
        for (int l = 0; l < 32; l++)
            emu_pv(&e, l, y, NS, smem);
        emu_merge(&e, y);
    }
    int64_t bad = 0;
    float *want = (float *)malloc(sizeof(float) * (size_t)D),
          *sb = (float *)malloc(sizeof(float) * (size_t)n_ctx);
    const int G = NH / NKV;
    for (int c = 0; c < ncol; c++)
        for (int h = 0; h < NH; h++) {
            const int64_t at = slot[c] * e.slot_stride + (h / G) * D;
            fp4p_attend(q + c * e.q_cs + h * D, kc + at, vc + at, e.kvd, (int64_t)pos[c] + 1, D, e.scale, sb,
                        want);
            for (int d = 0; d < D; d++)
                bad += fp4p_bits(want[d]) != fp4p_bits(e.o[((int64_t)c * NH + h) * D + d]);
        }
    printf(
        "d %3d heads %2d/%d ctx %5lld cols %d pos %5d..%5d sms %3d gx %2d stages %d: %lld of %lld differ\n",
        D, NH, NKV, (long long)n_ctx, ncol, pos[0], pos[ncol - 1], sms, e.gx, NS, (long long)bad,
        (long long)no);
    free(q), free(e.scores), free(e.bmax), free(e.strips), free(e.den), free(e.o), free(smem), free(want),
        free(sb);
    return bad;
}

int main(int argc, char **argv) {
    const int quick = argc > 1 && !strcmp(argv[1], "quick");
    static const struct {
        int d, nh, nkv;
        int64_t n_ctx;
    } sh[] = {{128, 32, 8, 4700}, {64, 4, 2, 9000}, {128, 28, 4, 1300}, {64, 14, 2, 1200},
              {128, 64, 8, 1100}, {32, 2, 2, 2100}, {256, 8, 2, 2600}};
    static const int32_t singles[] = {0,    1,    31,   32,   33,   63,   64,   65,   1023, 1024, 1025,
                                      2111, 2112, 2113, 4095, 4096, 4097, 4224, 8191, 8192, 8999};
    const int own[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    int64_t bad = 0;
    for (int i = 0; i < (quick ? 2 : 7); i++) {
        const int D = sh[i].d, NH = sh[i].nh, NKV = sh[i].nkv;
        const int64_t n_ctx = sh[i].n_ctx, ss = n_ctx * NKV * D;
        uint16_t *kc = (uint16_t *)malloc((size_t)(8 * ss) * 2),
                 *vc = (uint16_t *)malloc((size_t)(8 * ss) * 2);
        uint64_t s = (uint64_t)(D + NH * 100 + n_ctx);
        const float ksd = 2.5f / sqrtf(sqrtf((float)D));
        for (size_t x = 0; x < (size_t)(8 * ss); x++)
            kc[x] = f16_of(&s, ksd, x), vc[x] = f16_of(&s, 1.0f, x + 13);
        const int32_t last = (int32_t)n_ctx - 1;
        for (size_t k = 0; k < sizeof singles / sizeof singles[0]; k++)
            if (singles[k] < last)
                bad += emu_case(D, NH, NKV, n_ctx, 1, own + (k % 8), &singles[k], 132, 4, kc, vc);
        bad += emu_case(D, NH, NKV, n_ctx, 1, own, &last, 132, 4, kc, vc);
        bad += emu_case(D, NH, NKV, n_ctx, 1, own, &last, 7, 4, kc, vc);
        bad += emu_case(D, NH, NKV, n_ctx, 1, own, &last, 1, 3, kc, vc);
        const int32_t p8[8] = {
            31, last, 32, 1055, last - 32, 4159 < last ? 4159 : last - 1, 2, 2111 < last ? 2111 : 5};
        bad += emu_case(D, NH, NKV, n_ctx, 8, own, p8, 132, 4, kc, vc);
        bad += emu_case(D, NH, NKV, n_ctx, 8, own, p8, 20, 2, kc, vc);
        free(kc), free(vc);
    }
    printf(bad ? "FAIL: %lld outputs differ\n" : "all outputs bit-identical to fp4p_attend (%lld differ)\n",
           (long long)bad);
    return bad != 0;
}
