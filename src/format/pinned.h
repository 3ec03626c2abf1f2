/* pinned.h — every exact-mode float operation of the decode step outside the projections,
 * defined once, compiled as C11 (the CPU backend) and as CUDA (the GPU twin, step_cuda.cu).
 *
 * Exact mode is invariant: the same logits bits on any CPU thread count, any prefill chunking,
 * any batch composition and on the GPU. The projections get there by integer-exact contractions
 * (SPEC §4/§5) or by the pinned dense route; everything else in the step is written here, with
 * one order of operations and only IEEE-754 binary32 basic operations (+ − × ÷ sqrt, round to
 * nearest even), no FMA contraction, no approximations (no rsqrt, no __expf, no libm).
 *
 *   C side:    -ffp-contract=off -fno-fast-math (the Makefile's NUMERIC flags); SSE2 arithmetic
 *              (x86-64) so no excess precision.
 *   CUDA side: --fmad=false, and every op below goes through fp4p_add/mul/div/sqrt, which are
 *              __fadd_rn/__fmul_rn/__fdiv_rn/__fsqrt_rn in device code (never contracted,
 *              never flushed: build without -ftz=true / --use_fast_math).
 *
 * THE PINNED REDUCTION (fp4p_sum and friends). A sum of n f32 terms t[0..n) is computed as a
 * warp of 32 lanes computes it:
 *   1. lane l (0..31) starts at +0.0f and adds t[l], t[l+32], t[l+64], ... in increasing index
 *      order, one rounded f32 add each (so a lane with no term holds +0.0f);
 *   2. the 32 partials are combined by a fixed butterfly: for off = 16, 8, 4, 2, 1:
 *      p[l] = p[l] + p[l ^ off] for every lane (what `v += __shfl_xor_sync(~0u, v, off)` does);
 *      after the last step every lane holds the same value, the result.
 * IEEE addition is commutative, so lanes l and l^off compute the same bits; the CPU therefore
 * replays only the lower half at each step (p[l] += p[l + off] for l < off). A term is
 * formed before it enters its lane (e.g. a product a[i]*b[i], rounded once). A GPU kernel may
 * spread the lanes over threads any way it likes (lanes of a warp, 32 strips of a block, ...)
 * as long as each lane's partial and the butterfly are exactly these.
 *
 * The functions below (ops marked [exact]) are the spec the CUDA twin reproduces bit for bit;
 * backend.h lists the order in which the step calls them.
 */
#ifndef FP4_RT_PINNED_H
#define FP4_RT_PINNED_H

#include <stdint.h>

#ifdef __CUDACC__
#define FP4_HD __host__ __device__
#else
#define FP4_HD
#endif

#define FP4P_LANES 32

/* ---- basic operations: one IEEE binary32 rounding each ---- */
static inline FP4_HD float fp4p_add(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}
static inline FP4_HD float fp4p_sub(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}
static inline FP4_HD float fp4p_mul(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
static inline FP4_HD float fp4p_div(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fdiv_rn(a, b);
#else
    return a / b;
#endif
}
static inline FP4_HD float fp4p_sqrt(float a) {
#ifdef __CUDA_ARCH__
    return __fsqrt_rn(a);
#else
    return __builtin_sqrtf(a); /* correctly rounded (sqrtss); -fno-math-errno not needed for bits */
#endif
}
static inline FP4_HD uint32_t fp4p_bits(float f) {
#ifdef __CUDA_ARCH__
    return (uint32_t)__float_as_uint(f);
#else
    union {
        float f;
        uint32_t u;
    } v;
    v.f = f;
    return v.u;
#endif
}
static inline FP4_HD float fp4p_from_bits(uint32_t u) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    union {
        float f;
        uint32_t u;
    } v;
    v.u = u;
    return v.f;
#endif
}

