/* time_view_check.c — what the host-side scale-byte walks over a type-40 tensor cost: the upload's
 * fp4_nvfp4_view_check on an FP4_PACK_GGML64 view (it walked every 36-byte block a second time
 * before the device checked the bytes itself, session 10) against the open's walk
 * (fp4_check_ggml_scale_bytes, src/model/validate.c) and a plain memcpy of the same bytes (what the
 * upload's staging copy costs). The blocks are in anonymous memory, touched once before timing.
 * Build: make build/dev/time_view_check. Usage: time_view_check [MiB of blocks, default 1024] */
#include "fp4lane.h"
#include "fp4_impl.h"
#include "model/read_impl.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    const int64_t mib = argc > 1 ? atoll(argv[1]) : 1024, n_in = 4096, row = n_in / 64 * 36;
    const int64_t n_out = mib * (1 << 20) / row;
    const size_t bytes = (size_t)(n_out * row);
    uint8_t *blk = malloc(bytes), *dst = malloc(bytes);
    if (!blk || !dst) return fprintf(stderr, "out of memory\n"), 1;
    for (size_t i = 0; i < bytes; i++)
        blk[i] = i % 36 < 4 ? 0x38 : (uint8_t)(i * 131);
    memset(dst, 0, bytes);
    const fp4_nvfp4_view v = {blk, NULL, 1.0f, 0.0f, n_out, n_in, FP4_PACK_GGML64};
    fp4_ckpt c;
    memset(&c, 0, sizeof c);
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now();
        const fp4_status a = fp4_nvfp4_view_check(&v, NULL, NULL);
        double t1 = now();
        const fp4_status b = fp4_check_ggml_scale_bytes(&c, "w", blk, n_out, n_in, NULL);
        double t2 = now();
        memcpy(dst, blk, bytes);
        double t3 = now();
        printf("%.0f MB of blocks: fp4_nvfp4_view_check %.3f s (%.2f GB/s, %s), "
               "fp4_check_ggml_scale_bytes %.3f s (%.2f GB/s, %s), memcpy %.3f s (%.2f GB/s)\n",
               bytes / 1e6, t1 - t0, bytes / 1e9 / (t1 - t0), fp4_status_str(a), t2 - t1,
               bytes / 1e9 / (t2 - t1), fp4_status_str(b), t3 - t2, bytes / 1e9 / (t3 - t2));
    }
    free(blk);
    free(dst);
    return 0;
}
