/* a16_stream.cuh — the 1-column A16 item kernel (round 8, issue 10 item 1; the exact route at one
 * column, a16_exact.cu): exact (SPEC §4, bit-identical to fp4_nvfp4_matvec_a16_exact) and native
 * (SPEC §6, the int16 dp2a arithmetic of native_dp2a.cuh; in the lab only). Included by the routes
 * and by the kernel lab (dev/cuda/lab_stream.cu; round 8's first, 8-lanes-per-item stream kernel
 * is dev/cuda/lab_stream_kernel.cuh). Never installed.
 *
 * The weights as one stream of items. With payload_stride = nsb*128 and scale_stride = nsb*16
 * (the upload's layout), item i = (row i / nsb, super-block i % nsb) is payload bytes
 * [128 i, 128 i + 128) and scale bytes [16 i, 16 i + 16): a run of whole rows is one contiguous
 * range of both. The grid has a few blocks per SM (persistent: every block is resident); block b
 * owns rows [b n / G, (b + 1) n / G) and streams its items through NST shared-memory stages, each
 * filled by two cp.async.bulk copies (payload, scales) that complete on the stage's mbarrier — the
 * copy engine keeps the stages' bytes in flight per block at no register cost. Thread 0 refills a
 * stage once every warp has passed the stage's barrier. The kernel is launched with PDL and
 * requests its first stages before it waits for the activation pass. QIN (session 7): no
 * separate pass — every block quantizes the f32 input itself (act_warp.cuh, the pass's own
 * operations, so the same bytes) after it waits for the input's producer; one launch and one
 * grid-to-grid dependency fewer per projection (fp4_cu_qin_on, FP4LANE_CUDA_NO_QIN).
 */
#ifndef FP4_CUDA_A16_STREAM_CUH
#define FP4_CUDA_A16_STREAM_CUH

#include "a16_dp4a.cuh"
#include "act_warp.cuh"
#include "a16_team.cuh" /* fp4_cu_launch_pdl */
#include "native_dp2a.cuh"

/* ---- mbarrier and bulk-copy primitives (sm_90) ------------------------------------------------ */
static __device__ __forceinline__ unsigned fp4_smem_u32(const void *p) {
    return (unsigned)__cvta_generic_to_shared(p);
}
static __device__ __forceinline__ void fp4_mbar_init(uint64_t *bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(fp4_smem_u32(bar)), "r"(count) : "memory");
}
static __device__ __forceinline__ void fp4_mbar_fence_init() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= FP4_CU_CC_HOPPER
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}
static __device__ __forceinline__ void fp4_mbar_expect_tx(uint64_t *bar, unsigned bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= FP4_CU_CC_HOPPER
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(fp4_smem_u32(bar)), "r"(bytes)
                 : "memory");
#endif
}
static __device__ __forceinline__ void fp4_bulk_g2s(void *dst, const void *src, unsigned bytes,
                                                    uint64_t *bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= FP4_CU_CC_HOPPER
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(fp4_smem_u32(dst)), "l"(src), "r"(bytes), "r"(fp4_smem_u32(bar))
                 : "memory");
#endif
}
/* orders this thread's view of shared memory (the generic proxy) before later bulk copies into it */
static __device__ __forceinline__ void fp4_fence_proxy_async() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= FP4_CU_CC_HOPPER
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}
static __device__ __forceinline__ void fp4_mbar_wait(uint64_t *bar, unsigned parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= FP4_CU_CC_HOPPER
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "FP4_MBAR_WAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 "@!p bra FP4_MBAR_WAIT;\n"
                 "}\n" ::"r"(fp4_smem_u32(bar)),
                 "r"(parity)
                 : "memory");
#endif
}


/* 1 when the 1-column item kernel quantizes its own input for w (QIN): rows of at most
 * QIN_MAX_NSB super-blocks (4 096 values), and FP4LANE_CUDA_NO_QIN unset or "0" (else the separate
 * activation pass runs before the item kernel, the form before session 7; the bytes are the same).
 * Longer rows keep the separate pass: every block quantizes the whole row, and at 14 336 values
 * (down) that took longer than the pass it replaces (CLAIMS qin-1). The variable is read at every
 * call (env.h), so that fp4lane bench can pair the two forms in one process (a decode step's graph
 * keeps the form it was captured with). */
