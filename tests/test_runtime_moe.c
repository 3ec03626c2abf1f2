/* test_runtime_moe.c — mixtures of experts (issue 28), what is read before any weight: the
 * architecture from config.json (transformers 4 and 5 spellings) and GGUF keys, every self-
 * contradicting config refused naming the key, the binding's refusals naming the tensor (a missing
 * expert, a router of the wrong shape, an expert past the config's count), the CUDA refusal, and
 * `fp4lane synth` MoE shapes. The step's bits: test_runtime_step (oracle, invariance); against
 * transformers: test_runtime_hf. */
#include "check.h"
#include "fp4lane_io.h"
#include "fp4lane_runtime.h"
#include "fp4lane_synth.h"
#include "rt_fixture.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char tmp[512];

#define BASE                                                                                                 \
    "\"hidden_size\":256,\"num_attention_heads\":4,\"num_key_value_heads\":2,\"intermediate_size\":512,"     \
    "\"vocab_size\":320,\"num_hidden_layers\":4,\"max_position_embeddings\":64,\"rms_norm_eps\":1e-5"
#define Q3M "{\"model_type\":\"qwen3_moe\"," BASE ",\"head_dim\":64,\"moe_intermediate_size\":128"

static void refused(const char *json, const char *rule, const char *key) {
    fp4_arch a;
    fp4_error e;
    fp4_status st = fp4_arch_from_hf_config(json, &a, &e);
    CHECK_MSG(st != FP4_OK && !strcmp(e.rule, rule) && strstr(e.msg, key),
              "%s -> %s, rule %s: '%s' (want %s, %s)", json, fp4_status_str(st), e.rule, e.msg, rule, key);
}

static void test_hf(void) {
    fp4_arch a;
    fp4_error e;
    /* transformers 4's spelling, a dense layer by mlp_only_layers and one by decoder_sparse_step 2 */
    CHECK_OK(fp4_arch_from_hf_config(Q3M
                                     ",\"num_experts\":8,\"num_experts_per_tok\":2,\"norm_topk_prob\":true,"
                                     "\"mlp_only_layers\":[3],\"decoder_sparse_step\":2}",
                                     &a, &e));
    CHECK(a.family == FP4_ARCH_QWEN3_MOE && a.qk_norm && a.n_experts == 8 && a.n_experts_used == 2 &&
          a.moe_ffn == 128 && a.ffn == 512 && a.moe_routing == FP4_MOE_SOFTMAX_TOPK && a.moe_norm_topk);
    CHECK(!fp4_arch_layer_moe(&a, 0) && fp4_arch_layer_moe(&a, 1) && !fp4_arch_layer_moe(&a, 2) &&
          !fp4_arch_layer_moe(&a, 3));
    CHECK_EQ_INT(strcmp(fp4_arch_family_name(a.family), "qwen3_moe"), 0);
    /* transformers 5 writes num_local_experts; norm_topk_prob absent means false */
    CHECK_OK(fp4_arch_from_hf_config(Q3M ",\"num_local_experts\":16,\"num_experts_per_tok\":4}", &a, &e));
    CHECK(a.n_experts == 16 && a.n_experts_used == 4 && !a.moe_norm_topk && fp4_arch_layer_moe(&a, 3));
    /* both spellings present and equal: accepted */
    CHECK_OK(fp4_arch_from_hf_config(
        Q3M ",\"num_experts\":8,\"num_local_experts\":8,\"num_experts_per_tok\":1}", &a, &e));
    /* Mixtral: intermediate_size is the experts' width; every layer sparse; softmax over the top k */
    CHECK_OK(
        fp4_arch_from_hf_config("{\"model_type\":\"mixtral\"," BASE
                                ",\"num_local_experts\":8,\"num_experts_per_tok\":2,\"sliding_window\":null}",
                                &a, &e));
    CHECK(a.family == FP4_ARCH_MIXTRAL && !a.qk_norm && a.moe_ffn == 512 &&
          a.moe_routing == FP4_MOE_TOPK_SOFTMAX);
    for (int L = 0; L < 4; L++)
        CHECK(fp4_arch_layer_moe(&a, L));
    /* a dense model is untouched: no experts, no layer MoE */
    CHECK_OK(fp4_arch_from_hf_config("{\"model_type\":\"qwen3\"," BASE ",\"head_dim\":64}", &a, &e));
    CHECK(a.n_experts == 0 && !fp4_arch_layer_moe(&a, 0) && a.moe_routing == FP4_MOE_NONE);
    /* self-contradicting configs, refused before any tensor, naming the key */
    refused(Q3M ",\"num_experts\":8,\"num_experts_per_tok\":9}", "arch.moe", "num_experts_per_tok");
    refused(Q3M ",\"num_experts\":0,\"num_experts_per_tok\":1}", "arch.moe", "num_experts");
    refused(Q3M ",\"num_experts\":8,\"num_experts_per_tok\":0}", "arch.moe", "num_experts_per_tok");
    refused(Q3M ",\"num_experts\":8,\"num_local_experts\":4,\"num_experts_per_tok\":2}", "arch.moe",
            "num_local_experts = 4");
    refused(Q3M ",\"num_experts_per_tok\":2}", "arch.moe", "num_experts");
    refused(Q3M ",\"num_experts\":8}", "arch.key", "num_experts_per_tok");
    refused(Q3M ",\"num_experts\":8,\"num_experts_per_tok\":2,\"mlp_only_layers\":[4]}", "arch.moe",
            "mlp_only_layers");
    refused(Q3M ",\"num_experts\":8,\"num_experts_per_tok\":2,\"mlp_only_layers\":3}", "arch.moe",
            "mlp_only_layers");
    refused(Q3M ",\"num_experts\":8,\"num_experts_per_tok\":2,\"decoder_sparse_step\":0}", "arch.moe",
            "decoder_sparse_step");
    refused(Q3M ",\"num_experts\":8,\"num_experts_per_tok\":2,\"norm_topk_prob\":1}", "arch.moe",
            "norm_topk_prob");
    refused(Q3M ",\"num_experts\":8,\"num_experts_per_tok\":2,\"shared_expert_intermediate_size\":64}",
            "arch.moe", "shared_expert_intermediate_size");
    refused("{\"model_type\":\"qwen3_moe\"," BASE ",\"num_experts\":8,\"num_experts_per_tok\":2}", "arch.key",
            "moe_intermediate_size");
    refused("{\"model_type\":\"mixtral\"," BASE ",\"num_local_experts\":5000,\"num_experts_per_tok\":2}",
            "arch.moe", "num_local_experts");
    /* experts on a dense family stay refused */
    refused("{\"model_type\":\"qwen3\"," BASE ",\"num_experts\":8}", "arch.moe", "num_experts");
}

