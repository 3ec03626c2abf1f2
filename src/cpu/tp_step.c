/* tp_step.c — THE STEP (backend.h) split over N in-process ranks (docs/SCALE.md): the CPU backend's
 * arithmetic, each rank a thread with its own shards, KV cache and communicator handle.
 *
 *   replicated on every rank: the residual x, the norms, RoPE, the router and the MoE routing (the
 *     same inputs and the same pinned operations give the same bits on each rank);
 *   column-parallel (whole output rows): q, k, v by head, gate and up by ffn row, the head by
 *     vocabulary row, then gathered;
 *   row-parallel (input columns): o over the rank's heads and down over its ffn rows; exact mode
 *     gathers every super-block term and replays SPEC §4's sequential sum (tp_shard.c), native mode
 *     sums the partial outputs with the communicator's all_reduce;
 *   expert-parallel: experts whole on ranks [e0, e1); each rank runs its experts over the columns that
 *     chose them (grouped as the plain step groups them), the outputs are gathered and every rank
 *     combines them in selection order;
 *   attention: each rank its KV heads and their query heads, over its own part of the cache.
 * So exact mode gives the plain engine's bits at any --tp the checks accept (test_runtime_tp). */
#include "fp4_impl.h"
#include "cpu/tp_impl.h"
#include "cpu/cpu_impl.h"
#include "format/pinned.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct tp_engine tp_engine;

typedef struct tp_rank {
    tp_engine *e;
    int r;
    fp4_comm *comm;
    tp_part p;
    fp4_tensor *lw; /* n_layers * FP4_LW_COUNT_: this rank's shards of the matrices */
    fp4_tensor head;
    uint8_t **owned;   /* n_layers * 2: the row-parallel copies (o, down) */
    uint16_t *kc, *vc; /* [slot][layer][pos][nkv_r * D] */
    float *h, *q, *k, *v, *o, *g, *u, *t, *part, *gath, *att, *P, *rl, *rs, *rw, *gh, *eo;
    int *ri;
    int64_t *gc;
    fp4_status st;
    fp4_error err;
    pthread_t tid;
} tp_rank;

struct tp_engine {
    fp4_rt_model_desc d;
    int n, n_threads; /* ranks; threads per rank */
    int64_t max_cols, nkv_r, nh_r, f_r, v_r, gather_floats;
    float **x_r; /* the replicated residual, each rank its own copy, [col][H] */
    tp_rank *rk;
    /* the crew: rank threads 1..n-1 wait for a new generation, run the step, count down */
    pthread_mutex_t m;
    pthread_cond_t go, done;
    uint64_t gen;
    int pending, quit;
    const fp4_rt_col *cols;
    int64_t ncol;
    float *logits;
};

static const char *tp_route(const fp4_tensor *w, fp4_mode mode) {
    const char *n = fp4_cpu_route_name(w, mode);
    return strcmp(n, "none") ? n : NULL;
}

static float *fa(int64_t n) {
    return n > 0 && (uint64_t)n < SIZE_MAX / 8 ? malloc((size_t)n * sizeof(float)) : NULL;
}

#define RANK_FAIL(k, st_, rule, ...) fp4_fail(&(k)->err, (st_), NULL, NULL, (rule), __VA_ARGS__)

static fp4_status proj(tp_rank *k, const fp4_tensor *w, const float *x, int64_t n, float *y) {
    fp4_status st = fp4_cpu_project(w, k->e->d.mode, x, n, y, k->e->n_threads);
    return st ? fp4_fail(&k->err, st, NULL, w->name, "rt.project", "rank %d: projection failed on route %s",
                         k->r, fp4_cpu_route_name(w, k->e->d.mode))
              : FP4_OK;
}

/* y[n][n_out] = W·x over all ranks' input columns, W row-parallel (this rank's shard w, x its
 * columns): exact A16 by gathered terms and the pinned sum, native by all_reduce */
