/* test_fp8.c — FP8 weights (issue 13 item 3): ModelOpt FP8 twins of tests/data/hf/llama (written
 * here by tests/fp8_twin.c: per-tensor "FP8", per-channel "FP8_PER_CHANNEL_PER_TOKEN", and a
 * MIXED_PRECISION twin with NVFP4 and FP8 layers) load with their lane; every broken variant is
 * refused by its rule (one check per rejection, the tensor named); the claims are held against the
 * tensors both ways; the CPU routes are bit-invariant (threads, columns) and the native one within
 * its tolerance of the dequantized reference; CUDA, convert and quantize refuse FP8 before doing
 * anything; the CLI's inspect / validate / run serve the twin. The logits against the exact
 * oracle: tests/test_runtime_step.c. */
#define FP4LANE_ORACLE_API
#include "check.h"
#include "cli_util.h"
#include "fp4lane_runtime.h"
#include "fp8_twin.h"
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PLAIN "tests/data/hf/llama"
#define NV "tests/data/hf/llama/nvfp4"
#define Q0 "model.layers.0.self_attn.q_proj.weight"
#define D1 "model.layers.1.mlp.down_proj.weight"

static char tmp[512];

static void put(const char *dir, const char *name, const char *text) {
    char p[900];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    if (!text) {
        unlink(p);
        return;
    }
    FILE *f = fopen(p, "w");
    CHECK(f != NULL);
    if (f) fputs(text, f), fclose(f);
}

/* opens dir and expects refusal by rule (and tensor, when given); returns the message */
static const char *expect(const char *what, const char *dir, const char *rule, const char *tensor) {
    static fp4_error e;
    fp4_model *m = NULL;
    fp4_status st = fp4_model_open(dir, NULL, &m, &e);
    CHECK_MSG(st != FP4_OK && !strcmp(e.rule, rule), "%s: status %d rule '%s' (%s), want '%s'", what, (int)st,
              st ? e.rule : "", st ? e.msg : "", rule);
    if (tensor)
        CHECK_MSG(st && !strcmp(e.tensor, tensor), "%s: tensor '%s', want '%s'", what, e.tensor, tensor);
    fp4_model_close(m);
    return st ? e.msg : "";
}

static fp4_model *open_ok(const char *what, const char *dir) {
    fp4_model *m = NULL;
    fp4_error e;
    fp4_status st = fp4_model_open(dir, NULL, &m, &e);
    CHECK_MSG(st == FP4_OK, "%s: %s %s (%s)", what, e.rule, e.msg, e.tensor);
    return st ? NULL : m;
}

static int pick_layer1(const char *module, void *ctx) {
    (void)ctx;
    return strstr(module, "layers.1.") != NULL;
}
static const char *mixed_algo(const char *module, void *ctx) {
    const char **over = ctx; /* {module, algo} override, or {NULL} */
    if (over[0] && !strcmp(module, over[0])) return over[1];
    return pick_layer1(module, NULL) ? "FP8" : "W4A16_NVFP4";
}

