/* lab_exact.cu — the kernel lab's exact A16 variants (SPEC §4; every one bit-identical to
 * fp4_nvfp4_matvec_a16_exact). Production (the route nvfp4.a16.exact.dp4a: the dp4a kernel
 * a16_exact_kernel<1, 2, a16_dot_split> at 1 column, the integer MMA of round 6 from 2 columns)
 * lives in src/cuda/a16_exact.cu; the dp4a variants here instantiate its kernel template
 * (a16_dp4a.cuh) with other widths, rows per warp and group decoders.
 *
 *   exact.1  scalar group loop (the baseline)                               (1 column)
 *   exact.2  dp4a, merged signed decode (3 permutes per 4 weights)
 *   exact.4  a16_exact_v4_kernel: sign-split decode, 32 payload bytes per lane, 4 lanes per
 *            super-block
 *   exact.5  exact.2's layout with the sign-split decode; exact.6 the same with 2 rows per warp
 *   exact.7  round 2: exact.6 at 1 column, exact.5 at 2, exact.2 at 4 and 8 (chunks of 8)
 *   exact.8  round 3: integer MMA, int64 totals; exact.9 with the int32 fast path
 *   exact.3  round 3: exact.7 at 1 and 2 columns, exact.9 from 3 (chunks of 16)
 * One launch of exact.2 and 4..7 serves 1, 2, 4 or 8 columns.
 */
#include "lab_variants.h"
#include "cuda/a16_dp4a.cuh"
#include "cuda/sb_tile.cuh"

/* Group decoders for a16_exact_kernel (Σ e2m1_q1(w)·a over one 16-group). */
struct dot_merged { /* merged signed decode: 3 permutes per 4 weights */
    static __device__ __forceinline__ int dot(uint32_t w0, uint32_t w1, uint4 a, uint32_t, uint32_t) {
        int d = __dp4a((int)fp4_e2m1x4_to_q1x4(w0), (int)a.x, 0);
        d = __dp4a((int)fp4_e2m1x4_to_q1x4(w0 >> 16), (int)a.y, d);
        d = __dp4a((int)fp4_e2m1x4_to_q1x4(w1), (int)a.z, d);
        return __dp4a((int)fp4_e2m1x4_to_q1x4(w1 >> 16), (int)a.w, d);
    }
};
struct dot_scalar { /* one code at a time */
    static __device__ __forceinline__ int dot(uint32_t w0, uint32_t w1, uint4 a, uint32_t, uint32_t) {
        const uint32_t w[2] = {w0, w1}, av[4] = {a.x, a.y, a.z, a.w};
        int dot = 0;
#pragma unroll
        for (int i = 0; i < 16; i++) {
            const int code = (int)((w[i >> 3] >> (4 * (i & 7))) & 15u);
            const int act = (int)(int8_t)(uint8_t)(av[i >> 2] >> (8 * (i & 3)));
            dot += fp4_dev_e2m1_q1((uint32_t)code) * act;
        }
        return dot;
    }
};

/* exact.4: one warp per row, 8 super-blocks per pass, 4 lanes per super-block, each lane 32
 * payload bytes (4 groups) and 4 scale bytes; the sign-split decode (2 permutes per 4 weights,
 * P and N dot products), two int64 shuffle rounds per super-block, then the same pinned f32
 * epilogue in super-block order. */
