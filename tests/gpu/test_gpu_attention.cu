/* test_gpu_attention.cu — the decode step's attention on the GPU (stk_attention of
 * src/cuda/step/step_kernels.cuh: the launcher the CUDA step calls, both kernels and their grid
 * planner) against pinned.h's fp4p_attend (the CPU step's attention) bit for bit, every output
 * of every (column, head). The runtime tests reach it only through the tiny checkpoints (head_dim
 * 64, two query heads per KV head, at most 2300 positions); here the shapes of the real models:
 * head_dim 32/64/128/256, GQA groups of 1, 2, 4, 7 (a partial head group) and 8 (two groups per
 * KV head), up to 9000 positions, so every loop boundary of the kernels is crossed: positions
 * around multiples of 32 (lanes), of a team round (64 per score block) and of the score grid's
 * stride (several trips per team, the prefetched next row), lanes with no position, partial and
 * wrapped pipeline chunks of stk_att_pv (more chunks than stages). 1, 3 and 8 columns at
 * different positions in different slots, and 8 columns of one slot (a prefill chunk); the
 * launcher runs twice per case (the ticket reset: same bits again). FP4_GPU_QUICK=1: fewer
 * shapes and shorter contexts. The inputs: q and K normal (K scaled so the scores spread over
 * tens of units: the exp range), V normal, with -0.0 and f16 subnormals sprinkled in. */
#include "gpu_test.h"
#include "cuda/step/att_cluster.cuh"
#include "cuda/step/att_gemm.cuh"
#include "cuda/step/att_tiled.cuh"
#include "cuda/step/step_kernels.cuh"
#include <string.h>

typedef struct att_shape {
    int d, nh, nkv;
    int64_t n_ctx;
} att_shape;

enum { MAX_SLOTS = 8 };
static int n_cluster_cases; /* cases the cluster kernels ran (none on a GPU before sm_90) */
static int n_tiled_cases;   /* cases att_tiled.cuh's kernel ran */

/* one shape's KV cache (MAX_SLOTS slots, every row filled), on the host and on the device */
typedef struct att_kv {
    const att_shape *sh;
    int64_t kvd, slot_stride;
    size_t n;
    uint16_t *kc, *vc, *d_kc, *d_vc;
} att_kv;

/* about normal (three uniforms summed) times sd, with -0.0 and f16 subnormals sprinkled in */
static uint16_t f16_of(test_rng *r, float sd, size_t i) {
    const uint64_t x = rng_u64(r);
    const float u = (float)(x & 0xFFFF) + (float)((x >> 16) & 0xFFFF) + (float)((x >> 32) & 0xFFFF);
    float f = (u - 98302.5f) / 32768.0f * sd;
    if (i % 97 == 0) f = -0.0f;
    if (i % 89 == 0) f = 3e-6f * (float)(i % 7) - 1e-5f;
    return fp4p_f32_to_f16(f);
}

static int kv_make(att_kv *kv, const att_shape *sh) {
    memset(kv, 0, sizeof *kv);
    kv->sh = sh;
    kv->kvd = (int64_t)sh->nkv * sh->d;
    kv->slot_stride = sh->n_ctx * kv->kvd;
    kv->n = (size_t)(MAX_SLOTS * kv->slot_stride);
    kv->kc = (uint16_t *)malloc(kv->n * 2), kv->vc = (uint16_t *)malloc(kv->n * 2);
    test_rng r = {(uint64_t)(sh->d * 1000003 + sh->nh * 1009 + sh->nkv * 17 + sh->n_ctx)};
    const float ksd = 2.5f / sqrtf(sqrtf((float)sh->d)); /* scores of a few units */
    for (size_t i = 0; i < kv->n; i++)
        kv->kc[i] = f16_of(&r, ksd, i), kv->vc[i] = f16_of(&r, 1.0f, i + 13);
    kv->d_kc = (uint16_t *)gt_dev(kv->n * 2), kv->d_vc = (uint16_t *)gt_dev(kv->n * 2);
    if (!kv->d_kc || !kv->d_vc) return -1;
    gt_up(kv->d_kc, kv->kc, kv->n * 2);
    gt_up(kv->d_vc, kv->vc, kv->n * 2);
    return 0;
}

