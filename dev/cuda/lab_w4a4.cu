/* lab_w4a4.cu — the kernel lab's W4A4 variant (SPEC §5, bit-identical to fp4_nvfp4_matvec_w4a4).
 * Production (the routes nvfp4.w4a4.dp4a and nvfp4.w4a4.tile16) lives in src/cuda/w4a4.cu.
 *
 *   w4a4.2  w4a4_tile_kernel (rounds 1-3 production at 16 columns): the 16-column
 *           weight-stationary tile, 64 rows x 16 columns per block, 256-value K chunks staged in
 *           shared memory by cp.async (two stages), integer mma.sync m16n8k16 s8 per 16-group
 *           (one group per MMA, so the per-group scales can be applied to its s32 result), split-K
 *           over blockIdx.y with an order-fixed int64 reduction.
 */
#include "lab_variants.h"

/* ---- w4a4.2: the 16-column IMMA tile ------------------------------------------------------------ */

#define T_ROWS 64      /* rows per block: 4 warps x 16 */
#define T_COLS 16      /* activation columns: 2 n-tiles of 8 */
#define T_K 256        /* K per shared-memory stage: 16 groups */
#define T_WPITCH 144   /* payload bytes per staged row: 128 + 16 pad (conflict-free 2-byte reads) */
#define T_APITCH 272   /* activation bytes per staged column: 256 + 16 pad */
#define T_QPITCH 17    /* q9 ints per staged weight row: 16 + 1 pad */

struct tile_stage {
    uint8_t w[T_ROWS * T_WPITCH];
    uint8_t ws[T_ROWS * 16];
    uint8_t a[T_COLS * T_APITCH];
    int32_t aq9[16 * T_COLS]; /* [group][column] */
};

/* 128 threads stage one K chunk: 512 payload pieces, 64 scale pieces, 256 activation pieces,
 * 64 q9 pieces of 16 bytes. Rows past n_out read the last row (results discarded). */
static __device__ __forceinline__ void tile_load(tile_stage *st, const uint8_t *payload,
                                                 const uint8_t *scales, int64_t pstride, int64_t sstride,
                                                 int64_t n_out, int64_t row_base, int64_t kc,
                                                 const int8_t *q1, int64_t k_pad, const int32_t *q9t) {
    const int tid = threadIdx.x;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int piece = tid + i * 128, r = piece >> 3, c = piece & 7;
        int64_t row = row_base + r;
        if (row >= n_out) row = n_out - 1;
        fp4_cp_async16(st->w + r * T_WPITCH + c * 16, payload + row * pstride + kc / 2 + c * 16);
    }
    if (tid < 64) {
        int64_t row = row_base + tid;
        if (row >= n_out) row = n_out - 1;
        fp4_cp_async16(st->ws + tid * 16, scales + row * sstride + kc / 16);
    }
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int piece = tid + i * 128, col = piece >> 4, c = piece & 15;
        fp4_cp_async16(st->a + col * T_APITCH + c * 16, q1 + col * k_pad + kc + c * 16);
    }
    if (tid < 64)
        fp4_cp_async16(reinterpret_cast<uint8_t *>(st->aq9) + tid * 16, q9t + (kc / 16) * T_COLS + tid * 4);
}

