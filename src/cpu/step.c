/* step.c — the CPU backend: THE STEP of backend.h over a batch of columns, projections through
 * fp4_cpu_project (the dispatch table, rows over threads), every other operation from pinned.h.
 * Threads split rows of a projection and (column, head) pairs of attention; no value depends on
 * how work is split, so exact mode gives the same bits for any thread count. */
#include "format/pinned.h"
#include "cpu/cpu_impl.h"
#include "cpu/mla.h"
#include "backend/backend.h"
#include <stdlib.h>
#include <string.h>

typedef struct cpu_state {
    fp4_rt_model_desc d;
    const fp4_tensor **layer; /* n_layers * FP4_LW_COUNT_                              */
    fp4_kv_pages kv;          /* paged: the slots' K/V rows (kv_pages.c), addressed below    */
    fp4_kv_rows kr;           /* a ring model's rows per layer (kv_rows.c)                  */
    int ring;                 /* some layer keeps a ring: rows [slot][layer][row][NKV*D]; else
                               * [slot][pos][layer][NKV*D], committed as positions grow      */
    int64_t max_cols;
    float *x, *h, *q, *k, *v, *o, *t, *g, *u; /* scratch, max_cols columns each                 */
    /* mixture of experts (d.moe): router logits [col][E], the choices [col][K] (expert, weight),
     * the gathered inputs of one expert and their outputs [col][K][H] */
    float *rl, *rw, *rs, *gh, *eo;
    int *ri, *rg;
    int64_t *gc;
    float *sh;        /* shared experts' output [col][H] (DeepSeek-V3)                           */
    fp4_cpu_mla *mla; /* latent attention (its rows live in kv)                                  */
} cpu_state;

static const char *cpu_route(const fp4_tensor *w, fp4_mode mode) {
    const char *n = fp4_cpu_route_name(w, mode);
    return strcmp(n, "none") ? n : NULL;
}

static void cpu_destroy(void *p) {
    cpu_state *s = p;
    if (!s) return;
    free(s->layer);
    fp4_kv_pages_free(&s->kv);
    fp4_kv_rows_free(&s->kr);
    free(s->x), free(s->h), free(s->q), free(s->k), free(s->v), free(s->o), free(s->t), free(s->g),
        free(s->u);
    free(s->rl), free(s->rw), free(s->rs), free(s->gh), free(s->eo), free(s->ri), free(s->gc);
    free(s->rg), free(s->sh);
    fp4_cpu_mla_destroy(s->mla);
    free(s);
}

static float *falloc(int64_t n) {
    return n > 0 && (uint64_t)n < (SIZE_MAX / 4) ? malloc((size_t)n * sizeof(float)) : NULL;
}

