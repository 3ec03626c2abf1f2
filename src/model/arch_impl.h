/* arch_impl.h — what arch.c asks of the family files beside it (arch_gemma3.c). */
#ifndef FP4_ARCH_IMPL_H
#define FP4_ARCH_IMPL_H

#include "fp4_impl.h"
#include "fp4lane_runtime.h"
#include <jansson.h>

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

#endif
