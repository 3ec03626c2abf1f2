/* bench_kq_rows.c — time fp4_q4_K_matvec / fp4_q6_K_matvec at one column on the llama-160m decode
 * shapes (a benchmark, not a test): a layer's q,k,o (768×768) and gate,up (3072×768) as Q4_K,
 * down (768×3072) and the head (32000×768) as Q6_K. Several copies of the weights (about 96 MB in
 * all, more than the L2) are walked in turn, so that the weights stream from beyond the L2 as
 * in a decode step; `--hot` reuses one copy (the weights stay in cache).
 *
 * usage: bench_kq_rows [--reps N] [--hot] [--threads N]
 * Prints the median of N reps of each shape: µs per matvec, ns per row-block, GB/s of weights. */
#include "fp4lane.h"
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

typedef struct shape {
    const char *name;
    int q6;
    int64_t n_out, n_in;
} shape;

int main(int argc, char **argv) {
    int reps = 21, hot = 0, threads = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--hot"))
            hot = 1;
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_kq_rows [--reps N] [--hot] [--threads N]\n");
            return 2;
        }
    }
    if (reps < 1 || reps > 1000) reps = 21;
    const shape shapes[] = {{"q4_K 768x768 (q,k,o)", 0, 768, 768},
                            {"q4_K 3072x768 (gate,up)", 0, 3072, 768},
                            {"q6_K 768x768 (v)", 1, 768, 768},
                            {"q6_K 768x3072 (down)", 1, 768, 3072},
                            {"q6_K 32000x768 (head)", 1, 32000, 768}};
    uint64_t seed = 7;
    float *x = malloc(sizeof(float) * 3072);
    float *y = malloc(sizeof(float) * 32000);
    float *row = malloc(sizeof(float) * 3072);
    if (!x || !y || !row) return 1;
    for (int i = 0; i < 3072; i++)
        x[i] = (float)fp4_rng_normal(&seed);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const shape *sh = &shapes[s];
        const size_t blk = sh->q6 ? sizeof(fp4_block_q6_K) : sizeof(fp4_block_q4_K);
        const int64_t nb = sh->n_in / 256;
        const size_t bytes = (size_t)(sh->n_out * nb) * blk;
        int copies = hot ? 1 : (int)(96e6 / (double)bytes) + 1;
        if (copies > 64) copies = 64;
        uint8_t *w = malloc(bytes * (size_t)copies);
        if (!w) return 1;
        for (int64_t r = 0; r < sh->n_out; r++) {
            for (int64_t i = 0; i < sh->n_in; i++)
                row[i] = 0.02f * (float)fp4_rng_normal(&seed);
            uint8_t *dst = w + (size_t)r * (size_t)nb * blk;
            fp4_status st = sh->q6 ? fp4_q6_K_quantize(row, sh->n_in, (fp4_block_q6_K *)(void *)dst)
                                   : fp4_q4_K_quantize(row, sh->n_in, (fp4_block_q4_K *)(void *)dst);
            if (st) return 1;
        }
        for (int c = 1; c < copies; c++)
            memcpy(w + bytes * (size_t)c, w, bytes);
        double *t = malloc(sizeof(double) * (size_t)reps);
        if (!t) return 1;
        for (int k = -1; k < reps; k++) {
            const double t0 = now();
            for (int c = 0; c < copies; c++) {
                const void *wc = w + bytes * (size_t)c;
                fp4_status st = sh->q6 ? fp4_q6_K_matvec(wc, sh->n_out, sh->n_in, x, 1, y, threads)
                                       : fp4_q4_K_matvec(wc, sh->n_out, sh->n_in, x, 1, y, threads);
                if (st) return 1;
            }
            if (k >= 0) t[k] = (now() - t0) / copies;
        }
        qsort(t, (size_t)reps, sizeof(double), cmp_d);
        const double med = t[reps / 2];
        printf("%-26s %s %8.1f us  %6.2f ns/row-block  %6.2f GB/s  (y[0] %g)\n", sh->name,
               hot ? "hot " : "cold", med * 1e6, med * 1e9 / (double)(sh->n_out * nb),
               (double)bytes / med * 1e-9, (double)y[0]);
        free(t);
        free(w);
    }
    free(x);
    free(y);
    free(row);
    return 0;
}
