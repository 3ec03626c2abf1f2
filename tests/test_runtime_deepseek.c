/* test_runtime_deepseek.c — DeepSeek-V3 / R1 / Kimi-K2 on the CPU engine (issue 31): config.json's
 * keys and every refusal naming the key; the binding (latent attention slots, shared experts, the
 * router bias, the MTP layer skipped, a missing tensor named); the engine against an independent
 * float64 forward in transformers' expanded form (ds_fixture.c) at every position, prefill and
 * decode; exact mode's invariance across threads, chunking and a KV snapshot continued; the latent
 * cache's size; the CUDA refusal; `synth --shape tiny-deepseek` and the deepseek-v3 shape. */
#include "check.h"
#include "ds_fixture.h"
#include "fp4lane_io.h"
#include "fp4lane_runtime.h"
#include "fp4lane_synth.h"
#include "rt_fixture.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmp[512];

#define DS0                                                                                                  \
    "{\"model_type\":\"deepseek_v3\",\"hidden_size\":64,\"num_attention_heads\":4,\"num_key_value_heads\":"  \
    "4,"                                                                                                     \
    "\"intermediate_size\":96,\"vocab_size\":96,\"num_hidden_layers\":3,\"max_position_embeddings\":64,"     \
    "\"rms_norm_eps\":1e-6,\"kv_lora_rank\":16,\"qk_nope_head_dim\":8,\"v_head_dim\":8,"                     \
    "\"moe_intermediate_size\":32,\"n_routed_experts\":8,\"num_experts_per_tok\":3"
#define DS DS0 ",\"qk_rope_head_dim\":4"

static void refused(const char *json, const char *rule, const char *key) {
    fp4_arch a;
    fp4_error e;
    fp4_status st = fp4_arch_from_hf_config(json, &a, &e);
    CHECK_MSG(st != FP4_OK && !strcmp(e.rule, rule) && strstr(e.msg, key),
              "%s -> %s, rule %s: '%s' (want %s, %s)", json, fp4_status_str(st), e.rule, e.msg, rule, key);
}

static void test_arch(void) {
    fp4_arch a;
    fp4_error e;
    /* transformers' defaults for the keys a file leaves out: 8 groups, 4 chosen, 1 shared expert,
     * 3 dense layers, scaling 2.5, norm_topk_prob and rope_interleave true */
    CHECK_OK(fp4_arch_from_hf_config(DS ",\"q_lora_rank\":32,\"n_group\":4,\"topk_group\":2}", &a, &e));
    CHECK(a.family == FP4_ARCH_DEEPSEEK_V3 && a.q_lora_rank == 32 && a.kv_lora_rank == 16 &&
          a.head_dim == 12 && a.n_kv_heads == 4 && a.v_head_dim == 8 && a.rope_interleave &&
          a.moe_routing == FP4_MOE_SIGMOID_GROUP && a.moe_norm_topk && a.n_shared_experts == 1 &&
          a.routed_scaling == 2.5 && a.moe_n_group == 4);
    CHECK(!fp4_arch_layer_moe(&a, 0) && !fp4_arch_layer_moe(&a, 2) && a.n_nextn == 0);
    CHECK_EQ_INT((int)fp4_arch_kv_dim(&a), 10); /* (16 + 4) / 2 halves in each of K and V */
    CHECK_OK(fp4_arch_from_hf_config(
        DS ",\"n_group\":1,\"topk_group\":1,\"q_lora_rank\":null,\"first_k_dense_"
           "replace\":1,\"rope_interleave\":false,\"num_nextn_predict_layers\":1,"
           "\"rope_scaling\":{\"type\":\"yarn\",\"factor\":40,\"original_max_position_"
           "embeddings\":4096,\"beta_fast\":32,\"beta_slow\":1,\"mscale\":1.0,"
           "\"mscale_all_dim\":1.0}}",
        &a, &e));
    CHECK(a.q_lora_rank == 0 && !a.rope_interleave && fp4_arch_layer_moe(&a, 1) && a.n_nextn == 1 &&
          a.rope_scaling == FP4_ROPE_YARN && a.rope_factor == 40 && a.rope_orig_ctx == 4096 &&
          a.rope_mscale_all_dim == 1.0 && a.rope_beta_fast == 32);
    /* refusals, each naming its key */
    refused(DS "}", "arch.deepseek", "q_lora_rank");
#undef DS
#define DS DS0 ",\"qk_rope_head_dim\":4,\"q_lora_rank\":32"
    refused(DS ",\"n_group\":3,\"topk_group\":1}", "arch.deepseek", "n_group does not divide");
    refused(DS ",\"n_group\":2,\"topk_group\":3}", "arch.deepseek", "topk_group");
    refused(DS ",\"n_group\":4,\"topk_group\":1}", "arch.deepseek", "num_experts_per_tok");
    refused(DS ",\"scoring_func\":\"softmax\"}", "arch.deepseek", "scoring_func");
    refused(DS ",\"topk_method\":\"greedy\"}", "arch.deepseek", "topk_method");
    refused(DS ",\"moe_layer_freq\":2}", "arch.deepseek", "moe_layer_freq");
    refused(DS0 ",\"q_lora_rank\":32,\"qk_rope_head_dim\":5}", "arch.deepseek", "qk_rope_head_dim");
    refused(DS0 ",\"q_lora_rank\":32}", "arch.deepseek", "qk_rope_head_dim is missing");
    refused(DS ",\"routed_scaling_factor\":-1}", "arch.deepseek", "routed_scaling_factor");
    refused(DS ",\"rope_interleave\":1}", "arch.deepseek", "rope_interleave");
    refused(DS ",\"attention_bias\":true}", "arch.feature", "attention_bias");
    refused(DS ",\"rope_scaling\":{\"type\":\"yarn\",\"factor\":4}}", "arch.rope_yarn",
            "original_max_position_embeddings");
    refused(DS ",\"rope_scaling\":{\"type\":\"yarn\",\"factor\":4,\"original_max_position_embeddings\":16,"
               "\"attention_factor\":1.0}}",
            "arch.rope_yarn", "attention_factor");
    refused(DS ",\"rope_scaling\":{\"type\":\"yarn\",\"factor\":4,\"original_max_position_embeddings\":16,"
               "\"beta_fast\":1,\"beta_slow\":2}}",
            "arch.rope_yarn", "beta_fast");
    refused(DS ",\"rope_scaling\":{\"type\":\"linear\",\"factor\":4}}", "arch.rope_type", "deepseek_v3");
    /* yarn stays a DeepSeek feature: a Llama config with it is refused as before */
    refused("{\"model_type\":\"llama\",\"hidden_size\":64,\"num_attention_heads\":4,\"intermediate_size\":96,"
            "\"vocab_size\":96,\"num_hidden_layers\":1,\"rope_scaling\":{\"type\":\"yarn\",\"factor\":4}}",
            "arch.rope_type", "yarn");
}

