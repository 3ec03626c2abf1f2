/* probe.c — where a cold process's cuBLAS costs time and anonymous host memory on the device (issue 32
 * item 3): each stage's wall time and the process's RssAnon / RssFile after it: the CUDA context,
 * dlopen of cuBLAS, cublasCreate, malloc_trim, the first GemmEx of each llama3-8b prefill shape
 * (512 columns, f16 x f16 -> f32 as a16_gemm.cu calls it), the same calls again. A measuring aid
 * (dev/gpu/firsttok/run.sh), never built by make. */
#include <cublas_api.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
static double t_last;
static void mark(const char *what) {
    char l[256];
    double anon = -1, file = -1;
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(l, sizeof l, f)) {
        if (!strncmp(l, "RssAnon:", 8)) anon = atof(l + 8) / 1024;
        if (!strncmp(l, "RssFile:", 8)) file = atof(l + 8) / 1024;
    }
    if (f) fclose(f);
    const double t = now();
    printf("%-34s %8.1f ms  RssAnon %7.1f MiB  RssFile %7.1f MiB\n", what, (t - t_last) * 1e3, anon, file);
    fflush(stdout);
    t_last = now();
}

typedef cublasStatus_t (*create_fn)(cublasHandle_t *);
typedef cublasStatus_t (*stream_fn)(cublasHandle_t, cudaStream_t);
typedef cublasStatus_t (*gemm_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                  const void *, const void *, cudaDataType, int, const void *, cudaDataType,
                                  int, const void *, void *, cudaDataType, int, cublasComputeType_t,
                                  cublasGemmAlgo_t);

int main(void) {
    t_last = now();
    mark("start");
    cudaFree(0);
    mark("context (cudaFree(0))");
    void *lib = dlopen("libcublas.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return printf("dlopen: %s\n", dlerror()), 1;
    mark("dlopen libcublas.so.13");
    create_fn create = (create_fn)dlsym(lib, "cublasCreate_v2");
    stream_fn set_stream = (stream_fn)dlsym(lib, "cublasSetStream_v2");
    gemm_fn gemm = (gemm_fn)dlsym(lib, "cublasGemmEx");
    cublasHandle_t h;
    if (create(&h) != CUBLAS_STATUS_SUCCESS) return printf("cublasCreate failed\n"), 1;
    mark("cublasCreate");
    malloc_trim(0);
    mark("malloc_trim(0)");
    /* (m rows of a span, k): q/k/v, o, gate/up (spans of 8192 rows), down */
    static const int shapes[][3] = {
        {6144, 4096, 6144}, {4096, 4096, 4096}, {8192, 4096, 28672}, {4096, 14336, 4096}};
    const int n = 512;
    void *a, *b, *c;
    cudaMalloc(&a, (size_t)8192 * 14336 * 2);
    cudaMalloc(&b, (size_t)n * 14336 * 2);
    cudaMalloc(&c, (size_t)n * 28672 * 4);
    cudaMemset(a, 0, (size_t)8192 * 14336 * 2);
    cudaMemset(b, 0, (size_t)n * 14336 * 2);
    cudaStream_t st;
    cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
    set_stream(h, st);
    cudaDeviceSynchronize();
    mark("buffers");
    const float alpha = 1, beta = 0;
    for (int rep = 0; rep < 2; rep++)
        for (int i = 0; i < 4; i++) {
            const int m = shapes[i][0], k = shapes[i][1], ldc = shapes[i][2];
            const cublasStatus_t r = gemm(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, a, CUDA_R_16F, k, b,
                                          CUDA_R_16F, k, &beta, c, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
                                          CUBLAS_GEMM_DEFAULT);
            cudaStreamSynchronize(st);
            char w[80];
            snprintf(w, sizeof w, "%s gemm %dx%dx%d%s", rep ? "again" : "first", m, n, k, r ? " FAILED" : "");
            mark(w);
        }
    malloc_trim(0);
    mark("malloc_trim(0)");
    return 0;
}
