/* mla_impl.cuh — the CUDA step's latent attention state (DeepSeek-V3, src/cuda/step): what mla.cu
 * widens, uploads and allocates at creation and mla.cuh's layer (included by step.cu) runs. The
 * device twin of src/cpu/mla.c: the same absorbed form for every column, the same cache rows.
 * Never installed. */
#ifndef FP4_CUDA_STEP_MLA_IMPL_CUH
#define FP4_CUDA_STEP_MLA_IMPL_CUH

#include "cuda/step/step_impl.cuh"

#define MLA_NORM_EPS 1e-6f /* q_a_layernorm / kv_a_layernorm (transformers' DeepseekV3RMSNorm) */
#define MLA_THREADS 128    /* the prep and attention blocks: 4 warps */

typedef struct cu_mla {
    int64_t R, dr, dn, dv, NH, QL, W; /* W = R + dr: one cache row                                  */
    int64_t kd;                       /* its halves in K (fp4_arch_kv_dim), the rest in V            */
    float *d_kvb;                     /* per layer [NH (dn + dv)][R]: kv_b widened (its W_UV rows read) */
    float *d_ukt;                     /* per layer [NH][R][dn]: W_UK transposed                      */
    float *d_qa, *d_kva, *d_o;        /* per step: [col][QL], [col][W], [col][NH dv]                 */
} cu_mla;

extern "C" {
/* the widened kv_b and the per-step buffers in the memory plan (0s without latent attention);
 * refuses a shape the kernels do not run */
fp4_status fp4_cu_mla_plan(const cu_state *s, uint64_t *weights, uint64_t *scratch, fp4_error *err);
/* kv_b widened on the host as the CPU widens it (fp4_tensor_dequant_rows), uploaded: s->mla */
fp4_status fp4_cu_mla_create(cu_state *s, fp4_error *err);
void fp4_cu_mla_free(cu_state *s);
}

#endif /* FP4_CUDA_STEP_MLA_IMPL_CUH */
