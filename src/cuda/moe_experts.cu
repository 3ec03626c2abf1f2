/* moe_experts.cu — the experts' projections of a mixture-of-experts layer (moe_experts.cuh): one
 * launch serves every (column, choice) pair of a step (z = the part: gate and up together), and
 * each block reads the expert its pairs chose (d_sel, written by the step's routing kernel; the
 * group table, fp4_cu_moe_group) before it reads a weight; so the launch sequence is the same for
 * any routing and a decode step stays one CUDA graph.
 *   NVFP4 W4A16 exact: the Q8_K pass of the input columns (q8k.cu, or the caller's), then the body
 *     of the exact route's dp4a kernel (a16_dp4a.cuh, a16_exact_rows_at<NC, 2, a16_dot_split>) on
 *     the expert: SPEC §4 bit for bit, the bits of that expert's own one-column projection (the
 *     CPU's exact route); each column's dot is the same whatever NC and its neighbours.
 *   NVFP4 W4A16 native (SPEC §6): the int16 activation pass, then the native dp2a body
 *     (native_dp2a.cuh, native_dp2a_rows_at<NC, 2>): f32 sums, deterministic, the CPU's native
 *     route's tolerance.
 *   F16/BF16: the CPU's dense.pinned (fp4p_dot: lane l adds the products of elements l, l+32, ...
 *     in increasing order from +0.0f, then the xor butterfly), one warp per row, one pair a block.
 * Grouped (FP4_CU_MOE_GROUPED): block (x, g) computes row tile x of the g-th chosen expert for all
 * its pairs, so a step of several columns reads each chosen expert once (the bytes argument of
 * CLAIMS moe-gpu); a decode step of one column has K distinct experts, one pair each, and runs
 * per pair. */
#include "cuda/a16_dp4a.cuh"
#include "cuda/native_dp2a.cuh"
#include "cuda/moe_experts.cuh"

#define MOE_R 2          /* NVFP4: rows per warp (the exact route's dp4a kernel) */
#define MOE_DP_WARPS 4   /* dense: warps (rows) per block */
#define MOE_EXACT_RUN 4  /* grouped: most columns a run, exact (8 would spill registers) */
#define MOE_NATIVE_RUN 2 /* ... native (every column's int16 activations live in registers) */

static __device__ __forceinline__ int64_t moe_expert(const int32_t *sel, int64_t p, int64_t n_experts) {
    const int32_t e = sel[p];
    return e >= 0 && e < n_experts ? e : 0; /* the routing kernel never writes another: memory safety */
}

/* one launch's arguments (by value: a captured graph keeps them; the expert comes from sel or grp) */
typedef struct moe_args {
    const uint8_t *payload[2], *scales[2];
    const float *scale2[2];
    float *y[2];
    const int32_t *sel, *order, *grp; /* order: the group table's pair order (NULL: pair order) */
    int64_t e_pbytes, e_sbytes, pstride, sstride, n_out, n_in, k_pad, n_experts, xdiv, n_pairs;
    const void *xq; /* the activation pass: int8 (exact) or int16 (native) values */
    const float *xd, *x;
} moe_args;

static __device__ __forceinline__ int64_t moe_pair(const moe_args &a) {
    return a.order ? a.order[blockIdx.y] : (int64_t)blockIdx.y;
}

/* NC columns (pairs[0..NC), pair indices) of the activation pass and of y: an expert's group */
template <int NC, typename T> struct moe_cols {
    const T *xq;
    const float *xd;
    float *y;
    int64_t k_pad, n_out;
    int32_t qo[NC], yo[NC]; /* input column and pair (< 65536: pairs_ok) */
    __device__ __forceinline__ moe_cols(const moe_args &a, float *yz, const int64_t (&pairs)[NC]) {
        xq = (const T *)a.xq, xd = a.xd, y = yz, k_pad = a.k_pad, n_out = a.n_out;
#pragma unroll
        for (int c = 0; c < NC; c++)
            qo[c] = (int32_t)(pairs[c] / a.xdiv), yo[c] = (int32_t)pairs[c];
    }
    __device__ __forceinline__ const T *q(int c) const {
        return xq + (int64_t)qo[c] * k_pad;
    }
    __device__ __forceinline__ const float *d(int c) const {
        return xd + (int64_t)qo[c] * (k_pad / 256);
    }
    __device__ __forceinline__ float *out(int c) const {
        return y + (int64_t)yo[c] * n_out;
    }
};

