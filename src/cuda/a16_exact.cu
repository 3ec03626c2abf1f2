/* a16_exact.cu — the exact A16 route (SPEC §4) on the GPU, bit-identical to
 * fp4_nvfp4_matvec_a16_exact: the Q8_K pass (q8k.cu), then at 1 column the item kernel
 * (a16_stream.cuh: a16_item_kernel<true, 8, 3, 1, QIN>, one item per lane, persistent
 * blocks fed by cp.async.bulk, launched with programmatic dependent launch so it streams weights
 * while its input's producer runs, then quantizing that input to Q8_K in every block — or, with
 * FP4LANE_CUDA_NO_QIN, after a separate Q8_K pass); where its layout or shared memory does not
 * fit, under 8192 rows the
 * row-team kernel (a16_team.cuh: a16_team_kernel<team_exact, 2>, PDL too), from 8192 rows (or rows too
 * long for the team's shared memory) the dp4a kernel a16_exact_kernel<1, 2, a16_dot_split> of
 * a16_dp4a.cuh; from 2 to 16 columns the integer-MMA kernel below; wider calls run in chunks of
 * 16 (a remainder of 1 column takes the 1-column kernel). bench/gpu.md (rounds 6, 7 and 8) has
 * the measurements behind the choice; the kernel lab (dev/cuda) keeps the alternatives.
 *
 * a16_exact_mma_kernel<NT> (block = 8 warps over the same 32 rows, round t gives warp w
 * super-block 8t + w, so the warps' order is the super-block order):
 *   - each warp cp.async-copies its own super-block tile (32 rows x 128 payload bytes,
 *     XOR-swizzled by 16-byte chunk, + 32 x 16 scale bytes) into shared memory, two stages;
 *   - per 16-group: the lane's 16-bit unit (4 codes) of rows g, g+8 (+16, +24) read back
 *     conflict-free, decoded to int8 e2m1_q1 by a 5-op decode: P = prmt(L0, L1, nib) (0 in the
 *     bytes of negative codes by the permute's sign replicate), N = prmt(L0, L1, nib ^ 0x8888),
 *     q = P | ((0x80808080 - N) ^ 0x80808080) (byte-wise -N without borrows, N <= 12; exactly one
 *     of P, -N is non-zero per byte): the A operand of mma.sync m16n8k16 s8 x s8 -> s32; the
 *     activations' int8 Q8_K values in fragment order are the B operand (one 16-byte load = 4
 *     groups of a column); one MMA per m-tile and n-tile gives the exact int32 group dots of 16
 *     rows x 8 columns, weighted by e4m3fn_q9 (a shared-memory table) into the per-super-block
 *     total. Fast path: when every row of the tile satisfies (OR of |q9| >> s) < 4096 with s its
 *     lowest set bit, the weights q9 >> s are used and the totals fit in int32 (16 x 24576 x 4095
 *     < 2^31), with (float)total == (float)acc * 2^s exactly; otherwise int64 totals;
 *   - the pinned f32 epilogue per (row, column, super-block); the 8 warps' results go through
 *     shared memory and each (row, column) owner thread adds them in warp (= super-block) order;
 *   - the next round's B fragments and steps are loaded into registers at the end of the current
 *     round, so their L2 latency hides behind the epilogue, the barrier and the owner sums;
 *   - launched with programmatic dependent launch when the grid has more blocks than SMs: the
 *     first weight tile is requested before the kernel waits for the Q8_K pass (which triggers
 *     its dependents at its start);
 *   - one __syncthreads per round: the per-warp f32 results go to a buffer double-buffered by
 *     round parity, and each warp's q9 row table lives in the same 2 KB slot of the current
 *     parity (used before the results are written over it). 107.5 KB of shared memory per block
 *     (2 blocks per SM). NT n-tiles: up to 8 * NT columns per launch.
 * Bit-identical to SPEC §4 whatever the integer order.
 */
#include "a16_dp4a.cuh"
#include "a16_stream.cuh"
#include "a16_team.cuh"
#include "sb_tile.cuh"

#define TEAM_R 2         /* the 1-column team kernel: rows per row group */
#define TEAM_TASKS 16    /* ... and tasks per block (a16_team.cuh) */
#define TEAM_MAX_ROWS 8191 /* ... and the most rows it serves: from 8192 rows the dp4a kernel has the
                            * warps to fill the GPU and was as fast or faster (bench/gpu.md, round 7) */