static fp4_status cpu_create(const fp4_rt_model_desc *d, int64_t max_cols, void **out, fp4_error *err) {
    *out = NULL;
    const fp4_arch *a = &d->arch;
    cpu_state *s = calloc(1, sizeof *s);
    if (!s) return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
    s->d = *d;
    s->max_cols = max_cols;
    const int64_t nl = a->n_layers, nslot = nl * FP4_LW_COUNT_;
    s->layer = malloc(sizeof *s->layer * (size_t)nslot);
    if (s->layer) memcpy(s->layer, d->layer, sizeof *s->layer * (size_t)nslot);
    /* latent attention (mla.c): the pages hold its latent rows (fp4_arch_kv_dim halves in K, the
     * rest in V), and the step's k, v scratch is unused */
    const int mla = a->kv_lora_rank > 0;
    const int64_t kvd = mla ? 1 : a->n_kv_heads * a->head_dim, qd = a->n_heads * a->head_dim,
                  kvc = fp4_arch_kv_dim(a);
    uint64_t kvn;
    fp4_status kst = FP4_ERR_OVERFLOW;
    if (fp4_kv_rows_init(&s->kr, a, d->n_ctx, max_cols)) {
        cpu_destroy(s);
        return fp4_fail(err, FP4_ERR_OVERFLOW, NULL, NULL, "rt.kv", "KV cache size overflows");
    }
    for (int64_t L = 0; L < nl; L++)
        if (s->kr.ring[L]) s->ring = 1;
    /* a ring model's slot is one run of rows committed whole (its rows are not in position order) */
    const int64_t kv_rows = s->ring ? s->kr.stride : d->n_ctx, kv_width = s->ring ? kvc : nl * kvc;
    if (__builtin_mul_overflow((uint64_t)d->n_slots * (uint64_t)kv_rows, (uint64_t)kv_width, &kvn) ||
        kvn > (SIZE_MAX / 2) || (kst = fp4_kv_pages_init(&s->kv, d->n_slots, kv_rows, kv_width))) {
        cpu_destroy(s);
        return kst == FP4_ERR_NOMEM
                   ? fp4_fail(err, kst, NULL, NULL, "alloc", "cannot reserve the KV cache")
                   : fp4_fail(err, FP4_ERR_OVERFLOW, NULL, NULL, "rt.kv", "KV cache size overflows");
    }
    const int64_t wide = a->hidden > qd ? a->hidden : qd;
    s->x = falloc(max_cols * a->hidden), s->h = falloc(max_cols * wide), s->q = falloc(max_cols * qd);
    s->k = falloc(max_cols * kvd), s->v = falloc(max_cols * kvd), s->o = falloc(max_cols * qd);
    s->t = falloc(max_cols * a->hidden);
    const int64_t FS = a->n_shared_experts * a->moe_ffn, F0 = a->ffn > a->moe_ffn ? a->ffn : a->moe_ffn;
    const int64_t F = F0 > FS ? F0 : FS;
    s->g = falloc(max_cols * F), s->u = falloc(max_cols * F);
    int moe_ok = 1;
    if (d->moe) {
        const int64_t E = a->n_experts, K = a->n_experts_used;
        s->rl = falloc(max_cols * E), s->rs = falloc(2 * E + a->moe_n_group), s->rw = falloc(max_cols * K);
        s->rg = malloc(sizeof(int) * (size_t)(a->moe_topk_group + 1));
        s->sh = FS ? falloc(max_cols * a->hidden) : NULL;
        s->gh = falloc(max_cols * a->hidden), s->eo = falloc(max_cols * K * a->hidden);
        s->ri = malloc(sizeof(int) * (size_t)(max_cols * K));
        s->gc = malloc(sizeof(int64_t) * (size_t)max_cols);
        moe_ok = s->rl && s->rs && s->rw && s->gh && s->eo && s->ri && s->gc && s->rg && (s->sh || !FS);
    }
    if (!s->layer || !s->x || !s->h || !s->q || !s->k || !s->v || !s->o || !s->t ||
        !s->g || !s->u || !moe_ok) {
        cpu_destroy(s);
        return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory (KV cache %llu halves)",
                        (unsigned long long)(2 * kvn));
    }
    fp4_status st = mla ? fp4_cpu_mla_create(&s->d, &s->kv, max_cols, &s->mla, err) : FP4_OK;
    if (st) {
        cpu_destroy(s);
        return st;
    }
    *out = s;
    return FP4_OK;
}

static fp4_status proj(const cpu_state *s, const fp4_tensor *w, const float *x, int64_t n, float *y,
                       fp4_error *err) {
    fp4_status st = fp4_cpu_project(w, s->d.mode, x, n, y, s->d.n_threads);
    if (st)
        return fp4_fail(err, st, NULL, w->name, "rt.project", "projection failed on route %s",
                        fp4_cpu_route_name(w, s->d.mode));
    return FP4_OK;
}

