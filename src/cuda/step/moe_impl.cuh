/* moe_impl.cuh — the CUDA step's mixture-of-experts state (src/cuda/step): what moe.cu uploads and
 * allocates at creation and moe.cuh's layer (included by step.cu) runs. Never installed. */
#ifndef FP4_CUDA_STEP_MOE_IMPL_CUH
#define FP4_CUDA_STEP_MOE_IMPL_CUH

#include "cuda/moe_experts.cuh"
#include "cuda/step/step_impl.cuh"

typedef struct cu_moe {
    int64_t E, K, FE;
    int64_t x0, EL; /* the experts [x0, x0 + EL) this engine holds: all but on a rank of the split (tp.cu) */
    int how;        /* steps of 2+ columns: FP4_CU_MOE_ORDERED (FP4LANE_CUDA_MOE_GROUPED: _GROUPED) */
    fp4_cuda_tensor *router; /* n_layers: the router (F16/BF16/F32 through fp4_cuda_project); empty
                                for a dense layer */
    fp4_cu_moe_part *part;   /* n_layers * 3: gate, up, down of every expert (moe_experts.cuh)   */
    void **arena;            /* n_layers * 3: each part's one allocation                         */
    float *d_scale2;         /* n_layers * 3 * E: the experts' NVFP4 scale2 (1 for other types)  */
    /* per step (max_cols columns, K choices each) */
    float *d_rl, *d_rs;     /* router logits [col][E]; the routing's scratch [col][E]           */
    int32_t *d_sel;         /* the chosen experts [col][K], selection order                     */
    int32_t *d_selg;        /* a rank's split (EL < E): the chosen experts, while d_sel holds local ones */
    int32_t *d_grp;         /* the pairs' group table (fp4_cu_moe_group; steps of 2+ columns) */
    float *d_rw;            /* their weights [col][K]                                           */
    float *d_g, *d_u, *d_y; /* gate / up [pair][FE] (g then the SwiGLU), down [pair][H]         */
    void *d_q;              /* the Q8_K pass of the expert projections (moe_q_bytes)            */
    float *d_sg, *d_su, *d_sh; /* DeepSeek-V3's shared experts: gate / up [col][FS], out [col][H] */
    size_t q_bytes;
} cu_moe;

#endif /* FP4_CUDA_STEP_MOE_IMPL_CUH */
