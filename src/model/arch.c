/* arch.c — fp4_arch from a Hugging Face config.json (transformers 4 and 5 spellings) or from GGUF
 * metadata (llama.cpp's keys). Everything the step does not implement is refused here, before any
 * allocation of the engine, naming the key and the value (err->rule "arch.*"). */
#include "model/arch_impl.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

#define ARCH_MAX_HIDDEN (1 << 20)
#define ARCH_MAX_VOCAB (1 << 24)
#define ARCH_MAX_CTX (1 << 24)

static const struct family_row {
    const char *hf_model_type, *gguf_arch;
    fp4_arch_family family;
    int qkv_bias, qk_norm;
} families[] = {
    {"llama", "llama", FP4_ARCH_LLAMA, 0, 0},
    {"mistral", NULL, FP4_ARCH_MISTRAL, 0, 0},
    {"qwen2", "qwen2", FP4_ARCH_QWEN2, 1, 0},
    {"qwen3", "qwen3", FP4_ARCH_QWEN3, 0, 1},
    {"qwen3_moe", "qwen3moe", FP4_ARCH_QWEN3_MOE, 0, 1},
    {"mixtral", NULL, FP4_ARCH_MIXTRAL, 0, 0},        /* GGUF: "llama" with <arch>.expert_count (below) */
    {"gemma3_text", "gemma3", FP4_ARCH_GEMMA3, 0, 1}, /* "gemma3" (multimodal): its text_config */
    {"deepseek_v3", "deepseek2", FP4_ARCH_DEEPSEEK_V3, 0, 0}, /* arch_deepseek.c */
};
#define ARCH_MAX_EXPERTS 4096

const char *fp4_arch_family_name(fp4_arch_family f) {
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
        if (families[i].family == f) return families[i].hf_model_type;
    return "?";
}

static fp4_status refuse(fp4_error *err, const char *rule, const char *fmt, const char *key,
                         const char *val) {
    return fp4_fail(err, FP4_ERR_UNSUPPORTED, NULL, NULL, rule, fmt, key, val);
}

/* Shape sanity shared by both sources. */
static fp4_status arch_check(fp4_arch *a, fp4_error *err) {
    struct {
        const char *what;
        int64_t v, lo, hi;
    } lim[] = {
        {"layers", a->n_layers, 1, FP4_ARCH_MAX_LAYERS},
        {"hidden", a->hidden, 1, ARCH_MAX_HIDDEN},
        {"heads", a->n_heads, 1, 4096},
        {"kv heads", a->n_kv_heads, 1, 4096},
        {"head_dim", a->head_dim, 2, FP4_ARCH_MAX_HEAD_DIM},
        {"ffn", a->ffn, 1, 4 * ARCH_MAX_HIDDEN},
        {"vocab", a->vocab, 1, ARCH_MAX_VOCAB},
        {"context", a->n_ctx_train, 1, ARCH_MAX_CTX},
    };
    for (size_t i = 0; i < sizeof lim / sizeof lim[0]; i++)
        if (lim[i].v < lim[i].lo || lim[i].v > lim[i].hi)
            return fp4_fail(err, FP4_ERR_LIMIT, NULL, NULL, "arch.limit", "%s = %lld is outside [%lld, %lld]",
                            lim[i].what, (long long)lim[i].v, (long long)lim[i].lo, (long long)lim[i].hi);
    if (a->n_experts && (a->moe_ffn < 1 || a->moe_ffn > 4 * ARCH_MAX_HIDDEN))
        return fp4_fail(err, FP4_ERR_LIMIT, NULL, NULL, "arch.moe", "expert ffn = %lld is outside [1, %lld]",
                        (long long)a->moe_ffn, (long long)(4 * ARCH_MAX_HIDDEN));
    if (a->head_dim % 2)
        return fp4_fail(err, FP4_ERR_SHAPE, NULL, NULL, "arch.head_dim", "head_dim = %lld is odd",
                        (long long)a->head_dim);
    if (a->n_heads % a->n_kv_heads)
        return fp4_fail(err, FP4_ERR_SHAPE, NULL, NULL, "arch.heads",
                        "num_attention_heads = %lld is not a multiple of num_key_value_heads = %lld",
                        (long long)a->n_heads, (long long)a->n_kv_heads);
    if (!(a->rms_eps > 0.0f) || !isfinite(a->rms_eps))
        return fp4_fail(err, FP4_ERR_FORMAT, NULL, NULL, "arch.rms_eps",
                        "rms_norm_eps = %g is not a positive number", (double)a->rms_eps);
    if (!(a->rope_theta > 0.0) || !isfinite(a->rope_theta))
        return fp4_fail(err, FP4_ERR_FORMAT, NULL, NULL, "arch.rope_theta",
                        "rope_theta = %g is not a positive number", a->rope_theta);
    if (a->rope_scaling != FP4_ROPE_NONE && (!(a->rope_factor > 0.0) || !isfinite(a->rope_factor)))
        return fp4_fail(err, FP4_ERR_FORMAT, NULL, NULL, "arch.rope_factor",
                        "rope scaling factor = %g is not a positive number", a->rope_factor);
    if (a->sliding_window < 0 || a->sliding_window > ARCH_MAX_CTX)
        return fp4_fail(err, FP4_ERR_LIMIT, NULL, NULL, "arch.sliding_window",
                        "sliding_window = %lld is outside [0, %d]", (long long)a->sliding_window,
                        ARCH_MAX_CTX);
    if (a->rope_scaling == FP4_ROPE_LLAMA3 && (!(a->rope_high_freq_factor > a->rope_low_freq_factor) ||
                                               !(a->rope_low_freq_factor > 0) || a->rope_orig_ctx <= 0))
        return fp4_fail(err, FP4_ERR_FORMAT, NULL, NULL, "arch.rope_llama3",
                        "llama3 rope scaling needs 0 < low_freq_factor < high_freq_factor and "
                        "original_max_position_embeddings > 0");
    return FP4_OK;
}