static uint16_t *kv_at(const cpu_state *s, uint8_t *base, int32_t slot, int64_t layer, int64_t pos) {
    return fp4_kv_pages_at(&s->kv, base, slot, layer, fp4_arch_kv_dim(&s->d.arch), pos);
}
/* a ring model's slot: its first row (its layers' rows follow: kv_rows.c) */
static uint16_t *kv_slot(const cpu_state *s, uint8_t *base, int32_t slot) {
    return fp4_kv_pages_at(&s->kv, base, slot, 0, 0, 0);
}
/* the committed rows that hold positions [0, n_pos) */
static int64_t kv_need(const cpu_state *s, int64_t n_pos) {
    return n_pos > 0 && s->ring ? s->kr.stride : n_pos;
}

/* ---- attention over (column, head) pairs, split over threads ---- */
typedef struct att_ctx {
    const cpu_state *s;
    const fp4_rt_col *cols;
    int64_t layer;
    fp4_status st;
} att_ctx;

/* fp4p_attend of query heads hq0 .. hq0 + nh - 1 of one column on each CPU path (cpu_path.c;
 * src/cpu/attend_heads_x86.c, attend_heads_avx2.c): the same bits. AVX-512 and AVX2 walk the
 * positions once for all the heads (their K/V row segments are contiguous); portable head by head. */
typedef void (*attend_fn)(const float *q, const uint16_t *k0, const uint16_t *v0, int64_t row_stride,
                          int64_t n, int head_dim, int64_t hq0, int nh, int group, float scale, float *s,
                          float *P, float *o);
static const attend_fn attend_path[FP4_CPU_N_PATHS] = {[FP4_CPU_PORTABLE] = fp4_attend_heads_portable,
                                                       [FP4_CPU_AVX2] = fp4_attend_heads_avx2,
                                                       [FP4_CPU_AVX512] = fp4_attend_heads_avx512};

/* rows r = col * NH + hq, r0 .. r1: each column's run of heads in calls of at most
 * FP4_ATTEND_MAX_HEADS */
static void att_rows(void *p, int64_t r0, int64_t r1) {
    att_ctx *c = p;
    const attend_fn attend = attend_path[fp4_cpu_path()];
    const cpu_state *s = c->s;
    const fp4_arch *a = &s->d.arch;
    const int64_t D = a->head_dim, NH = a->n_heads, G = a->n_heads / a->n_kv_heads, kvd = a->n_kv_heads * D;
    const int64_t hb = r1 - r0 < FP4_ATTEND_MAX_HEADS ? r1 - r0 : FP4_ATTEND_MAX_HEADS;
    float *sc = falloc(s->d.n_ctx * hb), *P = falloc(FP4P_LANES * D * hb);
    if (!sc || !P) {
        free(sc), free(P);
        __atomic_store_n(&c->st, FP4_ERR_NOMEM, __ATOMIC_RELAXED);
        return;
    }
    for (int64_t r = r0; r < r1;) {
        const int64_t col = r / NH, hq = r % NH;
        int64_t nh = NH - hq < r1 - r ? NH - hq : r1 - r;
        if (nh > hb) nh = hb;
        const fp4_rt_col *cc = &c->cols[col];
        const uint16_t *k0, *v0;
        int64_t stride = s->kv.row, npos = cc->pos + 1;
        if (s->ring) { /* the positions this column attends to, in order (a window: kv_rows.c) */
            int64_t row0;
            fp4_kv_window(&s->kr, a, c->layer, cc->pos, &row0, &npos);
            k0 = kv_slot(s, s->kv.k, cc->slot) + row0 * kvd;
            v0 = kv_slot(s, s->kv.v, cc->slot) + row0 * kvd;
            stride = kvd;
        } else { /* positions in order; a local layer's window when no ring holds it (a short n_ctx) */
            const int64_t first = fp4_arch_layer_local(a, c->layer) && cc->pos >= a->sliding_window
                                      ? cc->pos - a->sliding_window + 1
                                      : 0;
            k0 = kv_at(s, s->kv.k, cc->slot, c->layer, first);
            v0 = kv_at(s, s->kv.v, cc->slot, c->layer, first);
            npos = cc->pos - first + 1;
        }
        attend(s->q + col * NH * D + hq * D, k0, v0, stride, npos, (int)D, hq, (int)nh, (int)G,
               s->d.attn_scale, sc, P, s->o + col * NH * D + hq * D);
        r += nh;
    }
    free(sc), free(P);
}

