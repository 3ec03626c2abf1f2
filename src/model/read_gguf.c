/* read_gguf.c — the reader of GGUF checkpoints: fp4lane's companion layout (NVFP4_E2M1 +
 * .nvfp4_scale, .nvfp4_scale2, .nvfp4_input_scale_inv) and llama.cpp's type 40 with .scale /
 * .input_scale sidecars (of a 3-D tensor, llama.cpp's experts: one value per expert, each expert
 * its own logical tensor).
 * A type-40 file without a .scale sidecar means scale2 = 1.0: that is llama.cpp's own
 * convention (its converter omits a scale within 1e-6 of 1.0), so it is accepted, documented in
 * docs/FORMATS.md. The "weight.scale" naming of some community files is refused (ambiguous). */
#include "read_impl.h"
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define SFX_SCALE ".nvfp4_scale"
#define SFX_SCALE2 ".nvfp4_scale2"
#define SFX_INPUT ".nvfp4_input_scale_inv"

static const fp4_raw *find_sfx(const fp4_ckpt *c, const char *base, const char *sfx) {
    char name[FP4_MAX_NAME + 64];
    if (snprintf(name, sizeof name, "%s%s", base, sfx) >= (int)sizeof name) return NULL;
    return fp4_ckpt_find(c, name);
}

static fp4_status lane_key(const fp4_ckpt *c, const char *key, const char *const *names, int n, int *has,
                           int *val, fp4_error *err) {
    char buf[64];
    *has = 0;
    if (fp4_gguf_key_index(c->gguf, key) < 0) return FP4_OK;
    fp4_status st = fp4_ckpt_gguf_str(c, key, buf, sizeof buf);
    if (st) return fp4_fail(err, FP4_ERR_LANE, c->path, NULL, "lane.value", "%s must be a short string", key);
    *val = fp4_name_index(buf, names, n);
    if (*val < 0)
        return fp4_fail(err, FP4_ERR_LANE, c->path, NULL, "lane.value", "%s = '%s' is not a known precision",
                        key, buf);
    *has = 1;
    return FP4_OK;
}

static fp4_status scale_shape_ok(const fp4_ckpt *c, const fp4_raw *p, const fp4_raw *s, int64_t n_in,
                                 fp4_error *err) {
    if (s->type != FP4_TYPE_F8_E4M3FN)
        return fp4_fail(err, FP4_ERR_DTYPE, c->path, s->name, "nvfp4.companion-dtype",
                        "block scales must be F8_E4M3FN");
    int ok = s->n_dims == p->n_dims && s->ne[0] == n_in / 16;
    for (int i = 1; i < FP4_MAX_DIMS; i++) ok &= s->ne[i] == p->ne[i];
    if (!ok)
        return fp4_fail(err, FP4_ERR_SHAPE, c->path, s->name, "nvfp4.companion-shape",
                        "block scales must have shape [n_in/16 = %lld, %lld] like the payload",
                        (long long)(n_in / 16), (long long)p->ne[1]);
    return FP4_OK;
}

static fp4_status input_pair(const fp4_ckpt *c, const char *name, float v, int is_mul, fp4_scalars *sc,
                             fp4_error *err) {
    float other;
    int h = fp4_exact_get(c, name, is_mul ? "input_scale_div" : "input_scale_mul", &other, err);
    if (h < 0) return FP4_ERR_SCALE2;
    return fp4_fill_pair(c, name, v, is_mul, h, other, &sc->in_mul, &sc->in_div, &sc->in_mul_exact,
                         &sc->in_div_exact, err);
}

static fp4_status scale2_pair(const fp4_ckpt *c, const char *name, float v, fp4_scalars *sc, fp4_error *err) {
    float other;
    int h = fp4_exact_get(c, name, "scale2_div", &other, err);
    if (h < 0) return FP4_ERR_SCALE2;
    return fp4_fill_pair(c, name, v, 1, h, other, &sc->s2_mul, &sc->s2_div, &sc->s2_mul_exact,
                         &sc->s2_div_exact, err);
}