static __global__ __launch_bounds__(128) void w4a4_tile_kernel(
    const uint8_t *__restrict__ payload, const uint8_t *__restrict__ scales, int64_t pstride, int64_t sstride,
    int64_t n_out, int64_t k_pad, int chunks_per_split, float scale2, float input_scale,
    const int8_t *__restrict__ q1, const int32_t *__restrict__ q9t, float *__restrict__ y,
    long long *partials, unsigned *counters) {
    __shared__ __align__(16) tile_stage stage[2];
    __shared__ int32_t wq9[T_ROWS * T_QPITCH];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    const fp4_q1_luts luts = fp4_q1_luts_make();
    const int64_t row_base = (int64_t)blockIdx.x * T_ROWS;
    const int nchunks = (int)(k_pad / T_K);
    const int c_begin = blockIdx.y * chunks_per_split;
    const int c_end = min(nchunks, c_begin + chunks_per_split);
    long long acc[2][4];
#pragma unroll
    for (int nt = 0; nt < 2; nt++)
#pragma unroll
        for (int i = 0; i < 4; i++) acc[nt][i] = 0;

    if (c_begin < c_end)
        tile_load(&stage[0], payload, scales, pstride, sstride, n_out, row_base, (int64_t)c_begin * T_K, q1,
                  k_pad, q9t);
    fp4_cp_async_commit();
    for (int ci = c_begin; ci < c_end; ci++) {
        const int cur = (ci - c_begin) & 1;
        if (ci + 1 < c_end)
            tile_load(&stage[cur ^ 1], payload, scales, pstride, sstride, n_out, row_base,
                      (int64_t)(ci + 1) * T_K, q1, k_pad, q9t);
        fp4_cp_async_commit();
        fp4_cp_async_wait<1>(); /* the current stage has landed (the next may still fly) */
        __syncthreads();
        const tile_stage *st = &stage[cur];
        /* weight scale bytes -> q9 once per chunk, shared by the four warps */
        for (int i = threadIdx.x; i < T_ROWS * 16; i += 128)
            wq9[(i >> 4) * T_QPITCH + (i & 15)] = fp4_e4m3_q9(st->ws[i]);
        __syncthreads();
        const int rlo = warp * 16 + g, rhi = rlo + 8;
#pragma unroll 4
        for (int G = 0; G < 16; G++) {
            const uint32_t wlo =
                *reinterpret_cast<const unsigned short *>(st->w + rlo * T_WPITCH + G * 8 + q * 2);
            const uint32_t whi =
                *reinterpret_cast<const unsigned short *>(st->w + rhi * T_WPITCH + G * 8 + q * 2);
            const uint32_t a0 = fp4_e2m1x4_to_q1x4_l(wlo, luts), a1 = fp4_e2m1x4_to_q1x4_l(whi, luts);
            const int qlo = wq9[rlo * T_QPITCH + G], qhi = wq9[rhi * T_QPITCH + G];
#pragma unroll
            for (int nt = 0; nt < 2; nt++) {
                const uint32_t b =
                    *reinterpret_cast<const uint32_t *>(st->a + (nt * 8 + g) * T_APITCH + G * 16 + q * 4);
                int c[4];
                fp4_mma_s8(c, a0, a1, b);
                const int2 qa = *reinterpret_cast<const int2 *>(st->aq9 + G * T_COLS + nt * 8 + q * 2);
                acc[nt][0] += (long long)(c[0] * qlo) * qa.x;
                acc[nt][1] += (long long)(c[1] * qlo) * qa.y;
                acc[nt][2] += (long long)(c[2] * qhi) * qa.x;
                acc[nt][3] += (long long)(c[3] * qhi) * qa.y;
            }
        }
        __syncthreads(); /* this stage is overwritten by the prefetch two chunks on */
    }
    fp4_cp_async_wait<0>();

    /* C layout: c0 (row g, col 2q), c1 (row g, col 2q+1), c2 (row g+8, col 2q), c3 (row g+8, col 2q+1) */
    const int n_split = gridDim.y;
    if (n_split == 1) {
#pragma unroll
        for (int nt = 0; nt < 2; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int64_t row = row_base + warp * 16 + g + (i >> 1) * 8;
                const int col = nt * 8 + q * 2 + (i & 1);
                if (row < n_out)
                    y[(int64_t)col * n_out + row] = fp4_cu_w4a4_term(acc[nt][i], scale2, input_scale);
            }
        return;
    }
#pragma unroll
    for (int nt = 0; nt < 2; nt++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int64_t row = row_base + warp * 16 + g + (i >> 1) * 8;
            const int col = nt * 8 + q * 2 + (i & 1);
            if (row < n_out) partials[((int64_t)blockIdx.y * T_COLS + col) * n_out + row] = acc[nt][i];
        }
    if (!fp4_splitk_arrive(counters + blockIdx.x, n_split)) return;
#pragma unroll
    for (int nt = 0; nt < 2; nt++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int64_t row = row_base + warp * 16 + g + (i >> 1) * 8;
            const int col = nt * 8 + q * 2 + (i & 1);
            if (row >= n_out) continue;
            long long t = 0;
            for (int sp = 0; sp < n_split; sp++)
                t += __ldcg(partials + ((int64_t)sp * T_COLS + col) * n_out + row);
            y[(int64_t)col * n_out + row] = fp4_cu_w4a4_term(t, scale2, input_scale);
        }
}