/* g = fp4p_swiglu(g, u) element-wise on each CPU path (src/cpu/pinned_x86.c): the same bits; a
 * prefill's n * F values in chunks over the threads */
typedef void (*swiglu_fn)(float *g, const float *u, int64_t n);
static void swiglu_portable(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        g[i] = fp4p_swiglu(g[i], u[i]);
}
static const swiglu_fn swiglu_path[FP4_CPU_N_PATHS] = {[FP4_CPU_PORTABLE] = swiglu_portable,
                                                       [FP4_CPU_AVX2] = fp4_swiglu_avx2,
                                                       [FP4_CPU_AVX512] = fp4_swiglu_avx512};
enum { SWIGLU_CHUNK = 4096 };
typedef struct swiglu_ctx {
    float *g;
    const float *u;
    int64_t n;
} swiglu_ctx;
static void swiglu_rows(void *p, int64_t r0, int64_t r1) {
    const swiglu_ctx *c = p;
    const int64_t i0 = r0 * SWIGLU_CHUNK, i1 = r1 * SWIGLU_CHUNK < c->n ? r1 * SWIGLU_CHUNK : c->n;
    swiglu_path[fp4_cpu_path()](c->g + i0, c->u + i0, i1 - i0);
}

/* llama.cpp's converter order -> HF order, per head: out[j*D/2 + i] = in[2i + j] */
static void unpermute(float *x, int64_t n_heads, int64_t D) {
    float tmp[FP4_ARCH_MAX_HEAD_DIM];
    for (int64_t h = 0; h < n_heads; h++) {
        float *v = x + h * D;
        for (int64_t i = 0; i < D / 2; i++)
            tmp[i] = v[2 * i], tmp[D / 2 + i] = v[2 * i + 1];
        memcpy(v, tmp, sizeof(float) * (size_t)D);
    }
}

static fp4_status swiglu(cpu_state *s, int64_t nv, fp4_error *err) {
    swiglu_ctx sc = {s->g, s->u, nv};
    const int64_t sw_chunks = (nv + SWIGLU_CHUNK - 1) / SWIGLU_CHUNK;
    const int sw_threads = nv >= 16 * SWIGLU_CHUNK ? s->d.n_threads : 1;
    fp4_status st = fp4_parallel_rows(sw_chunks, sw_threads, swiglu_rows, &sc);
    return st ? fp4_fail(err, st, NULL, NULL, "rt.swiglu", "SwiGLU failed") : FP4_OK;
}

/* DeepSeek-V3's shared experts: one SwiGLU MLP of n_shared * moe_ffn over every column -> s->sh */
static fp4_status shared_experts(cpu_state *s, int64_t L, int64_t n, fp4_error *err) {
    const fp4_tensor *const *w = s->layer + L * FP4_LW_COUNT_;
    const int64_t FS = s->d.arch.n_shared_experts * s->d.arch.moe_ffn;
    fp4_status st;
    if ((st = proj(s, w[FP4_LW_SH_GATE], s->h, n, s->g, err)) ||
        (st = proj(s, w[FP4_LW_SH_UP], s->h, n, s->u, err)) || (st = swiglu(s, n * FS, err)))
        return st;
    return proj(s, w[FP4_LW_SH_DOWN], s->g, n, s->sh, err);
}

