/* dense.cu — F16/BF16 weight matvec (the unquantized LM head, SPEC §3's default).
 * One warp per R rows; each lane reads 16 bytes (8 values) of a row per step, widens them to f32
 * exactly, FMAs against f32 activations, and the warp adds its lanes in a fixed butterfly order:
 * deterministic run to run. Held to a float tolerance against a double-precision reference. BF16
 * weights in native mode from 2 columns take the tensor cores instead (dense_mma.cu). */
#include "common.cuh"

template <bool BF16, int NC, int R>
static __global__ __launch_bounds__(256) void dense_matvec_kernel(const uint8_t *__restrict__ w,
                                                                  int64_t stride, int64_t n_out, int64_t n_in,
                                                                  const float *__restrict__ x,
                                                                  float *__restrict__ y) {
    fp4_pdl_trigger(); /* launched with PDL (the decode step's LM head): the next kernel may queue */
    fp4_pdl_wait();    /* ... and x (and y, which earlier kernels may read) only after the previous grid */
    const int lane = threadIdx.x & 31;
    const int64_t row0 = (((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5) * R;
    if (row0 >= n_out) return;
    float acc[R][NC];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int c = 0; c < NC; c++) acc[r][c] = 0.0f;
    for (int64_t ch = lane; ch < n_in / 8; ch += 32) {
        float wv[R][8];
#pragma unroll
        for (int r = 0; r < R; r++) {
            const int64_t row = row0 + r < n_out ? row0 + r : n_out - 1;
            fp4_widen8<BF16>(fp4_ldg16(w + row * stride + ch * 16), wv[r]);
        }
#pragma unroll
        for (int c = 0; c < NC; c++) {
            const float4 *xp = reinterpret_cast<const float4 *>(x + c * n_in + ch * 8);
            const float4 a = __ldg(xp), b = __ldg(xp + 1);
            const float xv[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
            for (int r = 0; r < R; r++)
#pragma unroll
                for (int i = 0; i < 8; i++) acc[r][c] = __fmaf_rn(wv[r][i], xv[i], acc[r][c]);
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int c = 0; c < NC; c++)
#pragma unroll
            for (int m = 16; m >= 1; m >>= 1)
                acc[r][c] = __fadd_rn(acc[r][c], __shfl_xor_sync(0xFFFFFFFFu, acc[r][c], m));
    if (lane == 0)
#pragma unroll
        for (int r = 0; r < R; r++)
            if (row0 + r < n_out)
#pragma unroll
                for (int c = 0; c < NC; c++) y[c * n_out + row0 + r] = acc[r][c];
}

template <bool BF16, int NC, int R>
static fp4_status launch_dense(const fp4_cuda_tensor *t, const float *x, float *y, cudaStream_t s) {
    const int64_t warps = (t->n_out + R - 1) / R;
    return fp4_cu_launch(dim3((unsigned)((warps * 32 + 255) / 256)), dim3(256), 0, s, 1,
                         dense_matvec_kernel<BF16, NC, R>, t->d_payload, t->payload_stride, t->n_out, t->n_in,
                         x, y);
}

template <bool BF16>
static fp4_status dense_chunk(const fp4_cuda_tensor *t, const float *x, int64_t nc, float *y,
                              cudaStream_t s) {
    switch (nc) {
    case 1: return launch_dense<BF16, 1, 1>(t, x, y, s);
    case 2: return launch_dense<BF16, 2, 1>(t, x, y, s);
    case 4: return launch_dense<BF16, 4, 2>(t, x, y, s);
    default: return launch_dense<BF16, 8, 2>(t, x, y, s);
    }
}

extern "C" {

fp4_status fp4_cu_dense(const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols, float *d_y,
                        const fp4_cuda_scratch *s, cudaStream_t stream) {
    if (!w || !d_x || !d_y || !w->d_payload || n_cols < 1) return FP4_ERR_INVALID_ARG;
    if (w->type != FP4_TYPE_F16 && w->type != FP4_TYPE_BF16) return FP4_ERR_DTYPE;
    if (w->n_in <= 0 || w->n_in % 8) return FP4_ERR_SHAPE;
    if (w->payload_stride % 16 || !fp4_aligned16(w->d_payload) || !fp4_aligned16(d_x))
        return FP4_ERR_INVALID_ARG;
    for (int64_t c0 = 0; c0 < n_cols;) {
        const int64_t left = n_cols - c0;
        const int64_t nc = left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
        const fp4_status st =
            w->type == FP4_TYPE_BF16
                ? dense_chunk<true>(w, d_x + c0 * w->n_in, nc, d_y + c0 * w->n_out, stream)
                : dense_chunk<false>(w, d_x + c0 * w->n_in, nc, d_y + c0 * w->n_out, stream);
        if (st != FP4_OK) return st;
        c0 += nc;
    }
    return FP4_OK;
}

} /* extern "C" */
