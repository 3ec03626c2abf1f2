/* test_runtime_arch.c — fp4_arch from both config spellings and from GGUF keys; every refusal names
 * the key and the value (before the engine allocates anything); binding refuses missing,
 * unexpected and misshapen tensors by name; the route table refuses what is not qualified with the
 * nearest allowed route; a llama.cpp-named GGUF (q/k rows permuted by its converter) decodes to the
 * same bits as the Hugging Face checkpoint it came from. */
#include "check.h"
#include "rt_fixture.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char tmp[512];

#define BASE                                                                                                 \
    "\"hidden_size\":256,\"num_attention_heads\":4,\"num_key_value_heads\":2,\"intermediate_size\":512,"     \
    "\"vocab_size\":320,"                                                                                    \
    "\"num_hidden_layers\":2,\"max_position_embeddings\":64,\"rms_norm_eps\":1e-5"

static void refused(const char *json, fp4_status want, const char *key, const char *value) {
    fp4_arch a;
    fp4_error e;
    fp4_status st = fp4_arch_from_hf_config(json, &a, &e);
    CHECK_MSG(st == want, "%s -> %s (%s)", json, fp4_status_str(st), e.msg);
    CHECK_MSG(strstr(e.msg, key) && strstr(e.msg, value), "message '%s' does not name %s = %s", e.msg, key,
              value);
}

static void test_hf_config(void) {
    fp4_arch a, b;
    fp4_error e;
    CHECK_OK(fp4_arch_from_hf_config("{\"model_type\":\"llama\"," BASE "}", &a, &e));
    CHECK(a.family == FP4_ARCH_LLAMA && a.head_dim == 64 && a.n_kv_heads == 2 && a.rope_theta == 10000.0 &&
          !a.tied_head && a.rope_scaling == FP4_ROPE_NONE && a.rms_eps == 1e-5f && !a.qk_permuted);
    /* transformers 4 vs 5 spellings of llama3 scaling give the same description */
    CHECK_OK(fp4_arch_from_hf_config("{\"model_type\":\"llama\"," BASE
                                     ",\"rope_theta\":500000.0,\"rope_scaling\":{\"rope_type\":\"llama3\","
                                     "\"factor\":8.0,\"low_freq_factor\":1.0,\"high_freq_factor\":4.0,"
                                     "\"original_max_position_embeddings\":8192}}",
                                     &a, &e));
    CHECK_OK(fp4_arch_from_hf_config("{\"model_type\":\"llama\"," BASE
                                     ",\"rope_parameters\":{\"rope_type\":\"llama3\",\"rope_theta\":500000.0,"
                                     "\"factor\":8.0,\"low_freq_factor\":1.0,\"high_freq_factor\":4.0,"
                                     "\"original_max_position_embeddings\":8192}}",
                                     &b, &e));
    CHECK(!memcmp(&a, &b, sizeof a) && a.rope_scaling == FP4_ROPE_LLAMA3 && a.rope_theta == 500000.0 &&
          a.rope_orig_ctx == 8192);
    CHECK_OK(fp4_arch_from_hf_config(
        "{\"model_type\":\"llama\"," BASE ",\"rope_scaling\":{\"type\":\"linear\",\"factor\":2.0}}", &a, &e));
    CHECK(a.rope_scaling == FP4_ROPE_LINEAR && a.rope_factor == 2.0);
    CHECK_OK(fp4_arch_from_hf_config("{\"model_type\":\"llama\"," BASE
                                     ",\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":1e6}}",
                                     &a, &e));
    CHECK(a.rope_scaling == FP4_ROPE_NONE && a.rope_theta == 1e6);
    CHECK_OK(fp4_arch_from_hf_config("{\"model_type\":\"qwen3\"," BASE
                                     ",\"head_dim\":128,\"tie_word_embeddings\":true,\"eos_token_id\":[7,9]}",
                                     &a, &e));
    CHECK(a.family == FP4_ARCH_QWEN3 && a.qk_norm && a.head_dim == 128 && a.tied_head && a.n_eos == 2 &&
          a.eos[1] == 9);
    CHECK_OK(fp4_arch_from_hf_config(
        "{\"model_type\":\"qwen2\"," BASE ",\"use_sliding_window\":false,\"sliding_window\":4096}", &a, &e));
    CHECK(a.qkv_bias && !a.qk_norm);
    CHECK_OK(
        fp4_arch_from_hf_config("{\"model_type\":\"mistral\"," BASE ",\"sliding_window\":null}", &a, &e));
    /* refusals, each naming the key and the value */
    refused("{\"model_type\":\"gemma2\"," BASE "}", FP4_ERR_UNSUPPORTED, "model_type", "gemma2");
    refused("{\"model_type\":\"deepseek_v2\"," BASE "}", FP4_ERR_UNSUPPORTED, "model_type", "deepseek_v2");
    /* mixtral runs now (issue 28): without its expert count it is refused, naming the key */
    refused("{\"model_type\":\"mixtral\"," BASE "}", FP4_ERR_NOT_FOUND, "num_local_experts", "missing");
    refused("{\"model_type\":\"llama\"," BASE ",\"num_local_experts\":8}", FP4_ERR_UNSUPPORTED,
            "num_local_experts", "8");
    refused("{\"model_type\":\"mistral\"," BASE ",\"sliding_window\":16}", FP4_ERR_UNSUPPORTED,
            "sliding_window", "16");
    refused("{\"model_type\":\"qwen2\"," BASE ",\"use_sliding_window\":true}", FP4_ERR_UNSUPPORTED,
            "use_sliding_window", "true");
    refused("{\"model_type\":\"llama\"," BASE ",\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4.0}}",
            FP4_ERR_UNSUPPORTED, "rope_type", "yarn");
    refused("{\"model_type\":\"llama\"," BASE
            ",\"rope_parameters\":{\"rope_type\":\"dynamic\",\"factor\":4.0}}",
            FP4_ERR_UNSUPPORTED, "rope_type", "dynamic");
    refused("{\"model_type\":\"llama\"," BASE ",\"alibi\":true}", FP4_ERR_UNSUPPORTED, "alibi", "true");
    refused("{\"model_type\":\"llama\"," BASE ",\"position_embedding_type\":\"alibi\"}", FP4_ERR_UNSUPPORTED,
            "position_embedding_type", "alibi");
    refused("{\"model_type\":\"llama\"," BASE ",\"hidden_act\":\"gelu\"}", FP4_ERR_UNSUPPORTED, "hidden_act",
            "gelu");
    refused("{\"model_type\":\"llama\"," BASE ",\"attention_bias\":true}", FP4_ERR_UNSUPPORTED,
            "attention_bias", "true");
    refused("{\"model_type\":\"qwen3\"," BASE ",\"layer_types\":[\"full_attention\",\"sliding_attention\"]}",
            FP4_ERR_UNSUPPORTED, "layer_types", "sliding_attention");
    refused("{\"model_type\":\"llama\",\"hidden_size\":256}", FP4_ERR_NOT_FOUND, "num_hidden_layers",
            "missing");
    refused("{\"model_type\":\"llama\",\"hidden_size\":256,\"num_attention_heads\":4,\"num_key_value_heads\":"
            "3,\"intermediate_size\":512,"
            "\"vocab_size\":320,\"num_hidden_layers\":2}",
            FP4_ERR_SHAPE, "num_key_value_heads", "3");
    /* issue 27 item 24: a value of the wrong JSON type is refused naming the key, never read as absent */
    static const struct {
        const char *extra, *rule, *what;
    } typed[] = {
        {",\"tie_word_embeddings\":\"true\"", "arch.tie_word_embeddings", "a string"},
        {",\"tie_word_embeddings\":1", "arch.tie_word_embeddings", "an integer"},
        {",\"eos_token_id\":\"1\"", "arch.eos_token_id", "a string"},
        {",\"eos_token_id\":[2,\"1\"]", "arch.eos_token_id", "a string"},
        {",\"eos_token_id\":1.5", "arch.eos_token_id", "a real number"},
        {",\"bos_token_id\":\"1\"", "arch.bos_token_id", "a string"},
    };
    for (size_t i = 0; i < sizeof typed / sizeof typed[0]; i++) {
        char js[1024];
        snprintf(js, sizeof js, "{\"model_type\":\"llama\"," BASE "%s}", typed[i].extra);
        fp4_status st = fp4_arch_from_hf_config(js, &a, &e);
        CHECK_MSG(st == FP4_ERR_FORMAT && !strcmp(e.rule, typed[i].rule) && strstr(e.msg, typed[i].what) &&
                      strstr(e.msg, typed[i].rule + 5),
                  "%s: %s %s: %s", typed[i].extra, fp4_status_str(st), e.rule, e.msg);
    }
    CHECK_OK(fp4_arch_from_hf_config("{\"model_type\":\"llama\"," BASE ",\"tie_word_embeddings\":null,"
                                     "\"eos_token_id\":null,\"bos_token_id\":null}",
                                     &a, &e));
    CHECK(!a.tied_head && a.n_eos == 0 && a.bos == -1);
    CHECK(fp4_arch_from_hf_config("[1]", &a, &e) == FP4_ERR_FORMAT);
    CHECK(fp4_arch_from_hf_config("{\"model_type\":\"llama\"," BASE ",\"hidden_size\":0}", &a, &e) !=
          FP4_OK); /* duplicate key */
}

