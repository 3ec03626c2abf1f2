/* gemv_native.cu — the native (fast) A16 path (SPEC §6): any column count (launches of <= 64).
 *
 * Production (variant 17, round 5): gemv_native1.cu's int16-activation dp2a kernel (variant 15)
 * at 1 column, variant 14 above. Variant 14 (round 2): variant 11 up to 8 columns, variant 12
 * above (bench/gpu.md has the measurements behind the choice). Variant 10 is the previous production (7 up to 8 columns, 2
 * above); variants 1..9, 13 are the lab's alternatives.
 *
 * Common to the MMA kernels (mma.sync m16n8k16, f16 operands, f32 accumulators):
 *   - each lane loads 16 payload bytes of a row per 128-value segment (a quad of lanes covers 64
 *     contiguous bytes) and the two scale bytes of those 32 values;
 *   - nibbles become f16 bit patterns by integer ops (e2m1 * 2^-14, exact), then one HMUL2 by the
 *     E4M3FN block scale, which is exact too: every product e2m1*scale is a multiple of 2^-10 with
 *     at most 6 significant bits, so e2m1*scale*2^-14 is an f16 (normal or subnormal);
 *   - the scale is folded into the weights before the MMA, so one MMA may mix values of several
 *     16-groups: its k slots are a fixed permutation of the lane's 32 values, applied identically to
 *     the activation fragment; activations are read as f32 and rounded to f16 in registers;
 *   - (acc * 2^14) * scale2 once per row at the end;
 *   - split-K over blockIdx.y when rows are few; the last-arriving block adds the slices in slice
 *     order (deterministic; no float atomics).
 *
 *   variant 2 (native_mma_kernel<MT, NT, U>): weights are the B operand (NT tiles of 8 rows per
 *     warp), activations the A operand (MT tiles of 16 columns); 8 warps walk one K range.
 *   variant 3..6 (native_v3_kernel): variant 2 with a <= 8-column specialization, weight prefetch
 *     (register double buffer), occupancy-planned whole-wave split-K; 4 configurations.
 *   variant 7..9 (native_v4_kernel, <= 8 columns per launch): weights are the A operand (16 rows
 *     per warp, no padded operand slots), decode through e5m2-style bytes placed by PRMT.
 *   variant 11..13 (native_v5_kernel): weight k-tiles staged through shared memory by cp.async in
 *     row-contiguous 512-byte runs, activations staged once per block as f16 in fragment order,
 *     8 warps splitting each tile's K, decoded A fragments shared by up to 4 n-tiles.
 *   variant 1 (native_plain_kernel): warp per row, f32 decode and FMA (the lab's baseline).
 */
#include "common.cuh"

#define N_WARPS 8
#define SEG 128 /* K values per segment: a quad of lanes x 16 bytes */

static __device__ __forceinline__ uint4 ldg16(const void *p) { return __ldg(reinterpret_cast<const uint4 *>(p)); }

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

template <int MT, int NT, int U>
static __global__ __launch_bounds__(256) void native_mma_kernel(
    const uint8_t *__restrict__ payload, const uint8_t *__restrict__ scales, int64_t pstride, int64_t sstride,
    int64_t n_out, int64_t n_in, int nseg, int seg_per_split, float scale2, const float *__restrict__ x, int ncols,
    float *__restrict__ y, float *partials, unsigned *counters) {
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
                wv[u][t] = ok ? ldg16(wp[t] + (int64_t)(seg0 + u) * 64) : make_uint4(0u, 0u, 0u, 0u);
                sv[u][t] = ok ? (uint32_t)__ldg(reinterpret_cast<const unsigned short *>(sp[t] + (int64_t)(seg0 + u) * 8))
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
                const uint32_t s2 = fp4_e4m3x2_to_h2(sv[u][t]);
                sA[t] = fp4_prmt(s2, 0u, 0x1010u);
                sB[t] = fp4_prmt(s2, 0u, 0x3232u);
            }
#pragma unroll
            for (int wi = 0; wi < 4; wi++) { /* word wi of the 16 bytes: values 8wi..8wi+7 */
                uint32_t bw[NT][4];
#pragma unroll
                for (int t = 0; t < NT; t++) {
                    const uint32_t word = wi == 0 ? wv[u][t].x : wi == 1 ? wv[u][t].y : wi == 2 ? wv[u][t].z : wv[u][t].w;
                    fp4_e2m1x8_to_h2(word, bw[t]);
                    const uint32_t s = wi < 2 ? sA[t] : sB[t];
#pragma unroll
                    for (int h = 0; h < 4; h++) bw[t][h] = fp4_h2_mul(bw[t][h], s);
                }
                const bool kin = k0 + wi * 8 + 8 <= n_in;
#pragma unroll
                for (int m = 0; m < MT; m++) {
                    const int ta = m * 16 + g, tb = ta + 8;
                    uint32_t pa[4], pb[4];
                    act_pairs(x + (int64_t)ta * n_in + k0 + wi * 8, kin && ta < ncols, pa);
                    act_pairs(x + (int64_t)tb * n_in + k0 + wi * 8, kin && tb < ncols, pb);
                    const uint32_t a_lo[4] = {pa[0], pb[0], pa[1], pb[1]};
                    const uint32_t a_hi[4] = {pa[2], pb[2], pa[3], pb[3]};
#pragma unroll
                    for (int t = 0; t < NT; t++) {
                        fp4_mma_f16(acc[m][t], a_lo, bw[t][0], bw[t][1]);
                        fp4_mma_f16(acc[m][t], a_hi, bw[t][2], bw[t][3]);
                    }
                }
            }
        }
    }

    /* C: i=0 (token g, row 2q), 1 (token g, row 2q+1), 2 (token g+8, row 2q), 3 (token g+8, row 2q+1) */
    const int n_split = gridDim.y;
    if (n_split == 1) {
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
            for (int t = 0; t < NT; t++)
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const int tok = m * 16 + g + (i >> 1) * 8;
                    const int64_t row = wrow0 + t * 8 + q * 2 + (i & 1);
                    if (tok < ncols && row < n_out)
                        y[(int64_t)tok * n_out + row] = __fmul_rn(__fmul_rn(acc[m][t][i], 16384.0f), scale2);
                }
        return;
    }
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int t = 0; t < NT; t++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int tok = m * 16 + g + (i >> 1) * 8;
                const int64_t row = wrow0 + t * 8 + q * 2 + (i & 1);
                if (tok < ncols && row < n_out)
                    partials[((int64_t)blockIdx.y * ncols + tok) * n_out + row] = acc[m][t][i];
            }
    if (!fp4_splitk_arrive(counters + blockIdx.x, n_split)) return;
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int t = 0; t < NT; t++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int tok = m * 16 + g + (i >> 1) * 8;
                const int64_t row = wrow0 + t * 8 + q * 2 + (i & 1);
                if (tok >= ncols || row >= n_out) continue;
                float sum = 0.0f;
                for (int sp2 = 0; sp2 < n_split; sp2++)
                    sum = __fadd_rn(sum, __ldcg(partials + ((int64_t)sp2 * ncols + tok) * n_out + row));
                y[(int64_t)tok * n_out + row] = __fmul_rn(__fmul_rn(sum, 16384.0f), scale2);
            }
}

