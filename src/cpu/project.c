/* project.c — the CPU backend's dispatch table: (weight type, activation precision, mode) →
 * kernel. The runtime asks this table, never a kernel by name (ARCHITECTURE.md). */
#include "cpu/cpu_impl.h"
#include "cpu/native.h"
#include "format/pinned.h"
#include <stdlib.h>
#include <string.h>

typedef fp4_status (*route_fn)(const fp4_tensor *w, const float *x, int64_t n_cols, float *y, int n_threads);

enum { ACT_A16 = 0, ACT_NVFP4 = 1, ACT_ANY = 2, MODE_ANY = 2 };

static int64_t rows_of(const fp4_tensor *w) {
    return fp4_rows_of(w->ne, w->n_dims);
}

static fp4_status r_a16_exact(const fp4_tensor *w, const float *x, int64_t n_cols, float *y, int nt) {
    return fp4_nvfp4_matvec_a16_exact(&w->nvfp4, x, n_cols, y, nt);
}
static fp4_status r_a16_native(const fp4_tensor *w, const float *x, int64_t n_cols, float *y, int nt) {
    return fp4_cpu_nvfp4_a16_native(&w->nvfp4, x, n_cols, y, nt);
}
static fp4_status r_w4a4(const fp4_tensor *w, const float *x, int64_t n_cols, float *y, int nt) {
    return fp4_nvfp4_matvec_w4a4(&w->nvfp4, x, n_cols, y, nt);
}
static fp4_status r_q4k(const fp4_tensor *w, const float *x, int64_t n_cols, float *y, int nt) {
    return fp4_q4_K_matvec(w->data, rows_of(w), w->ne[0], x, n_cols, y, nt);
}
static fp4_status r_q6k(const fp4_tensor *w, const float *x, int64_t n_cols, float *y, int nt) {
    return fp4_q6_K_matvec(w->data, rows_of(w), w->ne[0], x, n_cols, y, nt);
}

typedef float (*dense_dot_fn)(const float *a, const float *b, int64_t n);
typedef float (*bf16_dot_fn)(const uint8_t *w, const float *b, int64_t n);
typedef struct dense_ctx {
    const fp4_tensor *w;
    const float *x;
    int64_t n_cols;
    float *y;
    dense_dot_fn dot;     /* native_dot or pinned_dot (exact), or their vector forms */
    bf16_dot_fn bf16_dot; /* BF16 weights on a vector path: the dot reads the bf16 row itself */
    fp4_status st;
    float lut[256]; /* FP8 weights: e4m3fn(byte), exact in f32 */
} dense_ctx;

/* One dense row widened to f32, exactly: bf16 by a 16-bit shift (fp4_bf16_to_f32's bits, in a loop
 * the compiler vectorizes), f32 copied, FP8 E4M3FN through a 256-entry table (every E4M3 value is
 * exact in f32), f16 through the codec. */
static void dense_row(const dense_ctx *c, int64_t r, float *row) {
    const fp4_tensor *w = c->w;
    const int64_t n = w->ne[0];
    if (w->type == FP4_TYPE_F8_E4M3FN && w->fp8.block_scale) { /* the block's scale: one f32 multiply */
        const uint8_t *p = w->data + (size_t)(r * n);
        const int64_t bc = w->fp8.block_cols;
        const float *bs = w->fp8.block_scale + (r / w->fp8.block_rows) * ((n + bc - 1) / bc);
        for (int64_t k = 0; k < n; k++)
            row[k] = fp4p_mul(c->lut[p[k]], bs[k / bc]);
    } else if (w->type == FP4_TYPE_F8_E4M3FN) {
        const uint8_t *p = w->data + (size_t)(r * n);
        for (int64_t k = 0; k < n; k++)
            row[k] = c->lut[p[k]];
    } else if (w->type == FP4_TYPE_BF16) {
        const uint8_t *p = w->data + (size_t)(r * n) * 2;
        uint32_t *u = (uint32_t *)(void *)row;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        for (int64_t k = 0; k < n; k++) {
            uint16_t h;
            memcpy(&h, p + 2 * k, 2); /* unaligned little-endian halves, one load each */
            u[k] = (uint32_t)h << 16;
        }
#else
        for (int64_t k = 0; k < n; k++)
            u[k] = ((uint32_t)p[2 * k] | (uint32_t)p[2 * k + 1] << 8) << 16;
#endif
    } else if (w->type == FP4_TYPE_F32) {
        memcpy(row, w->data + (size_t)(r * n) * 4, sizeof(float) * (size_t)n);
    } else {
        fp4_tensor_dequant_rows(w, r, r + 1, row); /* cannot fail: type and range checked */
    }
}

