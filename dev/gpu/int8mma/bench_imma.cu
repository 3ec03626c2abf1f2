/* bench_imma.cu — the exact A16 projection alone on the llama3-8b shapes (fused q/k/v, o, fused
 * gate/up, down) at 2..512 columns: the 16-column chunks (FP4LANE_CUDA_IMMA unset) against
 * nvfp4.a16.exact.imma (FP4LANE_CUDA_IMMA=1, read at every call), microseconds per call (median of
 * REPS event-timed calls after 2 warm-up calls), and whether the two give the same bytes. Built
 * like a GPU test (run.sh's stage carries it); a measuring tool, never part of make test.
 *   bench_imma [REPS]                                                                              */
#include "gpu_test.h"
#include <algorithm>
#include <vector>

static float time_calls(const gt_case *c, int nc, int reps) {
    std::vector<float> ms((size_t)reps);
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    for (int i = 0; i < reps + 2; i++) {
        cudaEventRecord(a);
        const fp4_status st = fp4_cuda_project(&c->t, FP4_MODE_EXACT, c->dx, nc, c->dy, &c->s, NULL);
        cudaEventRecord(b);
        cudaEventSynchronize(b);
        CHECK_MSG(st == FP4_OK, "project %d cols: %s %s", nc, fp4_status_str(st), fp4_cuda_last_error());
        if (i >= 2) cudaEventElapsedTime(&ms[(size_t)(i - 2)], a, b);
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    std::sort(ms.begin(), ms.end());
    return ms[(size_t)reps / 2] * 1000.0f;
}

int main(int argc, char **argv) {
    GT_REQUIRE_DEVICE();
    const int reps = argc > 1 ? atoi(argv[1]) : 9;
    static const int64_t shapes[][2] = {{6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}};
    static const char *const names[] = {"qkv", "o", "gate_up", "down"};
    static const int cols[] = {2, 4, 8, 16, 32, 64, 128, 256, 512};
    const int ncols_n = (int)(sizeof cols / sizeof cols[0]), maxc = 512;
    printf("shape     n_out x n_in   cols   chunks_us     imma_us   chunks/imma  same\n");
    for (int s = 0; s < 4; s++) {
        gt_nvfp4 w;
        gt_make_nvfp4(&w, shapes[s][0], shapes[s][1], 0.01f, 0.0f, 0, 7 + (uint64_t)s);
        fp4_cuda_tensor t;
        CHECK_OK(fp4_cuda_tensor_upload_nvfp4(&w.view, &t));
        std::vector<float> x((size_t)(shapes[s][1] * maxc));
        gt_make_act(x.data(), shapes[s][1] * maxc, 0, 99);
        gt_case c;
        gt_case_init(&c, &t, x.data(), maxc);
        for (int i = 0; i < ncols_n; i++) {
            const int nc = cols[i];
            const size_t bytes = (size_t)(shapes[s][0] * nc) * 4;
            unsetenv("FP4LANE_CUDA_IMMA");
            const float t0 = time_calls(&c, nc, reps);
            gt_down(c.got, c.dy, bytes);
            setenv("FP4LANE_CUDA_IMMA", "1", 1);
            const float t1 = time_calls(&c, nc, reps);
            gt_down(c.again, c.dy, bytes);
            unsetenv("FP4LANE_CUDA_IMMA");
            const int same = !memcmp(c.got, c.again, bytes);
            CHECK(same);
            printf("%-8s %6lld x %-6lld %5d %11.1f %11.1f %12.3f  %s\n", names[s], (long long)shapes[s][0],
                   (long long)shapes[s][1], nc, t0, t1, t0 / t1, same ? "yes" : "NO");
            fflush(stdout);
        }
        gt_case_free(&c);
        gt_free_nvfp4(&w);
    }
    return check_report();
}
