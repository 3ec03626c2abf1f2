/* test_fp8_block.c — DeepSeek's own FP8 checkpoints (issue 31): E4M3 weights with block scales
 * "<m>.weight_scale_inv" [ceil(out / br), ceil(in / bc)] and config.json's quantization_config
 * {quant_method fp8, fmt e4m3, weight_block_size [br, bc]}, synthesized here from tests/data/hf/llama
 * (tests/fp8_twin.c) in 128x128 blocks and in 96x80 blocks (partial blocks in both dimensions), each
 * beside an F32 twin holding the dequantized weights (e4m3fn(byte) * its block's scale, one f32
 * multiply). They load as the FP8 lane; the engine's logits, exact and native, are bit-identical to
 * the F32 twin's (the definition of fp4_fp8_view's block form), across threads and chunking; every
 * inconsistent file is refused by its rule; CUDA and the split engine refuse block scales by name. */
#include "check.h"
#include "fp4lane_runtime.h"
#include "fp8_twin.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PLAIN "tests/data/hf/llama"
#define K0 "model.layers.0.self_attn.k_proj.weight"
#define D1 "model.layers.1.mlp.down_proj.weight"
#define QC(bs)                                                                                               \
    "{\"quant_method\": \"fp8\", \"fmt\": \"e4m3\", \"activation_scheme\": \"dynamic\", "                    \
    "\"weight_block_size\": " bs "}"

static char tmp[512];

static int write_twin(const char *name, const char *qc, int64_t br, int64_t bc, int f32, int bf16, int plus,
                      char *dir, size_t cap) {
    snprintf(dir, cap, "%s/%s", tmp, name);
    fp8tw_opts o = {.no_input_scale = 1,
                    .quantization_config = qc,
                    .block_rows = br,
                    .block_cols = bc,
                    .f32_twin = f32,
                    .scale_bf16 = bf16,
                    .plus_scale = plus};
    return fp8tw_write(PLAIN, NULL, dir, &o);
}

static void expect(const char *what, const char *dir, const char *rule, const char *tensor) {
    fp4_error e;
    fp4_model *m = NULL;
    fp4_status st = fp4_model_open(dir, NULL, &m, &e);
    CHECK_MSG(st != FP4_OK && !strcmp(e.rule, rule), "%s: status %d rule '%s' (%s), want '%s'", what, (int)st,
              st ? e.rule : "", st ? e.msg : "", rule);
    if (st && tensor) CHECK_MSG(strstr(e.tensor, tensor) != NULL, "%s: tensor '%s'", what, e.tensor);
    if (st) printf("  %-34s %s: %s\n", what, e.rule, e.msg);
    fp4_model_close(m);
}

static void logits(const fp4_model *m, fp4_mode mode, int threads, int chunk, float *out, int64_t *V) {
    static const int32_t ids[] = {1, 17, 300, 5, 88, 411, 2, 250, 63, 129};
    const int n = (int)(sizeof ids / sizeof ids[0]);
    fp4_rt_opts o = {.mode = mode, .n_threads = threads, .n_ctx = 16};
    fp4_rt *rt = NULL;
    fp4_error e;
    CHECK_OK(fp4_rt_create(m, &o, &rt, &e));
    if (!rt) return;
    int32_t s;
    fp4_rt_seq_open(rt, &s);
    *V = fp4_rt_vocab(rt);
    for (int i = 0; i < n; i += chunk) {
        fp4_rt_tok c[16];
        int k = n - i < chunk ? n - i : chunk;
        for (int j = 0; j < k; j++)
            c[j] = (fp4_rt_tok){s, ids[i + j], 1};
        CHECK_OK(fp4_rt_step(rt, c, k, out + (int64_t)i * *V, &e));
    }
    fp4_rt_free(rt);
}

