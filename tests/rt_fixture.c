/* rt_fixture.c — see rt_fixture.h. Deliberately plain: whole-sequence loops, no caches, no threads. */
#define FP4LANE_ORACLE_API /* the single-row dots the oracle re-implementation uses */
#include "rt_fixture.h"
#include "check.h"
#include "format/pinned.h" /* fp4p_exp only: the elementary function itself is tested on its own */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

rtfx_spec rtfx_default(const char *model_type) {
    rtfx_spec s = {model_type, 256, 4, 2, 64, 512, 320, 2, 64, 0, 0, NULL, 0, 0, 0, -1, 0, 0, 0, 0};
    return s;
}
rtfx_spec rtfx_moe(const char *model_type) {
    rtfx_spec s = rtfx_default(model_type);
    s.layers = 3, s.experts = 8, s.used = 2, s.moe_ffn = 256;
    s.dense_layer = strcmp(model_type, "mixtral") ? 1 : -1;
    return s;
}
static int layer_moe(const rtfx_spec *s, int l) {
    return s->experts > 0 && l != s->dense_layer;
}

void rtfx_rmtree(const char *dir) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

void rtfx_write_pair(const char *dir, const rtfx_spec *s, uint64_t seed, char *bf, char *nv, size_t cap) {
    snprintf(bf, cap, "%s/%s-bf16", dir, s->model_type);
    snprintf(nv, cap, "%s/%s-nvfp4", dir, s->model_type);
    CHECK(rtfx_write_hf(bf, s, seed) == 0);
    fp4_quantize_opts qo = {.layout = FP4_LAYOUT_MODELOPT};
    fp4_error e;
    CHECK_OK(fp4_quantize_checkpoint(bf, nv, &qo, &e));
}

static int is_qwen2(const char *t) {
    return !strcmp(t, "qwen2");
}
static int is_qwen3(const char *t) {
    return !strcmp(t, "qwen3") || !strcmp(t, "qwen3_moe");
}