/* ---- variant 3: the same contraction, tuned ----------------------------------------------------
 * HALF (<= 8 columns): the tokens g+8 of the MMA are known zero, so their loads and conversions
 * are not emitted; 32-bit offsets hoisted out of the loop; the next U segments' weights are
 * loaded before the current U are computed (register double buffer); NW warps per block. */
template <int MT, int NT, int U, bool HALF, int NW>
static __global__ __launch_bounds__(NW * 32) void native_v3_kernel(
    const uint8_t *__restrict__ payload, const uint8_t *__restrict__ scales, int64_t pstride, int64_t sstride,
    int64_t n_out, int n_in, int nseg, int seg_per_split, float scale2, const float *__restrict__ x, int ncols,
    float *__restrict__ y, float *partials, unsigned *counters) {
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
            nw[u][t] = ok ? ldg16(wp[t] + (seg_begin + u) * 64) : make_uint4(0u, 0u, 0u, 0u);
            ns[u][t] = ok ? (uint32_t)__ldg(reinterpret_cast<const unsigned short *>(sp[t] + (seg_begin + u) * 8)) : 0u;
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
                nw[u][t] = ok ? ldg16(wp[t] + (nxt + u) * 64) : make_uint4(0u, 0u, 0u, 0u);
                ns[u][t] = ok ? (uint32_t)__ldg(reinterpret_cast<const unsigned short *>(sp[t] + (nxt + u) * 8)) : 0u;
            }
#pragma unroll
        for (int u = 0; u < U; u++) {
            if (seg0 + u >= seg_end) break;
            const int koff = (seg0 + u) * SEG;
            uint32_t sA[NT], sB[NT];
#pragma unroll
            for (int t = 0; t < NT; t++) {
                const uint32_t s2 = fp4_e4m3x2_to_h2(cs[u][t]);
                sA[t] = fp4_prmt(s2, 0u, 0x1010u);
                sB[t] = fp4_prmt(s2, 0u, 0x3232u);
            }
#pragma unroll
            for (int wi = 0; wi < 4; wi++) {
                uint32_t bw[NT][4];
#pragma unroll
                for (int t = 0; t < NT; t++) {
                    const uint32_t word = wi == 0 ? cw[u][t].x : wi == 1 ? cw[u][t].y : wi == 2 ? cw[u][t].z : cw[u][t].w;
                    fp4_e2m1x8_to_h2(word, bw[t]);
                    const uint32_t sc = wi < 2 ? sA[t] : sB[t];
#pragma unroll
                    for (int h = 0; h < 4; h++) bw[t][h] = fp4_h2_mul(bw[t][h], sc);
                }
                const int ko = koff + wi * 8;
                const bool kin = ko + 8 <= kmax;
#pragma unroll
                for (int m = 0; m < MT; m++) {
                    uint32_t pa[4], pb[4] = {0u, 0u, 0u, 0u};
                    act_pairs(xa[m] + ko, kin && xa[m] != nullptr, pa);
                    if (!HALF) act_pairs(xb[m] + ko, kin && xb[m] != nullptr, pb);
                    const uint32_t a_lo[4] = {pa[0], pb[0], pa[1], pb[1]};
                    const uint32_t a_hi[4] = {pa[2], pb[2], pa[3], pb[3]};
#pragma unroll
                    for (int t = 0; t < NT; t++) {
                        fp4_mma_f16(acc[m][t], a_lo, bw[t][0], bw[t][1]);
                        fp4_mma_f16(acc[m][t], a_hi, bw[t][2], bw[t][3]);
                    }
                }
            }
        }
    }

    const int n_split = gridDim.y;
    if (n_split == 1) {
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
            for (int t = 0; t < NT; t++)
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const int tok = m * 16 + g + (i >> 1) * 8;
                    const int64_t row = wrow0 + t * 8 + q * 2 + (i & 1);
                    if (tok < ncols && row < n_out)
                        y[(int64_t)tok * n_out + row] = __fmul_rn(__fmul_rn(acc[m][t][i], 16384.0f), scale2);
                }
        return;
    }
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int t = 0; t < NT; t++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int tok = m * 16 + g + (i >> 1) * 8;
                const int64_t row = wrow0 + t * 8 + q * 2 + (i & 1);
                if (tok < ncols && row < n_out)
                    partials[((int64_t)blockIdx.y * ncols + tok) * n_out + row] = acc[m][t][i];
            }
    if (!fp4_splitk_arrive(counters + blockIdx.x, n_split)) return;
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int t = 0; t < NT; t++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int tok = m * 16 + g + (i >> 1) * 8;
                const int64_t row = wrow0 + t * 8 + q * 2 + (i & 1);
                if (tok >= ncols || row >= n_out) continue;
                float sum = 0.0f;
                for (int sp2 = 0; sp2 < n_split; sp2++)
                    sum = __fadd_rn(sum, __ldcg(partials + ((int64_t)sp2 * ncols + tok) * n_out + row));
                y[(int64_t)tok * n_out + row] = __fmul_rn(__fmul_rn(sum, 16384.0f), scale2);
            }
}

