/* dense_mma.cu — the route "bf16.dense.mma": BF16 weights, native mode, 2 or more columns, on the
 * tensor cores (dense_mma.cuh has the kernel and its numerics). Calls of up to 16 columns are one
 * launch (one read of the weights); wider calls go in chunks of 16. Exact mode keeps
 * bf16.dense.pinned, 1 column bf16.dense (the FMA kernel is at the weight-read roofline there),
 * F16 weights f16.dense. No scratch: the activations are split into bf16 terms in registers. */
#include "dense_mma.cuh"
#include <stdlib.h>
#include <string.h>

/* the launch shape: 2 row tiles (32 rows) a warp, 3 k-steps of loads in flight at 8 columns, 2 at
 * 16 (the 16-column tile holds twice the activation registers); two activation terms; the weight
 * loads with the L2's 256-byte fetch (DM_PF 1: CLAIMS head-1) */
#define DM_R 2
#define DM_U8 3
#define DM_U16 2
#define DM_NS 2
#define DM_PF 1

extern "C" {

/* the table's availability test: off with FP4LANE_CUDA_NO_DENSE_MMA=1 (then bf16.dense at every
 * width: the paired benchmark's other side) */
int fp4_cu_dense_mma_takes(const fp4_cuda_tensor *w, int64_t n_cols) {
    (void)n_cols;
    return !(w->flags & FP4_CUDA_TENSOR_INVARIANT);
}

int fp4_cu_dense_mma_on(void) {
    return !fp4_cu_env_no_dense_mma(); /* read at every call (env.h) */
}

fp4_status fp4_cu_dense_mma(const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols, float *d_y,
                            const fp4_cuda_scratch *s, cudaStream_t stream) {
    if (!w || !d_x || !d_y || !w->d_payload || n_cols < 1) return FP4_ERR_INVALID_ARG;
    if (w->type != FP4_TYPE_BF16) return FP4_ERR_DTYPE;
    if (w->n_in <= 0 || w->n_in % 8 || w->n_out < 1) return FP4_ERR_SHAPE;
    if (w->payload_stride % 16 || !fp4_aligned16(w->d_payload) || !fp4_aligned16(d_x))
        return FP4_ERR_INVALID_ARG;
    for (int64_t c0 = 0; c0 < n_cols; c0 += DM_MAX_COLS) {
        const int nc = (int)(n_cols - c0 < DM_MAX_COLS ? n_cols - c0 : DM_MAX_COLS);
        const float *x = d_x + c0 * w->n_in;
        float *y = d_y + c0 * w->n_out;
        const fp4_status st = nc > 8 ? launch_dense_mma<2, DM_R, DM_U16, DM_NS, DM_PF>(w, x, nc, y, stream)
                                     : launch_dense_mma<1, DM_R, DM_U8, DM_NS, DM_PF>(w, x, nc, y, stream);
        if (st != FP4_OK) return st;
    }
    return FP4_OK;
}

} /* extern "C" */