int rtfx_write_hf(const char *dir, const rtfx_spec *s, uint64_t seed) {
    mkdir(dir, 0777);
    char path[1024], cfg[2048];
    snprintf(cfg, sizeof cfg,
             "{\"architectures\":[\"X\"],\"model_type\":\"%s\",\"hidden_size\":%d,\"num_attention_heads\":%d,"
             "\"num_key_value_heads\":%d,\"intermediate_size\":%d,\"vocab_size\":%d,\"num_hidden_layers\":%d,"
             "\"max_position_embeddings\":%d,\"rms_norm_eps\":1e-06,\"rope_theta\":10000.0,\"tie_word_"
             "embeddings\":%s,"
             "\"hidden_act\":\"silu\",\"bos_token_id\":1,\"eos_token_id\":2%s%s%s}",
             s->model_type, s->hidden, s->heads, s->kv_heads, s->ffn, s->vocab, s->layers, s->ctx,
             s->tied ? "true" : "false",
             s->explicit_head_dim || is_qwen3(s->model_type) ? ",\"head_dim\":" : "", "",
             s->extra_json ? s->extra_json : "");
    if (s->explicit_head_dim || is_qwen3(s->model_type)) {
        /* splice the head_dim value after its key */
        char *k = strstr(cfg, "\"head_dim\":");
        char tail[2048];
        snprintf(tail, sizeof tail, "%s", k + 11);
        snprintf(k + 11, sizeof cfg - (size_t)(k + 11 - cfg), "%d%s", s->head_dim, tail);
    }
    if (s->experts) { /* the MoE keys, spliced before the closing brace */
        const int mx = !strcmp(s->model_type, "mixtral");
        char moe[512], only[32] = "";
        if (s->dense_layer >= 0) snprintf(only, sizeof only, "%d", s->dense_layer);
        if (mx)
            snprintf(moe, sizeof moe, ",\"num_local_experts\":%d,\"num_experts_per_tok\":%d}", s->experts,
                     s->used);
        else
            snprintf(moe, sizeof moe,
                     ",\"num_experts\":%d,\"num_experts_per_tok\":%d,\"moe_intermediate_size\":%d,"
                     "\"norm_topk_prob\":true,\"decoder_sparse_step\":1,\"mlp_only_layers\":[%s]}",
                     s->experts, s->used, s->moe_ffn, only);
        char *end = strrchr(cfg, '}');
        snprintf(end, sizeof cfg - (size_t)(end - cfg), "%s", moe);
        if (mx) { /* Mixtral's experts are intermediate_size wide */
            char *k = strstr(cfg, "\"intermediate_size\":");
            char tail[2048];
            snprintf(tail, sizeof tail, "%s", strchr(k, ','));
            snprintf(k, sizeof cfg - (size_t)(k - cfg), "\"intermediate_size\":%d%s", s->moe_ffn, tail);
        }
    }
    snprintf(path, sizeof path, "%s/config.json", dir);
    fp4_error e;
    if (fp4_hfdir_write_json(path, cfg, 2, 1, &e)) return -1;

    struct tdesc {
        char name[160];
        int64_t n_out, n_in;
        float scale, offset;
        int64_t n_exp; /* 3-D: experts (n_out rows each) */
    } *t = calloc((size_t)(3 + (16 + 3 * s->experts) * s->layers), sizeof *t);
    int n = 0;
    if (!t) return -1;
#define ADD(nm, o, i, sc, off)                                                                               \
    (snprintf(t[n].name, 160, "%s", nm), t[n].n_out = (o), t[n].n_in = (i), t[n].scale = (sc),               \
     t[n].offset = (off), n++)
    const int H = s->hidden, Q = s->heads * s->head_dim, KV = s->kv_heads * s->head_dim;
    ADD("model.embed_tokens.weight", s->vocab, H, 1.0f, 0);
    ADD("model.norm.weight", 1, H, 0.1f, 1.0f);
    if (!s->tied) ADD("lm_head.weight", s->vocab, H, 0.06f, 0);
    char nm[160];
    for (int l = 0; l < s->layers; l++) {
#define L(fmt, o, i, sc, off) (snprintf(nm, sizeof nm, "model.layers.%d." fmt, l), ADD(nm, o, i, sc, off))
#define LD(str, o, i, sc, off) (snprintf(nm, sizeof nm, "model.layers.%d.%s", l, str), ADD(nm, o, i, sc, off))
        L("input_layernorm.weight", 1, H, 0.1f, 1.0f);
        L("self_attn.q_proj.weight", Q, H, 0.08f, 0);
        L("self_attn.k_proj.weight", KV, H, 0.08f, 0);
        L("self_attn.v_proj.weight", KV, H, 0.08f, 0);
        L("self_attn.o_proj.weight", H, Q, 0.06f, 0);
        if (is_qwen2(s->model_type)) {
            L("self_attn.q_proj.bias", 1, Q, 0.1f, 0);
            L("self_attn.k_proj.bias", 1, KV, 0.1f, 0);
            L("self_attn.v_proj.bias", 1, KV, 0.1f, 0);
        }
        if (is_qwen3(s->model_type)) {
            L("self_attn.q_norm.weight", 1, s->head_dim, 0.1f, 1.0f);
            L("self_attn.k_norm.weight", 1, s->head_dim, 0.1f, 1.0f);
        }
        L("post_attention_layernorm.weight", 1, H, 0.1f, 1.0f);
        if (layer_moe(s, l)) {
            const int mx = !strcmp(s->model_type, "mixtral"), F = s->moe_ffn, E = s->experts;
            const char *mid = mx ? "block_sparse_moe" : "mlp";
            char f2[96];
            snprintf(f2, sizeof f2, "%s.gate.weight", mid);
            /* the router: logits of a few units, so the choice varies from token to token */
            LD(f2, E + (l == 0 ? s->bad_router : 0), H, 0.3f, 0);
            if (s->fused) {
                L("mlp.experts.gate_up_proj", 2 * F, H, 0.08f, 0), t[n - 1].n_exp = E;
                L("mlp.experts.down_proj", H, F, 0.05f, 0), t[n - 1].n_exp = E;
                continue;
            }
            for (int x = 0; x < E + (l == 0 ? s->extra_expert : 0); x++) {
                snprintf(f2, sizeof f2, "%s.experts.%d.%s.weight", mid, x, mx ? "w1" : "gate_proj");
                LD(f2, F, H, 0.08f, 0);
                snprintf(f2, sizeof f2, "%s.experts.%d.%s.weight", mid, x, mx ? "w3" : "up_proj");
                LD(f2, F, H, 0.08f, 0);
                snprintf(f2, sizeof f2, "%s.experts.%d.%s.weight", mid, x, mx ? "w2" : "down_proj");
                if (!(l == 0 && x == 1 && s->drop_expert)) LD(f2, H, F, 0.05f, 0);
            }
            continue;
        }
        L("mlp.gate_proj.weight", s->ffn, H, 0.08f, 0);
        L("mlp.up_proj.weight", s->ffn, H, 0.08f, 0);
        L("mlp.down_proj.weight", H, s->ffn, 0.05f, 0);
#undef L
#undef LD
    }
#undef ADD
    fp4_hfdir_writer *w = NULL;
    if (fp4_hfdir_writer_create(dir, 0, &w, &e)) return free(t), -1;
    fp4_hfdir_writer_add_metadata(w, "format", "pt", &e);
    for (int i = 0; i < n; i++) {
        int64_t sh[3] = {t[i].n_out, t[i].n_in};
        int rank = t[i].n_out == 1 ? 1 : 2;
        if (rank == 1) sh[0] = t[i].n_in;
        if (t[i].n_exp) sh[0] = t[i].n_exp, sh[1] = t[i].n_out, sh[2] = t[i].n_in, rank = 3;
        if (fp4_hfdir_writer_add_tensor(w, t[i].name, FP4_ST_BF16, rank, sh, &e))
            return fp4_hfdir_writer_free(w), free(t), -1;
    }
    test_rng r = {seed};
    for (int i = 0; i < n; i++) {
        size_t cnt = (size_t)(t[i].n_out * t[i].n_in * (t[i].n_exp ? t[i].n_exp : 1));
        uint16_t *b = malloc(cnt * 2);
        for (size_t j = 0; j < cnt; j++)
            b[j] = fp4_f32_to_bf16(t[i].offset + t[i].scale * rng_normal(&r));
        fp4_status st = fp4_hfdir_writer_write(w, b, cnt * 2, &e);
        free(b);
        if (st) return fp4_hfdir_writer_free(w), free(t), -1;
    }
    free(t);
    size_t shards;
    fp4_status st = fp4_hfdir_writer_finish(w, &shards, &e);
    fp4_hfdir_writer_free(w);
    return st ? -1 : 0;
}

