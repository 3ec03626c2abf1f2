/* synth.c — fp4_synth_checkpoint: a random-weight bf16 Hugging Face checkpoint of a real model's
 * shape (fp4lane_synth.h states the statistics). Tensors are streamed through the library's HF
 * writer in row chunks, so memory stays O(one chunk); rows are generated in parallel, each from
 * its own seeded stream, so the bytes do not depend on the thread count. With to_nvfp4 the rows
 * are made on demand for quantize.c (fp4_quantize_source) instead, so a model whose bf16 form would
 * not fit on the disk is written as NVFP4 directly.
 *
 * The RNG is splitmix64, kept local here: main has no shared copy yet (tools/cmd_demo.c and
 * tests/check.h hold their own). */
#include "fp4_impl.h"
#include "fp4lane_synth.h"
#include "io/outfile.h"
#include "model/model_impl.h"
#include "model/synth_impl.h"
#include <dirent.h>
#include <jansson.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>


static const synth_shape shapes[] = {
    {"tiny", "llama", 256, 2, 4, 2, 64, 512, 512, 2048, 500000.0, 1e-5, 1, 0, 1, 2, 0, 0, 0, NULL},
    {"llama3-8b", "llama", 4096, 32, 32, 8, 128, 14336, 128256, 131072, 500000.0, 1e-5, 1, 0, 128000, 128001,
     0, 0, 0, NULL},
    {"qwen3-8b", "qwen3", 4096, 36, 32, 8, 128, 12288, 151936, 40960, 1000000.0, 1e-6, 0, 0, 151643, 151645,
     0, 0, 0, NULL},
    {"llama3-70b", "llama", 8192, 80, 64, 8, 128, 28672, 128256, 131072, 500000.0, 1e-5, 1, 0, 128000, 128001,
     0, 0, 0, NULL},
    /* JackFram/llama-160m (a published small Llama, used as a draft model): a CPU decode shape */
    {"llama-160m", "llama", 768, 12, 12, 12, 64, 3072, 32000, 2048, 10000.0, 1e-6, 0, 0, 1, 2, 0, 0, 0, NULL},
    /* mixtures of experts: a tiny one for tests, and Qwen/Qwen3-30B-A3B's published config */
    {"tiny-moe", "qwen3-moe", 256, 2, 4, 2, 64, 512, 512, 2048, 1000000.0, 1e-6, 0, 0, 1, 2, 8, 2, 256, NULL},
    {"qwen3-30b-a3b", "qwen3-moe", 2048, 48, 32, 4, 128, 6144, 151936, 40960, 1000000.0, 1e-6, 0, 0, 151643,
     151645, 128, 8, 768, NULL},
    /* Gemma 3: a tiny one (both layer types, a window of 8 that a test's 64 positions cross) and
     * google/gemma-3-27b's published text config (transformers' Gemma3TextConfig defaults for the
     * keys it leaves out: vocab 262208, rope_theta 1e6, rope_local_base_freq 1e4) */
    {"tiny-gemma3", "gemma3", 256, 6, 4, 2, 64, 512, 512, 2048, 1000000.0, 1e-6, 0, 1, 2, 1, 0, 0, 0, NULL},
    {"gemma3-27b", "gemma3", 5376, 62, 32, 16, 128, 21504, 262208, 131072, 1000000.0, 1e-6, 0, 1, 2, 1, 0, 0,
     0, NULL},
    /* llama.cpp's quantizer treats exactly 8 experts specially (Mixtral 8x7B: Q5_K / Q8_0 attention,
     * types fp4lane has no route for); these take its common path, as Qwen3-MoE's 128 do: a tiny one
     * for tests and a small one for CPU benchmarks */
    {"tiny-moe16", "qwen3-moe", 256, 2, 4, 2, 64, 512, 512, 2048, 1000000.0, 1e-6, 0, 0, 1, 2, 16, 4, 256,
     NULL},
    {"small-moe", "qwen3-moe", 1024, 8, 16, 4, 64, 3072, 32000, 4096, 1000000.0, 1e-6, 0, 0, 1, 2, 32, 4,
     512, NULL},
    /* DeepSeek-V3 (synth_deepseek.c): a tiny one for tests and deepseek-ai/DeepSeek-V3's config */
    {"tiny-deepseek", "deepseek-v3", 256, 3, 4, 4, 12, 512, 512, 1024, 10000.0, 1e-6, 0, 0, 1, 2, 8, 3, 256,
     &fp4_synth_ds_tiny},
    {"deepseek-v3", "deepseek-v3", 7168, 61, 128, 128, 192, 18432, 129280, 163840, 10000.0, 1e-6, 0, 0, 0, 1,
     256, 8, 2048, &fp4_synth_ds_v3},
    /* qwen3-30b-a3b's widths in 8 of its 48 layers: the GPU's MoE benchmark shape where the whole
     * model's synth (61 GB of values) does not fit a device run (bench/moe.md) */
    {"qwen3-30b-a3b-l8", "qwen3-moe", 2048, 8, 32, 4, 128, 6144, 151936, 40960, 1000000.0, 1e-6, 0, 0, 151643,
     151645, 128, 8, 768, NULL},
    /* tiny-deepseek with a plain q projection (q_lora_rank null) and no MTP layer */
    {"tiny-deepseek-nolora", "deepseek-v3", 256, 3, 4, 4, 12, 512, 512, 1024, 10000.0, 1e-6, 0, 0, 1, 2, 8, 3,
     256, &fp4_synth_ds_tiny_nolora},
};
/* Gemma 3's own keys per shape: the window, a global layer every `pattern`, query_pre_attn_scalar,
 * the local rope base and the global layers' linear rope factor (0: none). The tiny one's scalar
 * is its head_dim, as llama.cpp assumes for any Gemma 3 but the 62-layer one. */