/* ---- variant 4 (<= 8 columns): weights as the MMA's A operand ----------------------------------
 * A warp owns 16 rows (lane g: rows g and g+8); activations are the B operand (column g), so one
 * MMA covers 16 rows x 16 values and no operand slot is padding. Decode: the nibbles of a word
 * become bytes s000mmm0 (the high byte of the f16 e2m1 * 2^-14: an e5m2-style byte), low
 * nibbles in Bl, high nibbles in Bh, 7 integer ops; four byte permutes against a zero register
 * place them as f16x2 pairs (e0,e2) (e4,e6) (e1,e3) (e5,e7): 11 ops per 8 weights. */
static __device__ __forceinline__ void fp4_e2m1x8_to_h2_bytes(uint32_t w, uint32_t p[4]) {
    const uint32_t bh = (w & 0x80808080u) | ((w >> 3) & 0x0E0E0E0Eu);
    const uint32_t bl = ((w << 4) & 0x80808080u) | ((w << 1) & 0x0E0E0E0Eu);
    p[0] = fp4_prmt(bl, 0u, 0x1404u); /* (e0, e2) */
    p[1] = fp4_prmt(bl, 0u, 0x3424u); /* (e4, e6) */
    p[2] = fp4_prmt(bh, 0u, 0x1404u); /* (e1, e3) */
    p[3] = fp4_prmt(bh, 0u, 0x3424u); /* (e5, e7) */
}

template <int U, int NW>
static __global__ __launch_bounds__(NW * 32) void native_v4_kernel(
    const uint8_t *__restrict__ payload, const uint8_t *__restrict__ scales, int64_t pstride, int64_t sstride,
    int64_t n_out, int n_in, int nseg, int seg_per_split, float scale2, const float *__restrict__ x, int ncols,
    float *__restrict__ y, float *partials, unsigned *counters) {
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
            nw[u][h] = ok ? ldg16(wp[h] + (seg_begin + u) * 64) : make_uint4(0u, 0u, 0u, 0u);
            ns[u][h] = ok ? (uint32_t)__ldg(reinterpret_cast<const unsigned short *>(sp[h] + (seg_begin + u) * 8)) : 0u;
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
                nw[u][h] = ok ? ldg16(wp[h] + (nxt + u) * 64) : make_uint4(0u, 0u, 0u, 0u);
                ns[u][h] = ok ? (uint32_t)__ldg(reinterpret_cast<const unsigned short *>(sp[h] + (nxt + u) * 8)) : 0u;
            }
#pragma unroll
        for (int u = 0; u < U; u++) {
            if (seg0 + u >= seg_end) break;
            const int koff = (seg0 + u) * SEG;
            uint32_t sA[2], sB[2];
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const uint32_t s2 = fp4_e4m3x2_to_h2(cs[u][h]);
                sA[h] = fp4_prmt(s2, 0u, 0x1010u);
                sB[h] = fp4_prmt(s2, 0u, 0x3232u);
            }
#pragma unroll
            for (int wi = 0; wi < 4; wi++) {
                uint32_t p0[4], p1[4];
                const uint32_t w0 = wi == 0 ? cw[u][0].x : wi == 1 ? cw[u][0].y : wi == 2 ? cw[u][0].z : cw[u][0].w;
                const uint32_t w1 = wi == 0 ? cw[u][1].x : wi == 1 ? cw[u][1].y : wi == 2 ? cw[u][1].z : cw[u][1].w;
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
        float sum = 0.0f;
        for (int sp2 = 0; sp2 < n_split; sp2++)
            sum = __fadd_rn(sum, __ldcg(partials + ((int64_t)sp2 * ncols + tok) * n_out + row));
        y[(int64_t)tok * n_out + row] = __fmul_rn(__fmul_rn(sum, 16384.0f), scale2);
    }
}

/* ---- variants 11..13: weight tiles staged through shared memory (cp.async), row-contiguous ----
 * Block = NWK (8) warps over the same BR = MT*16 rows, each warp one 128-value segment of every
 * k-tile (a k-tile is NWK consecutive segments: 512 payload bytes + 64 scale bytes per row). The
 * tile copy is row-contiguous: one warp instruction moves 512 contiguous bytes of one row into
 * shared memory (cp.async, S stages in flight). Fragments are read back from shared memory in the
 * weights-as-A layout of variant 7 (lane g: rows g and g+8 of an m-tile, lane q: the segment's
 * q-th 16 bytes), decoded by the same byte permutes, scaled by one exact HMUL2, and multiplied
 * against activations staged once per block in shared memory as f16, already in fragment order
 * (one 16-byte load gives the B operands of two MMAs). NT n-tiles of 8 columns share every
 * decoded A fragment, so the decode is paid once for up to 32 columns. The NWK warps' partial
 * sums are added in warp order through shared memory, then split-K over blockIdx.y as before
 * (last-arriving block adds the slices in slice order). Deterministic, f32 accumulation. */
