/* read_hf.c — the reader of safetensors checkpoints (a file or a Hugging Face directory): ModelOpt
 * (weight U8, weight_scale F8_E4M3, weight_scale_2 F32, input_scale F32) and compressed-tensors
 * (weight_packed, weight_scale, weight_global_scale = 1/scale2, input_global_scale = 1/input
 * scale). Names that mix the two conventions are refused: guessing would invert a scale. The
 * logical name of an NVFP4 weight is "<module>.weight" in both. */
#include "read_impl.h"
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct conv {
    const char *payload, *scale, *scale2, *input; /* suffixes after "<module>" */
    int scale2_is_mul, input_is_mul;
    fp4_layout layout;
} conv;

static const conv conv_modelopt = {".weight", ".weight_scale", ".weight_scale_2", ".input_scale", 1, 1,
                                   FP4_LAYOUT_MODELOPT};
static const conv conv_ct = {".weight_packed", ".weight_scale", ".weight_global_scale", ".input_global_scale",
                             0, 0, FP4_LAYOUT_CT};

static const fp4_raw *find2(const fp4_ckpt *c, const char *base, const char *sfx) {
    char name[FP4_MAX_NAME + 64];
    if (snprintf(name, sizeof name, "%s%s", base, sfx) >= (int)sizeof name) return NULL;
    return fp4_ckpt_find(c, name);
}

static fp4_status pair(const fp4_ckpt *c, const char *lname, float v, int is_mul, const char *mul_key,
                       const char *div_key, float *mul, float *div, uint8_t *me, uint8_t *de,
                       fp4_error *err) {
    float other;
    int h = fp4_exact_get(c, lname, is_mul ? div_key : mul_key, &other, err);
    if (h < 0) return FP4_ERR_SCALE2;
    return fp4_fill_pair(c, lname, v, is_mul, h, other, mul, div, me, de, err);
}

static fp4_status read_one(const fp4_ckpt *c, fp4_read *out, const conv *cv, const char *base,
                           const fp4_raw *s, fp4_error *err) {
    const fp4_raw *p = find2(c, base, cv->payload), *s2 = find2(c, base, cv->scale2),
                  *in = find2(c, base, cv->input);
    if (!p)
        return fp4_fail(err, FP4_ERR_COMPANION, c->path, s->name, "nvfp4.companion-missing",
                        "block scales without a packed payload %s%s", base, cv->payload);
    if (!s2)
        return fp4_fail(err, FP4_ERR_COMPANION, c->path, p->name, "nvfp4.companion-missing", "missing %s%s",
                        base, cv->scale2);
    if (p->st_dtype != FP4_ST_U8)
        return fp4_fail(err, FP4_ERR_DTYPE, c->path, p->name, "nvfp4.payload-dtype",
                        "packed NVFP4 payload must be U8");
    if (s->st_dtype != FP4_ST_F8_E4M3)
        return fp4_fail(err, FP4_ERR_DTYPE, c->path, s->name, "nvfp4.companion-dtype",
                        "block scales must be F8_E4M3");
    const int64_t n_in = s->ne[0] * 16;
    int ok = p->n_dims == s->n_dims && p->n_dims >= 2 && p->ne[0] * 2 == n_in;
    for (int i = 1; i < FP4_MAX_DIMS; i++) ok &= p->ne[i] == s->ne[i];
    if (!ok)
        return fp4_fail(err, FP4_ERR_SHAPE, c->path, s->name, "nvfp4.companion-shape",
                        "scales [.., %lld] do not match the payload [.., %lld] (n_in/16 vs n_in/2)",
                        (long long)s->ne[0], (long long)p->ne[0]);
    if (n_in > FP4_MAX_N_IN)
        return fp4_fail(err, FP4_ERR_LIMIT, c->path, p->name, "nvfp4.n_in", "n_in = %lld is above %d",
                        (long long)n_in, FP4_MAX_N_IN);
    const int64_t n_out = fp4_rows_of(p->ne, p->n_dims);
    fp4_mtensor *mt = fp4_read_push(out, p);
    mt->name_owned = malloc(strlen(base) + 8);
    if (!mt->name_owned) return fp4_fail(err, FP4_ERR_NOMEM, c->path, p->name, "alloc", "out of memory");
    sprintf(mt->name_owned, "%s.weight", base);
    mt->t.name = mt->name_owned;
    mt->t.type = FP4_TYPE_NVFP4_E2M1;
    mt->t.ne[0] = n_in;
    mt->t.data = NULL;
    mt->t.nbytes = p->nbytes;
    float v;
    fp4_scalars *sc = &mt->sc;
    fp4_status st;
    if ((st = fp4_check_scalar(c, s2, 1, "scale2", &v, err)) ||
        (st = pair(c, mt->t.name, v, cv->scale2_is_mul, "scale2_mul", "scale2_div", &sc->s2_mul, &sc->s2_div,
                   &sc->s2_mul_exact, &sc->s2_div_exact, err)))
        return st;
    if (in && ((st = fp4_check_scalar(c, in, 1, "input scale", &v, err)) ||
               (st = pair(c, mt->t.name, v, cv->input_is_mul, "input_scale_mul", "input_scale_div",
                          &sc->in_mul, &sc->in_div, &sc->in_mul_exact, &sc->in_div_exact, err))))
        return st;
    if ((st = fp4_check_scale_bytes(c, mt->t.name, s->data, n_out, n_in / 16, err))) return st;
    mt->t.nvfp4 = (fp4_nvfp4_view){p->data, s->data, sc->s2_mul, sc->in_div, n_out, n_in, FP4_PACK_CANONICAL};
    return FP4_OK;
}

