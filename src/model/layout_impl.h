/* layout_impl.h — the write plan shared by layout_plan.c and layout_write.c. */
#ifndef FP4_LAYOUT_IMPL_H
#define FP4_LAYOUT_IMPL_H
#include "model_impl.h"

typedef enum plan_part {
    PART_RAW = 0, PART_PAYLOAD, PART_SCALES, PART_SCALAR, PART_GGML,
    PART_GEN /* made by ggml_arch.c */
} plan_part;

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
    int32_t perm_heads;   /* > 0: rows into llama.cpp's q/k order over this many heads; < 0: back */
    int32_t widen_from;   /* F16/BF16: written as F32 (llama.cpp's 1-D tensors; ggml_arch.c) */
    int32_t narrow_to;    /* F16/BF16: an F32 source written back narrowed (exactly; ggml_arch.c) */
    int32_t norm_shift;   /* Gemma 3 norms: +1 added while widening (llama.cpp stores the gain 1 + w),
                             -1 taken off while narrowing back (ggml_arch.c) */
    int64_t stack_n;      /* > 0: PART_RAW / PART_GGML of stack_n sources in order (llama.cpp's 3-D
                             experts), or PART_SCALAR of stack_n values (their .scale vectors) */
    int64_t *stack;       /* their logical indexes (owned by the plan; ggml_moe.c) */
    float *stack_values;  /* PART_SCALAR of stack_n: the F32 vector's values (owned; ggml_moe.c) */
} plan_entry;

typedef struct plan_kv {
    char key[FP4_MAX_NAME + 64];
    int is_f32;
    float f;
    int is_bool;
    char *s;
    int is_u32;
    uint32_t u;
} plan_kv;

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
plan_kv *fp4_plan_kv_add(plan *p); /* zeroed; NULL when out of memory */
plan_entry *fp4_plan_add(plan *p, fp4_error *err); /* zeroed, types -1, dims 1; NULL: out of memory */
/* gguf-ggml from a HF checkpoint: llama.cpp's names, metadata and q/k row order (ggml_arch.c) */
fp4_status fp4_ggml_arch_plan(const fp4_wsrc *src, plan *p, fp4_error *err);
int64_t fp4_ggml_arch_src_row(const plan_entry *e, int64_t r); /* source row of output row r */
/* n values of e's source (type widen_from) as little-endian F32 bytes (4n) */
void fp4_ggml_arch_widen(const plan_entry *e, const uint8_t *src, int64_t n, uint8_t *dst);
/* n F32 values of e's source as little-endian narrow_to (F16/BF16) bytes (2n) */
void fp4_ggml_arch_narrow(const plan_entry *e, const uint8_t *src, int64_t n, uint8_t *dst);
/* HF layouts from a GGUF written by fp4_ggml_arch_plan: HF names, q/k order and dtypes again */
fp4_status fp4_ggml_arch_unplan(const fp4_wsrc *src, plan *p, fp4_error *err);
/* A GGUF carrying its config.json (fp4lane.hf.config) as arch a: every llama.cpp <arch>.* key
 * present is valid and agrees with a (rules arch.gguf_value, arch.gguf_agree), naming the key */
struct fp4_arch;
fp4_status fp4_ggml_arch_agree(const fp4_gguf *g, const struct fp4_arch *a, fp4_error *err);
/* gguf-ggml of a mixture of experts: per-expert matrices stacked into llama.cpp's 3-D
 * blk.L.ffn_{gate,up,down}_exps (ggml_moe.c); names them, so the caller skips stacked entries.
 * FP4_ERR_UNSUPPORTED (plan untouched): llama.cpp could not run it; the caller keeps the names */
fp4_status fp4_ggml_moe_stack(plan *p, const struct fp4_arch *a, fp4_error *err);
/* One expert's layer-relative name to llama.cpp's per-expert logical name (to_gg 1:
 * "mlp.experts.E.gate_proj<sfx>" or Mixtral's "block_sparse_moe.experts.E.w1<sfx>" ->
 * "ffn_gate_exps.E<sfx>", the name read_gguf.c gives expert E of a 3-D type-40 tensor) or back
 * (to_gg 0; mixtral: Mixtral's spelling, its router ffn_gate_inp too). 1 when mapped. */
int fp4_ggml_moe_map(const char *in, char *out, size_t n, int to_gg, int mixtral);
/* DeepSeek-V3 as llama.cpp's deepseek2 (ggml_deepseek.c): a layer-relative name ("self_attn.q_a_proj.
 * weight", ...) to llama.cpp's (to_gg 1) or back; 1 when mapped. Whether llama.cpp runs the
 * checkpoint's attention and rope as written; deepseek2's own keys. */
int fp4_ggml_ds_map(const char *in, char *out, size_t n, int to_gg);
int fp4_ggml_ds_supported(const struct fp4_arch *a);
fp4_status fp4_ggml_ds_kvs(plan *p, const struct fp4_arch *a, fp4_error *err);
/* PART_GEN: the bytes of a tensor made here (llama.cpp's rope_freqs.weight), nbytes of them */
fp4_status fp4_ggml_arch_gen(const fp4_wsrc *src, const plan_entry *e, uint8_t *dst, fp4_error *err);
/* config.json / hf_quant_config.json for an HF target (written into dir) */
fp4_status fp4_config_plan(const fp4_wsrc *src, fp4_layout layout, char **cfg_out, char **stash_out,
                           fp4_error *err);
fp4_status fp4_write_hf_configs(const fp4_wsrc *src, fp4_layout layout, const char *dir, const char *cfg_text,
                                fp4_error *err);
fp4_status fp4_gguf_copy_kvs(fp4_gguf_writer *w, const fp4_gguf *g, fp4_error *err);
#endif
