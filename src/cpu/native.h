/* native.h — the CPU's native (fast, not bit-pinned) projection kernels, reached only through the
 * dispatch table in project.c. */
#ifndef FP4_CPU_NATIVE_H
#define FP4_CPU_NATIVE_H

#include "fp4_impl.h"

/* y = W x for an NVFP4 A16 weight (n_in % 16 == 0), f32 accumulation; layout as
 * fp4_nvfp4_matvec_a16_exact. */
fp4_status fp4_cpu_nvfp4_a16_native(const fp4_nvfp4_view *w, const float *x, int64_t n_cols, float *y,
                                    int n_threads);

/* Σ a[i]·b[i] in f32 with eight partial sums (native dense rows and NVFP4 rows). */
float fp4_cpu_dot_f32(const float *a, const float *b, int64_t n);

/* dense_x86.c: the same bits as fp4p_dot (pinned) and fp4_cpu_dot_f32 (dot8) on the AVX2 / AVX-512
 * paths; the _bf16 forms read a's row as n little-endian bf16 values and widen them exactly. */
float fp4_pinned_dot_f32_avx2(const float *a, const float *b, int64_t n);
float fp4_pinned_dot_bf16_avx2(const uint8_t *w, const float *b, int64_t n);
float fp4_pinned_dot_f32_avx512(const float *a, const float *b, int64_t n);
float fp4_pinned_dot_bf16_avx512(const uint8_t *w, const float *b, int64_t n);
float fp4_dot8_f32_avx2(const float *a, const float *b, int64_t n);
float fp4_dot8_bf16_avx2(const uint8_t *w, const float *b, int64_t n);

#endif
