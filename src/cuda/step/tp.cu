/* tp.cu — THE STEP split over N ranks on CUDA (docs/SCALE.md): each rank is this backend's engine
 * (a cu_state, create.cu) on device (desc.device + r) % device_count, built from a rank's desc that
 * holds its shards — the CPU split's plan (src/backend/tp_plan.c): q/k/v by KV head and gate/up by
 * ffn row (whole rows, column-parallel), o over its heads' and down over its ffn rows' input columns
 * (row-parallel), its KV heads' cache, the head and the embedding by vocabulary rows (each token's
 * row gathered from the rank that holds it). The residual, the norms and RoPE are replicated (the
 * same inputs and pinned operations give the same bits on each rank; the embedding too where the device reads
 * it). The ranks are threads of one process; their communicator (comm.h) is the in-process one over device
 * memory (src/comm/cuda/comm_cuda.c), so N ranks may share one GPU, or with FP4LANE_CUDA_TP_NCCL=1 NCCL
 * (comm_nccl.c, libnccl.so.2 loaded at run time: nccl_dl.c), one rank per GPU.
 *
 * Row-parallel projections (fp4_cu_tp_row_parallel, called by step.cu for o and down): exact mode
 * computes each super-block's term of SPEC §4 (the exact kernels' integer arithmetic and
 * fp4_cu_a16_term, no sum), gathers every rank's terms and replays the one sequential sum and the F16
 * boundary on every rank — the bits of the unsplit step on either device (the CPU split's argument,
 * tp_shard.c); native mode runs the rank's shard on its route and sums the partial outputs with
 * all_reduce_sum. A step synchronizes each rank's stream at every collective, so the split runs
 * eagerly (no CUDA graphs) and without the fused SwiGLU + down pass.
 * Mixture of experts: experts [E·r/N, E·(r+1)/N) whole on rank r (moe.cu uploads only those); the
 * routing is replicated; each rank runs every (column, choice) pair, a pair whose expert it does not
 * hold on its first expert (the launch takes every pair), then the pairs' outputs are gathered and
 * each takes its expert's rank's row (fp4_cu_tp_moe_pick) before the combine: the owner's bits, the
 * plain step's. Refused here, by name: fewer experts than ranks (tp.moe-cuda), and whatever
 * fp4_tp_check refuses (tp.heads, tp.exact-split, tp.exact-route, ...). */
#include "cuda/step/step_impl.cuh"
extern "C" {
#include "backend/tp_plan.h"
#include "comm/comm.h"
}
#include "format/argmax.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct cu_tp cu_tp;

struct cu_tp_rank {
    cu_tp *e;
    int r, dev;
    tp_part p;
    fp4_comm *comm;
    cu_state *s;
    fp4_rt_model_desc d;   /* the rank's desc: its heads, ffn rows and shards */
    const fp4_tensor **lp; /* n_layers * FP4_LW_COUNT_ pointers into lw (projections) or the model */
    fp4_tensor *lw, head;  /* the shards */
    fp4_tensor emb;        /* the embedding's vocabulary rows (emb_split) */
    int emb_split;         /* the table is on the device and split by vocabulary (else replicated) */
    const float **vec;     /* the vectors, biases offset to the rank's heads */
    uint8_t **owned;       /* n_layers * 2: the row-parallel copies (o, down) */
    int8_t *d_q;           /* exact: the Q8_K pass of a row-parallel input [col][k] */
    int32_t *d_tok;        /* emb_split: the columns' rows of the rank's table (outside it: -1) */
    float *d_d, *d_part, *d_gath, *d_emb;
    uint64_t extra_bytes; /* the buffers above, added to the rank's memory plan */
    fp4_status st;
    fp4_error err;
    pthread_t tid;
};

struct cu_tp {
    int is_tp; /* 1 (step.cu's ops tell the handles apart by it) */
    fp4_rt_model_desc d;
    int n, multi_device; /* ranks; 1 when they sit on more than one device */
    int64_t max_cols, lrows, vmax, nsb_max, kmax;
    cu_tp_rank *rk;
    float *h_gath, *h_lg; /* rank 0's gathered logit parts; the greedy step's logits */
    /* the crew: rank threads 1..n-1 wait for a new generation, run the step, count down */
    pthread_mutex_t m;
    pthread_cond_t go, done;
    uint64_t gen;
    int pending, quit;
    const fp4_rt_col *cols;
    int64_t ncol;
    float *logits;
};