static fp4_status row_parallel(tp_rank *k, const fp4_tensor *w, const float *x, int64_t n, float *y) {
    const tp_engine *e = k->e;
    const int64_t n_out = w->nvfp4.n_out ? w->nvfp4.n_out : fp4_rows_of(w->ne, w->n_dims);
    fp4_status st;
    if (e->d.mode == FP4_MODE_EXACT) {
        const int64_t nsb = w->nvfp4.n_in / FP4_QK_K, cnt = n * n_out * nsb;
        if ((st = fp4_tp_a16_terms(w, x, n, k->part, e->n_threads)))
            return RANK_FAIL(k, st, "rt.project", "rank %d: A16 terms of %s", k->r, w->name);
        if ((st = fp4_comm_all_gather(k->comm, k->part, k->gath, sizeof(float) * (size_t)cnt, &k->err)))
            return st;
        fp4_tp_a16_reduce(k->gath, e->n, n, n_out, nsb, y);
        return FP4_OK;
    }
    if ((st = proj(k, w, x, n, y))) return st;
    return fp4_comm_all_reduce_sum(k->comm, y, y, n * n_out, &k->err);
}

static void unpermute(float *x, int64_t n_heads, int64_t D) {
    float tmp[FP4_ARCH_MAX_HEAD_DIM];
    for (int64_t h = 0; h < n_heads; h++) {
        float *v = x + h * D;
        for (int64_t i = 0; i < D / 2; i++)
            tmp[i] = v[2 * i], tmp[D / 2 + i] = v[2 * i + 1];
        memcpy(v, tmp, sizeof(float) * (size_t)D);
    }
}

static uint16_t *kv_at(const tp_engine *e, uint16_t *base, int32_t slot, int64_t L, int64_t pos) {
    return base +
           (((int64_t)slot * e->d.arch.n_layers + L) * e->d.n_ctx + pos) * e->nkv_r * e->d.arch.head_dim;
}

typedef void (*attend_fn)(const float *q, const uint16_t *k0, const uint16_t *v0, int64_t row_stride,
                          int64_t n, int head_dim, int64_t hq0, int nh, int group, float scale, float *s,
                          float *P, float *o);
static const attend_fn attend_path[FP4_CPU_N_PATHS] = {[FP4_CPU_PORTABLE] = fp4_attend_heads_portable,
                                                       [FP4_CPU_AVX2] = fp4_attend_heads_avx2,
                                                       [FP4_CPU_AVX512] = fp4_attend_heads_avx512};

/* q/k/v of the rank's heads, their bias, norms and RoPE, the KV write, then attention -> k->o */
static fp4_status attention(tp_rank *k, int64_t L, const fp4_rt_col *cols, int64_t n) {
    tp_engine *e = k->e;
    const fp4_arch *a = &e->d.arch;
    const int64_t D = a->head_dim, G = a->n_heads / a->n_kv_heads, half = D / 2;
    const int64_t qd = e->nh_r * D, kvd = e->nkv_r * D;
    const fp4_tensor *w = k->lw + L * FP4_LW_COUNT_;
    const float *const *vw = e->d.vec + L * FP4_LW_COUNT_;
    fp4_status st;
    if ((st = proj(k, &w[FP4_LW_Q], k->h, n, k->q)) || (st = proj(k, &w[FP4_LW_K], k->h, n, k->k)) ||
        (st = proj(k, &w[FP4_LW_V], k->h, n, k->v)))
        return st;
    for (int64_t c = 0; c < n; c++) {
        float *q = k->q + c * qd, *kk = k->k + c * kvd, *v = k->v + c * kvd;
        if (a->qkv_bias) {
            for (int64_t i = 0; i < qd; i++)
                q[i] = fp4p_add(q[i], vw[FP4_LW_Q_BIAS][k->p.hq0 * D + i]);
            for (int64_t i = 0; i < kvd; i++)
                kk[i] = fp4p_add(kk[i], vw[FP4_LW_K_BIAS][k->p.kv0 * D + i]);
            for (int64_t i = 0; i < kvd; i++)
                v[i] = fp4p_add(v[i], vw[FP4_LW_V_BIAS][k->p.kv0 * D + i]);
        }
        if (a->qk_permuted) unpermute(q, e->nh_r, D), unpermute(kk, e->nkv_r, D);
        if (a->qk_norm) {
            for (int64_t h = 0; h < e->nh_r; h++)
                fp4p_rmsnorm(q + h * D, vw[FP4_LW_Q_NORM], D, a->rms_eps, q + h * D);
            for (int64_t h = 0; h < e->nkv_r; h++)
                fp4p_rmsnorm(kk + h * D, vw[FP4_LW_K_NORM], D, a->rms_eps, kk + h * D);
        }
        const float *cs = e->d.rope_cos + cols[c].pos * half, *sn = e->d.rope_sin + cols[c].pos * half;
        for (int64_t h = 0; h < e->nh_r; h++)
            fp4p_rope(q + h * D, cs, sn, (int)half);
        for (int64_t h = 0; h < e->nkv_r; h++)
            fp4p_rope(kk + h * D, cs, sn, (int)half);
        uint16_t *kd = kv_at(e, k->kc, cols[c].slot, L, cols[c].pos),
                 *vd = kv_at(e, k->vc, cols[c].slot, L, cols[c].pos);
        for (int64_t i = 0; i < kvd; i++)
            kd[i] = fp4p_f32_to_f16(kk[i]), vd[i] = fp4p_f32_to_f16(v[i]);
    }
    /* the CPU step's attention walks (attend_heads_*.c, the same bits on every path) over the rank's
     * heads: local query head h reads local KV head h / G */
    const attend_fn attend = attend_path[fp4_cpu_path()];
    for (int64_t c = 0; c < n; c++)
        for (int64_t h = 0; h < e->nh_r; h += FP4_ATTEND_MAX_HEADS) {
            const int64_t nh = e->nh_r - h < FP4_ATTEND_MAX_HEADS ? e->nh_r - h : FP4_ATTEND_MAX_HEADS;
            attend(k->q + c * qd + h * D, kv_at(e, k->kc, cols[c].slot, L, 0),
                   kv_at(e, k->vc, cols[c].slot, L, 0), kvd, cols[c].pos + 1, (int)D, h, (int)nh, (int)G,
                   e->d.attn_scale, k->att, k->P, k->o + c * qd + h * D);
        }
    return FP4_OK;
}