#define V5_NWK 8
#define V5_TKB (V5_NWK * 64) /* payload bytes per row per k-tile */
#define V5_TKS (V5_NWK * 8)  /* scale bytes per row per k-tile */
#define V5_SMEM_MAX ((size_t)200 * 1024) /* dynamic smem opt-in we ask for (H100/H200: 227 KB minus static) */

static __device__ __forceinline__ void cp_async16(void *smem, const void *gmem) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem));
}
static __device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int N> static __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N));
}

template <int MT, int S>
static __host__ __device__ constexpr int v5_stage_bytes() {
    return MT * 16 * (V5_TKB + V5_TKS);
}

template <int MT, int NT, int S>
static __global__ __launch_bounds__(V5_NWK * 32) void native_v5_kernel(
    const uint8_t *__restrict__ payload, const uint8_t *__restrict__ scales, int64_t pstride, int64_t sstride,
    int64_t n_out, int n_in, int nseg, int seg_per_split, float scale2, const float *__restrict__ x, int ncols,
    float *__restrict__ y, float *partials, unsigned *counters) {
    constexpr int BR = MT * 16;
    constexpr int STAGE = v5_stage_bytes<MT, S>();
    extern __shared__ __align__(16) uint8_t v5_smem[];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, q = lane & 3;
    const int64_t row0 = (int64_t)blockIdx.x * BR;
    const int seg_begin = blockIdx.y * seg_per_split;
    const int seg_end = min(nseg, seg_begin + seg_per_split);
    const int ntiles = (seg_end - seg_begin + V5_NWK - 1) / V5_NWK;
    const int act_stride = seg_per_split * 256 + 64; /* bytes per column; == 64 mod 128: no bank conflicts */
    uint8_t *act = v5_smem + S * STAGE;

    /* one k-tile into stage st: BR rows x 32 payload chunks, BR rows x 4 scale chunks */
    auto load_tile = [&](int t, int st) {
        uint8_t *wst = v5_smem + st * STAGE;
        uint8_t *sst = wst + BR * V5_TKB;
        const int seg0 = seg_begin + t * V5_NWK;
#pragma unroll
        for (int j = 0; j < BR * 32 / (V5_NWK * 32); j++) {
            const int ci = tid + j * V5_NWK * 32, r = ci >> 5, c = ci & 31;
            if (seg0 + (c >> 2) < seg_end) {
                int64_t row = row0 + r;
                if (row >= n_out) row = n_out - 1;
                const int pc = c ^ ((r & 1) << 2);
                cp_async16(wst + r * V5_TKB + pc * 16, payload + row * pstride + (int64_t)seg0 * 64 + c * 16);
            }
        }
        for (int ci = tid; ci < BR * 4; ci += V5_NWK * 32) {
            const int r = ci >> 2, c = ci & 3;
            if (seg0 + c * 2 < seg_end) {
                int64_t row = row0 + r;
                if (row >= n_out) row = n_out - 1;
                cp_async16(sst + r * V5_TKS + c * 16, scales + row * sstride + (int64_t)seg0 * 8 + c * 16);
            }
        }
    };
#pragma unroll
    for (int s = 0; s < S - 1; s++) {
        if (s < ntiles) load_tile(s, s);
        cp_async_commit();
    }
    /* activations of this K slice -> f16 in fragment order: (col, seg, wi, q) 16 bytes holding
     * values k = seg*128 + q*32 + wi*8 + {0,2,4,6,1,3,5,7} */
    {
        const int nwords = ncols * seg_per_split * 16;
        for (int i = tid; i < nwords; i += V5_NWK * 32) {
            const int col = i / (seg_per_split * 16), rem = i - col * (seg_per_split * 16);
            const int sl = rem >> 4, qq = (rem >> 2) & 3, wi = rem & 3;
            const int k = (seg_begin + sl) * 128 + qq * 32 + wi * 8;
            float4 lo = make_float4(0.f, 0.f, 0.f, 0.f), hi = lo;
            if (k + 8 <= n_in && seg_begin + sl < seg_end) {
                const float *p = x + (int64_t)col * n_in + k;
                lo = __ldg(reinterpret_cast<const float4 *>(p));
                hi = __ldg(reinterpret_cast<const float4 *>(p + 4));
            }
            const uint4 v = make_uint4(fp4_f2_to_h2(lo.x, lo.z), fp4_f2_to_h2(hi.x, hi.z), fp4_f2_to_h2(lo.y, lo.w),
                                       fp4_f2_to_h2(hi.y, hi.w));
            *reinterpret_cast<uint4 *>(act + col * act_stride + sl * 256 + (wi * 4 + qq) * 16) = v;
        }
    }
    float acc[MT][NT][4];
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) acc[m][n][i] = 0.0f;
    const uint8_t *act_lane[NT];
    bool act_ok[NT];
#pragma unroll
    for (int n = 0; n < NT; n++) {
        act_ok[n] = n * 8 + g < ncols;
        act_lane[n] = act + (act_ok[n] ? n * 8 + g : 0) * act_stride + q * 16;
    }
    for (int t = 0; t < ntiles; t++) {
        cp_async_wait<S - 2>();
        __syncthreads();
        if (t + S - 1 < ntiles) load_tile(t + S - 1, (t + S - 1) % S);
        cp_async_commit();
        const int seg = seg_begin + t * V5_NWK + warp;
        if (seg >= seg_end) continue; /* warp-uniform */
        const uint8_t *wst = v5_smem + (t % S) * STAGE;
        const uint8_t *sst = wst + BR * V5_TKB;
        const int pc = (warp * 4 + q) ^ ((g & 1) << 2);
        uint4 wv[MT][2];
        uint32_t sA[MT][2], sB[MT][2];
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int r = m * 16 + g + h * 8;
                wv[m][h] = *reinterpret_cast<const uint4 *>(wst + r * V5_TKB + pc * 16);
                const uint32_t two = *reinterpret_cast<const unsigned short *>(sst + r * V5_TKS + warp * 8 + q * 2);
                const uint32_t s2 = fp4_e4m3x2_to_h2(two);
                sA[m][h] = fp4_prmt(s2, 0u, 0x1010u);
                sB[m][h] = fp4_prmt(s2, 0u, 0x3232u);
            }
        const int sl = t * V5_NWK + warp;
