/* att_tiled.cuh — exact attention (fp4p_attend) for wide steps (prefill) in ONE launch of one block
 * per (column, KV head, group of up to 4 query heads): the two-launch kernels (step_kernels.cuh) give
 * a column 32 P.V blocks of a handful of rows each at prefill widths and meet their strips through
 * global memory; here one block does the column's whole attention from shared memory. The same
 * operations in the same order as fp4p_attend, so exact mode keeps the CPU's bits:
 *   1. scores: thread (warp w, lane l) takes head w % 4 and key u = 64t + 32(w / 4) + l of key tile t
 *      (staged in shared memory by cp.async, two stages) and holds the dot's 32 pinned lanes in
 *      registers: lane j adds q[d] * k[d] for d = j, j + 32, ... in increasing d from +0.0f, then the
 *      pinned butterfly, times scale; the scores stay in shared memory, and the block's maximum per
 *      head is order-free (fmaxf, as in the two-launch kernels);
 *   2. e_u = fp4p_exp(s_u - m) in place; den: warp g is the pinned sum over u of head g (lane l adds
 *      e_l, e_{l+32}, ... in order, then the xor butterfly);
 *   3. P.V: thread (head g, slot i) owns outputs d = i * D/64 .. + D/64 - 1 and each one's 32 pinned
 *      lanes in registers; the value tiles come through the same stages in key order, and row r of a
 *      tile (64 keys from a multiple of 64) is lane r % 32, so every lane adds e_u * v_u[d] in
 *      increasing u; then the butterfly and the division by den.
 * Positions come from the device (stk_att_span: windows and rings as the other kernels), the shared
 * memory from n_ctx only, so the launch does not depend on the step's positions. Heavy columns (the
 * late positions of a prefill) are scheduled first. tests/test_att_tiled_emul.c runs these loops on
 * the host against fp4p_attend; tests/gpu/test_gpu_attention.cu runs the kernel. */
#ifndef FP4_RT_ATT_TILED_CUH
#define FP4_RT_ATT_TILED_CUH

#include "cuda/step/att_tiled.h"
#include "cuda/step/step_kernels.cuh"

static_assert(ATT_T_HEADS == STK_GB && ATT_T_HEADS * ATT_T_PV == ATT_T_THREADS, "att_tiled.h's geometry");

/* tile t of the rows at cache + off (rows kvd halves apart, D halves each) into stage t & 1; rows
 * past the last index P repeat row P (their results are never used); one commit group, empty past
 * the last tile */
template <int D>
static __device__ __forceinline__ void att_t_issue(unsigned char *stg, const uint16_t *cache, int64_t off,
                                                   int64_t kvd, int64_t P, int t, int ntile) {
    if (t < ntile) {
        unsigned char *st = stg + (t & 1) * ATT_T_KEYS * ATT_T_ROW_BYTES(D);
        constexpr int per = D / 8;
        for (int i = threadIdx.x; i < ATT_T_KEYS * per; i += ATT_T_THREADS) {
            const int r = i / per, ch = i - r * per;
            const int64_t u = (int64_t)t * ATT_T_KEYS + r <= P ? (int64_t)t * ATT_T_KEYS + r : P;
            fp4_cp_async16(st + r * ATT_T_ROW_BYTES(D) + ch * 16, cache + off + u * kvd + ch * 8);
        }
    }
    fp4_cp_async_commit();
}

/* one key's score for head g: kr its K row in the stage, qg the head's q in shared memory */
template <int D>
static __device__ __forceinline__ float att_t_score(const unsigned char *kr, const float *qg, float scale) {
    float p[STK_LANES];
#pragma unroll
    for (int j = 0; j < STK_LANES; j++)
        p[j] = 0.0f;
#pragma unroll
    for (int m = 0; m < D / 32; m++)
#pragma unroll
        for (int i8 = 0; i8 < 4; i8++) {
            float kf[8];
            fp4_widen8<false>(*reinterpret_cast<const uint4 *>(kr + (32 * m + 8 * i8) * 2), kf);
            const float4 qa = *reinterpret_cast<const float4 *>(qg + 32 * m + 8 * i8);
            const float4 qb = *reinterpret_cast<const float4 *>(qg + 32 * m + 8 * i8 + 4);
            const float qv[8] = {qa.x, qa.y, qa.z, qa.w, qb.x, qb.y, qb.z, qb.w};
#pragma unroll
            for (int i = 0; i < 8; i++)
                p[8 * i8 + i] = fp4p_add(p[8 * i8 + i], fp4p_mul(qv[i], kf[i]));
        }
    return fp4p_mul(stk_butterfly32(p), scale);
}