/* the rank whose part [total·r/n, total·(r+1)/n) holds index i (fp4_tp_part's split) */
static int owner_of(int64_t i, int64_t total, int n) {
    int o = 0;
    while (o < n - 1 && i >= total * (o + 1) / n)
        o++;
    return o;
}

static void swiglu_portable(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        g[i] = fp4p_swiglu(g[i], u[i]);
}
/* fp4p_swiglu element-wise on each CPU path (pinned_x86.c): the same bits */
static void swiglu(float *g, const float *u, int64_t n) {
    static void (*const path[FP4_CPU_N_PATHS])(float *, const float *,
                                               int64_t) = {[FP4_CPU_PORTABLE] = swiglu_portable,
                                                           [FP4_CPU_AVX2] = fp4_swiglu_avx2,
                                                           [FP4_CPU_AVX512] = fp4_swiglu_avx512};
    path[fp4_cpu_path()](g, u, n);
}

/* THE STEP's k'..m' with the experts on their ranks: the same grouping as the plain step, each
 * (column, choice) output taken from its expert's rank after one gather */
static fp4_status moe(tp_rank *k, int64_t L, float *x, int64_t n) {
    tp_engine *e = k->e;
    const fp4_arch *a = &e->d.arch;
    const int64_t H = a->hidden, E = a->n_experts, FE = a->moe_ffn;
    const int K = (int)a->n_experts_used;
    const fp4_tensor *const *mw = e->d.moe + L * FP4_MOE_STRIDE(E);
    fp4_status st;
    if ((st = proj(k, mw[FP4_MOE_ROUTER], k->h, n, k->rl))) return st;
    for (int64_t c = 0; c < n; c++)
        fp4p_moe_route(k->rl + c * E, E, K, a->moe_routing, a->moe_norm_topk, k->rs, k->ri + c * K,
                       k->rw + c * K);
    memset(k->eo, 0, sizeof(float) * (size_t)(n * K * H));
    for (int64_t ex = k->p.e0; ex < k->p.e1; ex++) {
        int64_t m = 0;
        for (int64_t c = 0; c < n; c++)
            for (int j = 0; j < K; j++)
                if (k->ri[c * K + j] == (int)ex) {
                    memcpy(k->gh + m * H, k->h + c * H, sizeof(float) * (size_t)H);
                    k->gc[m++] = c * K + j;
                }
        if (!m) continue;
        if ((st = proj(k, mw[FP4_MOE_AT(ex, FP4_MOE_GATE)], k->gh, m, k->g)) ||
            (st = proj(k, mw[FP4_MOE_AT(ex, FP4_MOE_UP)], k->gh, m, k->u)))
            return st;
        swiglu(k->g, k->u, m * FE);
        if ((st = proj(k, mw[FP4_MOE_AT(ex, FP4_MOE_DOWN)], k->g, m, k->gh))) return st;
        for (int64_t i = 0; i < m; i++)
            memcpy(k->eo + k->gc[i] * H, k->gh + i * H, sizeof(float) * (size_t)H);
    }
    const size_t bytes = sizeof(float) * (size_t)(n * K * H);
    if ((st = fp4_comm_all_gather(k->comm, k->eo, k->gath, bytes, &k->err))) return st;
    for (int64_t s = 0; s < n * K; s++)
        memcpy(k->eo + s * H, k->gath + (int64_t)owner_of(k->ri[s], E, e->n) * n * K * H + s * H,
               sizeof(float) * (size_t)H);
    for (int64_t c = 0; c < n; c++)
        for (int64_t i = 0; i < H; i++)
            x[c * H + i] =
                fp4p_add(x[c * H + i], fp4p_moe_combine(k->rw + c * K, k->eo + c * K * H, K, H, i));
    return FP4_OK;
}

