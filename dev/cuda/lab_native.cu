/* lab_native.cu — the kernel lab's native A16 variants (SPEC §6). Production (the route
 * nvfp4.a16.native.mma: native.15 at 1 column, native.14 above) lives in src/cuda/a16_native.cu;
 * variants 11..13 and 15..16 instantiate its kernel templates (native_tile.cuh, native_dp2a.cuh)
 * with other shapes, the others are the lab's own kernels. bench/gpu.md has their measurements.
 *
 *   native.1   native_plain_kernel: warp per row, f32 decode and FMA (the baseline, any width)
 *   native.2   native_mma_kernel<MT, NT, U>: weights are the B operand (NT tiles of 8 rows per
 *              warp), activations the A operand (MT tiles of 16 columns); 8 warps walk one K range
 *   native.3-6 native_v3_kernel: native.2 with a <= 8-column specialization, weight prefetch
 *              (register double buffer), occupancy-planned whole-wave split-K; 4 configurations
 *   native.7-9 native_v4_kernel (<= 8 columns per launch): weights are the A operand (16 rows per
 *              warp, no padded operand slots), decoded through e5m2-style bytes placed by PRMT
 *   native.10  native.7 up to 8 columns, native.2 above (round-1 production)
 *   native.11  native_tile_kernel<2, 1, 4> in chunks of 8; native.12 <4, NT, 3> in chunks of 32;
 *   native.13  <2, NT, 4> in chunks of 32; native.14 = 11 up to 8 columns, 12 above (round 2-4)
 *   native.15  native_dp2a_kernel (R 2) in chunks of 4; native.16 the same with R 4
 * Each lane of the MMA kernels loads 16 payload bytes of a row per 128-value segment (a quad of
 * lanes covers 64 contiguous bytes) and the two scale bytes of those 32 values.
 */
#include "lab_variants.h"
#include "cuda/native_dp2a.cuh"
#include "cuda/native_tile.cuh"

#define N_WARPS 8

/* 8 activations x[k..k+7] (f32) of one column -> the four f16x2 pairs (k+h, k+h+4). */
/* 8 activations x[k..k+7] (f32) of one column -> the four f16x2 pairs (k+h, k+h+4). */
static __device__ __forceinline__ void act_pairs(const float *p, bool ok, uint32_t out[4]) {
    float4 lo = make_float4(0.f, 0.f, 0.f, 0.f), hi = lo;
    if (ok) {
        lo = __ldg(reinterpret_cast<const float4 *>(p));
        hi = __ldg(reinterpret_cast<const float4 *>(p + 4));
    }
    out[0] = fp4_f2_to_h2(lo.x, hi.x);
    out[1] = fp4_f2_to_h2(lo.y, hi.y);
    out[2] = fp4_f2_to_h2(lo.z, hi.z);
    out[3] = fp4_f2_to_h2(lo.w, hi.w);
}

/* One m-tile (activation pairs pa: token g, pb: token g+8) against NT weight tiles (B operands). */
template <int NT>
static __device__ __forceinline__ void mma_b_tiles(float (&acc)[NT][4], const uint32_t (&pa)[4],
                                                   const uint32_t (&pb)[4], const uint32_t (&bw)[NT][4]) {
    const uint32_t a_lo[4] = {pa[0], pb[0], pa[1], pb[1]};
    const uint32_t a_hi[4] = {pa[2], pb[2], pa[3], pb[3]};
#pragma unroll
    for (int t = 0; t < NT; t++) {
        fp4_mma_f16(acc[t], a_lo, bw[t][0], bw[t][1]);
        fp4_mma_f16(acc[t], a_hi, bw[t][2], bw[t][3]);
    }
}

/* Eight codes of one payload word as four B-operand f16x2 words, times the block scale s. */
static __device__ __forceinline__ void b_word(uint32_t word, uint32_t s, uint32_t (&bw)[4]) {
    fp4_e2m1x8_to_h2(word, bw);
#pragma unroll
    for (int h = 0; h < 4; h++) bw[h] = fp4_h2_mul(bw[h], s);
}

/* The epilogue of native.2 and native.3 (weights as the B operand): C of m-tile m, n-tile t:
 * i=0 (token g, row 2q), 1 (token g, row 2q+1), 2 (token g+8, row 2q), 3 (token g+8, row 2q+1);
 * split-K over blockIdx.y (the last-arriving block adds the slices in slice order). */