size_t lab_w4a4_scratch(const fp4_cuda_tensor *w) {
    const int64_t ngp = w->k_pad / 16, rb = (w->n_out + T_ROWS - 1) / T_ROWS;
    size_t b = FP4_CU_ALIGN((size_t)(T_COLS * w->k_pad)) + FP4_CU_ALIGN((size_t)(T_COLS * ngp) * 4);
    const int ks = lab_plan_splits(rb, w->k_pad / T_K, 4);
    if (ks > 1) b += FP4_CU_ALIGN((size_t)ks * T_COLS * (size_t)w->n_out * 8);
    return b;
}

fp4_status lab_w4a4(int variant, const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols, float *d_y,
                    const fp4_cuda_scratch *s, cudaStream_t stream) {
    if (variant != 2 || n_cols != T_COLS) return FP4_ERR_UNSUPPORTED;
    if (!w || !d_x || !d_y || !s || !s->d_base || w->type != FP4_TYPE_NVFP4_E2M1) return FP4_ERR_INVALID_ARG;
    if (w->n_in <= 0 || w->n_in % 64 || w->k_pad % 256 || w->k_pad < w->n_in) return FP4_ERR_SHAPE;
    if (FP4_CU_COUNTER_BYTES + lab_w4a4_scratch(w) > s->bytes) return FP4_ERR_INVALID_ARG;
    float is, d6;
    FP4_CU_TRY(fp4_cu_w4a4_scales(w->input_scale_inv, &is, &d6));
    const int64_t ngp = w->k_pad / 16;
    int8_t *q1 = (int8_t *)s->d_base + FP4_CU_COUNTER_BYTES;
    int32_t *q9 = (int32_t *)((uint8_t *)q1 + FP4_CU_ALIGN((size_t)(T_COLS * w->k_pad)));
    /* q9 in [group][column] order so that one 16-byte copy stages 4 of them */
    FP4_CU_TRY(fp4_cu_w4a4_act_quant(d_x, w->n_in, w->k_pad, T_COLS, w->input_scale_inv, NULL, NULL, q1, q9,
                                     1, T_COLS, stream));
    const int64_t rb = (w->n_out + T_ROWS - 1) / T_ROWS, nchunks = w->k_pad / T_K;
    int ks = lab_plan_splits(rb, nchunks, 4);
    if (ks > 1 && rb > (int64_t)(FP4_CU_COUNTER_BYTES / 4)) ks = 1;
    const int cps = (int)((nchunks + ks - 1) / ks);
    ks = (int)((nchunks + cps - 1) / cps);
    long long *partials = (long long *)((uint8_t *)q9 + FP4_CU_ALIGN((size_t)(T_COLS * ngp) * 4));
    w4a4_tile_kernel<<<dim3((unsigned)rb, (unsigned)ks), 128, 0, stream>>>(
        w->d_payload, w->d_scales, w->payload_stride, w->scale_stride, w->n_out, w->k_pad, cps, w->scale2, is,
        q1, q9, d_y, partials, (unsigned *)s->d_base);
    FP4_CUDA_LAUNCHED();
    return FP4_OK;
}
