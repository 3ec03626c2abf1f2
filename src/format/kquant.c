/* kquant.c — the kquant control lane: Q4_K and Q6_K quantize/dequantize, producing the same
 * bytes and floats as ggml's reference row functions (quantize_row_q{4,6}_K_ref,
 * dequantize_row_q{4,6}_K). The scale searches (a weighted least-squares sweep for Q4_K's
 * scale+min, a symmetric sweep for Q6_K) are written here from the algorithm's description;
 * every f32 expression keeps ggml's operand order, since -ffp-contract=off and the same order
 * give the same bits. Dots and matvecs are in kquant_dot.c. */
#include "fp4_impl.h"
#include <math.h>

#define QK FP4_QK_K
#define Q_EPS 1e-15f /* below this |max| a Q6_K sub-block is all zero (ggml's group epsilon) */

static inline int imin(int a, int b) { return a < b ? a : b; }
static inline int imax(int a, int b) { return a > b ? a : b; }

static fp4_status check_args(const void *a, const void *b, int64_t n) {
    if (n < 0 || n % QK != 0) return FP4_ERR_SHAPE;
    if (n > 0 && (!a || !b)) return FP4_ERR_INVALID_ARG;
    return FP4_OK;
}

static fp4_status check_finite(const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return FP4_ERR_NONFINITE;
    return FP4_OK;
}

/* ---------------------------------------------------------------------------------------- */
/* Q4_K                                                                                      */

/* Asymmetric fit of n values to levels 0..nmax: x ≈ scale*L + min, min <= 0. Starts from the
 * plain range fit, then tries nstep+1 stretched grids and keeps the one whose weighted
 * least-squares (scale, min) has the smallest weighted squared error. Returns the scale and
 * stores -min in *neg_min; L receives the levels. */
static float fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L, float *neg_min,
                           float rmin, float rdelta, int nstep) {
    uint8_t trial[32];
    float lo = x[0], hi = x[0];
    float sw = w[0];
    float swx = sw * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
        float wi = w[i];
        sw += wi;
        swx += wi * x[i];
    }
    if (lo > 0) lo = 0;
    if (hi == lo) {
        for (int i = 0; i < n; i++) L[i] = 0;
        *neg_min = -lo;
        return 0.0f;
    }
    float inv = nmax / (hi - lo);
    float scale = 1 / inv;
    float best = 0;
    for (int i = 0; i < n; i++) {
        int q = fp4_nearest_int(inv * (x[i] - lo));
        L[i] = (uint8_t)imax(0, imin(nmax, q));
        float e = scale * L[i] + lo - x[i];
        e = e * e;
        best += w[i] * e;
    }
    for (int step = 0; step <= nstep; step++) {
        inv = (rmin + rdelta * step + nmax) / (hi - lo);
        float s_l = 0, s_l2 = 0, s_xl = 0;
        for (int i = 0; i < n; i++) {
            int q = fp4_nearest_int(inv * (x[i] - lo));
            q = imax(0, imin(nmax, q));
            trial[i] = (uint8_t)q;
            float wi = w[i];
            s_l += wi * q;
            s_l2 += wi * q * q;
            s_xl += wi * q * x[i];
        }
        float det = sw * s_l2 - s_l * s_l;
        if (det > 0) {
            float t_scale = (sw * s_xl - swx * s_l) / det;
            float t_min = (s_l2 * swx - s_l * s_xl) / det;
            if (t_min > 0) {
                t_min = 0;
                t_scale = s_xl / s_l2;
            }
            float err = 0;
            for (int i = 0; i < n; i++) {
                float e = t_scale * trial[i] + t_min - x[i];
                e = e * e;
                err += w[i] * e;
            }
            if (err < best) {
                for (int i = 0; i < n; i++) L[i] = trial[i];
                best = err;
                scale = t_scale;
                lo = t_min;
            }
        }
    }
    *neg_min = -lo;
    return scale;
}


