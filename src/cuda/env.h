/* env.h — the FP4LANE_CUDA_* environment variables of the CUDA library, parsed in one place
 * (env.cu; HACKING.md lists each with its values and default). Each is read at one of three
 * moments, and the readers below say which:
 *   - once per process (fp4_cu_env_process): whether cuBLAS loads, the launch form;
 *   - at every projection call (fp4_cu_env_no_qin, fp4_cu_env_no_dense_mma, fp4_cu_env_imma): so
 *     `fp4lane bench` pairs a route's two forms in one process and the GPU tests switch them between
 *     calls (a decode step's graph keeps the form it was captured with);
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
    int no_argmax;        /* FP4LANE_CUDA_NO_ARGMAX: greedy steps pick on the host */
    int no_actfuse;       /* FP4LANE_CUDA_NO_ACTFUSE: SwiGLU, then down's own activation pass */
    int no_fuse;          /* FP4LANE_CUDA_NO_FUSE: q/k/v and gate/up uploaded apart */
    int frag;             /* FP4LANE_CUDA_FRAG: frag copies for one sequence too */
    int no_frag;          /* FP4LANE_CUDA_NO_FRAG: no frag copies */
    int tp_nccl;          /* FP4LANE_CUDA_TP_NCCL: the split step's ranks talk through NCCL (one per GPU) */
    uint64_t mem_limit;   /* FP4LANE_CUDA_MEM_LIMIT: bytes the memory plan may use (UINT64_MAX: unset) */
    const char *profile;  /* FP4LANE_CUDA_PROFILE: the per-op profile's file (NULL: unset or empty) */
} fp4_cu_env;

/* every variable, as the environment holds it now */
void fp4_cu_env_read(fp4_cu_env *e);
/* every variable as it was at the first call in this process */
const fp4_cu_env *fp4_cu_env_process(void);
/* one variable each, now */
int fp4_cu_env_no_qin(void);
int fp4_cu_env_no_dense_mma(void);
int fp4_cu_env_imma(void);

#ifdef __cplusplus
}
#endif

#endif /* FP4_CUDA_ENV_H */