static const struct gemma_keys {
    const char *shape;
    int64_t window, pattern;
    double qpas, rope_local, rope_linear;
} gemma_keys[] = {
    {"tiny-gemma3", 8, 3, 64.0, 10000.0, 8.0},
    {"gemma3-27b", 1024, 6, 168.0, 10000.0, 8.0},
};
static const struct gemma_keys *gemma_of(const synth_shape *s) {
    for (size_t i = 0; i < sizeof gemma_keys / sizeof gemma_keys[0]; i++)
        if (!strcmp(gemma_keys[i].shape, s->name)) return &gemma_keys[i];
    return NULL;
}
enum { N_SHAPES = (int)(sizeof shapes / sizeof shapes[0]) };


static const synth_arch archs[] = {
    {"llama", "LlamaForCausalLM", "llama", 0, 1, 0},
    {"qwen3", "Qwen3ForCausalLM", "qwen3", 1, 0, 0},
    {"qwen3-moe", "Qwen3MoeForCausalLM", "qwen3_moe", 1, 0, 1},
    {"mixtral", "MixtralForCausalLM", "mixtral", 0, 0, 2},
    {"gemma3", "Gemma3ForCausalLM", "gemma3_text", 1, 0, 3},
    {"deepseek-v3", "DeepseekV3ForCausalLM", "deepseek_v3", 0, 0, 4},
};
enum { N_ARCHS = (int)(sizeof archs / sizeof archs[0]) };

/* the dimensions a template names */
typedef enum { D_ONE, D_HIDDEN, D_Q, D_KV, D_HEAD, D_INTER, D_VOCAB, D_COUNT } synth_dim;

typedef struct layer_tpl {
    const char *fmt;
    synth_kind kind;
    synth_dim rows, cols; /* rows D_ONE: a 1-D tensor of cols values */
    int only;             /* 1: qk_norm architectures, 2: Gemma 3 */
} layer_tpl;

/* module registration order of the HF decoder layer */
static const layer_tpl layer_tpls[] = {
    {"model.layers.%d.self_attn.q_proj.weight", K_PROJ, D_Q, D_HIDDEN, 0},
    {"model.layers.%d.self_attn.k_proj.weight", K_PROJ, D_KV, D_HIDDEN, 0},
    {"model.layers.%d.self_attn.v_proj.weight", K_PROJ, D_KV, D_HIDDEN, 0},
    {"model.layers.%d.self_attn.o_proj.weight", K_PROJ, D_HIDDEN, D_Q, 0},
    {"model.layers.%d.self_attn.q_norm.weight", K_NORM, D_ONE, D_HEAD, 1},
    {"model.layers.%d.self_attn.k_norm.weight", K_NORM, D_ONE, D_HEAD, 1},
    {"model.layers.%d.mlp.gate_proj.weight", K_PROJ, D_INTER, D_HIDDEN, 0},
    {"model.layers.%d.mlp.up_proj.weight", K_PROJ, D_INTER, D_HIDDEN, 0},
    {"model.layers.%d.mlp.down_proj.weight", K_PROJ, D_HIDDEN, D_INTER, 0},
    {"model.layers.%d.input_layernorm.weight", K_NORM, D_ONE, D_HIDDEN, 0},
    {"model.layers.%d.post_attention_layernorm.weight", K_NORM, D_ONE, D_HIDDEN, 0},
    {"model.layers.%d.pre_feedforward_layernorm.weight", K_NORM, D_ONE, D_HIDDEN, 2},
    {"model.layers.%d.post_feedforward_layernorm.weight", K_NORM, D_ONE, D_HIDDEN, 2},
};
enum { N_LAYER_TPLS = (int)(sizeof layer_tpls / sizeof layer_tpls[0]) };


/* ---- splitmix64 and the heavy-tailed sampler ---- */
static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static inline uint64_t sm_next(uint64_t *s) { return mix64(*s += 0x9E3779B97F4A7C15ull); }
/* One stream per (seed, tensor, row); row UINT64_MAX is the tensor's own (its outlier columns). */
static uint64_t stream(uint64_t seed, int tensor, uint64_t row) {
    return mix64(mix64(mix64(seed) ^ (uint64_t)(tensor + 1)) ^ row);
}
static inline double unit_open(uint32_t u) { return ((double)u + 0.5) * 0x1p-31 - 1.0; } /* (-1, 1) */
/* Student-t, 8 degrees of freedom, scaled to unit variance (Bailey 1994, polar method:
 * T = U sqrt(nu (W^(-2/nu) - 1) / W), W = U^2 + V^2 < 1; for nu = 8, W^(-1/4) = 1/sqrt(sqrt(W))). */
