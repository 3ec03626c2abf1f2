/* native_dp2a.cuh — the native A16 kernel at 1..4 columns (SPEC §6), included by a16_native.cu
 * (the route's 1-column kernel: native_dp2a_kernel<1, 2>) and by the kernel lab (2..4 columns, 4 rows
 * per warp). The exact 1-column kernel's structure (row-contiguous 512-byte loads, a warp per R
 * rows, 8 lanes per 256-value super-block) with native numerics. Never installed.
 *
 *   1. act16_kernel: one warp per (column, super-block): the f32 activations become int16 with one
 *      f32 step per super-block, d = amax / 32767 (round to nearest; relative error <= 2^-16 of
 *      the block max, far below the f16 rounding of the other native kernels).
 *   2. native_dp2a_kernel<NC, R>: each lane owns 16 payload bytes (two 16-groups) of one super-block
 *      per pass, 4 super-blocks per warp pass; the next pass's weights and scales are loaded into
 *      registers before the current pass is computed (register double buffer). Nibbles become
 *      signed int8 e2m1_q1 by the merged byte permutes (3 PRMT per 4 weights), two dp2a per 4
 *      weights against the int16 activations give the exact integer group dot, then f32:
 *      acc += (dot0 * s0 + dot1 * s1) * d (s = the E4M3FN block scale as f32), lane-private
 *      accumulators added over the warp by a fixed butterfly at the end, * 0.5 * scale2 once per
 *      row. Deterministic (no atomics), f32 accumulation.
 *
 * native_dp2a<R, MAXC>: the whole call in chunks of MAXC columns (act16 pass, then the kernel).
 */
#ifndef FP4_CUDA_NATIVE_DP2A_CUH
#define FP4_CUDA_NATIVE_DP2A_CUH

#include "act_warp.cuh"


static __global__ __launch_bounds__(256) void act16_kernel(const float *__restrict__ x, int n_in, int nsb_pad,
                                                           int ncols, int64_t k_pad, int16_t *__restrict__ q,
                                                           float *__restrict__ d) {
    fp4_pdl_trigger(); /* the PDL-launched 1-column kernel waits for this grid before reading */
    fp4_pdl_wait();    /* launched with PDL itself: x (and q, which the previous projection read) from here */
    const int lane = threadIdx.x & 31;
    const int64_t job = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (job >= (int64_t)ncols * nsb_pad) return;
    const int col = (int)(job / nsb_pad), sb = (int)(job % nsb_pad);
    float v[8];
    fp4_act_load8(x + (int64_t)col * n_in, n_in, sb, lane, v);
    uint4 packed;
    const float dd = fp4_act16_warp(v, &packed);
    *reinterpret_cast<uint4 *>(q + (int64_t)col * k_pad + sb * 256 + lane * 8) = packed;
    if (lane == 0) d[(int64_t)col * nsb_pad + sb] = dd;
}

/* 4 nibbles (bits 0..15 of nib, sel/neg precomputed for the same bits) -> signed int8 e2m1_q1 x4 */
static __device__ __forceinline__ uint32_t dp2a_q1x4(uint32_t nib, uint32_t mag, uint32_t sel,
                                                     const fp4_q1_luts &l) {
    const uint32_t pos = fp4_prmt(l.p0, l.p1, nib);
    const uint32_t neg = fp4_prmt(l.n0, l.n1, mag);
    return fp4_prmt(pos, neg, sel);
}

/* Σ q1·a over the 8 weights of one word: a0..a3 = int16 pairs of elements (0,1) (2,3) (4,5) (6,7) */
static __device__ __forceinline__ int dp2a_word_dot(uint32_t lo4, uint32_t hi4, uint32_t a0, uint32_t a1,
                                                    uint32_t a2, uint32_t a3, int acc) {
    acc = __dp2a_lo((int)a0, (int)lo4, acc);
    acc = __dp2a_hi((int)a1, (int)lo4, acc);
    acc = __dp2a_lo((int)a2, (int)hi4, acc);
    return __dp2a_hi((int)a3, (int)hi4, acc);
}