/* a llama.cpp-style GGUF header (metadata and one tensor): arch only */
static fp4_status gguf_arch(const char *arch, int experts, int used, int eff, fp4_arch *a, fp4_error *e) {
    char path[600], key[96];
    snprintf(path, sizeof path, "%s/%s-%d-%d-%d.gguf", tmp, arch, experts, used, eff);
    fp4_gguf_writer *w = NULL;
    fp4_gguf_writer_create(&w, e);
    fp4_gguf_writer_add_str(w, "general.architecture", arch, strlen(arch), e);
#define U32(k, v)                                                                                            \
    (snprintf(key, sizeof key, "%s." k, arch), fp4_gguf_writer_add_u32(w, key, (uint32_t)(v), e))
    U32("block_count", 2), U32("context_length", 64), U32("embedding_length", 256);
    U32("attention.head_count", 4), U32("attention.head_count_kv", 2), U32("attention.key_length", 64);
    if (strcmp(arch, "qwen3moe")) U32("feed_forward_length", 512);
    if (experts >= 0) U32("expert_count", experts);
    if (used >= 0) U32("expert_used_count", used);
    if (eff >= 0) U32("expert_feed_forward_length", eff);
#undef U32
    int64_t ne[2] = {256, 320};
    fp4_gguf_writer_add_tensor(w, "token_embd.weight", FP4_TYPE_F32, 2, ne, e);
    CHECK_OK(fp4_gguf_writer_write_header(w, path, e));
    float *z = calloc(256 * 320, 4);
    fp4_gguf_writer_write_tensor_data(w, 0, z, 256 * 320 * 4, e);
    free(z);
    CHECK_OK(fp4_gguf_writer_finish(w, e));
    fp4_gguf_writer_free(w);
    fp4_gguf *g = NULL;
    CHECK_OK(fp4_gguf_open(path, &g, e));
    fp4_status st = g ? fp4_arch_from_gguf(g, a, e) : FP4_ERR_IO;
    fp4_gguf_close(g);
    return st;
}

