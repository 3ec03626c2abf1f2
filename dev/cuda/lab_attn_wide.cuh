/* lab_attn_wide.cuh — session 12 (wide): the cluster attention of src/cuda/step/att_cluster.cuh for
 * steps of 2 to 8 columns with many more bytes of K and V in flight per SM (issue 10: 8 sequences at
 * >= 5x one; bench/gpu.md "Session 12 (wide)"). att_cluster_kernel at 8 columns and position 511
 * takes 26 us for 17 MB (0.65 TB/s): its scores load one 16 KB trip of K rows ahead into registers
 * and its V ring (3 chunks of 8 KB in flight) refills only as the o strips consume it. Session 12's
 * staged kernel (lab_attn_stage.cuh) holds ALL of a block's K rows in shared memory sized by n_ctx,
 * which small clusters cannot (a cluster of 4 has 1 024 local slots a block at n_ctx 4 096: 256 KB).
 * Here one bounded ring whose size does not depend on n_ctx carries a single stream of items per
 * block: item k < nc is the K rows of local slots k*RC .. k*RC+RC-1 (one score trip: a 4-thread team
 * per slot), item nc + k the V rows of the same slots (nc = ceil(ni / RC) chunks). Item k lives in
 * ring chunk k % NR, is one cp.async commit group, and is waited for with NR - 2 groups pending
 * (NR - 1 items in flight); after the barrier that follows the wait, item k + NR - 1 is requested
 * into chunk (k - 1) % NR, whose item every thread has consumed. So at short positions (nc + nc <=
 * NR - 1) the whole of a block's K and V is requested at the start, and at long ones NR - 1 chunks
 * (NR - 1 x 16 KB) stay in flight through the scores, the cluster max and the o strips alike: the V
 * rows stream into the chunks the scores free, while the scores of the last K chunks are computed.
 *   - K rows sit in their chunk with the 16-byte pieces of odd slots swizzled (ats_kat: a quarter
 *     warp's two slots hit distinct banks); V rows plain (a warp reads 128 consecutive bytes);
 *   - the o strips as att_cluster_kernel: thread (r, dimension pair dp; a quad with DPT 4), lanes
 *     r = pr + s*PR for its NSET sets; lane r's chain over rounds u = 0, 1, ... (slot u*LPB + r) in
 *     increasing order from +0.0f, chunk after chunk (a chunk holds whole rounds: RC is a multiple of
 *     LPB). The den strip of (lane r, head g) is added in the same loop by thread (r, dp = g), from
 *     +0.0f, u increasing;
 *   - the o strips' partial sums go into the ring's first bytes once every thread has left it (all
 *     real copies have landed: the later groups are empty), so shared memory is qs | es | den |
 *     maxima | ring, es sized by n_ctx (16 B a local slot), the ring by NR alone.
 * The same operations in the same order as att_cluster_kernel and fp4p_attend (stk_score_row per
 * slot, the cluster max, fp4p_exp(s - m) in place, each lane's chains, the pinned butterflies, o =
 * sum / den): bit-identical outputs. attn_lab compares every variant with the old kernels bit for
 * bit; attn_stage_emul's wide mode replays this kernel's items, ring chunks, commit groups and
 * values on the host against fp4p_attend (ATW_FAULT: planted faults, the emulator's builds only).
 * Lab only (dev/cuda): no route uses it. */
#ifndef FP4_LAB_ATTN_WIDE_CUH
#define FP4_LAB_ATTN_WIDE_CUH

#include "lab_attn_stage.cuh" /* ats_pos, ats_kat */

#define ATW_RC ATS_TS /* local slots a ring chunk: one score trip (64 teams of 4 threads) */
#ifndef ATW_FAULT
#define ATW_FAULT 0 /* 0 on the device; 1..5: a planted fault for attn_stage_emul (below) */
#endif

