/* ds_fixture.c — see ds_fixture.h. The reference follows transformers' modeling_deepseek_v3.py
 * step by step in double: q through q_a / q_a_layernorm / q_b, the latent through kv_a /
 * kv_a_layernorm / kv_b into per-head k_nope and v, the rope part de-interleaved then rotated
 * (rotate-half) with yarn's frequencies and cos/sin scale, scores scaled by qk_head_dim^-0.5 *
 * mscale(factor, mscale_all_dim)^2, the sigmoid router with the bias for selection, group-limited
 * top-k, the k weights normalized and scaled, shared experts added to the routed sum. */
#include "ds_fixture.h"
#include "check.h"
#include "fp4lane_io.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

dsfx_spec dsfx_default(void) {
    dsfx_spec s = {64, 4, 32, 16, 8,  4, 8, 96, 32,   8,    3, 4,   2,
                   1,  1, 3,  96, 64, 1, 1, 1,  NULL, NULL, 0, 1.0, 0.8};
    return s;
}

typedef struct tw {
    char name[128];
    int64_t rows, cols; /* rows 0: 1-D */
    float scale, offset;
} tw;

static int add_layer(tw *t, int n, const dsfx_spec *s, int l) {
    const int H = s->hidden, NH = s->heads, qd = NH * (s->nope + s->rope), moe = l >= s->first_dense;
#define A(fmt, r, c, sc, off)                                                                                \
    (snprintf(t[n].name, sizeof t[n].name, "model.layers.%d." fmt, l), t[n].rows = (r), t[n].cols = (c),     \
     t[n].scale = (sc), t[n].offset = (off), n++)
    A("input_layernorm.weight", 0, H, 0.2f, 1.0f);
    if (s->q_lora) {
        A("self_attn.q_a_proj.weight", s->q_lora, H, 0.15f, 0);
        A("self_attn.q_a_layernorm.weight", 0, s->q_lora, 0.2f, 1.0f);
        A("self_attn.q_b_proj.weight", qd, s->q_lora, 0.25f, 0);
    } else
        A("self_attn.q_proj.weight", qd, H, 0.15f, 0);
    A("self_attn.kv_a_proj_with_mqa.weight", s->kv_lora + s->rope, H, 0.15f, 0);
    A("self_attn.kv_a_layernorm.weight", 0, s->kv_lora, 0.2f, 1.0f);
    A("self_attn.kv_b_proj.weight", NH * (s->nope + s->v), s->kv_lora, 0.3f, 0);
    A("self_attn.o_proj.weight", H, NH * s->v, 0.2f, 0);
    A("post_attention_layernorm.weight", 0, H, 0.2f, 1.0f);
    if (!moe) {
        A("mlp.gate_proj.weight", s->ffn, H, 0.15f, 0);
        A("mlp.up_proj.weight", s->ffn, H, 0.15f, 0);
        A("mlp.down_proj.weight", H, s->ffn, 0.12f, 0);
        return n;
    }
    A("mlp.gate.weight", s->experts, H, 0.3f, 0);
    A("mlp.gate.e_score_correction_bias", 0, s->experts, 0.3f, 0);
    for (int e = 0; e < s->experts; e++) {
        snprintf(t[n].name, sizeof t[n].name, "model.layers.%d.mlp.experts.%d.gate_proj.weight", l, e);
        t[n].rows = s->moe_ffn, t[n].cols = H, t[n].scale = 0.15f, t[n++].offset = 0;
        snprintf(t[n].name, sizeof t[n].name, "model.layers.%d.mlp.experts.%d.up_proj.weight", l, e);
        t[n].rows = s->moe_ffn, t[n].cols = H, t[n].scale = 0.15f, t[n++].offset = 0;
        snprintf(t[n].name, sizeof t[n].name, "model.layers.%d.mlp.experts.%d.down_proj.weight", l, e);
        t[n].rows = H, t[n].cols = s->moe_ffn, t[n].scale = 0.15f, t[n++].offset = 0;
    }
    if (s->shared) {
        const int fs = s->shared * s->moe_ffn;
        A("mlp.shared_experts.gate_proj.weight", fs, H, 0.15f, 0);
        A("mlp.shared_experts.up_proj.weight", fs, H, 0.15f, 0);
        A("mlp.shared_experts.down_proj.weight", H, fs, 0.15f, 0);
    }
#undef A
    return n;
}

