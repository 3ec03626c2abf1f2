/* a16_native.cu — the native (fast) A16 route (SPEC §6): any column count. At 1 column the item
 * kernel on int16 activations (below; else the dp2a kernel, native_dp2a.cuh: native_dp2a_kernel<1, 2>,
 * 2 rows per warp; the row-team kernel of a16_team.cuh was slower in native mode, round 7); from 2
 * to 8 columns one launch of the shared-memory tile kernel with 32 rows per block (native_tile.cuh:
 * native_tile_kernel<2, 1, 4>, 4 stages); above 8 columns chunks of 32 with 64 rows per block and
 * 1, 2 or 4 n-tiles (<4, NT, 3>, 3 stages); from FP4_CU_GEMM_MIN_COLS columns the dispatch table
 * puts the f16 GEMM route (a16_gemm.cu) first. bench/gpu.md (rounds 2, 5, 7, 9) has the
 * measurements behind the choice; the kernel lab (dev/cuda) keeps the alternatives. Held to a
 * normalized error against the float reference (tests/gpu/test_gpu_native.cu); deterministic. */
#include "a16_stream.cuh"
#include "native_dp2a.cuh"
#include "native_tile.cuh"

/* The 1-column route: the item kernel quantizing its own int16 input (QIN; FP4LANE_CUDA_NO_QIN:
 * the int16 activation pass, then the item kernel) (a16_stream.cuh: a16_item_kernel<false, 8, 3,
 * NITEM_TAB>) where the layout fits and the grid is one block per SM, else the dp2a kernel on the
 * same activations: faster than the dp2a kernel alone on every issue-10 shape (CLAIMS kern9-2; the
 * lab, dev/cuda/lab_native.cu, keeps the dp2a kernel alone as a variant). NITEM_TAB: the lookup
 * words read from shared memory. */
#define NITEM_TAB 1

#define NARROW 8 /* widest call served by one launch of the 32-row tile */
#define CHUNK 32 /* columns per launch of the 64-row tiles */

/* one launch of the 64-row tile for nc <= CHUNK columns */
static fp4_status tile64(const fp4_cuda_tensor *w, const float *x, int64_t nc, float *y,
                         const fp4_cuda_scratch *s, cudaStream_t st) {
    if (nc <= 8) return launch_tile<4, 1, 3>(w, x, nc, y, s, st);
    if (nc <= 16) return launch_tile<4, 2, 3>(w, x, nc, y, s, st);
    return launch_tile<4, 4, 3>(w, x, nc, y, s, st);
}

/* the most K slices any launch of this route plans for w at up to nc columns */
static int max_slices(const fp4_cuda_tensor *w, int64_t nc) {
    int k = 0, v;
    for (int64_t c = 1; c <= (nc < 8 ? nc : 8); c++) { /* a chunk narrower than a launch plans its own */
        v = tile_slices<2, 1, 4>(w, c); k = v > k ? v : k;
        v = tile_slices<4, 1, 3>(w, c); k = v > k ? v : k;
    }
    for (int64_t c = 9; c <= (nc < CHUNK ? nc : CHUNK); c++) {
        v = c <= 16 ? tile_slices<4, 2, 3>(w, c) : tile_slices<4, 4, 3>(w, c);
        k = v > k ? v : k;
    }
    return k;
}

/* the 1-column item kernel on a given int16 pass (DEC_DOWN2: FP4LANE_CUDA_DECODE's variant) */
static fp4_status launch_item_pass(const fp4_cuda_tensor *w, const void *q, const float *d, float *y,
                                   cudaStream_t s) {
    if (item_dec(w) & DEC_DOWN2) return launch_item<false, 8, 2, NITEM_TAB>(w, q, d, y, 2, 1, s, 1);
    return launch_item<false, 8, 3, NITEM_TAB>(w, q, d, y, 1, 1, s, 1);
}

