/* act_warp.cuh — the activation passes' per-super-block arithmetic, one warp per 256 values, shared
 * by the separate pass kernels (q8k.cu: Q8_K for exact; native_dp2a.cuh: int16 for native) and by
 * the 1-column item kernel that quantizes its own input (a16_stream.cuh, QIN): one copy of the
 * operations, so the fused and the separate forms give the same bytes. Lane l holds values
 * 8l .. 8l + 7 of the super-block. Never installed. */
#ifndef FP4_CUDA_ACT_WARP_CUH
#define FP4_CUDA_ACT_WARP_CUH

#include "common.cuh"

/* Q8_K (ggml's quantize_row_q8_K_ref): first largest |x| in index order, iscale = -127/max (IEEE
 * division), q = min(127, nearest_int(iscale*x)) by the magic number, d = 1/iscale. Returns d (every
 * lane); *lo, *hi the lane's 8 int8 values (element order, 4 a word); *bsum the sum of its 16-group
 * (lanes 2g, 2g+1 hold group g). */
static __device__ __forceinline__ float fp4_q8k_warp(const float v[8], int lane, uint32_t *lo, uint32_t *hi,
                                                     int *bsum) {
    /* first largest |x| in index order: lane-local scan with strict '>', then (amax, index) */
    float amax = 0.0f, mx = 0.0f;
    int idx = 1 << 30;
#pragma unroll
    for (int j = 0; j < 8; j++) {
        const float ax = fabsf(v[j]);
        if (ax > amax) {
            amax = ax;
            mx = v[j];
            idx = lane * 8 + j;
        }
    }
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1) {
        const float oa = __shfl_xor_sync(0xFFFFFFFFu, amax, m);
        const float om = __shfl_xor_sync(0xFFFFFFFFu, mx, m);
        const int oi = __shfl_xor_sync(0xFFFFFFFFu, idx, m);
        if (oa > amax || (oa == amax && oi < idx)) {
            amax = oa;
            mx = om;
            idx = oi;
        }
    }
    int8_t qs[8];
    float d = 0.0f;
    int bs = 0;
    if (amax == 0.0f) {
#pragma unroll
        for (int j = 0; j < 8; j++)
            qs[j] = 0;
    } else {
        const float iscale = __fdiv_rn(-127.0f, mx);
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const float p = __fmul_rn(iscale, v[j]);
            /* iscale = -inf (max below ~3.7e-37) times 0 is NaN: every CPU's default NaN has
             * mantissa 0x400000, which the magic-number trick turns into 0 */
            const int t = isnan(p) ? 0 : fp4_nearest_int_dev(p);
            qs[j] = (int8_t)(uint8_t)((t < 127 ? t : 127) & 0xFF);
            bs += qs[j];
        }
        d = __fdiv_rn(1.0f, iscale);
    }
    bs += __shfl_xor_sync(0xFFFFFFFFu, bs, 1); /* lanes 2g, 2g+1 hold group g */
    uint32_t l = 0, h = 0;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        l |= (uint32_t)(uint8_t)qs[j] << (8 * j);
        h |= (uint32_t)(uint8_t)qs[4 + j] << (8 * j);
    }
    *lo = l;
    *hi = h;
    *bsum = bs;
    return d;
}

/* int16 (native, SPEC §6): d = amax / 32767, q = round-to-nearest(x * 32767 / amax) clamped to
 * +-32767. Returns d (every lane); *packed the lane's 8 values as int16 pairs, element order. */
static __device__ __forceinline__ float fp4_act16_warp(const float v[8], uint4 *packed) {
    float amax = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; j++)
        amax = fmaxf(amax, fabsf(v[j]));
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1)
        amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, m));
    const float inv = amax > 0.0f ? __fdiv_rn(32767.0f, amax) : 0.0f;
    uint32_t p[4];
#pragma unroll
    for (int j = 0; j < 4; j++) {
        int a = __float2int_rn(__fmul_rn(v[2 * j], inv)), b = __float2int_rn(__fmul_rn(v[2 * j + 1], inv));
        a = max(-32767, min(32767, a));
        b = max(-32767, min(32767, b));
        p[j] = ((uint32_t)a & 0xFFFFu) | ((uint32_t)b << 16);
    }
    *packed = make_uint4(p[0], p[1], p[2], p[3]);
    return amax > 0.0f ? __fdiv_rn(amax, 32767.0f) : 0.0f;
}

/* The lane's 8 values of super-block sb of x (n_in values; zeros at and past n_in, which is a
 * multiple of 8). */
static __device__ __forceinline__ void fp4_act_load8(const float *__restrict__ x, int64_t n_in, int64_t sb,
                                                     int lane, float v[8]) {
    const int64_t k = sb * 256 + lane * 8;
    if (k < n_in) {
        const float4 *src = reinterpret_cast<const float4 *>(x + k);
        const float4 a = __ldg(src), b = __ldg(src + 1);
        v[0] = a.x;
        v[1] = a.y;
        v[2] = a.z;
        v[3] = a.w;
        v[4] = b.x;
        v[5] = b.y;
        v[6] = b.z;
        v[7] = b.w;
    } else {
#pragma unroll
        for (int j = 0; j < 8; j++)
            v[j] = 0.0f;
    }
}

#endif /* FP4_CUDA_ACT_WARP_CUH */
