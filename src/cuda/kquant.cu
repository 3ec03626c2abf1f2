/* kquant.cu — Q4_K and Q6_K matvec (the kquant control lane) against f32 activations.
 * One warp per row; per 256-value block each lane dequantizes 8 consecutive values with ggml's
 * own formulas (Q4_K: (d*sc)*q - dmin*m; Q6_K: (d*sc)*(q-32)), FMAs them against x in f32, and
 * the warp adds its lanes in a fixed butterfly order. Float-reference accuracy (the test holds it
 * to a normalized error against a double-precision dot of fp4_q*_K_dequantize), deterministic.
 * Not tuned: the control lane's bandwidth is not a target of this file. */
#include "common.cuh"

static __device__ __forceinline__ float h2f(const uint8_t *p) {
    return __half2float(__ushort_as_half(*reinterpret_cast<const unsigned short *>(p)));
}

/* Q4_K: block bytes: d(2) dmin(2) scales(12) qs(128). Lane l: values 8l..8l+7. */
static __device__ __forceinline__ void q4k_values(const uint8_t *blk, int lane, float v[8]) {
    const float d = h2f(blk), dmin = h2f(blk + 2);
    const uint8_t *sc = blk + 4, *qs = blk + 16;
    const int c = lane >> 3, o = (lane & 7) * 8;          /* 64-value chunk, offset in it */
    const int j = 2 * c + (o >= 32);                      /* sub-block of 32 */
    int s, m;
    if (j < 4) {
        s = sc[j] & 63;
        m = sc[j + 4] & 63;
    } else {
        s = (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4);
        m = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
    }
    const float d1 = __fmul_rn(d, (float)s), m1 = __fmul_rn(dmin, (float)m);
    const uint2 b = *reinterpret_cast<const uint2 *>(qs + 32 * c + (o & 31));
    const uint32_t w[2] = {b.x, b.y};
#pragma unroll
    for (int k = 0; k < 8; k++) {
        const uint32_t byte = (w[k >> 2] >> (8 * (k & 3))) & 0xFFu;
        const uint32_t qv = o >= 32 ? byte >> 4 : byte & 15u;
        v[k] = __fsub_rn(__fmul_rn(d1, (float)qv), m1);
    }
}

/* Q6_K: block bytes: ql(128) qh(64) scales(16, int8) d(2). Lane l: values 8l..8l+7. */
static __device__ __forceinline__ void q6k_values(const uint8_t *blk, int lane, float v[8]) {
    const uint8_t *ql = blk, *qh = blk + 128;
    const int8_t *sc = reinterpret_cast<const int8_t *>(blk + 192);
    const float d = h2f(blk + 208);
    const int h = lane >> 4, lp = (lane & 15) * 8, qd = lp >> 5, ll = lp & 31;
    const float ds = __fmul_rn(d, (float)sc[8 * h + (ll >> 4) + 2 * qd]);
#pragma unroll
    for (int k = 0; k < 8; k++) {
        const int l = ll + k;
        const uint32_t lo = ql[64 * h + l + (qd & 1) * 32];
        const uint32_t nib = qd >= 2 ? lo >> 4 : lo & 15u;
        const uint32_t hi = (qh[32 * h + l] >> (2 * qd)) & 3u;
        const int qv = (int)(int8_t)(nib | (hi << 4)) - 32;
        v[k] = __fmul_rn(ds, (float)qv);
    }
}

template <bool Q6, int NC>
static __global__ __launch_bounds__(256) void kquant_matvec_kernel(const uint8_t *__restrict__ w,
                                                                   int64_t stride, int64_t n_out,
                                                                   int64_t n_in, const float *__restrict__ x,
                                                                   float *__restrict__ y) {
    const int lane = threadIdx.x & 31;
    const int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (row >= n_out) return;
    const int64_t bytes = Q6 ? 210 : 144;
    float acc[NC];
#pragma unroll
    for (int c = 0; c < NC; c++) acc[c] = 0.0f;
    for (int64_t b = 0; b < n_in / 256; b++) {
        float v[8];
        const uint8_t *blk = w + row * stride + b * bytes;
        if (Q6) q6k_values(blk, lane, v);
        else q4k_values(blk, lane, v);
#pragma unroll
        for (int c = 0; c < NC; c++) {
            const float4 *xp = reinterpret_cast<const float4 *>(x + c * n_in + b * 256 + lane * 8);
            const float4 a = __ldg(xp), e = __ldg(xp + 1);
            const float xv[8] = {a.x, a.y, a.z, a.w, e.x, e.y, e.z, e.w};
#pragma unroll
            for (int k = 0; k < 8; k++) acc[c] = __fmaf_rn(v[k], xv[k], acc[c]);
        }
    }
#pragma unroll
    for (int c = 0; c < NC; c++)
#pragma unroll
        for (int m = 16; m >= 1; m >>= 1) acc[c] = __fadd_rn(acc[c], __shfl_xor_sync(0xFFFFFFFFu, acc[c], m));
    if (lane == 0)
#pragma unroll
        for (int c = 0; c < NC; c++) y[c * n_out + row] = acc[c];
}

template <bool Q6, int NC>
static fp4_status launch_kq(const fp4_cuda_tensor *t, const float *x, float *y, cudaStream_t s) {
    kquant_matvec_kernel<Q6, NC><<<(unsigned)((t->n_out * 32 + 255) / 256), 256, 0, s>>>(
        t->d_payload, t->payload_stride, t->n_out, t->n_in, x, y);
    FP4_CUDA_LAUNCHED();
    return FP4_OK;
}

template <bool Q6>
static fp4_status kq_chunk(const fp4_cuda_tensor *t, const float *x, int64_t nc, float *y, cudaStream_t s) {
    switch (nc) {
    case 1: return launch_kq<Q6, 1>(t, x, y, s);
    case 2: return launch_kq<Q6, 2>(t, x, y, s);
    case 4: return launch_kq<Q6, 4>(t, x, y, s);
    default: return launch_kq<Q6, 8>(t, x, y, s);
    }
}

extern "C" {

fp4_status fp4_cu_kquant(const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols, float *d_y,
                         const fp4_cuda_scratch *s, cudaStream_t stream) {
    if (!w || !d_x || !d_y || !w->d_payload || n_cols < 1) return FP4_ERR_INVALID_ARG;
    if (w->type != FP4_TYPE_Q4_K && w->type != FP4_TYPE_Q6_K) return FP4_ERR_DTYPE;
    if (w->n_in <= 0 || w->n_in % 256) return FP4_ERR_SHAPE;
    const int64_t bytes = w->type == FP4_TYPE_Q6_K ? 210 : 144;
    if (w->payload_stride != w->n_in / 256 * bytes) return FP4_ERR_INVALID_ARG;
    if (!fp4_aligned16(w->d_payload) || !fp4_aligned16(d_x)) return FP4_ERR_INVALID_ARG;
    for (int64_t c0 = 0; c0 < n_cols;) {
        const int64_t left = n_cols - c0;
        const int64_t nc = left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
        const fp4_status st = w->type == FP4_TYPE_Q6_K
                                  ? kq_chunk<true>(w, d_x + c0 * w->n_in, nc, d_y + c0 * w->n_out, stream)
                                  : kq_chunk<false>(w, d_x + c0 * w->n_in, nc, d_y + c0 * w->n_out, stream);
        if (st != FP4_OK) return st;
        c0 += nc;
    }
    return FP4_OK;
}

} /* extern "C" */
