/* scanpass.c — the floor for loading: map a GGUF and read every F8_E4M3FN (scale) byte once.
 * Build: make build/dev/scanpass. Usage: scanpass FILE.gguf */
#include "fp4lane_io.h"
#include <stdio.h>
#include <time.h>

int main(int argc, char **argv) {
    if (argc != 2) return fprintf(stderr, "usage: scanpass FILE.gguf\n"), 2;
    fp4_gguf *g;
    fp4_error e;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    if (fp4_gguf_open(argv[1], &g, &e)) return fprintf(stderr, "%s: %s\n", e.rule, e.msg), 1;
    unsigned long long sum = 0, bytes = 0;
    for (int64_t i = 0; i < fp4_gguf_n_tensors(g); i++) {
        const fp4_gguf_tensor *t = fp4_gguf_tensor_at(g, i);
        if (t->type != FP4_TYPE_F8_E4M3FN) continue;
        for (uint64_t k = 0; k < t->size; k++) sum += t->data[k];
        bytes += t->size;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("map + one pass over %llu scale bytes: %.3f s (checksum %llu)\n", bytes,
           (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9, sum);
    fp4_gguf_close(g);
    return 0;
}