static fp4_status nvfp4_shape(const fp4_ckpt *c, const fp4_raw *p, int64_t mult, fp4_error *err) {
    if (p->ne[0] % mult)
        return fp4_fail(err, FP4_ERR_SHAPE, c->path, p->name, "nvfp4.n_in",
                        "n_in = %lld is not a multiple of %lld", (long long)p->ne[0], (long long)mult);
    if (p->ne[0] > FP4_MAX_N_IN)
        return fp4_fail(err, FP4_ERR_LIMIT, c->path, p->name, "nvfp4.n_in", "n_in = %lld is above %d",
                        (long long)p->ne[0], FP4_MAX_N_IN);
    return FP4_OK;
}

/* fp4lane's own layout */
static fp4_status read_native(const fp4_ckpt *c, fp4_read *out, const fp4_raw *p, fp4_error *err) {
    fp4_status st = nvfp4_shape(c, p, 16, err);
    if (st) return st;
    const int64_t n_in = p->ne[0], n_out = fp4_rows_of(p->ne, p->n_dims);
    const fp4_raw *s = find_sfx(c, p->name, SFX_SCALE), *s2 = find_sfx(c, p->name, SFX_SCALE2),
                  *in = find_sfx(c, p->name, SFX_INPUT);
    if (!s || !s2)
        return fp4_fail(err, FP4_ERR_COMPANION, c->path, p->name, "nvfp4.companion-missing",
                        "missing companion %s", s ? SFX_SCALE2 : SFX_SCALE);
    if ((st = scale_shape_ok(c, p, s, n_in, err))) return st;
    fp4_mtensor *mt = fp4_read_push(out, p);
    mt->t.data = NULL;
    float v;
    if ((st = fp4_check_scalar(c, s2, 0, "scale2", &v, err)) ||
        (st = scale2_pair(c, p->name, v, &mt->sc, err)))
        return st;
    if (in && ((st = fp4_check_scalar(c, in, 0, "input scale inverse", &v, err)) ||
               (st = input_pair(c, p->name, v, 0, &mt->sc, err))))
        return st;
    if ((st = fp4_check_scale_bytes(c, p->name, s->data, n_out, n_in / 16, err))) return st;
    mt->t.nvfp4 =
        (fp4_nvfp4_view){p->data, s->data, mt->sc.s2_mul, mt->sc.in_div, n_out, n_in, FP4_PACK_CANONICAL};
    return FP4_OK;
}

/* rows r0..r1 of a type-40 tensor into canonical rows (each row on its own: any split gives the
 * same bytes) */
typedef struct unpack_job {
    const uint8_t *blocks;
    int64_t n_in;
    uint8_t *payload, *scales;
} unpack_job;

static void unpack_rows(void *ctx, int64_t r0, int64_t r1) {
    const unpack_job *j = ctx;
    for (int64_t r = r0; r < r1; r++)
        fp4_ggml_unpack_row(j->blocks + r * (j->n_in / 64) * 36, j->n_in, j->payload + r * (j->n_in / 2),
                            j->scales + r * (j->n_in / 16));
}

/* threads for a repack of this many bytes: one per 16 MiB, at most one per core and 8 (the
 * repack is a memory pass; a small tensor is not worth a thread) */
static int unpack_threads(size_t bytes) {
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int64_t t = (int64_t)(bytes >> 24) + 1;
    if (t > cores) t = cores;
    return t < 1 ? 1 : t > 8 ? 8 : (int)t;
}

/* The blocks of n_out rows into mt's view: repacked into canonical rows once, at load; with
 * FP4_LOAD_DEFER_REPACK, checked in place and left as the file's blocks (the CUDA upload repacks on
 * the device) */
