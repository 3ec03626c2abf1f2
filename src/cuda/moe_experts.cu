/* moe_experts.cu — the experts' projections of a mixture-of-experts layer (moe_experts.cuh): one
 * launch serves every (column, choice) pair of a step, grid row y = the pair (z = the part: gate and
 * up together), and each block reads the expert its pair chose (d_sel, written by the step's
 * routing kernel) before it reads a weight; so the launch sequence is the same for any routing and a
 * decode step stays one CUDA graph.
 *   NVFP4 W4A16: the Q8_K pass of the input columns (q8k.cu, or the caller's), then the body of the
 *     exact route's dp4a kernel (a16_dp4a.cuh, a16_exact_rows<1, 2, a16_dot_split>) on the pair's
 *     expert: SPEC §4 bit for bit, the bits of that expert's own one-column projection (the CPU's
 *     exact route). Native mode runs it too (exact is within any native tolerance).
 *   F16/BF16: the CPU's dense.pinned (fp4p_dot: lane l adds the products of elements l, l+32, ...
 *     in increasing order from +0.0f, then the xor butterfly), one warp per row.
 * A pair reads its expert's weights itself; in a step of several columns the pairs are visited in
 * expert order (fp4_cu_moe_order), so the pairs after the first of an expert read it from L2. */
#include "cuda/a16_dp4a.cuh"
#include "cuda/moe_experts.cuh"

#define MOE_R 2        /* NVFP4: rows per warp (the exact route's dp4a kernel) */
#define MOE_DP_WARPS 4 /* dense: warps (rows) per block */

static __device__ __forceinline__ int64_t moe_expert(const int32_t *sel, int64_t p, int64_t n_experts) {
    const int32_t e = sel[p];
    return e >= 0 && e < n_experts ? e : 0; /* the routing kernel never writes another: memory safety */
}

/* one launch's arguments (by value: a captured graph keeps them; the expert comes from sel) */
typedef struct moe_args {
    const uint8_t *payload[2], *scales[2];
    const float *scale2[2];
    float *y[2];
    const int32_t *sel, *order;
    int64_t e_pbytes, e_sbytes, pstride, sstride, n_out, n_in, k_pad, n_experts, xdiv;
    const int8_t *xq;
    const float *xd, *x;
} moe_args;

static __device__ __forceinline__ int64_t moe_pair(const moe_args &a) {
    return a.order ? a.order[blockIdx.y] : (int64_t)blockIdx.y;
}

static __global__ __launch_bounds__(256) void moe_a16_kernel(const moe_args a) {
    fp4_pdl_trigger();
    fp4_pdl_wait(); /* the routing kernel's choices and the Q8_K pass from here on */
    const int z = blockIdx.z;
    const int64_t p = moe_pair(a), e = moe_expert(a.sel, p, a.n_experts), xc = p / a.xdiv;
    a16_exact_rows<1, MOE_R, a16_dot_split>(a.payload[z] + e * a.e_pbytes, a.scales[z] + e * a.e_sbytes,
                                            a.pstride, a.sstride, a.n_out, (int)(a.k_pad / 256), a.k_pad,
                                            __ldg(a.scale2[z] + e), a.xq + xc * a.k_pad,
                                            a.xd + xc * (a.k_pad / 256), a.y[z] + p * a.n_out);
}