template <int MT, int NT>
static __device__ __forceinline__ void b_operand_store(const float (&acc)[MT][NT][4], int64_t wrow0, int g,
                                                       int q, int ncols, int64_t n_out, float scale2,
                                                       float *y, float *partials, unsigned *counters) {
    /* f(m, t, i, tok, row) for every output of the lane that exists */
    auto each = [&](auto f) {
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
            for (int t = 0; t < NT; t++)
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const int tok = m * 16 + g + (i >> 1) * 8;
                    const int64_t row = wrow0 + t * 8 + q * 2 + (i & 1);
                    if (tok < ncols && row < n_out) f(m, t, i, tok, row);
                }
    };
    const int n_split = gridDim.y;
    if (n_split == 1) {
        each([&](int m, int t, int i, int tok, int64_t row) {
            y[(int64_t)tok * n_out + row] = __fmul_rn(__fmul_rn(acc[m][t][i], 16384.0f), scale2);
        });
        return;
    }
    each([&](int m, int t, int i, int tok, int64_t row) {
        partials[((int64_t)blockIdx.y * ncols + tok) * n_out + row] = acc[m][t][i];
    });
    if (!fp4_splitk_arrive(counters + blockIdx.x, n_split)) return;
    each([&](int, int, int, int tok, int64_t row) {
        const float sum = fp4_splitk_sum(partials, n_split, ncols, n_out, tok, row);
        y[(int64_t)tok * n_out + row] = __fmul_rn(__fmul_rn(sum, 16384.0f), scale2);
    });
}

template <int MT, int NT, int U>
static __global__ __launch_bounds__(256) void native_mma_kernel(
    const uint8_t *__restrict__ payload, const uint8_t *__restrict__ scales, int64_t pstride, int64_t sstride,
    int64_t n_out, int64_t n_in, int nseg, int seg_per_split, float scale2, const float *__restrict__ x,
    int ncols, float *__restrict__ y, float *partials, unsigned *counters) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    const int64_t block_row0 = (int64_t)blockIdx.x * (N_WARPS * NT * 8);
    const int64_t wrow0 = block_row0 + warp * NT * 8;
    const int seg_begin = blockIdx.y * seg_per_split;
    const int seg_end = min(nseg, seg_begin + seg_per_split);

    const uint8_t *wp[NT];
    const uint8_t *sp[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) {
        int64_t row = wrow0 + t * 8 + g;
        if (row >= n_out) row = n_out - 1; /* clamped reads; results discarded */
        wp[t] = payload + row * pstride + q * 16;
        sp[t] = scales + row * sstride + q * 2;
    }
    float acc[MT][NT][4];
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int t = 0; t < NT; t++)
#pragma unroll
            for (int i = 0; i < 4; i++) acc[m][t][i] = 0.0f;

    for (int seg0 = seg_begin; seg0 < seg_end; seg0 += U) {
        uint4 wv[U][NT];
        uint32_t sv[U][NT];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const bool ok = seg0 + u < seg_end;
#pragma unroll
            for (int t = 0; t < NT; t++) {
                wv[u][t] = ok ? fp4_ldg16(wp[t] + (int64_t)(seg0 + u) * 64) : make_uint4(0u, 0u, 0u, 0u);
                sv[u][t] = ok ? (uint32_t)__ldg(
                                    reinterpret_cast<const unsigned short *>(sp[t] + (int64_t)(seg0 + u) * 8))
                              : 0u;
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            if (seg0 + u >= seg_end) break; /* warp-uniform */
            const int64_t k0 = (int64_t)(seg0 + u) * SEG + q * 32;
            uint32_t sA[NT], sB[NT]; /* the lane's two block scales, each broadcast to both halves */
#pragma unroll
            for (int t = 0; t < NT; t++) {
                fp4_scale_pair_h2(sv[u][t], &sA[t], &sB[t]);
            }
#pragma unroll
            for (int wi = 0; wi < 4; wi++) { /* word wi of the 16 bytes: values 8wi..8wi+7 */
                uint32_t bw[NT][4];
#pragma unroll
                for (int t = 0; t < NT; t++) b_word(fp4_word(wv[u][t], wi), wi < 2 ? sA[t] : sB[t], bw[t]);
                const bool kin = k0 + wi * 8 + 8 <= n_in;
#pragma unroll
                for (int m = 0; m < MT; m++) {
                    const int ta = m * 16 + g, tb = ta + 8;
                    uint32_t pa[4], pb[4];
                    act_pairs(x + (int64_t)ta * n_in + k0 + wi * 8, kin && ta < ncols, pa);
                    act_pairs(x + (int64_t)tb * n_in + k0 + wi * 8, kin && tb < ncols, pb);
                    mma_b_tiles<NT>(acc[m], pa, pb, bw);
                }
            }
        }
    }

    b_operand_store<MT, NT>(acc, wrow0, g, q, ncols, n_out, scale2, y, partials, counters);
}

