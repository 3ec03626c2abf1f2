/* moe_experts.cuh — the experts of a mixture-of-experts layer on the device (moe_experts.cu): every
 * expert's gate, up or down of one layer as one "part" in one allocation, and the projection of a
 * step's (column, choice) pairs in which each pair reads the expert it chose from device memory
 * (the step's routing kernel wrote it there), so a decode step needs no host synchronization and
 * is captured as one CUDA graph. Internal to libfp4lane_cuda (fp4_cu_ prefix); never installed. */
#ifndef FP4_CUDA_MOE_EXPERTS_CUH
#define FP4_CUDA_MOE_EXPERTS_CUH

#include "cuda/common.cuh"

/* One part of every expert of one layer: the experts' tensors have one type and one shape; expert
 * e's rows start at d_payload + e * e_pbytes (its NVFP4 scale bytes at d_scales + e * e_sbytes) and
 * its NVFP4 scale2 is d_scale2[e]. Rows are laid out as fp4_cuda_tensor's (payload_stride,
 * scale_stride; k_pad == n_in). */
typedef struct fp4_cu_moe_part {
    int64_t type, n_out, n_in, k_pad, n_experts;
    int64_t payload_stride, scale_stride, e_pbytes, e_sbytes;
    const uint8_t *d_payload, *d_scales;
    const float *d_scale2;
} fp4_cu_moe_part;

extern "C" {

/* The route of an expert tensor of this type and shape (a static name), NULL where none: NVFP4
 * W4A16 with n_in % 256 == 0 ("moe.nvfp4.a16.exact.dp4a", both modes: SPEC §4's bits), F16/BF16
 * ("moe.bf16.dense.pinned" / "moe.f16.dense.pinned", both modes). */
const char *fp4_cu_moe_route_name(int64_t type, int64_t n_in, float input_scale_inv);
/* the layout of one expert of this part (bytes of its payload and scale rows); -1: no route */
int fp4_cu_moe_part_stub(int64_t type, int64_t n_out, int64_t n_in, float input_scale_inv, int64_t n_experts,
                         fp4_cu_moe_part *o);
/* device scratch fp4_cu_moe_project needs for n_x input columns: the Q8_K pass (int8 values
 * [n_x][k_pad] in element order, then the steps [n_x][k_pad / 256]); *q and *d point at the two
 * planes of d_scratch (fp4_cu_moe_act_planes) */
size_t fp4_cu_moe_scratch_bytes(const fp4_cu_moe_part *w, int64_t n_x);
void fp4_cu_moe_act_planes(const fp4_cu_moe_part *w, int64_t n_x, void *d_scratch, int8_t **q, float **d);
/* y_i[p] (n_out floats, p < n_pairs) = the one-column projection of input column p / xdiv of d_x
 * (n_in floats each) by expert d_sel[p]'s tensor of part w[i], i < nw (1 or 2 parts of one type
 * and shape sharing the input: gate and up in one launch and one activation pass): the bits
 * fp4_cuda_project gives that expert's own tensor in exact mode. d_order (NULL: 0, 1, ...): the
 * order in which the launch visits the pairs (fp4_cu_moe_order: a step's pairs of one expert one
 * after the other, so its weights come from L2 after the first), never what a pair computes. */
fp4_status fp4_cu_moe_project(const fp4_cu_moe_part *const *w, int nw, const int32_t *d_sel,
                              const int32_t *d_order, int64_t n_pairs, int64_t xdiv, const float *d_x,
                              float *const *d_y, void *d_scratch, size_t scratch_bytes, cudaStream_t stream);
/* the same for one NVFP4 part, xdiv 1, from a given Q8_K pass (q, d as fp4_cu_moe_act_planes lays
 * them out; e.g. the SwiGLU kernel's, stk_swiglu_act) */
fp4_status fp4_cu_moe_project_pre(const fp4_cu_moe_part *w, const int32_t *d_sel, const int32_t *d_order,
                                  int64_t n_pairs, const int8_t *d_q, const float *d_d, float *d_y,
                                  cudaStream_t stream);
/* d_order = the pairs 0 .. n_pairs-1 stably sorted by their expert d_sel[p] (one block) */
fp4_status fp4_cu_moe_order(const int32_t *d_sel, int64_t n_pairs, int32_t *d_order, cudaStream_t stream);

} /* extern "C" */

#endif /* FP4_CUDA_MOE_EXPERTS_CUH */