static fp4_status layer(tp_rank *k, int64_t L, float *x, const fp4_rt_col *cols, int64_t n) {
    tp_engine *e = k->e;
    const fp4_arch *a = &e->d.arch;
    const int64_t H = a->hidden;
    const fp4_tensor *w = k->lw + L * FP4_LW_COUNT_;
    const float *const *vw = e->d.vec + L * FP4_LW_COUNT_;
    fp4_status st;
    for (int64_t c = 0; c < n; c++)
        fp4p_rmsnorm(x + c * H, vw[FP4_LW_ATTN_NORM], H, a->rms_eps, k->h + c * H);
    if ((st = attention(k, L, cols, n)) || (st = row_parallel(k, &w[FP4_LW_O], k->o, n, k->t))) return st;
    for (int64_t i = 0; i < n * H; i++)
        x[i] = fp4p_add(x[i], k->t[i]);
    for (int64_t c = 0; c < n; c++)
        fp4p_rmsnorm(x + c * H, vw[FP4_LW_FFN_NORM], H, a->rms_eps, k->h + c * H);
    if (e->d.moe && e->d.moe[L * FP4_MOE_STRIDE(a->n_experts)]) return moe(k, L, x, n);
    if ((st = proj(k, &w[FP4_LW_GATE], k->h, n, k->g)) || (st = proj(k, &w[FP4_LW_UP], k->h, n, k->u)))
        return st;
    swiglu(k->g, k->u, n * e->f_r);
    if ((st = row_parallel(k, &w[FP4_LW_DOWN], k->g, n, k->t))) return st;
    for (int64_t i = 0; i < n * H; i++)
        x[i] = fp4p_add(x[i], k->t[i]);
    return FP4_OK;
}

/* the embedding rows by vocabulary: each token's row from the rank that holds it */
static fp4_status embed(tp_rank *k, float *x, const fp4_rt_col *cols, int64_t n) {
    tp_engine *e = k->e;
    const int64_t H = e->d.arch.hidden;
    float *mine = k->t;
    memset(mine, 0, sizeof(float) * (size_t)(n * H));
    for (int64_t c = 0; c < n; c++)
        if (cols[c].token >= k->p.v0 && cols[c].token < k->p.v1) {
            fp4_status st =
                fp4_tensor_dequant_rows(e->d.tok_embd, cols[c].token, cols[c].token + 1, mine + c * H);
            if (st)
                return fp4_fail(&k->err, st, NULL, e->d.tok_embd->name, "rt.embed",
                                "cannot read embedding row %d", cols[c].token);
        }
    fp4_status st = fp4_comm_all_gather(k->comm, mine, k->gath, sizeof(float) * (size_t)(n * H), &k->err);
    if (st) return st;
    for (int64_t c = 0; c < n; c++) {
        const int o = owner_of(cols[c].token, e->d.arch.vocab, e->n);
        memcpy(x + c * H, k->gath + (int64_t)o * n * H + c * H, sizeof(float) * (size_t)H);
    }
    return FP4_OK;
}

