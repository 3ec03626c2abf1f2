/* test_gpu_moe.cu — the experts' projection of the CUDA MoE step (src/cuda/moe_experts.cu) against
 * the CPU oracle, bit for bit: E experts of one part in one allocation (the step's layout, each
 * expert its own scale2), a step's (column, choice) pairs choosing experts through device memory,
 * with the gate/up form (input column = pair / K) and the down form (one input per pair), one
 * part or two in one launch, the pairs visited in another order, grouped by expert
 * (FP4_CU_MOE_GROUPED: runs of 4, 2, 1 columns), from a given Q8_K pass; y of every pair equals
 * the one-column fp4_nvfp4_matvec_a16_exact of the chosen expert (NVFP4 W4A16 exact, random and
 * adversarial weights and activations, scale2 that differ per expert), is within the native
 * bound of fp4_nvfp4_matvec_a16_float (native: the same bits in every form) and equals fp4p_dot of
 * the widened rows (BF16 and F16: the CPU's dense.pinned). fp4_cu_moe_group's table is the stable
 * sort of the pairs by expert and the chosen experts' runs, as the host computes them.
 * The routing and the combine are step kernels (moe.cuh): test_gpu_runtime's MoE cases. */
#include "cuda/moe_experts.cuh"
#include "format/pinned.h"
#include "gpu_test.h"

/* every pair of an nvfp4_case: exact, fp4_nvfp4_matvec_a16_exact's bits; native, within
 * NATIVE_NRMSE_MAX of the float reference (test_gpu_native's bound for the native routes) */
#define NATIVE_NRMSE_MAX 2e-3
static void nvfp4_check(const char *what, int native, const float *want, const float *got, int64_t P,
                        int64_t n_out) {
    if (!native) {
        gt_cmp_bits(what, want, got, P * n_out);
        return;
    }
    double e = 0.0;
    int64_t nan = 0;
    for (int64_t k = 0; k < P * n_out; k++)
        nan += got[k] != got[k];
    for (int64_t i = 0; i < P; i++) {
        const double ei = fp4_nrmse(got + i * n_out, want + i * n_out, n_out);
        e = ei > e ? ei : e;
    }
    CHECK_MSG(nan == 0 && e < NATIVE_NRMSE_MAX, "%s: nrmse %.3g, %lld unwritten", what, e, (long long)nan);
}

/* the group table of fp4_cu_moe_group for these choices, on the host (moe_experts.cuh) */
static int64_t host_groups(const int32_t *sel, int64_t P, int64_t E, int32_t *g) {
    int64_t k = 0, G = 0;
    for (int64_t e = 0; e < E; e++) {
        const int64_t first = k;
        for (int64_t i = 0; i < P; i++)
            if (sel[i] == e) g[1 + k++] = (int32_t)i;
        if (k > first) {
            int32_t *t = g + 1 + P + 3 * G++;
            t[0] = (int32_t)e, t[1] = (int32_t)first, t[2] = (int32_t)(k - first);
        }
    }
    g[0] = (int32_t)G;
    return 1 + P + 3 * G;
}