static inline double t8_unit(uint64_t *s) {
    for (;;) {
        uint64_t z = sm_next(s);
        double u = unit_open((uint32_t)(z >> 32)), v = unit_open((uint32_t)z), w = u * u + v * v;
        if (w >= 1.0) continue;
        double r = 1.0 / sqrt(sqrt(w));
        return u * sqrt(8.0 * (r - 1.0) / w) * 0.8660254037844386; /* sqrt(6/8): var(t8) = 8/6 */
    }
}

/* ---- the plan: tensor names and shapes from the tables ---- */
static const synth_shape *find_shape(const char *n) {
    for (int i = 0; n && i < N_SHAPES; i++)
        if (!strcmp(n, shapes[i].name)) return &shapes[i];
    return NULL;
}
static const synth_arch *find_arch(const char *n) {
    for (int i = 0; n && i < N_ARCHS; i++)
        if (!strcmp(n, archs[i].name)) return &archs[i];
    return NULL;
}

const char *fp4_synth_shape_name(int i) { return i >= 0 && i < N_SHAPES ? shapes[i].name : NULL; }
const char *fp4_synth_arch_name(int i) { return i >= 0 && i < N_ARCHS ? archs[i].name : NULL; }
const char *fp4_synth_shape_arch(const char *shape) {
    const synth_shape *s = find_shape(shape);
    return s ? s->arch : NULL;
}

void fp4_synth_add(synth_plan *p, const char *name, synth_kind k, int64_t rows, int64_t cols) {
    synth_tensor *t = &p->t[p->n++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->kind = k, t->rows = rows, t->cols = cols;
    p->bytes += (uint64_t)(rows ? rows : 1) * (uint64_t)cols * 2u;
}

static fp4_status make_plan(const fp4_synth_opts *o, synth_plan *p, fp4_error *err) {
    memset(p, 0, sizeof *p);
    if (!o) return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "synth.arg", "no options");
    p->sh = find_shape(o->shape);
    if (!p->sh)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "synth.shape", "unknown shape '%s'",
                        o->shape ? o->shape : "(null)");
    if (o->n_layers < 0 || o->n_layers > p->sh->layers)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "synth.layers",
                        "%lld layers: shape '%s' has 1 to %lld", (long long)o->n_layers, p->sh->name,
                        (long long)p->sh->layers);
    if (o->n_layers) {
        p->own = *p->sh;
        p->own.layers = o->n_layers;
        p->sh = &p->own;
    }
    p->ar = find_arch(o->arch ? o->arch : p->sh->arch);
    if (!p->ar)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "synth.arch", "unknown architecture '%s'",
                        o->arch);
    const synth_shape *s = p->sh;
    const int64_t dim[D_COUNT] = {[D_ONE] = 0,
                                  [D_HIDDEN] = s->hidden,
                                  [D_Q] = s->heads * s->head_dim,
                                  [D_KV] = s->kv_heads * s->head_dim,
                                  [D_HEAD] = s->head_dim,
                                  [D_INTER] = s->inter,
                                  [D_VOCAB] = s->vocab};
    if (!gemma_of(s) != !(p->ar->moe == 3))
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "synth.arch",
                        "architecture '%s' and shape '%s' are not both Gemma 3", p->ar->name, s->name);
    if (!s->ds != !(p->ar->moe == 4))
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "synth.arch",
                        "architecture '%s' and shape '%s' are not both DeepSeek-V3", p->ar->name, s->name);
    if (!s->experts != !(p->ar->moe == 1 || p->ar->moe == 2 || p->ar->moe == 4))
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "synth.arch",
                        "architecture '%s' %s experts and shape '%s' %s", p->ar->name,
                        p->ar->moe == 1 || p->ar->moe == 2 || p->ar->moe == 4 ? "has" : "has no", s->name,
                        s->experts ? "has them" : "has none");
    p->t = calloc((size_t)((s->layers + 1) * (N_LAYER_TPLS + 16 + 3 * s->experts) + 8), sizeof *p->t);
    if (!p->t) return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
    if (p->ar->moe == 4) return fp4_synth_ds_plan(p, err);
    fp4_synth_add(p, "model.embed_tokens.weight", K_MATRIX, s->vocab, s->hidden);
    char name[96];
    const char *const moe_mid = p->ar->moe == 2 ? "block_sparse_moe" : "mlp";
    const char *const *parts = p->ar->moe == 2 ? (const char *const[]){"w1", "w3", "w2"}
                                               : (const char *const[]){"gate_proj", "up_proj", "down_proj"};
    const int64_t moe_ffn = s->moe_inter; /* Mixtral writes it as intermediate_size */
    for (int l = 0; l < s->layers; l++)
        for (int k = 0; k < N_LAYER_TPLS; k++) {
            const layer_tpl *lt = &layer_tpls[k];
            if ((lt->only == 1 && !p->ar->qk_norm) || (lt->only == 2 && !(p->ar->moe == 3))) continue;
            if (s->experts && strstr(lt->fmt, ".mlp.")) {
                if (strstr(lt->fmt, "gate_proj")) { /* the router, then the experts, in its place */
                    snprintf(name, sizeof name, "model.layers.%d.%s.gate.weight", l, moe_mid);
                    fp4_synth_add(p, name, K_MATRIX, s->experts, s->hidden);
                    for (int64_t e = 0; e < s->experts; e++)
                        for (int q = 0; q < 3; q++) {
                            snprintf(name, sizeof name, "model.layers.%d.%s.experts.%lld.%s.weight", l,
                                     moe_mid, (long long)e, parts[q]);
                            fp4_synth_add(p, name, K_PROJ, q == 2 ? s->hidden : moe_ffn,
                                          q == 2 ? moe_ffn : s->hidden);
                        }
                }
                continue;
            }
            snprintf(name, sizeof name, lt->fmt, l);
            fp4_synth_add(p, name, lt->kind, dim[lt->rows], dim[lt->cols]);
        }
    fp4_synth_add(p, "model.norm.weight", K_NORM, 0, s->hidden);
    if (!s->tie) fp4_synth_add(p, "lm_head.weight", K_MATRIX, s->vocab, s->hidden);
    return FP4_OK;
}

