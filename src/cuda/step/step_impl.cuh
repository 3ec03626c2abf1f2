/* step_impl.cuh — the CUDA backend's private header (src/cuda/step): the engine's state, the error
 * helpers, and the functions one translation unit of the step calls in another:
 *   upload.cu  the tensors' device layout from the descriptors alone (the memory plan, the route
 *              the runtime is told), their upload, the fused q/k/v and gate/up tensors;
 *   create.cu  the memory plan, the engine's creation (uploads, KV cache, scratch) and its end;
 *   step.cu    the step itself (the only TU with the step's kernels: step_kernels.cuh,
 *              att_cluster.cuh, att_gemm.cuh), the KV copies, the ops table and the entry point.
 * Every function here is hidden (-fvisibility=hidden; the .so's version script exports only
 * fp4_rt_cuda_backend). Never installed. */
#ifndef FP4_CUDA_STEP_IMPL_CUH
#define FP4_CUDA_STEP_IMPL_CUH

#include "backend/backend.h"
#include "cuda/common.cuh"
#include "cuda/env.h"
#include <pthread.h>

extern "C" fp4_status fp4_fail(fp4_error *err, fp4_status code, const char *file, const char *tensor,
                               const char *rule, const char *fmt, ...);

#define CU_MAX_GRAPHS 16 /* (column count, attention kernel) pairs; past them steps run eagerly */
#define CU_RESERVE_BYTES ((uint64_t)768 << 20) /* context, modules, graphs, allocator slack */

enum { OP_EMBED, OP_NORM, OP_QKV, OP_PREP, OP_ATTN, OP_O, OP_GATEUP, OP_SWIGLU, OP_DOWN, OP_HEAD, OP_COUNT_ };
#define PROF_MAX_EVENTS 4096

typedef struct cu_graph {
    int64_t n;
    int akey; /* the attention kernel the graph holds (att_wide_cs: the step's positions choose it) */
    int seen;
    cudaGraphExec_t exec;
} cu_graph;

