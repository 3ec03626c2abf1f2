/* fp4_impl.h — internals shared across src/ (never installed): error filling, checked size
 * arithmetic, explicit little-endian decoding, the bounded cursor. */
#ifndef FP4_IMPL_H
#define FP4_IMPL_H

#define FP4LANE_ORACLE_API /* the library defines the oracle helpers too */
#include "fp4lane.h"
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* Fill *err (may be NULL) and return code. file/tensor may be NULL. */
fp4_status fp4_fail(fp4_error *err, fp4_status code, const char *file, const char *tensor, const char *rule,
                    const char *fmt, ...) __attribute__((format(printf, 6, 7)));
void fp4_error_clear(fp4_error *err);

/* ---- checked arithmetic: true on overflow ---- */
static inline bool fp4_mul_overflow_u64(uint64_t a, uint64_t b, uint64_t *r) {
    return __builtin_mul_overflow(a, b, r);
}
static inline bool fp4_add_overflow_u64(uint64_t a, uint64_t b, uint64_t *r) {
    return __builtin_add_overflow(a, b, r);
}
static inline bool fp4_mul_overflow_i64(int64_t a, int64_t b, int64_t *r) {
    return __builtin_mul_overflow(a, b, r);
}
static inline bool fp4_add_overflow_i64(int64_t a, int64_t b, int64_t *r) {
    return __builtin_add_overflow(a, b, r);
}
/* round x up to a multiple of align (a power of two); true on overflow */
static inline bool fp4_align_up_u64(uint64_t x, uint64_t align, uint64_t *r) {
    uint64_t t;
    if (__builtin_add_overflow(x, align - 1, &t)) return true;
    *r = t & ~(align - 1);
    return false;
}

/* ---- explicit little-endian decoding/encoding ---- */
static inline uint16_t fp4_rd_le16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t fp4_rd_le32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t fp4_rd_le64(const uint8_t *p) {
    return (uint64_t)fp4_rd_le32(p) | ((uint64_t)fp4_rd_le32(p + 4) << 32);
}
static inline float fp4_rd_lef32(const uint8_t *p) {
    uint32_t u = fp4_rd_le32(p);
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline void fp4_wr_le16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
/* straight-line byte stores: the compiler merges them into one store on a little-endian host */
static inline void fp4_wr_le32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16), p[3] = (uint8_t)(v >> 24);
}
static inline void fp4_wr_le64(uint8_t *p, uint64_t v) {
    fp4_wr_le32(p, (uint32_t)v);
    fp4_wr_le32(p + 4, (uint32_t)(v >> 32));
}
static inline void fp4_wr_lef32(uint8_t *p, float f) { uint32_t u; memcpy(&u, &f, 4); fp4_wr_le32(p, u); }
static inline uint32_t fp4_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float fp4_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* ---- bounded cursor over untrusted bytes ---- */
typedef struct fp4_cursor {
    const uint8_t *p;
    size_t left;
} fp4_cursor;

static inline bool fp4_cur_take(fp4_cursor *c, size_t n, const uint8_t **out) {
    if (n > c->left) return false;
    *out = c->p;
    c->p += n;
    c->left -= n;
    return true;
}
static inline bool fp4_cur_u8(fp4_cursor *c, uint8_t *v) {
    const uint8_t *p;
    if (!fp4_cur_take(c, 1, &p)) return false;
    *v = p[0];
    return true;
}
static inline bool fp4_cur_u32(fp4_cursor *c, uint32_t *v) {
    const uint8_t *p;
    if (!fp4_cur_take(c, 4, &p)) return false;
    *v = fp4_rd_le32(p);
    return true;
}
static inline bool fp4_cur_u64(fp4_cursor *c, uint64_t *v) {
    const uint8_t *p;
    if (!fp4_cur_take(c, 8, &p)) return false;
    *v = fp4_rd_le64(p);
    return true;
}

/* ---- small shared helpers ---- */
/* rows of a tensor in GGUF dim order: the product of ne[1..n_dims) (1 for 0-D and 1-D) */
static inline int64_t fp4_rows_of(const int64_t *ne, int32_t n_dims) {
    int64_t n = 1;
    for (int32_t i = 1; i < n_dims; i++) n *= ne[i]; /* callers hold shapes the readers bounded */
    return n;
}
static inline int fp4_ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}
/* index of s in names[0..n), -1 when absent */
static inline int fp4_name_index(const char *s, const char *const *names, int n) {
    for (int i = 0; i < n; i++)
        if (!strcmp(s, names[i])) return i;
    return -1;
}

/* ---- numeric helpers shared by the oracle files ---- */
/* ggml's nearest_int: magic-number round to nearest even, valid for |fval| <= 4194303 */
static inline int fp4_nearest_int(float fval) {
    float val = fval + 12582912.f;
    int32_t i;
    memcpy(&i, &val, 4);
    return (i & 0x007fffff) - 0x00400000;
}

