/* rt_fixture.h — test support for the runtime: tiny Llama-family checkpoints written with the
 * library's writers, and two independent forwards of a whole token sequence (no KV cache, layer by
 * layer over all positions): the exact-mode oracle (the SPEC contractions from format/, reductions
 * written out as a simulated warp) and a double-precision reference on the dequantized weights. */
#ifndef RT_FIXTURE_H
#define RT_FIXTURE_H

#include "fp4lane_io.h"
#include "fp4lane_runtime.h"

typedef struct rtfx_spec {
    const char *model_type; /* "llama", "mistral", "qwen2", "qwen3"                           */
    int hidden, heads, kv_heads, head_dim, ffn, vocab, layers, ctx;
    int tied;
    int explicit_head_dim;  /* write "head_dim" into config.json                              */
    const char *extra_json; /* appended inside the config object (",\"k\":v"), may be NULL   */
    /* mixture of experts (model_type "qwen3_moe" or "mixtral"; experts 0: dense) */
    int experts, used, moe_ffn;
    int dense_layer; /* qwen3_moe: this layer in mlp_only_layers (-1: none)              */
    int fused;       /* qwen3_moe: experts as 3-D gate_up_proj / down_proj               */
    int drop_expert; /* faults: expert 1 of layer 0 left out (its down), a router one row */
    int bad_router;  /* short, one expert too many                                       */
    int extra_expert;
} rtfx_spec;

/* The default tiny shape: hidden 256, 4 heads × 64, 2 KV heads, ffn 512, vocab 320, 2 layers. */
rtfx_spec rtfx_default(const char *model_type);
/* A tiny MoE: the default shape, 3 layers, 8 experts, top 2, expert ffn 256 (qwen3_moe: layer 1
 * dense through mlp_only_layers, norm_topk_prob true). */
rtfx_spec rtfx_moe(const char *model_type);
/* Writes DIR/config.json and DIR/model.safetensors (bf16, seeded). DIR is created. 0 on success. */
int rtfx_write_hf(const char *dir, const rtfx_spec *s, uint64_t seed);

/* Bit-exact oracle of exact mode: logits [T][vocab] for tokens[0..T). */
int rtfx_oracle_exact(const fp4_model *m, const fp4_arch *a, const int32_t *tok, int T, float *logits);
/* Double-precision reference on the dequantized weights (f32 values widened), same graph, no F16
 * KV rounding: logits [T][vocab]. */
int rtfx_reference_f64(const fp4_model *m, const fp4_arch *a, const int32_t *tok, int T, double *logits);

/* DIR/<model_type>-bf16 (rtfx_write_hf of s, seed) and its NVFP4 twin DIR/<model_type>-nvfp4
 * (ModelOpt layout), each CHECKed; their paths into bf and nv (cap bytes each). */
void rtfx_write_pair(const char *dir, const rtfx_spec *s, uint64_t seed, char *bf, char *nv, size_t cap);

/* rm -rf of a directory the test created */
void rtfx_rmtree(const char *dir);

#endif
