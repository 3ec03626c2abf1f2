/* cmd_demo.c — `fp4lane demo`: the main job on an embedded default, no download. It makes a
 * small Llama-shaped bf16 checkpoint from a seeded generator, quantizes it with the ModelOpt
 * recipe, validates it, converts it through all four layouts and back (bytes compared), and runs
 * the exact A16 and W4A4 contractions against the float reference. Exit 0 when all of it holds. */
#include "cli.h"
#include <signal.h>
#include "fp4_rng.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <ftw.h>

enum { HID = 256, FFN = 768, VOCAB = 512 };

static uint64_t rng_state = 0x5EEDF00Dull;
static float demo_normal(void) { return fp4_rng_normal(&rng_state); } /* the same numbers everywhere */

static int write_bf16_model(const char *dir, fp4_error *e) {
    static const struct { const char *name; int64_t rows, cols; float sd;
    } t[] = {{"lm_head.weight", VOCAB, HID, 0.02f},
             {"model.embed_tokens.weight", VOCAB, HID, 0.02f},
             {"model.layers.0.input_layernorm.weight", 0, HID, 0.0f},
             {"model.layers.0.mlp.down_proj.weight", HID, FFN, 0.02f},
             {"model.layers.0.mlp.gate_proj.weight", FFN, HID, 0.03f},
             {"model.layers.0.mlp.up_proj.weight", FFN, HID, 0.025f},
             {"model.layers.0.post_attention_layernorm.weight", 0, HID, 0.0f},
             {"model.layers.0.self_attn.k_proj.weight", HID / 2, HID, 0.04f},
             {"model.layers.0.self_attn.o_proj.weight", HID, HID, 0.02f},
             {"model.layers.0.self_attn.q_proj.weight", HID, HID, 0.05f},
             {"model.layers.0.self_attn.v_proj.weight", HID / 2, HID, 0.03f},
             {"model.norm.weight", 0, HID, 0.0f}};
    const int n = (int)(sizeof t / sizeof t[0]);
    fp4_hfdir_writer *w = NULL;
    mkdir(dir, 0777);
    fp4_status st = fp4_hfdir_writer_create(dir, 0, &w, e);
    for (int i = 0; i < n && !st; i++) {
        int64_t shape[2] = {t[i].rows ? t[i].rows : t[i].cols, t[i].cols};
        st = fp4_hfdir_writer_add_tensor(w, t[i].name, FP4_ST_BF16, t[i].rows ? 2 : 1, shape, e);
    }
    uint16_t *buf = malloc(sizeof(uint16_t) * VOCAB * FFN);
    for (int i = 0; i < n && !st && buf; i++) {
        int64_t cnt = (t[i].rows ? t[i].rows : 1) * t[i].cols;
        for (int64_t k = 0; k < cnt; k++) {
            float v = t[i].rows ? demo_normal() * t[i].sd : 1.0f + 0.1f * demo_normal();
            if (t[i].rows && k % 997 == 0) v *= 12.0f; /* a few outliers, as real weights have */
            buf[k] = fp4_f32_to_bf16(v);
        }
        st = fp4_hfdir_writer_write(w, buf, (size_t)cnt * 2, e);
    }
    size_t shards;
    if (!st) st = buf ? fp4_hfdir_writer_finish(w, &shards, e) : FP4_ERR_NOMEM;
    fp4_hfdir_writer_free(w);
    free(buf);
    char cfg[1200];
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    if (!st)
        st = fp4_hfdir_write_json(
            cfg,
            "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":256,\"intermediate_size\":768,"
            "\"model_type\":\"llama\",\"num_hidden_layers\":1,\"vocab_size\":512}",
            2, 1, e);
    return st;
}

static int same_file(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa && fb, ca, cb;
    while (same && ((ca = fgetc(fa)) == (cb = fgetc(fb))) && ca != EOF) {}
    if (same) same = feof(fa) && feof(fb);
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

static int step(int ok, const char *what) {
    printf("  %s  %s\n", ok ? "ok  " : "FAIL", what);
    return ok;
}

static int contractions(const char *path) {
    fp4_model *m = NULL;
    fp4_error e;
    if (fp4_model_open(path, NULL, &m, &e)) return cli_report_error("demo", e.code, &e), 0;
    const fp4_tensor *q = fp4_model_find(m, "model.layers.0.self_attn.q_proj.weight");
    int ok = q && q->type == FP4_TYPE_NVFP4_E2M1;
    float x[4 * HID], y1[4 * HID], y2[4 * HID], yf[4 * HID];
    for (int i = 0; i < 4 * HID; i++) x[i] = demo_normal();
    ok = ok && !fp4_nvfp4_matvec_a16_exact(&q->nvfp4, x, 4, y1, 1) &&
         !fp4_nvfp4_matvec_a16_exact(&q->nvfp4, x, 4, y2, 2) &&
         !fp4_nvfp4_matvec_a16_float(&q->nvfp4, x, 4, yf, 2);
    ok = ok && step(!memcmp(y1, y2, sizeof y1), "exact A16: 1 and 2 threads give identical bits");
    double err = ok ? fp4_nrmse(y1, yf, 4 * HID) : 1.0;
    printf(
        "        exact A16 vs float reference: normalized RMS error %.2e (Q8_K activations + F16 output)\n",
        err);
    ok = ok && step(err < 0.02, "exact A16 within 2% of the float reference");
    fp4_nvfp4_view w4 = q ? q->nvfp4 : (fp4_nvfp4_view){0};
    w4.input_scale_inv = 2688.0f / 4.0f; /* activations up to |4| */
    ok = ok && !fp4_nvfp4_matvec_w4a4(&w4, x, 4, y1, 2);
    err = ok ? fp4_nrmse(y1, yf, 4 * HID) : 1.0;
    printf("        W4A4 vs float reference: normalized RMS error %.2e (FP4 activations)\n", err);
    ok = ok && step(err < 0.25, "W4A4 contraction runs and tracks the reference");
    fp4_model_close(m);
    return ok;
}

/* Removes the work directory in this process (no shell: a stop signal sent to the process group
 * cannot cut a child `rm` short and leave half a directory behind). */
static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(path) ? -1 : 0;
}

