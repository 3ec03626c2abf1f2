/* frag.cuh — the native A16 path on the tensor cores from a weight copy repacked once (issue 10
 * item 1; SPEC §6): the "frag" layout and its kernels, 1 to 8 columns in one pass over the weights.
 * Included by the native route (a16_native.cu) and the kernel lab (dev/cuda/lab_frag.cu). Never
 * installed.
 *
 * The layout. Rows in tiles of 16 (the last padded with zero bytes), the row in super-blocks of
 * 256 values (k_pad). Item (tile t, super-block s) is FRAG_ITEM = 2304 bytes at (t * nsb + s) *
 * 2304, so a run of whole tiles is one contiguous range: 2048 bytes of payload, then 256 of scales.
 *   payload: for group quad q (groups 4q..4q+3 of the super-block) and lane l, 16 bytes at q * 512
 *     + l * 16: word j is group 4q + j's A fragment of mma.m16n8k16 for lane l (g = l / 4, u =
 *     l % 4): pair 0 = rows g, k 2u and 2u+1; pair 1 = row g + 8, same k; pair 2 = row g, k 2u + 8,
 *     2u + 9; pair 3 = row g + 8, k 2u + 8, 2u + 9. Pair i's two magnitudes (the nibbles' low three
 *     bits, E E M) sit at bits 3i and 16 + 3i, their signs at bits 12 + i and 28 + i, so that
 *     ((w << (9 - 3i)) & 0x0E000E00) | ((w << (3 - i)) & 0x80008000) is the f16x2 of the pair
 *     with the E2M1 value times 2^-14 (E at the f16 exponent's two low bits, M at its mantissa's
 *     top bit: a normal E2M1 2^(E-1) (1 + M/2) becomes 2^(E-15) (1 + M/2), the subnormal M/2
 *     becomes M 2^-15) — exact, no table.
 *   scales: for row pair p (rows p and p + 8 of the tile) 32 bytes at 2048 + p * 32: bytes 2G and
 *     2G + 1 are group G's E4M3FN scale bytes of rows p and p + 8, so one cvt.rn.f16x2.e4m3x2
 *     gives both of a lane's scales of a group.
 *
 * The kernel (frag_kernel<NW, IPW, NST, NCP>): persistent blocks, one per SM; block b owns tiles
 * [b T / G, (b + 1) T / G) and streams their items through NST shared-memory stages of IPW * NW
 * items (cp.async.bulk, one mbarrier a stage; the first stages requested before the PDL wait, as
 * a16_stream.cuh does). After the wait every block turns the f32 input into f16 in shared memory:
 * each column c scaled by 2^-e_c (e_c = the exponent of the column's largest |x|, less 14: the
 * largest value lands in [2^14, 2^15), so no f16 overflow however large the activations — bf16's
 * range with f16's precision), laid out in B-fragment order. Item i of a stage goes to warp i %
 * NW; per group the warp decodes its 8 weights per lane (13 integer operations), multiplies on the
 * tensor core (m16n8k16, f16 x f16 -> f32, C = 0: up to 8 columns at once) and adds the four
 * outputs into f32 accumulators with the group's two scales (E4M3 -> f16 -> f32, exact). A warp's
 * sum for a tile goes to a ring slot in shared memory when its items move past the tile; the warp
 * that completes the slot adds the NW partial sums of each (row, column) in warp order and writes
 * y = (sum * 2^(14 + e_c)) * scale2. Every sum is in a fixed order that depends on the shape and
 * the grid (one block per SM), never on the column count: deterministic, and a column's bits do
 * not depend on its neighbours.
 */
#ifndef FP4_CUDA_FRAG_CUH
#define FP4_CUDA_FRAG_CUH

#include "a16_stream.cuh" /* mbarrier / bulk-copy primitives, stream_device_ok, stream_slot */

#define FRAG_MAX_COLS 8

/* ---- repack: canonical device rows -> frag ------------------------------------------------------ */
/* one warp per item: the item's 16 rows x 128 payload bytes and 16 x 16 scale bytes into shared
 * memory with 16-byte loads (rows past n_out read as zero), then every lane writes its 16 bytes of
 * each group quad and lanes 0..7 their row pair's 32 scale bytes */
