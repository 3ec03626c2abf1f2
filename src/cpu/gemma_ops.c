/* gemma_ops.c — the CPU step's Gemma 3 operations (backend.h, THE STEP, Gemma 3 notes): the
 * embedding scale, the GeGLU gate over threads, the post-norms and the final soft-cap, each
 * element by pinned_gemma.h, so no split of the work changes a bit. */
#include "format/pinned_gemma.h"
#include "cpu/cpu_impl.h"
#include <math.h>

/* the embedding's dtype for fp4p_embed_scale: its own when dense, bf16 for a quantized table */
static int embed_dtype(const fp4_tensor *e) {
    return e->type == FP4_TYPE_F32 ? 0 : e->type == FP4_TYPE_F16 ? 1 : 2;
}

void fp4_cpu_embed_scale(const fp4_arch *a, const fp4_tensor *emb, float *x, int64_t n_cols) {
    const int dt = embed_dtype(emb);
    const float scale = fp4p_round_to((float)sqrt((double)a->hidden), dt);
    for (int64_t i = 0; i < n_cols * a->hidden; i++)
        x[i] = fp4p_embed_scale(x[i], scale, dt);
}

enum { GEGLU_CHUNK = 4096 };
typedef struct geglu_ctx {
    float *g;
    const float *u;
    int64_t n;
} geglu_ctx;
static void geglu_rows(void *p, int64_t r0, int64_t r1) {
    const geglu_ctx *c = p;
    const int64_t i1 = r1 * GEGLU_CHUNK < c->n ? r1 * GEGLU_CHUNK : c->n;
    for (int64_t i = r0 * GEGLU_CHUNK; i < i1; i++)
        c->g[i] = fp4p_geglu(c->g[i], c->u[i]);
}
fp4_status fp4_cpu_geglu(float *g, const float *u, int64_t n, int n_threads) {
    geglu_ctx c = {g, u, n};
    return fp4_parallel_rows((n + GEGLU_CHUNK - 1) / GEGLU_CHUNK, n >= 16 * GEGLU_CHUNK ? n_threads : 1,
                             geglu_rows, &c);
}

void fp4_cpu_post_norm_add(float *x, float *t, const float *w, int64_t n_cols, int64_t H, float eps) {
    for (int64_t c = 0; c < n_cols; c++) {
        fp4p_rmsnorm(t + c * H, w, H, eps, t + c * H);
        for (int64_t i = 0; i < H; i++)
            x[c * H + i] = fp4p_add(x[c * H + i], t[c * H + i]);
    }
}

void fp4_cpu_softcap(float *logits, int64_t n, double cap) {
    for (int64_t i = 0; i < n; i++)
        logits[i] = fp4p_softcap(logits[i], (float)cap);
}