static void test_gguf(void) {
    fp4_arch a;
    fp4_error e;
    CHECK_OK(gguf_arch("qwen3moe", 8, 2, 128, &a, &e));
    CHECK(a.family == FP4_ARCH_QWEN3_MOE && a.qk_norm && a.n_experts == 8 && a.n_experts_used == 2 &&
          a.moe_ffn == 128 && a.moe_norm_topk && a.moe_routing == FP4_MOE_SOFTMAX_TOPK &&
          fp4_arch_layer_moe(&a, 1));
    CHECK_OK(gguf_arch("llama", 8, 2, -1, &a, &e));
    CHECK(a.family == FP4_ARCH_MIXTRAL && a.qk_permuted && a.moe_ffn == 512 &&
          a.moe_routing == FP4_MOE_TOPK_SOFTMAX);
    CHECK(gguf_arch("qwen3moe", 8, 9, 128, &a, &e) && !strcmp(e.rule, "arch.moe") &&
          strstr(e.msg, "qwen3moe.expert_used_count"));
    CHECK(gguf_arch("qwen3moe", -1, 2, 128, &a, &e) && !strcmp(e.rule, "arch.moe") &&
          strstr(e.msg, "qwen3moe.expert_count"));
    CHECK(gguf_arch("qwen3moe", 8, 2, -1, &a, &e) && strstr(e.msg, "qwen3moe.expert_feed_forward_length"));
    CHECK(gguf_arch("qwen3", 8, 2, 128, &a, &e) == FP4_ERR_UNSUPPORTED && !strcmp(e.rule, "arch.moe"));
    CHECK_OK(gguf_arch("llama", -1, -1, -1, &a, &e)); /* dense llama: as before */
    CHECK(a.family == FP4_ARCH_LLAMA && a.n_experts == 0);
}

/* the binding refuses by tensor name, before any weight byte is read */
static void bind_refused(const char *what, rtfx_spec s, const char *rule, const char *tensor) {
    char dir[700];
    snprintf(dir, sizeof dir, "%s/%s", tmp, what);
    CHECK(rtfx_write_hf(dir, &s, 7) == 0);
    fp4_model *m = NULL;
    fp4_error e;
    CHECK_OK(fp4_model_open(dir, NULL, &m, &e));
    if (!m) return;
    fp4_rt *rt = NULL;
    fp4_rt_opts o = {.n_ctx = 16};
    fp4_status st = fp4_rt_create(m, &o, &rt, &e);
    CHECK_MSG(st && !strcmp(e.rule, rule) && strstr(e.tensor, tensor), "%s: %s rule %s tensor %s: %s", what,
              fp4_status_str(st), e.rule, e.tensor, e.msg);
    fp4_rt_free(rt);
    fp4_model_close(m);
}