/* ---- the pinned reduction ---- */
/* Step 2 of the reduction: the butterfly over 32 lane partials (p is clobbered). [exact] */
static inline FP4_HD float fp4p_butterfly(float *p) {
    for (int off = FP4P_LANES / 2; off >= 1; off >>= 1)
        for (int l = 0; l < off; l++)
            p[l] = fp4p_add(p[l], p[l + off]);
    return p[0];
}
/* Σ t[i*stride], i < n. [exact] */
static inline FP4_HD float fp4p_sum(const float *t, int64_t n, int64_t stride) {
    float p[FP4P_LANES];
    for (int l = 0; l < FP4P_LANES; l++)
        p[l] = 0.0f;
    int64_t i0 = 0;
    for (; i0 + FP4P_LANES <= n; i0 += FP4P_LANES)
        for (int l = 0; l < FP4P_LANES; l++)
            p[l] = fp4p_add(p[l], t[(i0 + l) * stride]);
    for (int l = 0; i0 + l < n; l++)
        p[l] = fp4p_add(p[l], t[(i0 + l) * stride]);
    return fp4p_butterfly(p);
}
/* Σ a[i]*b[i] (each product rounded, then reduced). [exact] */
static inline FP4_HD float fp4p_dot(const float *a, const float *b, int64_t n) {
    float p[FP4P_LANES];
    for (int l = 0; l < FP4P_LANES; l++)
        p[l] = 0.0f;
    int64_t i0 = 0;
    for (; i0 + FP4P_LANES <= n; i0 += FP4P_LANES)
        for (int l = 0; l < FP4P_LANES; l++)
            p[l] = fp4p_add(p[l], fp4p_mul(a[i0 + l], b[i0 + l]));
    for (int l = 0; i0 + l < n; l++)
        p[l] = fp4p_add(p[l], fp4p_mul(a[i0 + l], b[i0 + l]));
    return fp4p_butterfly(p);
}
/* Σ x[i]*x[i]. [exact] */
static inline FP4_HD float fp4p_sumsq(const float *x, int64_t n) {
    return fp4p_dot(x, x, n);
}

/* ---- RMSNorm [exact] ----
 * ss = Σ x[i]*x[i] (pinned); mean = ss / (float)n; r = sqrt(mean + eps); inv = 1 / r;
 * y[i] = (x[i] * inv) * w[i]. (float)n is exact for n < 2^24. y may alias x. */
static inline FP4_HD float fp4p_rms_inv(const float *x, int64_t n, float eps) {
    float mean = fp4p_div(fp4p_sumsq(x, n), (float)n);
    return fp4p_div(1.0f, fp4p_sqrt(fp4p_add(mean, eps)));
}
static inline FP4_HD void fp4p_rmsnorm(const float *x, const float *w, int64_t n, float eps, float *y) {
    float inv = fp4p_rms_inv(x, n, eps);
    for (int64_t i = 0; i < n; i++)
        y[i] = fp4p_mul(fp4p_mul(x[i], inv), w[i]);
}

/* ---- the pinned exp [exact] ----
 * NaN -> NaN; x > 88.72283935546875 -> +inf; x < -103.97208404541015625 -> +0.
 * Otherwise: k = round-to-nearest-even(x * log2e) by the 1.5*2^23 magic number;
 *   r = (x - k*LN2_HI) - k*LN2_LO  (LN2_HI has 8 trailing zero bits so k*LN2_HI is exact);
 *   p = Horner of the degree-7 Taylor polynomial of e^r, coefficients c7..c0, each step
 *       p = p*r + c (two roundings);
 *   result = (p * 2^k1) * 2^k2 with k1 = k / 2 (C truncation), k2 = k - k1: both factors are
 *   normal f32 powers of two built from bits, so subnormal results are rounded the same way
 *   everywhere.
 * Accuracy: within 2 ulp of e^x on normal results (tested against libm in double). */
