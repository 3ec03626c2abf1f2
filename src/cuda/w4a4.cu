/* w4a4.cu — the W4A4 contraction (SPEC §5) on the GPU, bit-identical to fp4_nvfp4_matvec_w4a4:
 * the two routes of dispatch.cu's W4A4 rows and the activation quantization they share.
 *
 *   act_quant_kernel: one thread per (column, 16-group), SPEC §3 steps 3–5 against
 *     input_scale = 1/input_scale_inv (IEEE division on the host, like the CPU). Writes the packed
 *     codes and scale bytes (the public layout) and/or the kernel layout: int8 e2m1_q1 values
 *     (n_cols, k_pad) and e4m3fn_q9 ints with a caller-chosen (column, group) stride.
 *   w4a4_dp4a_kernel<NC, R> (route nvfp4.w4a4.dp4a, any width; chunks of 16/8/4/2/1 columns): one
 *     warp per R rows, dp4a of decoded weight codes against the int8 activation codes,
 *     dot*q9w (int32) * q9a into int64, one int64 sum per row (exact, so order-free), then
 *     ((float)T * 2^-20) * scale2 * input_scale and the F16 boundary.
 *   act_frag_kernel + w4a4_imma_kernel (route nvfp4.w4a4.tile16, exactly 16 columns, n_in % 64):
 *     8 warps over 32 rows, each warp its own super-blocks, int32 weighting through a subnormal
 *     f32 product (see the kernel's comment). bench/gpu.md (round 4) has the measurements; the
 *     kernel lab (dev/cuda) keeps the 16-column shared-memory tile it replaced.
 */
#include "sb_tile.cuh"

#define MMA_COLS 16 /* the integer-MMA route's width: 2 n-tiles of 8 */

/* ---- activation quantization ----------------------------------------------------------------- */

/* SPEC §3 steps 3-5 for one 16-group (src 16-byte aligned): returns the E4M3FN scale byte; the
 * packed E2M1 codes (two words) and the four int8x4 words of e2m1_q1 values. */
static __device__ __forceinline__ uint32_t quant_group(const float *src, float input_scale, float d6,
                                                       uint32_t packed[2], uint32_t qv[4]) {
    float v[16];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const float4 f = reinterpret_cast<const float4 *>(src)[i];
        v[4 * i] = f.x;
        v[4 * i + 1] = f.y;
        v[4 * i + 2] = f.z;
        v[4 * i + 3] = f.w;
    }
    float bmax = 0.0f;
#pragma unroll
    for (int j = 0; j < 16; j++) {
        const float a = fabsf(v[j]);
        if (a > bmax) bmax = a;
    }
    float t = __fdiv_rn(bmax, d6);
    if (t == 0.0f) t = 1.0f;
    if (t < 0x1p-9f) t = 0x1p-9f;
    if (t > 448.0f) t = 448.0f;
    const uint32_t sc = fp4_e4m3_encode(t);
    const float den = __fmul_rn(fp4_e4m3_to_f32(sc), input_scale);
    packed[0] = packed[1] = 0u;
    qv[0] = qv[1] = qv[2] = qv[3] = 0u;
#pragma unroll
    for (int j = 0; j < 16; j++) {
        const uint32_t c = fp4_dev_e2m1_encode(__fdiv_rn(v[j], den));
        packed[j >> 3] |= c << (4 * (j & 7));
        qv[j >> 2] |= ((uint32_t)fp4_dev_e2m1_q1(c) & 0xFFu) << (8 * (j & 3));
    }
    return sc;
}

static __global__ __launch_bounds__(256) void act_quant_kernel(const float *__restrict__ x, int64_t n_in,
                                                               int64_t k_pad, int64_t n_cols,
                                                               float input_scale, float d6, uint8_t *codes,
                                                               uint8_t *sbytes, int8_t *q1, int32_t *q9,
                                                               int64_t q9_col_stride,
                                                               int64_t q9_group_stride) {
    const int64_t ngp = k_pad / 16;
    const int64_t gid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (gid >= n_cols * ngp) return;
    const int64_t col = gid / ngp, g = gid % ngp;
    if (g >= n_in / 16) { /* padding groups of the kernel layout: zero codes, zero scale */
        if (q1) *reinterpret_cast<uint4 *>(q1 + col * k_pad + g * 16) = make_uint4(0u, 0u, 0u, 0u);
        if (q9) q9[col * q9_col_stride + g * q9_group_stride] = 0;
        return;
    }
    uint32_t packed[2], qv[4];
    const uint32_t sc = quant_group(x + col * n_in + g * 16, input_scale, d6, packed, qv);
    if (codes)
        *reinterpret_cast<uint2 *>(codes + col * (n_in / 2) + g * 8) = make_uint2(packed[0], packed[1]);
    if (sbytes) sbytes[col * (n_in / 16) + g] = (uint8_t)sc;
    if (q1) *reinterpret_cast<uint4 *>(q1 + col * k_pad + g * 16) = make_uint4(qv[0], qv[1], qv[2], qv[3]);
    if (q9) q9[col * q9_col_stride + g * q9_group_stride] = fp4_e4m3_q9(sc);
}

