/* test_nvidia_twins.c — synthetic twins of NVIDIA's and llm-compressor's published quantization
 * statements (issue 13 item 3; key sets and their sources: tests/data/nvidia/README.md), laid over
 * the W4A16 NVFP4 twin of tests/data/hf/llama. Each twin is written here, in a temporary folder:
 * the tensors are tests/data/hf/llama/nvfp4's, the JSON files carry the published keys. Checked:
 * the loader accepts every real variant the tensors bear out and refuses, by rule, the claims they
 * do not (an FP8 layer, W4A4 without input scales, an exclude wildcard that names an NVFP4
 * module); the runtime runs every accepted twin and gives the logits of the plain twin bit for
 * bit (kv_cache_quant_algo FP8 runs explicitly with the F16 cache: k_scale/v_scale are unused). */
#include "check.h"
#include "fp4lane_runtime.h"
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define SRC "tests/data/hf/llama/nvfp4"
#define N_IDS 6

static char tmp[512];

static int copy_file(const char *from, const char *to) {
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    int ok = a && b;
    char buf[1 << 14];
    size_t n;
    while (ok && (n = fread(buf, 1, sizeof buf, a)) > 0) ok = fwrite(buf, 1, n, b) == n;
    if (a) fclose(a);
    if (b && fclose(b)) ok = 0;
    return ok;
}