/* the loaded FP8 twin: lane, types, scales, routes, dequantization */
static void test_accept(const char *f8, const char *f8c, const char *mx) {
    fp4_model *m = open_ok("fp8 twin", f8);
    if (m) {
        CHECK_EQ_INT(fp4_model_weight_precision(m), FP4_WP_FP8);
        CHECK(!strcmp(fp4_weight_precision_name(FP4_WP_FP8), "fp8"));
        CHECK_EQ_INT(fp4_model_act_precision(m), FP4_AP_A16);
        const fp4_tensor *t = fp4_model_find(m, Q0);
        CHECK(t && t->type == FP4_TYPE_F8_E4M3FN && t->n_dims == 2 && t->fp8.scale > 0.0f &&
              !t->fp8.row_scale && t->fp8.input_scale == 0.0125f && t->fp8.n_out == 256 &&
              t->fp8.n_in == 256);
        CHECK(!fp4_model_find(m, "model.layers.0.self_attn.q_proj.weight_scale"));
        CHECK(fp4_model_find(m, "lm_head.weight")->type == FP4_TYPE_BF16); /* excluded, as published */
        if (t) {
            CHECK(!strcmp(fp4_cpu_route_name(t, FP4_MODE_EXACT), "cpu.fp8.dense.pinned"));
            CHECK(!strcmp(fp4_cpu_route_name(t, FP4_MODE_NATIVE), "cpu.fp8.dense"));
            float row[256];
            CHECK_OK(fp4_tensor_dequant_rows(t, 7, 8, row));
            int same = 1;
            for (int k = 0; k < 256; k++)
                same &= row[k] == fp4_e4m3fn_decode(t->data[7 * 256 + k]) * t->fp8.scale;
            CHECK(same);
        }
        fp4_model_close(m);
    }
    m = open_ok("fp8 per-channel twin", f8c);
    if (m) {
        const fp4_tensor *t = fp4_model_find(m, D1);
        CHECK(t && t->type == FP4_TYPE_F8_E4M3FN && t->fp8.row_scale && t->fp8.scale == 0.0f &&
              t->fp8.row_scale[0] > 0.0f && t->fp8.row_scale[0] != t->fp8.row_scale[1]);
        fp4_model_close(m);
    }
    m = open_ok("mixed twin", mx);
    if (m) {
        CHECK_EQ_INT(fp4_model_weight_precision(m), FP4_WP_NVFP4);
        CHECK_EQ_INT(fp4_model_layout(m), FP4_LAYOUT_MODELOPT);
        CHECK(fp4_model_find(m, Q0)->type == FP4_TYPE_NVFP4_E2M1);
        CHECK(fp4_model_find(m, D1)->type == FP4_TYPE_F8_E4M3FN);
        fp4_model_close(m);
    }
}

/* fp4_cpu_project on an FP8 weight: exact mode the same bits for 1/2/3 threads and any column
 * count, and y = pinned dot × scale as the oracle computes it (warp order written out here);
 * native within 1e-5 of the f64 dot of the dequantized row */
static void test_project(const char *f8c) {
    fp4_model *m = open_ok("fp8 per-channel twin", f8c);
    if (!m) return;
    const fp4_tensor *t = fp4_model_find(m, D1); /* [256 out, 512 in] */
    const int64_t n_in = t->ne[0], n_out = t->ne[1], nc = 5;
    float *x = malloc(sizeof(float) * (size_t)(n_in * nc)),
          *y1 = malloc(sizeof(float) * (size_t)(n_out * nc)),
          *y2 = malloc(sizeof(float) * (size_t)(n_out * nc)), *row = malloc(sizeof(float) * (size_t)n_in);
    test_rng rg = {7};
    for (int64_t i = 0; i < n_in * nc; i++)
        x[i] = rng_normal(&rg);
    CHECK_OK(fp4_cpu_project(t, FP4_MODE_EXACT, x, nc, y1, 1));
    for (int th = 2; th <= 3; th++) {
        CHECK_OK(fp4_cpu_project(t, FP4_MODE_EXACT, x, nc, y2, th));
        CHECK(!memcmp(y1, y2, sizeof(float) * (size_t)(n_out * nc)));
    }
    CHECK_OK(fp4_cpu_project(t, FP4_MODE_EXACT, x + 3 * n_in, 1, y2, 2)); /* column 3 alone */
    CHECK(!memcmp(y1 + 3 * n_out, y2, sizeof(float) * (size_t)n_out));
    int64_t oracle_bad = 0;
    double worst = 0;
    CHECK_OK(fp4_cpu_project(t, FP4_MODE_NATIVE, x, nc, y2, 2));
    for (int64_t r = 0; r < n_out; r++) {
        float p[32] = {0};
        for (int64_t k = 0; k < n_in; k++)
            p[k % 32] += fp4_e4m3fn_decode(t->data[r * n_in + k]) * x[k];
        for (int off = 16; off >= 1; off >>= 1)
            for (int l = 0; l < off; l++)
                p[l] += p[l + off];
        oracle_bad += f32_bits(p[0] * t->fp8.row_scale[r]) != f32_bits(y1[r]);
        fp4_tensor_dequant_rows(t, r, r + 1, row);
        double ref = 0, mag = 0;
        for (int64_t k = 0; k < n_in; k++)
            ref += (double)row[k] * x[k], mag += fabs((double)row[k] * x[k]);
        worst = fmax(worst, fabs(y2[r] - ref) / (mag > 0 ? mag : 1));
    }
    CHECK_MSG(oracle_bad == 0, "%lld rows differ from the pinned dot x scale", (long long)oracle_bad);
    printf("fp8 native route: max |y - f64 ref| / sum|w x| = %.3g (tolerance 1e-5)\n", worst);
    CHECK(worst <= 1e-5);
    free(x), free(y1), free(y2), free(row);
    fp4_model_close(m);
}

