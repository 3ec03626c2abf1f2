/* read_fp8.c — FP8 weights of a safetensors checkpoint (ModelOpt quant_algo FP8, the FP8 layers of
 * a MIXED_PRECISION export, compressed-tensors float-quantized FP8): a module whose "<m>.weight" is
 * F8_E4M3 [out, in] with "<m>.weight_scale" (F32, or BF16/F16 widened exactly) and an optional
 * "<m>.input_scale" becomes one logical tensor "<m>.weight" of type FP4_TYPE_F8_E4M3FN with its
 * fp4_fp8_view. Accepted scale shapes: one value ([], [1], [1, 1]: per-tensor) or one per output
 * row ([out], [out, 1]: per-channel); any other (block-scaled FP8) is refused by name.
 *
 * Refusals, each with its rule: fp8.companion (NVFP4 companions beside an F8 weight),
 * fp8.scale-missing (an F8_E4M3 tensor with no weight_scale), fp8.shape (a weight that is not
 * 2-D), fp8.n_in, fp8.scale-dtype, hf.fp8 (block-scaled FP8), fp8.scale (a scale that is not
 * finite, positive and normal), fp8.nan (a weight byte 0x7F/0xFF, with its row and column),
 * fp8.input-scale (an input_scale that is not one finite positive normal F32). Block-scaled FP8
 * (DeepSeek's weight_scale_inv): read_fp8_block.c. */
#include "read_impl.h"
#include <stdio.h>
#include <stdlib.h>

static const fp4_raw *find_sfx(const fp4_ckpt *c, const char *base, const char *sfx) {
    char name[FP4_MAX_NAME + 64];
    if (snprintf(name, sizeof name, "%s%s", base, sfx) >= (int)sizeof name) return NULL;
    return fp4_ckpt_find(c, name);
}

int fp4_fp8_module(const fp4_ckpt *c, const char *base) {
    const fp4_raw *w = find_sfx(c, base, ".weight");
    return w && w->st_dtype == FP4_ST_F8_E4M3;
}

/* Value i of a scale tensor widened to f32 (exact for all three dtypes); dtype checked before. */
static float scale_at(const fp4_raw *s, int64_t i) {
    if (s->st_dtype == FP4_ST_F32) return fp4_rd_lef32(s->data + 4 * i);
    const uint16_t h = fp4_rd_le16(s->data + 2 * i);
    return s->st_dtype == FP4_ST_BF16 ? fp4_bf16_to_f32(h) : fp4_f16_to_f32(h);
}

fp4_status fp4_fp8_check_bytes(const fp4_ckpt *c, const fp4_raw *w, int64_t n_out, int64_t n_in,
                               fp4_error *err) {
    for (int64_t r = 0; r < n_out; r++) {
        const uint8_t *row = w->data + r * n_in;
        for (int64_t k = 0; k < n_in; k++)
            if ((row[k] & 0x7F) == 0x7F)
                return fp4_fail(err, FP4_ERR_NAN_SCALE, c->path, w->name, "fp8.nan",
                                "weight byte 0x%02X (E4M3FN NaN) at row %lld, column %lld", row[k],
                                (long long)r, (long long)k);
    }
    return FP4_OK;
}