static fp4_status ggml_view(const fp4_ckpt *c, const fp4_read *out, fp4_mtensor *mt, const uint8_t *blocks,
                            int64_t n_out, int64_t n_in, fp4_error *err) {
    fp4_status st;
    const char *name = mt->t.name;
    if (out->flags & FP4_LOAD_DEFER_REPACK) { /* the same checks, the file's own blocks (FP4_PACK_GGML64) */
        if ((st = fp4_check_ggml_scale_bytes(c, name, blocks, n_out, n_in, err))) return st;
        mt->t.nvfp4 =
            (fp4_nvfp4_view){blocks, NULL, mt->sc.s2_mul, mt->sc.in_div, n_out, n_in, FP4_PACK_GGML64};
        return FP4_OK;
    }
    const size_t pay = (size_t)(n_out * (n_in / 2)), scl = (size_t)(n_out * (n_in / 16));
    mt->owned = malloc(pay + scl + 1);
    if (!mt->owned) return fp4_fail(err, FP4_ERR_NOMEM, c->path, name, "alloc", "out of memory");
    unpack_job job = {blocks, n_in, mt->owned, mt->owned + pay};
    if ((st = fp4_parallel_rows(n_out, unpack_threads(pay + scl), unpack_rows, &job)))
        return fp4_fail(err, st, c->path, name, "ggml.repack", "repack failed");
    if ((st = fp4_check_scale_bytes(c, name, mt->owned + pay, n_out, n_in / 16, err))) return st;
    mt->t.nvfp4 = (fp4_nvfp4_view){mt->owned, mt->owned + pay,   mt->sc.s2_mul, mt->sc.in_div, n_out,
                                   n_in,      FP4_PACK_CANONICAL};
    return FP4_OK;
}

/* value e of a per-expert F32 [E] sidecar (llama.cpp's blk.L.ffn_X_exps.scale / .input_scale) */
static fp4_status vec_elem(const fp4_ckpt *c, const fp4_raw *r, int64_t E, int64_t e, const char *what,
                           float *v, fp4_error *err) {
    if (r->type != FP4_TYPE_F32)
        return fp4_fail(err, FP4_ERR_DTYPE, c->path, r->name, "nvfp4.companion-dtype", "%s must be F32",
                        what);
    if (r->n_dims != 1 || r->ne[0] != E || r->nbytes != 4 * (uint64_t)E)
        return fp4_fail(err, FP4_ERR_SHAPE, c->path, r->name, "nvfp4.companion-shape",
                        "%s of a 3-D type-40 tensor must be F32 [%lld] (one per expert, as llama.cpp's)",
                        what, (long long)E);
    *v = fp4_rd_lef32(r->data + 4 * e);
    if (!fp4_scalar_ok(*v))
        return fp4_fail(err, FP4_ERR_SCALE2, c->path, r->name,
                        strstr(what, "input") ? "nvfp4.input-scale" : "nvfp4.scale2",
                        "%s of expert %lld is %g: must be finite, positive and normal", what, (long long)e,
                        (double)*v);
    return FP4_OK;
}

/* A 3-D type-40 tensor is llama.cpp's experts [n_in, n_out, E] (ggml_moe.c): slab e becomes the
 * logical 2-D tensor "<stem>.e.weight" (stem: the name without .weight) with the e-th values of
 * the F32 [E] .scale / .input_scale sidecars (absent .scale: 1.0 each) */
