/* layout_config.c — config.json's quantization_config and ModelOpt's hf_quant_config.json for an
 * HF target, in each producer's vocabulary (nvfp4-peers.md §2.2 and §4). A source config.json is
 * kept as it is apart from quantization_config; without one, no config.json is written. */
#include "layout_impl.h"
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

static json_t *exclude_list(const fp4_wsrc *src) {
    json_t *a = json_array();
    for (int64_t i = 0; a && i < src->n; i++) {
        const fp4_tensor *t = src->tensor(src->ctx, i);
        if (t->type == FP4_TYPE_NVFP4_E2M1 || t->n_dims < 2 || !fp4_ends_with(t->name, ".weight")) continue;
        json_array_append_new(a, json_stringn(t->name, strlen(t->name) - 7));
    }
    return a;
}

static json_t *group_args(int act) {
    if (act)
        return json_pack("{s:i,s:s,s:s,s:b,s:i,s:s,s:s}", "num_bits", 4, "type", "float", "strategy",
                         "tensor_group", "symmetric", 1, "group_size", 16, "dynamic", "local", "observer",
                         "static_minmax");
    return json_pack("{s:i,s:s,s:s,s:b,s:i,s:b,s:s}", "num_bits", 4, "type", "float", "strategy",
                     "tensor_group", "symmetric", 1, "group_size", 16, "dynamic", 0, "observer",
                     "static_minmax");
}

static json_t *qcfg_modelopt(const fp4_wsrc *src) {
    const int w4a4 = src->ap == FP4_AP_NVFP4;
    json_t *spec =
        json_pack("{s:b,s:i,s:s,s:i}", "dynamic", 0, "num_bits", 4, "type", "float", "group_size", 16);
    json_t *g0 = json_pack("{s:o,s:o,s:[s]}", "weights", spec, "input_activations",
                           w4a4 ? json_deep_copy(spec) : json_null(), "targets", "Linear");
    return json_pack("{s:s,s:s,s:{s:o},s:o,s:{s:s,s:s}}", "quant_method", "modelopt", "quant_algo",
                     w4a4 ? "NVFP4" : "W4A16_NVFP4", "config_groups", "group_0", g0, "ignore",
                     exclude_list(src), "producer", "name", "fp4lane", "version", FP4LANE_VERSION_STRING);
}

static json_t *qcfg_ct(const fp4_wsrc *src) {
    const int w4a4 = src->ap == FP4_AP_NVFP4;
    json_t *g0 =
        json_pack("{s:[s],s:o,s:o,s:s}", "targets", "Linear", "weights", group_args(0), "input_activations",
                  w4a4 ? group_args(1) : json_null(), "format", "nvfp4-pack-quantized");
    return json_pack("{s:s,s:s,s:s,s:{s:o},s:o}", "quant_method", "compressed-tensors", "format",
                     "nvfp4-pack-quantized", "quantization_status", "compressed", "config_groups", "group_0",
                     g0, "ignore", exclude_list(src));
}

static fp4_status write_json(const char *dir, const char *file, json_t *obj, int indent, int sort,
                             fp4_error *err) {
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    char *text = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!text) return fp4_fail(err, FP4_ERR_NOMEM, path, NULL, "alloc", "cannot serialize JSON");
    fp4_status st = fp4_hfdir_write_json(path, text, indent, sort, err);
    free(text);
    return st;
}

/* The target's config.json text (compact) and, when its quantization_config had to change, the
 * original one (compact JSON, or "null" when there was none) for fp4lane.hf.quantization_config,
 * so that a later conversion back restores it. Both NULL when there is no source config. */
fp4_status fp4_config_plan(const fp4_wsrc *src, fp4_layout layout, char **cfg_out, char **stash_out,
                           fp4_error *err) {
    *cfg_out = *stash_out = NULL;
    if (!src->config_json || (layout != FP4_LAYOUT_MODELOPT && layout != FP4_LAYOUT_CT)) return FP4_OK;
    json_t *cfg = json_loads(src->config_json, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(cfg)) {
        json_decref(cfg);
        return fp4_fail(err, FP4_ERR_FORMAT, NULL, NULL, "hf.config",
                        "the source config.json is not a JSON object");
    }
    json_t *old = json_object_get(cfg, "quantization_config");
    const char *method = json_string_value(json_object_get(old, "quant_method"));
    const char *want = layout == FP4_LAYOUT_CT ? "compressed-tensors" : "modelopt";
    fp4_status st = FP4_OK;
    /* a config in the target's vocabulary is kept */
    if (!method || strcmp(method, want) || src->quantized_by_us) {
        if (!src->quantized_by_us) {
            *stash_out = old ? json_dumps(old, JSON_COMPACT | JSON_SORT_KEYS) : strdup("null");
            if (!*stash_out) st = FP4_ERR_NOMEM;
        }
        json_object_set_new(cfg, "quantization_config",
                            layout == FP4_LAYOUT_CT ? qcfg_ct(src) : qcfg_modelopt(src));
    }
    if (!st && !(*cfg_out = json_dumps(cfg, JSON_COMPACT | JSON_SORT_KEYS))) st = FP4_ERR_NOMEM;
    json_decref(cfg);
    if (st) return fp4_fail(err, st, NULL, NULL, "alloc", "out of memory");
    return FP4_OK;
}

fp4_status fp4_write_hf_configs(const fp4_wsrc *src, fp4_layout layout, const char *dir, const char *cfg_text,
                                fp4_error *err) {
    if (layout != FP4_LAYOUT_MODELOPT && layout != FP4_LAYOUT_CT) return FP4_OK;
    fp4_status st = FP4_OK;
    if (cfg_text) {
        char path[2048];
        snprintf(path, sizeof path, "%s/config.json", dir);
        st = fp4_hfdir_write_json(path, cfg_text, 2, 1, err); /* transformers: indent 2, sorted keys */
    }
    if (st || layout != FP4_LAYOUT_MODELOPT) return st;
    json_t *q = NULL;
    if (src->quant_config_json && !src->quantized_by_us)
        q = json_loads(src->quant_config_json, JSON_REJECT_DUPLICATES, NULL);
    if (!q)
        q = json_pack("{s:{s:s,s:s},s:{s:s,s:n,s:i,s:o}}", "producer", "name", "modelopt", "version",
                      "fp4lane " FP4LANE_VERSION_STRING, "quantization", "quant_algo",
                      src->ap == FP4_AP_NVFP4 ? "NVFP4" : "W4A16_NVFP4", "kv_cache_quant_algo", "group_size",
                      16, "exclude_modules", exclude_list(src));
    if (!q) return fp4_fail(err, FP4_ERR_NOMEM, dir, NULL, "alloc", "cannot build hf_quant_config.json");
    st = write_json(dir, "hf_quant_config.json", q, 4, 0, err);
    json_decref(q);
    return st;
}
