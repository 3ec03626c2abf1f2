/* ggml_arch.c — a Hugging Face checkpoint written as llama.cpp's own GGUF (layout gguf-ggml):
 * llama.cpp's tensor names (blk.N.attn_q.weight, ...), its architecture metadata
 * (general.architecture, <arch>.block_count, ...) and, for the Llama family (llama, mistral),
 * the q/k row order llama.cpp's converter (convert_hf_to_gguf.py, LlamaModel.permute) gives
 * attention: within each head of D rows, row 2i+j of the file is row j·D/2+i of the checkpoint.
 * Qwen2/Qwen3 are not permuted (llama.cpp's converter leaves them). Llama 3.1 rope scaling becomes
 * llama.cpp's rope_freqs.weight; 1-D F16/BF16 tensors are widened to F32 as its converter does.
 * The runtime reads these files back (src/runtime/bind.c: the names; src/runtime/model_access.c:
 * un-permutes Llama q/k).
 *
 * Applied to the write plan (names, a row order per entry, KVs, widened and generated entries);
 * layout_write.c moves the bytes with fp4_ggml_arch_src_row / _widen / _gen.
 * A checkpoint whose config.json names no family fp4lane maps (llama, mistral, qwen2, qwen3)
 * keeps its tensor names (llama.cpp can read such a file's tensors, not run it). The tokenizer:
 * a HF directory's tokenizer.json (layout_write.c, source_tokenizer), else llama.cpp's "none"
 * vocabulary of <arch>.vocab_size tokens (ids in, ids out), whose keys are planned here. */
#include "layout_impl.h"
#include "fp4lane_runtime.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { PERM_NONE = 0, PERM_Q, PERM_K };

static const struct { const char *hf, *gg; } global_names[] = {
    {"model.embed_tokens", "token_embd"},
    {"model.norm", "output_norm"},
    {"lm_head", "output"},
};

static const struct { const char *hf, *gg; int perm; } layer_names[] = {
    {"input_layernorm", "attn_norm", PERM_NONE},
    {"self_attn.q_proj", "attn_q", PERM_Q},
    {"self_attn.k_proj", "attn_k", PERM_K},
    {"self_attn.v_proj", "attn_v", PERM_NONE},
    {"self_attn.o_proj", "attn_output", PERM_NONE},
    {"self_attn.q_norm", "attn_q_norm", PERM_NONE},
    {"self_attn.k_norm", "attn_k_norm", PERM_NONE},
    {"post_attention_layernorm", "ffn_norm", PERM_NONE},
    {"mlp.gate_proj", "ffn_gate", PERM_NONE},
    {"mlp.up_proj", "ffn_up", PERM_NONE},
    {"mlp.down_proj", "ffn_down", PERM_NONE},
    {"mlp.gate", "ffn_gate_inp", PERM_NONE}, /* a mixture of experts' router (experts: ggml_moe.c) */
    {"block_sparse_moe.gate", "ffn_gate_inp", PERM_NONE},
};

/* Gemma 3's four norms (llama.cpp's gemma3 names): looked up before layer_names, whose
 * post_attention_layernorm is another family's FFN norm */
static const struct { const char *hf, *gg; int perm; } gemma_layer_names[] = {
    {"post_attention_layernorm", "post_attention_norm", PERM_NONE},
    {"pre_feedforward_layernorm", "ffn_norm", PERM_NONE},
    {"post_feedforward_layernorm", "post_ffw_norm", PERM_NONE},
};

enum { FAM_OTHER = 0, FAM_GEMMA = 1, FAM_DEEPSEEK = 2, FAM_MIXTRAL = 3 };

/* One name through the tables, HF -> llama.cpp (to_gg 1) or back (to_gg 0): a module stem + any
 * suffix (".weight", ".bias", ".scale", ".weight.scale2_div", ...) -> the other side's stem + the
 * same suffix. 1 when mapped; *perm: which permutation the stem takes. fam: FAM_GEMMA for Gemma 3's
 * names, FAM_DEEPSEEK for deepseek2's (ggml_deepseek.c), looked up before the common ones;
 * FAM_MIXTRAL: an expert's way back in Mixtral's spelling (ggml_moe.c). */