/* ---- any width: dp4a, warp per R rows -------------------------------------------------------- */

static __device__ __forceinline__ int dot16(uint32_t w0, uint32_t w1, uint4 a, const fp4_q1_luts &l) {
    int d = __dp4a((int)fp4_e2m1x4_to_q1x4_l(w0, l), (int)a.x, 0);
    d = __dp4a((int)fp4_e2m1x4_to_q1x4_l(w0 >> 16, l), (int)a.y, d);
    d = __dp4a((int)fp4_e2m1x4_to_q1x4_l(w1, l), (int)a.z, d);
    return __dp4a((int)fp4_e2m1x4_to_q1x4_l(w1 >> 16, l), (int)a.w, d);
}

template <int NC, int R>
static __global__ __launch_bounds__(256) void w4a4_dp4a_kernel(
    const uint8_t *__restrict__ payload, const uint8_t *__restrict__ scales, int64_t pstride, int64_t sstride,
    int64_t n_out, int64_t k_pad, float scale2, float input_scale, const int8_t *__restrict__ q1,
    const int32_t *__restrict__ q9, float *__restrict__ y) {
    const int lane = threadIdx.x & 31;
    const int64_t row0 = (((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5) * R;
    if (row0 >= n_out) return;
    const uint8_t *prow[R];
    const uint8_t *srow[R];
    fp4_warp_rows<R>(payload, scales, pstride, sstride, n_out, row0, 0, 0, prow, srow);
    const fp4_q1_luts luts = fp4_q1_luts_make();
    long long part[R][NC];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int c = 0; c < NC; c++) part[r][c] = 0;
    const int64_t nch = k_pad / 32; /* 16-byte chunks: two groups each */
    for (int64_t ch = lane; ch < nch; ch += 32) {
        uint4 wv[R];
        int qwa[R], qwb[R];
#pragma unroll
        for (int r = 0; r < R; r++) {
            wv[r] = fp4_ldg16(prow[r] + ch * 16);
            const uint32_t two = __ldg(reinterpret_cast<const unsigned short *>(srow[r] + ch * 2));
            qwa[r] = fp4_e4m3_q9(two & 0xFFu);
            qwb[r] = fp4_e4m3_q9(two >> 8);
        }
#pragma unroll
        for (int c = 0; c < NC; c++) {
            const int8_t *xa = q1 + c * k_pad + ch * 32;
            const uint4 a0 = fp4_ldg16(xa), a1 = fp4_ldg16(xa + 16);
            const int2 qa = __ldg(reinterpret_cast<const int2 *>(q9 + c * (k_pad / 16) + ch * 2));
#pragma unroll
            for (int r = 0; r < R; r++) {
                const int da = dot16(wv[r].x, wv[r].y, a0, luts) * qwa[r]; /* |.| <= 2304*229376: fits */
                const int db = dot16(wv[r].z, wv[r].w, a1, luts) * qwb[r];
                part[r][c] += (long long)da * qa.x + (long long)db * qa.y;
            }
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int c = 0; c < NC; c++)
#pragma unroll
            for (int m = 16; m >= 1; m >>= 1) part[r][c] += fp4_shfl_xor_i64(part[r][c], m);
    if (lane == 0) {
#pragma unroll
        for (int r = 0; r < R; r++)
            if (row0 + r < n_out)
#pragma unroll
                for (int c = 0; c < NC; c++)
                    y[c * n_out + row0 + r] = fp4_cu_w4a4_term(part[r][c], scale2, input_scale);
    }
}

/* ---- 16 columns: integer MMA, 8 warps over 32 rows, one int64 total per (row, column) ---------
 *
 * The exact A16 MMA kernel's layout (a16_exact.cu): block = 8 warps over the same 32 rows,
 * round t gives warp w super-block 8t+w; each warp cp.async-copies its own tile (32 rows x 128
 * payload bytes, XOR-swizzled, + 32 x 16 scale bytes), two stages; per 16-group one
 * mma.sync m16n8k16 s8 per (m-tile, n-tile) gives dot_g for 16 rows x 8 columns.
 * Because the W4A4 total is one int64 per (row, column) and order-free, every warp keeps its own
 * totals over all its super-blocks (no per-round barrier) and the 8 warps' totals are added once
 * at the end through shared memory.
 * Weighting (the expensive part). Fast path, per warp and super-block, warp-uniform: every weight
 * scale q9 >= 0; with sw(r) / sa(c) the lowest set bit of the OR of the row's / column's 16 q9,
 * qw' = q9w >> sw, qa' = q9a >> sa, and max qw' * max qa' <= 116508 (so 8 groups of
 * |dot| <= 2304 stay below 2^31) and max sw + max sa <= 30. Then P = qw'*qa' < 2^23 comes out
 * of ONE f32 multiply as the bits of a subnormal: qw' is stored as the float with bits qw'
 * (= qw' * 2^-149), qa' as the float qa', and their exact product qw'qa' * 2^-149 has the bits
 * qw'qa' (no FTZ in this build). The int32 sum over 8 groups of dot * P (IMAD, modular, exact
 * since |sum| < 2^31) is added into the int64 total as acc * 2^(sw+sa) (one IMAD.WIDE).
 * Per (row, column, group): 1 FMUL (FMA-lite pipe) + 1 IMAD instead of IMUL + IMAD.WIDE.
 * Otherwise (negative or NaN-adjacent scales, wide spreads): (dot * q9w) * q9a into int64
 * (|dot * q9w| <= 2304 * 229376 < 2^31). Both exact, so the bits equal SPEC §5 either way.
 * Activations come from act_frag_kernel: int8 codes in the MMA fragment order of the exact kernel
 * (column, super-block, qd, group, 4 bytes), qa' as f32 in [sb][group][qd][nt][e] order (one
 * 16-byte load = the lane's 4 columns), and per (sb, column) sa | max qa' << 5 in the same order. */
#define M16_NW 8
#define M16_ROWS 32
#define M16_STAGE FP4_SBT_BYTES
#define M16_LIMIT 116508 /* floor((2^31 - 1) / (8 * 2304)) */
#define M16_SMEM (1024 + M16_NW * 2 * M16_STAGE + M16_NW * 512 * 4)

/* slot of column c (0..15) inside a 16-entry [qd][nt][e] record */
static __device__ __forceinline__ int m16_slot(int c) { return ((c & 7) >> 1) * 4 + (c >> 3) * 2 + (c & 1); }

static __global__ __launch_bounds__(256) void act_frag_kernel(const float *__restrict__ x, int64_t n_in,
                                                              int64_t k_pad, float input_scale, float d6,
                                                              int8_t *q1f, float *qaf, int *cinfo) {
    const int64_t ngp = k_pad / 16;
    const int64_t gid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int lane = threadIdx.x & 31;
    const unsigned hmask = 0xFFFFu << (lane & 16);
    if (gid >= 16 * ngp) return; /* whole half-warps: 16 * ngp is a multiple of 16 */
    const int64_t col = gid / ngp, G = gid % ngp, sb = G / 16;
    const int g = (int)(G % 16);
    uint32_t qv[4] = {0u, 0u, 0u, 0u};
    int q9 = 0;
    if (G < n_in / 16) {
        uint32_t packed[2];
        const uint32_t sc = quant_group(x + col * n_in + G * 16, input_scale, d6, packed, qv);
        q9 = fp4_e4m3_q9(sc); /* > 0: t is clamped to [2^-9, 448] */
    }
    int8_t *dst = q1f + col * k_pad + sb * 256 + g * 4;
#pragma unroll
    for (int qd = 0; qd < 4; qd++) *reinterpret_cast<uint32_t *>(dst + qd * 64) = qv[qd];
    uint32_t o = (uint32_t)abs(q9);
#pragma unroll
    for (int m = 8; m >= 1; m >>= 1) o |= __shfl_xor_sync(hmask, o, m);
    const int sa = o ? __ffs((int)o) - 1 : 0;
    const int qs = abs(q9) >> sa;
    int mx = qs;
#pragma unroll
    for (int m = 8; m >= 1; m >>= 1) mx = max(mx, __shfl_xor_sync(hmask, mx, m));
    const int slot = m16_slot((int)col);
    qaf[G * 16 + slot] = (float)qs;
    if (g == 0) cinfo[sb * 16 + slot] = sa | (mx << 5);
}

template <bool FAST>
static __device__ __forceinline__ void
m16_half(const uint8_t *st, const int *qp, const int8_t *xb, int64_t k_pad, const float *qa_sb, int h, int r0,
         int qd, const int (&ca)[4], const int (&mrow)[4], const int (&scol)[4], const fp4_q1_luts &l,
         long long (&tot)[2][2][4]) {
    uint32_t b[2][8];
#pragma unroll
    for (int nt = 0; nt < 2; nt++) {
        const int8_t *p = xb + (int64_t)(nt * 8 + r0) * k_pad + qd * 64 + h * 32;
        const uint4 v0 = __ldg(reinterpret_cast<const uint4 *>(p)),
                    v1 = __ldg(reinterpret_cast<const uint4 *>(p + 16));
        b[nt][0] = v0.x, b[nt][1] = v0.y, b[nt][2] = v0.z, b[nt][3] = v0.w;
        b[nt][4] = v1.x, b[nt][5] = v1.y, b[nt][6] = v1.z, b[nt][7] = v1.w;
    }
    int acc[2][2][4];
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int nt = 0; nt < 2; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++) acc[mt][nt][i] = 0;
#pragma unroll
    for (int gg = 0; gg < 8; gg++) {
        const int g = h * 8 + gg;
        uint32_t a[2][2];
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
            for (int hh = 0; hh < 2; hh++) {
                const uint32_t u = fp4_sbt_a_unit(st, mt, hh, r0, qd, g);
                a[mt][hh] = fp4_e2m1x4_to_q1x4_l(u, l);
            }
        const int4 qv = *reinterpret_cast<const int4 *>(qp + g * 32 + r0 * 4); /* rows r0, +8, +16, +24 */
        const int qs[4] = {qv.x, qv.y, qv.z, qv.w};
        const float4 fa = __ldg(reinterpret_cast<const float4 *>(qa_sb + g * 16 + qd * 4)); /* [nt][e] */
        const float qa[4] = {fa.x, fa.y, fa.z, fa.w};
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
            for (int nt = 0; nt < 2; nt++) {
                int d[4];
                fp4_mma_s8(d, a[mt][0], a[mt][1], b[nt][gg]);
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const int qw = qs[mt * 2 + (i >> 1)];
                    if (FAST) {
                        const int P = __float_as_int(__fmul_rn(__int_as_float(qw), qa[nt * 2 + (i & 1)]));
                        acc[mt][nt][i] += d[i] * P;
                    } else {
                        const int qai = (int)qa[nt * 2 + (i & 1)] << scol[nt * 2 + (i & 1)];
                        tot[mt][nt][i] += (long long)(d[i] * qw) * qai;
                    }
                }
            }
    }
    if (FAST) {
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
            for (int nt = 0; nt < 2; nt++)
#pragma unroll
                for (int i = 0; i < 4; i++)
                    tot[mt][nt][i] += (long long)acc[mt][nt][i] *
                                      (long long)(mrow[mt * 2 + (i >> 1)] << scol[nt * 2 + (i & 1)]);
    }
}