fp4_status fp4_read_fp8(const fp4_ckpt *c, fp4_read *out, const char *base, fp4_error *err) {
    const fp4_raw *w = find_sfx(c, base, ".weight"), *s = find_sfx(c, base, ".weight_scale"),
                  *in = find_sfx(c, base, ".input_scale");
    static const char *const foreign[] = {".weight_scale_2", ".weight_packed", ".weight_global_scale",
                                          ".input_global_scale", ".weight_scale_inv"};
    for (size_t i = 0; i < sizeof foreign / sizeof foreign[0]; i++) {
        const fp4_raw *f = find_sfx(c, base, foreign[i]);
        if (f)
            return fp4_fail(err, FP4_ERR_COMPANION, c->path, f->name, "fp8.companion",
                            "%s beside the F8_E4M3 weight %s.weight (FP8 weights take weight_scale and "
                            "input_scale, or weight_scale_inv alone)",
                            strrchr(f->name, '.') + 1, base);
    }
    if (!s)
        return fp4_fail(err, FP4_ERR_COMPANION, c->path, w->name, "fp8.scale-missing",
                        "an F8_E4M3 weight without %s.weight_scale", base);
    if (w->n_dims != 2)
        return fp4_fail(err, FP4_ERR_SHAPE, c->path, w->name, "fp8.shape",
                        "an FP8 weight must be 2-D [out, in] (has %d dims)", (int)w->n_dims);
    const int64_t n_in = w->ne[0], n_out = w->ne[1];
    if (n_in > FP4_MAX_N_IN)
        return fp4_fail(err, FP4_ERR_LIMIT, c->path, w->name, "fp8.n_in", "n_in = %lld is above %d",
                        (long long)n_in, FP4_MAX_N_IN);
    if (s->st_dtype != FP4_ST_F32 && s->st_dtype != FP4_ST_BF16 && s->st_dtype != FP4_ST_F16)
        return fp4_fail(err, FP4_ERR_DTYPE, c->path, s->name, "fp8.scale-dtype",
                        "an FP8 weight_scale must be F32 (or BF16/F16)");
    /* dims in GGUF order: [out, 1] in PyTorch order is ne = {1, out} */
    const int per_tensor = s->n_elements == 1 && (s->n_dims == 0 || s->ne[0] == 1) && s->n_dims <= 2;
    const int per_channel = !per_tensor && s->n_elements == n_out &&
                            ((s->n_dims == 1 && s->ne[0] == n_out) || (s->n_dims == 2 && s->ne[0] == 1));
    if (!per_tensor && !per_channel)
        return fp4_fail(err, FP4_ERR_UNSUPPORTED, c->path, s->name, "hf.fp8",
                        "weight_scale of %lld values for a [%lld, %lld] FP8 weight: block-scaled FP8 is not "
                        "an fp4lane lane (per-tensor and per-channel FP8 are)",
                        (long long)s->n_elements, (long long)n_out, (long long)n_in);
    for (int64_t i = 0; i < s->n_elements; i++) {
        const float v = scale_at(s, i);
        if (!fp4_scalar_ok(v))
            return fp4_fail(err, FP4_ERR_SCALE2, c->path, s->name, "fp8.scale",
                            "weight_scale[%lld] is %g: must be finite, positive and normal", (long long)i,
                            (double)v);
    }
    float in_v = 0.0f;
    if (in) {
        if (in->st_dtype != FP4_ST_F32 || in->n_elements != 1 || in->n_dims > 1)
            return fp4_fail(err, FP4_ERR_SHAPE, c->path, in->name, "fp8.input-scale",
                            "an FP8 input_scale must be a single F32 (shape [] or [1])");
        in_v = fp4_rd_lef32(in->data);
        if (!fp4_scalar_ok(in_v))
            return fp4_fail(err, FP4_ERR_SCALE2, c->path, in->name, "fp8.input-scale",
                            "input_scale is %g: must be finite, positive and normal", (double)in_v);
    }
    fp4_status st = fp4_fp8_check_bytes(c, w, n_out, n_in, err);
    if (st) return st;
    fp4_mtensor *mt = fp4_read_push(out, w);
    mt->t.type = FP4_TYPE_F8_E4M3FN;
    mt->t.fp8 = (fp4_fp8_view){per_tensor ? scale_at(s, 0) : 0.0f, NULL, in_v, n_out, n_in, NULL, 0, 0};
    if (per_channel) {
        float *rs = malloc(sizeof(float) * (size_t)n_out + 1);
        if (!rs) return fp4_fail(err, FP4_ERR_NOMEM, c->path, w->name, "alloc", "out of memory");
        for (int64_t r = 0; r < n_out; r++)
            rs[r] = scale_at(s, r);
        mt->owned = (uint8_t *)rs;
        mt->t.fp8.row_scale = rs;
    }
    return FP4_OK;
}
