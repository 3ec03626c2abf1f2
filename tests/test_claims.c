/* test_claims.c — issue 12, wrong accepts (items 6–9):
 *  6. quantize never writes what its loader refuses: a tensor of tiny values (1e-36, subnormal
 *     f32) gets the all-zero tensor's scale2 = 1.0 and loads, in every layout, both rules;
 *  7. every quantization statement (config.json quantization_config, hf_quant_config.json,
 *     carried metadata) is checked against the tensors: algorithm, group size, method vs layout,
 *     activations, weights, format, exclude lists — each refusal with its rule, and valid twins;
 *  8. a GGUF whose carried texts a later verb would parse (fp4lane.hf.config, fp4lane.st.*) is
 *     refused by validate when they are broken;
 *  9. a config.json that is a dangling link or a symlink loop is an error, not an absent file. */
#include "check.h"
#include "fp4lane_io.h"
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define GOLDEN "../shared/data/modelopt-golden"
static char tmp[512];

static const char *P(const char *name) {
    static char buf[16][800];
    static int k;
    char *p = buf[k++ % 16];
    snprintf(p, 800, "%s/%s", tmp, name);
    return p;
}

/* the rule of the loader's refusal, or "" when it loads */
static const char *load_rule(const char *path) {
    static fp4_error e;
    fp4_model *m = NULL;
    fp4_status st = fp4_model_open(path, NULL, &m, &e);
    fp4_model_close(m);
    return st ? e.rule : "";
}

static void put_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fputs(text, f) >= 0);
    if (f) fclose(f);
}

/* JSON written with ' for " (none of the test texts holds a quote) */
static void put_json(const char *path, const char *text) {
    char buf[2048];
    snprintf(buf, sizeof buf, "%s", text);
    for (char *q = buf; *q; q++)
        if (*q == '\'') *q = '"';
    put_file(path, buf);
}

/* ---- 6 ---- */

static void test_tiny_tensor(void) {
    static const char *const names[2] = {"model.layers.0.mlp.down_proj.weight",
                                         "model.layers.0.mlp.up_proj.weight"};
    const char *in = P("tiny.safetensors");
    fp4_st_writer *w = NULL;
    fp4_error e;
    int64_t sh[2] = {4, 64};
    CHECK_OK(fp4_st_writer_create(&w, &e));
    for (int i = 0; i < 2; i++) CHECK_OK(fp4_st_writer_add_tensor(w, names[i], FP4_ST_F32, 2, sh, &e));
    CHECK_OK(fp4_st_writer_begin(w, in, &e));
    float a[256], b[256];
    for (int i = 0; i < 256; i++) {
        a[i] = (i % 3 ? 1e-36f : -7e-37f) * (float)(1 + i % 5);
        b[i] = (i % 2 ? 1e-40f : -3e-41f); /* subnormal f32 */
    }
    CHECK_OK(fp4_st_writer_write(w, a, sizeof a, &e));
    CHECK_OK(fp4_st_writer_write(w, b, sizeof b, &e));
    CHECK_OK(fp4_st_writer_finish(w, &e));
    fp4_st_writer_free(w);
    static const fp4_layout ls[4] = {FP4_LAYOUT_GGUF, FP4_LAYOUT_GGUF_GGML, FP4_LAYOUT_MODELOPT,
                                     FP4_LAYOUT_CT};
    for (int rule = 0; rule < 2; rule++)
        for (int l = 0; l < 4; l++) {
            char out[700];
            snprintf(out, sizeof out, "%s/tiny_%d_%d%s", tmp, rule, l, l < 2 ? ".gguf" : "");
            fp4_quantize_opts o = {.layout = ls[l], .rule = (fp4_scale2_rule)rule, .no_fusion = 1};
            CHECK_OK(fp4_quantize_checkpoint(in, out, &o, &e));
            fp4_model *m = NULL;
            CHECK_OK(fp4_model_open(out, NULL, &m, &e));
            for (int i = 0; m && i < 2; i++) {
                const fp4_tensor *t = fp4_model_find(m, names[i]);
                CHECK(t && t->type == FP4_TYPE_NVFP4_E2M1 && t->nvfp4.scale2 == 1.0f);
                float row[64];
                for (int r = 0; t && r < 4; r++) {
                    CHECK_OK(fp4_tensor_dequant_rows(t, r, r + 1, row));
                    for (int k = 0; k < 64; k++) CHECK(row[k] == 0.0f); /* +-0: zero at NVFP4 precision */
                }
            }
            fp4_model_close(m);
        }
}