/* ---- the exact row-parallel kernels ---- */

/* c[col][row][sb] for sb < nsb_max: the term super-block sb of the shard adds to the row's
 * accumulator (SPEC §4 steps 2-4: integer group dots weighted by e4m3fn_q9, one int64 total,
 * fp4_cu_a16_term), +0 where the activation's step d is 0 (the oracle skips it) and past the shard's
 * nsb (padding: acc + 0 == acc, acc never -0). One warp per term, 8 values a lane. */
static __global__ __launch_bounds__(256) void tp_terms_kernel(const uint8_t *pay, int64_t pstride,
                                                              const uint8_t *sc, int64_t sstride,
                                                              float scale2, const int8_t *q, const float *dq,
                                                              int64_t k_pad, int64_t n_out, int64_t nsb,
                                                              int64_t nsb_max, int64_t n, float *c) {
    const int lane = threadIdx.x & 31;
    const int64_t job = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (job >= n * n_out * nsb_max) return;
    const int64_t sb = job % nsb_max, row = job / nsb_max % n_out, col = job / (nsb_max * n_out);
    float out = 0.0f;
    const float d = sb < nsb ? dq[col * (k_pad / 256) + sb] : 0.0f;
    if (d != 0.0f) { /* uniform over the warp */
        const uint8_t *pw = pay + row * pstride + sb * 128 + lane * 4;
        const int8_t *qa = q + col * k_pad + sb * 256 + lane * 8;
        int dot = 0;
        for (int j = 0; j < 4; j++) {
            const uint32_t b = pw[j];
            dot += fp4_dev_e2m1_q1(b & 15u) * qa[2 * j] + fp4_dev_e2m1_q1(b >> 4) * qa[2 * j + 1];
        }
        long long part = (long long)dot * fp4_e4m3_q9(sc[row * sstride + sb * 16 + (lane >> 1)]);
        for (int off = 16; off >= 1; off >>= 1)
            part += __shfl_xor_sync(0xFFFFFFFFu, part, off);
        out = fp4_cu_a16_term(__ll2float_rn(part), d, scale2);
    }
    if (lane == 0) c[job] = out;
}

/* y[col][row] = F16(((0 + t_0) + t_1) + ...): every rank's terms in rank order, each rank's in
 * super-block order (g: n_ranks blocks of [n][n_out][nsb]) */
static __global__ void tp_reduce_kernel(const float *g, int n_ranks, int64_t n, int64_t n_out, int64_t nsb,
                                        float *y) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * n_out) return;
    float acc = 0.0f;
    for (int k = 0; k < n_ranks; k++) {
        const float *c = g + ((int64_t)k * n * n_out + i) * nsb;
        for (int64_t sb = 0; sb < nsb; sb++)
            acc = __fmaf_rn(1.0f, c[sb], acc);
    }
    y[i] = fp4_round_f16_dev(acc);
}

/* the rank's table rows of the step's tokens: tok - v0 inside [v0, v1), else -1 (fp4_cuda_embed's
 * row of zeros) */
static __global__ void tp_local_tok_kernel(const int32_t *tok, int64_t n, int64_t v0, int64_t v1,
                                           int32_t *out) {
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c < n) out[c] = tok[c] >= v0 && tok[c] < v1 ? (int32_t)(tok[c] - v0) : -1;
}

/* x[c] = the gathered row of column c from the rank that holds its token (g: n_ranks blocks of
 * [n][H]; fp4_tp_part's parts [V·r/N, V·(r+1)/N)) */
static __global__ void tp_pick_rows_kernel(const float *g, const int32_t *tok, int64_t n, int64_t H,
                                           int64_t V, int n_ranks, float *x) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * H) return;
    const int64_t c = i / H, t = tok[c];
    int o = 0;
    while (o < n_ranks - 1 && t >= V * (o + 1) / n_ranks)
        o++;
    x[i] = g[(int64_t)o * n * H + i];
}

static fp4_status launched(fp4_error *err, cudaError_t e, const char *what) {
    if (e == cudaSuccess) return FP4_OK;
    return cuda_fail(err, FP4_CUDA_FAIL(e, what), NULL, "rt.tp", what);
}

