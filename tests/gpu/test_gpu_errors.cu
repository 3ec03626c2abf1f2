/* test_gpu_errors.cu — a CUDA failure keeps its detail: an allocation far beyond the device's
 * memory returns FP4_ERR_CUDA, and fp4_cuda_last_error() names the failing call (cudaMalloc),
 * cudaGetErrorString's text, the library function and its file and line; the detail is the
 * calling thread's (another thread sees ""); the failure does not leak into the next call
 * (CUDA's non-sticky last error is cleared: the next launch check passes). */
#include "gpu_test.h"
#include <pthread.h>

static void *other_thread(void *arg) {
    *(const char **)arg = fp4_cuda_last_error();
    return NULL;
}

int main(void) {
    GT_REQUIRE_DEVICE();
    CHECK(!strcmp(fp4_cuda_last_error(), "")); /* nothing of this thread has failed yet */
    fp4_cuda_scratch s;
    CHECK_EQ_INT(fp4_cuda_scratch_alloc((size_t)1 << 50, &s), FP4_ERR_CUDA); /* 1 PiB */
    CHECK(s.d_base == NULL && s.bytes == 0);
    const char *e = fp4_cuda_last_error();
    printf("fp4_cuda_last_error: %s\n", e);
    CHECK(strstr(e, "cudaMalloc(") != NULL);
    CHECK(strstr(e, cudaGetErrorString(cudaErrorMemoryAllocation)) != NULL);
    CHECK(strstr(e, "fp4_cuda_scratch_alloc") != NULL);
    CHECK(strstr(e, "src/cuda/device.cu:") != NULL);

    const char *seen = "unset";
    pthread_t th;
    CHECK(pthread_create(&th, NULL, other_thread, &seen) == 0);
    CHECK(pthread_join(th, NULL) == 0);
    CHECK(seen != NULL && !strcmp(seen, ""));

    /* the next calls run clean: an upload and a projection (its launch check reads CUDA's last error) */
    enum { NO = 9, NI = 64 };
    uint16_t h[NO * NI];
    float x[NI], y[NO];
    for (int i = 0; i < NO * NI; i++) h[i] = fp4_f32_to_f16((float)(i % 7) - 3.0f);
    for (int i = 0; i < NI; i++) x[i] = (float)(i % 3);
    fp4_cuda_tensor t;
    CHECK_OK(fp4_cuda_tensor_upload(FP4_TYPE_F16, h, NO, NI, &t));
    float *dx = gt_dev_floats(x, NI), *dy = gt_dev_poison(NO);
    CHECK_OK(fp4_cuda_project(&t, FP4_MODE_EXACT, dx, 1, dy, NULL, NULL));
    gt_sync("dense after a failed allocation");
    gt_down(y, dy, sizeof y);
    for (int r = 0; r < NO; r++) {
        double acc = 0;
        for (int k = 0; k < NI; k++) acc += (double)fp4_f16_to_f32(h[r * NI + k]) * x[k];
        CHECK(y[r] == (float)acc); /* small integers: exact in f32 */
    }
    cudaFree(dx);
    cudaFree(dy);
    fp4_cuda_tensor_free(&t);
    return check_report();
}
