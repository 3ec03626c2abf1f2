/* bench_imma2.cu — the exact A16 projection alone on the llama3-8b shapes (fused q/k/v, o, fused
 * gate/up, down) at 128..512 columns, a16_imma.cu's measuring aids side by side (env read at every
 * call): the 16-column chunks (FP4LANE_CUDA_IMMA=0), imma by width, FP4LANE_CUDA_IMMA_WC=4 and 2,
 * FP4LANE_CUDA_IMMA_OCC=2 and 3 (pipe); microseconds per call (median of REPS event-timed calls after
 * 2 warm-up calls), and whether each gives the chunks' bytes. Built like a GPU test (stage.sh); a measuring
 * tool, never part of make test.
 *   bench_imma2 [REPS]                                                                             */
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

static void set_variant(int v) {
    unsetenv("FP4LANE_CUDA_IMMA_WC");
    unsetenv("FP4LANE_CUDA_IMMA_OCC");
    setenv("FP4LANE_CUDA_IMMA", v == 0 ? "0" : "1", 1);
    if (v == 2) setenv("FP4LANE_CUDA_IMMA_WC", "4", 1);
    if (v == 3) setenv("FP4LANE_CUDA_IMMA_WC", "2", 1);
    if (v == 4) setenv("FP4LANE_CUDA_IMMA_OCC", "2", 1);
    if (v == 5) setenv("FP4LANE_CUDA_IMMA_OCC", "3", 1);
}

int main(int argc, char **argv) {
    GT_REQUIRE_DEVICE();
    const int reps = argc > 1 ? atoi(argv[1]) : 9;
    static const int64_t shapes[][2] = {{6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}};
    static const char *const names[] = {"qkv", "o", "gate_up", "down"};
    static const int cols[] = {128, 256, 512};
    const int ncols_n = (int)(sizeof cols / sizeof cols[0]), maxc = 512, nv = 6;
    printf("shape     n_out x n_in   cols   chunks     imma      wc4      wc2     occ2     pipe (us) same\n");
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
            float us[6];
            int same = 1;
            for (int v = 0; v < nv; v++) {
                set_variant(v);
                us[v] = time_calls(&c, nc, reps);
                gt_down(v ? c.again : c.got, c.dy, bytes);
                if (v) same &= !memcmp(c.got, c.again, bytes);
            }
            CHECK(same);
            printf("%-8s %6lld x %-6lld %5d %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f  %s\n", names[s],
                   (long long)shapes[s][0], (long long)shapes[s][1], nc, us[0], us[1], us[2], us[3], us[4],
                   us[5], same ? "yes" : "NO");
            fflush(stdout);
        }
        set_variant(1);
        gt_case_free(&c);
        gt_free_nvfp4(&w);
    }
    return check_report();
}
