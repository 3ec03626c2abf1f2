/* lab_attn_stage.cuh — session 12 (issue 10: context 4096 within 10 % of 512), a lab variant of the
 * 1-column cluster attention of src/cuda/step/att_cluster.cuh with much more of the KV cache in flight.
 * The production kernel is latency-bound at long positions (bench/gpu.md, session 6: 16 MB of K and
 * V in 24.66 us at position 3967, 0.66 TB/s): its scores load one 16 KB trip of K rows ahead, its V
 * ring holds 3 chunks of 8 KB in flight, issued only after the scores. Here:
 *   - at the start every block requests ALL its local slots' K rows by cp.async into a K region of
 *     shared memory (ATS_NKG commit groups of whole score trips, so the scores of the first group
 *     start while the rest is in flight), then the V rows of its first ATS_VA local slots into a
 *     V region; q after them (an L2 hit);
 *   - after the scores (the block-max barrier: no thread reads K any more) the K region is dead: the
 *     V rows of the remaining slots go there, requested before the cluster barrier. Shared memory is
 *     K region + V region + the small arrays (ats_layout): 106 KB a block at n_ctx 4096, clusters of
 *     16 — two blocks per SM still fit (one per SM: the 8 clusters of 16 do not all fit the GPCs);
 *   - K rows are stored with the 16-byte chunks of odd slots swizzled (chunk ^ 4) so the teams'
 *     128-bit reads of two slots in a quarter warp hit distinct banks;
 *   - the o strips use every thread (thread = (lane r, dimension d): 2 x 128 at clusters of 16,
 *     where the production kernel leaves half the threads idle with dimension pairs), and the den
 *     strip of (r, head g) is added by thread (r, d = g) in the same loop (u increasing from +0.0f:
 *     fp4p_attend's lane order, as before).
 * The same operations in the same order as att_cluster_kernel / fp4p_attend: the same pinned dot
 * (stk_score_row) per slot, the same exps, the same chains per lane, the same butterflies; only
 * where the rows wait and which thread adds which chain change. So the outputs are bit-identical
 * (attn_lab compares every variant with the old kernels; attn_stage_emul replays this kernel's
 * index and group arithmetic on the host against fp4p_attend).
 * ATS_PF: a variant that, before the PDL wait, issues cp.async.bulk.prefetch.L2 of the K and V rows
 * of positions < pos (a pure hint: nothing is read into registers or shared memory before the wait;
 * the position and slot read before it may be stale, so both are clamped into the cache's
 * allocation: ats_args.nslots).
 * Lab only (dev/cuda): no route uses it; bench/gpu.md "Session 12" says how it would be wired. */
#ifndef FP4_LAB_ATTN_STAGE_CUH
#define FP4_LAB_ATTN_STAGE_CUH

#include "cuda/a16_stream.cuh" /* mbarrier and bulk-copy primitives (TMA) */
#include "cuda/step/att_cluster.cuh"

#define ATS_VA 128 /* local slots whose V rows are requested at the start (a multiple of 16) */
#define ATS_NKG 4  /* commit groups of the K rows (whole score trips each) */
#define ATS_TS (ATT_CL_THREADS / 4) /* slots per score trip: a team of 4 threads per slot */
#define ATS_MAX_SMEM ((size_t)227 * 1024)
#define ATS_NBAR (2 * ATS_NKG + 1) /* TMA: an mbarrier per K group, the V region, each K-region V piece */

typedef struct ats_args {
    stk_att_args a;
    int64_t nslots;  /* slots of the KV cache (the prefetch's clamp) */
    int64_t lay_ctx; /* the n_ctx the shared memory is sized for (0: a.n_ctx); any value > every
                        column's position serves (a bucket of positions: smaller shared memory) */
} ats_args;
static __host__ __device__ __forceinline__ int64_t ats_lay_ctx(const ats_args &aa) {
    return aa.lay_ctx > 0 ? aa.lay_ctx : aa.a.n_ctx;
}

/* byte offsets of the dynamic shared memory: qs [STK_GB*D] f32 | es [nimax][STK_GB] f32 |
 * part [LPB][STK_GB][D] f32 | denp [LPB][STK_GB] | bm [STK_GB] | ms [STK_GB] | kreg [nimax][D] halves
 * + 64 bytes (K rows, then the V rows of slots va..) | vreg [va][D] halves (the V rows of slots
 * 0..va-1) */
