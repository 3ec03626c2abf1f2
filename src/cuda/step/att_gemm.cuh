/* att_gemm.cuh — native-mode attention of a prefill run through cuBLAS's tensor cores (the step's
 * attention for runs of ATT_GEMM_MIN_COLS or more columns of one slot at consecutive positions;
 * step.cu). Exact mode never comes here: its attention is stk_attention's pinned order.
 *
 * A run: m columns of slot `slot` at positions p0 .. p0+m-1 (their K and V rows already written by
 * the q/k/v prep), so every column attends over the first npos = p0 + m positions of the slot,
 * column c over the first p0 + c + 1 (causal). Per layer:
 *   1. att_q16_kernel: each (head, column) row of q (f32, after RoPE) scaled by a power of two 2^-e
 *      so that its largest |q| lies in [2^14, 2^15), rounded to f16 into q16[h][c][D] (no overflow
 *      past f16's 65504 whatever the activations; relative error 2^-11, as the GEMM projections);
 *      qs[h][c] = 2^e * attn_scale;
 *   2. S = q16 K^T per KV head (one strided-batched GEMM, the G query heads of a KV head side by side
 *      as G*m columns): S[h][c][j], f32 accumulation, rows ld floats apart;
 *   3. att_softmax_kernel: per (head, column) s_j = S * qs, max, exp, sum over j <= p0 + c, then
 *      P[h][c][j] = f16(e_j / sum) (0 past the column's last position, up to npos);
 *   4. O = P V per KV head and query head of the group (G strided-batched GEMMs) straight into the
 *      step's o rows [c][h*D + d].
 * Deterministic on one GPU model and cuBLAS version (as the GEMM projections); held to a
 * normalized error against fp4p_attend (tests/gpu/test_gpu_attention.cu) and the native logits to
 * transformers' (test_gpu_runtime). */
#ifndef FP4_RUNTIME_ATT_GEMM_CUH
#define FP4_RUNTIME_ATT_GEMM_CUH

#include "cuda/step/step_kernels.cuh"
#include <cuda_fp16.h>

#define ATT_GEMM_MIN_COLS 64 /* shorter runs take the pinned kernels */
#define ATT_GEMM_TOP 14      /* a q row's largest |q| is scaled into [2^14, 2^15) */
#define ATT_SM_THREADS 256

typedef struct att_gemm_args {
    const float *q;    /* the run's first column: [c][q_cs], heads h*D                         */
    int64_t q_cs;      /* floats between columns of q                                            */
    const uint16_t *k; /* the slot's K rows of this layer: row j at k + j*kvd (f16)              */
    const uint16_t *v; /* ... and V                                                              */
    float *o;          /* the run's first column of o: [c][nh*D]                                 */
    __half *q16;       /* scratch: nh * m * D halves                                             */
    float *qs;         /* scratch: nh * m                                                        */
    float *s;          /* scratch: nh * m * ld floats (the scores)                               */
    __half *p;         /* scratch: nh * m * ld halves (the probabilities)                        */
    int64_t ld;        /* >= npos, a multiple of 8                                               */
    int64_t p0, m;     /* positions p0 .. p0+m-1                                                 */
    int nh, nkv, d;
    float scale;
} att_gemm_args;

/* one warp per (head, column) row: blockIdx.x * 8 + warp = h * m + c */
static __global__ __launch_bounds__(256) void att_q16_kernel(att_gemm_args a) {
    const int lane = threadIdx.x & 31;
    const int64_t row = (int64_t)blockIdx.x * 8 + (threadIdx.x >> 5);
    if (row >= (int64_t)a.nh * a.m) return;
    const int64_t h = row / a.m, c = row % a.m;
    const float *src = a.q + c * a.q_cs + h * a.d;
    float mx = 0.0f;
    for (int i = lane; i < a.d; i += 32) {
        const float x = fabsf(src[i]);
        if (x <= 3.402823466e38f) mx = fmaxf(mx, x); /* finite only */
    }
#pragma unroll
    for (int off = 16; off >= 1; off >>= 1)
        mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, off));
    int e = 0;
    if (mx > 0.0f) {
        (void)frexpf(mx, &e);
        e = e - 1 - ATT_GEMM_TOP;
        e = e < -120 ? -120 : e > 120 ? 120 : e;
    }
    const float down = __int_as_float((127 - e) << 23);
    __half *dst = a.q16 + row * a.d;
    for (int i = lane; i < a.d; i += 32)
        dst[i] = __float2half_rn(__fmul_rn(src[i], down));
    if (lane == 0) a.qs[row] = __fmul_rn(__int_as_float((127 + e) << 23), a.scale);
}