static void test_bind(void) {
    rtfx_spec s = rtfx_moe("qwen3_moe");
    s.drop_expert = 1;
    bind_refused("drop", s, "bind.missing", "model.layers.0.mlp.experts.1.down_proj.weight");
    s = rtfx_moe("mixtral");
    s.drop_expert = 1;
    bind_refused("drop-mx", s, "bind.missing", "model.layers.0.block_sparse_moe.experts.1.w2.weight");
    s = rtfx_moe("qwen3_moe");
    s.bad_router = 1;
    bind_refused("router", s, "bind.moe", "model.layers.0.mlp.gate.weight");
    s = rtfx_moe("qwen3_moe");
    s.extra_expert = 1;
    bind_refused("extra", s, "bind.moe", "model.layers.0.mlp.experts.8.gate_proj.weight");
    /* a dense layer of mlp_only_layers that holds experts instead of an MLP: its MLP is missing */
    s = rtfx_moe("qwen3_moe");
    s.dense_layer = -1; /* the file has experts in layer 1 ... */
    char dir[700];
    snprintf(dir, sizeof dir, "%s/dense-vs-file", tmp);
    CHECK(rtfx_write_hf(dir, &s, 7) == 0);
    /* ... but the config below says layer 1 is dense */
    rtfx_spec c = rtfx_moe("qwen3_moe");
    char cdir[700];
    snprintf(cdir, sizeof cdir, "%s/dense-cfg", tmp);
    CHECK(rtfx_write_hf(cdir, &c, 7) == 0);
    char from[800], to[800];
    snprintf(from, sizeof from, "%s/config.json", cdir);
    snprintf(to, sizeof to, "%s/config.json", dir);
    FILE *fi = fopen(from, "rb"), *fo = fopen(to, "wb");
    char buf[4096];
    size_t n = fi ? fread(buf, 1, sizeof buf, fi) : 0;
    if (fo) fwrite(buf, 1, n, fo);
    if (fi) fclose(fi);
    if (fo) fclose(fo);
    fp4_model *m = NULL;
    fp4_error e;
    CHECK_OK(fp4_model_open(dir, NULL, &m, &e));
    fp4_rt *rt = NULL;
    fp4_rt_opts o = {.n_ctx = 16};
    CHECK(m && fp4_rt_create(m, &o, &rt, &e) && !strcmp(e.rule, "bind.missing") &&
          strstr(e.tensor, "model.layers.1.mlp.gate_proj.weight"));
    fp4_rt_free(rt);
    fp4_model_close(m);
    /* CUDA, native mode: refused at startup, before the library is even looked for (exact mode runs
     * there: the library is looked for) */
    s = rtfx_moe("qwen3_moe");
    snprintf(dir, sizeof dir, "%s/ok", tmp);
    CHECK(rtfx_write_hf(dir, &s, 7) == 0);
    CHECK_OK(fp4_model_open(dir, NULL, &m, &e));
    fp4_rt_opts oc = {.n_ctx = 16, .device = FP4_DEVICE_CUDA, .cuda_lib = "/nonexistent/libfp4lane_cuda.so"};
    CHECK(m && fp4_rt_create(m, &oc, &rt, &e) != FP4_OK && strcmp(e.rule, "route.moe-cuda"));
    oc.mode = FP4_MODE_NATIVE;
    CHECK(m && fp4_rt_create(m, &oc, &rt, &e) == FP4_ERR_REFUSED_ROUTE && !strcmp(e.rule, "route.moe-cuda") &&
          strstr(e.msg, "runs on the CPU in this version"));
    /* FP4LANE_CUDA_UNPROVEN=1 (native mode's switch until a device run proves it) passes that
     * refusal: the library is looked for */
    setenv("FP4LANE_CUDA_UNPROVEN", "1", 1);
    CHECK(m && fp4_rt_create(m, &oc, &rt, &e) != FP4_OK && strcmp(e.rule, "route.moe-cuda"));
    setenv("FP4LANE_CUDA_UNPROVEN", "0", 1);
    CHECK(m && fp4_rt_create(m, &oc, &rt, &e) == FP4_ERR_REFUSED_ROUTE && !strcmp(e.rule, "route.moe-cuda"));
    unsetenv("FP4LANE_CUDA_UNPROVEN");
    fp4_rt_opts ok = {.n_ctx = 16};
    CHECK_OK(m ? fp4_rt_create(m, &ok, &rt, &e) : FP4_ERR_IO);
    CHECK(rt && strstr(fp4_rt_routes(rt), "router: cpu.bf16.dense.pinned"));
    char id1[80] = "";
    if (rt) snprintf(id1, sizeof id1, "%s", fp4_rt_identity(rt));
    fp4_rt_free(rt);
    fp4_model_close(m);
    /* the same tensors with another top-k: another KV identity (a snapshot of one is not the other's) */
    s.used = 3;
    snprintf(cdir, sizeof cdir, "%s/ok3", tmp);
    CHECK(rtfx_write_hf(cdir, &s, 7) == 0);
    snprintf(from, sizeof from, "%s/config.json", cdir);
    snprintf(to, sizeof to, "%s/config.json", dir);
    fi = fopen(from, "rb"), fo = fopen(to, "wb");
    n = fi ? fread(buf, 1, sizeof buf, fi) : 0;
    if (fo) fwrite(buf, 1, n, fo);
    if (fi) fclose(fi);
    if (fo) fclose(fo);
    rt = NULL;
    CHECK_OK(fp4_model_open(dir, NULL, &m, &e));
    CHECK_OK(m ? fp4_rt_create(m, &ok, &rt, &e) : FP4_ERR_IO);
    CHECK(rt && fp4_rt_arch(rt)->n_experts_used == 3 && id1[0] && strcmp(id1, fp4_rt_identity(rt)));
    char id3[80] = "";
    if (rt) snprintf(id3, sizeof id3, "%s", fp4_rt_identity(rt));
    fp4_rt_free(rt);
    fp4_model_close(m);
    /* one expert weight changed, nothing else: another KV identity (the experts are hashed by value) */
    char st_path[1024];
    snprintf(st_path, sizeof st_path, "%s/model.safetensors", dir);
    fp4_st *st = NULL;
    uint64_t at = 0;
    CHECK_OK(fp4_st_open(st_path, &st, &e));
    const fp4_st_tensor *ex = st ? fp4_st_find(st, "model.layers.0.mlp.experts.1.down_proj.weight") : NULL;
    CHECK(ex && ex->nbytes >= 2);
    if (ex) at = 8 + fp4_st_header_len(st) + ex->offset;
    fp4_st_close(st);
    FILE *fx = at ? fopen(st_path, "r+b") : NULL;
    unsigned char byte = 0;
    if (fx && !fseek(fx, (long)at, SEEK_SET) && fread(&byte, 1, 1, fx) == 1 &&
        !fseek(fx, (long)at, SEEK_SET)) {
        byte ^= 0x01; /* the low mantissa bit of one bf16 value */
        CHECK(fwrite(&byte, 1, 1, fx) == 1);
    }
    if (fx) fclose(fx);
    rt = NULL;
    CHECK_OK(fp4_model_open(dir, NULL, &m, &e));
    CHECK_OK(m ? fp4_rt_create(m, &ok, &rt, &e) : FP4_ERR_IO);
    CHECK(rt && id3[0] && strcmp(id3, fp4_rt_identity(rt)));
    fp4_rt_free(rt);
    fp4_model_close(m);
}

