/* a16_team.cuh — the 1-column A16 "row team" kernel, included by a16_exact.cu and the kernel lab.
 * The kernel is a template over its arithmetic M: team_exact below (SPEC §4, the route's); the lab
 * adds native (SPEC §6, dev/cuda/lab_team.cu), which was slower than the dp2a kernel in native
 * mode. Never installed.
 *
 * Why: the dp4a / dp2a kernels give one warp 2 rows of the whole K, so a 4096-row matrix makes
 * 2048 warps (15.5 per SM) that each wait for one 1 KB pass at a time: the 4096-row shapes ran at
 * 40-48 % of the read ceiling, latency-bound. Here a block of NW warps shares G row groups of R
 * rows: the rows' super-blocks are cut into tasks (one task = R rows x 4 super-blocks, 8 lanes
 * per super-block, 16 payload bytes per lane and row, as the dp4a kernel) dealt round-robin to
 * the warps; each warp keeps the next task's loads in flight while it computes the current one
 * (two register stages, written out as a ping-pong so no registers are copied), and the weights of
 * the first task are requested before the kernel waits for the activation pass (programmatic
 * dependent launch: the activation pass triggers its dependents at its start, so this grid is
 * resident and streaming weights while that pass runs).
 *
 * Per task and row, every lane's 32 weights give (team_exact): the integer group dots (sign-split
 * dp4a against the Q8_K int8 values, a16_dot_split) weighted by e4m3fn_q9 into an int64, summed
 * over the super-block's 8 lanes (order-free: integers), then the pinned f32 term
 * c = fp4_cu_a16_term(total, d, scale2) (0 where the super-block's d is 0, as the oracle skips it).
 * The per-super-block values go to shared memory; after one barrier, thread i of the block runs
 * row i's chain over the super-blocks in index order: acc = fma(1, c, acc) then the F16 boundary
 * (bit-identical to the CPU oracle: the same terms in the same order). Deterministic, no atomics.
 *
 * team_plan() picks G and NW from the super-block count: about `tasks` tasks per block (G row
 * groups when a row has fewer), at most 8 warps, tasks spread evenly. Shared memory: G*R rows of
 * (nsb | 1) floats; the launcher refuses (falls back) above TEAM_SMEM_MAX. */
#ifndef FP4_CUDA_A16_TEAM_CUH
#define FP4_CUDA_A16_TEAM_CUH

#include "a16_dp4a.cuh"
#include "native_dp2a.cuh"

#define TEAM_SMEM_MAX (48 * 1024)

/* One stage of a warp's pipeline: its task's place, R rows' payload chunk and scale pair, the
 * activations. */
template <class M, int R> struct team_stage {
    static constexpr int AV = M::AV;         /* 16-byte activation words per lane */
    int g, sb;                               /* row group, super-block of this lane */
    bool ok;                                 /* a real task and super-block */
    uint4 w[R];
    uint32_t s[R];
    uint4 a[AV];
    float d;
};

struct team_args {
    const uint8_t *payload, *scales;
    int64_t pstride, sstride, n_out, k_pad;
    int nsb, P, G;
    const void *xq;
    const float *xd;
};

/* A warp's walk over its tasks t = warp, warp + nw, ...: row group g = t / P, pass p = t % P,
 * advanced without a division. */
struct team_iter {
    int t, g, p;
    __device__ __forceinline__ void advance(int nw, int P) {
        t += nw;
        p += nw;
        while (p >= P) {
            p -= P;
            g++;
        }
    }
};

/* 16 bytes of weights, read once: through L1 without allocating (LDP 1), or __ldg (LDP 0). */
template <int LDP> static __device__ __forceinline__ uint4 team_ldw(const uint8_t *p) {
    if constexpr (LDP == 1) {
        uint4 v;
        asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
            : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
            : "l"(p));
        return v;
    } else {
        return fp4_ldg16(p);
    }
}

/* Issue task it's weight loads (scale pairs and payload chunks of its R rows) into st. Loads are
 * unconditional (no branches): a lane past the rows, the super-blocks or the tasks reads a clamped
 * address and its result is never written (st.ok, the row check of the chain). */