static fp4_status project(cu_state *s, const fp4_cuda_tensor *w, const float *x, int64_t n, float *y,
                          const char *name, fp4_error *err) {
    const fp4_status st = fp4_cuda_project(w, s->d.mode, x, n, y, &s->scratch, s->stream);
    if (!st) return FP4_OK;
    return fp4_fail(err, st, NULL, name, "rt.project", "rank projection failed on route %s: %s",
                    fp4_cuda_route_name(w, s->d.mode, n),
                    st == FP4_ERR_CUDA ? fp4_cuda_last_error() : fp4_status_str(st));
}

extern "C" fp4_status fp4_cu_tp_row_parallel(cu_state *s, const fp4_cuda_tensor *w, const float *x, int64_t n,
                                             float *y, const char *name, fp4_error *err) {
    cu_tp_rank *k = s->tp;
    const cu_tp *e = k->e;
    fp4_status st;
    if (s->d.mode != FP4_MODE_EXACT) {
        if ((st = project(s, w, x, n, y, name, err))) return st;
        if ((st = launched(err, cudaStreamSynchronize(s->stream), "cudaStreamSynchronize"))) return st;
        return fp4_comm_all_reduce_sum(k->comm, y, y, n * w->n_out, err);
    }
    const int64_t nsb = w->n_in / 256, cnt = n * w->n_out * e->nsb_max;
    if (w->type != FP4_TYPE_NVFP4_E2M1 || w->n_in % 256 || w->k_pad != w->n_in || nsb > e->nsb_max ||
        w->n_in > e->kmax || w->input_scale_inv != 0.0f)
        return fp4_fail(err, FP4_ERR_REFUSED_ROUTE, NULL, name, "tp.exact-route",
                        "the split's exact row-parallel projection needs NVFP4 A16 on super-block bounds");
    if ((st = fp4_cu_q8k_quantize(x, w->n_in, w->k_pad, n, k->d_q, k->d_d, NULL, 0, s->stream)))
        return cuda_fail(err, st, name, "rt.tp", "Q8_K pass of a row-parallel input");
    tp_terms_kernel<<<(unsigned)((cnt * 32 + 255) / 256), 256, 0, s->stream>>>(
        w->d_payload, w->payload_stride, w->d_scales, w->scale_stride, w->scale2, k->d_q, k->d_d, w->k_pad,
        w->n_out, nsb, e->nsb_max, n, k->d_part);
    if ((st = launched(err, cudaGetLastError(), "tp_terms_kernel")) ||
        (st = launched(err, cudaStreamSynchronize(s->stream), "cudaStreamSynchronize")))
        return st;
    if ((st = fp4_comm_all_gather(k->comm, k->d_part, k->d_gath, sizeof(float) * (size_t)cnt, err)))
        return st;
    tp_reduce_kernel<<<(unsigned)((n * w->n_out + 255) / 256), 256, 0, s->stream>>>(k->d_gath, e->n, n,
                                                                                    w->n_out, e->nsb_max, y);
    return launched(err, cudaGetLastError(), "tp_reduce_kernel");
}

extern "C" fp4_status fp4_cu_tp_embed(cu_state *s, const int32_t *d_tok, int64_t n, fp4_error *err) {
    cu_tp_rank *k = s->tp;
    const cu_tp *e = k->e;
    const int64_t H = e->d.arch.hidden;
    fp4_status st;
    if (!k->emb_split) { /* the whole table on every rank */
        st = fp4_cuda_embed(&s->emb, d_tok, n, s->d_x, s->stream);
        return st ? cuda_fail(err, st, e->d.tok_embd->name, "rt.embed", "embedding lookup") : FP4_OK;
    }
    tp_local_tok_kernel<<<(unsigned)((n + 255) / 256), 256, 0, s->stream>>>(d_tok, n, k->p.v0, k->p.v1,
                                                                            k->d_tok);
    if ((st = launched(err, cudaGetLastError(), "tp_local_tok_kernel"))) return st;
    if ((st = fp4_cuda_embed(&s->emb, k->d_tok, n, k->d_emb, s->stream)))
        return cuda_fail(err, st, e->d.tok_embd->name, "rt.embed", "embedding lookup");
    if ((st = launched(err, cudaStreamSynchronize(s->stream), "cudaStreamSynchronize")) ||
        (st = fp4_comm_all_gather(k->comm, k->d_emb, k->d_gath, sizeof(float) * (size_t)(n * H), err)))
        return st;
    tp_pick_rows_kernel<<<(unsigned)((n * H + 255) / 256), 256, 0, s->stream>>>(
        k->d_gath, d_tok, n, H, e->d.arch.vocab, e->n, s->d_x);
    return launched(err, cudaGetLastError(), "tp_pick_rows_kernel");
}