#pragma unroll
        for (int wi = 0; wi < 4; wi++) {
            uint4 b[NT];
#pragma unroll
            for (int n = 0; n < NT; n++)
                b[n] = act_ok[n] ? *reinterpret_cast<const uint4 *>(act_lane[n] + sl * 256 + wi * 64)
                                 : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
            for (int m = 0; m < MT; m++) {
                uint32_t p0[4], p1[4];
                const uint32_t w0 = wi == 0 ? wv[m][0].x : wi == 1 ? wv[m][0].y : wi == 2 ? wv[m][0].z : wv[m][0].w;
                const uint32_t w1 = wi == 0 ? wv[m][1].x : wi == 1 ? wv[m][1].y : wi == 2 ? wv[m][1].z : wv[m][1].w;
                fp4_e2m1x8_to_h2_bytes(w0, p0);
                fp4_e2m1x8_to_h2_bytes(w1, p1);
                const uint32_t s0 = wi < 2 ? sA[m][0] : sB[m][0], s1 = wi < 2 ? sA[m][1] : sB[m][1];
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    p0[k] = fp4_h2_mul(p0[k], s0);
                    p1[k] = fp4_h2_mul(p1[k], s1);
                }
                const uint32_t a0[4] = {p0[0], p1[0], p0[1], p1[1]};
                const uint32_t a1[4] = {p0[2], p1[2], p0[3], p1[3]};
#pragma unroll
                for (int n = 0; n < NT; n++) {
                    fp4_mma_f16(acc[m][n], a0, b[n].x, b[n].y);
                    fp4_mma_f16(acc[m][n], a1, b[n].z, b[n].w);
                }
            }
        }
    }
    cp_async_wait<0>();
    __syncthreads();
    /* warps' partials through shared memory (the stages are free now), added in warp order */
    float4 *red = reinterpret_cast<float4 *>(v5_smem);
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int n = 0; n < NT; n++)
            red[((warp * MT + m) * NT + n) * 32 + lane] = make_float4(acc[m][n][0], acc[m][n][1], acc[m][n][2], acc[m][n][3]);
    __syncthreads();
    const int n_split = gridDim.y;
    constexpr int NE = MT * NT * 32 * 4; /* outputs of the block (some padding) */
    float sum_e[(NE + V5_NWK * 32 - 1) / (V5_NWK * 32)];
#pragma unroll
    for (int j = 0; j < (NE + V5_NWK * 32 - 1) / (V5_NWK * 32); j++) {
        const int e = tid + j * V5_NWK * 32;
        sum_e[j] = 0.0f;
        if (e < NE) {
            const float *rf = reinterpret_cast<const float *>(red);
            float s = 0.0f;
            for (int w = 0; w < V5_NWK; w++) s = __fadd_rn(s, rf[w * NE + e]);
            sum_e[j] = s;
        }
    }
    /* e = ((m*NT + n)*32 + lane)*4 + i; C: i=0 (row g, col 2q), 1 (row g, 2q+1), 2 (row g+8, 2q), 3 */
    auto coords = [&](int e, int *tok, int64_t *row) {
        const int i = e & 3, ln = (e >> 2) & 31, mn = e >> 7, n = mn % NT, m = mn / NT;
        *tok = n * 8 + (ln & 3) * 2 + (i & 1);
        *row = row0 + m * 16 + (ln >> 2) + (i >> 1) * 8;
    };
    if (n_split == 1) {
#pragma unroll
        for (int j = 0; j < (NE + V5_NWK * 32 - 1) / (V5_NWK * 32); j++) {
            const int e = tid + j * V5_NWK * 32;
            int tok;
            int64_t row;
            coords(e, &tok, &row);
            if (e < NE && tok < ncols && row < n_out)
                y[(int64_t)tok * n_out + row] = __fmul_rn(__fmul_rn(sum_e[j], 16384.0f), scale2);
        }
        return;
    }
#pragma unroll
    for (int j = 0; j < (NE + V5_NWK * 32 - 1) / (V5_NWK * 32); j++) {
        const int e = tid + j * V5_NWK * 32;
        int tok;
        int64_t row;
        coords(e, &tok, &row);
        if (e < NE && tok < ncols && row < n_out) partials[((int64_t)blockIdx.y * ncols + tok) * n_out + row] = sum_e[j];
    }
    if (!fp4_splitk_arrive(counters + blockIdx.x, n_split)) return;
#pragma unroll
    for (int j = 0; j < (NE + V5_NWK * 32 - 1) / (V5_NWK * 32); j++) {
        const int e = tid + j * V5_NWK * 32;
        int tok;
        int64_t row;
        coords(e, &tok, &row);
        if (e >= NE || tok >= ncols || row >= n_out) continue;
        float sum = 0.0f;
        for (int sp2 = 0; sp2 < n_split; sp2++)
            sum = __fadd_rn(sum, __ldcg(partials + ((int64_t)sp2 * ncols + tok) * n_out + row));
        y[(int64_t)tok * n_out + row] = __fmul_rn(__fmul_rn(sum, 16384.0f), scale2);
    }
}