fp4_status fp4_synth_data_bytes(const fp4_synth_opts *opts, uint64_t *bytes, fp4_error *err) {
    fp4_error_clear(err);
    if (!bytes) return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "synth.arg", "bytes is NULL");
    synth_plan p;
    fp4_status st = make_plan(opts, &p, err);
    *bytes = st ? 0 : p.bytes;
    free(p.t);
    return st;
}

/* ---- config.json ---- */
/* Gemma3ForCausalLM's config as transformers 4.5x writes it: layer_types and the window, the
 * local rope base, query_pre_attn_scalar, the global layers' linear rope scaling */
static fp4_status gemma_config_text(const synth_plan *p, char *buf, size_t size, fp4_error *err) {
    const synth_shape *s = p->sh;
    const struct gemma_keys *g = gemma_of(s);
    json_t *lt = json_array();
    for (int64_t l = 0; l < s->layers; l++)
        json_array_append_new(lt, json_string((l + 1) % g->pattern ? "sliding_attention" : "full_attention"));
    json_t *rope = g->rope_linear > 0
                       ? json_pack("{s:f,s:s}", "factor", g->rope_linear, "rope_type", "linear")
                       : json_null();
    json_t *c = json_object();
    json_object_set_new(c, "architectures", json_pack("[s]", p->ar->hf_class));
    json_object_set_new(c, "attention_bias", json_false());
    json_object_set_new(c, "attention_dropout", json_real(0.0));
    json_object_set_new(c, "attn_logit_softcapping", json_null());
    json_object_set_new(c, "final_logit_softcapping", json_null());
    json_object_set_new(c, "hidden_activation", json_string("gelu_pytorch_tanh"));
    json_object_set_new(c, "initializer_range", json_real(0.02));
    json_object_set_new(c, "layer_types", lt);
    json_object_set_new(c, "model_type", json_string("gemma3_text"));
    json_object_set_new(c, "rope_scaling", rope);
    json_object_set_new(c, "tie_word_embeddings", json_boolean(s->tie));
    json_object_set_new(c, "torch_dtype", json_string("bfloat16"));
    json_object_set_new(c, "use_cache", json_true());
    const struct {
        const char *k;
        int64_t v;
    } ints[] = {
        {"bos_token_id", s->bos},
        {"eos_token_id", s->eos},
        {"head_dim", s->head_dim},
        {"hidden_size", s->hidden},
        {"intermediate_size", s->inter},
        {"max_position_embeddings", s->max_pos},
        {"num_attention_heads", s->heads},
        {"num_hidden_layers", s->layers},
        {"num_key_value_heads", s->kv_heads},
        {"pad_token_id", 0},
        {"sliding_window", g->window},
        {"vocab_size", s->vocab},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        json_object_set_new(c, ints[i].k, json_integer((json_int_t)ints[i].v));
    const struct {
        const char *k;
        double v;
    } reals[] = {
        {"query_pre_attn_scalar", g->qpas},
        {"rms_norm_eps", s->rms_eps},
        {"rope_local_base_freq", g->rope_local},
        {"rope_theta", s->rope_theta},
    };
    for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++)
        json_object_set_new(c, reals[i].k, json_real(reals[i].v));
    char *text = c ? json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(c);
    if (!text) return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
    const size_t n = strlen(text);
    if (n >= size) {
        free(text);
        return fp4_fail(err, FP4_ERR_LIMIT, NULL, NULL, "synth.config", "config too long");
    }
    memcpy(buf, text, n + 1);
    free(text);
    return FP4_OK;
}