template <int NC>
static __global__ __launch_bounds__(256) void a16_exact_v4_kernel(
    const uint8_t *__restrict__ payload, const uint8_t *__restrict__ scales, int64_t pstride, int64_t sstride,
    int64_t n_out, int nsb, int64_t k_pad, float scale2, const int8_t *__restrict__ xq,
    const float *__restrict__ xd, float *__restrict__ y) {
    const int lane = threadIdx.x & 31;
    const int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (row >= n_out) return;
    const int slot = lane >> 2, qq = lane & 3;
    const uint32_t L0 = fp4_pin(0x03020100u), L1 = fp4_pin(0x0C080604u);
    const uint8_t *prow = payload + row * pstride + qq * 32;
    const uint8_t *srow = scales + row * sstride + qq * 4;
    float acc[NC];
#pragma unroll
    for (int c = 0; c < NC; c++) acc[c] = 0.0f;
    for (int sb0 = 0; sb0 < nsb; sb0 += 8) {
        const int sb = sb0 + slot;
        const bool valid = sb < nsb;
        uint4 w0 = make_uint4(0u, 0u, 0u, 0u), w1 = w0;
        uint32_t sc = 0;
        if (valid) {
            w0 = fp4_ldg16(prow + (int64_t)sb * 128);
            w1 = fp4_ldg16(prow + (int64_t)sb * 128 + 16);
            sc = __ldg(reinterpret_cast<const unsigned int *>(srow + (int64_t)sb * 16));
        }
        const uint32_t words[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
        uint32_t P[16], N[16];
#pragma unroll
        for (int wi = 0; wi < 8; wi++) {
            const uint32_t wd = words[wi], fl = wd ^ 0x88888888u;
            fp4_e2m1x4_split(wd, fl, L0, L1, &P[2 * wi], &N[2 * wi]);
            fp4_e2m1x4_split(wd >> 16, fl >> 16, L0, L1, &P[2 * wi + 1], &N[2 * wi + 1]);
        }
        int q9[4];
        q9_pair(sc & 0xFFFFu, &q9[0], &q9[1]);
        q9_pair(sc >> 16, &q9[2], &q9[3]);
#pragma unroll
        for (int c = 0; c < NC; c++) {
            const int8_t *xa = xq + c * k_pad + (int64_t)sb * 256 + qq * 64;
            uint4 a[4];
#pragma unroll
            for (int j = 0; j < 4; j++) a[j] = valid ? fp4_ldg16(xa + 16 * j) : make_uint4(0u, 0u, 0u, 0u);
            const float dcol = valid ? __ldg(xd + (int64_t)c * (k_pad / 256) + sb) : 0.0f;
            long long part = 0;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                int pp = __dp4a((int)P[4 * j], (int)a[j].x, 0);
                pp = __dp4a((int)P[4 * j + 1], (int)a[j].y, pp);
                pp = __dp4a((int)P[4 * j + 2], (int)a[j].z, pp);
                pp = __dp4a((int)P[4 * j + 3], (int)a[j].w, pp);
                int nn = __dp4a((int)N[4 * j], (int)a[j].x, 0);
                nn = __dp4a((int)N[4 * j + 1], (int)a[j].y, nn);
                nn = __dp4a((int)N[4 * j + 2], (int)a[j].z, nn);
                nn = __dp4a((int)N[4 * j + 3], (int)a[j].w, nn);
                part += (long long)(pp - nn) * q9[j];
            }
            part += fp4_shfl_xor_i64(part, 1);
            part += fp4_shfl_xor_i64(part, 2);
            float cv = 0.0f;
            if (valid && dcol != 0.0f) {
                cv = fp4_cu_a16_term(__ll2float_rn(part), dcol, scale2);
            }
#pragma unroll
            for (int o = 0; o < 8; o++) acc[c] = __fmaf_rn(1.0f, __shfl_sync(0xFFFFFFFFu, cv, o * 4), acc[c]);
        }
    }
    if (lane == 0)
#pragma unroll
        for (int c = 0; c < NC; c++) y[c * n_out + row] = fp4_round_f16_dev(acc[c]);
}

template <int NC>
static fp4_status launch_a16_v4(const fp4_cuda_tensor *w, const int8_t *q, const float *d, float *y,
                                cudaStream_t s) {
    const int64_t blocks = (w->n_out * 32 + 255) / 256;
    a16_exact_v4_kernel<NC><<<(unsigned)blocks, 256, 0, s>>>(w->d_payload, w->d_scales, w->payload_stride,
                                                             w->scale_stride, w->n_out, (int)(w->n_in / 256),
                                                             w->k_pad, w->scale2, q, d, y);
    FP4_CUDA_LAUNCHED();
    return FP4_OK;
}

