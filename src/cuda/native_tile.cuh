/* native_tile.cuh — the native A16 tile kernel (SPEC §6), included by a16_native.cu (the route's
 * kernel above 1 column: native_tile_kernel<2, 1, 4> up to 8 columns per launch, <4, NT, 3> with
 * NT = 1, 2, 4 n-tiles for up to 32) and by the kernel lab (other tile shapes). Never installed.
 *
 * Common to the f16 MMA kernels of the native path (mma.sync m16n8k16, f16 operands, f32
 * accumulators): nibbles become f16 bit patterns by integer ops (e2m1 * 2^-14, exact), then one
 * HMUL2 by the E4M3FN block scale, which is exact too: every product e2m1*scale is a multiple of
 * 2^-10 with at most 6 significant bits, so e2m1*scale*2^-14 is an f16 (normal or subnormal); the
 * scale is folded into the weights before the MMA, so one MMA may mix values of several 16-groups:
 * its k slots are a fixed permutation of the lane's 32 values, applied identically to the
 * activation fragment; (acc * 2^14) * scale2 once per row at the end; split-K over blockIdx.y
 * when rows are few, the last-arriving block adding the slices in slice order (deterministic; no
 * float atomics). */
#ifndef FP4_CUDA_NATIVE_TILE_CUH
#define FP4_CUDA_NATIVE_TILE_CUH

#include "common.cuh"

#define SEG 128 /* K values per segment: a quad of lanes x 16 bytes */

/* The lane's two E4M3FN block scales (bits 0..15 of two) as f16, each broadcast to both halves
 * of an f16x2 (*sa: the low byte's group, *sb: the high byte's), exact. */
static __device__ __forceinline__ void fp4_scale_pair_h2(uint32_t two, uint32_t *sa, uint32_t *sb) {
    const uint32_t s2 = fp4_e4m3x2_to_h2(two);
    *sa = fp4_prmt(s2, 0u, 0x1010u);
    *sb = fp4_prmt(s2, 0u, 0x3232u);
}

/* Word wi (0..3) of 16 loaded bytes: values 8wi..8wi+7 of the lane's 32. */
static __device__ __forceinline__ uint32_t fp4_word(const uint4 &v, int wi) {
    return wi == 0 ? v.x : wi == 1 ? v.y : wi == 2 ? v.z : v.w;
}

/* ---- weights as the MMA's A operand ---------------------------------------------------------------
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

/* ---- the tile kernel: weight tiles staged through shared memory (cp.async), row-contiguous -----
 * Block = NWK (8) warps over the same BR = MT*16 rows, each warp one 128-value segment of every
 * k-tile (a k-tile is NWK consecutive segments: 512 payload bytes + 64 scale bytes per row). The
 * tile copy is row-contiguous: one warp instruction moves 512 contiguous bytes of one row into
 * shared memory (cp.async, S stages in flight). Fragments are read back from shared memory in the
 * weights-as-A layout above (lane g: rows g and g+8 of an m-tile, lane q: the segment's
 * q-th 16 bytes), decoded by the same byte permutes, scaled by one exact HMUL2, and multiplied
 * against activations staged once per block in shared memory as f16, already in fragment order
 * (one 16-byte load gives the B operands of two MMAs). NT n-tiles of 8 columns share every
 * decoded A fragment, so the decode is paid once for up to 32 columns. The NWK warps' partial
 * sums are added in warp order through shared memory, then split-K over blockIdx.y as before
 * (last-arriving block adds the slices in slice order). Deterministic, f32 accumulation. */
#define TILE_NWK 8
#define TILE_TKB (TILE_NWK * 64) /* payload bytes per row per k-tile */
#define TILE_TKS (TILE_NWK * 8)  /* scale bytes per row per k-tile */
#define TILE_SMEM_MAX                                                                                        \
    ((size_t)200 * 1024) /* dynamic smem opt-in we ask for (H100/H200: 227 KB minus static) */

template <int MT, int S>
static __host__ __device__ constexpr int tile_stage_bytes() {
    return MT * 16 * (TILE_TKB + TILE_TKS);
}

