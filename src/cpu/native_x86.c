/* native_x86.c — the row decode of the CPU's native NVFP4 A16 route (native.c) with AVX2 and
 * AVX-512, chosen at run time (cpu_path.c), each giving the portable bits.
 *
 * The portable decode writes row[16b + j] = e2m1_value[code_j] * s_b, s_b = stab[scale_b] =
 * e4m3(scale_b) * scale2 (one f32 multiply each, codes low nibble first). Here s_b is the same, and the
 * sixteen values of a group come from one table permute (AVX-512: the 16-entry table; AVX2: the
 * eight magnitudes, the sign bit of code bit 3 put back with an xor — e2m1_value[8 + k] is exactly
 * -e2m1_value[k], -0.0 included), then one vector multiply by s_b: IEEE multiplication is exact
 * up to one rounding of the same operands, and negating an operand negates the result, so every
 * value is the portable one bit for bit (NaN scales give NaN values either way; which NaN a dot
 * returns is settled by the dots, which return 0xFFC00000). */
#include "cpu/native.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define FP4_TARGET_AVX2 __attribute__((target("avx2")))
#define FP4_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))
#define FP4_INLINE static inline __attribute__((always_inline))

/* group b's 16 values (codes low nibble first) times s, as two ymm (AVX2) or one zmm (AVX-512) */
FP4_INLINE FP4_TARGET_AVX2 void group_avx2(const uint8_t *q, float s, __m256 v[2]) {
    const __m256 mag = _mm256_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f);
    const __m256i m15 = _mm256_set1_epi32(15), m7 = _mm256_set1_epi32(7), m8 = _mm256_set1_epi32(8);
    const __m256 vs = _mm256_set1_ps(s);
    const __m256i d = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)q));
    const __m256i lo = _mm256_and_si256(d, m15), hi = _mm256_srli_epi32(d, 4);
    const __m256i u0 = _mm256_unpacklo_epi32(lo, hi), u1 = _mm256_unpackhi_epi32(lo, hi);
    const __m256i c[2] = {_mm256_permute2x128_si256(u0, u1, 0x20), _mm256_permute2x128_si256(u0, u1, 0x31)};
    for (int h = 0; h < 2; h++) {
        const __m256 m = _mm256_permutevar8x32_ps(mag, _mm256_and_si256(c[h], m7));
        const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(c[h], m8), 28);
        v[h] = _mm256_mul_ps(_mm256_xor_ps(m, _mm256_castsi256_ps(sign)), vs);
    }
}
FP4_INLINE FP4_TARGET_AVX512 __m512 group_avx512(const uint8_t *q, float s) {
    const __m512 lut = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f, -1.0f,
                                      -1.5f, -2.0f, -3.0f, -4.0f, -6.0f);
    /* dword k = byte k/2 of the group, shifted right by 4 when k is odd: its low four bits are code k
     * (vpermps reads only those), so the codes in row order in three operations */
    const __m128i dup = _mm_shuffle_epi8(_mm_loadl_epi64((const __m128i *)(const void *)q),
                                         _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7));
    const __m512i idx = _mm512_srlv_epi32(_mm512_cvtepu8_epi32(dup),
                                          _mm512_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4));
    return _mm512_mul_ps(_mm512_permutexvar_ps(idx, lut), _mm512_set1_ps(s));
}

/* fp4_dot64_reduce (native.c: p[l] += p[l + w] for w = 32, 16, .., 1) on the lanes in registers:
 * the same additions of the same pairs (addition commutes bit for bit; which NaN comes out is
 * settled by fp4_canonical_nan), so the same bits as storing the lanes and calling it */
FP4_INLINE FP4_TARGET_AVX2 float reduce8_avx2(__m256 acc[8]) {
    for (int k = 0; k < 4; k++) /* w = 32: lanes l and l + 32 are acc[k] and acc[k + 4] */
        acc[k] = _mm256_add_ps(acc[k], acc[k + 4]);
    acc[0] = _mm256_add_ps(acc[0], acc[2]); /* w = 16 */
    acc[1] = _mm256_add_ps(acc[1], acc[3]);
    const __m256 d = _mm256_add_ps(acc[0], acc[1]);                                   /* w = 8 */
    const __m128 e = _mm_add_ps(_mm256_castps256_ps128(d), _mm256_extractf128_ps(d, 1)); /* w = 4 */
    const __m128 f = _mm_add_ps(e, _mm_movehl_ps(e, e));                               /* w = 2 */
    return fp4_canonical_nan(_mm_cvtss_f32(_mm_add_ss(f, _mm_shuffle_ps(f, f, 1))));  /* w = 1 */
}
FP4_INLINE FP4_TARGET_AVX512 float reduce4_avx512(const __m512 acc[4]) {
    const __m512 c = _mm512_add_ps(_mm512_add_ps(acc[0], acc[2]), _mm512_add_ps(acc[1], acc[3])); /* 32, 16 */
    const __m256 d = _mm256_add_ps(_mm512_castps512_ps256(c),
                                   _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(c), 1))); /* 8 */
    const __m128 e = _mm_add_ps(_mm256_castps256_ps128(d), _mm256_extractf128_ps(d, 1)); /* w = 4 */
    const __m128 f = _mm_add_ps(e, _mm_movehl_ps(e, e));                               /* w = 2 */
    return fp4_canonical_nan(_mm_cvtss_f32(_mm_add_ss(f, _mm_shuffle_ps(f, f, 1))));  /* w = 1 */
}