/* the head by vocabulary rows, gathered into rank 0's logits */
static fp4_status head(tp_rank *k, const float *x, const fp4_rt_col *cols, int64_t n, float *logits) {
    tp_engine *e = k->e;
    const fp4_arch *a = &e->d.arch;
    const int64_t H = a->hidden, V = a->vocab, vr = k->p.v1 - k->p.v0;
    int64_t nw = 0;
    for (int64_t c = 0; c < n; c++)
        if (cols[c].want_logits) fp4p_rmsnorm(x + c * H, e->d.out_norm_f32, H, a->rms_eps, k->h + nw++ * H);
    if (!nw) return FP4_OK;
    fp4_status st = proj(k, &k->head, k->h, nw, k->part);
    if (st) return st;
    /* pad to the largest part so every rank sends the same bytes */
    float *send = k->t;
    for (int64_t c = 0; c < nw; c++)
        memcpy(send + c * e->v_r, k->part + c * vr, sizeof(float) * (size_t)vr);
    if ((st = fp4_comm_all_gather(k->comm, send, k->gath, sizeof(float) * (size_t)(nw * e->v_r), &k->err)))
        return st;
    if (k->r || !logits) return FP4_OK;
    for (int o = 0; o < e->n; o++) {
        const tp_part p = fp4_tp_part(a, o, e->n);
        for (int64_t c = 0; c < nw; c++)
            memcpy(logits + c * V + p.v0, k->gath + ((int64_t)o * nw + c) * e->v_r,
                   sizeof(float) * (size_t)(p.v1 - p.v0));
    }
    return FP4_OK;
}

static void rank_step(tp_rank *k) {
    tp_engine *e = k->e;
    float *x = e->x_r[k->r];
    fp4_status st = embed(k, x, e->cols, e->ncol);
    for (int64_t L = 0; L < e->d.arch.n_layers && !st; L++)
        st = layer(k, L, x, e->cols, e->ncol);
    if (!st) st = head(k, x, e->cols, e->ncol, e->logits);
    k->st = st;
    if (st) fp4_comm_abort(k->comm); /* the others must not wait for this rank */
}

static void *rank_thread(void *p) {
    tp_rank *k = p;
    tp_engine *e = k->e;
    uint64_t seen = 0;
    for (;;) {
        pthread_mutex_lock(&e->m);
        while (e->gen == seen && !e->quit)
            pthread_cond_wait(&e->go, &e->m);
        if (e->quit) {
            pthread_mutex_unlock(&e->m);
            return NULL;
        }
        seen = e->gen;
        pthread_mutex_unlock(&e->m);
        rank_step(k);
        pthread_mutex_lock(&e->m);
        if (--e->pending == 0) pthread_cond_signal(&e->done);
        pthread_mutex_unlock(&e->m);
    }
}

static void tp_destroy(void *p) {
    tp_engine *e = p;
    if (!e) return;
    pthread_mutex_lock(&e->m);
    e->quit = 1;
    pthread_cond_broadcast(&e->go);
    pthread_mutex_unlock(&e->m);
    for (int r = 0; r < e->n && e->rk; r++) {
        tp_rank *k = &e->rk[r];
        if (k->tid) pthread_join(k->tid, NULL);
        for (int64_t i = 0; k->owned && i < 2 * e->d.arch.n_layers; i++)
            free(k->owned[i]);
        free(k->owned), free(k->lw), free(k->kc), free(k->vc);
        free(k->h), free(k->q), free(k->k), free(k->v), free(k->o), free(k->g), free(k->u), free(k->t);
        free(k->part), free(k->gath), free(k->att), free(k->P), free(k->rl), free(k->rs), free(k->rw),
            free(k->gh);
        free(k->eo), free(k->ri), free(k->gc);
        if (k->comm) fp4_comm_free(k->comm);
        if (e->x_r) free(e->x_r[r]);
    }
    free(e->x_r), free(e->rk);
    pthread_mutex_destroy(&e->m);
    pthread_cond_destroy(&e->go), pthread_cond_destroy(&e->done);
    free(e);
}

static int64_t imax(int64_t a, int64_t b) {
    return a > b ? a : b;
}