static int convert_name(const char *in, char *out, size_t n, int *perm, int to_gg, int fam) {
    const int gemma = fam == FAM_GEMMA;
    *perm = PERM_NONE;
    for (size_t i = 0; i < sizeof global_names / sizeof global_names[0]; i++) {
        const char *from = to_gg ? global_names[i].hf : global_names[i].gg;
        const char *to = to_gg ? global_names[i].gg : global_names[i].hf;
        size_t l = strlen(from);
        if (!strncmp(in, from, l) && in[l] == '.') return snprintf(out, n, "%s%s", to, in + l) < (int)n;
    }
    const char *pre = to_gg ? "model.layers." : "blk.", *out_pre = to_gg ? "blk." : "model.layers.";
    const size_t pl = strlen(pre);
    if (strncmp(in, pre, pl)) return 0;
    const char *s = in + pl;
    long layer = 0;
    int digits = 0;
    while (*s >= '0' && *s <= '9' && digits < 7) layer = layer * 10 + (*s++ - '0'), digits++;
    if (!digits || *s != '.' || (digits > 1 && s[-digits] == '0')) return 0;
    s++;
    for (size_t i = 0; gemma && i < sizeof gemma_layer_names / sizeof gemma_layer_names[0]; i++) {
        const char *from = to_gg ? gemma_layer_names[i].hf : gemma_layer_names[i].gg;
        const char *to = to_gg ? gemma_layer_names[i].gg : gemma_layer_names[i].hf;
        size_t l = strlen(from);
        if (!strncmp(s, from, l) && s[l] == '.')
            return snprintf(out, n, "%s%ld.%s%s", out_pre, layer, to, s + l) < (int)n;
    }
    char ds[FP4_MAX_NAME + 64];
    if (fp4_ggml_moe_map(s, ds, sizeof ds, to_gg, fam == FAM_MIXTRAL)) /* one expert of a 3-D tensor */
        return snprintf(out, n, "%s%ld.%s", out_pre, layer, ds) < (int)n;
    if (fam == FAM_DEEPSEEK && fp4_ggml_ds_map(s, ds, sizeof ds, to_gg))
        return snprintf(out, n, "%s%ld.%s", out_pre, layer, ds) < (int)n;
    for (size_t i = 0; i < sizeof layer_names / sizeof layer_names[0]; i++) {
        const char *from = to_gg ? layer_names[i].hf : layer_names[i].gg;
        const char *to = to_gg ? layer_names[i].gg : layer_names[i].hf;
        size_t l = strlen(from);
        if (!strncmp(s, from, l) && s[l] == '.') {
            *perm = layer_names[i].perm;
            return snprintf(out, n, "%s%ld.%s%s", out_pre, layer, to, s + l) < (int)n;
        }
    }
    return 0;
}
static int map_name(const char *in, char *out, size_t n, int *perm, int fam) {
    return convert_name(in, out, n, perm, 1, fam);
}
/* llama.cpp's stem + suffix -> the HF module stem + suffix (the inverse of map_name) */
static int unmap_name(const char *in, char *out, size_t n, int *perm, int fam) {
    return convert_name(in, out, n, perm, 0, fam);
}

int64_t fp4_ggml_arch_src_row(const plan_entry *e, int64_t r) {
    if (!e->perm_heads) return r;
    const int64_t heads = e->perm_heads > 0 ? e->perm_heads : -(int64_t)e->perm_heads;
    const int64_t D = e->ne[1] / heads, h = r / D, w = r % D;
    if (e->perm_heads > 0) return h * D + (w % 2) * (D / 2) + w / 2; /* HF row -> llama.cpp's order */
    return h * D + 2 * (w % (D / 2)) + w / (D / 2);                  /* and back */
}

void fp4_ggml_arch_widen(const plan_entry *e, const uint8_t *src, int64_t n, uint8_t *dst) {
    for (int64_t k = 0; k < n; k++) {
        const uint16_t h = (uint16_t)(src[2 * k] | src[2 * k + 1] << 8);
        const float f = e->widen_from == FP4_TYPE_BF16 ? fp4_bf16_to_f32(h) : fp4_f16_to_f32(h);
        fp4_wr_lef32(dst + 4 * k, e->norm_shift > 0 ? 1.0f + f : f); /* the f32 sum the runtime forms */
    }
}

/* rope_freqs.weight as llama.cpp's converter computes it (convert_hf_to_gguf.py, LlamaModel,
 * rope_type "llama3"): per rotary pair i, 1 for high frequencies, factor for low ones, and the
 * smooth interpolation between; f32 arithmetic as its torch float32 tensors do */
