/* nvfp4.c — NVFP4 tensors: row dequantization in the pinned order (SPEC §2), the
 * ModelOpt-identical quantizer (SPEC §3) and the view check used before any compute. */
#include "fp4_impl.h"
#include <math.h>

fp4_status fp4_nvfp4_dequant_row(const uint8_t *payload, const uint8_t *scales, float scale2, int64_t n,
                                 float *dst) {
    if (!payload || !scales || !dst || n < 0) return FP4_ERR_INVALID_ARG;
    if (n % 16) return FP4_ERR_SHAPE;
    for (int64_t g = 0; g < n / 16; g++) {
        const float s = fp4_e4m3fn_decode(scales[g]);
        for (int j = 0; j < 8; j++) {
            const uint8_t b = payload[g * 8 + j];
            /* pinned: (e2m1 * e4m3fn) * scale2, never regrouped */
            dst[g * 16 + 2 * j] = (fp4_e2m1_decode(b & 15) * s) * scale2;
            dst[g * 16 + 2 * j + 1] = (fp4_e2m1_decode(b >> 4) * s) * scale2;
        }
    }
    return FP4_OK;
}

/* Widen element i of a source row to f32 (exact for f16/bf16). */
static inline float src_at(const void *src, fp4_src_dtype dt, int64_t i) {
    switch (dt) {
    case FP4_SRC_F16: return fp4_f16_to_f32(((const uint16_t *)src)[i]);
    case FP4_SRC_BF16: return fp4_bf16_to_f32(((const uint16_t *)src)[i]);
    default: return ((const float *)src)[i];
    }
}

static int src_dtype_ok(fp4_src_dtype dt) {
    return dt == FP4_SRC_F32 || dt == FP4_SRC_F16 || dt == FP4_SRC_BF16;
}

fp4_status fp4_amax_update(const void *src, fp4_src_dtype dt, int64_t count, float *amax) {
    if (!src || !amax || count < 0 || !src_dtype_ok(dt)) return FP4_ERR_INVALID_ARG;
    float m = *amax;
    for (int64_t i = 0; i < count; i++) {
        float a = fabsf(src_at(src, dt, i));
        if (!isfinite(a)) return FP4_ERR_NONFINITE;
        if (a > m) m = a;
    }
    *amax = m;
    return FP4_OK;
}

fp4_status fp4_scale2_from_amax(float amax, fp4_scale2_rule rule, float *scale2) {
    if (!scale2 || (rule != FP4_SCALE2_GPU && rule != FP4_SCALE2_CPU)) return FP4_ERR_INVALID_ARG;
    if (!isfinite(amax) || amax < 0.0f) return FP4_ERR_NONFINITE;
    if (amax == 0.0f) { /* the all-zero tensor: our documented choice (SPEC §3 step 6) */
        *scale2 = 1.0f;
        return FP4_OK;
    }
    /* GPU: PyTorch on CUDA evaluates tensor / 2688.0 as tensor * fl32(1/2688) = 0x39C30C31 */
    float s = rule == FP4_SCALE2_GPU ? amax * fp4_bits_f32(0x39C30C31u) : amax / 2688.0f;
    /* amax below 2688 * FLT_MIN (~3.2e-35): the rule's scale2 would be subnormal or 0, which no
     * loader accepts. Such a tensor is zero at NVFP4 precision: it gets the all-zero tensor's
     * scale2 = 1.0, and every value rounds to +-0. */
    *scale2 = isnormal(s) ? s : 1.0f;
    return FP4_OK;
}

/* One 16-block (SPEC §3 steps 3–5): v[16] f32 in, 8 packed bytes and one scale byte out. */
static void quantize_block16(const float *v, float scale2, float d6, uint8_t *packed, uint8_t *scale) {
    float bmax = 0.0f;
    for (int j = 0; j < 16; j++) {
        float a = fabsf(v[j]);
        if (a > bmax) bmax = a;
    }
    float t = bmax / d6;
    if (t == 0.0f) t = 1.0f;
    if (t < 0x1p-9f) t = 0x1p-9f;
    if (t > 448.0f) t = 448.0f;
    const uint8_t sc = fp4_e4m3fn_encode(t);
    const float den = fp4_e4m3fn_decode(sc) * scale2;
    for (int j = 0; j < 8; j++) {
        uint8_t lo = fp4_e2m1_encode(v[2 * j] / den);
        uint8_t hi = fp4_e2m1_encode(v[2 * j + 1] / den);
        packed[j] = (uint8_t)(lo | (hi << 4));
    }
    *scale = sc;
}