static __global__ __launch_bounds__(256, 2) void w4a4_imma_kernel(
    const uint8_t *__restrict__ payload, const uint8_t *__restrict__ scales, int64_t pstride, int64_t sstride,
    int64_t n_out, int nsb, int64_t k_pad, float scale2, float input_scale, const int8_t *__restrict__ q1f,
    const float *__restrict__ qaf, const int *__restrict__ cinfo, float *__restrict__ y) {
    extern __shared__ __align__(16) uint8_t m16_smem[];
    int *lut = reinterpret_cast<int *>(m16_smem);
    uint8_t *stg = m16_smem + 1024;
    int *qp_all = reinterpret_cast<int *>(stg + M16_NW * 2 * M16_STAGE);
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, r0 = lane >> 2, qd = lane & 3;
    const int64_t rowbase = (int64_t)blockIdx.x * M16_ROWS;
    uint8_t *my = stg + warp * 2 * M16_STAGE;
    int *qp = qp_all + warp * 512;
    lut[tid] = fp4_e4m3_q9((uint32_t)tid);
    const fp4_q1_luts luts = fp4_q1_luts_make();

    auto load = [&](int sb, int stage) {
        FP4_SBT_LOAD(my + stage * M16_STAGE, payload, scales, pstride, sstride, n_out, rowbase, sb, nsb,
                     lane);
    };

    long long tot[2][2][4];
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int nt = 0; nt < 2; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++) tot[mt][nt][i] = 0;
    const int rounds = (nsb + M16_NW - 1) / M16_NW;
    load(warp, 0);
    __syncthreads(); /* the q9 table */
    for (int t = 0; t < rounds; t++) {
        const int sb = t * M16_NW + warp;
        load(sb + M16_NW, (t + 1) & 1);
        if (sb < nsb) {
            const int4 ci4 = __ldg(reinterpret_cast<const int4 *>(cinfo + sb * 16 + qd * 4)); /* [nt][e] */
            const int ca[4] = {ci4.x, ci4.y, ci4.z, ci4.w};
            int scol[4], mxa = 0, sca = 0;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                scol[j] = ca[j] & 31;
                mxa = max(mxa, ca[j] >> 5);
                sca = max(sca, scol[j]);
            }
            fp4_cp_async_wait<1>();
            __syncwarp();
            const uint8_t *st = my + (t & 1) * M16_STAGE;
            int q9[16];
            int neg;
            const uint32_t o = fp4_sbt_row_q9(fp4_sbt_row_scales(st, lane), lut, q9, &neg);
            const int s = o ? __ffs((int)o) - 1 : 0;
            const int mw = (int)(o >> s); /* >= max q9 >> s */
            const int wmw = (int)__reduce_max_sync(0xFFFFFFFFu, (unsigned)mw);
            const int wma = (int)__reduce_max_sync(0xFFFFFFFFu, (unsigned)mxa);
            const int wsw = (int)__reduce_max_sync(0xFFFFFFFFu, (unsigned)s);
            const int wsa = (int)__reduce_max_sync(0xFFFFFFFFu, (unsigned)sca);
            const bool fast =
                !__any_sync(0xFFFFFFFFu, neg < 0) && (long long)wmw * wma <= M16_LIMIT && wsw + wsa <= 30;
            const int sh = fast ? s : 0;
            fp4_sbt_put_q9(qp, q9, sh, lane);
            int mrow[4]; /* 2^shift of the lane's rows r0, r0+8, r0+16, r0+24 */
#pragma unroll
            for (int v = 0; v < 4; v++) mrow[v] = 1 << __shfl_sync(0xFFFFFFFFu, sh, r0 + 8 * v);
            __syncwarp();
            const int8_t *xb = q1f + (int64_t)sb * 256;
            const float *qa_sb = qaf + (int64_t)sb * 256;
            if (fast) {
                m16_half<true>(st, qp, xb, k_pad, qa_sb, 0, r0, qd, ca, mrow, scol, luts, tot);
                m16_half<true>(st, qp, xb, k_pad, qa_sb, 1, r0, qd, ca, mrow, scol, luts, tot);
            } else {
                m16_half<false>(st, qp, xb, k_pad, qa_sb, 0, r0, qd, ca, mrow, scol, luts, tot);
                m16_half<false>(st, qp, xb, k_pad, qa_sb, 1, r0, qd, ca, mrow, scol, luts, tot);
            }
        }
        __syncwarp(); /* the stage read this round is refilled by the next round's prefetch */
    }
    fp4_cp_async_wait<0>();
    __syncthreads(); /* every warp is done with its stages: reuse them for the totals */
    long long *tb = reinterpret_cast<long long *>(stg); /* [warp][row][16]: 8 x 32 x 16 x 8 = 32 KB */
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int nt = 0; nt < 2; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int row = mt * 16 + (i >> 1) * 8 + r0, col = nt * 8 + qd * 2 + (i & 1);
                tb[(warp * M16_ROWS + row) * 16 + col] = tot[mt][nt][i];
            }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < 2; j++) {
        const int p = tid + 256 * j, row = p >> 4, col = p & 15;
        long long T = 0;
#pragma unroll
        for (int w = 0; w < M16_NW; w++) T += tb[(w * M16_ROWS + row) * 16 + col];
        if (rowbase + row < n_out)
            y[(int64_t)col * n_out + rowbase + row] = fp4_cu_w4a4_term(T, scale2, input_scale);
    }
}