/* ---- native.3: the same contraction, tuned ----------------------------------------------------
 * HALF (<= 8 columns): the tokens g+8 of the MMA are known zero, so their loads and conversions
 * are not emitted; 32-bit offsets hoisted out of the loop; the next U segments' weights are
 * loaded before the current U are computed (register double buffer); NW warps per block. */
template <int MT, int NT, int U, bool HALF, int NW>
static __global__ __launch_bounds__(NW * 32) void native_v3_kernel(
    const uint8_t *__restrict__ payload, const uint8_t *__restrict__ scales, int64_t pstride, int64_t sstride,
    int64_t n_out, int n_in, int nseg, int seg_per_split, float scale2, const float *__restrict__ x,
    int ncols, float *__restrict__ y, float *partials, unsigned *counters) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    const int64_t wrow0 = (int64_t)blockIdx.x * (NW * NT * 8) + warp * NT * 8;
    const int seg_begin = blockIdx.y * seg_per_split;
    const int seg_end = min(nseg, seg_begin + seg_per_split);
    const uint8_t *wp[NT];
    const uint8_t *sp[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) {
        int64_t row = wrow0 + t * 8 + g;
        if (row >= n_out) row = n_out - 1;
        wp[t] = payload + row * pstride + q * 16;
        sp[t] = scales + row * sstride + q * 2;
    }
    /* per m-tile: this lane's two tokens (g, g+8); a null base means a zero column */
    const float *xa[MT];
    const float *xb[MT];
#pragma unroll
    for (int m = 0; m < MT; m++) {
        const int ta = m * 16 + g, tb = ta + 8;
        xa[m] = ta < ncols ? x + (int64_t)ta * n_in + q * 32 : nullptr;
        xb[m] = (!HALF && tb < ncols) ? x + (int64_t)tb * n_in + q * 32 : nullptr;
    }
    const int kmax = n_in - q * 32; /* offsets (relative to the lane's base) below this are real */
    float acc[MT][NT][4];
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int t = 0; t < NT; t++)
#pragma unroll
            for (int i = 0; i < 4; i++) acc[m][t][i] = 0.0f;

    uint4 nw[U][NT];
    uint32_t ns[U][NT];
#pragma unroll
    for (int u = 0; u < U; u++)
#pragma unroll
        for (int t = 0; t < NT; t++) {
            const bool ok = seg_begin + u < seg_end;
            nw[u][t] = ok ? fp4_ldg16(wp[t] + (seg_begin + u) * 64) : make_uint4(0u, 0u, 0u, 0u);
            ns[u][t] =
                ok ? (uint32_t)__ldg(reinterpret_cast<const unsigned short *>(sp[t] + (seg_begin + u) * 8))
                   : 0u;
        }
    for (int seg0 = seg_begin; seg0 < seg_end; seg0 += U) {
        uint4 cw[U][NT];
        uint32_t cs[U][NT];
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int t = 0; t < NT; t++) {
                cw[u][t] = nw[u][t];
                cs[u][t] = ns[u][t];
            }
        const int nxt = seg0 + U;
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int t = 0; t < NT; t++) {
                const bool ok = nxt + u < seg_end;
                nw[u][t] = ok ? fp4_ldg16(wp[t] + (nxt + u) * 64) : make_uint4(0u, 0u, 0u, 0u);
                ns[u][t] =
                    ok ? (uint32_t)__ldg(reinterpret_cast<const unsigned short *>(sp[t] + (nxt + u) * 8))
                       : 0u;
            }
#pragma unroll
        for (int u = 0; u < U; u++) {
            if (seg0 + u >= seg_end) break;
            const int koff = (seg0 + u) * SEG;
            uint32_t sA[NT], sB[NT];
#pragma unroll
            for (int t = 0; t < NT; t++) {
                fp4_scale_pair_h2(cs[u][t], &sA[t], &sB[t]);
            }
#pragma unroll
            for (int wi = 0; wi < 4; wi++) {
                uint32_t bw[NT][4];
#pragma unroll
                for (int t = 0; t < NT; t++) b_word(fp4_word(cw[u][t], wi), wi < 2 ? sA[t] : sB[t], bw[t]);
                const int ko = koff + wi * 8;
                const bool kin = ko + 8 <= kmax;
#pragma unroll
                for (int m = 0; m < MT; m++) {
                    uint32_t pa[4], pb[4] = {0u, 0u, 0u, 0u};
                    act_pairs(xa[m] + ko, kin && xa[m] != nullptr, pa);
                    if (!HALF) act_pairs(xb[m] + ko, kin && xb[m] != nullptr, pb);
                    mma_b_tiles<NT>(acc[m], pa, pb, bw);
                }
            }
        }
    }

    b_operand_store<MT, NT>(acc, wrow0, g, q, ncols, n_out, scale2, y, partials, counters);
}

