/* test_llama_vocab.c — llama.cpp's own tokenizer test vectors (what its test-tokenizer-0 checks):
 * every models/ggml-vocab-NAME.gguf of its source bundle (`make llama-src`, FP4_LLAMA_SRC) that has
 * NAME.gguf.inp / NAME.gguf.out, each case encoded by fp4_tokenizer_load(GGUF) without BOS/EOS and
 * without parsing control tokens (add_special false, parse_special false: user-defined tokens are
 * still matched), ids identical to the .out line. The .out files were written by Hugging Face's
 * tokenizers from each family's tokenizer.json, so the vectors hold the GGUF reading against the
 * reference. Every family the bundle ships must be present and pass in full; a vocabulary without
 * vectors must load or be refused with a named rule. Skipped (with a message) only when the bundle
 * is absent. */
#include "check.h"
#include "fp4lane_text.h"
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEP "\n__ggml_vocab_test__\n"

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *p = malloc(cap + 1);
    for (size_t r; p && (r = fread(p + len, 1, cap - len, f)) > 0;) {
        len += r;
        if (len == cap) {
            char *q = realloc(p, 2 * cap + 1);
            if (!q) {
                free(p);
                p = NULL;
                break;
            }
            p = q;
            cap *= 2;
        }
    }
    fclose(f);
    if (p) p[len] = 0;
    *n = len;
    return p;
}

/* the families whose vectors the bundle of node-llama-cpp 3.22.1 ships: each must be found */
static const char *const FAMILIES[] = {"bert-bge", "command-r", "deepseek-coder", "deepseek-llm", "falcon",
                                       "gemma-4",  "gpt-2",     "llama-bpe",      "llama-spm",    "mpt",
                                       "phi-3",    "qwen2",     "qwen35",         "refact",
                                       "starcoder"};
#define N_FAMILIES (sizeof FAMILIES / sizeof FAMILIES[0])

static long total_cases, total_pass;

/* one vocabulary's vectors; returns the cases that pass */
static void run_family(const char *dir, const char *name) {
    char path[1400], inp[1500], outp[1500];
    snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf", dir, name);
    snprintf(inp, sizeof inp, "%s.inp", path);
    snprintf(outp, sizeof outp, "%s.out", path);
    size_t ni = 0, no = 0;
    char *si = slurp(inp, &ni), *so = slurp(outp, &no);
    CHECK_MSG(si && so, "%s: cannot read the vectors", name);
    fp4_tokenizer *t = NULL;
    fp4_error e = {0};
    fp4_status st = si && so ? fp4_tokenizer_load(path, &t, &e) : FP4_ERR_IO;
    CHECK_MSG(st == FP4_OK, "%s: %s (%s)", name, e.msg, e.rule);
    long cases = 0, pass = 0;
    size_t pi = 0, po = 0;
    while (t && pi < ni && po < no) {
        const char *end = strstr(si + pi, SEP);
        size_t len = end ? (size_t)(end - (si + pi)) : ni - pi;
        const char *nl = memchr(so + po, '\n', no - po);
        size_t olen = nl ? (size_t)(nl - (so + po)) : no - po;
        int32_t want[4096];
        size_t nw = 0;
        char *q = so + po, *qe = so + po + olen;
        while (q < qe && nw < 4096) {
            while (q < qe && *q == ' ') q++;
            if (q >= qe) break;
            want[nw++] = (int32_t)strtol(q, &q, 10);
        }
        int32_t *ids = NULL;
        size_t n = 0;
        fp4_status es = fp4_tokenizer_encode(t, si + pi, len, 0, &ids, &n);
        bool ok = es == FP4_OK && n == nw && (n == 0 || !memcmp(ids, want, n * sizeof *ids));
        cases++;
        pass += ok;
        if (!ok && cases - pass <= 3) {
            fprintf(stderr, "  %s case %ld '%.*s': got", name, cases, (int)(len > 60 ? 60 : len), si + pi);
            for (size_t k = 0; k < n && k < 24; k++) fprintf(stderr, " %d", (int)ids[k]);
            fprintf(stderr, " | want");
            for (size_t k = 0; k < nw && k < 24; k++) fprintf(stderr, " %d", (int)want[k]);
            fprintf(stderr, "\n");
        }
        free(ids);
        pi += len + (end ? strlen(SEP) : 0);
        po += olen + (nl ? 1 : 0);
        if (!end) break;
    }
    CHECK_MSG(t && pass == cases && cases > 0, "%s: %ld of %ld cases identical", name, pass, cases);
    printf("  %-16s %ld/%ld\n", name, pass, cases);
    total_cases += cases;
    total_pass += pass;
    fp4_tokenizer_free(t);
    free(si);
    free(so);
}

int main(void) {
    check_test_name = "test_llama_vocab";
    const char *src = getenv("FP4_LLAMA_SRC");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/models", src ? src : "");
    struct dirent **ents = NULL;
    int n_ents = src ? scandir(dir, &ents, NULL, alphasort) : -1;
    if (n_ents < 0) {
        printf("test_llama_vocab: SKIPPED: llama.cpp's source bundle is absent (FP4_LLAMA_SRC=%s; "
               "`make llama-src` unpacks it)\n",
               src ? src : "unset");
        return check_report();
    }
    bool seen[N_FAMILIES] = {0};
    int others = 0;
    for (int k = 0; k < n_ents; k++) {
        const char *n = ents[k]->d_name;
        size_t l = strlen(n);
        if (strncmp(n, "ggml-vocab-", 11) || l < 16 || strcmp(n + l - 5, ".gguf")) continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(l - 16), n + 11);
        char inp[1600];
        snprintf(inp, sizeof inp, "%s/%s.inp", dir, n);
        FILE *f = fopen(inp, "rb");
        if (f) {
            fclose(f);
            for (size_t i = 0; i < N_FAMILIES; i++) seen[i] = seen[i] || !strcmp(FAMILIES[i], name);
            run_family(dir, name);
            continue;
        }
        /* no vectors: it loads, or a named rule refuses it */
        char path[1600];
        snprintf(path, sizeof path, "%s/%s", dir, n);
        fp4_tokenizer *t = NULL;
        fp4_error e = {0};
        fp4_status st = fp4_tokenizer_load(path, &t, &e);
        CHECK_MSG(st == FP4_OK || (e.rule[0] && !strncmp(e.rule, "tok.", 4)), "%s: %s", name, e.msg);
        printf("  %-16s no vectors: %s%s%s\n", name, st ? "refused, " : "loads", st ? e.rule : "",
               st ? "" : "");
        fp4_tokenizer_free(t);
        others++;
    }
    for (int k = 0; k < n_ents; k++) free(ents[k]);
    free(ents);
    for (size_t i = 0; i < N_FAMILIES; i++) CHECK_MSG(seen[i], "%s: no vectors in the bundle", FAMILIES[i]);
    printf("test_llama_vocab: %ld of %ld cases identical over the bundle's vocabularies "
           "(%d without vectors)\n",
           total_pass, total_cases, others);
    return check_report();
}