fp4_status fp4_ggml_arch_gen(const fp4_wsrc *src, const plan_entry *e, uint8_t *dst, fp4_error *err) {
    fp4_arch a;
    fp4_status st = fp4_arch_from_hf_config(src->config_json, &a, err);
    if (st) return st;
    if (strcmp(e->name, "rope_freqs.weight") || a.rope_scaling != FP4_ROPE_LLAMA3 ||
        e->nbytes != (uint64_t)(a.head_dim / 2) * 4)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, e->name, "ggml.gen", "no generator for this tensor");
    const float dim = (float)a.head_dim, factor = (float)a.rope_factor, lo = (float)a.rope_low_freq_factor,
                hi = (float)a.rope_high_freq_factor, old_ctx = (float)a.rope_orig_ctx;
    const float lo_wavelen = old_ctx / lo, hi_wavelen = old_ctx / hi;
    for (int64_t i = 0; i < a.head_dim / 2; i++) {
        const float freq = 1.0f / powf((float)a.rope_theta, (float)(2 * i) / dim);
        const float wavelen = (float)(2.0 * M_PI) / freq;
        float f;
        if (wavelen < hi_wavelen) f = 1.0f;
        else if (wavelen > lo_wavelen) f = factor;
        else {
            const float smooth = (old_ctx / wavelen - lo) / (hi - lo);
            f = 1.0f / ((1.0f - smooth) / factor + smooth);
        }
        fp4_wr_lef32(dst + 4 * i, f);
    }
    return FP4_OK;
}

void fp4_ggml_arch_narrow(const plan_entry *e, const uint8_t *src, int64_t n, uint8_t *dst) {
    for (int64_t k = 0; k < n; k++) {
        float f;
        memcpy(&f, src + 4 * k, 4); /* little-endian host, as the loader assumes */
        if (e->norm_shift < 0) f = f - 1.0f; /* exact (Sterbenz) for gains in [0.5, 2] */
        const uint16_t h = e->narrow_to == FP4_TYPE_BF16 ? fp4_f32_to_bf16(f) : fp4_f32_to_f16(f);
        dst[2 * k] = (uint8_t)h, dst[2 * k + 1] = (uint8_t)(h >> 8);
    }
}

static fp4_status kv_u32(plan *p, const char *arch, const char *key, int64_t v, fp4_error *err) {
    if (v < 0 || v > (int64_t)UINT32_MAX)
        return fp4_fail(err, FP4_ERR_LIMIT, NULL, NULL, "ggml.kv",
                        "%s.%s = %lld does not fit llama.cpp's u32", arch, key, (long long)v);
    plan_kv *k = fp4_plan_kv_add(p);
    if (!k) return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
    snprintf(k->key, sizeof k->key, "%s%s%s", arch ? arch : "", arch ? "." : "", key);
    k->is_u32 = 1;
    k->u = (uint32_t)v;
    return FP4_OK;
}

static fp4_status kv_f32(plan *p, const char *arch, const char *key, float v, fp4_error *err) {
    plan_kv *k = fp4_plan_kv_add(p);
    if (!k) return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
    snprintf(k->key, sizeof k->key, "%s.%s", arch, key);
    k->is_f32 = 1;
    k->f = v;
    return FP4_OK;
}

static fp4_status kv_str(plan *p, const char *key, const char *s, fp4_error *err) {
    if (fp4_plan_kv_str(p, key, s)) return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
    return FP4_OK;
}

/* Gemma 3's keys as llama.cpp's gemma3 loader reads them (src/models/gemma3.cpp): the window, the
 * layer types as a period n (layer L local when L % n < n - 1: llama.cpp's rule, the HF one
 * shifted), the local rope base, the final soft-cap. Layer types no period describes are refused. */
static fp4_status gemma_kvs(plan *p, const fp4_arch *a, const char *ga, fp4_error *err) {
    int64_t period = 0;
    for (int64_t n = 1; n <= a->n_layers && !period; n++) {
        int ok = 1;
        for (int64_t L = 0; L < a->n_layers && ok; L++)
            ok = fp4_arch_layer_local(a, L) == (L % n < n - 1);
        if (ok) period = n;
    }
    if (!period)
        return fp4_fail(
            err, FP4_ERR_UNSUPPORTED, NULL, NULL, "ggml.layer_types",
            "the layer types repeat with no period llama.cpp's %s.attention.sliding_window_pattern "
            "can state",
            ga);
    fp4_status st = kv_u32(p, ga, "attention.sliding_window", a->sliding_window, err);
    if (!st) st = kv_u32(p, ga, "attention.sliding_window_pattern", period, err);
    if (!st) st = kv_f32(p, ga, "rope.freq_base_swa", (float)a->rope_local_theta, err);
    if (!st && a->final_softcap > 0)
        st = kv_f32(p, ga, "final_logit_softcapping", (float)a->final_softcap, err);
    return st;
}

