/* arch_deepseek.c — DeepSeek-V3's keys of config.json (DeepseekV3ForCausalLM as transformers writes
 * it; DeepSeek-R1, V3-0324 and Kimi-K2 share it): multi-head latent attention, the sigmoid
 * group-limited router with its shared experts, the dense first layers, and YaRN rope scaling.
 * Keys absent from a file take transformers' DeepseekV3Config defaults, except the attention's
 * widths, which a checkpoint always writes. A value the step cannot run is refused naming the key. */
#include "fp4_impl.h"
#include "model/arch_impl.h"
#include <math.h>
#include <string.h>

#define DS_MAX_RANK 16384

static fp4_status ds_fail(fp4_error *err, const char *key, const char *why) {
    return fp4_fail(err, FP4_ERR_FORMAT, NULL, NULL, "arch.deepseek", "config.json: %s %s", key, why);
}

/* an integer key in [lo, hi]; absent: *v keeps its default unless required */
static fp4_status ds_int(json_t *cfg, const char *key, int64_t *v, int64_t lo, int64_t hi, int required,
                         fp4_error *err) {
    int r = fp4_arch_js_int(cfg, key, v);
    if (r < 0) return ds_fail(err, key, "is not an integer");
    if (r == 0 && required) return ds_fail(err, key, "is missing");
    if (*v < lo || *v > hi)
        return fp4_fail(err, FP4_ERR_FORMAT, NULL, NULL, "arch.deepseek",
                        "config.json: %s = %lld is outside [%lld, %lld]", key, (long long)*v, (long long)lo,
                        (long long)hi);
    return FP4_OK;
}

static fp4_status ds_str(json_t *cfg, const char *key, const char *want, fp4_error *err) {
    json_t *j = json_object_get(cfg, key);
    if (!j || json_is_null(j) || (json_is_string(j) && !strcmp(json_string_value(j), want))) return FP4_OK;
    return fp4_fail(err, FP4_ERR_UNSUPPORTED, NULL, NULL, "arch.deepseek",
                    "config.json: %s = %s is not supported (%s only)", key,
                    json_is_string(j) ? json_string_value(j) : "a non-string", want);
}

static fp4_status ds_attention(json_t *cfg, fp4_arch *a, fp4_error *err) {
    fp4_status st;
    json_t *ql = json_object_get(cfg, "q_lora_rank");
    if (!ql) return ds_fail(err, "q_lora_rank", "is missing (null for a plain q projection)");
    a->q_lora_rank = 0;
    if (!json_is_null(ql) && (st = ds_int(cfg, "q_lora_rank", &a->q_lora_rank, 1, DS_MAX_RANK, 1, err)))
        return st;
    if ((st = ds_int(cfg, "kv_lora_rank", &a->kv_lora_rank, 1, DS_MAX_RANK, 1, err)) ||
        (st = ds_int(cfg, "qk_nope_head_dim", &a->qk_nope_dim, 1, FP4_ARCH_MAX_HEAD_DIM, 1, err)) ||
        (st = ds_int(cfg, "qk_rope_head_dim", &a->qk_rope_dim, 2, FP4_ARCH_MAX_HEAD_DIM, 1, err)) ||
        (st = ds_int(cfg, "v_head_dim", &a->v_head_dim, 1, FP4_ARCH_MAX_HEAD_DIM, 1, err)))
        return st;
    if (a->qk_rope_dim % 2) return ds_fail(err, "qk_rope_head_dim", "is odd");
    a->head_dim = a->qk_nope_dim + a->qk_rope_dim;
    a->n_kv_heads = a->n_heads; /* every head has its own key and value, expanded from the latent */
    json_t *ri = json_object_get(cfg, "rope_interleave");
    if (ri && !json_is_boolean(ri)) return ds_fail(err, "rope_interleave", "is not a boolean");
    a->rope_interleave = !ri || json_is_true(ri); /* DeepseekV3Config's default: true */
    json_t *ab = json_object_get(cfg, "attention_bias");
    if (json_is_true(ab))
        return fp4_fail(err, FP4_ERR_UNSUPPORTED, NULL, NULL, "arch.feature",
                        "config.json: attention_bias = true is not supported for deepseek_v3");
    return FP4_OK;
}

