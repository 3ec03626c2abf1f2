/* loader.c — the fail-closed loader (SPEC §7–8). Reads any container through checkpoint.c,
 * recognizes the layout, folds every NVFP4 weight and its companions into one logical tensor,
 * and validates all of it before a handle exists: companions (present, dtype, exact shape), every
 * scale byte (no 0x7F/0xFF, no sign bit), scale2 and input scales (finite, positive, normal), the
 * input scale on all NVFP4 tensors or none, and the lane metadata paired with the tensor types in
 * both directions. Each refusal names the file, the tensor and a stable rule id. */
#include "model_impl.h"
#include "loader_impl.h"
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static const char *const layout_names[FP4_LAYOUT_COUNT_] = {"none", "gguf", "gguf-ggml", "modelopt",
                                                             "compressed-tensors"};
static const char *const wp_names[FP4_WP_COUNT_] = {"nvfp4", "q4_k", "f16", "bf16", "f32"};
static const char *const ap_names[FP4_AP_COUNT_] = {"a16", "nvfp4"};

const char *fp4_layout_name(fp4_layout l) { return (unsigned)l < FP4_LAYOUT_COUNT_ ? layout_names[l] : "?"; }
const char *fp4_weight_precision_name(fp4_weight_precision p) { return (unsigned)p < FP4_WP_COUNT_ ? wp_names[p] : "?"; }
const char *fp4_act_precision_name(fp4_act_precision p) { return (unsigned)p < FP4_AP_COUNT_ ? ap_names[p] : "?"; }

fp4_status fp4_layout_from_name(const char *name, fp4_layout *out) {
    if (!name || !out) return FP4_ERR_INVALID_ARG;
    for (int i = 0; i < FP4_LAYOUT_COUNT_; i++)
        if (!strcmp(name, layout_names[i])) { *out = (fp4_layout)i; return FP4_OK; }
    if (!strcmp(name, "ct")) { *out = FP4_LAYOUT_CT; return FP4_OK; }
    return FP4_ERR_INVALID_ARG;
}

int fp4_lane_parse(const char *s, const char *const *names, int n) {
    for (int i = 0; i < n; i++)
        if (!strcmp(s, names[i])) return i;
    return -1;
}
const char *const *fp4_wp_names(void) { return wp_names; }
const char *const *fp4_ap_names(void) { return ap_names; }

/* ---- shared checks ---- */

int fp4_scalar_ok(float v) { return isfinite(v) && v > 0.0f && isnormal(v); }

/* A per-tensor F32 scalar companion: dtype, one element, finite positive normal value. */
fp4_status fp4_check_scalar(const fp4_ckpt *c, const fp4_raw *r, int allow_rank0, const char *what, float *v,
                            fp4_error *err) {
    if (r->type != FP4_TYPE_F32)
        return fp4_fail(err, FP4_ERR_DTYPE, c->path, r->name, "nvfp4.companion-dtype", "%s must be F32", what);
    int shape_ok = r->n_elements == 1 && r->nbytes == 4 && (r->n_dims == 1 || (allow_rank0 && r->n_dims == 0));
    if (!shape_ok)
        return fp4_fail(err, FP4_ERR_SHAPE, c->path, r->name, "nvfp4.companion-shape",
                        "%s must be a single F32 (shape %s)", what, allow_rank0 ? "[] or [1]" : "[1]");
    *v = fp4_rd_lef32(r->data);
    if (!fp4_scalar_ok(*v))
        return fp4_fail(err, FP4_ERR_SCALE2, c->path, r->name, strstr(what, "input") ? "nvfp4.input-scale" : "nvfp4.scale2",
                        "%s is %g: must be finite, positive and normal", what, (double)*v);
    return FP4_OK;
}

/* Every scale byte of a tensor: no NaN (0x7F/0xFF), no sign bit. stride: bytes between scales
 * (1 for a plain scale array, 36 for ggml blocks with 4 scales each handled by the caller). */