#define FP4P_EXP_HI 88.72283935546875f
#define FP4P_EXP_LO (-103.97208404541015625f)
static inline FP4_HD float fp4p_pow2i(int k) {
    return fp4p_from_bits((uint32_t)(k + 127) << 23);
} /* -126..127 */
static inline FP4_HD float fp4p_exp(float x) {
    if (x != x) return x;
    if (x > FP4P_EXP_HI) return fp4p_from_bits(0x7F800000u);
    if (x < FP4P_EXP_LO) return 0.0f;
    const float magic = 12582912.0f; /* 1.5 * 2^23 */
    float t = fp4p_add(fp4p_mul(x, 1.44269502162933349609375f), magic);
    float kf = fp4p_sub(t, magic); /* exact: an integer in [-150, 128] */
    int k = (int)kf;
    float r =
        fp4p_sub(fp4p_sub(x, fp4p_mul(kf, 0.693145751953125f)), fp4p_mul(kf, 1.428606765330187045e-06f));
    float p = 1.98412698e-4f;                     /* 1/5040 */
    p = fp4p_add(fp4p_mul(p, r), 1.38888889e-3f); /* 1/720 */
    p = fp4p_add(fp4p_mul(p, r), 8.33333377e-3f); /* 1/120 */
    p = fp4p_add(fp4p_mul(p, r), 4.16666679e-2f); /* 1/24 */
    p = fp4p_add(fp4p_mul(p, r), 1.66666672e-1f); /* 1/6 */
    p = fp4p_add(fp4p_mul(p, r), 0.5f);
    p = fp4p_add(fp4p_mul(p, r), 1.0f);
    p = fp4p_add(fp4p_mul(p, r), 1.0f);
    int k1 = k / 2, k2 = k - k1;
    return fp4p_mul(fp4p_mul(p, fp4p_pow2i(k1)), fp4p_pow2i(k2));
}

/* ---- SiLU and the SwiGLU gate [exact] ----
 * silu(g) = g / (1 + exp(-g)); act = silu(g) * u. */
static inline FP4_HD float fp4p_silu(float g) {
    return fp4p_div(g, fp4p_add(1.0f, fp4p_exp(-g)));
}
static inline FP4_HD float fp4p_swiglu(float g, float u) {
    return fp4p_mul(fp4p_silu(g), u);
}

/* ---- mixture-of-experts routing and combine [exact] ----
 * fp4p_moe_route: the k experts a column runs, from the router's E logits r, in selection order
 * (descending weight, ties to the lower index: k passes of "first index of the largest value not
 * yet taken"; a NaN never wins a comparison), and their weights.
 *   routing 1 (softmax, then top k; Qwen3-MoE): m = max r; e_i = exp(r_i - m); s = pinned sum of
 *     the E values e; p_i = e_i / s; the top k of p; norm: w_j = p_j / (pinned sum of the k p_j
 *     in selection order), else w_j = p_j.
 *   routing 2 (top k, then softmax; Mixtral): the top k of r; m = r of the first; e_j = exp(r_j - m);
 *     w_j = e_j / (pinned sum of the k e_j in selection order).
 * scratch: E floats. idx and w: k values. */
static inline FP4_HD void fp4p_moe_topk(const float *v, int64_t n, int k, int *idx) {
    for (int j = 0; j < k; j++) {
        int64_t best = -1;
        for (int64_t i = 0; i < n; i++) {
            int taken = 0;
            for (int t = 0; t < j; t++)
                taken |= idx[t] == (int)i;
            if (taken) continue;
            if (best < 0 || v[i] > v[best]) best = i;
        }
        idx[j] = (int)best;
    }
}
static inline FP4_HD void fp4p_moe_route(const float *r, int64_t n, int k, int routing, int norm,
                                         float *scratch, int *idx, float *w) {
    if (routing == 1) {
        float m = r[0];
        for (int64_t i = 1; i < n; i++)
            m = r[i] > m ? r[i] : m;
        for (int64_t i = 0; i < n; i++)
            scratch[i] = fp4p_exp(fp4p_sub(r[i], m));
        const float s = fp4p_sum(scratch, n, 1);
        for (int64_t i = 0; i < n; i++)
            scratch[i] = fp4p_div(scratch[i], s);
        fp4p_moe_topk(scratch, n, k, idx);
        for (int j = 0; j < k; j++)
            w[j] = scratch[idx[j]];
        if (norm) {
            const float t = fp4p_sum(w, k, 1);
            for (int j = 0; j < k; j++)
                w[j] = fp4p_div(w[j], t);
        }
        return;
    }
    fp4p_moe_topk(r, n, k, idx);
    const float m = r[idx[0]];
    for (int j = 0; j < k; j++)
        w[j] = fp4p_exp(fp4p_sub(r[idx[j]], m));
    const float s = fp4p_sum(w, k, 1);
    for (int j = 0; j < k; j++)
        w[j] = fp4p_div(w[j], s);
}
/* fp4p_moe_route_group (routing 3, DeepSeek-V3's noaux_tc; transformers' DeepseekV3TopkRouter):
 *   s_i = 1 / (1 + exp(-r_i)) (pinned: fp4p_div(1, 1 + fp4p_exp(-r_i))); c_i = s_i + bias_i (one add,
 *   selection only); groups of E / n_group experts: g = (largest c of the group) + (second largest)
 *   (one add; a group of one expert: its c); the topk_group groups of largest g (ties to the lower
 *   group); c of the experts of other groups becomes +0.0 (transformers' masked_fill); the top k of
 *   c (ties to the lower index); w_j = s of the chosen; norm: w_j = w_j / (pinned sum of the k w in
 *   selection order + 1e-20f); last w_j = w_j * scale (routed_scaling_factor as f32).
 * scratch: 2 E + n_group floats; gidx: topk_group ints; idx and w: k values. */