/* ---- a model with an edited config: bind refusals name the tensor ---- */
static void write_cfg(const char *dir, const char *json) {
    char p[700];
    snprintf(p, sizeof p, "%s/config.json", dir);
    fp4_error e;
    CHECK_OK(fp4_hfdir_write_json(p, json, 2, 1, &e));
}
static void bind_refused(const char *dir, const char *json, fp4_status want, const char *rule,
                         const char *tensor) {
    write_cfg(dir, json);
    fp4_model *m = NULL;
    fp4_rt *rt = NULL;
    fp4_error e;
    CHECK_OK(fp4_model_open(dir, NULL, &m, &e));
    fp4_status st = fp4_rt_create(m, NULL, &rt, &e);
    CHECK_MSG(st == want && !strcmp(e.rule, rule) && strstr(e.tensor, tensor), "%s: got %s %s '%s' (%s)",
              json, fp4_status_str(st), e.rule, e.tensor, e.msg);
    CHECK(rt == NULL);
    fp4_rt_free(rt);
    fp4_model_close(m);
}

static void test_bind(const char *dir) {
    static const char *const good = "{\"model_type\":\"llama\"," BASE "}";
    write_cfg(dir, good);
    fp4_model *m = NULL;
    fp4_rt *rt = NULL;
    fp4_error e;
    CHECK_OK(fp4_model_open(dir, NULL, &m, &e));
    CHECK_OK(fp4_rt_create(m, NULL, &rt, &e));
    CHECK(rt && strstr(fp4_rt_routes(rt), "cpu.bf16.dense.pinned"));
    fp4_rt_free(rt);
    fp4_model_close(m);
    bind_refused(dir,
                 "{\"model_type\":\"llama\",\"hidden_size\":256,\"num_attention_heads\":4,\"num_key_value_"
                 "heads\":2,\"intermediate_size\":512,"
                 "\"vocab_size\":321,\"num_hidden_layers\":2,\"max_position_embeddings\":64}",
                 FP4_ERR_SHAPE, "bind.shape", "model.embed_tokens.weight");
    bind_refused(dir,
                 "{\"model_type\":\"llama\",\"hidden_size\":256,\"num_attention_heads\":4,\"num_key_value_"
                 "heads\":2,\"intermediate_size\":512,"
                 "\"vocab_size\":320,\"num_hidden_layers\":1,\"max_position_embeddings\":64}",
                 FP4_ERR_FORMAT, "bind.unexpected", "model.layers.1.");
    bind_refused(dir,
                 "{\"model_type\":\"llama\",\"hidden_size\":256,\"num_attention_heads\":4,\"num_key_value_"
                 "heads\":2,\"intermediate_size\":512,"
                 "\"vocab_size\":320,\"num_hidden_layers\":3,\"max_position_embeddings\":64}",
                 FP4_ERR_NOT_FOUND, "bind.missing", "model.layers.2.");
    bind_refused(dir,
                 "{\"model_type\":\"llama\",\"hidden_size\":256,\"num_attention_heads\":4,\"num_key_value_"
                 "heads\":4,\"intermediate_size\":512,"
                 "\"vocab_size\":320,\"num_hidden_layers\":2,\"max_position_embeddings\":64}",
                 FP4_ERR_SHAPE, "bind.shape", "self_attn.k_proj.weight");
    bind_refused(dir,
                 "{\"model_type\":\"llama\",\"hidden_size\":256,\"num_attention_heads\":4,\"num_key_value_"
                 "heads\":2,\"intermediate_size\":512,"
                 "\"vocab_size\":320,\"num_hidden_layers\":2,\"max_position_embeddings\":64,\"tie_word_"
                 "embeddings\":true}",
                 FP4_ERR_FORMAT, "bind.unexpected", "lm_head.weight");
    bind_refused(dir,
                 "{\"model_type\":\"qwen2\",\"hidden_size\":256,\"num_attention_heads\":4,\"num_key_value_"
                 "heads\":2,\"intermediate_size\":512,"
                 "\"vocab_size\":320,\"num_hidden_layers\":2,\"max_position_embeddings\":64}",
                 FP4_ERR_NOT_FOUND, "bind.missing", "q_proj.bias");
    bind_refused(dir, "{\"model_type\":\"llama\"," BASE ",\"rope_scaling\":{\"type\":\"su\"}}",
                 FP4_ERR_UNSUPPORTED, "arch.rope_type", "");
    write_cfg(dir, good);
}