template <int MT, int NT, int S>
static __global__ __launch_bounds__(TILE_NWK * 32) void native_tile_kernel(
    const uint8_t *__restrict__ payload, const uint8_t *__restrict__ scales, int64_t pstride, int64_t sstride,
    int64_t n_out, int n_in, int nseg, int seg_per_split, float scale2, const float *__restrict__ x,
    int ncols, float *__restrict__ y, float *partials, unsigned *counters) {
    constexpr int BR = MT * 16;
    constexpr int STAGE = tile_stage_bytes<MT, S>();
    extern __shared__ __align__(16) uint8_t tile_smem[];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, q = lane & 3;
    const int64_t row0 = (int64_t)blockIdx.x * BR;
    const int seg_begin = blockIdx.y * seg_per_split;
    const int seg_end = min(nseg, seg_begin + seg_per_split);
    const int ntiles = (seg_end - seg_begin + TILE_NWK - 1) / TILE_NWK;
    const int act_stride = seg_per_split * 256 + 64; /* bytes per column; == 64 mod 128: no bank conflicts */
    uint8_t *act = tile_smem + S * STAGE;

    /* one k-tile into stage st: BR rows x 32 payload chunks, BR rows x 4 scale chunks */
    auto load_tile = [&](int t, int st) {
        uint8_t *wst = tile_smem + st * STAGE;
        uint8_t *sst = wst + BR * TILE_TKB;
        const int seg0 = seg_begin + t * TILE_NWK;
#pragma unroll
        for (int j = 0; j < BR * 32 / (TILE_NWK * 32); j++) {
            const int ci = tid + j * TILE_NWK * 32, r = ci >> 5, c = ci & 31;
            if (seg0 + (c >> 2) < seg_end) {
                int64_t row = row0 + r;
                if (row >= n_out) row = n_out - 1;
                const int pc = c ^ ((r & 1) << 2);
                fp4_cp_async16(wst + r * TILE_TKB + pc * 16,
                               payload + row * pstride + (int64_t)seg0 * 64 + c * 16);
            }
        }
        for (int ci = tid; ci < BR * 4; ci += TILE_NWK * 32) {
            const int r = ci >> 2, c = ci & 3;
            if (seg0 + c * 2 < seg_end) {
                int64_t row = row0 + r;
                if (row >= n_out) row = n_out - 1;
                fp4_cp_async16(sst + r * TILE_TKS + c * 16,
                               scales + row * sstride + (int64_t)seg0 * 8 + c * 16);
            }
        }
    };
#pragma unroll
    for (int s = 0; s < S - 1; s++) {
        if (s < ntiles) load_tile(s, s);
        fp4_cp_async_commit();
    }
    /* activations of this K slice -> f16 in fragment order: (col, seg, wi, q) 16 bytes holding
     * values k = seg*128 + q*32 + wi*8 + {0,2,4,6,1,3,5,7}. One pass converts them as they are
     * while every thread tracks its columns' largest |x| (one unsigned atomicMax on the f32 bits
     * per column it touches: order-free); a column whose largest |x| lies outside [2^-10, 2^15)
     * is then converted again scaled by 2^-e (e = its exponent less 14: no f16 overflow past 65504,
     * no f16 subnormals for a column of small values), and the block's sums of that column are
     * scaled back by 2^e, exactly, before they leave it. Ordinary activations keep the plain
     * conversion's bits and its single pass. */
    __shared__ unsigned col_max[NT * 8];
    __shared__ float col_f[2][NT * 8]; /* [0]: 2^-e, [1]: 2^e (1 and 1 for a plain column) */
    __shared__ int col_redo;
    {
        for (int c = tid; c < NT * 8; c += TILE_NWK * 32) col_max[c] = 0u;
        if (tid == 0) col_redo = 0;
        __syncthreads();
        const int nwords = ncols * seg_per_split * 16;
        int mcol = -1;
        float mval = 0.0f;
        for (int i = tid; i < nwords; i += TILE_NWK * 32) {
            const int col = i / (seg_per_split * 16), rem = i - col * (seg_per_split * 16);
            const int sl = rem >> 4, qq = (rem >> 2) & 3, wi = rem & 3;
            const int k = (seg_begin + sl) * 128 + qq * 32 + wi * 8;
            float4 lo = make_float4(0.f, 0.f, 0.f, 0.f), hi = lo;
            if (k + 8 <= n_in && seg_begin + sl < seg_end) {
                const float *p = x + (int64_t)col * n_in + k;
                lo = __ldg(reinterpret_cast<const float4 *>(p));
                hi = __ldg(reinterpret_cast<const float4 *>(p + 4));
            }
            if (col != mcol) {
                if (mcol >= 0) atomicMax(&col_max[mcol], __float_as_uint(mval));
                mcol = col;
                mval = 0.0f;
            }
            const float ml = fmaxf(fmaxf(fabsf(lo.x), fabsf(lo.y)), fmaxf(fabsf(lo.z), fabsf(lo.w)));
            const float mh = fmaxf(fmaxf(fabsf(hi.x), fabsf(hi.y)), fmaxf(fabsf(hi.z), fabsf(hi.w)));
            mval = fmaxf(mval, fmaxf(ml, mh));
            const uint4 v = make_uint4(fp4_f2_to_h2(lo.x, lo.z), fp4_f2_to_h2(hi.x, hi.z),
                                       fp4_f2_to_h2(lo.y, lo.w), fp4_f2_to_h2(hi.y, hi.w));
            *reinterpret_cast<uint4 *>(act + col * act_stride + sl * 256 + (wi * 4 + qq) * 16) = v;
        }
        if (mcol >= 0) atomicMax(&col_max[mcol], __float_as_uint(mval));
        __syncthreads();
        for (int c = tid; c < NT * 8; c += TILE_NWK * 32) {
            const int be = (int)((col_max[c] >> 23) & 0xFFu); /* biased exponent of the largest |x| */
            if (be >= 127 - 10 && be < 127 + 15) {             /* [2^-10, 2^15): as it is */
                col_f[0][c] = 1.0f;
                col_f[1][c] = 1.0f;
                continue;
            }
            int e = (be ? be : 1) - 127 - 14;
            if (e < -126) e = -126;
            col_f[0][c] = __uint_as_float((uint32_t)(127 - e) << 23);
            col_f[1][c] = __uint_as_float((uint32_t)(127 + e) << 23);
            if (c < ncols && col_max[c]) atomicExch(&col_redo, 1);
        }
        __syncthreads();
        if (col_redo) /* block-uniform */
            for (int i = tid; i < nwords; i += TILE_NWK * 32) {
                const int col = i / (seg_per_split * 16), rem = i - col * (seg_per_split * 16);
                const float f = col_f[0][col];
                if (f == 1.0f) continue;
                const int sl = rem >> 4, qq = (rem >> 2) & 3, wi = rem & 3;
                const int k = (seg_begin + sl) * 128 + qq * 32 + wi * 8;
                float4 lo = make_float4(0.f, 0.f, 0.f, 0.f), hi = lo;
                if (k + 8 <= n_in && seg_begin + sl < seg_end) {
                    const float *p = x + (int64_t)col * n_in + k;
                    lo = __ldg(reinterpret_cast<const float4 *>(p));
                    hi = __ldg(reinterpret_cast<const float4 *>(p + 4));
                }
                const uint4 v = make_uint4(fp4_f2_to_h2(__fmul_rn(lo.x, f), __fmul_rn(lo.z, f)),
                                           fp4_f2_to_h2(__fmul_rn(hi.x, f), __fmul_rn(hi.z, f)),
                                           fp4_f2_to_h2(__fmul_rn(lo.y, f), __fmul_rn(lo.w, f)),
                                           fp4_f2_to_h2(__fmul_rn(hi.y, f), __fmul_rn(hi.w, f)));
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
        fp4_cp_async_wait<S - 2>();
        __syncthreads();
        if (t + S - 1 < ntiles) load_tile(t + S - 1, (t + S - 1) % S);
        fp4_cp_async_commit();
        const int seg = seg_begin + t * TILE_NWK + warp;
        if (seg >= seg_end) continue; /* warp-uniform */
        const uint8_t *wst = tile_smem + (t % S) * STAGE;
        const uint8_t *sst = wst + BR * TILE_TKB;
        const int pc = (warp * 4 + q) ^ ((g & 1) << 2);
        uint4 wv[MT][2];
        uint32_t sA[MT][2], sB[MT][2];
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int r = m * 16 + g + h * 8;
                wv[m][h] = *reinterpret_cast<const uint4 *>(wst + r * TILE_TKB + pc * 16);
                const uint32_t two =
                    *reinterpret_cast<const unsigned short *>(sst + r * TILE_TKS + warp * 8 + q * 2);
                fp4_scale_pair_h2(two, &sA[m][h], &sB[m][h]);
            }
        const int sl = t * TILE_NWK + warp;
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
                const uint32_t w0 = fp4_word(wv[m][0], wi), w1 = fp4_word(wv[m][1], wi);
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
    fp4_cp_async_wait<0>();
    __syncthreads();
    /* warps' partials through shared memory (the stages are free now), added in warp order */
    float4 *red = reinterpret_cast<float4 *>(tile_smem);
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int n = 0; n < NT; n++)
            red[((warp * MT + m) * NT + n) * 32 + lane] =
                make_float4(acc[m][n][0], acc[m][n][1], acc[m][n][2], acc[m][n][3]);
    __syncthreads();
    const int n_split = gridDim.y;
    constexpr int NE = MT * NT * 32 * 4; /* outputs of the block (some padding) */
    float sum_e[(NE + TILE_NWK * 32 - 1) / (TILE_NWK * 32)];
#pragma unroll
    for (int j = 0; j < (NE + TILE_NWK * 32 - 1) / (TILE_NWK * 32); j++) {
        const int e = tid + j * TILE_NWK * 32;
        sum_e[j] = 0.0f;
        if (e < NE) {
            const float *rf = reinterpret_cast<const float *>(red);
            float s = 0.0f;
            for (int w = 0; w < TILE_NWK; w++) s = __fadd_rn(s, rf[w * NE + e]);
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
        for (int j = 0; j < (NE + TILE_NWK * 32 - 1) / (TILE_NWK * 32); j++) {
            const int e = tid + j * TILE_NWK * 32;
            int tok;
            int64_t row;
            coords(e, &tok, &row);
            if (e < NE && tok < ncols && row < n_out)
                y[(int64_t)tok * n_out + row] =
                    __fmul_rn(__fmul_rn(__fmul_rn(sum_e[j], col_f[1][tok]), 16384.0f), scale2);
        }
        return;
    }
#pragma unroll
    for (int j = 0; j < (NE + TILE_NWK * 32 - 1) / (TILE_NWK * 32); j++) {
        const int e = tid + j * TILE_NWK * 32;
        int tok;
        int64_t row;
        coords(e, &tok, &row);
        if (e < NE && tok < ncols && row < n_out)
            partials[((int64_t)blockIdx.y * ncols + tok) * n_out + row] = __fmul_rn(sum_e[j], col_f[1][tok]);
    }
    if (!fp4_splitk_arrive(counters + blockIdx.x, n_split)) return;
#pragma unroll
    for (int j = 0; j < (NE + TILE_NWK * 32 - 1) / (TILE_NWK * 32); j++) {
        const int e = tid + j * TILE_NWK * 32;
        int tok;
        int64_t row;
        coords(e, &tok, &row);
        if (e >= NE || tok >= ncols || row >= n_out) continue;
        const float sum = fp4_splitk_sum(partials, n_split, ncols, n_out, tok, row);
        y[(int64_t)tok * n_out + row] = __fmul_rn(__fmul_rn(sum, 16384.0f), scale2);
    }
}

/* tile plan: the activation slice of a block stays under act_cap bytes of shared memory; K slices
 * are added while that or filling the machine (resident blocks measured for the smem size)
 * needs them; a slice is a whole number of k-tiles. */
template <int MT, int NT, int S>
static fp4_status tile_plan(const fp4_cuda_tensor *w, int64_t nc, int64_t *rb, int *ks, int *sps,
                            size_t *smem) {
    constexpr int BR = MT * 16;
    static int opted_in[FP4_CU_MAX_DEVICES]; /* before any occupancy query */
    const fp4_status st =
        fp4_cu_smem_opt_in((const void *)native_tile_kernel<MT, NT, S>, TILE_SMEM_MAX, opted_in);
    const int64_t nseg = w->k_pad / SEG;
    const int64_t act_cap = MT >= 4 ? 48 * 1024 : 32 * 1024;
    *rb = (w->n_out + BR - 1) / BR;
    int sms = fp4_cu_sm_count();
    if (sms <= 0) sms = 132;
    int64_t k = (nc * nseg * 256 + act_cap - 1) / act_cap;
    if (k < 1) k = 1;
    for (int it = 0; it < 2; it++) {
        int64_t sp = (nseg + k - 1) / k;
        sp = (sp + TILE_NWK - 1) / TILE_NWK * TILE_NWK;
        const size_t sm = (size_t)S * tile_stage_bytes<MT, S>() + (size_t)nc * (size_t)(sp * 256 + 64);
        int per_sm = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, native_tile_kernel<MT, NT, S>,
                                                          TILE_NWK * 32, sm) != cudaSuccess ||
            per_sm < 1)
            per_sm = 1;
        const int64_t cap = (int64_t)per_sm * sms;
        if (*rb * k < cap) k = cap / *rb > k ? cap / *rb : k;
    }
    const int64_t kmax = (nseg + TILE_NWK - 1) / TILE_NWK;
    if (k > kmax) k = kmax;
    if (k > 64) k = 64;
    if (*rb > (int64_t)(FP4_CU_COUNTER_BYTES / 4)) k = 1; /* (act slice then unbounded: refused below) */
    int64_t sp = (nseg + k - 1) / k;
    sp = (sp + TILE_NWK - 1) / TILE_NWK * TILE_NWK;
    *sps = (int)sp;
    *ks = (int)((nseg + sp - 1) / sp);
    *smem = (size_t)S * tile_stage_bytes<MT, S>() + (size_t)nc * (size_t)(sp * 256 + 64);
    return st;
}