/* ---------------------------------------------------------------- HF config.json */

static int js_int(json_t *o, const char *k, int64_t *v) {
    json_t *j = json_object_get(o, k);
    if (!j || json_is_null(j)) return 0;
    if (json_is_integer(j))
        *v = json_integer_value(j);
    else if (json_is_real(j) && json_real_value(j) == floor(json_real_value(j)) &&
             fabs(json_real_value(j)) < 9e15)
        *v = (int64_t)json_real_value(j);
    else
        return -1;
    return 1;
}
static int js_num(json_t *o, const char *k, double *v) {
    json_t *j = json_object_get(o, k);
    if (!j || json_is_null(j)) return 0;
    if (!json_is_number(j)) return -1;
    *v = json_number_value(j);
    return 1;
}
int fp4_arch_js_int(json_t *o, const char *k, int64_t *v) {
    return js_int(o, k, v);
}
int fp4_arch_js_num(json_t *o, const char *k, double *v) {
    return js_num(o, k, v);
}
/* what a JSON value is, for messages ("a string") */
static const char *fp4_json_kind(const json_t *j) {
    return json_is_string(j)    ? "a string"
           : json_is_real(j)    ? "a real number"
           : json_is_integer(j) ? "an integer"
           : json_is_boolean(j) ? "a boolean"
           : json_is_array(j)   ? "a list"
           : json_is_object(j)  ? "an object"
                                : "null";
}
/* value of a key as short text for messages */
static void js_text(json_t *j, char *buf, size_t n) {
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    snprintf(buf, n, "%s", s ? s : "null");
    free(s);
}

static fp4_status need_int(json_t *o, const char *k, int64_t *v, fp4_error *err) {
    int r = js_int(o, k, v);
    if (r == 1) return FP4_OK;
    return fp4_fail(err, r ? FP4_ERR_FORMAT : FP4_ERR_NOT_FOUND, NULL, NULL, "arch.key", "config.json: %s %s",
                    k, r ? "is not an integer" : "is missing");
}

/* rope: transformers 5 rope_parameters, else transformers 4 rope_theta + rope_scaling */
static fp4_status hf_rope(json_t *cfg, fp4_arch *a, fp4_error *err) {
    char txt[128];
    json_t *rp = json_object_get(cfg, "rope_parameters");
    json_t *sc = rp && !json_is_null(rp) ? rp : json_object_get(cfg, "rope_scaling");
    const char *where = rp && !json_is_null(rp) ? "rope_parameters" : "rope_scaling";
    a->rope_theta = 10000.0;
    if (js_num(cfg, "rope_theta", &a->rope_theta) < 0)
        return refuse(err, "arch.rope_theta", "config.json: %s = %s is not a number", "rope_theta", "?");
    if (rp && !json_is_null(rp) && js_num(rp, "rope_theta", &a->rope_theta) < 0)
        return refuse(err, "arch.rope_theta", "config.json: %s = %s is not a number",
                      "rope_parameters.rope_theta", "?");
    a->rope_scaling = FP4_ROPE_NONE;
    if (!sc || json_is_null(sc)) return FP4_OK;
    if (!json_is_object(sc)) {
        js_text(sc, txt, sizeof txt);
        return refuse(err, "arch.rope_scaling", "config.json: %s = %s is not an object", where, txt);
    }
    json_t *ty = json_object_get(sc, "rope_type");
    if (!ty) ty = json_object_get(sc, "type");
    const char *t = json_is_string(ty) ? json_string_value(ty) : NULL;
    if (!t) {
        js_text(ty, txt, sizeof txt);
        return refuse(err, "arch.rope_type", "config.json: %s.rope_type = %s is not a known rope type", where,
                      txt);
    }
    double partial = 1.0;
    if (js_num(sc, "partial_rotary_factor", &partial) < 0 || partial != 1.0)
        return refuse(err, "arch.rope_partial",
                      "config.json: %s = %s (partial rotary embeddings are not supported)",
                      "partial_rotary_factor", "!= 1");
    if (!strcmp(t, "default")) return FP4_OK;
    if (!strcmp(t, "linear"))
        a->rope_scaling = FP4_ROPE_LINEAR;
    else if (!strcmp(t, "llama3"))
        a->rope_scaling = FP4_ROPE_LLAMA3;
    else if (!strcmp(t, "yarn") && json_is_string(json_object_get(cfg, "model_type")) &&
             !strcmp(json_string_value(json_object_get(cfg, "model_type")), "deepseek_v3"))
        a->rope_scaling = FP4_ROPE_YARN;
    else
        return refuse(err, "arch.rope_type",
                      "config.json: rope_type = %s (%s) is not supported: default, linear or llama3", t,
                      where);
    if (js_num(sc, "factor", &a->rope_factor) != 1)
        return refuse(err, "arch.rope_factor", "config.json: %s.%s is missing or not a number", where,
                      "factor");
    if (a->rope_scaling == FP4_ROPE_YARN) return fp4_arch_hf_yarn(sc, where, a, err);
    if (a->rope_scaling == FP4_ROPE_LLAMA3) {
        if (js_num(sc, "low_freq_factor", &a->rope_low_freq_factor) != 1 ||
            js_num(sc, "high_freq_factor", &a->rope_high_freq_factor) != 1 ||
            js_int(sc, "original_max_position_embeddings", &a->rope_orig_ctx) != 1)
            return refuse(err, "arch.rope_llama3", "config.json: %s: llama3 needs %s", where,
                          "factor, low_freq_factor, high_freq_factor, original_max_position_embeddings");
    }
    return FP4_OK;
}