int dsfx_write(const char *dir, const dsfx_spec *s, uint64_t seed) {
    mkdir(dir, 0777);
    char cfg[4096], path[1024], ql[32], rs[256] = "null";
    snprintf(ql, sizeof ql, s->q_lora ? "%d" : "null", s->q_lora);
    if (s->yarn)
        snprintf(rs, sizeof rs,
                 "{\"type\":\"yarn\",\"factor\":4.0,\"original_max_position_embeddings\":%d,\"beta_fast\":32,"
                 "\"beta_slow\":1,\"mscale\":%.17g,\"mscale_all_dim\":%.17g}",
                 s->ctx / 4, s->mscale, s->mscale_all_dim);
    snprintf(
        cfg, sizeof cfg,
        "{\"architectures\":[\"DeepseekV3ForCausalLM\"],\"model_type\":\"deepseek_v3\",\"hidden_size\":%d,"
        "\"num_attention_heads\":%d,\"num_key_value_heads\":%d,\"q_lora_rank\":%s,\"kv_lora_rank\":%d,"
        "\"qk_nope_head_dim\":%d,\"qk_rope_head_dim\":%d,\"v_head_dim\":%d,\"intermediate_size\":%d,"
        "\"moe_intermediate_size\":%d,\"n_routed_experts\":%d,\"num_experts_per_tok\":%d,\"n_group\":%d,"
        "\"topk_group\":%d,\"n_shared_experts\":%d,\"first_k_dense_replace\":%d,\"num_hidden_layers\":%d,"
        "\"vocab_size\":%d,\"max_position_embeddings\":%d,\"num_nextn_predict_layers\":%d,"
        "\"rope_interleave\":%s,\"rope_scaling\":%s,\"rope_theta\":10000.0,\"rms_norm_eps\":1e-06,"
        "\"routed_scaling_factor\":2.5,\"norm_topk_prob\":true,\"scoring_func\":\"sigmoid\","
        "\"topk_method\":\"noaux_tc\",\"hidden_act\":\"silu\",\"tie_word_embeddings\":false,"
        "\"bos_token_id\":1,\"eos_token_id\":2%s}",
        s->hidden, s->heads, s->heads, ql, s->kv_lora, s->nope, s->rope, s->v, s->ffn, s->moe_ffn, s->experts,
        s->used, s->n_group, s->topk_group, s->shared, s->first_dense, s->layers, s->vocab, s->ctx,
        s->hide_nextn ? 0 : s->nextn, s->interleave ? "true" : "false", rs, s->extra ? s->extra : "");
    snprintf(path, sizeof path, "%s/config.json", dir);
    fp4_error e;
    if (fp4_hfdir_write_json(path, cfg, 2, 1, &e)) return -1;
    tw *t = calloc((size_t)(s->layers + s->nextn + 1) * (24 + 3 * (size_t)s->experts) + 4, sizeof *t);
    if (!t) return -1;
    int n = 0;
    snprintf(t[n].name, sizeof t[n].name, "model.embed_tokens.weight");
    t[n].rows = s->vocab, t[n].cols = s->hidden, t[n].scale = 1.0f, n++;
    snprintf(t[n].name, sizeof t[n].name, "model.norm.weight");
    t[n].cols = s->hidden, t[n].scale = 0.2f, t[n].offset = 1.0f, n++;
    snprintf(t[n].name, sizeof t[n].name, "lm_head.weight");
    t[n].rows = s->vocab, t[n].cols = s->hidden, t[n].scale = 0.15f, n++;
    for (int l = 0; l < s->layers + s->nextn; l++) {
        n = add_layer(t, n, s, l);
        if (l >= s->layers) { /* the MTP layer's own tensors */
            snprintf(t[n].name, sizeof t[n].name, "model.layers.%d.eh_proj.weight", l);
            t[n].rows = s->hidden, t[n].cols = 2 * s->hidden, t[n].scale = 0.1f, n++;
            snprintf(t[n].name, sizeof t[n].name, "model.layers.%d.enorm.weight", l);
            t[n].cols = s->hidden, t[n].scale = 0.1f, t[n].offset = 1.0f, n++;
        }
    }
    char drop[128] = "";
    if (s->drop) snprintf(drop, sizeof drop, s->drop, 1);
    fp4_hfdir_writer *w = NULL;
    int rc = -1;
    if (fp4_hfdir_writer_create(dir, 0, &w, &e)) goto out;
    fp4_hfdir_writer_add_metadata(w, "format", "pt", &e);
    for (int i = 0; i < n; i++) {
        if (!strcmp(t[i].name, drop)) continue;
        int64_t sh[2] = {t[i].rows ? t[i].rows : t[i].cols, t[i].cols};
        if (fp4_hfdir_writer_add_tensor(w, t[i].name, FP4_ST_BF16, t[i].rows ? 2 : 1, sh, &e)) goto out;
    }
    test_rng r = {seed};
    for (int i = 0; i < n; i++) {
        const size_t cnt = (size_t)((t[i].rows ? t[i].rows : 1) * t[i].cols);
        uint16_t *b = malloc(cnt * 2);
        if (!b) goto out;
        for (size_t j = 0; j < cnt; j++)
            b[j] = fp4_f32_to_bf16(t[i].offset + t[i].scale * rng_normal(&r));
        fp4_status st = strcmp(t[i].name, drop) ? fp4_hfdir_writer_write(w, b, cnt * 2, &e) : FP4_OK;
        free(b);
        if (st) goto out;
    }
    size_t shards;
    rc = fp4_hfdir_writer_finish(w, &shards, &e) ? -1 : 0;
out:
    fp4_hfdir_writer_free(w);
    free(t);
    return rc;
}

