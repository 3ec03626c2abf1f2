/* dequant.cu — NVFP4 rows to f32/f16/bf16 in the pinned order (SPEC §2), and the embedding
 * lookup (F16/BF16/NVFP4 rows -> f32). One thread per 16-value group: 8 payload bytes, one scale
 * byte, 16 outputs. Bit-identical to fp4_nvfp4_dequant_row (then RNE to f16/bf16). */
#include "common.cuh"
#include <cuda_bf16.h>

/* 16 values of one group, pinned: (e2m1 * e4m3fn) * scale2, f32. */
static __device__ __forceinline__ void group16(uint2 packed, uint32_t sbyte, float scale2, float v[16]) {
    const float s = fp4_e4m3_to_f32(sbyte);
    const uint32_t w[2] = {packed.x, packed.y};
#pragma unroll
    for (int i = 0; i < 16; i++) {
        const uint32_t code = (w[i >> 3] >> (4 * (i & 7))) & 15u;
        v[i] = __fmul_rn(__fmul_rn(fp4_e2m1_to_f32(code), s), scale2);
    }
}

template <typename T> static __device__ __forceinline__ void store16(T *dst, const float v[16]);
template <> __device__ __forceinline__ void store16<float>(float *dst, const float v[16]) {
    float4 *d = reinterpret_cast<float4 *>(dst);
#pragma unroll
    for (int i = 0; i < 4; i++) d[i] = make_float4(v[4 * i], v[4 * i + 1], v[4 * i + 2], v[4 * i + 3]);
}
template <> __device__ __forceinline__ void store16<__half>(__half *dst, const float v[16]) {
    uint32_t h[8];
#pragma unroll
    for (int i = 0; i < 8; i++)
        h[i] = (uint32_t)__half_as_ushort(__float2half_rn(v[2 * i])) |
               ((uint32_t)__half_as_ushort(__float2half_rn(v[2 * i + 1])) << 16);
    uint4 *d = reinterpret_cast<uint4 *>(dst);
    d[0] = make_uint4(h[0], h[1], h[2], h[3]);
    d[1] = make_uint4(h[4], h[5], h[6], h[7]);
}
template <> __device__ __forceinline__ void store16<__nv_bfloat16>(__nv_bfloat16 *dst, const float v[16]) {
    uint32_t h[8];
#pragma unroll
    for (int i = 0; i < 8; i++)
        h[i] = (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(v[2 * i])) |
               ((uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(v[2 * i + 1])) << 16);
    uint4 *d = reinterpret_cast<uint4 *>(dst);
    d[0] = make_uint4(h[0], h[1], h[2], h[3]);
    d[1] = make_uint4(h[4], h[5], h[6], h[7]);
}

/* grid.x: groups of a row in blocks of 256; grid.y: rows. */
template <typename T>
static __global__ __launch_bounds__(256) void dequant_rows_kernel(const uint8_t *payload,
                                                                  const uint8_t *scales, int64_t pstride,
                                                                  int64_t sstride, int64_t row0, int64_t n_in,
                                                                  float scale2, T *dst) {
    const int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= n_in / 16) return;
    const int64_t r = row0 + blockIdx.y;
    const uint2 packed = *reinterpret_cast<const uint2 *>(payload + r * pstride + g * 8);
    float v[16];
    group16(packed, scales[r * sstride + g], scale2, v);
    store16<T>(dst + (int64_t)blockIdx.y * n_in + g * 16, v);
}

/* Embedding: grid.y = position in ids; each thread one 16-value group. */
static __global__ __launch_bounds__(256) void embed_nvfp4_kernel(const uint8_t *payload,
                                                                 const uint8_t *scales, int64_t pstride,
                                                                 int64_t sstride, int64_t n_out, int64_t n_in,
                                                                 float scale2, const int32_t *ids,
                                                                 float *out) {
    const int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= n_in / 16) return;
    const int64_t id = ids[blockIdx.y];
    float v[16];
    if (id >= 0 && id < n_out) {
        const uint2 packed = *reinterpret_cast<const uint2 *>(payload + id * pstride + g * 8);
        group16(packed, scales[id * sstride + g], scale2, v);
    } else {
#pragma unroll
        for (int i = 0; i < 16; i++) v[i] = 0.0f;
    }
    store16<float>(out + (int64_t)blockIdx.y * n_in + g * 16, v);
}