fp4_status fp4_nvfp4_quantize(const void *src, fp4_src_dtype dt, int64_t n_rows, int64_t n_in, float scale2,
                              uint8_t *payload, uint8_t *scales) {
    if (!src || !payload || !scales || n_rows < 0 || n_in < 0 || !src_dtype_ok(dt))
        return FP4_ERR_INVALID_ARG;
    if (n_in % 16) return FP4_ERR_SHAPE;
    if (!isfinite(scale2) || !(scale2 > 0.0f)) return FP4_ERR_SCALE2;
    const float d6 = 6.0f * scale2; /* the product first (SPEC §3 step 3) */
    const int64_t n_groups = n_in / 16;
    for (int64_t r = 0; r < n_rows; r++) {
        for (int64_t g = 0; g < n_groups; g++) {
            float v[16];
            const int64_t base = r * n_in + g * 16;
            for (int j = 0; j < 16; j++) {
                v[j] = src_at(src, dt, base + j);
                if (!isfinite(v[j])) return FP4_ERR_NONFINITE;
            }
            quantize_block16(v, scale2, d6, payload + r * (n_in / 2) + g * 8, scales + r * n_groups + g);
        }
    }
    return FP4_OK;
}

/* W4A4 activations (SPEC §5 steps 1–2): the weight recipe against input_scale. */
fp4_status fp4_nvfp4_quantize_act(const float *x, int64_t n_in, float input_scale_inv, uint8_t *codes,
                                  uint8_t *scales) {
    if (!x || !codes || !scales || n_in < 0) return FP4_ERR_INVALID_ARG;
    if (n_in % 16) return FP4_ERR_SHAPE;
    if (!isfinite(input_scale_inv) || !(input_scale_inv > 0.0f)) return FP4_ERR_SCALE2;
    const float input_scale = 1.0f / input_scale_inv;
    if (!isfinite(input_scale) || !(input_scale > 0.0f)) return FP4_ERR_SCALE2;
    const float d6 = 6.0f * input_scale;
    for (int64_t g = 0; g < n_in / 16; g++) {
        for (int j = 0; j < 16; j++)
            if (!isfinite(x[g * 16 + j])) return FP4_ERR_NONFINITE;
        quantize_block16(x + g * 16, input_scale, d6, codes + g * 8, scales + g);
    }
    return FP4_OK;
}

static int scale2_ok(float s) { return isfinite(s) && s > 0.0f && isnormal(s); }

/* the scale byte of group g of row r: the scale plane, or in place in a type-40 block (its first
 * four bytes are the scales of its four 16-value groups) */
static uint8_t scale_at(const fp4_nvfp4_view *w, int64_t r, int64_t g) {
    if (w->packing == FP4_PACK_GGML64) return w->payload[(r * (w->n_in / 64) + g / 4) * 36 + g % 4];
    return w->scales[r * (w->n_in / 16) + g];
}

/* every check of fp4_nvfp4_view_check but the scale bytes: the CUDA upload checks those on the
 * device as they arrive (src/cuda/device.cu) */
fp4_status fp4_nvfp4_view_check_shape(const fp4_nvfp4_view *w) {
    if (!w || !w->payload) return FP4_ERR_INVALID_ARG;
    if (w->packing == FP4_PACK_CANONICAL ? !w->scales : w->packing != FP4_PACK_GGML64)
        return FP4_ERR_INVALID_ARG;
    if (w->n_out <= 0 || w->n_in <= 0 || w->n_in % 16 || w->n_in > FP4_MAX_N_IN) return FP4_ERR_SHAPE;
    if (w->packing == FP4_PACK_GGML64 && w->n_in % 64) return FP4_ERR_SHAPE;
    if (!scale2_ok(w->scale2)) return FP4_ERR_SCALE2;
    if (w->input_scale_inv != 0.0f && !scale2_ok(w->input_scale_inv)) return FP4_ERR_SCALE2;
    return FP4_OK;
}

fp4_status fp4_nvfp4_view_check(const fp4_nvfp4_view *w, int64_t *bad_row, int64_t *bad_col) {
    const fp4_status st = fp4_nvfp4_view_check_shape(w);
    if (st != FP4_OK) return st;
    const int64_t ng = w->n_in / 16;
    for (int64_t r = 0; r < w->n_out; r++)
        for (int64_t g = 0; g < ng; g++)
            if (fp4_e4m3fn_is_nan(scale_at(w, r, g))) {
                if (bad_row) *bad_row = r;
                if (bad_col) *bad_col = g;
                return FP4_ERR_NAN_SCALE;
            }
    return FP4_OK;
}