static fp4_status config_text(const synth_plan *p, char *buf, size_t size, fp4_error *err) {
    if (p->ar->moe == 3) return gemma_config_text(p, buf, size, err);
    if (p->ar->moe == 4) return fp4_synth_ds_config_text(p, buf, size, err);
    const synth_shape *s = p->sh;
    char rope[256] = "null", extra[512];
    if (p->ar->moe == 1)
        snprintf(extra, sizeof extra,
                 "\"decoder_sparse_step\":1,\"max_window_layers\":%lld,\"mlp_only_layers\":[],"
                 "\"moe_intermediate_size\":%lld,\"norm_topk_prob\":true,\"num_experts\":%lld,"
                 "\"num_experts_per_tok\":%lld,\"sliding_window\":null,\"use_sliding_window\":false,",
                 (long long)s->layers, (long long)s->moe_inter, (long long)s->experts, (long long)s->used);
    else if (p->ar->moe == 2)
        snprintf(extra, sizeof extra,
                 "\"num_experts_per_tok\":%lld,\"num_local_experts\":%lld,\"sliding_window\":null,",
                 (long long)s->used, (long long)s->experts);
    else if (p->ar->qk_norm)
        snprintf(extra, sizeof extra,
                 "\"max_window_layers\":%lld,\"sliding_window\":null,\"use_sliding_window\":false,",
                 (long long)s->layers);
    else
        snprintf(extra, sizeof extra, "\"mlp_bias\":false,\"pretraining_tp\":1,");
    if (p->ar->rope_scaling && s->llama3_rope)
        snprintf(rope, sizeof rope, "{\"factor\":8.0,\"high_freq_factor\":4.0,\"low_freq_factor\":1.0,"
                                    "\"original_max_position_embeddings\":8192,\"rope_type\":\"llama3\"}");
    int n = snprintf(
        buf, size,
        "{\"architectures\":[\"%s\"],\"attention_bias\":false,\"attention_dropout\":0.0,\"bos_token_id\":%"
        "lld,"
        "\"eos_token_id\":%lld,\"head_dim\":%lld,\"hidden_act\":\"silu\",\"hidden_size\":%lld,"
        "\"initializer_range\":0.02,\"intermediate_size\":%lld,\"max_position_embeddings\":%lld,%s"
        "\"model_type\":\"%s\",\"num_attention_heads\":%lld,\"num_hidden_layers\":%lld,"
        "\"num_key_value_heads\":%lld,\"rms_norm_eps\":%.17g,\"rope_scaling\":%s,\"rope_theta\":%.1f,"
        "\"tie_word_embeddings\":%s,\"torch_dtype\":\"bfloat16\",\"use_cache\":true,\"vocab_size\":%lld}",
        p->ar->hf_class, (long long)s->bos, (long long)s->eos, (long long)s->head_dim, (long long)s->hidden,
        (long long)(p->ar->moe == 2 ? s->moe_inter : s->inter), (long long)s->max_pos, extra,
        p->ar->model_type, (long long)s->heads, (long long)s->layers, (long long)s->kv_heads, s->rms_eps,
        rope, s->rope_theta, s->tie ? "true" : "false", (long long)s->vocab);
    if (n < 0 || n >= (int)size)
        return fp4_fail(err, FP4_ERR_LIMIT, NULL, NULL, "synth.config", "config too long");
    return FP4_OK;
}

static fp4_status write_config(const char *dir, const synth_plan *p, fp4_error *err) {
    char buf[8192], path[PATH_MAX];
    fp4_status st = config_text(p, buf, sizeof buf, err);
    if (st) return st;
    int n = snprintf(path, sizeof path, "%s/config.json", dir);
    if (n < 0 || n >= (int)sizeof path)
        return fp4_fail(err, FP4_ERR_LIMIT, dir, NULL, "synth.path", "path too long");
    return fp4_hfdir_write_json(path, buf, 2, 1, err);
}

/* ---- tokenizer.json + tokenizer_config.json ---- */
/* A byte-level BPE tokenizer (GPT-2's byte alphabet, one merge "Ġ t" so that the merge table is
 * never empty) of exactly the shape's vocabulary: bos and eos at the config's ids, the 256 byte
 * tokens and the merge on the lowest ids besides, and every other id a token of two, then three,
 * byte characters that no merge makes (the weights are random: any id may be generated, and each
 * decodes). Any text prompt runs (`fp4lane run DIR -p TEXT`); UTF-8 text round-trips. */
static void byte_char(int b, char *out) { /* GPT-2 bytes_to_unicode, as UTF-8 */
    int cp = b;
    if (!((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF))) {
        cp = 256;
        for (int k = 0; k < b; k++) /* the unprintable bytes before b, in order */
            cp += !((k >= '!' && k <= '~') || (k >= 0xA1 && k <= 0xAC) || (k >= 0xAE && k <= 0xFF));
    }
    if (cp < 0x80) out[0] = (char)cp, out[1] = 0;
    else out[0] = (char)(0xC0 | cp >> 6), out[1] = (char)(0x80 | (cp & 0x3F)), out[2] = 0;
}

