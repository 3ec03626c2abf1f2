/* dense_mma.cuh — the BF16 weight matvec of 2..16 columns on the tensor cores (native mode's LM
 * head when several sequences decode together): the kernel template and its launcher, shared by
 * the route (dense_mma.cu) and the kernel lab (dev/cuda/lab_head.cu), which instantiates other
 * shapes.
 *
 * Why: at 8 columns the f32 FMA kernel (dense.cu) is bound by its FMAs and activation loads, not
 * by the weight bytes. Here mma.sync m16n8k16 (bf16 x bf16 -> f32) does the products, with the
 * weights as the A operand (16 rows x 16 values) loaded straight from global memory: a lane loads
 * 16 bytes (8 consecutive values) of one row per 16-byte load, so a warp's load instruction reads
 * 64 bytes of each of 8 rows. The k order inside a 32-value step is permuted the same way in A and
 * B (the dot's order is free in native mode): lane (g = lane/4, t = lane%4) holds values
 * 8t..8t+7 of rows g and g+8, and the first MMA of the step takes its values 8t+0..3 as the
 * fragment's k = 2t, 2t+1, 2t+8, 2t+9, the second MMA values 8t+4..7. The B fragment of column g
 * is then the same 8 activation values of that lane, so activations load as two float4.
 *
 * Numerics: each f32 activation is split into hi = bf16(x) and lo = bf16(x - hi) (x - hi is exact
 * in f32; NS = 3 adds a third term), and every step does one MMA per term into the same f32
 * accumulators: the activation keeps ~16 of its 24 bits (3 terms: all of them). bf16 has f32's
 * exponent range, so 1e6 or 1e-6 activations neither overflow nor lose bits; |x| past bf16's
 * largest finite value (3.39e38) becomes inf (then lo = 0, not NaN). The tensor core's own f32
 * accumulation truncates, so the MMA accumulators restart every DM_FLUSH steps (256 values) and
 * are added to an f32 sum with __fadd_rn: under a pessimistic model of the truncation that halves
 * the error (nrmse ~2.4e-6 against an f64 dot at n_in 4096, vs ~2.4e-7 for the FMA kernel). Every
 * column is computed the same way whatever the column count or its place in the tile, and the
 * order of every sum is fixed: the same bits run to run.
 *
 * mma.sync bf16 exists from sm_80, the library's oldest target (the compute_80 PTX), so the kernel
 * needs no architecture guard; griddepcontrol (PDL) is guarded inside fp4_pdl_wait/trigger.
 *
 * F16 weights stay on f16.dense: an f16 MMA needs f16 activations, whose hi/lo split would
 * overflow past 65504, and widening the weights to bf16 would lose 3 mantissa bits. */
#ifndef FP4_CUDA_DENSE_MMA_CUH
#define FP4_CUDA_DENSE_MMA_CUH

#include "common.cuh"
#include <cuda_bf16.h>

#define DM_STEP 32 /* row values per k-step: 4 lanes x 8 */
#define DM_FLUSH 8 /* k-steps (256 values) per MMA accumulation, then added to the f32 sum */
#define DM_WARPS 4 /* warps a block (128 threads: fine-grained occupancy at ~128 registers) */
#define DM_MAX_COLS 16

/* 16 weight bytes: read once, so kept out of L1 (which then holds the activations every warp of
 * the SM re-reads). The weights are never written by an earlier kernel of a step, so this load
 * may be issued before the PDL wait. A warp's load reads 64 bytes of each of 8 rows 8 KB apart;
 * with PF 1 the L2 fetches the aligned 256 bytes around each, so the row's next three k-steps
 * come from the L2 (CLAIMS head-1). */
template <int PF = 0> static __device__ __forceinline__ uint4 dm_ldg_stream(const void *p) {
    uint4 v;
    if (PF) /* PF 1: the L2 fetches the 256-byte block around it (the row's next k-steps) */
        asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
            : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
            : "l"(p));
    else
        asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
            : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
            : "l"(p));
    return v;
}