fp4_status fp4_check_scale_bytes(const fp4_ckpt *c, const char *name, const uint8_t *s, int64_t n_rows,
                                 int64_t n_groups, fp4_error *err) {
    for (int64_t r = 0; r < n_rows; r++) {
        const uint8_t *row = s + r * n_groups;
        for (int64_t g = 0; g < n_groups; g++) {
            uint8_t b = row[g];
            if ((b & 0x7F) == 0x7F)
                return fp4_fail(err, FP4_ERR_NAN_SCALE, c->path, name, "nvfp4.scale-nan",
                                "scale byte 0x%02X (E4M3 NaN) at row %lld, group %lld", b, (long long)r, (long long)g);
            if (b & 0x80)
                return fp4_fail(err, FP4_ERR_NAN_SCALE, c->path, name, "nvfp4.scale-negative",
                                "scale byte 0x%02X has the sign bit set (row %lld, group %lld)", b, (long long)r,
                                (long long)g);
        }
    }
    return FP4_OK;
}

/* exact reciprocal forms kept by fp4lane's writers (see layout_write.c) */
fp4_status fp4_check_exact_pair(const fp4_ckpt *c, const char *name, float mul, float div, fp4_error *err) {
    if (!fp4_scalar_ok(div))
        return fp4_fail(err, FP4_ERR_SCALE2, c->path, name, "nvfp4.exact", "exact reciprocal %g is not a finite positive normal",
                        (double)div);
    double rel = fabs((double)mul * (double)div - 1.0);
    if (rel > 0x1p-20)
        return fp4_fail(err, FP4_ERR_SCALE2, c->path, name, "nvfp4.exact",
                        "exact reciprocal %a disagrees with the stored scale %a", (double)div, (double)mul);
    return FP4_OK;
}

/* ---- the model handle ---- */

static int cmp_mt(const void *a, const void *b) {
    return strcmp(((const fp4_mtensor *)a)->t.name, ((const fp4_mtensor *)b)->t.name);
}

fp4_mtensor *fp4_model_push(fp4_model *m, int64_t cap) {
    if (m->n >= cap) return NULL;
    fp4_mtensor *t = &m->t[m->n++];
    memset(t, 0, sizeof *t);
    t->t.st_dtype = -1;
    return t;
}

void fp4_mt_plain(fp4_mtensor *mt, const fp4_raw *r) {
    mt->t.name = r->name;
    mt->t.type = (fp4_type)r->type;
    mt->t.n_dims = r->n_dims;
    memcpy(mt->t.ne, r->ne, sizeof r->ne);
    mt->t.data = r->data;
    mt->t.nbytes = r->nbytes;
    mt->t.st_dtype = r->st_dtype;
}

