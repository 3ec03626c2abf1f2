/* validate.c — the checks of the fail-closed loader (SPEC §7–8) that the readers and model.c
 * share: per-tensor scalars (finite, positive, normal), every scale byte (no 0x7F/0xFF, no sign
 * bit), the exact reciprocal forms fp4lane's writers keep, and the lane metadata paired with the
 * tensor types in both directions. Each refusal names the file, the tensor and a stable rule id. */
#include "read_impl.h"
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int fp4_scalar_ok(float v) { return isfinite(v) && v > 0.0f && isnormal(v); }

fp4_status fp4_check_scalar(const fp4_ckpt *c, const fp4_raw *r, int allow_rank0, const char *what, float *v,
                            fp4_error *err) {
    if (r->type != FP4_TYPE_F32)
        return fp4_fail(err, FP4_ERR_DTYPE, c->path, r->name, "nvfp4.companion-dtype", "%s must be F32",
                        what);
    int shape_ok =
        r->n_elements == 1 && r->nbytes == 4 && (r->n_dims == 1 || (allow_rank0 && r->n_dims == 0));
    if (!shape_ok)
        return fp4_fail(err, FP4_ERR_SHAPE, c->path, r->name, "nvfp4.companion-shape",
                        "%s must be a single F32 (shape %s)", what, allow_rank0 ? "[] or [1]" : "[1]");
    *v = fp4_rd_lef32(r->data);
    if (!fp4_scalar_ok(*v))
        return fp4_fail(err, FP4_ERR_SCALE2, c->path, r->name,
                        strstr(what, "input") ? "nvfp4.input-scale" : "nvfp4.scale2",
                        "%s is %g: must be finite, positive and normal", what, (double)*v);
    return FP4_OK;
}

/* one scale byte of row r, group g: no NaN (0x7F/0xFF), no sign bit */
static fp4_status scale_byte(const fp4_ckpt *c, const char *name, uint8_t b, int64_t r, int64_t g,
                             fp4_error *err) {
    if ((b & 0x7F) == 0x7F)
        return fp4_fail(err, FP4_ERR_NAN_SCALE, c->path, name, "nvfp4.scale-nan",
                        "scale byte 0x%02X (E4M3 NaN) at row %lld, group %lld", b, (long long)r,
                        (long long)g);
    if (b & 0x80)
        return fp4_fail(err, FP4_ERR_NAN_SCALE, c->path, name, "nvfp4.scale-negative",
                        "scale byte 0x%02X has the sign bit set (row %lld, group %lld)", b, (long long)r,
                        (long long)g);
    return FP4_OK;
}

fp4_status fp4_check_scale_bytes(const fp4_ckpt *c, const char *name, const uint8_t *s, int64_t n_rows,
                                 int64_t n_groups, fp4_error *err) {
    for (int64_t r = 0; r < n_rows; r++) {
        const uint8_t *row = s + r * n_groups;
        for (int64_t g = 0; g < n_groups; g++)
            if ((row[g] & 0x7F) == 0x7F || (row[g] & 0x80)) return scale_byte(c, name, row[g], r, g, err);
    }
    return FP4_OK;
}

/* The type-40 check, rows in parallel (it walks every 36-byte block of a tensor the deferred open
 * leaves in the mapping: 3.9 GB for an 8B model). A block's 4 scale bytes are one word; a byte is
 * refused exactly when it is >= 0x7F (0x7F is NaN, from 0x80 the sign bit or 0xFF), which the word
 * test finds without carries across bytes: ((w & 0x7F7F7F7F) + 0x01010101) | w has bit 7 of every
 * such byte. The chunks keep the least refused block index found (an atomic minimum), which is the
 * first in row order: the message is the serial walk's whatever the thread count. */
typedef struct {
    const uint8_t *blocks;
    int64_t nb;
    _Atomic int64_t first; /* the first refused block index found so far (INT64_MAX: none) */
} ggml_check_job;