static void kv_free(att_kv *kv) {
    cudaFree(kv->d_kc), cudaFree(kv->d_vc);
    free(kv->kc), free(kv->vc);
}

/* ncol columns: column c in slot slot[c] at position pos[c] */
static void att_case(const att_kv *kv, int ncol, const int32_t *slot, const int32_t *pos) {
    const att_shape *sh = kv->sh;
    const int D = sh->d, NH = sh->nh, NKV = sh->nkv, G = NH / NKV;
    const int64_t kvd = kv->kvd, n_ctx = sh->n_ctx, slot_stride = kv->slot_stride;
    const int64_t q_cs = (int64_t)NH * D + 2 * kvd; /* the fused q/k/v rows of the step */
    for (int c = 0; c < ncol; c++)
        if (pos[c] < 0 || pos[c] >= n_ctx || slot[c] < 0 || slot[c] >= MAX_SLOTS) { /* a case out of range */
            CHECK_MSG(0, "case column %d: position %d slot %d outside %lld x %d", c, pos[c], slot[c],
                      (long long)n_ctx, MAX_SLOTS);
            return;
        }
    test_rng r = {(uint64_t)(D * 7919 + NH * 31 + ncol * 5 + pos[0] * 3 + pos[ncol - 1])};
    float *q = (float *)malloc(sizeof(float) * (size_t)(ncol * q_cs));
    for (int64_t i = 0; i < ncol * q_cs; i++)
        q[i] = rng_normal(&r);
    const float scale = (float)(1.0 / sqrt((double)D));
    /* the CPU: fp4p_attend per (column, head) */
    float *want = (float *)malloc(sizeof(float) * (size_t)(ncol * NH * D));
    float *sbuf = (float *)malloc(sizeof(float) * (size_t)n_ctx);
    for (int c = 0; c < ncol; c++)
        for (int h = 0; h < NH; h++) {
            const int64_t at = slot[c] * slot_stride + (h / G) * D;
            fp4p_attend(q + c * q_cs + h * D, kv->kc + at, kv->vc + at, kvd, (int64_t)pos[c] + 1, D, scale,
                        sbuf, want + ((int64_t)c * NH + h) * D);
        }
    /* the GPU: the step's scratch buffers, sized as the step sizes them (fp4_cu_step_scratch_list) */
    float *d_q = gt_dev_floats(q, ncol * q_cs);
    float *d_sc = gt_dev_poison(stk_att_groups(ncol, NH, NKV) * STK_GB * n_ctx),
          *d_bmax = gt_dev_poison(ncol * NH * STK_MAX_GX);
    float *d_st = gt_dev_poison(ncol * NH * STK_LANES * D), *d_den = gt_dev_poison(ncol * NH * STK_LANES);
    float *d_o = gt_dev_poison(ncol * NH * D);
    unsigned *d_tk = (unsigned *)gt_dev((size_t)(ncol * NH) * 4);
    int32_t *d_in = (int32_t *)gt_dev((size_t)(4 * ncol) * 4);
    float *got = (float *)malloc(sizeof(float) * (size_t)(ncol * NH * D));
    if (d_q && d_sc && d_bmax && d_st && d_den && d_o && d_tk && d_in) {
        cudaMemset(d_tk, 0, (size_t)(ncol * NH) * 4);
        int32_t *in = (int32_t *)calloc((size_t)(4 * ncol), 4);
        for (int c = 0; c < ncol; c++)
            in[ncol + c] = slot[c], in[2 * ncol + c] = pos[c], in[3 * ncol + c] = c;
        gt_up(d_in, in, (size_t)(4 * ncol) * 4);
        free(in);
        const stk_cols cols = {d_in, d_in + ncol, d_in + 2 * ncol, d_in + 3 * ncol};
        const stk_att_args a = {d_q,  q_cs, kv->d_kc, kv->d_vc, slot_stride, d_sc, d_bmax, d_st,  d_den,
                                d_tk, d_o,  n_ctx,    NH,       NKV,         D,    0,      scale, cols};
        char what[160];
        for (int rep = 0; rep < 2; rep++) {
            CHECK_OK(stk_attention(a, ncol, 0));
            gt_sync("stk_attention");
            gt_down(got, d_o, sizeof(float) * (size_t)(ncol * NH * D));
            snprintf(what, sizeof what, "attention d %d heads %d/%d ctx %lld cols %d pos %d..%d%s", D, NH,
                     NKV, (long long)n_ctx, ncol, pos[0], pos[ncol - 1], rep ? " (again)" : "");
            gt_cmp_bits(what, want, got, (int64_t)ncol * NH * D);
            cudaMemset(d_o, 0xFF, sizeof(float) * (size_t)(ncol * NH * D));
        }
        static const int cl_var[5][2] = {{8, 0}, {16, 0}, {16, 1}, {4, 0}, {2, 0}}; /* (size, blocks/SM) */
        const fp4_status ts = att_tiled(a, ncol, 0); /* one launch a column: D 64 and 128 */
        if (ts != FP4_ERR_UNSUPPORTED) {
            CHECK_OK(ts);
            gt_sync("att_tiled");
            gt_down(got, d_o, sizeof(float) * (size_t)(ncol * NH * D));
            snprintf(what, sizeof what, "tiled attention d %d heads %d/%d ctx %lld cols %d pos %d..%d", D, NH,
                     NKV, (long long)n_ctx, ncol, pos[0], pos[ncol - 1]);
            gt_cmp_bits(what, want, got, (int64_t)ncol * NH * D);
            cudaMemset(d_o, 0xFF, sizeof(float) * (size_t)(ncol * NH * D));
            n_tiled_cases++;
        }
        for (int vi = 0; vi < 5 && ncol <= 8; vi++) { /* the one-launch cluster kernels, where they run */
            const int cs = cl_var[vi][0], bps = cl_var[vi][1];
            if (att_cluster_pick(D, n_ctx, cs) != cs) continue;
            CHECK_OK(att_cluster(a, ncol, cs, bps, 0));
            gt_sync("att_cluster");
            gt_down(got, d_o, sizeof(float) * (size_t)(ncol * NH * D));
            snprintf(what, sizeof what,
                     "cluster %d/%d attention d %d heads %d/%d ctx %lld cols %d pos %d..%d", cs, bps, D, NH,
                     NKV, (long long)n_ctx, ncol, pos[0], pos[ncol - 1]);
            gt_cmp_bits(what, want, got, (int64_t)ncol * NH * D);
            cudaMemset(d_o, 0xFF, sizeof(float) * (size_t)(ncol * NH * D));
            n_cluster_cases++;
        }
        unsigned *tk = (unsigned *)malloc((size_t)(ncol * NH) * 4);
        gt_down(tk, d_tk, (size_t)(ncol * NH) * 4);
        int dirty = 0;
        for (int i = 0; i < ncol * NH; i++)
            dirty += tk[i] != 0;
        CHECK_MSG(dirty == 0, "%d attention tickets left set", dirty);
        free(tk);
    }
    cudaFree(d_q), cudaFree(d_sc), cudaFree(d_bmax), cudaFree(d_st), cudaFree(d_den), cudaFree(d_o);
    cudaFree(d_tk), cudaFree(d_in);
    free(q), free(want), free(sbuf), free(got);
}