template <bool BF16>
static __global__ __launch_bounds__(MOE_DP_WARPS * 32) void moe_dense_kernel(const moe_args a) {
    fp4_pdl_trigger();
    fp4_pdl_wait();
    const int lane = threadIdx.x & 31, z = blockIdx.z;
    const int64_t row = (int64_t)blockIdx.x * MOE_DP_WARPS + (threadIdx.x >> 5), n_in = a.n_in;
    if (row >= a.n_out) return; /* a whole warp leaves together */
    const int64_t p = moe_pair(a), e = moe_expert(a.sel, p, a.n_experts);
    const uint16_t *wr = (const uint16_t *)(a.payload[z] + e * a.e_pbytes) + row * n_in;
    const float *xr = a.x + (p / a.xdiv) * n_in;
    float acc = 0.0f;
    for (int64_t k = lane; k < n_in; k += 32) {
        const uint16_t h = __ldg(wr + k);
        const float wv = BF16 ? __uint_as_float((uint32_t)h << 16) : __half2float(__ushort_as_half(h));
        acc = __fadd_rn(acc, __fmul_rn(wv, __ldg(xr + k)));
    }
#pragma unroll
    for (int off = 16; off >= 1; off >>= 1)
        acc = __fadd_rn(acc, __shfl_xor_sync(0xFFFFFFFFu, acc, off));
    if (lane == 0) a.y[z][p * a.n_out + row] = acc;
}

/* a stable sort of the pairs by expert in one block: pair p goes to the place of the pairs before
 * it in (expert, pair) order (each thread counts them for its pairs, the choices read from shared
 * memory where they fit) */