/* the 1-column item kernel (a16_stream.cuh): ITEM_NW warps per block, ITEM_NST shared-memory
 * stages, the lookup words read from shared memory (ITEM_TAB 1), the fastest shape on every
 * issue-10 shape (CLAIMS kern9-2; the lab, dev/cuda/lab_stream.cu, instantiates the others) */
#define ITEM_NW 8
#define ITEM_NST 3
#define ITEM_TAB 1

#define CHUNK 16 /* columns per launch: the MMA kernel's two n-tiles */
#define MMA_NW 8
#define MMA_ROWS 32
#define MMA_STAGE FP4_SBT_BYTES
#define MMA_S 2
#define MMA_SLOT 2048 /* per warp and parity: qp (16 groups x 32 rows x 4 B), then cbuf (32 x 8NT x 4 B) */

static __host__ __device__ constexpr size_t mma_smem_bytes() {
    return 1024 + (size_t)MMA_NW * MMA_S * MMA_STAGE + (size_t)2 * MMA_NW * MMA_SLOT;
}

typedef fp4_sbt_dec5 dec_5op; /* sb_tile.cuh */

template <int NT>
static __global__ __launch_bounds__(256, 2) void a16_exact_mma_kernel(
    const uint8_t *__restrict__ payload, const uint8_t *__restrict__ scales, int64_t pstride, int64_t sstride,
    int64_t n_out, int nsb, int64_t k_pad, float scale2, const int8_t *__restrict__ xf,
    const float *__restrict__ xd, int ncols, float *__restrict__ y) {
    constexpr int NCP = 8 * NT;
    extern __shared__ __align__(16) uint8_t mma_smem[];
    int *lut = reinterpret_cast<int *>(mma_smem);
    uint8_t *stg = mma_smem + 1024;
    uint8_t *slots = stg + MMA_NW * MMA_S * MMA_STAGE;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, r0 = lane >> 2, qd = lane & 3;
    const int64_t rowbase = (int64_t)blockIdx.x * MMA_ROWS;
    const int64_t nsb_pad = k_pad / 256;
    uint8_t *my = stg + warp * MMA_S * MMA_STAGE;
    lut[tid] = fp4_e4m3_q9((uint32_t)tid);
    const dec_5op dec = {fp4_pin(0x03020100u), fp4_pin(0x0C080604u)};

    auto load = [&](int sb, int stage) {
        FP4_SBT_LOAD(my + stage * MMA_STAGE, payload, scales, pstride, sstride, n_out, rowbase, sb, nsb,
                     lane);
    };
    /* activations (B operands) of super-block sb: column nt*8 + r0, words (qd, g); steps dv */
    uint32_t b[NT][16];
    float dv[NT][2];
    auto loadb = [&](int sb) {
        const bool ok = sb < nsb;
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            const int col = nt * 8 + r0;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                uint4 v = make_uint4(0u, 0u, 0u, 0u);
                if (ok && col < ncols)
                    v = __ldg(reinterpret_cast<const uint4 *>(xf + col * k_pad + (int64_t)sb * 256 + qd * 64 +
                                                              i * 16));
                b[nt][4 * i] = v.x;
                b[nt][4 * i + 1] = v.y;
                b[nt][4 * i + 2] = v.z;
                b[nt][4 * i + 3] = v.w;
            }
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int c2 = nt * 8 + qd * 2 + e;
                dv[nt][e] = ok && c2 < ncols ? __ldg(xd + c2 * nsb_pad + sb) : 0.0f;
            }
        }
    };

    float own[NT];