static void dense_rows(void *p, int64_t r0, int64_t r1) {
    dense_ctx *c = p;
    const int64_t n_in = c->w->ne[0], n_out = rows_of(c->w);
    float *row = malloc(sizeof(float) * (size_t)n_in);
    if (!row) {
        __atomic_store_n(&c->st, FP4_ERR_NOMEM, __ATOMIC_RELAXED);
        return;
    }
    /* per-tensor / per-row FP8 scales multiply the dot; block scales went into the row (dense_row) */
    const fp4_fp8_view *f = c->w->type == FP4_TYPE_F8_E4M3FN && !c->w->fp8.block_scale ? &c->w->fp8 : NULL;
    for (int64_t r = r0; r < r1; r++) {
        if (c->bf16_dot) {
            const uint8_t *wr = c->w->data + (size_t)(r * n_in) * 2;
            for (int64_t col = 0; col < c->n_cols; col++)
                c->y[col * n_out + r] = c->bf16_dot(wr, c->x + col * n_in, n_in);
            continue;
        }
        dense_row(c, r, row);
        for (int64_t col = 0; col < c->n_cols; col++)
            c->y[col * n_out + r] = c->dot(row, c->x + col * n_in, n_in);
        if (f) { /* FP8: the row's scale applied to the dot, one f32 multiply per output */
            const float s = f->row_scale ? f->row_scale[r] : f->scale;
            for (int64_t col = 0; col < c->n_cols; col++)
                c->y[col * n_out + r] = fp4p_mul(c->y[col * n_out + r], s);
        }
    }
    free(row);
}
/* the dots of each CPU path (cpu_path.c; dense_x86.c), [pinned][path]: the same bits on every path */
typedef struct dense_path {
    dense_dot_fn dot;
    bf16_dot_fn bf16_dot;
} dense_path;
static float pinned_dot(const float *a, const float *b, int64_t n);
static float native_dot(const float *a, const float *b, int64_t n);
static const dense_path dense_paths[2][FP4_CPU_N_PATHS] = {
    {[FP4_CPU_PORTABLE] = {native_dot, NULL},
     [FP4_CPU_AVX2] = {fp4_dot8_f32_avx2, fp4_dot8_bf16_avx2},
     [FP4_CPU_AVX512] = {fp4_dot8_f32_avx2, fp4_dot8_bf16_avx2}}, /* 8 lanes: one ymm */
    {[FP4_CPU_PORTABLE] = {pinned_dot, NULL},
     [FP4_CPU_AVX2] = {fp4_pinned_dot_f32_avx2, fp4_pinned_dot_bf16_avx2},
     [FP4_CPU_AVX512] = {fp4_pinned_dot_f32_avx512, fp4_pinned_dot_bf16_avx512}}};

static fp4_status dense_run(const fp4_tensor *w, const float *x, int64_t n_cols, float *y, int nt,
                            int pinned) {
    if (!w->data) return FP4_ERR_INVALID_ARG;
    const dense_path *dp = &dense_paths[pinned][fp4_cpu_path()];
    dense_ctx c = {w, x, n_cols, y, dp->dot, w->type == FP4_TYPE_BF16 ? dp->bf16_dot : NULL, FP4_OK, {0}};
    if (w->type == FP4_TYPE_F8_E4M3FN) {
        const fp4_fp8_view *f = &w->fp8;
        if (!f->row_scale && !(f->scale > 0.0f) &&
            !(f->block_scale && f->block_rows > 0 && f->block_cols > 0))
            return FP4_ERR_INVALID_ARG; /* not a weight */
        for (int b = 0; b < 256; b++)
            c.lut[b] = fp4_e4m3fn_decode((uint8_t)b); /* NaN bytes: refused by the loader */
    }
    fp4_status st = fp4_parallel_rows(rows_of(w), nt, dense_rows, &c);
    return st ? st : c.st;
}
static fp4_status r_dense(const fp4_tensor *w, const float *x, int64_t n_cols, float *y, int nt) {
    return dense_run(w, x, n_cols, y, nt, 0);
}

/* Exact mode, dense weights: each row widened exactly to f32, y = fp4p_dot(row, x) — products
 * rounded in f32, then the pinned 32-lane reduction (src/format/pinned.h) that the CUDA twin
 * computes with one warp per row. A NaN result is the NaN 0xFFC00000 (fp4_canonical_nan, as the
 * K-quant dots): which NaN an add of two NaNs keeps depends on the operand order a compiler picks,
 * so the dense dots of every CPU path (dense_x86.c) return that one. FP8 weights: the same dot over
 * the E4M3 values, then y = fp4p_mul(y, scale_r); block-scaled FP8: the dot over the dequantized
 * row (each value fp4p_mul(e4m3, its block's scale)), the bits of an F32 weight holding it
 * (fp4_fp8_view). */
