/* lab_variants.h — the kernel lab's own launchers (dev/cuda/lab_*.cu), selected by lab number.
 * Production is never called through here: the lab's production rows (variant 0, printed
 * "<op>.route") go through fp4_cuda_project(), the dispatch table. Host code; the lab links
 * libfp4lane_cuda.a for the shared helpers (common.cuh) and the production kernel templates
 * (src/cuda/*.cuh), which it instantiates with other shapes. */
#ifndef FP4_LAB_VARIANTS_H
#define FP4_LAB_VARIANTS_H

#include "cuda/common.cuh"

/* Split-K plan of the lab's first kernels: enough blocks to cover every SM blocks_per_sm_target
 * times; never more slices than segments / 2, never more than 32. */
static inline int lab_plan_splits(int64_t row_blocks, int64_t n_seg, int blocks_per_sm_target) {
    int sms = fp4_cu_sm_count();
    if (sms <= 0) sms = 132;
    const int64_t want = (int64_t)sms * blocks_per_sm_target;
    int64_t ks = row_blocks >= want ? 1 : (want + row_blocks - 1) / row_blocks;
    if (ks > 32) ks = 32;
    if (ks > n_seg / 2) ks = n_seg / 2; /* keep at least two segments per slice */
    if (ks < 1) ks = 1;
    return (int)ks;
}

/* native.1 .. native.16 (lab_native.cu) */
fp4_status lab_native(int variant, const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols, float *d_y,
                      const fp4_cuda_scratch *s, cudaStream_t stream);
/* exact.1 .. exact.9 (lab_exact.cu), the Q8_K pass included; lab_exact_matvec: the matvec alone
 * on activations quantized beforehand (q in fragment order for 8 and 9, element order else). */
fp4_status lab_exact(int variant, const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols, float *d_y,
                     const fp4_cuda_scratch *s, cudaStream_t stream);
fp4_status lab_exact_matvec(int variant, const fp4_cuda_tensor *w, const int8_t *d_q, const float *d_d,
                            int64_t n_cols, float *d_y, cudaStream_t stream);
size_t lab_exact_scratch(const fp4_cuda_tensor *w, int64_t n_cols);
/* w4a4.2 (lab_w4a4.cu), exactly 16 columns */
fp4_status lab_w4a4(int variant, const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols, float *d_y,
                    const fp4_cuda_scratch *s, cudaStream_t stream);
size_t lab_w4a4_scratch(const fp4_cuda_tensor *w);

/* exact.30..36 / native.30..36 (lab_team.cu): the row-team kernel at 1 column, its activation pass
 * included; lab_team_matvec: exact.40, the kernel of exact.30 alone (q in element order) */
fp4_status lab_team(int exact, int variant, const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols,
                    float *d_y, const fp4_cuda_scratch *s, cudaStream_t stream);
fp4_status lab_team_matvec(int variant, const fp4_cuda_tensor *w, const int8_t *d_q, const float *d_d,
                           float *d_y, cudaStream_t stream);

/* exact.50..58, 61..66, 71, 72 / native.50..58, 61..67, 71, 72 (lab_stream.cu): the stream kernels at
 * 1 column, their activation pass included; lab_stream_matvec: exact.60 / 69 / 79, the kernel of
 * exact.50 / 61 / 71 alone
 * (q in element order) */
fp4_status lab_stream(int exact, int variant, const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols,
                      float *d_y, const fp4_cuda_scratch *s, cudaStream_t stream);
fp4_status lab_stream_matvec(int variant, const fp4_cuda_tensor *w, const int8_t *d_q, const float *d_d,
                             float *d_y, cudaStream_t stream);

/* native.90..94 (lab_frag.cu): the frag kernels at 1..8 columns; lab_frag_prepare makes the frag
 * copies of n rotated weight copies before any timing, lab_frag_release frees them */
fp4_status lab_frag(int variant, const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols, float *d_y,
                    cudaStream_t stream);
fp4_status lab_frag_prepare(const fp4_cuda_tensor *t, int n, cudaStream_t s);
void lab_frag_release(void);

/* gemv_lab --head (lab_head.cu): the BF16 LM head's routes, dense_mma_kernel shapes and cuBLAS */
int lab_head(int argc, char **argv);

#endif
