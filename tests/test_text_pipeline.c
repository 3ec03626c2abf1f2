/* test_text_pipeline.c — tokenizer.json components one at a time against Hugging Face's own
 * JavaScript tokenizers (@huggingface/tokenizers, pinned; tests/text/pipe_oracle.mjs): small
 * hand-made tokenizer.json files (tests/data/text/tiny_*.json with one member replaced) on
 * hand-written strings and the first 32 KB of the 1 MB corpus (prose, code, CJK, emoji, combining
 * marks, whitespace runs, digits, invalid UTF-8): ids with every added token matched and decode()
 * identical, and the streaming detokenizer's text equal to decode. Components: the normalizers
 * Lowercase and Strip; the pre-tokenizers Whitespace, WhitespaceSplit, Punctuation, Digits (both
 * forms), BertPreTokenizer, Metaspace (each prepend_scheme), Split with invert / Removed; the
 * WordPiece model with the BertNormalizer (tests/data/text/tiny_wordpiece.json); the Metaspace and
 * WordPiece decoders. Also the refusals of the Split forms the reference and the Rust library run
 * differently. Needs node and FP4_TEXT_NPM (set by the Makefile); a missing oracle fails. */
#include "check.h"
#include "fp4lane_text.h"
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const TEXTS[] = {
    "Hello, World! It's 2024: 12345 apples & 3.14 pies.",
    "  leading and trailing spaces  ",
    "\tTabs\tand\nnewlines\r\n\nend",
    "CAPITALS \xc4\xb0stanbul \xce\x9f\xce\x94\xce\xa5\xce\xa3\xce\xa3\xce\x95\xce\xa5\xce\xa3 stra\xc3\x9f"
    "e",
    "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae\xe3\x83\x86\xe3\x82\xad\xe3\x82\xb9\xe3\x83\x88 and "
    "\xed\x95\x9c\xea\xb5\xad\xec\x96\xb4",
    "caf\xc3\xa9 cafe\xcc\x81 na\xc3\xafve \xef\xac\x81 \xe2\x91\xa0 \xc2\xb2",
    "emoji \xf0\x9f\x98\x80\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x92\xbb!!",
    "<|end|>special<think>x</think> <|end|>",
    "a\xe2\x80\x83"
    "b\xc2\xa0"
    "c\xe3\x80\x80"
    "d\xef\xbb\xbf"
    "e\xc2\x85"
    "f",
    "under_score snake_case __init__ x_1",
    "bad \xff\xfe bytes \xc3",
    "",
    " ",
    "\xe2\x96\x81"
    "already\xe2\x96\x81metaspace",
};

typedef struct pcase {
    const char *name, *base;
    const char *norm, *pre, *dec; /* JSON replacing the member; NULL keeps the base's */
} pcase;

#define SPM "tests/data/text/tiny_spm.json"
#define BL "tests/data/text/tiny_bytelevel.json"
#define WP "tests/data/text/tiny_wordpiece.json"
#define BL_PRE(x)                                                                                            \
    "{\"type\":\"Sequence\",\"pretokenizers\":[" x ",{\"type\":\"ByteLevel\",\"use_regex\":false}]}"
