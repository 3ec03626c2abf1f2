/* native.c — the CPU's native NVFP4 A16 route (SPEC §6): each row decoded once per call into f32
 * (E2M1 value × (E4M3 scale × scale2): the native order, not the pinned one), then f32 dots with
 * eight independent partial sums per column, which the compiler vectorizes. No bit contract: held
 * to the float reference by a tolerance (tests/test_project.c) and to transformers' logits by
 * tests/test_runtime_hf.c. The float reference (fp4_nvfp4_matvec_a16_float: double accumulation)
 * stays the oracle it is; this is the route `--mode native` takes on a CPU. */
#include "cpu/native.h"
#include <stdlib.h>

static const float e2m1_value[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                     -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

float fp4_cpu_dot_f32(const float *a, const float *b, int64_t n) {
    float p[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++)
            p[l] += a[i + l] * b[i + l];
    for (; i < n; i++)
        p[i & 7] += a[i] * b[i];
    return ((p[0] + p[4]) + (p[2] + p[6])) + ((p[1] + p[5]) + (p[3] + p[7]));
}

typedef struct native_ctx {
    const fp4_nvfp4_view *w;
    const float *x;
    int64_t n_cols;
    float *y;
    fp4_status st;
} native_ctx;

static void native_rows(void *p, int64_t r0, int64_t r1) {
    native_ctx *c = p;
    const fp4_nvfp4_view *w = c->w;
    const int64_t n_in = w->n_in;
    float *row = malloc(sizeof(float) * (size_t)n_in);
    if (!row) {
        __atomic_store_n(&c->st, FP4_ERR_NOMEM, __ATOMIC_RELAXED);
        return;
    }
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *pay = w->payload + r * (n_in / 2), *sc = w->scales + r * (n_in / 16);
        for (int64_t b = 0; b < n_in / 16; b++) {
            const float s = fp4_e4m3fn_decode(sc[b]) * w->scale2;
            float *o = row + 16 * b;
            const uint8_t *q = pay + 8 * b;
            for (int j = 0; j < 8; j++) {
                o[2 * j] = e2m1_value[q[j] & 15] * s;
                o[2 * j + 1] = e2m1_value[q[j] >> 4] * s;
            }
        }
        for (int64_t col = 0; col < c->n_cols; col++)
            c->y[col * w->n_out + r] = fp4_cpu_dot_f32(row, c->x + col * n_in, n_in);
    }
    free(row);
}

fp4_status fp4_cpu_nvfp4_a16_native(const fp4_nvfp4_view *w, const float *x, int64_t n_cols, float *y,
                                    int n_threads) {
    if (!w || !x || !y || n_cols < 0 || w->n_in <= 0 || w->n_in % 16 || w->n_out < 0 || !w->payload ||
        !w->scales)
        return FP4_ERR_INVALID_ARG;
    native_ctx c = {w, x, n_cols, y, FP4_OK};
    fp4_status st = fp4_parallel_rows(w->n_out, n_threads, native_rows, &c);
    return st ? st : c.st;
}
