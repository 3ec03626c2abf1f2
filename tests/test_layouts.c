/* test_layouts.c — containers and conversion (issue: containers & conversion):
 *  - fp4lane quantize reproduces ModelOpt's own output byte for byte (GPU and CPU scale2 rules);
 *  - every one of the 12 layout-to-layout conversions round-trips to identical bytes, and every
 *    layout loads to the same payload, scale bytes and scalars (bits);
 *  - llama.cpp's own gguf_init_from_file opens our type-40 file and its dequantize_row_nvfp4 × .scale
 *    gives our values; the Q4_K lane writes ggml's Q4_K bytes. */
#include "check.h"
#include "fp4lane_io.h"
#include "ggml_oracle.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define GOLDEN(file) check_data("modelopt-golden/" file)

static char tmp[512];

static long file_size(const char *p) {
    struct stat sb;
    return stat(p, &sb) ? -1 : (long)sb.st_size;
}

static int same_file(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa && fb;
    while (same) {
        int ca = fgetc(fa), cb = fgetc(fb);
        if (ca != cb) same = 0;
        if (ca == EOF || cb == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

static void test_golden(void) {
    static const char *const meta_gpu[] = {"device", "cuda", "torch", "2.11.0+cu130", "producer",
                                           "modelopt a2fbac7 NVFP4QTensor.quantize", NULL};
    static const char *const meta_cpu[] = {"device", "cpu", "torch", "2.11.0+cu130", "producer",
                                           "modelopt a2fbac7 NVFP4QTensor.quantize", NULL};
    char out[600], f[700];
    fp4_error e;
    for (int rule = 0; rule < 2; rule++) {
        snprintf(out, sizeof out, "%s/golden_%d", tmp, rule);
        fp4_quantize_opts o = {.layout = FP4_LAYOUT_MODELOPT, .rule = rule ? FP4_SCALE2_CPU : FP4_SCALE2_GPU,
                               .st_metadata = rule ? meta_cpu : meta_gpu};
        CHECK_OK(fp4_quantize_checkpoint(GOLDEN("input.safetensors"), out, &o, &e));
        snprintf(f, sizeof f, "%s/model.safetensors", out);
        CHECK_MSG(
            same_file(f, rule ? GOLDEN("modelopt_cpu.safetensors") : GOLDEN("modelopt_cuda.safetensors")),
            "quantize --scale2-rule %s differs from ModelOpt's own file", rule ? "cpu" : "gpu");
    }
    /* the two rules really differ on this input: the test could fail */
    CHECK(!same_file(GOLDEN("modelopt_cpu.safetensors"), GOLDEN("modelopt_cuda.safetensors")));
    /* Q4_K lane: ggml's bytes for every tensor fp4lane quantized */
    snprintf(out, sizeof out, "%s/golden_q4k.gguf", tmp);
    fp4_quantize_opts o = {.layout = FP4_LAYOUT_GGUF, .to_q4_k = 1};
    CHECK_OK(fp4_quantize_checkpoint(GOLDEN("input.safetensors"), out, &o, &e));
    fp4_model *m = NULL, *src = NULL;
    CHECK_OK(fp4_model_open(out, NULL, &m, &e));
    CHECK_OK(fp4_model_open(GOLDEN("input.safetensors"), NULL, &src, &e));
    CHECK(fp4_model_gguf(src) == NULL && fp4_model_gguf(NULL) == NULL); /* safetensors: config.json instead */
    if (m && src) {
        CHECK(fp4_model_weight_precision(m) == FP4_WP_Q4_K);
        int n_q4 = 0;
        for (int64_t i = 0; i < fp4_model_n_tensors(m); i++) {
            const fp4_tensor *t = fp4_model_tensor(m, i);
            if (t->type != FP4_TYPE_Q4_K) continue;
            n_q4++;
            const fp4_tensor *s = fp4_model_find(src, t->name);
            int64_t n = t->ne[0] * t->ne[1];
            float *x = malloc(sizeof(float) * (size_t)n);
            fp4_block_q4_K *b = malloc((size_t)(n / 256) * sizeof *b);
            CHECK_OK(fp4_tensor_dequant_rows(s, 0, t->ne[1], x));
            CHECK_OK(fp4_q4_K_quantize(x, n, b));
            CHECK(t->nbytes == (uint64_t)(n / 256) * sizeof *b && !memcmp(t->data, b, (size_t)t->nbytes));
            free(x);
            free(b);
        }
        CHECK(n_q4 >= 5);
    }
    fp4_model_close(m);
    fp4_model_close(src);
}

/* ---- a synthetic ModelOpt checkpoint whose scalars are not exact reciprocals ---- */

static float awkward(test_rng *r) { /* 1/(1/x) != x in f32 */
    for (;;) {
        float x = ldexpf(1.0f + rng_uniform(r), -9 - (int)(rng_u64(r) % 4));
        if (1.0f / (1.0f / x) != x) return x;
    }
}

static void write_synthetic(const char *dir, int w4a4, test_rng *r) {
    mkdir(dir, 0777);
    fp4_hfdir_writer *w = NULL;
    fp4_error e;
    CHECK_OK(fp4_hfdir_writer_create(dir, 0, &w, &e));
    CHECK_OK(fp4_hfdir_writer_add_metadata(w, "format", "pt", &e));
    static const struct { const char *mod; int64_t n_out, n_in; } lin[] = {
        {"model.layers.0.mlp.down_proj", 16, 256}, {"model.layers.0.self_attn.q_proj", 32, 128},
        {"model.layers.1.self_attn.o_proj", 8, 64}};
    enum { NL = 3 };
    float s2[NL], in[NL];
    for (int i = 0; i < NL; i++) s2[i] = awkward(r), in[i] = awkward(r);
    /* canonical order: F32 (scalars, norm), BF16 (embedding), F8_E4M3 (scales), U8 (payloads) */
    char name[256];
    int64_t sh[2];
    for (int i = 0; i < NL; i++) {
        if (w4a4) {
            snprintf(name, sizeof name, "%s.input_scale", lin[i].mod);
            CHECK_OK(fp4_hfdir_writer_add_tensor(w, name, FP4_ST_F32, 0, sh, &e));
        }
        snprintf(name, sizeof name, "%s.weight_scale_2", lin[i].mod);
        CHECK_OK(fp4_hfdir_writer_add_tensor(w, name, FP4_ST_F32, 0, sh, &e));
    }
    CHECK_OK(fp4_hfdir_writer_add_tensor(w, "model.layers.0.self_attn.k_scale", FP4_ST_F32, 0, sh, &e));
    sh[0] = 128;
    CHECK_OK(fp4_hfdir_writer_add_tensor(w, "model.norm.weight", FP4_ST_F32, 1, sh, &e));
    sh[0] = 64, sh[1] = 128;
    CHECK_OK(fp4_hfdir_writer_add_tensor(w, "model.embed_tokens.weight", FP4_ST_BF16, 2, sh, &e));
    for (int i = 0; i < NL; i++) {
        snprintf(name, sizeof name, "%s.weight_scale", lin[i].mod);
        sh[0] = lin[i].n_out, sh[1] = lin[i].n_in / 16;
        CHECK_OK(fp4_hfdir_writer_add_tensor(w, name, FP4_ST_F8_E4M3, 2, sh, &e));
    }
    for (int i = 0; i < NL; i++) {
        snprintf(name, sizeof name, "%s.weight", lin[i].mod);
        sh[0] = lin[i].n_out, sh[1] = lin[i].n_in / 2;
        CHECK_OK(fp4_hfdir_writer_add_tensor(w, name, FP4_ST_U8, 2, sh, &e));
    }
    /* data in the same order */
    for (int i = 0; i < NL; i++) {
        if (w4a4) CHECK_OK(fp4_hfdir_writer_write(w, &in[i], 4, &e));
        CHECK_OK(fp4_hfdir_writer_write(w, &s2[i], 4, &e));
    }
    float ks = 0.5f;
    CHECK_OK(fp4_hfdir_writer_write(w, &ks, 4, &e));
    float norm[128];
    for (int i = 0; i < 128; i++) norm[i] = rng_normal(r);
    CHECK_OK(fp4_hfdir_writer_write(w, norm, sizeof norm, &e));
    uint16_t emb[64 * 128];
    for (int i = 0; i < 64 * 128; i++) emb[i] = fp4_f32_to_bf16(rng_normal(r));
    CHECK_OK(fp4_hfdir_writer_write(w, emb, sizeof emb, &e));
    for (int i = 0; i < NL; i++) {
        uint8_t buf[4096];
        int64_t n = lin[i].n_out * lin[i].n_in / 16;
        for (int64_t k = 0; k < n; k++) buf[k] = (uint8_t)(1 + rng_u64(r) % 0x7E); /* 0x01..0x7E */
        CHECK_OK(fp4_hfdir_writer_write(w, buf, (size_t)n, &e));
    }
    for (int i = 0; i < NL; i++) {
        uint8_t buf[4096];
        int64_t n = lin[i].n_out * lin[i].n_in / 2;
        for (int64_t k = 0; k < n; k++) buf[k] = (uint8_t)rng_u64(r);
        CHECK_OK(fp4_hfdir_writer_write(w, buf, (size_t)n, &e));
    }
    size_t shards = 0;
    CHECK_OK(fp4_hfdir_writer_finish(w, &shards, &e));
    fp4_hfdir_writer_free(w);
    char f[700];
    snprintf(f, sizeof f, "%s/config.json", dir);
    CHECK_OK(
        fp4_hfdir_write_json(f, "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":128}", 2, 1, &e));
    snprintf(f, sizeof f, "%s/hf_quant_config.json", dir);
    CHECK_OK(fp4_hfdir_write_json(f,
                               w4a4 ? "{\"producer\":{\"name\":\"modelopt\"},\"quantization\":{\"quant_"
                                      "algo\":\"NVFP4\",\"group_size\":16}}"
                                    : "{\"producer\":{\"name\":\"modelopt\"},\"quantization\":{\"quant_"
                                      "algo\":\"W4A16_NVFP4\",\"group_size\":16}}",
                               4, 0, &e));
}

static const fp4_layout layouts[4] = {FP4_LAYOUT_MODELOPT, FP4_LAYOUT_GGUF, FP4_LAYOUT_GGUF_GGML,
                                      FP4_LAYOUT_CT};

static void out_name(char *buf, size_t n, const char *tag, fp4_layout l) {
    snprintf(buf, n, "%.300s/%.40s_%.20s%s", tmp, tag, fp4_layout_name(l),
             (l == FP4_LAYOUT_GGUF || l == FP4_LAYOUT_GGUF_GGML) ? ".gguf" : "");
}

static int same_ckpt(const char *a, const char *b, fp4_layout l) {
    if (l == FP4_LAYOUT_GGUF || l == FP4_LAYOUT_GGUF_GGML) return same_file(a, b);
    static const char *const files[] = {"model.safetensors", "config.json", "hf_quant_config.json"};
    for (int i = 0; i < 3; i++) {
        char fa[700], fb[700];
        snprintf(fa, sizeof fa, "%s/%s", a, files[i]);
        snprintf(fb, sizeof fb, "%s/%s", b, files[i]);
        if ((file_size(fa) < 0) != (file_size(fb) < 0)) return 0;
        if (file_size(fa) >= 0 && !same_file(fa, fb)) return 0;
    }
    return 1;
}

static int convert(const char *in, const char *out, fp4_layout l) {
    fp4_model *m = NULL;
    fp4_error e;
    fp4_status st = fp4_model_open(in, NULL, &m, &e);
    if (!st) {
        fp4_write_opts o = {.layout = l};
        st = fp4_model_write(m, out, &o, &e);
    }
    if (st)
        fprintf(stderr, "convert %s -> %s: %s [%s] %s %s\n", in, out, fp4_status_str(st), e.rule, e.tensor,
                e.msg);
    fp4_model_close(m);
    return st == FP4_OK;
}

/* the loaded bits: payload, scales, scalars of every NVFP4 tensor; bytes of every plain one */
static void same_content(const char *a, const char *b) {
    fp4_model *ma = NULL, *mb = NULL;
    fp4_error e;
    CHECK_OK(fp4_model_open(a, NULL, &ma, &e));
    CHECK_OK(fp4_model_open(b, NULL, &mb, &e));
    if (!ma || !mb) goto done;
    CHECK(fp4_model_n_tensors(ma) == fp4_model_n_tensors(mb));
    CHECK(fp4_model_act_precision(ma) == fp4_model_act_precision(mb));
    for (int64_t i = 0; i < fp4_model_n_tensors(ma); i++) {
        const fp4_tensor *x = fp4_model_tensor(ma, i), *y = fp4_model_find(mb, x->name);
        CHECK_MSG(y != NULL, "%s missing in %s", x->name, b);
        if (!y) continue;
        CHECK(x->type == y->type && x->n_dims == y->n_dims && !memcmp(x->ne, y->ne, sizeof x->ne));
        if (x->type == FP4_TYPE_NVFP4_E2M1) {
            const fp4_nvfp4_view *u = &x->nvfp4, *v = &y->nvfp4;
            CHECK(u->n_out == v->n_out && u->n_in == v->n_in);
            CHECK(!memcmp(u->payload, v->payload, (size_t)(u->n_out * u->n_in / 2)));
            CHECK(!memcmp(u->scales, v->scales, (size_t)(u->n_out * u->n_in / 16)));
            CHECK(f32_bits(u->scale2) == f32_bits(v->scale2));
            CHECK(f32_bits(u->input_scale_inv) == f32_bits(v->input_scale_inv));
        } else {
            CHECK(x->nbytes == y->nbytes && !memcmp(x->data, y->data, (size_t)x->nbytes));
        }
    }
done:
    fp4_model_close(ma);
    fp4_model_close(mb);
}

static void test_round_trips(int w4a4) {
    test_rng r = {900 + (uint64_t)w4a4};
    char base[600], a[600], b[600], back[600];
    snprintf(base, sizeof base, "%s/synth%d", tmp, w4a4);
    write_synthetic(base, w4a4, &r);
    fp4_model *m = NULL;
    fp4_error e;
    CHECK_OK(fp4_model_open(base, NULL, &m, &e));
    CHECK(m && fp4_model_act_precision(m) == (w4a4 ? FP4_AP_NVFP4 : FP4_AP_A16));
    fp4_model_close(m);
    char tag[32];
    snprintf(tag, sizeof tag, "w%d", w4a4);
    for (int i = 0; i < 4; i++) { /* the same weights in each layout */
        out_name(a, sizeof a, tag, layouts[i]);
        CHECK_MSG(i == 0 ? convert(base, a, layouts[0]) : convert(base, a, layouts[i]), "base -> %s",
                  fp4_layout_name(layouts[i]));
        same_content(base, a);
    }
    int directions = 0;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            if (i == j) continue;
            char t2[40];
            out_name(a, sizeof a, tag, layouts[i]);
            snprintf(t2, sizeof t2, "%.8s_%d_%d", tag, i & 3, j & 3);
            out_name(b, sizeof b, t2, layouts[j]);
            snprintf(t2, sizeof t2, "%.8s_%d_%d_back", tag, i & 3, j & 3);
            out_name(back, sizeof back, t2, layouts[i]);
            CHECK(convert(a, b, layouts[j]) && convert(b, back, layouts[i]));
            CHECK_MSG(same_ckpt(a, back, layouts[i]), "%s -> %s -> %s is not byte-identical",
                      fp4_layout_name(layouts[i]), fp4_layout_name(layouts[j]), fp4_layout_name(layouts[i]));
            same_content(a, b);
            directions++;
        }
    CHECK(directions == 12);
}

/* llama.cpp reads our type-40 file, and its decoder × .scale equals ours */
static void test_ggml_interop(void) {
    ggml_oracle o;
    char msg[256], f[600];
    int ok = ggml_oracle_open(&o, NULL, msg, sizeof msg) == 0;
    CHECK_MSG(ok, "ggml oracle: %s", msg);
    if (!ok) return;
    out_name(f, sizeof f, "w1", FP4_LAYOUT_GGUF_GGML);
    void *ctx = o.gguf_init_from_file(f, (ggml_oracle_gguf_params){true, NULL});
    CHECK_MSG(ctx != NULL, "llama.cpp's gguf_init_from_file refused %s", f);
    if (ctx) {
        CHECK(o.gguf_get_n_tensors(ctx) == 3 + 3 + 3 + 3); /* 3 weights, 3 .scale, 3 .input_scale, 3 plain */
        o.gguf_free(ctx);
    }
    fp4_model *m = NULL;
    fp4_gguf *g = NULL;
    fp4_error e;
    CHECK_OK(fp4_model_open(f, NULL, &m, &e));
    CHECK_OK(fp4_gguf_open(f, &g, &e));
    /* the model's own metadata handle holds what an independent reader sees */
    const fp4_gguf *mg = fp4_model_gguf(m);
    CHECK(mg && fp4_gguf_n_kv(mg) == fp4_gguf_n_kv(g) && fp4_gguf_n_kv(g) > 0);
    for (int64_t i = 0; mg && g && i < fp4_gguf_n_kv(g); i++)
        CHECK(fp4_gguf_key_index(mg, fp4_gguf_key(g, i)) == i &&
              fp4_gguf_kv_type(mg, i) == fp4_gguf_kv_type(g, i));
    for (int64_t i = 0; m && g && i < fp4_model_n_tensors(m); i++) {
        const fp4_tensor *t = fp4_model_tensor(m, i);
        if (t->type != FP4_TYPE_NVFP4_E2M1) continue;
        const fp4_gguf_tensor *gt = fp4_gguf_find(g, t->name);
        CHECK(gt && gt->type == FP4_TYPE_GGML_NVFP4);
        if (!gt) continue;
        const int64_t n_in = t->ne[0];
        float *theirs = malloc(sizeof(float) * (size_t)n_in), *ours = malloc(sizeof(float) * (size_t)n_in);
        uint8_t *blk = malloc((size_t)(n_in / 64 * 36));
        for (int64_t r = 0; r < t->nvfp4.n_out; r++) {
            memcpy(blk, gt->data + r * (n_in / 64) * 36, (size_t)(n_in / 64 * 36));
            o.dequantize_row_nvfp4(blk, theirs, n_in);
            for (int64_t k = 0; k < n_in; k++) theirs[k] = theirs[k] * t->nvfp4.scale2;
            CHECK_OK(fp4_tensor_dequant_rows(t, r, r + 1, ours));
            /* bit for bit, except that ggml's int8 table has no -0: its code 8 decodes to +0 */
            int same = 1;
            for (int64_t k = 0; k < n_in; k++)
                same &= theirs[k] == ours[k] && (ours[k] == 0.0f || f32_bits(theirs[k]) == f32_bits(ours[k]));
            CHECK_MSG(same, "%s row %lld", t->name, (long long)r);
        }
        free(theirs);
        free(ours);
        free(blk);
    }
    fp4_gguf_close(g);
    fp4_model_close(m);
    ggml_oracle_close(&o);
}

int main(void) {
    snprintf(tmp, sizeof tmp, "%s/fp4lane-layouts-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) return perror("mkdtemp"), 1;
    test_golden();
    test_round_trips(0);
    test_round_trips(1);
    test_ggml_interop();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (!check_failed && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp);
    return check_report();
}
