/* rope.c — the host RoPE table: computed once in double, rounded to f32, shared by the CPU step
 * and uploaded unchanged to the GPU (the same bits on both sides). Inverse frequencies follow
 * transformers' rope initialisers (default, linear, llama3). */
#include "backend/backend.h"
#include <math.h>
#include <stdlib.h>

static double inv_freq(const fp4_arch *a, int64_t i) {
    const double pi = 3.14159265358979323846;
    double f = 1.0 / pow(a->rope_theta, (double)(2 * i) / (double)a->head_dim);
    if (a->rope_scaling == FP4_ROPE_LINEAR) return f / a->rope_factor;
    if (a->rope_scaling != FP4_ROPE_LLAMA3) return f;
    const double orig = (double)a->rope_orig_ctx, lo = a->rope_low_freq_factor, hi = a->rope_high_freq_factor;
    const double low_wavelen = orig / lo, high_wavelen = orig / hi, wavelen = 2.0 * pi / f;
    if (wavelen > low_wavelen) return f / a->rope_factor; /* low frequencies: interpolated */
    if (wavelen < high_wavelen) return f;                 /* high frequencies: kept        */
    double smooth = (orig / wavelen - lo) / (hi - lo);
    return (1.0 - smooth) * f / a->rope_factor + smooth * f;
}

fp4_status fp4_rt_rope_table(const fp4_arch *a, int64_t n_ctx, const float *freq_factors, float **cos_out,
                             float **sin_out) {
    *cos_out = *sin_out = NULL;
    if (!a || n_ctx <= 0 || a->head_dim < 2 || a->head_dim % 2 || a->head_dim > FP4_ARCH_MAX_HEAD_DIM)
        return FP4_ERR_INVALID_ARG;
    const int64_t half = a->head_dim / 2;
    size_t n;
    if (__builtin_mul_overflow((size_t)n_ctx, (size_t)half * sizeof(float), &n)) return FP4_ERR_OVERFLOW;
    float *c = malloc(n), *s = malloc(n);
    double *f = malloc(sizeof(double) * (size_t)half);
    if (!c || !s || !f) {
        free(c), free(s), free(f);
        return FP4_ERR_NOMEM;
    }
    for (int64_t i = 0; i < half; i++) {
        f[i] = inv_freq(a, i);
        if (freq_factors) {
            if (!(freq_factors[i] > 0.0f) || freq_factors[i] != freq_factors[i] || freq_factors[i] > 1e30f) {
                free(c), free(s), free(f);
                return FP4_ERR_FORMAT;
            }
            f[i] /= (double)freq_factors[i]; /* llama.cpp: theta / freq_factor */
        }
    }
    for (int64_t p = 0; p < n_ctx; p++)
        for (int64_t i = 0; i < half; i++) {
            double ang = (double)p * f[i];
            c[p * half + i] = (float)cos(ang);
            s[p * half + i] = (float)sin(ang);
        }
    free(f);
    *cos_out = c;
    *sin_out = s;
    return FP4_OK;
}
