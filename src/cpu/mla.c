/* mla.c — DeepSeek-V3's multi-head latent attention on the CPU, in the absorbed form for every
 * column (prefill and decode alike, so a prompt's bits do not depend on how it is chunked).
 *
 * The cache holds per token and layer one row of kv_lora_rank + qk_rope_dim halves: the normed
 * latent c and the roped shared key k_pe. kv_b_proj's rows of head h are W_UK_h (qk_nope_dim rows)
 * then W_UV_h (v_head_dim rows), each over the latent. Since q_nope·(W_UK_h c) = (W_UK_h^T q_nope)·c,
 * a head attends over the cached rows with the query [W_UK_h^T q_nope, q_pe] and reads its value
 * as W_UV_h (Σ_j p_j c_j): an MQA over the latent (backend.h, THE STEP, latent attention). kv_b is
 * widened to f32 once at create (its dequantization is exact) and kept with W_UK transposed.
 *
 * The rows live in the CPU backend's paged cache (kv_pages.c, committed and trimmed by step.c like
 * any model's): per position and layer fp4_arch_kv_dim halves in K holding the row's first half,
 * as many in V holding the rest (zero-padded), the layout of the backend's kv_read / kv_write. */
#include "format/pinned.h"
#include "cpu/cpu_impl.h"
#include "cpu/mla.h"
#include "backend/backend.h"
#include <stdlib.h>
#include <string.h>

#define MLA_NORM_EPS 1e-6f /* transformers' q_a_layernorm / kv_a_layernorm: DeepseekV3RMSNorm(n) */

struct fp4_cpu_mla {
    const fp4_rt_model_desc *d;
    const fp4_kv_pages *kv;                     /* the rows: step.c's pages                       */
    int64_t max_cols, R, dr, dn, dv, NH, QL, W; /* W = R + dr: one cache row                      */
    int64_t kd;                                 /* its halves in K (fp4_arch_kv_dim), the rest in V */
    float **kvb, **uk_t;                        /* per layer: kv_b f32 [NH (dn+dv)][R]; [NH][R][dn] */
    float *qa, *q, *kva, *o;                    /* scratch, max_cols columns each                 */
};

void fp4_cpu_mla_destroy(fp4_cpu_mla *m) {
    if (!m) return;
    for (int64_t L = 0; m->kvb && L < m->d->arch.n_layers; L++)
        free(m->kvb[L]), free(m->uk_t[L]);
    free(m->kvb), free(m->uk_t), free(m->qa), free(m->q), free(m->kva), free(m->o);
    free(m);
}

static float *mla_falloc(int64_t n) {
    return n > 0 && (uint64_t)n < SIZE_MAX / 8 ? malloc((size_t)n * sizeof(float)) : NULL;
}

/* kv_b of one layer widened: kvb [NH (dn+dv)][R] (its W_UV rows read) and uk_t [NH][R][dn]; from
 * kv_b_proj, or from llama.cpp's split attn_k_b (ne [dn, R, NH]: uk_t as it is) and attn_v_b (ne
 * [R, dv, NH]: the W_UV rows) */
static fp4_status widen_kvb(fp4_cpu_mla *m, const fp4_tensor *const *w, int64_t L, int64_t rows,
                            fp4_error *err) {
    const int64_t R = m->R, dn = m->dn, dv = m->dv, NH = m->NH;
    float *kv = m->kvb[L] = calloc((size_t)(rows * R), sizeof(float)),
          *t = m->uk_t[L] = mla_falloc(NH * R * dn);
    const fp4_tensor *kb = w[FP4_LW_KV_B];
    if (!kv || !t) return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
    fp4_status st;
    if (!kb) {
        float *vb = mla_falloc(NH * dv * R);
        st = vb ? fp4_tensor_dequant_rows(w[FP4_LW_K_B], 0, NH * R, t) : FP4_ERR_NOMEM;
        if (!st) st = fp4_tensor_dequant_rows(w[FP4_LW_V_B], 0, NH * dv, vb);
        for (int64_t h = 0; !st && h < NH; h++)
            memcpy(kv + (h * (dn + dv) + dn) * R, vb + h * dv * R, sizeof(float) * (size_t)(dv * R));
        free(vb);
        return st ? fp4_fail(err, st, NULL, w[FP4_LW_K_B]->name, "rt.mla", "cannot widen attn_k_b / attn_v_b")
                  : FP4_OK;
    }
    if ((st = fp4_tensor_dequant_rows(kb, 0, rows, kv)))
        return fp4_fail(err, st, NULL, kb->name, "rt.mla", "cannot widen kv_b_proj");
    for (int64_t h = 0; h < NH; h++)
        for (int64_t i = 0; i < dn; i++)
            for (int64_t r = 0; r < R; r++)
                t[(h * R + r) * dn + i] = kv[(h * (dn + dv) + i) * R + r];
    return FP4_OK;
}