static const pcase CASES[] = {
    {"wordpiece", WP, NULL, NULL, NULL},
    {"wordpiece_cased", WP,
     "{\"type\":\"BertNormalizer\",\"lowercase\":false,\"handle_chinese_chars\":false}", NULL,
     "{\"type\":\"WordPiece\",\"prefix\":\"##\",\"cleanup\":false}"},
    {"wordpiece_strip", WP, "{\"type\":\"BertNormalizer\",\"lowercase\":false,\"strip_accents\":true}", NULL,
     NULL},
    {"lowercase", BL, "{\"type\":\"Lowercase\"}", NULL, NULL},
    {"strip", BL,
     "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Strip\",\"strip_left\":true,\"strip_right\":true},"
     "{\"type\":\"NFC\"}]}",
     NULL, NULL},
    {"strip_left", BL, "{\"type\":\"Strip\",\"strip_left\":true,\"strip_right\":false}", NULL, NULL},
    {"whitespace", BL, NULL, BL_PRE("{\"type\":\"Whitespace\"}"), NULL},
    {"whitespace_split", BL, NULL, BL_PRE("{\"type\":\"WhitespaceSplit\"}"), NULL},
    {"punctuation", BL, NULL, BL_PRE("{\"type\":\"Punctuation\",\"behavior\":\"Isolated\"}"), NULL},
    {"digits", BL, NULL, BL_PRE("{\"type\":\"Digits\",\"individual_digits\":false}"), NULL},
    {"digits_single", BL, NULL, BL_PRE("{\"type\":\"Digits\",\"individual_digits\":true}"), NULL},
    {"bert_pre", BL, NULL, BL_PRE("{\"type\":\"BertPreTokenizer\"}"), NULL},
    {"split_invert", BL, NULL,
     BL_PRE("{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\p{L}+|\\\\p{N}\"},\"behavior\":\"Removed\","
            "\"invert\":true}"),
     NULL},
    {"split_removed", BL, NULL,
     BL_PRE(
         "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\s+\"},\"behavior\":\"Removed\",\"invert\":false}"),
     NULL},
    {"metaspace_always", SPM, "null",
     "{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\",\"prepend_scheme\":"
     "\"always\",\"split\":true}",
     "{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\"}"},
    {"metaspace_first", SPM, "null",
     "{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\",\"prepend_scheme\":"
     "\"first\",\"split\":false}",
     "{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\"}"},
    {"metaspace_never", SPM, "{\"type\":\"NFKC\"}",
     "{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\","
     "\"prepend_scheme\":\"never\"}",
     "{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\"}"},
};
#define N_CASES (sizeof CASES / sizeof CASES[0])

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *p = malloc(cap);
    for (size_t r; p && (r = fread(p + len, 1, cap - len, f)) > 0;) {
        len += r;
        if (len == cap) p = realloc(p, cap *= 2);
    }
    fclose(f);
    *n = len;
    return p;
}

static bool set_member(json_t *j, const char *key, const char *src) {
    if (!src) return true;
    json_error_t je;
    json_t *v = json_loads(src, JSON_DECODE_ANY, &je);
    if (!v) fprintf(stderr, "%s: %s\n", key, je.text);
    return v && json_object_set_new(j, key, v) == 0;
}

/* the case's tokenizer.json in its own folder under tmp */
static bool write_case(const pcase *c, const char *dir) {
    json_t *j = json_load_file(c->base, 0, NULL);
    bool ok = j && set_member(j, "normalizer", c->norm) && set_member(j, "pre_tokenizer", c->pre) &&
              set_member(j, "decoder", c->dec);
    char path[700];
    mkdir(dir, 0700);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    ok = ok && json_dump_file(j, path, JSON_COMPACT) == 0;
    json_decref(j);
    return ok;
}

static uint32_t rd32(const uint8_t **p, const uint8_t *end) {
    if (end - *p < 4) {
        *p = end;
        return 0;
    }
    uint32_t v =
        (uint32_t)(*p)[0] | (uint32_t)(*p)[1] << 8 | (uint32_t)(*p)[2] << 16 | (uint32_t)(*p)[3] << 24;
    *p += 4;
    return v;
}