/* logits [T][V] of ids through an exact (or native) engine in chunks of `chunk` */
static int run(const fp4_model *m, fp4_mode mode, int threads, int chunk, const int32_t *ids, int T,
               float *out) {
    fp4_rt_opts o = {.mode = mode, .n_threads = threads, .n_ctx = 64};
    fp4_rt *rt = NULL;
    fp4_error e;
    if (fp4_rt_create(m, &o, &rt, &e)) return fprintf(stderr, "%s: %s (%s)\n", e.rule, e.msg, e.tensor), -1;
    int32_t s;
    fp4_rt_seq_open(rt, &s);
    fp4_rt_tok c[64];
    for (int i = 0; i < T; i += chunk) {
        const int k = T - i < chunk ? T - i : chunk;
        for (int j = 0; j < k; j++)
            c[j] = (fp4_rt_tok){s, ids[i + j], 1};
        if (fp4_rt_step(rt, c, k, out + (int64_t)i * fp4_rt_vocab(rt), &e)) return fp4_rt_free(rt), -1;
    }
    fp4_rt_free(rt);
    return 0;
}

static int64_t differ(const float *x, const float *y, int64_t n) {
    int64_t d = 0;
    for (int64_t i = 0; i < n; i++)
        d += f32_bits(x[i]) != f32_bits(y[i]);
    return d;
}

/* worst |engine - reference| / max |reference| over the positions' logits */
static double rel_err(const float *x, const double *ref, int T, int V) {
    double worst = 0;
    for (int t = 0; t < T; t++) {
        double mx = 0, d = 0;
        for (int i = 0; i < V; i++)
            mx = fmax(mx, fabs(ref[t * V + i])), d = fmax(d, fabs(x[t * V + i] - ref[t * V + i]));
        worst = fmax(worst, d / mx);
    }
    return worst;
}

enum { T = 24 };
static const int32_t ids[T] = {1, 17, 42, 5,  88, 3, 60, 60, 9, 31, 77, 12,
                               2, 45, 19, 90, 33, 8, 71, 26, 4, 50, 66, 14};