FP4_TARGET_AVX2 void fp4_nvfp4_row_decode_avx2(const uint8_t *pay, const uint8_t *sc, const float *stab,
                                               int64_t n_in, float *row) {
    for (int64_t b = 0; b < n_in / 16; b++) {
        __m256 v[2];
        group_avx2(pay + 8 * b, stab[sc[b]], v);
        _mm256_storeu_ps(row + 16 * b, v[0]);
        _mm256_storeu_ps(row + 16 * b + 8, v[1]);
    }
}

FP4_TARGET_AVX512 void fp4_nvfp4_row_decode_avx512(const uint8_t *pay, const uint8_t *sc, const float *stab,
                                                   int64_t n_in, float *row) {
    for (int64_t b = 0; b < n_in / 16; b++)
        _mm512_storeu_ps(row + 16 * b, group_avx512(pay + 8 * b, stab[sc[b]]));
}

/* dot64 (native.c): lanes 0..63 as eight ymm / four zmm of partials, a multiply then an add per
 * lane and step (no FMA, the file is built with -ffp-contract=off), the tail and the tree portable */
FP4_TARGET_AVX2 float fp4_dot64_f32_avx2(const float *a, const float *b, int64_t n) {
    /* named accumulators (registers; an array of them was kept in memory by the compiler) */
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    int64_t i = 0;
#define FP4_T8(k) _mm256_mul_ps(_mm256_loadu_ps(a + i + 8 * (k)), _mm256_loadu_ps(b + i + 8 * (k)))
    for (; i + 64 <= n; i += 64) {
        a0 = _mm256_add_ps(a0, FP4_T8(0)), a1 = _mm256_add_ps(a1, FP4_T8(1));
        a2 = _mm256_add_ps(a2, FP4_T8(2)), a3 = _mm256_add_ps(a3, FP4_T8(3));
        a4 = _mm256_add_ps(a4, FP4_T8(4)), a5 = _mm256_add_ps(a5, FP4_T8(5));
        a6 = _mm256_add_ps(a6, FP4_T8(6)), a7 = _mm256_add_ps(a7, FP4_T8(7));
    }
#undef FP4_T8
    __m256 acc[8] = {a0, a1, a2, a3, a4, a5, a6, a7};
    if (i == n) return reduce8_avx2(acc);
    float p[64];
    for (int k = 0; k < 8; k++)
        _mm256_storeu_ps(p + 8 * k, acc[k]);
    for (; i < n; i++)
        p[i & 63] += a[i] * b[i];
    return fp4_dot64_reduce(p);
}
FP4_TARGET_AVX512 float fp4_dot64_f32_avx512(const float *a, const float *b, int64_t n) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0; /* named: registers */
    int64_t i = 0;
#define FP4_T16(k) _mm512_mul_ps(_mm512_loadu_ps(a + i + 16 * (k)), _mm512_loadu_ps(b + i + 16 * (k)))
    for (; i + 64 <= n; i += 64) {
        a0 = _mm512_add_ps(a0, FP4_T16(0)), a1 = _mm512_add_ps(a1, FP4_T16(1));
        a2 = _mm512_add_ps(a2, FP4_T16(2)), a3 = _mm512_add_ps(a3, FP4_T16(3));
    }
#undef FP4_T16
    __m512 acc[4] = {a0, a1, a2, a3};
    if (i == n) return reduce4_avx512(acc);
    float p[64];
    for (int k = 0; k < 4; k++)
        _mm512_storeu_ps(p + 16 * k, acc[k]);
    for (; i < n; i++)
        p[i & 63] += a[i] * b[i];
    return fp4_dot64_reduce(p);
}

/* one row against one column without the row in memory: group b holds values 16b .. 16b+15,
 * lanes 16 (b mod 4) .. +15, so its products go to accumulator b mod 4 (eight ymm: 2b, 2b+1 mod 8) */