/* synth: the MoE shapes and architectures; a dense shape with a MoE architecture is refused */
static void test_synth(void) {
    char out[700];
    fp4_error e;
    static const char *const archs[] = {"qwen3-moe", "mixtral"};
    for (int i = 0; i < 2; i++) {
        snprintf(out, sizeof out, "%s/synth-%s", tmp, archs[i]);
        fp4_synth_opts o = {.shape = "tiny-moe", .arch = archs[i], .seed = 3, .n_threads = 2};
        CHECK_OK(fp4_synth_checkpoint(out, &o, &e));
        fp4_model *m = NULL;
        CHECK_OK(fp4_model_open(out, NULL, &m, &e));
        fp4_arch a;
        CHECK_OK(m ? fp4_model_arch(m, &a, &e) : FP4_ERR_IO);
        CHECK(a.n_experts == 8 && a.n_experts_used == 2 && a.moe_ffn == 256 && a.hidden == 256 &&
              a.family == (i ? FP4_ARCH_MIXTRAL : FP4_ARCH_QWEN3_MOE));
        fp4_rt *rt = NULL;
        fp4_rt_opts ro = {.n_ctx = 16};
        CHECK_OK(m ? fp4_rt_create(m, &ro, &rt, &e) : FP4_ERR_IO);
        fp4_rt_free(rt);
        fp4_model_close(m);
    }
    fp4_synth_opts bad = {.shape = "tiny", .arch = "qwen3-moe"};
    snprintf(out, sizeof out, "%s/synth-bad", tmp);
    CHECK(fp4_synth_checkpoint(out, &bad, &e) == FP4_ERR_INVALID_ARG && !strcmp(e.rule, "synth.arch"));
    struct stat sb;
    CHECK(stat(out, &sb) != 0); /* nothing written */
    /* the 30B shape's size, without writing it: 48 layers x 128 experts x 3 x 2048 x 768 bf16 and the rest */
    uint64_t bytes = 0;
    fp4_synth_opts big = {.shape = "qwen3-30b-a3b"};
    CHECK_OK(fp4_synth_data_bytes(&big, &bytes, &e));
    const uint64_t experts = 48ull * 128 * 3 * 2048 * 768 * 2;
    CHECK(bytes > experts && bytes < experts + (4ull << 30));
    printf("qwen3-30b-a3b synth: %.2f GB of bf16\n", bytes / 1e9);
}

/* The llama.cpp form of a Qwen3-MoE checkpoint (general.architecture qwen3moe, blk.* names, the
 * experts stacked into 3-D ffn_*_exps tensors, the router as ffn_gate_inp), written here from the
 * HF directory's bf16 bytes: its exact logits must be the HF directory's bit for bit. */
