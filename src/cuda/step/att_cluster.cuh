/* att_cluster.cuh — the decode step's attention (fp4p_attend) in ONE launch: a thread-block
 * cluster of CS blocks per (column, KV head, group of up to STK_GB query heads), Hopper's
 * distributed shared memory carrying what the two launches of stk_attention (step_kernels.cuh)
 * pass through global memory, tickets and a second grid. The same operations in the same order as
 * fp4p_attend, so exact mode keeps the CPU's bits:
 *   - block b of a cluster owns pinned lanes b*LPB .. b*LPB+LPB-1 (LPB = 32 / CS) of the
 *     reductions over positions: the positions j = 32u + b*LPB + r (r < LPB), local slot
 *     i = u*LPB + r. A thread keeps a whole lane's chain, u = 0, 1, ... in increasing order from
 *     +0.0f, so the chain is fp4p_attend's lane j % 32;
 *   - scores: stk_score_row (the pinned dot of 4-thread teams) into shared memory, the block's
 *     maxima per head; the cluster's max from every block's maxima (order-free);
 *   - e_j = fp4p_exp(s_j - m) in place; den strip r (thread (r, head)); the o strips of lane r,
 *     thread (r, pair of dimensions): V rows staged by cp.async in a ring of NS chunks, the first
 *     NS - 1 requested before the scores are computed, so they arrive while the scores are;
 *   - after a cluster barrier every block finishes 1/CS of the group's (head, dimension) outputs:
 *     the 32 strips and the 32 den strips read from the blocks that hold them (distributed shared
 *     memory), the pinned butterfly, o = sum / den; a last barrier keeps every block's shared
 *     memory alive until the others have read it.
 * Every grid dimension depends on the shape, n_ctx and the column count only (graphs replay it);
 * positions are read from the device. The step uses it for steps of ATT_CL_MAX_COLS column(s),
 * on a device that runs the build's sm_90a code (att_cluster_ok, fp4_cu_sm90_code); the compute_80
 * PTX has an empty body that is never launched. Shared memory grows with n_ctx (the scores of a
 * block's lanes): att_cluster_smem; beyond ATT_CL_MAX_SMEM the step keeps the two launches. */
#ifndef FP4_RT_ATT_CLUSTER_CUH
#define FP4_RT_ATT_CLUSTER_CUH

#include "cuda/step/step_kernels.cuh"
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= FP4_CU_CC_HOPPER
#include <cooperative_groups.h>
#endif

#define ATT_CL_THREADS 256
#define ATT_CL_RC 32     /* V rows (local slots) per ring chunk */
#define ATT_CL_NS 4      /* ring chunks (8 was slower: CLAIMS attcl-1) */
#define ATT_CL_MAX_D 128 /* head_dim: a multiple of 32, at most this */
#define ATT_CL_MAX_SMEM ((size_t)200 * 1024)
#define ATT_CL_MAX_COLS 1 /* wider steps: the two launches were faster from 2 (CLAIMS attcl-1) */
#define ATT_CL_WIDE_COLS 8 /* up to this many, smaller clusters at short positions (step.cu) */

/* dynamic shared memory: qs [STK_GB*D] | es [NI_max][STK_GB] | part [LPB][STK_GB][D] |
 * denp [LPB][STK_GB] | bm [STK_GB] | ms [STK_GB] | ring [NS][RC][D] halves */
static __host__ __device__ __forceinline__ int64_t att_cluster_slots(int64_t n_ctx, int cs) {
    return (n_ctx + 31) / 32 * (32 / cs);
}
static __host__ __device__ __forceinline__ size_t att_cluster_smem(int64_t n_ctx, int d, int cs) {
    const int lpb = 32 / cs;
    return (size_t)4 * ((size_t)STK_GB * d + (size_t)att_cluster_slots(n_ctx, cs) * STK_GB +
                        (size_t)lpb * STK_GB * d + (size_t)lpb * STK_GB + 2 * STK_GB) +
           (size_t)2 * ATT_CL_NS * ATT_CL_RC * d;
}

/* the shared memory a launch asks for: what it uses, or with bps > 0 enough that no more than bps
 * blocks fit on one SM */