/* ------------------------------------------------------------------ shared helpers */

static const fp4_tensor *T(const fp4_model *m, const char *fmt, int l) {
    char nm[160];
    snprintf(nm, sizeof nm, fmt, l);
    return fp4_model_find(m, nm);
}
static int64_t rows_of(const fp4_tensor *t) {
    return t->n_dims > 1 ? t->ne[1] : 1;
}
static float *widen(const fp4_tensor *t) {
    int64_t n = rows_of(t) * t->ne[0];
    float *v = malloc(sizeof(float) * (size_t)n);
    fp4_tensor_dequant_rows(t, 0, rows_of(t), v);
    return v;
}

/* the pinned reduction, written as a warp would run it (every lane, every butterfly step) */
static float warp_sum(const float *t, int64_t n, int64_t stride) {
    float p[32], q[32];
    for (int l = 0; l < 32; l++) {
        p[l] = 0.0f;
        for (int64_t i = l; i < n; i += 32)
            p[l] = p[l] + t[i * stride];
    }
    for (int off = 16; off >= 1; off >>= 1) {
        for (int l = 0; l < 32; l++)
            q[l] = p[l] + p[l ^ off];
        memcpy(p, q, sizeof p);
    }
    return p[0];
}
static float warp_dot(const float *a, const float *b, int64_t n) {
    float *t = malloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
        t[i] = a[i] * b[i];
    float r = warp_sum(t, n, 1);
    free(t);
    return r;
}

/* ------------------------------------------------------------------ the exact oracle */

/* y[n_out] = W x by the contract of the weight's type (SPEC §4/§5, pinned dense, ggml's Q8_K dots) */
static void oracle_project(const fp4_tensor *w, const float *x, float *y) {
    const int64_t n_in = w->ne[0], n_out = rows_of(w);
    if (w->type == FP4_TYPE_NVFP4_E2M1 && w->nvfp4.input_scale_inv > 0.0f) {
        uint8_t *codes = malloc((size_t)n_in / 2), *sc = malloc((size_t)n_in / 16);
        fp4_nvfp4_quantize_act(x, n_in, w->nvfp4.input_scale_inv, codes, sc);
        for (int64_t r = 0; r < n_out; r++)
            y[r] = fp4_nvfp4_dot_w4a4(w->nvfp4.payload + r * n_in / 2, w->nvfp4.scales + r * n_in / 16,
                                      w->nvfp4.scale2, codes, sc, w->nvfp4.input_scale_inv, n_in);
        free(codes), free(sc);
    } else if (w->type == FP4_TYPE_NVFP4_E2M1) {
        fp4_block_q8_K *q = malloc(sizeof *q * (size_t)(n_in / 256));
        fp4_q8_K_quantize(x, n_in, q);
        for (int64_t r = 0; r < n_out; r++)
            y[r] = fp4_nvfp4_dot_a16_exact(w->nvfp4.payload + r * n_in / 2, w->nvfp4.scales + r * n_in / 16,
                                           w->nvfp4.scale2, q, n_in);
        free(q);
    } else if (w->type == FP4_TYPE_Q4_K || w->type == FP4_TYPE_Q6_K) {
        fp4_block_q8_K *q = malloc(sizeof *q * (size_t)(n_in / 256));
        fp4_q8_K_quantize(x, n_in, q);
        const size_t rb = (size_t)(n_in / 256) *
                          (w->type == FP4_TYPE_Q4_K ? sizeof(fp4_block_q4_K) : sizeof(fp4_block_q6_K));
        for (int64_t r = 0; r < n_out; r++)
            y[r] = w->type == FP4_TYPE_Q4_K
                       ? fp4_q4_K_dot_q8_K((const fp4_block_q4_K *)(const void *)(w->data + r * rb), q, n_in)
                       : fp4_q6_K_dot_q8_K((const fp4_block_q6_K *)(const void *)(w->data + r * rb), q, n_in);
        free(q);
    } else if (w->type == FP4_TYPE_F8_E4M3FN) {
        /* FP8 (fp4_fp8_view): the warp-order dot over the E4M3 values, then the row's scale */
        float *row = malloc(sizeof(float) * (size_t)n_in);
        for (int64_t r = 0; r < n_out; r++) {
            for (int64_t k = 0; k < n_in; k++)
                row[k] = fp4_e4m3fn_decode(w->data[r * n_in + k]);
            y[r] = warp_dot(row, x, n_in) * (w->fp8.row_scale ? w->fp8.row_scale[r] : w->fp8.scale);
        }
        free(row);
    } else {
        float *row = malloc(sizeof(float) * (size_t)n_in);
        for (int64_t r = 0; r < n_out; r++) {
            fp4_tensor_dequant_rows(w, r, r + 1, row);
            y[r] = warp_dot(row, x, n_in);
        }
        free(row);
    }
}

