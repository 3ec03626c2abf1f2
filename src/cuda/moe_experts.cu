/* moe_experts.cu — the experts' projections of a mixture-of-experts layer (moe_experts.cuh): one
 * launch serves every (column, choice) pair of a step, grid row y = the pair, and each block reads
 * the expert its pair chose (d_sel, written by the step's routing kernel) before it reads a weight;
 * so the launch sequence is the same for any routing and a decode step stays one CUDA graph.
 *   NVFP4 W4A16: the Q8_K pass of the input columns (q8k.cu), then the body of the exact route's
 *     dp4a kernel (a16_dp4a.cuh, a16_exact_rows<1, 2, a16_dot_split>) on the pair's expert: SPEC §4
 *     bit for bit, the bits of that expert's own one-column projection (the CPU's exact route).
 *     Native mode runs it too (exact is within any native tolerance).
 *   F16/BF16: the CPU's dense.pinned (fp4p_dot: lane l adds the products of elements l, l+32, ...
 *     in increasing order from +0.0f, then the xor butterfly), one warp per row.
 * A pair reads its expert's weights itself: pairs that chose one expert read it once each (from L2
 * after the first), the cost of keeping the expert choice on the device. */
#include "cuda/a16_dp4a.cuh"
#include "cuda/moe_experts.cuh"

#define MOE_R 2        /* NVFP4: rows per warp (the exact route's dp4a kernel) */
#define MOE_DP_WARPS 4 /* dense: warps (rows) per block */

static __device__ __forceinline__ int64_t moe_expert(const int32_t *sel, int64_t p, int64_t n_experts) {
    const int32_t e = sel[p];
    return e >= 0 && e < n_experts ? e : 0; /* the routing kernel never writes another: memory safety */
}

static __global__ __launch_bounds__(256) void moe_a16_kernel(
    const uint8_t *__restrict__ payload, const uint8_t *__restrict__ scales, int64_t e_pbytes,
    int64_t e_sbytes, int64_t pstride, int64_t sstride, int64_t n_out, int nsb, int64_t k_pad,
    const float *__restrict__ scale2, int64_t n_experts, const int32_t *__restrict__ sel, int64_t xdiv,
    const int8_t *__restrict__ xq, const float *__restrict__ xd, float *__restrict__ y) {
    fp4_pdl_trigger();
    fp4_pdl_wait(); /* the routing kernel's choices and the Q8_K pass from here on */
    const int64_t p = blockIdx.y, e = moe_expert(sel, p, n_experts), xc = p / xdiv;
    a16_exact_rows<1, MOE_R, a16_dot_split>(payload + e * e_pbytes, scales + e * e_sbytes, pstride, sstride,
                                            n_out, nsb, k_pad, __ldg(scale2 + e), xq + xc * k_pad,
                                            xd + xc * (k_pad / 256), y + p * n_out);
}

template <bool BF16>
static __global__ __launch_bounds__(MOE_DP_WARPS * 32) void moe_dense_kernel(
    const uint16_t *__restrict__ w, int64_t e_elems, int64_t n_out, int64_t n_in, int64_t n_experts,
    const int32_t *__restrict__ sel, int64_t xdiv, const float *__restrict__ x, float *__restrict__ y) {
    fp4_pdl_trigger();
    fp4_pdl_wait();
    const int lane = threadIdx.x & 31;
    const int64_t row = (int64_t)blockIdx.x * MOE_DP_WARPS + (threadIdx.x >> 5);
    if (row >= n_out) return; /* a whole warp leaves together */
    const int64_t p = blockIdx.y, e = moe_expert(sel, p, n_experts);
    const uint16_t *wr = w + e * e_elems + row * n_in;
    const float *xr = x + (p / xdiv) * n_in;
    float acc = 0.0f;
    for (int64_t k = lane; k < n_in; k += 32) {
        const uint16_t h = __ldg(wr + k);
        const float wv = BF16 ? __uint_as_float((uint32_t)h << 16) : __half2float(__ushort_as_half(h));
        acc = __fadd_rn(acc, __fmul_rn(wv, __ldg(xr + k)));
    }
#pragma unroll
    for (int off = 16; off >= 1; off >>= 1)
        acc = __fadd_rn(acc, __shfl_xor_sync(0xFFFFFFFFu, acc, off));
    if (lane == 0) y[p * n_out + row] = acc;
}

