/* synth_deepseek.c — the DeepSeek-V3 shapes of fp4_synth_checkpoint: tensor names as
 * DeepseekV3ForCausalLM registers them (latent attention, dense first layers, routed experts with
 * the router's e_score_correction_bias, shared experts) and the multi-token-prediction layers
 * after the last layer, as DeepSeek's and NVIDIA's files carry them; config.json as transformers
 * writes it (rope_scaling of type yarn). */
#include "model/synth_impl.h"
#include "fp4lane_io.h"
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

/* tiny-deepseek (hidden and expert widths 256: NVFP4 A16 exact routes): one dense layer, two MoE layers of 8
 * experts in 4 groups (2 chosen, 3 experts per token), one shared expert, q_lora on, one MTP layer; yarn with
 * both mscales set so that cos/sin and the softmax are both scaled. Every input width is a multiple of 16
 * (NVFP4's block). */
const synth_ds fp4_synth_ds_tiny = {32, 16, 8, 4, 8, 4, 2, 1, 1, 1, 2.5, 4.0, 32.0, 1.0, 1.0, 0.8, 256};
const synth_ds fp4_synth_ds_tiny_nolora = {0, 16, 8, 4, 8, 4, 2, 1, 1, 0, 2.5, 4.0, 32.0, 1.0, 1.0, 0.8, 256};
/* deepseek-ai/DeepSeek-V3's config.json */
const synth_ds fp4_synth_ds_v3 = {1536, 512, 128,  64,   128, 8,   4,   1,   3,
                                  1,    2.5, 40.0, 32.0, 1.0, 1.0, 1.0, 4096};

static void addf(synth_plan *p, synth_kind k, int64_t rows, int64_t cols, const char *fmt, int64_t l,
                 const char *part) {
    char name[96];
    snprintf(name, sizeof name, fmt, (long long)l, part);
    fp4_synth_add(p, name, k, rows, cols);
}

static void ds_layer(synth_plan *p, int64_t l, int moe) {
    const synth_shape *s = p->sh;
    const synth_ds *d = s->ds;
    const int64_t H = s->hidden, NH = s->heads, qd = NH * (d->nope + d->rope);
    const char *at = "model.layers.%lld.self_attn.%s.weight";
    if (d->q_lora) {
        addf(p, K_PROJ, d->q_lora, H, at, l, "q_a_proj");
        addf(p, K_NORM, 0, d->q_lora, at, l, "q_a_layernorm");
        addf(p, K_PROJ, qd, d->q_lora, at, l, "q_b_proj");
    } else
        addf(p, K_PROJ, qd, H, at, l, "q_proj");
    addf(p, K_PROJ, d->kv_lora + d->rope, H, at, l, "kv_a_proj_with_mqa");
    addf(p, K_NORM, 0, d->kv_lora, at, l, "kv_a_layernorm");
    addf(p, K_PROJ, NH * (d->nope + d->v), d->kv_lora, at, l, "kv_b_proj");
    addf(p, K_PROJ, H, NH * d->v, at, l, "o_proj");
    static const char *const parts[3] = {"gate_proj", "up_proj", "down_proj"};
    if (!moe)
        for (int q = 0; q < 3; q++)
            addf(p, K_PROJ, q == 2 ? H : s->inter, q == 2 ? s->inter : H, "model.layers.%lld.mlp.%s.weight",
                 l, parts[q]);
    else {
        char fmt[96];
        for (int64_t e = 0; e < s->experts; e++)
            for (int q = 0; q < 3; q++) {
                snprintf(fmt, sizeof fmt, "model.layers.%%lld.mlp.experts.%lld.%%s.weight", (long long)e);
                addf(p, K_PROJ, q == 2 ? H : s->moe_inter, q == 2 ? s->moe_inter : H, fmt, l, parts[q]);
            }
        addf(p, K_MATRIX, s->experts, H, "model.layers.%lld.mlp.%s.weight", l, "gate");
        addf(p, K_BIAS, 0, s->experts, "model.layers.%lld.mlp.gate.%s", l, "e_score_correction_bias");
        const int64_t fs = d->n_shared * s->moe_inter;
        for (int q = 0; q < 3; q++)
            addf(p, K_PROJ, q == 2 ? H : fs, q == 2 ? fs : H,
                 "model.layers.%lld.mlp.shared_experts.%s.weight", l, parts[q]);
    }
    addf(p, K_NORM, 0, H, "model.layers.%lld.%s.weight", l, "input_layernorm");
    addf(p, K_NORM, 0, H, "model.layers.%lld.%s.weight", l, "post_attention_layernorm");
}

