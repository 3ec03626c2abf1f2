/* rt_impl.h — internals of src/runtime/: the engine, binding, routes, KV identity. */
#ifndef FP4_RT_IMPL_H
#define FP4_RT_IMPL_H

#include "fp4_impl.h"
#include "backend/backend.h"

/* The checkpoint's tensors bound to slots (bind.c). */
typedef struct fp4_rt_bound {
    const fp4_tensor *tok_embd, *out_norm, *head;
    const fp4_tensor **layer;     /* n_layers * FP4_LW_COUNT_ (owned array)              */
    const fp4_tensor *rope_freqs; /* GGUF rope_freqs.weight [head_dim/2] F32, or NULL    */
} fp4_rt_bound;

/* Architecture of an open model: HF config.json, fp4lane.hf.config in a GGUF, or llama.cpp keys. */
fp4_status fp4_rt_model_arch(const fp4_model *m, fp4_arch *a, fp4_error *err);
/* Binds names to slots, checks shapes and types against arch; refuses missing and unexpected
 * tensors by name. */
fp4_status fp4_rt_bind(const fp4_model *m, const fp4_arch *a, fp4_rt_bound *b, fp4_error *err);
void fp4_rt_bound_free(fp4_rt_bound *b);
/* The lane of a model (for the route table). */
fp4_rt_lane fp4_rt_model_lane(const fp4_model *m);
const char *fp4_rt_lane_name(fp4_rt_lane l);

struct fp4_rt {
    const fp4_model *m;
    fp4_rt_opts opts;
    fp4_arch arch;
    fp4_rt_bound b;
    float *rope_cos, *rope_sin;
    float *vec;         /* norm weights and biases widened to f32 (one block)  */
    const float **lvec; /* n_layers * FP4_LW_COUNT_ -> into vec                */
    int64_t n_ctx, max_cols, max_logit_cols;
    const fp4_rt_backend_ops *be;
    void *be_state;
    void *dl;          /* dlopen handle of libfp4lane_cuda.so                 */
    int64_t *seq_pos;  /* per slot: next position, -1 when closed             */
    fp4_rt_col *cols;  /* max_cols                                             */
    float *glg;        /* fp4_rt_step_greedy's host logits without step_greedy: max_logit_cols rows */
    char identity[65]; /* computed on first use                               */
    char routes[1024];
};

/* 1 when the engine was created with fp4_rt_opts.drafting (its route qualified for drafting). */
int fp4_rt_drafting(const fp4_rt *rt);

/* SHA-256 helpers (OpenSSL libcrypto). */
typedef struct fp4_sha256 {
    void *ctx;
} fp4_sha256;
int fp4_sha256_init(fp4_sha256 *h);
void fp4_sha256_update(fp4_sha256 *h, const void *p, size_t n);
void fp4_sha256_final(fp4_sha256 *h, uint8_t out[32]);
void fp4_rt_identity_compute(struct fp4_rt *rt);

/* rt.c: how many of toks[0..n) the next backend step takes (max_cols, max_logit_cols) */
int64_t fp4_rt_step_span(const fp4_rt_tok *toks, int64_t n, int64_t max_cols, int64_t max_logit_cols);

#endif