#define QIN_MAX_NSB 16
static inline int fp4_cu_qin_on(const fp4_cuda_tensor *w) {
    return w->k_pad / 256 <= QIN_MAX_NSB && !fp4_cu_env_no_qin();
}

/* 1 when the current device runs the sm_90a code with cp.async.bulk and mbarrier transaction
 * counts (fp4_cu_sm90_code); the kernel's PTX for older targets has no copies and must never run. */
static inline int stream_device_ok(void) {
    return fp4_cu_sm90_code();
}

/* The dynamic shared memory a launch asks for: at least what it uses, and enough that no more than
 * bps blocks fit on one SM (228 KB per SM, 1 KB reserved per block). Without it, blocks launched
 * with PDL beside the activation pass doubled up on some SMs and left others idle (bench/gpu.md Round 8).
 * resv: bytes of the SM left free besides, so that a block of the kernel before (an RMSNorm, the
 * attention cluster, SwiGLU) can stay resident beside one of ours and our blocks start streaming
 * while it runs (PDL); resv < 228 KB / (bps + 1) keeps bps + 1 of ours from fitting. */
static inline size_t stream_slot(int bps, size_t resv = 0) { /* the most one of bps blocks per SM may use */
    const size_t slot = ((size_t)228 * 1024 - resv) / (size_t)bps - 1024, cap = (size_t)227 * 1024;
    return slot < cap ? slot : cap;
}
static inline size_t stream_smem_request(size_t need, int bps, size_t resv = 0) {
    const size_t want = stream_slot(bps, resv);
    return need > want ? need : want;
}

/* FP4LANE_CUDA_DECODE's bits (env.h; read at every projection call, so fp4lane bench pairs them in
 * one process): variants of the 1-column item kernel for issue 32 item 1, timed against each other
 * on the device before one becomes the default. None changes an output bit: the kernel, its grid and
 * every lane's item order stay (exact's integer totals and native's per-item rotation are order-free
 * across shapes, a16_item_kernel). */
#define DEC_RESV 1u   /* leave DEC_RESV_BYTES of each SM to the kernel before (stream_slot's resv) */
#define DEC_NSHAPE 2u /* native QIN takes exact's three shapes (launch_item_qin) */
#define DEC_REL 4u    /* stages released by the last warp done with them, no block barrier a stage */
#define DEC_DOWN2 8u  /* rows too long for QIN (down): 8 warps, 2 stages, 2 blocks per SM */
#define DEC_WIDE 16u  /* QIN between 4 096 and 16 384 rows (q/k/v): 16 warps, 2 stages */
#define DEC_ONARROW 32u /* QIN up to 4 096 rows (o): 8 warps, 3 stages (fits beside the attention) */
#define DEC_RESV_BYTES ((size_t)48 * 1024) /* beside the attention cluster at n_ctx 4 096 (43 KB) */
#define DEC_DEFAULT 0u /* what runs when neither the variable nor the engine names bits */
/* the bits for w: the variable now where set, else the engine's (create.cu puts them in w->flags),
 * else DEC_DEFAULT */
static inline unsigned item_dec(const fp4_cuda_tensor *w) {
    const int now = fp4_cu_env_decode();
    if (now >= 0) return (unsigned)now;
    return w->flags & FP4_CU_DEC_SET ? w->flags >> FP4_CU_DEC_SHIFT & 0xFFu : DEC_DEFAULT;
}