/* a copy of the bf16 checkpoint with one more tensor (F32, given shape, zeros) */
static int with_extra(const char *src, const char *dst, const char *name, int rank, int64_t n0) {
    char path[700];
    snprintf(path, sizeof path, "%s/model.safetensors", src);
    fp4_st *st = NULL;
    fp4_error e;
    if (fp4_st_open(path, &st, &e)) return -1;
    mkdir(dst, 0777);
    fp4_hfdir_writer *w = NULL;
    if (fp4_hfdir_writer_create(dst, 0, &w, &e)) return fp4_st_close(st), -1;
    const int64_t nt = (int64_t)fp4_st_n_tensors(st);
    for (int64_t i = 0; i < nt; i++) {
        const fp4_st_tensor *t = fp4_st_tensor_at(st, i);
        fp4_hfdir_writer_add_tensor(w, t->name, t->dtype, t->rank, t->shape, &e);
    }
    int64_t sh[1] = {n0};
    fp4_hfdir_writer_add_tensor(w, name, FP4_ST_F32, rank, sh, &e);
    for (int64_t i = 0; i < nt; i++)
        fp4_hfdir_writer_write(w, fp4_st_tensor_at(st, i)->data, fp4_st_tensor_at(st, i)->nbytes, &e);
    float z[8] = {0};
    fp4_hfdir_writer_write(w, z, sizeof(float) * (size_t)(rank ? n0 : 1), &e);
    size_t shards;
    fp4_status r = fp4_hfdir_writer_finish(w, &shards, &e);
    fp4_hfdir_writer_free(w);
    fp4_st_close(st);
    snprintf(path, sizeof path, "cp '%s/config.json' '%s/'", src, dst);
    return r || system(path) ? -1 : 0;
}