template <int D> static __global__ __launch_bounds__(ATT_T_THREADS, 2) void att_tiled_kernel(stk_att_args a) {
    extern __shared__ __align__(16) unsigned char att_t_smem_buf[];
    __shared__ float red[ATT_T_THREADS / 32], hm[ATT_T_HEADS], hden[ATT_T_HEADS];
    STK_PDL_ENTRY();
    constexpr int DPT = D / ATT_T_PV; /* outputs a P.V thread */
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    int c, hk, h0, nhb;
    stk_att_group(a, (int)(gridDim.x - 1 - blockIdx.x), &c, &hk, &h0, &nhb);
    int64_t row0;
    const int64_t P = stk_att_span(a, c, &row0), kvd = (int64_t)a.nkv * D, npad = att_t_npad(a.n_ctx);
    const int n = (int)(P + 1), ntile = (n + ATT_T_KEYS - 1) / ATT_T_KEYS;
    float *qs = reinterpret_cast<float *>(att_t_smem_buf); /* [4][D] */
    float *sc = qs + ATT_T_HEADS * D;                        /* [4][npad] */
    unsigned char *stg = reinterpret_cast<unsigned char *>(sc + ATT_T_HEADS * npad);
    const int64_t off = (int64_t)a.cols.slot[c] * a.slot_stride + row0 * kvd + (int64_t)hk * D;
    const float *q = a.q + (int64_t)c * a.q_cs + (int64_t)h0 * D;
    att_t_issue<D>(stg, a.kc, off, kvd, P, 0, ntile);
    for (int i = tid; i < ATT_T_HEADS * D; i += ATT_T_THREADS)
        qs[i] = i < nhb * D ? __ldcg(q + i) : 0.0f;

    /* 1. scores and the per-head maxima */
    const int g = warp & 3, half = warp >> 2;
    float mx = stk_neg_inf();
    for (int t = 0; t < ntile; t++) {
        att_t_issue<D>(stg, a.kc, off, kvd, P, t + 1, ntile);
        fp4_cp_async_wait<1>();
        __syncthreads(); /* tile t (and q) in for every thread */
        const int r = half * 32 + lane, u = t * ATT_T_KEYS + r;
        if (g < nhb) { /* uniform over the warp */
            const float s = att_t_score<D>(stg + ((t & 1) * ATT_T_KEYS + r) * ATT_T_ROW_BYTES(D), qs + g * D,
                                           a.scale);
            if (u < n) {
                sc[g * npad + u] = s;
                mx = fmaxf(mx, s);
            }
        }
        __syncthreads(); /* every thread is done with stage t & 1 before tile t + 2 refills it */
    }
    att_t_issue<D>(stg, a.vc, off, kvd, P, 0, ntile); /* the first value tile, during 2 */
#pragma unroll
    for (int o = 16; o >= 1; o >>= 1)
        mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, o));
    if (lane == 0) red[warp] = mx;
    __syncthreads();
    if (tid < ATT_T_HEADS) hm[tid] = fmaxf(red[tid], red[tid + 4]);
    __syncthreads();

    /* 2. the exponentials in place, then den per head */
    for (int gg = 0; gg < nhb; gg++)
        for (int u = tid; u < n; u += ATT_T_THREADS)
            sc[gg * npad + u] = fp4p_exp(fp4p_sub(sc[gg * npad + u], hm[gg]));
    __syncthreads();
    if (warp < nhb) {
        float dsum = 0.0f;
        for (int u = lane; u < n; u += 32)
            dsum = fp4p_add(dsum, sc[warp * npad + u]);
        dsum = stk_warp_butterfly(dsum);
        if (lane == 0) hden[warp] = dsum;
    }

    /* 3. P.V */
    const int pg = tid / ATT_T_PV, pi = tid % ATT_T_PV;
    float acc[DPT][STK_LANES];