/* llama.cpp's hyperparameter keys (llama-arch.cpp LLM_KV_*) for one of the mapped families */
static fp4_status arch_kvs(plan *p, const fp4_arch *a, const char *ga, fp4_error *err) {
    const int ds = a->family == FP4_ARCH_DEEPSEEK_V3; /* latent attention: v and rope widths of their own */
    const struct { const char *key; int64_t v; } u[] = {
        {"context_length", a->n_ctx_train},     {"embedding_length", a->hidden},
        {"block_count", a->n_layers},           {"feed_forward_length", a->ffn},
        {"attention.head_count", a->n_heads},   {"attention.head_count_kv", a->n_kv_heads},
        {"attention.key_length", a->head_dim},  {"attention.value_length", ds ? a->v_head_dim : a->head_dim},
        {"rope.dimension_count", ds ? a->qk_rope_dim : a->head_dim},  {"vocab_size", a->vocab},
    };
    fp4_status st = kv_str(p, "general.architecture", ga, err);
    for (size_t i = 0; i < sizeof u / sizeof u[0] && !st; i++) st = kv_u32(p, ga, u[i].key, u[i].v, err);
    if (!st && a->n_experts > 0) st = kv_u32(p, ga, "expert_count", a->n_experts, err);
    if (!st && a->n_experts > 0) st = kv_u32(p, ga, "expert_used_count", a->n_experts_used, err);
    if (!st && (a->family == FP4_ARCH_QWEN3_MOE || ds))
        st = kv_u32(p, ga, "expert_feed_forward_length", a->moe_ffn, err);
    if (!st && ds) st = fp4_ggml_ds_kvs(p, a, err);
    if (!st) st = kv_f32(p, ga, "attention.layer_norm_rms_epsilon", a->rms_eps, err);
    if (!st) st = kv_f32(p, ga, "rope.freq_base", (float)a->rope_theta, err);
    if (!st && a->family == FP4_ARCH_GEMMA3) st = gemma_kvs(p, a, ga, err);
    if (!st && a->rope_scaling == FP4_ROPE_LINEAR) {
        char key[64];
        snprintf(key, sizeof key, "%s.rope.scaling.type", ga);
        st = kv_str(p, key, "linear", err);
        if (!st) st = kv_f32(p, ga, "rope.scaling.factor", (float)a->rope_factor, err);
    }
    /* the vocabulary: llama.cpp's "none" model (ids only); layout_write.c drops these keys for
     * the source's own tokenizer where it has one */
    if (!st) st = kv_str(p, "tokenizer.ggml.model", "none", err);
    if (!st && a->bos >= 0) st = kv_u32(p, NULL, "tokenizer.ggml.bos_token_id", a->bos, err);
    if (!st && a->n_eos > 0) st = kv_u32(p, NULL, "tokenizer.ggml.eos_token_id", a->eos[0], err);
    return st;
}

/* fp4lane.exact.<tensor>.<what> and fp4lane.scalar.<tensor> name tensors: renamed with them */
static fp4_status rename_kvs(plan *p, int fam, fp4_error *err) {
    static const char *const pre[] = {"fp4lane.exact.", "fp4lane.scalar."};
    for (int64_t i = 0; i < p->n_kv; i++)
        for (int j = 0; j < 2; j++) {
            size_t l = strlen(pre[j]);
            char mapped[FP4_MAX_NAME + 64];
            int perm;
            if (strncmp(p->kv[i].key, pre[j], l)) continue;
            if (!map_name(p->kv[i].key + l, mapped, sizeof mapped, &perm, fam))
                return fp4_fail(err, FP4_ERR_UNSUPPORTED, NULL, p->kv[i].key + l, "ggml.name_map",
                                "no llama.cpp name for this tensor");
            char key[sizeof p->kv[i].key];
            if (snprintf(key, sizeof key, "%s%s", pre[j], mapped) >= (int)sizeof key)
                return fp4_fail(err, FP4_ERR_LIMIT, NULL, mapped, "ggml.name_map", "key too long");
            memcpy(p->kv[i].key, key, sizeof key);
        }
    return FP4_OK;
}