template <class M, int R, int LDP>
static __device__ __forceinline__ void team_load_w(const team_args &A, const team_iter &it, int T, int oct,
                                                   int sub, team_stage<M, R> &st) {
    st.g = it.g;
    st.sb = 4 * it.p + oct;
    st.ok = it.t < T && st.sb < A.nsb;
    const int64_t rb = (int64_t)blockIdx.x * A.G * R + (int64_t)it.g * R;
    const int sbc = st.sb < A.nsb ? st.sb : A.nsb - 1;
    const uint8_t *pp = A.payload + (int64_t)sbc * 128 + sub * 16;
    const uint8_t *sp = A.scales + (int64_t)sbc * 16 + sub * 2;
#pragma unroll
    for (int r = 0; r < R; r++) {
        const int64_t row = rb + r < A.n_out ? rb + r : A.n_out - 1;
        st.w[r] = team_ldw<LDP>(pp + row * A.pstride);
        st.s[r] = (uint32_t)__ldg(reinterpret_cast<const unsigned short *>(sp + row * A.sstride));
    }
}

template <class M, int R>
static __device__ __forceinline__ void team_load_a(const team_args &A, int sub, team_stage<M, R> &st) {
    constexpr int AV = team_stage<M, R>::AV;
    const int sbc = st.sb < A.nsb ? st.sb : A.nsb - 1; /* unconditional, as team_load_w */
    const uint8_t *xa = reinterpret_cast<const uint8_t *>(A.xq) + ((int64_t)sbc * 256 + sub * 32) * M::XB;
#pragma unroll
    for (int j = 0; j < AV; j++) st.a[j] = fp4_ldg16(xa + 16 * j);
    st.d = __ldg(A.xd + sbc);
}

/* Reduce-scatter of R values over the 8 lanes of an octet (R = 1, 2 or 4): lane sub ends with the
 * sum of row (sub % R) over the 8 lanes. Exact for integers (any order); for floats the order is
 * fixed by the lane, so the result is deterministic. */
template <typename V, int R> static __device__ __forceinline__ V team_reduce8(const V (&v)[R], int sub) {
    if constexpr (R == 1) {
        V k = v[0];
        k += __shfl_xor_sync(0xFFFFFFFFu, k, 1);
        k += __shfl_xor_sync(0xFFFFFFFFu, k, 2);
        return k + __shfl_xor_sync(0xFFFFFFFFu, k, 4);
    } else if constexpr (R == 2) {
        const bool b0 = sub & 1;
        V k = b0 ? v[1] : v[0];
        k += __shfl_xor_sync(0xFFFFFFFFu, b0 ? v[0] : v[1], 1);
        k += __shfl_xor_sync(0xFFFFFFFFu, k, 2);
        return k + __shfl_xor_sync(0xFFFFFFFFu, k, 4);
    } else {
        static_assert(R == 4, "team_reduce8: R = 1, 2 or 4");
        const bool b0 = sub & 1, b1 = (sub >> 1) & 1;
        V k0 = b0 ? v[1] : v[0], k1 = b0 ? v[3] : v[2];
        k0 += __shfl_xor_sync(0xFFFFFFFFu, b0 ? v[0] : v[1], 1); /* rows b0, b0 + 2 */
        k1 += __shfl_xor_sync(0xFFFFFFFFu, b0 ? v[2] : v[3], 1);
        V k = b1 ? k1 : k0;
        k += __shfl_xor_sync(0xFFFFFFFFu, b1 ? k0 : k1, 2); /* row b0 + 2 b1 */
        return k + __shfl_xor_sync(0xFFFFFFFFu, k, 4);
    }
}

/* The exact arithmetic (SPEC §4): per task and row, the integer group dots weighted by e4m3fn_q9
 * into an int64 (order-free), the pinned f32 term per super-block; the row's chain in super-block
 * order with fma(1, c, acc), then the F16 boundary. */
struct team_exact {
    static constexpr int AV = 2; /* 16-byte activation words per lane */
    static constexpr int XB = 1; /* activation bytes per value (Q8_K int8) */
    static constexpr int min_blocks(int r) { return r >= 4 ? 3 : 4; }
    static inline int nsb(const fp4_cuda_tensor *w) { return (int)(w->n_in / 256); }
    /* The task's per-super-block values of its R rows into cs (row stride cst). */
    template <int R>
    static __device__ __forceinline__ void compute(int sub, float scale2, const team_stage<team_exact, R> &st,
                                                   float *cs, int cst) {
        const uint32_t L0 = fp4_pin(0x03020100u), L1 = fp4_pin(0x0C080604u);
        long long part[R];
#pragma unroll
        for (int r = 0; r < R; r++) {
            int qa, qb;
            q9_pair(st.s[r], &qa, &qb);
            const int da = a16_dot_split::dot(st.w[r].x, st.w[r].y, st.a[0], L0, L1);
            const int db = a16_dot_split::dot(st.w[r].z, st.w[r].w, st.a[1], L0, L1);
            part[r] = (long long)da * qa + (long long)db * qb;
        }
        const long long tot = team_reduce8<long long, R>(part, sub); /* row sub % R */
        if (st.ok && sub < R) {
            const float c = st.d != 0.0f ? fp4_cu_a16_term(__ll2float_rn(tot), st.d, scale2) : 0.0f;
            cs[(st.g * R + sub) * cst + st.sb] = c;
        }
    }
    /* a row's output from its per-super-block values c */
    static __device__ __forceinline__ float finish(const float *c, int nsb, float scale2) {
        (void)scale2;
        float acc = 0.0f;
        for (int sb = 0; sb < nsb; sb++)
            acc = __fmaf_rn(1.0f, c[sb], acc); /* index order */
        return fp4_round_f16_dev(acc);
    }
};

