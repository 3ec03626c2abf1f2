/* tp_shard.c — the exact A16 row-parallel terms of the split CPU engine and their pinned sum
 * (tp_impl.h, docs/SCALE.md); the shard plan itself is src/backend/tp_plan.c.
 *
 * Why terms and not partial sums: SPEC §4 sums a row's super-block terms one after another
 * (acc = fma(1, c_sb, acc), super-blocks in index order) and rounds once to F16 at the end. A rank
 * that summed its own super-blocks would start from 0 instead of the sum so far, and f32 addition
 * does not reassociate, so each rank sends its terms and every rank replays the one sequential sum.
 * That needs every shard boundary on a super-block boundary (256 values). */
#include "fp4_impl.h"
#include "cpu/tp_impl.h"
#include "cpu/cpu_impl.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- exact A16 terms ---- */
static int8_t q1_pair[256][2];
static pthread_once_t q1_once = PTHREAD_ONCE_INIT;
static void q1_fill(void) {
    for (int b = 0; b < 256; b++)
        q1_pair[b][0] = (int8_t)fp4_e2m1_q1((uint8_t)(b & 15)),
        q1_pair[b][1] = (int8_t)fp4_e2m1_q1((uint8_t)(b >> 4));
}

typedef struct terms_ctx {
    const fp4_nvfp4_view *w;
    const fp4_block_q8_K *xq; /* [col][nsb] */
    const int8_t *act;        /* AVX-512: the activations rearranged (fp4_a16_act_avx512), [col][n_in] */
    const float *d;           /* [col][nsb] */
    int64_t n, nsb;
    float *c;
} terms_ctx;

/* the portable terms: contract.c's integer group dots, the epilogue of each super-block alone */
static void terms_row_portable(const terms_ctx *t, int64_t r, int64_t col, float *c) {
    const fp4_nvfp4_view *w = t->w;
    const uint8_t *pay = w->payload + r * (w->n_in / 2), *sc = w->scales + r * (w->n_in / 16);
    for (int64_t sb = 0; sb < t->nsb; sb++) {
        const fp4_block_q8_K *q = &t->xq[col * t->nsb + sb];
        if (q->d == 0.0f) {
            c[sb] = 0.0f; /* acc + 0 == acc: acc starts at +0 and never becomes -0 */
            continue;
        }
        int64_t total = 0;
        for (int g = 0; g < 16; g++) {
            const int64_t gi = sb * 16 + g;
            int32_t dot = 0;
            for (int j = 0; j < 8; j++) {
                const int8_t *wq = q1_pair[pay[gi * 8 + j]];
                dot += (int32_t)wq[0] * q->qs[g * 16 + 2 * j] + (int32_t)wq[1] * q->qs[g * 16 + 2 * j + 1];
            }
            total += (int64_t)dot * fp4_e4m3fn_q9(sc[gi]);
        }
        c[sb] = fp4_a16_epilogue(total, q->d, w->scale2, 0.0f);
    }
}

static void terms_rows(void *p, int64_t r0, int64_t r1) {
    const terms_ctx *t = p;
    const fp4_nvfp4_view *w = t->w;
    for (int64_t r = r0; r < r1; r++)
        for (int64_t col = 0; col < t->n; col++) {
            float *c = t->c + (col * w->n_out + r) * t->nsb;
            if (t->act)
                fp4_a16_terms_avx512(w->payload + r * (w->n_in / 2), w->scales + r * (w->n_in / 16),
                                     w->scale2, t->act + col * w->n_in, t->d + col * t->nsb, t->nsb, c);
            else
                terms_row_portable(t, r, col, c);
        }
}

fp4_status fp4_tp_a16_terms(const fp4_tensor *w, const float *x, int64_t n, float *c, int n_threads) {
    pthread_once(&q1_once, q1_fill);
    const int64_t n_in = w->nvfp4.n_in, nsb = n_in / FP4_QK_K;
    if (n_in % FP4_QK_K || n <= 0) return FP4_ERR_SHAPE;
    const int avx512 = fp4_cpu_path() == FP4_CPU_AVX512;
    fp4_block_q8_K *xq = malloc(sizeof *xq * (size_t)(n * nsb));
    int8_t *act = avx512 ? malloc((size_t)(n * n_in)) : NULL;
    float *d = malloc(sizeof(float) * (size_t)(n * nsb));
    fp4_status st = xq && d && (act || !avx512) ? FP4_OK : FP4_ERR_NOMEM;
    for (int64_t col = 0; col < n && !st; col++) {
        st = fp4_q8_K_quantize(x + col * n_in, n_in, xq + col * nsb);
        for (int64_t b = 0; b < nsb && !st; b++)
            d[col * nsb + b] = xq[col * nsb + b].d;
        if (!st && act) fp4_a16_act_avx512(xq + col * nsb, nsb, act + col * n_in);
    }
    terms_ctx t = {&w->nvfp4, xq, act, d, n, nsb, c};
    if (!st) st = fp4_parallel_rows(w->nvfp4.n_out, n_threads, terms_rows, &t);
    free(xq), free(act), free(d);
    return st;
}

void fp4_tp_a16_reduce(const float *g, int n_ranks, int64_t n, int64_t n_out, int64_t nsb, float *y) {
    for (int64_t col = 0; col < n; col++)
        for (int64_t r = 0; r < n_out; r++) {
            float acc = 0.0f;
            for (int k = 0; k < n_ranks; k++) {
                const float *c = g + ((k * n + col) * n_out + r) * nsb;
                for (int64_t sb = 0; sb < nsb; sb++)
                    acc = __builtin_fmaf(1.0f, c[sb], acc);
            }
            y[col * n_out + r] = fp4_round_f16(acc);
        }
}