static fp4_status write_tokenizer(const char *dir, const synth_shape *s, fp4_error *err) {
    json_t *vocab = json_object(), *merges = json_array(), *added = json_array(), *tok = NULL;
    int64_t id = 0;
    char c[16], path[PATH_MAX];
    for (int64_t b = 0, n = 0; id < s->vocab; id++) {
        if (id == s->bos || id == s->eos) continue;
        if (b < 256) byte_char((int)b++, c);
        else if (b++ == 256) snprintf(c, sizeof c, "\xc4\xa0t"); /* "Ġt": the merge */
        else {
            if (n == 256 * ' ' + 't') n++; /* "Ġt" again */
            const int len = n < 65536 ? 2 : 3;
            const int64_t v = len == 2 ? n : n - 65536;
            c[0] = 0;
            for (int k = len - 1; k >= 0; k--) byte_char((int)(v >> (8 * k) & 255), c + strlen(c));
            n++;
        }
        json_object_set_new(vocab, c, json_integer(id));
    }
    json_array_append_new(merges, json_string("\xc4\xa0 t"));
    const int64_t special[2] = {s->bos, s->eos};
    const char *const name[2] = {"<s>", "</s>"};
    for (int k = 0; k < 2; k++) {
        json_object_set_new(vocab, name[k], json_integer(special[k]));
        json_array_append_new(added, json_pack("{s:I,s:s,s:b,s:b,s:b,s:b,s:b}", "id", (json_int_t)special[k],
                                               "content", name[k], "single_word", 0, "lstrip", 0, "rstrip", 0,
                                               "normalized", 0, "special", 1));
    }
    tok =
        json_pack("{s:s,s:n,s:n,s:o,s:n,s:{s:s,s:b,s:b,s:b},s:{s:s,s:[{s:{s:s,s:i}},{s:{s:s,s:i}}],"
                  "s:[{s:{s:s,s:i}},{s:{s:s,s:i}},{s:{s:s,s:i}}],s:{s:{s:s,s:[I],s:[s]}}},"
                  "s:{s:s,s:b,s:b,s:b},s:{s:s,s:n,s:n,s:n,s:n,s:b,s:b,s:b,s:o,s:o}}",
                  "version", "1.0", "truncation", "padding", "added_tokens", added, "normalizer",
                  "pre_tokenizer", "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 1, "use_regex",
                  1, "post_processor", "type", "TemplateProcessing", "single", "SpecialToken", "id", "<s>",
                  "type_id", 0, "Sequence", "id", "A", "type_id", 0, "pair", "SpecialToken", "id", "<s>",
                  "type_id", 0, "Sequence", "id", "A", "type_id", 0, "Sequence", "id", "B", "type_id", 1,
                  "special_tokens", "<s>", "id", "<s>", "ids", (json_int_t)s->bos, "tokens", "<s>", "decoder",
                  "type", "ByteLevel", "add_prefix_space", 1, "trim_offsets", 1, "use_regex", 1, "model",
                  "type", "BPE", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix",
                  "fuse_unk", 0, "byte_fallback", 0, "ignore_merges", 0, "vocab", vocab, "merges", merges);
    char *text = tok ? json_dumps(tok, JSON_COMPACT) : NULL;
    json_decref(tok);
    if (!text) return fp4_fail(err, FP4_ERR_NOMEM, dir, NULL, "alloc", "out of memory");
    fp4_status st = snprintf(path, sizeof path, "%s/tokenizer.json", dir) < (int)sizeof path
                        ? fp4_hfdir_write_json(path, text, 2, 0, err)
                        : fp4_fail(err, FP4_ERR_LIMIT, dir, NULL, "synth.path", "path too long");
    free(text);
    char cfg[512];
    snprintf(cfg, sizeof cfg,
             "{\"tokenizer_class\":\"PreTrainedTokenizerFast\",\"bos_token\":\"<s>\",\"eos_token\":\"</s>\","
             "\"model_max_length\":%lld,\"clean_up_tokenization_spaces\":false}",
             (long long)s->max_pos);
    if (!st && snprintf(path, sizeof path, "%s/tokenizer_config.json", dir) < (int)sizeof path)
        st = fp4_hfdir_write_json(path, cfg, 2, 1, err);
    return st;
}

/* ---- generation: a chunk of rows, in parallel ---- */
typedef struct gen_ctx {
    const synth_tensor *t;
    int index;
    uint64_t seed;
    int64_t row0;
    const float *colscale; /* K_PROJ: 1, or the outlier factor of the column */
    uint8_t *out;          /* rows x cols bf16, little-endian */
    double norm_center;    /* a norm's values around it: 1, or 0 for Gemma's stored gain - 1 */
} gen_ctx;

static void gen_rows(void *vctx, int64_t r0, int64_t r1) {
    const gen_ctx *c = vctx;
    const int64_t cols = c->t->cols;
    for (int64_t r = r0; r < r1; r++) {
        uint64_t s = stream(c->seed, c->index, (uint64_t)(c->row0 + r));
        uint8_t *o = c->out + (size_t)r * (size_t)cols * 2u;
        for (int64_t k = 0; k < cols; k++) {
            double x = t8_unit(&s), v;
            if (c->t->kind == K_NORM)
                v = c->norm_center + FP4_SYNTH_NORM_STD * x;
            else if (c->t->kind == K_BIAS)
                v = FP4_SYNTH_NORM_STD * x;
            else v = FP4_SYNTH_STD * x * (c->colscale ? c->colscale[k] : 1.0f);
            fp4_wr_le16(o + 2 * k, fp4_f32_to_bf16((float)v));
        }
    }
}

/* FP4_SYNTH_OUTLIERS distinct columns, each scaled by a factor in [10, 50]. */
static void outlier_columns(uint64_t seed, int index, int64_t cols, float *colscale) {
    for (int64_t k = 0; k < cols; k++) colscale[k] = 1.0f;
    uint64_t s = stream(seed, index, UINT64_MAX);
    for (int i = 0; i < FP4_SYNTH_OUTLIERS && i < cols;) {
        int64_t c = (int64_t)(sm_next(&s) % (uint64_t)cols);
        if (colscale[c] != 1.0f) continue;
        colscale[c] = (float)(10.0 + 40.0 * ((double)(sm_next(&s) >> 11) * 0x1p-53));
        i++;
    }
}