/* NVFP4 experts [n_out, n_in]; pairs = n_cols * K; down: one input per pair; native: SPEC §6 */
static void nvfp4_case(int64_t E, int64_t n_out, int64_t n_in, int n_cols, int K, int down, int kind,
                       int native, uint64_t seed) {
    test_rng r = {seed};
    gt_nvfp4 *w = (gt_nvfp4 *)calloc((size_t)E, sizeof *w);
    float *s2 = (float *)malloc(sizeof(float) * (size_t)E);
    for (int64_t e = 0; e < E; e++)
        gt_make_nvfp4(&w[e], n_out, n_in, ldexpf(1.0f + (float)e / 7.0f, -(int)(e % 5)), 0.0f, kind,
                      seed + e);
    fp4_cu_moe_part p;
    CHECK(fp4_cu_moe_part_stub(FP4_TYPE_NVFP4_E2M1, n_out, n_in, 0.0f, E, &p) == 0);
    p.native = native;
    const size_t bytes = (size_t)(E * (p.e_pbytes + p.e_sbytes));
    uint8_t *arena = (uint8_t *)gt_dev(bytes);
    cudaMemset(arena, 0, bytes);
    for (int64_t e = 0; e < E; e++) {
        s2[e] = w[e].view.scale2;
        for (int64_t row = 0; row < n_out; row++) {
            gt_up(arena + e * p.e_pbytes + row * p.payload_stride, w[e].payload + row * (n_in / 2),
                  (size_t)(n_in / 2));
            gt_up(arena + E * p.e_pbytes + e * p.e_sbytes + row * p.scale_stride,
                  w[e].scales + row * (n_in / 16), (size_t)(n_in / 16));
        }
    }
    p.d_payload = arena, p.d_scales = arena + E * p.e_pbytes;
    p.d_scale2 = gt_dev_floats(s2, E);
    const int64_t P = (int64_t)n_cols * K, nx = down ? P : n_cols, xdiv = down ? 1 : K;
    int32_t *sel = (int32_t *)malloc(sizeof(int32_t) * (size_t)P);
    for (int64_t i = 0; i < P; i++) /* down: groups of every size; gate: K distinct experts a column */
        sel[i] = (int32_t)(down ? rng_u64(&r) % (uint64_t)(E < 3 ? E : 3) : (i % K + i / K) % E);
    sel[0] = (int32_t)(E - 1); /* the last expert's rows are read too */
    float *x = (float *)malloc(sizeof(float) * (size_t)(nx * n_in)),
          *want = (float *)malloc(sizeof(float) * (size_t)(P * n_out)),
          *got = (float *)malloc(sizeof(float) * (size_t)(P * n_out)),
          *again = (float *)malloc(sizeof(float) * (size_t)(P * n_out));
    gt_make_act(x, nx * n_in, kind, seed ^ 0x77);
    for (int64_t i = 0; i < P; i++)
        CHECK_OK(
            native
                ? fp4_nvfp4_matvec_a16_float(&w[sel[i]].view, x + (i / xdiv) * n_in, 1, want + i * n_out, 1)
                : fp4_nvfp4_matvec_a16_exact(&w[sel[i]].view, x + (i / xdiv) * n_in, 1, want + i * n_out, 1));
    int32_t *dsel = (int32_t *)gt_dev(sizeof(int32_t) * (size_t)P);
    gt_up(dsel, sel, sizeof(int32_t) * (size_t)P);
    float *dx = gt_dev_floats(x, nx * n_in), *dy = gt_dev_poison(P * n_out);
    const size_t sb = fp4_cu_moe_scratch_bytes(&p, nx);
    void *scr = gt_dev(sb);
    /* a group table whose order is a random permutation: ORDERED visits the pairs in it, no bit changes */
    const int64_t gi = fp4_cu_moe_group_ints(P, E);
    int32_t *perm = (int32_t *)calloc((size_t)gi, sizeof(int32_t));
    for (int64_t i = 0; i < P; i++)
        perm[1 + i] = (int32_t)i;
    for (int64_t i = P - 1; i > 0; i--) {
        const int64_t j = (int64_t)(rng_u64(&r) % (uint64_t)(i + 1));
        const int32_t t = perm[1 + i];
        perm[1 + i] = perm[1 + j], perm[1 + j] = t;
    }
    int32_t *dperm = (int32_t *)gt_dev(sizeof(int32_t) * (size_t)gi),
            *dgrp = (int32_t *)gt_dev(sizeof(int32_t) * (size_t)gi);
    gt_up(dperm, perm, sizeof(int32_t) * (size_t)gi);
    CHECK_OK(fp4_cu_moe_group(dsel, P, E, dgrp, 0));
    float *dy2 = gt_dev_poison(P * n_out);
    char what[200];
    /* run 0: one part, pair order; 1: visited in the permuted order; 2: two parts in one launch
     * (both p), grouped by expert; 3: one part, grouped; 4 (down form, exact): from a given Q8_K
     * pass, grouped. Native: run 0 against the float reference, every other run bit for bit against
     * run 0 (a column's bits never depend on its group) */
    const int runs = down && !native ? 5 : 4;
    for (int run = 0; run < runs; run++) {
        cudaMemset(dy, 0xFF, sizeof(float) * (size_t)(P * n_out));
        cudaMemset(dy2, 0xFF, sizeof(float) * (size_t)(P * n_out));
        const fp4_cu_moe_part *pp[2] = {&p, &p};
        float *ys[2] = {dy, dy2};
        const int how = run == 0 ? FP4_CU_MOE_PAIRS : run == 1 ? FP4_CU_MOE_ORDERED : FP4_CU_MOE_GROUPED;
        if (run < 4) {
            CHECK_OK(fp4_cu_moe_project(pp, run == 2 ? 2 : 1, dsel,
                                        run == 0   ? NULL
                                        : run == 1 ? dperm
                                                   : dgrp,
                                        how, P, xdiv, dx, ys, scr, sb, 0));
        } else { /* the down form only: one input per pair */
            int8_t *q;
            float *d;
            fp4_cu_moe_act_planes(&p, nx, scr, &q, &d);
            CHECK_OK(fp4_cu_q8k_quantize(dx, n_in, n_in, nx, q, d, NULL, 0, 0));
            CHECK_OK(fp4_cu_moe_project_pre(&p, dsel, dgrp, FP4_CU_MOE_GROUPED, P, q, d, dy, 0));
        }
        gt_sync("moe nvfp4");
        gt_down(run ? again : got, dy, sizeof(float) * (size_t)(P * n_out));
        snprintf(what, sizeof what, "moe nvfp4 %s E%lld %lldx%lld cols %d K %d %s kind %d run %d",
                 native ? "native" : "exact", (long long)E, (long long)n_out, (long long)n_in, n_cols, K,
                 down ? "down" : "gate", kind, run);
        if (run == 0 || !native)
            nvfp4_check(what, native, want, run ? again : got, P, n_out);
        else
            gt_cmp_bits(what, got, again, P * n_out);
        if (run == 2) {
            gt_down(again, dy2, sizeof(float) * (size_t)(P * n_out));
            gt_cmp_bits("moe nvfp4 second part", native ? got : want, again, P * n_out);
        }
    }
    /* a scratch too small is refused, nothing launched; native has no given-pass form */
    float *ys1[1] = {dy};
    const fp4_cu_moe_part *p1[1] = {&p};
    CHECK(fp4_cu_moe_project(p1, 1, dsel, NULL, FP4_CU_MOE_PAIRS, P, xdiv, dx, ys1, scr, sb - 1, 0) ==
          FP4_ERR_INVALID_ARG);
    CHECK(fp4_cu_moe_project(p1, 1, dsel, NULL, FP4_CU_MOE_GROUPED, P, xdiv, dx, ys1, scr, sb, 0) ==
          FP4_ERR_INVALID_ARG); /* grouped without a table */
    if (native) {
        int8_t *q;
        float *d;
        fp4_cu_moe_act_planes(&p, nx, scr, &q, &d);
        CHECK(fp4_cu_moe_project_pre(&p, dsel, dgrp, FP4_CU_MOE_GROUPED, P, q, d, dy, 0) ==
              FP4_ERR_UNSUPPORTED);
        CHECK(!strcmp(fp4_cu_moe_part_route(&p), "moe.nvfp4.a16.native.dp2a"));
    }
    cudaFree(dperm), cudaFree(dgrp), cudaFree(dy2);
    free(perm);
    cudaFree(arena), cudaFree((void *)p.d_scale2), cudaFree(dsel), cudaFree(dx), cudaFree(dy), cudaFree(scr);
    for (int64_t e = 0; e < E; e++)
        gt_free_nvfp4(&w[e]);
    free(w), free(s2), free(sel), free(x), free(want), free(got), free(again);
}

