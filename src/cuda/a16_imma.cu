/* a16_imma.cu — the exact A16 route (SPEC §4) for many columns (prefill, several sequences) on the
 * integer tensor cores, bit-identical to fp4_nvfp4_matvec_a16_exact. a16_exact.cu's MMA kernel
 * serves at most 16 columns a launch, so a prefill of C columns streams the weights and decodes
 * them C/16 times; this kernel reads and decodes each weight tile once per 32 to 128 columns.
 *
 * Grid (a16_imma.h): x = a column block of IMMA_COLS(WC) columns (fastest, so the blocks that share
 * rows run at the same time and the weights come from L2), y = a row block of IMMA_ROWS(WC) rows.
 * Block: IMMA_NW warps, WC column groups of 16 columns by IMMA_NW / WC row groups of 64 rows; the
 * launch takes the narrowest WC (2, 4, 8) that holds the call's columns, so that a 2..32-column call
 * still gives every warp columns.
 *   - the block copies super-block sb of its rows (IMMA_TILES(WC) tiles of sb_tile.cuh's layout) into
 *     one of IMMA_NS shared-memory stages by cp.async, every thread a share of the 16-byte chunks;
 *   - each warp reads the A fragments of mma.sync m16n8k16 s8 from the tile (decoded to int8
 *     e2m1_q1 by sb_tile.cuh's 5-op decode), its columns' Q8_K int8 values in fragment order
 *     (q8k.cu, frag = 1) are the B operands, loaded from global memory one super-block ahead;
 *     one MMA per 16-group gives the exact int32 group dots, weighted by e4m3fn_q9 into the
 *     super-block total (sb_tile.cuh: int32 at per-row shifted weights where every row of the
 *     tile allows it, else int64 — exact either way);
 *   - the pinned f32 epilogue (SPEC §4 step 4) per (row, column, super-block) into an accumulator
 *     that one thread owns for the whole call: the super-blocks are added in index order by
 *     construction, with no cross-warp reduction;
 *   - the F16 boundary, and the store of the rows and columns in range.
 * Bit-identical to SPEC §4 whatever the integer order. tests/test_imma_emul.c runs this tile loop
 * (the fragment indices, the stage copies, the shifted totals) on the host against the oracle. */
#include "sb_tile.cuh"

#include "cuda/a16_imma.h"

static_assert(IMMA_TILE_ROWS == FP4_SBT_ROWS && IMMA_TILE_BYTES == FP4_SBT_BYTES, "sb_tile.cuh's tile");
static_assert(IMMA_NW * 32 == 256, "one q9 lookup entry per thread");

/* PIPE: IMMA_NS_PIPE stages and two decoded buffers (FP4LANE_CUDA_IMMA_OCC=3, a measuring aid) */
template <int WC, int PIPE> static __host__ __device__ constexpr size_t imma_smem_bytes() {
    return 1024 + (size_t)(PIPE ? IMMA_NS_PIPE : IMMA_NS) * IMMA_STAGE(WC) + (size_t)IMMA_NW * IMMA_QP * 4 +
           (size_t)IMMA_DEC(WC) * (PIPE ? 2 : 1);
}

/* The block decodes the weights of a stage once for all its warps: warp w takes (tile, m-tile, row
 * half) j = w, w + IMMA_NW, ..., each lane its 16 A-fragment words (sb_tile.cuh's units, read
 * conflict-free) written as four 16-byte chunks at the swizzled place (IMMA_DSWZ: the quarter-warps'
 * 16-byte reads of imma_groups fall in distinct banks). */
template <int WC>
static __device__ __forceinline__ void imma_decode(const uint8_t *stage, uint8_t *dbuf, int warp, int lane,
                                                   const fp4_sbt_dec5 &dec) {
    const int r0 = lane >> 2, qd = lane & 3;
#pragma unroll
    for (int j = warp; j < IMMA_TILES(WC) * 4; j += IMMA_NW) {
        const int t = j >> 2, mt = (j >> 1) & 1, h = j & 1;
        const uint8_t *st = stage + t * FP4_SBT_BYTES;
        uint8_t *dst = dbuf + (j * 32 + lane) * 64;
#pragma unroll
        for (int c = 0; c < 4; c++) {
            uint4 v;
            v.x = dec(fp4_sbt_a_unit(st, mt, h, r0, qd, 4 * c));
            v.y = dec(fp4_sbt_a_unit(st, mt, h, r0, qd, 4 * c + 1));
            v.z = dec(fp4_sbt_a_unit(st, mt, h, r0, qd, 4 * c + 2));
            v.w = dec(fp4_sbt_a_unit(st, mt, h, r0, qd, 4 * c + 3));
            *reinterpret_cast<uint4 *>(dst + ((c ^ IMMA_DSWZ(lane)) << 4)) = v;
        }
    }
}