static void oracle_rmsnorm(const float *x, const float *w, int64_t n, float eps, float *y) {
    float *sq = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        sq[i] = x[i] * x[i];
    float mean = warp_sum(sq, n, 1) / (float)n;
    float inv = 1.0f / sqrtf(mean + eps);
    for (int64_t i = 0; i < n; i++)
        y[i] = (x[i] * inv) * w[i];
    free(sq);
}

static double inv_freq(const fp4_arch *a, int i) {
    return 1.0 / pow(a->rope_theta, (double)(2 * i) / (double)a->head_dim);
}
/* transformers' default / linear / llama3 inverse frequencies, in double */
static double inv_freq64(const fp4_arch *a, int i) {
    double f = inv_freq(a, i);
    if (a->rope_scaling == FP4_ROPE_LINEAR) return f / a->rope_factor;
    if (a->rope_scaling == FP4_ROPE_LLAMA3) {
        double wl = 2 * M_PI / f, lo = a->rope_orig_ctx / a->rope_low_freq_factor,
               hi = a->rope_orig_ctx / a->rope_high_freq_factor;
        if (wl > lo) return f / a->rope_factor;
        if (wl < hi) return f;
        double sm = (a->rope_orig_ctx / wl - a->rope_low_freq_factor) /
                    (a->rope_high_freq_factor - a->rope_low_freq_factor);
        return (1 - sm) * f / a->rope_factor + sm * f;
    }
    return f;
}

/* A MoE layer's MLP for one position (backend.h THE STEP k'..m'), written independently of the
 * step: the router's dot in warp order, the softmax with warp sums, the top k by a stable sort
 * (descending value, lower index first), each expert one dense SwiGLU, the combine in that order. */