static inline FP4_HD void fp4p_moe_route_group(const float *r, const float *bias, int64_t n, int k,
                                               int64_t n_group, int64_t topk_group, int norm, float scale,
                                               float *scratch, int *gidx, int *idx, float *w) {
    float *sg = scratch, *c = scratch + n, *gs = scratch + 2 * n;
    const int64_t per = n / n_group;
    for (int64_t i = 0; i < n; i++) {
        sg[i] = fp4p_div(1.0f, fp4p_add(1.0f, fp4p_exp(-r[i])));
        c[i] = fp4p_add(sg[i], bias[i]);
    }
    for (int64_t g = 0; g < n_group; g++) {
        int two[2] = {0, 0};
        const int m = per < 2 ? (int)per : 2;
        fp4p_moe_topk(c + g * per, per, m, two);
        gs[g] = m == 2 ? fp4p_add(c[g * per + two[0]], c[g * per + two[1]]) : c[g * per + two[0]];
    }
    fp4p_moe_topk(gs, n_group, (int)topk_group, gidx);
    for (int64_t g = 0; g < n_group; g++) {
        int keep = 0;
        for (int64_t t = 0; t < topk_group; t++)
            keep |= gidx[t] == (int)g;
        if (!keep)
            for (int64_t i = g * per; i < (g + 1) * per; i++)
                c[i] = 0.0f;
    }
    fp4p_moe_topk(c, n, k, idx);
    for (int j = 0; j < k; j++)
        w[j] = sg[idx[j]];
    if (norm) {
        const float t = fp4p_add(fp4p_sum(w, k, 1), 1e-20f);
        for (int j = 0; j < k; j++)
            w[j] = fp4p_div(w[j], t);
    }
    for (int j = 0; j < k; j++)
        w[j] = fp4p_mul(w[j], scale);
}
/* Σ_j w_j y_j[i] in selection order: acc = w_0 y_0[i], then acc += w_j y_j[i] (each product and
 * sum one rounding); y_j = y + j * stride. */
static inline FP4_HD float fp4p_moe_combine(const float *w, const float *y, int k, int64_t stride,
                                            int64_t i) {
    float acc = fp4p_mul(w[0], y[i]);
    for (int j = 1; j < k; j++)
        acc = fp4p_add(acc, fp4p_mul(w[j], y[j * stride + i]));
    return acc;
}

/* ---- RoPE [exact] ----
 * HF's rotate-half convention (not interleaved): for i < half = head_dim/2, with c = cos[i],
 * s = sin[i] from the table row of this position (f32, computed once on the host in double,
 * see fp4_rt_rope_table; the GPU gets the same table uploaded):
 *   x0 = x[i], x1 = x[i + half];
 *   x[i]        = x0*c - x1*s;
 *   x[i + half] = x1*c + x0*s;     (each product rounded, then one add/sub) */
