/* q8k.cu — the Q8_K activation pass of the exact A16 contraction (SPEC §4 step 1) on the GPU,
 * bit-identical to fp4_q8_K_quantize: one warp per (column, 256-value super-block), ggml's
 * quantize_row_q8_K_ref: first largest |x| in index order, iscale = -127/max (IEEE division),
 * q = min(127, nearest_int(iscale*x)) by the magic number, d = 1/iscale. Writes ggml blocks (the
 * public fp4_cuda_q8_K_quantize) and/or the kernels' layout: int8 values (n_cols, k_pad) in
 * element order (the dp4a kernel) or in the integer MMA's fragment order, and the steps d. */
#include "act_warp.cuh"

static __global__ __launch_bounds__(256) void q8k_quantize_kernel(const float *x, int64_t n_in, int64_t k_pad,
                                                                  int64_t n_cols, int8_t *q, float *dq,
                                                                  fp4_block_q8_K *blocks, int frag) {
    fp4_pdl_trigger(); /* a dependent launched with PDL (the 1-column exact kernel) may start streaming
                        * its weights now; it waits for this grid before reading q and d */
    fp4_pdl_wait();    /* launched with PDL itself: x (and q, which the previous projection read) from here */
    const int lane = threadIdx.x & 31;
    const int64_t nsb = n_in / 256, nsb_pad = k_pad / 256;
    const int64_t job = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (job >= n_cols * nsb_pad) return;
    const int64_t col = job / nsb_pad, sb = job % nsb_pad;
    int8_t *qdst = q ? q + col * k_pad + sb * 256 + lane * 8 : NULL;
    /* fragment order (the integer MMA kernels): word (u, g) of a super-block at byte u*64 + g*4 holds values
     * g*16 + 4u .. g*16 + 4u + 3; this lane's values are group lane/2, words u = 2(lane&1), +1 */
    int8_t *fdst = q && frag ? q + col * k_pad + sb * 256 + (lane & 1) * 128 + (lane >> 1) * 4 : NULL;
    if (sb >= nsb) { /* padding super-block of the internal layout */
        if (fdst) {
            *reinterpret_cast<uint32_t *>(fdst) = 0u;
            *reinterpret_cast<uint32_t *>(fdst + 64) = 0u;
        } else if (qdst) *reinterpret_cast<uint2 *>(qdst) = make_uint2(0u, 0u);
        if (dq && lane == 0) dq[col * nsb_pad + sb] = 0.0f;
        return;
    }
    float v[8];
    fp4_act_load8(x + col * n_in, n_in, sb, lane, v);
    uint32_t lo, hi;
    int bsum;
    const float d = fp4_q8k_warp(v, lane, &lo, &hi, &bsum);
    if (fdst) {
        *reinterpret_cast<uint32_t *>(fdst) = lo;
        *reinterpret_cast<uint32_t *>(fdst + 64) = hi;
    } else if (qdst) *reinterpret_cast<uint2 *>(qdst) = make_uint2(lo, hi);
    if (dq && lane == 0) dq[col * nsb_pad + sb] = d;
    if (blocks) {
        fp4_block_q8_K *b = blocks + col * nsb + sb;
        uint32_t *qw = reinterpret_cast<uint32_t *>(b->qs + lane * 8); /* qs at offset 4: 4-aligned */
        qw[0] = lo;
        qw[1] = hi;
        if ((lane & 1) == 0) b->bsums[lane >> 1] = (int16_t)bsum;
        if (lane == 0) b->d = d;
    }
}

extern "C" {

fp4_status fp4_cu_q8k_quantize(const float *d_x, int64_t n_in, int64_t k_pad, int64_t n_cols, int8_t *d_q,
                               float *d_d, fp4_block_q8_K *d_blocks, int frag, cudaStream_t stream) {
    if (!d_x || n_in < 0 || n_cols < 0 || n_in % 256 || k_pad < n_in || k_pad % 256 || !fp4_aligned16(d_x))
        return FP4_ERR_INVALID_ARG;
    if (frag && (!d_q || !d_d)) return FP4_ERR_INVALID_ARG;
    const int64_t jobs = n_cols * (k_pad / 256);
    if (jobs == 0) return FP4_OK;
    return fp4_cu_launch(dim3((unsigned)((jobs * 32 + 255) / 256)), dim3(256), 0, stream, 1,
                         q8k_quantize_kernel, d_x, n_in, k_pad, n_cols, d_q, d_d, d_blocks, frag);
}

FP4_API fp4_status fp4_cuda_q8_K_quantize(const float *d_x, int64_t n, int64_t n_cols, fp4_block_q8_K *d_dst,
                                          fp4_cuda_stream stream) {
    if (!d_dst) return FP4_ERR_INVALID_ARG;
    if (n % 256) return FP4_ERR_SHAPE;
    return fp4_cu_q8k_quantize(d_x, n, n, n_cols, NULL, NULL, d_dst, 0, (cudaStream_t)stream);
}

} /* extern "C" */