static const char *moe_mid(const fp4_model *m, int l) {
    return T(m, "model.layers.%d.mlp.gate.weight", l) ? "mlp" : "block_sparse_moe";
}
static const fp4_tensor *expert_w(const fp4_model *m, int l, int e, int part) {
    static const char *const q3[3] = {"gate_proj", "up_proj", "down_proj"}, *const mx[3] = {"w1", "w3", "w2"};
    const char *mid = moe_mid(m, l);
    char nm[200];
    snprintf(nm, sizeof nm, "model.layers.%d.mlp.experts.%s", l, part == 2 ? "down_proj" : "gate_up_proj");
    const fp4_tensor *f = fp4_model_find(m, nm);
    if (f) { /* the fused 3-D form (plain types): expert e's rows, cut here independently of bind */
        static fp4_tensor cuts[3];
        const int64_t rows = part == 2 ? f->ne[1] : f->ne[1] / 2, esz = f->nbytes / (uint64_t)f->ne[2];
        const uint64_t rb = esz / (uint64_t)f->ne[1];
        fp4_tensor *c = &cuts[part];
        *c = *f;
        c->n_dims = 2, c->ne[1] = rows, c->ne[2] = 1;
        c->data = f->data + (uint64_t)e * esz + (part == 1 ? (uint64_t)rows * rb : 0);
        c->nbytes = (uint64_t)rows * rb;
        return c;
    }
    snprintf(nm, sizeof nm, "model.layers.%d.%s.experts.%d.%s.weight", l, mid, e,
             !strcmp(mid, "mlp") ? q3[part] : mx[part]);
    return fp4_model_find(m, nm);
}
static void oracle_moe(const fp4_model *m, const fp4_arch *a, int l, const float *h, float *out) {
    const int64_t E = a->n_experts, H = a->hidden, F = a->moe_ffn;
    const int K = (int)a->n_experts_used;
    char nm[200];
    snprintf(nm, sizeof nm, "model.layers.%d.%s.gate.weight", l, moe_mid(m, l));
    /* zeroed: gcc -O1 (the sanitizer builds) sees p as maybe uninitialized */
    float *r = calloc((size_t)E, sizeof(float)), *p = calloc((size_t)E, sizeof(float));
    int *ord = malloc(sizeof(int) * (size_t)E);
    oracle_project(fp4_model_find(m, nm), h, r);
    const float *key = r;
    if (a->moe_routing == FP4_MOE_SOFTMAX_TOPK) {
        float mx = r[0];
        for (int64_t i = 1; i < E; i++)
            if (r[i] > mx) mx = r[i];
        for (int64_t i = 0; i < E; i++)
            p[i] = fp4p_exp(r[i] - mx);
        const float s = warp_sum(p, E, 1);
        for (int64_t i = 0; i < E; i++)
            p[i] = p[i] / s;
        key = p;
    }
    for (int64_t i = 0; i < E; i++) /* insertion sort: stable, so equal values keep index order */
        for (int64_t j = ord[i] = (int)i; j > 0 && key[ord[j]] > key[ord[j - 1]]; j--) {
            int t = ord[j];
            ord[j] = ord[j - 1], ord[j - 1] = t;
        }
    float w[64];
    if (a->moe_routing == FP4_MOE_SOFTMAX_TOPK) {
        for (int j = 0; j < K; j++)
            w[j] = p[ord[j]];
        if (a->moe_norm_topk) {
            const float t = warp_sum(w, K, 1);
            for (int j = 0; j < K; j++)
                w[j] = w[j] / t;
        }
    } else {
        for (int j = 0; j < K; j++)
            w[j] = fp4p_exp(r[ord[j]] - r[ord[0]]);
        const float t = warp_sum(w, K, 1);
        for (int j = 0; j < K; j++)
            w[j] = w[j] / t;
    }
    float *g = malloc(sizeof(float) * (size_t)F), *u = malloc(sizeof(float) * (size_t)F),
          *y = malloc(sizeof(float) * (size_t)H);
    for (int j = 0; j < K; j++) {
        oracle_project(expert_w(m, l, ord[j], 0), h, g);
        oracle_project(expert_w(m, l, ord[j], 1), h, u);
        for (int64_t i = 0; i < F; i++)
            g[i] = (g[i] / (1.0f + fp4p_exp(-g[i]))) * u[i];
        oracle_project(expert_w(m, l, ord[j], 2), g, y);
        for (int64_t i = 0; i < H; i++)
            out[i] = j ? out[i] + w[j] * y[i] : w[j] * y[i];
    }
    free(r), free(p), free(ord), free(g), free(u), free(y);
}

