/* lab_stream_kernel.cuh — round 8's first stream kernel (8 lanes per item; lab .50-.58, exact.60):
 * the same persistent blocks and cp.async.bulk stages as src/cuda/a16_stream.cuh's item kernel, with
 * the lane mapping of the dp4a kernel (lane `sub` owns the 16 payload bytes of groups 2 sub,
 * 2 sub + 1), the activations of the block's whole K in shared memory (copied once, after the
 * activation pass), 16-byte chunks permuted so the reads are conflict-free.
 *   exact: sign-split dp4a (a16_dot_split), int64 weighting by e4m3fn_q9, 8-lane int64 sum
 *          (order-free), the pinned term fp4_cu_a16_term per item into a per-item buffer; at the
 *          end one thread per row runs acc = fma(1, c, acc) over its super-blocks in index order,
 *          then the F16 boundary: the CPU's operations exactly.
 *   native: int16 activations, merged decode + dp2a, t = d0*s0 + d1*s1 per lane, * d, a fixed
 *          3-step butterfly over the 8 lanes, the per-row sum in super-block order, * 0.5 * scale2.
 * Bits correct, slower than the routes (bench/gpu.md round 8): no route runs it, so it lives here,
 * built only by dev/cuda/Makefile. */
#ifndef FP4_LAB_STREAM_KERNEL_CUH
#define FP4_LAB_STREAM_KERNEL_CUH

#include "cuda/a16_stream.cuh"

/* Shared-memory layout of one block (bytes), in this order: NST mbarriers (128 B), NST stages of
 * IPS*128 payload + IPS*16 scale bytes, the activations (nsb*256 int8 or int16), the steps
 * (nsb f32), the per-item values (rows_max rows of nsb + 1 f32: an odd stride, conflict-free
 * row chains). */
template <bool EXACT, int IPS, int NST> struct stream_smem {
    static constexpr size_t stage = (size_t)IPS * 144;
    static __host__ __device__ size_t act(int nsb) { return (size_t)nsb * 256 * (EXACT ? 1 : 2); }
    static __host__ __device__ size_t bytes(int nsb, int64_t rows_max) {
        return 128 + NST * stage + act(nsb) + (size_t)nsb * 4 + (size_t)rows_max * (nsb + 1) * 4;
    }
};

