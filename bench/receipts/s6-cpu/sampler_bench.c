/* sampler_bench.c — 2000 greedy fp4_sampler_sample calls over a 128 256-entry vocabulary.
 *   cc -O2 -Iinclude bench/receipts/s6-cpu/sampler_bench.c build/libfp4lane.a -lm -lpthread -ljansson \
 *      -lcrypto -ldl -lpcre2-8 -lutf8proc -o /tmp/sb && /tmp/sb */
#include "fp4lane_runtime.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
int main(void) {
    const int64_t V = 128256; float *lg = malloc(V * 4); uint64_t x = 1;
    for (int64_t i = 0; i < V; i++) { x = x * 6364136223846793005ull + 1; lg[i] = (float)((x >> 40) & 0xFFFF) / 4096.f; }
    fp4_sampler_params p = fp4_sampler_defaults(); fp4_sampler *s; fp4_sampler_create(&p, V, &s);
    int r = 0; double t0 = now();
    for (int k = 0; k < 2000; k++) r += fp4_sampler_sample(s, lg);
    printf("greedy: %.1f us per call (%d)\n", (now() - t0) / 2000 * 1e6, r);
}