#define FRAG_REPACK_WARPS 8
static __global__ __launch_bounds__(FRAG_REPACK_WARPS * 32) void frag_repack_kernel(
    const uint8_t *__restrict__ pay, const uint8_t *__restrict__ scl, int64_t pstride, int64_t sstride,
    int64_t n_out, int nsb, int64_t n_items, uint8_t *__restrict__ out) {
    __shared__ __align__(16) uint8_t P[FRAG_REPACK_WARPS][16 * 128 + 16 * 16];
    const int warp = threadIdx.x >> 5, l = threadIdx.x & 31;
    const int64_t it = (int64_t)blockIdx.x * FRAG_REPACK_WARPS + warp;
    if (it >= n_items) return; /* warp-uniform */
    const int64_t tile = it / nsb;
    const int sb = (int)(it % nsb);
    uint8_t *p = P[warp];
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const int c = k * 32 + l, row = c >> 3, col = c & 7;
        const int64_t r = tile * 16 + row;
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (r < n_out) v = *reinterpret_cast<const uint4 *>(pay + r * pstride + (int64_t)sb * 128 + col * 16);
        *reinterpret_cast<uint4 *>(p + row * 128 + col * 16) = v;
    }
    if (l < 16) {
        const int64_t r = tile * 16 + l;
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (r < n_out) v = *reinterpret_cast<const uint4 *>(scl + r * sstride + (int64_t)sb * 16);
        *reinterpret_cast<uint4 *>(p + 2048 + l * 16) = v;
    }
    __syncwarp();
    uint8_t *o = out + it * FRAG_ITEM;
    const int g = l >> 2, u = l & 3;
#pragma unroll
    for (int q = 0; q < 4; q++) {
        uint32_t wv[4];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int off = (q * 4 + j) * 8;
            const uint32_t b[4] = {p[g * 128 + off + u], p[(g + 8) * 128 + off + u], p[g * 128 + off + 4 + u],
                                   p[(g + 8) * 128 + off + 4 + u]};
            uint32_t w = 0;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const uint32_t lo = b[i] & 15u, hi = b[i] >> 4;
                w |= (lo & 7u) << (3 * i) | (hi & 7u) << (16 + 3 * i) | (lo >> 3) << (12 + i) |
                     (hi >> 3) << (28 + i);
            }
            wv[j] = w;
        }
        *reinterpret_cast<uint4 *>(o + q * 512 + l * 16) = make_uint4(wv[0], wv[1], wv[2], wv[3]);
    }
    if (l < 8) {
        uint32_t v[8];
#pragma unroll
        for (int m = 0; m < 8; m++) {
            const int G0 = 2 * m, G1 = 2 * m + 1;
            v[m] = (uint32_t)p[2048 + l * 16 + G0] | (uint32_t)p[2048 + (l + 8) * 16 + G0] << 8 |
                   (uint32_t)p[2048 + l * 16 + G1] << 16 | (uint32_t)p[2048 + (l + 8) * 16 + G1] << 24;
        }
        uint4 *d = reinterpret_cast<uint4 *>(o + 2048 + l * 32);
        d[0] = make_uint4(v[0], v[1], v[2], v[3]);
        d[1] = make_uint4(v[4], v[5], v[6], v[7]);
    }
}

/* ---- the kernel ---------------------------------------------------------------------------------- */
/* f16x2 of pair i of a frag word (the E2M1 values times 2^-14) */
template <int I> static __device__ __forceinline__ uint32_t frag_pair(uint32_t w) {
    if constexpr (I == 3)
        return w & 0x8E008E00u;
    else
        return ((w << (9 - 3 * I)) & 0x0E000E00u) | ((w << (3 - I)) & 0x80008000u);
}

static __device__ __forceinline__ void frag_mma(const uint32_t a[4], uint32_t b0, uint32_t b1, float d[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%10,%10,%10,%10};"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(0.0f));
#else
    d[0] = d[1] = d[2] = d[3] = 0.0f;
#endif
}

/* Shared memory of one launch (all of it dynamic): barriers, NST stages, the f16 activations (per
 * super-block, per (column, u) lane of the B fragment, 32 words = 16 groups x 2 halves, padded to
 * 36 words so the 16-byte reads of 8 lanes hit distinct banks), per column its two factors, the
 * warps' maxima, the partial sums. */