/* the 32 weights of 16 payload bytes (lanes' groups 2 sub, 2 sub + 1) as 8 int8x4 of e2m1_q1,
 * q1[i] = elements 4i..4i+3 */
static __device__ __forceinline__ void dp2a_decode16(uint4 wv, const fp4_q1_luts &l, uint32_t q1[8]) {
    const uint32_t words[4] = {wv.x, wv.y, wv.z, wv.w};
#pragma unroll
    for (int u = 0; u < 4; u++) {
        const uint32_t w = words[u];
        const uint32_t mag = w & 0x77777777u;
        const uint32_t sel = ((w >> 1) & 0x44444444u) | 0x32103210u;
        q1[2 * u] = dp2a_q1x4(w, mag, sel, l);
        q1[2 * u + 1] = dp2a_q1x4(w >> 16, mag >> 16, sel >> 16, l);
    }
}

/* the two group dots of those 32 weights against 16 int16 pairs (a0..a3: 8 elements each):
 * d0 over elements 0..15, d1 over 16..31 */
static __device__ __forceinline__ void dp2a_dot32(const uint32_t q1[8], uint4 a0, uint4 a1, uint4 a2,
                                                  uint4 a3, int &d0, int &d1) {
    d0 = dp2a_word_dot(q1[0], q1[1], a0.x, a0.y, a0.z, a0.w, 0);
    d0 = dp2a_word_dot(q1[2], q1[3], a1.x, a1.y, a1.z, a1.w, d0);
    d1 = dp2a_word_dot(q1[4], q1[5], a2.x, a2.y, a2.z, a2.w, 0);
    d1 = dp2a_word_dot(q1[6], q1[7], a3.x, a3.y, a3.z, a3.w, d1);
}

/* Where column c's int16 activations, steps and outputs live (native_cols_strided: one after the
 * other; the MoE kernels of moe_experts.cu gather an expert's group of columns). */
struct native_cols_strided {
    const int16_t *xq;
    const float *xd;
    float *y;
    int64_t k_pad, n_out;
    __device__ __forceinline__ const int16_t *q(int c) const { return xq + (int64_t)c * k_pad; }
    __device__ __forceinline__ const float *d(int c) const { return xd + (int64_t)c * (k_pad / 256); }
    __device__ __forceinline__ float *out(int c) const { return y + (int64_t)c * n_out; }
};

/* The kernel's body: the first weights are loaded before fp4_pdl_wait (they never depend on an
 * earlier kernel), the columns' activations after it. */