/* ---- native.7: weights as the MMA's A operand (fp4_e2m1x8_to_h2_bytes, native_tile.cuh) ---- */
template <int U, int NW>
static __global__ __launch_bounds__(NW * 32) void native_v4_kernel(
    const uint8_t *__restrict__ payload, const uint8_t *__restrict__ scales, int64_t pstride, int64_t sstride,
    int64_t n_out, int n_in, int nseg, int seg_per_split, float scale2, const float *__restrict__ x,
    int ncols, float *__restrict__ y, float *partials, unsigned *counters) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    const int64_t wrow0 = (int64_t)blockIdx.x * (NW * 16) + warp * 16;
    const int seg_begin = blockIdx.y * seg_per_split;
    const int seg_end = min(nseg, seg_begin + seg_per_split);
    const uint8_t *wp[2];
    const uint8_t *sp[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        int64_t row = wrow0 + g + h * 8;
        if (row >= n_out) row = n_out - 1;
        wp[h] = payload + row * pstride + q * 16;
        sp[h] = scales + row * sstride + q * 2;
    }
    const float *xg = g < ncols ? x + (int64_t)g * n_in + q * 32 : nullptr;
    const int kmax = n_in - q * 32;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    uint4 nw[U][2];
    uint32_t ns[U][2];
#pragma unroll
    for (int u = 0; u < U; u++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const bool ok = seg_begin + u < seg_end;
            nw[u][h] = ok ? fp4_ldg16(wp[h] + (seg_begin + u) * 64) : make_uint4(0u, 0u, 0u, 0u);
            ns[u][h] =
                ok ? (uint32_t)__ldg(reinterpret_cast<const unsigned short *>(sp[h] + (seg_begin + u) * 8))
                   : 0u;
        }
    for (int seg0 = seg_begin; seg0 < seg_end; seg0 += U) {
        uint4 cw[U][2];
        uint32_t cs[U][2];
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                cw[u][h] = nw[u][h];
                cs[u][h] = ns[u][h];
            }
        const int nxt = seg0 + U;
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const bool ok = nxt + u < seg_end;
                nw[u][h] = ok ? fp4_ldg16(wp[h] + (nxt + u) * 64) : make_uint4(0u, 0u, 0u, 0u);
                ns[u][h] =
                    ok ? (uint32_t)__ldg(reinterpret_cast<const unsigned short *>(sp[h] + (nxt + u) * 8))
                       : 0u;
            }
#pragma unroll
        for (int u = 0; u < U; u++) {
            if (seg0 + u >= seg_end) break;
            const int koff = (seg0 + u) * SEG;
            uint32_t sA[2], sB[2];
#pragma unroll
            for (int h = 0; h < 2; h++) {
                fp4_scale_pair_h2(cs[u][h], &sA[h], &sB[h]);
            }
#pragma unroll
            for (int wi = 0; wi < 4; wi++) {
                uint32_t p0[4], p1[4];
                const uint32_t w0 = fp4_word(cw[u][0], wi);
                const uint32_t w1 = fp4_word(cw[u][1], wi);
                fp4_e2m1x8_to_h2_bytes(w0, p0);
                fp4_e2m1x8_to_h2_bytes(w1, p1);
                const uint32_t s0 = wi < 2 ? sA[0] : sB[0], s1 = wi < 2 ? sA[1] : sB[1];
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    p0[k] = fp4_h2_mul(p0[k], s0);
                    p1[k] = fp4_h2_mul(p1[k], s1);
                }
                const int ko = koff + wi * 8;
                float4 lo = make_float4(0.f, 0.f, 0.f, 0.f), hi = lo;
                if (xg != nullptr && ko + 8 <= kmax) {
                    lo = __ldg(reinterpret_cast<const float4 *>(xg + ko));
                    hi = __ldg(reinterpret_cast<const float4 *>(xg + ko + 4));
                }
                const uint32_t a0[4] = {p0[0], p1[0], p0[1], p1[1]};
                const uint32_t a1[4] = {p0[2], p1[2], p0[3], p1[3]};
                fp4_mma_f16(acc, a0, fp4_f2_to_h2(lo.x, lo.z), fp4_f2_to_h2(hi.x, hi.z));
                fp4_mma_f16(acc, a1, fp4_f2_to_h2(lo.y, lo.w), fp4_f2_to_h2(hi.y, hi.w));
            }
        }
    }
    /* C: i=0 (row g, column 2q), 1 (row g, column 2q+1), 2 (row g+8, 2q), 3 (row g+8, 2q+1) */
    const int n_split = gridDim.y;
    if (n_split == 1) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int tok = q * 2 + (i & 1);
            const int64_t row = wrow0 + g + (i >> 1) * 8;
            if (tok < ncols && row < n_out)
                y[(int64_t)tok * n_out + row] = __fmul_rn(__fmul_rn(acc[i], 16384.0f), scale2);
        }
        return;
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int tok = q * 2 + (i & 1);
        const int64_t row = wrow0 + g + (i >> 1) * 8;
        if (tok < ncols && row < n_out) partials[((int64_t)blockIdx.y * ncols + tok) * n_out + row] = acc[i];
    }
    if (!fp4_splitk_arrive(counters + blockIdx.x, n_split)) return;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int tok = q * 2 + (i & 1);
        const int64_t row = wrow0 + g + (i >> 1) * 8;
        if (tok >= ncols || row >= n_out) continue;
        const float sum = fp4_splitk_sum(partials, n_split, ncols, n_out, tok, row);
        y[(int64_t)tok * n_out + row] = __fmul_rn(__fmul_rn(sum, 16384.0f), scale2);
    }
}