extern "C" void fp4_cu_tp_experts(const cu_tp_rank *k, int64_t E, int64_t *x0, int64_t *x1) {
    *x0 = k ? k->p.e0 : 0, *x1 = k ? k->p.e1 : E;
}

extern "C" fp4_status fp4_cu_tp_moe_pick(cu_state *s, const int32_t *selg, float *y, int64_t pairs,
                                         fp4_error *err) {
    cu_tp_rank *k = s->tp;
    const cu_tp *e = k->e;
    const int64_t H = e->d.arch.hidden;
    fp4_status st;
    if ((st = launched(err, cudaStreamSynchronize(s->stream), "cudaStreamSynchronize")) ||
        (st = fp4_comm_all_gather(k->comm, y, k->d_gath, sizeof(float) * (size_t)(pairs * H), err)))
        return st;
    tp_pick_rows_kernel<<<(unsigned)((pairs * H + 255) / 256), 256, 0, s->stream>>>(
        k->d_gath, selg, pairs, H, e->d.arch.n_experts, e->n, y);
    return launched(err, cudaGetLastError(), "tp_pick_rows_kernel");
}

/* ---- the step ---- */

/* the rank's step: its engine up to the head (o and down through the gathers above), then its
 * vocabulary rows' logits gathered into rank 0's host rows */
static void rank_step(cu_tp_rank *k) {
    cu_tp *e = k->e;
    const int64_t V = e->d.arch.vocab;
    int64_t nw = 0;
    fp4_status st = fp4_cu_step_enqueue(k->s, e->cols, e->ncol, e->logits != NULL, &nw, &k->err);
    if (!st && nw) st = launched(&k->err, cudaStreamSynchronize(k->s->stream), "cudaStreamSynchronize");
    const size_t bytes = sizeof(float) * (size_t)(nw * e->vmax);
    if (!st && nw) st = fp4_comm_all_gather(k->comm, k->s->d_lg, k->d_gath, bytes, &k->err);
    if (!st && nw && k->r == 0) {
        st = launched(&k->err, cudaMemcpy(e->h_gath, k->d_gath, bytes * (size_t)e->n, cudaMemcpyDeviceToHost),
                      "cudaMemcpy(logits)");
        for (int o = 0; o < e->n && !st; o++) {
            const tp_part p = fp4_tp_part(&e->d.arch, o, e->n);
            for (int64_t c = 0; c < nw; c++)
                memcpy(e->logits + c * V + p.v0, e->h_gath + (int64_t)o * nw * e->vmax + c * (p.v1 - p.v0),
                       sizeof(float) * (size_t)(p.v1 - p.v0));
        }
    }
    k->st = st;
    if (st) fp4_comm_abort(k->comm); /* the others must not wait for this rank */
}

static void *rank_thread(void *arg) {
    cu_tp_rank *k = (cu_tp_rank *)arg;
    cu_tp *e = k->e;
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

extern "C" fp4_status fp4_cu_tp_step(void *p, const fp4_rt_col *cols, int64_t n, float *logits,
                                     fp4_error *err) {
    cu_tp *e = (cu_tp *)p;
    if (n <= 0 || n > e->max_cols)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "rt.step", "%lld columns (1..%lld)",
                        (long long)n, (long long)e->max_cols);
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
    const cu_tp_rank *bad = NULL;
    for (int r = 0; r < e->n; r++)
        if (e->rk[r].st && (!bad || !strcmp(bad->err.rule, "comm.aborted"))) bad = &e->rk[r];
    if (!bad) return FP4_OK;
    if (err) *err = bad->err;
    return bad->st;
}

extern "C" fp4_status fp4_cu_tp_step_greedy(void *p, const fp4_rt_col *cols, int64_t n, int32_t *tokens,
                                            fp4_error *err) {
    cu_tp *e = (cu_tp *)p;
    const int64_t V = e->d.arch.vocab;
    int64_t nw = 0;
    for (int64_t c = 0; c < n && cols; c++)
        nw += cols[c].want_logits != 0;
    if (nw > e->lrows)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "rt.step",
                        "%lld columns want logits (at most %lld a step)", (long long)nw, (long long)e->lrows);
    const fp4_status st = fp4_cu_tp_step(p, cols, n, tokens ? e->h_lg : NULL, err);
    for (int64_t k = 0; k < nw && !st; k++) /* a row holding NaN or an infinity: -1 */
        tokens[k] =
            fp4_rt_nonfinite_index(e->h_lg + k * V, V) >= 0 ? -1 : fp4_rt_greedy_argmax(e->h_lg + k * V, V);
    return st;
}