static inline FP4_HD void fp4p_rope(float *x, const float *cs, const float *sn, int half) {
    for (int i = 0; i < half; i++) {
        float x0 = x[i], x1 = x[i + half];
        x[i] = fp4p_sub(fp4p_mul(x0, cs[i]), fp4p_mul(x1, sn[i]));
        x[i + half] = fp4p_add(fp4p_mul(x1, cs[i]), fp4p_mul(x0, sn[i]));
    }
}

/* ---- attention for one query head over n cached positions [exact] ----
 * Inputs: q (head_dim f32, after RoPE), K and V rows j = 0..n-1 of this head's KV head, widened
 * from the F16 cache (exact), scale = (float)(1 / sqrt((double)head_dim)) (host-computed).
 *   s_j  = fp4p_dot(q, k_j, head_dim) * scale                (pinned dot, then one multiply)
 *   m    = max_j s_j                                          (order-free)
 *   e_j  = fp4p_exp(s_j - m)
 *   den  = fp4p_sum(e_0..e_{n-1})                             (pinned reduction over j)
 *   o[d] = fp4p_sum over j of (e_j * v_j[d]), then o[d] / den (pinned reduction over j, per d)
 * The score and weight buffers hold n floats; the caller provides them (n <= n_ctx). kv_row(j)
 * is given as a pointer and a row stride in halves; f16 widening is fp4p_f16_to_f32. */
static inline FP4_HD float fp4p_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 31, m = h & 1023;
    if (e == 0) {
        if (m == 0) return fp4p_from_bits(sign);
        /* subnormal: m * 2^-24, exact */
        float v = fp4p_mul((float)m, 5.9604644775390625e-08f);
        return sign ? -v : v;
    }
    if (e == 31) return fp4p_from_bits(sign | 0x7F800000u | (m << 13));
    return fp4p_from_bits(sign | ((e + 112u) << 23) | (m << 13));
}
/* f32 -> f16 round to nearest even (the KV cache store; bit-identical to fp4_f32_to_f16). */
static inline FP4_HD uint16_t fp4p_f32_to_f16(float f) {
    uint32_t u = fp4p_bits(f), sign = (u >> 16) & 0x8000u, a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return (uint16_t)(sign | 0x7E00u | ((a >> 13) & 0x3FFu)); /* NaN, quiet */
    if (a >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u);                       /* overflow -> inf */
    if (a < 0x38800000u) {                                                         /* f16 subnormal or 0 */
        if (a < 0x33000000u) return (uint16_t)sign;                                /* < 2^-25: 0 */
        uint32_t e = a >> 23, m = (a & 0x7FFFFFu) | 0x800000u;
        uint32_t shift = 126u - e; /* 14..24: m >> shift = units of 2^-24 */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t q = ((a >> 13) - (112u << 10)), rem = a & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) q++;
    return (uint16_t)(sign | q);
}

static inline FP4_HD void fp4p_attend(const float *q, const uint16_t *k0, const uint16_t *v0,
                                      int64_t row_stride, int64_t n, int head_dim, float scale, float *s,
                                      float *o) {
    float kv[512]; /* head_dim <= 512 (checked by arch) */
    float m = 0.0f;
    for (int64_t j = 0; j < n; j++) {
        const uint16_t *kr = k0 + j * row_stride;
        for (int d = 0; d < head_dim; d++)
            kv[d] = fp4p_f16_to_f32(kr[d]);
        s[j] = fp4p_mul(fp4p_dot(q, kv, head_dim), scale);
        if (j == 0 || s[j] > m) m = s[j];
    }
    for (int64_t j = 0; j < n; j++)
        s[j] = fp4p_exp(fp4p_sub(s[j], m));
    float den = fp4p_sum(s, n, 1);
    for (int d = 0; d < head_dim; d++) {
        float p[FP4P_LANES];
        for (int l = 0; l < FP4P_LANES; l++)
            p[l] = 0.0f;
        for (int64_t j = 0; j < n; j++)
            p[j % FP4P_LANES] =
                fp4p_add(p[j % FP4P_LANES], fp4p_mul(s[j], fp4p_f16_to_f32(v0[j * row_stride + d])));
        o[d] = fp4p_div(fp4p_butterfly(p), den);
    }
}

#endif