static fp4_status read_ggml_experts(const fp4_ckpt *c, fp4_read *out, const fp4_raw *p, const char *base,
                                    const fp4_raw *s2, const fp4_raw *in, fp4_error *err) {
    const int64_t n_in = p->ne[0], rows = p->ne[1], E = p->ne[2];
    if (E > FP4_GGUF_MAX_EXPERTS) /* E >= 1: the GGUF parser's gguf.tensor.dim */
        return fp4_fail(err, FP4_ERR_LIMIT, c->path, p->name, "ggml.experts", "%lld experts: above %d",
                        (long long)E, FP4_GGUF_MAX_EXPERTS);
    const uint64_t slab = (uint64_t)rows * (uint64_t)(n_in / 64) * 36;
    fp4_status st = FP4_OK;
    for (int64_t e = 0; e < E && !st; e++) {
        fp4_mtensor *mt = fp4_read_push(out, p);
        const size_t len = strlen(base) + 32;
        if (!(mt->name_owned = malloc(len)))
            return fp4_fail(err, FP4_ERR_NOMEM, c->path, p->name, "alloc", "out of memory");
        snprintf(mt->name_owned, len, "%s.%lld%s", base, (long long)e,
                 strcmp(base, p->name) ? ".weight" : "");
        mt->t.name = mt->name_owned;
        mt->t.type = FP4_TYPE_NVFP4_E2M1;
        mt->t.n_dims = 2;
        mt->t.ne[2] = 1;
        mt->t.data = NULL;
        mt->t.nbytes = slab;
        float v = 1.0f;
        if (s2 && (st = vec_elem(c, s2, E, e, "scale2 (.scale)", &v, err))) return st;
        if ((st = scale2_pair(c, mt->t.name, v, &mt->sc, err))) return st;
        if (in && ((st = vec_elem(c, in, E, e, "input scale (.input_scale)", &v, err)) ||
                   (st = input_pair(c, mt->t.name, v, 1, &mt->sc, err))))
            return st;
        st = ggml_view(c, out, mt, p->data + (uint64_t)e * slab, rows, n_in, err);
    }
    return st;
}

/* llama.cpp's type 40 with its .scale / .input_scale sidecars */
static fp4_status read_ggml(const fp4_ckpt *c, fp4_read *out, const fp4_raw *p, fp4_error *err) {
    fp4_status st = nvfp4_shape(c, p, 64, err);
    if (st) return st;
    const int64_t n_in = p->ne[0], n_out = fp4_rows_of(p->ne, p->n_dims);
    char base[FP4_MAX_NAME + 8];
    snprintf(base, sizeof base, "%s", p->name);
    if (fp4_ends_with(base, ".weight")) base[strlen(base) - 7] = 0;
    const fp4_raw *s2 = find_sfx(c, base, ".scale"), *in = find_sfx(c, base, ".input_scale");
    if (strcmp(base, p->name) && (find_sfx(c, p->name, ".scale") || find_sfx(c, p->name, ".input_scale")))
        return fp4_fail(err, FP4_ERR_COMPANION, c->path, p->name, "ggml.scale-naming",
                        "sidecar named '%s.scale': only '%s.scale' is accepted", p->name, base);
    if (p->n_dims == 3) return read_ggml_experts(c, out, p, base, s2, in, err);
    fp4_mtensor *mt = fp4_read_push(out, p);
    mt->t.type = FP4_TYPE_NVFP4_E2M1;
    mt->t.data = NULL;
    float v = 1.0f; /* absent .scale means 1.0 (llama.cpp's convention) */
    if (s2 && (st = fp4_check_scalar(c, s2, 0, "scale2 (.scale)", &v, err))) return st;
    if ((st = scale2_pair(c, p->name, v, &mt->sc, err))) return st;
    if (in && ((st = fp4_check_scalar(c, in, 0, "input scale (.input_scale)", &v, err)) ||
               (st = input_pair(c, p->name, v, 1, &mt->sc, err))))
        return st;
    return ggml_view(c, out, mt, p->data, n_out, n_in, err);
}

int64_t fp4_read_gguf_cap(const fp4_ckpt *c) {
    int64_t n = 0;
    for (int64_t i = 0; i < c->n; i++) {
        const fp4_raw *r = &c->t[i];
        const int experts = r->type == FP4_TYPE_GGML_NVFP4 && r->n_dims == 3 && r->ne[2] >= 1 &&
                            r->ne[2] <= FP4_GGUF_MAX_EXPERTS;
        n += experts ? r->ne[2] : 1;
    }
    return n;
}

