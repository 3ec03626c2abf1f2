/* act_pass.cuh — the per-warp bodies of the two A16 activation passes, one 256-value super-block
 * per warp, lane l holding values 8l .. 8l+7: Q8_K (SPEC §4 step 1, q8k.cu's kernel) and the
 * native int16 pass (native_dp2a.cuh's act16_kernel). The decode step's fused kernels
 * (src/runtime/step_kernels.cuh: RMSNorm and SwiGLU that also write the next projection's pass)
 * call the same functions, so a fused pass writes the same bytes. Never installed. */
#ifndef FP4_CUDA_ACT_PASS_CUH
#define FP4_CUDA_ACT_PASS_CUH

#include "common.cuh"

/* Q8_K of one super-block (ggml's quantize_row_q8_K_ref): first largest |x| in index order,
 * iscale = -127/max (IEEE division), q = min(127, nearest_int(iscale*x)) by the magic number,
 * d = 1/iscale (0 and all-zero q for an all-zero block). lo/hi: this lane's 8 int8 values
 * (4 each, element order), bsum: the sum of its 8 values. Every lane of the warp calls it. */
static __device__ __forceinline__ void fp4_q8k_warp(const float v[8], int lane, uint32_t *lo, uint32_t *hi,
                                                    float *d_out, int *bsum_out) {
    float amax = 0.0f, mx = 0.0f;
    int idx = 1 << 30;
#pragma unroll
    for (int j = 0; j < 8; j++) {
        const float ax = fabsf(v[j]);
        if (ax > amax) { amax = ax; mx = v[j]; idx = lane * 8 + j; }
    }
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1) {
        const float oa = __shfl_xor_sync(0xFFFFFFFFu, amax, m);
        const float om = __shfl_xor_sync(0xFFFFFFFFu, mx, m);
        const int oi = __shfl_xor_sync(0xFFFFFFFFu, idx, m);
        if (oa > amax || (oa == amax && oi < idx)) { amax = oa; mx = om; idx = oi; }
    }
    int8_t qs[8];
    float d = 0.0f;
    int bsum = 0;
    if (amax == 0.0f) {
#pragma unroll
        for (int j = 0; j < 8; j++) qs[j] = 0;
    } else {
        const float iscale = __fdiv_rn(-127.0f, mx);
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const float p = __fmul_rn(iscale, v[j]);
            /* iscale = -inf (max below ~3.7e-37) times 0 is NaN: every CPU's default NaN has
             * mantissa 0x400000, which the magic-number trick turns into 0 */
            const int t = isnan(p) ? 0 : fp4_nearest_int_dev(p);
            qs[j] = (int8_t)(uint8_t)((t < 127 ? t : 127) & 0xFF);
            bsum += qs[j];
        }
        d = __fdiv_rn(1.0f, iscale);
    }
    uint32_t l = 0, h = 0;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        l |= (uint32_t)(uint8_t)qs[j] << (8 * j);
        h |= (uint32_t)(uint8_t)qs[4 + j] << (8 * j);
    }
    *lo = l, *hi = h, *d_out = d, *bsum_out = bsum;
}

/* The native int16 pass of one super-block: d = amax / 32767, q = clamp(rint(x * 32767/amax))
 * (all zero for an all-zero block). packed: this lane's 8 values as int16 pairs. Every lane of
 * the warp calls it. */
static __device__ __forceinline__ void fp4_act16_warp(const float v[8], uint4 *packed, float *d_out) {
    float amax = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; j++) amax = fmaxf(amax, fabsf(v[j]));
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, m));
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
    *d_out = amax > 0.0f ? __fdiv_rn(amax, 32767.0f) : 0.0f;
}

#endif /* FP4_CUDA_ACT_PASS_CUH */