/* group (column, KV head, first head, heads) of block row y: stk_att_group's arithmetic, on the host
 * too (the emulator replays the kernel's columns through it) */
static __host__ __device__ __forceinline__ void atw_group(int y, int nh, int nkv, int *c, int *hk, int *h0,
                                                          int *nhb) {
    const int G = nh / nkv, ngb = (G + STK_GB - 1) / STK_GB, gb = y % ngb;
    *hk = (y / ngb) % nkv;
    *c = y / (ngb * nkv);
    *h0 = *hk * G + gb * STK_GB;
    *nhb = G - gb * STK_GB < STK_GB ? G - gb * STK_GB : STK_GB;
}

/* byte offsets of the dynamic shared memory: qs [STK_GB*D] f32 | es [nimax][STK_GB] f32 |
 * denp [LPB][STK_GB] f32 | bm [STK_GB] | ms [STK_GB] | ring [NR][RC][D] halves; part [LPB][STK_GB][D]
 * f32 over the ring's first bytes after the last item */
typedef struct atw_layout {
    int nimax, lpb, nr;
    size_t qs, es, denp, bm, ms, ring, part, bytes;
} atw_layout;

static __host__ __device__ __forceinline__ atw_layout atw_layout_of(int64_t n_ctx, int d, int cs, int nr) {
    atw_layout l;
    l.lpb = 32 / cs, l.nr = nr;
    l.nimax = (int)att_cluster_slots(n_ctx, cs);
    l.qs = 0;
    l.es = l.qs + (size_t)4 * STK_GB * d;
    l.denp = l.es + (size_t)4 * l.nimax * STK_GB;
    l.bm = l.denp + (size_t)4 * l.lpb * STK_GB;
    l.ms = l.bm + (size_t)4 * STK_GB;
    l.ring = l.ms + (size_t)4 * STK_GB;
    l.part = l.ring;
    const size_t ring = (size_t)2 * nr * ATW_RC * d, part = (size_t)4 * l.lpb * STK_GB * d;
    l.bytes = l.ring + (ring > part ? ring : part);
    return l;
}

/* ring chunks (items of one kind) of a block with ni local slots */
static __host__ __device__ __forceinline__ int atw_chunks(int ni) {
    return (ni + ATW_RC - 1) / ATW_RC;
}
/* items in flight: requested ahead of the one being consumed (the prologue requests items 0..this-1,
 * the wait before item k leaves this - 1 groups pending, item k + this is requested after it) */
static __host__ __device__ __forceinline__ int atw_ahead(int nr) {
    return nr - 1;
}
static __host__ __device__ __forceinline__ int atw_pend(int nr) { /* groups pending at item k's wait */
#if ATW_FAULT == 1
    return nr - 1; /* planted: one group too loose */
#else
    return atw_ahead(nr) - 1;
#endif
}
/* the item requested after the wait and barrier of item k */
static __host__ __device__ __forceinline__ int atw_next(int k, int nr) {
#if ATW_FAULT == 2
    return k + nr; /* planted: one too far (into the chunk being read; item nr - 1 never requested) */
#else
    return k + atw_ahead(nr);
#endif
}
/* halves offset in the ring of item k's chunk */
template <int D> static __host__ __device__ __forceinline__ int atw_chunk_at(int k, int nr) {
#if ATW_FAULT == 3
    return (k % (nr - 1)) * ATW_RC * D; /* planted: chunks reused one item early */
#else
    return (k % nr) * ATW_RC * D;
#endif
}
/* halves offset in the ring of 16-byte piece ch of slot i's K row (item k = i / RC) */
template <int D> static __host__ __device__ __forceinline__ int atw_kat(int k, int nr, int i, int ch) {
    return atw_chunk_at<D>(k, nr) + ats_kat<D, false>(i % ATW_RC, ch, 0);
}
/* halves offset in the ring of slot i's V row (item k = nc + i / RC) */
template <int D> static __host__ __device__ __forceinline__ int atw_vat(int k, int nr, int i) {
    return atw_chunk_at<D>(k, nr) + (i % ATW_RC) * D;
}
/* the V row an o-strip thread of lane r reads at round w of a chunk (slot w*LPB + r of the chunk) */
static __host__ __device__ __forceinline__ int atw_vrow(int w, int r, int lpb) {
#if ATW_FAULT == 4
    return w * lpb + (r ^ 1); /* planted: the neighbouring lane's row */
#else
    return w * lpb + r;
#endif
}
/* cluster ranks whose maxima the max takes */
static __host__ __device__ __forceinline__ int atw_max_ranks(int cs) {
#if ATW_FAULT == 5
    return cs > 1 ? cs - 1 : 1; /* planted: the last block's maxima left out (values only) */
#else
    return cs;
#endif
}