/* native prefill attention through cuBLAS (att_gemm.cuh): a run of m columns of slot `slot` at
 * positions p0 .. p0+m-1 against fp4p_attend, within GEMM_ATT_NRMSE of it over all outputs (f16 q
 * and probabilities: relative errors of 2^-11 each), every output finite; twice the same bits. big:
 * q times 1e6 (f32 scores past f16's range: the power-of-two scaling keeps q16 finite; the softmax
 * is then a near one-hot whose ties f16 may break differently), only finiteness checked */
#define GEMM_ATT_NRMSE 3e-3
static void gemm_case(const att_kv *kv, int32_t slot, int32_t p0, int32_t m, int big) {
    const att_shape *sh = kv->sh;
    const int D = sh->d, NH = sh->nh, NKV = sh->nkv, G = NH / NKV;
    const int64_t kvd = kv->kvd, q_cs = (int64_t)NH * D + 2 * kvd, ld = att_gemm_ld(sh->n_ctx);
    if (p0 + m > sh->n_ctx) {
        CHECK_MSG(0, "gemm case p0 %d m %d past n_ctx %lld", p0, m, (long long)sh->n_ctx);
        return;
    }
    test_rng r = {(uint64_t)(D * 31 + NH * 7 + p0 * 3 + m)};
    float *q = (float *)malloc(sizeof(float) * (size_t)(m * q_cs));
    for (int64_t i = 0; i < m * q_cs; i++)
        q[i] = rng_normal(&r) * (big ? 1.0e6f : 1.0f);
    const float scale = (float)(1.0 / sqrt((double)D));
    float *want = (float *)malloc(sizeof(float) * (size_t)(m * NH * D));
    float *sbuf = (float *)malloc(sizeof(float) * (size_t)sh->n_ctx);
    for (int c = 0; c < m; c++)
        for (int h = 0; h < NH; h++) {
            const int64_t at = slot * kv->slot_stride + (h / G) * D;
            fp4p_attend(q + c * q_cs + h * D, kv->kc + at, kv->vc + at, kvd, (int64_t)p0 + c + 1, D, scale,
                        sbuf, want + ((int64_t)c * NH + h) * D);
        }
    float *d_q = gt_dev_floats(q, m * q_cs), *d_o = gt_dev_poison((int64_t)m * NH * D);
    float *d_s = gt_dev_poison((int64_t)NH * m * ld), *d_qs = gt_dev_poison((int64_t)NH * m);
    __half *d_q16 = (__half *)gt_dev((size_t)(NH * m * D) * 2);
    __half *d_p = (__half *)gt_dev((size_t)(NH * m * ld) * 2);
    float *got = (float *)malloc(sizeof(float) * (size_t)(m * NH * D));
    float *again = (float *)malloc(sizeof(float) * (size_t)(m * NH * D));
    if (d_q && d_o && d_s && d_qs && d_q16 && d_p) {
        const int64_t at = slot * kv->slot_stride;
        const att_gemm_args a = {
            d_q, q_cs, kv->d_kc + at, kv->d_vc + at, d_o, d_q16, d_qs, d_s, d_p, ld, p0, m, NH,
            NKV, D,    scale};
        char what[160];
        snprintf(what, sizeof what, "gemm attention d %d heads %d/%d cols %d at %d..%d%s", D, NH, NKV, m, p0,
                 p0 + m - 1, big ? " (q x 1e6)" : "");
        CHECK_OK(att_gemm_run(a, 0));
        gt_sync(what);
        gt_down(got, d_o, sizeof(float) * (size_t)(m * NH * D));
        CHECK_OK(att_gemm_run(a, 0));
        gt_sync(what);
        gt_down(again, d_o, sizeof(float) * (size_t)(m * NH * D));
        double num = 0.0, den = 0.0;
        int64_t bad = 0;
        for (int64_t i = 0; i < (int64_t)m * NH * D; i++) {
            bad += !isfinite(got[i]);
            num += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
            den += (double)want[i] * want[i];
        }
        const double e = den > 0 ? sqrt(num / den) : sqrt(num);
        CHECK_MSG(bad == 0 && (big || e <= GEMM_ATT_NRMSE), "%s: nrmse %.2e (bound %.0e), %lld not finite",
                  what, e, GEMM_ATT_NRMSE, (long long)bad);
        CHECK_MSG(memcmp(got, again, sizeof(float) * (size_t)(m * NH * D)) == 0, "%s: two runs differ", what);
        printf("%s: nrmse %.2e\n", what, e);
    }
    cudaFree(d_q), cudaFree(d_o), cudaFree(d_s), cudaFree(d_qs), cudaFree(d_q16), cudaFree(d_p);
    free(q), free(want), free(sbuf), free(got), free(again);
}