/* keys whose presence (with a value that turns them on) names a feature the step does not have */
static fp4_status hf_refusals(json_t *cfg, const struct family_row *f, int64_t ctx, fp4_error *err) {
    char txt[128];
    static const char *const moe_keys[] = {"num_experts", "num_local_experts", "n_routed_experts",
                                           "num_experts_per_tok", "moe_intermediate_size"};
    const int ds = f->family == FP4_ARCH_DEEPSEEK_V3;
    const int moe = f->family == FP4_ARCH_QWEN3_MOE || f->family == FP4_ARCH_MIXTRAL || ds;
    for (size_t i = 0; !moe && i < sizeof moe_keys / sizeof moe_keys[0]; i++) {
        json_t *j = json_object_get(cfg, moe_keys[i]);
        if (j && !json_is_null(j) && !(json_is_integer(j) && json_integer_value(j) == 0)) {
            js_text(j, txt, sizeof txt);
            return refuse(err, "arch.moe", "config.json: %s = %s (mixture of experts is not supported)",
                          moe_keys[i], txt);
        }
    }
    static const char *const shared_keys[] = {"shared_expert_intermediate_size", "n_shared_experts",
                                              "num_shared_experts"};
    for (size_t i = 0; moe && !ds && i < sizeof shared_keys / sizeof shared_keys[0]; i++) {
        json_t *j = json_object_get(cfg, shared_keys[i]);
        if (j && !json_is_null(j) && !(json_is_integer(j) && json_integer_value(j) == 0)) {
            js_text(j, txt, sizeof txt);
            return refuse(err, "arch.moe", "config.json: %s = %s (shared experts are not supported)",
                          shared_keys[i], txt);
        }
    }
    if (f->family == FP4_ARCH_GEMMA3) return FP4_OK; /* its window, layer types, act: arch_gemma3.c */
    json_t *usw = json_object_get(cfg, "use_sliding_window"), *sw = json_object_get(cfg, "sliding_window");
    if (json_is_true(usw))
        return refuse(err, "arch.sliding_window",
                      "config.json: %s = %s (sliding-window attention is not supported)",
                      "use_sliding_window", "true");
    if (!usw && sw && !json_is_null(sw) && !(json_is_integer(sw) && json_integer_value(sw) >= ctx)) {
        js_text(sw, txt, sizeof txt);
        return refuse(err, "arch.sliding_window",
                      "config.json: %s = %s (sliding-window attention is not supported)", "sliding_window",
                      txt);
    }
    json_t *lt = json_object_get(cfg, "layer_types");
    if (json_is_array(lt)) {
        size_t i;
        json_t *v;
        json_array_foreach(lt, i,
                           v) if (!json_is_string(v) || strcmp(json_string_value(v), "full_attention")) {
            js_text(v, txt, sizeof txt);
            return refuse(err, "arch.layer_types",
                          "config.json: %s = %s (only full_attention layers are supported)", "layer_types[]",
                          txt);
        }
    }
    static const char *const on_keys[] = {"alibi", "attention_bias", "mlp_bias", "use_alibi"};
    for (size_t i = 0; i < sizeof on_keys / sizeof on_keys[0]; i++) {
        json_t *j = json_object_get(cfg, on_keys[i]);
        if (json_is_true(j) && !(f->qkv_bias && !strcmp(on_keys[i], "attention_bias")) &&
            !(ds && !strcmp(on_keys[i], "attention_bias"))) /* arch_deepseek.c names it */
            return refuse(err, "arch.feature", "config.json: %s = %s is not supported", on_keys[i], "true");
    }
    json_t *pe = json_object_get(cfg, "position_embedding_type");
    if (pe && !json_is_null(pe) && !(json_is_string(pe) && !strcmp(json_string_value(pe), "rope"))) {
        js_text(pe, txt, sizeof txt);
        return refuse(err, "arch.alibi", "config.json: %s = %s is not supported (rope only)",
                      "position_embedding_type", txt);
    }
    static const char *const null_keys[] = {"attn_logit_softcapping", "final_logit_softcapping",
                                            "logits_scaling"};
    for (size_t i = 0; i < sizeof null_keys / sizeof null_keys[0]; i++) {
        json_t *j = json_object_get(cfg, null_keys[i]);
        if (j && !json_is_null(j)) {
            js_text(j, txt, sizeof txt);
            return refuse(err, "arch.feature", "config.json: %s = %s is not supported", null_keys[i], txt);
        }
    }
    json_t *act = json_object_get(cfg, "hidden_act");
    if (act && !(json_is_string(act) && !strcmp(json_string_value(act), "silu"))) {
        js_text(act, txt, sizeof txt);
        return refuse(err, "arch.hidden_act", "config.json: %s = %s (only silu is supported)", "hidden_act",
                      txt);
    }
    double prf = 1.0;
    if (js_num(cfg, "partial_rotary_factor", &prf) < 0 || prf != 1.0)
        return refuse(err, "arch.rope_partial",
                      "config.json: %s = %s (partial rotary embeddings are not supported)",
                      "partial_rotary_factor", "!= 1");
    return FP4_OK;
}

