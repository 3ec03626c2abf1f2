/* unpack_bench.c — the type-40 repack at load, before (the element-by-element loop of f6bf0b0's
 * src/model/ggml_pack.c, here as old_unpack_row) and after (fp4_ggml_unpack_row), alternating in one
 * process, 16384 rows of 4096 values (36 MiB of blocks); also checks that both give the same bytes.
 *   cc -O2 -Iinclude -Isrc -Isrc/model bench/receipts/s6-cpu/unpack_bench.c src/model/ggml_pack.c \
 *      -o /tmp/unpack_bench && /tmp/unpack_bench */
#include "model_impl.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void old_unpack_row(const uint8_t *blocks, int64_t n_in, uint8_t *payload, uint8_t *scales) {
    for (int64_t b = 0; b < n_in / 64; b++) {
        const uint8_t *blk = blocks + b * 36;
        for (int s = 0; s < 4; s++) {
            const int64_t g = b * 4 + s;
            uint8_t *dst = payload + g * 8;
            uint8_t v[16];
            scales[g] = blk[s];
            for (int j = 0; j < 8; j++) {
                v[j] = blk[4 + s * 8 + j] & 15;
                v[j + 8] = blk[4 + s * 8 + j] >> 4;
            }
            for (int j = 0; j < 8; j++)
                dst[j] = (uint8_t)(v[2 * j] | (v[2 * j + 1] << 4));
        }
    }
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(void) {
    const int64_t n_in = 4096, rows = 16384;
    const size_t nb = (size_t)(rows * n_in / 64 * 36), np = (size_t)(rows * n_in / 2),
                 ns = (size_t)(rows * n_in / 16);
    uint8_t *b = malloc(nb), *p = malloc(np), *s = malloc(ns), *p2 = malloc(np), *s2 = malloc(ns);
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < nb; i++)
        x ^= x << 13, x ^= x >> 7, x ^= x << 17, b[i] = (uint8_t)x;
    memset(p, 0, np), memset(p2, 0, np), memset(s, 0, ns), memset(s2, 0, ns); /* pages faulted in */
    for (int rep = 0; rep < 5; rep++)
        for (int v = 0; v < 2; v++) {
            const double t0 = now();
            for (int64_t r = 0; r < rows; r++)
                (v ? fp4_ggml_unpack_row : old_unpack_row)(b + r * (n_in / 64) * 36, n_in,
                                                           (v ? p : p2) + r * n_in / 2,
                                                           (v ? s : s2) + r * n_in / 16);
            const double dt = now() - t0;
            printf("rep %d %s: %.4f s, %.2f GB/s of blocks\n", rep, v ? "new" : "old", dt,
                   (double)nb / dt / 1e9);
        }
    printf("bytes %s\n", memcmp(p, p2, np) || memcmp(s, s2, ns) ? "DIFFER" : "identical");
    return 0;
}