/* ---- variant 1: plain ---------------------------------------------------------------------------- */

static __global__ __launch_bounds__(256) void native_plain_kernel(const uint8_t *__restrict__ payload,
                                                                  const uint8_t *__restrict__ scales,
                                                                  int64_t pstride, int64_t sstride,
                                                                  int64_t n_out, int64_t n_in, int64_t k_pad,
                                                                  float scale2, const float *__restrict__ x,
                                                                  float *__restrict__ y) {
    const int lane = threadIdx.x & 31;
    const int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (row >= n_out) return;
    const uint8_t *prow = payload + row * pstride;
    const uint8_t *srow = scales + row * sstride;
    float acc = 0.0f;
    for (int64_t ch = lane; ch < k_pad / 32; ch += 32) {
        const uint4 wv = fp4_ldg16(prow + ch * 16);
        const uint32_t two = __ldg(reinterpret_cast<const unsigned short *>(srow + ch * 2));
        const uint32_t w[4] = {wv.x, wv.y, wv.z, wv.w};
#pragma unroll
        for (int grp = 0; grp < 2; grp++) {
            const int64_t k = ch * 32 + grp * 16;
            if (k >= n_in) break;
            const float s = fp4_e4m3_to_f32((two >> (8 * grp)) & 0xFFu);
            float bsum = 0.0f;
#pragma unroll
            for (int i = 0; i < 16; i++) {
                const uint32_t code = (w[grp * 2 + (i >> 3)] >> (4 * (i & 7))) & 15u;
                bsum = __fmaf_rn(fp4_e2m1_to_f32(code), __ldg(x + k + i), bsum);
            }
            acc = __fmaf_rn(bsum, s, acc);
        }
    }
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1) acc = __fadd_rn(acc, __shfl_xor_sync(0xFFFFFFFFu, acc, m));
    if (lane == 0) y[row] = __fmul_rn(acc, scale2);
}

/* ---- launchers ------------------------------------------------------------------------------------- */

struct native_cfg {
    int mt, nt;
};

static native_cfg pick_cfg(int64_t ncols) {
    if (ncols <= 8) return {1, 2};
    if (ncols <= 16) return {1, 4};
    if (ncols <= 32) return {2, 4};
    return {4, 4};
}

static int64_t rows_per_block(native_cfg c) { return (int64_t)N_WARPS * c.nt * 8; }

static void plan(const fp4_cuda_tensor *w, native_cfg c, int64_t *rb, int *ks, int *sps) {
    const int64_t nseg = w->k_pad / SEG;
    *rb = (w->n_out + rows_per_block(c) - 1) / rows_per_block(c);
    int k = lab_plan_splits(*rb, nseg, 2);
    if (*rb > (int64_t)(FP4_CU_COUNTER_BYTES / 4)) k = 1;
    *sps = (int)((nseg + k - 1) / k);
    *ks = (int)((nseg + *sps - 1) / *sps);
}