static int gguf_from_hf(const fp4_model *m, const fp4_arch *a, const char *path) {
    static const struct {
        const char *gg, *hf;
    } names[] = {{"attn_norm", "input_layernorm"},    {"attn_q", "self_attn.q_proj"},
                 {"attn_k", "self_attn.k_proj"},      {"attn_v", "self_attn.v_proj"},
                 {"attn_output", "self_attn.o_proj"}, {"attn_q_norm", "self_attn.q_norm"},
                 {"attn_k_norm", "self_attn.k_norm"}, {"ffn_norm", "post_attention_layernorm"},
                 {"ffn_gate_inp", "mlp.gate"}};
    static const char *const parts[3] = {"gate", "up", "down"}, *const hfp[3] = {"gate_proj", "up_proj",
                                                                                 "down_proj"};
    fp4_error e;
    fp4_gguf_writer *w = NULL;
    if (fp4_gguf_writer_create(&w, &e)) return -1;
    fp4_gguf_writer_add_str(w, "general.architecture", "qwen3moe", 8, &e);
    fp4_gguf_writer_add_u32(w, "qwen3moe.block_count", (uint32_t)a->n_layers, &e);
    fp4_gguf_writer_add_u32(w, "qwen3moe.context_length", (uint32_t)a->n_ctx_train, &e);
    fp4_gguf_writer_add_u32(w, "qwen3moe.embedding_length", (uint32_t)a->hidden, &e);
    fp4_gguf_writer_add_u32(w, "qwen3moe.attention.head_count", (uint32_t)a->n_heads, &e);
    fp4_gguf_writer_add_u32(w, "qwen3moe.attention.head_count_kv", (uint32_t)a->n_kv_heads, &e);
    fp4_gguf_writer_add_u32(w, "qwen3moe.attention.key_length", (uint32_t)a->head_dim, &e);
    fp4_gguf_writer_add_u32(w, "qwen3moe.expert_count", (uint32_t)a->n_experts, &e);
    fp4_gguf_writer_add_u32(w, "qwen3moe.expert_used_count", (uint32_t)a->n_experts_used, &e);
    fp4_gguf_writer_add_u32(w, "qwen3moe.expert_feed_forward_length", (uint32_t)a->moe_ffn, &e);
    fp4_gguf_writer_add_f32(w, "qwen3moe.attention.layer_norm_rms_epsilon", a->rms_eps, &e);
    fp4_gguf_writer_add_f32(w, "qwen3moe.rope.freq_base", (float)a->rope_theta, &e);
    enum { MAXT = 64 };
    const fp4_tensor *src[MAXT][8] = {{0}}; /* per GGUF tensor: its HF source(s), stacked */
    int nsrc[MAXT] = {0}, n = 0;
    char nm[160];
#define ADD1(GG, T)                                                                                          \
    do {                                                                                                     \
        const fp4_tensor *t_ = (T);                                                                          \
        if (!t_) return fp4_gguf_writer_free(w), -1;                                                         \
        fp4_gguf_writer_add_tensor(w, GG, t_->type, t_->n_dims, t_->ne, &e);                                 \
        src[n][0] = t_, nsrc[n++] = 1;                                                                       \
    } while (0)
    ADD1("token_embd.weight", fp4_model_find(m, "model.embed_tokens.weight"));
    ADD1("output_norm.weight", fp4_model_find(m, "model.norm.weight"));
    ADD1("output.weight", fp4_model_find(m, "lm_head.weight"));
    for (int l = 0; l < a->n_layers; l++) {
        for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
            char gg[96];
            snprintf(gg, sizeof gg, "blk.%d.%s.weight", l, names[k].gg);
            snprintf(nm, sizeof nm, "model.layers.%d.%s.weight", l, names[k].hf);
            ADD1(gg, fp4_model_find(m, nm));
        }
        for (int p = 0; p < 3; p++) {
            char gg[96];
            snprintf(gg, sizeof gg, "blk.%d.ffn_%s_exps.weight", l, parts[p]);
            for (int x = 0; x < a->n_experts; x++) {
                snprintf(nm, sizeof nm, "model.layers.%d.mlp.experts.%d.%s.weight", l, x, hfp[p]);
                src[n][x] = fp4_model_find(m, nm);
                if (!src[n][x]) return fp4_gguf_writer_free(w), -1;
            }
            const int64_t ne[3] = {src[n][0]->ne[0], src[n][0]->ne[1], a->n_experts};
            fp4_gguf_writer_add_tensor(w, gg, src[n][0]->type, 3, ne, &e);
            nsrc[n++] = (int)a->n_experts;
        }
    }
