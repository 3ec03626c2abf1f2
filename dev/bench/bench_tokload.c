/* bench_tokload.c — tokenizer load time: fp4_tokenizer_load of each PATH (a tokenizer.json, its
 * directory, or a GGUF) REPS times; prints the median and the best, thread CPU time and wall time.
 *   build/dev/bench/bench_tokload REPS PATH...   (bench/text.md quotes it) */
#include "fp4lane_text.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double clock_s(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 3 || atoi(argv[1]) < 1) {
        fprintf(stderr, "usage: bench_tokload REPS PATH...\n");
        return 2;
    }
    int reps = atoi(argv[1]);
    double *cpu = malloc((size_t)reps * sizeof *cpu), *wall = malloc((size_t)reps * sizeof *wall);
    if (!cpu || !wall) return 1;
    printf("%-60s %8s %10s %10s %10s %10s\n", "path", "n_vocab", "cpu_med_ms", "cpu_min_ms", "wall_med_ms",
           "wall_min_ms");
    for (int a = 2; a < argc; a++) {
        int32_t nv = 0;
        for (int r = 0; r < reps; r++) {
            fp4_tokenizer *t = NULL;
            fp4_error e;
            double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID), w0 = clock_s(CLOCK_MONOTONIC);
            if (fp4_tokenizer_load(argv[a], &t, &e)) {
                fprintf(stderr, "%s: %s: %s\n", argv[a], e.rule, e.msg);
                return 1;
            }
            cpu[r] = (clock_s(CLOCK_THREAD_CPUTIME_ID) - c0) * 1e3;
            wall[r] = (clock_s(CLOCK_MONOTONIC) - w0) * 1e3;
            nv = fp4_tokenizer_n_vocab(t);
            fp4_tokenizer_free(t);
        }
        qsort(cpu, (size_t)reps, sizeof *cpu, cmp_d);
        qsort(wall, (size_t)reps, sizeof *wall, cmp_d);
        printf("%-60s %8d %10.1f %10.1f %10.1f %10.1f\n", argv[a], (int)nv, cpu[reps / 2], cpu[0],
               wall[reps / 2], wall[0]);
    }
    free(cpu);
    free(wall);
    return 0;
}