/* ---- a16_item_kernel: one item per lane ------------------------------------------------------
 * The same stream (persistent blocks, NST stages of cp.async.bulk into shared memory, PDL), but
 * each lane owns a whole item (one row's super-block, 256 weights) per stage: the int64 total
 * (exact) or the f32 sum (native) of its 16 groups stays in the lane, so the per-item work of the
 * 8-lane kernel — three int64 shuffle rounds, the epilogue on 8 lanes, the addressing of 8
 * lanes — is paid once per 256 weights instead of once per 32. A stage holds IPS = NW * 32 items.
 * Lane l walks its 8 chunks in the order c = (j + l) & 7 (j = 0..7), so the 8 lanes of a
 * shared-memory phase read 8 different bank groups of their (consecutive) items; its 16 scale
 * bytes are rotated by the same amount once, so chunk step j takes halfword j. The activations
 * of super-block sb sit at sb * ASTR with ASTR = 256 + 16 (exact) or 512 + 16 (native): with
 * consecutive super-blocks on consecutive lanes the rotated reads are conflict-free too.
 * TAB (round 9): where the PRMT lookup words come from. 0: fp4_pin'd constants — the empty asm
 * pins them for NVVM only; ptxas sees plain constants, keeps them in uniform registers and copies
 * one into a vector register before nearly every PRMT (~100 IMAD.U32 per exact item, round 8's
 * SASS). 1: thread 0 writes them to shared memory beside the mbarriers and every thread reads
 * them back once with a volatile ld.shared, so ptxas sees values it cannot rematerialize and keeps
 * them in vector registers for the whole kernel; where NST is not a power of two the stage index and
 * its phase are running counters. The arithmetic is the same in both. */
template <bool EXACT, int NW, int NST> struct item_smem {
    static constexpr int IPS = NW * 32;
    static constexpr size_t stage = (size_t)IPS * 144;
    static constexpr int ASTR = EXACT ? 272 : 528;
    static __host__ __device__ size_t act(int nsb) { return (size_t)nsb * ASTR; }
    static __host__ __device__ size_t bytes(int nsb, int64_t rows_max) {
        return 128 + NST * stage + act(nsb) + (size_t)nsb * 4 + (size_t)rows_max * (nsb + 1) * 4;
    }
};

/* 8 halfwords h[0..7] (h[k] in w[k >> 1], low half first) rotated so that halfword j of the
 * result is h[(j + rot) & 7], rot = 0..7 */
static __device__ __forceinline__ void fp4_rot_h8(uint32_t w[4], int rot) {
    uint32_t t[4];
    const bool r2 = rot & 4, r1 = rot & 2;
#pragma unroll
    for (int i = 0; i < 4; i++) t[i] = r2 ? w[(i + 2) & 3] : w[i];
#pragma unroll
    for (int i = 0; i < 4; i++) w[i] = r1 ? t[(i + 1) & 3] : t[i];
    const unsigned sh = (rot & 1) * 16u;
#pragma unroll
    for (int i = 0; i < 4; i++) t[i] = __funnelshift_r(w[i], w[(i + 1) & 3], sh);
#pragma unroll
    for (int i = 0; i < 4; i++) w[i] = t[i];
}

/* a 32-bit word of shared memory the compiler cannot see through (a16_item_kernel, TAB 1) */
static __device__ __forceinline__ uint32_t fp4_lds_opaque(const void *p) {
    uint32_t v;
    asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(fp4_smem_u32(p)) : "memory");
    return v;
}

