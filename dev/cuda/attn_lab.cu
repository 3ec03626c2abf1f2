/* attn_lab.cu — timing of the decode step's attention (stk_attention's kernels of
 * src/cuda/step/step_kernels.cuh) beside the kernels before round 3 (lab_attn_old.cuh), on the
 * llama3-8b shape (32 query heads, 8 KV heads, head_dim 128, F16 KV cache of 32 layers: each call
 * reads the next layer's rows, so the cache comes from DRAM as in the step), 1 to 8 columns at
 * positions 511, 767, 1023, 2047 and 3967 (n_ctx 4096). Variants: old; new with 2, 3, 4 pipeline
 * stages (4 is the step's); the one-launch cluster kernels of att_cluster.cuh (clusters of 8 and
 * 16; of 4 and 2 since session 11); session 12's staged cluster kernels (lab_attn_stage.cuh: every
 * K row and the first V rows in flight from the start; with an L2 prefetch before the PDL wait;
 * clusters of 16 and 8). Every variant's outputs are compared bit for bit with old's (exit 1 if any
 * differ); then a check pass compares the cluster variants with old's at 1 column and many more
 * positions (round and trip boundaries, the V region's end, the last position); then (not in quick)
 * pairs: each call followed by the o projection (4096 x 4096 NVFP4, exact, 1 column, through
 * fp4_cuda_project as the step, reading the attention's output; 8 weight copies in turn; and at 8
 * columns, native, for the two launches, the clusters of 4 and 2 and the wide ring), so the
 * time a layer's attention costs its successor shows (larger shared memory may keep the
 * projection's blocks off the SMs longer: session 6's version 2).
 * Session 12 (wide), variants 16..21: lab_attn_wide.cuh's bounded ring (K then V chunks of 64 slots
 * through a ring of NR chunks, NR - 1 in flight) for 2-8 columns, clusters of 2, 4, 8, 16; a second
 * check pass compares them with old at 2, 4 and 8 columns whose positions differ within a launch.
 * attn_lab [REPS] [quick|wide]   (default 200 calls per cell; launches back to back with PDL, as the
 * step; quick: 1 column, the step's, the cluster and the staged variants, and 8 columns of old and
 * the wide variants at 511 and 3967, one warm-up, fewer check positions: a sanitizer run; wide: 2, 4
 * and 8 columns of old, the step's two launches, the clusters of 8, 4, 2 and the wide variants, the
 * wide check pass, no pairs; ncu: as wide at 511 and 3967 only, one warm-up, no check pass (for ncu's
 * isolated durations); ATTN_LAB_SKIP=N[,N...]: variants not to run) */
#include "cuda/step/att_cluster.cuh"
#include "cuda/step/step_kernels.cuh"
#include "lab_attn_old.cuh"
#include "lab_attn_stage.cuh"
#include "lab_attn_wide.cuh"
#include "fp4_rng.h"
#include "fp4lane_cuda.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { D = 128, NH = 32, NKV = 8, NL = 32, NCTX = 4096, MAXC = 8 };

static void ck(cudaError_t e, const char *what) {
    if (e != cudaSuccess) {
        fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
        exit(2);
    }
}

/* session 12's variants 10..15: lab_attn_stage.cuh's flags */
static int ats_flags(int var) {
    return var == 11 ? ATS_PF | ATS_EV : var == 13 ? 0 : var == 14 ? ATS_EV | ATS_TMA : ATS_EV;
}
/* variant 15: variant 10 with its shared memory sized for the cell's position (the next power of
 * two from 512 above it) instead of n_ctx; set by the cell loops */
static int64_t g_pos_bucket;
static int64_t pos_bucket(int64_t pos) {
    int64_t b = 512;
    while (b < pos + 1)
        b *= 2;
    return b;
}

/* session 12 (wide)'s variants 16..21: cluster size, ring chunks, V dimensions a thread */
static int atw_cs(int var) {
    return var == 16 ? 2 : var == 18 ? 8 : var == 19 ? 16 : 4;
}
static int atw_nr(int var) {
    return var == 16 ? 4 : var == 17 || var == 21 ? 5 : var == 20 ? 3 : 6;
}
static int atw_dpt(int var) { /* V dimensions an o-strip thread holds */
    return var == 21 ? 4 : 2;
}
/* the variants of `attn_lab N wide` (2-8 columns) */
static int wide_var(int var) {
    return var == 0 || var == 3 || var == 4 || var == 8 || var == 9 || var >= 16;
}