int rtfx_oracle_exact(const fp4_model *m, const fp4_arch *a, const int32_t *tok, int Tn, float *logits) {
    if (a->qk_permuted) return -1;
    const int64_t H = a->hidden, D = a->head_dim, NH = a->n_heads, NKV = a->n_kv_heads, F = a->ffn,
                  V = a->vocab;
    const int64_t Q = NH * D, KV = NKV * D, half = D / 2, G = NH / NKV;
    float *x = calloc((size_t)(Tn * H), 4), *h = calloc((size_t)(Tn * H), 4),
          *q = calloc((size_t)(Tn * Q), 4);
    float *k = calloc((size_t)(Tn * KV), 4), *v = calloc((size_t)(Tn * KV), 4),
          *o = calloc((size_t)(Tn * Q), 4);
    float *t = calloc((size_t)(Tn * (H > F ? H : F)), 4), *g = calloc((size_t)F, 4),
          *u = calloc((size_t)F, 4), *e = calloc((size_t)Tn, 4);
    const fp4_tensor *emb = fp4_model_find(m, "model.embed_tokens.weight");
    for (int p = 0; p < Tn; p++)
        fp4_tensor_dequant_rows(emb, tok[p], tok[p] + 1, x + p * H);
    for (int l = 0; l < a->n_layers; l++) {
        float *n1 = widen(T(m, "model.layers.%d.input_layernorm.weight", l)),
              *n2 = widen(T(m, "model.layers.%d.post_attention_layernorm.weight", l));
        float *bq = a->qkv_bias ? widen(T(m, "model.layers.%d.self_attn.q_proj.bias", l)) : NULL;
        float *bk = a->qkv_bias ? widen(T(m, "model.layers.%d.self_attn.k_proj.bias", l)) : NULL;
        float *bv = a->qkv_bias ? widen(T(m, "model.layers.%d.self_attn.v_proj.bias", l)) : NULL;
        float *qn = a->qk_norm ? widen(T(m, "model.layers.%d.self_attn.q_norm.weight", l)) : NULL;
        float *kn = a->qk_norm ? widen(T(m, "model.layers.%d.self_attn.k_norm.weight", l)) : NULL;
        for (int p = 0; p < Tn; p++) {
            oracle_rmsnorm(x + p * H, n1, H, a->rms_eps, h + p * H);
            oracle_project(T(m, "model.layers.%d.self_attn.q_proj.weight", l), h + p * H, q + p * Q);
            oracle_project(T(m, "model.layers.%d.self_attn.k_proj.weight", l), h + p * H, k + p * KV);
            oracle_project(T(m, "model.layers.%d.self_attn.v_proj.weight", l), h + p * H, v + p * KV);
            for (int64_t i = 0; bq && i < Q; i++)
                q[p * Q + i] += bq[i];
            for (int64_t i = 0; bk && i < KV; i++)
                k[p * KV + i] += bk[i], v[p * KV + i] += bv[i];
            for (int64_t hh = 0; qn && hh < NH; hh++)
                oracle_rmsnorm(q + p * Q + hh * D, qn, D, a->rms_eps, q + p * Q + hh * D);
            for (int64_t hh = 0; kn && hh < NKV; hh++)
                oracle_rmsnorm(k + p * KV + hh * D, kn, D, a->rms_eps, k + p * KV + hh * D);
            for (int64_t hh = 0; hh < NH + NKV; hh++) {
                float *r = hh < NH ? q + p * Q + hh * D : k + p * KV + (hh - NH) * D;
                for (int64_t i = 0; i < half; i++) {
                    float c = (float)cos((double)p * inv_freq64(a, (int)i)),
                          s = (float)sin((double)p * inv_freq64(a, (int)i));
                    float x0 = r[i], x1 = r[i + half];
                    r[i] = x0 * c - x1 * s;
                    r[i + half] = x1 * c + x0 * s;
                }
            }
            for (int64_t i = 0; i < KV; i++)
                k[p * KV + i] = fp4_round_f16(k[p * KV + i]), v[p * KV + i] = fp4_round_f16(v[p * KV + i]);
        }
        const float scale = (float)(1.0 / sqrt((double)D));
        for (int p = 0; p < Tn; p++)
            for (int64_t hq = 0; hq < NH; hq++) {
                const int64_t hk = hq / G;
                float mx = 0;
                for (int j = 0; j <= p; j++) {
                    e[j] = warp_dot(q + p * Q + hq * D, k + j * KV + hk * D, D) * scale;
                    if (j == 0 || e[j] > mx) mx = e[j];
                }
                for (int j = 0; j <= p; j++)
                    e[j] = fp4p_exp(e[j] - mx);
                float den = warp_sum(e, p + 1, 1);
                for (int64_t d = 0; d < D; d++) {
                    for (int j = 0; j <= p; j++)
                        t[j] = e[j] * v[j * KV + hk * D + d];
                    o[p * Q + hq * D + d] = warp_sum(t, p + 1, 1) / den;
                }
            }
        for (int p = 0; p < Tn; p++) {
            oracle_project(T(m, "model.layers.%d.self_attn.o_proj.weight", l), o + p * Q, t);
            for (int64_t i = 0; i < H; i++)
                x[p * H + i] += t[i];
            oracle_rmsnorm(x + p * H, n2, H, a->rms_eps, h + p * H);
            if (fp4_arch_layer_moe(a, l)) {
                oracle_moe(m, a, l, h + p * H, t);
                for (int64_t i = 0; i < H; i++)
                    x[p * H + i] += t[i];
                continue;
            }
            oracle_project(T(m, "model.layers.%d.mlp.gate_proj.weight", l), h + p * H, g);
            oracle_project(T(m, "model.layers.%d.mlp.up_proj.weight", l), h + p * H, u);
            for (int64_t i = 0; i < F; i++)
                g[i] = (g[i] / (1.0f + fp4p_exp(-g[i]))) * u[i];
            oracle_project(T(m, "model.layers.%d.mlp.down_proj.weight", l), g, t);
            for (int64_t i = 0; i < H; i++)
                x[p * H + i] += t[i];
        }
        free(n1), free(n2), free(bq), free(bk), free(bv), free(qn), free(kn);
    }
    float *fn = widen(fp4_model_find(m, "model.norm.weight"));
    const fp4_tensor *head = a->tied_head ? emb : fp4_model_find(m, "lm_head.weight");
    for (int p = 0; p < Tn; p++) {
        oracle_rmsnorm(x + p * H, fn, H, a->rms_eps, h);
        oracle_project(head, h, logits + (int64_t)p * V);
    }
    free(fn), free(x), free(h), free(q), free(k), free(v), free(o), free(t), free(g), free(u), free(e);
    return 0;
}

/* ------------------------------------------------------------------ the f64 reference */

static double *widen64(const fp4_tensor *t) {
    float *f = widen(t);
    int64_t n = rows_of(t) * t->ne[0];
    double *d = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        d[i] = f[i];
    free(f);
    return d;
}
static void mv64(const double *w, int64_t n_out, int64_t n_in, const double *x, double *y) {
    for (int64_t r = 0; r < n_out; r++) {
        double acc = 0;
        for (int64_t i = 0; i < n_in; i++)
            acc += w[r * n_in + i] * x[i];
        y[r] = acc;
    }
}
static void rms64(const double *x, const double *w, int64_t n, double eps, double *y) {
    double ss = 0;
    for (int64_t i = 0; i < n; i++)
        ss += x[i] * x[i];
    double inv = 1.0 / sqrt(ss / (double)n + eps);
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] * inv * w[i];
}

