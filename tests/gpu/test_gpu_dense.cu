/* test_gpu_dense.cu — the F16/BF16 matvec (LM head) and the Q4_K/Q6_K matvec against a
 * double-precision dot of the exactly widened / ggml-dequantized weights: normalized error below
 * DENSE_NRMSE_MAX (f32 accumulation only), through fp4_cuda_project in both modes (F16/BF16: the
 * FMA kernel native, the pinned one exact; kquant: one kernel), 1..9 columns; deterministic; the
 * kquant blocks come from the CPU lane's own quantizer. */
#include "gpu_test.h"

/* f32 FMA accumulation over <= 4096 terms against a double reference */
#define DENSE_NRMSE_MAX 1e-5

static void ref_dot(const float *wf, int64_t n_out, int64_t n_in, const float *x, int nc, float *y) {
    for (int c = 0; c < nc; c++)
        for (int64_t r = 0; r < n_out; r++) {
            double acc = 0.0;
            for (int64_t k = 0; k < n_in; k++) acc += (double)wf[r * n_in + k] * (double)x[c * n_in + k];
            y[c * n_out + r] = (float)acc;
        }
}

/* takes t */
static void run_case(const fp4_cuda_tensor *t, const float *wf, const char *route, fp4_mode mode) {
    const int64_t n_out = t->n_out, n_in = t->n_in;
    static const int cols[] = {1, 2, 3, 4, 8, 9};
    float *x = (float *)malloc((size_t)(n_in * 9) * 4), *ref = (float *)malloc((size_t)(n_out * 9) * 4);
    gt_make_act(x, n_in * 9, 0, 4242 + n_in);
    gt_case c;
    gt_case_init(&c, t, x, 9);
    for (int i = 0; i < 6; i++) {
        const int nc = cols[i];
        ref_dot(wf, n_out, n_in, x, nc, ref);
        gt_case_project(&c, mode, nc, route);
        const double e = fp4_nrmse(c.got, ref, n_out * nc);
        CHECK_MSG(e < DENSE_NRMSE_MAX, "%s %lldx%lld cols %d: nrmse %.3g", route, (long long)n_out,
                  (long long)n_in, nc, e);
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
    /* exact mode takes the pinned route (bit-identical to the CPU: test_gpu_dense_pinned) */
    const char *route = type == FP4_TYPE_BF16 ? (native ? "bf16.dense" : "bf16.dense.pinned")
                                              : (native ? "f16.dense" : "f16.dense.pinned");
    run_case(&t, wf, route, native ? FP4_MODE_NATIVE : FP4_MODE_EXACT);
    free(h);
    free(wf);
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
    run_case(&t, wf, type == FP4_TYPE_Q6_K ? "q6_K.float" : "q4_K.float",
             native ? FP4_MODE_NATIVE : FP4_MODE_EXACT);
    free(src);
    free(wf);
    free(blocks);
}

int main(void) {
    GT_REQUIRE_DEVICE();
    const int quick = gt_quick();
    half_case(FP4_TYPE_F16, 33, 136, 0);
    half_case(FP4_TYPE_BF16, 33, 136, 1);
    kquant_case(FP4_TYPE_Q4_K, 9, 512, 0);
    kquant_case(FP4_TYPE_Q6_K, 9, 512, 1);
    if (!quick) {
        half_case(FP4_TYPE_F16, 1000, 4096, 1);
        half_case(FP4_TYPE_BF16, 513, 2048, 0);
        kquant_case(FP4_TYPE_Q4_K, 300, 4096, 1);
        kquant_case(FP4_TYPE_Q6_K, 300, 4096, 0);
    }
    return check_report();
}