static float widen(uint16_t h, int bf16) {
    if (bf16) {
        const uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    return fp4p_f16_to_f32(h);
}

static void dense_case(int bf16, int64_t E, int64_t n_out, int64_t n_in, int n_cols, int K, uint64_t seed) {
    test_rng r = {seed};
    fp4_cu_moe_part p;
    const int64_t type = bf16 ? FP4_TYPE_BF16 : FP4_TYPE_F16;
    CHECK(fp4_cu_moe_part_stub(type, n_out, n_in, 0.0f, E, &p) == 0);
    const int64_t nw = E * n_out * n_in;
    uint16_t *hw = (uint16_t *)malloc(sizeof(uint16_t) * (size_t)nw);
    for (int64_t i = 0; i < nw; i++) /* finite values of both signs: exponents near 1 */
        hw[i] = bf16 ? (uint16_t)(0x3C00u + (rng_u64(&r) & 0x3FFu)) ^ (uint16_t)((rng_u64(&r) & 1) << 15)
                     : (uint16_t)(0x3000u + (rng_u64(&r) & 0x1FFFu)) ^ (uint16_t)((rng_u64(&r) & 1) << 15);
    uint16_t *dw = (uint16_t *)gt_dev(sizeof(uint16_t) * (size_t)nw);
    gt_up(dw, hw, sizeof(uint16_t) * (size_t)nw);
    p.d_payload = (const uint8_t *)dw;
    const int64_t P = (int64_t)n_cols * K;
    int32_t *sel = (int32_t *)malloc(sizeof(int32_t) * (size_t)P);
    for (int64_t i = 0; i < P; i++)
        sel[i] = (int32_t)(rng_u64(&r) % (uint64_t)E);
    float *x = (float *)malloc(sizeof(float) * (size_t)(n_cols * n_in)),
          *want = (float *)malloc(sizeof(float) * (size_t)(P * n_out)),
          *got = (float *)malloc(sizeof(float) * (size_t)(P * n_out)),
          *row = (float *)malloc(sizeof(float) * (size_t)n_in);
    gt_make_act(x, n_cols * n_in, 0, seed ^ 0x99);
    for (int64_t i = 0; i < P; i++)
        for (int64_t o = 0; o < n_out; o++) {
            for (int64_t k = 0; k < n_in; k++)
                row[k] = widen(hw[(sel[i] * n_out + o) * n_in + k], bf16);
            want[i * n_out + o] = fp4p_dot(row, x + (i / K) * n_in, n_in);
        }
    int32_t *dsel = (int32_t *)gt_dev(sizeof(int32_t) * (size_t)P);
    gt_up(dsel, sel, sizeof(int32_t) * (size_t)P);
    float *dx = gt_dev_floats(x, n_cols * n_in), *dy = gt_dev_poison(P * n_out);
    const fp4_cu_moe_part *pp[1] = {&p};
    float *ys[1] = {dy};
    CHECK_OK(fp4_cu_moe_project(pp, 1, dsel, NULL, FP4_CU_MOE_PAIRS, P, K, dx, ys, NULL, 0, 0));
    gt_sync("moe dense");
    gt_down(got, dy, sizeof(float) * (size_t)(P * n_out));
    char what[128];
    snprintf(what, sizeof what, "moe %s E%lld %lldx%lld cols %d K %d", bf16 ? "bf16" : "f16", (long long)E,
             (long long)n_out, (long long)n_in, n_cols, K);
    gt_cmp_bits(what, want, got, P * n_out);
    cudaFree(dw), cudaFree(dsel), cudaFree(dx), cudaFree(dy);
    free(hw), free(sel), free(x), free(want), free(got), free(row);
}

/* the group table: the pairs stably sorted by expert, then (expert, first, count) per chosen expert */
static void group_case(int64_t P, int64_t E, uint64_t seed) {
    test_rng r = {seed};
    const int64_t gi = fp4_cu_moe_group_ints(P, E);
    int32_t *sel = (int32_t *)malloc(sizeof(int32_t) * (size_t)P), *got = (int32_t *)calloc((size_t)gi, 4),
            *want = (int32_t *)calloc((size_t)gi, 4);
    for (int64_t i = 0; i < P; i++)
        sel[i] = (int32_t)(rng_u64(&r) % (uint64_t)E);
    const int64_t used = host_groups(sel, P, E, want);
    CHECK(used <= gi);
    int32_t *ds = (int32_t *)gt_dev(sizeof(int32_t) * (size_t)P),
            *dg = (int32_t *)gt_dev(sizeof(int32_t) * (size_t)gi);
    gt_up(ds, sel, sizeof(int32_t) * (size_t)P);
    CHECK_OK(fp4_cu_moe_group(ds, P, E, dg, 0));
    gt_sync("moe group");
    gt_down(got, dg, sizeof(int32_t) * (size_t)used);
    CHECK_MSG(!memcmp(got, want, sizeof(int32_t) * (size_t)used),
              "moe group: %lld pairs of %lld experts (%d groups, want %d)", (long long)P, (long long)E,
              got[0], want[0]);
    cudaFree(ds), cudaFree(dg);
    free(sel), free(got), free(want);
}

int main(void) {
    /* the routes the step names; what has none */
    CHECK(fp4_cu_moe_route_name(FP4_TYPE_NVFP4_E2M1, 512, 0.0f) != NULL);
    CHECK(fp4_cu_moe_route_name(FP4_TYPE_NVFP4_E2M1, 272, 0.0f) == NULL); /* n_in % 256 */
    CHECK(fp4_cu_moe_route_name(FP4_TYPE_NVFP4_E2M1, 512, 0.5f) == NULL); /* W4A4 */
    CHECK(fp4_cu_moe_route_name(FP4_TYPE_Q4_K, 512, 0.0f) == NULL);
    CHECK(fp4_cu_moe_route_name(FP4_TYPE_BF16, 100, 0.0f) != NULL);
    GT_REQUIRE_DEVICE();
    for (int native = 0; native < 2; native++) {
        nvfp4_case(6, 48, 512, 3, 2, 0, 0, native, 1);
        nvfp4_case(6, 48, 512, 3, 2, 1, 1, native, 2);
        nvfp4_case(16, 256, 256, 1, 4, 0, 0, native, 3);
        nvfp4_case(16, 256, 256, 1, 4, 1, 1, native, 4);
        nvfp4_case(5, 40, 256, 11, 3, 1, 0, native, 14); /* groups of ~11 pairs: every run length */
        if (!gt_quick()) {
            nvfp4_case(9, 768, 2048, 8, 8, 0, 0, native, 5); /* qwen3-30b-a3b's gate at 8 columns */
            nvfp4_case(9, 2048, 768, 2, 8, 1, 1, native, 6); /* ... and its down */
        }
    }
    group_case(1, 4, 9);
    group_case(512, 128, 10);
    group_case(4096, 128, 11);
    group_case(300, 3, 12);
    group_case(5000, 128, 13); /* past the shared-memory copy */
    group_case(64, 128, 15);   /* fewer pairs than experts */
    dense_case(1, 5, 40, 100, 3, 2, 7);
    dense_case(0, 5, 33, 300, 2, 3, 8);
    return check_report();
}