/* What the configs say about activations: -1 nothing, 0 W4A16, 1 W4A4. Refuses a group size
 * other than 16 and an algorithm that is not NVFP4. */
static fp4_status config_lane(const fp4_ckpt *c, fp4_layout layout, int *act, fp4_error *err) {
    *act = -1;
    const char *txt =
        layout == FP4_LAYOUT_MODELOPT && c->quant_config_json ? c->quant_config_json : c->config_json;
    if (!txt) return FP4_OK;
    json_t *root = json_loads(txt, JSON_REJECT_DUPLICATES, NULL);
    if (!root) return FP4_OK; /* the HF reader already parsed it; nothing to say */
    fp4_status st = FP4_OK;
    json_t *q = json_object_get(root, txt == c->quant_config_json ? "quantization" : "quantization_config");
    if (json_is_object(q)) {
        json_t *algo = json_object_get(q, "quant_algo"), *gs = json_object_get(q, "group_size"),
               *fmt = json_object_get(q, "format");
        const char *a = json_string_value(algo);
        if (a && !strcmp(a, "NVFP4")) *act = 1;
        else if (a && !strcmp(a, "W4A16_NVFP4")) *act = 0;
        else if (a && strcmp(a, "MIXED_PRECISION"))
            st = fp4_fail(err, FP4_ERR_LANE, c->path, NULL, "hf.quant-algo",
                          "quant_algo '%s' with NVFP4 tensors", a);
        if (!st && gs && json_integer_value(gs) != 16)
            st = fp4_fail(err, FP4_ERR_LANE, c->path, NULL, "hf.group-size", "group_size must be 16");
        const char *f = json_string_value(fmt);
        if (!st && f && layout == FP4_LAYOUT_CT && strcmp(f, "nvfp4-pack-quantized") &&
            strcmp(f, "mixed-precision"))
            st = fp4_fail(err, FP4_ERR_LANE, c->path, NULL, "hf.quant-algo",
                          "compressed-tensors format '%s' is not NVFP4", f);
    }
    json_decref(root);
    return st;
}

/* 1 when raw tensor r belongs to an FP8 module (read_fp8.c): its weight, weight_scale or
 * input_scale; those never decide the NVFP4 naming convention or the layout. */
static int fp8_part(const fp4_ckpt *c, const fp4_raw *r) {
    static const char *const sfx[] = {".weight", ".weight_scale", ".input_scale", ".weight_scale_inv"};
    char base[FP4_MAX_NAME + 16];
    for (size_t k = 0; k < sizeof sfx / sizeof sfx[0]; k++) {
        if (!fp4_ends_with(r->name, sfx[k])) continue;
        snprintf(base, sizeof base, "%.*s", (int)(strlen(r->name) - strlen(sfx[k])), r->name);
        if (fp4_fp8_module(c, base)) return 1;
    }
    return 0;
}