/* ---- variant 1: plain ---------------------------------------------------------------------------- */

static __global__ __launch_bounds__(256) void native_plain_kernel(const uint8_t *__restrict__ payload,
                                                                  const uint8_t *__restrict__ scales, int64_t pstride,
                                                                  int64_t sstride, int64_t n_out, int64_t n_in,
                                                                  int64_t k_pad, float scale2,
                                                                  const float *__restrict__ x, float *__restrict__ y) {
    const int lane = threadIdx.x & 31;
    const int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (row >= n_out) return;
    const uint8_t *prow = payload + row * pstride;
    const uint8_t *srow = scales + row * sstride;
    float acc = 0.0f;
    for (int64_t ch = lane; ch < k_pad / 32; ch += 32) {
        const uint4 wv = ldg16(prow + ch * 16);
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
    int k = fp4_cu_plan_splits(*rb, nseg, 2);
    if (*rb > (int64_t)(FP4_CU_COUNTER_BYTES / 4)) k = 1;
    *sps = (int)((nseg + k - 1) / k);
    *ks = (int)((nseg + *sps - 1) / *sps);
}

template <int MT, int NT, int U>
static fp4_status launch_mma(const fp4_cuda_tensor *w, const float *x, int64_t ncols, float *y, int64_t rb, int ks,
                             int sps, float *partials, unsigned *counters, cudaStream_t s) {
    native_mma_kernel<MT, NT, U><<<dim3((unsigned)rb, (unsigned)ks), 256, 0, s>>>(
        w->d_payload, w->d_scales, w->payload_stride, w->scale_stride, w->n_out, w->n_in, (int)(w->k_pad / SEG), sps,
        w->scale2, x, (int)ncols, y, partials, counters);
    FP4_CUDA_LAUNCHED();
    return FP4_OK;
}

static int aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* v3 plan: blocks resident per SM measured for the instance; as many K slices as fill whole
 * waves (never a partial second wave), at least two segments per slice. */
template <int MT, int NT, int U, bool HALF, int NW>
static void v3_plan(const fp4_cuda_tensor *w, int ks_force, int64_t *rb, int *ks, int *sps) {
    static int per_sm = 0; /* per instance; benign race */
    if (!per_sm) {
        int n = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, native_v3_kernel<MT, NT, U, HALF, NW>, NW * 32, 0) !=
                cudaSuccess || n < 1)
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
static fp4_status launch_v3(const fp4_cuda_tensor *w, const float *x, int64_t nc, float *y, const fp4_cuda_scratch *s,
                            int ks_force, cudaStream_t st) {
    int64_t rb;
    int ks, sps;
    v3_plan<MT, NT, U, HALF, NW>(w, ks_force, &rb, &ks, &sps);
    if (ks > 1 && FP4_CU_COUNTER_BYTES + FP4_CU_ALIGN((size_t)ks * (size_t)nc * (size_t)w->n_out * 4) > s->bytes)
        return FP4_ERR_INVALID_ARG;
    native_v3_kernel<MT, NT, U, HALF, NW><<<dim3((unsigned)rb, (unsigned)ks), NW * 32, 0, st>>>(
        w->d_payload, w->d_scales, w->payload_stride, w->scale_stride, w->n_out, (int)w->n_in, (int)(w->k_pad / SEG),
        sps, w->scale2, x, (int)nc, y, (float *)((uint8_t *)s->d_base + FP4_CU_COUNTER_BYTES), (unsigned *)s->d_base);
    FP4_CUDA_LAUNCHED();
    return FP4_OK;
}

template <int U, int NW>
static void v4_plan(const fp4_cuda_tensor *w, int64_t *rb, int *ks, int *sps) {
    static int per_sm = 0;
    if (!per_sm) {
        int n = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, native_v4_kernel<U, NW>, NW * 32, 0) != cudaSuccess ||
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
static fp4_status launch_v4(const fp4_cuda_tensor *w, const float *x, int64_t nc, float *y, const fp4_cuda_scratch *s,
                            cudaStream_t st) {
    int64_t rb;
    int ks, sps;
    v4_plan<U, NW>(w, &rb, &ks, &sps);
    if (ks > 1 && FP4_CU_COUNTER_BYTES + FP4_CU_ALIGN((size_t)ks * (size_t)nc * (size_t)w->n_out * 4) > s->bytes)
        return FP4_ERR_INVALID_ARG;
    native_v4_kernel<U, NW><<<dim3((unsigned)rb, (unsigned)ks), NW * 32, 0, st>>>(
        w->d_payload, w->d_scales, w->payload_stride, w->scale_stride, w->n_out, (int)w->n_in, (int)(w->k_pad / SEG),
        sps, w->scale2, x, (int)nc, y, (float *)((uint8_t *)s->d_base + FP4_CU_COUNTER_BYTES), (unsigned *)s->d_base);
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

/* v5 plan: the activation slice of a block stays under act_cap bytes of shared memory; K slices
 * are added while that or filling the machine (resident blocks measured for the smem size)
 * needs them; a slice is a whole number of k-tiles. */
template <int MT, int NT, int S>
static void v5_plan(const fp4_cuda_tensor *w, int64_t nc, int64_t *rb, int *ks, int *sps, size_t *smem) {
    constexpr int BR = MT * 16;
    static int attr_set = 0; /* per instance, before any occupancy query; benign race */
    if (!attr_set) {
        cudaFuncSetAttribute(native_v5_kernel<MT, NT, S>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)V5_SMEM_MAX);
        attr_set = 1;
    }
    const int64_t nseg = w->k_pad / SEG;
    const int64_t act_cap = MT >= 4 ? 48 * 1024 : 32 * 1024;
    *rb = (w->n_out + BR - 1) / BR;
    int sms = fp4_cu_sm_count();
    if (sms <= 0) sms = 132;
    int64_t k = (nc * nseg * 256 + act_cap - 1) / act_cap;
    if (k < 1) k = 1;
    for (int it = 0; it < 2; it++) {
        int64_t sp = (nseg + k - 1) / k;
        sp = (sp + V5_NWK - 1) / V5_NWK * V5_NWK;
        const size_t sm = (size_t)S * v5_stage_bytes<MT, S>() + (size_t)nc * (size_t)(sp * 256 + 64);
        int per_sm = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, native_v5_kernel<MT, NT, S>, V5_NWK * 32, sm) !=
                cudaSuccess || per_sm < 1)
            per_sm = 1;
        const int64_t cap = (int64_t)per_sm * sms;
        if (*rb * k < cap) k = cap / *rb > k ? cap / *rb : k;
    }
    const int64_t kmax = (nseg + V5_NWK - 1) / V5_NWK;
    if (k > kmax) k = kmax;
    if (k > 64) k = 64;
    if (*rb > (int64_t)(FP4_CU_COUNTER_BYTES / 4)) k = 1; /* (act slice then unbounded: refused below) */
    int64_t sp = (nseg + k - 1) / k;
    sp = (sp + V5_NWK - 1) / V5_NWK * V5_NWK;
    *sps = (int)sp;
    *ks = (int)((nseg + sp - 1) / sp);
    *smem = (size_t)S * v5_stage_bytes<MT, S>() + (size_t)nc * (size_t)(sp * 256 + 64);
}