static inline size_t att_cluster_request(int64_t n_ctx, int d, int cs, int bps) {
    const size_t smem = att_cluster_smem(n_ctx, d, cs);
    if (bps <= 0) return smem;
    size_t want = (size_t)228 * 1024 / (size_t)(bps + 1) + 2048; /* bps + 1 blocks do not fit */
    want = want < ATT_CL_MAX_SMEM ? want : ATT_CL_MAX_SMEM;
    return smem > want ? smem : want;
}

/* ring chunk k of the block's local V rows (those of positions past the column's are not read) */
template <int LPB>
static __device__ __forceinline__ void att_cl_issue(uint16_t *ring, const uint16_t *vbase, int64_t kvd, int D,
                                                    int b, int64_t n, int64_t ni, int64_t k) {
    const int64_t i0 = k * ATT_CL_RC;
    if (i0 < ni) {
        uint16_t *st = ring + (k % ATT_CL_NS) * ATT_CL_RC * D;
        const int per = D / 8;
        for (int x = threadIdx.x; x < ATT_CL_RC * per; x += blockDim.x) {
            const int rr = x / per, p = x - rr * per;
            const int64_t i = i0 + rr, j = 32 * (i / LPB) + b * LPB + i % LPB;
            if (i < ni && j < n) fp4_cp_async16(st + rr * D + 8 * p, vbase + j * kvd + 8 * p);
        }
    }
    fp4_cp_async_commit(); /* an empty group past the last chunk keeps the count */
}

/* the K halves of local slot i's row for this team thread (a slot past the column's position
 * reads the last row; its score is dropped) */
template <int LPB, int NDL>
static __device__ __forceinline__ void att_cl_krow(uint4 (&k)[NDL], const uint16_t *k0, int64_t kvd, int nd,
                                                   int b, int64_t n, int64_t i) {
    int64_t j = 32 * (i / LPB) + b * LPB + i % LPB;
    j = j < n ? j : n - 1;
    const uint16_t *r = k0 + j * kvd;
#pragma unroll
    for (int m = 0; m < NDL; m++)
        if (m < nd) k[m] = __ldcg(reinterpret_cast<const uint4 *>(r + 32 * m));
}