#pragma unroll
    for (int j = 0; j < NT; j++) own[j] = 0.0f;
    const int rounds = (nsb + MMA_NW - 1) / MMA_NW;
    load(warp, 0);
    fp4_pdl_wait(); /* launched with PDL after the Q8_K pass: its q and d from here on */
    loadb(warp);
    __syncthreads(); /* the q9 table */
    for (int t = 0; t < rounds; t++) {
        const int sb = t * MMA_NW + warp;
        load(sb + MMA_NW, (t + 1) & 1);
        uint8_t *slot = slots + ((t & 1) * MMA_NW + warp) * MMA_SLOT;
        int *qp = reinterpret_cast<int *>(slot);
        float *cb = reinterpret_cast<float *>(slot);
        float cv[2][NT][4];
        if (sb < nsb) {
            fp4_cp_async_wait<1>();
            __syncwarp();
            const uint8_t *st = my + (t & 1) * MMA_STAGE;
            /* written out rather than through a helper: as a function, ptxas spills 24 bytes of
             * the 16-column instance (16 inline, as in round 6) and runs it ~10 % slower */
            int q9[16];
            int neg; /* unused here */
            const uint32_t o = fp4_sbt_row_q9(fp4_sbt_row_scales(st, lane), lut, q9, &neg);
            const int s = o ? __ffs((int)o) - 1 : 0;
            const bool fast = __all_sync(0xFFFFFFFFu, (o >> s) < 4096u);
            const int sh = fast ? s : 0;
            fp4_sbt_put_q9(qp, q9, sh, lane);
            int shr[4];
#pragma unroll
            for (int v = 0; v < 4; v++) shr[v] = __shfl_sync(0xFFFFFFFFu, sh, r0 + 8 * v);
            __syncwarp();
            float tot[2][NT][4];
            if (fast) {
                int acc[2][NT][4];
                fp4_sbt_a16_groups<NT, int>(st, qp, b, r0, qd, dec, acc);
                fp4_sbt_totals<NT, int>(acc, shr, tot);
            } else {
                long long acc[2][NT][4];
                fp4_sbt_a16_groups<NT, long long>(st, qp, b, r0, qd, dec, acc);
                fp4_sbt_totals<NT, long long>(acc, shr, tot);
            }
            fp4_sbt_a16_terms<NT>(tot, dv, scale2, cv);
        } else {
            fp4_sbt_zero_terms<NT>(cv);
        }
        __syncwarp(); /* every lane is done with qp before the results overwrite it */
        fp4_sbt_put_terms<NT, NCP>(cb, cv, r0, qd);
        loadb(sb + MMA_NW); /* next round's activations: in flight across the barrier */
        __syncthreads();
        /* The slots of parity t&1 are rewritten in round t+2, after every thread has passed the
         * barrier of round t+1, i.e. after these reads: one barrier per round suffices. */
        const float *cpar = reinterpret_cast<const float *>(slots + (t & 1) * MMA_NW * MMA_SLOT);
#pragma unroll
        for (int j = 0; j < NT; j++) {
            const int p = tid + 256 * j; /* (row, column) pair p = row * NCP + column */
#pragma unroll
            for (int w = 0; w < MMA_NW; w++) own[j] = __fmaf_rn(1.0f, cpar[w * (MMA_SLOT / 4) + p], own[j]);
        }
    }
#pragma unroll
    for (int j = 0; j < NT; j++) {
        const int p = tid + 256 * j, row = p / NCP, col = p % NCP;
        if (rowbase + row < n_out && col < ncols)
            y[(int64_t)col * n_out + rowbase + row] = fp4_round_f16_dev(own[j]);
    }
}

template <int NT>
static fp4_status launch_mma(const fp4_cuda_tensor *w, const int8_t *q, const float *d, int64_t nc, float *y,
                              cudaStream_t s) {
    constexpr size_t smem = mma_smem_bytes();
    static int opted_in[FP4_CU_MAX_DEVICES];
    FP4_CU_TRY(fp4_cu_smem_opt_in((const void *)a16_exact_mma_kernel<NT>, smem, opted_in));
    const int64_t blocks = (w->n_out + MMA_ROWS - 1) / MMA_ROWS;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)blocks);
    cfg.blockDim = dim3(MMA_NW * 32);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    /* programmatic dependent launch (the first weight tile is copied during the Q8_K pass) only when
     * the grid has more blocks than SMs: with fewer, blocks launched beside the Q8_K pass's doubled
     * up on SMs and left others idle (bench/gpu.md Round 7) */
    const int sms = fp4_cu_sm_count(), pdl = sms > 0 && blocks > sms;
    return fp4_cu_launch_pdl(cfg, pdl, a16_exact_mma_kernel<NT>, w->d_payload, w->d_scales, w->payload_stride,
                             w->scale_stride, w->n_out, (int)(w->n_in / 256), w->k_pad, w->scale2, q, d,
                             (int)nc, y);
}

/* the 1-column item kernel on a given Q8_K pass (DEC_DOWN2: FP4LANE_CUDA_DECODE's variant) */
static fp4_status launch_item_pass(const fp4_cuda_tensor *w, const void *q, const float *d, float *y,
                                   cudaStream_t s) {
    if (item_dec(w) & DEC_DOWN2) return launch_item<true, 8, 2, ITEM_TAB>(w, q, d, y, 2, 1, s);
    return launch_item<true, ITEM_NW, ITEM_NST, ITEM_TAB>(w, q, d, y, 1, 1, s);
}

