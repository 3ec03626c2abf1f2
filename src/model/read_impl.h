/* read_impl.h — the loader, one way through:
 *   model.c      opens the checkpoint (checkpoint.c), hands it to the container's reader, checks
 *                the whole (unique logical names, lane pairing) and builds the handle;
 *   read_gguf.c  GGUF layouts  } fold each NVFP4 weight and its companions into one logical
 *   read_hf.c    HF layouts    } tensor; return the tensors, the layout and the lane keys;
 *   read_fp8.c   FP8 weights of HF checkpoints (weight + per-tensor/per-channel weight_scale);
 *   validate.c   the checks the readers and model.c share (scalars, scale bytes, exact pairs,
 *                lane pairing);
 *   names.c      layout and lane names;
 *   quant_claims.c  the checkpoint's quantization statements against its tensors (model.c).
 * A reader calls validate.c, names.c and checkpoint.c, never model.c. */
#ifndef FP4_READ_IMPL_H
#define FP4_READ_IMPL_H
#include "model_impl.h"

/* Lane metadata as a file states it (GGUF: fp4lane.weight_precision/.activation_precision;
 * HF: the quantization config). strict: NVFP4 tensors require both keys. */
typedef struct fp4_lane_keys {
    int has_wp, wp;            /* fp4_weight_precision */
    int has_ap, ap;            /* fp4_act_precision    */
    int strict;
} fp4_lane_keys;

/* What a reader returns. t is allocated by the caller with room for one logical tensor per raw
 * tensor of the checkpoint (cap); the caller frees it, with each entry's owned buffers, whatever
 * the reader returns. */
typedef struct fp4_read {
    uint32_t flags; /* in: fp4_load_opts.flags (FP4_LOAD_DEFER_REPACK) */
    fp4_layout layout;
    fp4_lane_keys keys;
    int64_t n, cap;
    fp4_mtensor *t;            /* container order */
} fp4_read;

fp4_status fp4_read_gguf(const fp4_ckpt *c, fp4_read *out, fp4_error *err);
/* the logical tensors fp4_read_gguf can make of c at most (the cap of its fp4_read): a 3-D type-40
 * tensor of E <= FP4_GGUF_MAX_EXPERTS experts makes E */
#define FP4_GGUF_MAX_EXPERTS 4096
int64_t fp4_read_gguf_cap(const fp4_ckpt *c);
fp4_status fp4_read_hf(const fp4_ckpt *c, fp4_read *out, fp4_error *err);

/* Appends a logical tensor that starts as a copy of raw tensor r (name, type, dims, bytes).
 * Never NULL: a checkpoint of n raw tensors makes at most n logical ones (a GGUF at most
 * fp4_read_gguf_cap). */
static inline fp4_mtensor *fp4_read_push(fp4_read *out, const fp4_raw *r) {
    fp4_mtensor *mt = &out->t[out->n++];
    memset(mt, 0, sizeof *mt);
    mt->t.name = r->name;
    mt->t.type = (fp4_type)r->type;
    mt->t.n_dims = r->n_dims;
    memcpy(mt->t.ne, r->ne, sizeof r->ne);
    mt->t.data = r->data;
    mt->t.nbytes = r->nbytes;
    mt->t.st_dtype = r->st_dtype;
    return mt;
}

/* ---- read_fp8.c: FP8 weights of safetensors checkpoints ---- */
/* 1 when "<base>.weight" is an F8_E4M3 tensor. */
int fp4_fp8_module(const fp4_ckpt *c, const char *base);
/* Folds "<base>.weight" (F8_E4M3 [out, in]), "<base>.weight_scale" and an optional
 * "<base>.input_scale" into one FP8 logical tensor (fp4_fp8_view), every byte and scale checked. */
fp4_status fp4_read_fp8(const fp4_ckpt *c, fp4_read *out, const char *base, fp4_error *err);
/* No byte of w's n_out rows of n_in is an E4M3FN NaN (0x7F/0xFF): fp8.nan with its row and column. */
fp4_status fp4_fp8_check_bytes(const fp4_ckpt *c, const fp4_raw *w, int64_t n_out, int64_t n_in,
                               fp4_error *err);

/* ---- read_fp8_block.c: block-scaled FP8 (DeepSeek's weight_scale_inv) ---- */
/* config.json's quantization_config.weight_block_size [rows, cols] into blk (read once per open). */
fp4_status fp4_fp8_block_size(const fp4_ckpt *c, const char *tensor, int64_t blk[2], fp4_error *err);
/* Folds "<base>.weight" (F8_E4M3 [out, in]) and "<base>.weight_scale_inv" (F32
 * [ceil(out/blk[0]), ceil(in/blk[1])]) into one block-scaled FP8 logical tensor. */
fp4_status fp4_read_fp8_block(const fp4_ckpt *c, fp4_read *out, const char *base, const int64_t blk[2],
                              fp4_error *err);

/* ---- validate.c ---- */
int fp4_scalar_ok(float v); /* finite, positive, normal */
/* A per-tensor F32 scalar companion: dtype, one element, a finite positive normal value. */
fp4_status fp4_check_scalar(const fp4_ckpt *c, const fp4_raw *r, int allow_rank0, const char *what, float *v,
                            fp4_error *err);
/* Every scale byte of n_rows rows of n_groups: no NaN (0x7F/0xFF), no sign bit. */
fp4_status fp4_check_scale_bytes(const fp4_ckpt *c, const char *name, const uint8_t *s, int64_t n_rows,
                                 int64_t n_groups, fp4_error *err);
/* The same rules, verdicts and messages over n_rows rows of n_in values of type-40 blocks, each
 * scale byte read where the block holds it (group g of a row: byte g % 4 of its block g / 4). */
fp4_status fp4_check_ggml_scale_bytes(const fp4_ckpt *c, const char *name, const uint8_t *blocks,
                                      int64_t n_rows, int64_t n_in, fp4_error *err);
fp4_status fp4_check_exact_pair(const fp4_ckpt *c, const char *name, float mul, float div, fp4_error *err);
/* Fill one scalar pair from its native form v (is_mul: v is a multiplier) and an optional exact
 * other form (have_other). */
fp4_status fp4_fill_pair(const fp4_ckpt *c, const char *name, float v, int is_mul, int have_other,
                         float other, float *mul, float *div, uint8_t *mul_exact, uint8_t *div_exact,
                         fp4_error *err);
/* fp4lane.exact.<name>.<what> from GGUF KV (F32) or safetensors metadata (hex float): 1 found,
 * 0 absent, <0 malformed (err filled). */
int fp4_exact_get(const fp4_ckpt *c, const char *name, const char *what, float *v, fp4_error *err);
/* The lane keys against the tensor types, both directions (SPEC §7): the input scale on all
 * NVFP4 tensors or none, keys that agree with the tensors. Gives the model's lane. */
fp4_status fp4_check_lane(const char *path, const fp4_mtensor *t, int64_t n, const fp4_lane_keys *k,
                          fp4_weight_precision *wp, fp4_act_precision *ap, fp4_error *err);

/* ---- quant_claims.c: every quantization statement of the checkpoint against its loaded
 * tensors; model.c calls it once the handle's tensors are built ---- */
fp4_status fp4_quant_claims_check(const fp4_model *m, fp4_error *err);

/* ---- names.c ---- */
extern const char *const fp4_wp_names[FP4_WP_COUNT_];
extern const char *const fp4_ap_names[FP4_AP_COUNT_];
#endif
