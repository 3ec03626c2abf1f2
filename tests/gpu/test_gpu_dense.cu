/* test_gpu_dense.cu — the F16/BF16 matvec (LM head) and the Q4_K/Q6_K matvec against a
 * double-precision dot of the exactly widened / ggml-dequantized weights: normalized error below
 * DENSE_NRMSE_MAX (f32 accumulation only), through fp4_cuda_project in both modes (F16/BF16: the
 * FMA kernel native, the pinned one exact; BF16 native from 2 columns: the tensor-core route
 * bf16.dense.mma, held per column to the same bound, with activations of 1e6 and 1e-6, n_in not a
 * multiple of 32, n_out not of 16, and a column's bits independent of the call's width; kquant:
 * one kernel), 1..33 columns; deterministic; the kquant blocks come from the CPU lane's own
 * quantizer. */
#include "gpu_test.h"

/* f32 FMA accumulation over <= 4096 terms against a double reference; also bf16.dense.mma's bound
 * (activations split into two bf16 terms, ~2^-16 relative: ~2.4e-6 expected at n_in 4096) */
#define DENSE_NRMSE_MAX 1e-5

static void ref_dot(const float *wf, int64_t n_out, int64_t n_in, const float *x, int nc, float *y) {
    for (int c = 0; c < nc; c++)
        for (int64_t r = 0; r < n_out; r++) {
            double acc = 0.0;
            for (int64_t k = 0; k < n_in; k++) acc += (double)wf[r * n_in + k] * (double)x[c * n_in + k];
            y[c * n_out + r] = (float)acc;
        }
}

/* takes t; route1 serves 1 column, route the others */
static void run_case(const fp4_cuda_tensor *t, const float *wf, const char *route1, const char *route,
                     fp4_mode mode) {
    const int64_t n_out = t->n_out, n_in = t->n_in;
    static const int cols[] = {1, 2, 3, 4, 8, 9};
    float *x = (float *)malloc((size_t)(n_in * 9) * 4), *ref = (float *)malloc((size_t)(n_out * 9) * 4);
    gt_make_act(x, n_in * 9, 0, 4242 + n_in);
    gt_case c;
    gt_case_init(&c, t, x, 9);
    for (int i = 0; i < 6; i++) {
        const int nc = cols[i];
        ref_dot(wf, n_out, n_in, x, nc, ref);
        gt_case_project(&c, mode, nc, nc == 1 ? route1 : route);
        const double e = fp4_nrmse(c.got, ref, n_out * nc);
        CHECK_MSG(e < DENSE_NRMSE_MAX, "%s %lldx%lld cols %d: nrmse %.3g", nc == 1 ? route1 : route,
                  (long long)n_out, (long long)n_in, nc, e);
    }
    gt_case_free(&c);
    free(x);
    free(ref);
}

static void half_case(int64_t type, int64_t n_out, int64_t n_in, int native) {
    test_rng r = {(uint64_t)(n_out * 31 + n_in)};
    uint16_t *h = (uint16_t *)malloc((size_t)(n_out * n_in) * 2);
    float *wf = (float *)malloc((size_t)(n_out * n_in) * 4);
    for (int64_t i = 0; i < n_out * n_in; i++) {
        const float f = rng_normal(&r) * 0.05f;
        h[i] = type == FP4_TYPE_BF16 ? fp4_f32_to_bf16(f) : fp4_f32_to_f16(f);
        wf[i] = type == FP4_TYPE_BF16 ? fp4_bf16_to_f32(h[i]) : fp4_f16_to_f32(h[i]);
    }
    fp4_cuda_tensor t;
    CHECK_OK(fp4_cuda_tensor_upload(type, h, n_out, n_in, &t));
    /* exact mode takes the pinned route (bit-identical to the CPU: test_gpu_dense_pinned); BF16
     * native from 2 columns the tensor cores */
    const char *route = type == FP4_TYPE_BF16 ? (native ? "bf16.dense" : "bf16.dense.pinned")
                                              : (native ? "f16.dense" : "f16.dense.pinned");
    run_case(&t, wf, route, type == FP4_TYPE_BF16 && native ? "bf16.dense.mma" : route,
             native ? FP4_MODE_NATIVE : FP4_MODE_EXACT);
    free(h);
    free(wf);
}