template <int MT, int NT, int U>
static fp4_status launch_mma(const fp4_cuda_tensor *w, const float *x, int64_t ncols, float *y, int64_t rb,
                             int ks, int sps, float *partials, unsigned *counters, cudaStream_t s) {
    native_mma_kernel<MT, NT, U><<<dim3((unsigned)rb, (unsigned)ks), 256, 0, s>>>(
        w->d_payload, w->d_scales, w->payload_stride, w->scale_stride, w->n_out, w->n_in,
        (int)(w->k_pad / SEG), sps, w->scale2, x, (int)ncols, y, partials, counters);
    FP4_CUDA_LAUNCHED();
    return FP4_OK;
}

/* v3 plan: blocks resident per SM measured for the instance; as many K slices as fill whole
 * waves (never a partial second wave), at least two segments per slice. */
template <int MT, int NT, int U, bool HALF, int NW>
static void v3_plan(const fp4_cuda_tensor *w, int ks_force, int64_t *rb, int *ks, int *sps) {
    static int per_sm = 0; /* per instance; a lab is one thread */
    if (!per_sm) {
        int n = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, native_v3_kernel<MT, NT, U, HALF, NW>, NW * 32,
                                                          0) != cudaSuccess ||
            n < 1)
            n = 1;
        per_sm = n;
    }
    int sms = fp4_cu_sm_count();
    if (sms <= 0) sms = 132;
    const int64_t nseg = w->k_pad / SEG, cap = (int64_t)per_sm * sms;
    *rb = (w->n_out + NW * NT * 8 - 1) / (NW * NT * 8);
    int64_t k = ks_force > 0 ? ks_force : (*rb >= cap ? 1 : cap / *rb);
    if (k > nseg / 2) k = nseg / 2;
    if (k > 64) k = 64;
    if (k < 1) k = 1;
    if (*rb > (int64_t)(FP4_CU_COUNTER_BYTES / 4)) k = 1;
    *sps = (int)((nseg + k - 1) / k);
    *ks = (int)((nseg + *sps - 1) / *sps);
}

template <int MT, int NT, int U, bool HALF, int NW>
static fp4_status launch_v3(const fp4_cuda_tensor *w, const float *x, int64_t nc, float *y,
                            const fp4_cuda_scratch *s, int ks_force, cudaStream_t st) {
    int64_t rb;
    int ks, sps;
    v3_plan<MT, NT, U, HALF, NW>(w, ks_force, &rb, &ks, &sps);
    if (ks > 1 &&
        FP4_CU_COUNTER_BYTES + FP4_CU_ALIGN((size_t)ks * (size_t)nc * (size_t)w->n_out * 4) > s->bytes)
        return FP4_ERR_INVALID_ARG;
    native_v3_kernel<MT, NT, U, HALF, NW><<<dim3((unsigned)rb, (unsigned)ks), NW * 32, 0, st>>>(
        w->d_payload, w->d_scales, w->payload_stride, w->scale_stride, w->n_out, (int)w->n_in,
        (int)(w->k_pad / SEG), sps, w->scale2, x, (int)nc, y,
        (float *)((uint8_t *)s->d_base + FP4_CU_COUNTER_BYTES), (unsigned *)s->d_base);
    FP4_CUDA_LAUNCHED();
    return FP4_OK;
}

template <int U, int NW>
static void v4_plan(const fp4_cuda_tensor *w, int64_t *rb, int *ks, int *sps) {
    static int per_sm = 0;
    if (!per_sm) {
        int n = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, native_v4_kernel<U, NW>, NW * 32, 0) !=
                cudaSuccess ||
            n < 1)
            n = 1;
        per_sm = n;
    }
    int sms = fp4_cu_sm_count();
    if (sms <= 0) sms = 132;
    const int64_t nseg = w->k_pad / SEG, cap = (int64_t)per_sm * sms;
    *rb = (w->n_out + NW * 16 - 1) / (NW * 16);
    int64_t k = *rb >= cap ? 1 : cap / *rb;
    if (k > nseg / 2) k = nseg / 2;
    if (k > 64) k = 64;
    if (k < 1) k = 1;
    if (*rb > (int64_t)(FP4_CU_COUNTER_BYTES / 4)) k = 1;
    *sps = (int)((nseg + k - 1) / k);
    *ks = (int)((nseg + *sps - 1) / *sps);
}