static void test_reference(const char *dir) {
    fp4_model *m = NULL;
    fp4_error e;
    CHECK_OK(fp4_model_open(dir, NULL, &m, &e));
    if (!m) return;
    fp4_arch a;
    CHECK_OK(fp4_model_arch(m, &a, &e));
    const int V = (int)a.vocab;
    float *x = malloc(sizeof(float) * T * V), *y = malloc(sizeof(float) * T * V);
    double *ref = malloc(sizeof(double) * T * V);
    CHECK(dsfx_reference(m, &a, ids, T, ref) == 0);
    /* prefill: every position in one step; decode: one column per step (the absorbed form both) */
    CHECK(run(m, FP4_MODE_EXACT, 1, T, ids, T, x) == 0);
    const double ep = rel_err(x, ref, T, V);
    CHECK(run(m, FP4_MODE_EXACT, 1, 1, ids, T, y) == 0);
    const double ed = rel_err(y, ref, T, V);
    printf("deepseek exact vs f64 (expanded form): prefill %.2e, decode %.2e of the largest logit\n", ep, ed);
    /* f32 arithmetic and the F16 latent cache against float64: a wrong rope, scale, routing or
     * absorption moves logits by tens of percent */
    CHECK_MSG(ep < 5e-3 && ed < 5e-3, "exact vs f64: %.3e / %.3e", ep, ed);
    CHECK_MSG(differ(x, y, (int64_t)T * V) == 0, "prefill and decode differ in %lld logits",
              (long long)differ(x, y, (int64_t)T * V));
    /* exact invariance: threads, chunking */
    static const int chunks[][2] = {{2, 1}, {2, 5}, {1, 5}, {2, T}};
    for (size_t i = 0; i < sizeof chunks / sizeof chunks[0]; i++) {
        CHECK(run(m, FP4_MODE_EXACT, chunks[i][0], chunks[i][1], ids, T, y) == 0);
        const int64_t d = differ(x, y, (int64_t)T * V);
        CHECK_MSG(d == 0, "threads %d chunk %d: %lld logits differ", chunks[i][0], chunks[i][1],
                  (long long)d);
    }
    /* native mode: held to the reference's tolerance */
    CHECK(run(m, FP4_MODE_NATIVE, 2, 7, ids, T, y) == 0);
    const double en = rel_err(y, ref, T, V);
    CHECK_MSG(en < 5e-3, "native vs f64: %.3e", en);
    free(x), free(y), free(ref);
    fp4_model_close(m);
}

/* a snapshot after 9 positions holds only the latent (kv_lora_rank + qk_rope_dim halves per token
 * and layer); a fresh engine that loads it continues to the same bits */
static void test_snapshot(const char *dir) {
    fp4_model *m = NULL;
    fp4_error e;
    CHECK_OK(fp4_model_open(dir, NULL, &m, &e));
    if (!m) return;
    const int64_t V = 96, K = 9;
    float *x = malloc(sizeof(float) * T * V), *y = malloc(sizeof(float) * T * V);
    CHECK(run(m, FP4_MODE_EXACT, 1, 4, ids, T, x) == 0);
    char snap[700];
    snprintf(snap, sizeof snap, "%s/ds.kv", tmp);
    fp4_rt_opts o = {.mode = FP4_MODE_EXACT, .n_threads = 2, .n_ctx = 64};
    fp4_rt *rt = NULL;
    int32_t s;
    fp4_rt_tok c[T];
    CHECK_OK(fp4_rt_create(m, &o, &rt, &e));
    fp4_rt_seq_open(rt, &s);
    for (int j = 0; j < K; j++)
        c[j] = (fp4_rt_tok){s, ids[j], 1};
    CHECK_OK(fp4_rt_step(rt, c, K, y, &e));
    CHECK_OK(fp4_rt_kv_save(rt, s, snap, &e));
    fp4_rt_free(rt);
    struct stat sb;
    CHECK(stat(snap, &sb) == 0);
    /* header 96, no token history, K and V of 3 layers x 9 positions x 10 halves, the SHA-256 */
    CHECK_MSG(sb.st_size == 96 + 2 * 3 * K * 10 * 2 + 32, "snapshot %lld bytes", (long long)sb.st_size);
    rt = NULL;
    CHECK_OK(fp4_rt_create(m, &o, &rt, &e));
    fp4_rt_seq_open(rt, &s);
    CHECK_OK(fp4_rt_kv_load(rt, s, snap, &e));
    for (int j = K; j < T; j++)
        c[j - K] = (fp4_rt_tok){s, ids[j], 1};
    CHECK_OK(fp4_rt_step(rt, c, T - K, y + K * V, &e));
    fp4_rt_free(rt);
    CHECK_MSG(differ(x + K * V, y + K * V, (T - K) * V) == 0,
              "continued from the snapshot: %lld logits differ",
              (long long)differ(x + K * V, y + K * V, (T - K) * V));
    remove(snap);
    free(x), free(y);
    fp4_model_close(m);
}

/* The latent rows live in the CPU backend's paged cache like any model's K/V (3 layers x 10 halves
 * in K and in V per position: its block), held as positions fill blocks, given back on a cut and
 * on close; the cut positions written again give the bits of the first pass. */
