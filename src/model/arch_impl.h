/* arch_impl.h — what arch.c shares with its family files (arch_deepseek.c). */
#ifndef FP4_ARCH_IMPL_H
#define FP4_ARCH_IMPL_H

#include "fp4lane_runtime.h"
#include <jansson.h>
#include <stddef.h>

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
