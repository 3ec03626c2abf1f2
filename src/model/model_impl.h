/* model_impl.h — internals of src/model/: the raw checkpoint view every layout reads through,
 * the loaded model, and the layout writers. */
#ifndef FP4_MODEL_IMPL_H
#define FP4_MODEL_IMPL_H

#include "fp4_impl.h"

/* ---- a raw tensor of any container, dims in GGUF order ---- */
typedef struct fp4_raw {
    const char *name;
    int type;                  /* fp4_type, or -1 when the dtype has no fp4lane type      */
    int st_dtype;              /* fp4_st_dtype of a safetensors source, else -1           */
    int32_t n_dims;            /* 0 for a safetensors scalar                              */
    int64_t ne[FP4_MAX_DIMS];
    int64_t n_elements;
    const uint8_t *data;
    uint64_t nbytes;
} fp4_raw;

typedef struct fp4_kv_str { char *key, *value; } fp4_kv_str;

#define FP4_META_QUANT_CONFIG "fp4lane.hf.quant_config"
#define FP4_META_QCFG_STASH "fp4lane.hf.quantization_config"
/* safetensors metadata keys that fp4lane regenerates instead of carrying */
static inline int fp4_meta_regenerated(const char *k) {
    return !strncmp(k, "fp4lane.exact.", 14) || !strcmp(k, FP4_META_QUANT_CONFIG) ||
           !strcmp(k, FP4_META_QCFG_STASH);
}

/* Any checkpoint: a GGUF file, a .safetensors file, or a Hugging Face directory. */
typedef struct fp4_ckpt {
    char path[1024];
    int is_gguf;
    fp4_gguf *gguf;
    fp4_st *st;                /* a single .safetensors file */
    fp4_hfdir *hf;             /* a directory */
    int64_t n;
    fp4_raw *t;                /* container order */
    int64_t *by_name;          /* indexes sorted by name, for bsearch */
    uint64_t file_bytes;
    char *config_json, *quant_config_json;   /* compact JSON text or NULL */
    int64_t n_meta;            /* safetensors __metadata__ (first shard / the file) */
    fp4_kv_str *meta;
} fp4_ckpt;

fp4_status fp4_ckpt_open(const char *path, uint64_t max_bytes, fp4_ckpt **out, fp4_error *err);
fp4_status fp4_ckpt_open_memory(const void *data, size_t size, const char *name, uint64_t max_bytes,
                                fp4_ckpt **out, fp4_error *err);
void fp4_ckpt_close(fp4_ckpt *c);
const fp4_raw *fp4_ckpt_find(const fp4_ckpt *c, const char *name);
/* GGUF string KV as a NUL-terminated copy into buf; FP4_ERR_NOT_FOUND when absent. */
fp4_status fp4_ckpt_gguf_str(const fp4_ckpt *c, const char *key, char *buf, size_t n);
const char *fp4_ckpt_meta(const fp4_ckpt *c, const char *key);     /* safetensors metadata */

/* safetensors dtype <-> fp4_type */
int fp4_st_to_type(int st_dtype);     /* -1 when none */
int fp4_type_to_st(int type);         /* -1 when none */

/* ---- the loaded model ---- */
/* Both forms of each per-tensor scalar: layouts store scale2 as a multiplier (fp4lane, ggml,
 * ModelOpt) or a divisor (compressed-tensors), the input scale as a divisor (fp4lane, CT) or a
 * multiplier (ggml, ModelOpt). The form read from a file (or from fp4lane.exact.* metadata) is
 * exact; the other is 1/x in f32. Writers store the exact form so round trips keep every bit. */
typedef struct fp4_scalars {
    float s2_mul, s2_div;      /* s2_mul == fp4_tensor.nvfp4.scale2                          */
    float in_mul, in_div;      /* in_div == fp4_tensor.nvfp4.input_scale_inv; 0 for A16      */
    uint8_t s2_mul_exact, s2_div_exact, in_mul_exact, in_div_exact;
} fp4_scalars;

typedef struct fp4_mtensor {
    fp4_tensor t;
    fp4_scalars sc;
    uint8_t *owned;            /* repacked payload+scales (ggml layout sources)             */
    char *name_owned;
} fp4_mtensor;

