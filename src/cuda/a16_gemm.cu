/* a16_gemm.cu — the native A16 route for many columns (prefill): the weights of a span of rows
 * widened once per call to f16 in scratch, the activations to f16, then one tensor-core GEMM per
 * span through cuBLAS (cublasGemmEx: f16 x f16, f32 accumulation and output), loaded with dlopen
 * so that libfp4lane_cuda.so neither links nor needs it.
 *
 * ON BY DEFAULT where libcublas loads: native prefill several times faster than the tile kernels
 * (CLAIMS prefill-1); FP4LANE_CUDA_GEMM=0 turns it
 * off, and without a loadable libcublas the row of the dispatch table is skipped: the tile kernels
 * serve.
 *
 * Numerics (SPEC §6, native): a weight e2m1 * e4m3 has at most 6 significant bits and lies in
 * [2^-10, 2688], so its f16 (dequant.cu's fp4_cuda_nvfp4_dequant with scale2 = 1) is exact; scale2
 * is the GEMM's alpha. Each column of activations is
 * scaled by a power of two 2^-e_c (exact) so that its largest magnitude lies in [2^14, 2^15) before
 * the RNE rounding to f16: the relative error of every activation is the f16 rounding's 2^-11,
 * as on the tile kernels, and no finite activation overflows (f16's 65504 limit; NaN and Inf stay
 * what they are); the column's outputs are multiplied by 2^e_c after the GEMM. Deterministic: one
 * cuBLAS handle, one algorithm choice per shape (cuBLAS gives the same bits run to run on one GPU
 * model and toolkit); not invariant across GPUs or cuBLAS versions (exact mode is). A call made while
 * its stream captures a CUDA graph runs the tile kernels instead. */
#include "common.cuh"
#include <cublas_api.h>
#include <dlfcn.h>
#include <pthread.h>

#define GEMM_W_BYTES ((size_t)64 << 20) /* the widened weight span in scratch */
#if CUDART_VERSION >= 13000 && CUDART_VERSION < 14000
#define FP4_CUBLAS_OWN "libcublas.so.13"
#elif CUDART_VERSION >= 12000 && CUDART_VERSION < 13000
#define FP4_CUBLAS_OWN "libcublas.so.12"
#else
#define FP4_CUBLAS_OWN "libcublas.so"
#endif
#define GEMM_ACT_TOP 14                 /* a column's largest |x| is scaled into [2^14, 2^15) */

/* ---- cuBLAS, loaded at run time ------------------------------------------------------------ */
typedef cublasStatus_t (*create_fn)(cublasHandle_t *);
typedef cublasStatus_t (*stream_fn)(cublasHandle_t, cudaStream_t);
typedef cublasStatus_t (*gemm_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                  const void *, const void *, cudaDataType, int, const void *, cudaDataType,
                                  int, const void *, void *, cudaDataType, int, cublasComputeType_t,
                                  cublasGemmAlgo_t);
typedef cublasStatus_t (*gemm_sb_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                     const void *, const void *, cudaDataType, int, long long, const void *,
                                     cudaDataType, int, long long, const void *, void *, cudaDataType, int,
                                     long long, int, cublasComputeType_t, cublasGemmAlgo_t);
static struct {
    pthread_once_t once;
    pthread_mutex_t mu;
    int loaded; /* the library and its three symbols */
    create_fn create;
    stream_fn set_stream;
    gemm_fn gemm;
    gemm_sb_fn gemm_sb; /* cublasGemmStridedBatchedEx: the native prefill attention (att_gemm.cuh) */
    cublasHandle_t h; /* created at the first GEMM, on the then-current device */
    int h_failed;
} blas = {PTHREAD_ONCE_INIT, PTHREAD_MUTEX_INITIALIZER, 0, NULL, NULL, NULL, NULL, NULL, 0};

static void blas_load(void) {
    const int on = fp4_cu_env_process()->gemm; /* 0, 1, or -1: unset */
    if (on == 0) return;                         /* turned off (above) */
    /* by default only the cuBLAS of this build's CUDA major (the runtime it links); another major
     * brings its own runtime into the process, so it is tried only when asked for (=1) */
    static const char *const names[] = {FP4_CUBLAS_OWN, "libcublas.so.13", "libcublas.so.12", "libcublas.so"};
    const size_t n_names = on == 1 ? sizeof names / sizeof names[0] : 1;
    void *lib = NULL;
    for (size_t i = 0; i < n_names && !lib; i++)
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;
    blas.create = (create_fn)dlsym(lib, "cublasCreate_v2");
    blas.set_stream = (stream_fn)dlsym(lib, "cublasSetStream_v2");
    blas.gemm = (gemm_fn)dlsym(lib, "cublasGemmEx");
    blas.gemm_sb = (gemm_sb_fn)dlsym(lib, "cublasGemmStridedBatchedEx");
    blas.loaded = blas.create && blas.set_stream && blas.gemm && blas.gemm_sb; /* the library stays loaded */
}

/* ---- kernels ----------------------------------------------------------------------------------- */
/* One block per column: e_c from the column's largest finite |x| (0 when none is nonzero), then
 * x * 2^-e_c rounded to f16, written with row stride ld (>= n_in); colscale[c] = 2^e_c. */