static fp4_status moe_fail(fp4_error *err, const char *key, int64_t v, const char *why) {
    return fp4_fail(err, FP4_ERR_FORMAT, NULL, NULL, "arch.moe", "%s = %lld: %s", key, (long long)v, why);
}

/* The experts' counts shared by both sources: a config that contradicts itself is refused here,
 * naming the key, before any tensor is looked at. */
static fp4_status moe_check(const fp4_arch *a, const char *k_experts, const char *k_used, fp4_error *err) {
    if (a->n_experts < 1) return moe_fail(err, k_experts, a->n_experts, "a mixture of experts needs experts");
    if (a->n_experts > ARCH_MAX_EXPERTS)
        return moe_fail(err, k_experts, a->n_experts, "above the limit of 4096 experts");
    if (a->n_experts_used < 1 || a->n_experts_used > a->n_experts)
        return moe_fail(err, k_used, a->n_experts_used,
                        "the experts per token must be in [1, the expert count]");
    return FP4_OK;
}

/* config.json's experts (qwen3_moe, mixtral). transformers 5 writes Qwen3-MoE's num_experts as
 * num_local_experts; both present must agree. */
static fp4_status hf_moe(json_t *cfg, fp4_arch *a, fp4_error *err) {
    fp4_status st;
    int64_t ne = -1, nl = -1;
    int r1 = js_int(cfg, "num_experts", &ne), r2 = js_int(cfg, "num_local_experts", &nl);
    if (r1 < 0 || r2 < 0)
        return fp4_fail(err, FP4_ERR_FORMAT, NULL, NULL, "arch.moe", "config.json: %s is not an integer",
                        r1 < 0 ? "num_experts" : "num_local_experts");
    if (r1 == 1 && r2 == 1 && ne != nl)
        return fp4_fail(err, FP4_ERR_FORMAT, NULL, NULL, "arch.moe",
                        "config.json: num_experts = %lld and num_local_experts = %lld disagree",
                        (long long)ne, (long long)nl);
    if (r1 != 1 && r2 != 1)
        return fp4_fail(err, FP4_ERR_NOT_FOUND, NULL, NULL, "arch.moe",
                        "config.json: num_experts (or num_local_experts) is missing");
    a->n_experts = r1 == 1 ? ne : nl;
    if ((st = need_int(cfg, "num_experts_per_tok", &a->n_experts_used, err))) return st;
    if ((st = moe_check(a, r1 == 1 ? "num_experts" : "num_local_experts", "num_experts_per_tok", err)))
        return st;
    if (a->family == FP4_ARCH_MIXTRAL) {
        a->moe_routing = FP4_MOE_TOPK_SOFTMAX;
        a->moe_ffn = a->ffn;
        return FP4_OK;
    }
    a->moe_routing = FP4_MOE_SOFTMAX_TOPK;
    if ((st = need_int(cfg, "moe_intermediate_size", &a->moe_ffn, err))) return st;
    json_t *nt = json_object_get(cfg, "norm_topk_prob");
    if (nt && !json_is_boolean(nt))
        return fp4_fail(err, FP4_ERR_FORMAT, NULL, NULL, "arch.moe",
                        "config.json: norm_topk_prob is not a boolean");
    a->moe_norm_topk = json_is_true(nt);
    int64_t step = 1;
    if (js_int(cfg, "decoder_sparse_step", &step) < 0 || step < 1 || step > FP4_ARCH_MAX_LAYERS)
        return moe_fail(err, "decoder_sparse_step", step, "not an integer in [1, 1024]");
    for (int64_t L = 0; L < a->n_layers && L < FP4_ARCH_MAX_LAYERS; L++)
        if ((L + 1) % step) a->moe_dense[L / 64] |= 1ull << (L % 64);
    json_t *only = json_object_get(cfg, "mlp_only_layers");
    if (only && !json_is_null(only) && !json_is_array(only))
        return fp4_fail(err, FP4_ERR_FORMAT, NULL, NULL, "arch.moe",
                        "config.json: mlp_only_layers is not a list");
    size_t i;
    json_t *v;
    json_array_foreach(only, i, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= a->n_layers)
            return fp4_fail(err, FP4_ERR_FORMAT, NULL, NULL, "arch.moe",
                            "config.json: mlp_only_layers[%zu] is not a layer index in [0, %lld)", i,
                            (long long)a->n_layers);
        const int64_t L = json_integer_value(v);
        a->moe_dense[L / 64] |= 1ull << (L % 64);
    }
    return FP4_OK;
}

