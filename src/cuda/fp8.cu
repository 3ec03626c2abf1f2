/* fp8.cu — FP8 weights (fp4_fp8_view) on the device, the CPU's cpu.fp8.dense(.pinned) by
 * construction: the E4M3FN bytes are widened to bf16 once at upload (exact: 3 mantissa bits and
 * exponents 2^-9..2^8 fit bf16's 7 bits and 8-bit exponent, so each bf16 widens back to the very
 * f32 the CPU's decode table gives), the f32 row scales uploaded beside them. Exact mode runs the
 * bf16 dense.pinned kernel (the CPU's dense.pinned bit for bit over the same f32 rows), then
 * y = __fmul_rn(y, scale_r), the CPU's fp4p_mul; native mode the bf16 FMA kernel, then the same
 * multiply. */
#include "common.cuh"
#include <stdlib.h>

static __global__ void fp8_row_scale(float *__restrict__ y, const float *__restrict__ s, int64_t n_out,
                                     int64_t n) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __fmul_rn(y[i], s[i % n_out]);
}

static fp4_status fp8_run(const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols, float *d_y,
                          const fp4_cuda_scratch *s, cudaStream_t stream, int exact) {
    if (!w || w->type != FP4_TYPE_F8_E4M3FN || !w->d_scales || n_cols < 1) return FP4_ERR_INVALID_ARG;
    fp4_cuda_tensor b = *w; /* the widened rows, as the bf16 kernels read them */
    b.type = FP4_TYPE_BF16;
    b.d_scales = NULL;
    FP4_CU_TRY(exact ? fp4_cu_dense_pinned(&b, d_x, n_cols, d_y, s, stream)
                     : fp4_cu_dense(&b, d_x, n_cols, d_y, s, stream));
    const int64_t n = n_cols * w->n_out;
    if ((n + 255) / 256 > 0x7FFFFFFF) return FP4_ERR_LIMIT;
    fp8_row_scale<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(d_y, (const float *)w->d_scales, w->n_out,
                                                                   n);
    FP4_CUDA_LAUNCHED();
    return FP4_OK;
}

extern "C" {

fp4_status fp4_cu_fp8_pinned(const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols, float *d_y,
                             const fp4_cuda_scratch *s, cudaStream_t stream) {
    return fp8_run(w, d_x, n_cols, d_y, s, stream, 1);
}
fp4_status fp4_cu_fp8_dense(const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols, float *d_y,
                            const fp4_cuda_scratch *s, cudaStream_t stream) {
    return fp8_run(w, d_x, n_cols, d_y, s, stream, 0);
}

FP4_API fp4_status fp4_cuda_tensor_upload_fp8(const fp4_tensor *w, fp4_cuda_tensor *out) {
    if (!out) return FP4_ERR_INVALID_ARG;
    memset(out, 0, sizeof *out);
    if (!w || w->type != FP4_TYPE_F8_E4M3FN || !w->data || w->n_dims != 2) return FP4_ERR_INVALID_ARG;
    const fp4_fp8_view *f = &w->fp8;
    if (f->block_scale) return FP4_ERR_UNSUPPORTED; /* block-scaled FP8: CPU only (route.fp8-block-cuda) */
    const int64_t n_in = w->ne[0], n_out = w->ne[1];
    if (f->n_in != n_in || f->n_out != n_out || n_out <= 0 || n_in <= 0 || n_in > FP4_MAX_N_IN)
        return FP4_ERR_SHAPE;
    if (n_in % 8) return FP4_ERR_SHAPE; /* 16-byte bf16 rows, as fp4_cuda_tensor_upload */
    if ((uint64_t)n_out > SIZE_MAX / 8 / (uint64_t)n_in) return FP4_ERR_OVERFLOW;
    const size_t pbytes = FP4_CU_ALIGN((size_t)(n_out * n_in) * 2), sbytes = FP4_CU_ALIGN((size_t)n_out * 4);
    uint16_t *h = (uint16_t *)malloc(pbytes + sbytes);
    if (!h) return FP4_ERR_NOMEM;
    float *hs = (float *)(void *)((uint8_t *)h + pbytes);
    fp4_status st = FP4_OK;
    for (int64_t r = 0; r < n_out && !st; r++) {
        hs[r] = f->row_scale ? f->row_scale[r] : f->scale;
        if (!(hs[r] > 0.0f) || hs[r] > 3.4028234663852886e38f) st = FP4_ERR_SCALE2;
    }
    for (int64_t i = 0; i < n_out * n_in && !st; i++) { /* no kernel ever sees a NaN byte */
        const uint8_t b = w->data[i];
        if ((b & 0x7F) == 0x7F) st = FP4_ERR_NAN_SCALE;
        uint32_t u;
        const float v = fp4_e4m3fn_decode(b);
        memcpy(&u, &v, 4);
        h[i] = (uint16_t)(u >> 16); /* exact: the low 16 bits of an E4M3 value are zero */
    }
    void *arena = NULL;
    cudaError_t e = st ? cudaSuccess : cudaMalloc(&arena, pbytes + sbytes);
    if (!st && e == cudaSuccess) e = cudaMemcpy(arena, h, pbytes + sbytes, cudaMemcpyHostToDevice);
    free(h);
    if (st) return st;
    if (e != cudaSuccess) {
        if (arena) cudaFree(arena);
        return FP4_CUDA_FAIL(e, "cudaMalloc/cudaMemcpy(fp8 arena)");
    }
    out->type = FP4_TYPE_F8_E4M3FN;
    out->n_out = n_out;
    out->n_in = n_in;
    out->k_pad = n_in;
    out->d_payload = (const uint8_t *)arena;
    out->d_scales = (const uint8_t *)arena + pbytes;
    out->payload_stride = 2 * n_in;
    out->scale_stride = 4;
    out->scale2 = f->row_scale ? 0.0f : f->scale;
    out->d_arena = arena;
    out->arena_bytes = pbytes + sbytes;
    return FP4_OK;
}

} /* extern "C" */