template <int CS, int NDL>
static __global__ __launch_bounds__(ATT_CL_THREADS) void att_cluster_kernel(stk_att_args a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= FP4_CU_CC_HOPPER
    namespace cg = cooperative_groups;
    constexpr int LPB = 32 / CS;
    extern __shared__ __align__(16) float cl_smem[];
    __shared__ float wmax[ATT_CL_THREADS / 32][STK_GB];
    cg::cluster_group cluster = cg::this_cluster();
    STK_PDL_ENTRY();
    const int b = (int)cluster.block_rank(), tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int t = lane & 3, D = a.d, nd = D / 32;
    int c, hk, h0, nhb;
    stk_att_group(a, blockIdx.y, &c, &hk, &h0, &nhb);
    int64_t row0;
    const int64_t n = stk_att_span(a, c, &row0) + 1, kvd = (int64_t)a.nkv * D;
    const int64_t ni = (n + 31) / 32 * LPB; /* local slots of the column's rounds */
    const int64_t nimax = att_cluster_slots(a.n_ctx, CS);
    float *qs = cl_smem, *es = qs + STK_GB * D, *part = es + nimax * STK_GB, *denp = part + LPB * STK_GB * D;
    float *bm = denp + LPB * STK_GB, *ms = bm + STK_GB;
    uint16_t *ring = reinterpret_cast<uint16_t *>(ms + STK_GB);
    const int64_t kvo = a.cols.slot[c] * a.slot_stride + row0 * kvd + hk * D;
    const uint16_t *vbase = a.vc + kvo;
    const int64_t nchunk = (ni + ATT_CL_RC - 1) / ATT_CL_RC;
#pragma unroll
    for (int k = 0; k < ATT_CL_NS - 1; k++)
        att_cl_issue<LPB>(ring, vbase, kvd, D, b, n, ni, k);
    const float *q = a.q + (int64_t)c * a.q_cs + (int64_t)h0 * D;
    for (int i = tid; i < STK_GB * D; i += blockDim.x)
        qs[i] = i < nhb * D ? __ldcg(q + i) : 0.0f;
    __syncthreads();
    /* scores of the local slots: warp-uniform trips of 8 slots per warp (a team per slot) */
    float mx[STK_GB];
#pragma unroll
    for (int g = 0; g < STK_GB; g++)
        mx[g] = stk_neg_inf();
    const uint16_t *k0 = a.kc + kvo + 8 * t;
    const int64_t step = ATT_CL_THREADS / 4; /* slots per trip of the block */
    uint4 kn[NDL];
    if (8 * warp < ni) att_cl_krow<LPB, NDL>(kn, k0, kvd, nd, b, n, 8 * warp + (lane >> 2));
    for (int64_t i0 = 8 * warp; i0 < ni; i0 += step) { /* the next trip's K row loaded first */
        const int64_t i = i0 + (lane >> 2), j = 32 * (i / LPB) + b * LPB + i % LPB;
        uint4 k[NDL];
#pragma unroll
        for (int m = 0; m < NDL; m++)
            k[m] = kn[m];
        if (i0 + step < ni) att_cl_krow<LPB, NDL>(kn, k0, kvd, nd, b, n, i + step);
        stk_score_row<NDL>(a, qs, k, nhb, t, i < ni && j < n, i, es, mx);
    }
    const float bmx = stk_block_head_max<ATT_CL_THREADS / 32>(mx, wmax);
    if (tid < STK_GB) bm[tid] = bmx;
    cluster.sync(); /* every block's maxima */
    if (tid < STK_GB) {
        float m = stk_neg_inf();
        for (int rk = 0; rk < CS; rk++)
            m = fmaxf(m, cluster.map_shared_rank(bm, rk)[tid]);
        ms[tid] = m;
    }
    __syncthreads();
    for (int64_t i = tid; i < ni; i += blockDim.x) {
        const int64_t j = 32 * (i / LPB) + b * LPB + i % LPB;
        if (j < n)
            for (int g = 0; g < nhb; g++)
                es[i * STK_GB + g] = fp4p_exp(fp4p_sub(es[i * STK_GB + g], ms[g]));
    }
    __syncthreads();
    if (tid < LPB * STK_GB) { /* den strip of lane b*LPB + r, head g */
        const int r = tid / STK_GB, g = tid % STK_GB, l = b * LPB + r;
        const int64_t nu = n > l ? (n - l + 31) / 32 : 0;
        float den = 0.0f;
        if (g < nhb)
            for (int64_t u = 0; u < nu; u++)
                den = fp4p_add(den, es[(u * LPB + r) * STK_GB + g]);
        denp[tid] = den;
    }
    /* o strips: thread (r, dimension pair dp), r = pr + s * PR for its NSET sets s (clusters of 8
     * and 16 hold at most 4 lanes a block: one set; of 4 and 2, 8 and 16 lanes: two and four) */
    constexpr int NSET = (LPB + 3) / 4;
    const int npair = D / 2, PR = ATT_CL_THREADS / npair, pr = tid / npair, dp = tid - pr * npair;
    int64_t nu[NSET];
    bool pv[NSET];
#pragma unroll
    for (int q2 = 0; q2 < NSET; q2++) {
        const int r = pr + q2 * PR;
        pv[q2] = r < LPB;
        nu[q2] = pv[q2] && n > b * LPB + r ? (n - b * LPB - r + 31) / 32 : 0;
    }
    float p[NSET][STK_GB][2];
#pragma unroll
    for (int q2 = 0; q2 < NSET; q2++)
#pragma unroll
        for (int g = 0; g < STK_GB; g++)
            p[q2][g][0] = p[q2][g][1] = 0.0f;
    for (int64_t k = 0; k < nchunk; k++) {
        fp4_cp_async_wait<ATT_CL_NS - 2>();
        __syncthreads(); /* chunk k is in; every thread is done with chunk k-1's stage */
        att_cl_issue<LPB>(ring, vbase, kvd, D, b, n, ni, k + ATT_CL_NS - 1);
#pragma unroll
        for (int q2 = 0; q2 < NSET; q2++) {
            if (!pv[q2]) continue;
            const int r = pr + q2 * PR;
            const uint16_t *st = ring + (k % ATT_CL_NS) * ATT_CL_RC * D + 2 * dp;
#pragma unroll 4
            for (int w = 0; w < ATT_CL_RC / LPB; w++) {
                const int64_t u = (k * ATT_CL_RC) / LPB + w;
                if (u >= nu[q2]) break;
                const __half2 h2 = *reinterpret_cast<const __half2 *>(st + (w * LPB + r) * D);
                const float2 v = __half22float2(h2);
                const float4 e4 = *reinterpret_cast<const float4 *>(es + (u * LPB + r) * STK_GB);
                const float e[STK_GB] = {e4.x, e4.y, e4.z, e4.w};
#pragma unroll
                for (int g = 0; g < STK_GB; g++)
                    if (g < nhb) {
                        p[q2][g][0] = fp4p_add(p[q2][g][0], fp4p_mul(e[g], v.x));
                        p[q2][g][1] = fp4p_add(p[q2][g][1], fp4p_mul(e[g], v.y));
                    }
            }
        }
    }
#pragma unroll
    for (int q2 = 0; q2 < NSET; q2++)
        if (pv[q2]) {
            const int r = pr + q2 * PR;
#pragma unroll
            for (int g = 0; g < STK_GB; g++) {
                part[(r * STK_GB + g) * D + 2 * dp] = p[q2][g][0];
                part[(r * STK_GB + g) * D + 2 * dp + 1] = p[q2][g][1];
            }
        }
    cluster.sync(); /* every block's strips */
    const int per = (nhb * D + CS - 1) / CS;
    if (tid < per) {
        const int idx = b * per + tid;
        if (idx < nhb * D) {
            const int g = idx / D, d = idx - g * D;
            float v[STK_LANES], w[STK_LANES];
#pragma unroll
            for (int l = 0; l < STK_LANES; l++) {
                const float *rp = cluster.map_shared_rank(part, l / LPB);
                const float *rd = cluster.map_shared_rank(denp, l / LPB);
                v[l] = rp[((l % LPB) * STK_GB + g) * D + d];
                w[l] = rd[(l % LPB) * STK_GB + g];
            }
            a.o[((int64_t)c * a.nh + h0 + g) * D + d] = fp4p_div(stk_butterfly32(v), stk_butterfly32(w));
        }
    }
    cluster.sync(); /* no block leaves while another reads its shared memory */
#endif
}