/* a token id key holds an integer, a list of them or null: a string ("1") is a mistake to report, not
 * an absent id */
static fp4_status hf_tokens(json_t *cfg, fp4_arch *a, fp4_error *err) {
    int64_t v;
    int r = js_int(cfg, "bos_token_id", &v);
    if (r < 0)
        return fp4_fail(err, FP4_ERR_FORMAT, NULL, "bos_token_id", "arch.bos_token_id",
                        "config.json: bos_token_id is %s, not an integer",
                        fp4_json_kind(json_object_get(cfg, "bos_token_id")));
    a->bos = r == 1 && v >= 0 && v < INT32_MAX ? (int32_t)v : -1;
    a->n_eos = 0;
    json_t *e = json_object_get(cfg, "eos_token_id");
    if (json_is_integer(e) && json_integer_value(e) >= 0 && json_integer_value(e) < INT32_MAX)
        a->eos[a->n_eos++] = (int32_t)json_integer_value(e);
    else if (json_is_array(e)) {
        size_t i;
        json_t *x;
        json_array_foreach(e, i, x) {
            if (!json_is_integer(x))
                return fp4_fail(err, FP4_ERR_FORMAT, NULL, "eos_token_id", "arch.eos_token_id",
                                "config.json: eos_token_id[%zu] is %s, not an integer", i, fp4_json_kind(x));
            json_int_t xv = json_integer_value(x);
            if (a->n_eos < FP4_ARCH_MAX_EOS && xv >= 0 && xv < INT32_MAX) a->eos[a->n_eos++] = (int32_t)xv;
        }
    } else if (e && !json_is_null(e) && !json_is_integer(e))
        return fp4_fail(err, FP4_ERR_FORMAT, NULL, "eos_token_id", "arch.eos_token_id",
                        "config.json: eos_token_id is %s, not an integer or a list of integers",
                        fp4_json_kind(e));
    return FP4_OK;
}