static fp4_status finish_lane(fp4_model *m, int has_key_wp, int key_wp, int has_key_ap, int key_ap, int strict_keys,
                              fp4_error *err) {
    const char *path = m->ck->path;
    int64_t n_nv = 0, n_in = 0, n_q4 = 0, n_bf = 0, n_f16 = 0;
    const char *first_nv = NULL, *first_with = NULL, *first_without = NULL;
    for (int64_t i = 0; i < m->n; i++) {
        const fp4_tensor *t = &m->t[i].t;
        if (t->type == FP4_TYPE_NVFP4_E2M1) {
            n_nv++;
            if (!first_nv) first_nv = t->name;
            if (t->nvfp4.input_scale_inv != 0.0f) { n_in++; if (!first_with) first_with = t->name; }
            else if (!first_without) first_without = t->name;
        } else if (t->n_dims >= 2) {
            n_q4 += t->type == FP4_TYPE_Q4_K || t->type == FP4_TYPE_Q6_K;
            n_bf += t->type == FP4_TYPE_BF16;
            n_f16 += t->type == FP4_TYPE_F16;
        }
    }
    if (n_in && n_in != n_nv)
        return fp4_fail(err, FP4_ERR_COMPANION, path, first_without, "nvfp4.input-scale-partial",
                        "input scale on %lld of %lld NVFP4 tensors (e.g. present on %s): all or none", (long long)n_in,
                        (long long)n_nv, first_with);
    if (n_nv && strict_keys && (!has_key_wp || !has_key_ap))
        return fp4_fail(err, FP4_ERR_LANE, path, first_nv, "lane.missing",
                        "NVFP4 tensors without fp4lane.weight_precision / fp4lane.activation_precision metadata");
    if (has_key_wp && (key_wp == FP4_WP_NVFP4) != (n_nv > 0))
        return fp4_fail(err, FP4_ERR_LANE, path, first_nv, "lane.pairing",
                        "fp4lane.weight_precision = %s but the file has %lld NVFP4 tensors", wp_names[key_wp], (long long)n_nv);
    if (has_key_wp && key_wp == FP4_WP_Q4_K && n_q4 == 0)
        return fp4_fail(err, FP4_ERR_LANE, path, NULL, "lane.pairing", "fp4lane.weight_precision = q4_k but no Q4_K tensor");
    fp4_act_precision derived = n_in ? FP4_AP_NVFP4 : FP4_AP_A16;
    if (has_key_ap && n_nv && (fp4_act_precision)key_ap != derived)
        return fp4_fail(err, FP4_ERR_LANE, path, derived == FP4_AP_NVFP4 ? first_with : first_nv, "lane.activation",
                        "fp4lane.activation_precision = %s but input scales are %s", ap_names[key_ap],
                        n_in ? "present" : "absent");
    if (has_key_ap && !n_nv && key_ap == FP4_AP_NVFP4)
        return fp4_fail(err, FP4_ERR_LANE, path, NULL, "lane.activation",
                        "fp4lane.activation_precision = nvfp4 without NVFP4 tensors");
    m->ap = n_nv ? derived : (has_key_ap ? (fp4_act_precision)key_ap : FP4_AP_A16);
    if (has_key_wp) m->wp = (fp4_weight_precision)key_wp;
    else m->wp = n_nv ? FP4_WP_NVFP4 : n_q4 ? FP4_WP_Q4_K : n_bf ? FP4_WP_BF16 : n_f16 ? FP4_WP_F16 : FP4_WP_F32;
    return FP4_OK;
}

fp4_status fp4_model_finish(fp4_model *m, int has_key_wp, int key_wp, int has_key_ap, int key_ap, int strict_keys,
                            fp4_error *err) {
    qsort(m->t, (size_t)m->n, sizeof *m->t, cmp_mt);
    for (int64_t i = 1; i < m->n; i++)
        if (!strcmp(m->t[i - 1].t.name, m->t[i].t.name))
            return fp4_fail(err, FP4_ERR_DUPLICATE, m->ck->path, m->t[i].t.name, "nvfp4.logical-dup",
                            "two tensors resolve to the same logical name");
    return finish_lane(m, has_key_wp, key_wp, has_key_ap, key_ap, strict_keys, err);
}

static fp4_status model_open(const char *path, const void *mem, size_t size, const fp4_load_opts *opts, fp4_model **out,
                             fp4_error *err) {
    fp4_error_clear(err);
    if ((!path && !mem) || !out) return FP4_ERR_INVALID_ARG;
    *out = NULL;
    fp4_model *m = calloc(1, sizeof *m);
    if (!m) return FP4_ERR_NOMEM;
    const uint64_t cap = opts ? opts->max_file_bytes : 0;
    fp4_status st = mem ? fp4_ckpt_open_memory(mem, size, path, cap, &m->ck, err) : fp4_ckpt_open(path, cap, &m->ck, err);
    if (!st) {
        m->t = calloc((size_t)m->ck->n + 1, sizeof *m->t);
        if (!m->t) st = fp4_fail(err, FP4_ERR_NOMEM, m->ck->path, NULL, "alloc", "out of memory");
    }
    if (!st) st = m->ck->is_gguf ? fp4_load_gguf(m, err) : fp4_load_hf(m, err);
    if (!st) st = fp4_quant_claims_check(m, err); /* what the checkpoint says vs what it holds */
    if (st) {
        fp4_model_close(m);
        return st;
    }
    *out = m;
    return FP4_OK;
}

