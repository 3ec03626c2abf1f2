/* arch_gemma3.c — Gemma 3's text model in fp4_arch: from a config.json (Gemma3ForCausalLM's own,
 * or the text_config of Gemma3ForConditionalGeneration) and from llama.cpp's gemma3 GGUF keys.
 * transformers writes config.json without the keys that keep their default, so the defaults of
 * Gemma3TextConfig fill them here; every key that is present is checked and a contradiction is
 * refused naming the key, before any tensor is looked at. */
#include "model/arch_impl.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

#define GEMMA3_PATTERN_DEFAULT 6 /* 5 local layers, then a global one */

static fp4_status bad(fp4_error *err, const char *rule, const char *key, const char *why) {
    return fp4_fail(err, FP4_ERR_FORMAT, NULL, NULL, rule, "config.json: %s %s", key, why);
}

/* Gemma3TextConfig's defaults (transformers), for the keys its config.json leaves out */
static void set_defaults(json_t *t) {
    static const struct {
        const char *k;
        double v;
        int is_int;
    } d[] = {
        {"vocab_size", 262208, 1},
        {"hidden_size", 2304, 1},
        {"intermediate_size", 9216, 1},
        {"num_hidden_layers", 26, 1},
        {"num_attention_heads", 8, 1},
        {"num_key_value_heads", 4, 1},
        {"head_dim", 256, 1},
        {"max_position_embeddings", 131072, 1},
        {"rms_norm_eps", 1e-6, 0},
        {"rope_theta", 1e6, 0},
        {"query_pre_attn_scalar", 256, 0},
        {"sliding_window", 4096, 1},
        {"rope_local_base_freq", 1e4, 0},
        {"bos_token_id", 2, 1},
        {"eos_token_id", 1, 1},
    };
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
        if (!json_object_get(t, d[i].k))
            json_object_set_new(t, d[i].k,
                                d[i].is_int ? json_integer((json_int_t)d[i].v) : json_real(d[i].v));
    if (!json_object_get(t, "tie_word_embeddings"))
        json_object_set_new(t, "tie_word_embeddings", json_true());
    if (!json_object_get(t, "hidden_activation") && !json_object_get(t, "hidden_act"))
        json_object_set_new(t, "hidden_activation", json_string("gelu_pytorch_tanh"));
}

/* transformers 5: rope_parameters = {full_attention: {...}, sliding_attention: {...}} */
static fp4_status fold_rope(json_t *t, fp4_error *err) {
    json_t *rp = json_object_get(t, "rope_parameters");
    if (!json_is_object(rp) || !json_object_get(rp, "full_attention")) return FP4_OK;
    json_t *full = json_object_get(rp, "full_attention"), *loc = json_object_get(rp, "sliding_attention");
    if (!json_is_object(full))
        return bad(err, "arch.rope_type", "rope_parameters.full_attention", "is not an object");
    if (loc && !json_is_null(loc)) {
        json_t *ty = json_object_get(loc, "rope_type"), *th = json_object_get(loc, "rope_theta");
        if (!json_is_object(loc) ||
            (ty && !(json_is_string(ty) && !strcmp(json_string_value(ty), "default"))))
            return fp4_fail(
                err, FP4_ERR_UNSUPPORTED, NULL, NULL, "arch.rope_type",
                "config.json: rope_parameters.sliding_attention.rope_type is not \"default\" (local "
                "layers take no rope scaling)");
        if (th) json_object_set(t, "rope_local_base_freq", th);
    }
    json_object_set(t, "rope_parameters", full);
    return FP4_OK;
}

json_t *fp4_arch_gemma3_config(json_t *cfg, fp4_status *st, fp4_error *err) {
    *st = FP4_OK;
    json_t *mt = json_object_get(cfg, "model_type");
    const char *m = json_is_string(mt) ? json_string_value(mt) : "";
    json_t *t = NULL;
    if (!strcmp(m, "gemma3")) {
        json_t *tc = json_object_get(cfg, "text_config");
        if (!json_is_object(tc)) {
            *st = bad(err, "arch.key", "text_config", "is missing or not an object (model_type gemma3)");
            return NULL;
        }
        json_t *tm = json_object_get(tc, "model_type");
        if (tm && !(json_is_string(tm) && !strcmp(json_string_value(tm), "gemma3_text"))) {
            *st = fp4_fail(err, FP4_ERR_UNSUPPORTED, NULL, NULL, "arch.model_type",
                           "config.json: text_config.model_type is not \"gemma3_text\"");
            return NULL;
        }
        t = json_deep_copy(tc);
        /* the generation ids of the multimodal config sit at its top level */
        static const char *const ids[] = {"bos_token_id", "eos_token_id", "tie_word_embeddings"};
        for (size_t i = 0; t && i < sizeof ids / sizeof ids[0]; i++)
            if (!json_object_get(t, ids[i]) && json_object_get(cfg, ids[i]))
                json_object_set(t, ids[i], json_object_get(cfg, ids[i]));
    } else if (!strcmp(m, "gemma3_text")) {
        t = json_deep_copy(cfg);
    } else {
        return NULL;
    }
    if (!t) {
        *st = fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
        return NULL;
    }
    json_object_set_new(t, "model_type", json_string("gemma3_text"));
    set_defaults(t);
    if ((*st = fold_rope(t, err))) {
        json_decref(t);
        return NULL;
    }
    return t;
}