static void test_paged(const char *dir) {
    fp4_model *m = NULL;
    fp4_error e;
    CHECK_OK(fp4_model_open(dir, NULL, &m, &e));
    if (!m) return;
    const int64_t V = 96;
    float *x = malloc(sizeof(float) * T * V), *y = malloc(sizeof(float) * T * V);
    CHECK(run(m, FP4_MODE_EXACT, 1, T, ids, T, x) == 0);
    fp4_rt_opts o = {.mode = FP4_MODE_EXACT, .n_threads = 2, .n_ctx = 64};
    fp4_rt *rt = NULL;
    CHECK_OK(fp4_rt_create(m, &o, &rt, &e));
    if (!rt) return free(x), free(y), fp4_model_close(m);
    const long pg = sysconf(_SC_PAGESIZE);
    int64_t g = pg > 0 ? pg : 4096, r = 2 * 3 * 10, used = -1, total = 0;
    while (r) {
        const int64_t t = g % r;
        g = r, r = t;
    }
    const int64_t want = (pg > 0 ? pg : 4096) / g < 16 ? 16 : (pg > 0 ? pg : 4096) / g;
    const int64_t B = fp4_rt_kv_blocks(rt, &used, &total);
    CHECK_MSG(B == want && used == 0 && total == (64 + B - 1) / B,
              "block %lld (want %lld), used %lld, total %lld", (long long)B, (long long)want,
              (long long)used, (long long)total);
    int32_t s;
    fp4_rt_tok c[T];
    fp4_rt_seq_open(rt, &s);
    for (int j = 0; j < T; j++)
        c[j] = (fp4_rt_tok){s, ids[j], 1};
    CHECK_OK(fp4_rt_step(rt, c, T, y, &e));
    fp4_rt_kv_blocks(rt, &used, NULL);
    CHECK(used == (T + B - 1) / B);
    CHECK_OK(fp4_rt_seq_truncate(rt, s, 0));
    fp4_rt_kv_blocks(rt, &used, NULL);
    CHECK(used == 0);
    memset(y, 0, sizeof(float) * T * V);
    CHECK_OK(fp4_rt_step(rt, c, T, y, &e));
    CHECK_MSG(differ(x, y, T * V) == 0, "after the cut: %lld logits differ", (long long)differ(x, y, T * V));
    fp4_rt_seq_close(rt, s);
    fp4_rt_kv_blocks(rt, &used, NULL);
    CHECK(used == 0);
    fp4_rt_free(rt);
    free(x), free(y);
    fp4_model_close(m);
}

static void bind_refused(const char *name, dsfx_spec s, const char *rule, const char *tensor) {
    char dir[700];
    snprintf(dir, sizeof dir, "%s/%s", tmp, name);
    CHECK(dsfx_write(dir, &s, 5) == 0);
    fp4_model *m = NULL;
    fp4_error e;
    CHECK_OK(fp4_model_open(dir, NULL, &m, &e));
    fp4_rt *rt = NULL;
    fp4_rt_opts o = {.n_ctx = 16};
    fp4_status st = m ? fp4_rt_create(m, &o, &rt, &e) : FP4_ERR_IO;
    CHECK_MSG(st != FP4_OK && !strcmp(e.rule, rule) && strstr(e.tensor, tensor), "%s: %s %s (%s)", name,
              e.rule, e.msg, e.tensor);
    fp4_rt_free(rt);
    fp4_model_close(m);
}

static void test_bind(const char *dir) {
    dsfx_spec s = dsfx_default();
    s.drop = "model.layers.%d.self_attn.kv_b_proj.weight";
    bind_refused("no-kvb", s, "bind.missing", "model.layers.1.self_attn.kv_b_proj.weight");
    s.drop = "model.layers.%d.mlp.gate.e_score_correction_bias";
    bind_refused("no-bias", s, "bind.missing", "e_score_correction_bias");
    s.drop = "model.layers.%d.mlp.shared_experts.up_proj.weight";
    bind_refused("no-shared", s, "bind.missing", "shared_experts.up_proj");
    s.drop = NULL, s.hide_nextn = 1; /* MTP tensors the config does not announce */
    bind_refused("mtp-unannounced", s, "bind.unexpected", "model.layers.3.");
    /* CUDA: refused before any library is loaded, with the way out */
    fp4_model *m = NULL;
    fp4_error e;
    CHECK_OK(fp4_model_open(dir, NULL, &m, &e));
    fp4_rt *rt = NULL;
    fp4_rt_opts o = {.device = FP4_DEVICE_CUDA, .n_ctx = 16};
    fp4_status st = m ? fp4_rt_create(m, &o, &rt, &e) : FP4_ERR_IO;
    CHECK_MSG(st == FP4_ERR_REFUSED_ROUTE && !strcmp(e.rule, "route.mla-cuda") &&
                  strstr(e.msg, "--device cpu"),
              "cuda: %s %s", e.rule, e.msg);
    fp4_rt_free(rt);
    rt = NULL;
    /* FP4LANE_CUDA_UNPROVEN=1 (the GPU tests before a device run proves the route): past the refusal,
     * as far as loading a library that is not there */
    setenv("FP4LANE_CUDA_UNPROVEN", "1", 1);
    o.cuda_lib = "/nonexistent/libfp4lane_cuda.so";
    st = m ? fp4_rt_create(m, &o, &rt, &e) : FP4_ERR_IO;
    unsetenv("FP4LANE_CUDA_UNPROVEN");
    CHECK_MSG(st != FP4_OK && strcmp(e.rule, "route.mla-cuda") && strcmp(e.rule, "route.moe-cuda"),
              "cuda, unproven: %s %s", e.rule, e.msg);
    fp4_rt_free(rt);
    fp4_model_close(m);
}