fp4_status fp4_model_open(const char *path, const fp4_load_opts *opts, fp4_model **out, fp4_error *err) {
    return model_open(path, NULL, 0, opts, out, err);
}

fp4_status fp4_model_open_memory(const void *data, size_t size, const char *name, const fp4_load_opts *opts,
                                 fp4_model **out, fp4_error *err) {
    if (!data) return FP4_ERR_INVALID_ARG;
    return model_open(name ? name : "(memory)", data, size, opts, out, err);
}

void fp4_model_close(fp4_model *m) {
    if (!m) return;
    for (int64_t i = 0; i < m->n; i++) {
        free(m->t[i].owned);
        free(m->t[i].name_owned);
    }
    free(m->t);
    fp4_ckpt_close(m->ck);
    free(m);
}

fp4_layout fp4_model_layout(const fp4_model *m) { return m ? m->layout : FP4_LAYOUT_NONE; }
fp4_weight_precision fp4_model_weight_precision(const fp4_model *m) { return m ? m->wp : FP4_WP_F32; }
fp4_act_precision fp4_model_act_precision(const fp4_model *m) { return m ? m->ap : FP4_AP_A16; }
int64_t fp4_model_n_tensors(const fp4_model *m) { return m ? m->n : 0; }
const fp4_tensor *fp4_model_tensor(const fp4_model *m, int64_t i) {
    return (m && i >= 0 && i < m->n) ? &m->t[i].t : NULL;
}
const fp4_tensor *fp4_model_find(const fp4_model *m, const char *name) {
    if (!m || !name) return NULL;
    int64_t lo = 0, hi = m->n - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int r = strcmp(m->t[mid].t.name, name);
        if (!r) return &m->t[mid].t;
        if (r < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}
uint64_t fp4_model_file_bytes(const fp4_model *m) { return m ? m->ck->file_bytes : 0; }
const char *fp4_model_config_json(const fp4_model *m) { return m ? m->ck->config_json : NULL; }
const char *fp4_model_quant_config_json(const fp4_model *m) { return m ? m->ck->quant_config_json : NULL; }

int fp4_ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

fp4_status fp4_fill_pair(const fp4_ckpt *c, const char *name, float v, int is_mul, int have_other, float other,
                         float *mul, float *div, uint8_t *mul_exact, uint8_t *div_exact, fp4_error *err) {
    float recip = have_other ? other : 1.0f / v;
    if (have_other) {
        fp4_status st = is_mul ? fp4_check_exact_pair(c, name, v, other, err) : fp4_check_exact_pair(c, name, other, v, err);
        if (st) return st;
    } else if (!fp4_scalar_ok(recip)) {
        return fp4_fail(err, FP4_ERR_SCALE2, c->path, name, "nvfp4.scale2",
                        "scale %g has no finite normal reciprocal", (double)v);
    }
    *mul = is_mul ? v : recip;
    *div = is_mul ? recip : v;
    *mul_exact = (uint8_t)(is_mul || have_other);
    *div_exact = (uint8_t)(!is_mul || have_other);
    return FP4_OK;
}

int fp4_exact_get(const fp4_ckpt *c, const char *name, const char *what, float *v, fp4_error *err) {
    char key[FP4_MAX_NAME + 64];
    snprintf(key, sizeof key, "fp4lane.exact.%s.%s", name, what);
    if (c->is_gguf) {
        int64_t k = fp4_gguf_find_key(c->gguf, key);
        if (k < 0) return 0;
        if (fp4_gguf_get_f32(c->gguf, k, v)) {
            fp4_fail(err, FP4_ERR_DTYPE, c->path, name, "nvfp4.exact", "%s must be a float32", key);
            return -1;
        }
        return 1;
    }
    const char *s = fp4_ckpt_meta(c, key);
    if (!s) return 0;
    char *end = NULL;
    *v = strtof(s, &end);
    if (!end || *end || end == s) {
        fp4_fail(err, FP4_ERR_FORMAT, c->path, name, "nvfp4.exact", "%s is not a number", key);
        return -1;
    }
    return 1;
}
