/* env.h — the FP4LANE_CUDA_* environment variables of the CUDA library, parsed in one place
 * (env.cu; HACKING.md lists each with its values and default). Each is read at one of three
 * moments, and the readers below say which:
 *   - once per process (fp4_cu_env_process): whether cuBLAS loads, the launch form;
 *   - at every projection call (fp4_cu_env_no_qin, fp4_cu_env_no_dense_mma, fp4_cu_env_imma,
 *     fp4_cu_env_decode): so `fp4lane bench` pairs a route's two forms in one process and the GPU
 *     tests switch them between calls (a decode step's graph keeps the form it was captured with);
 *   - when an engine is created (fp4_cu_env_read, kept in the engine): every knob of the step,
 *     so engines created under different settings coexist (bench's A and B). */
#ifndef FP4_CUDA_ENV_H
#define FP4_CUDA_ENV_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fp4_cu_env {
    int gemm;             /* FP4LANE_CUDA_GEMM: 0 off, 1 any cuBLAS major, -1 unset (this build's) */
    int no_pdl;           /* FP4LANE_CUDA_NO_PDL: plain launches */
    int no_qin;           /* FP4LANE_CUDA_NO_QIN: the separate 1-column activation pass */
    int no_dense_mma;     /* FP4LANE_CUDA_NO_DENSE_MMA: bf16.dense at every width */
    int imma;             /* FP4LANE_CUDA_IMMA: 0 when "0" (exact A16 in 16-column chunks) */
    int att_gemm;         /* FP4LANE_CUDA_ATT_GEMM: 0 when "0" (the pinned prefill attention) */
    int att_cluster;      /* FP4LANE_CUDA_ATT_CLUSTER: 0 when "0" (the two attention launches) */
    int att_cluster_wide; /* FP4LANE_CUDA_ATT_CLUSTER_WIDE: 0 when "0" (no clusters at 2+ columns) */
    int att_tiled;        /* FP4LANE_CUDA_ATT_TILED: exact attention in one launch a column (att_tiled.cuh) */
    int imma_wc;          /* FP4LANE_CUDA_IMMA_WC: a16_imma.cu's column groups a block, 2/4/8 (0: by width) */
    int imma_occ;         /* FP4LANE_CUDA_IMMA_OCC: 2 two 8-column-group blocks an SM, 3 one barrier a sb */
    int no_argmax;        /* FP4LANE_CUDA_NO_ARGMAX: greedy steps pick on the host */
    int no_actfuse;       /* FP4LANE_CUDA_NO_ACTFUSE: SwiGLU, then down's own activation pass */
    int no_fuse;          /* FP4LANE_CUDA_NO_FUSE: q/k/v and gate/up uploaded apart */
    int moe_grouped;      /* FP4LANE_CUDA_MOE_GROUPED: MoE experts grouped by expert (unproven) */
    int frag;             /* FP4LANE_CUDA_FRAG: frag copies for one sequence too */
    int no_frag;          /* FP4LANE_CUDA_NO_FRAG: no frag copies */
    int tp_nccl;          /* FP4LANE_CUDA_TP_NCCL: the split step's ranks talk through NCCL (one per GPU) */
    uint64_t mem_limit;   /* FP4LANE_CUDA_MEM_LIMIT: bytes the memory plan may use (UINT64_MAX: unset) */
    const char *profile;  /* FP4LANE_CUDA_PROFILE: the per-op profile's file (NULL: unset or empty) */
    int warm;             /* FP4LANE_CUDA_WARM: the load-time cuBLAS thread and warm step (warm.cu) */
    int decode;           /* FP4LANE_CUDA_DECODE: the 1-column item kernel's variant bits (a16_stream.cuh),
                             -1 unset (the default's) */
} fp4_cu_env;

/* FP4LANE_CUDA_DECODE's bits as an engine carries them: in its projections' fp4_cuda_tensor.flags from
 * this bit up, with FP4_CU_DEC_SET (create.cu), since fp4lane bench sets a side's variables only while
 * it creates it */
#define FP4_CU_DEC_SHIFT 8
#define FP4_CU_DEC_SET (1u << 16)

/* every variable, as the environment holds it now */
void fp4_cu_env_read(fp4_cu_env *e);
/* every variable as it was at the first call in this process */
const fp4_cu_env *fp4_cu_env_process(void);
/* one variable each, now */
int fp4_cu_env_no_qin(void);
int fp4_cu_env_no_dense_mma(void);
int fp4_cu_env_imma(void);
int fp4_cu_env_imma_wc(void);
int fp4_cu_env_imma_occ(void);
int fp4_cu_env_decode(void);

#ifdef __cplusplus
}
#endif

#endif /* FP4_CUDA_ENV_H */
