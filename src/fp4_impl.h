/* fp4_impl.h — internals shared across src/ (never installed): error filling, checked size
 * arithmetic, explicit little-endian decoding, the bounded cursor. */
#ifndef FP4_IMPL_H
#define FP4_IMPL_H

#define FP4LANE_ORACLE_API /* the library defines the oracle helpers too */
#include "fp4lane.h"
#include "fp4lane_io.h"
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

/* ---- llama.cpp's type-40 blocks ⇄ canonical rows, one row (src/format/ggml_pack.c) ---- */
void fp4_ggml_pack_row(const uint8_t *payload, const uint8_t *scales, int64_t n_in, uint8_t *blocks);
void fp4_ggml_unpack_row(const uint8_t *blocks, int64_t n_in, uint8_t *payload, uint8_t *scales);
/* Row r of a view in canonical form whatever its packing: n_in/2 payload bytes and n_in/16 scale
 * bytes (copied, or unpacked from an FP4_PACK_GGML64 view's blocks). */
void fp4_nvfp4_view_row(const fp4_nvfp4_view *v, int64_t r, uint8_t *payload, uint8_t *scales);
/* fp4_nvfp4_view_check less the walk over the scale bytes (the CUDA upload checks those on the
 * device, as they arrive: src/cuda/device.cu) */
fp4_status fp4_nvfp4_view_check_shape(const fp4_nvfp4_view *w);

/* ---- row-parallel helper (src/common/threads.c: a kept pool of pthreads): fn(ctx, row_begin,
 * row_end) over [0, n_rows) ---- */
typedef void (*fp4_rows_fn)(void *ctx, int64_t r0, int64_t r1);
fp4_status fp4_parallel_rows(int64_t n_rows, int n_threads, fp4_rows_fn fn, void *ctx);
#define FP4_MAX_THREADS 256

/* The Q4_K / Q6_K dots in ggml's generic f32 order (src/format/kquant_dot.c): the reference every
 * CPU path reproduces bit for bit. */
float fp4_q4K_dot_ref(const fp4_block_q4_K *w, const fp4_block_q8_K *x, int64_t nb);
float fp4_q6K_dot_ref(const fp4_block_q6_K *w, const fp4_block_q8_K *x, int64_t nb);


#endif