/* ---- launchers ----------------------------------------------------------------------------------- */

template <int NC, int R>
static fp4_status launch_dp4a(const fp4_cuda_tensor *w, float is, const int8_t *q1, const int32_t *q9,
                              float *y, cudaStream_t s) {
    const int64_t warps = (w->n_out + R - 1) / R;
    w4a4_dp4a_kernel<NC, R><<<(unsigned)((warps * 32 + 255) / 256), 256, 0, s>>>(
        w->d_payload, w->d_scales, w->payload_stride, w->scale_stride, w->n_out, w->k_pad, w->scale2, is, q1,
        q9, y);
    FP4_CUDA_LAUNCHED();
    return FP4_OK;
}

/* What both routes check; *is = input_scale. */
static fp4_status check_route(const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols, const float *d_y,
                              const fp4_cuda_scratch *s, float *is, float *d6) {
    if (!w || !d_x || !d_y || !s || !s->d_base || n_cols < 1) return FP4_ERR_INVALID_ARG;
    if (w->type != FP4_TYPE_NVFP4_E2M1 || !w->d_payload || !w->d_scales) return FP4_ERR_INVALID_ARG;
    if (w->n_in <= 0 || w->n_in % 16 || w->k_pad % 256 || w->k_pad < w->n_in) return FP4_ERR_SHAPE;
    if (w->payload_stride % 16 || w->scale_stride % 16 || !fp4_aligned16(w->d_payload) ||
        !fp4_aligned16(w->d_scales) || !fp4_aligned16(d_x))
        return FP4_ERR_INVALID_ARG;
    FP4_CU_TRY(fp4_cu_w4a4_scales(w->input_scale_inv, is, d6));
    if (FP4_CU_COUNTER_BYTES + fp4_cu_w4a4_scratch(w, n_cols) > s->bytes) return FP4_ERR_INVALID_ARG;
    return FP4_OK;
}