static __global__ __launch_bounds__(256) void gemm_act16_kernel(const float *x, int64_t n_in, int64_t ld,
                                                                __half *q, float *colscale) {
    __shared__ float red[8];
    const int64_t c = blockIdx.x;
    const float4 *xr = reinterpret_cast<const float4 *>(x + c * n_in);
    float m = 0.0f;
    for (int64_t i = threadIdx.x; i < n_in / 4; i += blockDim.x) {
        const float4 v = xr[i];
        const float a[4] = {fabsf(v.x), fabsf(v.y), fabsf(v.z), fabsf(v.w)};
#pragma unroll
        for (int j = 0; j < 4; j++)
            if (a[j] <= 3.402823466e38f) m = fmaxf(m, a[j]); /* finite only */
    }
#pragma unroll
    for (int off = 16; off >= 1; off >>= 1)
        m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, off));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
    __syncthreads();
    m = red[0];
    for (int w = 1; w < (int)(blockDim.x >> 5); w++)
        m = fmaxf(m, red[w]);
    int e = 0;
    if (m > 0.0f) {
        (void)frexpf(m, &e); /* m = f * 2^e, f in [0.5, 1): m in [2^(e-1), 2^e) */
        e = e - 1 - GEMM_ACT_TOP;
        e = e < -120 ? -120 : e > 120 ? 120 : e; /* 2^e and 2^-e normal f32 */
    }
    const float down = __int_as_float((127 - e) << 23); /* 2^-e */
    if (threadIdx.x == 0) colscale[c] = __int_as_float((127 + e) << 23);
    uint2 *qr = reinterpret_cast<uint2 *>(q + c * ld);
    for (int64_t i = threadIdx.x; i < n_in / 4; i += blockDim.x) {
        const float4 v = xr[i];
        const __half2 lo = __floats2half2_rn(__fmul_rn(v.x, down), __fmul_rn(v.y, down));
        const __half2 hi = __floats2half2_rn(__fmul_rn(v.z, down), __fmul_rn(v.w, down));
        qr[i] = make_uint2(*reinterpret_cast<const uint32_t *>(&lo),
                           *reinterpret_cast<const uint32_t *>(&hi));
    }
}

/* y[c][r] *= colscale[c] for the n_cols columns of n_out rows */
static __global__ void gemm_colscale_kernel(float *y, int64_t n_out, int64_t n, const float *colscale) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float s = colscale[i / n_out];
    if (s != 1.0f) y[i] = __fmul_rn(y[i], s);
}

/* ---- the route ------------------------------------------------------------------------------ */
static int64_t span_rows(const fp4_cuda_tensor *w) {
    int64_t r = (int64_t)(GEMM_W_BYTES / ((size_t)w->k_pad * 2)) / 128 * 128;
    if (r < 128) r = 128;
    if (r > 65535) r = 65535 / 128 * 128; /* grid.y of the widening kernel */
    return r < w->n_out ? r : w->n_out;
}

/* blas.mu held: the handle, made at the first call (never inside a graph capture: callers check);
 * 0 without one (an earlier attempt failed) */
static int blas_handle(void) {
    if (blas.h || blas.h_failed) return blas.h != NULL;
    if (blas.create(&blas.h) != CUBLAS_STATUS_SUCCESS) blas.h = NULL, blas.h_failed = 1;
    return blas.h != NULL;
}