/* BF16 weights (normal, 0.05), the seeded rows also kept widened in wf (n_out, n_in) */
static void bf16_weights(int64_t n_out, int64_t n_in, uint64_t seed, fp4_cuda_tensor *t, float *wf) {
    test_rng r = {seed};
    uint16_t *h = (uint16_t *)malloc((size_t)(n_out * n_in) * 2);
    for (int64_t i = 0; i < n_out * n_in; i++) {
        h[i] = fp4_f32_to_bf16(rng_normal(&r) * 0.05f);
        wf[i] = fp4_bf16_to_f32(h[i]);
    }
    CHECK_OK(fp4_cuda_tensor_upload(FP4_TYPE_BF16, h, n_out, n_in, t));
    free(h);
}

/* bf16.dense.mma (BF16, native, 2+ columns: one launch up to 16, then chunks of 16): every column
 * against the f64 dot, its activations scaled by act_mul, 1 or 1/act_mul (column % 3; bf16 keeps
 * f32's exponent range: no overflow at 1e6, no lost bits at 1e-6); columns 0 and 1 the same bits
 * in every call width; the same bits run to run (gt_case_project); 1 column and exact mode keep
 * their routes. */
static void mma_case(int64_t n_out, int64_t n_in, float act_mul, uint64_t seed) {
    static const int cols[] = {2, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 33};
    const int maxc = 33;
    float *wf = (float *)malloc((size_t)(n_out * n_in) * 4);
    fp4_cuda_tensor t;
    bf16_weights(n_out, n_in, seed, &t, wf);
    float *x = (float *)malloc((size_t)(n_in * maxc) * 4), *ref = (float *)malloc((size_t)(n_out * maxc) * 4);
    float *col01 = (float *)malloc((size_t)(n_out * 2) * 4);
    gt_make_act(x, n_in * maxc, 0, seed ^ 0x5151);
    for (int64_t c = 0; c < maxc; c++) {
        const float f = c % 3 == 0 ? act_mul : c % 3 == 1 ? 1.0f : 1.0f / act_mul;
        for (int64_t i = 0; i < n_in; i++) x[c * n_in + i] *= f;
    }
    ref_dot(wf, n_out, n_in, x, maxc, ref);
    gt_case c;
    gt_case_init(&c, &t, x, maxc);
    CHECK_MSG(!strcmp(fp4_cuda_route_name(&c.t, FP4_MODE_NATIVE, 1), "bf16.dense"), "1 column: %s",
              fp4_cuda_route_name(&c.t, FP4_MODE_NATIVE, 1));
    CHECK_MSG(!strcmp(fp4_cuda_route_name(&c.t, FP4_MODE_EXACT, 8), "bf16.dense.pinned"), "exact: %s",
              fp4_cuda_route_name(&c.t, FP4_MODE_EXACT, 8));
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++) {
        const int nc = cols[i];
        gt_case_project(&c, FP4_MODE_NATIVE, nc, "bf16.dense.mma");
        double e = 0.0;
        int64_t nan = 0;
        for (int64_t k = 0; k < n_out * nc; k++) nan += c.got[k] != c.got[k];
        for (int k = 0; k < nc; k++) {
            const double ek = fp4_nrmse(c.got + k * n_out, ref + k * n_out, n_out);
            e = ek > e ? ek : e;
        }
        CHECK_MSG(nan == 0 && e < DENSE_NRMSE_MAX, "mma %lldx%lld x%g cols %d: nrmse %.3g, %lld NaN",
                  (long long)n_out, (long long)n_in, act_mul, nc, e, (long long)nan);
        if (nc == 2) memcpy(col01, c.got, (size_t)(n_out * 2) * 4);
        else
            CHECK_MSG(!memcmp(col01, c.got, (size_t)(n_out * 2) * 4),
                      "mma %lldx%lld cols %d: columns 0, 1 differ from the 2-column call", (long long)n_out,
                      (long long)n_in, nc);
        if (nc == 8 || nc == 16)
            printf("bf16.dense.mma %lldx%lld x%g cols %d: nrmse %.3g\n", (long long)n_out, (long long)n_in,
                   act_mul, nc, e);
    }
    gt_case_free(&c);
    free(wf);
    free(x);
    free(ref);
    free(col01);
}