template <int NW, int IPW, int NST, int NCP> struct frag_smem {
    static constexpr int IPS = NW * IPW;
    static constexpr size_t stage = (size_t)IPS * FRAG_ITEM;
    static constexpr size_t act_off = 128 + NST * stage;
    static __host__ __device__ size_t act_bytes(int nsb) { return (size_t)nsb * NCP * 4 * 144; }
    static __host__ __device__ size_t fac_off(int nsb) { return act_off + act_bytes(nsb); }
    static __host__ __device__ size_t wmax_off(int nsb) { return fac_off(nsb) + 2 * 4 * FRAG_MAX_COLS; }
    static __host__ __device__ size_t part_off(int nsb) {
        return wmax_off(nsb) + (size_t)NW * 4 * FRAG_MAX_COLS;
    }
    static __host__ __device__ size_t cnt_off(int nsb, int nring) {
        return part_off(nsb) + (size_t)nring * NW * 16 * NCP * 4;
    }
    static __host__ __device__ size_t bytes(int nsb, int nring) {
        return cnt_off(nsb, nring) + (size_t)nring * 4;
    }
    /* tiles whose partial sums can be open at once: a warp is at most a stage and a warp's
     * items ahead of another (the stages are consumed in step), so (IPS + NW) / nsb + 3 slots */
    static __host__ __device__ int ring_slots(int nsb, int64_t tiles_max) {
        const int64_t r = (IPS + NW + nsb - 1) / nsb + 3;
        return (int)(r < tiles_max ? r : tiles_max);
    }
};

template <int NW, int IPW, int NST, int NCP>
static __global__
__launch_bounds__(NW * 32, 1) void frag_kernel(const uint8_t *__restrict__ frag, int64_t n_out,
                                               int nsb_all, int64_t n_tiles, const float *__restrict__ x_all,
                                               int64_t n_in_all, int ncols, float scale2,
                                               float *__restrict__ y_all, int ring, int kp, int64_t y_ps) {
    using L = frag_smem<NW, IPW, NST, NCP>;
    constexpr int NT = NW * 32, IPS = L::IPS;
    extern __shared__ __align__(128) uint8_t sm[];
    /* split-K (session 11): kp parts of nsb_all / kp super-blocks each; block b serves part b % kp of
     * the tiles of block b / kp of a kp-th of the grid, from its part's activations, and writes the
     * part's sums at y_all + kq * y_ps (frag_sum_kernel adds the parts); kp 1: the whole rows */
    const int kq = (int)(blockIdx.x % (unsigned)kp), nsb = nsb_all / kp; /* this block's K part */
    const float *x = x_all + (int64_t)kq * nsb * 256;
    const int64_t x_cs = n_in_all, k_left = n_in_all - (int64_t)kq * nsb * 256;
    const int64_t n_in = k_left < (int64_t)nsb * 256 ? k_left : (int64_t)nsb * 256; /* values of the part */
    float *y = y_all + (int64_t)kq * y_ps;
    uint64_t *bar = reinterpret_cast<uint64_t *>(sm);
    uint8_t *stg = sm + 128;
    uint8_t *act = sm + L::act_off;
    float *fac = reinterpret_cast<float *>(sm + L::fac_off(nsb));   /* [0, 8): 2^-e_c, [8, 16): 2^(14+e_c) */
    float *part = reinterpret_cast<float *>(sm + L::part_off(nsb)); /* [ring][NW][NCP][16] */
    int *cnt =
        reinterpret_cast<int *>(sm + L::cnt_off(nsb, ring)); /* [ring]: warps done with the slot's tile */
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int64_t G = gridDim.x / kp, b = blockIdx.x / kp;
    const int64_t t0 = b * n_tiles / G, t1 = (b + 1) * n_tiles / G;
    const int ntl = (int)(t1 - t0);
    const int n_items = ntl * nsb;
    const int nit = (n_items + IPS - 1) / IPS;
    const uint8_t *gp = frag + t0 * nsb_all * FRAG_ITEM;

    auto issue = [&](int it) {
        const int s = it % NST, base = it * IPS;
        const int cnt = n_items - base < IPS ? n_items - base : IPS;
        fp4_mbar_expect_tx(&bar[s], (unsigned)cnt * FRAG_ITEM);
        if (kp == 1) {
            fp4_bulk_g2s(stg + s * L::stage, gp + (int64_t)base * FRAG_ITEM, (unsigned)cnt * FRAG_ITEM,
                         &bar[s]);
        } else { /* a part's items are runs of nsb within each tile's nsb_all */
            for (int li = base; li < base + cnt;) {
                const int tl = li / nsb, r = li - tl * nsb;
                const int run = nsb - r < base + cnt - li ? nsb - r : base + cnt - li;
                fp4_bulk_g2s(stg + s * L::stage + (size_t)(li - base) * FRAG_ITEM,
                             gp + ((int64_t)tl * nsb_all + (int64_t)kq * nsb + r) * FRAG_ITEM,
                             (unsigned)run * FRAG_ITEM, &bar[s]);
                li += run;
            }
        }
    };
    if (tid == 0) {
        for (int s = 0; s < NST; s++)
            fp4_mbar_init(&bar[s], 1);
        fp4_mbar_fence_init();
    }
    __syncthreads();
    if (tid == 0)
        for (int it = 0; it < NST && it < nit; it++)
            issue(it);
    fp4_pdl_trigger();
    for (int i = tid; i < ring; i += NT)
        cnt[i] = 0;
    fp4_pdl_wait(); /* x from here */

    /* the activations: per column the largest |x|, then f16(x * 2^-e) in B-fragment order */
    {
        /* the warps' maxima (dynamic shared memory: with any static shared memory the 227 KB opt-in
         * of the launch would be refused) */
        float(*wmax)[FRAG_MAX_COLS] = reinterpret_cast<float(*)[FRAG_MAX_COLS]>(sm + L::wmax_off(nsb));
        const int n4 = (int)(n_in >> 2);
        float m[NCP];
#pragma unroll
        for (int c = 0; c < NCP; c++)
            m[c] = 0.0f;
        for (int i = tid; i < n4; i += NT)
#pragma unroll
            for (int c = 0; c < NCP; c++)
                if (c < ncols) {
                    const float4 v = reinterpret_cast<const float4 *>(x + (int64_t)c * x_cs)[i];
                    m[c] = fmaxf(m[c], fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))));
                }