int cmd_demo(int argc, char **argv) {
    (void)argv;
    if (argc > 1) return cli_usage("demo");
    /* an interrupt waits until the work directory is gone (the demo runs for about a second),
     * then takes its default action */
    sigset_t stops, old;
    sigemptyset(&stops);
    sigaddset(&stops, SIGINT), sigaddset(&stops, SIGTERM), sigaddset(&stops, SIGHUP);
    sigprocmask(SIG_BLOCK, &stops, &old);
    char dir[40];
    const char *td = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%.16s/fp4lane-demo-XXXXXX", td && strlen(td) <= 16 ? td : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        sigprocmask(SIG_SETMASK, &old, NULL);
        return 1;
    }
    char src[64], mo[64], p[4][96], back[4][96], f1[512], f2[512];
    snprintf(src, sizeof src, "%s/bf16", dir);
    snprintf(mo, sizeof mo, "%s/modelopt", dir);
    fp4_error e;
    printf("fp4lane %s demo (work dir %s)\n", fp4_version(), dir);
    int ok = step(!write_bf16_model(src, &e),
                  "embedded Llama-shaped bf16 checkpoint written (1 layer, hidden 256)");
    fp4_quantize_opts qo = {.layout = FP4_LAYOUT_MODELOPT};
    ok = ok && step(!fp4_quantize_checkpoint(src, mo, &qo, &e),
                    "quantized with the ModelOpt recipe (q/k/v and gate/up fused)");
    fp4_model *m = NULL;
    ok = ok && step(!fp4_model_open(mo, NULL, &m, &e), "fail-closed loader accepts it");
    if (m)
        printf("        %lld tensors, %llu bytes, weights %s\n", (long long)fp4_model_n_tensors(m),
               (unsigned long long)fp4_model_file_bytes(m),
               fp4_weight_precision_name(fp4_model_weight_precision(m)));
    static const fp4_layout ls[4] = {FP4_LAYOUT_GGUF, FP4_LAYOUT_GGUF_GGML, FP4_LAYOUT_CT,
                                     FP4_LAYOUT_MODELOPT};
    for (int i = 0; i < 3 && ok; i++) {
        snprintf(p[i], sizeof p[i], "%s/%s%s", dir, fp4_layout_name(ls[i]), i < 2 ? ".gguf" : "");
        snprintf(back[i], sizeof back[i], "%s/back-from-%s", dir, fp4_layout_name(ls[i]));
        fp4_write_opts o = {.layout = ls[i]}, ob = {.layout = FP4_LAYOUT_MODELOPT};
        fp4_model *c = NULL;
        int good = !fp4_model_write(m, p[i], &o, &e) && !fp4_model_open(p[i], NULL, &c, &e) &&
                   !fp4_model_write(c, back[i], &ob, &e);
        fp4_model_close(c);
        snprintf(f1, sizeof f1, "%s/model.safetensors", mo);
        snprintf(f2, sizeof f2, "%s/model.safetensors", back[i]);
        char what[160];
        snprintf(what, sizeof what, "modelopt -> %s -> modelopt: byte-identical", fp4_layout_name(ls[i]));
        ok = step(good && same_file(f1, f2), what);
    }
    fp4_model_close(m);
    ok = ok && contractions(p[0]);
    if (!ok && e.code) cli_report_error("demo", e.code, &e);
    if (nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0) /* passed or not */
        fprintf(stderr, "could not remove %s\n", dir);
    printf("%s\n", ok ? "demo passed" : "demo FAILED");
    fflush(stdout);
    sigset_t pending;
    if (!sigpending(&pending) && (sigismember(&pending, SIGINT) || sigismember(&pending, SIGTERM) ||
                                  sigismember(&pending, SIGHUP)))
        fprintf(stderr, "fp4lane demo: interrupted; the work directory was removed\n");
    sigprocmask(SIG_SETMASK, &old, NULL); /* a pending stop signal is delivered here */
    return ok ? 0 : 1;
}