template <int MT, int NT, int S>
static fp4_status launch_v5(const fp4_cuda_tensor *w, const float *x, int64_t nc, float *y, const fp4_cuda_scratch *s,
                            cudaStream_t st) {
    static_assert(MT * NT * 4096 <= S * v5_stage_bytes<MT, S>(), "reduction buffer must fit in the stages");
    int64_t rb;
    int ks, sps;
    size_t smem;
    v5_plan<MT, NT, S>(w, nc, &rb, &ks, &sps, &smem);
    if (smem > V5_SMEM_MAX) return FP4_ERR_UNSUPPORTED;
    if (ks > 1 && FP4_CU_COUNTER_BYTES + FP4_CU_ALIGN((size_t)ks * (size_t)nc * (size_t)w->n_out * 4) > s->bytes)
        return FP4_ERR_INVALID_ARG;
    native_v5_kernel<MT, NT, S><<<dim3((unsigned)rb, (unsigned)ks), V5_NWK * 32, smem, st>>>(
        w->d_payload, w->d_scales, w->payload_stride, w->scale_stride, w->n_out, (int)w->n_in, (int)(w->k_pad / SEG),
        sps, w->scale2, x, (int)nc, y, (float *)((uint8_t *)s->d_base + FP4_CU_COUNTER_BYTES), (unsigned *)s->d_base);
    FP4_CUDA_LAUNCHED();
    return FP4_OK;
}

template <int MT, int NT, int S> static int v5_slices(const fp4_cuda_tensor *w, int64_t nc) {
    int64_t rb;
    int ks, sps;
    size_t smem;
    v5_plan<MT, NT, S>(w, nc, &rb, &ks, &sps, &smem);
    return ks;
}

/* 11: MT 2, one n-tile (<= 8 columns per launch, chunks of 8); 12: MT 4, n-tiles for <= 32
 * columns per launch (chunks of 32); 13: 12's widths at MT 2 with 4 stages. */
static fp4_status native_v5(int variant, const fp4_cuda_tensor *w, const float *x, int64_t nc, float *y,
                            const fp4_cuda_scratch *s, cudaStream_t st) {
    if (variant == 11) return launch_v5<2, 1, 4>(w, x, nc, y, s, st);
    if (variant == 12) {
        if (nc <= 8) return launch_v5<4, 1, 3>(w, x, nc, y, s, st);
        if (nc <= 16) return launch_v5<4, 2, 3>(w, x, nc, y, s, st);
        return launch_v5<4, 4, 3>(w, x, nc, y, s, st);
    }
    if (nc <= 16) return launch_v5<2, 2, 4>(w, x, nc, y, s, st);
    return launch_v5<2, 4, 4>(w, x, nc, y, s, st);
}

static int v5_max_slices(const fp4_cuda_tensor *w, int64_t nc) {
    int k = 0, v;
    for (int64_t c = 1; c <= (nc < 8 ? nc : 8); c++) { /* chunks narrower than a launch plan their own */
        v = v5_slices<2, 1, 4>(w, c); k = v > k ? v : k;
        v = v5_slices<4, 1, 3>(w, c); k = v > k ? v : k;
    }
    const int64_t c32 = nc < 32 ? nc : 32;
    for (int64_t c = 9; c <= c32; c++) {
        v = c <= 16 ? v5_slices<4, 2, 3>(w, c) : v5_slices<4, 4, 3>(w, c); k = v > k ? v : k;
        v = c <= 16 ? v5_slices<2, 2, 4>(w, c) : v5_slices<2, 4, 4>(w, c); k = v > k ? v : k;
    }
    return k;
}