static void test_synth(void) {
    char out[700];
    fp4_error e;
    snprintf(out, sizeof out, "%s/synth-ds", tmp);
    fp4_synth_opts o = {.shape = "tiny-deepseek", .seed = 2, .n_threads = 2};
    CHECK_OK(fp4_synth_checkpoint(out, &o, &e));
    fp4_model *m = NULL;
    CHECK_OK(fp4_model_open(out, NULL, &m, &e));
    fp4_arch a;
    CHECK_OK(m ? fp4_model_arch(m, &a, &e) : FP4_ERR_IO);
    CHECK(a.family == FP4_ARCH_DEEPSEEK_V3 && a.n_layers == 3 && a.n_nextn == 1 && a.q_lora_rank == 32 &&
          a.n_experts == 8 && a.moe_n_group == 4 && !fp4_arch_layer_moe(&a, 0) && fp4_arch_layer_moe(&a, 1) &&
          a.rope_scaling == FP4_ROPE_YARN);
    CHECK(m && fp4_model_find(m, "model.layers.3.eh_proj.weight") != NULL); /* the MTP layer is in the file */
    fp4_rt *rt = NULL;
    fp4_rt_opts ro = {.n_ctx = 16};
    /* ... and the engine says it does not run it */
    CHECK_OK(m ? fp4_rt_create(m, &ro, &rt, &e) : FP4_ERR_IO);
    CHECK_MSG(rt && strstr(fp4_rt_routes(rt), "mtp: 1 layer(s) in the file, not run"), "routes: %s",
              rt ? fp4_rt_routes(rt) : "-");
    fp4_rt_free(rt);
    float *x = malloc(sizeof(float) * 6 * 512);
    CHECK(m && run(m, FP4_MODE_EXACT, 2, 3, ids, 6, x) == 0);
    free(x);
    fp4_model_close(m);
    /* DeepSeek-V3's size without writing it: 58 MoE layers of 256 experts x 3 x 2048 x 7168 bf16, the MTP
     * layer's too */
    uint64_t bytes = 0;
    fp4_synth_opts big = {.shape = "deepseek-v3"};
    CHECK_OK(fp4_synth_data_bytes(&big, &bytes, &e));
    const uint64_t experts = 59ull * 256 * 3 * 2048 * 7168 * 2;
    CHECK_MSG(bytes > experts && bytes < experts + (40ull << 30), "deepseek-v3 synth: %.1f GB", bytes / 1e9);
}

/* NVIDIA's DeepSeek-R1-FP4 layout: quantize keeps the attention, the dense MLP, the shared experts and
 * the MTP layer in bf16 (exclude_modules) and makes the routed experts NVFP4; each layout runs, exact
 * against the f64 forward of the same (dequantized) weights, invariant, and the same bits in every
 * layout */
static void test_nvfp4(void) {
    char bf[700], out[700];
    dsfx_spec s = dsfx_default();
    s.hidden = 256, s.moe_ffn = 256, s.ffn = 256; /* the A16 exact route's widths */
    snprintf(bf, sizeof bf, "%s/ds256", tmp);
    CHECK(dsfx_write(bf, &s, 13) == 0);
    static const fp4_layout layouts[] = {FP4_LAYOUT_MODELOPT, FP4_LAYOUT_CT, FP4_LAYOUT_GGUF};
    float *first = NULL;
    for (size_t li = 0; li < sizeof layouts / sizeof layouts[0]; li++) {
        fp4_error e;
        snprintf(out, sizeof out, "%s/ds256-q%zu%s", tmp, li, layouts[li] == FP4_LAYOUT_GGUF ? ".gguf" : "");
        fp4_quantize_opts qo = {.layout = layouts[li]};
        CHECK_OK(fp4_quantize_checkpoint(bf, out, &qo, &e));
        fp4_model *m = NULL;
        CHECK_OK(fp4_model_open(out, NULL, &m, &e));
        if (!m) continue;
        static const char *const kept[] = {"model.layers.0.self_attn.q_a_proj.weight",
                                           "model.layers.1.self_attn.kv_b_proj.weight",
                                           "model.layers.0.mlp.gate_proj.weight",
                                           "model.layers.2.mlp.shared_experts.down_proj.weight",
                                           "model.layers.3.mlp.experts.0.up_proj.weight",
                                           "model.layers.1.mlp.gate.weight"};
        for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++) {
            const fp4_tensor *t = fp4_model_find(m, kept[i]);
            CHECK_MSG(t && t->type == FP4_TYPE_BF16, "%s: %s is %d", out, kept[i], t ? (int)t->type : -1);
        }
        const fp4_tensor *ex = fp4_model_find(m, "model.layers.2.mlp.experts.5.down_proj.weight");
        CHECK_MSG(ex && ex->type == FP4_TYPE_NVFP4_E2M1, "%s: a routed expert is not NVFP4", out);
        fp4_arch a;
        CHECK_OK(fp4_model_arch(m, &a, &e));
        const int V = (int)a.vocab;
        float *x = malloc(sizeof(float) * T * V), *y = malloc(sizeof(float) * T * V);
        double *ref = malloc(sizeof(double) * T * V);
        CHECK(dsfx_reference(m, &a, ids, T, ref) == 0);
        CHECK(run(m, FP4_MODE_EXACT, 1, T, ids, T, x) == 0 && run(m, FP4_MODE_EXACT, 2, 3, ids, T, y) == 0);
        /* the A16 route quantizes the experts' inputs to 8 bits (SPEC §4): a few percent, and where two
         * experts' scores are that close a position may route otherwise than the f64 forward; most
         * positions must agree to 5e-2 */
        int off = 0;
        double worst = 0;
        for (int t = 0; t < T; t++) {
            const double et = rel_err(x + t * V, ref + t * V, 1, V);
            off += et > 5e-2, worst = et <= 5e-2 && et > worst ? et : worst;
        }
        printf(
            "deepseek nvfp4 (%s) exact vs f64 of its weights: %.2e at %d of %d positions, %d beyond 5e-2\n",
            out + strlen(tmp), worst, T - off, T, off);
        CHECK_MSG(off <= T / 8, "nvfp4 exact vs f64: %d of %d positions beyond 5e-2", off, T);
        CHECK_MSG(differ(x, y, (int64_t)T * V) == 0, "nvfp4: threads 2 chunk 3 differ");
        if (!first)
            first = x, x = NULL;
        else
            CHECK_MSG(differ(first, x, (int64_t)T * V) == 0, "%s: other bits than the ModelOpt layout", out);
        free(x), free(y), free(ref);
        fp4_model_close(m);
    }
    free(first);
}