static void ggml_check_rows(void *ctx, int64_t r0, int64_t r1) {
    ggml_check_job *j = (ggml_check_job *)ctx;
    const int64_t b1 = r1 * j->nb;
    for (int64_t b = r0 * j->nb; b < b1; b++) {
        uint32_t w;
        memcpy(&w, j->blocks + b * 36, 4);
        if ((((w & 0x7F7F7F7Fu) + 0x01010101u) | w) & 0x80808080u) {
            int64_t cur = atomic_load(&j->first);
            while (b < cur && !atomic_compare_exchange_weak(&j->first, &cur, b)) {
            }
            return;
        }
    }
}

fp4_status fp4_check_ggml_scale_bytes(const fp4_ckpt *c, const char *name, const uint8_t *blocks,
                                      int64_t n_rows, int64_t n_in, fp4_error *err) {
    const int64_t nb = n_in / 64;
    if (n_rows <= 0 || nb <= 0) return FP4_OK;
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int64_t t = (n_rows * nb * 36 >> 24) + 1; /* a thread per 16 MiB of blocks, up to 8 and the cores */
    if (t > cores) t = cores;
    t = t < 1 ? 1 : t > 8 ? 8 : t;
    if (t > n_rows) t = n_rows;
    ggml_check_job j = {blocks, nb, INT64_MAX};
    const fp4_status st = fp4_parallel_rows(n_rows, (int)t, ggml_check_rows, &j);
    if (st) return fp4_fail(err, st, c->path, name, "ggml.check", "scale-byte check failed");
    const int64_t bad = atomic_load(&j.first);
    if (bad == INT64_MAX) return FP4_OK;
    const int64_t r = bad / nb, b = bad % nb;
    const uint8_t *blk = blocks + bad * 36; /* its 4 scale bytes: groups 4b .. 4b+3 */
    for (int s = 0; s < 4; s++)
        if ((blk[s] & 0x7F) == 0x7F || (blk[s] & 0x80)) return scale_byte(c, name, blk[s], r, b * 4 + s, err);
    /* unreachable: the word test and the byte test agree */
    return fp4_fail(err, FP4_ERR_NAN_SCALE, c->path, name, "nvfp4.scale-nan",
                    "scale byte refused at row %lld", (long long)r);
}

/* exact reciprocal forms kept by fp4lane's writers (see layout_write.c) */
fp4_status fp4_check_exact_pair(const fp4_ckpt *c, const char *name, float mul, float div, fp4_error *err) {
    if (!fp4_scalar_ok(div))
        return fp4_fail(err, FP4_ERR_SCALE2, c->path, name, "nvfp4.exact",
                        "exact reciprocal %g is not a finite positive normal", (double)div);
    double rel = fabs((double)mul * (double)div - 1.0);
    if (rel > 0x1p-20)
        return fp4_fail(err, FP4_ERR_SCALE2, c->path, name, "nvfp4.exact",
                        "exact reciprocal %a disagrees with the stored scale %a", (double)div, (double)mul);
    return FP4_OK;
}