/* sb_tile.cuh's fp4_sbt_a16_groups with the A fragments of one tile from the decoded buffer dt */
template <int NT, typename W>
static __device__ __forceinline__ void
imma_groups(const uint8_t *dt, const int *qp, const uint32_t (&b)[NT][16], int lane, W (&acc)[2][NT][4]) {
    const int r0 = lane >> 2;
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                acc[mt][nt][i] = 0;
#pragma unroll
    for (int c = 0; c < 4; c++) {
        uint4 av[2][2];
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
            for (int h = 0; h < 2; h++)
                av[mt][h] = *reinterpret_cast<const uint4 *>(dt + ((mt * 2 + h) * 32 + lane) * 64 +
                                                             ((c ^ IMMA_DSWZ(lane)) << 4));
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const int g = 4 * c + k;
            uint32_t a[2][2];
#pragma unroll
            for (int mt = 0; mt < 2; mt++)
#pragma unroll
                for (int h = 0; h < 2; h++)
                    a[mt][h] = k == 0   ? av[mt][h].x
                               : k == 1 ? av[mt][h].y
                               : k == 2 ? av[mt][h].z
                                        : av[mt][h].w;
            const int4 qv = *reinterpret_cast<const int4 *>(qp + g * 32 + r0 * 4); /* rows r0, +8, +16, +24 */
            const int qs[4] = {qv.x, qv.y, qv.z, qv.w};
#pragma unroll
            for (int mt = 0; mt < 2; mt++)
#pragma unroll
                for (int nt = 0; nt < NT; nt++) {
                    int d[4];
                    fp4_mma_s8(d, a[mt][0], a[mt][1], b[nt][g]);
#pragma unroll
                    for (int i = 0; i < 4; i++)
                        acc[mt][nt][i] += (W)d[i] * (W)qs[mt * 2 + (i >> 1)];
                }
        }
    }
}

/* The block copies super-block sb of its IMMA_ROWS(WC) rows into dst (tile t at t * FP4_SBT_BYTES,
 * each in sb_tile.cuh's layout; rows past n_out read the last row, their results are discarded) and
 * commits one group, empty when sb >= nsb, so that every thread's wait counts stay uniform. */
template <int WC>
static __device__ __forceinline__ void imma_load(uint8_t *dst, const uint8_t *payload, const uint8_t *scales,
                                                 int64_t pstride, int64_t sstride, int64_t n_out,
                                                 int64_t rowbase, int sb, int nsb, int tid) {
    if (sb < nsb) {
        for (int idx = tid; idx < IMMA_CHUNKS(WC); idx += IMMA_NW * 32) {
            const int t = idx / IMMA_TILE_CHUNKS, j = idx % IMMA_TILE_CHUNKS;
            uint8_t *tile = dst + t * FP4_SBT_BYTES;
            if (j < FP4_SBT_ROWS * 8) {
                const int row = j >> 3, c = j & 7;
                int64_t gr = rowbase + t * FP4_SBT_ROWS + row;
                if (gr >= n_out) gr = n_out - 1;
                fp4_cp_async16(tile + row * 128 + ((c ^ (row & 7)) << 4),
                               payload + gr * pstride + (int64_t)sb * 128 + c * 16);
            } else {
                const int row = j - FP4_SBT_ROWS * 8;
                int64_t gr = rowbase + t * FP4_SBT_ROWS + row;
                if (gr >= n_out) gr = n_out - 1;
                fp4_cp_async16(tile + FP4_SBT_PAYLOAD + row * 16, scales + gr * sstride + (int64_t)sb * 16);
            }
        }
    }
    fp4_cp_async_commit();
}

/* MINB: blocks an SM the registers must allow (FP4LANE_CUDA_IMMA_OCC=2); PIPE: the schedule of one
 * barrier a super-block (FP4LANE_CUDA_IMMA_OCC=3) */
