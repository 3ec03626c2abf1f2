/* synth_impl.h — what synth.c shares with its family files (synth_deepseek.c). */
#ifndef FP4_SYNTH_IMPL_H
#define FP4_SYNTH_IMPL_H

#include "fp4_impl.h"
#include <stddef.h>

/* DeepSeek-V3's widths beyond a shape's common ones (synth_deepseek.c) */
typedef struct synth_ds {
    int64_t q_lora, kv_lora, nope, rope, v, n_group, topk_group, n_shared, first_dense, nextn;
    double routed_scaling, yarn_factor, beta_fast, beta_slow, mscale, mscale_all_dim;
    int64_t yarn_orig;
} synth_ds;
extern const synth_ds fp4_synth_ds_tiny, fp4_synth_ds_tiny_nolora, fp4_synth_ds_v3;

typedef struct synth_shape {
    const char *name, *arch;
    int64_t hidden, layers, heads, kv_heads, head_dim, inter, vocab, max_pos;
    double rope_theta, rms_eps;
    int llama3_rope, tie;
    int64_t bos, eos;
    int64_t experts, used, moe_inter; /* 0 experts: dense */
    const synth_ds *ds;
} synth_shape;

typedef struct synth_arch {
    const char *name, *hf_class, *model_type;
    int qk_norm, rope_scaling; /* per-head q/k RMSNorm; writes the shape's llama3 rope scaling */
    int moe;                   /* 1: Qwen3-MoE names (mlp.gate, mlp.experts.E.*_proj); 2: Mixtral's;
                                  3: none, Gemma 3 (four norms per block, stored as gain - 1);
                                  4: DeepSeek-V3 (synth_deepseek.c) */
} synth_arch;

/* Tensor kinds and their statistics (fp4lane_synth.h): K_BIAS is zero-centred (the router's
 * e_score_correction_bias, of the norms' spread). */
typedef enum { K_MATRIX, K_PROJ, K_NORM, K_BIAS } synth_kind;

typedef struct synth_tensor {
    char name[96];
    synth_kind kind;
    int64_t rows, cols; /* rows 0: 1-D */
} synth_tensor;

typedef struct synth_plan {
    const synth_shape *sh; /* the shape (or own: it with fewer layers, fp4_synth_opts.n_layers) */
    synth_shape own;
    const synth_arch *ar;
    synth_tensor *t; /* room for (layers + 1) * (27 + 3 * experts) + 8 */
    int n;
    uint64_t bytes;
} synth_plan;

void fp4_synth_add(synth_plan *p, const char *name, synth_kind k, int64_t rows, int64_t cols);
fp4_status fp4_synth_ds_plan(synth_plan *p, fp4_error *err);
/* its config.json text into buf (synth.c's config_text) */
fp4_status fp4_synth_ds_config_text(const synth_plan *p, char *buf, size_t size, fp4_error *err);

#endif