fp4_status fp4_fill_pair(const fp4_ckpt *c, const char *name, float v, int is_mul, int have_other,
                         float other, float *mul, float *div, uint8_t *mul_exact, uint8_t *div_exact,
                         fp4_error *err) {
    float recip = have_other ? other : 1.0f / v;
    if (have_other) {
        fp4_status st = is_mul ? fp4_check_exact_pair(c, name, v, other, err)
                               : fp4_check_exact_pair(c, name, other, v, err);
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
        int64_t k = fp4_gguf_key_index(c->gguf, key);
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

fp4_status fp4_check_lane(const char *path, const fp4_mtensor *t, int64_t n, const fp4_lane_keys *k,
                          fp4_weight_precision *wp, fp4_act_precision *ap, fp4_error *err) {
    int64_t n_nv = 0, n_in = 0, n_q4 = 0, n_bf = 0, n_f16 = 0, n_fp8 = 0;
    const char *first_nv = NULL, *first_with = NULL, *first_without = NULL;
    for (int64_t i = 0; i < n; i++) {
        const fp4_tensor *ti = &t[i].t;
        if (ti->type == FP4_TYPE_NVFP4_E2M1) {
            n_nv++;
            if (!first_nv) first_nv = ti->name;
            if (ti->nvfp4.input_scale_inv != 0.0f) {
                n_in++;
                if (!first_with) first_with = ti->name;
            } else if (!first_without) {
                first_without = ti->name;
            }
        } else if (ti->n_dims >= 2) {
            n_q4 += ti->type == FP4_TYPE_Q4_K || ti->type == FP4_TYPE_Q6_K;
            n_bf += ti->type == FP4_TYPE_BF16;
            n_f16 += ti->type == FP4_TYPE_F16;
            n_fp8 += ti->type == FP4_TYPE_F8_E4M3FN;
        }
    }
    if (n_in && n_in != n_nv)
        return fp4_fail(err, FP4_ERR_COMPANION, path, first_without, "nvfp4.input-scale-partial",
                        "input scale on %lld of %lld NVFP4 tensors (e.g. present on %s): all or none",
                        (long long)n_in, (long long)n_nv, first_with);
    if (n_nv && k->strict && (!k->has_wp || !k->has_ap))
        return fp4_fail(
            err, FP4_ERR_LANE, path, first_nv, "lane.missing",
            "NVFP4 tensors without fp4lane.weight_precision / fp4lane.activation_precision metadata");
    if (k->has_wp && (k->wp == FP4_WP_NVFP4) != (n_nv > 0))
        return fp4_fail(err, FP4_ERR_LANE, path, first_nv, "lane.pairing",
                        "fp4lane.weight_precision = %s but the file has %lld NVFP4 tensors",
                        fp4_wp_names[k->wp], (long long)n_nv);
    if (k->has_wp && k->wp == FP4_WP_Q4_K && n_q4 == 0)
        return fp4_fail(err, FP4_ERR_LANE, path, NULL, "lane.pairing",
                        "fp4lane.weight_precision = q4_k but no Q4_K tensor");
    if (k->has_wp && k->wp == FP4_WP_FP8 && (n_fp8 == 0 || n_nv))
        return fp4_fail(err, FP4_ERR_LANE, path, first_nv, "lane.pairing",
                        "fp4lane.weight_precision = fp8 but the file has %lld FP8 and %lld NVFP4 weights",
                        (long long)n_fp8, (long long)n_nv);
    /* a dense claim over k-quant matrices: llama.cpp's quantizer copies every key of its input, so
     * a file quantized from an fp4lane F16/BF16 GGUF still says so */
    if (k->has_wp && k->wp != FP4_WP_NVFP4 && k->wp != FP4_WP_Q4_K && n_q4)
        return fp4_fail(err, FP4_ERR_LANE, path, NULL, "lane.pairing",
                        "fp4lane.weight_precision = %s but the file has %lld Q4_K/Q6_K matrices (a key "
                        "copied from the file it was quantized from?)",
                        fp4_wp_names[k->wp], (long long)n_q4);
    fp4_act_precision derived = n_in ? FP4_AP_NVFP4 : FP4_AP_A16;
    if (k->has_ap && n_nv && (fp4_act_precision)k->ap != derived)
        return fp4_fail(err, FP4_ERR_LANE, path, derived == FP4_AP_NVFP4 ? first_with : first_nv,
                        "lane.activation", "fp4lane.activation_precision = %s but input scales are %s",
                        fp4_ap_names[k->ap], n_in ? "present" : "absent");
    if (k->has_ap && !n_nv && k->ap == FP4_AP_NVFP4)
        return fp4_fail(err, FP4_ERR_LANE, path, NULL, "lane.activation",
                        "fp4lane.activation_precision = nvfp4 without NVFP4 tensors");
    *ap = n_nv ? derived : (k->has_ap ? (fp4_act_precision)k->ap : FP4_AP_A16);
    if (k->has_wp) *wp = (fp4_weight_precision)k->wp;
    else
        *wp = n_nv    ? FP4_WP_NVFP4
              : n_fp8 ? FP4_WP_FP8
              : n_q4  ? FP4_WP_Q4_K
              : n_bf  ? FP4_WP_BF16
              : n_f16 ? FP4_WP_F16
                      : FP4_WP_F32;
    return FP4_OK;
}