FP4_TARGET_AVX2 float fp4_nvfp4_dot64_avx2(const uint8_t *pay, const uint8_t *sc, const float *stab,
                                           const float *x, int64_t n_in) {
    /* named accumulators (registers), four groups a trip: group b to a(2(b mod 4)), a(2(b mod 4)+1) */
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    const int64_t nb = n_in / 16;
    int64_t b = 0;
#define FP4_G8(g, lo, hi)                                                                                    \
    do {                                                                                                     \
        __m256 v_[2];                                                                                        \
        group_avx2(pay + 8 * (g), stab[sc[g]], v_);                                                          \
        lo = _mm256_add_ps(lo, _mm256_mul_ps(v_[0], _mm256_loadu_ps(x + 16 * (g))));                         \
        hi = _mm256_add_ps(hi, _mm256_mul_ps(v_[1], _mm256_loadu_ps(x + 16 * (g) + 8)));                     \
    } while (0)
    for (; b + 4 <= nb; b += 4) {
        FP4_G8(b, a0, a1);
        FP4_G8(b + 1, a2, a3);
        FP4_G8(b + 2, a4, a5);
        FP4_G8(b + 3, a6, a7);
    }
    if (b < nb) FP4_G8(b, a0, a1); /* the tail: groups b mod 4 = 0, 1, 2 */
    if (b + 1 < nb) FP4_G8(b + 1, a2, a3);
    if (b + 2 < nb) FP4_G8(b + 2, a4, a5);
#undef FP4_G8
    __m256 acc[8] = {a0, a1, a2, a3, a4, a5, a6, a7};
    return reduce8_avx2(acc);
}
FP4_TARGET_AVX512 float fp4_nvfp4_dot64_avx512(const uint8_t *pay, const uint8_t *sc, const float *stab,
                                               const float *x, int64_t n_in) {
#define FP4_GROUP_TERM(b)                                                                                    \
    _mm512_mul_ps(group_avx512(pay + 8 * (b), stab[sc[b]]), _mm512_loadu_ps(x + 16 * (b)))
    /* four named accumulators, four groups a trip: registers (an array indexed by b mod 4 stayed in
     * memory, a store-to-load chain per group) */
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    const int64_t nb = n_in / 16;
    int64_t b = 0;
    for (; b + 4 <= nb; b += 4) {
        a0 = _mm512_add_ps(a0, FP4_GROUP_TERM(b));
        a1 = _mm512_add_ps(a1, FP4_GROUP_TERM(b + 1));
        a2 = _mm512_add_ps(a2, FP4_GROUP_TERM(b + 2));
        a3 = _mm512_add_ps(a3, FP4_GROUP_TERM(b + 3));
    }
    if (b < nb) a0 = _mm512_add_ps(a0, FP4_GROUP_TERM(b)); /* the tail: groups b mod 4 = 0, 1, 2 */
    if (b + 1 < nb) a1 = _mm512_add_ps(a1, FP4_GROUP_TERM(b + 1));
    if (b + 2 < nb) a2 = _mm512_add_ps(a2, FP4_GROUP_TERM(b + 2));
#undef FP4_GROUP_TERM
    const __m512 acc[4] = {a0, a1, a2, a3};
    return reduce4_avx512(acc);
}
#else
float fp4_dot64_f32_avx2(const float *a, const float *b, int64_t n) {
    return fp4_cpu_dot64_f32(a, b, n);
}
float fp4_dot64_f32_avx512(const float *a, const float *b, int64_t n) {
    return fp4_cpu_dot64_f32(a, b, n);
}
float fp4_nvfp4_dot64_avx2(const uint8_t *pay, const uint8_t *sc, const float *stab, const float *x,
                           int64_t n_in) {
    return fp4_nvfp4_dot64(pay, sc, stab, x, n_in);
}
float fp4_nvfp4_dot64_avx512(const uint8_t *pay, const uint8_t *sc, const float *stab, const float *x,
                             int64_t n_in) {
    return fp4_nvfp4_dot64(pay, sc, stab, x, n_in);
}
void fp4_nvfp4_row_decode_avx2(const uint8_t *pay, const uint8_t *sc, const float *stab, int64_t n_in,
                               float *row) {
    fp4_nvfp4_row_decode(pay, sc, stab, n_in, row);
}
void fp4_nvfp4_row_decode_avx512(const uint8_t *pay, const uint8_t *sc, const float *stab, int64_t n_in,
                                 float *row) {
    fp4_nvfp4_row_decode(pay, sc, stab, n_in, row);
}
#endif
