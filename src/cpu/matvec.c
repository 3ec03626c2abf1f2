/* matvec.c — the CPU backend's NVFP4 matvecs (SPEC §4–6): the exact A16, W4A4 and float A16
 * contractions over many rows and columns, on the CPU path cpu_path.c chose (portable, AVX2,
 * AVX-512: the same bits) and split over threads (threads.c). The one-row oracle dots they must
 * equal are format/contract.c's. */
#include "cpu/cpu_impl.h"
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

/* ---- exact A16 (SPEC §4) ---- */

/* byte -> its two E2M1 values as int16 (low nibble first), for the vectorizable path */
static int16_t q1_pair16[256][2];
static int32_t q9_table[256];
static pthread_once_t q1_16_once = PTHREAD_ONCE_INIT;
static void q1_16_fill(void) {
    for (int b = 0; b < 256; b++) {
        q1_pair16[b][0] = (int16_t)fp4_e2m1_q1((uint8_t)(b & 15));
        q1_pair16[b][1] = (int16_t)fp4_e2m1_q1((uint8_t)(b >> 4));
        q9_table[b] = fp4_e4m3fn_q9((uint8_t)b);
    }
}

/* One row against activations already widened to int16 (q16: n_in values, d: one per
 * super-block). The integer part is order-free, so it is written for the vectorizer: decode a
 * super-block's 256 codes to int16, then 16 dots of 16 int16 products summed in int32. */
static float dot_a16_q16(const uint8_t *payload_row, const uint8_t *scales_row, float scale2,
                         const int16_t *q16, const float *d, int64_t n_in) {
    float acc = 0.0f;
    int16_t w[FP4_QK_K];
    for (int64_t sb = 0; sb < n_in / FP4_QK_K; sb++) {
        if (d[sb] == 0.0f) continue; /* an all-zero super-block contributes nothing */
        const uint8_t *p = payload_row + sb * (FP4_QK_K / 2);
        for (int j = 0; j < FP4_QK_K / 2; j++) memcpy(&w[2 * j], q1_pair16[p[j]], 4);
        const int16_t *a = q16 + sb * FP4_QK_K;
        int64_t total = 0;
        for (int g = 0; g < 16; g++) {
            int32_t dot = 0;
            for (int j = 0; j < 16; j++) dot += (int32_t)w[g * 16 + j] * a[g * 16 + j];
            total += (int64_t)dot * q9_table[scales_row[sb * 16 + g]];
        }
        acc = fp4_a16_epilogue(total, d[sb], scale2, acc);
    }
    return fp4_round_f16(acc);
}

/* ---- matvec drivers ---- */
typedef struct mv_ctx {
    const fp4_nvfp4_view *w;
    const float *x;
    int64_t n_cols;
    float *y;
    const int16_t *q16;                   /* a16 exact: the same activations widened, n_cols × n_in */
    const int8_t *act;                    /* a16 exact, AVX2/AVX-512: rearranged, n_cols × n_in */
    const uint8_t *actu;                  /* a16 exact, AVX2/AVX-512, 2+ columns: act + 128, unsigned */
    const uint8_t *aabs;                  /* a16 exact, AVX2: |act| */
    const float *d;                       /* a16 exact: n_cols × n_in/256 block scales */
    int path;                             /* a16 exact: fp4_cpu_path() */
    const uint8_t *acodes, *ascales;      /* w4a4: n_cols × n_in/2, n_cols × n_in/16 */
    const int8_t *wact;                   /* w4a4, AVX-512: decoded codes, n_cols × w4a4_padded(n_in) */
    const uint8_t *wactu;                 /* w4a4, AVX-512, 2+ columns: wact + 128, unsigned */
    const int64_t *q9a;                   /* w4a4, AVX-512: scales as q9, n_cols × w4a4_padded(n_in)/16 */
} mv_ctx;

/* n_in rounded up to whole halves of 8 groups (128 values), as fp4_w4a4_act_avx512 writes them */
static int64_t w4a4_padded(int64_t n_in) {
    return (n_in + 127) / 128 * 128;
}