#undef ADD1
    if (fp4_gguf_writer_write_header(w, path, &e)) return fp4_gguf_writer_free(w), -1;
    for (int i = 0; i < n; i++) {
        const uint64_t one = src[i][0]->nbytes;
        uint8_t *buf = malloc((size_t)(one * (uint64_t)nsrc[i]));
        for (int x = 0; x < nsrc[i]; x++)
            memcpy(buf + one * (uint64_t)x, src[i][x]->data, (size_t)one);
        fp4_status st = fp4_gguf_writer_write_tensor_data(w, i, buf, (size_t)(one * (uint64_t)nsrc[i]), &e);
        free(buf);
        if (st) return fp4_gguf_writer_free(w), -1;
    }
    fp4_status st = fp4_gguf_writer_finish(w, &e);
    fp4_gguf_writer_free(w);
    return st ? -1 : 0;
}

static int logits(const fp4_model *m, int threads, int chunk, const int32_t *ids, int n, float *out) {
    fp4_rt_opts o = {.mode = FP4_MODE_EXACT, .n_threads = threads, .n_ctx = 32};
    fp4_rt *rt = NULL;
    fp4_error e;
    if (fp4_rt_create(m, &o, &rt, &e)) return fprintf(stderr, "%s: %s (%s)\n", e.rule, e.msg, e.tensor), -1;
    int32_t s;
    fp4_rt_seq_open(rt, &s);
    fp4_rt_tok c[32];
    for (int i = 0; i < n; i += chunk) {
        const int k = n - i < chunk ? n - i : chunk;
        for (int j = 0; j < k; j++)
            c[j] = (fp4_rt_tok){s, ids[i + j], 1};
        if (fp4_rt_step(rt, c, k, out + (int64_t)i * fp4_rt_vocab(rt), &e)) return fp4_rt_free(rt), -1;
    }
    fp4_rt_free(rt);
    return 0;
}

static void test_gguf_3d(void) {
    char dir[700], gg[700];
    rtfx_spec s = rtfx_moe("qwen3_moe");
    s.dense_layer = -1; /* llama.cpp's qwen3moe has experts in every layer */
    snprintf(dir, sizeof dir, "%s/q3m-hf", tmp);
    snprintf(gg, sizeof gg, "%s/q3m.gguf", tmp);
    CHECK(rtfx_write_hf(dir, &s, 31) == 0);
    fp4_model *m = NULL, *g = NULL;
    fp4_error e;
    CHECK_OK(fp4_model_open(dir, NULL, &m, &e));
    fp4_arch a;
    CHECK_OK(m ? fp4_model_arch(m, &a, &e) : FP4_ERR_IO);
    CHECK(m && gguf_from_hf(m, &a, gg) == 0);
    CHECK_OK(fp4_model_open(gg, NULL, &g, &e));
    fp4_arch b;
    CHECK_OK(g ? fp4_model_arch(g, &b, &e) : FP4_ERR_IO);
    CHECK(b.source == FP4_ARCH_FROM_GGUF && b.family == FP4_ARCH_QWEN3_MOE && b.n_experts == 8 &&
          b.moe_norm_topk && !b.qk_permuted);
    enum { N = 10 };
    const int32_t ids[N] = {3, 100, 7, 250, 9, 9, 31, 200, 4, 64};
    const int64_t V = a.vocab;
    float *x = malloc(sizeof(float) * N * V), *y = malloc(sizeof(float) * N * V);
    CHECK(m && g && logits(m, 1, N, ids, N, x) == 0 && logits(g, 2, 3, ids, N, y) == 0);
    int64_t d = 0;
    for (int64_t i = 0; i < N * V; i++)
        d += f32_bits(x[i]) != f32_bits(y[i]);
    CHECK_MSG(d == 0, "llama.cpp-form qwen3moe GGUF (3-D experts): %lld logits differ from the HF form",
              (long long)d);
    free(x), free(y);
    fp4_model_close(m), fp4_model_close(g);
}

/* compressed-tensors NVFP4 MoE (issue 28: another producer's layout): a Qwen3-MoE quantized to
 * ModelOpt NVFP4 (experts quantized, router bf16), converted to compressed-tensors (RedHat's MoE
 * releases' form: per-expert weight_packed / weight_scale / weight_global_scale, the router in
 * "ignore"), read back: every exact logit bit equal, and converted back to ModelOpt byte for byte. */