static void test_extra_tensors(const char *bf) {
    char d[600];
    fp4_model *m = NULL;
    fp4_rt *rt = NULL;
    fp4_error e;
    /* ModelOpt's FP8 KV-cache scales are ignored (the cache is F16) */
    snprintf(d, sizeof d, "%s/with-kscale", tmp);
    CHECK(with_extra(bf, d, "model.layers.0.self_attn.k_scale", 0, 1) == 0);
    CHECK_OK(fp4_model_open(d, NULL, &m, &e));
    CHECK_OK(fp4_rt_create(m, NULL, &rt, &e));
    fp4_rt_free(rt), fp4_model_close(m);
    /* anything else is refused by name, even a scalar */
    snprintf(d, sizeof d, "%s/with-extra", tmp);
    CHECK(with_extra(bf, d, "model.layers.0.mlp.gate_scale", 0, 1) == 0);
    CHECK_OK(fp4_model_open(d, NULL, &m, &e));
    CHECK(fp4_rt_create(m, NULL, &rt, &e) == FP4_ERR_FORMAT && !strcmp(e.rule, "bind.unexpected") &&
          strstr(e.tensor, "gate_scale"));
    fp4_model_close(m);
    snprintf(d, sizeof d, "%s/with-kvec", tmp);
    CHECK(with_extra(bf, d, "model.layers.1.self_attn.k_scale", 1, 4) == 0); /* not a scalar: refused */
    CHECK_OK(fp4_model_open(d, NULL, &m, &e));
    CHECK(fp4_rt_create(m, NULL, &rt, &e) == FP4_ERR_FORMAT && !strcmp(e.rule, "bind.unexpected"));
    fp4_model_close(m);
}

/* ---- the route table ---- */
static void test_routes(const char *bf, const char *nv) {
    fp4_route_key k = {FP4_LANE_NVFP4, FP4_AP_A16, FP4_MODE_NATIVE, FP4_DEVICE_CPU, 1};
    char msg[400];
    const char *name;
    CHECK(fp4_route_check(&k, &name, msg, sizeof msg) == FP4_ERR_REFUSED_ROUTE &&
          strstr(msg, "kquant lane") && strstr(msg, "plain NVFP4 decode"));
    k.device = FP4_DEVICE_CUDA,
    k.act = FP4_AP_NVFP4; /* W4A4 native runs the exact contraction: still refused */
    CHECK(fp4_route_check(&k, &name, msg, sizeof msg) == FP4_ERR_REFUSED_ROUTE && strstr(msg, "unqualified"));
    /* drafting is qualified where the verify step is batch invariant (tests/test_runtime_spec.c) */
    static const struct {
        fp4_rt_lane lane;
        fp4_act_precision act;
        fp4_mode mode;
        fp4_device dev;
        const char *route; /* NULL: refused, the message holding `hint` */
        const char *hint;
    } drafting[] = {
        {FP4_LANE_NVFP4, FP4_AP_A16, FP4_MODE_EXACT, FP4_DEVICE_CPU, "cpu.nvfp4.a16.exact+draft", NULL},
        {FP4_LANE_NVFP4, FP4_AP_NVFP4, FP4_MODE_EXACT, FP4_DEVICE_CPU, "cpu.nvfp4.w4a4.exact+draft", NULL},
        {FP4_LANE_NVFP4, FP4_AP_A16, FP4_MODE_EXACT, FP4_DEVICE_CUDA, "cuda.nvfp4.a16.exact+draft", NULL},
        {FP4_LANE_NVFP4, FP4_AP_NVFP4, FP4_MODE_EXACT, FP4_DEVICE_CUDA, "cuda.nvfp4.w4a4.exact+draft", NULL},
        {FP4_LANE_NVFP4, FP4_AP_A16, FP4_MODE_NATIVE, FP4_DEVICE_CUDA, NULL, "route speculative serving"},
        {FP4_LANE_DENSE, FP4_AP_A16, FP4_MODE_EXACT, FP4_DEVICE_CPU, "cpu.dense.pinned+draft", NULL},
        {FP4_LANE_DENSE, FP4_AP_A16, FP4_MODE_EXACT, FP4_DEVICE_CUDA, "cuda.dense.pinned+draft", NULL},
        {FP4_LANE_DENSE, FP4_AP_A16, FP4_MODE_NATIVE, FP4_DEVICE_CPU, NULL, "use --mode exact"},
        {FP4_LANE_DENSE, FP4_AP_A16, FP4_MODE_NATIVE, FP4_DEVICE_CUDA, NULL, "use --mode exact"},
        {FP4_LANE_KQUANT, FP4_AP_A16, FP4_MODE_EXACT, FP4_DEVICE_CPU, "cpu.kquant.q8_k+draft", NULL},
        {FP4_LANE_KQUANT, FP4_AP_A16, FP4_MODE_NATIVE, FP4_DEVICE_CPU, "cpu.kquant.q8_k+draft", NULL},
        {FP4_LANE_KQUANT, FP4_AP_A16, FP4_MODE_NATIVE, FP4_DEVICE_CUDA, "cuda.kquant.native+draft", NULL},
        {FP4_LANE_KQUANT, FP4_AP_A16, FP4_MODE_EXACT, FP4_DEVICE_CUDA, NULL, "--mode native on cuda"},
        {FP4_LANE_FP8, FP4_AP_A16, FP4_MODE_EXACT, FP4_DEVICE_CPU, NULL, "omit --draft"},
        {FP4_LANE_FP8, FP4_AP_A16, FP4_MODE_NATIVE, FP4_DEVICE_CUDA, NULL, "omit --draft"},
    };
    for (size_t i = 0; i < sizeof drafting / sizeof drafting[0]; i++) {
        fp4_route_key q = {drafting[i].lane, drafting[i].act, drafting[i].mode, drafting[i].dev, 1};
        const fp4_status st = fp4_route_check(&q, &name, msg, sizeof msg);
        if (drafting[i].route)
            CHECK_MSG(st == FP4_OK && name && !strcmp(name, drafting[i].route), "drafting row %zu: %s", i,
                      name ? name : msg);
        else
            CHECK_MSG(st == FP4_ERR_REFUSED_ROUTE && strstr(msg, drafting[i].hint), "drafting row %zu: %s", i,
                      msg);
    }
    k = (fp4_route_key){FP4_LANE_KQUANT, FP4_AP_A16, FP4_MODE_EXACT, FP4_DEVICE_CUDA, 0};
    CHECK(fp4_route_check(&k, &name, msg, sizeof msg) == FP4_ERR_REFUSED_ROUTE &&
          strstr(msg, "--mode native on cuda"));
    /* every combination is a row: qualified (named) or refused (with a message naming another) */
    int n_ok = 0, n_refused = 0;
    for (int lane = 0; lane < FP4_LANE_COUNT_; lane++)
        for (int act = 0; act < 2; act++)
            for (int mode = 0; mode < 2; mode++)
                for (int dev = 0; dev < 2; dev++)
                    for (int dr = 0; dr < 2; dr++) {
                        fp4_route_key q = {(fp4_rt_lane)lane, (fp4_act_precision)act, (fp4_mode)mode,
                                           (fp4_device)dev, dr};
                        fp4_status st = fp4_route_check(&q, &name, msg, sizeof msg);
                        if (st == FP4_OK)
                            n_ok += name && *name;
                        else
                            n_refused +=
                                st == FP4_ERR_REFUSED_ROUTE && (strstr(msg, "use") || strstr(msg, "omit"));
                        if (st != FP4_OK && st != FP4_ERR_REFUSED_ROUTE)
                            fprintf(stderr, "route %d %d %d %d %d: %s\n", lane, act, mode, dev, dr, msg);
                    }
    CHECK_EQ_INT(n_ok + n_refused, FP4_LANE_COUNT_ * 2 * 2 * 2 * 2);
    /* the engine refuses before reading weights: drafting, a CUDA library that is not there */
    fp4_model *m = NULL;
    fp4_rt *rt = NULL;
    fp4_error e;
    CHECK_OK(fp4_model_open(nv, NULL, &m, &e));
    fp4_rt_opts o = {.mode = FP4_MODE_NATIVE, .drafting = 1};
    CHECK(fp4_rt_create(m, &o, &rt, &e) == FP4_ERR_REFUSED_ROUTE && strstr(e.msg, "unqualified"));
    o = (fp4_rt_opts){.device = FP4_DEVICE_CUDA, .cuda_lib = "/nonexistent/libfp4lane_cuda.so"};
    CHECK(fp4_rt_create(m, &o, &rt, &e) == FP4_ERR_NO_DEVICE && strstr(e.msg, "libfp4lane_cuda.so") &&
          strstr(e.msg, "--device cpu"));
    CHECK(rt == NULL);
    /* a library without the entry point (the CPU library itself) */
    char lib[600];
    snprintf(lib, sizeof lib, "%s/libfp4lane.so", getenv("FP4_BUILD") ? getenv("FP4_BUILD") : "build");
    o.cuda_lib = lib;
    CHECK(fp4_rt_create(m, &o, &rt, &e) == FP4_ERR_NO_DEVICE && !strcmp(e.rule, "rt.cuda-abi") &&
          strstr(e.msg, "fp4_rt_cuda_backend"));
    fp4_model_close(m);
    (void)bf;
}

