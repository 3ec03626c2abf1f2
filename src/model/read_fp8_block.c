/* read_fp8_block.c — block-scaled FP8 weights, DeepSeek-V3/R1's own checkpoints: "<m>.weight"
 * F8_E4M3 [out, in] with "<m>.weight_scale_inv" F32 [ceil(out / br), ceil(in / bc)], the block
 * shape [br, bc] from config.json's quantization_config.weight_block_size (DeepSeek: [128, 128];
 * quant_method "fp8", fmt "e4m3"). Despite its name the scale multiplies: DeepSeek's own
 * weight_dequant computes w = e4m3(byte) * s, the block's float scale (fp4_fp8_view). The lane is
 * weight-only, as for ModelOpt's FP8: activation_scheme "dynamic" (the producer's per-token FP8
 * activations) is not emulated; activations stay f32.
 *
 * Refusals, each with its rule: fp8.block-size (no config.json, no weight_block_size, or not two
 * integers in [1, 65536]), fp8.format (fmt other than e4m3), fp8.companion (weight_scale_inv
 * beside weight_scale or an NVFP4 companion), fp8.shape, fp8.n_in, fp8.scale-dtype (not F32),
 * fp8.block-shape (a scale grid that is not ceil(out / br) x ceil(in / bc)), fp8.scale (a scale
 * that is not finite, positive and normal), fp8.nan. */
#include "read_impl.h"
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#define FP8_BLOCK_MAX 65536

static const fp4_raw *find_sfx(const fp4_ckpt *c, const char *base, const char *sfx) {
    char name[FP4_MAX_NAME + 64];
    if (snprintf(name, sizeof name, "%s%s", base, sfx) >= (int)sizeof name) return NULL;
    return fp4_ckpt_find(c, name);
}

fp4_status fp4_fp8_block_size(const fp4_ckpt *c, const char *tensor, int64_t blk[2], fp4_error *err) {
    json_t *root = c->config_json ? json_loads(c->config_json, 0, NULL) : NULL;
    json_t *q = json_object_get(root, "quantization_config");
    json_t *bs = json_object_get(q, "weight_block_size"), *fmt = json_object_get(q, "fmt");
    fp4_status st = FP4_OK;
    if (fmt && !(json_is_string(fmt) && !strcmp(json_string_value(fmt), "e4m3")))
        st = fp4_fail(err, FP4_ERR_UNSUPPORTED, c->path, tensor, "fp8.format",
                      "config.json: quantization_config.fmt is not \"e4m3\" (block-scaled FP8 weights are "
                      "E4M3)");
    else if (!json_is_array(bs) || json_array_size(bs) != 2)
        st = fp4_fail(err, FP4_ERR_FORMAT, c->path, tensor, "fp8.block-size",
                      "a weight_scale_inv needs config.json's quantization_config.weight_block_size "
                      "[rows, cols]%s",
                      root ? "" : " (no config.json)");
    for (int i = 0; !st && i < 2; i++) {
        json_t *v = json_array_get(bs, (size_t)i);
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > FP8_BLOCK_MAX)
            st = fp4_fail(err, FP4_ERR_FORMAT, c->path, tensor, "fp8.block-size",
                          "config.json: quantization_config.weight_block_size[%d] is not an integer in "
                          "[1, %d]",
                          i, FP8_BLOCK_MAX);
        else
            blk[i] = json_integer_value(v);
    }
    json_decref(root);
    return st;
}

fp4_status fp4_read_fp8_block(const fp4_ckpt *c, fp4_read *out, const char *base, const int64_t blk[2],
                              fp4_error *err) {
    const fp4_raw *w = find_sfx(c, base, ".weight"), *s = find_sfx(c, base, ".weight_scale_inv");
    static const char *const foreign[] = {".weight_scale",        ".weight_scale_2",     ".input_scale",
                                          ".weight_global_scale", ".input_global_scale", ".weight_packed"};
    for (size_t i = 0; i < sizeof foreign / sizeof foreign[0]; i++) {
        const fp4_raw *f = find_sfx(c, base, foreign[i]);
        if (f)
            return fp4_fail(err, FP4_ERR_COMPANION, c->path, f->name, "fp8.companion",
                            "%s beside the block scales %s.weight_scale_inv (a block-scaled FP8 weight "
                            "takes weight_scale_inv alone)",
                            foreign[i] + 1, base);
    }
    if (w->n_dims != 2)
        return fp4_fail(err, FP4_ERR_SHAPE, c->path, w->name, "fp8.shape",
                        "an FP8 weight must be 2-D [out, in] (has %d dims)", (int)w->n_dims);
    const int64_t n_in = w->ne[0], n_out = w->ne[1];
    if (n_in > FP4_MAX_N_IN)
        return fp4_fail(err, FP4_ERR_LIMIT, c->path, w->name, "fp8.n_in", "n_in = %lld is above %d",
                        (long long)n_in, FP4_MAX_N_IN);
    if (s->st_dtype != FP4_ST_F32)
        return fp4_fail(err, FP4_ERR_DTYPE, c->path, s->name, "fp8.scale-dtype",
                        "a block-scaled FP8 weight_scale_inv must be F32");
    /* dims in GGUF order: [rows, cols] in PyTorch order is ne = {cols, rows} */
    const int64_t nbr = (n_out + blk[0] - 1) / blk[0], nbc = (n_in + blk[1] - 1) / blk[1];
    if (s->n_dims != 2 || s->ne[1] != nbr || s->ne[0] != nbc)
        return fp4_fail(err, FP4_ERR_SHAPE, c->path, s->name, "fp8.block-shape",
                        "weight_scale_inv must be [%lld, %lld] for a [%lld, %lld] weight in %lldx%lld blocks "
                        "(config.json weight_block_size); it has %d dims [%lld, %lld]",
                        (long long)nbr, (long long)nbc, (long long)n_out, (long long)n_in, (long long)blk[0],
                        (long long)blk[1], (int)s->n_dims, (long long)(s->n_dims == 2 ? s->ne[1] : s->ne[0]),
                        (long long)(s->n_dims == 2 ? s->ne[0] : 1));
    float *bs = malloc(sizeof(float) * (size_t)(nbr * nbc) + 1);
    if (!bs) return fp4_fail(err, FP4_ERR_NOMEM, c->path, w->name, "alloc", "out of memory");
    for (int64_t i = 0; i < nbr * nbc; i++) {
        bs[i] = fp4_rd_lef32(s->data + 4 * i);
        if (!fp4_scalar_ok(bs[i])) {
            fp4_status st =
                fp4_fail(err, FP4_ERR_SCALE2, c->path, s->name, "fp8.scale",
                         "weight_scale_inv[%lld][%lld] is %g: must be finite, positive and normal",
                         (long long)(i / nbc), (long long)(i % nbc), (double)bs[i]);
            free(bs);
            return st;
        }
    }
    fp4_status st = fp4_fp8_check_bytes(c, w, n_out, n_in, err);
    if (st) {
        free(bs);
        return st;
    }
    fp4_mtensor *mt = fp4_read_push(out, w);
    mt->t.type = FP4_TYPE_F8_E4M3FN;
    mt->t.fp8 = (fp4_fp8_view){0.0f, NULL, 0.0f, n_out, n_in, bs, blk[0], blk[1]};
    mt->owned = (uint8_t *)bs;
    return FP4_OK;
}