#if defined(__CUDACC__)
/* item k of the block's stream (k >= 2 nc: none), one commit group (possibly empty). K rows of slots
 * past the column's position: the last row (their scores are dropped); V rows of those: not copied
 * (never read) */
template <int LPB, int D, int NR>
static __device__ __forceinline__ void atw_issue(uint16_t *ring, const uint16_t *kbase, const uint16_t *vbase,
                                                 int64_t kvd, int b, int64_t n, int ni, int nc, int k) {
    constexpr int PER = D / 8;
    if (k < 2 * nc) {
        const bool isk = k < nc;
        const int i0 = (isk ? k : k - nc) * ATW_RC, cnt = ni - i0 < ATW_RC ? ni - i0 : ATW_RC;
        for (int x = threadIdx.x; x < cnt * PER; x += ATT_CL_THREADS) {
            const int i = i0 + x / PER, ch = x % PER;
            const int64_t j = ats_pos<LPB>(i, b);
            if (isk)
                fp4_cp_async16(ring + atw_kat<D>(k, NR, i, ch), kbase + (j < n ? j : n - 1) * kvd + 8 * ch);
            else if (j < n)
                fp4_cp_async16(ring + atw_vat<D>(k, NR, i) + 8 * ch, vbase + j * kvd + 8 * ch);
        }
    }
    fp4_cp_async_commit();
}

/* DPT consecutive V halves (exact in f32) */
template <int DPT> static __device__ __forceinline__ void atw_vload(const uint16_t *src, float (&v)[DPT]) {
    if constexpr (DPT == 2) {
        const float2 f = __half22float2(*reinterpret_cast<const __half2 *>(src));
        v[0] = f.x, v[1] = f.y;
    } else {
        const uint2 raw = *reinterpret_cast<const uint2 *>(src);
        const float2 f0 = __half22float2(*reinterpret_cast<const __half2 *>(&raw.x));
        const float2 f1 = __half22float2(*reinterpret_cast<const __half2 *>(&raw.y));
        v[0] = f0.x, v[1] = f0.y, v[2] = f1.x, v[3] = f1.y;
    }
}

/* DPT: V dimensions an o-strip thread holds (2: as att_cluster_kernel; 4: half the threads a lane, fewer
 * instructions a product, for clusters of 4 and 2 where every thread still has a lane) */