/* [L][pos][NKV·D] host rows <-> each rank's [L][pos][its heads] (the ranks' heads side by side) */
extern "C" fp4_status fp4_cu_tp_kv_copy(void *p, int32_t slot, int64_t n_pos, uint16_t *k, uint16_t *v,
                                        int to_host) {
    cu_tp *e = (cu_tp *)p;
    const fp4_arch *a = &e->d.arch;
    const int64_t D = a->head_dim, kvd = a->n_kv_heads * D, nl = a->n_layers;
    if (slot < 0 || slot >= e->d.n_slots || n_pos < 0 || n_pos > e->d.n_ctx) return FP4_ERR_INVALID_ARG;
    const int64_t rd = (e->rk[0].p.kv1 - e->rk[0].p.kv0) * D;
    uint16_t *tk = (uint16_t *)malloc(sizeof(uint16_t) * (size_t)(nl * n_pos * rd) + 2);
    uint16_t *tv = (uint16_t *)malloc(sizeof(uint16_t) * (size_t)(nl * n_pos * rd) + 2);
    fp4_status st = tk && tv ? FP4_OK : FP4_ERR_NOMEM;
    for (int r = 0; r < e->n && !st; r++) {
        const cu_tp_rank *kr = &e->rk[r];
        for (int pass = 0; pass < 2 && !st; pass++) {
            /* to the host: read the rank's rows, then place them; from it: place, then write */
            if (pass == (to_host ? 0 : 1))
                st = fp4_cu_step_kv(kr->s, slot, n_pos, tk, tv, to_host);
            else
                for (int64_t i = 0; i < nl * n_pos; i++) {
                    uint16_t *kh = k + i * kvd + kr->p.kv0 * D, *vh = v + i * kvd + kr->p.kv0 * D;
                    const size_t b = sizeof(uint16_t) * (size_t)rd;
                    if (to_host)
                        memcpy(kh, tk + i * rd, b), memcpy(vh, tv + i * rd, b);
                    else
                        memcpy(tk + i * rd, kh, b), memcpy(tv + i * rd, vh, b);
                }
        }
    }
    free(tk), free(tv);
    return st;
}

/* ---- creation ---- */

static int64_t imax(int64_t a, int64_t b) {
    return a > b ? a : b;
}

/* the rank's memory plan: the engine's, named for the rank, with the split's buffers */
static void rank_plan(const fp4_rt_mem_plan *plan, void *user) {
    const cu_tp_rank *k = (const cu_tp_rank *)user;
    fp4_rt_mem_plan p = *plan;
    char name[sizeof p.device];
    snprintf(name, sizeof name, "%s", plan->device);
    snprintf(p.device, sizeof p.device, "%.40s (cuda:%d) tp rank %d/%d", name, k->dev, k->r, k->e->n);
    p.scratch_bytes += k->extra_bytes, p.total_bytes += k->extra_bytes;
    if (k->e->d.on_plan) k->e->d.on_plan(&p, k->e->d.plan_user);
}

