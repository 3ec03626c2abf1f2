/* native.c — the CPU's native NVFP4 A16 route (SPEC §6): each row decoded once per call into f32
 * (E2M1 value × (E4M3 scale × scale2): the native order, not the pinned one), then f32 dots in
 * 64 lanes per column (lane l adds the rounded products of i ≡ l mod 64 in increasing i, then the
 * halving tree p[l] += p[l + w], w = 32 .. 1: fp4_cpu_dot64_f32), so that four AVX-512 or eight
 * AVX2 accumulators run side by side; at one column every path decodes and multiplies without a
 * row buffer (fp4_nvfp4_dot64; native_x86.c). Every path gives the portable bits
 * (tests/test_cpu_paths.c), chosen by cpu_path.c like the exact paths; a NaN output is 0xFFC00000
 * on every path. No bit contract: held to the float reference by a tolerance
 * (tests/test_project.c) and to transformers' logits by tests/test_runtime_hf.c. The float
 * reference (fp4_nvfp4_matvec_a16_float: double accumulation) stays the oracle it is; this is the
 * route `--mode native` takes on a CPU. */
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

void fp4_nvfp4_scale_table(float scale2, float stab[256]) {
    for (int b = 0; b < 256; b++)
        stab[b] = fp4_e4m3fn_decode((uint8_t)b) * scale2;
}

void fp4_nvfp4_row_decode(const uint8_t *pay, const uint8_t *sc, const float *stab, int64_t n_in,
                          float *row) {
    for (int64_t b = 0; b < n_in / 16; b++) {
        const float s = stab[sc[b]];
        float *o = row + 16 * b;
        const uint8_t *q = pay + 8 * b;
        for (int j = 0; j < 8; j++) {
            o[2 * j] = e2m1_value[q[j] & 15] * s;
            o[2 * j + 1] = e2m1_value[q[j] >> 4] * s;
        }
    }
}

float fp4_dot64_reduce(float p[64]) {
    for (int w = 32; w >= 1; w >>= 1)
        for (int l = 0; l < w; l++)
            p[l] += p[l + w];
    return fp4_canonical_nan(p[0]);
}

float fp4_cpu_dot64_f32(const float *a, const float *b, int64_t n) {
    float p[64];
    for (int l = 0; l < 64; l++)
        p[l] = 0.0f;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int l = 0; l < 64; l++)
            p[l] += a[i + l] * b[i + l];
    for (; i < n; i++)
        p[i & 63] += a[i] * b[i];
    return fp4_dot64_reduce(p);
}

float fp4_nvfp4_dot64(const uint8_t *pay, const uint8_t *sc, const float *stab, const float *x,
                      int64_t n_in) {
    float p[64];
    for (int l = 0; l < 64; l++)
        p[l] = 0.0f;
    for (int64_t b = 0; b < n_in / 16; b++) {
        const float s = stab[sc[b]];
        float *pl = p + 16 * (b & 3); /* values 16b .. 16b+15: lanes 16 (b mod 4) .. +15 */
        for (int j = 0; j < 8; j++) {
            const uint8_t q = pay[8 * b + j];
            pl[2 * j] += (e2m1_value[q & 15] * s) * x[16 * b + 2 * j];
            pl[2 * j + 1] += (e2m1_value[q >> 4] * s) * x[16 * b + 2 * j + 1];
        }
    }
    return fp4_dot64_reduce(p);
}

/* [path]: the same bits on every path; decode + dot serve several columns, fused one column */
typedef void (*row_decode_fn)(const uint8_t *pay, const uint8_t *sc, const float *stab, int64_t n_in,
                              float *row);
typedef float (*row_dot_fn)(const float *a, const float *b, int64_t n);
typedef float (*fused_dot_fn)(const uint8_t *pay, const uint8_t *sc, const float *stab, const float *x,
                              int64_t n_in);
static const struct {
    row_decode_fn decode;
    row_dot_fn dot;
    fused_dot_fn fused;
} native_paths[FP4_CPU_N_PATHS] = {
    [FP4_CPU_PORTABLE] = {fp4_nvfp4_row_decode, fp4_cpu_dot64_f32, fp4_nvfp4_dot64},
    [FP4_CPU_AVX2] = {fp4_nvfp4_row_decode_avx2, fp4_dot64_f32_avx2, fp4_nvfp4_dot64_avx2},
    [FP4_CPU_AVX512] = {fp4_nvfp4_row_decode_avx512, fp4_dot64_f32_avx512, fp4_nvfp4_dot64_avx512},
};

typedef struct native_ctx {
    const fp4_nvfp4_view *w;
    const float *x;
    int64_t n_cols;
    float *y;
    row_decode_fn decode;
    row_dot_fn dot;
    fused_dot_fn fused;
    fp4_status st;
    float stab[256]; /* fp4_nvfp4_scale_table: each scale byte's e4m3 value times scale2 */
} native_ctx;

static void native_rows(void *p, int64_t r0, int64_t r1) {
    native_ctx *c = p;
    const fp4_nvfp4_view *w = c->w;
    const int64_t n_in = w->n_in;
    if (c->n_cols == 1 && c->fused) { /* one column: the row never leaves the registers */
        for (int64_t r = r0; r < r1; r++)
            c->y[r] = c->fused(w->payload + r * (n_in / 2), w->scales + r * (n_in / 16), c->stab, c->x, n_in);
        return;
    }
    float *row = malloc(sizeof(float) * (size_t)n_in);
    if (!row) {
        __atomic_store_n(&c->st, FP4_ERR_NOMEM, __ATOMIC_RELAXED);
        return;
    }
    for (int64_t r = r0; r < r1; r++) {
        c->decode(w->payload + r * (n_in / 2), w->scales + r * (n_in / 16), c->stab, n_in, row);
        for (int64_t col = 0; col < c->n_cols; col++)
            c->y[col * w->n_out + r] = c->dot(row, c->x + col * n_in, n_in);
    }
    free(row);
}

fp4_status fp4_cpu_nvfp4_a16_native(const fp4_nvfp4_view *w, const float *x, int64_t n_cols, float *y,
                                    int n_threads) {
    if (w && w->packing != FP4_PACK_CANONICAL) return FP4_ERR_UNSUPPORTED; /* ggml blocks: not repacked */
    if (!w || !x || !y || n_cols < 0 || w->n_in <= 0 || w->n_in % 16 || w->n_out < 0 || !w->payload ||
        !w->scales)
        return FP4_ERR_INVALID_ARG;
    const int path = fp4_cpu_path();
    native_ctx c = {w,      x,      n_cols, y, native_paths[path].decode, native_paths[path].dot,
                    native_paths[path].fused, FP4_OK, {0}};
    fp4_nvfp4_scale_table(w->scale2, c.stab);
    fp4_status st = fp4_parallel_rows(w->n_out, n_threads, native_rows, &c);
    return st ? st : c.st;
}
