/* dequant.c — rows of any loaded tensor as f32 (for dump, tests and the float references). */
#include "fp4_impl.h"
#include <stdlib.h>

typedef fp4_status (*row_fn)(const fp4_tensor *t, int64_t r, float *dst);

static fp4_status row_nvfp4(const fp4_tensor *t, int64_t r, float *dst) {
    const fp4_nvfp4_view *v = &t->nvfp4;
    if (v->packing == FP4_PACK_GGML64) { /* llama.cpp's blocks as the file holds them: one at a time */
        const uint8_t *row = v->payload + r * (v->n_in / 64) * 36;
        uint8_t p[32], s[4];
        fp4_status st = FP4_OK;
        for (int64_t b = 0; b < v->n_in / 64 && !st; b++) {
            fp4_ggml_unpack_row(row + b * 36, 64, p, s);
            st = fp4_nvfp4_dequant_row(p, s, v->scale2, 64, dst + b * 64); /* element-wise: the same bits */
        }
        return st;
    }
    if (v->packing != FP4_PACK_CANONICAL) return FP4_ERR_UNSUPPORTED;
    return fp4_nvfp4_dequant_row(v->payload + r * (v->n_in / 2), v->scales + r * (v->n_in / 16), v->scale2,
                                 v->n_in, dst);
}
static fp4_status row_f32(const fp4_tensor *t, int64_t r, float *dst) {
    memcpy(dst, t->data + (size_t)(r * t->ne[0]) * 4, (size_t)t->ne[0] * 4);
    return FP4_OK;
}
static fp4_status row_half(const fp4_tensor *t, int64_t r, float *dst) {
    for (int64_t k = 0; k < t->ne[0]; k++) {
        uint16_t h = fp4_rd_le16(t->data + (size_t)(r * t->ne[0] + k) * 2);
        dst[k] = t->type == FP4_TYPE_F16 ? fp4_f16_to_f32(h) : fp4_bf16_to_f32(h);
    }
    return FP4_OK;
}
static fp4_status row_kq(const fp4_tensor *t, int64_t r, float *dst) {
    const int q4 = t->type == FP4_TYPE_Q4_K;
    const size_t bytes = (size_t)(t->ne[0] / 256) * (q4 ? sizeof(fp4_block_q4_K) : sizeof(fp4_block_q6_K));
    void *b = malloc(bytes + 1); /* an aligned copy: the file's bytes are not aligned */
    if (!b) return FP4_ERR_NOMEM;
    memcpy(b, t->data + (size_t)r * bytes, bytes);
    fp4_status st = q4 ? fp4_q4_K_dequantize(b, t->ne[0], dst) : fp4_q6_K_dequantize(b, t->ne[0], dst);
    free(b);
    return st;
}

/* FP8 weight: e4m3fn(byte) * scale_r, or * the block's scale when block-scaled; one f32 multiply
 * (fp4_fp8_view) */
static fp4_status row_fp8(const fp4_tensor *t, int64_t r, float *dst) {
    const uint8_t *p = t->data + (size_t)(r * t->ne[0]);
    const fp4_fp8_view *f = &t->fp8;
    if (f->block_scale) {
        const float *bs =
            f->block_scale + (r / f->block_rows) * ((t->ne[0] + f->block_cols - 1) / f->block_cols);
        for (int64_t k = 0; k < t->ne[0]; k++)
            dst[k] = fp4_e4m3fn_decode(p[k]) * bs[k / f->block_cols];
        return FP4_OK;
    }
    const float s = f->row_scale ? f->row_scale[r] : f->scale;
    for (int64_t k = 0; k < t->ne[0]; k++)
        dst[k] = fp4_e4m3fn_decode(p[k]) * s;
    return FP4_OK;
}

static const struct {
    fp4_type type;
    row_fn fn;
} row_table[] = {
    {FP4_TYPE_F8_E4M3FN, row_fp8}, {FP4_TYPE_NVFP4_E2M1, row_nvfp4}, {FP4_TYPE_F32, row_f32},
    {FP4_TYPE_F16, row_half},      {FP4_TYPE_BF16, row_half},        {FP4_TYPE_Q4_K, row_kq},
    {FP4_TYPE_Q6_K, row_kq},
};

fp4_status fp4_tensor_dequant_rows(const fp4_tensor *t, int64_t r0, int64_t r1, float *dst) {
    if (!t || !dst) return FP4_ERR_INVALID_ARG;
    const int64_t rows = fp4_rows_of(t->ne, t->n_dims);
    if (r0 < 0 || r1 < r0 || r1 > rows) return FP4_ERR_INVALID_ARG;
    for (size_t k = 0; k < sizeof row_table / sizeof row_table[0]; k++) {
        if (row_table[k].type != t->type) continue;
        if (t->type != FP4_TYPE_NVFP4_E2M1 && !t->data) return FP4_ERR_INVALID_ARG;
        if (t->type == FP4_TYPE_F8_E4M3FN &&
            !(t->fp8.row_scale || t->fp8.scale > 0.0f ||
              (t->fp8.block_scale && t->fp8.block_rows > 0 && t->fp8.block_cols > 0)))
            return FP4_ERR_INVALID_ARG; /* F8 bytes without scales are not a weight */
        for (int64_t r = r0; r < r1; r++) {
            fp4_status st = row_table[k].fn(t, r, dst + (r - r0) * t->ne[0]);
            if (st) return st;
        }
        return FP4_OK;
    }
    return FP4_ERR_UNSUPPORTED;
}