#pragma unroll
        for (int c = 0; c < NCP; c++) {
#pragma unroll
            for (int o = 16; o; o >>= 1)
                m[c] = fmaxf(m[c], __shfl_xor_sync(0xffffffffu, m[c], o));
            if (lane == 0) wmax[warp][c] = m[c];
        }
        __syncthreads();
        if (tid < ncols) {
            float mx = 0.0f;
            for (int w = 0; w < NW; w++)
                mx = fmaxf(mx, wmax[w][tid]);
            int e = (int)((__float_as_uint(mx) >> 23) & 0xFFu); /* biased exponent (0: zero/subnormal) */
            if (e == 0) e = 1;
            e = e - 127 - 14; /* largest |x| * 2^-e in [2^14, 2^15) */
            if (e < -126) e = -126;
            fac[tid] = __uint_as_float((uint32_t)(127 - e) << 23);
            fac[8 + tid] = __uint_as_float((uint32_t)(127 + 14 + e) << 23);
        }
        __syncthreads();
        /* chunks of 8 values (n_in % 16 == 0: a chunk is all in or all past the row): chunk i is
         * values 8i..8i+7, super-block i / 32, group (i / 2) % 16, half i % 2; its four pairs go to
         * the four u lanes' words */
        for (int i = tid; i < nsb * 32; i += NT) {
            const int k = i * 8, sb = i >> 5, wo = (i & 31) * 4;
#pragma unroll
            for (int c = 0; c < NCP; c++) {
                if (c >= ncols) break;
                float4 lo = make_float4(0.0f, 0.0f, 0.0f, 0.0f), hi = lo;
                if (k < n_in) {
                    const float4 *p = reinterpret_cast<const float4 *>(x + (int64_t)c * x_cs + k);
                    lo = p[0];
                    hi = p[1];
                }
                const float f = fac[c];
                uint8_t *d = act + ((sb * NCP + c) * 4) * 144 + wo;
                *reinterpret_cast<uint32_t *>(d) = fp4_f2_to_h2(__fmul_rn(lo.x, f), __fmul_rn(lo.y, f));
                *reinterpret_cast<uint32_t *>(d + 144) = fp4_f2_to_h2(__fmul_rn(lo.z, f), __fmul_rn(lo.w, f));
                *reinterpret_cast<uint32_t *>(d + 288) = fp4_f2_to_h2(__fmul_rn(hi.x, f), __fmul_rn(hi.y, f));
                *reinterpret_cast<uint32_t *>(d + 432) = fp4_f2_to_h2(__fmul_rn(hi.z, f), __fmul_rn(hi.w, f));
            }
        }
    }
    __syncthreads();

    const int g = lane >> 2, u = lane & 3;
    const bool bcol = g < NCP && g < ncols; /* this lane's B column is a real column */
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    /* The warp's sums for tile cur (block-local). Moving on to tile t, the warp writes its partial
     * sums of every tile before t (zeros for tiles it had no item of) to the tile's ring slot and
     * counts itself in; the warp that completes a slot's count adds the NW partial sums of each
     * (row, column) in warp order, writes y and frees the slot. */
    int cur = 0;
    auto flush_to = [&](int tnext) {
        for (; cur < tnext; cur++) {
            const int slot = cur % ring;
            float *p = part + ((size_t)slot * NW + warp) * 16 * NCP;
            const int c0 = 2 * u, c1 = 2 * u + 1;
            if (c0 < NCP) {
                p[c0 * 16 + g] = acc[0];
                p[c0 * 16 + g + 8] = acc[2];
            }
            if (c1 < NCP) {
                p[c1 * 16 + g] = acc[1];
                p[c1 * 16 + g + 8] = acc[3];
            }
            acc[0] = acc[1] = acc[2] = acc[3] = 0.0f;
            __syncwarp();
            __threadfence_block();
            int last = 0;
            if (lane == 0) last = atomicAdd(&cnt[slot], 1) == NW - 1;
            last = __shfl_sync(0xffffffffu, last, 0);
            if (last) {
                __threadfence_block();
                const float *ps = part + (size_t)slot * NW * 16 * NCP;
                for (int i = lane; i < 16 * ncols; i += 32) {
                    const int c = i >> 4, r = i & 15;
                    const int64_t row = (t0 + cur) * 16 + r;
                    float sum = 0.0f;
                    for (int w = 0; w < NW; w++)
                        sum = __fadd_rn(sum, ps[((size_t)w * NCP + c) * 16 + r]);
                    if (row < n_out)
                        y[(int64_t)c * n_out + row] = __fmul_rn(__fmul_rn(sum, fac[8 + c]), scale2);
                }
                __syncwarp();
                if (lane == 0) atomicExch(&cnt[slot], 0);
            }
        }
    };
    /* this warp's first item and its (tile, super-block) */
    int tl = 0, sbi = warp;
    while (sbi >= nsb)
        sbi -= nsb, tl++;
    for (int it = 0; it < nit; it++) {
        const int s = it % NST, base = it * IPS;
        const int cnt = n_items - base < IPS ? n_items - base : IPS;
        fp4_mbar_wait(&bar[s], (unsigned)(it / NST) & 1u);
#pragma unroll
        for (int ii = 0; ii < IPW; ii++) {
            const int i = ii * NW + warp;
            if (i < cnt) {
                if (tl != cur) flush_to(tl);
                const uint8_t *ip = stg + s * L::stage + (size_t)i * FRAG_ITEM;
                uint4 wq[4];
#pragma unroll
                for (int q = 0; q < 4; q++)
                    wq[q] = *reinterpret_cast<const uint4 *>(ip + q * 512 + lane * 16);
                const uint4 sa = *reinterpret_cast<const uint4 *>(ip + 2048 + g * 32);
                const uint4 sbv = *reinterpret_cast<const uint4 *>(ip + 2048 + g * 32 + 16);
                uint32_t bq[32];
                if (bcol) {
                    const uint8_t *ap = act + ((size_t)sbi * NCP * 4 + g * 4 + u) * 144;
#pragma unroll
                    for (int k = 0; k < 8; k++) {
                        const uint4 v = *reinterpret_cast<const uint4 *>(ap + k * 16);
                        bq[4 * k] = v.x, bq[4 * k + 1] = v.y, bq[4 * k + 2] = v.z, bq[4 * k + 3] = v.w;
                    }
                } else {
#pragma unroll
                    for (int k = 0; k < 32; k++)
                        bq[k] = 0u;
                }
                const uint32_t sw[8] = {sa.x, sa.y, sa.z, sa.w, sbv.x, sbv.y, sbv.z, sbv.w};
#pragma unroll
                for (int Gq = 0; Gq < 16; Gq++) {
                    const uint4 v4 = wq[Gq >> 2];
                    const uint32_t w = (Gq & 3) == 0   ? v4.x
                                       : (Gq & 3) == 1 ? v4.y
                                       : (Gq & 3) == 2 ? v4.z
                                                       : v4.w;
                    const uint32_t a[4] = {frag_pair<0>(w), frag_pair<1>(w), frag_pair<2>(w),
                                           frag_pair<3>(w)};
                    float d[4];
                    frag_mma(a, bq[2 * Gq], bq[2 * Gq + 1], d);
                    const uint32_t h2 = fp4_e4m3x2_to_h2(sw[Gq >> 1] >> (16 * (Gq & 1)));
                    const __half2 hh = *reinterpret_cast<const __half2 *>(&h2);
                    const float s0 = __low2float(hh), s1 = __high2float(hh);
                    acc[0] = __fmaf_rn(d[0], s0, acc[0]);
                    acc[2] = __fmaf_rn(d[2], s1, acc[2]);
                    if constexpr (NCP > 1) {
                        acc[1] = __fmaf_rn(d[1], s0, acc[1]);
                        acc[3] = __fmaf_rn(d[3], s1, acc[3]);
                    }
                }
                sbi += NW;
                while (sbi >= nsb)
                    sbi -= nsb, tl++;
            }
        }
        __syncthreads(); /* every warp is done with stage s */
        if (tid == 0 && it + NST < nit) issue(it + NST);
    }
    flush_to(ntl);
}

