/* test_text_components.c — the Unigram model, the Precompiled normalizer, StripAccents, Replace with a
 * Regex and single_word added tokens on small hand-made tokenizers, each case's ids as the Rust
 * library (tokenizers 0.22, the N-API build pinned in the Makefile) gives them (the JavaScript
 * reference agrees on the StripAccents / Regex cases; it reads neither the charsmap, byte_fallback of
 * a Unigram model, nor single_word). Then every refusal of the new readers, each beside a valid twin.
 * tests/test_text_unigram.c holds the same components against both references on the 1 MB corpus. */
#include "check.h"
#include "fp4lane_text.h"
#include "fp4lane_io.h"
#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>

/* a Darts double array with one key, "x" -> "y" (the trie's layout as spm_precompiled reads it) */
static char *charsmap_xy(void) {
    enum { N = 0x101 };
    uint8_t b[4 + 4 * N + 2] = {0};
    uint32_t u[N] = {0};
    u[0] = 1u << 10;                                    /* the root: children at 0 ^ 1 */
    u[0x79] = 0x78u | 1u << 8 | (0x79u ^ 0x100u) << 10; /* 'x' at 1 ^ 'x', a leaf at 0x100 */
    u[0x100] = 0;                                       /* the leaf: the string at 0 of the pool */
    b[0] = (uint8_t)(4 * N), b[1] = (uint8_t)((4 * N) >> 8);
    for (int i = 0; i < N; i++)
        for (int k = 0; k < 4; k++)
            b[4 + 4 * i + k] = (uint8_t)(u[i] >> (8 * k));
    b[4 + 4 * N] = 'y';
    static const char a64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t n = sizeof b, k = 0;
    char *o = malloc(n / 3 * 4 + 8);
    for (size_t i = 0; i < n; i += 3) {
        uint32_t w =
            (uint32_t)b[i] << 16 | (i + 1 < n ? (uint32_t)b[i + 1] << 8 : 0) | (i + 2 < n ? b[i + 2] : 0);
        o[k++] = a64[w >> 18 & 63];
        o[k++] = a64[w >> 12 & 63];
        o[k++] = i + 1 < n ? a64[w >> 6 & 63] : '=';
        o[k++] = i + 2 < n ? a64[w & 63] : '=';
    }
    o[k] = 0;
    return o;
}

static json_t *unigram(json_t *normalizer, bool byte_fallback, json_t *added) {
    json_t *v = json_pack("[[s,f],[s,f],[s,f],[s,f],[s,f],[s,f],[s,f],[s,f],[s,f],[s,f],[s,f]]", "<unk>", 0.0,
                          "a", -1.0, "y", -1.0, "b", -1.0, "x", -1.0, "ay", -1.5, "e", -2.0, "<0xC3>", -5.0,
                          "<0xA9>", -5.0, "ab", -1.9, "yb", -2.5);
    return json_pack("{s:s,s:o,s:o,s:n,s:n,s:n,s:{s:s,s:i,s:o,s:b}}", "version", "1.0", "added_tokens",
                     added ? added : json_array(), "normalizer", normalizer ? normalizer : json_null(),
                     "pre_tokenizer", "post_processor", "decoder", "model", "type", "Unigram", "unk_id", 0,
                     "vocab", v, "byte_fallback", byte_fallback);
}

static fp4_status from(json_t *j, fp4_tokenizer **t, fp4_error *err) {
    char *s = json_dumps(j, JSON_COMPACT);
    fp4_status st = fp4_tokenizer_from_json("t.json", s, strlen(s), NULL, 0, t, err);
    free(s);
    return st;
}

typedef struct ucase {
    const char *text, *ids; /* ids: comma-separated, as the Rust library gives them */
} ucase;

static void expect(json_t *j, const char *label, const ucase *cs, int n) {
    fp4_tokenizer *t = NULL;
    fp4_error e = {0};
    fp4_status st = from(j, &t, &e);
    CHECK_MSG(st == FP4_OK, "%s: %s (%s)", label, e.msg, e.rule);
    for (int i = 0; t && i < n; i++) {
        int32_t *ids = NULL;
        size_t ni = 0;
        CHECK_OK(fp4_tokenizer_encode(t, cs[i].text, strlen(cs[i].text), FP4_TOK_PARSE_SPECIAL, &ids, &ni));
        char got[256] = "";
        size_t k = 0;
        for (size_t m = 0; m < ni && k < sizeof got - 16; m++)
            k += (size_t)snprintf(got + k, sizeof got - k, "%s%d", m ? "," : "", (int)ids[m]);
        CHECK_MSG(!strcmp(got, cs[i].ids), "%s: \"%s\": %s, want %s", label, cs[i].text, got, cs[i].ids);
        free(ids);
    }
    fp4_tokenizer_free(t);
    json_decref(j);
}