/* exact A16 needs n_in % 256: a model with hidden 128 is refused in exact mode, per tensor, with
 * the nearest route; native serves it */
static void test_tensor_route(void) {
    char d1[600], d2[600];
    snprintf(d1, sizeof d1, "%s/narrow-bf16", tmp);
    snprintf(d2, sizeof d2, "%s/narrow-nvfp4", tmp);
    rtfx_spec s = rtfx_default("llama");
    s.hidden = 128, s.heads = 2, s.kv_heads = 1, s.ffn = 256;
    CHECK(rtfx_write_hf(d1, &s, 5) == 0);
    fp4_quantize_opts qo = {.layout = FP4_LAYOUT_MODELOPT};
    fp4_error e;
    CHECK_OK(fp4_quantize_checkpoint(d1, d2, &qo, &e));
    fp4_model *m = NULL;
    fp4_rt *rt = NULL;
    CHECK_OK(fp4_model_open(d2, NULL, &m, &e));
    fp4_rt_opts o = {.mode = FP4_MODE_EXACT};
    CHECK(fp4_rt_create(m, &o, &rt, &e) == FP4_ERR_REFUSED_ROUTE && !strcmp(e.rule, "route.tensor") &&
          strstr(e.tensor, "q_proj.weight") && strstr(e.msg, "--mode native"));
    o.mode = FP4_MODE_NATIVE;
    CHECK_OK(fp4_rt_create(m, &o, &rt, &e));
    fp4_rt_free(rt);
    fp4_model_close(m);
}

/* ---- GGUF with llama.cpp's keys and names, q/k rows permuted as its converter does; Llama 3.1
 * scaling as its converter writes it (rope_freqs.weight, the divisor of each frequency) ---- */
