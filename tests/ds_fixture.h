/* ds_fixture.h — test support for DeepSeek-V3 (issue 31): a tiny DeepseekV3ForCausalLM checkpoint
 * written with the library's writer (weights of unit-scale outputs, randomized norms and router
 * bias, an MTP layer), and an independent float64 forward of a whole token sequence in
 * transformers' expanded form (k and v expanded from the latent per head, no cache). */
#ifndef DS_FIXTURE_H
#define DS_FIXTURE_H

#include "fp4lane_runtime.h"

typedef struct dsfx_spec {
    int hidden, heads, q_lora, kv_lora, nope, rope, v, ffn, moe_ffn, experts, used, n_group, topk_group;
    int shared, first_dense, layers, vocab, ctx, nextn;
    int interleave;    /* rope_interleave                                               */
    int yarn;          /* rope_scaling yarn: factor 4, original 64, mscale 1, mscale_all_dim 0.8 */
    const char *drop;  /* a tensor name (printf pattern with the layer) left out, layer 1 */
    const char *extra; /* appended inside config.json's object (",\"k\":v"), may be NULL  */
    int hide_nextn;    /* config.json says num_nextn_predict_layers 0 (the MTP tensors stay) */
    double mscale, mscale_all_dim; /* yarn's (1.0, 0.8) */
} dsfx_spec;

/* hidden 64, 4 heads, q_lora 32, kv_lora 16, nope 8, rope 4 (interleaved), v 8, ffn 96, 8 experts of
 * 32 in 4 groups (2 chosen), 3 per token, one shared expert, layer 0 dense, 3 layers, vocab 96,
 * context 64, one MTP layer, yarn. */
dsfx_spec dsfx_default(void);
/* DIR/config.json and DIR/model.safetensors (bf16); DIR is created. 0 on success. */
int dsfx_write(const char *dir, const dsfx_spec *s, uint64_t seed);
/* logits [T][vocab] of tokens[0..T) in float64 */
int dsfx_reference(const fp4_model *m, const fp4_arch *a, const int32_t *tok, int T, double *logits);

#endif