template <bool EXACT, int NW, int NST, int TAB = 0, bool QIN = false>
static __global__ __launch_bounds__(NW * 32, 1) void a16_item_kernel(
    const uint8_t *__restrict__ payload, const uint8_t *__restrict__ scales, int64_t n_out, int nsb,
    uint64_t magic, float scale2, const void *__restrict__ xq_v, const float *__restrict__ xd,
    float *__restrict__ y, int64_t n_in, int rel) {
    using L = item_smem<EXACT, NW, NST>;
    constexpr int NT = NW * 32, IPS = L::IPS, ASTR = L::ASTR;
    extern __shared__ __align__(128) uint8_t sm[];
    uint64_t *bar = reinterpret_cast<uint64_t *>(sm);
    uint8_t *stg = sm + 128;
    uint8_t *act = stg + NST * L::stage;
    float *dsm = reinterpret_cast<float *>(act + L::act(nsb));
    float *cbuf = dsm + nsb;
    const int tid = threadIdx.x;
    const int64_t G = gridDim.x, b = blockIdx.x;
    const int64_t row_begin = b * n_out / G, row_end = (b + 1) * n_out / G;
    /* the lane's chunk rotation: the low bits of its item's index in the whole matrix (a stage
     * starts at a multiple of IPS, a multiple of 32), so a native lane's sum order depends on the
     * item, never on the grid (session 11; tid & 7 before, the same where nsb is a multiple of 8) */
    const int rot = (int)(((uint64_t)row_begin * (uint64_t)nsb + (uint64_t)tid) & 7u);
    const int nrows = (int)(row_end - row_begin);
    const int n_items = nrows * nsb;
    const int nit = (n_items + IPS - 1) / IPS;
    const uint8_t *gp = payload + row_begin * nsb * 128;
    const uint8_t *gs = scales + row_begin * nsb * 16;

    auto issue = [&](int it) {
        const int s = it % NST, base = it * IPS;
        const int cnt = n_items - base < IPS ? n_items - base : IPS;
        uint8_t *dst = stg + s * L::stage;
        fp4_mbar_expect_tx(&bar[s], (unsigned)cnt * 144u);
        fp4_bulk_g2s(dst, gp + (int64_t)base * 128, (unsigned)cnt * 128u, &bar[s]);
        fp4_bulk_g2s(dst + IPS * 128, gs + (int64_t)base * 16, (unsigned)cnt * 16u, &bar[s]);
    };
    uint32_t *tab = reinterpret_cast<uint32_t *>(sm + 64); /* TAB 1: the lookup words (NST <= 8) */
    unsigned *tick = reinterpret_cast<unsigned *>(sm + 96); /* rel: warps done with each stage (NST <= 8) */
    if (tid == 0) {
        for (int s = 0; s < NST; s++) fp4_mbar_init(&bar[s], 1);
        for (int s = 0; s < NST; s++) tick[s] = 0u;
        fp4_mbar_fence_init();
        if (TAB) {
            tab[0] = 0x03020100u;
            tab[1] = 0x0C080604u;
            tab[2] = 0xFDFEFF00u;
            tab[3] = 0xF4F8FAFCu;
        }
    }
    __syncthreads();
    if (tid == 0)
        for (int it = 0; it < NST && it < nit; it++) issue(it);
    fp4_pdl_wait(); /* launched with PDL after the activation pass (or, QIN, the producer of x) */
    if constexpr (QIN) {
        /* the activation pass in every block (act_warp.cuh, the same operations as q8k.cu and
         * act16_kernel): warp w quantizes super-blocks w, w + NW, ... of the f32 input x = xq_v
         * straight into the stage layout, its QU super-blocks' loads issued before any is used */
        constexpr int QU = 8;
        const float *x = reinterpret_cast<const float *>(xq_v);
        const int warp = tid >> 5, lane = tid & 31;
        for (int sb0 = warp; sb0 < nsb; sb0 += NW * QU) {
            float v[QU][8];
#pragma unroll
            for (int u = 0; u < QU; u++) {
                const int sb = sb0 + u * NW;
                if (sb < nsb) fp4_act_load8(x, n_in, sb, lane, v[u]);
            }
#pragma unroll
            for (int u = 0; u < QU; u++) {
                const int sb = sb0 + u * NW;
                if (sb >= nsb) break; /* warp-uniform */
                float dq;
                if constexpr (EXACT) {
                    uint32_t lo, hi;
                    int bsum;
                    dq = fp4_q8k_warp(v[u], lane, &lo, &hi, &bsum);
                    *reinterpret_cast<uint2 *>(act + sb * ASTR + lane * 8) = make_uint2(lo, hi);
                } else {
                    uint4 packed;
                    dq = fp4_act16_warp(v[u], &packed);
                    *reinterpret_cast<uint4 *>(act + sb * ASTR + lane * 16) = packed;
                }
                if (lane == 0) dsm[sb] = dq;
            }
        }
    } else {
        constexpr int CPS = EXACT ? 16 : 32; /* 16-byte chunks per super-block */
        const uint4 *src = reinterpret_cast<const uint4 *>(xq_v);
        for (int i = tid; i < nsb * CPS; i += NT)
            *reinterpret_cast<uint4 *>(act + (i / CPS) * ASTR + (i % CPS) * 16) = __ldg(src + i);
        for (int i = tid; i < nsb; i += NT) dsm[i] = __ldg(xd + i);
    }
    __syncthreads();

    static_assert(NST <= 8 && (TAB == 0 || TAB == 1), "a16_item_kernel: NST, TAB");
    uint32_t L0, L1;
    fp4_q1_luts QL;
    if (TAB) {
        L0 = fp4_lds_opaque(tab);
        L1 = fp4_lds_opaque(tab + 1);
        QL = EXACT ? fp4_q1_luts{0u, 0u, 0u, 0u}
                   : fp4_q1_luts{L0, L1, fp4_lds_opaque(tab + 2), fp4_lds_opaque(tab + 3)};
    } else {
        L0 = fp4_pin(0x03020100u);
        L1 = fp4_pin(0x0C080604u);
        QL = EXACT ? fp4_q1_luts{0u, 0u, 0u, 0u} : fp4_q1_luts_make();
    }
    /* TAB 1 and NST not a power of two: the stage and its phase as running counters (it % 3 and
     * it / 3 cost an IMAD.HI pair and more per stage: CLAIMS kern9-1) */
    constexpr bool RUN = TAB && (NST & (NST - 1));
    int s_run = 0;
    unsigned ph_run = 0;
    for (int it = 0; it < nit; it++) {
        const int s = RUN ? s_run : it % NST, base = it * IPS;
        const int cnt = n_items - base < IPS ? n_items - base : IPS;
        fp4_mbar_wait(&bar[s], RUN ? ph_run : (unsigned)(it / NST) & 1u);
        if (RUN && ++s_run == NST) {
            s_run = 0;
            ph_run ^= 1u;
        }
        const uint8_t *wp = stg + s * L::stage + tid * 128;
        const uint32_t li = (uint32_t)(base + tid);
        const uint32_t lr = (uint32_t)(((uint64_t)li * magic) >> 32); /* li / nsb, exact here */
        const int sbi = (int)(li - lr * (uint32_t)nsb);
        const uint4 s16 = *reinterpret_cast<const uint4 *>(stg + s * L::stage + IPS * 128 + tid * 16);
        uint32_t rs[4] = {s16.x, s16.y, s16.z, s16.w};
        fp4_rot_h8(rs, rot);
        const uint8_t *ap = act + sbi * ASTR;
        const float dv = dsm[sbi];
        long long tot = 0;
        float facc = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int c = (j + rot) & 7;
            const uint4 wv = *reinterpret_cast<const uint4 *>(wp + c * 16);
            const uint32_t sc = rs[j >> 1] >> (16 * (j & 1));
            if constexpr (EXACT) {
                const uint4 a0 = *reinterpret_cast<const uint4 *>(ap + c * 32);
                const uint4 a1 = *reinterpret_cast<const uint4 *>(ap + c * 32 + 16);
                const int da = a16_dot_split::dot(wv.x, wv.y, a0, L0, L1);
                const int db = a16_dot_split::dot(wv.z, wv.w, a1, L0, L1);
                int qa, qb;
                q9_pair(sc, &qa, &qb);
                tot += (long long)da * qa;
                tot += (long long)db * qb;
            } else {
                uint4 av[4];
#pragma unroll
                for (int k = 0; k < 4; k++) av[k] = *reinterpret_cast<const uint4 *>(ap + c * 64 + k * 16);
                uint32_t q1[8];
                dp2a_decode16(wv, QL, q1);
                const uint32_t h2 = fp4_e4m3x2_to_h2(sc);
                const __half2 hh = *reinterpret_cast<const __half2 *>(&h2);
                const float s0 = __low2float(hh), s1 = __high2float(hh);
                int d0, d1;
                dp2a_dot32(q1, av[0], av[1], av[2], av[3], d0, d1);
                facc = __fmaf_rn((float)d0, s0, __fmaf_rn((float)d1, s1, facc));
            }
        }
        float cv;
        if constexpr (EXACT) cv = dv != 0.0f ? fp4_cu_a16_term(__ll2float_rn(tot), dv, scale2) : 0.0f;
        else cv = __fmul_rn(facc, dv);
        if (tid < cnt) cbuf[li + lr] = cv; /* row lr, column sbi of stride nsb + 1 */
        if (rel) {
            /* the warp's reads of stage s are done (cv used them all); the last of the NW warps to
             * arrive (a running count: use it / NST + 1 of stage s) refills it, the others go on */
            __syncwarp();
            if ((tid & 31) == 0) {
                __threadfence_block();
                const unsigned done = atomicAdd(&tick[s], 1u) + 1u;
                if (done == (unsigned)(it / NST + 1) * NW && it + NST < nit) {
                    __threadfence_block(); /* every warp's reads before the copy engine's writes */
                    fp4_fence_proxy_async();
                    issue(it + NST);
                }
            }
        } else {
            __syncthreads(); /* every warp is done with stage s */
            if (tid == 0 && it + NST < nit) issue(it + NST);
        }
    }
    if (rel) __syncthreads(); /* every warp's cbuf terms */
    for (int r = tid; r < nrows; r += NT) {
        const float *c = cbuf + (size_t)r * (nsb + 1);
        float acc = 0.0f;
        for (int k = 0; k < nsb; k++) acc = __fmaf_rn(1.0f, c[k], acc);
        y[row_begin + r] = EXACT ? fp4_round_f16_dev(acc) : __fmul_rn(acc, __fmul_rn(0.5f, scale2));
    }
}