/* the block twin against its F32 twin: the tensors' dequantization and the logits, bit for bit */
static void same_as_f32(const char *what, const char *fp8_dir, const char *f32_dir, int64_t br, int64_t bc) {
    fp4_model *m8 = NULL, *m32 = NULL;
    fp4_error e;
    CHECK_OK(fp4_model_open(fp8_dir, NULL, &m8, &e));
    CHECK_OK(fp4_model_open(f32_dir, NULL, &m32, &e));
    if (!m8 || !m32) return fp4_model_close(m8), fp4_model_close(m32);
    CHECK(fp4_model_weight_precision(m8) == FP4_WP_FP8);
    int64_t n8 = 0, bad = 0;
    for (int64_t i = 0; i < fp4_model_n_tensors(m8); i++) {
        const fp4_tensor *t = fp4_model_tensor(m8, i);
        if (t->type != FP4_TYPE_F8_E4M3FN) continue;
        n8++;
        const fp4_tensor *u = fp4_model_find(m32, t->name);
        CHECK(t->fp8.block_scale && t->fp8.block_rows == br && t->fp8.block_cols == bc && !t->fp8.row_scale &&
              t->fp8.scale == 0.0f && u && u->type == FP4_TYPE_F32);
        if (!u) continue;
        const int64_t n = t->ne[0] * t->ne[1];
        float *d = malloc(sizeof(float) * (size_t)n);
        CHECK_OK(fp4_tensor_dequant_rows(t, 0, t->ne[1], d));
        bad += memcmp(d, u->data, sizeof(float) * (size_t)n) != 0;
        free(d);
    }
    CHECK_EQ_INT(n8, 14);
    CHECK_MSG(bad == 0, "%s: %lld FP8 tensors dequantize to other bits than the F32 twin", what,
              (long long)bad);
    const int64_t N = 10 * 512;
    float *a = malloc(sizeof(float) * N), *b = malloc(sizeof(float) * N);
    int64_t V = 0;
    for (int mode = 0; mode < 2; mode++) {
        logits(m32, (fp4_mode)mode, 1, 10, b, &V);
        logits(m8, (fp4_mode)mode, 1, 10, a, &V);
        CHECK_EQ_INT(V, 512);
        CHECK_MSG(!memcmp(a, b, sizeof(float) * N), "%s %s: the logits differ from the F32 twin's", what,
                  mode ? "native" : "exact");
        if (mode == FP4_MODE_EXACT) {
            logits(m8, FP4_MODE_EXACT, 3, 3, a, &V);
            CHECK_MSG(!memcmp(a, b, sizeof(float) * N), "%s exact: 3 threads in steps of 3 differ", what);
        }
    }
    printf("%s: %lld block-scaled FP8 weights, exact and native logits = the F32 twin's bit for bit\n", what,
           (long long)n8);
    free(a), free(b);
    /* CUDA and the split engine refuse block scales by name, before anything runs */
    fp4_rt *rt = NULL;
    fp4_rt_opts o = {.device = FP4_DEVICE_CUDA};
    fp4_status st = fp4_rt_create(m8, &o, &rt, &e);
    CHECK_MSG(st && !strcmp(e.rule, "route.fp8-block-cuda"), "cuda: %s %s", e.rule, e.msg);
    fp4_rt_free(rt), rt = NULL;
    o = (fp4_rt_opts){.tp = 2, .mode = FP4_MODE_NATIVE};
    st = fp4_rt_create(m8, &o, &rt, &e);
    CHECK_MSG(st && !strcmp(e.rule, "tp.route") && strstr(e.msg, "block-scaled"), "tp: %s %s", e.rule, e.msg);
    fp4_rt_free(rt);
    fp4_model_close(m8), fp4_model_close(m32);
}

