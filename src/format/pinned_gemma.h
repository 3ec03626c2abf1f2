/* pinned_gemma.h — the exact-mode operations Gemma 3 adds to THE STEP (backend.h), in pinned.h's
 * terms: one order of IEEE binary32 basic operations and fp4p_exp, nothing from libm, so any
 * backend that follows them gives the same bits (backend.h, THE STEP, Gemma 3). */
#ifndef FP4_RT_PINNED_GEMMA_H
#define FP4_RT_PINNED_GEMMA_H

#include "format/pinned.h"

/* ---- tanh [exact] ----
 * NaN -> NaN; |y| < 2^-12 -> y (tanh y = y(1 - y²/3 + ...) rounds to y there); else
 * e = fp4p_exp(-2|y|) (-2|y| exact), t = (1 - e) / (1 + e), the sign of y restored.
 * Absolute error below 2^-22 (fp4p_exp's 2 ulp through the quotient). */
static inline FP4_HD float fp4p_tanh(float y) {
    if (y != y) return y;
    const float ay = y < 0.0f ? -y : y;
    if (ay < 2.44140625e-4f) return y;
    const float e = fp4p_exp(-2.0f * ay);
    const float t = fp4p_div(fp4p_sub(1.0f, e), fp4p_add(1.0f, e));
    return y < 0.0f ? -t : t;
}

/* ---- gelu_pytorch_tanh and the GeGLU gate [exact] ----
 * PyTorch's order: c = (x * x) * x; inner = B * (x + K * c) with K = 0.044715f and
 * B = (float)(sqrt(2/pi)) = 0.7978845834732055664f; gelu = (0.5 * x) * (1 + tanh(inner));
 * act = gelu(g) * u. */
static inline FP4_HD float fp4p_gelu_tanh(float x) {
    const float c = fp4p_mul(fp4p_mul(x, x), x);
    const float inner = fp4p_mul(0.7978845834732055664f, fp4p_add(x, fp4p_mul(0.044715f, c)));
    return fp4p_mul(fp4p_mul(0.5f, x), fp4p_add(1.0f, fp4p_tanh(inner)));
}
static inline FP4_HD float fp4p_geglu(float g, float u) {
    return fp4p_mul(fp4p_gelu_tanh(g), u);
}

/* ---- logit soft-capping [exact] ----
 * transformers' order: l = tanh(l / cap) * cap. */
static inline FP4_HD float fp4p_softcap(float l, float cap) {
    return fp4p_mul(fp4p_tanh(fp4p_div(l, cap)), cap);
}

/* ---- bf16 rounding [exact] ----
 * f32 -> the nearest bf16 (ties to even), as f32; NaN stays NaN (quiet). */
static inline FP4_HD float fp4p_round_bf16(float f) {
    uint32_t u = fp4p_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return fp4p_from_bits(u | 0x00400000u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return fp4p_from_bits(u & 0xFFFF0000u);
}

/* ---- Gemma's embedding scale [exact] ----
 * transformers multiplies the embedding row by sqrt(hidden) held in the embedding's dtype:
 * scale = dtype((float)sqrt((double)hidden)) (the host computes it once), x = dtype(e * scale),
 * one f32 multiply, then rounded to the dtype: bf16 (also for a quantized embedding table, whose
 * model is bf16), f16, or f32 (no rounding). dtype: 0 f32, 1 f16, 2 bf16. */
static inline FP4_HD float fp4p_round_to(float f, int dtype) {
    return dtype == 2 ? fp4p_round_bf16(f) : dtype == 1 ? fp4p_f16_to_f32(fp4p_f32_to_f16(f)) : f;
}
static inline FP4_HD float fp4p_embed_scale(float e, float scale, int dtype) {
    return fp4p_round_to(fp4p_mul(e, scale), dtype);
}

#endif