/* The grid of a stream launch (L: the kernel's shared-memory layout, L::bytes(nsb, rows_max); ips:
 * items per stage): fewer blocks per SM while bps blocks' shared memory would not fit, then more
 * blocks (in waves) while one block's per-item values would not fit. FP4_ERR_UNSUPPORTED when the
 * layout is not the item stream, the block's shared memory cannot fit, or (one_wave) the grid would
 * need more than one block per SM slot. */
struct stream_plan {
    int64_t nsb, G;
    size_t smem_request; /* what the launch asks for (stream_smem_request) */
    uint64_t magic;      /* item -> (row, super-block) by multiplication */
};
constexpr size_t STREAM_SMEM_MAX = 227 * 1024;
template <class L>
static fp4_status stream_plan_make(const fp4_cuda_tensor *w, const void *q, int64_t ips, int bps,
                                   int one_wave, stream_plan *p, size_t resv = 0) {
    const int64_t nsb = w->k_pad / 256;
    if (!stream_device_ok() || nsb < 1 || nsb > 256 || w->payload_stride != nsb * 128 ||
        w->scale_stride != nsb * 16 || !fp4_aligned16(w->d_scales) || !fp4_aligned16(q))
        return FP4_ERR_UNSUPPORTED;
    int sms = fp4_cu_sm_count();
    if (sms <= 0) sms = 132;
    while (bps > 1 &&
           L::bytes((int)nsb, (w->n_out + (int64_t)sms * bps - 1) / ((int64_t)sms * bps)) >
               stream_slot(bps, resv))
        bps--;
    int64_t G = (int64_t)sms * bps;
    if (G > w->n_out) G = w->n_out;
    if (L::bytes((int)nsb, 1) <= stream_slot(bps, resv))
        while (L::bytes((int)nsb, (w->n_out + G - 1) / G) > stream_slot(bps, resv) && G < w->n_out) G += sms;
    if (one_wave && G > (int64_t)sms * bps) return FP4_ERR_UNSUPPORTED;
    const int64_t rows_max = (w->n_out + G - 1) / G;
    const size_t smem = L::bytes((int)nsb, rows_max);
    if (smem > STREAM_SMEM_MAX || rows_max * nsb + ips >= ((int64_t)1 << 32) / 256)
        return FP4_ERR_UNSUPPORTED;
    p->nsb = nsb;
    p->G = G;
    p->smem_request = stream_smem_request(smem, bps, resv);
    p->magic = (((uint64_t)1 << 32) + (uint64_t)nsb - 1) / (uint64_t)nsb;
    return FP4_OK;
}