enum { CHUNK_BYTES = 32 << 20 };

static fp4_status write_tensors(const char *dir, const synth_plan *p, const fp4_synth_opts *o,
                                fp4_error *err) {
    fp4_hfdir_writer *w = NULL;
    fp4_status st = fp4_hfdir_writer_create(dir, o->max_shard_bytes, &w, err);
    char meta[160];
    snprintf(meta, sizeof meta, "shape=%s arch=%s seed=%llu fp4lane=%s", p->sh->name, p->ar->name,
             (unsigned long long)o->seed, fp4_version());
    if (!st) st = fp4_hfdir_writer_add_metadata(w, "format", "pt", err);
    if (!st) st = fp4_hfdir_writer_add_metadata(w, "fp4lane.synth", meta, err);
    for (int i = 0; i < p->n && !st; i++) {
        const synth_tensor *t = &p->t[i];
        int64_t shape[2] = {t->rows ? t->rows : t->cols, t->cols};
        st = fp4_hfdir_writer_add_tensor(w, t->name, FP4_ST_BF16, t->rows ? 2 : 1, shape, err);
    }
    int64_t max_cols = 0;
    for (int i = 0; i < p->n; i++) max_cols = p->t[i].cols > max_cols ? p->t[i].cols : max_cols;
    uint8_t *buf = st ? NULL : malloc(CHUNK_BYTES > max_cols * 2 ? CHUNK_BYTES : (size_t)max_cols * 2);
    float *colscale = st ? NULL : malloc((size_t)max_cols * sizeof *colscale);
    if (!st && (!buf || !colscale)) st = fp4_fail(err, FP4_ERR_NOMEM, dir, NULL, "alloc", "out of memory");
    int threads = o->n_threads > 0 ? o->n_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    uint64_t done = 0;
    for (int i = 0; i < p->n && !st; i++) {
        const synth_tensor *t = &p->t[i];
        const int64_t rows = t->rows ? t->rows : 1,
                      per = CHUNK_BYTES / (t->cols * 2) > 0 ? CHUNK_BYTES / (t->cols * 2) : 1;
        if (t->kind == K_PROJ) outlier_columns(o->seed, i, t->cols, colscale);
        for (int64_t r = 0; r < rows && !st; r += per) {
            const int64_t n = rows - r < per ? rows - r : per;
            gen_ctx c = {
                t, i, o->seed, r, t->kind == K_PROJ ? colscale : NULL, buf, p->ar->moe == 3 ? 0.0 : 1.0};
            st = fp4_parallel_rows(n, threads, gen_rows, &c);
            if (!st) st = fp4_hfdir_writer_write(w, buf, (size_t)n * (size_t)t->cols * 2u, err);
            done += (uint64_t)n * (uint64_t)t->cols * 2u;
            if (o->progress) o->progress(o->progress_ctx, t->name, done, p->bytes);
        }
    }
    size_t shards = 0;
    if (!st) st = fp4_hfdir_writer_finish(w, &shards, err);
    fp4_hfdir_writer_free(w);
    free(buf);
    free(colscale);
    return st;
}

/* ---- the output: refused unless absent or empty, built beside, swapped in (io/outfile.h) ---- */
static int dir_is_empty(const char *path) {
    DIR *d = opendir(path);
    if (!d) return 0;
    struct dirent *e;
    int empty = 1;
    while (empty && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) empty = 0;
    closedir(d);
    return empty;
}

static void parent_of(const char *path, char *out, size_t n) {
    snprintf(out, n, "%s", path);
    char *sl = strrchr(out, '/');
    if (!sl) snprintf(out, n, ".");
    else if (sl == out) out[1] = 0;
    else *sl = 0;
}

/* ---- NVFP4 straight from the generator (fp4_quantize_source) ---- */
typedef struct made_src {
    const synth_plan *p;
    const fp4_synth_opts *o;
    int threads;
    float *colscale;
} made_src;

static fp4_status made_rows(void *ctx, int64_t i, int64_t r0, int64_t n_rows, uint8_t *dst, fp4_error *err) {
    made_src *m = ctx;
    const synth_tensor *t = &m->p->t[i];
    if (t->kind == K_PROJ) outlier_columns(m->o->seed, (int)i, t->cols, m->colscale); /* per call: cheap */
    const float *cs = t->kind == K_PROJ ? m->colscale : NULL;
    /* the values synth_tensor writes (Gemma's norms stored as gain - 1: centred at 0) */
    gen_ctx c = {t, (int)i, m->o->seed, r0, cs, dst, m->p->ar->moe == 3 ? 0.0 : 1.0};
    fp4_status st = fp4_parallel_rows(n_rows, m->threads, gen_rows, &c);
    if (st) return fp4_fail(err, st, NULL, t->name, "synth.threads", "cannot run the generator's threads");
    return FP4_OK;
}

static fp4_status made_companions(void *ctx, const char *dir, fp4_error *err) {
    return write_tokenizer(dir, ((made_src *)ctx)->p->sh, err);
}

static int by_name(const void *a, const void *b, void *base) {
    const synth_tensor *t = base;
    return strcmp(t[*(const int64_t *)a].name, t[*(const int64_t *)b].name);
}