/* ---- exact.8, exact.9: integer MMA (round 3) --------------------------------------------------------
 * Block = 8 warps over the same 32 rows (two m-tiles); round t gives warp w super-block 8t + w, so
 * the warps' order is the super-block order. Each warp copies its own super-block tile (32 rows x
 * 128 payload bytes, XOR-swizzled by 16-byte chunk, + 32 x 16 scale bytes) into shared memory by
 * cp.async, two stages. Per 16-group: the lane's 16-bit unit (4 codes) of rows g, g+8 (+16, +24)
 * read back from shared memory (conflict-free), decoded to int8 e2m1_q1 by the merged byte permutes
 * (the A operand of mma.sync m16n8k16 s8 x s8 -> s32), the activations' int8 Q8_K values loaded
 * in fragment order from the quantize pass (B operand, one 16-byte load = 4 groups of a column),
 * one MMA per m-tile and n-tile gives the exact int32 group dots of 16 rows x 8 columns; weighted
 * by e4m3fn_q9 (a shared-memory table) into the per-super-block total. Variant 9 (FAST): when every
 * row of the tile satisfies (OR of |q9| >> s) < 4096 with s = its lowest set bit, the weights
 * q9 >> s are used and the totals fit in int32 (16 x 24576 x 4095 < 2^31), with (float)total ==
 * (float)acc * 2^s exactly; otherwise (and always in variant 8) int64 totals. The pinned f32
 * epilogue per (row, column, super-block) follows; the 8 warps' results go through shared memory
 * and each (row, column) owner thread adds them in warp (= super-block) order. NT n-tiles: up to
 * 8 * NT columns per launch. Bit-identical to SPEC §4 whatever the integer order. */
/* four e2m1 codes -> four int8 e2m1_q1: the merged decoder, its tables in registers */
struct dec_merged {
    fp4_q1_luts l;
    __device__ __forceinline__ uint32_t operator()(uint32_t nib) const {
        return fp4_e2m1x4_to_q1x4_l(nib, l);
    }
};

#define X8_NW 8
#define X8_ROWS 32
#define X8_STAGE FP4_SBT_BYTES
#define X8_S 2

template <int NT> static __host__ __device__ constexpr size_t x8_smem_bytes() {
    return 1024 + (size_t)X8_NW * X8_S * X8_STAGE + (size_t)X8_NW * 16 * 32 * 4 +
           (size_t)X8_NW * X8_ROWS * 8 * NT * 4;
}

/* the 16 groups of one super-block for the warp's 32 rows x 8*NT columns; W = int or long long */
/* The whole step of one super-block for the warp (a16_exact.cu writes it out inline: as a
 * function ptxas spills more of the production kernel): its rows' q9 (and the table in qp), the int32
 * fast path when allow_fast and every row's (OR of |q9|) >> s < 4096 with s the row's lowest set
 * bit (then 16 x 24576 x 4095 < 2^31 and the totals are exact in int32), else int64 totals; the
 * group dots and the pinned terms cv. */
template <int NT, typename DEC>
static __device__ __forceinline__ void x8_superblock(const uint8_t *st, const int *lut, int *qp,
                                                     const uint32_t (&b)[NT][16], const float (&dv)[NT][2],
                                                     float scale2, int lane, const DEC &dec, bool allow_fast,
                                                     float (&cv)[2][NT][4]) {
    const int r0 = lane >> 2, qd = lane & 3;
    int q9[16];
    int neg; /* unused here */
    const uint32_t o = fp4_sbt_row_q9(fp4_sbt_row_scales(st, lane), lut, q9, &neg);
    const int s = o ? __ffs((int)o) - 1 : 0;
    const bool fast = allow_fast && __all_sync(0xFFFFFFFFu, (o >> s) < 4096u);
    const int sh = fast ? s : 0;
    fp4_sbt_put_q9(qp, q9, sh, lane);
    int shr[4]; /* shifts of the lane's rows r0, r0+8, r0+16, r0+24 */
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
}