static const char *gguf_arch_of(fp4_arch_family f) {
    switch (f) {
    case FP4_ARCH_LLAMA:
    case FP4_ARCH_MISTRAL: return "llama"; /* llama.cpp runs Mistral dense as "llama" */
    case FP4_ARCH_MIXTRAL: return "llama"; /* and Mixtral as "llama" with experts */
    case FP4_ARCH_QWEN2: return "qwen2";
    case FP4_ARCH_QWEN3: return "qwen3";
    case FP4_ARCH_GEMMA3: return "gemma3";
    case FP4_ARCH_QWEN3_MOE: return "qwen3moe";
    case FP4_ARCH_DEEPSEEK_V3: return "deepseek2";
    default: return NULL;
    }
}

fp4_status fp4_ggml_arch_plan(const fp4_wsrc *src, plan *p, fp4_error *err) {
    const fp4_ckpt *c = src->src_ck;
    if (!src->config_json) return FP4_OK;
    if (c && c->is_gguf && fp4_gguf_key_index(c->gguf, "general.architecture") >= 0) return FP4_OK;
    fp4_arch a;
    fp4_error ae;
    if (fp4_arch_from_hf_config(src->config_json, &a, &ae)) return FP4_OK; /* not a family we map */
    const char *ga = gguf_arch_of(a.family);
    if (!ga) return FP4_OK;
    const int permute =
        a.family == FP4_ARCH_LLAMA || a.family == FP4_ARCH_MISTRAL || a.family == FP4_ARCH_MIXTRAL;
    const int gemma = a.family == FP4_ARCH_GEMMA3, ds = a.family == FP4_ARCH_DEEPSEEK_V3;
    const int fam = gemma                          ? FAM_GEMMA
                    : ds                           ? FAM_DEEPSEEK
                    : a.family == FP4_ARCH_MIXTRAL ? FAM_MIXTRAL
                                                   : FAM_OTHER;
    if (ds && !fp4_ggml_ds_supported(&a)) return FP4_OK; /* not llama.cpp's deepseek2: the names stay */
    if (ds) { /* the multi-token-prediction layers (index >= num_hidden_layers): not llama.cpp's */
        int64_t kept = 0;
        for (int64_t i = 0; i < p->n; i++) {
            long L = -1;
            if (sscanf(p->e[i].name, "model.layers.%ld.", &L) == 1 && L >= a.n_layers) continue;
            p->e[kept++] = p->e[i];
        }
        p->n = kept;
    }
    fp4_error me;
    memset(&me, 0, sizeof me);
    fp4_status ms = fp4_ggml_moe_stack(p, &a, &me);
    if (ms == FP4_ERR_UNSUPPORTED) return FP4_OK; /* not llama.cpp's MoE: the names stay (ggml_moe.c) */
    if (ms) return err ? (*err = me, ms) : ms;
    int64_t kept = 0;
    for (int64_t i = 0; i < p->n; i++) {
        plan_entry *e = &p->e[i];
        char mapped[sizeof e->name];
        int perm;
        if (e->stack_n) { /* llama.cpp's 3-D experts, named by ggml_moe.c */
            p->e[kept++] = *e;
            continue;
        }
        if (fp4_ends_with(e->name, "rotary_emb.inv_freq")) continue; /* llama.cpp computes it */
        if (gemma && fp4_ends_with(e->name, "norm.weight")) { /* llama.cpp's gemma3 reads the gain */
            if (e->part != PART_RAW || e->n_dims != 1 ||
                (e->gguf_type != FP4_TYPE_BF16 && e->gguf_type != FP4_TYPE_F16))
                return fp4_fail(err, FP4_ERR_UNSUPPORTED, NULL, e->name, "ggml.norm_shift",
                                "a Gemma 3 norm must be a BF16 or F16 vector to be written as llama.cpp's "
                                "gain");
            e->norm_shift = 1;
        }
        if (!map_name(e->name, mapped, sizeof mapped, &perm, fam))
            return fp4_fail(err, FP4_ERR_UNSUPPORTED, NULL, e->name, "ggml.name_map",
                            "no llama.cpp name for this tensor of a %s checkpoint",
                            fp4_arch_family_name(a.family));
        memcpy(e->name, mapped, sizeof mapped);
        if (e->part == PART_RAW && e->n_dims == 1 &&
            (e->gguf_type == FP4_TYPE_BF16 || e->gguf_type == FP4_TYPE_F16)) {
            e->widen_from = e->gguf_type; /* llama.cpp's converter writes norms and biases as F32 */
            e->gguf_type = FP4_TYPE_F32;
            e->nbytes *= 2;
            char key[sizeof e->name + 32]; /* for the way back to an HF layout */
            snprintf(key, sizeof key, "fp4lane.widened.%s", e->name);
            fp4_status ws = kv_str(p, key, e->widen_from == FP4_TYPE_BF16 ? "bf16" : "f16", err);
            if (ws) return ws;
        }
        if (permute && perm != PERM_NONE && fp4_ends_with(e->name, ".weight")) {
            const int64_t heads = perm == PERM_Q ? a.n_heads : a.n_kv_heads;
            if (e->n_dims != 2 || e->ne[1] != heads * a.head_dim || a.head_dim % 2 ||
                (e->part != PART_RAW && e->part != PART_GGML))
                return fp4_fail(err, FP4_ERR_SHAPE, NULL, e->name, "ggml.permute",
                                "cannot permute %lld rows into %lld heads of %lld", (long long)e->ne[1],
                                (long long)heads, (long long)a.head_dim);
            e->perm_heads = (int32_t)heads;
        }
        p->e[kept++] = *e;
    }
    p->n = kept;
    if (a.rope_scaling == FP4_ROPE_LLAMA3) { /* llama.cpp reads Llama 3.1's rope as per-pair factors */
        plan_entry *e = fp4_plan_add(p, err);
        if (!e) return FP4_ERR_NOMEM;
        snprintf(e->name, sizeof e->name, "rope_freqs.weight");
        e->part = PART_GEN;
        e->gguf_type = FP4_TYPE_F32;
        e->n_dims = 1;
        e->ne[0] = a.head_dim / 2;
        e->nbytes = (uint64_t)(a.head_dim / 2) * 4;
    }
    fp4_status st = rename_kvs(p, fam, err);
    return st ? st : arch_kvs(p, &a, ga, err);
}