static void test_ct(void) {
    char bf[700], mo[700], ct[700], back[700];
    snprintf(bf, sizeof bf, "%s/ct-bf16", tmp);
    snprintf(mo, sizeof mo, "%s/ct-modelopt", tmp);
    snprintf(ct, sizeof ct, "%s/ct-ct", tmp);
    snprintf(back, sizeof back, "%s/ct-back", tmp);
    rtfx_spec s = rtfx_moe("qwen3_moe");
    CHECK(rtfx_write_hf(bf, &s, 41) == 0);
    fp4_error e;
    fp4_quantize_opts qo = {.layout = FP4_LAYOUT_MODELOPT};
    CHECK_OK(fp4_quantize_checkpoint(bf, mo, &qo, &e));
    fp4_model *m = NULL, *c = NULL;
    CHECK_OK(fp4_model_open(mo, NULL, &m, &e));
    fp4_write_opts wo = {.layout = FP4_LAYOUT_CT};
    CHECK_OK(m ? fp4_model_write(m, ct, &wo, &e) : FP4_ERR_IO);
    CHECK_OK(fp4_model_open(ct, NULL, &c, &e));
    CHECK(c && fp4_model_layout(c) == FP4_LAYOUT_CT);
    const fp4_tensor *t = c ? fp4_model_find(c, "model.layers.0.mlp.experts.7.down_proj.weight") : NULL;
    CHECK_MSG(t && t->type == FP4_TYPE_NVFP4_E2M1, "compressed-tensors: expert 7's down is not NVFP4");
    t = c ? fp4_model_find(c, "model.layers.0.mlp.gate.weight") : NULL;
    CHECK_MSG(t && t->type == FP4_TYPE_BF16, "compressed-tensors: the router is not bf16");
    char path[800], path2[800];
    snprintf(path, sizeof path, "%s/config.json", ct);
    size_t n = 0;
    uint8_t *raw = check_slurp(path, &n);
    char *cfg = raw ? strndup((const char *)raw, n) : NULL;
    CHECK_MSG(cfg && strstr(cfg, "\"model.layers.0.mlp.gate\"") && strstr(cfg, "nvfp4-pack-quantized"),
              "compressed-tensors config: the router is not in ignore");
    free(cfg), free(raw);
    fp4_arch a;
    CHECK_OK(m ? fp4_model_arch(m, &a, &e) : FP4_ERR_IO);
    enum { N = 10 };
    const int32_t ids[N] = {3, 100, 7, 250, 9, 9, 31, 200, 4, 64};
    const int64_t V = a.vocab;
    float *x = malloc(sizeof(float) * N * V), *y = malloc(sizeof(float) * N * V);
    CHECK(m && c && logits(m, 1, N, ids, N, x) == 0 && logits(c, 2, 3, ids, N, y) == 0);
    int64_t d = 0;
    for (int64_t i = 0; i < N * V; i++)
        d += f32_bits(x[i]) != f32_bits(y[i]);
    CHECK_MSG(d == 0, "compressed-tensors MoE: %lld logits differ from the ModelOpt form", (long long)d);
    wo.layout = FP4_LAYOUT_MODELOPT;
    CHECK_OK(c ? fp4_model_write(c, back, &wo, &e) : FP4_ERR_IO);
    static const char *const files[] = {"model.safetensors", "config.json", "hf_quant_config.json"};
    for (int k = 0; k < 3; k++) { /* ModelOpt -> compressed-tensors -> ModelOpt: the same bytes */
        snprintf(path, sizeof path, "%s/%s", mo, files[k]);
        snprintf(path2, sizeof path2, "%s/%s", back, files[k]);
        size_t n1 = 0, n2 = 0;
        uint8_t *f1 = check_slurp(path, &n1), *f2 = check_slurp(path2, &n2);
        CHECK_MSG(f1 && f2 && n1 == n2 && !memcmp(f1, f2, n1),
                  "ModelOpt -> compressed-tensors -> ModelOpt: %s differs", files[k]);
        free(f1), free(f2);
    }
    free(x), free(y);
    fp4_model_close(m), fp4_model_close(c);
}

int main(void) {
    snprintf(tmp, sizeof tmp, "%s/fp4lane-rtmoe-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) return perror("mkdtemp"), 1;
    test_hf();
    test_gguf();
    test_bind();
    test_synth();
    test_gguf_3d();
    test_ct();
    if (!check_failed) rtfx_rmtree(tmp);
    return check_report();
}