/* ---- launches ------------------------------------------------------------------------------------ */
/* the frag copy of w (canonical layout, k_pad % 256 == 0) into out (frag_bytes(n_out, k_pad)) */
static fp4_status frag_repack(const fp4_cuda_tensor *w, uint8_t *out, cudaStream_t s) {
    if (!w || w->type != FP4_TYPE_NVFP4_E2M1 || !w->d_payload || !w->d_scales || !out || w->k_pad % 256 ||
        w->k_pad < 256 || w->payload_stride < w->k_pad / 2 || w->scale_stride < w->k_pad / 16 ||
        w->payload_stride % 16 || w->scale_stride % 16 || !fp4_aligned16(w->d_payload) ||
        !fp4_aligned16(w->d_scales) || !fp4_aligned16(out))
        return FP4_ERR_INVALID_ARG;
    const int nsb = (int)(w->k_pad / 256);
    const int64_t n_items = (w->n_out + 15) / 16 * nsb;
    frag_repack_kernel<<<(unsigned)((n_items + FRAG_REPACK_WARPS - 1) / FRAG_REPACK_WARPS),
                         FRAG_REPACK_WARPS * 32, 0, s>>>(w->d_payload, w->d_scales, w->payload_stride,
                                                         w->scale_stride, w->n_out, nsb, n_items, out);
    FP4_CUDA_LAUNCHED();
    return FP4_OK;
}