struct fp4_model {
    fp4_ckpt *ck;
    fp4_layout layout;
    fp4_weight_precision wp;
    fp4_act_precision ap;
    int64_t n;
    fp4_mtensor *t;            /* sorted by name */
};

/* ---- writers (layout_write.c) ---- */
/* The source of the tensors being written: a loaded model, or the quantizer producing NVFP4
 * tensors on demand. get_nvfp4 fills a view valid until the next call. */
typedef struct fp4_wsrc {
    int64_t n;
    const fp4_tensor *(*tensor)(void *ctx, int64_t i);   /* i in name order; NVFP4 entries may
                                                          * have NULL payload/scales */
    fp4_status (*get_nvfp4)(void *ctx, int64_t i, fp4_nvfp4_view *v, fp4_error *err);
    const fp4_scalars *(*scalars)(void *ctx, int64_t i); /* NVFP4 entries only */
    /* plain entries whose fp4_tensor.data is NULL (made on demand, e.g. Q4_K): bytes valid until
     * the next call */
    fp4_status (*get_plain)(void *ctx, int64_t i, const uint8_t **data, fp4_error *err);
    void *ctx;
    fp4_weight_precision wp;
    fp4_act_precision ap;
    const char *config_json, *quant_config_json;        /* source JSON, may be NULL */
    const fp4_ckpt *src_ck;                              /* for KV / metadata carry-over, may be NULL */
    int quantized_by_us;                                 /* 1: quantize (ModelOpt-style configs) */
    /* optional, for a source that makes its tensors on demand (fp4lane synth --to nvfp4): bytes
     * [off, off + n) of a plain entry whose data is NULL, valid until the next call, so that a large
     * plain tensor (an embedding) is written in pieces; and the files an HF output carries besides
     * the weights (tokenizer), written into dir, where src_ck is NULL */
    fp4_status (*get_plain_part)(void *ctx, int64_t i, uint64_t off, size_t n, const uint8_t **data,
                                 fp4_error *err);
    fp4_status (*companions)(void *companions_ctx, const char *dir, fp4_error *err);
    void *companions_ctx;
} fp4_wsrc;

/* A quantize source whose tensors are made on demand instead of read from a file (synth --to
 * nvfp4 streams a model that never exists unquantized): t[i].data is NULL and read_rows fills rows
 * [r0, r0 + n_rows) of t[i] (ne[1] rows of ne[0] values; a 1-D tensor is one row) as
 * little-endian bytes of its type. by_name: the indexes of t sorted by strcmp of the names. */
typedef struct fp4_qsource {
    const char *path; /* named in errors */
    int64_t n;
    const fp4_raw *t;
    const int64_t *by_name;
    fp4_status (*read_rows)(void *ctx, int64_t i, int64_t r0, int64_t n_rows, uint8_t *dst, fp4_error *err);
    void *ctx;
    const char *config_json;
    fp4_status (*companions)(void *ctx, const char *dir, fp4_error *err); /* see fp4_wsrc */
} fp4_qsource;

/* fp4_quantize_checkpoint from such a source: the same bytes as quantizing the file the source
 * would have been (NVFP4 only). Progress: "amax" over the source bytes, then the writer's. */
fp4_status fp4_quantize_source(const fp4_qsource *s, const char *out, const fp4_quantize_opts *o,
                               fp4_error *err);

fp4_status fp4_write_layout(const fp4_wsrc *src, const char *out, const fp4_write_opts *opts, fp4_error *err);

/* ggml type 40 block repacking (one row): fp4_ggml_pack_row / fp4_ggml_unpack_row, fp4_impl.h */

/* quant_policy.c: a family's recipe on top of quantize.c's default exclusions (DeepSeek-V3: NVIDIA's
 * R1-FP4 keeps attention, dense MLPs, shared experts and the MTP layer in their precision) */
typedef struct fp4_qpolicy {
    int deepseek;
    int64_t n_layers, first_dense;
} fp4_qpolicy;
void fp4_qpolicy_init(const char *config_json, fp4_qpolicy *p);
int fp4_qpolicy_keep(const fp4_qpolicy *p, const char *name); /* 1: not quantized */

#endif
