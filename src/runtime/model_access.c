/* model_access.c — what the runtime reads about an open model beyond its tensors: the
 * architecture's source (config.json, a config carried in a GGUF, or llama.cpp's GGUF keys) and
 * the lane. */
#include "runtime/rt_impl.h"
#include "model/layout_impl.h"
#include <stdlib.h>

fp4_status fp4_rt_model_arch(const fp4_model *m, fp4_arch *a, fp4_error *err) {
    const char *cfg = fp4_model_config_json(m);
    if (cfg) return fp4_arch_from_hf_config(cfg, a, err);
    const fp4_gguf *g = fp4_model_gguf(m);
    if (!g)
        return fp4_fail(err, FP4_ERR_NOT_FOUND, NULL, NULL, "arch.source",
                        "no config.json and no GGUF metadata: the architecture is unknown");
    /* a GGUF written by fp4lane from a HF checkpoint carries its config.json */
    int64_t i = fp4_gguf_key_index(g, "fp4lane.hf.config");
    const char *s;
    uint64_t len;
    if (i >= 0 && !fp4_gguf_get_str(g, i, &s, &len) && len < FP4_MAX_STRING) {
        char *text = malloc((size_t)len + 1);
        if (!text) return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
        memcpy(text, s, (size_t)len);
        text[len] = 0;
        fp4_status st = fp4_arch_from_hf_config(text, a, err);
        free(text);
        /* llama.cpp reads the <arch>.* keys: they must say what the carried config says */
        if (!st) st = fp4_ggml_arch_agree(g, a, err);
        /* written with llama.cpp's names (layout gguf-ggml, src/model/ggml_arch.c): Llama-family
         * q/k rows are in llama.cpp's converter order, as in any llama.cpp GGUF */
        if (!st && fp4_gguf_tensor_index(g, "token_embd.weight") >= 0)
            a->qk_permuted =
                a->family == FP4_ARCH_LLAMA || a->family == FP4_ARCH_MISTRAL || a->family == FP4_ARCH_MIXTRAL;
        return st;
    }
    return fp4_arch_from_gguf(g, a, err);
}

fp4_rt_lane fp4_rt_model_lane(const fp4_model *m) {
    switch (fp4_model_weight_precision(m)) {
    case FP4_WP_NVFP4:
        return FP4_LANE_NVFP4;
    case FP4_WP_Q4_K:
        return FP4_LANE_KQUANT;
    case FP4_WP_FP8:
        return FP4_LANE_FP8;
    default:
        return FP4_LANE_DENSE;
    }
}

fp4_status fp4_model_arch(const fp4_model *m, fp4_arch *out, fp4_error *err) {
    fp4_error_clear(err);
    if (!m || !out) return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "arch.source", "no model");
    return fp4_rt_model_arch(m, out, err);
}
