/* ggml_repack.cu — llama.cpp's NVFP4 blocks (type 40) into the device tensor's canonical planes, for
 * the upload of a view the loader left packed (FP4_PACK_GGML64, FP4_LOAD_DEFER_REPACK): the host
 * copies the file's blocks to a device staging buffer and this kernel writes what
 * fp4_ggml_unpack_row (src/format/ggml_pack.c) writes on the CPU, row by row at the tensor's own
 * strides. Only nibbles move; the padding past n_in is not touched (the arena was zeroed).
 *
 * A block holds 64 values: 4 E4M3FN scale bytes, then 4 sub-blocks of 8 bytes; byte j of sub-block
 * s holds element 16s+j (low nibble) and 16s+j+8 (high nibble). Canonical byte j of a group holds
 * element 2j (low) and 2j+1 (high). One thread per 16-value group: one scale byte, 8 payload
 * bytes. The kernel is also the upload's check of the scale bytes (the loader's was on the host, at
 * open): a NaN one sets *bad, and the upload frees the tensor before any other kernel reads it. */
#include "common.cuh"

/* the eight bytes of a word, each < 16, paired: byte j of the result is b[2j] | b[2j+1] << 4
 * (j < 4) — ggml_pack.c's pair_nibbles */
static __device__ __forceinline__ uint32_t gr_pair_nibbles(uint64_t w) {
    uint64_t t = (w | (w >> 4)) & 0x00FF00FF00FF00FFull;
    t = (t | (t >> 8)) & 0x0000FFFF0000FFFFull;
    return (uint32_t)(t | (t >> 16));
}

static __global__ void ggml_repack_k(const uint8_t *__restrict__ blocks, int64_t n_rows, int64_t n_in,
                                     uint8_t *__restrict__ payload, int64_t payload_stride,
                                     uint8_t *__restrict__ scales, int64_t scale_stride, int *bad) {
    const int64_t ng = n_in / 16, nb = n_in / 64, total = n_rows * ng;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / ng, g = i - r * ng;
        const uint8_t *blk = blocks + (r * nb + g / 4) * 36;
        const int s = (int)(g & 3);
        /* blocks are 36 bytes and the staging buffer is 256-aligned: every sub-block is 4-aligned */
        const uint32_t w0 = *reinterpret_cast<const uint32_t *>(blk + 4 + s * 8);
        const uint32_t w1 = *reinterpret_cast<const uint32_t *>(blk + 8 + s * 8);
        const uint64_t x = (uint64_t)w0 | (uint64_t)w1 << 32; /* little-endian, as fp4_rd_le64 */
        const uint64_t lo = x & 0x0F0F0F0F0F0F0F0Full, hi = (x >> 4) & 0x0F0F0F0F0F0F0F0Full;
        /* payload_stride is a multiple of 128 and the arena 256-aligned: an 8-aligned store */
        *reinterpret_cast<uint64_t *>(payload + r * payload_stride + g * 8) =
            (uint64_t)gr_pair_nibbles(lo) | (uint64_t)gr_pair_nibbles(hi) << 32;
        const uint8_t sb = blk[s];
        scales[r * scale_stride + g] = sb;
        if ((sb & 0x7F) == 0x7F) atomicOr(bad, 1); /* E4M3 NaN: the upload refuses the tensor */
    }
}

/* *bad |= 1 when a scale byte of the n_rows x n_groups plane at stride is an E4M3 NaN */
static __global__ void scale_nan_k(const uint8_t *__restrict__ scales, int64_t n_rows, int64_t n_groups,
                                   int64_t stride, int *bad) {
    const int64_t total = n_rows * n_groups;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / n_groups;
        if ((scales[r * stride + (i - r * n_groups)] & 0x7F) == 0x7F) atomicOr(bad, 1);
    }
}

static int64_t grid_of(int64_t total, int threads) {
    const int64_t grid = (total + threads - 1) / threads;
    return grid > 65535 ? 65535 : grid; /* grid-stride beyond */
}

extern "C" fp4_status fp4_cu_scale_nan(const uint8_t *d_scales, int64_t n_rows, int64_t n_groups,
                                       int64_t stride, int *d_bad, cudaStream_t stream) {
    if (!d_scales || !d_bad || n_rows < 0 || n_groups <= 0 || stride < n_groups) return FP4_ERR_INVALID_ARG;
    if (n_rows == 0) return FP4_OK;
    scale_nan_k<<<(unsigned)grid_of(n_rows * n_groups, 256), 256, 0, stream>>>(d_scales, n_rows, n_groups,
                                                                               stride, d_bad);
    FP4_CUDA_LAUNCHED();
    return FP4_OK;
}

extern "C" fp4_status fp4_cu_ggml_repack(const uint8_t *d_blocks, int64_t n_rows, int64_t n_in,
                                         uint8_t *d_payload, int64_t payload_stride, uint8_t *d_scales,
                                         int64_t scale_stride, int *d_bad, cudaStream_t stream) {
    if (!d_blocks || !d_payload || !d_scales || !d_bad || n_rows < 0 || n_in <= 0 || n_in % 64 ||
        payload_stride < n_in / 2 || scale_stride < n_in / 16 || ((uintptr_t)d_blocks & 3) ||
        ((uintptr_t)d_payload & 7) || payload_stride % 8)
        return FP4_ERR_INVALID_ARG;
    if (n_rows == 0) return FP4_OK;
    const int64_t total = n_rows * (n_in / 16);
    ggml_repack_k<<<(unsigned)grid_of(total, 256), 256, 0, stream>>>(
        d_blocks, n_rows, n_in, d_payload, payload_stride, d_scales, scale_stride, d_bad);
    FP4_CUDA_LAUNCHED();
    return FP4_OK;
}