extern "C" {

const char *fp4_cu_moe_route_name(int64_t type, int64_t n_in, float input_scale_inv) {
    if (n_in <= 0) return NULL;
    if (type == FP4_TYPE_NVFP4_E2M1)
        return input_scale_inv > 0.0f || n_in % 256 ? NULL : "moe.nvfp4.a16.exact.dp4a";
    if (type == FP4_TYPE_BF16) return "moe.bf16.dense.pinned";
    if (type == FP4_TYPE_F16) return "moe.f16.dense.pinned";
    return NULL;
}

int fp4_cu_moe_part_stub(int64_t type, int64_t n_out, int64_t n_in, float input_scale_inv, int64_t n_experts,
                         fp4_cu_moe_part *o) {
    memset(o, 0, sizeof *o);
    if (!fp4_cu_moe_route_name(type, n_in, input_scale_inv) || n_out <= 0 || n_experts <= 0) return -1;
    o->type = type, o->n_out = n_out, o->n_in = n_in, o->k_pad = n_in, o->n_experts = n_experts;
    if (type == FP4_TYPE_NVFP4_E2M1) {
        o->payload_stride = n_in / 2, o->scale_stride = n_in / 16;
        o->e_pbytes = (int64_t)FP4_CU_ALIGN((uint64_t)(o->payload_stride * n_out));
        o->e_sbytes = (int64_t)FP4_CU_ALIGN((uint64_t)(o->scale_stride * n_out));
    } else {
        o->payload_stride = 2 * n_in;
        o->e_pbytes = o->payload_stride * n_out;
    }
    return 0;
}

size_t fp4_cu_moe_scratch_bytes(const fp4_cu_moe_part *w, int64_t n_x) {
    if (!w || n_x < 1 || w->type != FP4_TYPE_NVFP4_E2M1) return 0;
    return FP4_CU_ALIGN((size_t)(n_x * w->k_pad)) + FP4_CU_ALIGN((size_t)(n_x * (w->k_pad / 256)) * 4);
}

fp4_status fp4_cu_moe_project(const fp4_cu_moe_part *w, const int32_t *d_sel, int64_t n_pairs, int64_t xdiv,
                              const float *d_x, float *d_y, void *d_scratch, size_t scratch_bytes,
                              cudaStream_t stream) {
    if (!w || !d_sel || !d_x || !d_y || n_pairs < 1 || n_pairs > 65535 || xdiv < 1 || n_pairs % xdiv)
        return FP4_ERR_INVALID_ARG;
    if (!w->d_payload || !fp4_cu_moe_route_name(w->type, w->n_in, 0.0f)) return FP4_ERR_UNSUPPORTED;
    const int64_t n_x = n_pairs / xdiv;
    if (w->type != FP4_TYPE_NVFP4_E2M1) {
        const int64_t blocks = (w->n_out + MOE_DP_WARPS - 1) / MOE_DP_WARPS;
        const dim3 grid((unsigned)blocks, (unsigned)n_pairs), block(MOE_DP_WARPS * 32);
        const uint16_t *p = (const uint16_t *)w->d_payload;
        const int64_t ee = w->e_pbytes / 2;
        return w->type == FP4_TYPE_BF16
                   ? fp4_cu_launch(grid, block, 0, stream, 1, moe_dense_kernel<true>, p, ee, w->n_out,
                                   w->n_in, w->n_experts, d_sel, xdiv, d_x, d_y)
                   : fp4_cu_launch(grid, block, 0, stream, 1, moe_dense_kernel<false>, p, ee, w->n_out,
                                   w->n_in, w->n_experts, d_sel, xdiv, d_x, d_y);
    }
    if (!w->d_scales || !w->d_scale2 || !d_scratch || fp4_cu_moe_scratch_bytes(w, n_x) > scratch_bytes ||
        !fp4_aligned16(d_x) || !fp4_aligned16(d_scratch))
        return FP4_ERR_INVALID_ARG;
    int8_t *q = (int8_t *)d_scratch;
    float *d = (float *)((uint8_t *)q + FP4_CU_ALIGN((size_t)(n_x * w->k_pad)));
    FP4_CU_TRY(fp4_cu_q8k_quantize(d_x, w->n_in, w->k_pad, n_x, q, d, NULL, 0, stream));
    const int64_t warps = (w->n_out + MOE_R - 1) / MOE_R;
    const dim3 grid((unsigned)((warps * 32 + 255) / 256), (unsigned)n_pairs);
    return fp4_cu_launch(grid, dim3(256), 0, stream, 1, moe_a16_kernel, w->d_payload, w->d_scales,
                         w->e_pbytes, w->e_sbytes, w->payload_stride, w->scale_stride, w->n_out,
                         (int)(w->n_in / 256), w->k_pad, w->d_scale2, w->n_experts, d_sel, xdiv,
                         (const int8_t *)q, (const float *)d, d_y);
}

} /* extern "C" */