static int corrupt_rope_freqs; /* 1: write a zero factor (must be refused) */
static int write_gguf_llamacpp(const char *hf_dir, const char *path) {
    fp4_model *m = NULL;
    fp4_rt *rt = NULL;
    fp4_error e;
    if (fp4_model_open(hf_dir, NULL, &m, &e) || fp4_rt_create(m, NULL, &rt, &e))
        return fp4_model_close(m), -1;
    const fp4_arch a = *fp4_rt_arch(rt);
    fp4_rt_free(rt);
    /* llama.cpp's names: Mistral is converted as "llama" (and permuted), Qwen as itself (not) */
    const char *an = a.family == FP4_ARCH_QWEN2 ? "qwen2" : a.family == FP4_ARCH_QWEN3 ? "qwen3" : "llama";
    const int permute = !strcmp(an, "llama");
    fp4_gguf_writer *w = NULL;
    fp4_gguf_writer_create(&w, &e);
    fp4_gguf_writer_add_str(w, "general.architecture", an, strlen(an), &e);
    static const struct {
        const char *key;
        int what;
    } ukeys[] = {{"block_count", 0},          {"context_length", 1},       {"embedding_length", 2},
                 {"feed_forward_length", 3},  {"attention.head_count", 4}, {"attention.head_count_kv", 5},
                 {"rope.dimension_count", 6}, {"attention.key_length", 6}};
    const int64_t uvals[7] = {a.n_layers, a.n_ctx_train, a.hidden,  a.ffn,
                              a.n_heads,  a.n_kv_heads,  a.head_dim};
    char key[128];
    for (size_t i = 0; i < sizeof ukeys / sizeof ukeys[0]; i++) {
        snprintf(key, sizeof key, "%s.%s", an, ukeys[i].key);
        fp4_gguf_writer_add_u32(w, key, (uint32_t)uvals[ukeys[i].what], &e);
    }
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", an);
    fp4_gguf_writer_add_f32(w, key, a.rms_eps, &e);
    snprintf(key, sizeof key, "%s.rope.freq_base", an);
    fp4_gguf_writer_add_f32(w, key, (float)a.rope_theta, &e);
    fp4_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 1, &e);
    fp4_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 2, &e);
    static const struct {
        const char *hf, *gg;
        int perm;
    } map[] = {{"input_layernorm.weight", "attn_norm.weight", 0},
               {"self_attn.q_proj.weight", "attn_q.weight", 1},
               {"self_attn.k_proj.weight", "attn_k.weight", 1},
               {"self_attn.v_proj.weight", "attn_v.weight", 0},
               {"self_attn.q_proj.bias", "attn_q.bias", 0},
               {"self_attn.k_proj.bias", "attn_k.bias", 0},
               {"self_attn.v_proj.bias", "attn_v.bias", 0},
               {"self_attn.q_norm.weight", "attn_q_norm.weight", 0},
               {"self_attn.k_norm.weight", "attn_k_norm.weight", 0},
               {"self_attn.o_proj.weight", "attn_output.weight", 0},
               {"post_attention_layernorm.weight", "ffn_norm.weight", 0},
               {"mlp.gate_proj.weight", "ffn_gate.weight", 0},
               {"mlp.up_proj.weight", "ffn_up.weight", 0},
               {"mlp.down_proj.weight", "ffn_down.weight", 0}};
    const fp4_tensor *src[64];
    char names[64][96];
    int perm[64], n = 0;
    snprintf(names[n], 96, "token_embd.weight"), perm[n] = 0,
                                                 src[n++] = fp4_model_find(m, "model.embed_tokens.weight");
    snprintf(names[n], 96, "output_norm.weight"), perm[n] = 0,
                                                  src[n++] = fp4_model_find(m, "model.norm.weight");
    if (!a.tied_head)
        snprintf(names[n], 96, "output.weight"), perm[n] = 0, src[n++] = fp4_model_find(m, "lm_head.weight");
    for (int l = 0; l < a.n_layers; l++)
        for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
            char hn[128];
            snprintf(hn, sizeof hn, "model.layers.%d.%s", l, map[i].hf);
            const fp4_tensor *t = fp4_model_find(m, hn);
            if (!t) continue; /* biases and q/k norms only where the family has them */
            snprintf(names[n], 96, "blk.%d.%s", l, map[i].gg);
            perm[n] = map[i].perm && permute;
            src[n++] = t;
        }
    for (int i = 0; i < n; i++) {
        const int is_norm = src[i]->n_dims == 1;
        if (fp4_gguf_writer_add_tensor(w, names[i], is_norm ? FP4_TYPE_F32 : FP4_TYPE_BF16, src[i]->n_dims,
                                       src[i]->ne, &e))
            return -1;
    }
    float rf[FP4_ARCH_MAX_HEAD_DIM / 2];
    const int half = (int)a.head_dim / 2;
    if (a.rope_scaling ==
        FP4_ROPE_LLAMA3) { /* llama.cpp's convert_hf_to_gguf.py, LlamaModel: 1/scale per frequency */
        for (int i = 0; i < half; i++) {
            const double f = (float)(1.0 / pow(a.rope_theta, (double)(2 * i) / (double)a.head_dim)),
                         wl = 2 * M_PI / f;
            const double lo = a.rope_orig_ctx / a.rope_low_freq_factor,
                         hi = a.rope_orig_ctx / a.rope_high_freq_factor;
            if (wl < hi)
                rf[i] = 1.0f;
            else if (wl > lo)
                rf[i] = (float)a.rope_factor;
            else {
                double sm = (a.rope_orig_ctx / wl - a.rope_low_freq_factor) /
                            (a.rope_high_freq_factor - a.rope_low_freq_factor);
                rf[i] = (float)(1.0 / ((1 - sm) / a.rope_factor + sm));
            }
        }
        if (corrupt_rope_freqs) rf[3] = 0.0f;
        int64_t ne[1] = {half};
        if (fp4_gguf_writer_add_tensor(w, "rope_freqs.weight", FP4_TYPE_F32, 1, ne, &e)) return -1;
    }
    if (fp4_gguf_writer_write_header(w, path, &e)) return -1;
    for (int i = 0; i < n; i++) {
        const fp4_tensor *t = src[i];
        const int64_t rows = t->n_dims > 1 ? t->ne[1] : 1, cols = t->ne[0];
        if (t->n_dims == 1) {
            float *f = malloc(sizeof(float) * (size_t)cols);
            fp4_tensor_dequant_rows(t, 0, 1, f);
            fp4_gguf_writer_write_tensor_data(w, i, f, sizeof(float) * (size_t)cols, &e);
            free(f);
            continue;
        }
        uint8_t *b = malloc((size_t)t->nbytes);
        const size_t rb = (size_t)cols * 2;
        for (int64_t r = 0; r < rows; r++) {
            int64_t from = r;
            if (perm[i]) { /* llama.cpp: reshape(heads, 2, D/2, n_in).swapaxes(1, 2): row h*D + 2i + j <- h*D
                              + j*D/2 + i */
                const int64_t D = a.head_dim, h = r / D, q = r % D;
                from = h * D + (q % 2) * (D / 2) + q / 2;
            }
            memcpy(b + r * rb, t->data + from * rb, rb);
        }
        fp4_gguf_writer_write_tensor_data(w, i, b, (size_t)t->nbytes, &e);
        free(b);
    }
    if (a.rope_scaling == FP4_ROPE_LLAMA3)
        fp4_gguf_writer_write_tensor_data(w, n, rf, sizeof(float) * (size_t)half, &e);
    fp4_status st = fp4_gguf_writer_finish(w, &e);
    fp4_gguf_writer_free(w);
    fp4_model_close(m);
    return st ? -1 : 0;
}