static fp4_status ds_moe(json_t *cfg, fp4_arch *a, fp4_error *err) {
    fp4_status st;
    int64_t first_dense = 3, freq = 1, nextn = 0;
    a->moe_n_group = 8, a->moe_topk_group = 4, a->n_shared_experts = 1;
    if ((st = ds_int(cfg, "n_routed_experts", &a->n_experts, 1, 4096, 1, err)) ||
        (st = ds_int(cfg, "num_experts_per_tok", &a->n_experts_used, 1, a->n_experts, 1, err)) ||
        (st = ds_int(cfg, "moe_intermediate_size", &a->moe_ffn, 1, 1 << 22, 1, err)) ||
        (st = ds_int(cfg, "n_group", &a->moe_n_group, 1, a->n_experts, 0, err)) ||
        (st = ds_int(cfg, "topk_group", &a->moe_topk_group, 1, a->moe_n_group, 0, err)) ||
        (st = ds_int(cfg, "n_shared_experts", &a->n_shared_experts, 0, 64, 0, err)) ||
        (st = ds_int(cfg, "first_k_dense_replace", &first_dense, 0, a->n_layers, 0, err)) ||
        (st = ds_int(cfg, "moe_layer_freq", &freq, 1, 1, 0, err)) ||
        (st = ds_int(cfg, "num_nextn_predict_layers", &nextn, 0, 16, 0, err)) ||
        (st = ds_str(cfg, "scoring_func", "sigmoid", err)) ||
        (st = ds_str(cfg, "topk_method", "noaux_tc", err)))
        return st;
    if (a->n_experts % a->moe_n_group) return ds_fail(err, "n_group", "does not divide n_routed_experts");
    if (a->n_experts_used > a->moe_topk_group * (a->n_experts / a->moe_n_group))
        return ds_fail(err, "num_experts_per_tok", "is more than the experts of topk_group groups");
    a->n_nextn = (int32_t)nextn;
    a->routed_scaling = 2.5;
    json_t *rs = json_object_get(cfg, "routed_scaling_factor");
    if (rs && !json_is_null(rs)) {
        if (!json_is_number(rs) || !(json_number_value(rs) > 0) || !isfinite(json_number_value(rs)))
            return ds_fail(err, "routed_scaling_factor", "is not a positive number");
        a->routed_scaling = json_number_value(rs);
    }
    json_t *nt = json_object_get(cfg, "norm_topk_prob");
    if (nt && !json_is_boolean(nt)) return ds_fail(err, "norm_topk_prob", "is not a boolean");
    a->moe_norm_topk = !nt || json_is_true(nt);
    a->moe_routing = FP4_MOE_SIGMOID_GROUP;
    for (int64_t L = 0; L < first_dense && L < FP4_ARCH_MAX_LAYERS; L++)
        a->moe_dense[L / 64] |= 1ull << (L % 64);
    return FP4_OK;
}

fp4_status fp4_arch_hf_deepseek(json_t *cfg, fp4_arch *a, fp4_error *err) {
    fp4_status st;
    if ((st = ds_attention(cfg, a, err)) || (st = ds_moe(cfg, a, err))) return st;
    if (a->rope_scaling != FP4_ROPE_NONE && a->rope_scaling != FP4_ROPE_YARN)
        return fp4_fail(err, FP4_ERR_UNSUPPORTED, NULL, NULL, "arch.rope_type",
                        "config.json: deepseek_v3 runs default or yarn rope scaling");
    return FP4_OK;
}

/* transformers' yarn: factor, original_max_position_embeddings, beta_fast (32), beta_slow (1),
 * mscale and mscale_all_dim (0: absent). attention_factor and truncate = false are refused (no
 * DeepSeek checkpoint writes them). */
fp4_status fp4_arch_hf_yarn(json_t *sc, const char *where, fp4_arch *a, fp4_error *err) {
    static const struct {
        const char *key;
        size_t off;
        double dflt;
    } keys[] = {
        {"beta_fast", offsetof(fp4_arch, rope_beta_fast), 32.0},
        {"beta_slow", offsetof(fp4_arch, rope_beta_slow), 1.0},
        {"mscale", offsetof(fp4_arch, rope_mscale), 0.0},
        {"mscale_all_dim", offsetof(fp4_arch, rope_mscale_all_dim), 0.0},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        double *v = (double *)((char *)a + keys[i].off);
        *v = keys[i].dflt;
        int r = fp4_arch_js_num(sc, keys[i].key, v);
        if (r < 0 || !isfinite(*v) || *v < 0)
            return fp4_fail(err, FP4_ERR_FORMAT, NULL, NULL, "arch.rope_yarn",
                            "config.json: %s.%s is not a non-negative number", where, keys[i].key);
        if (r == 1 && *v == 0 && i < 2) *v = keys[i].dflt; /* transformers: `or 32`, `or 1` */
    }
    if (fp4_arch_js_int(sc, "original_max_position_embeddings", &a->rope_orig_ctx) != 1 ||
        a->rope_orig_ctx < 1)
        return fp4_fail(
            err, FP4_ERR_FORMAT, NULL, NULL, "arch.rope_yarn",
            "config.json: %s.original_max_position_embeddings is missing or not a positive integer", where);
    json_t *af = json_object_get(sc, "attention_factor"), *tr = json_object_get(sc, "truncate");
    if ((af && !json_is_null(af)) || (tr && !json_is_true(tr)))
        return fp4_fail(err, FP4_ERR_UNSUPPORTED, NULL, NULL, "arch.rope_yarn",
                        "config.json: %s.%s is not supported", where, af ? "attention_factor" : "truncate");
    if (!(a->rope_beta_fast > a->rope_beta_slow))
        return fp4_fail(err, FP4_ERR_FORMAT, NULL, NULL, "arch.rope_yarn",
                        "config.json: %s: beta_fast must be above beta_slow", where);
    return FP4_OK;
}