extern "C" {

size_t fp4_cu_a16_native_scratch(const fp4_cuda_tensor *w, int64_t n_cols) {
    if (!w || n_cols < 1) return 0;
    const int64_t nc = n_cols < CHUNK ? n_cols : CHUNK;
    const int ks = max_slices(w, nc);
    const size_t partials = ks > 1 ? FP4_CU_ALIGN((size_t)ks * (size_t)nc * (size_t)w->n_out * 4) : 0;
    const size_t act16 = native_dp2a_scratch<1>(w, 1);
    return partials > act16 ? partials : act16;
}

/* the 1-column item kernel on a given int16 pass (act16_kernel's layout: k_pad values, steps) */
fp4_status fp4_cu_a16_native_pre(const fp4_cuda_tensor *w, const void *d_q, const float *d_d, float *d_y,
                                 cudaStream_t stream) {
    if (!w || w->type != FP4_TYPE_NVFP4_E2M1 || !w->d_payload || !w->d_scales || w->n_in <= 0 ||
        w->n_in % 16 || w->k_pad % 256 || w->payload_stride != w->k_pad / 2 ||
        w->scale_stride != w->k_pad / 16 || !fp4_aligned16(w->d_scales) || !fp4_aligned16(d_q))
        return FP4_ERR_UNSUPPORTED;
    return launch_item_pass(w, d_q, d_d, d_y, stream);
}

fp4_status fp4_cu_a16_native(const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols, float *d_y,
                             const fp4_cuda_scratch *s, cudaStream_t stream) {
    if (!w || !d_x || !d_y || n_cols < 1 || !s || !s->d_base) return FP4_ERR_INVALID_ARG;
    if (w->type != FP4_TYPE_NVFP4_E2M1 || !w->d_payload || !w->d_scales) return FP4_ERR_INVALID_ARG;
    if (w->n_in <= 0 || w->n_in % 16 || w->k_pad % 256 || w->k_pad < w->n_in) return FP4_ERR_SHAPE;
    if (w->payload_stride % 128 || w->scale_stride % 16 || !fp4_aligned16(w->d_payload) ||
        !fp4_aligned16(d_x))
        return FP4_ERR_INVALID_ARG;
    if (n_cols == 1) {
        if (w->payload_stride == w->k_pad / 2 && w->scale_stride == w->k_pad / 16 &&
            FP4_CU_COUNTER_BYTES + native_dp2a_scratch<1>(w, 1) <= s->bytes) {
            /* the int16 activation pass of the dp2a kernel, into the same scratch */
            int16_t *q = (int16_t *)((uint8_t *)s->d_base + FP4_CU_COUNTER_BYTES);
            float *d = (float *)((uint8_t *)q + FP4_CU_ALIGN((size_t)w->k_pad * 2));
            if (fp4_aligned16(w->d_scales)) {
                if (fp4_cu_qin_on(w)) { /* the item kernel makes its own int16 input (QIN) */
                    const fp4_status st = launch_item_qin<false>(w, d_x, d_y, stream, 1);
                    if (st != FP4_ERR_UNSUPPORTED) return st;
                }
                FP4_CU_TRY(act16_pass(w, d_x, 1, q, d, stream));
                const fp4_status st = launch_item_pass(w, q, d, d_y, stream);
                if (st != FP4_ERR_UNSUPPORTED) return st;
                return launch_dp2a_upto<2, 1>(w, 1, q, d, d_y, stream); /* same q, d */
            }
        }
        return native_dp2a<2, 1>(w, d_x, n_cols, d_y, s, stream);
    }
    if (n_cols <= NARROW) return launch_tile<2, 1, 4>(w, d_x, n_cols, d_y, s, stream);
    for (int64_t c0 = 0; c0 < n_cols; c0 += CHUNK) {
        const int64_t nc = n_cols - c0 < CHUNK ? n_cols - c0 : CHUNK;
        FP4_CU_TRY(tile64(w, d_x + c0 * w->n_in, nc, d_y + c0 * w->n_out, s, stream));
    }
    return FP4_OK;
}

} /* extern "C" */