/* the column sets of one shape: one column at each listed position below n_ctx and at the last,
 * then 3 and 8 columns in their own slots, then 8 columns of one slot at consecutive positions */
static void shape_cases(const att_shape *sh, const int32_t *singles, int ns) {
    att_kv kv;
    if (kv_make(&kv, sh) == 0) {
        const int32_t last = (int32_t)sh->n_ctx - 1;
        const int32_t zero[MAX_SLOTS] = {0}, own[MAX_SLOTS] = {0, 1, 2, 3, 4, 5, 6, 7};
        for (int i = 0; i < ns; i++)
            if (singles[i] < last) att_case(&kv, 1, own + (i % MAX_SLOTS), &singles[i]);
        att_case(&kv, 1, zero, &last);
        const int32_t p3[3] = {last, 0, last / 2 + 33};
        att_case(&kv, 3, own + 5, p3);
        if (!gt_quick()) {
            /* every position below n_ctx (the smallest shape has 2100): fp4p_attend's score buffer and
             * the KV slot hold n_ctx positions */
            const int32_t p8[8] = {31,        last,
                                   32,        1055,
                                   last - 32, 4159 < last ? 4159 : last - 1,
                                   2,         2111 < last ? 2111 : last - 3};
            att_case(&kv, 8, own, p8);
            int32_t pf[8];
            for (int i = 0; i < 8; i++)
                pf[i] = last - 7 + i;
            att_case(&kv, 8, zero, pf);
        }
        { /* a prefill step of one slot (what att_tiled serves in the step): a whole 512-column one on
           * the llama3-8b shape from position 0, 24 columns deep elsewhere */
            const int llama8 = sh->d == 128 && sh->nh == 32 && sh->nkv == 8, m = llama8 ? 512 : 24;
            int32_t *ps = (int32_t *)calloc((size_t)m, 4), *ss = (int32_t *)calloc((size_t)m, 4);
            for (int i = 0; i < m; i++)
                ps[i] = llama8 ? i : last - m + 1 + i, ss[i] = 2;
            att_case(&kv, m, ss, ps);
            free(ps), free(ss);
        }
        /* the native prefill route: runs from the first position and deep (the CPU reference costs
         * columns x heads x positions, so short runs where the context is long) */
        if (fp4_cu_gemm_available()) {
            /* a whole 512-column prefill step on the llama3-8b shape, 96 columns elsewhere (the
             * reference's cost: the test ran 81 s on the H200 with 512 everywhere) */
            const int llama8 = sh->d == 128 && sh->nh == 32 && sh->nkv == 8;
            gemm_case(&kv, 3, 0, gt_quick() ? 64 : llama8 ? 512 : 96, 0);
            gemm_case(&kv, 6, (int32_t)sh->n_ctx - 67, 67, 0);
            gemm_case(&kv, 1, 100, 70, 1);
        } else
            printf("gemm attention: cuBLAS not loaded or FP4LANE_CUDA_GEMM=0, cases skipped\n");
    }
    kv_free(&kv);
}