/* ---- the reference ---- */
static double *wt(const fp4_model *m, const char *fmt, int l) {
    char name[160];
    snprintf(name, sizeof name, fmt, l);
    const fp4_tensor *t = fp4_model_find(m, name);
    if (!t) return NULL;
    int64_t rows = t->n_dims > 1 ? t->ne[1] : 1, n = rows * t->ne[0];
    float *f = malloc(sizeof(float) * (size_t)n);
    double *d = malloc(sizeof(double) * (size_t)n);
    if (f && d && !fp4_tensor_dequant_rows(t, 0, rows, f))
        for (int64_t i = 0; i < n; i++)
            d[i] = f[i];
    else
        free(d), d = NULL;
    free(f);
    return d;
}
static void mv(const double *w, const double *x, int out, int in, double *y) {
    for (int r = 0; r < out; r++) {
        double a = 0;
        for (int i = 0; i < in; i++)
            a += w[(int64_t)r * in + i] * x[i];
        y[r] = a;
    }
}
static void rms(const double *x, const double *w, int n, double eps, double *y) {
    double ss = 0;
    for (int i = 0; i < n; i++)
        ss += x[i] * x[i];
    const double inv = 1.0 / sqrt(ss / n + eps);
    for (int i = 0; i < n; i++)
        y[i] = x[i] * inv * w[i];
}
static double silu(double g) {
    return g / (1.0 + exp(-g));
}
static double ymscale(double s, double m) {
    return s <= 1 ? 1.0 : 0.1 * m * log(s) + 1.0;
}
/* the rope part at position p: de-interleave (transformers' view/transpose), then rotate-half */
static void rope(const fp4_arch *a, double *x, int d, int p) {
    double t[64], pi = 3.14159265358979323846;
    if (a->rope_interleave) {
        for (int i = 0; i < d / 2; i++)
            t[i] = x[2 * i], t[d / 2 + i] = x[2 * i + 1];
        memcpy(x, t, sizeof(double) * (size_t)d);
    }
    double af = 1.0;
    if (a->rope_scaling == FP4_ROPE_YARN)
        af = ymscale(a->rope_factor, a->rope_mscale) / ymscale(a->rope_factor, a->rope_mscale_all_dim);
    for (int i = 0; i < d / 2; i++) {
        double f = 1.0 / pow(a->rope_theta, 2.0 * i / d);
        if (a->rope_scaling == FP4_ROPE_YARN) {
            double cd = d * log(a->rope_orig_ctx / (a->rope_beta_fast * 2 * pi)) / (2 * log(a->rope_theta));
            double ch = d * log(a->rope_orig_ctx / (a->rope_beta_slow * 2 * pi)) / (2 * log(a->rope_theta));
            double lo = fmax(floor(cd), 0), hi = fmin(ceil(ch), d - 1);
            if (lo == hi) hi += 0.001;
            double ramp = fmin(fmax((i - lo) / (hi - lo), 0), 1), ext = 1 - ramp;
            f = f / a->rope_factor * (1 - ext) + f * ext;
        }
        const double c = cos(p * f) * af, s = sin(p * f) * af, x0 = x[i], x1 = x[i + d / 2];
        x[i] = x0 * c - x1 * s;
        x[i + d / 2] = x1 * c + x0 * s;
    }
}