static int num_of(json_t *t, const char *k, double *v) {
    json_t *j = json_object_get(t, k);
    if (!j || json_is_null(j)) return 0;
    if (!json_is_number(j)) return -1;
    *v = json_number_value(j);
    return 1;
}

/* layer_types (transformers >= 4.53) or sliding_window_pattern (older): both present must agree */
static fp4_status layer_types(json_t *t, fp4_arch *a, fp4_error *err) {
    json_t *lt = json_object_get(t, "layer_types"), *pj = json_object_get(t, "sliding_window_pattern");
    int64_t pattern = GEMMA3_PATTERN_DEFAULT;
    if (pj && !json_is_null(pj)) {
        if (!json_is_integer(pj) || json_integer_value(pj) < 1 ||
            json_integer_value(pj) > FP4_ARCH_MAX_LAYERS)
            return bad(err, "arch.layer_types", "sliding_window_pattern", "is not an integer in [1, 1024]");
        pattern = json_integer_value(pj);
    }
    memset(a->swa_layers, 0, sizeof a->swa_layers);
    for (int64_t L = 0; L < a->n_layers; L++)
        if ((L + 1) % pattern) a->swa_layers[L / 64] |= 1ull << (L % 64);
    if (!lt || json_is_null(lt)) return FP4_OK;
    if (!json_is_array(lt) || (int64_t)json_array_size(lt) != a->n_layers)
        return fp4_fail(err, FP4_ERR_FORMAT, NULL, NULL, "arch.layer_types",
                        "config.json: layer_types is not a list of num_hidden_layers = %lld entries",
                        (long long)a->n_layers);
    uint64_t bits[FP4_ARCH_MAX_LAYERS / 64] = {0};
    for (int64_t L = 0; L < a->n_layers; L++) {
        json_t *v = json_array_get(lt, (size_t)L);
        const char *s = json_is_string(v) ? json_string_value(v) : "";
        if (!strcmp(s, "sliding_attention"))
            bits[L / 64] |= 1ull << (L % 64);
        else if (strcmp(s, "full_attention"))
            return fp4_fail(
                err, FP4_ERR_UNSUPPORTED, NULL, NULL, "arch.layer_types",
                "config.json: layer_types[%lld] is not \"sliding_attention\" or \"full_attention\"",
                (long long)L);
    }
    if (pj && !json_is_null(pj) && memcmp(bits, a->swa_layers, sizeof bits))
        return fp4_fail(err, FP4_ERR_FORMAT, NULL, NULL, "arch.layer_types",
                        "config.json: layer_types disagrees with sliding_window_pattern = %lld",
                        (long long)pattern);
    memcpy(a->swa_layers, bits, sizeof bits);
    return FP4_OK;
}

fp4_status fp4_arch_gemma3_hf(json_t *t, fp4_arch *a, fp4_error *err) {
    fp4_status st;
    json_t *act = json_object_get(t, "hidden_activation");
    if (!act) act = json_object_get(t, "hidden_act");
    if (!(json_is_string(act) && (!strcmp(json_string_value(act), "gelu_pytorch_tanh") ||
                                  !strcmp(json_string_value(act), "gelu_tanh"))))
        return fp4_fail(err, FP4_ERR_UNSUPPORTED, NULL, NULL, "arch.hidden_act",
                        "config.json: hidden_activation = %s (Gemma 3 runs gelu_pytorch_tanh)",
                        json_is_string(act) ? json_string_value(act) : "not a string");
    a->hidden_act = FP4_ACT_GELU_TANH;
    a->embed_scale = 1;
    json_t *ac = json_object_get(t, "attn_logit_softcapping");
    if (ac && !json_is_null(ac))
        return fp4_fail(err, FP4_ERR_UNSUPPORTED, NULL, NULL, "arch.attn_softcap",
                        "config.json: attn_logit_softcapping is set (Gemma 2's attention soft-capping is not "
                        "supported; Gemma 3 has null)");
    if (json_is_true(json_object_get(t, "use_bidirectional_attention")))
        return fp4_fail(
            err, FP4_ERR_UNSUPPORTED, NULL, NULL, "arch.feature",
            "config.json: use_bidirectional_attention = true (an embedding model, not a decoder)");
    double v = 0;
    int r = num_of(t, "final_logit_softcapping", &v);
    if (r < 0 || (r == 1 && !(v > 0 && isfinite(v))))
        return bad(err, "arch.softcap", "final_logit_softcapping", "is not null or a positive number");
    a->final_softcap = r == 1 ? v : 0.0;
    if (num_of(t, "query_pre_attn_scalar", &a->query_pre_attn_scalar) != 1 ||
        !(a->query_pre_attn_scalar > 0 && isfinite(a->query_pre_attn_scalar)))
        return bad(err, "arch.attn_scale", "query_pre_attn_scalar", "is not a positive number");
    if (num_of(t, "rope_local_base_freq", &a->rope_local_theta) != 1 ||
        !(a->rope_local_theta > 0 && isfinite(a->rope_local_theta)))
        return bad(err, "arch.rope_theta", "rope_local_base_freq", "is not a positive number");
    json_t *sw = json_object_get(t, "sliding_window");
    if (!json_is_integer(sw) || json_integer_value(sw) < 1)
        return bad(err, "arch.sliding_window", "sliding_window", "is not a positive integer");
    a->sliding_window = json_integer_value(sw);
    if (a->n_layers < 1 || a->n_layers > FP4_ARCH_MAX_LAYERS) return FP4_OK; /* arch_check names it */
    if ((st = layer_types(t, a, err))) return st;
    return FP4_OK;
}