typedef struct ats_layout {
    int nimax, va, lpb;
    size_t qs, es, part, denp, bm, ms, kreg, vreg, bytes;
} ats_layout;

static __host__ __device__ __forceinline__ ats_layout ats_layout_of(int64_t n_ctx, int d, int cs) {
    ats_layout l;
    l.lpb = 32 / cs;
    l.nimax = (int)att_cluster_slots(n_ctx, cs);
    l.va = l.nimax < ATS_VA ? l.nimax : ATS_VA;
    l.qs = 0;
    l.es = l.qs + (size_t)4 * STK_GB * d;
    l.part = l.es + (size_t)4 * l.nimax * STK_GB;
    l.denp = l.part + (size_t)4 * l.lpb * STK_GB * d;
    l.bm = l.denp + (size_t)4 * l.lpb * STK_GB;
    l.ms = l.bm + (size_t)4 * STK_GB;
    l.kreg = l.ms + (size_t)4 * STK_GB;
    l.vreg = l.kreg + (size_t)2 * l.nimax * d + 64; /* 64: TMA's odd-slot offset (ats_kat) */
    l.bytes = l.vreg + (size_t)2 * l.va * d;
    return l;
}

/* position of block b's local slot i */
template <int LPB> static __host__ __device__ __forceinline__ int64_t ats_pos(int64_t i, int b) {
    return 32 * (i / LPB) + b * LPB + i % LPB;
}
/* first score trip of K group g (of ATS_NKG) when the block has `trips` trips */
static __host__ __device__ __forceinline__ int ats_tb(int g, int trips) {
    return (g * trips + ATS_NKG - 1) / ATS_NKG;
}
/* halves offset, in the K region, of 16-byte chunk ch of slot i's K row. cp.async (16-byte copies):
 * rows in slot order, the chunks of odd slots swizzled (chunk ^ 4); TMA (a row a bulk copy, so
 * rows whole): even slots first, then odd ones 64 bytes further. Either way the teams of slots i
 * and i+1 in a quarter warp read 16-byte bank groups 4 apart (no conflict). */
template <int D, bool TMA> static __host__ __device__ __forceinline__ int ats_kat(int i, int ch, int nimax) {
    if (TMA) return ((i & 1) ? (nimax / 2) * D + 32 : 0) + (i >> 1) * D + 8 * ch;
    return i * D + 8 * (D >= 64 ? ch ^ ((i & 1) << 2) : ch);
}
/* local slots of block b whose positions are < n: a prefix of the slots (positions grow with i) */
template <int LPB> static __host__ __device__ __forceinline__ int ats_nvalid(int64_t n, int b) {
    const int64_t part = n % 32 - b * LPB;
    return (int)(LPB * (n / 32) + (part < 0 ? 0 : part > LPB ? LPB : part));
}
/* halves offset, from the K region's start, of slot i's V row: the V region for i < va, else the
 * place of K slot i - va (dead after the scores: K-region V rows are requested in the freed K
 * groups' slots, ats_vb_rows); and the distance between the V rows of one lane's consecutive rounds
 * (slots i and i + LPB: LPB rows, or LPB/2 in TMA's K region of even and odd slots) */
template <int D, bool TMA>
static __host__ __device__ __forceinline__ int64_t ats_vat(const ats_layout &l, int i) {
    if (i < l.va) return (int64_t)(l.vreg - l.kreg) / 2 + (int64_t)i * D;
    return TMA ? ats_kat<D, true>(i - l.va, 0, l.nimax) : (int64_t)(i - l.va) * D;
}
template <int D, bool TMA> static __host__ __device__ __forceinline__ int ats_vstride(int lpb, bool kregion) {
    return (TMA && kregion ? lpb / 2 : lpb) * D;
}

/* pending commit groups allowed at the wait before K group g's scores, and before the o strips'
 * half 0 (the V region) and half 1 (all). Groups: K 0..ATS_NKG-1, the V region, then the K-region
 * V rows: with EV one piece at each K group's barrier from g = 1 and one after the block max
 * (ATS_NKG pieces), else one after the block max */