int main(void) {
    GT_REQUIRE_DEVICE();
    /* llama3-8b (d 128, G 4), the test checkpoints' shape (d 64, G 2), qwen2-7b's G 7, llama3-70b's
     * G 8, G 1 at d 32, d 256 */
    static const att_shape full[] = {{128, 32, 8, 4700}, {64, 4, 2, 9000},   {128, 28, 4, 4300},
                                     {64, 14, 2, 2400},  {128, 64, 8, 2200}, {32, 2, 2, 2100},
                                     {256, 8, 2, 2600}};
    static const att_shape quick[] = {{128, 32, 8, 4400}, {64, 4, 2, 1300}, {128, 28, 4, 700}};
    static const int32_t singles[] = {0,    1,    30,   31,   32,   33,   63,   64,   65,
                                      127,  1023, 1024, 1025, 2111, 2112, 2113, 4095, 4096,
                                      4097, 4223, 4224, 4225, 8191, 8192, 8999};
    static const int32_t singles_q[] = {0, 33, 4097, 4399};
    const int q = gt_quick();
    const int nsh = q ? 3 : (int)(sizeof full / sizeof full[0]);
    for (int i = 0; i < nsh; i++) {
        const att_shape *sh = q ? &quick[i] : &full[i];
        if (q)
            shape_cases(sh, singles_q, 4);
        else
            shape_cases(sh, singles, (int)(sizeof singles / sizeof singles[0]));
    }
    printf("cluster attention cases: %d, tiled: %d\n", n_cluster_cases, n_tiled_cases);
    CHECK_MSG(n_tiled_cases > 0, "no case ran att_tiled");
    CHECK_MSG(!fp4_cu_sm90_code() || n_cluster_cases > 0,
              "no case ran the cluster kernels on a device that runs the sm_90a code");
    return check_report();
}