/* The way back: an HF layout written from a GGUF that fp4lane wrote in llama.cpp's conventions
 * (it carries config.json in fp4lane.hf.config) gets the HF names, the HF q/k row order and the
 * widened vectors' first dtype again, so HF -> gguf-ggml -> HF is byte-identical. */
fp4_status fp4_ggml_arch_unplan(const fp4_wsrc *src, plan *p, fp4_error *err) {
    const fp4_ckpt *c = src->src_ck;
    if (!c || !c->is_gguf || !src->config_json || fp4_gguf_key_index(c->gguf, "general.architecture") < 0 ||
        fp4_gguf_tensor_index(c->gguf, "token_embd.weight") < 0)
        return FP4_OK;
    fp4_arch a;
    fp4_error ae;
    if (fp4_arch_from_hf_config(src->config_json, &a, &ae) || !gguf_arch_of(a.family)) return FP4_OK;
    const int permute =
        a.family == FP4_ARCH_LLAMA || a.family == FP4_ARCH_MISTRAL || a.family == FP4_ARCH_MIXTRAL;
    const int gemma = a.family == FP4_ARCH_GEMMA3;
    const int fam = gemma                                ? FAM_GEMMA
                    : a.family == FP4_ARCH_DEEPSEEK_V3 ? FAM_DEEPSEEK
                    : a.family == FP4_ARCH_MIXTRAL     ? FAM_MIXTRAL
                                                       : FAM_OTHER;
    int64_t kept = 0;
    for (int64_t i = 0; i < p->n; i++) {
        plan_entry *e = &p->e[i];
        char hf[sizeof e->name], key[sizeof e->name + 32];
        int perm;
        if (!strcmp(e->name, "rope_freqs.weight")) continue; /* made from config.json */
        if (!unmap_name(e->name, hf, sizeof hf, &perm, fam))
            return fp4_fail(err, FP4_ERR_UNSUPPORTED, NULL, e->name, "ggml.name_map",
                            "no Hugging Face name for this llama.cpp tensor");
        snprintf(key, sizeof key, "fp4lane.widened.%s", e->name);
        const char *s;
        uint64_t len;
        if (e->part == PART_RAW && e->st_dtype == FP4_ST_F32 &&
            !fp4_gguf_get_str(c->gguf, fp4_gguf_key_index(c->gguf, key), &s, &len)) {
            e->narrow_to = len == 4 && !memcmp(s, "bf16", 4) ? FP4_TYPE_BF16 : FP4_TYPE_F16;
            e->st_dtype = e->narrow_to == FP4_TYPE_BF16 ? FP4_ST_BF16 : FP4_ST_F16;
            e->nbytes /= 2;
            /* Gemma 3: the gain back to HF's w (exact unless 1 + w was rounded: |w| < 2^-16) */
            if (gemma && fp4_ends_with(e->name, "norm.weight")) e->norm_shift = -1;
        }
        if (permute && perm != PERM_NONE && e->n_dims == 2 && e->part != PART_SCALAR) {
            const int64_t heads = perm == PERM_Q ? a.n_heads : a.n_kv_heads;
            if (e->ne[1] != heads * a.head_dim || a.head_dim % 2)
                return fp4_fail(err, FP4_ERR_SHAPE, NULL, e->name, "ggml.permute",
                                "cannot un-permute %lld rows from %lld heads of %lld", (long long)e->ne[1],
                                (long long)heads, (long long)a.head_dim);
            e->perm_heads = (int32_t)-heads;
        }
        memcpy(e->name, hf, sizeof hf);
        p->e[kept++] = *e;
    }
    p->n = kept;
    static const char pre[] = "fp4lane.exact.";
    for (int64_t i = 0; i < p->n_kv; i++) {
        char hf[FP4_MAX_NAME + 64];
        int perm;
        if (strncmp(p->kv[i].key, pre, sizeof pre - 1)) continue;
        if (!unmap_name(p->kv[i].key + sizeof pre - 1, hf, sizeof hf, &perm, fam) ||
            snprintf(p->kv[i].key, sizeof p->kv[i].key, "%s%s", pre, hf) >= (int)sizeof p->kv[i].key)
            return fp4_fail(err, FP4_ERR_UNSUPPORTED, NULL, p->kv[i].key, "ggml.name_map",
                            "no Hugging Face name for this key");
    }
    return FP4_OK;
}