#pragma unroll
    for (int k = 0; k < DPT; k++)
#pragma unroll
        for (int j = 0; j < STK_LANES; j++)
            acc[k][j] = 0.0f;
    for (int t = 0; t < ntile; t++) {
        att_t_issue<D>(stg, a.vc, off, kvd, P, t + 1, ntile);
        fp4_cp_async_wait<1>();
        __syncthreads(); /* value tile t in (and, the first time, den) */
        if (pg < nhb) {
            const unsigned char *st = stg + (t & 1) * ATT_T_KEYS * ATT_T_ROW_BYTES(D) + pi * DPT * 2;
            const float *e = sc + pg * npad + t * ATT_T_KEYS;
            const int rows = n - t * ATT_T_KEYS;
#pragma unroll
            for (int r = 0; r < ATT_T_KEYS; r++) {
                if (r < rows) {
                    const float er = e[r];
                    const unsigned char *vr = st + r * ATT_T_ROW_BYTES(D);
                    if (DPT == 2) {
                        const float2 v2 = __half22float2(*reinterpret_cast<const __half2 *>(vr));
                        acc[0][r % 32] = fp4p_add(acc[0][r % 32], fp4p_mul(er, v2.x));
                        acc[DPT - 1][r % 32] = fp4p_add(acc[DPT - 1][r % 32], fp4p_mul(er, v2.y));
                    } else {
                        const float v1 = stk_h2f(*reinterpret_cast<const uint16_t *>(vr));
                        acc[0][r % 32] = fp4p_add(acc[0][r % 32], fp4p_mul(er, v1));
                    }
                }
            }
        }
        __syncthreads();
    }
    fp4_cp_async_wait<0>();
    if (pg < nhb) {
        float *o = a.o + ((int64_t)c * a.nh + h0 + pg) * D + pi * DPT;
#pragma unroll
        for (int k = 0; k < DPT; k++)
            o[k] = fp4p_div(stk_butterfly32(acc[k]), hden[pg]);
    }
}

/* one layer's attention over n columns, one launch; FP4_ERR_UNSUPPORTED (nothing launched) where
 * the shape or the device's shared memory does not allow it */
static inline fp4_status att_tiled(const stk_att_args &a, int64_t n, cudaStream_t stream) {
    const int64_t groups = stk_att_groups(n, a.nh, a.nkv);
    if (!att_t_fits(a.d, a.n_ctx) || groups < 1 || groups > INT32_MAX) return FP4_ERR_UNSUPPORTED;
    const size_t smem = att_t_smem(a.d, a.n_ctx);
    int dev = 0, optin = 0;
    FP4_CUDA_CHECK(cudaGetDevice(&dev));
    FP4_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    const size_t cap = (size_t)optin < ATT_T_MAX_SMEM ? (size_t)optin : ATT_T_MAX_SMEM;
    if (smem > cap) return FP4_ERR_UNSUPPORTED;
    static int opted64[FP4_CU_MAX_DEVICES], opted128[FP4_CU_MAX_DEVICES];
    const dim3 grid((unsigned)groups), block(ATT_T_THREADS);
    if (a.d == 64) {
        FP4_CU_TRY(fp4_cu_smem_opt_in((const void *)att_tiled_kernel<64>, cap, opted64));
        return fp4_cu_launch(grid, block, smem, stream, 1, att_tiled_kernel<64>, a);
    }
    FP4_CU_TRY(fp4_cu_smem_opt_in((const void *)att_tiled_kernel<128>, cap, opted128));
    return fp4_cu_launch(grid, block, smem, stream, 1, att_tiled_kernel<128>, a);
}

#endif
