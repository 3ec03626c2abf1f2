/* kquant_matvec.c — the CPU backend's Q4_K/Q6_K dots and matvecs against Q8_K activations: the
 * dot of the CPU path in use (cpu_path.c; the AVX2/AVX-512 kernels of kquant_avx2.c and
 * kquant_avx512.c give format/kquant_dot.c's reference bits) and the threaded matvec, four rows at
 * a time where the path has a kernel for it, prefetching the weights 8 rows ahead. */
#include "cpu/cpu_impl.h"
#include <math.h>
#include <stdlib.h>

#define QK FP4_QK_K

/* act: the activations rearranged for a vectorized dot (NULL on the portable path) */
typedef float (*kq_dot_fn)(const void *w, const fp4_block_q8_K *x, const int8_t *act, int64_t nb);
typedef void (*kq_act_fn)(const fp4_block_q8_K *x, int64_t nb, int8_t *dst);
/* rows 0..n-1 (n = 1..4, row_bytes apart) against one column with act given: their dots */
typedef void (*kq_rows4_fn)(const uint8_t *w, size_t row_bytes, int n, const fp4_block_q8_K *x,
                            const int8_t *act, int64_t nb, float *y);
/* the same for nc (1..4) columns at once, column c's outputs y_stride apart */
typedef void (*kq_rows4_cols_fn)(const uint8_t *w, size_t row_bytes, int n, const fp4_block_q8_K *x,
                                 const int8_t *act, int64_t nb, int nc, float *y, int64_t y_stride);
static float dot4(const void *w, const fp4_block_q8_K *x, const int8_t *act, int64_t nb) {
    return fp4_q4K_dot_ref(w, x, nb);
}
static float dot4_avx2(const void *w, const fp4_block_q8_K *x, const int8_t *act, int64_t nb) {
    return fp4_q4K_dot_avx2(w, x, act, nb);
}
static float dot4_avx512(const void *w, const fp4_block_q8_K *x, const int8_t *act, int64_t nb) {
    return fp4_q4K_dot_avx512(w, x, act, nb);
}
static float dot6(const void *w, const fp4_block_q8_K *x, const int8_t *act, int64_t nb) {
    return fp4_q6K_dot_ref(w, x, nb);
}
static float dot6_avx2(const void *w, const fp4_block_q8_K *x, const int8_t *act, int64_t nb) {
    return fp4_q6K_dot_avx2(w, x, act, nb);
}
static float dot6_avx512(const void *w, const fp4_block_q8_K *x, const int8_t *act, int64_t nb) {
    return fp4_q6K_dot_avx512(w, x, act, nb);
}

/* the Q4_K / Q6_K dot of each CPU path (cpu_path.c), its kernel of up to four rows (NULL: the
 * matvec takes one row at a time, with dot) and the activation layout that the matvec's kernel
 * (rows4, else dot) reads, with its bytes per block */
typedef struct kq_path {
    kq_dot_fn dot;
    kq_act_fn act;
    size_t act_bytes;
    kq_rows4_fn rows4;
    kq_rows4_cols_fn rows4_cols; /* NULL: rows4 once per column */
} kq_path;
static const kq_path q4K_path[FP4_CPU_N_PATHS] = {
    [FP4_CPU_PORTABLE] = {dot4, NULL, 0, NULL, NULL},
    [FP4_CPU_AVX2] = {dot4_avx2, fp4_q4K_act_avx2, FP4_Q4K_ACT_BYTES, NULL, NULL},
    [FP4_CPU_AVX512] = {dot4_avx512, fp4_q4K_act4_avx512, FP4_Q4K_ACT_BYTES, fp4_q4K_rows4_avx512,
                        fp4_q4K_rows4_cols_avx512}};
static const kq_path q6K_path[FP4_CPU_N_PATHS] = {
    [FP4_CPU_PORTABLE] = {dot6, NULL, 0, NULL, NULL},
    [FP4_CPU_AVX2] = {dot6_avx2, fp4_q6K_act_avx2, FP4_Q6K_ACT_BYTES, NULL, NULL},
    [FP4_CPU_AVX512] = {dot6_avx512, fp4_q6K_act_avx512, FP4_Q6K_ACT_BYTES, fp4_q6K_rows4_avx512,
                        fp4_q6K_rows4_cols_avx512}};

float fp4_q4_K_dot_q8_K(const fp4_block_q4_K *w, const fp4_block_q8_K *x, int64_t n) {
    if (n < 0 || n % QK != 0 || (n > 0 && (!w || !x))) return NAN;
    return q4K_path[fp4_cpu_path()].dot(w, x, NULL, n / QK);
}

float fp4_q6_K_dot_q8_K(const fp4_block_q6_K *w, const fp4_block_q8_K *x, int64_t n) {
    if (n < 0 || n % QK != 0 || (n > 0 && (!w || !x))) return NAN;
    return q6K_path[fp4_cpu_path()].dot(w, x, NULL, n / QK);
}

typedef struct kq_job {
    kq_dot_fn dot;
    kq_rows4_fn rows4;
    kq_rows4_cols_fn rows4_cols; /* 2+ columns and the path has it (FP4_CPU_NO_COLS unset) */
    const uint8_t *w;
    size_t row_bytes;
    const fp4_block_q8_K *xq;
    const int8_t *act;
    size_t act_bytes;
    int64_t nb, n_out, n_cols;
    float *y;
} kq_job;

