/* test_a16_cols.c — the exact A16 matvec at several columns (a prefill chunk, a batch, a verify
 * step): on the AVX-512 and AVX2 paths the row's weights are decoded once for up to four columns
 * (fp4_dot_a16_cols_avx512 / _avx2, the sign on the weight and the activations offset to unsigned).
 * Every column of every n_cols call must give the bits of the one-column call on that column, on
 * every path this CPU has, for thread counts 1-3: random weights and activations, every scale byte
 * (the NaN bytes 0x7F/0xFF, negative and subnormal scales included), all-zero super-blocks in some
 * columns and not others (d = 0: the epilogue skipped per column), extreme activations (±127
 * everywhere), row counts and column counts around the group of four, and the kernel called
 * directly with every column count 1..4. FP4_CPU_NO_COLS=1 turns the kernel off (the other side of
 * a paired benchmark); it is checked to change nothing. */
#define FP4LANE_ORACLE_API
#include "check.h"
#include "fp4lane.h"
#include "cpu/cpu_impl.h"
#include <math.h>
#include <stdlib.h>

typedef struct wt {
    uint8_t *pay, *sc;
    fp4_nvfp4_view v;
} wt;

static void make_w(wt *w, int64_t n_out, int64_t n_in, float scale2, test_rng *r, int every_byte) {
    w->pay = malloc((size_t)(n_out * n_in / 2));
    w->sc = malloc((size_t)(n_out * n_in / 16));
    for (int64_t i = 0; i < n_out * n_in / 2; i++)
        w->pay[i] = (uint8_t)rng_u64(r);
    for (int64_t i = 0; i < n_out * n_in / 16; i++) /* every byte value in turn, or random */
        w->sc[i] = every_byte ? (uint8_t)(i & 0xFF) : (uint8_t)rng_u64(r);
    memset(&w->v, 0, sizeof w->v);
    w->v.payload = w->pay, w->v.scales = w->sc, w->v.n_out = n_out, w->v.n_in = n_in, w->v.scale2 = scale2;
    w->v.input_scale_inv = 0.0f;
}

static void free_w(wt *w) { free(w->pay), free(w->sc); }

/* x: n_cols columns; kinds per column: 0 random, 1 some all-zero super-blocks, 2 all zero, 3 the
 * largest magnitudes (every Q8_K value ±127), 4 tiny values */
static void make_x(float *x, int64_t n_in, int64_t n_cols, test_rng *r) {
    for (int64_t c = 0; c < n_cols; c++) {
        const int kind = (int)(c % 5);
        for (int64_t i = 0; i < n_in; i++) {
            float v = rng_normal(r);
            if (kind == 1 && (i / 256) % 2 == (c / 5) % 2) v = 0.0f;
            if (kind == 2) v = 0.0f;
            if (kind == 3) v = (i + c) % 2 ? 3.0f : -3.0f;
            if (kind == 4) v *= 1e-30f;
            x[c * n_in + i] = v;
        }
    }
}

static int64_t differing(const float *a, const float *b, int64_t n) {
    int64_t d = 0;
    for (int64_t i = 0; i < n; i++)
        d += memcmp(&a[i], &b[i], 4) != 0;
    return d;
}

/* every column of one n_cols call against the one-column calls, on the current path */
static void check_cols(const wt *w, const float *x, int64_t n_cols, int nt, const char *what) {
    const int64_t n_out = w->v.n_out, n_in = w->v.n_in;
    float *y = malloc(sizeof(float) * (size_t)(n_out * n_cols)), *y1 = malloc(sizeof(float) * (size_t)n_out);
    CHECK_OK(fp4_nvfp4_matvec_a16_exact(&w->v, x, n_cols, y, nt));
    for (int64_t c = 0; c < n_cols; c++) {
        CHECK_OK(fp4_nvfp4_matvec_a16_exact(&w->v, x + c * n_in, 1, y1, 1));
        const int64_t d = differing(y + c * n_out, y1, n_out);
        CHECK_MSG(d == 0, "%s, path %s, %lld cols, %d threads, column %lld: %lld of %lld rows differ", what,
                  fp4_cpu_path_name(fp4_cpu_path()), (long long)n_cols, nt, (long long)c, (long long)d,
                  (long long)n_out);
    }
    free(y), free(y1);
}

static void test_matvec(void) {
    test_rng r = {2026};
    static const int64_t shapes[][2] = {{1, 256}, {5, 512}, {33, 1024}, {64, 2048}, {7, 4096}};
    static const int64_t cols[] = {2, 3, 4, 5, 7, 8, 9, 13};
    const int best = fp4_cpu_path();
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t n_out = shapes[s][0], n_in = shapes[s][1];
        wt w;
        make_w(&w, n_out, n_in, s % 2 ? 0.37f : 1.0e-3f, &r, s == 3);
        float *x = malloc(sizeof(float) * (size_t)(n_in * 13));
        make_x(x, n_in, 13, &r);
        for (size_t k = 0; k < sizeof cols / sizeof cols[0]; k++)
            for (int path = 0; path <= best; path++) {
                fp4_cpu_force_path(path);
                for (int nt = 1; nt <= 3; nt++)
                    check_cols(&w, x, cols[k], nt, "random");
            }
        fp4_cpu_force_path(-1);
        free(x);
        free_w(&w);
    }
}