#define MOE_ORDER_SHARED 4096
static __global__ __launch_bounds__(1024) void moe_order_kernel(const int32_t *sel, int64_t n,
                                                                int32_t *order) {
    fp4_pdl_trigger();
    fp4_pdl_wait();
    __shared__ int32_t ss[MOE_ORDER_SHARED];
    const bool sh = n <= MOE_ORDER_SHARED;
    for (int64_t p = threadIdx.x; sh && p < n; p += blockDim.x)
        ss[p] = sel[p];
    __syncthreads();
    const int32_t *v = sh ? ss : sel;
    for (int64_t p = threadIdx.x; p < n; p += blockDim.x) {
        const int32_t e = v[p];
        int64_t at = 0;
        for (int64_t q = 0; q < n; q++) {
            const int32_t f = v[q];
            at += f < e || (f == e && q < p);
        }
        order[at] = (int32_t)p;
    }
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

void fp4_cu_moe_act_planes(const fp4_cu_moe_part *w, int64_t n_x, void *d_scratch, int8_t **q, float **d) {
    *q = (int8_t *)d_scratch;
    *d = (float *)((uint8_t *)d_scratch + FP4_CU_ALIGN((size_t)(n_x * w->k_pad)));
}

/* the launch of nw parts over the pairs (xq/xd: the NVFP4 input's Q8_K pass; x: the dense input) */
static fp4_status moe_launch(const fp4_cu_moe_part *const *w, int nw, const int32_t *sel,
                             const int32_t *order, int64_t n_pairs, int64_t xdiv, const int8_t *xq,
                             const float *xd, const float *x, float *const *y, cudaStream_t stream) {
    const fp4_cu_moe_part *p0 = w[0];
    moe_args a = {};
    for (int i = 0; i < nw; i++) {
        const fp4_cu_moe_part *p = w[i];
        if (!p->d_payload || !y[i] || p->type != p0->type || p->n_out != p0->n_out || p->n_in != p0->n_in ||
            p->n_experts != p0->n_experts || p->e_pbytes != p0->e_pbytes || p->e_sbytes != p0->e_sbytes ||
            (p->type == FP4_TYPE_NVFP4_E2M1 && (!p->d_scales || !p->d_scale2)))
            return FP4_ERR_INVALID_ARG;
        a.payload[i] = p->d_payload, a.scales[i] = p->d_scales, a.scale2[i] = p->d_scale2, a.y[i] = y[i];
    }
    a.sel = sel, a.order = order, a.e_pbytes = p0->e_pbytes, a.e_sbytes = p0->e_sbytes;
    a.pstride = p0->payload_stride, a.sstride = p0->scale_stride, a.n_out = p0->n_out, a.n_in = p0->n_in;
    a.k_pad = p0->k_pad, a.n_experts = p0->n_experts, a.xdiv = xdiv, a.xq = xq, a.xd = xd, a.x = x;
    if (p0->type != FP4_TYPE_NVFP4_E2M1) {
        const int64_t blocks = (p0->n_out + MOE_DP_WARPS - 1) / MOE_DP_WARPS;
        const dim3 grid((unsigned)blocks, (unsigned)n_pairs, (unsigned)nw), block(MOE_DP_WARPS * 32);
        return p0->type == FP4_TYPE_BF16
                   ? fp4_cu_launch(grid, block, 0, stream, 1, moe_dense_kernel<true>, a)
                   : fp4_cu_launch(grid, block, 0, stream, 1, moe_dense_kernel<false>, a);
    }
    const int64_t warps = (p0->n_out + MOE_R - 1) / MOE_R;
    const dim3 grid((unsigned)((warps * 32 + 255) / 256), (unsigned)n_pairs, (unsigned)nw);
    return fp4_cu_launch(grid, dim3(256), 0, stream, 1, moe_a16_kernel, a);
}

static int pairs_ok(int64_t n_pairs, int64_t xdiv) {
    return n_pairs >= 1 && n_pairs <= 65535 && xdiv >= 1 && n_pairs % xdiv == 0;
}

fp4_status fp4_cu_moe_project(const fp4_cu_moe_part *const *w, int nw, const int32_t *d_sel,
                              const int32_t *d_order, int64_t n_pairs, int64_t xdiv, const float *d_x,
                              float *const *d_y, void *d_scratch, size_t scratch_bytes, cudaStream_t stream) {
    if (!w || nw < 1 || nw > 2 || !w[0] || (nw == 2 && !w[1]) || !d_sel || !d_x || !d_y ||
        !pairs_ok(n_pairs, xdiv))
        return FP4_ERR_INVALID_ARG;
    if (!w[0]->d_payload || !fp4_cu_moe_route_name(w[0]->type, w[0]->n_in, 0.0f)) return FP4_ERR_UNSUPPORTED;
    const int64_t n_x = n_pairs / xdiv;
    if (w[0]->type != FP4_TYPE_NVFP4_E2M1)
        return moe_launch(w, nw, d_sel, d_order, n_pairs, xdiv, NULL, NULL, d_x, d_y, stream);
    if (!d_scratch || fp4_cu_moe_scratch_bytes(w[0], n_x) > scratch_bytes || !fp4_aligned16(d_x) ||
        !fp4_aligned16(d_scratch))
        return FP4_ERR_INVALID_ARG;
    int8_t *q;
    float *d;
    fp4_cu_moe_act_planes(w[0], n_x, d_scratch, &q, &d);
    FP4_CU_TRY(fp4_cu_q8k_quantize(d_x, w[0]->n_in, w[0]->k_pad, n_x, q, d, NULL, 0, stream));
    return moe_launch(w, nw, d_sel, d_order, n_pairs, xdiv, q, d, NULL, d_y, stream);
}

fp4_status fp4_cu_moe_project_pre(const fp4_cu_moe_part *w, const int32_t *d_sel, const int32_t *d_order,
                                  int64_t n_pairs, const int8_t *d_q, const float *d_d, float *d_y,
                                  cudaStream_t stream) {
    if (!w || !d_sel || !d_q || !d_d || !d_y || !pairs_ok(n_pairs, 1)) return FP4_ERR_INVALID_ARG;
    if (w->type != FP4_TYPE_NVFP4_E2M1 || !fp4_aligned16(d_q)) return FP4_ERR_UNSUPPORTED;
    return moe_launch(&w, 1, d_sel, d_order, n_pairs, 1, d_q, d_d, NULL, &d_y, stream);
}

fp4_status fp4_cu_moe_order(const int32_t *d_sel, int64_t n_pairs, int32_t *d_order, cudaStream_t stream) {
    if (!d_sel || !d_order || !pairs_ok(n_pairs, 1)) return FP4_ERR_INVALID_ARG;
    return fp4_cu_launch(dim3(1), dim3(1024), 0, stream, 1, moe_order_kernel, d_sel, n_pairs, d_order);
}

} /* extern "C" */
