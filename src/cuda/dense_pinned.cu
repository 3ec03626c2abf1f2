/* dense_pinned.cu — F16/BF16 weights in exact mode: the CUDA twin of the CPU's "dense.pinned"
 * route (src/cpu/project.c), bit for bit. y[r] = fp4p_dot(w_row_r widened to f32, x_c, n_in):
 * every product rounded once in f32 (__fmul_rn), then the pinned 32-lane reduction of
 * src/format/pinned.h: lane l adds the products of elements l, l+32, l+64, ... in increasing
 * order (a lane with no element keeps +0.0f; absent elements are skipped, never added as 0), and
 * the 32 partials meet in the xor butterfly (off = 16, 8, 4, 2, 1). One warp per row: lane l owns
 * exactly the elements the reduction gives it, so a warp's 2-byte loads of 32 consecutive values
 * are one coalesced 64-byte read. Up to 8 columns share one pass over the row. */
#include "common.cuh"

#define DP_WARPS 4 /* warps (rows) per block */

template <bool BF16> static __device__ __forceinline__ float dp_widen(uint16_t h) {
    if (BF16) return __uint_as_float((uint32_t)h << 16);
    return __half2float(__ushort_as_half(h)); /* exact: every f16 is an f32 */
}

/* a weight (never written by a kernel of the step): read-only path, and the L2 fetches the aligned
 * 256 bytes around it, so a warp's 64-byte read brings the row's next three as well (the same hint
 * as bf16.dense.mma's, CLAIMS head-1); the values are the same */
static __device__ __forceinline__ uint16_t dp_ldg_w(const uint16_t *p) {
    unsigned short v;
    asm("ld.global.nc.L2::256B.u16 %0, [%1];" : "=h"(v) : "l"(p));
    return v;
}

template <bool BF16, int NC>
static __global__ __launch_bounds__(DP_WARPS * 32) void dense_pinned_kernel(const uint16_t *__restrict__ w,
                                                                            int64_t stride, int64_t n_out,
                                                                            int64_t n_in,
                                                                            const float *__restrict__ x,
                                                                            float *__restrict__ y) {
    fp4_pdl_trigger(); /* launched with PDL (the decode step's LM head): the next kernel may queue */
    fp4_pdl_wait();    /* ... and x (and y, which earlier kernels may read) only after the previous grid */
    const int lane = threadIdx.x & 31;
    const int64_t row = (int64_t)blockIdx.x * DP_WARPS + (threadIdx.x >> 5);
    if (row >= n_out) return; /* a whole warp leaves together */
    const uint16_t *wr = w + row * stride;
    float acc[NC];
#pragma unroll
    for (int c = 0; c < NC; c++)
        acc[c] = 0.0f;
    int64_t k = lane;
    for (; k + 224 < n_in; k += 256) { /* eight elements of this lane in flight */
        float wv[8];
#pragma unroll
        for (int m = 0; m < 8; m++)
            wv[m] = dp_widen<BF16>(dp_ldg_w(wr + k + 32 * m));
#pragma unroll
        for (int c = 0; c < NC; c++)
#pragma unroll
            for (int m = 0; m < 8; m++)
                acc[c] = __fadd_rn(acc[c], __fmul_rn(wv[m], __ldg(x + c * n_in + k + 32 * m)));
    }
    for (; k < n_in; k += 32) {
        const float wv = dp_widen<BF16>(dp_ldg_w(wr + k));
#pragma unroll
        for (int c = 0; c < NC; c++)
            acc[c] = __fadd_rn(acc[c], __fmul_rn(wv, __ldg(x + c * n_in + k)));
    }
#pragma unroll
    for (int c = 0; c < NC; c++)
#pragma unroll
        for (int off = 16; off >= 1; off >>= 1)
            acc[c] = __fadd_rn(acc[c], __shfl_xor_sync(0xFFFFFFFFu, acc[c], off));
    if (lane == 0)
#pragma unroll
        for (int c = 0; c < NC; c++)
            y[c * n_out + row] = acc[c];
}

template <bool BF16, int NC>
static fp4_status launch_pinned(const fp4_cuda_tensor *t, const float *x, float *y, cudaStream_t s) {
    const int64_t blocks = (t->n_out + DP_WARPS - 1) / DP_WARPS;
    return fp4_cu_launch(dim3((unsigned)blocks), dim3(DP_WARPS * 32), 0, s, 1, dense_pinned_kernel<BF16, NC>,
                         (const uint16_t *)t->d_payload, t->payload_stride / 2, t->n_out, t->n_in, x, y);
}

template <bool BF16>
static fp4_status pinned_chunk(const fp4_cuda_tensor *t, const float *x, int64_t nc, float *y,
                               cudaStream_t s) {
    switch (nc) {
    case 1:
        return launch_pinned<BF16, 1>(t, x, y, s);
    case 2:
        return launch_pinned<BF16, 2>(t, x, y, s);
    case 4:
        return launch_pinned<BF16, 4>(t, x, y, s);
    default:
        return launch_pinned<BF16, 8>(t, x, y, s);
    }
}

extern "C" {

fp4_status fp4_cu_dense_pinned(const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols, float *d_y,
                               const fp4_cuda_scratch *s, cudaStream_t stream) {
    if (!w || !d_x || !d_y || !w->d_payload || n_cols < 1) return FP4_ERR_INVALID_ARG;
    if (w->type != FP4_TYPE_F16 && w->type != FP4_TYPE_BF16) return FP4_ERR_DTYPE;
    if (w->n_in <= 0 || w->n_out <= 0 || w->payload_stride % 2 || w->payload_stride < 2 * w->n_in)
        return FP4_ERR_SHAPE;
    if (w->n_out > (int64_t)DP_WARPS * 0x7FFFFFFF) return FP4_ERR_LIMIT;
    for (int64_t c0 = 0; c0 < n_cols;) {
        const int64_t left = n_cols - c0;
        const int64_t nc = left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
        const fp4_status st =
            w->type == FP4_TYPE_BF16
                ? pinned_chunk<true>(w, d_x + c0 * w->n_in, nc, d_y + c0 * w->n_out, stream)
                : pinned_chunk<false>(w, d_x + c0 * w->n_in, nc, d_y + c0 * w->n_out, stream);
        if (st != FP4_OK) return st;
        c0 += nc;
    }
    return FP4_OK;
}

} /* extern "C" */