static fp4_status launch(int var, stk_att_args a, int n) {
    const int64_t groups = (int64_t)n * NKV;
    if (var == 0) { /* the launch of d07eabb's step_cuda.cu */
        const int64_t want = (8 * (int64_t)fp4_cu_sm_count() + groups - 1) / groups, need = NCTX / 8;
        int64_t gx = want < need ? want : need;
        gx = gx < 1 ? 1 : gx > STK_MAX_GX ? STK_MAX_GX : gx;
        a.gx = (int)gx;
        fp4_status st =
            fp4_cu_launch(dim3((unsigned)gx, (unsigned)groups), dim3(256), 0, 0, 1, old_att_scores<4>, a);
        if (st) return st;
        return fp4_cu_launch(dim3(32, (unsigned)groups), dim3(D), 0, 0, 1, old_att_pv, a);
    }
    if (var == 3) return stk_attention(a, n, 0);
    if (var >= 16)
        return atw_attention(a, n, atw_cs(var), atw_nr(var), atw_dpt(var), 0); /* session 12 (wide) */
    if (var >= 10) { /* session 12: staged (11: with the L2 prefetch; 12: clusters of 8; 13: the V rows
                      * of the K region requested only after the scores; 14: by TMA; 15: shared
                      * memory by position bucket) */
        const ats_args aa = {a, MAXC, var == 15 ? g_pos_bucket : 0};
        return ats_attention(aa, n, var == 12 ? 8 : 16, ats_flags(var), 0);
    }
    if (var >= 8) return att_cluster(a, n, var == 8 ? 4 : 2, 0, 0); /* session 11 */
    if (var >= 4) return att_cluster(a, n, var == 4 ? 8 : 16, var < 6 ? 0 : var - 5, 0);
    const int gx = stk_att_gx(groups, NCTX, fp4_cu_sm_count());
    a.gx = gx;
    fp4_status st = fp4_cu_launch(dim3((unsigned)gx, (unsigned)groups), dim3(STK_SC_THREADS), 0, 0, 1,
                                  stk_att_scores<4>, a);
    if (st) return st;
    const dim3 pg(32, (unsigned)groups);
    return var == 1 ? fp4_cu_launch(pg, dim3(D), 2 * (size_t)stk_pv_stage_bytes(D), 0, 1, stk_att_pv<2>, a)
                    : fp4_cu_launch(pg, dim3(D), 3 * (size_t)stk_pv_stage_bytes(D), 0, 1, stk_att_pv<3>, a);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* lines reach a file as they are printed (a timeout keeps them) */
    const int reps = argc > 1 ? atoi(argv[1]) : 200;
    /* quick: 1 column, the step's and the cluster variants (and 8 columns of the wide ones), one warm-up
     * (a sanitizer run); wide: 2-8 columns only; ncu: wide at 2 positions, no checks */
    const int quick = argc > 2 && !strcmp(argv[2], "quick");
    const int ncu = argc > 2 && !strcmp(argv[2], "ncu");
    const int wide = ncu || (argc > 2 && !strcmp(argv[2], "wide"));
    enum { NV = 22 };
    static const char *const names[NV] = {
        "old (d07eabb)",
        "new, 2 stages",
        "new, 3 stages",
        "new, 4 stages (step)",
        "cluster of 8 (att_cluster.cuh)",
        "cluster of 16 (att_cluster.cuh)",
        "cluster of 16, 1 block per SM",
        "cluster of 16, 2 blocks per SM",
        "cluster of 4 (session 11)",
        "cluster of 2 (session 11)",
        "staged, cluster of 16 (session 12)",
        "staged + L2 prefetch, cluster of 16 (session 12)",
        "staged, cluster of 8 (session 12)",
        "staged, late V, cluster of 16 (session 12)",
        "staged by TMA, cluster of 16 (session 12)",
        "staged, smem by position bucket, cluster of 16 (session 12)",
        "wide ring, cluster of 2, ring 4 (session 12 wide)",
        "wide ring, cluster of 4, ring 5 (session 12 wide)",
        "wide ring, cluster of 8, ring 6 (session 12 wide)",
        "wide ring, cluster of 16, ring 6 (session 12 wide)",
        "wide ring, cluster of 4, ring 3 (session 12 wide)",
        "wide ring, cluster of 4, ring 5, 4 dims a thread (session 12 wide)"};
    const int64_t kvd = NKV * D, layer = (int64_t)NCTX * kvd, slot_stride = NL * layer;
    const size_t kvn = (size_t)(MAXC * slot_stride);
    uint16_t *kc, *vc;
    ck(cudaMalloc(&kc, kvn * 2), "malloc K");
    ck(cudaMalloc(&vc, kvn * 2), "malloc V");
    { /* f16 values of about N(0, 0.5) (K) and N(0, 1) (V): one layer's rows, copied to every layer
       * and slot on the device */
        uint16_t *h = (uint16_t *)malloc((size_t)layer * 2);
        uint64_t s = 1;
        for (int which = 0; which < 2; which++) {
            uint16_t *base = which ? vc : kc;
            for (int64_t i = 0; i < layer; i++) {
                const uint64_t x = fp4_splitmix64(&s);
                const float u =
                    (float)(x & 0xFFFF) + (float)((x >> 16) & 0xFFFF) + (float)((x >> 32) & 0xFFFF);
                h[i] = fp4p_f32_to_f16((u - 98302.5f) / 32768.0f * (which ? 1.0f : 0.5f));
            }
            ck(cudaMemcpy(base, h, (size_t)layer * 2, cudaMemcpyHostToDevice), "H2D");
            for (int64_t at = layer; at < MAXC * slot_stride; at += layer)
                ck(cudaMemcpy(base + at, base, (size_t)layer * 2, cudaMemcpyDeviceToDevice), "D2D");
        }
        free(h);
    }
    const int64_t q_cs = NH * D + 2 * kvd;
    float *hq = (float *)malloc(sizeof(float) * MAXC * q_cs), *q, *sc, *bm, *st, *den, *o;
    uint64_t s = 7;
    for (int64_t i = 0; i < MAXC * q_cs; i++)
        hq[i] = (float)((int64_t)(fp4_splitmix64(&s) >> 40) - (1 << 23)) / (float)(1 << 23);
    ck(cudaMalloc(&q, sizeof(float) * MAXC * q_cs), "malloc");
    ck(cudaMemcpy(q, hq, sizeof(float) * MAXC * q_cs, cudaMemcpyHostToDevice), "H2D");
    ck(cudaMalloc(&sc, sizeof(float) * MAXC * NKV * STK_GB * NCTX), "malloc"); /* both layouts fit */
    ck(cudaMalloc(&bm, sizeof(float) * MAXC * NH * STK_MAX_GX), "malloc");
    ck(cudaMalloc(&st, sizeof(float) * MAXC * NH * 32 * D), "malloc");
    ck(cudaMalloc(&den, sizeof(float) * MAXC * NH * 32), "malloc");
    ck(cudaMalloc(&o, sizeof(float) * MAXC * NH * D), "malloc");
    unsigned *tk;
    ck(cudaMalloc(&tk, 4 * MAXC * NH), "malloc");
    ck(cudaMemset(tk, 0, 4 * MAXC * NH), "memset");
    int32_t *din;
    ck(cudaMalloc(&din, 4 * 4 * MAXC), "malloc");
    float *ref = (float *)malloc(sizeof(float) * MAXC * NH * D),
          *got = (float *)malloc(sizeof(float) * MAXC * NH * D);
    cudaEvent_t e0, e1;
    ck(cudaEventCreate(&e0), "event");
    ck(cudaEventCreate(&e1), "event");
    static const int cols[4] = {1, 2, 4, 8}, poss[5] = {511, 767, 1023, 2047, 3967};
    int bad = 0, runs[NV];
    const char *skip = getenv("ATTN_LAB_SKIP"); /* variant numbers not to run, e.g. "14" or "11,14" */
    for (int var = 0; var < NV; var++) {        /* which variants run on this device at n_ctx NCTX */
        const int cs = var == 4 || var == 12 ? 8 : var == 8 ? 4 : var == 9 ? 2 : 16;
        runs[var] = 1;
        if (var >= 4 && var < 8) runs[var] = att_cluster_pick(D, NCTX, cs) == cs;
        if (var >= 8 && var < 10) runs[var] = att_cluster_ok(D, NCTX, cs);
        if (var >= 16) {
            int bps = 0, nc = 0;
            const int cs = atw_cs(var), nr = atw_nr(var);
            runs[var] = atw_ok(D, NCTX, cs, nr) && (nc = atw_fit(cs, D, nr, atw_dpt(var), NCTX, &bps)) > 0;
            printf("%s: %zu bytes of shared memory a block, %d blocks per SM, %d clusters resident%s\n",
                   names[var], atw_layout_of(NCTX, D, cs, nr).bytes, bps, nc, runs[var] ? "" : ": not run");
        } else if (var >= 10) {
            int bps = 0, nc = 0;
            runs[var] = ats_ok(D, NCTX, cs) && (nc = ats_fit(cs, D, ats_flags(var), NCTX, &bps)) > 0;
            printf("%s: %zu bytes of shared memory a block, %d blocks per SM, %d clusters resident%s\n",
                   names[var], ats_layout_of(NCTX, D, cs).bytes, bps, nc, runs[var] ? "" : ": not run");
        }
        for (const char *p = skip; p && *p; p += strcspn(p, ",") + (p[strcspn(p, ",")] == ',')) {
            if (atoi(p) == var && runs[var]) printf("%s: skipped (ATTN_LAB_SKIP)\n", names[var]);
            if (atoi(p) == var) runs[var] = 0;
        }
    }
    printf("cluster of 16 (att_cluster.cuh): %zu bytes of shared memory a block\n\n",
           att_cluster_smem(NCTX, D, 16));
    printf("| variant | columns | position | us per layer (scores + pv) |\n|---|---|---|---|\n");
    for (int ci = wide ? 1 : 0; ci < 4; ci++)
        for (int pi = 0; pi < 5; pi++) {
            const int n = cols[ci];
            if (quick && ci && (ci < 3 || (pi != 0 && pi != 4))) continue; /* quick: 8 columns at 511, 3967 */
            if (ncu && pi != 0 && pi != 4) continue;
            int32_t in[4 * MAXC];
            for (int c = 0; c < n; c++)
                in[c] = 0, in[n + c] = c, in[2 * n + c] = poss[pi], in[3 * n + c] = c;
            ck(cudaMemcpy(din, in, 4 * 4 * (size_t)n, cudaMemcpyHostToDevice), "H2D");
            g_pos_bucket = pos_bucket(poss[pi]);
            const stk_cols cl = {din, din + n, din + 2 * n, din + 3 * n};
            for (int var = 0; var < NV; var++) {
                if (!runs[var]) continue;
                stk_att_args a = {q,  q_cs, kc, vc, slot_stride,          sc, bm, st, den, tk, o, NCTX,
                                  NH, NKV,  D,  0,  0.08838834764831845f, cl};
                if (quick && n == 1 && var != 0 && var != 3 && var != 4 && var != 5 && var < 10) continue;
                if (quick && n > 1 && var != 0 && var < 16) continue;
                if (wide && !wide_var(var)) continue;
                int lf =
                    0; /* a refused launch (not a fault inside the kernel) drops the variant, not the run */
                for (int r = 0; r < (quick || ncu ? 1 : 5) && !lf; r++)
                    lf = launch(var, a, n) != FP4_OK;
                if (lf) {
                    printf("%s cols %d pos %d: launch failed (%s): FAIL, not run from here\n", names[var], n,
                           poss[pi], fp4_cuda_last_error());
                    (void)cudaGetLastError();
                    runs[var] = 0, bad = 1;
                    continue;
                }
                ck(cudaDeviceSynchronize(), "warm-up");
                ck(cudaMemcpy(var ? got : ref, o, sizeof(float) * n * NH * D, cudaMemcpyDeviceToHost), "D2H");
                if (var && memcmp(ref, got, sizeof(float) * n * NH * D)) {
                    printf("%s cols %d pos %d: outputs differ from old's\n", names[var], n, poss[pi]);
                    bad = 1;
                }
                ck(cudaEventRecord(e0), "record");
                for (int r = 0; r < reps; r++) {
                    a.kc = kc + (r % NL) * layer, a.vc = vc + (r % NL) * layer;
                    if (launch(var, a, n)) ck(cudaErrorUnknown, "launch");
                }
                ck(cudaEventRecord(e1), "record");
                ck(cudaEventSynchronize(e1), "sync");
                float ms = 0;
                ck(cudaEventElapsedTime(&ms, e0, e1), "elapsed");
                printf("| %s | %d | %d | %.2f |\n", names[var], n, poss[pi], 1000.0 * ms / reps);
            }
        }
    if (!wide) { /* the check pass: 1 column, the cluster variants against old at many positions */
        static const int cpos[] = {0,    1,    2,    31,   32,   33,   63,   64,   65,   127,  128,
                                   129,  255,  256,  257,  511,  512,  1023, 1024, 1025, 2047, 2048,
                                   2049, 2111, 3071, 3967, 4000, 4031, 4032, 4063, 4064, 4094, 4095};
        static const int cpos_q[] = {0, 33, 2049, 4095};
        const int ncp = quick ? 4 : (int)(sizeof cpos / sizeof cpos[0]);
        int checked = 0, differ = 0;
        for (int pi = 0; pi < ncp; pi++) {
            int32_t in[4] = {0, 0, quick ? cpos_q[pi] : cpos[pi], 0};
            ck(cudaMemcpy(din, in, sizeof in, cudaMemcpyHostToDevice), "H2D");
            g_pos_bucket = pos_bucket(in[2]);
            const stk_cols cl = {din, din + 1, din + 2, din + 3};
            const stk_att_args a = {q,  q_cs, kc, vc, slot_stride,          sc, bm, st, den, tk, o, NCTX,
                                    NH, NKV,  D,  0,  0.08838834764831845f, cl};
            for (int var = 0; var < NV; var++) {
                if (!runs[var] || (var != 0 && var != 4 && var != 5 && var < 10)) continue;
                ck(cudaMemset(o, 0xFF, sizeof(float) * NH * D), "memset"); /* NaNs: a missed write shows */
                ck(launch(var, a, 1) ? cudaErrorUnknown : cudaSuccess, "launch");
                ck(cudaDeviceSynchronize(), "check");
                ck(cudaMemcpy(var ? got : ref, o, sizeof(float) * NH * D, cudaMemcpyDeviceToHost), "D2H");
                if (var) {
                    checked++;
                    if (memcmp(ref, got, sizeof(float) * NH * D)) {
                        printf("check: %s pos %d: outputs differ from old's\n", names[var], in[2]);
                        differ++, bad = 1;
                    }
                }
            }
        }
        printf("check pass: %d (variant, position) cases against old, %d differ\n", checked, differ);
    }
    if (!ncu) { /* the wide check pass: 2, 4 and 8 columns, the wide variants against old; the columns'
                 * positions equal (pattern 0), falling by 29 a column (1), rising by 61 a column with the
                 * slots reversed (2) */
        static const int wbase[] = {0,   1,   31,  32,   33,   63,   64,   65,   127,  128,  255,  256,
                                    511, 512, 767, 1023, 1024, 2047, 2048, 2111, 3071, 3967, 4031, 4095};
        static const int wbase_q[] = {0, 511, 4095};
        const int nwb = quick ? 3 : (int)(sizeof wbase / sizeof wbase[0]);
        int checked = 0, differ = 0;
        for (int ci = quick ? 3 : 1; ci < 4; ci++)
            for (int pat = quick ? 1 : 0; pat < (quick ? 2 : 3); pat++)
                for (int pi = 0; pi < nwb; pi++) {
                    const int n = cols[ci], base = quick ? wbase_q[pi] : wbase[pi];
                    int32_t in[4 * MAXC];
                    for (int c = 0; c < n; c++) {
                        int p = pat == 0 ? base : pat == 1 ? base - 29 * c : base + 61 * c;
                        p = p < 0 ? 0 : p > NCTX - 1 ? NCTX - 1 : p;
                        in[c] = 0, in[n + c] = pat == 2 ? n - 1 - c : c, in[2 * n + c] = p, in[3 * n + c] = c;
                    }
                    ck(cudaMemcpy(din, in, 4 * 4 * (size_t)n, cudaMemcpyHostToDevice), "H2D");
                    const stk_cols cl = {din, din + n, din + 2 * n, din + 3 * n};
                    const stk_att_args a = {
                        q,  q_cs, kc, vc, slot_stride,          sc, bm, st, den, tk, o, NCTX,
                        NH, NKV,  D,  0,  0.08838834764831845f, cl};
                    const size_t ob = sizeof(float) * (size_t)n * NH * D;
                    for (int var = 0; var < NV; var++) {
                        if (!runs[var] || (var != 0 && var < 16)) continue;
                        ck(cudaMemset(o, 0xFF, ob), "memset"); /* NaNs: a missed write shows */
                        ck(launch(var, a, n) ? cudaErrorUnknown : cudaSuccess, "launch");
                        ck(cudaDeviceSynchronize(), "wide check");
                        ck(cudaMemcpy(var ? got : ref, o, ob, cudaMemcpyDeviceToHost), "D2H");
                        if (var) {
                            checked++;
                            if (memcmp(ref, got, ob)) {
                                printf(
                                    "wide check: %s cols %d pattern %d base %d: outputs differ from old's\n",
                                    names[var], n, pat, base);
                                differ++, bad = 1;
                            }
                        }
                    }
                }
        printf("wide check pass: %d (variant, columns, positions) cases against old, %d differ\n", checked,
               differ);
    }
    if (!quick && !wide) { /* pairs: attention + the o projection, 1 column */
        enum { NO = 8 };
        static fp4_cuda_tensor ow[NO];
        const int64_t n_o = NH * D;
        uint8_t *pay = (uint8_t *)malloc((size_t)(n_o * n_o / 2)),
                *scl = (uint8_t *)malloc((size_t)(n_o * n_o / 16));
        uint64_t r0 = 11;
        for (int64_t i = 0; i < n_o * n_o / 2; i += 8) {
            const uint64_t x = fp4_splitmix64(&r0);
            memcpy(pay + i, &x, 8);
        }
        for (int64_t i = 0; i < n_o * n_o / 16; i++)
            scl[i] = (uint8_t)(0x28 + fp4_splitmix64(&r0) % 0x38); /* finite E4M3FN scales */
        const fp4_nvfp4_view v = {pay, scl, 4.0e-3f, 0.0f, n_o, n_o, FP4_PACK_CANONICAL};
        for (int k = 0; k < NO; k++)
            ck(fp4_cuda_tensor_upload_nvfp4(&v, &ow[k]) ? cudaErrorUnknown : cudaSuccess, "upload o");
        free(pay), free(scl);
        fp4_cuda_scratch scr;
        ck(fp4_cuda_scratch_alloc(fp4_cuda_scratch_bytes(&ow[0], MAXC), &scr) ? cudaErrorUnknown
                                                                              : cudaSuccess,
           "scratch");
        float *dy;
        ck(cudaMalloc(&dy, sizeof(float) * n_o * MAXC), "malloc");
        static const int pvars[] = {-1, 3, 5, 10, 11, 13, 14, 15}, ppos[] = {511, 2047, 3967};
        printf("\n| pair: variant + o projection | columns | position | us per layer (attention + o) |\n"
               "|---|---|---|---|\n");
        for (int pi = 0; pi < 3; pi++) {
            int32_t in[4] = {0, 0, ppos[pi], 0};
            ck(cudaMemcpy(din, in, sizeof in, cudaMemcpyHostToDevice), "H2D");
            g_pos_bucket = pos_bucket(ppos[pi]);
            const stk_cols cl = {din, din + 1, din + 2, din + 3};
            for (int vi = 0; vi < (int)(sizeof pvars / sizeof pvars[0]); vi++) {
                const int var = pvars[vi];
                if (var >= 0 && !runs[var]) continue;
                stk_att_args a = {q,  q_cs, kc, vc, slot_stride,          sc, bm, st, den, tk, o, NCTX,
                                  NH, NKV,  D,  0,  0.08838834764831845f, cl};
                for (int r = -5; r < reps; r++) {
                    if (r == 0) ck(cudaEventRecord(e0), "record");
                    const int rr = r < 0 ? r + 5 : r;
                    a.kc = kc + (rr % NL) * layer, a.vc = vc + (rr % NL) * layer;
                    if (var >= 0 && launch(var, a, 1)) ck(cudaErrorUnknown, "launch");
                    if (fp4_cuda_project(&ow[rr % NO], FP4_MODE_EXACT, o, 1, dy, &scr, NULL))
                        ck(cudaErrorUnknown, fp4_cuda_last_error());
                }
                ck(cudaEventRecord(e1), "record");
                ck(cudaEventSynchronize(e1), "sync");
                float ms = 0;
                ck(cudaEventElapsedTime(&ms, e0, e1), "elapsed");
                printf("| pair: %s | 1 | %d | %.2f |\n",
                       var < 0 ? "o projection alone (exact, 4096 x 4096)" : names[var], ppos[pi],
                       1000.0 * ms / reps);
            }
        }
        /* session 12 (wide): 8 columns, the o projection native as the 8-sequence step runs it */
        static const int pvars8[] = {-1, 3, 8, 9, 16, 17, 18, 20, 21}, ppos8[] = {511, 3967};
        int pfail = 0;
        for (int pi = 0; pi < 2 && !pfail; pi++) {
            int32_t in[4 * MAXC];
            for (int c = 0; c < MAXC; c++)
                in[c] = 0, in[MAXC + c] = c, in[2 * MAXC + c] = ppos8[pi], in[3 * MAXC + c] = c;
            ck(cudaMemcpy(din, in, sizeof in, cudaMemcpyHostToDevice), "H2D");
            const stk_cols cl = {din, din + MAXC, din + 2 * MAXC, din + 3 * MAXC};
            for (int vi = 0; vi < (int)(sizeof pvars8 / sizeof pvars8[0]) && !pfail; vi++) {
                const int var = pvars8[vi];
                if (var >= 0 && !runs[var]) continue;
                stk_att_args a = {q,  q_cs, kc, vc, slot_stride,          sc, bm, st, den, tk, o, NCTX,
                                  NH, NKV,  D,  0,  0.08838834764831845f, cl};
                for (int r = -5; r < reps && !pfail; r++) {
                    if (r == 0) ck(cudaEventRecord(e0), "record");
                    const int rr = r < 0 ? r + 5 : r;
                    a.kc = kc + (rr % NL) * layer, a.vc = vc + (rr % NL) * layer;
                    if (var >= 0 && launch(var, a, MAXC)) ck(cudaErrorUnknown, "launch");
                    if (fp4_cuda_project(&ow[rr % NO], FP4_MODE_NATIVE, o, MAXC, dy, &scr, NULL)) {
                        printf("pair (8 columns): the o projection failed: %s\n", fp4_cuda_last_error());
                        pfail = 1;
                    }
                }
                ck(cudaEventRecord(e1), "record");
                ck(cudaEventSynchronize(e1), "sync");
                float ms = 0;
                ck(cudaEventElapsedTime(&ms, e0, e1), "elapsed");
                if (!pfail)
                    printf("| pair: %s | %d | %d | %.2f |\n",
                           var < 0 ? "o projection alone (native, 4096 x 4096)" : names[var], MAXC, ppos8[pi],
                           1000.0 * ms / reps);
            }
        }
        for (int k = 0; k < NO; k++)
            fp4_cuda_tensor_free(&ow[k]);
        fp4_cuda_scratch_free(&scr);
        cudaFree(dy);
    }
    printf(bad ? "FAIL: outputs differ\n" : "all variants bit-identical to old\n");
    return bad;
}