fp4_status fp4_arch_from_hf_config(const char *config_json, fp4_arch *out, fp4_error *err) {
    fp4_error_clear(err);
    if (!config_json || !out) return FP4_ERR_INVALID_ARG;
    memset(out, 0, sizeof *out);
    json_error_t je;
    json_t *cfg = json_loads(config_json, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(cfg)) {
        json_decref(cfg);
        return fp4_fail(err, FP4_ERR_FORMAT, NULL, NULL, "arch.json", "config.json is not a JSON object (%s)",
                        je.text);
    }
    fp4_status st = FP4_OK;
    char txt[128];
    json_t *gc = fp4_arch_gemma3_config(cfg, &st, err); /* Gemma 3: its text model, defaults filled */
    if (st) goto done;
    if (gc) json_decref(cfg), cfg = gc;
    json_t *mt = json_object_get(cfg, "model_type");
    const struct family_row *f = NULL;
    for (size_t i = 0; json_is_string(mt) && i < sizeof families / sizeof families[0]; i++)
        if (!strcmp(json_string_value(mt), families[i].hf_model_type)) f = &families[i];
    if (!f) {
        js_text(mt, txt, sizeof txt);
        st =
            refuse(err, "arch.model_type",
                   "config.json: %s = %s is not supported (llama, mistral, qwen2, qwen3, qwen3_moe, mixtral, "
                   "gemma3, gemma3_text, deepseek_v3)",
                   "model_type", txt);
        goto done;
    }
    fp4_arch *a = out;
    a->family = f->family;
    a->source = FP4_ARCH_FROM_HF;
    a->qkv_bias = f->qkv_bias;
    a->qk_norm = f->qk_norm;
    if ((st = need_int(cfg, "num_hidden_layers", &a->n_layers, err)) ||
        (st = need_int(cfg, "hidden_size", &a->hidden, err)) ||
        (st = need_int(cfg, "num_attention_heads", &a->n_heads, err)) ||
        (st = need_int(cfg, "intermediate_size", &a->ffn, err)) ||
        (st = need_int(cfg, "vocab_size", &a->vocab, err)))
        goto done;
    a->n_kv_heads = a->n_heads;
    if (js_int(cfg, "num_key_value_heads", &a->n_kv_heads) < 0) {
        st = need_int(cfg, "num_key_value_heads", &a->n_kv_heads, err);
        goto done;
    }
    a->head_dim = a->n_heads > 0 ? a->hidden / a->n_heads : 0;
    if (js_int(cfg, "head_dim", &a->head_dim) < 0) {
        st = need_int(cfg, "head_dim", &a->head_dim, err);
        goto done;
    }
    if (a->n_heads > 0 && !json_object_get(cfg, "head_dim") && a->hidden % a->n_heads) {
        st = fp4_fail(err, FP4_ERR_SHAPE, NULL, NULL, "arch.head_dim",
                      "hidden_size %lld is not a multiple of num_attention_heads %lld and head_dim is absent",
                      (long long)a->hidden, (long long)a->n_heads);
        goto done;
    }
    a->n_ctx_train = 2048;
    if (js_int(cfg, "max_position_embeddings", &a->n_ctx_train) < 0) {
        st = need_int(cfg, "max_position_embeddings", &a->n_ctx_train, err);
        goto done;
    }
    double eps = 1e-6;
    if (js_num(cfg, "rms_norm_eps", &eps) < 0) {
        st = fp4_fail(err, FP4_ERR_FORMAT, NULL, NULL, "arch.rms_eps",
                      "config.json: rms_norm_eps is not a number");
        goto done;
    }
    a->rms_eps = (float)eps;
    json_t *tie = json_object_get(cfg, "tie_word_embeddings");
    if (tie && !json_is_boolean(tie) && !json_is_null(tie)) {
        st = fp4_fail(err, FP4_ERR_FORMAT, NULL, "tie_word_embeddings", "arch.tie_word_embeddings",
                      "config.json: tie_word_embeddings is %s, not true or false", fp4_json_kind(tie));
        goto done;
    }
    a->tied_head = json_is_true(tie);
    if ((st = hf_refusals(cfg, f, a->n_ctx_train, err)) || (st = hf_rope(cfg, a, err))) goto done;
    if (f->family == FP4_ARCH_GEMMA3 && (st = fp4_arch_gemma3_hf(cfg, a, err))) goto done;
    if ((f->family == FP4_ARCH_QWEN3_MOE || f->family == FP4_ARCH_MIXTRAL) && a->n_layers >= 1 &&
        a->n_layers <= FP4_ARCH_MAX_LAYERS && (st = hf_moe(cfg, a, err)))
        goto done;
    if (f->family == FP4_ARCH_DEEPSEEK_V3 && (st = fp4_arch_hf_deepseek(cfg, a, err))) goto done;
    if ((st = hf_tokens(cfg, a, err))) goto done;
    st = arch_check(a, err);
done:
    json_decref(cfg);
    return st;
}

/* ---------------------------------------------------------------- GGUF metadata */

static int gg_u64(const fp4_gguf *g, const char *key, uint64_t *v) {
    int64_t i = fp4_gguf_key_index(g, key);
    if (i < 0) return 0;
    switch (fp4_gguf_kv_type(g, i)) {
    case FP4_GGUF_UINT32: {
        uint32_t x;
        fp4_gguf_get_u32(g, i, &x);
        *v = x;
        return 1;
    }
    case FP4_GGUF_INT32: {
        int32_t x;
        fp4_gguf_get_i32(g, i, &x);
        if (x < 0) return -1;
        *v = (uint64_t)x;
        return 1;
    }
    case FP4_GGUF_UINT64: {
        fp4_gguf_get_u64(g, i, v);
        return 1;
    }
    case FP4_GGUF_INT64: {
        int64_t x;
        fp4_gguf_get_i64(g, i, &x);
        if (x < 0) return -1;
        *v = (uint64_t)x;
        return 1;
    }
    case FP4_GGUF_UINT16: {
        uint16_t x;
        fp4_gguf_get_u16(g, i, &x);
        *v = x;
        return 1;
    }
    default:
        return -1;
    }
}
static int gg_f64(const fp4_gguf *g, const char *key, double *v) {
    int64_t i = fp4_gguf_key_index(g, key);
    if (i < 0) return 0;
    if (fp4_gguf_kv_type(g, i) == FP4_GGUF_FLOAT32) {
        float f;
        fp4_gguf_get_f32(g, i, &f);
        *v = f;
        return 1;
    }
    if (fp4_gguf_kv_type(g, i) == FP4_GGUF_FLOAT64) {
        fp4_gguf_get_f64(g, i, v);
        return 1;
    }
    return -1;
}
static int gg_str(const fp4_gguf *g, const char *key, char *buf, size_t n) {
    int64_t i = fp4_gguf_key_index(g, key);
    const char *s;
    uint64_t len;
    if (i < 0) return 0;
    if (fp4_gguf_get_str(g, i, &s, &len)) return -1;
    snprintf(buf, n, "%.*s", (int)(len < n - 1 ? len : n - 1), s);
    return 1;
}