template <int U, int NW>
static fp4_status launch_v4(const fp4_cuda_tensor *w, const float *x, int64_t nc, float *y,
                            const fp4_cuda_scratch *s, cudaStream_t st) {
    int64_t rb;
    int ks, sps;
    v4_plan<U, NW>(w, &rb, &ks, &sps);
    if (ks > 1 &&
        FP4_CU_COUNTER_BYTES + FP4_CU_ALIGN((size_t)ks * (size_t)nc * (size_t)w->n_out * 4) > s->bytes)
        return FP4_ERR_INVALID_ARG;
    native_v4_kernel<U, NW><<<dim3((unsigned)rb, (unsigned)ks), NW * 32, 0, st>>>(
        w->d_payload, w->d_scales, w->payload_stride, w->scale_stride, w->n_out, (int)w->n_in,
        (int)(w->k_pad / SEG), sps, w->scale2, x, (int)nc, y,
        (float *)((uint8_t *)s->d_base + FP4_CU_COUNTER_BYTES), (unsigned *)s->d_base);
    FP4_CUDA_LAUNCHED();
    return FP4_OK;
}

template <int U, int NW> static int v4_slices(const fp4_cuda_tensor *w) {
    int64_t rb;
    int ks, sps;
    v4_plan<U, NW>(w, &rb, &ks, &sps);
    return ks;
}

/* cfg (lab sweep): 0 = NW 4, U 2 (production); 1 = NW 4, U 4; 2 = NW 8, U 2; 3 = NW 8, U 4 */
static fp4_status native_v3(int cfg, const fp4_cuda_tensor *w, const float *x, int64_t nc, float *y,
                            const fp4_cuda_scratch *s, cudaStream_t st) {
    if (nc <= 8) {
        switch (cfg) {
        case 1: return launch_v3<1, 2, 4, true, 4>(w, x, nc, y, s, 0, st);
        case 2: return launch_v3<1, 2, 2, true, 8>(w, x, nc, y, s, 0, st);
        case 3: return launch_v3<1, 2, 4, true, 8>(w, x, nc, y, s, 0, st);
        default: return launch_v3<1, 2, 2, true, 4>(w, x, nc, y, s, 0, st);
        }
    }
    if (nc <= 16) return launch_v3<1, 2, 2, false, 4>(w, x, nc, y, s, 0, st);
    if (nc <= 32) return launch_v3<2, 2, 2, false, 4>(w, x, nc, y, s, 0, st);
    return launch_v3<4, 2, 2, false, 4>(w, x, nc, y, s, 0, st);
}

template <int MT, int NT, int U, bool HALF, int NW> static int v3_slices(const fp4_cuda_tensor *w) {
    int64_t rb;
    int ks, sps;
    v3_plan<MT, NT, U, HALF, NW>(w, 0, &rb, &ks, &sps);
    return ks;
}

/* 11: MT 2, one n-tile (<= 8 columns per launch, chunks of 8); 12: MT 4, n-tiles for <= 32
 * columns per launch (chunks of 32); 13: 12's widths at MT 2 with 4 stages. */
static fp4_status native_tile(int variant, const fp4_cuda_tensor *w, const float *x, int64_t nc, float *y,
                              const fp4_cuda_scratch *s, cudaStream_t st) {
    if (variant == 11) return launch_tile<2, 1, 4>(w, x, nc, y, s, st);
    if (variant == 12) {
        if (nc <= 8) return launch_tile<4, 1, 3>(w, x, nc, y, s, st);
        if (nc <= 16) return launch_tile<4, 2, 3>(w, x, nc, y, s, st);
        return launch_tile<4, 4, 3>(w, x, nc, y, s, st);
    }
    if (nc <= 16) return launch_tile<2, 2, 4>(w, x, nc, y, s, st);
    return launch_tile<2, 4, 4>(w, x, nc, y, s, st);
}

