/* test_gpu_fp8.cu — FP8 weights (fp4_fp8_view) on the device: fp4_cuda_tensor_upload_fp8 widens the
 * E4M3FN bytes to bf16 (exact) and uploads the f32 row scales; in exact mode fp4_cuda_project
 * (route "fp8.dense.pinned") equals the CPU's dispatch table (fp4_cpu_project, route
 * "cpu.fp8.dense.pinned") bit for bit, every output of 1..9 columns, per-tensor and per-channel
 * scales, every one of the 254 finite E4M3 bytes (subnormals and signed zeros included), n_in
 * leaving partial 32-lane and 256-value rounds, adversarial activations; native mode
 * ("fp8.dense") within 1e-5 of Σ|w·x| of the CPU's exact result. The upload refuses NaN bytes.
 * The runtime keeps FP8 on CUDA refused (docs/ROUTES.md) until this test has passed on a GPU. */
#include "gpu_test.h"

static void fp8_case(int64_t n_out, int64_t n_in, int per_channel, int act_kind) {
    test_rng r = {(uint64_t)(n_out * 977 + n_in * 13 + per_channel)};
    uint8_t *h = (uint8_t *)malloc((size_t)(n_out * n_in));
    for (int64_t i = 0; i < n_out * n_in; i++) {
        uint8_t b = (uint8_t)(i % 256); /* every byte value, then random ones */
        if (i >= 256) b = (uint8_t)(rng_u64(&r) & 0xFF);
        if ((b & 0x7F) == 0x7F) b ^= 0x01; /* NaN bytes are refused by the loader */
        h[i] = b;
    }
    float *rs = (float *)malloc((size_t)n_out * 4);
    for (int64_t i = 0; i < n_out; i++)
        rs[i] = 0.001f * (1.0f + (float)(i % 17)) / 3.0f;
    enum { MAXC = 9 };
    float *x = (float *)malloc((size_t)(n_in * MAXC) * 4),
          *want = (float *)malloc((size_t)(n_out * MAXC) * 4);
    gt_make_act(x, n_in * MAXC, act_kind, 91 + n_in);
    fp4_tensor w;
    memset(&w, 0, sizeof w);
    w.name = "w";
    w.type = FP4_TYPE_F8_E4M3FN;
    w.n_dims = 2;
    w.ne[0] = n_in;
    w.ne[1] = n_out;
    w.data = h;
    w.nbytes = (uint64_t)(n_out * n_in);
    w.st_dtype = -1;
    w.fp8.scale = per_channel ? 0.0f : 0.00173f;
    w.fp8.row_scale = per_channel ? rs : NULL;
    w.fp8.n_out = n_out;
    w.fp8.n_in = n_in;
    CHECK(!strcmp(fp4_cpu_route_name(&w, FP4_MODE_EXACT), "cpu.fp8.dense.pinned"));
    fp4_cuda_tensor t;
    CHECK_OK(fp4_cuda_tensor_upload_fp8(&w, &t));
    gt_case c;
    gt_case_init(&c, &t, x, MAXC);
    static const int cols[] = {1, 2, 3, 4, 8, 9};
    char what[96];
    for (int i = 0; i < 6; i++) {
        const int nc = cols[i];
        CHECK_OK(fp4_cpu_project(&w, FP4_MODE_EXACT, x, nc, want, 2));
        snprintf(what, sizeof what, "fp8 %lldx%lld %s act %d cols %d", (long long)n_out, (long long)n_in,
                 per_channel ? "per-channel" : "per-tensor", act_kind, nc);
        gt_case_project(&c, FP4_MODE_EXACT, nc, "fp8.dense.pinned");
        gt_cmp_bits(what, want, c.got, n_out * nc);
        gt_case_project(&c, FP4_MODE_NATIVE, nc, "fp8.dense");
        int64_t bad = 0;
        for (int64_t cc = 0; cc < nc; cc++)
            for (int64_t o = 0; o < n_out; o++) {
                double mag = 0;
                for (int64_t k = 0; k < n_in; k++)
                    mag += fabs((double)fp4_e4m3fn_decode(h[o * n_in + k]) * x[cc * n_in + k]);
                mag *= per_channel ? rs[o] : w.fp8.scale;
                const double d = fabs((double)c.got[cc * n_out + o] - want[cc * n_out + o]);
                bad += !(d <= 1e-5 * mag + 1e-30);
            }
        CHECK_MSG(bad == 0, "%s native: %lld outputs beyond 1e-5 of sum|w x|", what, (long long)bad);
    }
    gt_case_free(&c);
    h[5] = 0xFF; /* a NaN byte never reaches a kernel */
    CHECK(fp4_cuda_tensor_upload_fp8(&w, &t) == FP4_ERR_NAN_SCALE);
    free(h), free(rs), free(x), free(want);
}

int main(void) {
    GT_REQUIRE_DEVICE();
    fp8_case(37, 136, 0, 0);
    fp8_case(37, 136, 1, 1);
    fp8_case(65, 264, 1, 0);
    fp8_case(65, 264, 0, 1);
    if (!gt_quick()) {
        fp8_case(700, 4104, 0, 0);
        fp8_case(513, 4096, 1, 1);
    }
    return check_report();
}
