/* test_text_unigram.c — the Unigram model, the Precompiled normalizer, Replace with a Regex and
 * single_word added tokens on a real SentencePiece Unigram vocabulary: XLM-RoBERTa's 250002 scored
 * pieces and its precompiled_charsmap, as llama.cpp's source bundle ships them
 * (models/ggml-vocab-nomic-bert-moe.gguf; `make llama-src`), written as the tokenizer.json Hugging
 * Face's converter makes for XLM-R (tests/text/unigram_fixture.mjs). Against the references on
 * tests/data/text/corpus.txt.gz (tests/text/rust_oracle.mjs): the Rust library (tokenizers 0.22 through
 * the pinned N-API build) for every variant — ids, ids with the template, decode — and the
 * JavaScript reference (@huggingface/tokenizers, pinned) where it reads the file as the Rust library
 * does (NFKC in place of Precompiled: identical on every chunk). Variants (unigram_fixture.mjs):
 * xlmr (the real normalizer), nfkc, rust (byte_fallback; single_word / lstrip / rstrip / normalized
 * added tokens: the JavaScript reference reads neither). Skipped, saying so, when the bundle is absent. */
#include "check.h"
#include "fp4lane_text.h"
#include <stdbool.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char *slurp_cmd(const char *cmd, size_t *n) {
    FILE *f = popen(cmd, "r");
    size_t cap = 1 << 20, len = 0;
    char *p = f ? malloc(cap) : NULL;
    while (p) {
        size_t got = fread(p + len, 1, cap - len, f);
        len += got;
        if (len < cap) break;
        p = realloc(p, cap *= 2);
    }
    if (f) pclose(f);
    *n = len;
    return p;
}

typedef struct rd {
    const uint8_t *p, *end;
} rd;
static uint32_t rd_u32(rd *r) {
    if (r->end - r->p < 4) {
        r->p = r->end;
        return 0;
    }
    uint32_t v =
        (uint32_t)r->p[0] | (uint32_t)r->p[1] << 8 | (uint32_t)r->p[2] << 16 | (uint32_t)r->p[3] << 24;
    r->p += 4;
    return v;
}
/* the next record as bytes (ids: n * 4 bytes) */
static const uint8_t *rd_rec(rd *r, uint32_t *n, int ids) {
    *n = rd_u32(r);
    size_t bytes = (size_t)*n * (ids ? 4 : 1);
    if ((size_t)(r->end - r->p) < bytes) {
        *n = 0;
        r->p = r->end;
        return NULL;
    }
    const uint8_t *p = r->p;
    r->p += bytes;
    return p;
}
static bool same_ids(const uint8_t *rec, uint32_t n, const int32_t *ids, size_t n_ids) {
    if (n != n_ids) return false;
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *q = rec + 4 * i;
        uint32_t v = (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24;
        if ((int32_t)v != ids[i]) return false;
    }
    return true;
}

static void variant_dir(const char *name, char *dir, size_t n) {
    snprintf(dir, n, "%s/fp4_unigram_%d_%s", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid(),
             name);
}

