/* bind.c — tensor names → layer slots, for Hugging Face names and llama.cpp's GGUF names. Every
 * slot's shape and type is checked against the architecture; a missing tensor, a misshapen one
 * and a tensor nobody binds are refused by name (err->rule bind.missing / bind.shape /
 * bind.dtype / bind.unexpected). Nothing is read but the tensor descriptors. */
#include "runtime/rt_impl.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { DIM_H, DIM_Q, DIM_KV, DIM_F, DIM_D, DIM_V, DIM_NONE };
/* DeepSeek-V3 */
enum { DIM_O = DIM_NONE + 1, DIM_QL, DIM_KVA, DIM_KVL, DIM_KVB, DIM_SH, DIM_E, DIM_NOPE, DIM_VH };
/* when a row applies (row_applies) */
enum {
    N_ALL, N_BIAS, N_QKNORM, N_QPLAIN, N_QLORA, N_GQA, N_MLA, N_SHARED, N_EXPBIAS, N_KVB, N_KVB_SPLIT,
    N_NOT_GEMMA, N_GEMMA /* Gemma 3's four norms per block */
};
/* what a slot holds: norm vector, weight matrix, bias vector, a per-head stack of matrices */
enum { K_NORM, K_PROJ, K_BIAS, K_3D };

static const struct slot_row {
    int slot;
    const char *hf, *gguf;       /* printf patterns with the layer index                      */
    int kind, n_in, n_out, need; /* need: N_*                                                 */
} slot_rows[] = {
    {FP4_LW_ATTN_NORM, "model.layers.%d.input_layernorm.weight", "blk.%d.attn_norm.weight", K_NORM, DIM_H,
     DIM_NONE, 0},
    {FP4_LW_Q, "model.layers.%d.self_attn.q_proj.weight", "blk.%d.attn_q.weight", K_PROJ, DIM_H, DIM_Q,
     N_QPLAIN},
    {FP4_LW_K, "model.layers.%d.self_attn.k_proj.weight", "blk.%d.attn_k.weight", K_PROJ, DIM_H, DIM_KV,
     N_GQA},
    {FP4_LW_V, "model.layers.%d.self_attn.v_proj.weight", "blk.%d.attn_v.weight", K_PROJ, DIM_H, DIM_KV,
     N_GQA},
    {FP4_LW_O, "model.layers.%d.self_attn.o_proj.weight", "blk.%d.attn_output.weight", K_PROJ, DIM_O, DIM_H,
     0},
    /* DeepSeek-V3's latent attention (llama.cpp deepseek2 names) */
    {FP4_LW_Q_A, "model.layers.%d.self_attn.q_a_proj.weight", "blk.%d.attn_q_a.weight", K_PROJ, DIM_H, DIM_QL,
     N_QLORA},
    {FP4_LW_Q_A_NORM, "model.layers.%d.self_attn.q_a_layernorm.weight", "blk.%d.attn_q_a_norm.weight", K_NORM,
     DIM_QL, DIM_NONE, N_QLORA},
    {FP4_LW_Q, "model.layers.%d.self_attn.q_b_proj.weight", "blk.%d.attn_q_b.weight", K_PROJ, DIM_QL, DIM_Q,
     N_QLORA},
    {FP4_LW_KV_A, "model.layers.%d.self_attn.kv_a_proj_with_mqa.weight", "blk.%d.attn_kv_a_mqa.weight",
     K_PROJ, DIM_H, DIM_KVA, N_MLA},
    {FP4_LW_KV_A_NORM, "model.layers.%d.self_attn.kv_a_layernorm.weight", "blk.%d.attn_kv_a_norm.weight",
     K_NORM, DIM_KVL, DIM_NONE, N_MLA},
    {FP4_LW_KV_B, "model.layers.%d.self_attn.kv_b_proj.weight", "blk.%d.attn_kv_b.weight", K_PROJ, DIM_KVL,
     DIM_KVB, N_KVB},
    /* llama.cpp's newer files split kv_b per head (GGUF only; n_in, n_out: the first two ne) */
    {FP4_LW_K_B, NULL, "blk.%d.attn_k_b.weight", K_3D, DIM_NOPE, DIM_KVL, N_KVB_SPLIT},
    {FP4_LW_V_B, NULL, "blk.%d.attn_v_b.weight", K_3D, DIM_KVL, DIM_VH, N_KVB_SPLIT},
    {FP4_LW_SH_GATE, "model.layers.%d.mlp.shared_experts.gate_proj.weight", "blk.%d.ffn_gate_shexp.weight",
     K_PROJ, DIM_H, DIM_SH, N_SHARED},
    {FP4_LW_SH_UP, "model.layers.%d.mlp.shared_experts.up_proj.weight", "blk.%d.ffn_up_shexp.weight", K_PROJ,
     DIM_H, DIM_SH, N_SHARED},
    {FP4_LW_SH_DOWN, "model.layers.%d.mlp.shared_experts.down_proj.weight", "blk.%d.ffn_down_shexp.weight",
     K_PROJ, DIM_SH, DIM_H, N_SHARED},
    {FP4_LW_EXP_BIAS, "model.layers.%d.mlp.gate.e_score_correction_bias", "blk.%d.exp_probs_b.bias", K_BIAS,
     DIM_E, DIM_NONE, N_EXPBIAS},
    {FP4_LW_Q_BIAS, "model.layers.%d.self_attn.q_proj.bias", "blk.%d.attn_q.bias", K_BIAS, DIM_Q, DIM_NONE,
     N_BIAS},
    {FP4_LW_K_BIAS, "model.layers.%d.self_attn.k_proj.bias", "blk.%d.attn_k.bias", K_BIAS, DIM_KV, DIM_NONE,
     N_BIAS},
    {FP4_LW_V_BIAS, "model.layers.%d.self_attn.v_proj.bias", "blk.%d.attn_v.bias", K_BIAS, DIM_KV, DIM_NONE,
     N_BIAS},
    {FP4_LW_Q_NORM, "model.layers.%d.self_attn.q_norm.weight", "blk.%d.attn_q_norm.weight", K_NORM, DIM_D,
     DIM_NONE, N_QKNORM},
    {FP4_LW_K_NORM, "model.layers.%d.self_attn.k_norm.weight", "blk.%d.attn_k_norm.weight", K_NORM, DIM_D,
     DIM_NONE, N_QKNORM},
    {FP4_LW_FFN_NORM, "model.layers.%d.post_attention_layernorm.weight", "blk.%d.ffn_norm.weight", K_NORM,
     DIM_H, DIM_NONE, N_NOT_GEMMA},
    /* Gemma 3's four norms: its post_attention_layernorm is the attention output's */
    {FP4_LW_ATTN_POST_NORM, "model.layers.%d.post_attention_layernorm.weight",
     "blk.%d.post_attention_norm.weight", K_NORM, DIM_H, DIM_NONE, N_GEMMA},
    {FP4_LW_FFN_NORM, "model.layers.%d.pre_feedforward_layernorm.weight", "blk.%d.ffn_norm.weight", K_NORM,
     DIM_H, DIM_NONE, N_GEMMA},
    {FP4_LW_FFN_POST_NORM, "model.layers.%d.post_feedforward_layernorm.weight", "blk.%d.post_ffw_norm.weight",
     K_NORM, DIM_H, DIM_NONE, N_GEMMA},
    {FP4_LW_GATE, "model.layers.%d.mlp.gate_proj.weight", "blk.%d.ffn_gate.weight", K_PROJ, DIM_H, DIM_F, 0},
    {FP4_LW_UP, "model.layers.%d.mlp.up_proj.weight", "blk.%d.ffn_up.weight", K_PROJ, DIM_H, DIM_F, 0},
    {FP4_LW_DOWN, "model.layers.%d.mlp.down_proj.weight", "blk.%d.ffn_down.weight", K_PROJ, DIM_F, DIM_H, 0},
};
static const char *const g_hf[3] = {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"};
static const char *const g_gguf[3] = {"token_embd.weight", "output_norm.weight", "output.weight"};

/* Gemma3ForConditionalGeneration holds the text model under language_model.model.* (transformers
 * 4.50: language_model.lm_head) or model.language_model.* (4.52 on: lm_head); the vision tower and
 * projector beside it are not the text model's and are left unread */
static const struct hf_prefix {
    const char *model, *head;
} hf_prefixes[] = {
    {"model.", "lm_head.weight"},
    {"language_model.model.", "language_model.lm_head.weight"},
    {"model.language_model.", "lm_head.weight"},
};
static const char *const vision_parts[] = {"vision_tower.", "multi_modal_projector.", "model.vision_tower.",
                                           "model.multi_modal_projector."};

/* an HF name pattern ("model.layers...") under the checkpoint's prefix */
static void hf_name(char *out, size_t n, const struct hf_prefix *p, const char *pat, int layer) {
    const size_t l = strlen(p->model);
    if (l >= n) return;
    memcpy(out, p->model, l);
    snprintf(out + l, n - l, pat + strlen("model."), layer);
}

/* tensors that carry nothing the step needs and may be present: old checkpoints' rotary
 * inv_freq buffers, and ModelOpt's FP8 KV-cache scales (k_scale / v_scale scalars: this runtime
 * keeps the cache in F16, which needs no scale) */
static int ends(const char *s, const char *x) {
    size_t a = strlen(s), b = strlen(x);
    return a >= b && !strcmp(s + a - b, x);
}
static int ignorable(const fp4_tensor *t, int multimodal) {
    for (size_t i = 0; multimodal && i < sizeof vision_parts / sizeof vision_parts[0]; i++)
        if (!strncmp(t->name, vision_parts[i], strlen(vision_parts[i]))) return 1;
    const int scalar = t->type == FP4_TYPE_F32 && (t->n_dims == 0 || (t->n_dims == 1 && t->ne[0] == 1));
    /* rope_freqs.weight: llama.cpp's Llama 3.1 rope factors, read from config.json's rope_scaling
     * instead (a llama.cpp GGUF without config.json is refused before binding: arch.c) */
    return ends(t->name, "rotary_emb.inv_freq") || !strcmp(t->name, "rope_freqs.weight") ||
           (scalar && (ends(t->name, ".k_scale") || ends(t->name, ".v_scale")));
}

static int64_t dim_of(const fp4_arch *a, int d) {
    switch (d) {
    case DIM_H:
        return a->hidden;
    case DIM_Q:
        return a->n_heads * a->head_dim;
    case DIM_KV:
        return a->n_kv_heads * a->head_dim;
    case DIM_F:
        return a->ffn;
    case DIM_D:
        return a->head_dim;
    case DIM_V:
        return a->vocab;
    case DIM_O:
        return a->n_heads * (a->kv_lora_rank ? a->v_head_dim : a->head_dim);
    case DIM_QL:
        return a->q_lora_rank;
    case DIM_KVA:
        return a->kv_lora_rank + a->qk_rope_dim;
    case DIM_KVL:
        return a->kv_lora_rank;
    case DIM_KVB:
        return a->n_heads * (a->qk_nope_dim + a->v_head_dim);
    case DIM_SH:
        return a->n_shared_experts * a->moe_ffn;
    case DIM_E:
        return a->n_experts;
    case DIM_NOPE:
        return a->qk_nope_dim;
    case DIM_VH:
        return a->v_head_dim;
    default:
        return 1;
    }
}

static int row_applies(const fp4_arch *a, int need, int64_t L, int split) {
    const int mla = a->kv_lora_rank > 0, moe = fp4_arch_layer_moe(a, L);
    switch (need) {
    case N_KVB:
        return mla && !split;
    case N_KVB_SPLIT:
        return mla && split;
    case N_BIAS:
        return a->qkv_bias;
    case N_QKNORM:
        return a->qk_norm;
    case N_QPLAIN:
        return !mla || !a->q_lora_rank;
    case N_QLORA:
        return mla && a->q_lora_rank;
    case N_GQA:
        return !mla;
    case N_MLA:
        return mla;
    case N_SHARED:
        return moe && a->n_shared_experts > 0;
    case N_EXPBIAS:
        return moe && a->moe_routing == FP4_MOE_SIGMOID_GROUP;
    case N_NOT_GEMMA:
        return a->family != FP4_ARCH_GEMMA3;
    case N_GEMMA:
        return a->family == FP4_ARCH_GEMMA3;
    default:
        return 1;
    }
}

/* DeepSeek's multi-token-prediction layers (num_nextn_predict_layers), stored after the last
 * layer: loaded by no step (the model runs without them; inspect lists them) */
static int mtp_tensor(const fp4_arch *a, const char *name) {
    long long l;
    int n = 0;
    if (a->n_nextn <= 0) return 0;
    if (sscanf(name, "model.layers.%lld.%n", &l, &n) != 1 || !n) {
        n = 0;
        if (sscanf(name, "blk.%lld.%n", &l, &n) != 1 || !n) return 0;
    }
    return l >= a->n_layers && l < a->n_layers + a->n_nextn;
}

static int is_dense(fp4_type t) {
    return t == FP4_TYPE_F32 || t == FP4_TYPE_F16 || t == FP4_TYPE_BF16;
}
static int is_matrix_type(fp4_type t) {
    return is_dense(t) || t == FP4_TYPE_NVFP4_E2M1 || t == FP4_TYPE_Q4_K || t == FP4_TYPE_Q6_K ||
           t == FP4_TYPE_F8_E4M3FN; /* FP8 weights (the loader gives them their scales) */
}

static fp4_status check(const fp4_tensor *t, int kind, int64_t n_in, int64_t n_out, int64_t n3,
                        fp4_error *err) {
    if (kind == K_3D) {
        if (!is_dense(t->type) && t->type != FP4_TYPE_Q4_K && t->type != FP4_TYPE_Q6_K)
            return fp4_fail(err, FP4_ERR_DTYPE, NULL, t->name, "bind.dtype",
                            "type %d is not a type the latent attention widens (F32/F16/BF16, Q4_K, Q6_K)",
                            (int)t->type);
        if (t->n_dims != 3 || t->ne[0] != n_in || t->ne[1] != n_out || t->ne[2] != n3)
            return fp4_fail(err, FP4_ERR_SHAPE, NULL, t->name, "bind.shape",
                            "expected ne [%lld, %lld, %lld heads], found %d dims [%lld, %lld, %lld]",
                            (long long)n_in, (long long)n_out, (long long)n3, (int)t->n_dims,
                            (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2]);
        return FP4_OK;
    }
    if (kind != K_PROJ) {
        if (!is_dense(t->type))
            return fp4_fail(err, FP4_ERR_DTYPE, NULL, t->name, "bind.dtype",
                            "a norm/bias vector must be F32, F16 or BF16 (is type %d)", (int)t->type);
        int64_t n = 1;
        for (int i = 0; i < t->n_dims; i++)
            n *= t->ne[i];
        if (t->n_dims > 1 && t->ne[1] != 1) n = -1;
        if (n != n_in)
            return fp4_fail(err, FP4_ERR_SHAPE, NULL, t->name, "bind.shape",
                            "expected a vector of %lld values, found %lld dims (ne0 = %lld)", (long long)n_in,
                            (long long)t->n_dims, (long long)t->ne[0]);
        return FP4_OK;
    }
    if (!is_matrix_type(t->type))
        return fp4_fail(err, FP4_ERR_DTYPE, NULL, t->name, "bind.dtype",
                        "type %d is not a weight type the runtime projects", (int)t->type);
    if (t->n_dims != 2 || t->ne[0] != n_in || t->ne[1] != n_out)
        return fp4_fail(err, FP4_ERR_SHAPE, NULL, t->name, "bind.shape",
                        "expected [%lld out, %lld in], found %d dims [%lld out, %lld in]", (long long)n_out,
                        (long long)n_in, (int)t->n_dims, (long long)(t->n_dims > 1 ? t->ne[1] : 1),
                        (long long)t->ne[0]);
    return FP4_OK;
}

/* the model's tensors are sorted by name (fp4_model_find searches them so) */
static int64_t index_of(const fp4_model *m, const fp4_tensor *t) {
    int64_t lo = 0, hi = fp4_model_n_tensors(m) - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int r = strcmp(fp4_model_tensor(m, mid)->name, t->name);
        if (!r) return mid;
        if (r < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return fp4_model_n_tensors(m); /* not reached: t came from fp4_model_find */
}

void fp4_rt_bound_free(fp4_rt_bound *b) {
    if (!b) return;
    free(b->layer), free(b->moe), free(b->moe_views), free(b->moe_names);
    memset(b, 0, sizeof *b);
}

fp4_status fp4_rt_bind(const fp4_model *m, const fp4_arch *a, fp4_rt_bound *b, fp4_error *err) {
    memset(b, 0, sizeof *b);
    const int gg = fp4_model_find(m, "token_embd.weight") != NULL;
    const struct hf_prefix *hp = &hf_prefixes[0];
    for (size_t i = 1; !gg && a->family == FP4_ARCH_GEMMA3 && i < sizeof hf_prefixes / sizeof hf_prefixes[0];
         i++) {
        char probe[FP4_MAX_NAME];
        hf_name(probe, sizeof probe, &hf_prefixes[i], g_hf[0], 0);
        if (fp4_model_find(m, probe)) hp = &hf_prefixes[i];
    }
    char gname[3][FP4_MAX_NAME];
    hf_name(gname[0], sizeof gname[0], hp, g_hf[0], 0);
    hf_name(gname[1], sizeof gname[1], hp, g_hf[1], 0);
    snprintf(gname[2], sizeof gname[2], "%s", hp->head);
    const char *const hn[3] = {gname[0], gname[1], gname[2]};
    const char *const *gn = gg ? g_gguf : hn;
    b->norm_shift = a->family == FP4_ARCH_GEMMA3 && !gg; /* llama.cpp's converter stores 1 + w */
    const int64_t nt = fp4_model_n_tensors(m);
    uint8_t *used = calloc((size_t)nt + 1, 1);
    b->layer = calloc((size_t)a->n_layers * FP4_LW_COUNT_, sizeof *b->layer);
    if (!used || !b->layer) {
        free(used);
        fp4_rt_bound_free(b);
        return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
    }
    fp4_status st = FP4_OK;
    char name[FP4_MAX_NAME];
#define MARK(t) used[index_of(m, t)] = 1
    /* globals */
    const fp4_tensor *g[3];
    for (int i = 0; i < 3; i++)
        g[i] = fp4_model_find(m, gn[i]);
    if (!g[0]) {
        st = fp4_fail(err, FP4_ERR_NOT_FOUND, NULL, gn[0], "bind.missing",
                      "the token embedding %s is missing", gn[0]);
        goto out;
    }
    if (!g[1]) {
        st = fp4_fail(err, FP4_ERR_NOT_FOUND, NULL, gn[1], "bind.missing", "the output norm %s is missing",
                      gn[1]);
        goto out;
    }
    if (!a->tied_head && !g[2]) {
        st = fp4_fail(err, FP4_ERR_NOT_FOUND, NULL, gn[2], "bind.missing",
                      "the LM head %s is missing (tie_word_embeddings is false)", gn[2]);
        goto out;
    }
    if ((st = check(g[0], K_PROJ, a->hidden, a->vocab, 1, err)) ||
        (st = check(g[1], K_NORM, a->hidden, 1, 1, err)))
        goto out;
    if (g[0]->type == FP4_TYPE_NVFP4_E2M1 && g[0]->nvfp4.input_scale_inv > 0.0f) {
        st = fp4_fail(err, FP4_ERR_UNSUPPORTED, NULL, g[0]->name, "bind.dtype",
                      "a W4A4 embedding table is not supported");
        goto out;
    }
    MARK(g[0]), MARK(g[1]);
    b->tok_embd = g[0];
    b->out_norm = g[1];
    if (a->tied_head)
        b->head = g[0]; /* a present lm_head is then unexpected (below) */
    else {
        if ((st = check(g[2], K_PROJ, a->hidden, a->vocab, 1, err))) goto out;
        MARK(g[2]);
        b->head = g[2];
    }
    if (a->rope_freq_factors) {
        const fp4_tensor *rf = fp4_model_find(m, "rope_freqs.weight");
        if (!rf) {
            st = fp4_fail(err, FP4_ERR_NOT_FOUND, NULL, "rope_freqs.weight", "bind.missing",
                          "rope_freqs.weight is missing");
            goto out;
        }
        if (rf->type != FP4_TYPE_F32) {
            st = fp4_fail(err, FP4_ERR_DTYPE, NULL, rf->name, "bind.dtype",
                          "rope frequency factors must be F32");
            goto out;
        }
        if ((st = check(rf, K_NORM, a->head_dim / 2, 1, 1, err))) goto out;
        MARK(rf);
        b->rope_freqs = rf;
    }
    /* llama.cpp's split kv_b: the file says which form it holds */
    const int split = gg && a->kv_lora_rank && fp4_model_find(m, "blk.0.attn_k_b.weight");
    for (int64_t l = 0; l < a->n_layers; l++)
        for (size_t s = 0; s < sizeof slot_rows / sizeof slot_rows[0]; s++) {
            const struct slot_row *r = &slot_rows[s];
            if (!row_applies(a, r->need, l, split)) continue;
            if (fp4_arch_layer_moe(a, l) &&
                (r->slot == FP4_LW_GATE || r->slot == FP4_LW_UP || r->slot == FP4_LW_DOWN))
                continue; /* its experts: bind_moe.c */
            if (!(gg ? r->gguf : r->hf)) continue;
            if (gg)
                snprintf(name, sizeof name, r->gguf, (int)l);
            else
                hf_name(name, sizeof name, hp, r->hf, (int)l);
            const fp4_tensor *t = fp4_model_find(m, name);
            if (!t) {
                st = fp4_fail(err, FP4_ERR_NOT_FOUND, NULL, name, "bind.missing",
                              "%s is missing (layer %lld of %lld)", name, (long long)l,
                              (long long)a->n_layers);
                goto out;
            }
            if ((st = check(t, r->kind, dim_of(a, r->n_in), dim_of(a, r->n_out), a->n_heads, err))) goto out;
            MARK(t);
            b->layer[l * FP4_LW_COUNT_ + r->slot] = t;
        }
    if (a->n_experts && (st = fp4_rt_bind_moe(m, a, b, used, gg, index_of, err))) goto out;
    for (int64_t i = 0; i < nt; i++) {
        const fp4_tensor *t = fp4_model_tensor(m, i);
        if (!used[i] && !ignorable(t, hp != &hf_prefixes[0]) && !mtp_tensor(a, t->name)) {
            st = fp4_fail(err, FP4_ERR_FORMAT, NULL, t->name, "bind.unexpected",
                          "%s is not part of a %s model with these dimensions", t->name,
                          fp4_arch_family_name(a->family));
            goto out;
        }
    }
#undef MARK
out:
    free(used);
    if (st) fp4_rt_bound_free(b);
    return st;
}