/* one twin, poked in place: every value rejection, then the original bytes back */
static void test_values(const char *f8, const char *f8c) {
    static const struct {
        const char *what, *tensor, *rule;
        uint64_t at;
        uint32_t bits; /* the F32 scale's new bits, or the weight byte */
        int is_byte;
    } cases[] = {
        {"weight_scale 0", "model.layers.0.self_attn.q_proj.weight_scale", "fp8.scale", 0, 0x00000000u, 0},
        {"weight_scale -1", "model.layers.0.self_attn.q_proj.weight_scale", "fp8.scale", 0, 0xBF800000u, 0},
        {"weight_scale NaN", "model.layers.0.self_attn.q_proj.weight_scale", "fp8.scale", 0, 0x7FC00000u, 0},
        {"weight_scale inf", "model.layers.0.self_attn.q_proj.weight_scale", "fp8.scale", 0, 0x7F800000u, 0},
        {"weight_scale subnormal", "model.layers.0.self_attn.q_proj.weight_scale", "fp8.scale", 0, 1u, 0},
        {"input_scale 0", "model.layers.0.mlp.up_proj.input_scale", "fp8.input-scale", 0, 0u, 0},
        {"input_scale NaN", "model.layers.0.mlp.up_proj.input_scale", "fp8.input-scale", 0, 0x7FC00000u, 0},
        {"weight byte 0x7F", Q0, "fp8.nan", 3 * 256 + 5, 0x7F, 1},
        {"weight byte 0xFF", Q0, "fp8.nan", 3 * 256 + 5, 0xFF, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const size_t n = cases[i].is_byte ? 1 : 4;
        uint8_t old[4], neu[4] = {(uint8_t)cases[i].bits, (uint8_t)(cases[i].bits >> 8),
                                  (uint8_t)(cases[i].bits >> 16), (uint8_t)(cases[i].bits >> 24)};
        fp4_model *m = open_ok("fp8 twin", f8);
        const fp4_tensor *t = NULL;
        const char *stem = cases[i].tensor; /* the original bytes, from the weight or the raw file */
        if (m && (t = fp4_model_find(m, stem)) && cases[i].is_byte)
            memcpy(old, t->data + cases[i].at, 1);
        else if (m) { /* scales are folded: read them back through the view */
            t = fp4_model_find(m, strstr(stem, "q_proj") ? Q0 : "model.layers.0.mlp.up_proj.weight");
            float v = strstr(stem, "input") ? t->fp8.input_scale : t->fp8.scale;
            memcpy(old, &v, 4);
        }
        fp4_model_close(m);
        CHECK(fp8tw_poke(f8, stem, cases[i].at, neu, n) == 0);
        const char *msg = expect(cases[i].what, f8, cases[i].rule, cases[i].is_byte ? Q0 : stem);
        if (cases[i].is_byte) CHECK_MSG(cu_has(msg, "row 3, column 5"), "%s: %s", cases[i].what, msg);
        CHECK(fp8tw_poke(f8, stem, cases[i].at, old, n) == 0);
    }
    fp4_model_close(open_ok("fp8 twin restored", f8));
    /* a per-channel scale (row 7 of 256) */
    const char *sc = "model.layers.1.mlp.down_proj.weight_scale";
    float bad = -2.0f, good;
    fp4_model *m = open_ok("fp8 per-channel twin", f8c);
    good = m ? fp4_model_find(m, D1)->fp8.row_scale[7] : 1.0f;
    fp4_model_close(m);
    CHECK(fp8tw_poke(f8c, sc, 7 * 4, &bad, 4) == 0);
    CHECK(cu_has(expect("per-channel scale -2", f8c, "fp8.scale", sc), "weight_scale[7]"));
    CHECK(fp8tw_poke(f8c, sc, 7 * 4, &good, 4) == 0);
}

/* a one-module safetensors file (weight, scale, extras) for the structural rejections */
typedef struct ts {
    const char *name;
    fp4_st_dtype dt;
    int rank;
    int64_t shape[3];
    size_t nbytes;
} ts;
static const char *one_file(const char *tag, const ts *t, int n) {
    static char dir[700];
    snprintf(dir, sizeof dir, "%s/%s", tmp, tag);
    mkdir(dir, 0700);
    fp4_hfdir_writer *w = NULL;
    fp4_error e;
    CHECK_OK(fp4_hfdir_writer_create(dir, 0, &w, &e));
    for (int i = 0; i < n; i++)
        CHECK_OK(fp4_hfdir_writer_add_tensor(w, t[i].name, t[i].dt, t[i].rank, t[i].shape, &e));
    static uint8_t buf[4096];
    memset(buf, 0x3F, sizeof buf); /* E4M3 1.875, BF16 0.746, F32 0.747: every value valid */
    for (int i = 0; i < n; i++)
        CHECK_OK(fp4_hfdir_writer_write(w, buf, t[i].nbytes, &e));
    size_t shards;
    CHECK_OK(fp4_hfdir_writer_finish(w, &shards, &e));
    fp4_hfdir_writer_free(w);
    return dir;
}

static void test_structure(void) {
    const ts W = {"m.weight", FP4_ST_F8_E4M3, 2, {4, 32}, 128}, S = {"m.weight_scale", FP4_ST_F32, 0, {0}, 4};
    { /* the good one loads */
        ts t[] = {W, S};
        fp4_model_close(open_ok("one module", one_file("ok", t, 2)));
        ts t2[] = {W, {"m.weight_scale", FP4_ST_BF16, 2, {4, 1}, 8}}; /* per-channel BF16 [out, 1] */
        fp4_model_close(open_ok("one module, [out, 1] BF16 scales", one_file("ok2", t2, 2)));
    }
    {
        ts t[] = {W};
        expect("no weight_scale", one_file("noscale", t, 1), "fp8.scale-missing", "m.weight");
    }
    {
        ts t[] = {W, {"m.input_scale", FP4_ST_F32, 0, {0}, 4}};
        expect("input_scale but no weight_scale", one_file("noscale2", t, 2), "fp8.scale-missing", NULL);
    }
    {
        ts t[] = {W, {"m.weight_scale", FP4_ST_I32, 0, {0}, 4}};
        expect("weight_scale I32", one_file("sdtype", t, 2), "fp8.scale-dtype", "m.weight_scale");
    }
    {
        ts t[] = {{"m.weight", FP4_ST_F8_E4M3, 3, {2, 2, 32}, 128}, S};
        expect("3-D FP8 weight", one_file("rank3", t, 2), "fp8.shape", "m.weight");
    }
    {
        ts t[] = {W, S, {"m.weight_scale_2", FP4_ST_F32, 0, {0}, 4}};
        expect("weight_scale_2 beside FP8", one_file("s2", t, 3), "fp8.companion", "m.weight_scale_2");
    }
    {
        ts t[] = {W, S, {"m.input_scale", FP4_ST_F32, 1, {2}, 8}};
        expect("input_scale [2]", one_file("in2", t, 3), "fp8.input-scale", "m.input_scale");
    }
    {
        ts t[] = {W, S, {"x.bias", FP4_ST_F8_E4M3, 1, {4}, 4}};
        expect("a bare F8 tensor", one_file("bare", t, 3), "fp8.scale-missing", "x.bias");
    }
    {
        ts t[] = {W, {"m.weight_scale", FP4_ST_F32, 1, {3}, 12}};
        expect("3 scales for 4 rows", one_file("s3", t, 2), "hf.fp8", "m.weight_scale");
    }
}

/* what the statements say against what the tensors are, both ways */
static void test_claims(const char *f8, const char *f8c, const char *mx) {
    char hfq[4096];
    static const struct {
        const char *what, *hfq, *rule;
    } fp8_cases[] = {
        {"FP8 twin claimed W4A16_NVFP4", "{\"quantization\": {\"quant_algo\": \"W4A16_NVFP4\"}}",
         "claims.quant-algo"},
        {"FP8 twin claimed per-channel",
         "{\"quantization\": {\"quant_algo\": \"FP8_PER_CHANNEL_PER_TOKEN\"}}", "claims.quant-algo"},
        {"FP8 twin with exclude_modules naming FP8 weights",
         "{\"quantization\": {\"quant_algo\": \"FP8\", \"exclude_modules\": [\"lm_head\", "
         "\"model.layers.*.mlp.*\"]}}",
         "claims.exclude"},
        {"FP8 twin claimed W8A8_SQ_PER_CHANNEL",
         "{\"quantization\": {\"quant_algo\": \"W8A8_SQ_PER_CHANNEL\"}}", "claims.quant-algo"},
    };
    for (size_t i = 0; i < sizeof fp8_cases / sizeof fp8_cases[0]; i++) {
        put(f8, "hf_quant_config.json", fp8_cases[i].hfq);
        expect(fp8_cases[i].what, f8, fp8_cases[i].rule, NULL);
    }
    put(f8, "hf_quant_config.json", FP8TW_HFQ_FP8);
    put(f8c, "hf_quant_config.json", "{\"quantization\": {\"quant_algo\": \"FP8\"}}");
    expect("per-channel twin claimed FP8 (per-tensor)", f8c, "claims.quant-algo",
           "model.layers.0.mlp.down_proj.weight"); /* the first FP8 weight by name */
    put(f8c, "hf_quant_config.json", NULL);
    /* newer exports: config.json quantization_config (ModelOpt), and compressed-tensors FP8 */
    char p[800], *cfg0;
    snprintf(p, sizeof p, "%s/config.json", f8);
    cfg0 = cu_slurp(p, NULL);
    static const struct {
        const char *what, *qc, *rule; /* rule NULL: accepted */
    } qc_cases[] = {
        {"config.json quant_method modelopt FP8",
         "{\"quant_method\": \"modelopt\", \"quant_algo\": \"FP8\", \"kv_cache_quant_algo\": \"FP8\", "
         "\"exclude_modules\": [\"lm_head\"]}",
         NULL},
        /* what ModelOpt's convert_hf_quant_config_format (Model-Optimizer a2fbac7,
         * modelopt/torch/export/convert_hf_config.py) puts in config.json for quant_algo FP8 */
        {"config.json as ModelOpt's converter writes FP8",
         "{\"config_groups\": {\"group_0\": {\"input_activations\": {\"dynamic\": false, \"num_bits\": 8, "
         "\"type\": \"float\"}, \"weights\": {\"dynamic\": false, \"num_bits\": 8, \"type\": \"float\"}, "
         "\"targets\": [\"Linear\"]}}, \"ignore\": [\"lm_head\"], \"quant_algo\": \"FP8\", "
         "\"kv_cache_scheme\": "
         "{\"dynamic\": false, \"num_bits\": 8, \"type\": \"float\"}, \"producer\": {\"name\": \"modelopt\", "
         "\"version\": \"0.37.0\"}, \"quant_method\": \"modelopt\"}",
         NULL},
        {"compressed-tensors float-quantized, strategy tensor",
         "{\"quant_method\": \"compressed-tensors\", \"format\": \"float-quantized\", \"config_groups\": "
         "{\"group_0\": {\"targets\": [\"Linear\"], \"weights\": {\"num_bits\": 8, \"type\": \"float\", "
         "\"strategy\": \"tensor\", \"dynamic\": false, \"symmetric\": true}, \"input_activations\": "
         "{\"num_bits\": 8, \"type\": \"float\", \"strategy\": \"tensor\", \"dynamic\": false}}}, "
         "\"ignore\": [\"lm_head\"], \"quantization_status\": \"compressed\"}",
         NULL},
        {"compressed-tensors FP8 strategy channel on per-tensor weights",
         "{\"quant_method\": \"compressed-tensors\", \"format\": \"float-quantized\", \"config_groups\": "
         "{\"group_0\": {\"targets\": [\"Linear\"], \"weights\": {\"num_bits\": 8, \"type\": \"float\", "
         "\"strategy\": \"channel\"}}}, \"ignore\": [\"lm_head\"]}",
         "claims.weights"},
        {"compressed-tensors FP8 strategy block",
         "{\"quant_method\": \"compressed-tensors\", \"format\": \"float-quantized\", \"config_groups\": "
         "{\"group_0\": {\"targets\": [\"Linear\"], \"weights\": {\"num_bits\": 8, \"type\": \"float\", "
         "\"strategy\": \"block\", \"block_structure\": [128, 128]}}}}",
         "claims.weights"},
        {"compressed-tensors FP8 format naive-quantized",
         "{\"quant_method\": \"compressed-tensors\", \"format\": \"naive-quantized\", \"config_groups\": "
         "{\"group_0\": {\"targets\": [\"Linear\"], \"weights\": {\"num_bits\": 8, \"type\": \"float\", "
         "\"strategy\": \"tensor\"}}}}",
         "claims.format"},
    };
    put(f8, "hf_quant_config.json", NULL);
    for (size_t i = 0; i < sizeof qc_cases / sizeof qc_cases[0]; i++) {
        json_t *cfg = json_loads(cfg0, 0, NULL);
        json_object_set_new(cfg, "quantization_config", json_loads(qc_cases[i].qc, 0, NULL));
        CHECK(json_dump_file(cfg, p, JSON_INDENT(2)) == 0);
        json_decref(cfg);
        if (qc_cases[i].rule)
            expect(qc_cases[i].what, f8, qc_cases[i].rule, NULL);
        else
            fp4_model_close(open_ok(qc_cases[i].what, f8));
    }
    put(f8, "config.json", cfg0);
    put(f8, "hf_quant_config.json", FP8TW_HFQ_FP8);
    free(cfg0);
    /* MIXED_PRECISION: each layer's algorithm against its weight, and every FP8 weight listed */
    static const struct {
        const char *what, *module, *algo, *rule, *tensor;
    } mx_cases[] = {
        {"an FP8 layer listed as W4A16_NVFP4", "model.layers.1.mlp.down_proj", "W4A16_NVFP4",
         "claims.quant-algo", "model.layers.1.mlp.down_proj"},
        {"an NVFP4 layer listed as FP8", "model.layers.0.mlp.up_proj", "FP8", "claims.quant-algo",
         "model.layers.0.mlp.up_proj"},
        {"an FP8 layer listed as FP8_PER_CHANNEL_PER_TOKEN", "model.layers.1.self_attn.q_proj",
         "FP8_PER_CHANNEL_PER_TOKEN", "claims.quant-algo", "model.layers.1.self_attn.q_proj"},
        {"an FP8 layer not listed", "model.layers.1.mlp.up_proj", NULL, "claims.quant-algo",
         "model.layers.1.mlp.up_proj.weight"},
        {"a layer listed as W8A8_SQ_PER_CHANNEL", "model.layers.1.mlp.up_proj", "W8A8_SQ_PER_CHANNEL",
         "claims.quant-algo", "model.layers.1.mlp.up_proj"},
    };
    for (size_t i = 0; i < sizeof mx_cases / sizeof mx_cases[0]; i++) {
        const char *over[2] = {mx_cases[i].module, mx_cases[i].algo};
        CHECK(fp8tw_mixed_hfq(hfq, sizeof hfq, 2, mixed_algo, (void *)over) == 0);
        put(mx, "hf_quant_config.json", hfq);
        expect(mx_cases[i].what, mx, mx_cases[i].rule, mx_cases[i].tensor);
    }
    put(mx, "hf_quant_config.json",
        "{\"quantization\": {\"quant_algo\": \"W4A16_NVFP4\", \"group_size\": 16}}");
    expect("mixed tensors claimed W4A16_NVFP4", mx, "claims.quant-algo",
           "model.layers.1.mlp.down_proj.weight");
    put(mx, "hf_quant_config.json", "{\"quantization\": {\"quant_algo\": \"FP8\"}}");
    expect("mixed tensors claimed FP8", mx, "hf.quant-algo", NULL);
    const char *none[2] = {NULL, NULL};
    CHECK(fp8tw_mixed_hfq(hfq, sizeof hfq, 2, mixed_algo, (void *)none) == 0);
    put(mx, "hf_quant_config.json", hfq);
    fp4_model_close(open_ok("mixed twin restored", mx));
    /* the same statement as ModelOpt's converter puts it in config.json: one config group per
     * per-layer algorithm (targets: the layers), quantized_layers kept, quant_method modelopt */
    json_t *hq = json_loads(hfq, 0, NULL),
           *ql = json_object_get(json_object_get(hq, "quantization"), "quantized_layers");
    json_t *g0 = json_pack("{s:{s:b,s:i,s:s,s:i},s:[]}", "weights", "dynamic", 0, "num_bits", 4, "type",
                           "float", "group_size", 16, "targets");
    json_t *g1 =
        json_pack("{s:{s:b,s:i,s:s},s:{s:b,s:i,s:s},s:[]}", "input_activations", "dynamic", 0, "num_bits", 8,
                  "type", "float", "weights", "dynamic", 0, "num_bits", 8, "type", "float", "targets");
    const char *lname;
    json_t *lv;
    json_object_foreach(ql, lname, lv) {
        const int is8 = !strcmp(json_string_value(json_object_get(lv, "quant_algo")), "FP8");
        json_array_append_new(json_object_get(is8 ? g1 : g0, "targets"), json_string(lname));
    }
    json_t *qc = json_pack("{s:{s:o,s:o},s:O,s:[],s:s,s:{s:b,s:i,s:s},s:{s:s,s:s},s:s}", "config_groups",
                           "group_0", g0, "group_1", g1, "quantized_layers", ql, "ignore", "quant_algo",
                           "MIXED_PRECISION", "kv_cache_scheme", "dynamic", 0, "num_bits", 8, "type", "float",
                           "producer", "name", "modelopt", "version", "0.37.0", "quant_method", "modelopt");
    snprintf(p, sizeof p, "%s/config.json", mx);
    cfg0 = cu_slurp(p, NULL);
    json_t *cfg = json_loads(cfg0, 0, NULL);
    json_object_set_new(cfg, "quantization_config", qc);
    CHECK(json_dump_file(cfg, p, JSON_INDENT(2)) == 0);
    json_decref(cfg), json_decref(hq);
    put(mx, "hf_quant_config.json", NULL);
    fp4_model_close(open_ok("mixed twin, config.json as ModelOpt's converter writes it", mx));
    put(mx, "config.json", cfg0);
    put(mx, "hf_quant_config.json", hfq);
    free(cfg0);
}

/* refusals before any work: CUDA (the route table, before the CUDA library is even looked for),
 * convert, quantize; the KV identity covers the scales */
static void test_refusals(const char *f8, const char *mx) {
    const char *dirs[2] = {f8, mx};
    for (int i = 0; i < 2; i++) {
        fp4_model *m = open_ok("twin", dirs[i]);
        if (!m) continue;
        fp4_rt *rt = NULL;
        fp4_error e;
        for (int mode = 0; mode < 2; mode++) {
            fp4_rt_opts o = {.mode = (fp4_mode)mode,
                             .device = FP4_DEVICE_CUDA,
                             .cuda_lib = "/nonexistent/libfp4lane_cuda.so"};
            /* refused by the route table while FP8 has no qualified CUDA route (docs/ROUTES.md);
             * once it has one, the engine goes on to look for the CUDA library */
            fp4_route_key k8 = {FP4_LANE_FP8, FP4_AP_A16, (fp4_mode)mode, FP4_DEVICE_CUDA, 0};
            const fp4_status st = fp4_rt_create(m, &o, &rt, &e);
            if (fp4_route_check(&k8, NULL, NULL, 0) != FP4_OK) {
                CHECK(st == FP4_ERR_REFUSED_ROUTE && !strcmp(e.rule, "route.refused") &&
                      cu_has(e.msg, "--device cpu") && cu_has(e.msg, "FP8") && rt == NULL);
                if (i == 1) /* the first FP8 weight by name */
                    CHECK(!strcmp(e.tensor, "model.layers.1.mlp.down_proj.weight"));
            } else {
                CHECK(st == FP4_ERR_NO_DEVICE && !strcmp(e.rule, "rt.cuda-missing") && rt == NULL);
            }
        }
        char out[700];
        snprintf(out, sizeof out, "%s/converted-%d", tmp, i);
        fp4_write_opts wo = {.layout = FP4_LAYOUT_CT};
        CHECK(fp4_model_write(m, out, &wo, &e) == FP4_ERR_UNSUPPORTED && !strcmp(e.rule, "write.fp8"));
        struct stat sb;
        CHECK(stat(out, &sb) != 0);
        fp4_quantize_opts qo = {.layout = FP4_LAYOUT_MODELOPT};
        CHECK(fp4_quantize_checkpoint(dirs[i], out, &qo, &e) != FP4_OK &&
              !strcmp(e.rule, "quantize.already"));
        fp4_model_close(m);
    }
    fp4_route_key k = {FP4_LANE_FP8, FP4_AP_A16, FP4_MODE_EXACT, FP4_DEVICE_CPU, 0};
    const char *name = NULL;
    CHECK(fp4_route_check(&k, &name, NULL, 0) == FP4_OK && !strcmp(name, "cpu.fp8.dense.pinned"));
    k.mode = FP4_MODE_NATIVE;
    CHECK(fp4_route_check(&k, &name, NULL, 0) == FP4_OK && !strcmp(name, "cpu.fp8.dense"));
    /* the KV identity changes with a weight scale (the bytes of the weight alone are not the weight) */
    char id[2][65];
    const char *sc = "model.layers.0.self_attn.q_proj.weight_scale";
    float old = 0, twice;
    for (int pass = 0; pass < 2; pass++) {
        fp4_model *m = open_ok("fp8 twin", f8);
        fp4_rt *rt = NULL;
        fp4_error e;
        fp4_rt_opts o = {.mode = FP4_MODE_EXACT, .n_ctx = 16};
        CHECK_OK(fp4_rt_create(m, &o, &rt, &e));
        snprintf(id[pass], sizeof id[pass], "%s", rt ? fp4_rt_identity(rt) : "");
        if (pass == 0 && m) old = fp4_model_find(m, Q0)->fp8.scale;
        fp4_rt_free(rt);
        fp4_model_close(m);
        twice = old * 2.0f;
        if (pass == 0) CHECK(fp8tw_poke(f8, sc, 0, &twice, 4) == 0);
    }
    CHECK(id[0][0] && strcmp(id[0], id[1]));
    CHECK(fp8tw_poke(f8, sc, 0, &old, 4) == 0);
}

/* the CLI: inspect and validate name the lane, run generates from the FP8 twin */
static void test_cli(const char *f8) {
    char bin[600], args[900];
    snprintf(bin, sizeof bin, "%s/fp4lane", getenv("FP4_BUILD") ? getenv("FP4_BUILD") : "build");
    char *out = NULL, *err = NULL;
    snprintf(args, sizeof args, "validate %s", f8);
    CHECK(cu_run(bin, tmp, NULL, args, &out, &err) == 0 && cu_has(out, "weights fp8") &&
          cu_has(out, "14 FP8"));
    snprintf(args, sizeof args, "inspect %s", f8);
    CHECK(cu_run(bin, tmp, NULL, args, &out, &err) == 0 && cu_has(out, "fp8") && cu_has(out, "f8_e4m3fn"));
    snprintf(args, sizeof args, "run %s --prompt-ids 1,17,300 -n 4 --mode exact --threads 2", f8);
    int rc = cu_run(bin, tmp, NULL, args, &out, &err);
    CHECK_MSG(rc == 0, "run: rc %d: %s", rc, err ? err : "");
    snprintf(args, sizeof args, "run %s --prompt-ids 1,17,300 -n 4 --device cuda", f8);
    CHECK(cu_run(bin, tmp, NULL, args, &out, &err) != 0 &&
          cu_has(err, "--device cpu")); /* refused or no GPU */
    free(out), free(err);
}

int main(void) {
    snprintf(tmp, sizeof tmp, "%s/fp4lane-fp8-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) return perror("mkdtemp"), 1;
    char f8[600], f8c[600], mx[600], hfq[4096];
    snprintf(f8, sizeof f8, "%s/fp8", tmp);
    snprintf(f8c, sizeof f8c, "%s/fp8-channel", tmp);
    snprintf(mx, sizeof mx, "%s/mixed", tmp);
    fp8tw_opts o = {.hf_quant_config = FP8TW_HFQ_FP8};
    CHECK(fp8tw_write(PLAIN, NULL, f8, &o) == 0);
    o = (fp8tw_opts){.per_channel = 1,
                     .no_input_scale = 1,
                     .hf_quant_config = "{\"quantization\": {\"quant_algo\": \"FP8_PER_CHANNEL_PER_TOKEN\", "
                                        "\"exclude_modules\": [\"lm_head\"]}}"};
    CHECK(fp8tw_write(PLAIN, NULL, f8c, &o) == 0);
    const char *none[2] = {NULL, NULL};
    CHECK(fp8tw_mixed_hfq(hfq, sizeof hfq, 2, mixed_algo, (void *)none) == 0);
    o = (fp8tw_opts){.pick = pick_layer1, .hf_quant_config = hfq};
    CHECK(fp8tw_write(PLAIN, NV, mx, &o) == 0);
    test_accept(f8, f8c, mx);
    test_project(f8c);
    test_values(f8, f8c);
    test_structure();
    test_claims(f8, f8c, mx);
    test_refusals(f8, mx);
    test_cli(f8);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (!check_failed && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp);
    return check_report();
}