/* js_equal: the JavaScript reference must agree on every chunk (else its differences are counted) */
static void variant(const char *npm, const char *name, int stride, bool js_equal, const char *corpus,
                    size_t corpus_n) {
    char dir[512], out[600], cmd[4096], path[700];
    variant_dir(name, dir, sizeof dir);
    snprintf(out, sizeof out, "%s.bin", dir);
    snprintf(cmd, sizeof cmd, "node tests/text/rust_oracle.mjs '%s' '%s' %s %d '%s'", npm, dir,
             "tests/data/text/corpus.txt.gz", stride, out);
    CHECK_MSG(system(cmd) == 0, "%s: the oracle failed", name);
    fp4_tokenizer *t = NULL;
    fp4_error err = {0};
    fp4_status st = fp4_tokenizer_load(dir, &t, &err);
    CHECK_MSG(st == FP4_OK, "%s: load: %s (%s)", name, err.msg, err.rule);
    CHECK(st || fp4_tokenizer_kind(t) == FP4_TOK_UNIGRAM);
    size_t on = 0;
    snprintf(cmd, sizeof cmd, "cat '%s'", out);
    char *ob = slurp_cmd(cmd, &on);
    rd r = {(const uint8_t *)ob, (const uint8_t *)ob + (ob ? on : 0)};
    size_t chunks = 0, ids_total = 0, bad = 0, bad_tmpl = 0, bad_js = 0, js_vs_rust = 0, bad_dec = 0;
    size_t pos = 0;
    for (int k = 0; t && pos < corpus_n; k++) {
        size_t end = pos + 2048 < corpus_n ? pos + 2048 : corpus_n;
        while (end < corpus_n && corpus[end - 1] != '\n')
            end++;
        const char *text = corpus + pos;
        size_t len = end - pos;
        pos = end;
        if (k % stride) continue;
        uint32_t na, nb, nc, nd;
        const uint8_t *a = rd_rec(&r, &na, 1), *b = rd_rec(&r, &nb, 1), *c = rd_rec(&r, &nc, 1),
                      *d = rd_rec(&r, &nd, 0);
        int32_t *ids = NULL, *idt = NULL;
        size_t n = 0, nt = 0;
        CHECK_OK(fp4_tokenizer_encode(t, text, len, FP4_TOK_PARSE_SPECIAL, &ids, &n));
        CHECK_OK(fp4_tokenizer_encode(t, text, len, FP4_TOK_PARSE_SPECIAL | FP4_TOK_ADD_SPECIAL, &idt, &nt));
        chunks++;
        ids_total += n;
        if (!same_ids(a, na, ids, n)) {
            if (bad++ < 3) {
                uint32_t i = 0;
                while (i < na && i < n && same_ids(a + 4 * i, 1, ids + i, 1))
                    i++;
                fprintf(stderr, "%s: chunk %d differs from the Rust library at id %u of %u / %zu\n", name, k,
                        i, na, n);
            }
        }
        if (!same_ids(b, nb, idt, nt)) bad_tmpl++;
        bool js_rust = na == nc && (na == 0 || !memcmp(a, c, (size_t)na * 4));
        if (!js_rust) js_vs_rust++;
        if (js_rust && !same_ids(c, nc, ids, n)) bad_js++;
        if (js_equal && !js_rust) bad_js++;
        char *dec = NULL;
        size_t dn = 0;
        CHECK_OK(fp4_tokenizer_decode(t, ids, n, 0, &dec, &dn, NULL));
        if (dn != nd || (nd && memcmp(dec, d, nd))) bad_dec++;
        free(dec);
        free(ids);
        free(idt);
    }
    CHECK_MSG(r.p == r.end, "%s: oracle output left over", name);
    fprintf(stderr,
            "%s: %zu chunks, %zu ids; differences from the Rust library: ids %zu, template %zu, decode %zu; "
            "JavaScript reference: differs from Rust on %zu chunks, from fp4lane where it agrees with Rust "
            "%zu\n",
            name, chunks, ids_total, bad, bad_tmpl, bad_dec, js_vs_rust, bad_js);
    CHECK(chunks > 50);
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(bad_tmpl, 0);
    CHECK_EQ_INT(bad_dec, 0);
    CHECK_EQ_INT(bad_js, 0);
    fp4_tokenizer_free(t);
    free(ob);
    unlink(out);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    unlink(path);
    rmdir(dir);
}

int main(void) {
    const char *npm = getenv("FP4_TEXT_NPM"), *src = getenv("FP4_LLAMA_SRC");
    CHECK_MSG(npm && *npm, "FP4_TEXT_NPM is not set (run through make test)");
    char gguf[1024];
    snprintf(gguf, sizeof gguf, "%s/models/ggml-vocab-nomic-bert-moe.gguf", src ? src : "");
    struct stat sb;
    if (!src || stat(gguf, &sb)) {
        printf("test_text_unigram: SKIPPED: llama.cpp's source bundle is absent (FP4_LLAMA_SRC=%s; "
               "make llama-src)\n",
               src ? src : "");
        return check_report();
    }
    if (!npm) return check_report();
    size_t n = 0;
    char *corpus = slurp_cmd("gzip -dc tests/data/text/corpus.txt.gz", &n);
    CHECK_MSG(n >= 1000000, "corpus: %zu bytes", n);
    char d[3][512], cmd[4096];
    variant_dir("xlmr", d[0], sizeof d[0]), variant_dir("nfkc", d[1], sizeof d[1]),
        variant_dir("rust", d[2], sizeof d[2]);
    snprintf(cmd, sizeof cmd, "node tests/text/unigram_fixture.mjs '%s' '%s' xlmr '%s' nfkc '%s' rust", gguf,
             d[0], d[1], d[2]);
    CHECK_MSG(system(cmd) == 0, "the fixture failed");
    if (corpus) {
        variant(npm, "xlmr", 1, false, corpus, n);
        variant(npm, "nfkc", 4, true, corpus, n);
        variant(npm, "rust", 5, false, corpus, n);
    }
    free(corpus);
    return check_report();
}
