/* test_gpu_dense_pinned.cu — F16/BF16 weights in exact mode: fp4_cuda_project (route
 * "*.dense.pinned") equals the CPU's dispatch table (fp4_cpu_project, route "cpu.*.dense.pinned")
 * bit for bit, every output of 1..9 columns; n_in chosen to leave partial 32-lane rounds and
 * partial 256-value rounds (136, 264, 4104), f16 subnormal weights and signed zeros, adversarial
 * activations (zero blocks, huge, subnormal, powers of two). */
#include "gpu_test.h"

static void pinned_case(int64_t type, int64_t n_out, int64_t n_in, int act_kind) {
    test_rng r = {(uint64_t)(n_out * 131 + n_in * 7 + type)};
    uint16_t *h = (uint16_t *)malloc((size_t)(n_out * n_in) * 2);
    for (int64_t i = 0; i < n_out * n_in; i++) {
        float f = rng_normal(&r) * 0.05f;
        if (i % 53 == 0) f = -0.0f;
        if (i % 61 == 0) f = 3e-6f * (float)(i % 7) - 1e-5f; /* f16 subnormal range */
        h[i] = type == FP4_TYPE_BF16 ? fp4_f32_to_bf16(f) : fp4_f32_to_f16(f);
    }
    enum { MAXC = 9 };
    float *x = (float *)malloc((size_t)(n_in * MAXC) * 4);
    gt_make_act(x, n_in * MAXC, act_kind, 77 + n_in);
    float *want = (float *)malloc((size_t)(n_out * MAXC) * 4);
    /* the CPU twin through its own dispatch table */
    fp4_tensor w;
    memset(&w, 0, sizeof w);
    w.name = "w";
    w.type = (fp4_type)type;
    w.n_dims = 2;
    w.ne[0] = n_in;
    w.ne[1] = n_out;
    w.data = (const uint8_t *)h;
    w.nbytes = (uint64_t)(n_out * n_in) * 2;
    w.st_dtype = -1;
    const char *cpu_route = fp4_cpu_route_name(&w, FP4_MODE_EXACT);
    CHECK_MSG(strstr(cpu_route, "dense.pinned") != NULL, "cpu route %s", cpu_route);
    fp4_cuda_tensor t;
    CHECK_OK(fp4_cuda_tensor_upload(type, h, n_out, n_in, &t));
    gt_case c;
    gt_case_init(&c, &t, x, MAXC);
    static const int cols[] = {1, 2, 3, 4, 8, 9};
    char what[96];
    for (int i = 0; i < 6; i++) {
        const int nc = cols[i];
        CHECK_OK(fp4_cpu_project(&w, FP4_MODE_EXACT, x, nc, want, 2));
        snprintf(what, sizeof what, "%s %lldx%lld act %d cols %d", type == FP4_TYPE_BF16 ? "bf16" : "f16",
                 (long long)n_out, (long long)n_in, act_kind, nc);
        gt_case_project(&c, FP4_MODE_EXACT, nc,
                        type == FP4_TYPE_BF16 ? "bf16.dense.pinned" : "f16.dense.pinned");
        gt_cmp_bits(what, want, c.got, n_out * nc);
    }
    gt_case_free(&c);
    free(h), free(x), free(want);
}

int main(void) {
    GT_REQUIRE_DEVICE();
    pinned_case(FP4_TYPE_F16, 37, 136, 0);
    pinned_case(FP4_TYPE_BF16, 37, 136, 1);
    pinned_case(FP4_TYPE_BF16, 65, 264, 0);
    pinned_case(FP4_TYPE_F16, 65, 264, 1);
    if (!gt_quick()) {
        pinned_case(FP4_TYPE_BF16, 700, 4104, 0);
        pinned_case(FP4_TYPE_F16, 513, 4096, 1);
    }
    return check_report();
}