template <int NT, int WC, int MINB, int PIPE>
static __global__ __launch_bounds__(IMMA_NW * 32, MINB) void a16_imma_kernel(
    const uint8_t *__restrict__ payload, const uint8_t *__restrict__ scales, int64_t pstride, int64_t sstride,
    int64_t n_out, int nsb, int64_t k_pad, float scale2, const int8_t *__restrict__ xf,
    const float *__restrict__ xd, int ncols, float *__restrict__ y) {
    extern __shared__ __align__(16) uint8_t imma_smem[];
    int *lut = reinterpret_cast<int *>(imma_smem);
    uint8_t *stg = imma_smem + 1024;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, r0 = lane >> 2, qd = lane & 3;
    constexpr int NSB = PIPE ? IMMA_NS_PIPE : IMMA_NS; /* stages */
    int *qp = reinterpret_cast<int *>(stg + NSB * IMMA_STAGE(WC)) + warp * IMMA_QP;
    uint8_t *dbuf = stg + NSB * IMMA_STAGE(WC) + IMMA_NW * IMMA_QP * 4;
    const int rg = warp / WC, cg = warp % WC; /* the warp's row group (IMMA_WT tiles) and column group */
    const int64_t rowbase = (int64_t)blockIdx.y * IMMA_ROWS(WC);
    const int colbase = (int)blockIdx.x * IMMA_COLS(WC) + cg * 8 * NT;
    const bool active = colbase < ncols; /* a warp past the last column only copies */
    const int64_t nsb_pad = k_pad / 256;
    lut[tid] = fp4_e4m3_q9((uint32_t)tid);
    const fp4_sbt_dec5 dec = {fp4_pin(0x03020100u), fp4_pin(0x0C080604u)};

    /* activations (B operands) of super-block sb: column colbase + nt*8 + r0, words (qd, g); steps
     * of columns colbase + nt*8 + 2qd + e */
    auto loadb = [&](int sb, uint32_t(&b)[NT][16], float(&dv)[NT][2]) {
        const bool ok = active && sb < nsb;
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            const int col = colbase + nt * 8 + r0;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                uint4 v = make_uint4(0u, 0u, 0u, 0u);
                if (ok && col < ncols)
                    v = __ldg(reinterpret_cast<const uint4 *>(xf + (int64_t)col * k_pad + (int64_t)sb * 256 +
                                                              qd * 64 + i * 16));
                b[nt][4 * i] = v.x;
                b[nt][4 * i + 1] = v.y;
                b[nt][4 * i + 2] = v.z;
                b[nt][4 * i + 3] = v.w;
            }
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int c2 = colbase + nt * 8 + qd * 2 + e;
                dv[nt][e] = ok && c2 < ncols ? __ldg(xd + (int64_t)c2 * nsb_pad + sb) : 0.0f;
            }
        }
    };

    float own[IMMA_WT][2][NT][4];
#pragma unroll
    for (int t = 0; t < IMMA_WT; t++)
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int i = 0; i < 4; i++)
                    own[t][mt][nt][i] = 0.0f;
    /* super-block sb's MMAs and epilogue from its stage (the scales) and its decoded weights dcur */
    uint32_t b[NT][16], bn[NT][16];
    float dv[NT][2], dvn[NT][2];
    auto compute = [&](const uint8_t *stage, const uint8_t *dcur) {
        if (active) {
#pragma unroll
            for (int t = 0; t < IMMA_WT; t++) {
                const uint8_t *st = stage + (rg * IMMA_WT + t) * FP4_SBT_BYTES;
                int *qpt = qp + t * 512;
                int q9[16];
                int neg; /* unused here */
                const uint32_t o = fp4_sbt_row_q9(fp4_sbt_row_scales(st, lane), lut, q9, &neg);
                const int s = o ? __ffs((int)o) - 1 : 0;
                const bool fast = __all_sync(0xFFFFFFFFu, (o >> s) < 4096u);
                const int sh = fast ? s : 0;
                fp4_sbt_put_q9(qpt, q9, sh, lane);
                int shr[4];
#pragma unroll
                for (int v = 0; v < 4; v++)
                    shr[v] = __shfl_sync(0xFFFFFFFFu, sh, r0 + 8 * v);
                __syncwarp();
                float tot[2][NT][4];
                if (fast) {
                    int acc[2][NT][4];
                    imma_groups<NT, int>(dcur + (rg * IMMA_WT + t) * IMMA_DEC_TILE, qpt, b, lane, acc);
                    fp4_sbt_totals<NT, int>(acc, shr, tot);
                } else {
                    long long acc[2][NT][4];
                    imma_groups<NT, long long>(dcur + (rg * IMMA_WT + t) * IMMA_DEC_TILE, qpt, b, lane, acc);
                    fp4_sbt_totals<NT, long long>(acc, shr, tot);
                }
                float cv[2][NT][4];
                fp4_sbt_a16_terms<NT>(tot, dv, scale2, cv);
#pragma unroll
                for (int mt = 0; mt < 2; mt++)
#pragma unroll
                    for (int nt = 0; nt < NT; nt++)
#pragma unroll
                        for (int i = 0; i < 4; i++)
                            own[t][mt][nt][i] = __fmaf_rn(1.0f, cv[mt][nt][i], own[t][mt][nt][i]);
            }
        }
    };
    auto advance_b = [&]() {
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
#pragma unroll
            for (int j = 0; j < 16; j++)
                b[nt][j] = bn[nt][j];
            dv[nt][0] = dvn[nt][0];
            dv[nt][1] = dvn[nt][1];
        }
    };
    constexpr int NS = NSB;