static void refusals(const char *tmp) {
    static const struct {
        const char *pre, *rule;
    } bad[] = {
        {"{\"type\":\"Split\",\"pattern\":{\"String\":\" "
         "\"},\"behavior\":\"MergedWithNext\",\"invert\":false}",
         "tok.unsupported"},
        {"{\"type\":\"Split\",\"pattern\":{\"String\":\" \"},\"behavior\":\"Contiguous\",\"invert\":false}",
         "tok.unsupported"},
        {"{\"type\":\"Split\",\"pattern\":{\"Regex\":\" \"},\"behavior\":\"Isolated\",\"invert\":true}",
         "tok.unsupported"},
        {"{\"type\":\"Split\",\"pattern\":{\"String\":\" \"},\"behavior\":\"Removed\",\"invert\":false}",
         "tok.unsupported"},
        {"{\"type\":\"Split\",\"pattern\":{\"Regex\":\"( )\"},\"behavior\":\"Removed\",\"invert\":false}",
         "tok.unsupported"},
        {"{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\",\"prepend_scheme\":\"sometimes\"}",
         "tok.unsupported"},
        {"{\"type\":\"Metaspace\",\"replacement\":\"\"}", "tok.json-value"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char dir[600];
        snprintf(dir, sizeof dir, "%s/bad%zu", tmp, i);
        pcase c = {"bad", SPM, NULL, bad[i].pre, NULL};
        CHECK(write_case(&c, dir));
        fp4_tokenizer *t = NULL;
        fp4_error e = {0};
        fp4_status st = fp4_tokenizer_load(dir, &t, &e);
        CHECK_MSG(st != FP4_OK && !strcmp(e.rule, bad[i].rule), "refusal %zu: %s %s", i, e.rule, e.msg);
        fp4_tokenizer_free(t);
        char path[700];
        snprintf(path, sizeof path, "%s/tokenizer.json", dir);
        unlink(path);
        rmdir(dir);
    }
}

int main(void) {
    check_test_name = "test_text_pipeline";
    const char *npm = getenv("FP4_TEXT_NPM");
    CHECK_MSG(npm && *npm, "FP4_TEXT_NPM is not set (run through make test)");
    if (!npm) return check_report();
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s/fp4_pipe_%d", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    mkdir(tmp, 0700);
    refusals(tmp);
    /* the texts: the hand-written ones, then the corpus's first 32 KB cut after newlines near 2 KB */
    FILE *g = popen("gzip -dc tests/data/text/corpus.txt.gz | head -c 32768", "r");
    char *corpus = malloc(32768 + 1);
    size_t cn = g && corpus ? fread(corpus, 1, 32768, g) : 0;
    if (g) pclose(g);
    CHECK_MSG(cn == 32768, "corpus: %zu bytes", cn);
    const char *tx[128];
    size_t tl[128], nt = 0;
    for (size_t i = 0; i < sizeof TEXTS / sizeof TEXTS[0]; i++)
        tx[nt] = TEXTS[i], tl[nt++] = strlen(TEXTS[i]);
    for (size_t pos = 0; pos < cn && nt < 128;) {
        size_t end = pos + 2048 < cn ? pos + 2048 : cn;
        while (end < cn && corpus[end - 1] != '\n')
            end++;
        tx[nt] = corpus + pos, tl[nt++] = end - pos;
        pos = end;
    }
    char tpath[600], opath[600], cmd[8192];
    snprintf(tpath, sizeof tpath, "%s/texts.bin", tmp);
    snprintf(opath, sizeof opath, "%s/out.bin", tmp);
    FILE *f = fopen(tpath, "wb");
    for (size_t i = 0; f && i < nt; i++) {
        uint8_t h[4] = {(uint8_t)tl[i], (uint8_t)(tl[i] >> 8), (uint8_t)(tl[i] >> 16),
                        (uint8_t)(tl[i] >> 24)};
        fwrite(h, 1, 4, f);
        fwrite(tx[i], 1, tl[i], f);
    }
    if (f) fclose(f);
    int k = snprintf(cmd, sizeof cmd,
                     "node tests/text/pipe_oracle.mjs '%s/@huggingface/tokenizers/dist/tokenizers.mjs' "
                     "'%s' '%s'",
                     npm, tpath, opath);
    for (size_t c = 0; c < N_CASES; c++) {
        char dir[700];
        snprintf(dir, sizeof dir, "%s/%s", tmp, CASES[c].name);
        CHECK_MSG(write_case(&CASES[c], dir), "%s: cannot write", CASES[c].name);
        k += snprintf(cmd + k, sizeof cmd - (size_t)k, " '%s'", dir);
    }
    CHECK_MSG(system(cmd) == 0, "the oracle failed: %s", cmd);
    size_t on = 0;
    uint8_t *ob = (uint8_t *)slurp(opath, &on);
    CHECK_MSG(ob != NULL, "no oracle output");
    const uint8_t *p = ob, *end = ob ? ob + on : NULL;
    for (size_t c = 0; ob && c < N_CASES; c++) {
        char dir[700];
        snprintf(dir, sizeof dir, "%s/%s", tmp, CASES[c].name);
        fp4_tokenizer *t = NULL;
        fp4_error e = {0};
        fp4_status st = fp4_tokenizer_load(dir, &t, &e);
        CHECK_MSG(st == FP4_OK, "%s: %s %s", CASES[c].name, e.rule, e.msg);
        size_t bad_ids = 0, bad_dec = 0, bad_stream = 0;
        for (size_t i = 0; i < nt; i++) {
            uint32_t n = rd32(&p, end);
            int32_t *want = malloc(4 * (size_t)n + 4);
            for (uint32_t q = 0; q < n; q++)
                want[q] = (int32_t)rd32(&p, end);
            uint32_t dn = rd32(&p, end);
            const uint8_t *dw = p;
            p = (size_t)(end - p) < dn ? end : p + dn;
            int32_t *ids = NULL;
            size_t ni = 0;
            if (t && fp4_tokenizer_encode(t, tx[i], tl[i], FP4_TOK_PARSE_SPECIAL, &ids, &ni) == FP4_OK &&
                ni == n && (!n || !memcmp(ids, want, 4 * (size_t)n))) {
            } else if (bad_ids++ < 2) {
                fprintf(stderr, "%s: text %zu: ids differ (%zu vs %u):", CASES[c].name, i, ni, n);
                for (size_t q = 0; q < ni && q < 12; q++)
                    fprintf(stderr, " %d", (int)ids[q]);
                fprintf(stderr, " | ");
                for (size_t q = 0; q < n && q < 12; q++)
                    fprintf(stderr, " %d", (int)want[q]);
                fprintf(stderr, "\n");
            }
            char *d = NULL;
            size_t dl = 0;
            if (t && n &&
                (fp4_tokenizer_decode(t, want, n, 0, &d, &dl, &e) || dl != dn || memcmp(d, dw, dn)) &&
                bad_dec++ < 2)
                fprintf(stderr, "%s: text %zu: decode differs: '%.*s' vs '%.*s'\n", CASES[c].name, i,
                        (int)(dl > 80 ? 80 : dl), d ? d : "", (int)(dn > 80 ? 80 : dn), (const char *)dw);
            fp4_detok_stream *sd = NULL;
            size_t sn = 0;
            bool sok = t && fp4_detok_stream_create(t, 0, &sd) == FP4_OK;
            char *sb = malloc(dl + 64);
            for (uint32_t q = 0; sok && q <= n; q++) {
                const char *o;
                size_t ol;
                sok = (q < n ? fp4_detok_stream_push(sd, want[q], &o, &ol, &e)
                             : fp4_detok_stream_flush(sd, &o, &ol)) == FP4_OK &&
                      sn + ol <= dl;
                if (sok) memcpy(sb + sn, o, ol), sn += ol;
            }
            if (n && (!sok || sn != dl || memcmp(sb, d, dl)) && bad_stream++ < 2)
                fprintf(stderr, "%s: text %zu: streaming decode differs\n", CASES[c].name, i);
            fp4_detok_stream_free(sd);
            free(sb);
            free(d);
            free(ids);
            free(want);
        }
        CHECK_MSG(bad_ids == 0 && bad_dec == 0 && bad_stream == 0,
                  "%s: of %zu texts, ids differ in %zu, decode in %zu, streaming in %zu", CASES[c].name, nt,
                  bad_ids, bad_dec, bad_stream);
        printf("  %-18s %zu texts: ids %zu, decode %zu, stream %zu differences\n", CASES[c].name, nt, bad_ids,
               bad_dec, bad_stream);
        fp4_tokenizer_free(t);
        char path[800];
        snprintf(path, sizeof path, "%s/tokenizer.json", dir);
        unlink(path);
        rmdir(dir);
    }
    CHECK_MSG(!ob || p == end, "oracle output longer than expected");
    free(ob);
    free(corpus);
    unlink(tpath);
    unlink(opath);
    rmdir(tmp);
    return check_report();
}