template <bool EV> static __host__ __device__ __forceinline__ int ats_pend_k(int g) {
    return ATS_NKG - g + (EV && g >= 1 ? g - 1 : 0);
}
template <bool EV> static __host__ __device__ __forceinline__ int ats_pend_v(int half) {
    return half ? 0 : EV ? ATS_NKG : 1;
}
/* the K-region rows [k0, k1) of the V rows of slots va + k requested at barrier g (g < ATS_NKG: the
 * one before K group g's scores, EV only: the rows of K group g-1, dead by then; g = ATS_NKG: after
 * the block max) when there are nb such rows */
template <bool EV>
static __host__ __device__ __forceinline__ void ats_vb_rows(int g, int trips, int nb, int *k0, int *k1) {
    int a0 = 0, a1 = g == ATS_NKG ? nb : 0;
    if (EV && g >= 1) a0 = ats_tb(g - 1, trips) * ATS_TS, a1 = g == ATS_NKG ? nb : ats_tb(g, trips) * ATS_TS;
    *k0 = a0 < nb ? a0 : nb, *k1 = a1 < nb ? a1 : nb;
    if (*k1 < *k0) *k1 = *k0;
}

static __device__ __forceinline__ void ats_wait(int pending) { /* cp.async.wait_group, any count */
    switch (pending) {
    case 0:
        fp4_cp_async_wait<0>();
        break;
    case 1:
        fp4_cp_async_wait<1>();
        break;
    case 2:
        fp4_cp_async_wait<2>();
        break;
    case 3:
        fp4_cp_async_wait<3>();
        break;
    case 4:
        fp4_cp_async_wait<4>();
        break;
    default:
        fp4_cp_async_wait<5>();
        break;
    }
}

/* the V rows of K-region rows [k0, k1) (ats_vb_rows): cp.async, one commit group (possibly empty);
 * TMA, a bulk copy a row on mbarrier bar (its byte count: ats_tx) */
template <int LPB, int D, bool EV, bool TMA>
static __device__ __forceinline__ void ats_issue_vb(uint16_t *kreg, const uint16_t *vbase, int64_t kvd,
                                                    const ats_layout &L, int b, int64_t n, int g, int trips,
                                                    int nb, uint64_t *bar) {
    int k0, k1;
    ats_vb_rows<EV>(g, trips, nb, &k0, &k1);
    if constexpr (TMA) {
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); /* after the generic reads of K */
        for (int k = k0 + (int)threadIdx.x; k < k1; k += ATT_CL_THREADS) {
            const int i = L.va + k;
            const int64_t j = ats_pos<LPB>(i, b);
            if (j < n) fp4_bulk_g2s(kreg + ats_vat<D, TMA>(L, i), vbase + j * kvd, 2 * D, bar);
        }
    } else {
        for (int x = threadIdx.x; x < (k1 - k0) * (D / 8); x += ATT_CL_THREADS) {
            const int i = L.va + k0 + x / (D / 8), ch = x % (D / 8);
            const int64_t j = ats_pos<LPB>(i, b);
            if (j < n) fp4_cp_async16(kreg + ats_vat<D, TMA>(L, i) + 8 * ch, vbase + j * kvd + 8 * ch);
        }
        fp4_cp_async_commit();
    }
}

/* TMA: the bytes mbarrier x expects (x < ATS_NKG: K group x; ATS_NKG: the V region; ATS_NKG + g,
 * g = 1..ATS_NKG: the K-region V rows of barrier g, EV only) */
template <int LPB, int D>
static __host__ __device__ __forceinline__ unsigned ats_tx(int x, const ats_layout &L, int ni, int nv,
                                                           int trips) {
    int rows = 0;
    if (x < ATS_NKG) {
        const int i0 = ats_tb(x, trips) * ATS_TS, i1 = ats_tb(x + 1, trips) * ATS_TS;
        rows = (i1 < ni ? i1 : ni) - (i0 < ni ? i0 : ni);
    } else if (x == ATS_NKG) {
        rows = L.va < nv ? L.va : nv;
    } else {
        int k0, k1;
        ats_vb_rows<true>(x - ATS_NKG, trips, ni - L.va, &k0, &k1);
        const int a = L.va + k0, e = L.va + k1 < nv ? L.va + k1 : nv;
        rows = e > a ? e - a : 0;
    }
    return (unsigned)rows * 2u * (unsigned)D;
}