extern "C" {

size_t fp4_cu_native_scratch(const fp4_cuda_tensor *w, int64_t n_cols) {
    if (!w || n_cols < 1) return 0;
    const int64_t nc = n_cols < 64 ? n_cols : 64;
    int64_t rb;
    int ks, sps;
    plan(w, pick_cfg(nc), &rb, &ks, &sps);
    int k3 = nc <= 8 ? v3_slices<1, 2, 2, true, 4>(w) : nc <= 16 ? v3_slices<1, 2, 2, false, 4>(w)
             : nc <= 32 ? v3_slices<2, 2, 2, false, 4>(w) : v3_slices<4, 2, 2, false, 4>(w);
    if (nc <= 8) { /* the lab's other configurations of the same width */
        const int more[3] = {v3_slices<1, 2, 4, true, 4>(w), v3_slices<1, 2, 2, true, 8>(w), v3_slices<1, 2, 4, true, 8>(w)};
        for (int i = 0; i < 3; i++) k3 = more[i] > k3 ? more[i] : k3;
    }
    if (k3 > ks) ks = k3;
    const int k4[3] = {v4_slices<2, 4>(w), v4_slices<4, 4>(w), v4_slices<2, 8>(w)};
    for (int i = 0; i < 3; i++) ks = k4[i] > ks ? k4[i] : ks;
    const int k5 = v5_max_slices(w, nc);
    if (k5 > ks) ks = k5;
    const size_t b = ks > 1 ? FP4_CU_ALIGN((size_t)ks * (size_t)nc * (size_t)w->n_out * 4) : 0;
    const size_t b1 = fp4_cu_native1_scratch(w, nc); /* variants 15..17 */
    return b1 > b ? b1 : b;
}

fp4_status fp4_cu_native(int variant, const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols, float *d_y,
                         const fp4_cuda_scratch *s, cudaStream_t stream) {
    if (!w || !d_x || !d_y || n_cols < 1) return FP4_ERR_INVALID_ARG;
    if (w->type != FP4_TYPE_NVFP4_E2M1 || !w->d_payload || !w->d_scales) return FP4_ERR_INVALID_ARG;
    if (w->n_in <= 0 || w->n_in % 16 || w->k_pad % 256 || w->k_pad < w->n_in) return FP4_ERR_SHAPE;
    if (w->payload_stride % 128 || w->scale_stride % 16 || !aligned16(w->d_payload) || !aligned16(d_x))
        return FP4_ERR_INVALID_ARG;
    if (variant == 1) {
        for (int64_t c = 0; c < n_cols; c++) {
            native_plain_kernel<<<(unsigned)((w->n_out * 32 + 255) / 256), 256, 0, stream>>>(
                w->d_payload, w->d_scales, w->payload_stride, w->scale_stride, w->n_out, w->n_in, w->k_pad, w->scale2,
                d_x + c * w->n_in, d_y + c * w->n_out);
            FP4_CUDA_LAUNCHED();
        }
        return FP4_OK;
    }
    if (!s || !s->d_base) return FP4_ERR_INVALID_ARG;
    if (variant == 15 || variant == 16) return fp4_cu_native1(variant, w, d_x, n_cols, d_y, s, stream);
    if (variant == 17) { /* production (round 5): native1 (R 2) at 1 column, variant 14 above */
        if (n_cols == 1) return fp4_cu_native1(15, w, d_x, n_cols, d_y, s, stream);
        return fp4_cu_native(14, w, d_x, n_cols, d_y, s, stream);
    }
    if (variant == 14) { /* production: smem-staged tiles, 32 rows per block up to 8 columns, 64 above */
        if (n_cols <= 8) return fp4_cu_native(11, w, d_x, n_cols, d_y, s, stream);
        return fp4_cu_native(12, w, d_x, n_cols, d_y, s, stream);
    }
    if (variant == 10) { /* previous production: weights-as-A kernel up to 8 columns, the first MMA kernel above */
        if (n_cols <= 8) return fp4_cu_native(7, w, d_x, n_cols, d_y, s, stream);
        return fp4_cu_native(2, w, d_x, n_cols, d_y, s, stream);
    }
    if (variant >= 11 && variant <= 13) { /* smem-staged tiles: chunks of 8 (11) or 32 (12, 13) columns */
        const int64_t chunk = variant == 11 ? 8 : 32;
        for (int64_t c0 = 0; c0 < n_cols; c0 += chunk) {
            const int64_t nc = n_cols - c0 < chunk ? n_cols - c0 : chunk;
            const fp4_status st = native_v5(variant, w, d_x + c0 * w->n_in, nc, d_y + c0 * w->n_out, s, stream);
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
            const fp4_status st = native_v3(variant - 3, w, d_x + c0 * w->n_in, nc, d_y + c0 * w->n_out, s, stream);
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
        if (ks > 1 && FP4_CU_COUNTER_BYTES + FP4_CU_ALIGN((size_t)ks * (size_t)nc * (size_t)w->n_out * 4) > s->bytes)
            return FP4_ERR_INVALID_ARG;
        float *partials = (float *)((uint8_t *)s->d_base + FP4_CU_COUNTER_BYTES);
        unsigned *counters = (unsigned *)s->d_base;
        const float *x = d_x + c0 * w->n_in;
        float *y = d_y + c0 * w->n_out;
        fp4_status st;
        if (cfg.mt == 1 && cfg.nt == 2) st = launch_mma<1, 2, 4>(w, x, nc, y, rb, ks, sps, partials, counters, stream);
        else if (cfg.mt == 1) st = launch_mma<1, 4, 2>(w, x, nc, y, rb, ks, sps, partials, counters, stream);
        else if (cfg.mt == 2) st = launch_mma<2, 4, 2>(w, x, nc, y, rb, ks, sps, partials, counters, stream);
        else st = launch_mma<4, 4, 2>(w, x, nc, y, rb, ks, sps, partials, counters, stream);
        if (st != FP4_OK) return st;
    }
    return FP4_OK;
}

FP4_API fp4_status fp4_cuda_nvfp4_matvec_native(const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols,
                                                float *d_y, const fp4_cuda_scratch *s, fp4_cuda_stream stream) {
    return fp4_cu_native(17, w, d_x, n_cols, d_y, s, (cudaStream_t)stream);
}

} /* extern "C" */