template <int CS, int D, int NR, int DPT = 2>
static __global__ __launch_bounds__(ATT_CL_THREADS, 2) void atw_kernel(stk_att_args a) {
    static_assert(NR >= 3 && NR <= 8 && ATW_RC % (32 / CS) == 0, "ring of 3..8 chunks of whole rounds");
    static_assert((DPT == 2 || DPT == 4) && D / DPT >= STK_GB, "2 or 4 dimensions a thread");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= FP4_CU_CC_HOPPER
    namespace cg = cooperative_groups;
    constexpr int LPB = 32 / CS, NDL = D / 32;
    extern __shared__ __align__(16) float cl_smem[];
    __shared__ float wmax[ATT_CL_THREADS / 32][STK_GB];
    cg::cluster_group cluster = cg::this_cluster();
    STK_PDL_ENTRY();
    const int b = (int)cluster.block_rank(), tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int t = lane & 3;
    int c, hk, h0, nhb;
    atw_group(blockIdx.y, a.nh, a.nkv, &c, &hk, &h0, &nhb);
    const atw_layout L = atw_layout_of(a.n_ctx, D, CS, NR);
    const int64_t pos = a.cols.pos[c], n = pos + 1, kvd = (int64_t)a.nkv * D;
    const int ni = (int)((n + 31) / 32 * LPB), nc = atw_chunks(ni); /* local slots of the rounds */
    unsigned char *sm = reinterpret_cast<unsigned char *>(cl_smem);
    float *qs = reinterpret_cast<float *>(sm + L.qs), *es = reinterpret_cast<float *>(sm + L.es);
    float *denp = reinterpret_cast<float *>(sm + L.denp), *bm = reinterpret_cast<float *>(sm + L.bm);
    float *ms = reinterpret_cast<float *>(sm + L.ms), *part = reinterpret_cast<float *>(sm + L.part);
    uint16_t *ring = reinterpret_cast<uint16_t *>(sm + L.ring);
    const int64_t kvo = a.cols.slot[c] * a.slot_stride + hk * D;
    const uint16_t *kbase = a.kc + kvo, *vbase = a.vc + kvo;
    for (int k = 0; k < atw_ahead(NR); k++)
        atw_issue<LPB, D, NR>(ring, kbase, vbase, kvd, b, n, ni, nc, k);
    const float *q = a.q + (int64_t)c * a.q_cs + (int64_t)h0 * D;
    for (int i = tid; i < STK_GB * D; i += ATT_CL_THREADS)
        qs[i] = i < nhb * D ? __ldcg(q + i) : 0.0f;
    float mx[STK_GB];
#pragma unroll
    for (int g = 0; g < STK_GB; g++)
        mx[g] = stk_neg_inf();
    /* scores: item k (a K chunk) is one trip; warp w's teams take slots k*RC + 8w .. k*RC + 8w + 7 */
    for (int k = 0; k < nc; k++) {
        ats_wait(atw_pend(NR));
        __syncthreads(); /* item k in for every thread (and qs); chunk (k-1) % NR read by all */
        atw_issue<LPB, D, NR>(ring, kbase, vbase, kvd, b, n, ni, nc, atw_next(k, NR));
        if (k * ATW_RC + 8 * warp >= ni) continue; /* uniform over the warp */
        const int i = k * ATW_RC + 8 * warp + (lane >> 2), ri = i < ni ? i : ni - 1;
        const int64_t j = ats_pos<LPB>(i, b);
        uint4 kr[NDL];
#pragma unroll
        for (int m = 0; m < NDL; m++)
            kr[m] = *reinterpret_cast<const uint4 *>(ring + atw_kat<D>(k, NR, ri, 4 * m + t));
        stk_score_row<NDL>(a, qs, kr, nhb, t, i < ni && j < n, i, es, mx);
    }
    const float bmx = stk_block_head_max<ATT_CL_THREADS / 32>(mx, wmax);
    if (tid < STK_GB) bm[tid] = bmx;
    cluster.sync(); /* every block's maxima */
    if (tid < STK_GB) {
        float m = stk_neg_inf();
        for (int rk = 0; rk < atw_max_ranks(CS); rk++)
            m = fmaxf(m, cluster.map_shared_rank(bm, rk)[tid]);
        ms[tid] = m;
    }
    __syncthreads();
    for (int i = tid; i < ni; i += ATT_CL_THREADS)
        if (ats_pos<LPB>(i, b) < n)
            for (int g = 0; g < nhb; g++)
                es[i * STK_GB + g] = fp4p_exp(fp4p_sub(es[i * STK_GB + g], ms[g]));
    /* o strips (and den strips: thread (r, dp = g)), chunk after chunk; thread (r, dp) holds dimensions
     * DPT*dp .. DPT*dp + DPT-1 */
    constexpr int NDT = D / DPT, PR = ATT_CL_THREADS / NDT, NSET = (LPB + PR - 1) / PR, RPC = ATW_RC / LPB;
    const int pr = tid / NDT, dp = tid - pr * NDT;
    const bool dg = dp < nhb; /* dp < STK_GB: this thread also adds den strip (r, g = dp) */
    int nu[NSET];
    float p[NSET][STK_GB][DPT], den[NSET];
#pragma unroll
    for (int q2 = 0; q2 < NSET; q2++) {
        const int r = pr + q2 * PR;
        nu[q2] = r < LPB && n > b * LPB + r ? (int)((n - b * LPB - r + 31) / 32) : 0;
        den[q2] = 0.0f;
#pragma unroll
        for (int g = 0; g < STK_GB; g++)
#pragma unroll
            for (int x = 0; x < DPT; x++)
                p[q2][g][x] = 0.0f;
    }
    for (int k = nc; k < 2 * nc; k++) {
        ats_wait(atw_pend(NR));
        __syncthreads(); /* item k in (and the exps visible); chunk (k-1) % NR read by all */
        atw_issue<LPB, D, NR>(ring, kbase, vbase, kvd, b, n, ni, nc, atw_next(k, NR));
        const int u0 = (k - nc) * RPC;
        const uint16_t *st = ring + atw_vat<D>(k, NR, 0) + DPT * dp;
#pragma unroll
        for (int q2 = 0; q2 < NSET; q2++) {
            const int r = pr + q2 * PR, nw = nu[q2] - u0 < RPC ? nu[q2] - u0 : RPC;
#pragma unroll 4
            for (int w = 0; w < nw; w++) {
                const int u = u0 + w;
                float v[DPT];
                atw_vload<DPT>(st + atw_vrow(w, r, LPB) * D, v);
                const float4 e4 = *reinterpret_cast<const float4 *>(es + (u * LPB + r) * STK_GB);
                const float e[STK_GB] = {e4.x, e4.y, e4.z, e4.w};
#pragma unroll
                for (int g = 0; g < STK_GB; g++)
                    if (g < nhb)
#pragma unroll
                        for (int x = 0; x < DPT; x++)
                            p[q2][g][x] = fp4p_add(p[q2][g][x], fp4p_mul(e[g], v[x]));
                if (dg) den[q2] = fp4p_add(den[q2], es[(u * LPB + r) * STK_GB + dp]);
            }
        }
    }
    __syncthreads(); /* every thread has left the ring (its copies all landed: later groups are empty) */
#pragma unroll
    for (int q2 = 0; q2 < NSET; q2++) {
        const int r = pr + q2 * PR;
        if (r < LPB) {
#pragma unroll
            for (int g = 0; g < STK_GB; g++)
#pragma unroll
                for (int x = 0; x < DPT; x++)
                    part[(r * STK_GB + g) * D + DPT * dp + x] = p[q2][g][x];
            if (dp < STK_GB) denp[r * STK_GB + dp] = den[q2];
        }
    }
    cluster.sync(); /* every block's strips */
    const int per = (nhb * D + CS - 1) / CS;
    if (tid < per) {
        const int idx = b * per + tid;
        if (idx < nhb * D) {
            const int g = idx / D, dd = idx - g * D;
            float v[STK_LANES], w[STK_LANES];
#pragma unroll
            for (int l = 0; l < STK_LANES; l++) {
                const float *rp = cluster.map_shared_rank(part, l / LPB);
                const float *rd = cluster.map_shared_rank(denp, l / LPB);
                v[l] = rp[((l % LPB) * STK_GB + g) * D + dd];
                w[l] = rd[(l % LPB) * STK_GB + g];
            }
            a.o[((int64_t)c * a.nh + h0 + g) * D + dd] = fp4p_div(stk_butterfly32(v), stk_butterfly32(w));
        }
    }
    cluster.sync(); /* no block leaves while another reads its shared memory */
#else
    (void)a;
#endif
}

