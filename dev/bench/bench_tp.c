/* bench_tp.c — what the exact row-parallel gather costs against a plain all-reduce, in-process on
 * the CPU (docs/SCALE.md): one row-parallel projection (an o or down of N_OUT x N_IN, NVFP4 A16)
 * split over RANKS threads with the local communicator, at COLS columns, medians over REPS:
 *   exact   fp4_tp_a16_terms on the shard + all_gather of the super-block terms + the pinned sum
 *   plain   fp4_cpu_project (exact kernel) on the shard + all_reduce_sum (a plain all-reduce: fast,
 *           but not the unsplit bits)
 *   gather  the exact path's collective alone (COLS x N_OUT x N_IN/256/RANKS floats per rank)
 *   reduce  the plain path's collective alone (COLS x N_OUT floats per rank)
 *   unsplit fp4_cpu_project on the whole weight, one thread
 * A benchmark, not a test (the bits: tests/test_runtime_tp.c).
 *   make build/dev/bench/bench_tp && build/dev/bench/bench_tp N_OUT N_IN COLS RANKS [REPS] */
#include "fp4_impl.h"
#include "cpu/tp_impl.h"
#include "fp4_rng.h"
#include <pthread.h>
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

enum { MAXR = 16, MAXREPS = 200 };
typedef struct job {
    fp4_comm *c;
    fp4_tensor w; /* the rank's shard */
    const float *x;
    int64_t cols, n_out, nsb, nin_r;
    float *part, *gath, *y;
    int reps;
    double t[4][MAXREPS]; /* exact, plain, gather, reduce */
} job;

static void *rank_main(void *p) {
    job *j = p;
    fp4_error err;
    const size_t tb = sizeof(float) * (size_t)(j->cols * j->n_out * j->nsb);
    for (int r = 0; r < j->reps; r++) {
        fp4_comm_barrier(j->c, &err);
        double t0 = now();
        fp4_tp_a16_terms(&j->w, j->x, j->cols, j->part, 1);
        fp4_comm_all_gather(j->c, j->part, j->gath, tb, &err);
        fp4_tp_a16_reduce(j->gath, j->c->size, j->cols, j->n_out, j->nsb, j->y);
        j->t[0][r] = now() - t0;
        fp4_comm_barrier(j->c, &err);
        t0 = now();
        fp4_cpu_project(&j->w, FP4_MODE_EXACT, j->x, j->cols, j->y, 1);
        fp4_comm_all_reduce_sum(j->c, j->y, j->y, j->cols * j->n_out, &err);
        j->t[1][r] = now() - t0;
        fp4_comm_barrier(j->c, &err);
        t0 = now();
        fp4_comm_all_gather(j->c, j->part, j->gath, tb, &err);
        j->t[2][r] = now() - t0;
        fp4_comm_barrier(j->c, &err);
        t0 = now();
        fp4_comm_all_reduce_sum(j->c, j->y, j->y, j->cols * j->n_out, &err);
        j->t[3][r] = now() - t0;
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 5) return fprintf(stderr, "usage: bench_tp N_OUT N_IN COLS RANKS [REPS]\n"), 2;
    const int64_t n_out = atoll(argv[1]), n_in = atoll(argv[2]), cols = atoll(argv[3]);
    const int R = atoi(argv[4]), reps = argc > 5 ? atoi(argv[5]) : 20;
    if (n_out < 1 || n_in % (256 * R) || cols < 1 || R < 1 || R > MAXR || reps < 1 || reps > MAXREPS)
        return fprintf(stderr, "N_IN must be a multiple of 256 x RANKS; RANKS <= %d, REPS <= %d\n", MAXR,
                       MAXREPS),
               2;
    uint8_t *pay = malloc((size_t)(n_out * n_in / 2)), *sc = malloc((size_t)(n_out * n_in / 16));
    float *x = malloc(sizeof(float) * (size_t)(cols * n_in)),
          *y = malloc(sizeof(float) * (size_t)(cols * n_out));
    uint64_t s = 42;
    for (int64_t i = 0; i < n_out * n_in / 2; i++)
        pay[i] = (uint8_t)fp4_splitmix64(&s);
    for (int64_t i = 0; i < n_out * n_in / 16; i++)
        sc[i] = (uint8_t)(0x30 + (fp4_splitmix64(&s) & 7));
    for (int64_t i = 0; i < cols * n_in; i++)
        x[i] = (float)((double)(fp4_splitmix64(&s) >> 11) * 0x1p-52 - 1.0);
    fp4_tensor w = {
        .name = "w", .type = FP4_TYPE_NVFP4_E2M1, .n_dims = 2, .ne = {n_in, n_out}, .st_dtype = -1};
    w.nvfp4 = (fp4_nvfp4_view){pay, sc, 1.0f / 4096, 0.0f, n_out, n_in, FP4_PACK_CANONICAL};
    double tu[MAXREPS];
    for (int r = 0; r < reps; r++) {
        const double t0 = now();
        fp4_cpu_project(&w, FP4_MODE_EXACT, x, cols, y, 1);
        tu[r] = now() - t0;
    }
    const int64_t nin_r = n_in / R, nsb = nin_r / 256;
    fp4_comm *c[MAXR];
    fp4_error err;
    if (fp4_comm_local_create(R, sizeof(float) * (size_t)(cols * n_out * nsb + cols * n_out), c, &err))
        return fprintf(stderr, "%s\n", err.msg), 1;
    static job jb[MAXR];
    pthread_t t[MAXR];
    for (int r = 0; r < R; r++) {
        uint8_t *own;
        job *j = &jb[r];
        *j = (job){.c = c[r], .cols = cols, .n_out = n_out, .nsb = nsb, .nin_r = nin_r, .reps = reps};
        fp4_tp_cols(&w, r * nin_r, (r + 1) * nin_r, &j->w, &own, &err);
        float *xs = malloc(sizeof(float) * (size_t)(cols * nin_r));
        for (int64_t k = 0; k < cols; k++)
            memcpy(xs + k * nin_r, x + k * n_in + r * nin_r, sizeof(float) * (size_t)nin_r);
        j->x = xs;
        j->part = malloc(sizeof(float) * (size_t)(cols * n_out * nsb));
        j->gath = malloc(sizeof(float) * (size_t)(R * cols * n_out * nsb));
        j->y = malloc(sizeof(float) * (size_t)(cols * n_out));
        pthread_create(&t[r], NULL, rank_main, j);
    }
    for (int r = 0; r < R; r++)
        pthread_join(t[r], NULL);
    const char *names[4] = {"exact (terms+gather+sum)", "plain (kernel+all_reduce)", "gather alone",
                            "all_reduce alone"};
    qsort(tu, (size_t)reps, sizeof *tu, cmp_d);
    printf("%lld x %lld, %lld cols, %d ranks, %d reps (rank 0, median us)\n", (long long)n_out,
           (long long)n_in, (long long)cols, R, reps);
    printf("  unsplit exact kernel, 1 thread   %10.1f\n", 1e6 * tu[reps / 2]);
    for (int k = 0; k < 4; k++) {
        qsort(jb[0].t[k], (size_t)reps, sizeof(double), cmp_d);
        printf("  %-32s %10.1f\n", names[k], 1e6 * jb[0].t[k][reps / 2]);
    }
    printf("  bytes per rank: gather %lld, all_reduce %lld (x%lld)\n", (long long)(4 * cols * n_out * nsb),
           (long long)(4 * cols * n_out), (long long)nsb);
    return 0;
}