/* the rank's desc: its heads, KV heads and ffn rows, the shards of every projection and the head */
static fp4_status rank_desc(cu_tp *e, cu_tp_rank *k, fp4_error *err) {
    const fp4_arch *a = &e->d.arch;
    const int64_t D = a->head_dim, nl = a->n_layers, ns = nl * FP4_LW_COUNT_;
    k->lp = (const fp4_tensor **)calloc((size_t)ns, sizeof *k->lp);
    k->lw = (fp4_tensor *)calloc((size_t)ns, sizeof *k->lw);
    k->vec = (const float **)calloc((size_t)ns, sizeof *k->vec);
    k->owned = (uint8_t **)calloc((size_t)(2 * nl), sizeof *k->owned);
    if (!k->lp || !k->lw || !k->vec || !k->owned)
        return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
    fp4_status st = FP4_OK;
    for (int64_t i = 0; i < ns && !st; i++) {
        const int sl = (int)(i % FP4_LW_COUNT_);
        const int64_t L = i / FP4_LW_COUNT_;
        const fp4_tensor *w = e->d.layer[i];
        k->lp[i] = w;
        k->vec[i] = e->d.vec[i];
        if (k->vec[i] && sl == FP4_LW_Q_BIAS) k->vec[i] += k->p.hq0 * D;
        if (k->vec[i] && (sl == FP4_LW_K_BIAS || sl == FP4_LW_V_BIAS)) k->vec[i] += k->p.kv0 * D;
        if (!w) continue;
        fp4_tensor *o = &k->lw[i];
        if (sl == FP4_LW_Q)
            st = fp4_tp_rows(w, k->p.hq0 * D, k->p.hq1 * D, o, err);
        else if (sl == FP4_LW_K || sl == FP4_LW_V)
            st = fp4_tp_rows(w, k->p.kv0 * D, k->p.kv1 * D, o, err);
        else if (sl == FP4_LW_GATE || sl == FP4_LW_UP)
            st = fp4_tp_rows(w, k->p.f0, k->p.f1, o, err);
        else if (sl == FP4_LW_O)
            st = fp4_tp_cols(w, k->p.hq0 * D, k->p.hq1 * D, o, &k->owned[2 * L], err);
        else if (sl == FP4_LW_DOWN)
            st = fp4_tp_cols(w, k->p.f0, k->p.f1, o, &k->owned[2 * L + 1], err);
        else
            continue;
        k->lp[i] = o;
    }
    if (st || (st = fp4_tp_rows(e->d.head, k->p.v0, k->p.v1, &k->head, err))) return st;
    /* a table the step reads on the device (F16, BF16, NVFP4) is split by vocabulary like the head
     * (tied: one shard serves both); the others stay whole (their rows are read on the host) */
    const int te = (int)e->d.tok_embd->type;
    fp4_error ignored;
    k->emb_split = (te == FP4_TYPE_F16 || te == FP4_TYPE_BF16 || te == FP4_TYPE_NVFP4_E2M1) &&
                   fp4_tp_rows(e->d.tok_embd, k->p.v0, k->p.v1, &k->emb, &ignored) == FP4_OK;
    k->d = e->d;
    if (k->emb_split) k->d.tok_embd = &k->emb;
    k->d.tp = 1;
    k->d.device = k->dev;
    k->d.arch.n_heads = k->p.hq1 - k->p.hq0, k->d.arch.n_kv_heads = k->p.kv1 - k->p.kv0;
    k->d.arch.ffn = k->p.f1 - k->p.f0;
    k->d.layer = k->lp;
    k->d.vec = k->vec;
    k->d.head = k->emb_split && e->d.head == e->d.tok_embd ? &k->emb : &k->head;
    k->d.on_plan = rank_plan, k->d.plan_user = k;
    return FP4_OK;
}

/* the rank's engine and the split's device buffers */
static fp4_status rank_create(cu_tp *e, cu_tp_rank *k, fp4_error *err) {
    const int64_t mc = e->max_cols, H = e->d.arch.hidden;
    const int exact = e->d.mode == FP4_MODE_EXACT;
    const uint64_t part = exact ? (uint64_t)(mc * H * e->nsb_max) : 0;
    const int64_t K = e->d.moe ? e->d.arch.n_experts_used : 1; /* the MoE pairs' outputs: mc * K rows */
    const uint64_t gath =
        (uint64_t)e->n * (uint64_t)imax(imax((int64_t)part, e->lrows * e->vmax), mc * K * H);
    const uint64_t qb = exact ? (uint64_t)(mc * e->kmax) : 0,
                   db = exact ? (uint64_t)(mc * (e->kmax / 256)) : 0;
    fp4_status st = rank_desc(e, k, err);
    if (st) return st;
    const uint64_t eb = k->emb_split ? (uint64_t)(mc * H) : 0;
    k->extra_bytes = 4 * (part + gath + db + eb) + qb + (k->emb_split ? 4 * (uint64_t)mc : 0);
    void *s = NULL;
    if ((st = fp4_cu_step_create_as(&k->d, mc, k, &s, err))) return st;
    k->s = (cu_state *)s;
    k->s->tp = k;
    k->s->graphs_off = 1; /* every collective synchronizes the stream: no graph can hold it */
    k->s->act_fuse = 0;   /* down through fp4_cu_tp_row_parallel, never the fused SwiGLU pass */
    /* the native prefill attention's one cuBLAS handle belongs to the device that made it
     * (a16_gemm.cu): across devices the ranks take the pinned kernels */
    if (e->multi_device) k->s->att_gemm = 0;
    cudaError_t ce = cudaSetDevice(k->dev);
    if (ce == cudaSuccess) ce = cudaMalloc((void **)&k->d_gath, 4 * gath + 16);
    if (ce == cudaSuccess && exact) ce = cudaMalloc((void **)&k->d_part, 4 * part + 16);
    if (ce == cudaSuccess && exact) ce = cudaMalloc((void **)&k->d_q, qb + 16);
    if (ce == cudaSuccess && exact) ce = cudaMalloc((void **)&k->d_d, 4 * db + 16);
    if (ce == cudaSuccess && k->emb_split) ce = cudaMalloc((void **)&k->d_emb, 4 * eb + 16);
    if (ce == cudaSuccess && k->emb_split) ce = cudaMalloc((void **)&k->d_tok, 4 * (size_t)mc + 16);
    return ce == cudaSuccess
               ? FP4_OK
               : cuda_fail(err, FP4_CUDA_FAIL(ce, "cudaMalloc"), NULL, "cuda.alloc", "tp buffers");
}

