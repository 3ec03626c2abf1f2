/* bench_a16_cols.c — the exact A16 matvec at several columns (CPU prefill), the four-column kernel
 * (fp4_dot_a16_cols_avx512 / _avx2) against the one-column dot per column (FP4_CPU_NO_COLS=1),
 * in alternating pairs in one process. A benchmark, not a test (the bits: tests/test_a16_cols.c).
 *   make build/dev/bench/bench_a16_cols && build/dev/bench/bench_a16_cols N_OUT N_IN COLS [PAIRS] [THREADS]
 * [w4a4] (w4a4: the W4A4 matvec, fp4_dot_w4a4_cols_avx512 against the one-column dot, input_scale_inv 37.5)
 * Random payload, scale bytes 0x30..0x37, activations in [-1, 1); prints the median time of each
 * side, GMAC/s and the median of the per-pair ratios (one-column time / four-column time); the CPU
 * path is fp4_cpu_path() ($FP4_CPU_PATH lowers it). */
#define FP4LANE_ORACLE_API
#include "fp4lane.h"
#include "cpu/cpu_impl.h"
#include "fp4_rng.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: bench_a16_cols N_OUT N_IN COLS [PAIRS] [THREADS]\n");
        return 2;
    }
    const int64_t n_out = atoll(argv[1]), n_in = atoll(argv[2]), nc = atoll(argv[3]);
    const int pairs = argc > 4 ? atoi(argv[4]) : 9, nt = argc > 5 ? atoi(argv[5]) : 1;
    const int w4a4 = argc > 6 && !strcmp(argv[6], "w4a4");
    if (n_out < 1 || n_in < 256 || n_in % 256 || nc < 1 || pairs < 1 || pairs > 999) return 2;
    uint8_t *p = malloc((size_t)(n_out * n_in / 2)), *s = malloc((size_t)(n_out * n_in / 16));
    float *x = malloc(sizeof(float) * (size_t)(n_in * nc)), *y = malloc(sizeof(float) * (size_t)(n_out * nc));
    if (!p || !s || !x || !y) return 1;
    uint64_t r = 12;
    for (int64_t i = 0; i < n_out * n_in / 2; i++)
        p[i] = (uint8_t)fp4_splitmix64(&r);
    for (int64_t i = 0; i < n_out * n_in / 16; i++)
        s[i] = (uint8_t)(0x30 + fp4_splitmix64(&r) % 8);
    for (int64_t i = 0; i < n_in * nc; i++)
        x[i] = (float)((int64_t)(fp4_splitmix64(&r) % 2000) - 1000) / 1000.0f;
    fp4_nvfp4_view v = {0};
    v.payload = p, v.scales = s, v.n_out = n_out, v.n_in = n_in, v.scale2 = 0.01f;
    if (w4a4) v.input_scale_inv = 37.5f;
    double *t4 = malloc(sizeof(double) * (size_t)pairs), *t1 = malloc(sizeof(double) * (size_t)pairs),
           *ratio = malloc(sizeof(double) * (size_t)pairs);
    for (int k = -1; k < pairs; k++) { /* k = -1: one warm-up pair */
        double t[2];
        for (int side = 0; side < 2; side++) {
            const int off = (k & 1) ? !side : side; /* A B, B A, ... */
            if (off) setenv("FP4_CPU_NO_COLS", "1", 1);
            else unsetenv("FP4_CPU_NO_COLS");
            const double t0 = now();
            if ((w4a4 ? fp4_nvfp4_matvec_w4a4 : fp4_nvfp4_matvec_a16_exact)(&v, x, nc, y, nt)) return 1;
            t[off] = now() - t0;
        }
        if (k >= 0) t4[k] = t[0], t1[k] = t[1], ratio[k] = t[1] / t[0];
    }
    const double m4 = median(t4, pairs), m1 = median(t1, pairs), mr = median(ratio, pairs);
    const double mac = (double)n_out * (double)n_in * (double)nc;
    printf("%s%s path, %lld x %lld, %lld columns, %d thread(s), %d pairs: four-column %.3f ms (%.1f GMAC/s), "
           "one-column %.3f ms (%.1f GMAC/s), median pair ratio %.2f\n",
           w4a4 ? "W4A4, " : "", fp4_cpu_path_name(fp4_cpu_path()), (long long)n_out, (long long)n_in,
           (long long)nc, nt, pairs, 1e3 * m4, mac / m4 / 1e9, 1e3 * m1, mac / m1 / 1e9, mr);
    free(p), free(s), free(x), free(y), free(t4), free(t1), free(ratio);
    return 0;
}