fp4_status fp4_cpu_mla_create(const fp4_rt_model_desc *d, const fp4_kv_pages *kv, int64_t max_cols,
                              fp4_cpu_mla **out, fp4_error *err) {
    const fp4_arch *a = &d->arch;
    fp4_cpu_mla *m = calloc(1, sizeof *m);
    *out = NULL;
    if (!m) return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
    m->d = d, m->kv = kv, m->max_cols = max_cols, m->kd = fp4_arch_kv_dim(a);
    m->R = a->kv_lora_rank, m->dr = a->qk_rope_dim, m->dn = a->qk_nope_dim, m->dv = a->v_head_dim;
    m->NH = a->n_heads, m->QL = a->q_lora_rank, m->W = m->R + m->dr;
    const int64_t nl = a->n_layers, rows = m->NH * (m->dn + m->dv);
    m->kvb = calloc((size_t)nl, sizeof *m->kvb), m->uk_t = calloc((size_t)nl, sizeof *m->uk_t);
    m->qa = mla_falloc(max_cols * (m->QL ? m->QL : 1)), m->q = mla_falloc(max_cols * m->NH * (m->dn + m->dr));
    m->kva = mla_falloc(max_cols * m->W), m->o = mla_falloc(max_cols * m->NH * m->dv);
    if (!m->kvb || !m->uk_t || !m->qa || !m->q || !m->kva || !m->o) {
        fp4_cpu_mla_destroy(m);
        return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
    }
    for (int64_t L = 0; L < nl; L++) {
        fp4_status st = widen_kvb(m, d->layer + L * FP4_LW_COUNT_, L, rows, err);
        if (st) {
            fp4_cpu_mla_destroy(m);
            return st;
        }
    }
    *out = m;
    return FP4_OK;
}

/* the K (base m->kv->k) or V (m->kv->v) part of a position's row; positions m->kv->row halves apart */
static uint16_t *row_at(const fp4_cpu_mla *m, uint8_t *base, int32_t slot, int64_t L, int64_t pos) {
    return fp4_kv_pages_at(m->kv, base, slot, L, m->kd, pos);
}
/* value d of row j of a slot's rows from (k0, v0) */
static inline float row_val(const fp4_cpu_mla *m, const uint16_t *k0, const uint16_t *v0, int64_t j,
                            int64_t d) {
    const int64_t at = j * m->kv->row;
    return fp4p_f16_to_f32(d < m->kd ? k0[at + d] : v0[at + d - m->kd]);
}

static fp4_status mla_proj(const fp4_cpu_mla *m, const fp4_tensor *w, const float *x, int64_t n, float *y,
                           fp4_error *err) {
    fp4_status st = fp4_cpu_project(w, m->d->mode, x, n, y, m->d->n_threads);
    if (st)
        return fp4_fail(err, st, NULL, w->name, "rt.project", "projection failed on route %s",
                        fp4_cpu_route_name(w, m->d->mode));
    return FP4_OK;
}

/* transformers' rope_interleave: the pairs (x[2i], x[2i+1]) become (x[i], x[i + n/2]) (a copy) */
static void deinterleave(float *x, int64_t n) {
    float tmp[FP4_ARCH_MAX_HEAD_DIM];
    for (int64_t i = 0; i < n / 2; i++)
        tmp[i] = x[2 * i], tmp[n / 2 + i] = x[2 * i + 1];
    memcpy(x, tmp, sizeof(float) * (size_t)n);
}

static void rope_part(const fp4_cpu_mla *m, float *x, int64_t pos) {
    const int64_t half = m->dr / 2;
    if (m->d->arch.rope_interleave) deinterleave(x, m->dr);
    fp4p_rope(x, m->d->rope_cos + pos * half, m->d->rope_sin + pos * half, (int)half);
}

typedef struct mla_ctx {
    const fp4_cpu_mla *m;
    const fp4_rt_col *cols;
    int64_t L;
    fp4_status st;
} mla_ctx;

/* one (column, head) row: the absorbed query, the attention over the slot's rows 0..pos (the
 * pinned order of fp4p_attend over W values, its value the first R of each row), then W_UV */