/* 1 where the lab variant serves this shape: sm_90a code, head_dim 64 or 128, clusters of 2..16, shared
 * memory in range */
static inline int atw_ok(int d, int64_t n_ctx, int cs, int nr) {
    if (!fp4_cu_sm90_code() || (d != 64 && d != 128) || (cs != 2 && cs != 4 && cs != 8 && cs != 16)) return 0;
    return atw_layout_of(n_ctx, d, cs, nr).bytes <= ATS_MAX_SMEM;
}

template <int CS, int D, int NR, int DPT> static int atw_fit_t(int64_t n_ctx, int *bps) {
    const size_t smem = atw_layout_of(n_ctx, D, CS, NR).bytes;
    void (*k)(stk_att_args) = atw_kernel<CS, D, NR, DPT>;
    *bps = 0;
    if (CS > 8 && cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess)
        return (void)cudaGetLastError(), 0;
    if (cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != cudaSuccess)
        return (void)cudaGetLastError(), 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(bps, k, ATT_CL_THREADS, smem) != cudaSuccess)
        return (void)cudaGetLastError(), *bps = 0, 0;
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
    return nc;
}

template <int CS, int D, int NR, int DPT>
static fp4_status atw_launch_t(stk_att_args a, int64_t groups, cudaStream_t s) {
    const size_t smem = atw_layout_of(a.n_ctx, D, CS, NR).bytes;
    void (*k)(stk_att_args) = atw_kernel<CS, D, NR, DPT>;
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
        (void)cudaGetLastError();
        cfg.numAttrs = 1;
    }
    FP4_CUDA_CHECK(cudaLaunchKernelEx(&cfg, k, a));
    return FP4_OK;
}