static __device__ __forceinline__ float att_block_reduce(float v, float *red, bool is_max) {
#pragma unroll
    for (int off = 16; off >= 1; off >>= 1) {
        const float o = __shfl_xor_sync(0xFFFFFFFFu, v, off);
        v = is_max ? fmaxf(v, o) : v + o;
    }
    __syncthreads(); /* red is free again */
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    v = red[0];
    for (int w = 1; w < ATT_SM_THREADS / 32; w++)
        v = is_max ? fmaxf(v, red[w]) : v + red[w];
    return v;
}

/* one block per (head, column) row */
static __global__ __launch_bounds__(ATT_SM_THREADS) void att_softmax_kernel(att_gemm_args a) {
    __shared__ float red[ATT_SM_THREADS / 32];
    const int64_t row = blockIdx.x, c = row % a.m;
    const int64_t nv = a.p0 + c + 1, npos = a.p0 + a.m; /* valid positions; GEMM 2's depth */
    const float *s = a.s + row * a.ld;
    __half *p = a.p + row * a.ld;
    const float qs = a.qs[row];
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < nv; j += ATT_SM_THREADS)
        mx = fmaxf(mx, s[j] * qs);
    mx = att_block_reduce(mx, red, true);
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < nv; j += ATT_SM_THREADS)
        sum += __expf(s[j] * qs - mx);
    sum = att_block_reduce(sum, red, false);
    const float inv = 1.0f / sum;
    for (int64_t j = threadIdx.x; j < npos; j += ATT_SM_THREADS)
        p[j] = __float2half_rn(j < nv ? __expf(s[j] * qs - mx) * inv : 0.0f);
}

/* scratch of a run of up to mc columns over up to n_ctx positions (bytes, in the order of the
 * att_gemm_args pointers q16, qs, s, p) */
static inline int64_t att_gemm_ld(int64_t n_ctx) {
    return (n_ctx + 7) / 8 * 8;
}

/* the four launches of one layer's attention over one run; FP4_ERR_UNSUPPORTED (nothing launched)
 * where cuBLAS is not there or the stream captures a graph */
static inline fp4_status att_gemm_run(const att_gemm_args &a, cudaStream_t stream) {
    const int G = a.nh / a.nkv, D = a.d;
    const int64_t kvd = (int64_t)a.nkv * D, npos = a.p0 + a.m, rows = (int64_t)a.nh * a.m;
    if (a.m < 1 || npos > a.ld || rows > INT32_MAX || a.ld * a.m * G > INT32_MAX) return FP4_ERR_INVALID_ARG;
    if (!fp4_cu_gemm_available()) return FP4_ERR_UNSUPPORTED;
    cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &cap) != cudaSuccess || cap != cudaStreamCaptureStatusNone)
        return FP4_ERR_UNSUPPORTED;
    att_q16_kernel<<<(unsigned)((rows + 7) / 8), 256, 0, stream>>>(a);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return FP4_CUDA_FAIL(e, "att_q16_kernel");
    /* S^T (npos x G*m, column-major, ld) = K^T' ... per KV head g: A = K (D x npos, lda kvd), op T */
    fp4_status st = fp4_cu_gemm_f16_batched(1, (int)npos, (int)(G * a.m), D, 1.0f, a.k, (int)kvd, D, a.q16, D,
                                            (long long)G * a.m * D, a.s, (int)a.ld, (long long)G * a.m * a.ld,
                                            a.nkv, stream);
    if (st) return st;
    att_softmax_kernel<<<(unsigned)rows, ATT_SM_THREADS, 0, stream>>>(a);
    e = cudaGetLastError();
    if (e != cudaSuccess) return FP4_CUDA_FAIL(e, "att_softmax_kernel");
    /* O^T (D x m, ldc nh*D) = V (D x npos, lda kvd) P^T (npos x m, ld) per query head of the group */
    for (int hi = 0; hi < G && !st; hi++)
        st = fp4_cu_gemm_f16_batched(0, D, (int)a.m, (int)npos, 1.0f, a.v, (int)kvd, D, a.p + hi * a.m * a.ld,
                                     (int)a.ld, (long long)G * a.m * a.ld, a.o + hi * D, a.nh * D,
                                     (long long)G * D, a.nkv, stream);
    return st;
}

#endif /* FP4_RUNTIME_ATT_GEMM_CUH */
