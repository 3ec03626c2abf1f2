/* rope.c — the host RoPE table: computed once in double, rounded to f32, shared by the CPU step
 * and uploaded unchanged to the GPU (the same bits on both sides). Inverse frequencies follow
 * transformers' rope initialisers (default, linear, llama3, yarn). */
#include "backend/backend.h"
#include <math.h>
#include <stdlib.h>

/* transformers' yarn get_mscale */
static double yarn_mscale(double scale, double m) {
    return scale <= 1.0 ? 1.0 : 0.1 * m * log(scale) + 1.0;
}
static double yarn_corr_dim(double rot, double dim, double base, double orig) {
    const double pi = 3.14159265358979323846;
    return dim * log(orig / (rot * 2.0 * pi)) / (2.0 * log(base));
}
/* yarn: interpolation (f / factor) and extrapolation (f) blended by a linear ramp over the
 * frequency index between the correction dims of beta_fast and beta_slow (floored / ceiled) */
static double yarn_freq(const fp4_arch *a, double f, int64_t i, double dim) {
    const double orig = (double)a->rope_orig_ctx, base = a->rope_theta;
    double lo = floor(yarn_corr_dim(a->rope_beta_fast, dim, base, orig));
    double hi = ceil(yarn_corr_dim(a->rope_beta_slow, dim, base, orig));
    lo = lo < 0 ? 0 : lo;
    hi = hi > dim - 1 ? dim - 1 : hi;
    if (lo == hi) hi += 0.001;
    double ramp = ((double)i - lo) / (hi - lo);
    ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
    const double ext = 1.0 - ramp;
    return f / a->rope_factor * (1.0 - ext) + f * ext;
}

int64_t fp4_rt_rope_dim(const fp4_arch *a) {
    return a->kv_lora_rank > 0 ? a->qk_rope_dim : a->head_dim;
}

/* yarn scales cos and sin by mscale(factor, mscale) / mscale(factor, mscale_all_dim) when both
 * are set, else by mscale(factor, 1) */
static double rope_attn_factor(const fp4_arch *a) {
    if (a->rope_scaling != FP4_ROPE_YARN) return 1.0;
    if (a->rope_mscale > 0 && a->rope_mscale_all_dim > 0)
        return yarn_mscale(a->rope_factor, a->rope_mscale) /
               yarn_mscale(a->rope_factor, a->rope_mscale_all_dim);
    return yarn_mscale(a->rope_factor, 1.0);
}

float fp4_rt_attn_scale(const fp4_arch *a) {
    /* Gemma 3: 1 / sqrt(query_pre_attn_scalar) in place of the head's */
    double s = 1.0 / sqrt(a->query_pre_attn_scalar > 0 ? a->query_pre_attn_scalar : (double)a->head_dim);
    if (a->rope_scaling == FP4_ROPE_YARN && a->rope_mscale_all_dim > 0) {
        const double m = yarn_mscale(a->rope_factor, a->rope_mscale_all_dim);
        s = s * m * m;
    }
    return (float)s;
}

static double inv_freq(const fp4_arch *a, int64_t i) {
    const double pi = 3.14159265358979323846, dim = (double)fp4_rt_rope_dim(a);
    double f = 1.0 / pow(a->rope_theta, (double)(2 * i) / dim);
    if (a->rope_scaling == FP4_ROPE_YARN) return yarn_freq(a, f, i, dim);
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
    const int64_t rd = a ? fp4_rt_rope_dim(a) : 0;
    if (!a || n_ctx <= 0 || rd < 2 || rd % 2 || rd > FP4_ARCH_MAX_HEAD_DIM) return FP4_ERR_INVALID_ARG;
    const int64_t half = rd / 2;
    const double mscale = rope_attn_factor(a);
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
            c[p * half + i] = (float)(cos(ang) * mscale);
            s[p * half + i] = (float)(sin(ang) * mscale);
        }
    free(f);
    *cos_out = c;
    *sin_out = s;
    return FP4_OK;
}