/* THE STEP's k'..m' (backend.h): the router, each column's K experts (fp4p_moe_route), then expert
 * by expert the columns that chose it, gathered in column order into one multi-column project (the
 * expert's weights read once per step), each output row kept at its (column, choice), and last
 * the combine in selection order. s->h holds the ffn-normed inputs. */
static fp4_status moe_step(cpu_state *s, int64_t L, int64_t n, fp4_error *err) {
    const fp4_arch *a = &s->d.arch;
    const int64_t H = a->hidden, E = a->n_experts, FE = a->moe_ffn;
    const int K = (int)a->n_experts_used;
    const fp4_tensor *const *mw = s->d.moe + L * FP4_MOE_STRIDE(E);
    fp4_status st;
    if ((st = proj(s, mw[FP4_MOE_ROUTER], s->h, n, s->rl, err))) return st;
    for (int64_t c = 0; c < n && a->moe_routing != FP4_MOE_SIGMOID_GROUP; c++)
        fp4p_moe_route(s->rl + c * E, E, K, a->moe_routing, a->moe_norm_topk, s->rs, s->ri + c * K,
                       s->rw + c * K);
    for (int64_t c = 0; c < n && a->moe_routing == FP4_MOE_SIGMOID_GROUP; c++)
        fp4p_moe_route_group(s->rl + c * E, s->d.vec[L * FP4_LW_COUNT_ + FP4_LW_EXP_BIAS], E, K,
                             a->moe_n_group, a->moe_topk_group, a->moe_norm_topk, (float)a->routed_scaling,
                             s->rs, s->rg, s->ri + c * K, s->rw + c * K);
    if (s->sh && (st = shared_experts(s, L, n, err))) return st;
    for (int64_t e = 0; e < E; e++) {
        int64_t m = 0;
        for (int64_t c = 0; c < n; c++)
            for (int j = 0; j < K; j++)
                if (s->ri[c * K + j] == (int)e) {
                    memcpy(s->gh + m * H, s->h + c * H, sizeof(float) * (size_t)H);
                    s->gc[m++] = c * K + j;
                }
        if (!m) continue; /* no column chose it: its weights are not read */
        if ((st = proj(s, mw[FP4_MOE_AT(e, FP4_MOE_GATE)], s->gh, m, s->g, err)) ||
            (st = proj(s, mw[FP4_MOE_AT(e, FP4_MOE_UP)], s->gh, m, s->u, err)) ||
            (st = swiglu(s, m * FE, err)) ||
            (st = proj(s, mw[FP4_MOE_AT(e, FP4_MOE_DOWN)], s->g, m, s->gh, err)))
            return st;
        for (int64_t i = 0; i < m; i++)
            memcpy(s->eo + s->gc[i] * H, s->gh + i * H, sizeof(float) * (size_t)H);
    }
    for (int64_t c = 0; c < n; c++)
        for (int64_t i = 0; i < H; i++) {
            float y = fp4p_moe_combine(s->rw + c * K, s->eo + c * K * H, K, H, i);
            if (s->sh) y = fp4p_add(y, s->sh[c * H + i]); /* DeepSeek: routed + shared, then the residual */
            s->x[c * H + i] = fp4p_add(s->x[c * H + i], y);
        }
    return FP4_OK;
}

