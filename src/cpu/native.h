/* native.h — the CPU's native (fast, not bit-pinned) projection kernels, reached only through the
 * dispatch table in project.c. */
#ifndef FP4_CPU_NATIVE_H
#define FP4_CPU_NATIVE_H

#include "cpu/cpu_impl.h"

/* y = W x for an NVFP4 A16 weight (n_in % 16 == 0), f32 accumulation; layout as
 * fp4_nvfp4_matvec_a16_exact. */
fp4_status fp4_cpu_nvfp4_a16_native(const fp4_nvfp4_view *w, const float *x, int64_t n_cols, float *y,
                                    int n_threads);

/* One NVFP4 row (n_in % 16 == 0) to f32 as the native route decodes it: value * stab[scale byte],
 * stab from fp4_nvfp4_scale_table (e4m3 value * scale2, one f32 multiply each); the _avx2 /
 * _avx512 forms (native_x86.c) give the same bits. */
void fp4_nvfp4_scale_table(float scale2, float stab[256]);
void fp4_nvfp4_row_decode(const uint8_t *pay, const uint8_t *sc, const float *stab, int64_t n_in, float *row);
void fp4_nvfp4_row_decode_avx2(const uint8_t *pay, const uint8_t *sc, const float *stab, int64_t n_in,
                               float *row);
void fp4_nvfp4_row_decode_avx512(const uint8_t *pay, const uint8_t *sc, const float *stab, int64_t n_in,
                                 float *row);

/* Σ a[i]·b[i] in f32 in 64 lanes and the halving tree (native NVFP4 rows, native.c), NaN as
 * 0xFFC00000; fp4_dot64_reduce: the tree over stored lanes. The AVX forms (native_x86.c) give the
 * same bits; fp4_nvfp4_dot64 and its AVX forms (one row, one column, no row buffer) the same as
 * row decode + dot64. */
float fp4_cpu_dot64_f32(const float *a, const float *b, int64_t n);
float fp4_dot64_reduce(float p[64]);
float fp4_dot64_f32_avx2(const float *a, const float *b, int64_t n);
float fp4_dot64_f32_avx512(const float *a, const float *b, int64_t n);
float fp4_nvfp4_dot64(const uint8_t *pay, const uint8_t *sc, const float *stab, const float *x,
                      int64_t n_in);
float fp4_nvfp4_dot64_avx2(const uint8_t *pay, const uint8_t *sc, const float *stab, const float *x,
                           int64_t n_in);
float fp4_nvfp4_dot64_avx512(const uint8_t *pay, const uint8_t *sc, const float *stab, const float *x,
                             int64_t n_in);

/* Σ a[i]·b[i] in f32 with eight partial sums (native dense rows). */
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