extern "C" {

void fp4_cu_gemm_warm(void) {
    if (!fp4_cu_gemm_available()) return;
    pthread_mutex_lock(&blas.mu);
    (void)blas_handle();
    pthread_mutex_unlock(&blas.mu);
}

int fp4_cu_gemm_available(void) {
    pthread_once(&blas.once, blas_load);
    return blas.loaded;
}

fp4_status fp4_cu_gemm_f16_batched(int trans_a, int m, int n, int k, float alpha, const void *a, int lda,
                                   long long stride_a, const void *b, int ldb, long long stride_b, float *c,
                                   int ldc, long long stride_c, int batch, cudaStream_t stream) {
    if (!fp4_cu_gemm_available()) return FP4_ERR_UNSUPPORTED;
    cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &cap) != cudaSuccess || cap != cudaStreamCaptureStatusNone)
        return FP4_ERR_UNSUPPORTED; /* as fp4_cu_a16_gemm: never inside a capture */
    const float beta = 0.0f;
    fp4_status st = FP4_OK;
    pthread_mutex_lock(&blas.mu);
    if (!blas_handle()) st = FP4_CUDA_FAIL(cudaErrorNotSupported, "cublasCreate_v2 failed");
    else if (blas.set_stream(blas.h, stream) != CUBLAS_STATUS_SUCCESS)
        st = FP4_CUDA_FAIL(cudaErrorInvalidValue, "cublasSetStream_v2 failed");
    else if (blas.gemm_sb(blas.h, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, a,
                          CUDA_R_16F, lda, stride_a, b, CUDA_R_16F, ldb, stride_b, &beta, c, CUDA_R_32F, ldc,
                          stride_c, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
        st = FP4_CUDA_FAIL(cudaErrorLaunchFailure, "cublasGemmStridedBatchedEx failed");
    pthread_mutex_unlock(&blas.mu);
    return st;
}

size_t fp4_cu_a16_gemm_scratch(const fp4_cuda_tensor *w, int64_t n_cols) {
    if (!w || n_cols < 1 || w->k_pad <= 0) return 0;
    return FP4_CU_ALIGN((size_t)n_cols * (size_t)w->k_pad * 2) + FP4_CU_ALIGN((size_t)n_cols * 4) +
           FP4_CU_ALIGN((size_t)span_rows(w) * (size_t)w->k_pad * 2);
}

fp4_status fp4_cu_a16_gemm(const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols, float *d_y,
                           const fp4_cuda_scratch *s, cudaStream_t stream) {
    if (!w || !d_x || !d_y || n_cols < 1 || !s || !s->d_base) return FP4_ERR_INVALID_ARG;
    if (w->type != FP4_TYPE_NVFP4_E2M1 || !w->d_payload || !w->d_scales) return FP4_ERR_INVALID_ARG;
    if (w->n_in <= 0 || w->n_in % 16 || w->k_pad % 256 || w->k_pad < w->n_in || w->payload_stride % 8 ||
        !fp4_aligned16(d_x))
        return FP4_ERR_INVALID_ARG;
    if (!fp4_cu_gemm_available() || n_cols > INT32_MAX || w->n_out > INT32_MAX || w->k_pad > INT32_MAX)
        return fp4_cu_a16_native(w, d_x, n_cols, d_y, s, stream); /* the scratch is the larger one */
    if (FP4_CU_COUNTER_BYTES + fp4_cu_a16_gemm_scratch(w, n_cols) > s->bytes) return FP4_ERR_INVALID_ARG;
    __half *xq = (__half *)((uint8_t *)s->d_base + FP4_CU_COUNTER_BYTES);
    float *cs = (float *)((uint8_t *)xq + FP4_CU_ALIGN((size_t)n_cols * (size_t)w->k_pad * 2));
    __half *wq = (__half *)((uint8_t *)cs + FP4_CU_ALIGN((size_t)n_cols * 4));
    const int64_t ld = w->n_in, R = span_rows(w);
    fp4_cuda_tensor w1 = *w; /* the rows widened without scale2 (exact in f16): it is the GEMM's alpha */
    w1.scale2 = 1.0f;
    fp4_status st = FP4_OK;
    /* inside a graph capture the tile kernels serve (cuBLAS may allocate while it plans, which a
     * capture does not allow); the runtime captures only decode steps, and those have at most 64
     * columns, below this route's 128 */
    cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &cap) != cudaSuccess || cap != cudaStreamCaptureStatusNone)
        return fp4_cu_a16_native(w, d_x, n_cols, d_y, s, stream);
    pthread_mutex_lock(&blas.mu);
    if (!blas_handle()) {
        pthread_mutex_unlock(&blas.mu);
        return FP4_CUDA_FAIL(cudaErrorNotSupported, "cublasCreate_v2 failed");
    }
    gemm_act16_kernel<<<(unsigned)n_cols, 256, 0, stream>>>(d_x, w->n_in, ld, xq, cs);
    const cudaError_t e0 = cudaGetLastError();
    if (e0 != cudaSuccess) st = FP4_CUDA_FAIL(e0, "gemm_act16_kernel");
    if (!st && blas.set_stream(blas.h, stream) != CUBLAS_STATUS_SUCCESS)
        st = FP4_CUDA_FAIL(cudaErrorInvalidValue, "cublasSetStream_v2 failed");
    const float alpha = w->scale2, beta = 0.0f;
    for (int64_t r0 = 0; !st && r0 < w->n_out; r0 += R) {
        const int64_t m = w->n_out - r0 < R ? w->n_out - r0 : R;
        /* dequant.cu's widening (x 1.0f: the values e2m1 * e4m3 themselves), rows of n_in halves */
        if ((st = fp4_cuda_nvfp4_dequant(&w1, r0, m, FP4_TYPE_F16, wq, (fp4_cuda_stream)stream))) break;
        /* column-major view: Y[n_out x nc] (ld n_out) = W^T[k x m]^T (ld n_in) * X[k x nc] (ld n_in) */
        if (blas.gemm(blas.h, CUBLAS_OP_T, CUBLAS_OP_N, (int)m, (int)n_cols, (int)w->n_in, &alpha, wq,
                      CUDA_R_16F, (int)ld, xq, CUDA_R_16F, (int)ld, &beta, d_y + r0, CUDA_R_32F,
                      (int)w->n_out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
            st = FP4_CUDA_FAIL(cudaErrorLaunchFailure, "cublasGemmEx failed");
    }
    pthread_mutex_unlock(&blas.mu);
    if (st) return st;
    const int64_t n = n_cols * w->n_out;
    gemm_colscale_kernel<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(d_y, w->n_out, n, cs);
    FP4_CUDA_LAUNCHED();
    return FP4_OK;
}

} /* extern "C" */