/* the rows of this block's tile of part z of expert e for NC pairs */
template <bool NATIVE, int NC>
static __device__ __forceinline__ void moe_rows(const moe_args &a, int z, int64_t e,
                                                const int64_t (&pairs)[NC]) {
    const uint8_t *pay = a.payload[z] + e * a.e_pbytes, *sc = a.scales[z] + e * a.e_sbytes;
    const float s2 = __ldg(a.scale2[z] + e);
    const int nsb = (int)(a.k_pad / 256);
    if constexpr (NATIVE) {
        const moe_cols<NC, int16_t> cols(a, a.y[z], pairs);
        native_dp2a_rows_at<NC, MOE_R>(pay, sc, a.pstride, a.sstride, a.n_out, nsb, s2, cols);
    } else {
        const moe_cols<NC, int8_t> cols(a, a.y[z], pairs);
        a16_exact_rows_at<NC, MOE_R, a16_dot_split>(pay, sc, a.pstride, a.sstride, a.n_out, nsb, s2, cols);
    }
}

/* one pair a block row */
template <bool NATIVE> static __global__ __launch_bounds__(256) void moe_a16_kernel(const moe_args a) {
    fp4_pdl_trigger();
    fp4_pdl_wait(); /* the routing kernel's choices and the activation pass from here on */
    const int64_t p[1] = {moe_pair(a)};
    moe_rows<NATIVE, 1>(a, blockIdx.z, moe_expert(a.sel, p[0], a.n_experts), p);
}

/* the pairs group[0..n) of expert e, NC at a time */
template <bool NATIVE, int NC>
static __device__ __forceinline__ void moe_run(const moe_args &a, int z, int64_t e, const int32_t *group) {
    int64_t p[NC];
#pragma unroll
    for (int c = 0; c < NC; c++)
        p[c] = __ldg(group + c);
    moe_rows<NATIVE, NC>(a, z, e, p);
}