/* the rank's shards of layer L: q/k/v, gate/up by rows (views), o and down by columns (copies) */
static fp4_status shard_layer(tp_engine *e, tp_rank *k, int64_t L, fp4_error *err) {
    const int64_t D = e->d.arch.head_dim;
    const fp4_tensor *const *w = e->d.layer + L * FP4_LW_COUNT_;
    fp4_tensor *o = k->lw + L * FP4_LW_COUNT_;
    fp4_status st;
    if ((st = fp4_tp_rows(w[FP4_LW_Q], k->p.hq0 * D, k->p.hq1 * D, &o[FP4_LW_Q], err)) ||
        (st = fp4_tp_rows(w[FP4_LW_K], k->p.kv0 * D, k->p.kv1 * D, &o[FP4_LW_K], err)) ||
        (st = fp4_tp_rows(w[FP4_LW_V], k->p.kv0 * D, k->p.kv1 * D, &o[FP4_LW_V], err)) ||
        (st = fp4_tp_cols(w[FP4_LW_O], k->p.hq0 * D, k->p.hq1 * D, &o[FP4_LW_O], &k->owned[2 * L], err)))
        return st;
    if (!w[FP4_LW_DOWN]) return FP4_OK; /* a MoE layer: its experts stay whole */
    if ((st = fp4_tp_rows(w[FP4_LW_GATE], k->p.f0, k->p.f1, &o[FP4_LW_GATE], err)) ||
        (st = fp4_tp_rows(w[FP4_LW_UP], k->p.f0, k->p.f1, &o[FP4_LW_UP], err)) ||
        (st = fp4_tp_cols(w[FP4_LW_DOWN], k->p.f0, k->p.f1, &o[FP4_LW_DOWN], &k->owned[2 * L + 1], err)))
        return st;
    return FP4_OK;
}

static uint64_t tensor_bytes(const fp4_tensor *w) {
    if (!w) return 0;
    if (w->type == FP4_TYPE_NVFP4_E2M1)
        return (uint64_t)(w->nvfp4.n_out * (w->nvfp4.n_in / 2 + w->nvfp4.n_in / 16));
    return w->nbytes;
}

/* what rank r holds, reported through on_plan (device "cpu tp rank R/N") */
static void report_plan(const tp_engine *e, const tp_rank *k, uint64_t kv, uint64_t scratch) {
    if (!e->d.on_plan) return;
    fp4_rt_mem_plan p = {0};
    snprintf(p.device, sizeof p.device, "cpu tp rank %d/%d", k->r, e->n);
    for (int64_t i = 0; i < e->d.arch.n_layers * FP4_LW_COUNT_; i++)
        p.weights_bytes += tensor_bytes(&k->lw[i]);
    p.weights_bytes += tensor_bytes(&k->head);
    const int64_t E = e->d.arch.n_experts;
    for (int64_t L = 0; e->d.moe && L < e->d.arch.n_layers; L++) {
        const fp4_tensor *const *mw = e->d.moe + L * FP4_MOE_STRIDE(E);
        if (!mw[0]) continue;
        p.weights_bytes += tensor_bytes(mw[0]);
        for (int64_t x = k->p.e0; x < k->p.e1; x++)
            for (int part = FP4_MOE_GATE; part <= FP4_MOE_DOWN; part++)
                p.weights_bytes += tensor_bytes(mw[FP4_MOE_AT(x, part)]);
    }
    /* in-process ranks share the host: its cap (the unsplit plan already passed it) */
    fp4_rt_mem_plan host;
    if (!fp4_rt_cpu_plan(&e->d.arch, e->d.n_ctx, e->d.n_slots, e->max_cols, e->d.max_logit_cols,
                         e->d.n_threads, &host, NULL))
        p.available_bytes = host.available_bytes;
    p.kv_bytes = kv, p.scratch_bytes = scratch;
    p.total_bytes = p.weights_bytes + p.kv_bytes + p.scratch_bytes;
    e->d.on_plan(&p, e->d.plan_user);
}