/* the lab's instances (CS, D, NR, DPT): the deepest ring that keeps two blocks an SM at n_ctx 4096 and D
 * 128 (clusters of 2: 4 chunks, es 32 KB; of 4: 5; of 8 and 16: 6), a shallow ring of 3 at clusters of
 * 4 (does the depth matter?), clusters of 4 with 4 dimensions a thread; D 64 compiled for the resource
 * report */
#define ATW_CASES(X)                                                                                         \
    X(2, 128, 4, 2)                                                                                          \
    X(4, 128, 5, 2) X(8, 128, 6, 2) X(16, 128, 6, 2) X(4, 128, 3, 2) X(4, 128, 5, 4) X(4, 64, 5, 2)

static inline int atw_fit(int cs, int d, int nr, int dpt, int64_t n_ctx, int *bps) {
#define ATW_FIT(CS, DD, NR, DPT)                                                                             \
    if (cs == CS && d == DD && nr == NR && dpt == DPT) return atw_fit_t<CS, DD, NR, DPT>(n_ctx, bps);
    ATW_CASES(ATW_FIT)
#undef ATW_FIT
    *bps = 0;
    return 0;
}

static inline fp4_status atw_attention(stk_att_args a, int64_t n, int cs, int nr, int dpt, cudaStream_t s) {
    if (!atw_ok(a.d, a.n_ctx, cs, nr)) return FP4_ERR_UNSUPPORTED;
    const int64_t groups = stk_att_groups(n, a.nh, a.nkv);
#define ATW_GO(CS, DD, NR, DPT)                                                                              \
    if (cs == CS && a.d == DD && nr == NR && dpt == DPT) return atw_launch_t<CS, DD, NR, DPT>(a, groups, s);
    ATW_CASES(ATW_GO)
#undef ATW_GO
    return FP4_ERR_UNSUPPORTED;
}
#endif

#endif