/* the grid, ring and shared memory of a launch of kp K parts; FP4_ERR_UNSUPPORTED where one block's
 * shared memory would not fit (or the device has no sm_90a code) */
template <int NW, int IPW, int NST, int NCP>
static fp4_status frag_plan_k(const fp4_cuda_tensor *w, int kp, int64_t *grid, int *ring, size_t *smem) {
    using L = frag_smem<NW, IPW, NST, NCP>;
    if (w->k_pad % 256 || w->n_in % 16 || w->k_pad < 256 || !stream_device_ok()) return FP4_ERR_UNSUPPORTED;
    const int nsb_all = (int)(w->k_pad / 256);
    if (kp < 1 || nsb_all % kp) return FP4_ERR_UNSUPPORTED;
    const int nsb = nsb_all / kp;
    const int64_t n_tiles = (w->n_out + 15) / 16;
    int sms = fp4_cu_sm_count();
    if (sms <= 0) sms = 132;
    const int64_t per = sms / kp > 0 ? sms / kp : 1;
    const int64_t G = n_tiles < per ? n_tiles : per; /* blocks per part */
    const int64_t tmax = (n_tiles + G - 1) / G;
    const int r = L::ring_slots(nsb, tmax);
    const size_t b = L::bytes(nsb, r);
    if (b > STREAM_SMEM_MAX || tmax * nsb >= (1 << 30)) return FP4_ERR_UNSUPPORTED;
    if (grid) *grid = G * kp;
    if (ring) *ring = r;
    if (smem) *smem = b;
    return FP4_OK;
}