/* 1 where the cluster kernel may serve this shape and n_ctx on the current device (one that runs the
 * sm_90a code: fp4_cu_sm90_code; head_dim
 * a multiple of 32 up to ATT_CL_MAX_D, shared memory within ATT_CL_MAX_SMEM) */
static inline int att_cluster_ok(int d, int64_t n_ctx, int cs) {
    if (!fp4_cu_sm90_code() || d % 32 || d > ATT_CL_MAX_D || (cs != 2 && cs != 4 && cs != 8 && cs != 16))
        return 0;
    return att_cluster_smem(n_ctx, d, cs) <= ATT_CL_MAX_SMEM;
}

template <int CS, int NDL>
static fp4_status att_cluster_launch_t(stk_att_args a, int64_t groups, int bps, cudaStream_t s) {
    /* bps > 0: at most bps blocks per SM (else a cluster's blocks may double up on some SMs of their
     * GPC and leave others idle) */
    const size_t smem = att_cluster_request(a.n_ctx, a.d, CS, bps);
    void (*k)(stk_att_args) = att_cluster_kernel<CS, NDL>;
    /* attributes, set on every call (cheap, and not a stream operation: allowed during a capture) */
    if (CS > 8) FP4_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    FP4_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(CS, (unsigned)groups);
    cfg.blockDim = dim3(ATT_CL_THREADS);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cudaLaunchAttribute at[2];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = CS, at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = 1;
    at[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[1].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = fp4_cu_pdl_off() ? 1 : 2;
    if (cfg.numAttrs == 2) {
        if (cudaLaunchKernelEx(&cfg, k, a) == cudaSuccess) return FP4_OK;
        (void)cudaGetLastError(); /* a refused attribute is not sticky: the plain cluster launch */
        cfg.numAttrs = 1;
    }
    FP4_CUDA_CHECK(cudaLaunchKernelEx(&cfg, k, a));
    return FP4_OK;
}

/* whether a cluster of CS blocks with this shared memory can be resident at all on the device */
template <int CS, int NDL> static int att_cluster_fits_t(int64_t n_ctx, int d) {
    const size_t smem = att_cluster_request(n_ctx, d, CS, 1); /* the largest request (one per SM) */
    void (*k)(stk_att_args) = att_cluster_kernel<CS, NDL>;
    if (CS > 8 && cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess)
        return (void)cudaGetLastError(), 0;
    if (cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != cudaSuccess)
        return (void)cudaGetLastError(), 0;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(CS, 1);
    cfg.blockDim = dim3(ATT_CL_THREADS);
    cfg.dynamicSmemBytes = smem;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = CS, at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = 1;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    int nc = 0;
    if (cudaOccupancyMaxActiveClusters(&nc, k, &cfg) != cudaSuccess) return (void)cudaGetLastError(), 0;
    return nc > 0;
}

/* whether clusters of cs blocks with this shared memory can be resident (att_cluster_fits_t) */
static inline int att_cluster_fits(int cs, int64_t n_ctx, int d) {
    const bool s = d <= 64;
    switch (cs) {
    case 16: return s ? att_cluster_fits_t<16, 2>(n_ctx, d) : att_cluster_fits_t<16, 4>(n_ctx, d);
    case 8: return s ? att_cluster_fits_t<8, 2>(n_ctx, d) : att_cluster_fits_t<8, 4>(n_ctx, d);
    case 4: return s ? att_cluster_fits_t<4, 2>(n_ctx, d) : att_cluster_fits_t<4, 4>(n_ctx, d);
    case 2: return s ? att_cluster_fits_t<2, 2>(n_ctx, d) : att_cluster_fits_t<2, 4>(n_ctx, d);
    default: return 0;
    }
}

/* the cluster size the step uses for this shape and n_ctx: want (16, 8, 4 or 2) where it runs, else
 * the next smaller one, else 0 (the two launches of stk_attention) */
static inline int att_cluster_pick(int d, int64_t n_ctx, int want) {
    for (int cs = want; cs >= 2; cs /= 2)
        if (att_cluster_ok(d, n_ctx, cs) && att_cluster_fits(cs, n_ctx, d)) return cs;
    return 0;
}

/* the step's blocks per SM at n columns: as many as fit (one per SM was slower: CLAIMS attcl-1) */
static inline int att_cluster_bps(int64_t n) {
    (void)n;
    return 0;
}

/* one layer's attention over n columns in one cluster launch (cs 16, 8, 4 or 2: att_cluster_pick first;
 * bps > 0: at most bps blocks per SM, by the shared memory asked for) */
static inline fp4_status att_cluster(stk_att_args a, int64_t n, int cs, int bps, cudaStream_t s) {
    const int64_t groups = stk_att_groups(n, a.nh, a.nkv);
    switch (cs) {
    case 16:
        return a.d <= 64 ? att_cluster_launch_t<16, 2>(a, groups, bps, s)
                         : att_cluster_launch_t<16, 4>(a, groups, bps, s);
    case 8:
        return a.d <= 64 ? att_cluster_launch_t<8, 2>(a, groups, bps, s)
                         : att_cluster_launch_t<8, 4>(a, groups, bps, s);
    case 4:
        return a.d <= 64 ? att_cluster_launch_t<4, 2>(a, groups, bps, s)
                         : att_cluster_launch_t<4, 4>(a, groups, bps, s);
    case 2:
        return a.d <= 64 ? att_cluster_launch_t<2, 2>(a, groups, bps, s)
                         : att_cluster_launch_t<2, 4>(a, groups, bps, s);
    default: return FP4_ERR_UNSUPPORTED;
    }
}

#endif
