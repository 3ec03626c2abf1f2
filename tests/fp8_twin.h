/* fp8_twin.h — test support: synthetic twins of ModelOpt FP8 checkpoints, written at test time from
 * an unquantized HF directory (and, for MIXED_PRECISION, its NVFP4 ModelOpt twin). Tensor names
 * and dtypes as ModelOpt's exporter writes them: "<m>.weight" F8_E4M3 [out, in], "<m>.weight_scale"
 * F32 [] (per-tensor, quant_algo FP8) or F32 [out] (per-channel, FP8_PER_CHANNEL_PER_TOKEN), and
 * "<m>.input_scale" F32 []. */
#ifndef FP8_TWIN_H
#define FP8_TWIN_H

#include "fp4lane_io.h"

#ifdef __cplusplus
extern "C" { /* also linked into the GPU runtime test (C++) */
#endif

typedef struct fp8tw_opts {
    int per_channel;    /* weight_scale [out] instead of []                               */
    int no_input_scale; /* leave input_scale out                                         */
    int (*pick)(const char *module, void *ctx); /* which projections become FP8 (NULL: all)   */
    void *ctx;
    const char *hf_quant_config;     /* hf_quant_config.json text, or NULL for none               */
    const char *quantization_config; /* config.json's quantization_config (JSON), or NULL     */
    /* DeepSeek's block-scaled FP8 (block_rows > 0): "<m>.weight" F8_E4M3 and "<m>.weight_scale_inv"
     * F32 [ceil(out / block_rows), ceil(in / block_cols)], scale = block amax / 448, no input_scale */
    int64_t block_rows, block_cols;
    int f32_twin;        /* with block_rows: "<m>.weight" F32 = e4m3fn(byte) * its block's scale   */
    int scale_bf16;      /* with block_rows: weight_scale_inv written as BF16 (a refusal)          */
    int plus_scale;      /* with block_rows: a weight_scale beside weight_scale_inv (a refusal)    */
} fp8tw_opts;

/* DST (created): plain_dir's config.json (its quantization_config replaced by
 * o->quantization_config or removed) and one model.safetensors holding the tensors of nv_dir (an
 * NVFP4 ModelOpt twin of plain_dir; NULL: plain_dir's own tensors), where every picked projection
 * "<m>.weight" is FP8, quantized from plain_dir's weight: scale = amax / 448 (per tensor or per
 * row), byte = e4m3fn(w / scale). 0 on success. */
int fp8tw_write(const char *plain_dir, const char *nv_dir, const char *dst, const fp8tw_opts *o);

/* Edits one tensor of DIR/model.safetensors in place: n bytes at offset `at` of its data become
 * `bytes`. 0 on success. */
int fp8tw_poke(const char *dir, const char *tensor, uint64_t at, const void *bytes, size_t n);

/* A ModelOpt MIXED_PRECISION hf_quant_config.json (producer, quant_algo, kv_cache_quant_algo FP8,
 * quantized_layers) for the 7 Llama projections of n_layers layers: each module's entry is
 * {"quant_algo": algo(module)} (plus "group_size": 16 for the NVFP4 algorithms), none when algo
 * gives NULL. 0 on success. */
int fp8tw_mixed_hfq(char *buf, size_t cap, int n_layers, const char *(*algo)(const char *module, void *ctx),
                    void *ctx);

/* ModelOpt's FP8 hf_quant_config.json (quant_algo FP8, kv_cache_quant_algo FP8, lm_head excluded) */
#define FP8TW_HFQ_FP8                                                                                        \
    "{\"producer\": {\"name\": \"modelopt\", \"version\": \"0.31.0\"},\n \"quantization\": "                 \
    "{\"quant_algo\": \"FP8\", \"kv_cache_quant_algo\": \"FP8\", \"exclude_modules\": [\"lm_head\"]}}\n"

#ifdef __cplusplus
}
#endif

#endif
