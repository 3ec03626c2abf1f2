/* layout_plan.c — what a target layout's file holds: the tensor list (names, types, shapes,
 * order) and the metadata, derived from logical tensors. No bytes are touched here. */
#include "layout_impl.h"
#include "io/st_impl.h"
#include <stdio.h>
#include <stdlib.h>

static plan_entry *add(plan *p, fp4_error *err) {
    if (p->n == p->cap) {
        int64_t nc = p->cap ? p->cap * 2 : 64;
        plan_entry *e = realloc(p->e, (size_t)nc * sizeof *e);
        if (!e) { fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory"); return NULL; }
        p->e = e;
        p->cap = nc;
    }
    plan_entry *e = &p->e[p->n++];
    memset(e, 0, sizeof *e);
    e->st_dtype = -1;
    e->gguf_type = -1;
    for (int i = 0; i < FP4_MAX_DIMS; i++) e->ne[i] = 1;
    return e;
}

static plan_kv *add_kv(plan *p) {
    if (p->n_kv == p->kv_cap) {
        int64_t nc = p->kv_cap ? p->kv_cap * 2 : 32;
        plan_kv *k = realloc(p->kv, (size_t)nc * sizeof *k);
        if (!k) return NULL;
        p->kv = k;
        p->kv_cap = nc;
    }
    plan_kv *k = &p->kv[p->n_kv++];
    memset(k, 0, sizeof *k);
    return k;
}

plan_kv *fp4_plan_kv_add(plan *p) { return add_kv(p); }
plan_entry *fp4_plan_add(plan *p, fp4_error *err) { return add(p, err); }

fp4_status fp4_plan_kv_str(plan *p, const char *key, const char *s) {
    plan_kv *k = add_kv(p);
    if (!k || !(k->s = strdup(s))) return FP4_ERR_NOMEM;
    snprintf(k->key, sizeof k->key, "%s", key);
    return FP4_OK;
}

static fp4_status kv_exact(plan *p, const char *name, const char *what, float v) {
    char key[FP4_MAX_NAME + 64];
    snprintf(key, sizeof key, "fp4lane.exact.%s.%s", name, what);
    if (p->is_gguf) {
        plan_kv *k = add_kv(p);
        if (!k) return FP4_ERR_NOMEM;
        snprintf(k->key, sizeof k->key, "%s", key);
        k->is_f32 = 1;
        k->f = v;
        return FP4_OK;
    }
    char buf[64];
    snprintf(buf, sizeof buf, "%a", (double)v);
    return fp4_plan_kv_str(p, key, buf);
}

/* The other form of a scalar is recorded when it is exact and a reader would not recompute it. */
static fp4_status maybe_exact(plan *p, const char *name, const char *what, float native, float other,
                              int other_exact) {
    if (!other_exact || 1.0f / native == other) return FP4_OK;
    return kv_exact(p, name, what, other);
}

static void set_dims(plan_entry *e, const fp4_tensor *t, int64_t ne0) {
    e->n_dims = t->n_dims;
    memcpy(e->ne, t->ne, sizeof e->ne);
    e->ne[0] = ne0;
}

static uint64_t elems(const plan_entry *e) {
    uint64_t n = 1;
    for (int i = 0; i < FP4_MAX_DIMS; i++) n *= (uint64_t)e->ne[i];
    return n;
}

static fp4_status scalar_entry(plan *p, const char *name, int64_t src, float v, int rank0, fp4_error *err) {
    plan_entry *e = add(p, err);
    if (!e) return FP4_ERR_NOMEM;
    snprintf(e->name, sizeof e->name, "%s", name);
    e->src = src;
    e->part = PART_SCALAR;
    e->gguf_type = FP4_TYPE_F32;
    e->st_dtype = FP4_ST_F32;
    e->n_dims = rank0 ? 0 : 1;
    e->nbytes = 4;
    e->value = v;
    return FP4_OK;
}

static fp4_status nvfp4_gguf(plan *p, const fp4_tensor *t, const fp4_scalars *sc, int64_t i, fp4_error *err) {
    const int64_t n_in = t->ne[0], n_out = t->nvfp4.n_out;
    char nm[FP4_MAX_NAME + 48];
    plan_entry *e;
    if (!(e = add(p, err))) return FP4_ERR_NOMEM;
    snprintf(e->name, sizeof e->name, "%s", t->name);
    e->src = i, e->part = PART_PAYLOAD, e->gguf_type = FP4_TYPE_NVFP4_E2M1,
    e->nbytes = (uint64_t)(n_out * n_in / 2);
    set_dims(e, t, n_in);
    if (!(e = add(p, err))) return FP4_ERR_NOMEM;
    snprintf(e->name, sizeof e->name, "%s.nvfp4_scale", t->name);
    e->src = i, e->part = PART_SCALES, e->gguf_type = FP4_TYPE_F8_E4M3FN,
    e->nbytes = (uint64_t)(n_out * n_in / 16);
    set_dims(e, t, n_in / 16);
    snprintf(nm, sizeof nm, "%s.nvfp4_scale2", t->name);
    fp4_status st = scalar_entry(p, nm, i, sc->s2_mul, 0, err);
    if (!st) st = maybe_exact(p, t->name, "scale2_div", sc->s2_mul, sc->s2_div, sc->s2_div_exact);
    if (!st && sc->in_div != 0.0f) {
        snprintf(nm, sizeof nm, "%s.nvfp4_input_scale_inv", t->name);
        st = scalar_entry(p, nm, i, sc->in_div, 0, err);
        if (!st) st = maybe_exact(p, t->name, "input_scale_mul", sc->in_div, sc->in_mul, sc->in_mul_exact);
    }
    return st;
}

static fp4_status nvfp4_ggml(plan *p, const fp4_tensor *t, const fp4_scalars *sc, int64_t i, fp4_error *err) {
    const int64_t n_in = t->ne[0];
    if (n_in % 64)
        return fp4_fail(err, FP4_ERR_SHAPE, NULL, t->name, "ggml.n_in",
                        "llama.cpp's NVFP4 needs n_in %% 64 == 0 (n_in = %lld)", (long long)n_in);
    char base[FP4_MAX_NAME + 8], nm[FP4_MAX_NAME + 48];
    snprintf(base, sizeof base, "%s", t->name);
    if (fp4_ends_with(base, ".weight")) base[strlen(base) - 7] = 0;
    plan_entry *e = add(p, err);
    if (!e) return FP4_ERR_NOMEM;
    snprintf(e->name, sizeof e->name, "%s", t->name);
    e->src = i, e->part = PART_GGML, e->gguf_type = FP4_TYPE_GGML_NVFP4;
    e->nbytes = (uint64_t)(t->nvfp4.n_out * (n_in / 64) * 36);
    set_dims(e, t, n_in);
    fp4_status st = FP4_OK;
    if (sc->s2_mul != 1.0f) { /* llama.cpp: an absent .scale means 1.0 */
        snprintf(nm, sizeof nm, "%s.scale", base);
        st = scalar_entry(p, nm, i, sc->s2_mul, 0, err);
    }
    if (!st) st = maybe_exact(p, t->name, "scale2_div", sc->s2_mul, sc->s2_div, sc->s2_div_exact);
    if (!st && sc->in_div != 0.0f) {
        snprintf(nm, sizeof nm, "%s.input_scale", base);
        st = scalar_entry(p, nm, i, sc->in_mul, 0, err);
        if (!st) st = maybe_exact(p, t->name, "input_scale_div", sc->in_mul, sc->in_div, sc->in_div_exact);
    }
    return st;
}

static fp4_status nvfp4_hf(plan *p, const fp4_tensor *t, const fp4_scalars *sc, int64_t i, fp4_error *err) {
    const int ct = p->layout == FP4_LAYOUT_CT;
    const int64_t n_in = t->ne[0];
    if (!fp4_ends_with(t->name, ".weight"))
        return fp4_fail(err, FP4_ERR_UNSUPPORTED, NULL, t->name, "hf.name",
                        "an NVFP4 weight for %s must be named <module>.weight", fp4_layout_name(p->layout));
    char mod[FP4_MAX_NAME + 8], nm[FP4_MAX_NAME + 48];
    snprintf(mod, sizeof mod, "%.*s", (int)(strlen(t->name) - 7), t->name);
    plan_entry *e = add(p, err);
    if (!e) return FP4_ERR_NOMEM;
    snprintf(e->name, sizeof e->name, "%s%s", mod, ct ? ".weight_packed" : ".weight");
    e->src = i, e->part = PART_PAYLOAD, e->st_dtype = FP4_ST_U8,
    e->nbytes = (uint64_t)(t->nvfp4.n_out * n_in / 2);
    set_dims(e, t, n_in / 2);
    if (!(e = add(p, err))) return FP4_ERR_NOMEM;
    snprintf(e->name, sizeof e->name, "%s.weight_scale", mod);
    e->src = i, e->part = PART_SCALES, e->st_dtype = FP4_ST_F8_E4M3,
    e->nbytes = (uint64_t)(t->nvfp4.n_out * n_in / 16);
    set_dims(e, t, n_in / 16);
    fp4_status st;
    if (ct) {
        snprintf(nm, sizeof nm, "%s.weight_global_scale", mod);
        st = scalar_entry(p, nm, i, sc->s2_div, 0, err);
        if (!st) st = maybe_exact(p, t->name, "scale2_mul", sc->s2_div, sc->s2_mul, sc->s2_mul_exact);
        if (!st && sc->in_div != 0.0f) {
            snprintf(nm, sizeof nm, "%s.input_global_scale", mod);
            st = scalar_entry(p, nm, i, sc->in_div, 0, err);
            if (!st)
                st = maybe_exact(p, t->name, "input_scale_mul", sc->in_div, sc->in_mul, sc->in_mul_exact);
        }
        return st;
    }
    snprintf(nm, sizeof nm, "%s.weight_scale_2", mod);
    st = scalar_entry(p, nm, i, sc->s2_mul, 1, err);
    if (!st) st = maybe_exact(p, t->name, "scale2_div", sc->s2_mul, sc->s2_div, sc->s2_div_exact);
    if (!st && sc->in_div != 0.0f) {
        snprintf(nm, sizeof nm, "%s.input_scale", mod);
        st = scalar_entry(p, nm, i, sc->in_mul, 1, err);
        if (!st) st = maybe_exact(p, t->name, "input_scale_div", sc->in_mul, sc->in_div, sc->in_div_exact);
    }
    return st;
}

static fp4_status plain(plan *p, const fp4_tensor *t, int64_t i, fp4_error *err) {
    plan_entry *e = add(p, err);
    if (!e) return FP4_ERR_NOMEM;
    snprintf(e->name, sizeof e->name, "%s", t->name);
    e->src = i, e->part = PART_RAW, e->nbytes = t->nbytes;
    set_dims(e, t, t->ne[0]);
    if (p->is_gguf) {
        if ((int)t->type < 0 || !fp4_type_get(t->type))
            return fp4_fail(err, FP4_ERR_UNSUPPORTED, NULL, t->name, "gguf.dtype",
                            "this dtype has no GGUF type");
        e->gguf_type = t->type;
        if (t->n_dims == 0) { /* GGUF has no rank 0: [1], with a marker for the way back */
            e->n_dims = 1;
            plan_kv *k = add_kv(p);
            if (!k) return FP4_ERR_NOMEM;
            snprintf(k->key, sizeof k->key, "fp4lane.scalar.%s", t->name);
            k->is_bool = 1;
        }
        return FP4_OK;
    }
    e->st_dtype = t->st_dtype >= 0 ? t->st_dtype : fp4_type_to_st(t->type);
    if (e->st_dtype < 0)
        return fp4_fail(err, FP4_ERR_UNSUPPORTED, NULL, t->name, "hf.dtype",
                        "type %s has no safetensors dtype",
                        fp4_type_get(t->type) ? fp4_type_get(t->type)->name : "?");
    return FP4_OK;
}

static int cmp_st(const void *a, const void *b) { /* safetensors' canonical order */
    const plan_entry *x = a, *y = b;
    int rx = fp4_st_dtype_rank((fp4_st_dtype)x->st_dtype), ry = fp4_st_dtype_rank((fp4_st_dtype)y->st_dtype);
    if (rx != ry) return ry - rx;
    return strcmp(x->name, y->name);
}

fp4_status fp4_plan_build(const fp4_wsrc *src, fp4_layout layout, plan *p, fp4_error *err) {
    memset(p, 0, sizeof *p);
    p->layout = layout;
    p->is_gguf = layout == FP4_LAYOUT_GGUF || layout == FP4_LAYOUT_GGUF_GGML || layout == FP4_LAYOUT_NONE;
    fp4_status st = FP4_OK;
    for (int64_t i = 0; i < src->n && !st; i++) {
        const fp4_tensor *t = src->tensor(src->ctx, i);
        if (t->type != FP4_TYPE_NVFP4_E2M1) st = plain(p, t, i, err);
        else if (layout == FP4_LAYOUT_NONE)
            st = fp4_fail(err, FP4_ERR_UNSUPPORTED, NULL, t->name, "layout.none",
                          "an NVFP4 tensor needs an NVFP4 layout");
        else if (layout == FP4_LAYOUT_GGUF) st = nvfp4_gguf(p, t, src->scalars(src->ctx, i), i, err);
        else if (layout == FP4_LAYOUT_GGUF_GGML) st = nvfp4_ggml(p, t, src->scalars(src->ctx, i), i, err);
        else st = nvfp4_hf(p, t, src->scalars(src->ctx, i), i, err);
    }
    if (st) return st;
    for (int64_t i = 0; i < p->n; i++) {
        if (p->e[i].part == PART_SCALAR || p->e[i].part == PART_GGML || p->e[i].part == PART_RAW) continue;
        if (elems(&p->e[i]) == 0)
            return fp4_fail(err, FP4_ERR_SHAPE, NULL, p->e[i].name, "plan.empty", "empty tensor");
    }
    if (layout == FP4_LAYOUT_GGUF_GGML && (st = fp4_ggml_arch_plan(src, p, err))) return st;
    /* what llama.cpp itself can open */
    for (int64_t i = 0; layout == FP4_LAYOUT_GGUF_GGML && i < p->n; i++) {
        if (strlen(p->e[i].name) >= 64)
            return fp4_fail(err, FP4_ERR_UNSUPPORTED, NULL, p->e[i].name, "ggml.name",
                            "llama.cpp refuses tensor names of 64 bytes or more");
        if (p->e[i].gguf_type >= 1024)
            return fp4_fail(err, FP4_ERR_UNSUPPORTED, NULL, p->e[i].name, "ggml.dtype",
                            "llama.cpp has no type for this tensor (fp4lane type %d)", p->e[i].gguf_type);
    }
    if (!p->is_gguf && (st = fp4_ggml_arch_unplan(src, p, err))) return st;
    if (!p->is_gguf) qsort(p->e, (size_t)p->n, sizeof *p->e, cmp_st);
    for (int64_t i = 0; i < p->n; i++) p->total += p->e[i].nbytes;
    return FP4_OK;
}

void fp4_plan_free(plan *p) {
    for (int64_t i = 0; i < p->n; i++) free(p->e[i].stack), free(p->e[i].stack_values);
    for (int64_t i = 0; i < p->n_kv; i++) free(p->kv[i].s);
    free(p->kv);
    free(p->e);
    memset(p, 0, sizeof *p);
}
