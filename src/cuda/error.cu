/* error.cu — the detail of the last CUDA failure, per thread (ggml's CUDA_CHECK keeps the
 * expression, function, file and line; we keep them for the caller instead of aborting).
 * FP4_CUDA_CHECK / FP4_CUDA_LAUNCHED (common.cuh) call fp4_cu_fail(); fp4_cuda_last_error()
 * reads it back. Host code only. */
#include "common.cuh"
#include <stdio.h>

static thread_local char last_error[384];

extern "C" {

fp4_status fp4_cu_fail(cudaError_t e, const char *expr, const char *func, const char *file, int line) {
    snprintf(last_error, sizeof last_error, "%s: %s (%s, %s:%d)", expr, cudaGetErrorString(e), func, file,
             line);
    (void)cudaGetLastError(); /* a non-sticky error must not surface again at the next launch check */
    return FP4_ERR_CUDA;
}

FP4_API const char *fp4_cuda_last_error(void) { return last_error; }

} /* extern "C" */