extern "C" {

/* input_scale and 6*input_scale exactly as the CPU computes them (f32, IEEE). */
fp4_status fp4_cu_w4a4_scales(float input_scale_inv, float *input_scale, float *d6) {
    if (!(input_scale_inv > 0.0f) || input_scale_inv != input_scale_inv || input_scale_inv > 3.4e38f)
        return FP4_ERR_SCALE2;
    volatile float is = 1.0f / input_scale_inv; /* volatile: one rounded f32 division, nothing fused */
    if (!(is > 0.0f) || is > 3.4e38f) return FP4_ERR_SCALE2;
    volatile float six = 6.0f * is;
    *input_scale = is;
    *d6 = six;
    return FP4_OK;
}

fp4_status fp4_cu_w4a4_act_quant(const float *d_x, int64_t n_in, int64_t k_pad, int64_t n_cols,
                                 float input_scale_inv, uint8_t *d_codes, uint8_t *d_scales, int8_t *d_q1,
                                 int32_t *d_q9, int64_t q9_cs, int64_t q9_gs, cudaStream_t stream) {
    if (!d_x || n_in < 0 || n_in % 16 || k_pad < n_in || k_pad % 16 || n_cols < 0 || !fp4_aligned16(d_x))
        return FP4_ERR_INVALID_ARG;
    float is, d6;
    FP4_CU_TRY(fp4_cu_w4a4_scales(input_scale_inv, &is, &d6));
    const int64_t n = n_cols * (k_pad / 16);
    if (n == 0) return FP4_OK;
    act_quant_kernel<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(
        d_x, n_in, k_pad, n_cols, is, d6, d_codes, d_scales, d_q1, d_q9, q9_cs, q9_gs);
    FP4_CUDA_LAUNCHED();
    return FP4_OK;
}

/* Both routes lay out 16 columns: int8 codes (16, k_pad), then q9 ints (dp4a) or qa' floats
 * (MMA) (16, k_pad/16), then the MMA's per (super-block, column) shift info (16, k_pad/256). */
size_t fp4_cu_w4a4_scratch(const fp4_cuda_tensor *w, int64_t n_cols) {
    if (!w || n_cols < 1) return 0;
    return FP4_CU_ALIGN((size_t)(MMA_COLS * w->k_pad)) +
           FP4_CU_ALIGN((size_t)(MMA_COLS * (w->k_pad / 16)) * 4) +
           FP4_CU_ALIGN((size_t)(MMA_COLS * (w->k_pad / 256)) * 4);
}

fp4_status fp4_cu_w4a4_mma16(const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols, float *d_y,
                             const fp4_cuda_scratch *s, cudaStream_t stream) {
    float is, d6;
    FP4_CU_TRY(check_route(w, d_x, n_cols, d_y, s, &is, &d6));
    if (n_cols != MMA_COLS || w->n_in % 64) return FP4_ERR_UNSUPPORTED;
    const int64_t ngp = w->k_pad / 16;
    int8_t *q1 = (int8_t *)s->d_base + FP4_CU_COUNTER_BYTES;
    float *qaf = (float *)((uint8_t *)q1 + FP4_CU_ALIGN((size_t)(MMA_COLS * w->k_pad)));
    int *cinfo = (int *)((uint8_t *)qaf + FP4_CU_ALIGN((size_t)(MMA_COLS * ngp) * 4));
    const int64_t n = MMA_COLS * ngp;
    act_frag_kernel<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(d_x, w->n_in, w->k_pad, is, d6, q1, qaf,
                                                                     cinfo);
    FP4_CUDA_LAUNCHED();
    static int opted_in[FP4_CU_MAX_DEVICES];
    FP4_CU_TRY(fp4_cu_smem_opt_in((const void *)w4a4_imma_kernel, M16_SMEM, opted_in));
    const int64_t blocks = (w->n_out + M16_ROWS - 1) / M16_ROWS;
    w4a4_imma_kernel<<<(unsigned)blocks, M16_NW * 32, M16_SMEM, stream>>>(
        w->d_payload, w->d_scales, w->payload_stride, w->scale_stride, w->n_out, (int)(w->k_pad / 256),
        w->k_pad, w->scale2, is, q1, qaf, cinfo, d_y);
    FP4_CUDA_LAUNCHED();
    return FP4_OK;
}

fp4_status fp4_cu_w4a4_dp4a(const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols, float *d_y,
                            const fp4_cuda_scratch *s, cudaStream_t stream) {
    float is, d6;
    FP4_CU_TRY(check_route(w, d_x, n_cols, d_y, s, &is, &d6));
    const int64_t ngp = w->k_pad / 16;
    int8_t *q1 = (int8_t *)s->d_base + FP4_CU_COUNTER_BYTES;
    int32_t *q9 = (int32_t *)((uint8_t *)q1 + FP4_CU_ALIGN((size_t)(MMA_COLS * w->k_pad)));
    for (int64_t c0 = 0; c0 < n_cols;) {
        const int64_t left = n_cols - c0;
        const int64_t nc = left >= 16 ? 16 : left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
        FP4_CU_TRY(fp4_cu_w4a4_act_quant(d_x + c0 * w->n_in, w->n_in, w->k_pad, nc, w->input_scale_inv, NULL,
                                         NULL, q1, q9, ngp, 1, stream));
        float *y = d_y + c0 * w->n_out;
        switch (nc) {
        case 1: FP4_CU_TRY((launch_dp4a<1, 1>(w, is, q1, q9, y, stream))); break;
        case 2: FP4_CU_TRY((launch_dp4a<2, 1>(w, is, q1, q9, y, stream))); break;
        case 4: FP4_CU_TRY((launch_dp4a<4, 2>(w, is, q1, q9, y, stream))); break;
        case 8: FP4_CU_TRY((launch_dp4a<8, 2>(w, is, q1, q9, y, stream))); break;
        default: FP4_CU_TRY((launch_dp4a<16, 2>(w, is, q1, q9, y, stream))); break;
        }
        c0 += nc;
    }
    return FP4_OK;
}

FP4_API fp4_status fp4_cuda_nvfp4_quantize_act(const float *d_x, int64_t n_in, int64_t n_cols,
                                               float input_scale_inv, uint8_t *d_codes, uint8_t *d_scales,
                                               fp4_cuda_stream stream) {
    if (!d_codes || !d_scales) return FP4_ERR_INVALID_ARG;
    if (n_in % 16) return FP4_ERR_SHAPE;
    return fp4_cu_w4a4_act_quant(d_x, n_in, n_in, n_cols, input_scale_inv, d_codes, d_scales, NULL, NULL, 0,
                                 0, (cudaStream_t)stream);
}

} /* extern "C" */