/* ---- llama.cpp's deepseek2 GGUF keys ---- */

static fp4_status gg_int(const fp4_gguf *g, const char *arch, const char *sfx, int64_t *v, int64_t lo,
                         int64_t hi, int required, fp4_error *err) {
    char key[128];
    uint64_t u;
    snprintf(key, sizeof key, "%s.%s", arch, sfx);
    int r = fp4_arch_gg_u64(g, key, &u);
    if (r < 0 || (r == 0 && required) || (r == 1 && (u < (uint64_t)lo || u > (uint64_t)hi)))
        return fp4_fail(err, r ? FP4_ERR_FORMAT : FP4_ERR_NOT_FOUND, NULL, NULL, "arch.deepseek",
                        "GGUF: %s %s [%lld, %lld]", key,
                        r == 0 ? "is missing, wanted in" : "is not an integer in", (long long)lo,
                        (long long)hi);
    if (r == 1) *v = (int64_t)u;
    return FP4_OK;
}

static fp4_status gg_fail(fp4_error *err, const char *key, const char *why) {
    return fp4_fail(err, FP4_ERR_FORMAT, NULL, NULL, "arch.deepseek", "GGUF: %s %s", key, why);
}

static int gg_bool(const fp4_gguf *g, const char *key, int dflt) {
    int64_t i = fp4_gguf_key_index(g, key);
    int v;
    return i >= 0 && fp4_gguf_kv_type(g, i) == FP4_GGUF_BOOL && !fp4_gguf_get_bool(g, i, &v) ? v : dflt;
}

/* llama.cpp writes the MLA widths twice in newer files: key_length / value_length of the latent
 * (kv_lora_rank + rope, kv_lora_rank) and key_length_mla / value_length_mla of a head. Its rope is
 * ggml's NORM type over adjacent pairs (transformers' rope_interleave); yarn's mscale_all_dim is
 * yarn_log_multiplier / 0.1, and llama.cpp folds no separate cos/sin factor (mscale = mscale_all_dim).
 * Only sigmoid gating (expert_gating_func 2) runs. */