typedef struct cu_state {
    int is_tp; /* 0: this engine (first in both handles: the split's, tp.cu, holds 1) */
    fp4_rt_model_desc d;
    fp4_cu_env env; /* the FP4LANE_CUDA_* variables when the engine was created */
    int64_t max_cols;
    cudaStream_t stream;
    fp4_cu_stager stage;       /* weights' upload staging (device.cu): create() only       */
    fp4_cuda_tensor *w;        /* n_layers * FP4_LW_COUNT_ (the projection slots)          */
    fp4_cuda_tensor *wf;       /* n_layers * 2: q/k/v and gate/up as one tensor each (rows
                                  concatenated) when fusible, else empty and w serves     */
    fp4_cuda_tensor emb, head; /* head unused when tied (emb serves both)                  */
    int emb_on_device;         /* F16/BF16/NVFP4 table: fp4_cuda_embed; else host rows     */
    float *d_vec;              /* every vector, then the RoPE tables                        */
    const float **dv;          /* n_layers * FP4_LW_COUNT_ device pointers (NULL: absent)  */
    const float *d_out_norm, *d_cos, *d_sin;
    uint16_t *d_kc, *d_vc;
    float *d_x, *d_h, *d_q, *d_k, *d_v, *d_o, *d_t, *d_g, *d_u, *d_hh, *d_lg, *d_sc, *d_st, *d_den, *d_bmax;
    unsigned *d_tk; /* attention tickets, zero between launches */
    void *d_am;     /* fp4_cuda_argmax_rows's work (zero between calls) */
    int32_t *d_tok; /* the greedy tokens of a step, then their rows' non-finite flags (2 logit_rows) */
    int argmax_off; /* FP4LANE_CUDA_NO_ARGMAX: step_greedy copies the logits and takes argmax.h's */
    int act_fuse;   /* 1-column steps: SwiGLU makes down's activation pass (FP4LANE_CUDA_NO_ACTFUSE: off) */
    void *d_aq;     /* ... that pass: int8 or int16 values of aq_nsb super-blocks */
    float *d_ad;    /* ... and their steps */
    int64_t aq_nsb;
    uint16_t *d_q16, *d_p; /* native prefill attention through cuBLAS (att_gemm.cuh): q and P in f16 */
    float *d_qs;
    int att_gemm;         /* native mode, cuBLAS loaded, not FP4LANE_CUDA_ATT_GEMM=0 */
    int att_cl;           /* the one-launch cluster attention's cluster size (att_cluster.cuh), 0: off */
    int att_cl_wide;      /* the cluster attention for steps of 2 to ATT_CL_WIDE_COLS columns (att_wide) */
    int att_wide_ok;      /* bit cs: clusters of cs blocks run this shape and n_ctx (att_wide's sizes) */
    int32_t *d_in, *h_in; /* 4 * max_cols: token, slot, position, logits row (h_in: then the
                           * greedy tokens and their non-finite flags, 2 max_cols more)   */
    float *h_emb, *h_lg;  /* pinned host rows                                          */
    fp4_cuda_scratch scratch;
    cu_graph graphs[CU_MAX_GRAPHS];
    int graphs_off;
    fp4_rt_mem_plan plan;
    struct cu_tp_rank *tp; /* a rank of the split step (tp.cu): o and down through it; NULL unsplit */
    struct cu_moe *moe;    /* mixture of experts (moe.cu, moe_impl.cuh); NULL for a dense model */
    struct cu_mla *mla;    /* latent attention (mla.cu, mla_impl.cuh); NULL without (DeepSeek-V3) */
    /* the KV cache's rows (gemma.cu): layer L's rows of a slot start at row kv_off[L], kv_rows rows a
     * slot; kv_ring[L] > 0: a local layer's ring of that many positions (backend.h, fp4_rt_kv_ring) */
    int64_t *kv_off, *kv_ring, kv_rows;
    const float *d_cos_l, *d_sin_l; /* Gemma 3's local layers' RoPE table (NULL without)       */
    float emb_scale;                /* Gemma 3: the embedding scale and its dtype (pinned_gemma.h) */
    int emb_dtype;
    /* profiling */
    const char *prof_path;
    cudaEvent_t *ev;
    int n_ev, prof_op[PROF_MAX_EVENTS];
    double prof_ms[2][OP_COUNT_]; /* [0] decode steps (every column wants logits), [1] the others */
    int64_t prof_steps[2], prof_cols[2];
    pthread_t prep; /* cuBLAS's handle made beside the upload (warm.cu) */
    int prep_on;
} cu_state;

static inline const fp4_cuda_tensor *head_of(const cu_state *s) {
    return s->d.head == s->d.tok_embd ? &s->emb : &s->head;
}

/* the columns of one step that may want logits (desc's max_logit_cols; the runtime splits at it) */
static inline int64_t logit_rows(const cu_state *s) {
    const int64_t l = s->d.max_logit_cols;
    return l >= 1 && l <= s->max_cols ? l : s->max_cols;
}

