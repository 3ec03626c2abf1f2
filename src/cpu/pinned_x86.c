/* pinned_x86.c — pinned.h's element-wise SwiGLU (and its exp) over a vector of values with AVX2 and
 * AVX-512, chosen at run time (cpu_path.c; step_cpu.c), the same bits as the scalar loop:
 *   g[i] = fp4p_swiglu(g[i], u[i]) = (g / (1 + exp(-g))) * u, each operation rounded once,
 * the exp fp4x_exp16 / fp4x_exp8 (pinned_x86.h: fp4p_exp's operations per lane), negation a sign
 * flip as in C. A NaN result may carry another NaN's payload (which operand's NaN an add keeps
 * depends on the order the compiler picked for the scalar code; the GPU twin's NaN is canonical). */
#include "cpu/cpu_impl.h"
#include "cpu/pinned_x86.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define FP4_TARGET_AVX2 __attribute__((target("avx2")))
#define FP4_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

FP4_TARGET_AVX512 void fp4_swiglu_avx512(float *g, const float *u, int64_t n) {
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512i sign = _mm512_set1_epi32((int)0x80000000u);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1u);
        const __m512 x = _mm512_maskz_loadu_ps(k, g + i), y = _mm512_maskz_loadu_ps(k, u + i);
        const __m512 e = fp4x_exp16(_mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), sign)));
        _mm512_mask_storeu_ps(g + i, k, _mm512_mul_ps(_mm512_div_ps(x, _mm512_add_ps(one, e)), y));
    }
}
FP4_TARGET_AVX512 void fp4_exp_avx512(const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1u);
        _mm512_mask_storeu_ps(y + i, k, fp4x_exp16(_mm512_maskz_loadu_ps(k, x + i)));
    }
}

FP4_TARGET_AVX2 void fp4_swiglu_avx2(float *g, const float *u, int64_t n) {
    const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_castsi256_ps(_mm256_set1_epi32((int)0x80000000u));
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(g + i), y = _mm256_loadu_ps(u + i);
        const __m256 e = fp4x_exp8(_mm256_xor_ps(x, sign));
        _mm256_storeu_ps(g + i, _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(one, e)), y));
    }
    for (; i < n; i++)
        g[i] = fp4p_swiglu(g[i], u[i]);
}
FP4_TARGET_AVX2 void fp4_exp_avx2(const float *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, fp4x_exp8(_mm256_loadu_ps(x + i)));
    for (; i < n; i++)
        y[i] = fp4p_exp(x[i]);
}
#else
void fp4_swiglu_avx512(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        g[i] = fp4p_swiglu(g[i], u[i]);
}
void fp4_exp_avx512(const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        y[i] = fp4p_exp(x[i]);
}
void fp4_swiglu_avx2(float *g, const float *u, int64_t n) {
    fp4_swiglu_avx512(g, u, n);
}
void fp4_exp_avx2(const float *x, float *y, int64_t n) {
    fp4_exp_avx512(x, y, n);
}
#endif