template <int NC, int R, typename COLS>
static __device__ __forceinline__ void
native_dp2a_rows_at(const uint8_t *__restrict__ payload, const uint8_t *__restrict__ scales, int64_t pstride,
                    int64_t sstride, int64_t n_out, int nsb, float scale2, const COLS &cols) {
    const int lane = threadIdx.x & 31;
    const int64_t row0 = (((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5) * R;
    if (row0 >= n_out) return;
    const int oct = lane >> 3, sub = lane & 7;
    const fp4_q1_luts L = fp4_q1_luts_make();
    const uint8_t *prow[R];
    const uint8_t *srow[R];
    fp4_warp_rows<R>(payload, scales, pstride, sstride, n_out, row0, sub * 16, sub * 2, prow, srow);
    float acc[R][NC];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int c = 0; c < NC; c++) acc[r][c] = 0.0f;

    uint4 nw[R];
    uint32_t ns[R];
    {
        const int sb = oct;
        const bool ok = sb < nsb;
#pragma unroll
        for (int r = 0; r < R; r++) {
            nw[r] = ok ? fp4_ldg16(prow[r] + (int64_t)sb * 128) : make_uint4(0u, 0u, 0u, 0u);
            ns[r] = ok ? (uint32_t)__ldg(reinterpret_cast<const unsigned short *>(srow[r] + (int64_t)sb * 16))
                       : 0u;
        }
    }
    fp4_pdl_wait(); /* launched with PDL after the int16 pass: its q and d (and y) from here on */
    for (int sb0 = 0; sb0 < nsb; sb0 += 4) {
        const int sb = sb0 + oct;
        const bool valid = sb < nsb;
        uint4 wv[R];
        uint32_t sc[R];
#pragma unroll
        for (int r = 0; r < R; r++) {
            wv[r] = nw[r];
            sc[r] = ns[r];
        }
        {
            const int sbn = sb + 4;
            const bool ok = sbn < nsb;
#pragma unroll
            for (int r = 0; r < R; r++) {
                nw[r] = ok ? fp4_ldg16(prow[r] + (int64_t)sbn * 128) : make_uint4(0u, 0u, 0u, 0u);
                ns[r] = ok ? (uint32_t)__ldg(
                                 reinterpret_cast<const unsigned short *>(srow[r] + (int64_t)sbn * 16))
                           : 0u;
            }
        }
        /* activations of this lane's 32 values, every column: 16 int16 pairs */
        uint4 av[NC][4];
        float dcol[NC];
#pragma unroll
        for (int c = 0; c < NC; c++) {
            const int16_t *xa = cols.q(c) + (int64_t)sb * 256 + sub * 32;
#pragma unroll
            for (int j = 0; j < 4; j++) av[c][j] = valid ? fp4_ldg16(xa + 8 * j) : make_uint4(0u, 0u, 0u, 0u);
            dcol[c] = valid ? __ldg(cols.d(c) + sb) : 0.0f;
        }
#pragma unroll
        for (int r = 0; r < R; r++) {
            uint32_t q1[8]; /* int8x4 of elements 4i..4i+3 */
            dp2a_decode16(wv[r], L, q1);
            const uint32_t h2 = fp4_e4m3x2_to_h2(sc[r]);
            const __half2 hh = *reinterpret_cast<const __half2 *>(&h2);
            const float s0 = __low2float(hh), s1 = __high2float(hh);
#pragma unroll
            for (int c = 0; c < NC; c++) {
                int d0, d1;
                dp2a_dot32(q1, av[c][0], av[c][1], av[c][2], av[c][3], d0, d1);
                /* |dot| <= 16 * 12 * 32767 < 2^24: exact in f32 */
                const float t = __fmaf_rn((float)d0, s0, __fmul_rn((float)d1, s1));
                acc[r][c] = __fmaf_rn(t, dcol[c], acc[r][c]);
            }
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int c = 0; c < NC; c++) {
            float v = acc[r][c];
#pragma unroll
            for (int m = 1; m < 32; m <<= 1) v = __fadd_rn(v, __shfl_xor_sync(0xFFFFFFFFu, v, m));
            acc[r][c] = v;
        }
    if (lane == 0) {
        const float f = __fmul_rn(0.5f, scale2); /* q1 = 2 * e2m1 */
#pragma unroll
        for (int r = 0; r < R; r++)
            if (row0 + r < n_out)
#pragma unroll
                for (int c = 0; c < NC; c++)
                    cols.out(c)[row0 + r] = __fmul_rn(acc[r][c], f);
    }
}

template <int NC, int R>
static __global__ __launch_bounds__(256) void native_dp2a_kernel(
    const uint8_t *__restrict__ payload, const uint8_t *__restrict__ scales, int64_t pstride, int64_t sstride,
    int64_t n_out, int nsb, int64_t k_pad, float scale2, const int16_t *__restrict__ xq,
    const float *__restrict__ xd, float *__restrict__ y) {
    fp4_pdl_trigger(); /* the step's next kernel (launched with PDL) waits for this grid */
    const native_cols_strided cols = {xq, xd, y, k_pad, n_out};
    native_dp2a_rows_at<NC, R>(payload, scales, pstride, sstride, n_out, nsb, scale2, cols);
}

template <int NC, int R>
static fp4_status launch_dp2a(const fp4_cuda_tensor *w, const int16_t *q, const float *d, float *y,
                              cudaStream_t s) {
    const int64_t warps = (w->n_out + R - 1) / R;
    const int64_t blocks = (warps * 32 + 255) / 256;
    return fp4_cu_launch(dim3((unsigned)blocks), dim3(256), 0, s, 1, native_dp2a_kernel<NC, R>, w->d_payload,
                         w->d_scales, w->payload_stride, w->scale_stride, w->n_out, (int)(w->k_pad / 256),
                         w->k_pad, w->scale2, q, d, y);
}

/* the kernel for exactly nc (1..NC) columns */
template <int R, int NC>
static fp4_status launch_dp2a_upto(const fp4_cuda_tensor *w, int64_t nc, const int16_t *q, const float *d,
                                   float *y, cudaStream_t s) {
    if constexpr (NC > 1) {
        if (nc < NC) return launch_dp2a_upto<R, NC - 1>(w, nc, q, d, y, s);
    }
    return launch_dp2a<NC, R>(w, q, d, y, s);
}

/* Scratch after the counters: int16 activations (MAXC, k_pad), steps (MAXC, k_pad/256). */
template <int MAXC> static size_t native_dp2a_scratch(const fp4_cuda_tensor *w, int64_t n_cols) {
    if (!w || n_cols < 1) return 0;
    const int64_t nc = n_cols < MAXC ? n_cols : MAXC;
    return FP4_CU_ALIGN((size_t)nc * (size_t)w->k_pad * 2) +
           FP4_CU_ALIGN((size_t)nc * (size_t)(w->k_pad / 256) * 4);
}

/* The int16 activation pass of nc columns into q (nc, k_pad) and d (nc, k_pad / 256). */
static fp4_status act16_pass(const fp4_cuda_tensor *w, const float *d_x, int64_t nc, int16_t *q, float *d,
                             cudaStream_t stream) {
    const int nsb_pad = (int)(w->k_pad / 256);
    const int64_t jobs = nc * nsb_pad;
    return fp4_cu_launch(dim3((unsigned)((jobs * 32 + 255) / 256)), dim3(256), 0, stream, 1, act16_kernel,
                         d_x, (int)w->n_in, nsb_pad, (int)nc, w->k_pad, q, d);
}

template <int R, int MAXC>
static fp4_status native_dp2a(const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols, float *d_y,
                              const fp4_cuda_scratch *s, cudaStream_t stream) {
    if (!w || !d_x || !d_y || n_cols < 1 || !s || !s->d_base) return FP4_ERR_INVALID_ARG;
    const int64_t cm = n_cols < MAXC ? n_cols : MAXC;
    const size_t qbytes = FP4_CU_ALIGN((size_t)cm * (size_t)w->k_pad * 2);
    if (FP4_CU_COUNTER_BYTES + native_dp2a_scratch<MAXC>(w, cm) > s->bytes) return FP4_ERR_INVALID_ARG;
    int16_t *q = (int16_t *)((uint8_t *)s->d_base + FP4_CU_COUNTER_BYTES);
    float *d = (float *)((uint8_t *)q + qbytes);
    for (int64_t c0 = 0; c0 < n_cols; c0 += MAXC) {
        const int64_t nc = n_cols - c0 < MAXC ? n_cols - c0 : MAXC;
        FP4_CU_TRY(act16_pass(w, d_x + c0 * w->n_in, nc, q, d, stream));
        FP4_CU_TRY((launch_dp2a_upto<R, MAXC>(w, nc, q, d, d_y + c0 * w->n_out, stream)));
    }
    return FP4_OK;
}

#endif /* FP4_CUDA_NATIVE_DP2A_CUH */