static void put(const char *dir, const char *name, const char *text) {
    char p[1200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    CHECK(f != NULL);
    if (f) fputs(text, f), fclose(f);
}

/* config.json of the source with its quantization_config replaced by qc (JSON text), or removed */
static char *config_with(const char *qc) {
    json_t *cfg = json_load_file(SRC "/config.json", 0, NULL), *q = qc ? json_loads(qc, 0, NULL) : NULL;
    CHECK(cfg && (!qc || q));
    if (!cfg) return strdup("{}");
    if (q) json_object_set_new(cfg, "quantization_config", q);
    else json_object_del(cfg, "quantization_config");
    char *out = json_dumps(cfg, JSON_INDENT(2));
    json_decref(cfg);
    return out;
}

/* a twin folder: the source's tensors, config.json (+ quantization_config qc), hf_quant_config.json
 * (hfq, or none) */
static const char *twin(const char *name, const char *qc, const char *hfq) {
    static char dir[700];
    char p[1200];
    snprintf(dir, sizeof dir, "%s/%s", tmp, name);
    mkdir(dir, 0700);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    CHECK(copy_file(SRC "/model.safetensors", p));
    char *cfg = config_with(qc);
    put(dir, "config.json", cfg);
    free(cfg);
    if (hfq) put(dir, "hf_quant_config.json", hfq);
    return dir;
}

static fp4_status open_rule(const char *dir, char *rule, size_t n) {
    fp4_model *m = NULL;
    fp4_error e;
    fp4_status st = fp4_model_open(dir, NULL, &m, &e);
    snprintf(rule, n, "%s", st ? e.rule : "");
    if (st) fprintf(stderr, "  (%s: %s %s)\n", dir, e.rule, e.msg);
    fp4_model_close(m);
    return st;
}

/* exact-mode logits of N_IDS teacher-forced ids; 0 on success */
static int logits(const char *dir, float *out) {
    static const int32_t ids[N_IDS] = {1, 17, 300, 42, 511, 7};
    fp4_model *m = NULL;
    fp4_error e;
    if (fp4_model_open(dir, NULL, &m, &e)) return -1;
    fp4_rt_opts o = {.mode = FP4_MODE_EXACT, .n_threads = 1, .n_ctx = 16};
    fp4_rt *rt = NULL;
    int rc = fp4_rt_create(m, &o, &rt, &e) ? -1 : 0;
    if (rc) fprintf(stderr, "  (%s: runtime: %s %s)\n", dir, e.rule, e.msg);
    int32_t s = 0;
    if (!rc) rc = fp4_rt_seq_open(rt, &s) ? -1 : 0;
    fp4_rt_tok c[N_IDS];
    for (int i = 0; i < N_IDS; i++) c[i] = (fp4_rt_tok){s, ids[i], 1};
    if (!rc) rc = fp4_rt_step(rt, c, N_IDS, out, &e) ? -1 : 0;
    fp4_rt_free(rt);
    fp4_model_close(m);
    return rc;
}

static const char *const HFQ_FP4 = /* nvidia/Llama-3.1-8B-Instruct-FP4, quant_algo as the twin bears */
    "{\"producer\": {\"name\": \"modelopt\", \"version\": \"0.23.0\"},\n"
    " \"quantization\": {\"quant_algo\": \"%s\", \"kv_cache_quant_algo\": \"FP8\", \"group_size\": 16,\n"
    "                  \"exclude_modules\": [\"lm_head\"]}}\n";

int main(void) {
    snprintf(tmp, sizeof tmp, "%s/fp4lane-twins-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) return perror("mkdtemp"), 1;
    char rule[128], hfq[2048], qc[4096];
    const int64_t V = 512;
    float *base = malloc(sizeof(float) * N_IDS * V), *got = malloc(sizeof(float) * N_IDS * V);
    CHECK(base && got && logits(SRC, base) == 0);
#define SAME_LOGITS(dir) (logits(dir, got) == 0 && !memcmp(got, base, sizeof(float) * N_IDS * V))

    /* 1. hf_quant_config.json as nvidia/Llama-3.1-8B-Instruct-FP4 publishes it (kv FP8, exclude
     *    lm_head); the twin's tensors are W4A16, so quant_algo NVFP4 (W4A4) is refused by rule */
    snprintf(hfq, sizeof hfq, HFQ_FP4, "W4A16_NVFP4");
    const char *d = twin("fp4-hfq", NULL, hfq);
    CHECK_OK(open_rule(d, rule, sizeof rule));
    CHECK(SAME_LOGITS(d));
    snprintf(hfq, sizeof hfq, HFQ_FP4, "NVFP4");
    d = twin("fp4-hfq-w4a4", NULL, hfq);
    CHECK(open_rule(d, rule, sizeof rule) == FP4_ERR_LANE && strstr(rule, "activation"));

    /* 2. newer exports: quantization_config inside config.json, no hf_quant_config.json */
    d = twin("config-qc", "{\"quant_method\": \"modelopt\", \"quant_algo\": \"W4A16_NVFP4\", "
                          "\"kv_cache_quant_algo\": \"FP8\", \"group_size\": 16, "
                          "\"exclude_modules\": [\"lm_head\", \"model.embed_tokens\"], "
                          "\"producer\": {\"name\": \"modelopt\", \"version\": \"0.29.0\"}}",
             NULL);
    CHECK_OK(open_rule(d, rule, sizeof rule));
    CHECK(SAME_LOGITS(d));
    /* what ModelOpt's exporter writes today (Model-Optimizer a2fbac7, unified_export_hf.py
     * _write_hf_export_config): hf_quant_config.json, and config.json's quantization_config in the
     * form convert_hf_quant_config_format gives it */
    snprintf(hfq, sizeof hfq, HFQ_FP4, "W4A16_NVFP4");
    d = twin("config-qc-exporter",
             "{\"config_groups\": {\"group_0\": {\"weights\": {\"dynamic\": false, \"num_bits\": 4, "
             "\"type\": \"float\", \"group_size\": 16}, \"targets\": [\"Linear\"]}}, "
             "\"ignore\": [\"lm_head\"], "
             "\"quant_algo\": \"W4A16_NVFP4\", \"kv_cache_scheme\": {\"dynamic\": false, \"num_bits\": 8, "
             "\"type\": \"float\"}, \"producer\": {\"name\": \"modelopt\", \"version\": \"0.23.0\"}, "
             "\"quant_method\": \"modelopt\"}",
             hfq);
    CHECK_OK(open_rule(d, rule, sizeof rule));
    CHECK(SAME_LOGITS(d));
    d = twin("config-qc-bad", "{\"quant_method\": \"modelopt\", \"quant_algo\": \"W4A16_NVFP4\", "
                              "\"group_size\": 32}", NULL);
    CHECK(open_rule(d, rule, sizeof rule) != FP4_OK);

    /* 3. MIXED_PRECISION with per-layer quantized_layers (nvidia NVFP4 mixed exports): every
     *    projection listed with its own algorithm */
    static const char *const proj[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                       "self_attn.o_proj", "mlp.gate_proj",    "mlp.up_proj",
                                       "mlp.down_proj"};
    for (int variant = 0; variant < 3; variant++) {
        int k = snprintf(hfq, sizeof hfq,
                         "{\"producer\": {\"name\": \"modelopt\", \"version\": \"0.31.0\"},\n "
                         "\"quantization\": {\"quant_algo\": \"MIXED_PRECISION\", \"kv_cache_quant_algo\": "
                         "\"FP8\", \"quantized_layers\": {"); /* no exclude_modules: the exporter writes
                                                                * none for MIXED_PRECISION */
        for (int l = 0; l < 2; l++)
            for (int p = 0; p < 7; p++) {
                const char *a = "W4A16_NVFP4";
                if (l == 1 && p == 6 && variant == 1) a = "FP8";   /* FP8, but the weight is NVFP4 */
                if (l == 1 && p == 6 && variant == 2) a = "NVFP4"; /* W4A4 without input scales */
                k += snprintf(hfq + k, sizeof hfq - (size_t)k,
                              "%s\n  \"model.layers.%d.%s\": {\"quant_algo\": \"%s\"%s}", l || p ? "," : "",
                              l, proj[p], a, strcmp(a, "FP8") ? ", \"group_size\": 16" : "");
            }
        snprintf(hfq + k, sizeof hfq - (size_t)k, "}}}\n");
        char name[32];
        snprintf(name, sizeof name, "mixed-%d", variant);
        d = twin(name, NULL, hfq);
        fp4_status st = open_rule(d, rule, sizeof rule);
        if (variant == 0) {
            CHECK_OK(st);
            CHECK(SAME_LOGITS(d));
        } else {
            const char *want = variant == 1 ? "claims.quant-algo" : "claims.activations";
            CHECK_MSG(st == FP4_ERR_LANE && !strcmp(rule, want), "variant %d: %s", variant, rule);
        }
    }
    { /* the refusal names the layer and says FP8 (FP8 layers that are FP8 run: tests/test_fp8.c) */
        fp4_model *m = NULL;
        fp4_error e;
        snprintf(qc, sizeof qc, "%s/mixed-1", tmp);
        CHECK(fp4_model_open(qc, NULL, &m, &e) == FP4_ERR_LANE && strstr(e.msg, "FP8") &&
              !strcmp(e.tensor, "model.layers.1.mlp.down_proj"));
        fp4_model_close(m);
    }

    /* 4. exclude_modules with wildcards, matched like ModelOpt (fnmatch) and checked against the
     *    tensors: excluded modules must not be NVFP4 */
    snprintf(hfq, sizeof hfq,
             "{\"quantization\": {\"quant_algo\": \"W4A16_NVFP4\", \"group_size\": 16, \"exclude_modules\": "
             "[\"lm_head*\", \"*embed_tokens\", \"model.layers.?.input_layernorm\", \"*.mlp.gate\"]}}");
    d = twin("wild-ok", NULL, hfq);
    CHECK_OK(open_rule(d, rule, sizeof rule));
    CHECK(SAME_LOGITS(d));
    snprintf(hfq, sizeof hfq,
             "{\"quantization\": {\"quant_algo\": \"W4A16_NVFP4\", \"group_size\": 16, \"exclude_modules\": "
             "[\"lm_head\", \"model.layers.*.mlp.*\"]}}");
    d = twin("wild-bad", NULL, hfq);
    CHECK(open_rule(d, rule, sizeof rule) == FP4_ERR_LANE && !strcmp(rule, "claims.exclude"));

    /* 5. compressed-tensors nvfp4-pack-quantized, config.json as llm-compressor writes it for the
     *    NVFP4A16 scheme (weights only) */
    {
        fp4_model *m = NULL;
        fp4_error e;
        char ct[700];
        snprintf(ct, sizeof ct, "%s/ct", tmp);
        fp4_write_opts wo = {.layout = FP4_LAYOUT_CT};
        CHECK_OK(fp4_model_open(SRC, NULL, &m, &e));
        if (m) CHECK_OK(fp4_model_write(m, ct, &wo, &e));
        fp4_model_close(m);
        char *cfg = config_with(
            "{\"config_groups\": {\"group_0\": {\"input_activations\": null, \"output_activations\": null, "
            "\"targets\": [\"Linear\"], \"weights\": {\"actorder\": null, \"block_structure\": null, "
            "\"dynamic\": false, \"group_size\": 16, \"num_bits\": 4, \"observer\": \"minmax\", "
            "\"observer_kwargs\": {}, \"strategy\": \"tensor_group\", \"symmetric\": true, \"type\": "
            "\"float\"}}}, \"format\": \"nvfp4-pack-quantized\", \"global_compression_ratio\": null, "
            "\"ignore\": [\"lm_head\"], \"kv_cache_scheme\": null, \"quant_method\": \"compressed-tensors\", "
            "\"quantization_status\": \"compressed\", \"sparsity_config\": {}, \"transform_config\": {}, "
            "\"version\": \"0.10.2\"}");
        put(ct, "config.json", cfg);
        free(cfg);
        CHECK_OK(open_rule(ct, rule, sizeof rule));
        CHECK(SAME_LOGITS(ct));
        /* the same with a W4A4 input_activations group: the tensors carry no input scale */
        cfg = config_with(
            "{\"config_groups\": {\"group_0\": {\"input_activations\": {\"dynamic\": \"local\", "
            "\"group_size\": 16, \"num_bits\": 4, \"strategy\": \"tensor_group\", \"symmetric\": true, "
            "\"type\": \"float\"}, \"targets\": [\"Linear\"], \"weights\": {\"dynamic\": false, "
            "\"group_size\": 16, \"num_bits\": 4, \"strategy\": \"tensor_group\", \"symmetric\": true, "
            "\"type\": \"float\"}}}, \"format\": \"nvfp4-pack-quantized\", \"ignore\": [\"lm_head\"], "
            "\"quant_method\": \"compressed-tensors\", \"quantization_status\": \"compressed\"}");
        put(ct, "config.json", cfg);
        free(cfg);
        CHECK(open_rule(ct, rule, sizeof rule) == FP4_ERR_LANE && strstr(rule, "activation"));
    }

    free(base), free(got);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp);
    return check_report();
}