template <int NT, bool FAST>
static __global__ __launch_bounds__(256, 2) void a16_exact_imma_kernel(
    const uint8_t *__restrict__ payload, const uint8_t *__restrict__ scales, int64_t pstride, int64_t sstride,
    int64_t n_out, int nsb, int64_t k_pad, float scale2, const int8_t *__restrict__ xf,
    const float *__restrict__ xd, int ncols, float *__restrict__ y) {
    constexpr int NCP = 8 * NT;
    extern __shared__ __align__(16) uint8_t x8_smem[];
    int *lut = reinterpret_cast<int *>(x8_smem);
    uint8_t *stg = x8_smem + 1024;
    int *qp_all = reinterpret_cast<int *>(stg + X8_NW * X8_S * X8_STAGE);
    float *cbuf = reinterpret_cast<float *>(qp_all + X8_NW * 512);
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, r0 = lane >> 2, qd = lane & 3;
    const int64_t rowbase = (int64_t)blockIdx.x * X8_ROWS;
    const int64_t nsb_pad = k_pad / 256;
    uint8_t *my = stg + warp * X8_S * X8_STAGE;
    int *qp = qp_all + warp * 512;
    lut[tid] = fp4_e4m3_q9((uint32_t)tid);
    const dec_merged dec = {fp4_q1_luts_make()};

    auto load = [&](int sb, int stage) {
        FP4_SBT_LOAD(my + stage * X8_STAGE, payload, scales, pstride, sstride, n_out, rowbase, sb, nsb, lane);
    };

    float own[NT];
#pragma unroll
    for (int j = 0; j < NT; j++) own[j] = 0.0f;
    const int rounds = (nsb + X8_NW - 1) / X8_NW;
    load(warp, 0);
    __syncthreads(); /* the q9 table */
    for (int t = 0; t < rounds; t++) {
        const int sb = t * X8_NW + warp;
        load(sb + X8_NW, (t + 1) & 1);
        float cv[2][NT][4];
        if (sb < nsb) {
            /* activations (B operands): column nt*8 + r0, words (qd, g) */
            uint32_t b[NT][16];
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                const int col = nt * 8 + r0;
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    uint4 v = make_uint4(0u, 0u, 0u, 0u);
                    if (col < ncols)
                        v = __ldg(reinterpret_cast<const uint4 *>(xf + col * k_pad + (int64_t)sb * 256 +
                                                                  qd * 64 + i * 16));
                    b[nt][4 * i] = v.x;
                    b[nt][4 * i + 1] = v.y;
                    b[nt][4 * i + 2] = v.z;
                    b[nt][4 * i + 3] = v.w;
                }
            }
            float dv[NT][2];
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int col = nt * 8 + qd * 2 + e;
                    dv[nt][e] = col < ncols ? __ldg(xd + col * nsb_pad + sb) : 0.0f;
                }
            fp4_cp_async_wait<1>();
            __syncwarp();
            const uint8_t *st = my + (t & 1) * X8_STAGE;
            /* scales of row `lane`: q9 per group, the common shift, the fast-path test */
            x8_superblock<NT>(st, lut, qp, b, dv, scale2, lane, dec, FAST, cv);
        } else {
            fp4_sbt_zero_terms<NT>(cv);
        }
        float *cb = cbuf + warp * X8_ROWS * NCP;
        fp4_sbt_put_terms<NT, NCP>(cb, cv, r0, qd);
        __syncthreads();
