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
    int norm_shift;               /* Gemma 3 HF names: a norm's gain is 1 + its weight    */
    /* mixture of experts (NULL for a dense model): n_layers * FP4_MOE_STRIDE(E) (backend.h);
     * per-expert 2-D views of 3-D expert tensors and their names, owned */
    const fp4_tensor **moe;
    fp4_tensor *moe_views;
    char *moe_names;
} fp4_rt_bound;

/* Architecture of an open model: HF config.json, fp4lane.hf.config in a GGUF, or llama.cpp keys. */
fp4_status fp4_rt_model_arch(const fp4_model *m, fp4_arch *a, fp4_error *err);
/* Binds names to slots, checks shapes and types against arch; refuses missing and unexpected
 * tensors by name. */
fp4_status fp4_rt_bind(const fp4_model *m, const fp4_arch *a, fp4_rt_bound *b, fp4_error *err);
void fp4_rt_bound_free(fp4_rt_bound *b);
/* bind_moe.c: the routers and experts of every MoE layer (gg: llama.cpp names), marking used[] */
fp4_status fp4_rt_bind_moe(const fp4_model *m, const fp4_arch *a, fp4_rt_bound *b, uint8_t *used, int gg,
                           int64_t (*index_of)(const fp4_model *, const fp4_tensor *), fp4_error *err);
/* The lane of a model (for the route table). */
fp4_rt_lane fp4_rt_model_lane(const fp4_model *m);
const char *fp4_rt_lane_name(fp4_rt_lane l);

struct fp4_rt {
    const fp4_model *m;
    fp4_rt_opts opts;
    fp4_arch arch;
    fp4_rt_bound b;
    float *rope_cos, *rope_sin;
    float *rope_cos_local, *rope_sin_local; /* Gemma 3's local layers (NULL without)   */
    float *vec;         /* norm weights and biases widened to f32 (one block)  */
    const float **lvec; /* n_layers * FP4_LW_COUNT_ -> into vec                */
    int64_t n_ctx, max_cols, max_logit_cols;
    const fp4_rt_backend_ops *be;
    void *be_state;
    void *dl;          /* dlopen handle of libfp4lane_cuda.so                 */
    int64_t *seq_pos;  /* per slot: next position, -1 when closed             */
    int64_t *seq_lo;   /* per slot: the lowest position whose K/V rows every layer still holds
                          (a local layer's ring overwrites older ones: fp4_rt_kv_ring)     */
    int64_t ring;      /* positions of a local layer's ring, 0 without one                */
    fp4_rt_col *cols;  /* max_cols                                             */
    float *glg;        /* fp4_rt_step_greedy's host logits without step_greedy: max_logit_cols rows */
    char identity[65]; /* computed on first use                               */
    char routes[1024];
};

/* FP4_OK when a snapshot of a sequence's n_pos positions can hold what the next step reads: a
 * local layer's last sliding_window positions (the rows kv_read gives); rule kv.window otherwise. */
fp4_status fp4_rt_kv_window_held(const fp4_rt *rt, int32_t seq, int64_t n_pos, const char *path,
                                 fp4_error *err);
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

/* session.c: the pieces of one request's loop that fp4_sched (sched.c) drives. A step: cols adds
 * the request's next columns (a prefill chunk of at most budget, or its pending token), wants
 * says whether the last of them asks for logits, take consumes that column's logits row (NULL:
 * greedy, the device's choice, is the token), end finishes it (flushing the held-back text). */
int fp4_session_live(const fp4_session *s);
int fp4_session_host_logits(const fp4_session *s);
int fp4_session_wants(const fp4_session *s);
int fp4_session_decoding(const fp4_session *s); /* the whole prompt was fed */
int64_t fp4_session_cols(fp4_session *s, int32_t seq, fp4_rt_tok *cols, int64_t budget);
void fp4_session_take(fp4_session *s, const float *lg, int32_t greedy);
void fp4_session_end(fp4_session *s, fp4_finish f);
/* the prompt's ids; skip marks its first n as cached already (a prefix cache hit, before any
 * column of it was taken; n < the prompt's length) */
const int32_t *fp4_session_prompt(const fp4_session *s, int64_t *n);
void fp4_session_skip(fp4_session *s, int64_t n);

/* prefix.c, driven by fp4_sched: load writes the longest cached run of whole blocks of ids[0..n)
 * (at most n - 1 positions) into an open, empty seq and returns its positions (0: none); store
 * keeps the whole blocks of ids[0..n) that seq holds (its first n positions are those ids). */
int64_t fp4_prefix_cache_load(fp4_prefix_cache *c, fp4_rt *rt, int32_t seq, const int32_t *ids, int64_t n);
void fp4_prefix_cache_store(fp4_prefix_cache *c, fp4_rt *rt, int32_t seq, const int32_t *ids, int64_t n);
/* rt.c: a sequence's next position after its cache was written (kv.c, prefix.c) */
void fp4_rt_seq_set_pos(fp4_rt *rt, int32_t seq, int64_t pos);

#endif