/* a MoE layer's MLP in double: softmax and top k in double (the same stable order), experts dense */
static void ref_moe(const fp4_model *m, const fp4_arch *a, int l, const double *h, double *out) {
    const int64_t E = a->n_experts, H = a->hidden, F = a->moe_ffn;
    const int K = (int)a->n_experts_used;
    char nm[200];
    snprintf(nm, sizeof nm, "model.layers.%d.%s.gate.weight", l, moe_mid(m, l));
    double *Wr = widen64(fp4_model_find(m, nm)), *r = calloc((size_t)E, sizeof(double));
    int *ord = malloc(sizeof(int) * (size_t)E);
    mv64(Wr, E, H, h, r);
    double mx = r[0], s = 0, w[64], t = 0;
    for (int64_t i = 1; i < E; i++)
        mx = r[i] > mx ? r[i] : mx;
    for (int64_t i = 0; i < E; i++) /* stable descending order of the logits (= of the softmax) */
        for (int64_t j = ord[i] = (int)i; j > 0 && r[ord[j]] > r[ord[j - 1]]; j--) {
            int x = ord[j];
            ord[j] = ord[j - 1], ord[j - 1] = x;
        }
    for (int64_t i = 0; i < E; i++)
        s += exp(r[i] - mx);
    for (int j = 0; j < K; j++)
        t += (w[j] = exp(r[ord[j]] - mx) / (a->moe_routing == FP4_MOE_SOFTMAX_TOPK ? s : 1.0));
    if (a->moe_routing == FP4_MOE_TOPK_SOFTMAX || a->moe_norm_topk)
        for (int j = 0; j < K; j++)
            w[j] /= t;
    double *g = malloc(sizeof(double) * (size_t)F), *u = malloc(sizeof(double) * (size_t)F),
           *y = malloc(sizeof(double) * (size_t)H);
    for (int64_t i = 0; i < H; i++)
        out[i] = 0;
    for (int j = 0; j < K; j++) {
        double *Wg = widen64(expert_w(m, l, ord[j], 0)), *Wu = widen64(expert_w(m, l, ord[j], 1)),
               *Wd = widen64(expert_w(m, l, ord[j], 2));
        mv64(Wg, F, H, h, g), mv64(Wu, F, H, h, u);
        for (int64_t i = 0; i < F; i++)
            g[i] = g[i] / (1 + exp(-g[i])) * u[i];
        mv64(Wd, H, F, g, y);
        for (int64_t i = 0; i < H; i++)
            out[i] += w[j] * y[i];
        free(Wg), free(Wu), free(Wd);
    }
    free(Wr), free(r), free(ord), free(g), free(u), free(y);
}

