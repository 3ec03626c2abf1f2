/* arch_impl.h — what arch.c shares with its family files (arch_gemma3.c, arch_deepseek.c). */
#ifndef FP4_ARCH_IMPL_H
#define FP4_ARCH_IMPL_H

#include "fp4_impl.h"
#include "fp4lane_runtime.h"
#include <jansson.h>
#include <stddef.h>

/* A Gemma 3 config.json made whole: NULL (and FP4_OK in *st) when cfg is not Gemma 3; else a new
 * object (the caller owns it) holding the text model's keys, transformers' Gemma3TextConfig
 * defaults for the absent ones (its config.json leaves defaults out), rope_parameters of
 * transformers 5 folded into the transformers 4 keys, and model_type "gemma3_text". On a refusal
 * NULL with *st set. */
json_t *fp4_arch_gemma3_config(json_t *cfg, fp4_status *st, fp4_error *err);
/* The Gemma 3 fields of a from a whole config (above); refusals name the key (rules arch.*). */
fp4_status fp4_arch_gemma3_hf(json_t *tc, fp4_arch *a, fp4_error *err);
/* The Gemma 3 fields from llama.cpp's gemma3.* keys (src/models/gemma3.cpp's reading of them). */
fp4_status fp4_arch_gemma3_gguf(const fp4_gguf *g, fp4_arch *a, fp4_error *err);

/* an integer (or an integral real) / a number under key k: 1 read, 0 absent or null, -1 wrong type */
int fp4_arch_js_int(json_t *o, const char *k, int64_t *v);
int fp4_arch_js_num(json_t *o, const char *k, double *v);
/* DeepSeek-V3's attention, experts and routing from config.json (after the common keys) */
fp4_status fp4_arch_hf_deepseek(json_t *cfg, fp4_arch *a, fp4_error *err);
/* GGUF readers of arch.c: 1 read, 0 absent, -1 wrong type */
int fp4_arch_gg_u64(const fp4_gguf *g, const char *key, uint64_t *v);
int fp4_arch_gg_f64(const fp4_gguf *g, const char *key, double *v);
int fp4_arch_gg_str(const fp4_gguf *g, const char *key, char *buf, size_t n);
/* llama.cpp's deepseek2 keys (after the common ones; arch the GGUF's architecture name) */
fp4_status fp4_arch_gguf_deepseek(const fp4_gguf *g, const char *arch, fp4_arch *a, fp4_error *err);
/* rope_scaling of type yarn (sc: the object, where: its key for messages) */
fp4_status fp4_arch_hf_yarn(json_t *sc, const char *where, fp4_arch *a, fp4_error *err);

#endif