template <bool EXACT, int NW, int IPS, int NST>
static __global__ __launch_bounds__(NW * 32, 1) void a16_stream_kernel(
    const uint8_t *__restrict__ payload, const uint8_t *__restrict__ scales, int64_t n_out, int nsb,
    uint64_t magic, float scale2, const void *__restrict__ xq_v, const float *__restrict__ xd,
    float *__restrict__ y) {
    static_assert(IPS % (NW * 4) == 0, "IPS: whole warp rounds");
    using L = stream_smem<EXACT, IPS, NST>;
    constexpr int NT = NW * 32, ROUNDS = IPS / (NW * 4);
    extern __shared__ __align__(128) uint8_t sm[];
    uint64_t *bar = reinterpret_cast<uint64_t *>(sm);
    uint8_t *stg = sm + 128;
    uint8_t *act = stg + NST * L::stage;
    float *dsm = reinterpret_cast<float *>(act + L::act(nsb));
    float *cbuf = dsm + nsb;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, oct = lane >> 3, sub = lane & 7;
    const int64_t G = gridDim.x, b = blockIdx.x;
    const int64_t row_begin = b * n_out / G, row_end = (b + 1) * n_out / G;
    const int nrows = (int)(row_end - row_begin);
    const int n_items = nrows * nsb;
    const int nit = (n_items + IPS - 1) / IPS;
    const uint8_t *gp = payload + row_begin * nsb * 128;
    const uint8_t *gs = scales + row_begin * nsb * 16;

    auto issue = [&](int it) { /* thread 0: stage it % NST <- items [it*IPS, +cnt) */
        const int s = it % NST, base = it * IPS;
        const int cnt = n_items - base < IPS ? n_items - base : IPS;
        uint8_t *dst = stg + s * L::stage;
        fp4_mbar_expect_tx(&bar[s], (unsigned)cnt * 144u);
        fp4_bulk_g2s(dst, gp + (int64_t)base * 128, (unsigned)cnt * 128u, &bar[s]);
        fp4_bulk_g2s(dst + IPS * 128, gs + (int64_t)base * 16, (unsigned)cnt * 16u, &bar[s]);
    };
    if (tid == 0) {
        for (int s = 0; s < NST; s++) fp4_mbar_init(&bar[s], 1);
        fp4_mbar_fence_init();
    }
    __syncthreads();
    if (tid == 0)
        for (int it = 0; it < NST && it < nit; it++) issue(it);
    fp4_pdl_wait(); /* launched with PDL after the activation pass: its q and d from here on */
    {
        /* activations into shared memory, 16-byte chunks permuted per super-block: exact, chunk
         * c = 2 sub + h at h*8 + sub; native (64 B per lane), c = 4 sub + j at j*8 + sub */
        constexpr int CPS = EXACT ? 16 : 32; /* chunks per super-block */
        const uint4 *src = reinterpret_cast<const uint4 *>(xq_v);
        uint4 *dst = reinterpret_cast<uint4 *>(act);
        for (int i = tid; i < nsb * CPS; i += NT) {
            const int sbi = i / CPS, c = i % CPS;
            const int pos = EXACT ? (c & 1) * 8 + (c >> 1) : (c & 3) * 8 + (c >> 2);
            dst[sbi * CPS + pos] = __ldg(src + i);
        }
        for (int i = tid; i < nsb; i += NT) dsm[i] = __ldg(xd + i);
    }
    __syncthreads();

    const uint32_t L0 = fp4_pin(0x03020100u), L1 = fp4_pin(0x0C080604u);
    const fp4_q1_luts QL = EXACT ? fp4_q1_luts{0u, 0u, 0u, 0u} : fp4_q1_luts_make();
    for (int it = 0; it < nit; it++) {
        const int s = it % NST, base = it * IPS;
        const int cnt = n_items - base < IPS ? n_items - base : IPS;
        fp4_mbar_wait(&bar[s], (unsigned)(it / NST) & 1u);
        const uint8_t *sp = stg + s * L::stage;
        const uint8_t *ss = sp + IPS * 128;
#pragma unroll
        for (int j = 0; j < ROUNDS; j++) {
            const int slot = j * NW * 4 + warp * 4 + oct;
            const uint32_t li = (uint32_t)(base + slot);
            const uint32_t lr = (uint32_t)(((uint64_t)li * magic) >> 32); /* li / nsb, exact here */
            const int sbi = (int)(li - lr * (uint32_t)nsb);
            const uint4 wv = *reinterpret_cast<const uint4 *>(sp + slot * 128 + sub * 16);
            const uint32_t sc = *reinterpret_cast<const unsigned short *>(ss + slot * 16 + sub * 2);
            const float dv = dsm[sbi];
            float cv;
            if constexpr (EXACT) {
                const uint4 *ap = reinterpret_cast<const uint4 *>(act + sbi * 256);
                const uint4 a0 = ap[sub], a1 = ap[8 + sub];
                const int da = a16_dot_split::dot(wv.x, wv.y, a0, L0, L1);
                const int db = a16_dot_split::dot(wv.z, wv.w, a1, L0, L1);
                int qa, qb;
                q9_pair(sc, &qa, &qb);
                long long part = (long long)da * qa + (long long)db * qb;
                part += fp4_shfl_xor_i64(part, 1);
                part += fp4_shfl_xor_i64(part, 2);
                part += fp4_shfl_xor_i64(part, 4);
                cv = dv != 0.0f ? fp4_cu_a16_term(__ll2float_rn(part), dv, scale2) : 0.0f;
            } else {
                const uint4 *ap = reinterpret_cast<const uint4 *>(act + sbi * 512);
                const uint4 av[4] = {ap[sub], ap[8 + sub], ap[16 + sub], ap[24 + sub]};
                uint32_t q1[8];
                dp2a_decode16(wv, QL, q1);
                const uint32_t h2 = fp4_e4m3x2_to_h2(sc);
                const __half2 hh = *reinterpret_cast<const __half2 *>(&h2);
                const float s0 = __low2float(hh), s1 = __high2float(hh);
                int d0, d1;
                dp2a_dot32(q1, av[0], av[1], av[2], av[3], d0, d1);
                float t = __fmul_rn(__fmaf_rn((float)d0, s0, __fmul_rn((float)d1, s1)), dv);
                t = __fadd_rn(t, __shfl_xor_sync(0xFFFFFFFFu, t, 1));
                t = __fadd_rn(t, __shfl_xor_sync(0xFFFFFFFFu, t, 2));
                t = __fadd_rn(t, __shfl_xor_sync(0xFFFFFFFFu, t, 4));
                cv = t;
            }
            if (sub == 0 && slot < cnt) cbuf[li + lr] = cv; /* row lr, column sbi of stride nsb + 1 */
        }
        __syncthreads(); /* every warp is done with stage s */
        if (tid == 0 && it + NST < nit) issue(it + NST);
    }
    /* one thread per row: the super-blocks in index order */
    for (int r = tid; r < nrows; r += NT) {
        const float *c = cbuf + (size_t)r * (nsb + 1);
        float acc = 0.0f;
        for (int k = 0; k < nsb; k++) acc = __fmaf_rn(1.0f, c[k], acc);
        y[row_begin + r] = EXACT ? fp4_round_f16_dev(acc) : __fmul_rn(acc, __fmul_rn(0.5f, scale2));
    }
}

/* 1 column. q, d: the activation pass (EXACT: Q8_K int8 in element order; native: act16 int16).
 * FP4_ERR_UNSUPPORTED when the layout is not the item stream or the block's shared memory would not
 * fit (the caller falls back). bps: blocks per SM. */
template <bool EXACT, int NW, int IPS, int NST>
static fp4_status launch_stream(const fp4_cuda_tensor *w, const void *q, const float *d, float *y, int bps,
                                int pdl, cudaStream_t s) {
    stream_plan p;
    const fp4_status st = stream_plan_make<stream_smem<EXACT, IPS, NST>>(w, q, IPS, bps, 0, &p);
    if (st != FP4_OK) return st;
    static int opted_in[FP4_CU_MAX_DEVICES];
    FP4_CU_TRY(fp4_cu_smem_opt_in((const void *)a16_stream_kernel<EXACT, NW, IPS, NST>, STREAM_SMEM_MAX,
                                  opted_in));
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)p.G);
    cfg.blockDim = dim3(NW * 32);
    cfg.dynamicSmemBytes = p.smem_request;
    cfg.stream = s;
    return fp4_cu_launch_pdl(cfg, pdl, a16_stream_kernel<EXACT, NW, IPS, NST>, w->d_payload, w->d_scales,
                             w->n_out, (int)p.nsb, p.magic, w->scale2, q, d, y);
}

#endif