static void mla_rows(void *p, int64_t r0, int64_t r1) {
    mla_ctx *c = p;
    const fp4_cpu_mla *m = c->m;
    const int64_t R = m->R, W = m->W, dn = m->dn, dv = m->dv, NH = m->NH, qd = dn + m->dr;
    float *qc = mla_falloc(W), *kv = mla_falloc(W), *ol = mla_falloc(R), *s = mla_falloc(m->d->n_ctx);
    if (!qc || !kv || !ol || !s) {
        free(qc), free(kv), free(ol), free(s);
        __atomic_store_n(&c->st, FP4_ERR_NOMEM, __ATOMIC_RELAXED);
        return;
    }
    for (int64_t r = r0; r < r1; r++) {
        const int64_t col = r / NH, h = r % NH, n = c->cols[col].pos + 1;
        const float *q = m->q + col * NH * qd + h * qd, *ut = m->uk_t[c->L] + h * R * dn;
        for (int64_t i = 0; i < R; i++)
            qc[i] = fp4p_dot(ut + i * dn, q, dn);
        memcpy(qc + R, q + dn, sizeof(float) * (size_t)m->dr);
        const uint16_t *k0 = row_at(m, m->kv->k, c->cols[col].slot, c->L, 0),
                       *v0 = row_at(m, m->kv->v, c->cols[col].slot, c->L, 0);
        float mx = 0.0f;
        for (int64_t j = 0; j < n; j++) {
            for (int64_t d = 0; d < W; d++)
                kv[d] = row_val(m, k0, v0, j, d);
            s[j] = fp4p_mul(fp4p_dot(qc, kv, W), m->d->attn_scale);
            if (j == 0 || s[j] > mx) mx = s[j];
        }
        for (int64_t j = 0; j < n; j++)
            s[j] = fp4p_exp(fp4p_sub(s[j], mx));
        const float den = fp4p_sum(s, n, 1);
        for (int64_t d = 0; d < R; d++) {
            float lanes[FP4P_LANES];
            for (int l = 0; l < FP4P_LANES; l++)
                lanes[l] = 0.0f;
            for (int64_t j = 0; j < n; j++)
                lanes[j % FP4P_LANES] =
                    fp4p_add(lanes[j % FP4P_LANES], fp4p_mul(s[j], row_val(m, k0, v0, j, d)));
            ol[d] = fp4p_div(fp4p_butterfly(lanes), den);
        }
        const float *uv = m->kvb[c->L] + (h * (dn + dv) + dn) * R;
        float *o = m->o + col * NH * dv + h * dv;
        for (int64_t j = 0; j < dv; j++)
            o[j] = fp4p_dot(uv + j * R, ol, R);
    }
    free(qc), free(kv), free(ol), free(s);
}

fp4_status fp4_cpu_mla_attend(fp4_cpu_mla *m, int64_t L, const fp4_rt_col *cols, int64_t n, const float *h,
                              float *t, fp4_error *err) {
    const fp4_rt_model_desc *d = m->d;
    const fp4_tensor *const *w = d->layer + L * FP4_LW_COUNT_;
    const float *const *vw = d->vec + L * FP4_LW_COUNT_;
    const int64_t R = m->R, W = m->W, NH = m->NH, qd = m->dn + m->dr;
    fp4_status st;
    if (m->QL) {
        if ((st = mla_proj(m, w[FP4_LW_Q_A], h, n, m->qa, err))) return st;
        for (int64_t c = 0; c < n; c++)
            fp4p_rmsnorm(m->qa + c * m->QL, vw[FP4_LW_Q_A_NORM], m->QL, MLA_NORM_EPS, m->qa + c * m->QL);
        if ((st = mla_proj(m, w[FP4_LW_Q], m->qa, n, m->q, err))) return st;
    } else if ((st = mla_proj(m, w[FP4_LW_Q], h, n, m->q, err)))
        return st;
    if ((st = mla_proj(m, w[FP4_LW_KV_A], h, n, m->kva, err))) return st;
    for (int64_t c = 0; c < n; c++) {
        float *kv = m->kva + c * W;
        fp4p_rmsnorm(kv, vw[FP4_LW_KV_A_NORM], R, MLA_NORM_EPS, kv);
        rope_part(m, kv + R, cols[c].pos);
        for (int64_t hh = 0; hh < NH; hh++)
            rope_part(m, m->q + c * NH * qd + hh * qd + m->dn, cols[c].pos);
        uint16_t *dk = row_at(m, m->kv->k, cols[c].slot, L, cols[c].pos),
                 *dv = row_at(m, m->kv->v, cols[c].slot, L, cols[c].pos);
        for (int64_t i = 0; i < 2 * m->kd; i++)
            *(i < m->kd ? dk + i : dv + (i - m->kd)) = i < W ? fp4p_f32_to_f16(kv[i]) : 0;
    }
    mla_ctx mc = {m, cols, L, FP4_OK};
    st = fp4_parallel_rows(n * NH, d->n_threads, mla_rows, &mc);
    if (st || mc.st) return fp4_fail(err, st ? st : mc.st, NULL, NULL, "rt.attention", "attention failed");
    return mla_proj(m, w[FP4_LW_O], m->o, n, t, err);
}