fp4_status lab_native(int variant, const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols, float *d_y,
                         const fp4_cuda_scratch *s, cudaStream_t stream) {
    if (!w || !d_x || !d_y || n_cols < 1) return FP4_ERR_INVALID_ARG;
    if (w->type != FP4_TYPE_NVFP4_E2M1 || !w->d_payload || !w->d_scales) return FP4_ERR_INVALID_ARG;
    if (w->n_in <= 0 || w->n_in % 16 || w->k_pad % 256 || w->k_pad < w->n_in) return FP4_ERR_SHAPE;
    if (w->payload_stride % 128 || w->scale_stride % 16 || !fp4_aligned16(w->d_payload) ||
        !fp4_aligned16(d_x))
        return FP4_ERR_INVALID_ARG;
    if (variant == 1) {
        for (int64_t c = 0; c < n_cols; c++) {
            native_plain_kernel<<<(unsigned)((w->n_out * 32 + 255) / 256), 256, 0, stream>>>(
                w->d_payload, w->d_scales, w->payload_stride, w->scale_stride, w->n_out, w->n_in, w->k_pad,
                w->scale2, d_x + c * w->n_in, d_y + c * w->n_out);
            FP4_CUDA_LAUNCHED();
        }
        return FP4_OK;
    }
    if (!s || !s->d_base) return FP4_ERR_INVALID_ARG;
    if (variant == 15) return native_dp2a<2, 4>(w, d_x, n_cols, d_y, s, stream);
    if (variant == 16) return native_dp2a<4, 4>(w, d_x, n_cols, d_y, s, stream);
    if (variant == 14) { /* production: smem-staged tiles, 32 rows per block up to 8 columns, 64 above */
        if (n_cols <= 8) return lab_native(11, w, d_x, n_cols, d_y, s, stream);
        return lab_native(12, w, d_x, n_cols, d_y, s, stream);
    }
    if (variant ==
        10) { /* previous production: weights-as-A kernel up to 8 columns, the first MMA kernel above */
        if (n_cols <= 8) return lab_native(7, w, d_x, n_cols, d_y, s, stream);
        return lab_native(2, w, d_x, n_cols, d_y, s, stream);
    }
    if (variant >= 11 && variant <= 13) { /* smem-staged tiles: chunks of 8 (11) or 32 (12, 13) columns */
        const int64_t chunk = variant == 11 ? 8 : 32;
        for (int64_t c0 = 0; c0 < n_cols; c0 += chunk) {
            const int64_t nc = n_cols - c0 < chunk ? n_cols - c0 : chunk;
            const fp4_status st =
                native_tile(variant, w, d_x + c0 * w->n_in, nc, d_y + c0 * w->n_out, s, stream);
            if (st != FP4_OK) return st;
        }
        return FP4_OK;
    }
    if (variant >= 7 && variant <= 9) { /* v4: chunks of 8 columns (7: U 2 NW 4; 8: U 4 NW 4; 9: U 2 NW 8) */
        for (int64_t c0 = 0; c0 < n_cols; c0 += 8) {
            const int64_t nc = n_cols - c0 < 8 ? n_cols - c0 : 8;
            const float *xc = d_x + c0 * w->n_in;
            float *yc = d_y + c0 * w->n_out;
            const fp4_status st = variant == 8   ? launch_v4<4, 4>(w, xc, nc, yc, s, stream)
                                  : variant == 9 ? launch_v4<2, 8>(w, xc, nc, yc, s, stream)
                                                 : launch_v4<2, 4>(w, xc, nc, yc, s, stream);
            if (st != FP4_OK) return st;
        }
        return FP4_OK;
    }
    if (variant >= 3) {
        for (int64_t c0 = 0; c0 < n_cols; c0 += 64) {
            const int64_t nc = n_cols - c0 < 64 ? n_cols - c0 : 64;
            const fp4_status st =
                native_v3(variant - 3, w, d_x + c0 * w->n_in, nc, d_y + c0 * w->n_out, s, stream);
            if (st != FP4_OK) return st;
        }
        return FP4_OK;
    }
    for (int64_t c0 = 0; c0 < n_cols; c0 += 64) {
        const int64_t nc = n_cols - c0 < 64 ? n_cols - c0 : 64;
        const native_cfg cfg = pick_cfg(nc);
        int64_t rb;
        int ks, sps;
        plan(w, cfg, &rb, &ks, &sps);
        if (ks > 1 &&
            FP4_CU_COUNTER_BYTES + FP4_CU_ALIGN((size_t)ks * (size_t)nc * (size_t)w->n_out * 4) > s->bytes)
            return FP4_ERR_INVALID_ARG;
        float *partials = (float *)((uint8_t *)s->d_base + FP4_CU_COUNTER_BYTES);
        unsigned *counters = (unsigned *)s->d_base;
        const float *x = d_x + c0 * w->n_in;
        float *y = d_y + c0 * w->n_out;
        fp4_status st;
        if (cfg.mt == 1 && cfg.nt == 2)
            st = launch_mma<1, 2, 4>(w, x, nc, y, rb, ks, sps, partials, counters, stream);
        else if (cfg.mt == 1) st = launch_mma<1, 4, 2>(w, x, nc, y, rb, ks, sps, partials, counters, stream);
        else if (cfg.mt == 2) st = launch_mma<2, 4, 2>(w, x, nc, y, rb, ks, sps, partials, counters, stream);
        else st = launch_mma<4, 4, 2>(w, x, nc, y, rb, ks, sps, partials, counters, stream);
        if (st != FP4_OK) return st;
    }
    return FP4_OK;
}