fp4_status fp4_synth_ds_plan(synth_plan *p, fp4_error *err) {
    const synth_shape *s = p->sh;
    const synth_ds *d = s->ds;
    const int64_t H = s->hidden;
    fp4_synth_add(p, "model.embed_tokens.weight", K_MATRIX, s->vocab, H);
    for (int64_t l = 0; l < s->layers; l++)
        ds_layer(p, l, l >= d->first_dense);
    for (int64_t l = s->layers; l < s->layers + d->nextn; l++) { /* MTP: a MoE layer and its heads */
        ds_layer(p, l, 1);
        addf(p, K_NORM, 0, H, "model.layers.%lld.%s.weight", l, "enorm");
        addf(p, K_NORM, 0, H, "model.layers.%lld.%s.weight", l, "hnorm");
        addf(p, K_PROJ, H, 2 * H, "model.layers.%lld.%s.weight", l, "eh_proj");
        addf(p, K_NORM, 0, H, "model.layers.%lld.%s.weight", l, "shared_head.norm");
        addf(p, K_MATRIX, s->vocab, H, "model.layers.%lld.%s.weight", l, "embed_tokens");
        addf(p, K_MATRIX, s->vocab, H, "model.layers.%lld.%s.weight", l, "shared_head.head");
    }
    fp4_synth_add(p, "model.norm.weight", K_NORM, 0, H);
    fp4_synth_add(p, "lm_head.weight", K_MATRIX, s->vocab, H);
    (void)err;
    return FP4_OK;
}

fp4_status fp4_synth_ds_config_text(const synth_plan *p, char *buf, size_t size, fp4_error *err) {
    const synth_shape *s = p->sh;
    const synth_ds *d = s->ds;
    json_t *c = json_object(), *rs = json_object();
    const struct {
        const char *k;
        int64_t v;
    } ints[] = {
        {"bos_token_id", s->bos},
        {"eos_token_id", s->eos},
        {"first_k_dense_replace", d->first_dense},
        {"hidden_size", s->hidden},
        {"intermediate_size", s->inter},
        {"kv_lora_rank", d->kv_lora},
        {"max_position_embeddings", s->max_pos},
        {"moe_intermediate_size", s->moe_inter},
        {"moe_layer_freq", 1},
        {"n_group", d->n_group},
        {"n_routed_experts", s->experts},
        {"n_shared_experts", d->n_shared},
        {"num_attention_heads", s->heads},
        {"num_experts_per_tok", s->used},
        {"num_hidden_layers", s->layers},
        {"num_key_value_heads", s->kv_heads},
        {"num_nextn_predict_layers", d->nextn},
        {"qk_nope_head_dim", d->nope},
        {"qk_rope_head_dim", d->rope},
        {"topk_group", d->topk_group},
        {"v_head_dim", d->v},
        {"vocab_size", s->vocab},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        json_object_set_new(c, ints[i].k, json_integer(ints[i].v));
    json_object_set_new(c, "q_lora_rank", d->q_lora ? json_integer(d->q_lora) : json_null());
    json_object_set_new(c, "architectures", json_pack("[s]", p->ar->hf_class));
    json_object_set_new(c, "model_type", json_string(p->ar->model_type));
    json_object_set_new(c, "hidden_act", json_string("silu"));
    json_object_set_new(c, "scoring_func", json_string("sigmoid"));
    json_object_set_new(c, "topk_method", json_string("noaux_tc"));
    json_object_set_new(c, "torch_dtype", json_string("bfloat16"));
    json_object_set_new(c, "attention_bias", json_false());
    json_object_set_new(c, "norm_topk_prob", json_true());
    json_object_set_new(c, "tie_word_embeddings", json_false());
    json_object_set_new(c, "rms_norm_eps", json_real(s->rms_eps));
    json_object_set_new(c, "rope_theta", json_real(s->rope_theta));
    json_object_set_new(c, "routed_scaling_factor", json_real(d->routed_scaling));
    json_object_set_new(rs, "type", json_string("yarn"));
    json_object_set_new(rs, "factor", json_real(d->yarn_factor));
    json_object_set_new(rs, "original_max_position_embeddings", json_integer(d->yarn_orig));
    json_object_set_new(rs, "beta_fast", json_real(d->beta_fast));
    json_object_set_new(rs, "beta_slow", json_real(d->beta_slow));
    json_object_set_new(rs, "mscale", json_real(d->mscale));
    json_object_set_new(rs, "mscale_all_dim", json_real(d->mscale_all_dim));
    json_object_set_new(c, "rope_scaling", rs);
    char *text = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(c);
    if (!text) return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
    const size_t n = strlen(text);
    fp4_status st =
        n < size ? FP4_OK : fp4_fail(err, FP4_ERR_LIMIT, NULL, NULL, "synth.config", "config too long");
    if (!st) memcpy(buf, text, n + 1);
    free(text);
    return st;
}