static fp4_status mv_check(const fp4_nvfp4_view *w, const float *x, int64_t n_cols, const float *y) {
    if (w && w->packing != FP4_PACK_CANONICAL) return FP4_ERR_UNSUPPORTED; /* ggml blocks: not repacked */
    if (!w || !x || !y || !w->payload || !w->scales || n_cols < 0) return FP4_ERR_INVALID_ARG;
    if (w->n_out < 0 || w->n_in < 0 || w->n_in % 16 || w->n_in > FP4_MAX_N_IN) return FP4_ERR_SHAPE;
    if (!isfinite(w->scale2) || !(w->scale2 > 0.0f)) return FP4_ERR_SCALE2;
    return FP4_OK;
}

/* the exact A16 row dot of each CPU path (cpu_path.c), on the activations as it reads them */
typedef float (*a16_row_fn)(const mv_ctx *c, const uint8_t *pr, const uint8_t *sr, int64_t col);
static float a16_row_portable(const mv_ctx *c, const uint8_t *pr, const uint8_t *sr, int64_t col) {
    const int64_t n_in = c->w->n_in;
    return dot_a16_q16(pr, sr, c->w->scale2, c->q16 + col * n_in, c->d + col * (n_in / FP4_QK_K), n_in);
}
static float a16_row_avx2(const mv_ctx *c, const uint8_t *pr, const uint8_t *sr, int64_t col) {
    const int64_t n_in = c->w->n_in;
    return fp4_dot_a16_avx2(pr, sr, c->w->scale2, c->act + col * n_in, c->aabs + col * n_in,
                            c->d + col * (n_in / FP4_QK_K), n_in);
}
static float a16_row_avx512(const mv_ctx *c, const uint8_t *pr, const uint8_t *sr, int64_t col) {
    const int64_t n_in = c->w->n_in;
    return fp4_dot_a16_avx512(pr, sr, c->w->scale2, c->act + col * n_in, c->d + col * (n_in / FP4_QK_K),
                              n_in);
}
static const a16_row_fn a16_row[FP4_CPU_N_PATHS] = {
    [FP4_CPU_PORTABLE] = a16_row_portable, [FP4_CPU_AVX2] = a16_row_avx2, [FP4_CPU_AVX512] = a16_row_avx512};

static void a16_rows(void *p, int64_t r0, int64_t r1) {
    const mv_ctx *c = p;
    const int64_t n_in = c->w->n_in, nsb = n_in / FP4_QK_K;
    const a16_row_fn dot = a16_row[c->path];
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *pr = c->w->payload + r * (n_in / 2), *sr = c->w->scales + r * (n_in / 16);
        if (c->actu) { /* AVX2/AVX-512, 2+ columns: the row's weights decoded once for up to 4 columns */
            for (int64_t col = 0; col < c->n_cols; col += 4) {
                const int nc = c->n_cols - col < 4 ? (int)(c->n_cols - col) : 4;
                float out[4];
                (c->path == FP4_CPU_AVX512 ? fp4_dot_a16_cols_avx512 : fp4_dot_a16_cols_avx2)(
                    pr, sr, c->w->scale2, c->actu + col * n_in, n_in, c->d + col * nsb, nsb, n_in, nc, out);
                for (int k = 0; k < nc; k++)
                    c->y[(col + k) * c->w->n_out + r] = out[k];
            }
            continue;
        }
        for (int64_t col = 0; col < c->n_cols; col++)
            c->y[col * c->w->n_out + r] = dot(c, pr, sr, col);
    }
}

