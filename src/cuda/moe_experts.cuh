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
    int64_t native; /* NVFP4: native mode's arithmetic (int16 activations, f32 sums: SPEC §6) */
    int64_t payload_stride, scale_stride, e_pbytes, e_sbytes;
    const uint8_t *d_payload, *d_scales;
    const float *d_scale2;
} fp4_cu_moe_part;

/* How a projection's launch covers the pairs (the bits of every pair are the same in each):
 *   FP4_CU_MOE_PAIRS: one block row per pair, in pair order (no group table);
 *   FP4_CU_MOE_ORDERED: one block row per pair, visited in expert order (the group table's);
 *   FP4_CU_MOE_GROUPED: one block row per (expert, row tile) of each expert the step chose, over
 *     that expert's pairs: its weights are read once per step (the columns in runs of up to 4
 *     exact, 2 native; NVFP4 only, the dense types run per pair). */
enum { FP4_CU_MOE_PAIRS = 0, FP4_CU_MOE_ORDERED = 1, FP4_CU_MOE_GROUPED = 2 };

extern "C" {

/* The route of an expert tensor of this type and shape (a static name), NULL where none: NVFP4
 * W4A16 with n_in % 256 == 0 ("moe.nvfp4.a16.exact.dp4a" in both modes: SPEC §4's bits; the step's
 * native mode runs "moe.nvfp4.a16.native.dp2a", fp4_cu_moe_part_route), F16/BF16
 * ("moe.bf16.dense.pinned" / "moe.f16.dense.pinned", both modes). */
const char *fp4_cu_moe_route_name(int64_t type, int64_t n_in, float input_scale_inv);
/* the route a part runs (its native flag included) */
const char *fp4_cu_moe_part_route(const fp4_cu_moe_part *p);
/* the layout of one expert of this part (bytes of its payload and scale rows); -1: no route.
 * native starts at 0: the caller sets it for native mode's NVFP4 parts. */
int fp4_cu_moe_part_stub(int64_t type, int64_t n_out, int64_t n_in, float input_scale_inv, int64_t n_experts,
                         fp4_cu_moe_part *o);
/* device scratch fp4_cu_moe_project needs for n_x input columns: the activation pass (Q8_K int8
 * values, or native's int16, [n_x][k_pad] in element order, then the steps [n_x][k_pad / 256]);
 * *q and *d point at the two planes of d_scratch (fp4_cu_moe_act_planes) */
size_t fp4_cu_moe_scratch_bytes(const fp4_cu_moe_part *w, int64_t n_x);
void fp4_cu_moe_act_planes(const fp4_cu_moe_part *w, int64_t n_x, void *d_scratch, int8_t **q, float **d);
/* y_i[p] (n_out floats, p < n_pairs) = the one-column projection of input column p / xdiv of d_x
 * (n_in floats each) by expert d_sel[p]'s tensor of part w[i], i < nw (1 or 2 parts of one type
 * and shape sharing the input: gate and up in one launch and one activation pass): exact, the
 * bits fp4_cuda_project gives that expert's own tensor in exact mode; native (w->native), the
 * bits of native_dp2a_kernel<1, 2> on that expert. how: FP4_CU_MOE_* above; d_group (for
 * ORDERED and GROUPED; NULL for PAIRS): fp4_cu_moe_group's table of these pairs. */
fp4_status fp4_cu_moe_project(const fp4_cu_moe_part *const *w, int nw, const int32_t *d_sel,
                              const int32_t *d_group, int how, int64_t n_pairs, int64_t xdiv,
                              const float *d_x, float *const *d_y, void *d_scratch, size_t scratch_bytes,
                              cudaStream_t stream);
/* the same for one exact NVFP4 part, xdiv 1, from a given Q8_K pass (q, d as
 * fp4_cu_moe_act_planes lays them out; e.g. the SwiGLU kernel's, stk_swiglu_act) */
fp4_status fp4_cu_moe_project_pre(const fp4_cu_moe_part *w, const int32_t *d_sel, const int32_t *d_group,
                                  int how, int64_t n_pairs, const int8_t *d_q, const float *d_d, float *d_y,
                                  cudaStream_t stream);
/* The group table of a step's pairs (int32, fp4_cu_moe_group_ints(n_pairs, n_experts) of them):
 * [0] the number G of distinct experts chosen; [1 .. 1 + n_pairs) the pairs stably sorted by their
 * expert d_sel[p]; then G triplets (expert, first place in that order, pairs), experts increasing.
 * One block, no host synchronization. */
int64_t fp4_cu_moe_group_ints(int64_t n_pairs, int64_t n_experts);
fp4_status fp4_cu_moe_group(const int32_t *d_sel, int64_t n_pairs, int64_t n_experts, int32_t *d_group,
                            cudaStream_t stream);

} /* extern "C" */

#endif /* FP4_CUDA_MOE_EXPERTS_CUH */