static float pinned_dot(const float *a, const float *b, int64_t n) {
    return fp4_canonical_nan(fp4p_dot(a, b, n));
}
static float native_dot(const float *a, const float *b, int64_t n) {
    return fp4_canonical_nan(fp4_cpu_dot_f32(a, b, n));
}
static fp4_status r_dense_pinned(const fp4_tensor *w, const float *x, int64_t n_cols, float *y, int nt) {
    return dense_run(w, x, n_cols, y, nt, 1);
}

static const struct route {
    fp4_type type;
    int act, mode;
    int64_t n_in_multiple;
    const char *name;
    route_fn fn;
} routes[] = {
    {FP4_TYPE_NVFP4_E2M1, ACT_A16, FP4_MODE_EXACT, 256, "cpu.nvfp4.a16.exact", r_a16_exact},
    {FP4_TYPE_NVFP4_E2M1, ACT_A16, FP4_MODE_NATIVE, 16, "cpu.nvfp4.a16.native", r_a16_native},
    {FP4_TYPE_NVFP4_E2M1, ACT_NVFP4, MODE_ANY, 16, "cpu.nvfp4.w4a4.exact", r_w4a4},
    {FP4_TYPE_Q4_K, ACT_ANY, MODE_ANY, 256, "cpu.q4_k.q8_k", r_q4k},
    {FP4_TYPE_Q6_K, ACT_ANY, MODE_ANY, 256, "cpu.q6_k.q8_k", r_q6k},
    {FP4_TYPE_F32, ACT_ANY, FP4_MODE_EXACT, 1, "cpu.f32.dense.pinned", r_dense_pinned},
    {FP4_TYPE_F16, ACT_ANY, FP4_MODE_EXACT, 1, "cpu.f16.dense.pinned", r_dense_pinned},
    {FP4_TYPE_BF16, ACT_ANY, FP4_MODE_EXACT, 1, "cpu.bf16.dense.pinned", r_dense_pinned},
    {FP4_TYPE_F32, ACT_ANY, MODE_ANY, 1, "cpu.f32.dense", r_dense},
    {FP4_TYPE_F16, ACT_ANY, MODE_ANY, 1, "cpu.f16.dense", r_dense},
    {FP4_TYPE_BF16, ACT_ANY, MODE_ANY, 1, "cpu.bf16.dense", r_dense},
    {FP4_TYPE_F8_E4M3FN, ACT_ANY, FP4_MODE_EXACT, 1, "cpu.fp8.dense.pinned", r_dense_pinned},
    {FP4_TYPE_F8_E4M3FN, ACT_ANY, MODE_ANY, 1, "cpu.fp8.dense", r_dense},
};

static const struct route *find_route(const fp4_tensor *w, fp4_mode mode, int *shape_refused) {
    const int act = w->type == FP4_TYPE_NVFP4_E2M1 && w->nvfp4.input_scale_inv > 0.0f ? ACT_NVFP4 : ACT_A16;
    *shape_refused = 0;
    if (w->type == FP4_TYPE_NVFP4_E2M1 && w->nvfp4.packing != FP4_PACK_CANONICAL)
        return NULL; /* llama.cpp blocks left as the file holds them (FP4_LOAD_DEFER_REPACK): no route */
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        const struct route *r = &routes[i];
        if (r->type != w->type || (r->act != ACT_ANY && r->act != act) ||
            (r->mode != MODE_ANY && r->mode != (int)mode))
            continue;
        if (w->ne[0] % r->n_in_multiple) {
            *shape_refused = 1;
            continue;
        }
        return r;
    }
    return NULL;
}

const char *fp4_cpu_route_name(const fp4_tensor *w, fp4_mode mode) {
    int refused;
    const struct route *r = w ? find_route(w, mode, &refused) : NULL;
    return r ? r->name : "none";
}

fp4_status fp4_cpu_project(const fp4_tensor *w, fp4_mode mode, const float *x, int64_t n_cols, float *y,
                           int n_threads) {
    if (!w || !x || !y || n_cols < 0 || (mode != FP4_MODE_EXACT && mode != FP4_MODE_NATIVE) || w->n_dims < 1)
        return FP4_ERR_INVALID_ARG;
    int refused;
    const struct route *r = find_route(w, mode, &refused);
    if (!r)
        return refused ? FP4_ERR_REFUSED_ROUTE
                       : FP4_ERR_UNSUPPORTED; /* e.g. exact A16 with n_in % 256: use native */
    return r->fn(w, x, n_cols, y, n_threads);
}