static void behaviour(void) {
    char *b64 = charsmap_xy();
    /* Viterbi over the pieces: unknown runs fused into one <unk> (id 0) */
    static const ucase plain[] = {{"axb", "1,4,3"},
                                  {"ab", "9"},
                                  {"\xc3\xa9\xc3\xa9", "0"},
                                  {"\xc3\xa9"
                                   "e",
                                   "0,6"},
                                  {"ab ab", "9,0,9"},
                                  {"abab x", "9,9,0,4"}};
    expect(unigram(NULL, false, NULL), "unigram", plain, 6);
    /* Precompiled: "x" -> "y" as a cluster of its own; an accented e is one cluster of 3 bytes */
    static const ucase pre[] = {{"axb", "5,3"},          {"xx", "2,2"},        {"ab", "9"},
                                {"e\xcc\x81x", "6,0,2"}, {"x.ab_", "2,0,9,0"}, {"\xc3\xa9xxxb", "0,2,2,2,3"}};
    expect(unigram(json_pack("{s:s,s:s}", "type", "Precompiled", "precompiled_charsmap", b64), false, NULL),
           "precompiled", pre, 6);
    /* byte_fallback: an unknown run spelled as <0xXX> pieces when all of its bytes have one */
    static const ucase bytes[] = {{"\xc3\xa9\xc3\xa9", "7,8,7,8"},
                                  {"\xc3\xa9"
                                   "e",
                                   "7,8,6"},
                                  {"e\xcc\x81x", "6,0,4"},
                                  {"\xc3\xa9xxxb", "7,8,4,4,4,3"}};
    expect(unigram(NULL, true, NULL), "byte_fallback", bytes, 4);
    /* NFD, StripAccents, Replace(Regex x+ -> y): both references agree */
    static const ucase strip[] = {{"\xc3\xa9xxxb", "6,2,3"},
                                  {"xx", "2"},
                                  {"\xc3\xa9"
                                   "e",
                                   "6,6"},
                                  {"axb", "5,3"}};
    expect(unigram(json_pack("{s:s,s:[{s:s},{s:s},{s:s,s:{s:s},s:s}]}", "type", "Sequence", "normalizers",
                             "type", "NFD", "type", "StripAccents", "type", "Replace", "pattern", "Regex",
                             "x+", "content", "y"),
                   false, NULL),
           "strip+regex", strip, 4);
    /* single_word: q (id 11) and zz (special, lstrip, 12) only where no word character touches them */
    static const ucase sw[] = {
        {"q", "11"},       {"aq", "1,0"},           {"q b", "11,0,3"},    {"qa", "13"},
        {"azz", "1,0"},    {"a zz", "1,12"},        {"a  zz.", "1,12,0"}, {"zzz", "0"},
        {"(q)", "0,11,0"}, {"q\xcc\x81", "0"},      {"_q", "0"},          {"\xc3\xa9 q", "0,11"},
        {"1q", "0"},       {"q zz q", "11,12,0,11"}};
    json_t *added =
        json_pack("[{s:i,s:s,s:b,s:b,s:b,s:b,s:b},{s:i,s:s,s:b,s:b,s:b,s:b,s:b},{s:i,s:s,s:b,s:b}]", "id", 11,
                  "content", "q", "single_word", 1, "lstrip", 0, "rstrip", 0, "normalized", 0, "special", 0,
                  "id", 12, "content", "zz", "single_word", 1, "lstrip", 1, "rstrip", 0, "normalized", 0,
                  "special", 1, "id", 13, "content", "qa", "normalized", 0, "special", 0);
    expect(unigram(NULL, false, added), "single_word", sw, 14);
    free(b64);
}

static void refused(json_t *j, fp4_status code, const char *rule, const char *label) {
    fp4_tokenizer *t = NULL;
    fp4_error e = {0};
    fp4_status st = from(j, &t, &e);
    CHECK_MSG(st == code && !strcmp(e.rule, rule) && !t, "%s: want %s (%s), got %s (%s: %s)", label, rule,
              fp4_status_str(code), e.rule, fp4_status_str(st), e.msg);
    fp4_tokenizer_free(t);
    json_decref(j);
}
static json_t *with_model(const char *key, json_t *v) {
    json_t *j = unigram(NULL, false, NULL);
    json_object_set_new(json_object_get(j, "model"), key, v);
    return j;
}
static json_t *with_norm(json_t *n) {
    return unigram(n, false, NULL);
}