static fp4_status synth_nvfp4(const char *out, const synth_plan *p, const fp4_synth_opts *o, fp4_error *err) {
    char cfg[8192];
    fp4_status st = config_text(p, cfg, sizeof cfg, err);
    if (st) return st;
    fp4_raw *t = calloc((size_t)p->n, sizeof *t);
    int64_t *order = calloc((size_t)p->n, sizeof *order);
    int64_t max_cols = 1;
    for (int i = 0; i < p->n; i++) max_cols = p->t[i].cols > max_cols ? p->t[i].cols : max_cols;
    made_src m = {p, o, o->n_threads > 0 ? o->n_threads : (int)sysconf(_SC_NPROCESSORS_ONLN),
                  malloc((size_t)max_cols * sizeof(float))};
    if (!t || !order || !m.colscale) st = fp4_fail(err, FP4_ERR_NOMEM, out, NULL, "alloc", "out of memory");
    for (int i = 0; i < p->n && !st; i++) {
        const synth_tensor *s = &p->t[i];
        t[i] = (fp4_raw){.name = s->name, .type = FP4_TYPE_BF16, .st_dtype = FP4_ST_BF16,
                         .n_dims = s->rows ? 2 : 1, .ne = {s->cols, s->rows ? s->rows : 1, 1, 1},
                         .n_elements = (s->rows ? s->rows : 1) * s->cols,
                         .nbytes = (uint64_t)(s->rows ? s->rows : 1) * (uint64_t)s->cols * 2u};
        order[i] = i;
    }
    if (!st) { /* the order the checkpoint reader gives quantize (checkpoint.c: strcmp) */
        qsort_r(order, (size_t)p->n, sizeof *order, by_name, p->t);
        fp4_qsource qs = {out, p->n, t, order, made_rows, &m, cfg, made_companions};
        fp4_quantize_opts qo = {.layout = FP4_LAYOUT_MODELOPT, .max_shard_bytes = o->max_shard_bytes,
                                .progress = o->progress, .progress_ctx = o->progress_ctx};
        st = fp4_quantize_source(&qs, out, &qo, err);
    }
    free(t);
    free(order);
    free(m.colscale);
    return st;
}

/* bytes the output will hold: bf16, or NVFP4 (payload + one scale byte per 16) for projections */
static uint64_t out_bytes(const synth_plan *p, int nvfp4) {
    if (!nvfp4) return p->bytes;
    uint64_t b = 0;
    for (int i = 0; i < p->n; i++) {
        const uint64_t n = (uint64_t)(p->t[i].rows ? p->t[i].rows : 1) * (uint64_t)p->t[i].cols;
        b += p->t[i].kind == K_PROJ ? n / 2 + n / 16 + 8 : 2 * n;
    }
    return b;
}

fp4_status fp4_synth_checkpoint(const char *out, const fp4_synth_opts *opts, fp4_error *err) {
    fp4_error_clear(err);
    if (!out || !*out) return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "synth.arg", "no output path");
    synth_plan p;
    fp4_status st = make_plan(opts, &p, err);
    if (st) return free(p.t), st;
    char parent[PATH_MAX];
    size_t ol = strlen(out);
    while (ol > 1 && out[ol - 1] == '/') ol--; /* "dir/" names dir */
    if (ol >= PATH_MAX - 64) {
        free(p.t);
        return fp4_fail(err, FP4_ERR_LIMIT, out, NULL, "synth.path", "output path too long");
    }
    char outp[PATH_MAX];
    snprintf(outp, sizeof outp, "%.*s", (int)ol, out);
    struct stat sb;
    if (stat(outp, &sb) == 0 && !(S_ISDIR(sb.st_mode) && dir_is_empty(outp))) {
        free(p.t);
        return fp4_fail(err, FP4_ERR_INVALID_ARG, outp, NULL, "synth.out.exists",
                        "the output exists and is not an empty directory: not overwritten");
    }
    parent_of(outp, parent, sizeof parent);
    struct statvfs vf;
    const uint64_t need = out_bytes(&p, opts->to_nvfp4);
    if (statvfs(parent, &vf) == 0 && (uint64_t)vf.f_bavail * vf.f_frsize < need + (1u << 20)) {
        fp4_fail(err, FP4_ERR_IO, outp, NULL, "synth.space", "needs %.2f GB, %.2f GB free on the file system",
                 need / 1e9, (double)vf.f_bavail * vf.f_frsize / 1e9);
        return free(p.t), FP4_ERR_IO;
    }
    if (opts->to_nvfp4) {
        st = synth_nvfp4(outp, &p, opts, err);
        return free(p.t), st;
    }
    /* every file is written under a temporary name, fsynced and renamed, inside a directory built
     * beside the target; that directory is then renamed into place (fp4_outdir_*) */
    fp4_outdir *od = NULL;
    st = fp4_outdir_open(outp, 0, &od, err);
    if (st) return free(p.t), st;
    st = write_config(fp4_outdir_tmp(od), &p, err);
    if (!st) st = write_tokenizer(fp4_outdir_tmp(od), p.sh, err);
    if (!st) st = write_tensors(fp4_outdir_tmp(od), &p, opts, err);
    if (st) fp4_outdir_abort(od);
    else st = fp4_outdir_commit(od, err);
    free(p.t);
    return st;
}