/* SPEC §4 step 4, the pinned epilogue of one super-block: exactly these four f32 operations, the
 * super-blocks in index order. The one CPU definition (the CUDA twin is fp4_cu_a16_term). */
static inline float fp4_a16_epilogue(int64_t total, float d, float scale2, float acc) {
    float c = __builtin_fmaf((float)total, 0x1p-10f, 0.0f);
    c = __builtin_fmaf(c, d, 0.0f);
    c = __builtin_fmaf(c, scale2, 0.0f);
    return __builtin_fmaf(1.0f, c, acc);
}

/* A NaN result as the one NaN 0xFFC00000 (x86's default NaN, what Inf - Inf gives there, and so
 * what ggml returns when the NaN arises inside the dot): which NaN's payload survives an f32 add
 * of two NaNs depends on the operand order the compiler picked, so the K-quant dots return this
 * one instead, the same bits on every CPU path and compiler. Other values pass unchanged. */
static inline float fp4_canonical_nan(float f) {
    return f != f ? fp4_bits_f32(0xFFC00000u) : f;
}

/* Q4_K: the 6-bit (scale, min) pair of sub-block j from the 12 packed bytes (ggml's layout). */
static inline void fp4_q4K_scale_min(int j, const uint8_t *s, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (uint8_t)((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
        *m = (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

/* ---- llama.cpp's type-40 blocks ⇄ canonical rows, one row (src/model/ggml_pack.c) ---- */
void fp4_ggml_pack_row(const uint8_t *payload, const uint8_t *scales, int64_t n_in, uint8_t *blocks);
void fp4_ggml_unpack_row(const uint8_t *blocks, int64_t n_in, uint8_t *payload, uint8_t *scales);
/* Row r of a view in canonical form whatever its packing: n_in/2 payload bytes and n_in/16 scale
 * bytes (copied, or unpacked from an FP4_PACK_GGML64 view's blocks). */
void fp4_nvfp4_view_row(const fp4_nvfp4_view *v, int64_t r, uint8_t *payload, uint8_t *scales);
/* fp4_nvfp4_view_check less the walk over the scale bytes (the CUDA upload checks those on the
 * device, as they arrive: src/cuda/device.cu) */
fp4_status fp4_nvfp4_view_check_shape(const fp4_nvfp4_view *w);

/* ---- row-parallel helper (pthreads): fn(ctx, row_begin, row_end) over [0, n_rows) ---- */
typedef void (*fp4_rows_fn)(void *ctx, int64_t r0, int64_t r1);
fp4_status fp4_parallel_rows(int64_t n_rows, int n_threads, fp4_rows_fn fn, void *ctx);
#define FP4_MAX_THREADS 256

/* CPU code paths (cpu_path.c). All give the same bits; fp4_cpu_path() is the one in use:
 * CPUID, lowered by $FP4_CPU_PATH (portable|avx2|avx512) and by fp4_cpu_force_path (tests;
 * -1 = no forcing). fp4_cpu_pick is the pure rule: best path the CPU has, env a ceiling. */
enum { FP4_CPU_PORTABLE = 0, FP4_CPU_AVX2 = 1, FP4_CPU_AVX512 = 2, FP4_CPU_N_PATHS = 3 };
int fp4_cpu_path(void);
int fp4_cpu_best_path(void);
int fp4_cpu_pick(int best, const char *env);
const char *fp4_cpu_path_name(int path);
void fp4_cpu_force_path(int path);

/* Exact A16 row dots (contract_x86.c, contract_avx512.c): the same bits as contract.c's. They
 * read activations rearranged once per column (n_in bytes each; fp4_a16_act_avx2 also writes
 * their absolute values) and the super-block scales d[]; only Q8_K values in [-127, 127] (what
 * fp4_q8_K_quantize makes). */
void fp4_a16_act_avx2(const fp4_block_q8_K *xq, int64_t nsb, int8_t *act, uint8_t *aabs);
float fp4_dot_a16_avx2(const uint8_t *payload_row, const uint8_t *scales_row, float scale2, const int8_t *act,
                       const uint8_t *aabs, const float *d, int64_t n_in);
void fp4_a16_act_avx512(const fp4_block_q8_K *xq, int64_t nsb, int8_t *dst);
/* fp4_round_f16 by F16C (same bits for every f32): the row dots' F16 output boundary */
float fp4_round_f16_avx2(float f);
float fp4_round_f16_avx512(float f);
float fp4_dot_a16_avx512(const uint8_t *payload_row, const uint8_t *scales_row, float scale2,
                         const int8_t *act, const float *d, int64_t n_in);
/* The multi-column kernels' entry points: F(args..., NC) with NC a compile-time constant 1..4 (nc
 * beyond 4 takes 4), so that an always_inline core keeps each column's sums in registers. */
#define FP4_NC_DISPATCH(nc, F, ...)                                                                          \
    do {                                                                                                     \
        switch (nc) {                                                                                        \
        case 1: F(__VA_ARGS__, 1); break;                                                                    \
        case 2: F(__VA_ARGS__, 2); break;                                                                    \
        case 3: F(__VA_ARGS__, 3); break;                                                                    \
        default: F(__VA_ARGS__, 4); break;                                                                   \
        }                                                                                                    \
    } while (0)

/* nc (1..4) columns of one row at once, each with fp4_dot_a16_avx512's bits: actu holds each
 * column's rearranged activations offset to unsigned (fp4_a16_actu_avx512 of the act above), column
 * c at actu + c * act_stride, its super-block scales at d + c * d_stride; out[c] its result. */
void fp4_a16_actu_avx512(const int8_t *act, int64_t n, uint8_t *dst);
/* the same on the AVX2 path: actu = act ^ 0x80 on act's AVX2 layout (fp4_a16_act_avx2), each
 * column's results with fp4_dot_a16_avx2's bits */
void fp4_dot_a16_cols_avx2(const uint8_t *payload_row, const uint8_t *scales_row, float scale2,
                           const uint8_t *actu, int64_t act_stride, const float *d, int64_t d_stride,
                           int64_t n_in, int nc, float *out);
void fp4_dot_a16_cols_avx512(const uint8_t *payload_row, const uint8_t *scales_row, float scale2,
                             const uint8_t *actu, int64_t act_stride, const float *d, int64_t d_stride,
                             int64_t n_in, int nc, float *out);

/* W4A4 row dot, AVX-512 (contract_avx512.c): the same bits as fp4_nvfp4_dot_w4a4. Per column,
 * fp4_w4a4_act_avx512 decodes the activation codes to signed int8 (rearranged like the A16
 * ones) and their scales to q9, padded to a multiple of 8 groups: act holds ceil(n_in/128)·128
 * bytes, q9a ceil(n_in/128)·8 values. */
void fp4_w4a4_act_avx512(const uint8_t *codes, const uint8_t *scales, int64_t n_in, int8_t *act,
                         int64_t *q9a);
float fp4_dot_w4a4_avx512(const uint8_t *payload_row, const uint8_t *scales_row, float scale2,
                          const int8_t *act, const int64_t *q9a, float input_scale_inv, int64_t n_in);
/* nc (1..4) columns of one W4A4 row at once, each with fp4_dot_w4a4_avx512's bits: actu holds each
 * column's act offset to unsigned (fp4_a16_actu_avx512 over its act_stride = ceil(n_in/128)·128
 * bytes, padding included), column c at actu + c * act_stride, its q9a at q9a + c * act_stride / 16 */
void fp4_dot_w4a4_cols_avx512(const uint8_t *payload_row, const uint8_t *scales_row, float scale2,
                              const uint8_t *actu, const int64_t *q9a, int64_t act_stride,
                              float input_scale_inv, int64_t n_in, int nc, float *out);

/* Q4_K dots, AVX2 and AVX-512 (kquant_avx2.c, kquant_avx512.c): the same bits as kquant_dot.c's
 * ggml-generic order. act is NULL or the activations rearranged by the matching fp4_q4K_act_*:
 * FP4_Q4K_ACT_BYTES per block, the 256 values (the two layouts differ) then the 8 pair sums
 * bsums[2k] + bsums[2k+1] as int16, which fit for blocks made by fp4_q8_K_quantize (|sum| <= 32·127). */
#define FP4_Q4K_ACT_BYTES 272
void fp4_q4K_act_avx2(const fp4_block_q8_K *x, int64_t nb, int8_t *dst);
float fp4_q4K_dot_avx2(const fp4_block_q4_K *w, const fp4_block_q8_K *x, const int8_t *act, int64_t nb);
void fp4_q4K_act_avx512(const fp4_block_q8_K *x, int64_t nb, int8_t *dst);
float fp4_q4K_dot_avx512(const fp4_block_q4_K *w, const fp4_block_q8_K *x, const int8_t *act, int64_t nb);
/* rows 0..n-1 (n = 1..4) of w (row_bytes apart, nb blocks each) against one column: its blocks x and
 * act, those rearranged by fp4_q4K_act4_avx512 (a layout of its own, FP4_Q4K_ACT_BYTES per block):
 * y[r] = fp4_q4K_dot_avx512 of row r, the same bits */
void fp4_q4K_act4_avx512(const fp4_block_q8_K *x, int64_t nb, int8_t *dst);
void fp4_q4K_rows4_avx512(const uint8_t *w, size_t row_bytes, int n, const fp4_block_q8_K *x,
                          const int8_t *act, int64_t nb, float *y);
/* the same for nc (1..4) columns at once (column c: x + c·nb, act + c·nb·FP4_Q4K_ACT_BYTES, y + c·y_stride),
 * the rows' heads and nibbles decoded once per block for them; each column's bits as one call's */
void fp4_q4K_rows4_cols_avx512(const uint8_t *w, size_t row_bytes, int n, const fp4_block_q8_K *x,
                               const int8_t *act, int64_t nb, int nc, float *y, int64_t y_stride);

/* Q6_K dots, AVX2 and AVX-512 (kquant_avx2.c, kquant_avx512.c): the same bits as kquant_dot.c's
 * q6K_dot. act is NULL or the activations rearranged by the matching fp4_q6K_act_*: FP4_Q6K_ACT_BYTES
 * per block, the 256 values (the two layouts differ) then 128 int16 bias terms 32·(a + a'). */
#define FP4_Q6K_ACT_BYTES 512
void fp4_q6K_act_avx2(const fp4_block_q8_K *x, int64_t nb, int8_t *dst);
float fp4_q6K_dot_avx2(const fp4_block_q6_K *w, const fp4_block_q8_K *x, const int8_t *act, int64_t nb);
void fp4_q6K_act_avx512(const fp4_block_q8_K *x, int64_t nb, int8_t *dst);
float fp4_q6K_dot_avx512(const fp4_block_q6_K *w, const fp4_block_q8_K *x, const int8_t *act, int64_t nb);
/* rows 0..n-1 (n = 1..4), as fp4_q4K_rows4_avx512, against act from fp4_q6K_act_avx512:
 * y[r] = fp4_q6K_dot_avx512 of row r, the same bits */
void fp4_q6K_rows4_avx512(const uint8_t *w, size_t row_bytes, int n, const fp4_block_q8_K *x,
                          const int8_t *act, int64_t nb, float *y);
/* the same for nc (1..4) columns at once, as fp4_q4K_rows4_cols_avx512 */
void fp4_q6K_rows4_cols_avx512(const uint8_t *w, size_t row_bytes, int n, const fp4_block_q8_K *x,
                               const int8_t *act, int64_t nb, int nc, float *y, int64_t y_stride);

/* fp4p_attend (src/runtime/pinned.h) on the AVX2 / AVX-512 paths, the same bits
 * (src/cpu/attend_x86.c) */
void fp4_attend_avx2(const float *q, const uint16_t *k0, const uint16_t *v0, int64_t row_stride, int64_t n,
                     int head_dim, float scale, float *s, float *o);
void fp4_attend_avx512(const float *q, const uint16_t *k0, const uint16_t *v0, int64_t row_stride, int64_t n,
                       int head_dim, float scale, float *s, float *o);
/* fp4p_attend of query heads hq0 .. hq0 + nh - 1 of one column (kv head (hq0 + h) / group; q and o
 * hold the nh heads' head_dim values back to back; k0 / v0 point at kv head 0 of position 0) with
 * AVX-512, positions outside and heads inside (src/cpu/attend_heads_x86.c); scratch s holds
 * nh * n floats, P nh * 32 * head_dim. The same bits as fp4p_attend head by head. */
enum { FP4_ATTEND_MAX_HD = 512, FP4_ATTEND_MAX_HEADS = 16 };
void fp4_attend_heads_avx512(const float *q, const uint16_t *k0, const uint16_t *v0, int64_t row_stride,
                             int64_t n, int head_dim, int64_t hq0, int nh, int group, float scale, float *s,
                             float *P, float *o);
/* the same with AVX2 (src/cpu/attend_heads_avx2.c), and fp4p_attend head by head (portable) */
void fp4_attend_heads_portable(const float *q, const uint16_t *k0, const uint16_t *v0, int64_t row_stride,
                               int64_t n, int head_dim, int64_t hq0, int nh, int group, float scale, float *s,
                               float *P, float *o);
void fp4_attend_heads_avx2(const float *q, const uint16_t *k0, const uint16_t *v0, int64_t row_stride,
                           int64_t n, int head_dim, int64_t hq0, int nh, int group, float scale, float *s,
                           float *P, float *o);
/* fp4p_exp on n values and g[i] = fp4p_swiglu(g[i], u[i]) for i < n, 16 / 8 lanes at a time
 * (src/cpu/pinned_x86.c): the same bits (a NaN may be another NaN) */
void fp4_exp_avx512(const float *x, float *y, int64_t n);
void fp4_exp_avx2(const float *x, float *y, int64_t n);
void fp4_swiglu_avx512(float *g, const float *u, int64_t n);
void fp4_swiglu_avx2(float *g, const float *u, int64_t n);

#endif