/* 64 registers at R 2 (4 blocks of 256 threads per SM); R 4 needs more (M::min_blocks) */
template <class M, int R, int LDP>
static __global__ __launch_bounds__(256, M::min_blocks(R)) void a16_team_kernel(team_args A, float scale2,
                                                                                float *__restrict__ y) {
    extern __shared__ float team_cs[];
    fp4_pdl_trigger(); /* the step's next kernel (launched with PDL) waits for this grid */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const int oct = lane >> 3, sub = lane & 7;
    const int T = A.G * A.P, cst = A.nsb | 1;
    team_stage<M, R> s0, s1;
    team_iter it = {warp, warp / A.P, warp % A.P};
    team_load_w<M, R, LDP>(A, it, T, oct, sub, s0); /* weights do not depend on the activation pass */
    fp4_pdl_wait();
    team_load_a<M, R>(A, sub, s0);
    for (;;) { /* ping-pong: the next task's loads are issued before the current task is computed */
        if (it.t >= T) break;
        it.advance(nw, A.P);
        team_load_w<M, R, LDP>(A, it, T, oct, sub, s1);
        team_load_a<M, R>(A, sub, s1);
        M::template compute<R>(sub, scale2, s0, team_cs, cst);
        if (it.t >= T) break;
        it.advance(nw, A.P);
        team_load_w<M, R, LDP>(A, it, T, oct, sub, s0);
        team_load_a<M, R>(A, sub, s0);
        M::template compute<R>(sub, scale2, s1, team_cs, cst);
    }
    __syncthreads();
    const int i = threadIdx.x;
    const int64_t row = (int64_t)blockIdx.x * A.G * R + i;
    if (i < A.G * R && row < A.n_out) y[row] = M::finish(team_cs + i * cst, A.nsb, scale2);
}

/* Row groups and warps per block for nsb super-blocks, about `tasks` tasks per block. */
static inline void team_plan(int nsb, int tasks, int *G, int *nw) {
    const int P = (nsb + 3) / 4;
    const int g = P >= tasks ? 1 : (tasks + P - 1) / P;
    const int T = g * P, tpw = (T + 7) / 8;
    *G = g;
    *nw = (T + tpw - 1) / tpw;
}

template <int R> static inline size_t team_smem(int nsb, int tasks) {
    int G, nw;
    team_plan(nsb, tasks, &G, &nw);
    return (size_t)G * R * (size_t)(nsb | 1) * 4;
}

/* y (n_out) = W x for one column: xq / xd from M's activation pass (exact: Q8_K int8 in element
 * order), launched with programmatic stream serialization when pdl; LDP 1: the weights read with
 * L1::no_allocate. */
template <class M, int R, int LDP = 0>
static fp4_status launch_team(const fp4_cuda_tensor *w, const void *xq, const float *xd, float *y, int tasks,
                              int pdl, cudaStream_t s) {
    team_args A;
    A.payload = w->d_payload;
    A.scales = w->d_scales;
    A.pstride = w->payload_stride;
    A.sstride = w->scale_stride;
    A.n_out = w->n_out;
    A.k_pad = w->k_pad;
    A.nsb = M::nsb(w);
    A.P = (A.nsb + 3) / 4;
    int nw;
    team_plan(A.nsb, tasks, &A.G, &nw);
    A.xq = xq;
    A.xd = xd;
    const size_t smem = team_smem<R>(A.nsb, tasks);
    if (smem > TEAM_SMEM_MAX) return FP4_ERR_UNSUPPORTED;
    const int64_t rows = (int64_t)A.G * R;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)((w->n_out + rows - 1) / rows));
    cfg.blockDim = dim3((unsigned)(nw * 32));
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    return fp4_cu_launch_pdl(cfg, pdl, a16_team_kernel<M, R, LDP>, A, w->scale2, y);
}

#endif /* FP4_CUDA_A16_TEAM_CUH */