int rtfx_reference_f64(const fp4_model *m, const fp4_arch *a, const int32_t *tok, int Tn, double *logits) {
    if (a->qk_permuted) return -1;
    const int64_t H = a->hidden, D = a->head_dim, NH = a->n_heads, NKV = a->n_kv_heads, F = a->ffn,
                  V = a->vocab;
    const int64_t Q = NH * D, KV = NKV * D, half = D / 2, G = NH / NKV;
    double *x = calloc((size_t)(Tn * H), 8), *h = calloc((size_t)(Tn * H), 8),
           *q = calloc((size_t)(Tn * Q), 8);
    double *k = calloc((size_t)(Tn * KV), 8), *v = calloc((size_t)(Tn * KV), 8),
           *o = calloc((size_t)(Tn * Q), 8);
    double *t = calloc((size_t)(H > F ? H : F), 8), *g = calloc((size_t)F, 8), *u = calloc((size_t)F, 8),
           *e = calloc((size_t)Tn, 8);
    const fp4_tensor *emb = fp4_model_find(m, "model.embed_tokens.weight");
    double *E = widen64(emb);
    for (int p = 0; p < Tn; p++)
        memcpy(x + p * H, E + (int64_t)tok[p] * H, sizeof(double) * (size_t)H);
    for (int l = 0; l < a->n_layers; l++) {
        double *n1 = widen64(T(m, "model.layers.%d.input_layernorm.weight", l)),
               *n2 = widen64(T(m, "model.layers.%d.post_attention_layernorm.weight", l));
        double *Wq = widen64(T(m, "model.layers.%d.self_attn.q_proj.weight", l)),
               *Wk = widen64(T(m, "model.layers.%d.self_attn.k_proj.weight", l));
        double *Wv = widen64(T(m, "model.layers.%d.self_attn.v_proj.weight", l)),
               *Wo = widen64(T(m, "model.layers.%d.self_attn.o_proj.weight", l));
        const int moe = fp4_arch_layer_moe(a, l);
        double *Wg = moe ? NULL : widen64(T(m, "model.layers.%d.mlp.gate_proj.weight", l)),
               *Wu = moe ? NULL : widen64(T(m, "model.layers.%d.mlp.up_proj.weight", l));
        double *Wd = moe ? NULL : widen64(T(m, "model.layers.%d.mlp.down_proj.weight", l));
        double *bq = a->qkv_bias ? widen64(T(m, "model.layers.%d.self_attn.q_proj.bias", l)) : NULL;
        double *bk = a->qkv_bias ? widen64(T(m, "model.layers.%d.self_attn.k_proj.bias", l)) : NULL;
        double *bv = a->qkv_bias ? widen64(T(m, "model.layers.%d.self_attn.v_proj.bias", l)) : NULL;
        double *qn = a->qk_norm ? widen64(T(m, "model.layers.%d.self_attn.q_norm.weight", l)) : NULL;
        double *kn = a->qk_norm ? widen64(T(m, "model.layers.%d.self_attn.k_norm.weight", l)) : NULL;
        for (int p = 0; p < Tn; p++) {
            rms64(x + p * H, n1, H, a->rms_eps, h + p * H);
            mv64(Wq, Q, H, h + p * H, q + p * Q), mv64(Wk, KV, H, h + p * H, k + p * KV),
                mv64(Wv, KV, H, h + p * H, v + p * KV);
            for (int64_t i = 0; bq && i < Q; i++)
                q[p * Q + i] += bq[i];
            for (int64_t i = 0; bk && i < KV; i++)
                k[p * KV + i] += bk[i], v[p * KV + i] += bv[i];
            for (int64_t hh = 0; qn && hh < NH; hh++)
                rms64(q + p * Q + hh * D, qn, D, a->rms_eps, q + p * Q + hh * D);
            for (int64_t hh = 0; kn && hh < NKV; hh++)
                rms64(k + p * KV + hh * D, kn, D, a->rms_eps, k + p * KV + hh * D);
            for (int64_t hh = 0; hh < NH + NKV; hh++) {
                double *r = hh < NH ? q + p * Q + hh * D : k + p * KV + (hh - NH) * D;
                for (int64_t i = 0; i < half; i++) {
                    double c = cos(p * inv_freq64(a, (int)i)), s = sin(p * inv_freq64(a, (int)i)), x0 = r[i],
                           x1 = r[i + half];
                    r[i] = x0 * c - x1 * s;
                    r[i + half] = x1 * c + x0 * s;
                }
            }
        }
        const double scale = 1.0 / sqrt((double)D);
        for (int p = 0; p < Tn; p++)
            for (int64_t hq = 0; hq < NH; hq++) {
                const int64_t hk = hq / G;
                double mx = -1e300, den = 0;
                for (int j = 0; j <= p; j++) {
                    double d = 0;
                    for (int64_t i = 0; i < D; i++)
                        d += q[p * Q + hq * D + i] * k[j * KV + hk * D + i];
                    e[j] = d * scale;
                    if (e[j] > mx) mx = e[j];
                }
                for (int j = 0; j <= p; j++)
                    den += (e[j] = exp(e[j] - mx));
                for (int64_t d = 0; d < D; d++) {
                    double acc = 0;
                    for (int j = 0; j <= p; j++)
                        acc += e[j] * v[j * KV + hk * D + d];
                    o[p * Q + hq * D + d] = acc / den;
                }
            }
        for (int p = 0; p < Tn; p++) {
            mv64(Wo, H, Q, o + p * Q, t);
            for (int64_t i = 0; i < H; i++)
                x[p * H + i] += t[i];
            rms64(x + p * H, n2, H, a->rms_eps, h + p * H);
            if (moe) {
                ref_moe(m, a, l, h + p * H, t);
                for (int64_t i = 0; i < H; i++)
                    x[p * H + i] += t[i];
                continue;
            }
            mv64(Wg, F, H, h + p * H, g), mv64(Wu, F, H, h + p * H, u);
            for (int64_t i = 0; i < F; i++)
                g[i] = g[i] / (1 + exp(-g[i])) * u[i];
            mv64(Wd, H, F, g, t);
            for (int64_t i = 0; i < H; i++)
                x[p * H + i] += t[i];
        }
        free(n1), free(n2), free(Wq), free(Wk), free(Wv), free(Wo), free(Wg), free(Wu), free(Wd), free(bq),
            free(bk), free(bv), free(qn), free(kn);
    }
    double *fn = widen64(fp4_model_find(m, "model.norm.weight"));
    double *Wh = a->tied_head ? E : widen64(fp4_model_find(m, "lm_head.weight"));
    for (int p = 0; p < Tn; p++) {
        rms64(x + p * H, fn, H, a->rms_eps, h);
        mv64(Wh, V, H, h, logits + (int64_t)p * V);
    }
    if (Wh != E) free(Wh);
    free(E), free(fn), free(x), free(h), free(q), free(k), free(v), free(o), free(t), free(g), free(u),
        free(e);
    return 0;
}