template <int MT, int NT, int S>
static fp4_status launch_tile(const fp4_cuda_tensor *w, const float *x, int64_t nc, float *y,
                              const fp4_cuda_scratch *s, cudaStream_t st) {
    static_assert(MT * NT * 4096 <= S * tile_stage_bytes<MT, S>(), "reduction buffer must fit in the stages");
    int64_t rb;
    int ks, sps;
    size_t smem;
    FP4_CU_TRY((tile_plan<MT, NT, S>(w, nc, &rb, &ks, &sps, &smem)));
    if (smem > TILE_SMEM_MAX) return FP4_ERR_UNSUPPORTED;
    if (ks > 1 &&
        FP4_CU_COUNTER_BYTES + FP4_CU_ALIGN((size_t)ks * (size_t)nc * (size_t)w->n_out * 4) > s->bytes)
        return FP4_ERR_INVALID_ARG;
    native_tile_kernel<MT, NT, S><<<dim3((unsigned)rb, (unsigned)ks), TILE_NWK * 32, smem, st>>>(
        w->d_payload, w->d_scales, w->payload_stride, w->scale_stride, w->n_out, (int)w->n_in,
        (int)(w->k_pad / SEG), sps, w->scale2, x, (int)nc, y,
        (float *)((uint8_t *)s->d_base + FP4_CU_COUNTER_BYTES), (unsigned *)s->d_base);
    FP4_CUDA_LAUNCHED();
    return FP4_OK;
}

template <int MT, int NT, int S> static int tile_slices(const fp4_cuda_tensor *w, int64_t nc) {
    int64_t rb;
    int ks, sps;
    size_t smem;
    (void)tile_plan<MT, NT, S>(w, nc, &rb, &ks, &sps, &smem); /* a refused opt-in only lowers the occupancy */
    return ks;
}

#endif /* FP4_CUDA_NATIVE_TILE_CUH */