fp4_status fp4_nvfp4_matvec_a16_exact(const fp4_nvfp4_view *w, const float *x, int64_t n_cols, float *y,
                                      int n_threads) {
    fp4_status st = mv_check(w, x, n_cols, y);
    if (st) return st;
    if (w->n_in % FP4_QK_K) return FP4_ERR_SHAPE;
    const int64_t nsb = w->n_in / FP4_QK_K;
    int64_t n_vals; /* n_cols × n_in: no buffer below takes more than 2 bytes per value */
    if (fp4_mul_overflow_i64(n_cols, w->n_in, &n_vals) || n_vals > INT64_MAX / 4) return FP4_ERR_OVERFLOW;
    const int path = fp4_cpu_path();
    /* the activations as each path reads them: widened to int16 (portable), rearranged int8
     * (AVX2 with their absolute values, AVX-512); the super-block scales d */
    fp4_block_q8_K *xq = malloc((size_t)(n_cols * nsb + 1) * sizeof *xq);
    int16_t *q16 = path == FP4_CPU_PORTABLE ? malloc((size_t)(n_cols * w->n_in + 1) * sizeof *q16) : NULL;
    int8_t *act = path != FP4_CPU_PORTABLE ? malloc((size_t)(n_cols * w->n_in + 1)) : NULL;
    uint8_t *aabs = path == FP4_CPU_AVX2 ? malloc((size_t)(n_cols * w->n_in + 1)) : NULL;
    const int cols_kernel = path != FP4_CPU_PORTABLE && n_cols >= 2 && fp4_cpu_cols_on();
    uint8_t *actu = cols_kernel ? malloc((size_t)(n_cols * w->n_in + 1)) : NULL;
    float *d = malloc((size_t)(n_cols * nsb + 1) * sizeof *d);
    if (!xq || !d || (path == FP4_CPU_PORTABLE && !q16) || (path != FP4_CPU_PORTABLE && !act) ||
        (path == FP4_CPU_AVX2 && !aabs) || (cols_kernel && !actu)) {
        free(xq), free(q16), free(act), free(aabs), free(actu), free(d);
        return FP4_ERR_NOMEM;
    }
    for (int64_t col = 0; col < n_cols; col++) {
        fp4_block_q8_K *xc = xq + col * nsb;
        fp4_q8_K_quantize(x + col * w->n_in, w->n_in, xc);
        for (int64_t b = 0; b < nsb; b++) {
            d[col * nsb + b] = xc[b].d;
            if (q16)
                for (int k = 0; k < FP4_QK_K; k++)
                    q16[col * w->n_in + b * FP4_QK_K + k] = xc[b].qs[k];
        }
        if (path == FP4_CPU_AVX2) fp4_a16_act_avx2(xc, nsb, act + col * w->n_in, aabs + col * w->n_in);
        if (path == FP4_CPU_AVX512) fp4_a16_act_avx512(xc, nsb, act + col * w->n_in);
        if (actu) fp4_a16_actu_avx512(act + col * w->n_in, w->n_in, actu + col * w->n_in); /* either layout */
    }
    pthread_once(&q1_16_once, q1_16_fill);
    mv_ctx c = {.w = w,
                .x = x,
                .n_cols = n_cols,
                .y = y,
                .q16 = q16,
                .act = act,
                .actu = actu,
                .aabs = aabs,
                .d = d,
                .path = path};
    st = fp4_parallel_rows(w->n_out, n_threads, a16_rows, &c);
    free(xq), free(q16), free(act), free(aabs), free(actu), free(d);
    return st;
}

static void w4a4_rows(void *p, int64_t r0, int64_t r1) {
    const mv_ctx *c = p;
    const int64_t n_in = c->w->n_in, np = w4a4_padded(n_in);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *pr = c->w->payload + r * (n_in / 2), *sr = c->w->scales + r * (n_in / 16);
        if (c->wactu) { /* AVX-512, 2+ columns: the row's weights decoded once for up to 4 columns */
            for (int64_t col = 0; col < c->n_cols; col += 4) {
                const int nc = c->n_cols - col < 4 ? (int)(c->n_cols - col) : 4;
                float out[4];
                fp4_dot_w4a4_cols_avx512(pr, sr, c->w->scale2, c->wactu + col * np, c->q9a + col * (np / 16),
                                         np, c->w->input_scale_inv, n_in, nc, out);
                for (int k = 0; k < nc; k++)
                    c->y[(col + k) * c->w->n_out + r] = out[k];
            }
            continue;
        }
        for (int64_t col = 0; col < c->n_cols; col++)
            c->y[col * c->w->n_out + r] =
                c->wact ? fp4_dot_w4a4_avx512(pr, sr, c->w->scale2, c->wact + col * np,
                                              c->q9a + col * (np / 16), c->w->input_scale_inv, n_in)
                        : fp4_nvfp4_dot_w4a4(pr, sr, c->w->scale2, c->acodes + col * (n_in / 2),
                                             c->ascales + col * (n_in / 16), c->w->input_scale_inv, n_in);
    }
}

