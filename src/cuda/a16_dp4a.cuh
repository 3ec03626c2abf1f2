/* a16_dp4a.cuh — the exact A16 dp4a kernel template (SPEC §4, bit-identical to
 * fp4_nvfp4_matvec_a16_exact), included by a16_exact.cu (the route's 1-column kernel,
 * a16_exact_kernel<1, 2, a16_dot_split>) and by the kernel lab (other widths, rows per warp and
 * group decoders). Never installed.
 *
 * a16_exact_kernel<NC, R, DOT>: one warp per R rows. Each lane owns a 16-byte payload chunk (two
 * 16-groups) of one super-block; 8 lanes make a super-block, a warp pass 4. The group dots are
 * integer (DOT::dot: dp4a on int8 e2m1_q1 codes decoded by byte permutes against the Q8_K int8
 * activations, element order), weighted by e4m3fn_q9 into int64, summed over the 8 lanes
 * (order-free), then the pinned f32 epilogue per super-block runs in super-block index order on
 * every lane (the sequential part), and the F16 boundary at the end. */
#ifndef FP4_CUDA_A16_DP4A_CUH
#define FP4_CUDA_A16_DP4A_CUH

#include "common.cuh"

/* The production group decoder, sign-split: of four codes, P = |e2m1_q1| of the positive codes
 * and N of the negative ones (2 permutes per 4 weights, tables L0/L1 pinned in registers), two
 * dp4a chains, dot = P - N. Σ e2m1_q1(w)·a over one 16-group: 8 payload bytes (two words)
 * against 16 int8 activations. */
struct a16_dot_split {
    static __device__ __forceinline__ int dot(uint32_t w0, uint32_t w1, uint4 a, uint32_t L0, uint32_t L1) {
        const uint32_t f0 = w0 ^ 0x88888888u, f1 = w1 ^ 0x88888888u;
        int pp = __dp4a((int)fp4_prmt(L0, L1, w0), (int)a.x, 0);
        int nn = __dp4a((int)fp4_prmt(L0, L1, f0), (int)a.x, 0);
        pp = __dp4a((int)fp4_prmt(L0, L1, w0 >> 16), (int)a.y, pp);
        nn = __dp4a((int)fp4_prmt(L0, L1, f0 >> 16), (int)a.y, nn);
        pp = __dp4a((int)fp4_prmt(L0, L1, w1), (int)a.z, pp);
        nn = __dp4a((int)fp4_prmt(L0, L1, f1), (int)a.z, nn);
        pp = __dp4a((int)fp4_prmt(L0, L1, w1 >> 16), (int)a.w, pp);
        nn = __dp4a((int)fp4_prmt(L0, L1, f1 >> 16), (int)a.w, nn);
        return pp - nn;
    }
};

/* Both scale bytes of a lane's chunk (bits 0..15) to e4m3fn_q9. */
static __device__ __forceinline__ void q9_pair(uint32_t two, int *qa, int *qb) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= FP4_CU_CC_ADA
    const uint32_t h = fp4_e4m3x2_to_h2(two);
    const __half2 hh = *reinterpret_cast<const __half2 *>(&h);
    *qa = __float2int_rn(__fmul_rn(__low2float(hh), 512.0f)); /* exact: q9 * 2^-9 is the f16 value */
    *qb = __float2int_rn(__fmul_rn(__high2float(hh), 512.0f));
#else
    *qa = fp4_e4m3_q9(two & 0xFFu);
    *qb = fp4_e4m3_q9((two >> 8) & 0xFFu);
#endif
}

/* Where column c's activations (Q8_K values q and steps d) and outputs live: the route's columns
 * one after the other (a16_cols_strided); the MoE kernels gather the columns of an expert's group
 * (moe_experts.cu). What a column computes never depends on where it lives or on its neighbours. */
struct a16_cols_strided {
    const int8_t *xq;
    const float *xd;
    float *y;
    int64_t k_pad, n_out;
    __device__ __forceinline__ const int8_t *q(int c) const { return xq + c * k_pad; }
    __device__ __forceinline__ const float *d(int c) const { return xd + (int64_t)c * (k_pad / 256); }
    __device__ __forceinline__ float *out(int c) const { return y + c * n_out; }
};

/* The kernel's body (a __device__ function, so the MoE kernels of moe_experts.cu run the same
 * operations on the expert a column chose, found in device memory), columns through COLS. */