#pragma unroll
        for (int j = 0; j < NT; j++) {
            const int p = tid + 256 * j; /* (row, column) pair p = row * NCP + column */
#pragma unroll
            for (int w = 0; w < X8_NW; w++) own[j] = __fmaf_rn(1.0f, cbuf[w * X8_ROWS * NCP + p], own[j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int j = 0; j < NT; j++) {
        const int p = tid + 256 * j, row = p / NCP, col = p % NCP;
        if (rowbase + row < n_out && col < ncols)
            y[(int64_t)col * n_out + rowbase + row] = fp4_round_f16_dev(own[j]);
    }
}

template <int NT, bool FAST>
static fp4_status launch_imma(const fp4_cuda_tensor *w, const int8_t *q, const float *d, int64_t nc, float *y,
                              cudaStream_t s) {
    constexpr size_t smem = x8_smem_bytes<NT>();
    static int opted_in[FP4_CU_MAX_DEVICES];
    FP4_CU_TRY(fp4_cu_smem_opt_in((const void *)a16_exact_imma_kernel<NT, FAST>, smem, opted_in));
    const int64_t blocks = (w->n_out + X8_ROWS - 1) / X8_ROWS;
    a16_exact_imma_kernel<NT, FAST><<<(unsigned)blocks, X8_NW * 32, smem, s>>>(
        w->d_payload, w->d_scales, w->payload_stride, w->scale_stride, w->n_out, (int)(w->n_in / 256),
        w->k_pad, w->scale2, q, d, (int)nc, y);
    FP4_CUDA_LAUNCHED();
    return FP4_OK;
}

/* variants 8 (int64 totals) and 9 (int32 fast path): 1..16 columns per launch, q in fragment order */
static fp4_status imma_matvec(int variant, const fp4_cuda_tensor *w, const int8_t *q, const float *d,
                              int64_t nc, float *y, cudaStream_t s) {
    if (nc < 1 || nc > 16) return FP4_ERR_UNSUPPORTED;
    if (variant == 8)
        return nc <= 8 ? launch_imma<1, false>(w, q, d, nc, y, s) : launch_imma<2, false>(w, q, d, nc, y, s);
    return nc <= 8 ? launch_imma<1, true>(w, q, d, nc, y, s) : launch_imma<2, true>(w, q, d, nc, y, s);
}

size_t lab_exact_scratch(const fp4_cuda_tensor *w, int64_t n_cols) {
    if (!w || n_cols < 1) return 0;
    return FP4_CU_ALIGN((size_t)(n_cols * w->k_pad)) + FP4_CU_ALIGN((size_t)(n_cols * (w->k_pad / 256)) * 4);
}

/* One launch serves 1, 2, 4 or 8 columns. Variant 2: merged decode, rows per warp grow with the
 * width so that one activation load feeds more weights; 4: sign-split decode, 32 bytes per lane;
 * 5: variant 2's layout with the sign-split decode; 6: 5 with two rows per warp at one column;
 * 7: production, the fastest measured per width (1: 6, 2: 5, 4 and 8: 2). */
fp4_status lab_exact_matvec(int variant, const fp4_cuda_tensor *w, const int8_t *d_q, const float *d_d,
                                   int64_t n_cols, float *d_y, cudaStream_t s) {
    if (variant == 8 || variant == 9) return imma_matvec(variant, w, d_q, d_d, n_cols, d_y, s);
    if (variant == 3) { /* round-3 production (bench/gpu.md): variant 7's kernels at 1 and 2 columns,
                         * the integer MMA (variant 9, q in fragment order) from 3 columns up */
        if (n_cols == 1) return launch_a16_dp4a<1, 2, a16_dot_split>(w, d_q, d_d, d_y, s);
        if (n_cols == 2) return launch_a16_dp4a<2, 1, a16_dot_split>(w, d_q, d_d, d_y, s);
        return imma_matvec(9, w, d_q, d_d, n_cols, d_y, s);
    }
    if (variant == 1) {
        if (n_cols != 1) return FP4_ERR_UNSUPPORTED;
        return launch_a16_dp4a<1, 1, dot_scalar>(w, d_q, d_d, d_y, s);
    }
    if (variant == 4) {
        switch (n_cols) {
        case 1: return launch_a16_v4<1>(w, d_q, d_d, d_y, s);
        case 2: return launch_a16_v4<2>(w, d_q, d_d, d_y, s);
        case 4: return launch_a16_v4<4>(w, d_q, d_d, d_y, s);
        case 8: return launch_a16_v4<8>(w, d_q, d_d, d_y, s);
        default: return FP4_ERR_UNSUPPORTED;
        }
    }
    if (variant == 7) { /* production: the fastest measured kernel per width (bench/gpu.md) */
        switch (n_cols) {
        case 1: return launch_a16_dp4a<1, 2, a16_dot_split>(w, d_q, d_d, d_y, s);
        case 2: return launch_a16_dp4a<2, 1, a16_dot_split>(w, d_q, d_d, d_y, s);
        case 4: return launch_a16_dp4a<4, 2, dot_merged>(w, d_q, d_d, d_y, s);
        case 8: return launch_a16_dp4a<8, 2, dot_merged>(w, d_q, d_d, d_y, s);
        default: return FP4_ERR_UNSUPPORTED;
        }
    }
    if (variant == 5 || variant == 6) { /* 6: two rows per warp at one column */
        switch (n_cols) {
        case 1:
            return variant == 6 ? launch_a16_dp4a<1, 2, a16_dot_split>(w, d_q, d_d, d_y, s)
                                : launch_a16_dp4a<1, 1, a16_dot_split>(w, d_q, d_d, d_y, s);
        case 2: return launch_a16_dp4a<2, 1, a16_dot_split>(w, d_q, d_d, d_y, s);
        case 4: return launch_a16_dp4a<4, 2, a16_dot_split>(w, d_q, d_d, d_y, s);
        case 8: return launch_a16_dp4a<8, 2, a16_dot_split>(w, d_q, d_d, d_y, s);
        default: return FP4_ERR_UNSUPPORTED;
        }
    }
    switch (n_cols) {
    case 1: return launch_a16_dp4a<1, 1, dot_merged>(w, d_q, d_d, d_y, s);
    case 2: return launch_a16_dp4a<2, 1, dot_merged>(w, d_q, d_d, d_y, s);
    case 4: return launch_a16_dp4a<4, 2, dot_merged>(w, d_q, d_d, d_y, s);
    case 8: return launch_a16_dp4a<8, 2, dot_merged>(w, d_q, d_d, d_y, s);
    default: return FP4_ERR_UNSUPPORTED;
    }
}

fp4_status lab_exact(int variant, const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols, float *d_y,
                            const fp4_cuda_scratch *s, cudaStream_t stream) {
    if (!w || !d_x || !d_y || !s || !s->d_base || n_cols < 1) return FP4_ERR_INVALID_ARG;
    if (w->type != FP4_TYPE_NVFP4_E2M1 || !w->d_payload || !w->d_scales) return FP4_ERR_INVALID_ARG;
    if (w->n_in <= 0 || w->n_in % 256 || w->k_pad != w->n_in) return FP4_ERR_SHAPE;
    if (w->payload_stride % 128 || w->scale_stride % 16 || !fp4_aligned16(w->d_payload) ||
        !fp4_aligned16(d_x))
        return FP4_ERR_INVALID_ARG;
    /* variants 8, 9 and 3: up to 16 columns per launch, any count; the others 1, 2, 4, 8 */
    const int wide = variant == 8 || variant == 9 || variant == 3;
    if (wide && !fp4_aligned16(w->d_scales)) return FP4_ERR_INVALID_ARG;
    const int64_t chunk = variant == 1 ? 1 : wide ? (n_cols < 16 ? n_cols : 16)
                                               : (n_cols >= 8 ? 8 : n_cols >= 4 ? 4 : n_cols >= 2 ? 2 : 1);
    if (FP4_CU_COUNTER_BYTES + lab_exact_scratch(w, chunk) > s->bytes) return FP4_ERR_INVALID_ARG;
    int8_t *q = (int8_t *)s->d_base + FP4_CU_COUNTER_BYTES;
    float *d = (float *)((uint8_t *)q + FP4_CU_ALIGN((size_t)(chunk * w->k_pad)));
    for (int64_t c0 = 0; c0 < n_cols;) {
        int64_t nc = n_cols - c0;
        nc = variant == 1 ? 1 : wide ? (nc < 16 ? nc : 16) : nc >= 8 ? 8 : nc >= 4 ? 4 : nc >= 2 ? 2 : 1;
        const int frag = variant == 8 || variant == 9 || (variant == 3 && nc >= 3);
        fp4_status st =
            fp4_cu_q8k_quantize(d_x + c0 * w->n_in, w->n_in, w->k_pad, nc, q, d, NULL, frag, stream);
        if (st == FP4_OK) st = lab_exact_matvec(variant, w, q, d, nc, d_y + c0 * w->n_out, stream);
        if (st != FP4_OK) return st;
        c0 += nc;
    }
    return FP4_OK;
}