/* The way in: a GGUF that carries its config.json (fp4lane.hf.config) is run from that config,
 * but llama.cpp reads the <arch>.* keys. Every such key that is present must be valid (a positive
 * count, a finite positive float) and say what the config says, so that both readers of the file
 * run the same model. A key is compared with the value the writer (arch_kvs) derives from the config. */
static int key_number(const fp4_gguf *g, int64_t i, double *v, int *is_float) {
    union {
        uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
        uint64_t u64; int64_t i64; float f32; double f64;
    } x;
    *is_float = 0;
    switch (fp4_gguf_kv_type(g, i)) {
    case FP4_GGUF_UINT8: return fp4_gguf_get_u8(g, i, &x.u8) ? -1 : (*v = x.u8, 0);
    case FP4_GGUF_INT8: return fp4_gguf_get_i8(g, i, &x.i8) ? -1 : (*v = x.i8, 0);
    case FP4_GGUF_UINT16: return fp4_gguf_get_u16(g, i, &x.u16) ? -1 : (*v = x.u16, 0);
    case FP4_GGUF_INT16: return fp4_gguf_get_i16(g, i, &x.i16) ? -1 : (*v = x.i16, 0);
    case FP4_GGUF_UINT32: return fp4_gguf_get_u32(g, i, &x.u32) ? -1 : (*v = x.u32, 0);
    case FP4_GGUF_INT32: return fp4_gguf_get_i32(g, i, &x.i32) ? -1 : (*v = x.i32, 0);
    case FP4_GGUF_UINT64: return fp4_gguf_get_u64(g, i, &x.u64) ? -1 : (*v = (double)x.u64, 0);
    case FP4_GGUF_INT64: return fp4_gguf_get_i64(g, i, &x.i64) ? -1 : (*v = (double)x.i64, 0);
    case FP4_GGUF_FLOAT32: *is_float = 1; return fp4_gguf_get_f32(g, i, &x.f32) ? -1 : (*v = x.f32, 0);
    case FP4_GGUF_FLOAT64: *is_float = 1; return fp4_gguf_get_f64(g, i, &x.f64) ? -1 : (*v = x.f64, 0);
    default: return -1;
    }
}