#pragma unroll
    for (int s = 0; s < NS - 1; s++)
        imma_load<WC>(stg + s * IMMA_STAGE(WC), payload, scales, pstride, sstride, n_out, rowbase, s, nsb,
                      tid);
    fp4_pdl_wait(); /* launched with PDL after the Q8_K pass: its q and d from here on */
    loadb(0, b, dv);
    if constexpr (!PIPE) {
        for (int sb = 0; sb < nsb; sb++) {
            fp4_cp_async_wait<NS - 2>();
            /* stage sb is in for every thread, and every warp is done with stage sb - 1 (whose buffer
             * the next copy reuses), with the decoded buffer and with its q9 tables; the first pass
             * also publishes the q9 lookup */
            __syncthreads();
            imma_load<WC>(stg + ((sb + NS - 1) % NS) * IMMA_STAGE(WC), payload, scales, pstride, sstride,
                          n_out, rowbase, sb + NS - 1, nsb, tid);
            loadb(sb + 1, bn, dvn); /* in flight while this super-block computes */
            const uint8_t *stage = stg + (sb % NS) * IMMA_STAGE(WC);
            imma_decode<WC>(stage, dbuf, warp, lane, dec);
            __syncthreads(); /* the decoded weights */
            compute(stage, dbuf);
            advance_b();
        }
    } else {
        /* one barrier a super-block: a warp decodes super-block sb + 1 into the other decoded buffer
         * and then computes sb, so one warp's decoding overlaps another's MMAs */
        fp4_cp_async_wait<NS - 2>();
        __syncthreads(); /* stage 0 and the q9 lookup */
        imma_decode<WC>(stg, dbuf, warp, lane, dec);
        for (int sb = 0; sb < nsb; sb++) {
            fp4_cp_async_wait<NS - 3>();
            /* stage sb + 1 is in for every thread; every warp has decoded sb and is done with stage
             * sb - 1, with the decoded buffer of sb - 1 and with its q9 tables */
            __syncthreads();
            imma_load<WC>(stg + ((sb + NS - 1) % NS) * IMMA_STAGE(WC), payload, scales, pstride, sstride,
                          n_out, rowbase, sb + NS - 1, nsb, tid);
            loadb(sb + 1, bn, dvn);
            if (sb + 1 < nsb)
                imma_decode<WC>(stg + ((sb + 1) % NS) * IMMA_STAGE(WC), dbuf + ((sb + 1) & 1) * IMMA_DEC(WC),
                                warp, lane, dec);
            compute(stg + (sb % NS) * IMMA_STAGE(WC), dbuf + (sb & 1) * IMMA_DEC(WC));
            advance_b();
        }
    }
    fp4_cp_async_wait<0>(); /* no copy outlives the block */
    if (!active) return;
#pragma unroll
    for (int t = 0; t < IMMA_WT; t++)
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const int64_t row =
                        rowbase + (rg * IMMA_WT + t) * FP4_SBT_ROWS + mt * 16 + (i >> 1) * 8 + r0;
                    const int col = colbase + nt * 8 + qd * 2 + (i & 1);
                    if (row < n_out && col < ncols)
                        y[(int64_t)col * n_out + row] = fp4_round_f16_dev(own[t][mt][nt][i]);
                }
}