static fp4_status rank_alloc(tp_engine *e, tp_rank *k, fp4_error *err) {
    const fp4_arch *a = &e->d.arch;
    const int64_t mc = e->max_cols, H = a->hidden, D = a->head_dim, E = a->n_experts, K = a->n_experts_used;
    const int64_t F = imax(e->f_r, a->moe_ffn), nl = a->n_layers;
    k->lw = calloc((size_t)(nl * FP4_LW_COUNT_), sizeof *k->lw);
    k->owned = calloc((size_t)(2 * nl), sizeof *k->owned);
    if (!k->lw || !k->owned) return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
    fp4_status st;
    for (int64_t L = 0; L < nl; L++)
        if ((st = shard_layer(e, k, L, err))) return st;
    if ((st = fp4_tp_rows(e->d.head, k->p.v0, k->p.v1, &k->head, err))) return st;
    const uint64_t kvn =
        (uint64_t)e->d.n_slots * (uint64_t)nl * (uint64_t)e->d.n_ctx * (uint64_t)(e->nkv_r * D);
    k->kc = calloc((size_t)kvn, 2), k->vc = calloc((size_t)kvn, 2);
    k->h = fa(mc * H), k->q = fa(mc * e->nh_r * D), k->o = fa(mc * e->nh_r * D);
    k->k = fa(mc * e->nkv_r * D), k->v = fa(mc * e->nkv_r * D), k->g = fa(mc * F), k->u = fa(mc * F);
    k->t = fa(mc * imax(H, e->v_r)), k->part = fa(e->gather_floats), k->gath = fa(e->n * e->gather_floats);
    k->att = fa(e->d.n_ctx * FP4_ATTEND_MAX_HEADS), k->P = fa(FP4P_LANES * D * FP4_ATTEND_MAX_HEADS);
    int moe_ok = 1;
    if (e->d.moe) {
        k->rl = fa(mc * E), k->rs = fa(E), k->rw = fa(mc * K), k->gh = fa(mc * H), k->eo = fa(mc * K * H);
        k->ri = malloc(sizeof(int) * (size_t)(mc * K)), k->gc = malloc(sizeof(int64_t) * (size_t)mc);
        moe_ok = k->rl && k->rs && k->rw && k->gh && k->eo && k->ri && k->gc;
    }
    if (!k->kc || !k->vc || !k->h || !k->q || !k->o || !k->k || !k->v || !k->g || !k->u || !k->t ||
        !k->part || !k->gath || !k->att || !k->P || !moe_ok)
        return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory (rank %d)", k->r);
    report_plan(e, k, 4 * kvn, sizeof(float) * (uint64_t)(e->gather_floats * (e->n + 1)));
    return FP4_OK;
}

static fp4_status tp_create(const fp4_rt_model_desc *d, int64_t max_cols, void **out, fp4_error *err) {
    *out = NULL;
    const int n = d->tp;
    fp4_status st = fp4_tp_check(d, n, tp_route, err); /* refusals before anything is allocated */
    if (st) return st;
    const fp4_arch *a = &d->arch;
    tp_engine *e = calloc(1, sizeof *e);
    if (!e) return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
    pthread_mutex_init(&e->m, NULL);
    pthread_cond_init(&e->go, NULL), pthread_cond_init(&e->done, NULL);
    e->d = *d, e->n = n, e->max_cols = max_cols;
    e->n_threads = d->n_threads / n > 1 ? d->n_threads / n : 1;
    e->nkv_r = a->n_kv_heads / n, e->nh_r = a->n_heads / n;
    e->f_r = a->ffn / n + 1, e->v_r = a->vocab / n + 1; /* the largest part */
    const int64_t H = a->hidden, nsb = imax((e->nh_r * a->head_dim) / FP4_QK_K, e->f_r / FP4_QK_K) + 1;
    e->gather_floats =
        imax(imax(max_cols * H * nsb, max_cols * H * imax(a->n_experts_used, 1)), max_cols * e->v_r);
    e->rk = calloc((size_t)n, sizeof *e->rk);
    e->x_r = calloc((size_t)n, sizeof *e->x_r);
    fp4_comm *c[FP4_COMM_MAX_RANKS];
    if (!e->rk || !e->x_r)
        st = fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
    else
        st = fp4_comm_local_create(n, sizeof(float) * (size_t)e->gather_floats, c, err);
    for (int r = 0; r < n && !st; r++) /* every rank owns its communicator before any can fail */
        e->rk[r].comm = c[r];
    for (int r = 0; r < n && !st; r++) {
        tp_rank *k = &e->rk[r];
        k->e = e, k->r = r, k->p = fp4_tp_part(a, r, n);
        if (!(e->x_r[r] = fa(max_cols * H)))
            st = fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
        else
            st = rank_alloc(e, k, err);
    }
    for (int r = 1; r < n && !st; r++)
        if (pthread_create(&e->rk[r].tid, NULL, rank_thread, &e->rk[r]))
            st = fp4_fail(err, FP4_ERR_IO, NULL, NULL, "tp.thread", "cannot start rank %d's thread", r);
    if (st) {
        tp_destroy(e);
        return st;
    }
    *out = e;
    return FP4_OK;
}