fp4_status fp4_nvfp4_matvec_w4a4(const fp4_nvfp4_view *w, const float *x, int64_t n_cols, float *y,
                                 int n_threads) {
    fp4_status st = mv_check(w, x, n_cols, y);
    if (st) return st;
    if (!isfinite(w->input_scale_inv) || !(w->input_scale_inv > 0.0f)) return FP4_ERR_SCALE2;
    const int64_t n_in = w->n_in, np = w4a4_padded(n_in);
    int64_t n_vals; /* n_cols × np: no buffer below takes more than 1 byte per value */
    if (fp4_mul_overflow_i64(n_cols, np, &n_vals) || n_vals > INT64_MAX / 4) return FP4_ERR_OVERFLOW;
    const int avx512 = fp4_cpu_path() == FP4_CPU_AVX512; /* W4A4 has no AVX2 path: portable below AVX-512 */
    uint8_t *codes = malloc((size_t)(n_cols * (n_in / 2) + 1));
    uint8_t *scl = malloc((size_t)(n_cols * (n_in / 16) + 1));
    int8_t *wact = avx512 ? malloc((size_t)(n_cols * np + 1)) : NULL;
    int64_t *q9a = avx512 ? malloc((size_t)(n_cols * (np / 16) + 1) * sizeof *q9a) : NULL;
    const int cols_kernel = avx512 && n_cols >= 2 && fp4_cpu_cols_on();
    uint8_t *wactu = cols_kernel ? malloc((size_t)(n_cols * np + 1)) : NULL;
    if (!codes || !scl || (avx512 && (!wact || !q9a)) || (cols_kernel && !wactu)) {
        free(codes), free(scl), free(wact), free(q9a), free(wactu);
        return FP4_ERR_NOMEM;
    }
    for (int64_t col = 0; col < n_cols && !st; col++) {
        st = fp4_nvfp4_quantize_act(x + col * n_in, n_in, w->input_scale_inv, codes + col * (n_in / 2),
                                    scl + col * (n_in / 16));
        if (!st && avx512)
            fp4_w4a4_act_avx512(codes + col * (n_in / 2), scl + col * (n_in / 16), n_in, wact + col * np,
                                q9a + col * (np / 16));
        if (!st && wactu) fp4_a16_actu_avx512(wact + col * np, np, wactu + col * np);
    }
    if (!st) {
        mv_ctx c = {.w = w,
                    .x = x,
                    .n_cols = n_cols,
                    .y = y,
                    .acodes = codes,
                    .ascales = scl,
                    .wact = wact,
                    .wactu = wactu,
                    .q9a = q9a};
        st = fp4_parallel_rows(w->n_out, n_threads, w4a4_rows, &c);
    }
    free(codes), free(scl), free(wact), free(q9a), free(wactu);
    return st;
}

/* ---- float A16 reference (SPEC §6) ---- */
static void float_rows(void *p, int64_t r0, int64_t r1) {
    const mv_ctx *c = p;
    const int64_t n_in = c->w->n_in;
    float deq[16];
    for (int64_t r = r0; r < r1; r++) {
        for (int64_t col = 0; col < c->n_cols; col++) {
            const float *xc = c->x + col * n_in;
            double acc = 0.0;
            for (int64_t g = 0; g < n_in / 16; g++) {
                fp4_nvfp4_dequant_row(c->w->payload + r * (n_in / 2) + g * 8,
                                      c->w->scales + r * (n_in / 16) + g, c->w->scale2, 16, deq);
                for (int j = 0; j < 16; j++) acc += (double)deq[j] * (double)xc[g * 16 + j];
            }
            c->y[col * c->w->n_out + r] = (float)acc;
        }
    }
}

fp4_status fp4_nvfp4_matvec_a16_float(const fp4_nvfp4_view *w, const float *x, int64_t n_cols, float *y,
                                      int n_threads) {
    fp4_status st = mv_check(w, x, n_cols, y);
    if (st) return st;
    mv_ctx c = {.w = w, .x = x, .n_cols = n_cols, .y = y};
    return fp4_parallel_rows(w->n_out, n_threads, float_rows, &c);
}