/* THE STEP's b..i before the residual add: s->h (attn-normed) -> s->t */
static fp4_status gqa_attention(cpu_state *s, int64_t L, const fp4_rt_col *cols, int64_t n, fp4_error *err) {
    const fp4_arch *a = &s->d.arch;
    const int64_t D = a->head_dim, NH = a->n_heads, NKV = a->n_kv_heads;
    const int64_t qd = NH * D, kvd = NKV * D, half = D / 2;
    const fp4_tensor *const *w = s->layer + L * FP4_LW_COUNT_;
    const float *const *vw = s->d.vec + L * FP4_LW_COUNT_;
    fp4_status st;
    if ((st = proj(s, w[FP4_LW_Q], s->h, n, s->q, err)) || (st = proj(s, w[FP4_LW_K], s->h, n, s->k, err)) ||
        (st = proj(s, w[FP4_LW_V], s->h, n, s->v, err)))
        return st;
    for (int64_t c = 0; c < n; c++) {
        float *q = s->q + c * qd, *k = s->k + c * kvd, *v = s->v + c * kvd;
        if (a->qkv_bias) {
            for (int64_t i = 0; i < qd; i++)
                q[i] = fp4p_add(q[i], vw[FP4_LW_Q_BIAS][i]);
            for (int64_t i = 0; i < kvd; i++)
                k[i] = fp4p_add(k[i], vw[FP4_LW_K_BIAS][i]);
            for (int64_t i = 0; i < kvd; i++)
                v[i] = fp4p_add(v[i], vw[FP4_LW_V_BIAS][i]);
        }
        if (a->qk_permuted) unpermute(q, NH, D), unpermute(k, NKV, D);
        if (a->qk_norm) {
            for (int64_t h = 0; h < NH; h++)
                fp4p_rmsnorm(q + h * D, vw[FP4_LW_Q_NORM], D, a->rms_eps, q + h * D);
            for (int64_t h = 0; h < NKV; h++)
                fp4p_rmsnorm(k + h * D, vw[FP4_LW_K_NORM], D, a->rms_eps, k + h * D);
        }
        const int local = fp4_arch_layer_local(a, L); /* Gemma 3: its own rope base */
        const float *cs = (local ? s->d.rope_cos_local : s->d.rope_cos) + cols[c].pos * half,
                    *sn = (local ? s->d.rope_sin_local : s->d.rope_sin) + cols[c].pos * half;
        for (int64_t h = 0; h < NH; h++)
            fp4p_rope(q + h * D, cs, sn, (int)half);
        for (int64_t h = 0; h < NKV; h++)
            fp4p_rope(k + h * D, cs, sn, (int)half);
        if (!s->ring) {
            uint16_t *kd = kv_at(s, s->kv.k, cols[c].slot, L, cols[c].pos),
                     *vd = kv_at(s, s->kv.v, cols[c].slot, L, cols[c].pos);
            for (int64_t i = 0; i < kvd; i++)
                kd[i] = fp4p_f32_to_f16(k[i]), vd[i] = fp4p_f32_to_f16(v[i]);
            continue;
        }
        uint16_t kh[FP4_ARCH_MAX_HEAD_DIM], vh[FP4_ARCH_MAX_HEAD_DIM];
        for (int64_t i0 = 0; i0 < kvd; i0 += D) { /* a head at a time into the row's place(s) */
            for (int64_t i = 0; i < D; i++)
                kh[i] = fp4p_f32_to_f16(k[i0 + i]), vh[i] = fp4p_f32_to_f16(v[i0 + i]);
            fp4_kv_put(&s->kr, L, cols[c].pos, kv_slot(s, s->kv.k, cols[c].slot), kvd, i0, kh, D);
            fp4_kv_put(&s->kr, L, cols[c].pos, kv_slot(s, s->kv.v, cols[c].slot), kvd, i0, vh, D);
        }
    }
    att_ctx ac = {s, cols, L, FP4_OK};
    st = fp4_parallel_rows(n * NH, s->d.n_threads, att_rows, &ac);
    if (st || ac.st) return fp4_fail(err, st ? st : ac.st, NULL, NULL, "rt.attention", "attention failed");
    return proj(s, w[FP4_LW_O], s->o, n, s->t, err);
}