/* FP4_CPU_NO_COLS (fp4_cpu_force_cols(0)): the same bits with the kernel off */
static void test_switch(void) {
    test_rng r = {7};
    wt w;
    make_w(&w, 40, 1024, 0.5f, &r, 0);
    float *x = malloc(sizeof(float) * 1024 * 6), *a = malloc(sizeof(float) * 40 * 6),
          *b = malloc(sizeof(float) * 40 * 6);
    make_x(x, 1024, 6, &r);
    CHECK_OK(fp4_nvfp4_matvec_a16_exact(&w.v, x, 6, a, 2));
    fp4_cpu_force_cols(0); /* what FP4_CPU_NO_COLS does, read once per process */
    CHECK_OK(fp4_nvfp4_matvec_a16_exact(&w.v, x, 6, b, 2));
    fp4_cpu_force_cols(-1);
    CHECK_EQ_INT(differing(a, b, 40 * 6), 0);
    free(x), free(a), free(b);
    free_w(&w);
}

/* the kernel itself at 1..4 columns against fp4_dot_a16_avx512, where the CPU has it */
static void test_kernel(void) {
    if (fp4_cpu_best_path() < FP4_CPU_AVX512) {
        printf("no AVX-512 here: the four-column kernel is not run (the matvec checks cover the rest)\n");
        return;
    }
    /* 40000 rows: the f16 output boundary hides most 1-ulp f32 differences of a misordered
     * epilogue, so many outputs are compared (a swap of d and scale2 changes a few of them) */
    test_rng r = {99};
    const int64_t n_in = 512, nsb = n_in / 256, n_rows = 40000;
    wt w;
    make_w(&w, n_rows, n_in, 0.3712345f, &r, 1);
    float *x = malloc(sizeof(float) * (size_t)(n_in * 4));
    make_x(x, n_in, 4, &r);
    int8_t *act = malloc((size_t)(n_in * 4));
    uint8_t *actu = malloc((size_t)(n_in * 4));
    float *d = malloc(sizeof(float) * (size_t)(nsb * 4));
    fp4_block_q8_K *xq = malloc(sizeof *xq * (size_t)nsb);
    for (int c = 0; c < 4; c++) {
        fp4_q8_K_quantize(x + c * n_in, n_in, xq);
        fp4_a16_act_avx512(xq, nsb, act + c * n_in);
        fp4_a16_actu_avx512(act + c * n_in, n_in, actu + c * n_in);
        for (int64_t b = 0; b < nsb; b++)
            d[c * nsb + b] = xq[b].d;
    }
    int64_t bad = 0;
    for (int64_t row = 0; row < n_rows; row++) {
        const uint8_t *pr = w.pay + row * (n_in / 2), *sr = w.sc + row * (n_in / 16);
        for (int nc = 1; nc <= 4; nc++)
            for (int c0 = 0; c0 + nc <= 4; c0++) {
                float out[4];
                fp4_dot_a16_cols_avx512(pr, sr, w.v.scale2, actu + c0 * n_in, n_in, d + c0 * nsb, nsb,
                                        n_in, nc, out);
                for (int k = 0; k < nc; k++) {
                    const float one = fp4_dot_a16_avx512(pr, sr, w.v.scale2, act + (c0 + k) * n_in,
                                                         d + (c0 + k) * nsb, n_in);
                    bad += memcmp(&one, &out[k], 4) != 0;
                }
            }
    }
    CHECK_MSG(bad == 0, "four-column kernel: %lld results differ from the one-column dot", (long long)bad);
    free(x), free(act), free(actu), free(d), free(xq);
    free_w(&w);
}

/* W4A4 (NVFP4 activations too) at several columns: fp4_dot_w4a4_cols_avx512 against the one-column
 * calls, n_in around the 128-value steps (masked tails), every path, 1-3 threads */
static void test_w4a4(void) {
    test_rng r = {4444};
    static const int64_t n_ins[] = {16, 112, 128, 144, 1040, 2048};
    static const int64_t cols[] = {2, 3, 4, 5, 9};
    const int best = fp4_cpu_path();
    for (size_t s = 0; s < sizeof n_ins / sizeof n_ins[0]; s++) {
        const int64_t n_in = n_ins[s], n_out = 37;
        wt w;
        make_w(&w, n_out, n_in, s % 2 ? 0.37f : 1.0e-3f, &r, s == 4);
        w.v.input_scale_inv = s % 3 == 0 ? 37.5f : 1.0f / 448.0f;
        float *x = malloc(sizeof(float) * (size_t)(n_in * 9)),
              *y = malloc(sizeof(float) * (size_t)(n_out * 9)), *y1 = malloc(sizeof(float) * (size_t)n_out);
        make_x(x, n_in, 9, &r);
        for (size_t k = 0; k < sizeof cols / sizeof cols[0]; k++)
            for (int path = 0; path <= best; path++) {
                fp4_cpu_force_path(path);
                for (int nt = 1; nt <= 3; nt += 2) {
                    CHECK_OK(fp4_nvfp4_matvec_w4a4(&w.v, x, cols[k], y, nt));
                    int64_t d = 0;
                    for (int64_t c = 0; c < cols[k]; c++) {
                        CHECK_OK(fp4_nvfp4_matvec_w4a4(&w.v, x + c * n_in, 1, y1, 1));
                        d += differing(y + c * n_out, y1, n_out);
                    }
                    CHECK_MSG(d == 0, "w4a4 n_in %lld, %lld cols, path %s, %d threads: %lld values differ",
                              (long long)n_in, (long long)cols[k], fp4_cpu_path_name(path), nt, (long long)d);
                }
            }
        fp4_cpu_force_path(-1);
        free(x), free(y), free(y1);
        free_w(&w);
    }
}

int main(void) {
    test_matvec();
    test_w4a4();
    test_switch();
    test_kernel();
    return check_report();
}