static void kq_rows(void *arg, int64_t r0, int64_t r1) {
    const kq_job *j = arg;
    if (j->rows4) { /* up to four rows at a time, each column against them */
        for (int64_t r = r0; r < r1; r += 4) {
            const uint8_t *rows = j->w + (size_t)r * j->row_bytes;
            const int n = r1 - r < 4 ? (int)(r1 - r) : 4;
            if (j->rows4_cols) { /* several columns: the rows' weights decoded once for up to 4 */
                for (int64_t c = 0; c < j->n_cols; c += 4)
                    j->rows4_cols(rows, j->row_bytes, n, j->xq + c * j->nb,
                                  j->act + (size_t)(c * j->nb) * j->act_bytes, j->nb,
                                  j->n_cols - c < 4 ? (int)(j->n_cols - c) : 4, j->y + c * j->n_out + r,
                                  j->n_out);
                continue;
            }
            for (int64_t c = 0; c < j->n_cols; c++)
                j->rows4(rows, j->row_bytes, n, j->xq + c * j->nb,
                         j->act + (size_t)(c * j->nb) * j->act_bytes, j->nb, j->y + c * j->n_out + r);
        }
        return;
    }
    for (int64_t r = r0; r < r1; r++) {
        const void *row = j->w + (size_t)r * j->row_bytes;
        /* the row 8 ahead into the caches (a baseline-x86-64 prefetch; it may lie past the end of the
         * weights, so the address is formed as an integer: a prefetch never faults) */
        const uintptr_t ahead = (uintptr_t)row + 8 * j->row_bytes;
        for (size_t b = 0; b < j->row_bytes; b += 64)
            __builtin_prefetch((const void *)(ahead + b), 0, 3);
        for (int64_t c = 0; c < j->n_cols; c++) {
            const int8_t *act = j->act ? j->act + (size_t)(c * j->nb) * j->act_bytes : NULL;
            j->y[c * j->n_out + r] = j->dot(row, j->xq + c * j->nb, act, j->nb);
        }
    }
}

static fp4_status kq_matvec(const kq_path *paths, size_t block_bytes, const void *w, int64_t n_out,
                            int64_t n_in, const float *x, int64_t n_cols, float *y, int n_threads) {
    if (n_out < 0 || n_in < 0 || n_cols < 0 || n_in % QK != 0) return FP4_ERR_SHAPE;
    if (n_out == 0 || n_cols == 0) return FP4_OK;
    if (!w || !y || (n_in > 0 && !x)) return FP4_ERR_INVALID_ARG;
    const int64_t nb = n_in / QK;
    int64_t total_out, n_blocks;
    uint64_t row_bytes, w_bytes, x_bytes;
    if (fp4_mul_overflow_i64(n_cols, n_out, &total_out) || fp4_mul_overflow_i64(n_cols, nb, &n_blocks) ||
        fp4_mul_overflow_u64((uint64_t)nb, block_bytes, &row_bytes) ||
        fp4_mul_overflow_u64(row_bytes, (uint64_t)n_out, &w_bytes) ||
        fp4_mul_overflow_u64((uint64_t)n_blocks, sizeof(fp4_block_q8_K), &x_bytes) || x_bytes > SIZE_MAX ||
        w_bytes > SIZE_MAX)
        return FP4_ERR_OVERFLOW;
    if (nb == 0) { /* empty rows: every dot is 0 */
        for (int64_t i = 0; i < total_out; i++) y[i] = 0.0f;
        return FP4_OK;
    }
    fp4_block_q8_K *xq = malloc((size_t)x_bytes);
    if (!xq) return FP4_ERR_NOMEM;
    for (int64_t c = 0; c < n_cols; c++) {
        fp4_status st = fp4_q8_K_quantize(x + c * n_in, n_in, xq + c * nb);
        if (st != FP4_OK) {
            free(xq);
            return st;
        }
    }
    const kq_path *path = &paths[fp4_cpu_path()];
    int8_t *act = NULL; /* n_blocks × 272 or 512 bytes */
    uint64_t act_total;
    if (path->act) {
        if (fp4_mul_overflow_u64((uint64_t)n_blocks, path->act_bytes, &act_total) || act_total > SIZE_MAX) {
            free(xq);
            return FP4_ERR_OVERFLOW;
        }
        act = malloc((size_t)act_total);
        if (!act) {
            free(xq);
            return FP4_ERR_NOMEM;
        }
        path->act(xq, n_blocks, act);
    }
    kq_rows4_cols_fn cols =
        act && path->rows4 && n_cols >= 2 && fp4_cpu_cols_on() ? path->rows4_cols : NULL;
    kq_job job = {path->dot,
                  act ? path->rows4 : NULL,
                  cols,
                  w,
                  (size_t)row_bytes,
                  xq,
                  act,
                  path->act_bytes,
                  nb,
                  n_out,
                  n_cols,
                  y};
    fp4_status st = fp4_parallel_rows(n_out, n_threads, kq_rows, &job);
    free(act);
    free(xq);
    return st;
}

fp4_status fp4_q4_K_matvec(const void *w, int64_t n_out, int64_t n_in, const float *x, int64_t n_cols,
                           float *y, int n_threads) {
    return kq_matvec(q4K_path, sizeof(fp4_block_q4_K), w, n_out, n_in, x, n_cols, y, n_threads);
}

fp4_status fp4_q6_K_matvec(const void *w, int64_t n_out, int64_t n_in, const float *x, int64_t n_cols,
                           float *y, int n_threads) {
    return kq_matvec(q6K_path, sizeof(fp4_block_q6_K), w, n_out, n_in, x, n_cols, y, n_threads);
}