fp4_status fp4_read_hf(const fp4_ckpt *c, fp4_read *out, fp4_error *err) {
    const fp4_raw *mo = NULL, *ct = NULL;
    for (int64_t i = 0; i < c->n; i++) {
        const char *nm = c->t[i].name;
        if (fp8_part(c, &c->t[i])) continue;
        if (!mo && (fp4_ends_with(nm, ".weight_scale_2") || fp4_ends_with(nm, ".input_scale"))) mo = &c->t[i];
        if (!ct && (fp4_ends_with(nm, ".weight_packed") || fp4_ends_with(nm, ".weight_global_scale") ||
                    fp4_ends_with(nm, ".input_global_scale")))
            ct = &c->t[i];
    }
    if (mo && ct)
        return fp4_fail(err, FP4_ERR_LANE, c->path, ct->name, "hf.mixed-conventions",
                        "ModelOpt (%s) and compressed-tensors names in one checkpoint", mo->name);
    const conv *cv = ct ? &conv_ct : &conv_modelopt;
    int any_scale = 0;
    for (int64_t i = 0; i < c->n; i++)
        any_scale |= fp4_ends_with(c->t[i].name, ".weight_scale") && !fp8_part(c, &c->t[i]);
    out->layout = any_scale ? cv->layout : FP4_LAYOUT_NONE;
    fp4_status st;
    char base[FP4_MAX_NAME + 16];
    for (int64_t i = 0; i < c->n; i++) { /* pass 1: every weight_scale makes one NVFP4 or FP8 tensor */
        const fp4_raw *r = &c->t[i];
        if (!fp4_ends_with(r->name, ".weight_scale")) continue;
        snprintf(base, sizeof base, "%.*s", (int)(strlen(r->name) - 13), r->name);
        if ((st = fp4_fp8_module(c, base) ? fp4_read_fp8(c, out, base, err)
                                          : read_one(c, out, cv, base, r, err)))
            return st;
    }
    int64_t blk[2] = {0, 0}; /* DeepSeek's block-scaled FP8 (read_fp8_block.c): the block shape once */
    for (int64_t i = 0; i < c->n; i++) {
        const fp4_raw *r = &c->t[i];
        if (!fp4_ends_with(r->name, ".weight_scale_inv")) continue;
        snprintf(base, sizeof base, "%.*s", (int)(strlen(r->name) - 17), r->name);
        if (!fp4_fp8_module(c, base))
            return fp4_fail(err, FP4_ERR_COMPANION, c->path, r->name, "fp8.scale-orphan",
                            "a weight_scale_inv without an F8_E4M3 %s.weight", base);
        if (find2(c, base, ".weight_scale")) continue; /* fp4_read_fp8 refused the pair above */
        if ((!blk[0] && (st = fp4_fp8_block_size(c, r->name, blk, err))) ||
            (st = fp4_read_fp8_block(c, out, base, blk, err)))
            return st;
    }
    for (int64_t i = 0; i < c->n; i++) { /* pass 2: everything else is plain, orphans refused */
        const fp4_raw *r = &c->t[i];
        static const char *const sfx[] = {".weight_scale",  ".weight_scale_2",      ".input_scale",
                                          ".weight_packed", ".weight_global_scale", ".input_global_scale"};
        if (fp8_part(c, r)) { /* folded by fp4_read_fp8 in pass 1, unless its scale is missing */
            snprintf(base, sizeof base, "%.*s", (int)(strrchr(r->name, '.') - r->name), r->name);
            if (!find2(c, base, ".weight_scale") && !find2(c, base, ".weight_scale_inv"))
                return fp4_fail(err, FP4_ERR_COMPANION, c->path, r->name, "fp8.scale-missing",
                                "an F8_E4M3 weight without %s.weight_scale (or weight_scale_inv)", base);
            continue;
        }
        int consumed = 0;
        for (int k = 0; k < 6 && !consumed; k++) {
            if (!fp4_ends_with(r->name, sfx[k])) continue;
            snprintf(base, sizeof base, "%.*s", (int)(strlen(r->name) - strlen(sfx[k])), r->name);
            if (!find2(c, base, ".weight_scale"))
                return fp4_fail(err, FP4_ERR_COMPANION, c->path, r->name, "nvfp4.orphan-companion",
                                "companion without block scales %s.weight_scale", base);
            consumed = 1;
        }
        if (!consumed && any_scale && cv == &conv_modelopt && fp4_ends_with(r->name, ".weight")) {
            snprintf(base, sizeof base, "%.*s", (int)(strlen(r->name) - 7), r->name);
            if (find2(c, base, ".weight_scale")) consumed = 1;
            else if (r->st_dtype == FP4_ST_U8)
                return fp4_fail(err, FP4_ERR_COMPANION, c->path, r->name, "nvfp4.companion-missing",
                                "packed U8 weight without weight_scale");
        }
        if (!consumed && r->st_dtype == FP4_ST_F8_E4M3)
            return fp4_fail(err, FP4_ERR_UNSUPPORTED, c->path, r->name, "fp8.scale-missing",
                            "an F8_E4M3 tensor that is neither an FP8 weight with weight_scale nor NVFP4 "
                            "block scales");
        if (consumed) continue;
        fp4_read_push(out, r);
    }
    int act = -1;
    if (out->layout != FP4_LAYOUT_NONE && (st = config_lane(c, out->layout, &act, err))) return st;
    out->keys = (fp4_lane_keys){.has_ap = act >= 0, .ap = act >= 0 ? act : 0};
    return FP4_OK;
}