/* The K parts of every launch on w (session 11): the fewest (1, 2, 4, 7 or 8, dividing the row's
 * super-blocks) with which FRAG_MAX_COLS columns fit one launch, 0 if none. A function of the tensor
 * alone, so that a column's bits do not depend on how many columns the call has. */
template <int NW, int IPW, int NST> static int frag_parts(const fp4_cuda_tensor *w) {
    static const int kps[] = {1, 2, 4, 7, 8};
    for (int i = 0; i < 5; i++)
        if (frag_plan_k<NW, IPW, NST, FRAG_MAX_COLS>(w, kps[i], NULL, NULL, NULL) == FP4_OK) return kps[i];
    return 0;
}

template <int NW, int IPW, int NST, int NCP>
static fp4_status frag_plan(const fp4_cuda_tensor *w, int64_t *grid, int *ring, size_t *smem) {
    const int kp = frag_parts<NW, IPW, NST>(w);
    return kp ? frag_plan_k<NW, IPW, NST, NCP>(w, kp, grid, ring, smem) : FP4_ERR_UNSUPPORTED;
}

/* y = the sum of kp parts p[k * ps + i] (k = 0, 1, ... in order) for i < n */
static __global__ void frag_sum_kernel(const float *__restrict__ p, int64_t ps, int kp, int64_t n,
                                       float *__restrict__ y) {
    fp4_pdl_wait();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float s = p[i];
    for (int k = 1; k < kp; k++)
        s = __fadd_rn(s, p[(int64_t)k * ps + i]);
    y[i] = s;
}

/* y (ncols x n_out) = w x (ncols x n_in), ncols <= NCP, from the frag copy; FP4_ERR_UNSUPPORTED
 * where the device has no sm_90a code or one block's shared memory would not fit. With more than one
 * K part the parts' sums go to parts (frag_parts(w) * ncols * n_out floats) and a second launch
 * adds them into y. */
template <int NW, int IPW, int NST, int NCP>
static fp4_status launch_frag(const fp4_cuda_tensor *w, const uint8_t *frag, const float *x, int64_t ncols,
                              float *y, float *parts, cudaStream_t s, int pdl) {
    if (ncols < 1 || ncols > NCP || !frag || !fp4_aligned16(frag) || !fp4_aligned16(x))
        return FP4_ERR_UNSUPPORTED;
    const int kp = frag_parts<NW, IPW, NST>(w);
    if (kp < 1 || (kp > 1 && !parts)) return FP4_ERR_UNSUPPORTED;
    int64_t G;
    int ring;
    size_t smem;
    const fp4_status st = frag_plan_k<NW, IPW, NST, NCP>(w, kp, &G, &ring, &smem);
    if (st != FP4_OK) return st;
    const int nsb = (int)(w->k_pad / 256);
    const int64_t n_tiles = (w->n_out + 15) / 16, n = ncols * w->n_out;
    static int opted_in[FP4_CU_MAX_DEVICES];
    FP4_CU_TRY(fp4_cu_smem_opt_in((const void *)frag_kernel<NW, IPW, NST, NCP>, STREAM_SMEM_MAX, opted_in));
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)G);
    cfg.blockDim = dim3(NW * 32);
    cfg.dynamicSmemBytes = stream_smem_request(smem, 1);
    cfg.stream = s;
    FP4_CU_TRY(fp4_cu_launch_pdl(cfg, pdl, frag_kernel<NW, IPW, NST, NCP>, frag, w->n_out, nsb, n_tiles, x,
                                 w->n_in, (int)ncols, w->scale2, kp > 1 ? parts : y, ring, kp, n));
    if (kp == 1) return FP4_OK;
    return fp4_cu_launch(dim3((unsigned)((n + 255) / 256)), dim3(256), 0, s, pdl, frag_sum_kernel,
                         (const float *)parts, n, kp, n, y);
}

#endif /* FP4_CUDA_FRAG_CUH */