fp4_status fp4_arch_gguf_deepseek(const fp4_gguf *g, const char *arch, fp4_arch *a, fp4_error *err) {
    fp4_status st;
    int64_t kl = 0, vl = 0, klm = 0, vlm = 0, gating = 0, first_dense = 0, nextn = 0;
    char key[128], stype[32] = "none";
    a->moe_n_group = 1, a->moe_topk_group = 1;
    if ((st = gg_int(g, arch, "attention.q_lora_rank", &a->q_lora_rank, 0, DS_MAX_RANK, 0, err)) ||
        (st = gg_int(g, arch, "attention.kv_lora_rank", &a->kv_lora_rank, 1, DS_MAX_RANK, 1, err)) ||
        (st = gg_int(g, arch, "attention.key_length", &kl, 2, 1 << 16, 1, err)) ||
        (st = gg_int(g, arch, "attention.value_length", &vl, 1, 1 << 16, 1, err)) ||
        (st = gg_int(g, arch, "attention.key_length_mla", &klm, 2, FP4_ARCH_MAX_HEAD_DIM, 0, err)) ||
        (st = gg_int(g, arch, "attention.value_length_mla", &vlm, 1, FP4_ARCH_MAX_HEAD_DIM, 0, err)) ||
        (st = gg_int(g, arch, "rope.dimension_count", &a->qk_rope_dim, 2, FP4_ARCH_MAX_HEAD_DIM, 1, err)) ||
        (st = gg_int(g, arch, "leading_dense_block_count", &first_dense, 0, a->n_layers, 0, err)) ||
        (st = gg_int(g, arch, "expert_count", &a->n_experts, 1, 4096, 1, err)) ||
        (st = gg_int(g, arch, "expert_used_count", &a->n_experts_used, 1, a->n_experts, 1, err)) ||
        (st = gg_int(g, arch, "expert_feed_forward_length", &a->moe_ffn, 1, 1 << 22, 1, err)) ||
        (st = gg_int(g, arch, "expert_shared_count", &a->n_shared_experts, 0, 64, 0, err)) ||
        (st = gg_int(g, arch, "expert_gating_func", &gating, 0, 3, 0, err)) ||
        (st = gg_int(g, arch, "expert_group_count", &a->moe_n_group, 1, a->n_experts, 0, err)) ||
        (st = gg_int(g, arch, "expert_group_used_count", &a->moe_topk_group, 1, a->moe_n_group, 0, err)) ||
        (st = gg_int(g, arch, "nextn_predict_layers", &nextn, 0, 16, 0, err)))
        return st;
    if (gating != 2)
        return fp4_fail(err, FP4_ERR_UNSUPPORTED, NULL, NULL, "arch.deepseek",
                        "GGUF: %s.expert_gating_func = %lld: only sigmoid gating (2, DeepSeek-V3) runs", arch,
                        (long long)gating);
    a->head_dim = klm ? klm : kl;
    a->v_head_dim = vlm ? vlm : vl;
    a->qk_nope_dim = a->head_dim - a->qk_rope_dim;
    if (a->qk_nope_dim < 1 || a->qk_rope_dim % 2 || (klm && kl != a->kv_lora_rank + a->qk_rope_dim))
        return fp4_fail(err, FP4_ERR_SHAPE, NULL, NULL, "arch.deepseek",
                        "GGUF: %s key lengths %lld / %lld do not fit kv_lora_rank %lld and rope %lld", arch,
                        (long long)kl, (long long)klm, (long long)a->kv_lora_rank, (long long)a->qk_rope_dim);
    if (a->n_experts % a->moe_n_group ||
        a->n_experts_used > a->moe_topk_group * (a->n_experts / a->moe_n_group))
        return fp4_fail(err, FP4_ERR_FORMAT, NULL, NULL, "arch.deepseek",
                        "GGUF: %s expert groups %lld / %lld do not hold %lld of %lld experts", arch,
                        (long long)a->moe_n_group, (long long)a->moe_topk_group, (long long)a->n_experts_used,
                        (long long)a->n_experts);
    a->n_kv_heads = a->n_heads, a->rope_interleave = 1, a->n_nextn = (int32_t)nextn;
    snprintf(key, sizeof key, "%s.expert_weights_scale", arch);
    a->routed_scaling = 1.0;
    if (fp4_arch_gg_f64(g, key, &a->routed_scaling) < 0 || !(a->routed_scaling > 0))
        return gg_fail(err, key, "is not a positive number");
    snprintf(key, sizeof key, "%s.expert_weights_norm", arch);
    a->moe_norm_topk = gg_bool(g, key, 0);
    a->moe_routing = FP4_MOE_SIGMOID_GROUP;
    for (int64_t L = 0; L < first_dense && L < FP4_ARCH_MAX_LAYERS; L++)
        a->moe_dense[L / 64] |= 1ull << (L % 64);
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    fp4_arch_gg_str(g, key, stype, sizeof stype);
    if (strcmp(stype, "yarn")) return FP4_OK;
    double mul = 0;
    a->rope_scaling = FP4_ROPE_YARN, a->rope_beta_fast = 32.0, a->rope_beta_slow = 1.0;
    snprintf(key, sizeof key, "%s.rope.scaling.factor", arch);
    if (fp4_arch_gg_f64(g, key, &a->rope_factor) != 1) return gg_fail(err, key, "is missing or not a float");
    snprintf(key, sizeof key, "%s.rope.scaling.original_context_length", arch);
    uint64_t oc;
    if (fp4_arch_gg_u64(g, key, &oc) != 1 || !oc || oc > INT32_MAX) return gg_fail(err, key, "is missing");
    a->rope_orig_ctx = (int64_t)oc;
    snprintf(key, sizeof key, "%s.rope.scaling.yarn_log_multiplier", arch);
    if (fp4_arch_gg_f64(g, key, &mul) < 0 || mul < 0) return gg_fail(err, key, "is not a non-negative float");
    /* the file holds 0.1 * mscale_all_dim as f32: the config's decimal comes back to 6 digits */
    a->rope_mscale_all_dim = a->rope_mscale = round(mul / 0.1 * 1e6) / 1e6;
    return FP4_OK;
}