template <int WC, int MINB, int PIPE>
static fp4_status launch_imma(const fp4_cuda_tensor *w, const int8_t *q, const float *d, int64_t nc, float *y,
                              cudaStream_t stream) {
    constexpr size_t smem = imma_smem_bytes<WC, PIPE>();
    static int opted_in[FP4_CU_MAX_DEVICES];
    FP4_CU_TRY(fp4_cu_smem_opt_in((const void *)a16_imma_kernel<IMMA_NT, WC, MINB, PIPE>, smem, opted_in));
    const int64_t row_blocks = (w->n_out + IMMA_ROWS(WC) - 1) / IMMA_ROWS(WC);
    const int64_t col_blocks = (nc + IMMA_COLS(WC) - 1) / IMMA_COLS(WC);
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)col_blocks, (unsigned)row_blocks);
    cfg.blockDim = dim3(IMMA_NW * 32);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    /* programmatic dependent launch where the grid fills the GPU (a16_exact.cu's reason) */
    const int sms = fp4_cu_sm_count(), pdl = sms > 0 && row_blocks * col_blocks > sms;
    return fp4_cu_launch_pdl(cfg, pdl, a16_imma_kernel<IMMA_NT, WC, MINB, PIPE>, w->d_payload, w->d_scales,
                             w->payload_stride, w->scale_stride, w->n_out, (int)(w->n_in / 256), w->k_pad,
                             w->scale2, q, d, (int)nc, y);
}

extern "C" {

size_t fp4_cu_a16_imma_scratch(const fp4_cuda_tensor *w, int64_t n_cols) {
    if (!w || n_cols < 1 || w->k_pad < 0) return 0;
    return FP4_CU_ALIGN((size_t)n_cols * (size_t)w->k_pad) +
           FP4_CU_ALIGN((size_t)n_cols * (size_t)(w->k_pad / 256) * 4);
}

/* from FP4_CU_IMMA_MIN_COLS columns unless FP4LANE_CUDA_IMMA=0 (env.h, read at every call) */
int fp4_cu_imma_takes(const fp4_cuda_tensor *w, int64_t n_cols) {
    (void)w;
    return n_cols >= FP4_CU_IMMA_MIN_COLS && fp4_cu_env_imma();
}

fp4_status fp4_cu_a16_imma(const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols, float *d_y,
                           const fp4_cuda_scratch *s, cudaStream_t stream) {
    if (!w || !d_x || !d_y || !s || !s->d_base || n_cols < 1) return FP4_ERR_INVALID_ARG;
    if (w->type != FP4_TYPE_NVFP4_E2M1 || !w->d_payload || !w->d_scales) return FP4_ERR_INVALID_ARG;
    if (w->n_in <= 0 || w->n_in % 256 || w->k_pad != w->n_in) return FP4_ERR_SHAPE;
    if (w->payload_stride % 128 || w->scale_stride % 16 || !fp4_aligned16(w->d_payload) ||
        !fp4_aligned16(w->d_scales) || !fp4_aligned16(d_x))
        return FP4_ERR_INVALID_ARG;
    /* the narrowest block that holds the columns: fewer column groups, more rows a block; or the
     * measuring aids' geometry (FP4LANE_CUDA_IMMA_WC / _OCC: the same bytes) */
    const int force = fp4_cu_env_imma_wc(), occ = fp4_cu_env_imma_occ();
    const int wc = force == 2 || force == 4 || force == 8 ? force
                   : n_cols <= IMMA_COLS(2)               ? 2
                   : n_cols <= IMMA_COLS(4)               ? 4
                                                          : 8;
    /* a shape past one grid, or past the int column index: the 16-column chunks serve */
    if ((w->n_out + IMMA_ROWS(wc) - 1) / IMMA_ROWS(wc) > IMMA_MAX_GRID_Y || n_cols > INT32_MAX / 2 ||
        w->n_in / 256 > INT32_MAX)
        return fp4_cu_a16_exact(w, d_x, n_cols, d_y, s, stream);
    if (FP4_CU_COUNTER_BYTES + fp4_cu_a16_imma_scratch(w, n_cols) > s->bytes) return FP4_ERR_INVALID_ARG;
    int8_t *q = (int8_t *)s->d_base + FP4_CU_COUNTER_BYTES;
    float *d = (float *)((uint8_t *)q + FP4_CU_ALIGN((size_t)n_cols * (size_t)w->k_pad));
    FP4_CU_TRY(fp4_cu_q8k_quantize(d_x, w->n_in, w->k_pad, n_cols, q, d, NULL, 1, stream));
    return wc == 2     ? launch_imma<2, 1, 0>(w, q, d, n_cols, d_y, stream)
           : wc == 4   ? launch_imma<4, 1, 0>(w, q, d, n_cols, d_y, stream)
           : occ == 2  ? launch_imma<8, 2, 0>(w, q, d, n_cols, d_y, stream)
           : occ == 3  ? launch_imma<8, 1, 1>(w, q, d, n_cols, d_y, stream)
                       : launch_imma<8, 1, 0>(w, q, d, n_cols, d_y, stream);
}

} /* extern "C" */