static int gg_num(const fp4_gguf *g, const char *key, double *v) {
    int64_t i = fp4_gguf_key_index(g, key);
    if (i < 0) return 0;
    uint32_t u;
    float f;
    if (fp4_gguf_kv_type(g, i) == FP4_GGUF_UINT32 && !fp4_gguf_get_u32(g, i, &u)) return *v = u, 1;
    if (fp4_gguf_kv_type(g, i) == FP4_GGUF_FLOAT32 && !fp4_gguf_get_f32(g, i, &f)) return *v = f, 1;
    return -1;
}

/* llama.cpp: the window from <arch>.attention.sliding_window (0 or absent: every layer global),
 * the layer types from attention.sliding_window_pattern (a bool per layer, or n: layer L local
 * when L % n < n - 1; default 6), the local rope base from rope.freq_base_swa (default 10000),
 * the attention scale 1/sqrt(hidden / heads) for the 62-layer (27B) model, else 1/sqrt(head_dim) */
fp4_status fp4_arch_gemma3_gguf(const fp4_gguf *g, fp4_arch *a, fp4_error *err) {
    double v = 0;
    a->hidden_act = FP4_ACT_GELU_TANH;
    a->embed_scale = 1;
    a->rope_local_theta = 10000.0;
    a->query_pre_attn_scalar =
        a->n_layers == 62 && a->n_heads > 0 ? (double)(a->hidden / a->n_heads) : (double)a->head_dim;
    if (gg_num(g, "gemma3.final_logit_softcapping", &v) < 0 || (v != 0 && !(v > 0 && isfinite(v))))
        return fp4_fail(err, FP4_ERR_FORMAT, NULL, NULL, "arch.softcap",
                        "GGUF: gemma3.final_logit_softcapping is not a positive float");
    a->final_softcap = v;
    v = 10000.0;
    if (gg_num(g, "gemma3.rope.freq_base_swa", &v) < 0 || !(v > 0 && isfinite(v)))
        return fp4_fail(err, FP4_ERR_FORMAT, NULL, NULL, "arch.rope_theta",
                        "GGUF: gemma3.rope.freq_base_swa is not a positive float");
    a->rope_local_theta = v;
    v = 0;
    if (gg_num(g, "gemma3.attention.sliding_window", &v) < 0)
        return fp4_fail(err, FP4_ERR_FORMAT, NULL, NULL, "arch.sliding_window",
                        "GGUF: gemma3.attention.sliding_window is not a u32");
    a->sliding_window = (int64_t)v;
    memset(a->swa_layers, 0, sizeof a->swa_layers);
    if (!a->sliding_window || a->n_layers < 1 || a->n_layers > FP4_ARCH_MAX_LAYERS) return FP4_OK;
    const int64_t pi = fp4_gguf_key_index(g, "gemma3.attention.sliding_window_pattern");
    if (pi >= 0 && fp4_gguf_kv_type(g, pi) == FP4_GGUF_ARRAY) {
        const void *data;
        int64_t n = 0;
        if (fp4_gguf_arr_type(g, pi) != FP4_GGUF_BOOL || fp4_gguf_get_arr(g, pi, FP4_GGUF_BOOL, &data, &n) ||
            n != a->n_layers)
            return fp4_fail(err, FP4_ERR_FORMAT, NULL, NULL, "arch.layer_types",
                            "GGUF: gemma3.attention.sliding_window_pattern is not %lld booleans",
                            (long long)a->n_layers);
        for (int64_t L = 0; L < a->n_layers; L++)
            if (((const uint8_t *)data)[L]) a->swa_layers[L / 64] |= 1ull << (L % 64);
        return FP4_OK;
    }
    int64_t pattern = GEMMA3_PATTERN_DEFAULT;
    if (pi >= 0) {
        if (gg_num(g, "gemma3.attention.sliding_window_pattern", &v) != 1 || v > FP4_ARCH_MAX_LAYERS)
            return fp4_fail(err, FP4_ERR_FORMAT, NULL, NULL, "arch.layer_types",
                            "GGUF: gemma3.attention.sliding_window_pattern is not a u32 or a bool array");
        pattern = (int64_t)v;
    }
    for (int64_t L = 0; L < a->n_layers; L++)
        if (pattern == 0 || L % pattern < pattern - 1) a->swa_layers[L / 64] |= 1ull << (L % 64);
    return FP4_OK;
}