static void q4K_block(const float *x, fp4_block_q4_K *b) {
    uint8_t L[QK];
    float w[32], sc_f[8], mn_f[8];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        const float *xs = x + 32 * j;
        float ss = 0;
        for (int l = 0; l < 32; l++) ss += xs[l] * xs[l];
        float rms = sqrtf(ss / 32);
        for (int l = 0; l < 32; l++) w[l] = rms + fabsf(xs[l]);
        sc_f[j] = fit_scale_min(32, 15, xs, w, L + 32 * j, &mn_f[j], -1.f, 0.1f, 20);
        if (sc_f[j] > max_scale) max_scale = sc_f[j];
        if (mn_f[j] > max_min) max_min = mn_f[j];
    }
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < 8; j++) {
        /* the int result narrows to 8 bits before the cap, as in the reference */
        uint8_t ls = (uint8_t)fp4_nearest_int(inv_scale * sc_f[j]);
        uint8_t lm = (uint8_t)fp4_nearest_int(inv_min * mn_f[j]);
        if (ls > 63) ls = 63;
        if (lm > 63) lm = 63;
        if (j < 4) {
            b->scales[j] = ls;
            b->scales[j + 4] = lm;
        } else {
            b->scales[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            b->scales[j - 4] |= (uint8_t)((ls >> 4) << 6);
            b->scales[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    b->d = fp4_f32_to_f16(max_scale / 63.f);
    b->dmin = fp4_f32_to_f16(max_min / 63.f);
    const float d_all = fp4_f16_to_f32(b->d), m_all = fp4_f16_to_f32(b->dmin);
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        fp4_q4K_scale_min(j, b->scales, &sc, &m);
        const float d = d_all * sc;
        if (d == 0.0f) continue; /* keep the fit's levels */
        const float dm = m_all * m;
        for (int i = 0; i < 32; i++) {
            int q = fp4_nearest_int((x[32 * j + i] + dm) / d);
            L[32 * j + i] = (uint8_t)imax(0, imin(15, q));
        }
    }
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) b->qs[32 * c + l] = (uint8_t)(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
}

fp4_status fp4_q4_K_quantize(const float *x, int64_t n, fp4_block_q4_K *dst) {
    fp4_status st = check_args(x, dst, n);
    if (st != FP4_OK) return st;
    if ((st = check_finite(x, n)) != FP4_OK) return st;
    for (int64_t i = 0; i < n / QK; i++) q4K_block(x + i * QK, dst + i);
    return FP4_OK;
}

fp4_status fp4_q4_K_dequantize(const fp4_block_q4_K *src, int64_t n, float *dst) {
    fp4_status st = check_args(src, dst, n);
    if (st != FP4_OK) return st;
    for (int64_t i = 0; i < n / QK; i++) {
        const fp4_block_q4_K *b = src + i;
        const float d = fp4_f16_to_f32(b->d), mn = fp4_f16_to_f32(b->dmin);
        float *y = dst + i * QK;
        for (int c = 0; c < 4; c++) {
            uint8_t sc, m;
            fp4_q4K_scale_min(2 * c, b->scales, &sc, &m);
            const float d1 = d * sc, m1 = mn * m;
            fp4_q4K_scale_min(2 * c + 1, b->scales, &sc, &m);
            const float d2 = d * sc, m2 = mn * m;
            const uint8_t *q = b->qs + 32 * c;
            for (int l = 0; l < 32; l++) y[64 * c + l] = d1 * (q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++) y[64 * c + 32 + l] = d2 * (q[l] >> 4) - m2;
        }
    }
    return FP4_OK;
}

/* ---------------------------------------------------------------------------------------- */
/* Q6_K                                                                                      */

/* One sweep of the symmetric fit: levels for inverse scale inv (clamped to [-nmax, nmax-1]),
 * with the x²-weighted sums Σw·x·l and Σw·l². */
static void sym_sums(int n, int nmax, const float *x, float inv, float *slx, float *sl2) {
    float a = 0, b = 0;
    for (int i = 0; i < n; i++) {
        int l = imax(-nmax, imin(nmax - 1, fp4_nearest_int(inv * x[i])));
        float w = x[i] * x[i];
        a += w * x[i] * l;
        b += w * l * l;
    }
    *slx = a;
    *sl2 = b;
}

static void sym_levels(int n, int nmax, const float *x, float inv, int8_t *L) {
    for (int i = 0; i < n; i++)
        L[i] = (int8_t)(nmax + imax(-nmax, imin(nmax - 1, fp4_nearest_int(inv * x[i]))));
}

/* Symmetric fit of n values to levels -nmax..nmax-1 (stored offset by nmax), x² weights: the
 * grid anchored at the largest-magnitude value (the first one on ties) plus 18 stretched grids;
 * keeps the one maximizing (Σwxl)²/Σwl². Returns the least-squares scale (0 for an all-tiny
 * group, whose levels are 0). */
static float fit_symmetric(int n, int nmax, const float *x, int8_t *L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < Q_EPS) {
        for (int i = 0; i < n; i++) L[i] = 0;
        return 0.f;
    }
    float inv = -nmax / max;
    float slx, sl2;
    sym_sums(n, nmax, x, inv, &slx, &sl2);
    sym_levels(n, nmax, x, inv, L);
    float scale = sl2 != 0 ? slx / sl2 : 0.0f;
    float best = scale * slx;
    for (int step = -9; step <= 9; step++) {
        if (step == 0) continue;
        inv = -(nmax + 0.1f * step) / max;
        sym_sums(n, nmax, x, inv, &slx, &sl2);
        if (sl2 > 0 && slx * slx > best * sl2) {
            sym_levels(n, nmax, x, inv, L);
            scale = slx / sl2;
            best = scale * slx;
        }
    }
    return scale;
}

static void q6K_block(const float *x, fp4_block_q6_K *b) {
    int8_t L[QK];
    float sc_f[16];
    float max_scale = 0, max_abs = 0;
    for (int j = 0; j < 16; j++) {
        sc_f[j] = fit_symmetric(16, 32, x + 16 * j, L + 16 * j);
        float a = fabsf(sc_f[j]);
        if (a > max_abs) {
            max_abs = a;
            max_scale = sc_f[j];
        }
    }
    if (max_abs < Q_EPS) {
        memset(b, 0, sizeof *b);
        b->d = fp4_f32_to_f16(0.f);
        return;
    }
    float inv = -128.f / max_scale;
    b->d = fp4_f32_to_f16(1 / inv);
    for (int j = 0; j < 16; j++) {
        int v = fp4_nearest_int(inv * sc_f[j]);
        b->scales[j] = (int8_t)(uint8_t)(v < 127 ? v : 127); /* narrows mod 256, as the reference */
    }
    const float d_all = fp4_f16_to_f32(b->d);
    for (int j = 0; j < 16; j++) {
        const float d = d_all * b->scales[j];
        if (d == 0.0f) continue;
        for (int i = 0; i < 16; i++) {
            int q = fp4_nearest_int(x[16 * j + i] / d);
            L[16 * j + i] = (int8_t)(imax(-32, imin(31, q)) + 32);
        }
    }
    for (int h = 0; h < 2; h++) {
        uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
        const int8_t *Lh = L + 128 * h;
        for (int l = 0; l < 32; l++) {
            ql[l] = (uint8_t)((Lh[l] & 0xF) | ((Lh[l + 64] & 0xF) << 4));
            ql[l + 32] = (uint8_t)((Lh[l + 32] & 0xF) | ((Lh[l + 96] & 0xF) << 4));
            qh[l] = (uint8_t)((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) | ((Lh[l + 64] >> 4) << 4) |
                              ((Lh[l + 96] >> 4) << 6));
        }
    }
}

fp4_status fp4_q6_K_quantize(const float *x, int64_t n, fp4_block_q6_K *dst) {
    fp4_status st = check_args(x, dst, n);
    if (st != FP4_OK) return st;
    if ((st = check_finite(x, n)) != FP4_OK) return st;
    for (int64_t i = 0; i < n / QK; i++) q6K_block(x + i * QK, dst + i);
    return FP4_OK;
}

fp4_status fp4_q6_K_dequantize(const fp4_block_q6_K *src, int64_t n, float *dst) {
    fp4_status st = check_args(src, dst, n);
    if (st != FP4_OK) return st;
    for (int64_t i = 0; i < n / QK; i++) {
        const fp4_block_q6_K *b = src + i;
        const float d = fp4_f16_to_f32(b->d);
        float *y = dst + i * QK;
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
            const int8_t *sc = b->scales + 8 * h;
            float *yh = y + 128 * h;
            for (int l = 0; l < 32; l++) {
                int is = l / 16;
                int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                yh[l] = d * sc[is] * q1;
                yh[l + 32] = d * sc[is + 2] * q2;
                yh[l + 64] = d * sc[is + 4] * q3;
                yh[l + 96] = d * sc[is + 6] * q4;
            }
        }
    }
    return FP4_OK;
}