static void kquant_case(int64_t type, int64_t n_out, int64_t n_in, int native) {
    test_rng r = {(uint64_t)(type * 7 + n_in)};
    float *src = (float *)malloc((size_t)(n_out * n_in) * 4),
          *wf = (float *)malloc((size_t)(n_out * n_in) * 4);
    for (int64_t i = 0; i < n_out * n_in; i++)
        src[i] = rng_normal(&r) * 0.02f + ((i % 97) == 0 ? 0.3f : 0.0f);
    const size_t bb = type == FP4_TYPE_Q6_K ? sizeof(fp4_block_q6_K) : sizeof(fp4_block_q4_K);
    uint8_t *blocks = (uint8_t *)malloc(bb * (size_t)(n_out * n_in / 256));
    for (int64_t row = 0; row < n_out; row++) {
        uint8_t *b = blocks + bb * (size_t)(row * n_in / 256);
        if (type == FP4_TYPE_Q6_K) {
            CHECK_OK(fp4_q6_K_quantize(src + row * n_in, n_in, (fp4_block_q6_K *)b));
            CHECK_OK(fp4_q6_K_dequantize((const fp4_block_q6_K *)b, n_in, wf + row * n_in));
        } else {
            CHECK_OK(fp4_q4_K_quantize(src + row * n_in, n_in, (fp4_block_q4_K *)b));
            CHECK_OK(fp4_q4_K_dequantize((const fp4_block_q4_K *)b, n_in, wf + row * n_in));
        }
    }
    fp4_cuda_tensor t;
    CHECK_OK(fp4_cuda_tensor_upload(type, blocks, n_out, n_in, &t));
    const char *route = type == FP4_TYPE_Q6_K ? "q6_K.float" : "q4_K.float";
    run_case(&t, wf, route, route, native ? FP4_MODE_NATIVE : FP4_MODE_EXACT);
    free(src);
    free(wf);
    free(blocks);
}

/* FP4_CUDA_TENSOR_INVARIANT (drafting engines): a BF16 tensor so flagged keeps bf16.dense at every
 * width in native mode, and each column of a k-column call has the bits of its own 1-column call
 * (the check fails on bf16.dense.mma, whose sums round otherwise) */
static void invariant_case(int64_t n_out, int64_t n_in, uint64_t seed) {
    const int maxc = 9;
    float *wf = (float *)malloc((size_t)(n_out * n_in) * 4);
    fp4_cuda_tensor t;
    bf16_weights(n_out, n_in, seed, &t, wf);
    t.flags |= FP4_CUDA_TENSOR_INVARIANT;
    float *x = (float *)malloc((size_t)(n_in * maxc) * 4), *one = (float *)malloc((size_t)(n_out * maxc) * 4);
    gt_make_act(x, n_in * maxc, 0, seed ^ 0x77);
    gt_case c;
    gt_case_init(&c, &t, x, maxc);
    for (int k = 0; k < maxc; k++) { /* each column alone */
        float *dx = gt_dev_floats(x + (int64_t)k * n_in, n_in), *dy = gt_dev_poison(n_out);
        CHECK_OK(fp4_cuda_project(&c.t, FP4_MODE_NATIVE, dx, 1, dy, &c.s, NULL));
        gt_sync("invariant 1 column");
        gt_down(one + (int64_t)k * n_out, dy, (size_t)n_out * 4);
        cudaFree(dx), cudaFree(dy);
    }
    for (int nc = 2; nc <= maxc; nc++) {
        gt_case_project(&c, FP4_MODE_NATIVE, nc, "bf16.dense");
        CHECK_MSG(!memcmp(one, c.got, (size_t)(n_out * nc) * 4),
                  "invariant %lldx%lld cols %d: a column differs from its 1-column call", (long long)n_out,
                  (long long)n_in, nc);
    }
    gt_case_free(&c);
    free(wf), free(x), free(one);
}

int main(void) {
    GT_REQUIRE_DEVICE();
    const int quick = gt_quick();
    half_case(FP4_TYPE_F16, 33, 136, 0);
    half_case(FP4_TYPE_BF16, 33, 136, 1);
    kquant_case(FP4_TYPE_Q4_K, 9, 512, 0);
    kquant_case(FP4_TYPE_Q6_K, 9, 512, 1);
    mma_case(40, 72, 1e6f, 71);   /* n_in % 32 == 8: 2 steps (fewer than in flight) and a tail */
    mma_case(33, 136, 1.0f, 72);  /* 4 steps and a tail; one partial row tile */
    invariant_case(300, 512, 76);
    if (!quick) {
        mma_case(1000, 4096, 1e6f, 73); /* 32 warps; the last one's second row tile past n_out */
        mma_case(257, 512, 1e6f, 74);
        mma_case(4104, 4096, 1.0f, 75); /* n_out % 32 == 8 */
        half_case(FP4_TYPE_F16, 1000, 4096, 1);
        half_case(FP4_TYPE_BF16, 513, 2048, 0);
        kquant_case(FP4_TYPE_Q4_K, 300, 4096, 1);
        kquant_case(FP4_TYPE_Q6_K, 300, 4096, 0);
    }
    return check_report();
}
