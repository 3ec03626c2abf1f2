/* layout_impl.h — the write plan shared by layout_plan.c and layout_write.c. */
#ifndef FP4_LAYOUT_IMPL_H
#define FP4_LAYOUT_IMPL_H
#include "model_impl.h"

typedef enum plan_part { PART_RAW = 0, PART_PAYLOAD, PART_SCALES, PART_SCALAR, PART_GGML } plan_part;

typedef struct plan_entry {
    char name[FP4_MAX_NAME + 64];
    int64_t src;          /* logical tensor index */
    plan_part part;
    int gguf_type;        /* GGUF targets */
    int st_dtype;         /* HF targets */
    int32_t n_dims;       /* GGUF order */
    int64_t ne[FP4_MAX_DIMS];
    uint64_t nbytes;
    float value;          /* PART_SCALAR */
} plan_entry;

typedef struct plan_kv { char key[FP4_MAX_NAME + 64]; int is_f32; float f; int is_bool; char *s; } plan_kv;

typedef struct plan {
    fp4_layout layout;
    int is_gguf;
    int64_t n, cap;
    plan_entry *e;
    int64_t n_kv, kv_cap;
    plan_kv *kv;          /* GGUF: KVs; HF: __metadata__ pairs (s) */
    uint64_t total;
} plan;

fp4_status fp4_plan_build(const fp4_wsrc *src, fp4_layout layout, plan *p, fp4_error *err);
void fp4_plan_free(plan *p);
fp4_status fp4_plan_kv_str(plan *p, const char *key, const char *s);
/* config.json / hf_quant_config.json for an HF target (written into dir) */
fp4_status fp4_config_plan(const fp4_wsrc *src, fp4_layout layout, char **cfg_out, char **stash_out,
                           fp4_error *err);
fp4_status fp4_write_hf_configs(const fp4_wsrc *src, fp4_layout layout, const char *dir, const char *cfg_text,
                                fp4_error *err);
fp4_status fp4_gguf_copy_kvs(fp4_gguf_writer *w, const fp4_gguf *g, fp4_error *err);
#endif