/* one_wave: FP4_ERR_UNSUPPORTED rather than a grid of more than one block per SM slot (the native
 * route: a second wave was slower, bench/gpu.md Round 8) */
template <bool EXACT, int NW, int NST, int TAB = 0, bool QIN = false>
static fp4_status launch_item(const fp4_cuda_tensor *w, const void *q, const float *d, float *y, int bps,
                              int pdl, cudaStream_t s, int one_wave = 0) {
    const unsigned dec = item_dec(w);
    stream_plan p;
    const fp4_status st = stream_plan_make<item_smem<EXACT, NW, NST>>(w, q, NW * 32, bps, one_wave, &p,
                                                                      dec & DEC_RESV ? DEC_RESV_BYTES : 0);
    if (st != FP4_OK) return st;
    static int opted_in[FP4_CU_MAX_DEVICES];
    FP4_CU_TRY(fp4_cu_smem_opt_in((const void *)a16_item_kernel<EXACT, NW, NST, TAB, QIN>, STREAM_SMEM_MAX,
                                  opted_in));
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)p.G);
    cfg.blockDim = dim3(NW * 32);
    cfg.dynamicSmemBytes = p.smem_request;
    cfg.stream = s;
    return fp4_cu_launch_pdl(cfg, pdl, a16_item_kernel<EXACT, NW, NST, TAB, QIN>, w->d_payload, w->d_scales,
                             w->n_out, (int)p.nsb, p.magic, w->scale2, q, d, y, w->n_in,
                             (int)(dec & DEC_REL ? 1 : 0));
}

