/* kquant_dot.c — the Q4_K/Q6_K dot products against Q8_K activations, in ggml's order (the
 * reference of the CPU backend's paths and matvecs, src/cpu/kquant_matvec.c).
 *
 * The f32 part follows ggml's portable vec_dot (ggml_vec_dot_q{4,6}_K_q8_K_generic) exactly:
 * per block, eight int32 lane sums (lane l collects the products at positions ≡ l mod 8, each
 * group of 8 weighted by its sub-block scale), then sums[l] += (fp16(d)*y.d) * lane[l]; Q4_K also
 * does total -= (fp16(dmin)*y.d) * Σ bsums·mins per block; at the end total += sums[0..7] in
 * order; a NaN result is returned as the NaN 0xFFC00000 (fp4_canonical_nan; ggml returns whichever
 * NaN its compiled operand order keeps, that one when the NaN arises inside the dot). The integer
 * work is exact, so its order is free: kquant_avx2.c and kquant_avx512.c do the Q4_K and Q6_K ones with AVX2
 * and AVX-512 (the same bits), chosen at run time (cpu_path.c). On AVX-512 the matvec takes four rows at
 * a time (fp4_q{4,6}K_rows4_avx512: each row's f32 operations in the elements of vectors, in its own
 * order); every path prefetches the weights 8 rows ahead. */
#include "fp4_impl.h"
#include <math.h>
#include <stdlib.h>

#define QK FP4_QK_K


float fp4_q4K_dot_ref(const fp4_block_q4_K *w, const fp4_block_q8_K *x, int64_t nb) {
    float sums[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    float total = 0;
    for (int64_t i = 0; i < nb; i++) {
        const fp4_block_q4_K *b = w + i;
        const fp4_block_q8_K *a = x + i;
        uint8_t sc[8], mn[8];
        for (int j = 0; j < 8; j++) fp4_q4K_scale_min(j, b->scales, &sc[j], &mn[j]);
        int32_t msum = 0;
        for (int j = 0; j < 16; j++) msum += a->bsums[j] * mn[j / 2];
        int32_t lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int c = 0; c < 4; c++) {
            const uint8_t *q = b->qs + 32 * c;
            const int8_t *p = a->qs + 64 * c;
            /* each product |nibble × q8| <= 15·128 fits in int16 */
            int16_t plo[32], phi[32];
            for (int t = 0; t < 32; t++) {
                plo[t] = (int16_t)((q[t] & 0xF) * p[t]);
                phi[t] = (int16_t)((q[t] >> 4) * p[32 + t]);
            }
            const int32_t s0 = sc[2 * c], s1 = sc[2 * c + 1];
            for (int l = 0; l < 8; l++) {
                const int32_t lo = plo[l] + plo[8 + l] + plo[16 + l] + plo[24 + l];
                const int32_t hi = phi[l] + phi[8 + l] + phi[16 + l] + phi[24 + l];
                lane[l] += s0 * lo + s1 * hi;
            }
        }
        const float d = fp4_f16_to_f32(b->d) * a->d;
        for (int l = 0; l < 8; l++) sums[l] += d * (float)lane[l];
        const float dmin = fp4_f16_to_f32(b->dmin) * a->d;
        total -= dmin * (float)msum;
    }
    for (int l = 0; l < 8; l++) total += sums[l];
    return fp4_canonical_nan(total);
}

float fp4_q6K_dot_ref(const fp4_block_q6_K *w, const fp4_block_q8_K *x, int64_t nb) {
    float sums[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    float total = 0;
    for (int64_t i = 0; i < nb; i++) {
        const fp4_block_q6_K *b = w + i;
        const fp4_block_q8_K *a = x + i;
        int32_t lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
            const int8_t *p = a->qs + 128 * h;
            const int8_t *sc = b->scales + 8 * h;
            /* position l < 32 holds four values (l, l+32, l+64, l+96) of this 128-value half;
             * each product |(q-32) × q8| <= 32·128 fits in int16 */
            int16_t prod[128];
            for (int l = 0; l < 32; l++) {
                prod[l] = (int16_t)((((ql[l] & 0xF) | ((qh[l] & 3) << 4)) - 32) * p[l]);
                prod[l + 32] = (int16_t)((((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32) * p[l + 32]);
                prod[l + 64] = (int16_t)((((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32) * p[l + 64]);
                prod[l + 96] = (int16_t)((((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32) * p[l + 96]);
            }
            /* scale group g covers positions 16g..16g+15; lane = position mod 8 */
            for (int g = 0; g < 8; g++) {
                const int32_t s = sc[g];
                for (int l = 0; l < 8; l++) lane[l] += s * (prod[16 * g + l] + prod[16 * g + 8 + l]);
            }
        }
        const float d = fp4_f16_to_f32(b->d) * a->d;
        for (int l = 0; l < 8; l++) sums[l] += d * (float)lane[l];
    }
    for (int l = 0; l < 8; l++) total += sums[l];
    return fp4_canonical_nan(total);
}