/* the k best of v[0..n) (descending, ties to the lower index) */
static void topk(const double *v, int n, int k, int *idx) {
    for (int j = 0; j < k; j++) {
        int b = -1;
        for (int i = 0; i < n; i++) {
            int taken = 0;
            for (int q = 0; q < j; q++)
                taken |= idx[q] == i;
            if (!taken && (b < 0 || v[i] > v[b])) b = i;
        }
        idx[j] = b;
    }
}

static void mlp(const fp4_model *m, const char *pre, int l, int F, int H, const double *h, double *y) {
    char f[160];
    snprintf(f, sizeof f, "%s.gate_proj.weight", pre);
    double *g = wt(m, f, l), *gv = malloc(sizeof(double) * (size_t)F),
           *uv = malloc(sizeof(double) * (size_t)F);
    snprintf(f, sizeof f, "%s.up_proj.weight", pre);
    double *u = wt(m, f, l);
    snprintf(f, sizeof f, "%s.down_proj.weight", pre);
    double *d = wt(m, f, l);
    mv(g, h, F, H, gv), mv(u, h, F, H, uv);
    for (int i = 0; i < F; i++)
        gv[i] = silu(gv[i]) * uv[i];
    mv(d, gv, H, F, y);
    free(g), free(u), free(d), free(gv), free(uv);
}

static void moe(const fp4_model *m, const fp4_arch *a, int l, const double *h, double *y) {
    const int H = (int)a->hidden, E = (int)a->n_experts, K = (int)a->n_experts_used, G = (int)a->moe_n_group;
    const int per = E / G;
    double *gw = wt(m, "model.layers.%d.mlp.gate.weight", l),
           *b = wt(m, "model.layers.%d.mlp.gate.e_score_correction_bias", l);
    double r[256], s[256], c[256], gs[64], ey[1024], sh[1024];
    int gi[64], idx[64];
    mv(gw, h, E, H, r);
    for (int i = 0; i < E; i++)
        s[i] = 1.0 / (1.0 + exp(-r[i])), c[i] = s[i] + b[i];
    for (int g = 0; g < G; g++) {
        int two[2];
        topk(c + g * per, per, 2, two);
        gs[g] = c[g * per + two[0]] + c[g * per + two[1]];
    }
    topk(gs, G, (int)a->moe_topk_group, gi);
    for (int g = 0; g < G; g++) {
        int keep = 0;
        for (int t = 0; t < a->moe_topk_group; t++)
            keep |= gi[t] == g;
        for (int i = g * per; i < (g + 1) * per && !keep; i++)
            c[i] = 0.0;
    }
    topk(c, E, K, idx);
    double den = 0;
    for (int j = 0; j < K; j++)
        den += s[idx[j]];
    for (int i = 0; i < H; i++)
        y[i] = 0;
    char pre[96];
    for (int j = 0; j < K; j++) {
        snprintf(pre, sizeof pre, "model.layers.%%d.mlp.experts.%d", idx[j]);
        mlp(m, pre, l, (int)a->moe_ffn, H, h, ey);
        const double w = s[idx[j]] / (den + 1e-20) * a->routed_scaling;
        for (int i = 0; i < H; i++)
            y[i] += w * ey[i];
    }
    if (a->n_shared_experts) {
        mlp(m, "model.layers.%d.mlp.shared_experts", l, (int)(a->n_shared_experts * a->moe_ffn), H, h, sh);
        for (int i = 0; i < H; i++)
            y[i] += sh[i];
    }
    free(gw), free(b);
}