/* D += A*B, m16n8k16, bf16 inputs, f32 accumulators (sm_80+). */
static __device__ __forceinline__ void dm_mma_bf16(float d[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                                   uint32_t a3, uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* Two f32 -> bf16x2 (round to nearest even; a in the low half) and the two values back in f32. */
static __device__ __forceinline__ uint32_t dm_bf16x2(float a, float b, float *fa, float *fb) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    const uint32_t u = *reinterpret_cast<const uint32_t *>(&h);
    *fa = __uint_as_float(u << 16);
    *fb = __uint_as_float(u & 0xFFFF0000u);
    return u;
}

/* Eight activations (two float4, values 8t..8t+7 of one column) into NS bf16x2 terms:
 * b[s][p] holds values 2p, 2p+1 of term s; the terms add up to x (NS = 3: exactly; NS = 2:
 * to ~2^-16 relative). A non-finite hi leaves the later terms 0 (inf stays inf, not NaN). */
template <int NS> static __device__ __forceinline__ void dm_split(const float4 xv[2], uint32_t b[NS][4]) {
    float r[8] = {xv[0].x, xv[0].y, xv[0].z, xv[0].w, xv[1].x, xv[1].y, xv[1].z, xv[1].w};
#pragma unroll
    for (int s = 0; s < NS; s++)
#pragma unroll
        for (int p = 0; p < 4; p++) {
            float f0, f1;
            b[s][p] = dm_bf16x2(r[2 * p], r[2 * p + 1], &f0, &f1);
            if (s + 1 < NS) {
                r[2 * p] = fabsf(f0) < INFINITY ? __fsub_rn(r[2 * p], f0) : 0.0f;
                r[2 * p + 1] = fabsf(f1) < INFINITY ? __fsub_rn(r[2 * p + 1], f1) : 0.0f;
            }
        }
}

/* One k-step's loads into registers: weights of rows g and g+8 of R row tiles, activations of
 * columns g and g+8 (tiles j < NT) where the column exists (zeros otherwise). */
template <int R, int PF = 0>
static __device__ __forceinline__ void dm_load_w(const uint8_t *const pw[R][2], int64_t step,
                                                 uint4 wv[R][2]) {
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int h = 0; h < 2; h++)
            wv[r][h] = dm_ldg_stream<PF>(pw[r][h] + step * (DM_STEP * 2));
}
template <int NT>
static __device__ __forceinline__ void dm_load_x(const float *const px[NT], const bool xon[NT], int64_t step,
                                                 float4 xv[NT][2]) {
#pragma unroll
    for (int j = 0; j < NT; j++) {
        if (xon[j]) {
            const float4 *p = reinterpret_cast<const float4 *>(px[j] + step * DM_STEP);
            xv[j][0] = __ldg(p);
            xv[j][1] = __ldg(p + 1);
        } else {
            xv[j][0] = xv[j][1] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
    }
}

/* The MMAs of one k-step: per row tile, column tile and k16 half, one per term, in term order. */
template <int NT, int R, int NS>
static __device__ __forceinline__ void dm_step(const uint4 wv[R][2], const float4 xv[NT][2],
                                               float acc[R][NT][4]) {
    uint32_t b[NT][NS][4];
#pragma unroll
    for (int j = 0; j < NT; j++)
        dm_split<NS>(xv[j], b[j]);
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int s = 0; s < NS; s++) {
                dm_mma_bf16(acc[r][j], wv[r][0].x, wv[r][1].x, wv[r][0].y, wv[r][1].y, b[j][s][0],
                            b[j][s][1]);
                dm_mma_bf16(acc[r][j], wv[r][0].z, wv[r][1].z, wv[r][0].w, wv[r][1].w, b[j][s][2],
                            b[j][s][3]);
            }
}

template <int NT, int R>
static __device__ __forceinline__ void dm_flush(float acc[R][NT][4], float tot[R][NT][4]) {
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                tot[r][j][e] = __fadd_rn(tot[r][j][e], acc[r][j][e]);
                acc[r][j][e] = 0.0f;
            }
}

/* y (nc <= 8*NT columns of n_out) = W x for W (n_out, n_in) bf16, rows `stride` bytes apart
 * (16-aligned), n_in % 8 == 0, x (nc, n_in) f32 16-aligned. One warp per R row tiles of 16 rows;
 * U k-steps of loads in flight (a register ring: a slot is refilled right after its MMAs). Blocks
 * an SM: 4 (16 warps, <= 128 registers) where the shape's estimated registers (the load ring, the
 * accumulators and sums, the activation terms, ~30 others) fit 128, else 3 (<= 168: 128 would
 * spill; the production shape at 16 columns is one). */
#define DM_MIN_BLOCKS(NT, R, U, NS)                                                                          \
    ((U)*8 * ((R) + (NT)) + 8 * (R) * (NT) + 4 * (NS) * (NT) + 30 <= 128 ? 4 : 3)