static void rejections(void) {
    refused(with_model("unk_id", json_null()), FP4_ERR_UNSUPPORTED, "tok.unsupported", "no unk_id");
    refused(with_model("unk_id", json_integer(11)), FP4_ERR_FORMAT, "tok.id-range", "unk_id past the pieces");
    refused(with_model("vocab", json_pack("[[s,f],[s,s]]", "<unk>", 0.0, "a", "x")), FP4_ERR_FORMAT,
            "tok.json-type", "a score that is a string");
    refused(with_model("vocab", json_pack("[[s,f],[s]]", "<unk>", 0.0, "a")), FP4_ERR_FORMAT, "tok.json-type",
            "a piece without a score");
    refused(with_model("vocab", json_pack("[[s,f],[s,f]]", "<unk>", 0.0, "", -1.0)), FP4_ERR_FORMAT,
            "tok.token-empty", "an empty piece");
    refused(with_model("vocab", json_pack("[[s,f],[s,f],[s,f]]", "<unk>", 0.0, "a", -1.0, "a", -2.0)),
            FP4_ERR_DUPLICATE, "tok.duplicate-token", "a piece twice");
    refused(with_model("vocab", json_pack("{s:i}", "a", 0)), FP4_ERR_FORMAT, "tok.json-type",
            "a vocab object");
    /* Precompiled blobs */
    static const char *const bad64[] = {"AAA", "AAAA*AAA", "AA=A", "", "AAAAAAAA", "/////wAAAAA="};
    for (int i = 0; i < 6; i++)
        refused(with_norm(json_pack("{s:s,s:s}", "type", "Precompiled", "precompiled_charsmap", bad64[i])),
                FP4_ERR_FORMAT, "tok.charsmap", bad64[i]);
    refused(with_norm(json_pack("{s:s,s:n}", "type", "Precompiled", "precompiled_charsmap")), FP4_ERR_FORMAT,
            "tok.json-type", "no charsmap");
    /* a pool that is not UTF-8: 4-byte trie of one unit, then 0xFF */
    refused(with_norm(json_pack("{s:s,s:s}", "type", "Precompiled", "precompiled_charsmap", "BAAAAAAAAAD/")),
            FP4_ERR_FORMAT, "tok.charsmap", "pool not UTF-8");
    /* its valid twin: the same trie, an ASCII pool */
    fp4_tokenizer *t = NULL;
    fp4_error e = {0};
    json_t *ok =
        with_norm(json_pack("{s:s,s:s}", "type", "Precompiled", "precompiled_charsmap", "BAAAAAAAAABh"));
    CHECK_OK(from(ok, &t, &e));
    int32_t *ids = NULL;
    size_t ni = 0;
    if (t) CHECK_OK(fp4_tokenizer_encode(t, "ab", 2, 0, &ids, &ni));
    CHECK(ni == 1 && ids && ids[0] == 9);
    free(ids);
    fp4_tokenizer_free(t);
    json_decref(ok);
    /* Replace with a Regex */
    refused(
        with_norm(json_pack("{s:s,s:{s:s},s:s}", "type", "Replace", "pattern", "Regex", "(a", "content", "")),
        FP4_ERR_FORMAT, "tok.regex", "a regex that does not compile");
    refused(with_norm(
                json_pack("{s:s,s:{s:s},s:s}", "type", "Replace", "pattern", "Regex", "a*", "content", "b")),
            FP4_ERR_UNSUPPORTED, "tok.unsupported", "a regex that matches nothing");
    refused(with_norm(
                json_pack("{s:s,s:{s:s},s:s}", "type", "Replace", "pattern", "Regex", "a", "content", "$&")),
            FP4_ERR_UNSUPPORTED, "tok.unsupported", "content with $");
    refused(with_norm(json_pack("{s:s,s:{s:s},s:s}", "type", "Replace", "pattern", "Regex", "a", "content",
                                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")),
            FP4_ERR_LIMIT, "tok.replace-growth", "content 33 times the match");
    /* single_word has no GGUF form */
    json_t *sw = json_load_file("tests/data/text/tiny_bytelevel.json", 0, NULL);
    CHECK(sw != NULL);
    json_object_set_new(json_array_get(json_object_get(sw, "added_tokens"), 0), "single_word", json_true());
    t = NULL;
    CHECK_OK(from(sw, &t, &e));
    fp4_gguf_writer *w = NULL;
    CHECK_OK(fp4_gguf_writer_create(&w, &e));
    if (t && w) {
        fp4_status st = fp4_tokenizer_write_gguf(t, w, &e);
        CHECK_MSG(st == FP4_ERR_UNSUPPORTED && !strcmp(e.rule, "tok.gguf-added"),
                  "single_word to GGUF: %s %s", fp4_status_str(st), e.rule);
    }
    fp4_gguf_writer_free(w);
    fp4_tokenizer_free(t);
    json_decref(sw);
    /* nor has a Unigram model */
    json_t *u = unigram(NULL, false, NULL);
    t = NULL, w = NULL;
    CHECK_OK(from(u, &t, &e));
    CHECK_OK(fp4_gguf_writer_create(&w, &e));
    if (t && w) {
        fp4_status st = fp4_tokenizer_write_gguf(t, w, &e);
        CHECK_MSG(st == FP4_ERR_UNSUPPORTED && !strcmp(e.rule, "tok.gguf-shape"), "Unigram to GGUF: %s %s",
                  fp4_status_str(st), e.rule);
    }
    fp4_gguf_writer_free(w);
    fp4_tokenizer_free(t);
    json_decref(u);
}

int main(void) {
    behaviour();
    rejections();
    return check_report();
}