extern "C" void fp4_cu_tp_destroy(void *p) {
    cu_tp *e = (cu_tp *)p;
    if (!e) return;
    pthread_mutex_lock(&e->m);
    e->quit = 1;
    pthread_cond_broadcast(&e->go);
    pthread_mutex_unlock(&e->m);
    for (int r = 0; r < e->n && e->rk; r++) {
        cu_tp_rank *k = &e->rk[r];
        if (k->tid) pthread_join(k->tid, NULL);
        if (k->s) fp4_cu_step_destroy(k->s);
        if (cudaSetDevice(k->dev) == cudaSuccess) {
            if (k->d_gath) cudaFree(k->d_gath);
            if (k->d_part) cudaFree(k->d_part);
            if (k->d_q) cudaFree(k->d_q);
            if (k->d_d) cudaFree(k->d_d);
            if (k->d_emb) cudaFree(k->d_emb);
            if (k->d_tok) cudaFree(k->d_tok);
        }
        for (int64_t i = 0; k->owned && i < 2 * e->d.arch.n_layers; i++)
            free(k->owned[i]);
        free(k->owned), free(k->lp), free(k->lw), free(k->vec);
        if (k->comm) fp4_comm_free(k->comm);
    }
    free(e->rk), free(e->h_gath), free(e->h_lg);
    pthread_mutex_destroy(&e->m);
    pthread_cond_destroy(&e->go), pthread_cond_destroy(&e->done);
    free(e);
}

/* NCCL (FP4LANE_CUDA_TP_NCCL): one rank per GPU (NCCL refuses two ranks of a group on one device),
 * every rank's ncclCommInitRank at once (each blocks until all have joined), so one thread each; the
 * ncclUniqueId through a file of this process (comm_nccl.c), removed once every rank has joined */
typedef struct nccl_init {
    int r, n, dev;
    const char *path;
    fp4_comm *c;
    fp4_status st;
    fp4_error err;
} nccl_init;
static void *nccl_init_rank(void *p) {
    nccl_init *a = (nccl_init *)p;
    a->st = fp4_comm_nccl_create(a->r, a->n, a->dev, a->path, 60.0, &a->c, &a->err);
    return NULL;
}
static fp4_status nccl_group(int n, const int *devs, int count, fp4_comm **c, fp4_error *err) {
    if (count < n)
        return fp4_fail(err, FP4_ERR_REFUSED_ROUTE, NULL, NULL, "tp.nccl-devices",
                        "--tp %d through NCCL needs %d GPUs (one rank each); %d found", n, n, count);
    static int serial;
    char path[96];
    snprintf(path, sizeof path, "/tmp/fp4lane-nccl-%d-%d.id", (int)getpid(),
             __sync_fetch_and_add(&serial, 1));
    nccl_init a[FP4_COMM_MAX_RANKS];
    pthread_t t[FP4_COMM_MAX_RANKS];
    int started = 0;
    for (int r = 0; r < n; r++) {
        a[r] = (nccl_init){r, n, devs[r], path, NULL, FP4_OK, {}};
        if (pthread_create(&t[r], NULL, nccl_init_rank, &a[r])) break;
        started++;
    }
    for (int r = 0; r < started; r++)
        pthread_join(t[r], NULL);
    unlink(path);
    fp4_status st =
        started < n ? fp4_fail(err, FP4_ERR_IO, NULL, NULL, "tp.thread", "cannot start NCCL's init") : FP4_OK;
    for (int r = 0; r < started && !st; r++)
        if (a[r].st) {
            st = a[r].st;
            if (err) *err = a[r].err;
        }
    for (int r = 0; r < started; r++)
        if (st && a[r].c)
            fp4_comm_free(a[r].c);
        else
            c[r] = a[r].c;
    return st;
}