/* Is r a companion of some payload? 1: consumed by it; 0: plain; <0 error (orphan). */
static int companion_of(const fp4_ckpt *c, const fp4_raw *r, int ggml, fp4_error *err) {
    static const char *const native[] = {SFX_SCALE, SFX_SCALE2, SFX_INPUT};
    static const char *const side[] = {".scale", ".input_scale"};
    char base[FP4_MAX_NAME + 16];
    for (int i = 0; i < 3; i++) {
        if (!fp4_ends_with(r->name, native[i])) continue;
        snprintf(base, sizeof base, "%.*s", (int)(strlen(r->name) - strlen(native[i])), r->name);
        const fp4_raw *p = fp4_ckpt_find(c, base);
        if (p && p->type == FP4_TYPE_NVFP4_E2M1) return 1;
        fp4_fail(err, FP4_ERR_COMPANION, c->path, r->name, "nvfp4.orphan-companion",
                 "companion without an NVFP4 tensor '%s'", base);
        return -1;
    }
    for (int i = 0; ggml && i < 2; i++) {
        if (!fp4_ends_with(r->name, side[i])) continue;
        snprintf(base, sizeof base, "%.*s.weight", (int)(strlen(r->name) - strlen(side[i])), r->name);
        const fp4_raw *p = fp4_ckpt_find(c, base);
        if (!p) {
            base[strlen(base) - 7] = 0;
            p = fp4_ckpt_find(c, base);
        }
        if (p && p->type == FP4_TYPE_GGML_NVFP4) return 1;
        fp4_fail(err, FP4_ERR_COMPANION, c->path, r->name, "nvfp4.orphan-companion",
                 "sidecar without a type-40 tensor");
        return -1;
    }
    return 0;
}

fp4_status fp4_read_gguf(const fp4_ckpt *c, fp4_read *out, fp4_error *err) {
    fp4_lane_keys *k = &out->keys;
    fp4_status st;
    if ((st = lane_key(c, "fp4lane.weight_precision", fp4_wp_names, FP4_WP_COUNT_, &k->has_wp, &k->wp, err)))
        return st;
    if ((st = lane_key(c, "fp4lane.activation_precision", fp4_ap_names, FP4_AP_COUNT_, &k->has_ap, &k->ap,
                       err)))
        return st;
    const fp4_raw *n1024 = NULL, *n40 = NULL;
    for (int64_t i = 0; i < c->n; i++) {
        if (c->t[i].type == FP4_TYPE_NVFP4_E2M1 && !n1024) n1024 = &c->t[i];
        if (c->t[i].type == FP4_TYPE_GGML_NVFP4 && !n40) n40 = &c->t[i];
    }
    if (n1024 && n40)
        return fp4_fail(err, FP4_ERR_LANE, c->path, n40->name, "lane.mixed-layouts",
                        "both fp4lane NVFP4 (%s) and ggml type 40 tensors in one file", n1024->name);
    out->layout = n1024 ? FP4_LAYOUT_GGUF : n40 ? FP4_LAYOUT_GGUF_GGML : FP4_LAYOUT_NONE;
    k->strict = out->layout == FP4_LAYOUT_GGUF;
    for (int64_t i = 0; i < c->n; i++) {
        const fp4_raw *r = &c->t[i];
        if (r->type == FP4_TYPE_NVFP4_E2M1) st = read_native(c, out, r, err);
        else if (r->type == FP4_TYPE_GGML_NVFP4) st = read_ggml(c, out, r, err);
        else {
            int comp = companion_of(c, r, n40 != NULL, err);
            if (comp < 0) return FP4_ERR_COMPANION;
            if (comp) continue;
            if (r->type == FP4_TYPE_F8_E4M3FN)
                return fp4_fail(err, FP4_ERR_UNSUPPORTED, c->path, r->name, "lane.type",
                                "F8_E4M3FN outside an NVFP4 companion (FP8 weights are not a lane)");
            fp4_mtensor *mt = fp4_read_push(out, r);
            char key[FP4_MAX_NAME + 32];
            int flag = 0;
            snprintf(key, sizeof key, "fp4lane.scalar.%s", r->name); /* a safetensors rank-0 tensor */
            if (!fp4_gguf_get_bool(c->gguf, fp4_gguf_key_index(c->gguf, key), &flag) && flag &&
                r->n_dims == 1 && r->ne[0] == 1)
                mt->t.n_dims = 0;
        }
        if (st) return st;
    }
    return FP4_OK;
}