fp4_status fp4_ggml_arch_agree(const fp4_gguf *g, const fp4_arch *a, fp4_error *err) {
    const int64_t ai = fp4_gguf_key_index(g, "general.architecture");
    const char *s;
    uint64_t len;
    if (ai < 0) return FP4_OK; /* no llama.cpp metadata: nothing else reads this file's shape */
    const char *ga = gguf_arch_of(a->family);
    if (fp4_gguf_get_str(g, ai, &s, &len) || !ga || len != strlen(ga) || memcmp(s, ga, len))
        return fp4_fail(err, FP4_ERR_FORMAT, NULL, NULL, "arch.gguf_agree",
                        "GGUF: general.architecture = %.*s disagrees with fp4lane.hf.config (model_type %s: "
                        "llama.cpp's \"%s\")", (int)(len < 64 ? len : 64), s ? s : "?",
                        fp4_arch_family_name(a->family), ga ? ga : "none");
    const int ds = a->family == FP4_ARCH_DEEPSEEK_V3;
    /* what arch_kvs writes from the config; zero: a key whose 0 means "off" (refused otherwise) */
    const struct { const char *key, *hf; int is_float, zero; double want;
    } k[] = {
        {"context_length", "max_position_embeddings", 0, 0, (double)a->n_ctx_train},
        {"embedding_length", "hidden_size", 0, 0, (double)a->hidden},
        {"block_count", "num_hidden_layers", 0, 0, (double)a->n_layers},
        {"feed_forward_length", "intermediate_size", 0, 0, (double)a->ffn},
        {"attention.head_count", "num_attention_heads", 0, 0, (double)a->n_heads},
        {"attention.head_count_kv", "num_key_value_heads", 0, 0, (double)a->n_kv_heads},
        {"attention.key_length", "head_dim", 0, 0, (double)a->head_dim},
        {"attention.value_length", ds ? "v_head_dim" : "head_dim", 0, 0,
         (double)(ds ? a->v_head_dim : a->head_dim)},
        {"rope.dimension_count", ds ? "qk_rope_head_dim" : "head_dim", 0, 0,
         (double)(ds ? a->qk_rope_dim : a->head_dim)},
        {"vocab_size", "vocab_size", 0, 0, (double)a->vocab},
        {"expert_count", "num_experts", 0, 1, (double)a->n_experts},
        {"expert_used_count", "num_experts_per_tok", 0, 1, (double)a->n_experts_used},
        {"expert_feed_forward_length", "moe_intermediate_size", 0, 1,
         (double)(a->n_experts ? a->moe_ffn : 0)},
        {"attention.sliding_window", "sliding_window", 0, 1, (double)a->sliding_window},
        {"attention.layer_norm_rms_epsilon", "rms_norm_eps", 1, 0, (double)a->rms_eps},
        {"rope.freq_base", "rope_theta", 1, 0, a->rope_theta},
        {"rope.scaling.factor", "rope_scaling.factor (1 without linear or yarn scaling)", 1, 0,
         a->rope_scaling == FP4_ROPE_LINEAR || (ds && a->rope_scaling == FP4_ROPE_YARN) ? a->rope_factor
                                                                                        : 1.0},
    };
    char key[128];
    for (size_t j = 0; j < sizeof k / sizeof k[0]; j++) {
        snprintf(key, sizeof key, "%s.%s", ga, k[j].key);
        const int64_t i = fp4_gguf_key_index(g, key);
        double v = 0;
        int is_float = 0;
        if (i < 0) continue;
        const int typed = !key_number(g, i, &v, &is_float) && is_float == k[j].is_float;
        if (!typed || !isfinite(v) || !(v > 0 || (k[j].zero && v == 0)))
            return fp4_fail(err, FP4_ERR_FORMAT, NULL, NULL, "arch.gguf_value",
                            "GGUF: %s = %.9g is not a %s", key, typed ? v : NAN,
                            k[j].is_float ? "finite positive float" : "positive integer");
        const int same = k[j].is_float ? (float)v == (float)k[j].want : v == k[j].want;
        if (!same)
            return fp4_fail(err, FP4_ERR_FORMAT, NULL, NULL, "arch.gguf_agree",
                            "GGUF: %s = %.9g disagrees with %s = %.9g in fp4lane.hf.config (the config.json "
                            "fp4lane runs; llama.cpp reads the key)", key, v, k[j].hf, k[j].want);
    }
    snprintf(key, sizeof key, "%s.rope.scaling.type", ga);
    const int64_t ti = fp4_gguf_key_index(g, key);
    const char *want = a->rope_scaling == FP4_ROPE_LINEAR               ? "linear"
                       : ds && a->rope_scaling == FP4_ROPE_YARN ? "yarn"
                                                                : "none";
    if (ti >= 0 && (fp4_gguf_get_str(g, ti, &s, &len) || len != strlen(want) || memcmp(s, want, len)))
        return fp4_fail(err, FP4_ERR_FORMAT, NULL, NULL, "arch.gguf_agree",
                        "GGUF: %s disagrees with fp4lane.hf.config's rope scaling (%s)", key, want);
    return FP4_OK;
}