/* F16/BF16 rows: each thread 8 values (one 16-byte load). */
template <bool BF16>
static __global__ __launch_bounds__(256) void embed_half_kernel(const uint8_t *table, int64_t stride,
                                                                int64_t n_out, int64_t n_in,
                                                                const int32_t *ids, float *out) {
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= n_in / 8) return;
    const int64_t id = ids[blockIdx.y];
    float v[8];
    if (id >= 0 && id < n_out) {
        fp4_widen8<BF16>(*reinterpret_cast<const uint4 *>(table + id * stride + c * 16), v);
    } else {
#pragma unroll
        for (int i = 0; i < 8; i++) v[i] = 0.0f;
    }
    float4 *d = reinterpret_cast<float4 *>(out + (int64_t)blockIdx.y * n_in + c * 8);
    d[0] = make_float4(v[0], v[1], v[2], v[3]);
    d[1] = make_float4(v[4], v[5], v[6], v[7]);
}

extern "C" {

FP4_API fp4_status fp4_cuda_nvfp4_dequant(const fp4_cuda_tensor *w, int64_t row0, int64_t n_rows,
                                          int64_t dst_type, void *d_dst, fp4_cuda_stream stream) {
    if (!w || !d_dst || w->type != FP4_TYPE_NVFP4_E2M1 || !w->d_payload || !w->d_scales)
        return FP4_ERR_INVALID_ARG;
    if (row0 < 0 || n_rows < 0 || row0 + n_rows > w->n_out) return FP4_ERR_SHAPE;
    if (w->n_in <= 0 || w->n_in % 16 || w->payload_stride % 8 || !fp4_aligned16(d_dst))
        return FP4_ERR_INVALID_ARG;
    if (n_rows == 0) return FP4_OK;
    if (n_rows > 65535) return FP4_ERR_LIMIT; /* grid.y; callers chunk larger spans */
    const dim3 grid((unsigned)((w->n_in / 16 + 255) / 256), (unsigned)n_rows);
    cudaStream_t s = (cudaStream_t)stream;
    switch (dst_type) {
    case FP4_TYPE_F32:
        dequant_rows_kernel<float><<<grid, 256, 0, s>>>(w->d_payload, w->d_scales, w->payload_stride,
                                                        w->scale_stride, row0, w->n_in, w->scale2,
                                                        (float *)d_dst);
        break;
    case FP4_TYPE_F16:
        dequant_rows_kernel<__half><<<grid, 256, 0, s>>>(w->d_payload, w->d_scales, w->payload_stride,
                                                         w->scale_stride, row0, w->n_in, w->scale2,
                                                         (__half *)d_dst);
        break;
    case FP4_TYPE_BF16:
        dequant_rows_kernel<__nv_bfloat16><<<grid, 256, 0, s>>>(w->d_payload, w->d_scales, w->payload_stride,
                                                                w->scale_stride, row0, w->n_in, w->scale2,
                                                                (__nv_bfloat16 *)d_dst);
        break;
    default: return FP4_ERR_UNSUPPORTED;
    }
    FP4_CUDA_LAUNCHED();
    return FP4_OK;
}

FP4_API fp4_status fp4_cuda_embed(const fp4_cuda_tensor *w, const int32_t *d_ids, int64_t n_ids, float *d_out,
                                  fp4_cuda_stream stream) {
    if (!w || !d_ids || !d_out || !w->d_payload || n_ids < 0 || !fp4_aligned16(d_out))
        return FP4_ERR_INVALID_ARG;
    if (n_ids == 0) return FP4_OK;
    if (n_ids > 65535) return FP4_ERR_LIMIT;
    cudaStream_t s = (cudaStream_t)stream;
    if (w->type == FP4_TYPE_NVFP4_E2M1) {
        if (!w->d_scales || w->n_in % 16 || w->payload_stride % 8) return FP4_ERR_INVALID_ARG;
        const dim3 grid((unsigned)((w->n_in / 16 + 255) / 256), (unsigned)n_ids);
        embed_nvfp4_kernel<<<grid, 256, 0, s>>>(w->d_payload, w->d_scales, w->payload_stride, w->scale_stride,
                                                 w->n_out, w->n_in, w->scale2, d_ids, d_out);
    } else if (w->type == FP4_TYPE_F16 || w->type == FP4_TYPE_BF16) {
        if (w->n_in % 8 || w->payload_stride % 16 || !fp4_aligned16(w->d_payload)) return FP4_ERR_INVALID_ARG;
        const dim3 grid((unsigned)((w->n_in / 8 + 255) / 256), (unsigned)n_ids);
        if (w->type == FP4_TYPE_BF16)
            embed_half_kernel<true>
                <<<grid, 256, 0, s>>>(w->d_payload, w->payload_stride, w->n_out, w->n_in, d_ids, d_out);
        else
            embed_half_kernel<false>
                <<<grid, 256, 0, s>>>(w->d_payload, w->payload_stride, w->n_out, w->n_in, d_ids, d_out);
    } else {
        return FP4_ERR_UNSUPPORTED;
    }
    FP4_CUDA_LAUNCHED();
    return FP4_OK;
}

} /* extern "C" */