int dsfx_reference(const fp4_model *m, const fp4_arch *a, const int32_t *tok, int T, double *logits) {
    const int H = (int)a->hidden, NH = (int)a->n_heads, R = (int)a->kv_lora_rank, dr = (int)a->qk_rope_dim;
    const int dn = (int)a->qk_nope_dim, dv = (int)a->v_head_dim, QL = (int)a->q_lora_rank, V = (int)a->vocab;
    const int qd = NH * (dn + dr);
    double sc = 1.0 / sqrt((double)(dn + dr));
    if (a->rope_scaling == FP4_ROPE_YARN && a->rope_mscale_all_dim > 0)
        sc *=
            ymscale(a->rope_factor, a->rope_mscale_all_dim) * ymscale(a->rope_factor, a->rope_mscale_all_dim);
    double *x = calloc((size_t)T * H, sizeof *x), *h = malloc(sizeof(double) * (size_t)T * H);
    double *q = malloc(sizeof(double) * (size_t)T * qd), *k = malloc(sizeof(double) * (size_t)T * qd);
    double *v = malloc(sizeof(double) * (size_t)T * NH * dv), *o = malloc(sizeof(double) * (size_t)NH * dv);
    double *emb = wt(m, "model.embed_tokens.weight", 0), tmp[1024], kva[1024], y[1024], p[1024];
    for (int t = 0; t < T; t++)
        memcpy(x + t * H, emb + (int64_t)tok[t] * H, sizeof(double) * (size_t)H);
    for (int l = 0; l < a->n_layers; l++) {
        double *an = wt(m, "model.layers.%d.input_layernorm.weight", l);
        double *kvaw = wt(m, "model.layers.%d.self_attn.kv_a_proj_with_mqa.weight", l);
        double *kvan = wt(m, "model.layers.%d.self_attn.kv_a_layernorm.weight", l);
        double *kvb = wt(m, "model.layers.%d.self_attn.kv_b_proj.weight", l);
        double *ow = wt(m, "model.layers.%d.self_attn.o_proj.weight", l);
        double *pn = wt(m, "model.layers.%d.post_attention_layernorm.weight", l);
        double *qa = QL ? wt(m, "model.layers.%d.self_attn.q_a_proj.weight", l) : NULL;
        double *qan = QL ? wt(m, "model.layers.%d.self_attn.q_a_layernorm.weight", l) : NULL;
        double *qb = wt(
            m, QL ? "model.layers.%d.self_attn.q_b_proj.weight" : "model.layers.%d.self_attn.q_proj.weight",
            l);
        for (int t = 0; t < T; t++) {
            rms(x + t * H, an, H, a->rms_eps, h + t * H);
            if (QL) {
                mv(qa, h + t * H, QL, H, tmp);
                rms(tmp, qan, QL, 1e-6, tmp);
                mv(qb, tmp, qd, QL, q + t * qd);
            } else
                mv(qb, h + t * H, qd, H, q + t * qd);
            mv(kvaw, h + t * H, R + dr, H, kva);
            rms(kva, kvan, R, 1e-6, kva);
            rope(a, kva + R, dr, t);
            mv(kvb, kva, NH * (dn + dv), R, tmp);
            for (int hh = 0; hh < NH; hh++) {
                double *qh = q + t * qd + hh * (dn + dr), *kh = k + t * qd + hh * (dn + dr);
                rope(a, qh + dn, dr, t);
                memcpy(kh, tmp + hh * (dn + dv), sizeof(double) * (size_t)dn);
                memcpy(kh + dn, kva + R, sizeof(double) * (size_t)dr);
                memcpy(v + (t * NH + hh) * dv, tmp + hh * (dn + dv) + dn, sizeof(double) * (size_t)dv);
            }
        }
        for (int t = 0; t < T; t++) {
            for (int hh = 0; hh < NH; hh++) {
                double mx = -1e300, den = 0;
                for (int j = 0; j <= t; j++) {
                    double d = 0;
                    for (int i = 0; i < dn + dr; i++)
                        d += q[t * qd + hh * (dn + dr) + i] * k[j * qd + hh * (dn + dr) + i];
                    p[j] = d * sc, mx = fmax(mx, p[j]);
                }
                for (int j = 0; j <= t; j++)
                    p[j] = exp(p[j] - mx), den += p[j];
                for (int i = 0; i < dv; i++) {
                    double acc = 0;
                    for (int j = 0; j <= t; j++)
                        acc += p[j] * v[(j * NH + hh) * dv + i];
                    o[hh * dv + i] = acc / den;
                }
            }
            mv(ow, o, H, NH * dv, y);
            for (int i = 0; i < H; i++)
                x[t * H + i] += y[i];
            rms(x + t * H, pn, H, a->rms_eps, h + t * H);
            if (fp4_arch_layer_moe(a, l))
                moe(m, a, l, h + t * H, y);
            else
                mlp(m, "model.layers.%d.mlp", l, (int)a->ffn, H, h + t * H, y);
            for (int i = 0; i < H; i++)
                x[t * H + i] += y[i];
        }
        free(an), free(kvaw), free(kvan), free(kvb), free(ow), free(pn), free(qa), free(qan), free(qb);
    }
    double *fn = wt(m, "model.norm.weight", 0), *head = wt(m, "lm_head.weight", 0);
    for (int t = 0; t < T; t++) {
        rms(x + t * H, fn, H, a->rms_eps, h);
        mv(head, h, V, H, logits + (int64_t)t * V);
    }
    free(x), free(h), free(q), free(k), free(v), free(o), free(emb), free(fn), free(head);
    return 0;
}