/* block (x, g): row tile x of the g-th chosen expert over all its pairs (the group table) */
template <bool NATIVE> static __global__ __launch_bounds__(256) void moe_group_kernel(const moe_args a) {
    fp4_pdl_trigger();
    fp4_pdl_wait(); /* the group table and the activation pass from here on */
    const int32_t *g = a.grp;
    if ((int64_t)blockIdx.y >= __ldg(g)) return;
    const int32_t *t = g + 1 + a.n_pairs + 3 * (int64_t)blockIdx.y;
    const int64_t e = moe_expert(t, 0, a.n_experts), first = __ldg(t + 1), n = __ldg(t + 2);
    if (first < 0 || n < 1 || first + n > a.n_pairs) return; /* never, by construction: memory safety */
    const int32_t *group = g + 1 + first;
    const int z = blockIdx.z;
    constexpr int W =
        NATIVE ? MOE_NATIVE_RUN : MOE_EXACT_RUN; /* native keeps NC columns' activations in registers */
    int64_t i = 0;
    for (; i + W <= n; i += W)
        moe_run<NATIVE, W>(a, z, e, group + i);
    if (W > 4 && n - i >= 4) moe_run<NATIVE, 4>(a, z, e, group + i), i += 4;
    if (W > 2 && n - i >= 2) moe_run<NATIVE, 2>(a, z, e, group + i), i += 2;
    if (n - i >= 1) moe_run<NATIVE, 1>(a, z, e, group + i);
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

/* expert of pair i: the shared copy holds the checked values */
static __device__ __forceinline__ int32_t moe_v(const int32_t *v, bool sh, int64_t i, int64_t n_experts) {
    return sh ? v[i] : (int32_t)moe_expert(v, i, n_experts);
}

/* the group table (moe_experts.cuh) in one block: a stable sort of the pairs by expert (pair p
 * goes to the place of the pairs before it in (expert, pair) order: each thread counts them for
 * its pairs, the choices read from shared memory where they fit), then the groups: each thread
 * finds the group starts in its run of places, a scan of the per-thread counts numbers them. */
#define MOE_ORDER_SHARED 4096
#define MOE_GROUP_THREADS 1024
static __global__ __launch_bounds__(MOE_GROUP_THREADS) void moe_group_build_kernel(const int32_t *sel,
                                                                                   int64_t n,
                                                                                   int64_t n_experts,
                                                                                   int32_t *g) {
    fp4_pdl_trigger();
    fp4_pdl_wait();
    __shared__ int32_t ss[MOE_ORDER_SHARED];
    __shared__ int32_t cnt[MOE_GROUP_THREADS];
    const bool sh = n <= MOE_ORDER_SHARED;
    for (int64_t p = threadIdx.x; sh && p < n; p += blockDim.x)
        ss[p] = (int32_t)moe_expert(sel, p, n_experts); /* so at most n_experts groups */
    __syncthreads();
    const int32_t *v = sh ? ss : sel;
    int32_t *order = g + 1;
    for (int64_t p = threadIdx.x; p < n; p += blockDim.x) {
        const int32_t e = moe_v(v, sh, p, n_experts);
        int64_t at = 0;
        for (int64_t q = 0; q < n; q++) {
            const int32_t f = moe_v(v, sh, q, n_experts);
            at += f < e || (f == e && q < p);
        }
        order[at] = (int32_t)p;
    }
    __syncthreads(); /* order (global memory) is visible to the whole block from here */
    const int64_t per = (n + blockDim.x - 1) / blockDim.x, lo = threadIdx.x * per,
                  hi = lo + per < n ? lo + per : n;
    int32_t c = 0;
    for (int64_t i = lo; i < hi; i++)
        c += i == 0 || moe_v(v, sh, order[i], n_experts) != moe_v(v, sh, order[i - 1], n_experts);
    cnt[threadIdx.x] = c;
    __syncthreads();
    if (threadIdx.x == 0) {
        int32_t run = 0;
        for (int t = 0; t < (int)blockDim.x; t++) {
            const int32_t k = cnt[t];
            cnt[t] = run, run += k;
        }
        g[0] = run;
    }
    __syncthreads();
    int32_t *slot = g + 1 + n + 3 * (int64_t)cnt[threadIdx.x];
    for (int64_t i = lo; i < hi; i++) {
        if (i && moe_v(v, sh, order[i], n_experts) == moe_v(v, sh, order[i - 1], n_experts)) continue;
        int64_t j = i + 1;
        while (j < n && moe_v(v, sh, order[j], n_experts) == moe_v(v, sh, order[i], n_experts))
            j++;
        slot[0] = moe_v(v, sh, order[i], n_experts), slot[1] = (int32_t)i, slot[2] = (int32_t)(j - i);
        slot += 3;
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

const char *fp4_cu_moe_part_route(const fp4_cu_moe_part *p) {
    if (!p) return NULL;
    if (p->type == FP4_TYPE_NVFP4_E2M1 && p->native)
        return fp4_cu_moe_route_name(p->type, p->n_in, 0.0f) ? "moe.nvfp4.a16.native.dp2a" : NULL;
    return fp4_cu_moe_route_name(p->type, p->n_in, 0.0f);
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
    const size_t vb = w->native ? 2 : 1; /* int16 or int8 values */
    return FP4_CU_ALIGN((size_t)(n_x * w->k_pad) * vb) + FP4_CU_ALIGN((size_t)(n_x * (w->k_pad / 256)) * 4);
}

void fp4_cu_moe_act_planes(const fp4_cu_moe_part *w, int64_t n_x, void *d_scratch, int8_t **q, float **d) {
    const size_t vb = w->native ? 2 : 1;
    *q = (int8_t *)d_scratch;
    *d = (float *)((uint8_t *)d_scratch + FP4_CU_ALIGN((size_t)(n_x * w->k_pad) * vb));
}

static int64_t group_slots(int64_t n_pairs, int64_t n_experts) {
    return n_pairs < n_experts ? n_pairs : n_experts;
}

/* the launch of nw parts over the pairs (xq/xd: the NVFP4 input's activation pass; x: the dense
 * input) */
static fp4_status moe_launch(const fp4_cu_moe_part *const *w, int nw, const int32_t *sel, const int32_t *grp,
                             int how, int64_t n_pairs, int64_t xdiv, const void *xq, const float *xd,
                             const float *x, float *const *y, cudaStream_t stream) {
    const fp4_cu_moe_part *p0 = w[0];
    moe_args a = {};
    for (int i = 0; i < nw; i++) {
        const fp4_cu_moe_part *p = w[i];
        if (!p->d_payload || !y[i] || p->type != p0->type || p->n_out != p0->n_out || p->n_in != p0->n_in ||
            p->n_experts != p0->n_experts || p->e_pbytes != p0->e_pbytes || p->e_sbytes != p0->e_sbytes ||
            p->native != p0->native || (p->type == FP4_TYPE_NVFP4_E2M1 && (!p->d_scales || !p->d_scale2)))
            return FP4_ERR_INVALID_ARG;
        a.payload[i] = p->d_payload, a.scales[i] = p->d_scales, a.scale2[i] = p->d_scale2, a.y[i] = y[i];
    }
    if (how != FP4_CU_MOE_PAIRS && how != FP4_CU_MOE_ORDERED && how != FP4_CU_MOE_GROUPED)
        return FP4_ERR_INVALID_ARG;
    if (how != FP4_CU_MOE_PAIRS && !grp) return FP4_ERR_INVALID_ARG;
    a.sel = sel, a.grp = grp, a.order = how == FP4_CU_MOE_PAIRS ? NULL : grp + 1, a.n_pairs = n_pairs;
    a.e_pbytes = p0->e_pbytes, a.e_sbytes = p0->e_sbytes;
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
    const unsigned tiles = (unsigned)((warps * 32 + 255) / 256);
    if (how == FP4_CU_MOE_GROUPED) {
        const dim3 grid(tiles, (unsigned)group_slots(n_pairs, p0->n_experts), (unsigned)nw);
        return p0->native ? fp4_cu_launch(grid, dim3(256), 0, stream, 1, moe_group_kernel<true>, a)
                          : fp4_cu_launch(grid, dim3(256), 0, stream, 1, moe_group_kernel<false>, a);
    }
    const dim3 grid(tiles, (unsigned)n_pairs, (unsigned)nw);
    return p0->native ? fp4_cu_launch(grid, dim3(256), 0, stream, 1, moe_a16_kernel<true>, a)
                      : fp4_cu_launch(grid, dim3(256), 0, stream, 1, moe_a16_kernel<false>, a);
}

static int pairs_ok(int64_t n_pairs, int64_t xdiv) {
    return n_pairs >= 1 && n_pairs <= 65535 && xdiv >= 1 && n_pairs % xdiv == 0;
}

fp4_status fp4_cu_moe_project(const fp4_cu_moe_part *const *w, int nw, const int32_t *d_sel,
                              const int32_t *d_group, int how, int64_t n_pairs, int64_t xdiv,
                              const float *d_x, float *const *d_y, void *d_scratch, size_t scratch_bytes,
                              cudaStream_t stream) {
    if (!w || nw < 1 || nw > 2 || !w[0] || (nw == 2 && !w[1]) || !d_sel || !d_x || !d_y ||
        !pairs_ok(n_pairs, xdiv))
        return FP4_ERR_INVALID_ARG;
    if (!w[0]->d_payload || !fp4_cu_moe_part_route(w[0])) return FP4_ERR_UNSUPPORTED;
    const int64_t n_x = n_pairs / xdiv;
    if (w[0]->type != FP4_TYPE_NVFP4_E2M1)
        return moe_launch(w, nw, d_sel, d_group, how, n_pairs, xdiv, NULL, NULL, d_x, d_y, stream);
    if (!d_scratch || fp4_cu_moe_scratch_bytes(w[0], n_x) > scratch_bytes || !fp4_aligned16(d_x) ||
        !fp4_aligned16(d_scratch))
        return FP4_ERR_INVALID_ARG;
    int8_t *q;
    float *d;
    fp4_cu_moe_act_planes(w[0], n_x, d_scratch, &q, &d);
    if (w[0]->native) { /* native_dp2a.cuh's int16 pass: one warp per (column, super-block) */
        const int nsb = (int)(w[0]->k_pad / 256);
        const int64_t jobs = n_x * nsb;
        FP4_CU_TRY(fp4_cu_launch(dim3((unsigned)((jobs * 32 + 255) / 256)), dim3(256), 0, stream, 1,
                                 act16_kernel, d_x, (int)w[0]->n_in, nsb, (int)n_x, w[0]->k_pad, (int16_t *)q,
                                 d));
    } else {
        FP4_CU_TRY(fp4_cu_q8k_quantize(d_x, w[0]->n_in, w[0]->k_pad, n_x, q, d, NULL, 0, stream));
    }
    return moe_launch(w, nw, d_sel, d_group, how, n_pairs, xdiv, q, d, NULL, d_y, stream);
}

fp4_status fp4_cu_moe_project_pre(const fp4_cu_moe_part *w, const int32_t *d_sel, const int32_t *d_group,
                                  int how, int64_t n_pairs, const int8_t *d_q, const float *d_d, float *d_y,
                                  cudaStream_t stream) {
    if (!w || !d_sel || !d_q || !d_d || !d_y || !pairs_ok(n_pairs, 1)) return FP4_ERR_INVALID_ARG;
    if (w->type != FP4_TYPE_NVFP4_E2M1 || w->native || !fp4_aligned16(d_q)) return FP4_ERR_UNSUPPORTED;
    return moe_launch(&w, 1, d_sel, d_group, how, n_pairs, 1, d_q, d_d, NULL, &d_y, stream);
}

int64_t fp4_cu_moe_group_ints(int64_t n_pairs, int64_t n_experts) {
    if (n_pairs < 1 || n_experts < 1) return 0;
    return 1 + n_pairs + 3 * group_slots(n_pairs, n_experts);
}

fp4_status fp4_cu_moe_group(const int32_t *d_sel, int64_t n_pairs, int64_t n_experts, int32_t *d_group,
                            cudaStream_t stream) {
    if (!d_sel || !d_group || !pairs_ok(n_pairs, 1) || n_experts < 1) return FP4_ERR_INVALID_ARG;
    return fp4_cu_launch(dim3(1), dim3(MOE_GROUP_THREADS), 0, stream, 1, moe_group_build_kernel, d_sel,
                         n_pairs, n_experts, d_group);
}

} /* extern "C" */