/* llama.cpp's deepseek2 form of the fixture (blk.* names, experts stacked into 3-D ffn_*_exps,
 * kv_b whole or split into attn_k_b / attn_v_b per head as newer files hold it), written here from
 * the HF directory's bf16 bytes: its exact logits must be the HF directory's bit for bit */
typedef struct ggt {
    char name[96];
    int n_dims;
    int64_t ne[3];
    uint16_t *buf; /* bf16 values, owned */
    size_t n;
} ggt;

static int gg_copy(ggt *t, const fp4_model *m, const char *gg, const char *hf, int l) {
    char nm[160];
    snprintf(nm, sizeof nm, hf, l);
    const fp4_tensor *s = fp4_model_find(m, nm);
    if (!s || s->type != FP4_TYPE_BF16) return -1;
    snprintf(t->name, sizeof t->name, gg, l);
    t->n_dims = s->n_dims, memcpy(t->ne, s->ne, sizeof t->ne);
    t->n = (size_t)(s->nbytes / 2), t->buf = malloc(s->nbytes);
    memcpy(t->buf, s->data, (size_t)s->nbytes);
    return 0;
}

static int gguf_from_hf(const fp4_model *m, const fp4_arch *a, const char *path, int split) {
    static const char *const map[][2] = {
        {"blk.%d.attn_norm.weight", "model.layers.%d.input_layernorm.weight"},
        {"blk.%d.attn_q_a.weight", "model.layers.%d.self_attn.q_a_proj.weight"},
        {"blk.%d.attn_q_a_norm.weight", "model.layers.%d.self_attn.q_a_layernorm.weight"},
        {"blk.%d.attn_q_b.weight", "model.layers.%d.self_attn.q_b_proj.weight"},
        {"blk.%d.attn_kv_a_mqa.weight", "model.layers.%d.self_attn.kv_a_proj_with_mqa.weight"},
        {"blk.%d.attn_kv_a_norm.weight", "model.layers.%d.self_attn.kv_a_layernorm.weight"},
        {"blk.%d.attn_output.weight", "model.layers.%d.self_attn.o_proj.weight"},
        {"blk.%d.ffn_norm.weight", "model.layers.%d.post_attention_layernorm.weight"}};
    static const char *const dense[][2] = {
        {"blk.%d.ffn_gate.weight", "model.layers.%d.mlp.gate_proj.weight"},
        {"blk.%d.ffn_up.weight", "model.layers.%d.mlp.up_proj.weight"},
        {"blk.%d.ffn_down.weight", "model.layers.%d.mlp.down_proj.weight"}};
    static const char *const moe[][2] = {
        {"blk.%d.ffn_gate_inp.weight", "model.layers.%d.mlp.gate.weight"},
        {"blk.%d.exp_probs_b.bias", "model.layers.%d.mlp.gate.e_score_correction_bias"},
        {"blk.%d.ffn_gate_shexp.weight", "model.layers.%d.mlp.shared_experts.gate_proj.weight"},
        {"blk.%d.ffn_up_shexp.weight", "model.layers.%d.mlp.shared_experts.up_proj.weight"},
        {"blk.%d.ffn_down_shexp.weight", "model.layers.%d.mlp.shared_experts.down_proj.weight"}};
    static const char *const parts[3] = {"gate", "up", "down"}, *const hfp[3] = {"gate_proj", "up_proj",
                                                                                 "down_proj"};
    const int64_t NH = a->n_heads, R = a->kv_lora_rank, dn = a->qk_nope_dim, dv = a->v_head_dim;
    ggt *t = calloc(512, sizeof *t);
    int n = 0, bad = 0;
    char nm[160];
    bad |= gg_copy(&t[n++], m, "token_embd.weight", "model.embed_tokens.weight", 0);
    bad |= gg_copy(&t[n++], m, "output_norm.weight", "model.norm.weight", 0);
    bad |= gg_copy(&t[n++], m, "output.weight", "lm_head.weight", 0);
    for (int l = 0; l < a->n_layers && !bad; l++) {
        for (size_t k = 0; k < sizeof map / sizeof map[0]; k++)
            bad |= gg_copy(&t[n++], m, map[k][0], map[k][1], l);
        ggt kvb = {0};
        bad |= gg_copy(&kvb, m, "blk.%d.attn_kv_b.weight", "model.layers.%d.self_attn.kv_b_proj.weight", l);
        if (!split)
            t[n++] = kvb;
        else if (!bad) { /* k_b ne [dn, R, NH]: W_UK_h transposed; v_b ne [R, dv, NH]: W_UV_h */
            ggt *kb = &t[n++], *vb = &t[n++];
            snprintf(kb->name, sizeof kb->name, "blk.%d.attn_k_b.weight", l);
            snprintf(vb->name, sizeof vb->name, "blk.%d.attn_v_b.weight", l);
            kb->n_dims = vb->n_dims = 3;
            kb->ne[0] = dn, kb->ne[1] = R, kb->ne[2] = NH, vb->ne[0] = R, vb->ne[1] = dv, vb->ne[2] = NH;
            kb->n = (size_t)(NH * R * dn), vb->n = (size_t)(NH * dv * R);
            kb->buf = malloc(kb->n * 2), vb->buf = malloc(vb->n * 2);
            for (int64_t h = 0; h < NH; h++) {
                for (int64_t r = 0; r < R; r++)
                    for (int64_t i = 0; i < dn; i++)
                        kb->buf[(h * R + r) * dn + i] = kvb.buf[(h * (dn + dv) + i) * R + r];
                memcpy(vb->buf + h * dv * R, kvb.buf + (h * (dn + dv) + dn) * R,
                       sizeof(uint16_t) * (size_t)(dv * R));
            }
            free(kvb.buf);
        }
        if (!fp4_arch_layer_moe(a, l)) {
            for (int k = 0; k < 3; k++)
                bad |= gg_copy(&t[n++], m, dense[k][0], dense[k][1], l);
            continue;
        }
        for (size_t k = 0; k < sizeof moe / sizeof moe[0]; k++)
            bad |= gg_copy(&t[n++], m, moe[k][0], moe[k][1], l);
        for (int p = 0; p < 3 && !bad; p++) { /* the experts stacked: ne [n_in, n_out, E] */
            ggt *x = &t[n++];
            snprintf(x->name, sizeof x->name, "blk.%d.ffn_%s_exps.weight", l, parts[p]);
            for (int e = 0; e < a->n_experts && !bad; e++) {
                snprintf(nm, sizeof nm, "model.layers.%%d.mlp.experts.%d.%s.weight", e, hfp[p]);
                ggt one = {0};
                bad |= gg_copy(&one, m, "x", nm, l);
                if (!e) {
                    x->n_dims = 3, x->ne[0] = one.ne[0], x->ne[1] = one.ne[1], x->ne[2] = a->n_experts;
                    x->n = one.n * (size_t)a->n_experts, x->buf = malloc(x->n * 2);
                }
                if (!bad) memcpy(x->buf + one.n * (size_t)e, one.buf, one.n * 2);
                free(one.buf);
            }
        }
    }
    fp4_error e;
    fp4_gguf_writer *w = NULL;
    const char *A = "deepseek2";
    char key[128];
    if (!bad && !fp4_gguf_writer_create(&w, &e)) {
        fp4_gguf_writer_add_str(w, "general.architecture", A, strlen(A), &e);
        const struct {
            const char *k;
            int64_t v;
        } u[] = {{"block_count", a->n_layers},
                 {"context_length", a->n_ctx_train},
                 {"embedding_length", a->hidden},
                 {"feed_forward_length", a->ffn},
                 {"attention.head_count", NH},
                 {"attention.head_count_kv", split ? 1 : NH},
                 {"attention.q_lora_rank", a->q_lora_rank},
                 {"attention.kv_lora_rank", R},
                 {"attention.key_length", split ? R + a->qk_rope_dim : a->head_dim},
                 {"attention.value_length", split ? R : dv},
                 {"attention.key_length_mla", split ? a->head_dim : 0},
                 {"attention.value_length_mla", split ? dv : 0},
                 {"rope.dimension_count", a->qk_rope_dim},
                 {"leading_dense_block_count", 1},
                 {"expert_count", a->n_experts},
                 {"expert_used_count", a->n_experts_used},
                 {"expert_feed_forward_length", a->moe_ffn},
                 {"expert_shared_count", a->n_shared_experts},
                 {"expert_gating_func", 2},
                 {"expert_group_count", a->moe_n_group},
                 {"expert_group_used_count", a->moe_topk_group},
                 {"rope.scaling.original_context_length", a->rope_orig_ctx}};
        for (size_t i = 0; i < sizeof u / sizeof u[0]; i++)
            if (u[i].v)
                snprintf(key, sizeof key, "%s.%s", A, u[i].k),
                    fp4_gguf_writer_add_u32(w, key, (uint32_t)u[i].v, &e);
        const struct {
            const char *k;
            double v;
        } f[] = {{"attention.layer_norm_rms_epsilon", a->rms_eps},
                 {"rope.freq_base", a->rope_theta},
                 {"expert_weights_scale", a->routed_scaling},
                 {"rope.scaling.factor", a->rope_factor},
                 {"rope.scaling.yarn_log_multiplier", 0.1 * a->rope_mscale_all_dim}};
        for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
            snprintf(key, sizeof key, "%s.%s", A, f[i].k), fp4_gguf_writer_add_f32(w, key, (float)f[i].v, &e);
        snprintf(key, sizeof key, "%s.expert_weights_norm", A);
        fp4_gguf_writer_add_bool(w, key, 1, &e);
        snprintf(key, sizeof key, "%s.rope.scaling.type", A);
        fp4_gguf_writer_add_str(w, key, "yarn", 4, &e);
        for (int i = 0; i < n; i++)
            fp4_gguf_writer_add_tensor(w, t[i].name, FP4_TYPE_BF16, t[i].n_dims, t[i].ne, &e);
        bad = fp4_gguf_writer_write_header(w, path, &e) != FP4_OK;
        for (int i = 0; i < n && !bad; i++)
            bad = fp4_gguf_writer_write_tensor_data(w, i, t[i].buf, t[i].n * 2, &e) != FP4_OK;
        bad = bad || fp4_gguf_writer_finish(w, &e) != FP4_OK;
    } else
        bad = 1;
    fp4_gguf_writer_free(w);
    for (int i = 0; i < n; i++)
        free(t[i].buf);
    free(t);
    return bad ? -1 : 0;
}