static void logits_of(const char *path, int32_t n, const int32_t *ids, float *out, const char **routes) {
    /* out: n rows of the model's vocab */
    fp4_model *m = NULL;
    fp4_rt *rt = NULL;
    fp4_error e;
    CHECK_OK(fp4_model_open(path, NULL, &m, &e));
    fp4_rt_opts o = {.n_ctx = 32, .n_threads = 2};
    (void)0;
    fp4_status st = fp4_rt_create(m, &o, &rt, &e);
    CHECK_MSG(st == FP4_OK, "%s: %s %s %s", path, e.rule, e.tensor, e.msg);
    if (rt) {
        int32_t s;
        fp4_rt_seq_open(rt, &s);
        fp4_rt_tok c[32];
        for (int i = 0; i < n; i++)
            c[i] = (fp4_rt_tok){s, ids[i], 1};
        CHECK_OK(fp4_rt_step(rt, c, n, out, &e));
        if (routes) *routes = fp4_rt_arch(rt)->qk_permuted ? "permuted" : "hf";
    }
    fp4_rt_free(rt);
    fp4_model_close(m);
}

static void test_gguf(const char *bf) {
    char path[600];
    snprintf(path, sizeof path, "%s/llama.gguf", tmp);
    CHECK(write_gguf_llamacpp(bf, path) == 0);
    fp4_gguf *g = NULL;
    fp4_error e;
    CHECK_OK(fp4_gguf_open(path, &g, &e));
    fp4_arch a;
    CHECK_OK(fp4_arch_from_gguf(g, &a, &e));
    CHECK(a.family == FP4_ARCH_LLAMA && a.source == FP4_ARCH_FROM_GGUF && a.qk_permuted && a.n_layers == 2 &&
          a.hidden == 256 && a.n_kv_heads == 2 && a.head_dim == 64 && a.vocab == 320 && a.rms_eps == 1e-5f &&
          !a.tied_head && a.eos[0] == 2);
    fp4_gguf_close(g);
    enum { N = 9 };
    const int32_t ids[N] = {1, 5, 300, 17, 17, 2, 99, 250, 4};
    float *x = malloc(sizeof(float) * N * 320), *y = malloc(sizeof(float) * N * 320);
    const char *how = NULL;
    logits_of(bf, N, ids, x, NULL);
    logits_of(path, N, ids, y, &how);
    CHECK(how && !strcmp(how, "permuted"));
    int64_t d = 0;
    double md = 0;
    for (int i = 0; i < N * 320; i++)
        d += f32_bits(x[i]) != f32_bits(y[i]), md = fmax(md, fabs(x[i] - y[i]));
    if (d) fprintf(stderr, "max diff %g (first %g vs %g)\n", md, x[0], y[0]);
    CHECK_MSG(d == 0, "the llama.cpp GGUF differs from its HF source in %lld logits", (long long)d);
    free(x), free(y);
    /* Llama 3.1 scaling through llama.cpp's rope_freqs.weight: against the HF checkpoint it came
     * from (the factors are f32-rounded divisors, so close but not bit-equal) and against
     * transformers' own logits (test_runtime_hf.c's tolerance) */
    snprintf(path, sizeof path, "%s/llama31.gguf", tmp);
    CHECK(write_gguf_llamacpp("tests/data/hf/llama31", path) == 0);
    CHECK_OK(fp4_gguf_open(path, &g, &e));
    CHECK_OK(fp4_arch_from_gguf(g, &a, &e));
    CHECK(a.rope_freq_factors && a.rope_scaling == FP4_ROPE_NONE && a.rope_theta == 500000.0);
    fp4_gguf_close(g);
    const int32_t ids31[N] = {10, 216, 113, 104, 245, 243, 11, 492, 167};
    x = malloc(sizeof(float) * N * 512), y = malloc(sizeof(float) * N * 512);
    logits_of("tests/data/hf/llama31", N, ids31, x, NULL);
    logits_of(path, N, ids31, y, &how);
    double md2 = 0, mx2 = 0;
    for (int i = 0; i < N * 512; i++)
        md2 = fmax(md2, fabs(x[i] - y[i])), mx2 = fmax(mx2, fabs(x[i]));
    printf("llama31 GGUF (rope_freqs) vs its HF source: max |dlogit| %.3g of max |logit| %.3g\n", md2, mx2);
    CHECK(md2 < 1e-3 * mx2); /* ignoring the factors (8x on the low frequencies) moves logits far more */
    free(x), free(y);
    /* Mistral (converted as "llama", permuted), Qwen2 (biases), Qwen3 (q/k norms, tied head) from
     * transformers' own checkpoints: the llama.cpp-named GGUF decodes to the HF source's bits */
    static const char *const fams[] = {"mistral", "qwen2", "qwen3"};
    for (int f = 0; f < 3; f++) {
        char src[200];
        snprintf(src, sizeof src, "tests/data/hf/%s", fams[f]);
        snprintf(path, sizeof path, "%s/%s.gguf", tmp, fams[f]);
        CHECK(write_gguf_llamacpp(src, path) == 0);
        x = malloc(sizeof(float) * N * 512), y = malloc(sizeof(float) * N * 512);
        logits_of(src, N, ids31, x, NULL);
        logits_of(path, N, ids31, y, &how);
        int64_t dd = 0;
        for (int i = 0; i < N * 512; i++)
            dd += f32_bits(x[i]) != f32_bits(y[i]);
        CHECK_MSG(dd == 0 && how && !strcmp(how, f == 0 ? "permuted" : "hf"),
                  "%s GGUF: %lld logits differ (%s)", fams[f], (long long)dd, how ? how : "?");
        free(x), free(y);
    }
    corrupt_rope_freqs = 1;
    snprintf(path, sizeof path, "%s/llama31-bad.gguf", tmp);
    CHECK(write_gguf_llamacpp("tests/data/hf/llama31", path) == 0);
    corrupt_rope_freqs = 0;
    fp4_model *mb = NULL;
    fp4_rt *rb = NULL;
    CHECK_OK(fp4_model_open(path, NULL, &mb, &e));
    CHECK(fp4_rt_create(mb, NULL, &rb, &e) == FP4_ERR_FORMAT && !strcmp(e.rule, "rt.rope") &&
          !strcmp(e.tensor, "rope_freqs.weight"));
    fp4_model_close(mb);
    /* GGUF refusals name key and value */
    fp4_gguf_writer *w = NULL;
    snprintf(path, sizeof path, "%s/moe.gguf", tmp);
    fp4_gguf_writer_create(&w, &e);
    fp4_gguf_writer_add_str(w, "general.architecture", "llama", 5, &e);
    fp4_gguf_writer_add_u32(w, "llama.block_count", 2, &e);
    fp4_gguf_writer_add_u32(w, "llama.context_length", 64, &e);
    fp4_gguf_writer_add_u32(w, "llama.embedding_length", 256, &e);
    fp4_gguf_writer_add_u32(w, "llama.feed_forward_length", 512, &e);
    fp4_gguf_writer_add_u32(w, "llama.attention.head_count", 4, &e);
    fp4_gguf_writer_add_u32(w, "llama.expert_count", 8, &e);
    int64_t ne[2] = {256, 320};
    fp4_gguf_writer_add_tensor(w, "token_embd.weight", FP4_TYPE_F32, 2, ne, &e);
    CHECK_OK(fp4_gguf_writer_write_header(w, path, &e));
    float *z = calloc(256 * 320, 4);
    fp4_gguf_writer_write_tensor_data(w, 0, z, 256 * 320 * 4, &e);
    free(z);
    CHECK_OK(fp4_gguf_writer_finish(w, &e));
    fp4_gguf_writer_free(w);
    CHECK_OK(fp4_gguf_open(path, &g, &e));
    /* "llama" with experts is Mixtral (issue 28): without expert_used_count it is refused by name */
    CHECK(fp4_arch_from_gguf(g, &a, &e) == FP4_ERR_NOT_FOUND && strstr(e.msg, "llama.expert_used_count") &&
          !strcmp(e.rule, "arch.key"));
    fp4_gguf_close(g);
}

int main(void) {
    snprintf(tmp, sizeof tmp, "%s/fp4lane-rtarch-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) return perror("mkdtemp"), 1;
    test_hf_config();
    char bf[600], nv[600];
    rtfx_spec s = rtfx_default("llama");
    rtfx_write_pair(tmp, &s, 3, bf, nv, sizeof bf);
    test_bind(bf);
    test_extra_tensors(bf);
    test_routes(bf, nv);
    test_tensor_route();
    test_gguf(bf);
    if (!check_failed && !getenv("KEEP")) rtfx_rmtree(tmp);
    return check_report();
}