int fp4_arch_gg_u64(const fp4_gguf *g, const char *key, uint64_t *v) {
    return gg_u64(g, key, v);
}
int fp4_arch_gg_f64(const fp4_gguf *g, const char *key, double *v) {
    return gg_f64(g, key, v);
}
int fp4_arch_gg_str(const fp4_gguf *g, const char *key, char *buf, size_t n) {
    return gg_str(g, key, buf, n);
}

static fp4_status gg_need(const fp4_gguf *g, const char *arch, const char *sfx, int64_t *v, int required,
                          fp4_error *err) {
    char key[128];
    uint64_t u;
    snprintf(key, sizeof key, "%s.%s", arch, sfx);
    int r = gg_u64(g, key, &u);
    if (r == 1 && u <= (uint64_t)INT64_MAX) {
        *v = (int64_t)u;
        return FP4_OK;
    }
    if (r == 0 && !required) return FP4_OK;
    return fp4_fail(err, r ? FP4_ERR_FORMAT : FP4_ERR_NOT_FOUND, NULL, NULL, "arch.key", "GGUF: %s %s", key,
                    r ? "is not a non-negative integer" : "is missing");
}

fp4_status fp4_arch_from_gguf(const fp4_gguf *g, fp4_arch *out, fp4_error *err) {
    fp4_error_clear(err);
    if (!g || !out) return FP4_ERR_INVALID_ARG;
    memset(out, 0, sizeof *out);
    char name[64], key[128], txt[64];
    if (gg_str(g, "general.architecture", name, sizeof name) != 1)
        return fp4_fail(err, FP4_ERR_NOT_FOUND, NULL, NULL, "arch.key",
                        "GGUF: general.architecture is missing or not a string");
    const struct family_row *f = NULL;
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
        if (families[i].gguf_arch && !strcmp(name, families[i].gguf_arch)) f = &families[i];
    if (!f)
        return refuse(err, "arch.model_type",
                      "GGUF: %s = %s is not supported (llama, qwen2, qwen3, qwen3moe, gemma3, deepseek2)",
                      "general.architecture", name);
    const int gg_moe = f->family == FP4_ARCH_QWEN3_MOE;
    fp4_arch *a = out;
    a->family = f->family;
    a->source = FP4_ARCH_FROM_GGUF;
    a->qkv_bias = f->qkv_bias;
    a->qk_norm = f->qk_norm;
    a->qk_permuted = f->family == FP4_ARCH_LLAMA; /* llama.cpp's converter permutes Llama q/k rows
                                                     (Mixtral's too: it is "llama" there) */
    fp4_status st;
    if ((st = gg_need(g, name, "block_count", &a->n_layers, 1, err)) ||
        (st = gg_need(g, name, "embedding_length", &a->hidden, 1, err)) ||
        (st = gg_need(g, name, "attention.head_count", &a->n_heads, 1, err)) ||
        (st = gg_need(g, name, "feed_forward_length", &a->ffn, !gg_moe, err)) ||
        (st = gg_need(g, name, "context_length", &a->n_ctx_train, 1, err)))
        return st;
    a->n_kv_heads = a->n_heads;
    a->head_dim = a->n_heads ? a->hidden / a->n_heads : 0;
    int64_t vdim = -1, rdim = -1, experts = 0, sw = 0;
    if ((st = gg_need(g, name, "attention.head_count_kv", &a->n_kv_heads, 0, err)) ||
        (st = gg_need(g, name, "attention.key_length", &a->head_dim, 0, err)) ||
        (st = gg_need(g, name, "attention.value_length", &vdim, 0, err)) ||
        (st = gg_need(g, name, "rope.dimension_count", &rdim, 0, err)) ||
        (st = gg_need(g, name, "expert_count", &experts, 0, err)) ||
        (st = gg_need(g, name, "attention.sliding_window", &sw, 0, err)))
        return st;
    if (f->family == FP4_ARCH_DEEPSEEK_V3) { /* its own widths, experts and yarn: arch_deepseek.c */
        if ((st = fp4_arch_gguf_deepseek(g, name, a, err))) return st;
        vdim = rdim = -1, experts = 0;
    }
    if (experts > 0 && f->family != FP4_ARCH_LLAMA && !gg_moe) {
        snprintf(txt, sizeof txt, "%lld", (long long)experts);
        snprintf(key, sizeof key, "%s.expert_count", name);
        return refuse(err, "arch.moe", "GGUF: %s = %s (mixture of experts is not supported)", key, txt);
    }
    if (experts > 0 || gg_moe) { /* llama.cpp: qwen3moe, or Mixtral as "llama" with experts */
        char k1[128], k2[128];
        snprintf(k1, sizeof k1, "%s.expert_count", name);
        snprintf(k2, sizeof k2, "%s.expert_used_count", name);
        a->n_experts = experts;
        if ((st = gg_need(g, name, "expert_used_count", &a->n_experts_used, 1, err)) ||
            (st = moe_check(a, k1, k2, err)))
            return st;
        if (gg_moe) {
            a->moe_routing = FP4_MOE_SOFTMAX_TOPK;
            a->moe_norm_topk = 1; /* llama.cpp's qwen3moe graph renormalizes the k weights */
            if ((st = gg_need(g, name, "expert_feed_forward_length", &a->moe_ffn, 1, err))) return st;
            if (!a->ffn) a->ffn = a->moe_ffn;
        } else {
            a->family = FP4_ARCH_MIXTRAL;
            a->moe_routing = FP4_MOE_TOPK_SOFTMAX;
            a->moe_ffn = a->ffn;
            if ((st = gg_need(g, name, "expert_feed_forward_length", &a->moe_ffn, 0, err))) return st;
        }
    }
    if (sw > 0 && f->family != FP4_ARCH_GEMMA3) {
        snprintf(txt, sizeof txt, "%lld", (long long)sw);
        snprintf(key, sizeof key, "%s.attention.sliding_window", name);
        return refuse(err, "arch.sliding_window", "GGUF: %s = %s (sliding-window attention is not supported)",
                      key, txt);
    }
    if (vdim >= 0 && vdim != a->head_dim)
        return fp4_fail(err, FP4_ERR_SHAPE, NULL, NULL, "arch.head_dim",
                        "GGUF: value_length %lld != key_length %lld", (long long)vdim,
                        (long long)a->head_dim);
    if (rdim >= 0 && rdim != a->head_dim) {
        snprintf(txt, sizeof txt, "%lld", (long long)rdim);
        snprintf(key, sizeof key, "%s.rope.dimension_count", name);
        return refuse(err, "arch.rope_partial", "GGUF: %s = %s (partial rotary embeddings are not supported)",
                      key, txt);
    }
    int64_t vocab = 0;
    if ((st = gg_need(g, name, "vocab_size", &vocab, 0, err))) return st;
    if (!vocab) { /* llama.cpp writes no vocab_size: the embedding's rows (bind checks the head) */
        const fp4_gguf_tensor *te = fp4_gguf_find(g, "token_embd.weight");
        if (te) vocab = te->ne[1];
    }
    a->vocab = vocab;
    double d = 1e-5;
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", name);
    if (gg_f64(g, key, &d) < 0)
        return fp4_fail(err, FP4_ERR_FORMAT, NULL, NULL, "arch.rms_eps", "GGUF: %s is not a float", key);
    a->rms_eps = (float)d;
    a->rope_theta = 10000.0;
    snprintf(key, sizeof key, "%s.rope.freq_base", name);
    if (gg_f64(g, key, &a->rope_theta) < 0)
        return fp4_fail(err, FP4_ERR_FORMAT, NULL, NULL, "arch.rope_theta", "GGUF: %s is not a float", key);
    char stype[64] = "none";
    snprintf(key, sizeof key, "%s.rope.scaling.type", name);
    gg_str(g, key, stype, sizeof stype);
    if (!strcmp(stype, "linear")) {
        a->rope_scaling = FP4_ROPE_LINEAR;
        snprintf(key, sizeof key, "%s.rope.scaling.factor", name);
        if (gg_f64(g, key, &a->rope_factor) != 1)
            return refuse(err, "arch.rope_factor", "GGUF: %s is %s", key, "missing or not a float");
    } else if (strcmp(stype, "none") && !(a->family == FP4_ARCH_DEEPSEEK_V3 && !strcmp(stype, "yarn"))) {
        return refuse(err, "arch.rope_type", "GGUF: %s = %s is not supported (none, linear)", key, stype);
    }
    a->rope_freq_factors = fp4_gguf_find(g, "rope_freqs.weight") != NULL; /* checked in bind.c */
    uint64_t u;
    a->bos = gg_u64(g, "tokenizer.ggml.bos_token_id", &u) == 1 && u < INT32_MAX ? (int32_t)u : -1;
    if (gg_u64(g, "tokenizer.ggml.eos_token_id", &u) == 1 && u < INT32_MAX) a->eos[a->n_eos++] = (int32_t)u;
    a->tied_head = fp4_gguf_find(g, "output.weight") == NULL;
    if (f->family == FP4_ARCH_GEMMA3 && (st = fp4_arch_gemma3_gguf(g, a, err))) return st;
    return arch_check(a, err);
}