static void test_gguf(void) {
    char dir[700], gg[700];
    dsfx_spec s = dsfx_default();
    s.mscale = s.mscale_all_dim = 1.0; /* llama.cpp's deepseek2 folds no separate cos/sin factor */
    s.nextn = 0;
    snprintf(dir, sizeof dir, "%s/ds-gg-hf", tmp);
    CHECK(dsfx_write(dir, &s, 17) == 0);
    fp4_model *m = NULL;
    fp4_error e;
    CHECK_OK(fp4_model_open(dir, NULL, &m, &e));
    if (!m) return;
    fp4_arch a;
    CHECK_OK(fp4_model_arch(m, &a, &e));
    const int64_t V = a.vocab;
    float *x = malloc(sizeof(float) * T * V), *y = malloc(sizeof(float) * T * V);
    CHECK(run(m, FP4_MODE_EXACT, 1, T, ids, T, x) == 0);
    for (int split = 0; split < 2; split++) {
        snprintf(gg, sizeof gg, "%s/ds-%d.gguf", tmp, split);
        CHECK(gguf_from_hf(m, &a, gg, split) == 0);
        fp4_model *g = NULL;
        CHECK_OK(fp4_model_open(gg, NULL, &g, &e));
        if (!g) continue;
        fp4_arch b;
        CHECK_OK(fp4_model_arch(g, &b, &e));
        CHECK(b.source == FP4_ARCH_FROM_GGUF && b.family == FP4_ARCH_DEEPSEEK_V3 && b.kv_lora_rank == 16 &&
              b.head_dim == 12 && b.v_head_dim == 8 && b.n_kv_heads == 4 && b.rope_interleave &&
              b.moe_routing == FP4_MOE_SIGMOID_GROUP && b.moe_norm_topk && b.rope_scaling == FP4_ROPE_YARN &&
              b.rope_mscale_all_dim == 1.0 && fp4_arch_layer_moe(&b, 1) && !fp4_arch_layer_moe(&b, 0));
        CHECK(run(g, FP4_MODE_EXACT, 2, 5, ids, T, y) == 0);
        CHECK_MSG(differ(x, y, T * V) == 0, "deepseek2 GGUF (%s kv_b): %lld logits differ from the HF form",
                  split ? "split" : "whole", (long long)differ(x, y, T * V));
        fp4_model_close(g);
    }
    free(x), free(y);
    fp4_model_close(m);
}

int main(void) {
    snprintf(tmp, sizeof tmp, "%s/fp4lane-ds-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) return perror("mkdtemp"), 1;
    char dir[700];
    snprintf(dir, sizeof dir, "%s/ds", tmp);
    dsfx_spec s = dsfx_default();
    CHECK(dsfx_write(dir, &s, 11) == 0);
    test_arch();
    test_reference(dir);
    test_snapshot(dir);
    test_paged(dir);
    test_bind(dir);
    test_synth();
    test_nvfp4();
    test_gguf();
    if (!check_failed) rtfx_rmtree(tmp);
    return check_report();
}