template <int NT, int R, int U, int NS, int PF = 0>
static __global__ __launch_bounds__(DM_WARPS * 32, DM_MIN_BLOCKS(NT, R, U, NS)) void dense_mma_kernel(
    const uint8_t *__restrict__ w, int64_t stride, int64_t n_out, int64_t n_in, const float *__restrict__ x,
    int nc, float *__restrict__ y) {
    fp4_pdl_trigger(); /* launched with PDL (the decode step's LM head): the next kernel may queue */
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int64_t row0 = (((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5) * (16 * R);
    if (row0 >= n_out) return;
    const uint8_t *pw[R][2];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int h = 0; h < 2; h++) { /* rows past n_out read the last row; their results are dropped */
            const int64_t row = row0 + 16 * r + 8 * h + g < n_out ? row0 + 16 * r + 8 * h + g : n_out - 1;
            pw[r][h] = w + row * stride + t * 16;
        }
    const float *px[NT];
    bool xon[NT];
#pragma unroll
    for (int j = 0; j < NT; j++) {
        xon[j] = 8 * j + g < nc;
        px[j] = x + (xon[j] ? 8 * j + g : 0) * n_in + t * 8;
    }
    const int64_t nfull = n_in / DM_STEP;
    uint4 wv[U][R][2];
    float4 xv[U][NT][2];
    float acc[R][NT][4], tot[R][NT][4];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[r][j][e] = tot[r][j][e] = 0.0f;
                /* the first weights before the PDL wait (no earlier kernel writes them); x (and y, which
                 * earlier kernels may read) only after it */
#pragma unroll
    for (int u = 0; u < U; u++)
        if (u < nfull) dm_load_w<R, PF>(pw, u, wv[u]);
    fp4_pdl_wait();
#pragma unroll
    for (int u = 0; u < U; u++)
        if (u < nfull) dm_load_x<NT>(px, xon, u, xv[u]);
    for (int64_t s0 = 0; s0 < nfull; s0 += U) {
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int64_t s = s0 + u;
            if (s < nfull) {
                dm_step<NT, R, NS>(wv[u], xv[u], acc);
                if (s + U < nfull) {
                    dm_load_w<R, PF>(pw, s + U, wv[u]);
                    dm_load_x<NT>(px, xon, s + U, xv[u]);
                }
                if ((s + 1) % DM_FLUSH == 0) dm_flush<NT, R>(acc, tot);
            }
        }
    }
    /* the last n_in % 32 values (a multiple of 8): lanes t < tail hold one 8-value chunk each,
     * the others zeros (never a load past the row) */
    const int tail = (int)((n_in % DM_STEP) / 8);
    if (tail) {
        uint4 tw[R][2];
        float4 tx[NT][2];
        if (t < tail) {
            dm_load_w<R>(pw, nfull, tw);
            dm_load_x<NT>(px, xon, nfull, tx);
        } else {
#pragma unroll
            for (int r = 0; r < R; r++)
                tw[r][0] = tw[r][1] = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
            for (int j = 0; j < NT; j++)
                tx[j][0] = tx[j][1] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
        dm_step<NT, R, NS>(tw, tx, acc);
    }
    dm_flush<NT, R>(acc, tot);
    /* accumulator e of tile (r, j): row 16r + g + 8(e/2), column 8j + 2t + e%2 */
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int64_t row = row0 + 16 * r + g + 8 * (e >> 1);
                const int col = 8 * j + 2 * t + (e & 1);
                if (row < n_out && col < nc) y[(int64_t)col * n_out + row] = tot[r][j][e];
            }
}

/* One launch of up to 8*NT columns (the caller checked types, shapes and alignment). */
template <int NT, int R, int U, int NS, int PF = 0>
static fp4_status launch_dense_mma(const fp4_cuda_tensor *t, const float *x, int nc, float *y,
                                   cudaStream_t s) {
    const int64_t warps = ((t->n_out + 15) / 16 + R - 1) / R;
    return fp4_cu_launch(dim3((unsigned)((warps + DM_WARPS - 1) / DM_WARPS)), dim3(DM_WARPS * 32), 0, s, 1,
                         dense_mma_kernel<NT, R, U, NS, PF>, t->d_payload, t->payload_stride, t->n_out,
                         t->n_in, x, nc, y);
}

#endif /* FP4_CUDA_DENSE_MMA_CUH */