static fp4_status layer_step(cpu_state *s, int64_t L, const fp4_rt_col *cols, int64_t n, fp4_error *err) {
    const fp4_arch *a = &s->d.arch;
    const int64_t H = a->hidden, F = a->ffn;
    const fp4_tensor *const *w = s->layer + L * FP4_LW_COUNT_;
    const float *const *vw = s->d.vec + L * FP4_LW_COUNT_;
    fp4_status st;
    for (int64_t c = 0; c < n; c++)
        fp4p_rmsnorm(s->x + c * H, vw[FP4_LW_ATTN_NORM], H, a->rms_eps, s->h + c * H);
    st = s->mla ? fp4_cpu_mla_attend(s->mla, L, cols, n, s->h, s->t, err) : gqa_attention(s, L, cols, n, err);
    if (st) return st;
    if (vw[FP4_LW_ATTN_POST_NORM])
        fp4_cpu_post_norm_add(s->x, s->t, vw[FP4_LW_ATTN_POST_NORM], n, H, a->rms_eps);
    else
        for (int64_t i = 0; i < n * H; i++)
            s->x[i] = fp4p_add(s->x[i], s->t[i]);
    for (int64_t c = 0; c < n; c++)
        fp4p_rmsnorm(s->x + c * H, vw[FP4_LW_FFN_NORM], H, a->rms_eps, s->h + c * H);
    if (s->d.moe && s->d.moe[L * FP4_MOE_STRIDE(a->n_experts)]) return moe_step(s, L, n, err);
    if ((st = proj(s, w[FP4_LW_GATE], s->h, n, s->g, err)) ||
        (st = proj(s, w[FP4_LW_UP], s->h, n, s->u, err)))
        return st;
    if (a->hidden_act == FP4_ACT_GELU_TANH && (st = fp4_cpu_geglu(s->g, s->u, n * F, s->d.n_threads)))
        return fp4_fail(err, st, NULL, NULL, "rt.geglu", "GeGLU failed");
    if (a->hidden_act != FP4_ACT_GELU_TANH && (st = swiglu(s, n * F, err))) return st;
    if ((st = proj(s, w[FP4_LW_DOWN], s->g, n, s->t, err))) return st;
    if (vw[FP4_LW_FFN_POST_NORM])
        fp4_cpu_post_norm_add(s->x, s->t, vw[FP4_LW_FFN_POST_NORM], n, H, a->rms_eps);
    else
        for (int64_t i = 0; i < n * H; i++)
            s->x[i] = fp4p_add(s->x[i], s->t[i]);
    return FP4_OK;
}

static fp4_status cpu_step(void *p, const fp4_rt_col *cols, int64_t n, float *logits, fp4_error *err) {
    cpu_state *s = p;
    const fp4_arch *a = &s->d.arch;
    const int64_t H = a->hidden;
    if (n <= 0 || n > s->max_cols)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "rt.step", "%lld columns (1..%lld)",
                        (long long)n, (long long)s->max_cols);
    for (int64_t c = 0; c < n; c++) {
        if (cols[c].token < 0 || cols[c].token >= a->vocab || cols[c].slot < 0 ||
            cols[c].slot >= s->d.n_slots || cols[c].pos < 0 || cols[c].pos >= s->d.n_ctx)
            return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "rt.step",
                            "column %lld: token %d slot %d position %lld out of range", (long long)c,
                            cols[c].token, cols[c].slot, (long long)cols[c].pos);
        fp4_status st = fp4_kv_pages_commit(&s->kv, cols[c].slot, kv_need(s, cols[c].pos + 1));
        if (st)
            return fp4_fail(err, st, NULL, NULL, "rt.kv-commit",
                            "slot %d: the system refused the KV block of position %lld", cols[c].slot,
                            (long long)cols[c].pos);
        st =
            fp4_tensor_dequant_rows(s->d.tok_embd, cols[c].token, cols[c].token + 1, s->x + c * H);
        if (st)
            return fp4_fail(err, st, NULL, s->d.tok_embd->name, "rt.embed", "cannot read embedding row %d",
                            cols[c].token);
    }
    if (a->embed_scale) fp4_cpu_embed_scale(a, s->d.tok_embd, s->x, n);
    for (int64_t L = 0; L < a->n_layers; L++) {
        fp4_status st = layer_step(s, L, cols, n, err);
        if (st) return st;
    }
    int64_t nw = 0;
    for (int64_t c = 0; c < n; c++)
        if (cols[c].want_logits)
            fp4p_rmsnorm(s->x + c * H, s->d.out_norm_f32, H, a->rms_eps, s->h + nw++ * H);
    if (!nw) return FP4_OK;
    if (!logits)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "rt.step", "logits wanted but no buffer given");
    fp4_status st = proj(s, s->d.head, s->h, nw, logits, err);
    if (!st && a->final_softcap > 0) fp4_cpu_softcap(logits, nw * a->vocab, a->final_softcap);
    return st;
}