/* The 1-column QIN launch of both routes (a16_exact.cu, a16_native.cu). Exact: its shape by the row
 * count, the fastest of the QIN forms at each (CLAIMS qin-1): 16 384 rows and more (gate/up) two
 * blocks per SM of 8 warps with 2 stages; 4 096 rows and fewer (o) one block of 16 warps with 2
 * stages; between (q/k/v, 6 144 rows) 8 warps, 3 stages, one block per SM. Exact's integer totals
 * do not depend on the shape, and native's f32 sums do not either (a16_item_kernel's rot follows
 * the item's index in the matrix, not its place in the block's stream). Native keeps 8 warps and 3
 * stages everywhere: exact's shapes were faster alone but made the decode step slower
 * (bench/gpu.md "Session 11"). */
template <bool EXACT>
static fp4_status launch_item_qin(const fp4_cuda_tensor *w, const float *x, float *y, cudaStream_t s,
                                  int one_wave) {
    const unsigned dec = item_dec(w);
    enum { S83, S82, S162 } shape = S83; /* warps, stages (S82: 2 blocks per SM) */
    if (EXACT || (dec & DEC_NSHAPE)) shape = w->n_out >= 16384 ? S82 : w->n_out <= 4096 ? S162 : S83;
    if ((dec & DEC_WIDE) && w->n_out > 4096 && w->n_out < 16384) shape = S162;
    if ((dec & DEC_ONARROW) && w->n_out <= 4096) shape = S83;
    if (shape == S82) return launch_item<EXACT, 8, 2, 1, true>(w, x, NULL, y, 2, 1, s, one_wave);
    if (shape == S162) return launch_item<EXACT, 16, 2, 1, true>(w, x, NULL, y, 1, 1, s, one_wave);
    return launch_item<EXACT, 8, 3, 1, true>(w, x, NULL, y, 1, 1, s, one_wave);
}

#endif /* FP4_CUDA_A16_STREAM_CUH */