template <int NC, int R, typename DOT, typename COLS>
static __device__ __forceinline__ void
a16_exact_rows_at(const uint8_t *__restrict__ payload, const uint8_t *__restrict__ scales, int64_t pstride,
                  int64_t sstride, int64_t n_out, int nsb, float scale2, const COLS &cols) {
    const int lane = threadIdx.x & 31;
    const int64_t row0 = (((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5) * R;
    if (row0 >= n_out) return;
    const int oct = lane >> 3, sub = lane & 7;
    const uint32_t L0 = fp4_pin(0x03020100u), L1 = fp4_pin(0x0C080604u);
    const uint8_t *prow[R];
    const uint8_t *srow[R];
    fp4_warp_rows<R>(payload, scales, pstride, sstride, n_out, row0, sub * 16, sub * 2, prow, srow);
    float acc[R][NC];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int c = 0; c < NC; c++) acc[r][c] = 0.0f;

    for (int sb0 = 0; sb0 < nsb; sb0 += 4) {
        const int sb = sb0 + oct;
        const bool valid = sb < nsb;
        uint4 wv[R];
        uint32_t sc[R];
#pragma unroll
        for (int r = 0; r < R; r++) {
            wv[r] = valid ? fp4_ldg16(prow[r] + (int64_t)sb * 128) : make_uint4(0u, 0u, 0u, 0u);
            sc[r] =
                valid ? (uint32_t)__ldg(reinterpret_cast<const unsigned short *>(srow[r] + (int64_t)sb * 16))
                      : 0u;
        }
        int q9a[R], q9b[R];
#pragma unroll
        for (int r = 0; r < R; r++) q9_pair(sc[r], &q9a[r], &q9b[r]);
#pragma unroll
        for (int c = 0; c < NC; c++) {
            const int8_t *xa = cols.q(c) + (int64_t)sb * 256 + sub * 32;
            const uint4 a0 = valid ? fp4_ldg16(xa) : make_uint4(0u, 0u, 0u, 0u);
            const uint4 a1 = valid ? fp4_ldg16(xa + 16) : make_uint4(0u, 0u, 0u, 0u);
            const float dcol = valid ? __ldg(cols.d(c) + sb) : 0.0f;
#pragma unroll
            for (int r = 0; r < R; r++) {
                const int da = DOT::dot(wv[r].x, wv[r].y, a0, L0, L1);
                const int db = DOT::dot(wv[r].z, wv[r].w, a1, L0, L1);
                long long part = (long long)da * q9a[r] + (long long)db * q9b[r];
                part += fp4_shfl_xor_i64(part, 1);
                part += fp4_shfl_xor_i64(part, 2);
                part += fp4_shfl_xor_i64(part, 4);
                float cv = 0.0f; /* +0 for a skipped super-block: acc + 0 == acc (acc is never -0) */
                if (valid && dcol != 0.0f) {
                    cv = fp4_cu_a16_term(__ll2float_rn(part), dcol, scale2);
                }
#pragma unroll
                for (int o = 0; o < 4; o++) /* super-blocks sb0, sb0+1, sb0+2, sb0+3: index order */
                    acc[r][c] = __fmaf_rn(1.0f, __shfl_sync(0xFFFFFFFFu, cv, o * 8), acc[r][c]);
            }
        }
    }
    if (lane == 0) {
#pragma unroll
        for (int r = 0; r < R; r++)
            if (row0 + r < n_out)
#pragma unroll
                for (int c = 0; c < NC; c++)
                    cols.out(c)[row0 + r] = fp4_round_f16_dev(acc[r][c]);
    }
}

template <int NC, int R, typename DOT>
static __device__ __forceinline__ void
a16_exact_rows(const uint8_t *__restrict__ payload, const uint8_t *__restrict__ scales, int64_t pstride,
               int64_t sstride, int64_t n_out, int nsb, int64_t k_pad, float scale2,
               const int8_t *__restrict__ xq, const float *__restrict__ xd, float *__restrict__ y) {
    const a16_cols_strided cols = {xq, xd, y, k_pad, n_out};
    a16_exact_rows_at<NC, R, DOT>(payload, scales, pstride, sstride, n_out, nsb, scale2, cols);
}

template <int NC, int R, typename DOT>
static __global__ __launch_bounds__(256) void a16_exact_kernel(
    const uint8_t *__restrict__ payload, const uint8_t *__restrict__ scales, int64_t pstride, int64_t sstride,
    int64_t n_out, int nsb, int64_t k_pad, float scale2, const int8_t *__restrict__ xq,
    const float *__restrict__ xd, float *__restrict__ y) {
    fp4_pdl_trigger(); /* the step's next kernel (launched with PDL) waits for this grid */
    fp4_pdl_wait();    /* launched with PDL after the Q8_K pass: its q and d (and y) from here on */
    a16_exact_rows<NC, R, DOT>(payload, scales, pstride, sstride, n_out, nsb, k_pad, scale2, xq, xd, y);
}

/* q, d: the Q8_K pass in element order (fp4_cu_q8k_quantize, frag = 0), NC columns. */
template <int NC, int R, typename DOT>
static fp4_status launch_a16_dp4a(const fp4_cuda_tensor *w, const int8_t *q, const float *d, float *y,
                                  cudaStream_t s) {
    const int64_t warps = (w->n_out + R - 1) / R;
    const int64_t blocks = (warps * 32 + 255) / 256;
    return fp4_cu_launch(dim3((unsigned)blocks), dim3(256), 0, s, 1, a16_exact_kernel<NC, R, DOT>,
                         w->d_payload, w->d_scales, w->payload_stride, w->scale_stride, w->n_out,
                         (int)(w->n_in / 256), w->k_pad, w->scale2, q, d, y);
}

#endif /* FP4_CUDA_A16_DP4A_CUH */