extern "C" {

size_t fp4_cu_a16_exact_scratch(const fp4_cuda_tensor *w, int64_t n_cols) {
    if (!w || n_cols < 1) return 0;
    const int64_t nc = n_cols < CHUNK ? n_cols : CHUNK;
    return FP4_CU_ALIGN((size_t)(nc * w->k_pad)) + FP4_CU_ALIGN((size_t)(nc * (w->k_pad / 256)) * 4);
}

/* the 1-column item kernel on a given Q8_K pass (int8 in element order, steps): the form the route
 * takes for rows too long for QIN */
fp4_status fp4_cu_a16_exact_pre(const fp4_cuda_tensor *w, const void *d_q, const float *d_d, float *d_y,
                                cudaStream_t stream) {
    if (!w || w->type != FP4_TYPE_NVFP4_E2M1 || !w->d_payload || !w->d_scales || w->n_in <= 0 ||
        w->n_in % 256 || w->k_pad != w->n_in || !fp4_aligned16(d_q))
        return FP4_ERR_UNSUPPORTED;
    return launch_item_pass(w, d_q, d_d, d_y, stream);
}

fp4_status fp4_cu_a16_exact(const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols, float *d_y,
                            const fp4_cuda_scratch *s, cudaStream_t stream) {
    if (!w || !d_x || !d_y || !s || !s->d_base || n_cols < 1) return FP4_ERR_INVALID_ARG;
    if (w->type != FP4_TYPE_NVFP4_E2M1 || !w->d_payload || !w->d_scales) return FP4_ERR_INVALID_ARG;
    if (w->n_in <= 0 || w->n_in % 256 || w->k_pad != w->n_in) return FP4_ERR_SHAPE;
    if (w->payload_stride % 128 || w->scale_stride % 16 || !fp4_aligned16(w->d_payload) ||
        !fp4_aligned16(w->d_scales) || !fp4_aligned16(d_x))
        return FP4_ERR_INVALID_ARG;
    const int64_t chunk = n_cols < CHUNK ? n_cols : CHUNK;
    if (FP4_CU_COUNTER_BYTES + fp4_cu_a16_exact_scratch(w, chunk) > s->bytes) return FP4_ERR_INVALID_ARG;
    int8_t *q = (int8_t *)s->d_base + FP4_CU_COUNTER_BYTES;
    float *d = (float *)((uint8_t *)q + FP4_CU_ALIGN((size_t)(chunk * w->k_pad)));
    for (int64_t c0 = 0; c0 < n_cols; c0 += chunk) {
        const int64_t nc = n_cols - c0 < chunk ? n_cols - c0 : chunk;
        const int mma = nc >= 2; /* the MMA kernel reads q in fragment order */
        float *y = d_y + c0 * w->n_out;
        if (!mma && fp4_cu_qin_on(w)) { /* the item kernel quantizes its own input (QIN) */
            const fp4_status st = launch_item_qin<true>(w, d_x + c0 * w->n_in, y, stream, 0);
            if (st != FP4_ERR_UNSUPPORTED) {
                FP4_CU_TRY(st);
                continue;
            }
        }
        FP4_CU_TRY(fp4_cu_q8k_quantize(d_x + c0 * w->n_in, w->n_in, w->k_pad, nc, q, d, NULL, mma, stream));
        if (mma)
            FP4_CU_TRY(nc <= 8 ? launch_mma<1>(w, q, d, nc, y, stream)
                               : launch_mma<2>(w, q, d, nc, y, stream));
        else {
            /* the item kernel (a16_stream.cuh, bench/gpu.md round 8) where the layout and its shared
             * memory allow; else the round-7 kernels */
            fp4_status st = launch_item_pass(w, q, d, y, stream);
            if (st != FP4_ERR_UNSUPPORTED) {
                FP4_CU_TRY(st);
                continue;
            }
            st = w->n_out <= TEAM_MAX_ROWS
                                      ? launch_team<team_exact, TEAM_R>(w, q, d, y, TEAM_TASKS, 1, stream)
                                      : FP4_ERR_UNSUPPORTED;
            if (st == FP4_ERR_UNSUPPORTED) /* many rows, or rows too long for the team's shared memory */
                FP4_CU_TRY((launch_a16_dp4a<1, 2, a16_dot_split>(w, q, d, y, stream)));
            else FP4_CU_TRY(st);
        }
    }
    return FP4_OK;
}

} /* extern "C" */
