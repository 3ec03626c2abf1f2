/* test_project.c — the CPU dispatch table: each key reaches the right kernel (same bits as a
 * direct call), unserved keys are refused with FP4_ERR_REFUSED_ROUTE, dense weights are exact
 * to one rounding. */
#include "check.h"
#include "fp4lane.h"
#include <math.h>
#include <stdlib.h>

int main(void) {
    enum { NO = 8, NI = 512, NC = 3 };
    static float wf[NO * NI], x[NC * NI], y1[NC * NO], y2[NC * NO];
    static uint8_t p[NO * NI / 2], s[NO * NI / 16];
    static uint16_t h[NO * NI];
    test_rng r = {11};
    for (int i = 0; i < NO * NI; i++) wf[i] = rng_normal(&r) * 0.05f;
    for (int i = 0; i < NC * NI; i++) x[i] = rng_normal(&r);
    float amax = 0, s2;
    CHECK_OK(fp4_amax_update(wf, FP4_SRC_F32, NO * NI, &amax));
    CHECK_OK(fp4_scale2_from_amax(amax, FP4_SCALE2_GPU, &s2));
    CHECK_OK(fp4_nvfp4_quantize(wf, FP4_SRC_F32, NO, NI, s2, p, s));
    fp4_tensor t = {.name = "w", .type = FP4_TYPE_NVFP4_E2M1, .n_dims = 2, .ne = {NI, NO, 1, 1},
                    .nvfp4 = {p, s, s2, 0.0f, NO, NI, FP4_PACK_CANONICAL}, .st_dtype = -1};
    CHECK(!strcmp(fp4_cpu_route_name(&t, FP4_MODE_EXACT), "cpu.nvfp4.a16.exact"));
    CHECK_OK(fp4_cpu_project(&t, FP4_MODE_EXACT, x, NC, y1, 2));
    CHECK_OK(fp4_nvfp4_matvec_a16_exact(&t.nvfp4, x, NC, y2, 1));
    CHECK(!memcmp(y1, y2, sizeof y1));
    /* native: f32 accumulation, held to the float reference (double accumulation) at f32 level */
    CHECK(!strcmp(fp4_cpu_route_name(&t, FP4_MODE_NATIVE), "cpu.nvfp4.a16.native"));
    CHECK_OK(fp4_cpu_project(&t, FP4_MODE_NATIVE, x, NC, y1, 2));
    CHECK_OK(fp4_nvfp4_matvec_a16_float(&t.nvfp4, x, NC, y2, 1));
    const double e_native = fp4_nrmse(y1, y2, NC * NO);
    CHECK_MSG(e_native < 1e-6, "native vs float reference nrmse %g", e_native);
    CHECK_OK(fp4_cpu_project(&t, FP4_MODE_NATIVE, x, NC, y2, 3)); /* deterministic, any thread count */
    CHECK(!memcmp(y1, y2, sizeof y1));
    t.nvfp4.input_scale_inv = 600.0f; /* W4A4: both modes run the exact contraction */
    CHECK(!strcmp(fp4_cpu_route_name(&t, FP4_MODE_NATIVE), "cpu.nvfp4.w4a4.exact"));
    CHECK_OK(fp4_cpu_project(&t, FP4_MODE_NATIVE, x, NC, y1, 2));
    CHECK_OK(fp4_nvfp4_matvec_w4a4(&t.nvfp4, x, NC, y2, 1));
    CHECK(!memcmp(y1, y2, sizeof y1));
    /* exact A16 needs n_in % 256: a 272-wide tensor is refused in exact mode, served in native */
    fp4_tensor n = t;
    n.nvfp4.input_scale_inv = 0.0f;
    n.ne[0] = n.nvfp4.n_in = 272;
    n.ne[1] = n.nvfp4.n_out = 1;
    CHECK(fp4_cpu_project(&n, FP4_MODE_EXACT, x, 1, y1, 1) == FP4_ERR_REFUSED_ROUTE);
    CHECK(!strcmp(fp4_cpu_route_name(&n, FP4_MODE_EXACT), "none"));
    CHECK_OK(fp4_cpu_project(&n, FP4_MODE_NATIVE, x, 1, y1, 1));
    /* dense bf16, native: f32 accumulation, within f32 rounding of the double sum (exact: the pinned
     * route, test_runtime_step.c) */
    for (int i = 0; i < NO * NI; i++) h[i] = fp4_f32_to_bf16(wf[i]);
    fp4_tensor d = {.name = "d",
                    .type = FP4_TYPE_BF16,
                    .n_dims = 2,
                    .ne = {NI, NO, 1, 1},
                    .data = (const uint8_t *)h,
                    .nbytes = sizeof h,
                    .st_dtype = -1};
    CHECK(!strcmp(fp4_cpu_route_name(&d, FP4_MODE_NATIVE), "cpu.bf16.dense"));
    CHECK_OK(fp4_cpu_project(&d, FP4_MODE_NATIVE, x, NC, y1, 2));
    for (int c = 0; c < NC; c++)
        for (int o = 0; o < NO; o++) {
            double acc = 0;
            double mag = 0;
            for (int k = 0; k < NI; k++) {
                acc += (double)fp4_bf16_to_f32(h[o * NI + k]) * x[c * NI + k];
                mag += fabs((double)fp4_bf16_to_f32(h[o * NI + k]) * x[c * NI + k]);
            }
            CHECK(fabs(y1[c * NO + o] - acc) <= 5e-6 * mag); /* f32 bound: (512/8 + 4)·2^-24·Σ|terms| */
        }
    /* Q4_K */
    static fp4_block_q4_K q[NO * NI / 256];
    CHECK_OK(fp4_q4_K_quantize(wf, NO * NI, q));
    fp4_tensor k = {.name = "k",
                    .type = FP4_TYPE_Q4_K,
                    .n_dims = 2,
                    .ne = {NI, NO, 1, 1},
                    .data = (const uint8_t *)q,
                    .nbytes = sizeof q,
                    .st_dtype = -1};
    CHECK(!strcmp(fp4_cpu_route_name(&k, FP4_MODE_EXACT), "cpu.q4_k.q8_k"));
    CHECK_OK(fp4_cpu_project(&k, FP4_MODE_EXACT, x, NC, y1, 2));
    CHECK_OK(fp4_q4_K_matvec(q, NO, NI, x, NC, y2, 1));
    CHECK(!memcmp(y1, y2, sizeof y1));
    /* unserved types and bad arguments */
    fp4_tensor u = d;
    u.type = FP4_TYPE_I32;
    CHECK(fp4_cpu_project(&u, FP4_MODE_EXACT, x, 1, y1, 1) == FP4_ERR_UNSUPPORTED);
    CHECK(fp4_cpu_project(&d, (fp4_mode)5, x, 1, y1, 1) == FP4_ERR_INVALID_ARG);
    CHECK(fp4_cpu_project(NULL, FP4_MODE_EXACT, x, 1, y1, 1) == FP4_ERR_INVALID_ARG);
    return check_report();
}
