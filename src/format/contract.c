/* contract.c — the CPU oracle contractions (SPEC §4–6): Q8_K activations, the integer-exact
 * A16 dot, the W4A4 dot, the float A16 reference, and their multi-row matvecs. */
#include "fp4_impl.h"
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

_Static_assert(sizeof(fp4_block_q8_K) == 292, "block_q8_K must match ggml's layout");

/* ---- Q8_K (SPEC §4 step 1; ggml's quantize_row_q8_K_ref) ---- */
fp4_status fp4_q8_K_quantize(const float *x, int64_t n, fp4_block_q8_K *dst) {
    if (!x || !dst || n < 0) return FP4_ERR_INVALID_ARG;
    if (n % FP4_QK_K) return FP4_ERR_SHAPE;
    for (int64_t b = 0; b < n / FP4_QK_K; b++, x += FP4_QK_K) {
        fp4_block_q8_K *y = &dst[b];
        float amax = 0.0f, max = 0.0f; /* max: the signed value of the first largest |x| */
        for (int j = 0; j < FP4_QK_K; j++) {
            float ax = fabsf(x[j]);
            if (ax > amax) { amax = ax; max = x[j]; }
        }
        if (amax == 0.0f) {
            memset(y, 0, sizeof *y);
            continue;
        }
        const float iscale = -127.0f / max;
        for (int j = 0; j < FP4_QK_K; j++) {
            int v = fp4_nearest_int(iscale * x[j]);
            y->qs[j] = (int8_t)(v < 127 ? v : 127);
        }
        for (int g = 0; g < FP4_QK_K / 16; g++) {
            int s = 0;
            for (int j = 0; j < 16; j++) s += y->qs[g * 16 + j];
            y->bsums[g] = (int16_t)s;
        }
        y->d = 1.0f / iscale;
    }
    return FP4_OK;
}

fp4_status fp4_q8_K_dequantize(const fp4_block_q8_K *src, int64_t n, float *dst) {
    if (!src || !dst || n < 0) return FP4_ERR_INVALID_ARG;
    if (n % FP4_QK_K) return FP4_ERR_SHAPE;
    for (int64_t b = 0; b < n / FP4_QK_K; b++)
        for (int j = 0; j < FP4_QK_K; j++) dst[b * FP4_QK_K + j] = src[b].d * (float)src[b].qs[j];
    return FP4_OK;
}

/* byte -> the two E2M1 values in units of 2^-1 (low nibble first) */
static int8_t q1_pair[256][2];
static pthread_once_t q1_once = PTHREAD_ONCE_INIT;
static void q1_fill(void) {
    for (int b = 0; b < 256; b++) {
        q1_pair[b][0] = (int8_t)fp4_e2m1_q1((uint8_t)(b & 15));
        q1_pair[b][1] = (int8_t)fp4_e2m1_q1((uint8_t)(b >> 4));
    }
}
static void q1_init(void) { pthread_once(&q1_once, q1_fill); }

/* Σ over one 16-group of e2m1_q1(w) · a, with a int8 (Q8_K) values. */
static inline int32_t group_dot_i8(const uint8_t *packed8, const int8_t *a16) {
    int32_t dot = 0;
    for (int j = 0; j < 8; j++) {
        const int8_t *w = q1_pair[packed8[j]];
        dot += (int32_t)w[0] * a16[2 * j] + (int32_t)w[1] * a16[2 * j + 1];
    }
    return dot;
}

float fp4_nvfp4_dot_a16_exact(const uint8_t *payload_row, const uint8_t *scales_row, float scale2,
                              const fp4_block_q8_K *xq, int64_t n_in) {
    q1_init();
    float acc = 0.0f;
    for (int64_t sb = 0; sb < n_in / FP4_QK_K; sb++) {
        const fp4_block_q8_K *q = &xq[sb];
        if (q->d == 0.0f) continue; /* an all-zero super-block contributes nothing */
        int64_t total = 0;
        for (int g = 0; g < 16; g++) {
            const int64_t gi = sb * 16 + g;
            int32_t dot = group_dot_i8(payload_row + gi * 8, q->qs + g * 16);
            total += (int64_t)dot * fp4_e4m3fn_q9(scales_row[gi]);
        }
        acc = fp4_a16_epilogue(total, q->d, scale2, acc);
    }
    return fp4_round_f16(acc);
}

/* ---- W4A4 (SPEC §5) ---- */
float fp4_nvfp4_dot_w4a4(const uint8_t *payload_row, const uint8_t *scales_row, float scale2,
                         const uint8_t *act_codes, const uint8_t *act_scales, float input_scale_inv,
                         int64_t n_in) {
    q1_init();
    const float input_scale = 1.0f / input_scale_inv;
    int64_t row_total = 0;
    for (int64_t g = 0; g < n_in / 16; g++) {
        int32_t dot = 0;
        for (int j = 0; j < 8; j++) {
            const int8_t *w = q1_pair[payload_row[g * 8 + j]];
            const int8_t *a = q1_pair[act_codes[g * 8 + j]];
            dot += (int32_t)w[0] * a[0] + (int32_t)w[1] * a[1];
        }
        row_total += (int64_t)dot * fp4_e4m3fn_q9(scales_row[g]) * fp4_e4m3fn_q9(act_scales[g]);
    }
    float y = (float)row_total * 0x1p-20f;
    y = y * scale2;
    y = y * input_scale;
    return fp4_round_f16(y);
}


double fp4_nrmse(const float *a, const float *b, int64_t n) {
    double num = 0.0, den = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * (double)b[i];
    }
    if (den == 0.0) return num == 0.0 ? 0.0 : INFINITY;
    return sqrt(num / den);
}