static fp4_status tp_step(void *p, const fp4_rt_col *cols, int64_t n, float *logits, fp4_error *err) {
    tp_engine *e = p;
    const fp4_arch *a = &e->d.arch;
    if (n <= 0 || n > e->max_cols)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "rt.step", "%lld columns (1..%lld)",
                        (long long)n, (long long)e->max_cols);
    int64_t nw = 0;
    for (int64_t c = 0; c < n; c++) {
        if (cols[c].token < 0 || cols[c].token >= a->vocab || cols[c].slot < 0 ||
            cols[c].slot >= e->d.n_slots || cols[c].pos < 0 || cols[c].pos >= e->d.n_ctx)
            return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "rt.step",
                            "column %lld: token %d slot %d position %lld out of range", (long long)c,
                            cols[c].token, cols[c].slot, (long long)cols[c].pos);
        nw += cols[c].want_logits != 0;
    }
    if (nw && !logits)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "rt.step", "logits wanted but no buffer given");
    pthread_mutex_lock(&e->m);
    e->cols = cols, e->ncol = n, e->logits = logits;
    e->pending = e->n - 1;
    e->gen++;
    pthread_cond_broadcast(&e->go);
    pthread_mutex_unlock(&e->m);
    rank_step(&e->rk[0]);
    pthread_mutex_lock(&e->m);
    while (e->pending)
        pthread_cond_wait(&e->done, &e->m);
    pthread_mutex_unlock(&e->m);
    /* the first rank that failed on its own (the others report comm.aborted) */
    const tp_rank *bad = NULL;
    for (int r = 0; r < e->n; r++)
        if (e->rk[r].st && (!bad || !strcmp(bad->err.rule, "comm.aborted"))) bad = &e->rk[r];
    if (!bad) return FP4_OK;
    if (err) *err = bad->err;
    return bad->st;
}

static fp4_status kv_copy(tp_engine *e, int32_t slot, int64_t n_pos, uint16_t *k, uint16_t *v, int to_host) {
    const fp4_arch *a = &e->d.arch;
    const int64_t D = a->head_dim, kvd = a->n_kv_heads * D, rd = e->nkv_r * D;
    if (slot < 0 || slot >= e->d.n_slots || n_pos < 0 || n_pos > e->d.n_ctx) return FP4_ERR_INVALID_ARG;
    for (int r = 0; r < e->n; r++)
        for (int64_t L = 0; L < a->n_layers; L++)
            for (int64_t ps = 0; ps < n_pos; ps++) {
                uint16_t *kc = kv_at(e, e->rk[r].kc, slot, L, ps), *vc = kv_at(e, e->rk[r].vc, slot, L, ps);
                uint16_t *kh = k + (L * n_pos + ps) * kvd + e->rk[r].p.kv0 * D;
                uint16_t *vh = v + (L * n_pos + ps) * kvd + e->rk[r].p.kv0 * D;
                const size_t b = sizeof(uint16_t) * (size_t)rd;
                if (to_host)
                    memcpy(kh, kc, b), memcpy(vh, vc, b);
                else
                    memcpy(kc, kh, b), memcpy(vc, vh, b);
            }
    return FP4_OK;
}
static fp4_status tp_kv_read(void *p, int32_t slot, int64_t n_pos, uint16_t *k, uint16_t *v) {
    return kv_copy(p, slot, n_pos, k, v, 1);
}
static fp4_status tp_kv_write(void *p, int32_t slot, int64_t n_pos, const uint16_t *k, const uint16_t *v) {
    return kv_copy(p, slot, n_pos, (uint16_t *)k, (uint16_t *)v, 0);
}

static const fp4_rt_backend_ops tp_ops = {
    FP4_RT_BACKEND_ABI,
    "cpu-tp",
    tp_route,
    tp_create,
    tp_destroy,
    tp_step,
    tp_kv_read,
    tp_kv_write,
    NULL, /* step_cols: the runtime's 64 */
    NULL, /* step_greedy: the runtime's host argmax */
    NULL, /* kv_trim: each rank's cache is allocated whole at create */
    NULL, /* kv_blocks */
};

const fp4_rt_backend_ops *fp4_rt_cpu_tp_backend(void) {
    return &tp_ops;
}