/* the widest row-parallel input of any rank (kmax) and its super-blocks (nsb_max) */
static void widths(cu_tp *e) {
    const fp4_arch *a = &e->d.arch;
    for (int r = 0; r < e->n; r++) {
        const tp_part p = fp4_tp_part(a, r, e->n);
        const int64_t k = imax((p.hq1 - p.hq0) * a->head_dim, p.f1 - p.f0);
        e->kmax = imax(e->kmax, (k + 255) / 256 * 256);
        e->vmax = imax(e->vmax, p.v1 - p.v0);
    }
    e->nsb_max = e->kmax / 256;
}

extern "C" fp4_status fp4_cu_tp_create(const fp4_rt_model_desc *d, int64_t max_cols, void **out,
                                       fp4_error *err) {
    *out = NULL;
    const int n = d->tp;
    fp4_status st = fp4_tp_check(d, n, fp4_cu_step_route, err); /* refusals before anything is allocated */
    if (st) return st;
    if (d->moe && d->arch.n_experts < n) /* a rank with no expert has no expert table */
        return fp4_fail(err, FP4_ERR_REFUSED_ROUTE, NULL, NULL, "tp.moe-cuda",
                        "--tp %d on cuda: %lld experts, fewer than the ranks; use --tp %lld or less, or "
                        "--device cpu",
                        n, (long long)d->arch.n_experts, (long long)d->arch.n_experts);
    int count = 0;
    const cudaError_t ce = cudaGetDeviceCount(&count);
    if (ce != cudaSuccess || count < 1)
        return fp4_fail(err, FP4_ERR_NO_DEVICE, NULL, NULL, "cuda.device", "no CUDA device for the split");
    fp4_cu_env env;
    fp4_cu_env_read(&env);
    cu_tp *e = (cu_tp *)calloc(1, sizeof *e);
    if (!e) return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
    pthread_mutex_init(&e->m, NULL);
    pthread_cond_init(&e->go, NULL), pthread_cond_init(&e->done, NULL);
    e->is_tp = 1;
    e->d = *d, e->n = n, e->max_cols = max_cols;
    e->lrows = d->max_logit_cols >= 1 && d->max_logit_cols <= max_cols ? d->max_logit_cols : max_cols;
    widths(e);
    const int64_t H = d->arch.hidden;
    const size_t cb =
        sizeof(float) * (size_t)imax(imax(max_cols * H * (d->mode == FP4_MODE_EXACT ? e->nsb_max : 1),
                                          max_cols * H * (d->moe ? d->arch.n_experts_used : 1)),
                                     e->lrows * e->vmax);
    e->rk = (cu_tp_rank *)calloc((size_t)n, sizeof *e->rk);
    e->h_gath = (float *)malloc(sizeof(float) * (size_t)(n * e->lrows * e->vmax));
    e->h_lg = (float *)malloc(sizeof(float) * (size_t)(e->lrows * d->arch.vocab));
    fp4_comm *c[FP4_COMM_MAX_RANKS];
    int devs[FP4_COMM_MAX_RANKS];
    for (int r = 0; r < n; r++)
        devs[r] = (d->device + r) % count, e->multi_device |= devs[r] != devs[0];
    if (!e->rk || !e->h_gath || !e->h_lg)
        st = fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
    else if (env.tp_nccl)
        st = nccl_group(n, devs, count, c, err);
    else
        st = fp4_comm_cuda_local_create(n, devs, cb, c, err);
    for (int r = 0; r < n && !st; r++) /* every rank owns its communicator before any can fail */
        e->rk[r].comm = c[r];
    for (int r = 0; r < n && !st; r++) {
        cu_tp_rank *k = &e->rk[r];
        k->e = e, k->r = r, k->dev = devs[r], k->p = fp4_tp_part(&d->arch, r, n);
        st = rank_create(e, k, err);
    }
    for (int r = 1; r < n && !st; r++)
        if (pthread_create(&e->rk[r].tid, NULL, rank_thread, &e->rk[r]))
            st = fp4_fail(err, FP4_ERR_IO, NULL, NULL, "tp.thread", "cannot start rank %d's thread", r);
    if (st) {
        fp4_cu_tp_destroy(e);
        return st;
    }
    *out = e;
    return FP4_OK;
}