static inline fp4_status cuda_fail(fp4_error *err, fp4_status st, const char *tensor, const char *rule,
                                   const char *what) {
    if (st == FP4_ERR_CUDA)
        return fp4_fail(err, st, NULL, tensor, rule, "%s: %s", what, fp4_cuda_last_error());
    return fp4_fail(err, st, NULL, tensor, rule, "%s: %s", what, fp4_status_str(st));
}
#define CU_TRY(err, expr, rule)                                                                              \
    do {                                                                                                     \
        cudaError_t e_ = (expr);                                                                             \
        if (e_ != cudaSuccess) return cuda_fail(err, FP4_CUDA_FAIL(e_, #expr), NULL, rule, #expr);           \
    } while (0)

/* scratch layout: one list of (pointer, bytes) so the plan and the allocation agree */
typedef struct buf_req {
    void **p;
    uint64_t bytes;
} buf_req;
#define CU_MAX_BUFS 32

extern "C" {

/* ---- upload.cu ---- */
/* t's metadata as the upload will lay it out (no device memory), its device bytes in *bytes;
 * -1 for a type with no CUDA layout */
int fp4_cu_step_stub(const fp4_tensor *t, fp4_cuda_tensor *o, uint64_t *bytes);
/* 1 when a projection of this type gets its tensor-core frag copy (native mode, see upload.cu) */
int fp4_cu_step_frag_wanted(const fp4_cu_env *env, fp4_mode mode, int64_t n_slots, int64_t type,
                            float input_scale_inv);
/* the backend's route op: the route name of w's 1-column projection, NULL where none */
const char *fp4_cu_step_route(const fp4_tensor *w, fp4_mode mode);
fp4_status fp4_cu_step_upload(fp4_cu_stager *sg, const fp4_tensor *t, fp4_cuda_tensor *o);
/* group g (0 q/k/v, 1 gate/up) of layer L: its parts when they can be one tensor (their count),
 * else 0 (always 0 with no_fuse) */
int fp4_cu_step_fuse_parts(const fp4_rt_model_desc *d, int no_fuse, int64_t L, int g,
                           const fp4_tensor **parts);
/* the fused tensor's metadata as the upload will lay it out; 0 when the group is not fused */
int fp4_cu_step_fuse_stub(const fp4_rt_model_desc *d, int no_fuse, int64_t L, int g, fp4_cuda_tensor *o);
fp4_status fp4_cu_step_upload_fused(fp4_cu_stager *sg, const fp4_tensor *const *parts, int np,
                                    fp4_cuda_tensor *o);

/* ---- gemma.cu ---- */
/* s->kv_off, kv_ring, kv_rows for s->d and s->max_cols, and Gemma 3's embedding scale */
fp4_status fp4_cu_step_kv_layout(cu_state *s);
/* positions [0, n_pos) of a ring layer L of a slot to / from host rows [pos][kvd] (k and v): the
 * last sliding_window positions (zeros before them on the host, as the CPU's kv_rows.c); enqueued
 * on s->stream */
cudaError_t fp4_cu_step_kv_ring_copy(cu_state *s, int32_t slot, int64_t L, int64_t n_pos, uint16_t *k,
                                     uint16_t *v, int to_host);

/* ---- create.cu ---- */
fp4_status fp4_cu_step_create(const fp4_rt_model_desc *d, int64_t max_cols, void **out, fp4_error *err);
/* the same, as rank tp of a split step (tp.cu; NULL: fp4_cu_step_create) */
fp4_status fp4_cu_step_create_as(const fp4_rt_model_desc *d, int64_t max_cols, struct cu_tp_rank *tp,
                                 void **out, fp4_error *err);
void fp4_cu_step_destroy(void *p);

/* ---- moe.cu: the mixture-of-experts layers ---- */
/* their weights, per-step buffers and router scratch in the memory plan (0s for a dense model);
 * refuses what the device step does not run, naming the tensor */
fp4_status fp4_cu_moe_plan(cu_state *s, uint64_t *weights, uint64_t *scratch, size_t *proj_scratch,
                           fp4_error *err);
/* uploads the routers and experts (through s->stage) and allocates the per-step buffers: s->moe */
fp4_status fp4_cu_moe_create(cu_state *s, fp4_error *err);
size_t fp4_cu_moe_proj_scratch(const cu_state *s); /* the routers' projection scratch */
void fp4_cu_moe_free(cu_state *s);

/* ---- tp.cu: the step split over ranks (docs/SCALE.md) ---- */
/* the split engine (desc->tp ranks, each a cu_state on device r % device_count) */
fp4_status fp4_cu_tp_create(const fp4_rt_model_desc *d, int64_t max_cols, void **out, fp4_error *err);
void fp4_cu_tp_destroy(void *p);
fp4_status fp4_cu_tp_step(void *p, const fp4_rt_col *cols, int64_t n, float *logits, fp4_error *err);
/* the logits gathered to the host, then argmax.h's (backend.h, step_greedy) */
fp4_status fp4_cu_tp_step_greedy(void *p, const fp4_rt_col *cols, int64_t n, int32_t *tokens, fp4_error *err);
fp4_status fp4_cu_tp_kv_copy(void *p, int32_t slot, int64_t n_pos, uint16_t *k, uint16_t *v, int to_host);
/* a row-parallel projection of a rank (o, down): y[n][H] = W·x over every rank's input columns,
 * exact by gathered super-block terms and the pinned sum, native by all_reduce_sum; enqueued on
 * s->stream (the collective synchronizes it first) */
fp4_status fp4_cu_tp_row_parallel(cu_state *s, const fp4_cuda_tensor *w, const float *x, int64_t n, float *y,
                                  const char *name, fp4_error *err);

/* the experts [x0, x1) of E a rank holds (tp NULL: all of them) */
void fp4_cu_tp_experts(const struct cu_tp_rank *tp, int64_t E, int64_t *x0, int64_t *x1);
/* a rank's expert outputs y [pairs][H] (its own pairs' rows; selg: every pair's expert) gathered,
 * each pair's row taken from the rank that holds its expert */
fp4_status fp4_cu_tp_moe_pick(cu_state *s, const int32_t *selg, float *y, int64_t pairs, fp4_error *err);
/* a rank's embedding lookup of the step's tokens (d_tok) into s->d_x: its vocabulary rows, gathered
 * and each column's row taken from the rank that holds it */
fp4_status fp4_cu_tp_embed(cu_state *s, const int32_t *d_tok, int64_t n, fp4_error *err);

/* ---- step.cu: what creation needs of the step's kernels ---- */
/* the step's scratch buffers (at most CU_MAX_BUFS): their sizes follow the kernels' layouts */
int fp4_cu_step_scratch_list(cu_state *s, buf_req *r);
/* a step up to its last kernel, on s->stream: the columns checked and uploaded, the body run (the
 * logits of the *nw columns that want them in s->d_lg); have_out: a logits or tokens buffer was given */
fp4_status fp4_cu_step_enqueue(cu_state *s, const fp4_rt_col *cols, int64_t n, int have_out, int64_t *nw,
                               fp4_error *err);
/* the KV rows of a slot to / from host rows [L][pos][NKV·D] (the backend's kv_read / kv_write) */
fp4_status fp4_cu_step_kv(cu_state *s, int32_t slot, int64_t n_pos, uint16_t *k, uint16_t *v, int to_host);
/* the attention kernels this engine runs (s->att_cl, att_cl_wide, att_wide_ok) from its shape,
 * the device and s->env */
void fp4_cu_step_att_plan(cu_state *s);
/* the add + RMSNorm kernel's dynamic shared memory for rows of `bytes` (above 48 KB) */
cudaError_t fp4_cu_step_norm_smem(int bytes);
/* one discarded step of n columns: token 0 in slot 0 at positions 0..n-1, the last wanting its
 * greedy token (warm.cu says why no later bit changes) */
fp4_status fp4_cu_step_warm_step(cu_state *s, int64_t n, fp4_error *err);

/* ---- warm.cu: the first prefill's lazy work done at creation (native GEMM route only) ---- */
void fp4_cu_step_prep_start(cu_state *s); /* cuBLAS's handle on a thread, beside the upload */
void fp4_cu_step_prep_join(cu_state *s);  /* waits for it (create's end, destroy) */
fp4_status fp4_cu_step_warm(cu_state *s, fp4_error *err); /* the discarded step, when wanted */

} /* extern "C" */

#endif /* FP4_CUDA_STEP_IMPL_CUH */