/* the L2 prefetch before the PDL wait (ATS_PF): rows of positions < pos, position and slot clamped */
template <int LPB, int D>
static __device__ __forceinline__ void ats_prefetch(const ats_args &aa, int b, int c, int hk) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= FP4_CU_CC_HOPPER
    const stk_att_args &a = aa.a;
    int64_t pos = a.cols.pos[c], slot = a.cols.slot[c]; /* possibly stale: clamped */
    pos = pos < 0 ? 0 : pos >= a.n_ctx ? a.n_ctx - 1 : pos;
    slot = slot < 0 ? 0 : slot >= aa.nslots ? aa.nslots - 1 : slot;
    const int64_t kvd = (int64_t)a.nkv * D, kvo = slot * a.slot_stride + hk * D, ni = (pos + 31) / 32 * LPB;
    for (int64_t i = threadIdx.x; i < ni; i += blockDim.x) {
        const int64_t j = ats_pos<LPB>(i, b);
        if (j < pos) {
            asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(a.kc + kvo + j * kvd), "r"(2 * D)
                         : "memory");
            asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(a.vc + kvo + j * kvd), "r"(2 * D)
                         : "memory");
        }
    }
#else
    (void)aa, (void)b, (void)c, (void)hk;
#endif
}

template <int CS, int D, bool PF, bool EV, bool TMA>
static __global__ __launch_bounds__(ATT_CL_THREADS) void ats_kernel(ats_args aa) {
    static_assert(!TMA || EV, "the TMA form has the early V rows only");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= FP4_CU_CC_HOPPER
    namespace cg = cooperative_groups;
    constexpr int LPB = 32 / CS, NDL = D / 32, PER = D / 8; /* PER: 16-byte chunks a row */
    const stk_att_args &a = aa.a;
    extern __shared__ __align__(16) float cl_smem[];
    __shared__ float wmax[ATT_CL_THREADS / 32][STK_GB];
    __shared__ __align__(8) uint64_t bars[ATS_NBAR]; /* TMA */
    cg::cluster_group cluster = cg::this_cluster();
    const int b = (int)cluster.block_rank(), tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int t = lane & 3;
    int c, hk, h0, nhb;
    stk_att_group(a, blockIdx.y, &c, &hk, &h0, &nhb);
    if (PF) { /* STK_PDL_ENTRY with the prefetch between its two halves */
        fp4_pdl_trigger();
        ats_prefetch<LPB, D>(aa, b, c, hk);
        fp4_pdl_wait();
    } else {
        STK_PDL_ENTRY();
    }
    const ats_layout L = ats_layout_of(ats_lay_ctx(aa), D, CS);
    const int64_t pos = a.cols.pos[c], n = pos + 1, kvd = (int64_t)a.nkv * D;
    const int ni = (int)((n + 31) / 32 * LPB); /* local slots of the column's rounds */
    unsigned char *sm = reinterpret_cast<unsigned char *>(cl_smem);
    float *qs = reinterpret_cast<float *>(sm + L.qs), *es = reinterpret_cast<float *>(sm + L.es);
    float *part = reinterpret_cast<float *>(sm + L.part), *denp = reinterpret_cast<float *>(sm + L.denp);
    float *bm = reinterpret_cast<float *>(sm + L.bm), *ms = reinterpret_cast<float *>(sm + L.ms);
    uint16_t *kreg = reinterpret_cast<uint16_t *>(sm + L.kreg);
    const int64_t kvo = a.cols.slot[c] * a.slot_stride + hk * D;
    const uint16_t *kbase = a.kc + kvo, *vbase = a.vc + kvo;
    const int trips = (ni + ATS_TS - 1) / ATS_TS, nv = ats_nvalid<LPB>(n, b);
    if (TMA) { /* the mbarriers and their byte counts first, published by a barrier */
        if (tid == 0) {
            for (int x = 0; x < ATS_NBAR; x++)
                fp4_mbar_init(&bars[x], 1);
            fp4_mbar_fence_init();
            for (int x = 0; x < ATS_NBAR; x++)
                fp4_mbar_expect_tx(&bars[x], ats_tx<LPB, D>(x, L, ni, nv, trips));
        }
        __syncthreads();
        for (int g = 0; g < ATS_NKG; g++) {
            const int i1 = min(ats_tb(g + 1, trips) * ATS_TS, ni);
            for (int i = ats_tb(g, trips) * ATS_TS + tid; i < i1; i += ATT_CL_THREADS) {
                const int64_t j = ats_pos<LPB>(i, b);
                fp4_bulk_g2s(kreg + ats_kat<D, TMA>(i, 0, L.nimax), kbase + (j < n ? j : n - 1) * kvd, 2 * D,
                             &bars[g]);
            }
        }
        for (int i = tid; i < min(L.va, nv); i += ATT_CL_THREADS)
            fp4_bulk_g2s(kreg + ats_vat<D, TMA>(L, i), vbase + ats_pos<LPB>(i, b) * kvd, 2 * D,
                         &bars[ATS_NKG]);
    }
    /* K: every local slot's row (a slot past the column's position: the last row, its score is
     * dropped), one commit group per ATS_NKG-th of the score trips */
#pragma unroll
    for (int g = 0; g < ATS_NKG && !TMA; g++) {
        const int i0 = min(ats_tb(g, trips) * ATS_TS, ni), i1 = min(ats_tb(g + 1, trips) * ATS_TS, ni);
        for (int x = tid; x < (i1 - i0) * PER; x += ATT_CL_THREADS) {
            const int i = i0 + x / PER, ch = x % PER;
            int64_t j = ats_pos<LPB>(i, b);
            j = j < n ? j : n - 1;
            fp4_cp_async16(kreg + ats_kat<D, TMA>(i, ch, L.nimax), kbase + j * kvd + 8 * ch);
        }
        fp4_cp_async_commit();
    }
    if (!TMA) { /* V of slots 0 .. va-1 (those of positions past the column's are not read) */
        const int na = min(L.va, ni);
        for (int x = tid; x < na * PER; x += ATT_CL_THREADS) {
            const int i = x / PER, ch = x % PER;
            const int64_t j = ats_pos<LPB>(i, b);
            if (j < n) fp4_cp_async16(kreg + ats_vat<D, TMA>(L, i) + 8 * ch, vbase + j * kvd + 8 * ch);
        }
        fp4_cp_async_commit();
    }
    const float *q = a.q + (int64_t)c * a.q_cs + (int64_t)h0 * D;
    for (int i = tid; i < STK_GB * D; i += blockDim.x)
        qs[i] = i < nhb * D ? __ldcg(q + i) : 0.0f;
    /* scores: trip s, warp w, team slot i = s*ATS_TS + 8w + lane/4 (warp-uniform trips) */
    float mx[STK_GB];
#pragma unroll
    for (int g = 0; g < STK_GB; g++)
        mx[g] = stk_neg_inf();
    const int nb = ni - L.va; /* V rows of slots va.. (K-region row k: slot va + k) */
#pragma unroll
    for (int g = 0; g < ATS_NKG; g++) {
        if (TMA)
            fp4_mbar_wait(&bars[g], 0);
        else
            ats_wait(ats_pend_k<EV>(g)); /* K groups 0..g in (later K groups and V may be in flight) */
        __syncthreads();                 /* every thread's copies (and qs) visible; K group g-1 read */
        if (EV && g >= 1)
            ats_issue_vb<LPB, D, EV, TMA>(kreg, vbase, kvd, L, b, n, g, trips, nb, &bars[ATS_NKG + g]);
        const int s1 = ats_tb(g + 1, trips);
        for (int s = ats_tb(g, trips); s < s1; s++) {
            if (s * ATS_TS + 8 * warp >= ni) break; /* uniform over the warp */
            const int i = s * ATS_TS + 8 * warp + (lane >> 2), ri = i < ni ? i : ni - 1;
            const int64_t j = ats_pos<LPB>(i, b);
            uint4 k[NDL];
#pragma unroll
            for (int m = 0; m < NDL; m++)
                k[m] = *reinterpret_cast<const uint4 *>(kreg + ats_kat<D, TMA>(ri, 4 * m + t, L.nimax));
            stk_score_row<NDL>(a, qs, k, nhb, t, i < ni && j < n, i, es, mx);
        }
    }
    const float bmx = stk_block_head_max<ATT_CL_THREADS / 32>(mx, wmax); /* a barrier: K is dead */
    ats_issue_vb<LPB, D, EV, TMA>(kreg, vbase, kvd, L, b, n, ATS_NKG, trips, nb,
                                  &bars[2 * ATS_NKG]); /* the rest */
    if (tid < STK_GB) bm[tid] = bmx;
    cluster.sync(); /* every block's maxima */
    if (tid < STK_GB) {
        float m = stk_neg_inf();
        for (int rk = 0; rk < CS; rk++)
            m = fmaxf(m, cluster.map_shared_rank(bm, rk)[tid]);
        ms[tid] = m;
    }
    __syncthreads();
    for (int i = tid; i < ni; i += blockDim.x) {
        const int64_t j = ats_pos<LPB>(i, b);
        if (j < n)
            for (int g = 0; g < nhb; g++)
                es[i * STK_GB + g] = fp4p_exp(fp4p_sub(es[i * STK_GB + g], ms[g]));
    }
    /* o strips: thread (r, dimension pair dp), r = pr + q2 * PR for its NSET sets, as
     * att_cluster_kernel; lane r's chain u = 0, 1, ... (slot u*LPB + r) in increasing order from
     * +0.0f, the rounds of the V region first, then those of the K region */
    constexpr int NPAIR = D / 2, PR = ATT_CL_THREADS / NPAIR, NSET = (LPB + PR - 1) / PR;
    const int pr = tid / NPAIR, dp = tid - pr * NPAIR;
    /* den strip (lane b*LPB + r, head g), thread dt = r*STK_GB + g: threads the o strips leave idle
     * where there are (clusters of 16 and 8 at D 128: half the block), else the first ones */
    const int dt = PR > LPB ? tid - LPB * NPAIR : tid;
    int nu[NSET];
    float p[NSET][STK_GB][2];
#pragma unroll
    for (int q2 = 0; q2 < NSET; q2++) {
        const int r = pr + q2 * PR;
        nu[q2] = r < LPB && n > b * LPB + r ? (int)((n - b * LPB - r + 31) / 32) : 0;
#pragma unroll
        for (int g = 0; g < STK_GB; g++)
            p[q2][g][0] = p[q2][g][1] = 0.0f;
    }
    const int ua = L.va / LPB; /* rounds whose V rows are in the V region */
#pragma unroll
    for (int half = 0; half < 2; half++) {
        if (TMA) { /* half 0: the V region in; half 1: everything */
            if (half == 0) fp4_mbar_wait(&bars[ATS_NKG], 0);
            for (int x = ATS_NKG + 1; half && x < ATS_NBAR; x++)
                fp4_mbar_wait(&bars[x], 0);
        } else {
            ats_wait(ats_pend_v<EV>(half));
        }
        __syncthreads(); /* the copies, and the exps, visible to every thread */
        if (half == 0 && dt >= 0 && dt < LPB * STK_GB) {
            const int r = dt / STK_GB, g = dt % STK_GB, l = b * LPB + r;
            const int nd = n > l ? (int)((n - l + 31) / 32) : 0;
            float den = 0.0f;
            if (g < nhb)
                for (int u = 0; u < nd; u++)
                    den = fp4p_add(den, es[(u * LPB + r) * STK_GB + g]);
            denp[dt] = den;
        }
#pragma unroll
        for (int q2 = 0; q2 < NSET; q2++) {
            const int r = pr + q2 * PR, u0 = half ? ua : 0, u1 = half ? nu[q2] : min(nu[q2], ua);
            if (u0 >= u1) continue;
            const uint16_t *vr = kreg + ats_vat<D, TMA>(L, u0 * LPB + r) + 2 * dp;
            const int vs = ats_vstride<D, TMA>(LPB, half == 1);
            const float *er = es + (u0 * LPB + r) * STK_GB;
#pragma unroll 4
            for (int u = 0; u < u1 - u0; u++) {
                const float2 v = __half22float2(*reinterpret_cast<const __half2 *>(vr + u * vs));
                const float4 e4 = *reinterpret_cast<const float4 *>(er + u * LPB * STK_GB);
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
    for (int q2 = 0; q2 < NSET; q2++) {
        const int r = pr + q2 * PR;
        if (r < LPB) {
#pragma unroll
            for (int g = 0; g < STK_GB; g++) {
                part[(r * STK_GB + g) * D + 2 * dp] = p[q2][g][0];
                part[(r * STK_GB + g) * D + 2 * dp + 1] = p[q2][g][1];
            }
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
    (void)aa;
#endif
}

/* 1 where the lab variant serves this shape: sm_90a code, head_dim 32, 64 or 128 (a divisor of the
 * block: one dimension a thread in the o strips), a cluster size of 2..16, shared memory in range */
static inline int ats_ok(int d, int64_t n_ctx, int cs) {
    if (!fp4_cu_sm90_code() || (d != 32 && d != 64 && d != 128) ||
        (cs != 2 && cs != 4 && cs != 8 && cs != 16))
        return 0;
    return ats_layout_of(n_ctx, d, cs).bytes <= ATS_MAX_SMEM;
}

/* the launch attributes of a kernel (cluster size, shared memory) */
static inline cudaError_t ats_attrs(void (*k)(ats_args), int cs, size_t smem) {
    if (cs > 8) {
        const cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
        if (e != cudaSuccess) return e;
    }
    return cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
}

/* clusters of CS resident at once (cudaOccupancyMaxActiveClusters, 0 if none or on error) and
 * blocks per SM (cudaOccupancyMaxActiveBlocksPerMultiprocessor) */
template <int CS, int D, bool PF, bool EV, bool TMA> static int ats_fit_t(int64_t n_ctx, int *bps) {
    const size_t smem = ats_layout_of(n_ctx, D, CS).bytes;
    void (*k)(ats_args) = ats_kernel<CS, D, PF, EV, TMA>;
    *bps = 0;
    if (ats_attrs(k, CS, smem) != cudaSuccess) return (void)cudaGetLastError(), 0;
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

template <int CS, int D, bool PF, bool EV, bool TMA>
static fp4_status ats_launch_t(ats_args aa, int64_t groups, cudaStream_t s) {
    const size_t smem = ats_layout_of(ats_lay_ctx(aa), D, CS).bytes;
    void (*k)(ats_args) = ats_kernel<CS, D, PF, EV, TMA>;
    FP4_CUDA_CHECK(ats_attrs(k, CS, smem));
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
        if (cudaLaunchKernelEx(&cfg, k, aa) == cudaSuccess) return FP4_OK;
        (void)cudaGetLastError();
        cfg.numAttrs = 1;
    }
    FP4_CUDA_CHECK(cudaLaunchKernelEx(&cfg, k, aa));
    return FP4_OK;
}

/* the dispatch of the lab's instances (CS, D, PF, EV, TMA): clusters of 16 and 8 at D 128 (the lab's
 * shape), 16 with the prefetch, 16 without the early V rows, 16 by TMA; D 64 compiled for the
 * resource report */
#define ATS_CASES(X)                                                                                         \
    X(16, 128, false, true, false)                                                                           \
    X(16, 128, true, true, false)                                                                            \
    X(8, 128, false, true, false)                                                                            \
    X(16, 128, false, false, false)                                                                          \
    X(16, 128, false, true, true) X(16, 64, false, true, false) X(8, 64, false, true, false)

/* the lab's variant flags */
enum { ATS_PF = 1, ATS_EV = 2, ATS_TMA = 4 };

static inline int ats_fit(int cs, int d, int fl, int64_t n_ctx, int *bps) {
#define ATS_FIT(CS, DD, PF, EV, TMA)                                                                         \
    if (cs == CS && d == DD && fl == ((PF ? ATS_PF : 0) | (EV ? ATS_EV : 0) | (TMA ? ATS_TMA : 0)))          \
        return ats_fit_t<CS, DD, PF, EV, TMA>(n_ctx, bps);
    ATS_CASES(ATS_FIT)
#undef ATS_FIT
    *bps = 0;
    return 0;
}

static inline fp4_status ats_attention(ats_args aa, int64_t n, int cs, int fl, cudaStream_t s) {
    if (!ats_ok(aa.a.d, ats_lay_ctx(aa), cs) || ats_lay_ctx(aa) > aa.a.n_ctx) return FP4_ERR_UNSUPPORTED;
    const int64_t groups = stk_att_groups(n, aa.a.nh, aa.a.nkv);
#define ATS_GO(CS, DD, PF, EV, TMA)                                                                          \
    if (cs == CS && aa.a.d == DD && fl == ((PF ? ATS_PF : 0) | (EV ? ATS_EV : 0) | (TMA ? ATS_TMA : 0)))     \
        return ats_launch_t<CS, DD, PF, EV, TMA>(aa, groups, s);
    ATS_CASES(ATS_GO)
#undef ATS_GO
    return FP4_ERR_UNSUPPORTED;
}

#endif