/* ---- 7 ---- */

static void test_hf_claims(void) {
    const char *mo = P("mo");
    fp4_model *m = NULL;
    fp4_error e;
    CHECK_OK(fp4_model_open(GOLDEN "/modelopt_cuda.safetensors", NULL, &m, &e));
    fp4_write_opts o = {.layout = FP4_LAYOUT_MODELOPT};
    CHECK_OK(fp4_model_write(m, mo, &o, &e));
    o.layout = FP4_LAYOUT_CT;
    const char *ct = P("ct");
    CHECK_OK(fp4_model_write(m, ct, &o, &e));
    fp4_model_close(m);
    char cfg[900], hq[900];
    snprintf(cfg, sizeof cfg, "%s/config.json", mo);
    snprintf(hq, sizeof hq, "%s/hf_quant_config.json", mo);
    char hq_orig[8192] = "";
    FILE *f = fopen(hq, "rb");
    size_t n = f ? fread(hq_orig, 1, sizeof hq_orig - 1, f) : 0;
    hq_orig[n] = 0;
    if (f) fclose(f);
    CHECK(!strcmp(load_rule(mo), ""));
    static const struct { const char *json, *rule; } cases[] = {
        {"{'quantization_config':{'quant_method':'modelopt','quant_algo':'W4A16_NVFP4','group_size':16,"
         "'exclude_modules':['lm_head','model.embed_tokens']}}", ""},
        {"{'quantization_config':{'quant_method':'modelopt','quant_algo':'FP8'}}", "claims.quant-algo"},
        {"{'quantization_config':{'quant_method':'modelopt','quant_algo':'W4A16_NVFP4','group_size':32}}",
         "claims.group-size"},
        {"{'quantization_config':{'quant_method':'compressed-tensors','format':'nvfp4-pack-quantized'}}",
         "claims.quant-method"},
        {"{'quantization_config':{'quant_method':'gptq','bits':4}}", "claims.quant-method"},
        {"{'quantization_config':{'quant_method':'modelopt','quant_algo':'NVFP4'}}", "claims.activations"},
        {"{'quantization_config':{'quant_method':'modelopt',"
         "'exclude_modules':['model.layers.0.mlp.down_proj']}}", "claims.exclude"},
        {"{'quantization_config':{'quant_method':'modelopt',"
         "'exclude_modules':['model.layers.*.self_attn*']}}", "claims.exclude"},
        {"{'quantization_config':{'quant_method':'modelopt','ignore':['re:model\\\\.layers\\\\.9\\\\.mlp']}}",
         "claims.exclude"},
        {"{'quantization_config':{'quant_method':'modelopt','ignore':['re:layers\\\\.9']}}",
         ""}, /* re: is anchored */
        {"{'quantization_config':{'quant_method':'modelopt','quant_algo':'MIXED_PRECISION',"
         "'quantized_layers':{'model.layers.0.mlp.down_proj':{'quant_algo':'W4A16_NVFP4'}}}}", ""},
        {"{'quantization_config':{'quant_method':'modelopt','quant_algo':'MIXED_PRECISION',"
         "'quantized_layers':{'lm_head':{'quant_algo':'W4A16_NVFP4'}}}}", "claims.quant-algo"},
        {"{'quantization_config':{'quant_method':'modelopt','config_groups':{'g':{'weights':{'num_bits':8,"
         "'type':'float'}}}}}", "claims.weights"},
        {"{'quantization_config':{'quant_method':'modelopt','config_groups':{'g':{'weights':{'num_bits':4,"
         "'type':'float','group_size':16},'input_activations':{'num_bits':4}}}}}", "claims.activations"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        put_json(cfg, cases[i].json);
        const char *r = load_rule(mo);
        CHECK_MSG(!strcmp(r, cases[i].rule), "config.json case %zu: rule '%s', want '%s'", i, r,
                  cases[i].rule);
    }
    unlink(cfg);
    static const struct { const char *json, *rule; } hq_cases[] = {
        /* the loader's lane reading refuses these two first (its rules: hf.*) */
        {"{'quantization':{'quant_algo':'FP8','kv_cache_quant_algo':null}}", "hf.quant-algo"},
        {"{'quantization':{'quant_algo':'W4A16_NVFP4','group_size':32}}", "hf.group-size"},
        {"{'quantization':{'quant_algo':null}}", "claims.quant-algo"},
        {"{'quantization':{'quant_algo':'W4A16_NVFP4','exclude_modules':['*.mlp.gate_proj']}}",
         "claims.exclude"},
        {"{'quantization':{'quant_algo':'W4A16_NVFP4','kv_cache_quant_algo':'FP8',"
         "'exclude_modules':['*mlp.gate']}}", ""},
    };
    for (size_t i = 0; i < sizeof hq_cases / sizeof hq_cases[0]; i++) {
        put_json(hq, hq_cases[i].json);
        const char *r = load_rule(mo);
        CHECK_MSG(!strcmp(r, hq_cases[i].rule), "hf_quant_config case %zu: rule '%s', want '%s'", i, r,
                  hq_cases[i].rule);
    }
    put_file(hq, hq_orig);
    CHECK(!strcmp(load_rule(mo), ""));
    /* compressed-tensors: format and groups in its vocabulary */
    snprintf(cfg, sizeof cfg, "%s/config.json", ct);
    static const struct { const char *json, *rule; } ct_cases[] = {
        {"{'quantization_config':{'quant_method':'compressed-tensors','format':'nvfp4-pack-quantized',"
         "'config_groups':{'group_0':{'weights':{'num_bits':4,'type':'float','group_size':16},"
         "'input_activations':null,'format':'nvfp4-pack-quantized'}},'ignore':['lm_head']}}", ""},
        {"{'quantization_config':{'quant_method':'compressed-tensors','format':'float-quantized'}}",
         "hf.quant-algo"},
        {"{'quantization_config':{'quant_method':'compressed-tensors','config_groups':{'g':{'format':"
         "'int-quantized'}}}}", "claims.format"},
        {"{'quantization_config':{'quant_method':'compressed-tensors','config_groups':{'group_0':{'weights':"
         "{'num_bits':4,'type':'int'}}}}}", "claims.weights"},
        {"{'quantization_config':{'quant_method':'modelopt'}}", "claims.quant-method"},
        {"{'quantization_config':{'quant_method':'compressed-tensors','ignore':['re:.*o_proj']}}",
         "claims.exclude"},
    };
    for (size_t i = 0; i < sizeof ct_cases / sizeof ct_cases[0]; i++) {
        put_json(cfg, ct_cases[i].json);
        const char *r = load_rule(ct);
        CHECK_MSG(!strcmp(r, ct_cases[i].rule), "compressed-tensors case %zu: rule '%s', want '%s'", i, r,
                  ct_cases[i].rule);
    }
    /* an unquantized checkpoint that claims NVFP4 */
    const char *plain = P("plain");
    CHECK(mkdir(plain, 0777) == 0);
    char p2[900];
    snprintf(p2, sizeof p2, "cp " GOLDEN "/input.safetensors %s/model.safetensors", plain);
    CHECK(system(p2) == 0);
    snprintf(p2, sizeof p2, "%s/config.json", plain);
    put_file(p2, "{\"quantization_config\":{\"quant_method\":\"modelopt\",\"quant_algo\":\"W4A16_NVFP4\"}}");
    CHECK(!strcmp(load_rule(plain), "claims.quant-method"));
    put_file(p2, "{\"architectures\":[\"LlamaForCausalLM\"]}");
    CHECK(!strcmp(load_rule(plain), ""));
}

/* ---- 8 ---- */

static long find(const uint8_t *p, long n, const char *s) {
    size_t k = strlen(s);
    for (long i = 0; i + (long)k <= n; i++)
        if (!memcmp(p + i, s, k)) return i;
    return -1;
}

static void patched_copy(const char *from, const char *to, const char *what, const char *with) {
    FILE *f = fopen(from, "rb");
    static uint8_t buf[1 << 20];
    long n = f ? (long)fread(buf, 1, sizeof buf, f) : 0;
    if (f) fclose(f);
    long at = find(buf, n, what);
    CHECK_MSG(at >= 0, "'%s' not in %s", what, from);
    if (at >= 0) memcpy(buf + at, with, strlen(with));
    f = fopen(to, "wb");
    CHECK(f && fwrite(buf, 1, (size_t)n, f) == (size_t)n);
    if (f) fclose(f);
}

static void test_gguf_carried(void) {
    char cfg[900];
    snprintf(cfg, sizeof cfg, "%s/config.json", P("mo"));
    put_json(cfg, "{'architectures':['LlamaForCausalLM'],"
                  "'quantization_config':{'quant_method':'modelopt','quant_algo':'W4A16_NVFP4'}}");
    fp4_model *m = NULL;
    fp4_error e;
    CHECK_OK(fp4_model_open(P("mo"), NULL, &m, &e));
    fp4_write_opts o = {.layout = FP4_LAYOUT_GGUF};
    const char *g = P("carried.gguf"), *bad = P("bad.gguf");
    CHECK_OK(fp4_model_write(m, g, &o, &e));
    fp4_model_close(m);
    CHECK(!strcmp(load_rule(g), ""));
    patched_copy(g, bad, "{\"architectures\"",
                 "x\"architectures\""); /* fp4lane.hf.config is no longer JSON */
    CHECK(!strcmp(load_rule(bad), "claims.json"));
    /* it is what convert would trip on: now validate says so first */
    CHECK_OK(fp4_model_open(g, NULL, &m, &e));
    fp4_model_close(m);
    patched_copy(g, bad, "\"W4A16_NVFP4\"", "\"INT4_AWQ_XX\""); /* carried claim contradicts the tensors */
    CHECK(!strcmp(load_rule(bad), "claims.quant-algo"));
    patched_copy(g, bad, "2.11.0+cu130", "2.11.0+cu\xff\xfe" "0"); /* fp4lane.st.torch: not UTF-8 */
    CHECK(!strcmp(load_rule(bad), "claims.st-metadata"));
    unlink(cfg);
}

/* ---- 9 ---- */

static void test_config_links(void) {
    char cfg[900], loop[900];
    snprintf(cfg, sizeof cfg, "%s/config.json", P("mo"));
    snprintf(loop, sizeof loop, "%s/loop.json", P("mo"));
    CHECK(symlink("nowhere.json", cfg) == 0);
    CHECK(!strcmp(load_rule(P("mo")), "hfdir.config"));
    unlink(cfg);
    CHECK(symlink("loop.json", cfg) == 0 && symlink("config.json", loop) == 0);
    CHECK(!strcmp(load_rule(P("mo")), "hfdir.config"));
    unlink(cfg);
    unlink(loop);
    char q[900];
    snprintf(q, sizeof q, "%s/hf_quant_config.json", P("mo"));
    char moved[900];
    snprintf(moved, sizeof moved, "%s/hq.json", P("mo"));
    CHECK(rename(q, moved) == 0 && symlink("absent.json", q) == 0);
    CHECK(!strcmp(load_rule(P("mo")), "hfdir.quant_config"));
    CHECK(unlink(q) == 0 && symlink("hq.json", q) == 0); /* a link that resolves is fine */
    CHECK(!strcmp(load_rule(P("mo")), ""));
}

int main(void) {
    snprintf(tmp, sizeof tmp, "%s/fp4lane-claims-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) return perror("mkdtemp"), 1;
    test_tiny_tensor();
    test_hf_claims();
    test_gguf_carried();
    test_config_links();
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp);
    return check_report();
}