static void refusals(const char *good) {
    char d[600], p[700];
    printf("refusals:\n");
    CHECK(write_twin("nobs", "{\"quant_method\": \"fp8\", \"fmt\": \"e4m3\"}", 128, 128, 0, 0, 0, d,
                     sizeof d) == 0);
    expect("no weight_block_size", d, "fp8.block-size", "weight_scale_inv");
    CHECK(write_twin("bs0", QC("[128, 0]"), 128, 128, 0, 0, 0, d, sizeof d) == 0);
    expect("weight_block_size [128, 0]", d, "fp8.block-size", NULL);
    CHECK(write_twin("fmt",
                     "{\"quant_method\": \"fp8\", \"fmt\": \"e5m2\", \"weight_block_size\": [128, 128]}", 128,
                     128, 0, 0, 0, d, sizeof d) == 0);
    expect("fmt e5m2", d, "fp8.format", NULL);
    CHECK(write_twin("shape", QC("[64, 128]"), 128, 128, 0, 0, 0, d, sizeof d) == 0);
    expect("scales of 128x128 blocks, config 64x128", d, "fp8.block-shape", "weight_scale_inv");
    CHECK(write_twin("bf16", QC("[128, 128]"), 128, 128, 0, 1, 0, d, sizeof d) == 0);
    expect("BF16 weight_scale_inv", d, "fp8.scale-dtype", "weight_scale_inv");
    CHECK(write_twin("plus", QC("[128, 128]"), 128, 128, 0, 0, 1, d, sizeof d) == 0);
    expect("weight_scale beside weight_scale_inv", d, "fp8.companion", NULL);
    CHECK(write_twin("method", "{\"quant_method\": \"modelopt\", \"weight_block_size\": [128, 128]}", 128,
                     128, 0, 0, 0, d, sizeof d) == 0);
    expect("quant_method modelopt", d, "claims.quant-method", NULL);
    CHECK(write_twin("nomethod", "{\"weight_block_size\": [128, 128]}", 128, 128, 0, 0, 0, d, sizeof d) == 0);
    expect("no quant_method", d, "claims.quant-method", NULL);
    /* values poked into a valid twin: a zero, a NaN scale, a NaN weight byte */
    static const float zero = 0.0f, nan_ = NAN;
    static const uint8_t nanb = 0x7F;
    CHECK(write_twin("poke", QC("[128, 128]"), 128, 128, 0, 0, 0, d, sizeof d) == 0);
    CHECK(fp8tw_poke(d, K0 "_scale_inv", 4, &zero, 4) == 0);
    expect("a zero block scale", d, "fp8.scale", K0 "_scale_inv");
    CHECK(fp8tw_poke(d, K0 "_scale_inv", 4, &nan_, 4) == 0);
    expect("a NaN block scale", d, "fp8.scale", K0 "_scale_inv");
    CHECK(write_twin("pokew", QC("[128, 128]"), 128, 128, 0, 0, 0, d, sizeof d) == 0);
    CHECK(fp8tw_poke(d, D1, 1000, &nanb, 1) == 0);
    expect("an E4M3 NaN weight byte", d, "fp8.nan", D1);
    /* a weight_scale_inv beside a BF16 weight */
    snprintf(d, sizeof d, "%s/orphan", tmp);
    fp4_hfdir_writer *w = NULL;
    fp4_error e;
    static const uint16_t wb[4] = {0x3f80, 0x3f80, 0x3f80, 0x3f80};
    static const float one = 1.0f;
    const int64_t ws[2] = {2, 2}, ss[2] = {1, 1};
    CHECK(mkdir(d, 0700) == 0);
    CHECK_OK(fp4_hfdir_writer_create(d, 0, &w, &e));
    CHECK_OK(fp4_hfdir_writer_add_tensor(w, "m.weight", FP4_ST_BF16, 2, ws, &e));
    CHECK_OK(fp4_hfdir_writer_add_tensor(w, "m.weight_scale_inv", FP4_ST_F32, 2, ss, &e));
    CHECK_OK(fp4_hfdir_writer_write(w, wb, sizeof wb, &e));
    CHECK_OK(fp4_hfdir_writer_write(w, &one, sizeof one, &e));
    size_t shards;
    CHECK_OK(fp4_hfdir_writer_finish(w, &shards, &e));
    fp4_hfdir_writer_free(w);
    expect("weight_scale_inv beside a BF16 weight", d, "fp8.scale-orphan", "m.weight_scale_inv");
    /* no config.json at all: the block shape is unknown */
    snprintf(p, sizeof p, "%s/config.json", good);
    char moved[700];
    snprintf(moved, sizeof moved, "%s/config.json.away", good);
    CHECK(rename(p, moved) == 0);
    snprintf(p, sizeof p, "%s/model.safetensors", good);
    expect("a lone .safetensors file", p, "fp8.block-size", NULL);
    snprintf(p, sizeof p, "%s/config.json", good);
    CHECK(rename(moved, p) == 0);
}

int main(void) {
    snprintf(tmp, sizeof tmp, "%s/fp4lane-fp8b-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) return perror("mkdtemp"), 1;
    char b128[600], f128[600], b96[600], f96[600];
    CHECK(write_twin("b128", QC("[128, 128]"), 128, 128, 0, 0, 0, b128, sizeof b128) == 0);
    CHECK(write_twin("f128", NULL, 128, 128, 1, 0, 0, f128, sizeof f128) == 0);
    CHECK(write_twin("b96", QC("[96, 80]"), 96, 80, 0, 0, 0, b96, sizeof b96) == 0);
    CHECK(write_twin("f96", NULL, 96, 80, 1, 0, 0, f96, sizeof f96) == 0);
    same_as_f32("128x128 blocks", b128, f128, 128, 128);
    same_as_f32("96x80 blocks (partial)", b96, f96, 96, 80);
    refusals(b128);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (!check_failed && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp);
    return check_report();
}