static fp4_status kv_copy(cpu_state *s, int32_t slot, int64_t n_pos, uint16_t *k, uint16_t *v, int to_host) {
    const fp4_arch *a = &s->d.arch;
    const int64_t kvd = fp4_arch_kv_dim(a); /* latent attention: its rows as they are in the pages */
    if (slot < 0 || slot >= s->d.n_slots || n_pos < 0 || n_pos > s->d.n_ctx) return FP4_ERR_INVALID_ARG;
    if (to_host && kv_need(s, n_pos) > s->kv.committed[slot] * s->kv.block) return FP4_ERR_INVALID_ARG;
    if (!to_host && fp4_kv_pages_commit(&s->kv, slot, kv_need(s, n_pos))) return FP4_ERR_NOMEM;
    if (s->ring) {
        fp4_kv_copy(&s->kr, a, kv_slot(s, s->kv.k, slot), n_pos, kvd, k, to_host);
        fp4_kv_copy(&s->kr, a, kv_slot(s, s->kv.v, slot), n_pos, kvd, v, to_host);
        return FP4_OK;
    }
    const size_t bytes = sizeof(uint16_t) * (size_t)kvd;
    for (int64_t L = 0; L < a->n_layers; L++)
        for (int64_t p = 0; p < n_pos; p++) {
            uint16_t *kc = kv_at(s, s->kv.k, slot, L, p), *vc = kv_at(s, s->kv.v, slot, L, p);
            uint16_t *kh = k + (L * n_pos + p) * kvd, *vh = v + (L * n_pos + p) * kvd;
            if (to_host)
                memcpy(kh, kc, bytes), memcpy(vh, vc, bytes);
            else
                memcpy(kc, kh, bytes), memcpy(vc, vh, bytes);
        }
    return FP4_OK;
}
static fp4_status cpu_kv_read(void *p, int32_t slot, int64_t n_pos, uint16_t *k, uint16_t *v) {
    return kv_copy(p, slot, n_pos, k, v, 1);
}
static fp4_status cpu_kv_write(void *p, int32_t slot, int64_t n_pos, const uint16_t *k, const uint16_t *v) {
    return kv_copy(p, slot, n_pos, (uint16_t *)k, (uint16_t *)v, 0);
}
static void cpu_kv_trim(void *p, int32_t slot, int64_t n_pos) {
    cpu_state *s = p;
    fp4_kv_pages_trim(&s->kv, slot, kv_need(s, n_pos));
}
static int64_t cpu_kv_blocks(void *p, int64_t *used) {
    const cpu_state *s = p;
    if (used) *used = fp4_kv_pages_used(&s->kv);
    return s->kv.block;
}

static const fp4_rt_backend_ops cpu_ops = {
    FP4_RT_BACKEND_ABI, "cpu", cpu_route, cpu_create, cpu_destroy, cpu_step, cpu_kv_read, cpu_kv_write,
    NULL, /* step_cols: the runtime's 64 */
    NULL, /* step_greedy: the runtime's host argmax of step's logits */
    cpu_kv_trim, cpu_kv_blocks,
};

const fp4_rt_backend_ops *fp4_rt_cpu_backend(void) {
    return &cpu_ops;
}
