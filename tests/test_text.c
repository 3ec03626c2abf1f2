/* test_text.c — the tokenizers on small files: every loader refusal (tokenizer.json and GGUF) by
 * its rule, each next to a valid twin; special-token matching only where allowed; the template;
 * invalid UTF-8; ids out of range; the streaming detokenizer on a character cut in three; a 1 MB
 * whitespace run; GGUF llama files without merges (score rule); the tokenize/detokenize verbs. */
#include "check.h"
#include "fp4lane_text.h"
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
static fp4_error gerr; /* the GGUF writer's error (these callers check the status only) */

static char tmpdir[512];

static json_t *load_json(const char *path) {
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    CHECK_MSG(j != NULL, "%s: %s", path, e.text);
    return j;
}

/* from_json on a JSON value; returns the status and fills err */
static fp4_status from(json_t *j, fp4_tokenizer **t, fp4_error *err) {
    char *s = json_dumps(j, JSON_COMPACT);
    fp4_status st = fp4_tokenizer_from_json("t.json", s, strlen(s), NULL, 0, t, err);
    free(s);
    return st;
}

/* a mutated copy must be refused with rule (and code), the original must load */
static void expect_refused(json_t *orig, json_t *mut, fp4_status code, const char *rule) {
    fp4_tokenizer *t = NULL;
    fp4_error e;
    memset(&e, 0, sizeof e);
    fp4_status st = from(mut, &t, &e);
    CHECK_MSG(st == code && !strcmp(e.rule, rule) && t == NULL && e.msg[0],
              "want %s (%s), got %s (%s: %s)", rule, fp4_status_str(code), e.rule, fp4_status_str(st), e.msg);
    fp4_tokenizer_free(t);
    CHECK_OK(from(orig, &t, &e));
    fp4_tokenizer_free(t);
    json_decref(mut);
}

static json_t *model(json_t *j) { return json_object_get(j, "model"); }

static void json_rejections(void) {
    json_t *bl = load_json("tests/data/text/tiny_bytelevel.json");
    CHECK(bl != NULL);
    if (!bl) return;
    fp4_tokenizer *t = NULL;
    fp4_error e;
    CHECK(fp4_tokenizer_from_json("x", "{\"model\":", 9, NULL, 0, &t, &e) == FP4_ERR_FORMAT &&
          !strcmp(e.rule, "tok.json"));
    CHECK(fp4_tokenizer_from_json("x", "[]", 2, NULL, 0, &t, &e) == FP4_ERR_FORMAT &&
          !strcmp(e.rule, "tok.json"));
    json_t *j;
    j = json_deep_copy(bl), json_object_del(j, "model");
    expect_refused(bl, j, FP4_ERR_FORMAT, "tok.json-type");
    /* a Unigram model reads a vocab array ([piece, score]): the BPE's object is malformed there */
    j = json_deep_copy(bl), json_object_set_new(model(j), "type", json_string("Unigram"));
    expect_refused(bl, j, FP4_ERR_FORMAT, "tok.json-type");
    j = json_deep_copy(bl), json_object_set_new(model(j), "type", json_string("WordLevel"));
    expect_refused(bl, j, FP4_ERR_UNSUPPORTED, "tok.unsupported");
    j = json_deep_copy(bl), json_object_set_new(model(j), "dropout", json_real(0.1));
    expect_refused(bl, j, FP4_ERR_UNSUPPORTED, "tok.unsupported");
    j = json_deep_copy(bl), json_object_set_new(model(j), "continuing_subword_prefix", json_string("##"));
    expect_refused(bl, j, FP4_ERR_UNSUPPORTED, "tok.unsupported");
    j = json_deep_copy(bl), json_object_set_new(j, "normalizer", json_pack("{s:s}", "type", "ByteLevel"));
    expect_refused(bl, j, FP4_ERR_UNSUPPORTED, "tok.unsupported");
    j = json_deep_copy(bl), json_object_set_new(j, "decoder", json_pack("{s:s}", "type", "CTC"));
    expect_refused(bl, j, FP4_ERR_UNSUPPORTED, "tok.unsupported");
    j = json_deep_copy(bl);
    json_object_set_new(
        json_array_get(json_object_get(json_object_get(j, "pre_tokenizer"), "pretokenizers"), 0), "behavior",
        json_string("MergedWithNext"));
    expect_refused(bl, j, FP4_ERR_UNSUPPORTED, "tok.unsupported");
    /* regexes: one that does not compile, one whose meaning differs between engines */
    j = json_deep_copy(bl);
    json_object_set_new(
        json_object_get(
            json_array_get(json_object_get(json_object_get(j, "pre_tokenizer"), "pretokenizers"), 0),
            "pattern"),
        "Regex", json_string("(ab"));
    expect_refused(bl, j, FP4_ERR_FORMAT, "tok.regex");
    j = json_deep_copy(bl);
    json_object_set_new(
        json_object_get(
            json_array_get(json_object_get(json_object_get(j, "pre_tokenizer"), "pretokenizers"), 0),
            "pattern"),
        "Regex", json_string("\\w+"));
    expect_refused(bl, j, FP4_ERR_UNSUPPORTED, "tok.regex");
    /* the o200k pattern (gpt-oss) translates and compiles; the valid twin of the refusals above */
    j = json_deep_copy(bl);
    json_object_set_new(
        json_object_get(
            json_array_get(json_object_get(json_object_get(j, "pre_tokenizer"), "pretokenizers"), 0),
            "pattern"),
        "Regex",
        json_string("[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]"
                    "+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
                    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}"
                    "]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
                    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"));
    CHECK_OK(from(j, &t, &e));
    if (t) {
        int32_t *ids = NULL;
        size_t ni = 0;
        CHECK_OK(fp4_tokenizer_encode(t, "HelloWorld it'S", 15, 0, &ids, &ni));
        char *txt = NULL;
        size_t tl = 0;
        CHECK_OK(fp4_tokenizer_decode(t, ids, ni, 0, &txt, &tl, &e));
        CHECK(tl == 15 && !memcmp(txt, "HelloWorld it'S", 15));
        free(ids);
        free(txt);
    }
    fp4_tokenizer_free(t);
    t = NULL;
    json_decref(j);
    /* ids */
    j = json_deep_copy(bl), json_object_set_new(json_object_get(model(j), "vocab"), "zz", json_integer(-1));
    expect_refused(bl, j, FP4_ERR_FORMAT, "tok.id-range");
    j = json_deep_copy(bl),
    json_object_set_new(json_object_get(model(j), "vocab"), "zz", json_integer(FP4_TOK_MAX_VOCAB));
    expect_refused(bl, j, FP4_ERR_FORMAT, "tok.id-range");
    j = json_deep_copy(bl), json_object_set_new(json_object_get(model(j), "vocab"), "zz", json_integer(5));
    expect_refused(bl, j, FP4_ERR_DUPLICATE, "tok.duplicate-id");
    j = json_deep_copy(bl), json_object_set_new(json_object_get(model(j), "vocab"), "", json_integer(4000));
    expect_refused(bl, j, FP4_ERR_FORMAT, "tok.token-empty");
    j = json_deep_copy(bl), json_object_set_new(model(j), "vocab", json_object());
    json_object_set_new(j, "added_tokens", json_array());
    json_object_set_new(model(j), "merges", json_array());
    json_object_set_new(j, "post_processor", json_null());
    expect_refused(bl, j, FP4_ERR_FORMAT, "tok.empty");
    /* added tokens */
    j = json_deep_copy(bl);
    json_array_append_new(json_object_get(j, "added_tokens"),
                          json_pack("{s:i,s:s,s:b}", "id", 300, "content", "<|end|>", "special", 1));
    expect_refused(bl, j, FP4_ERR_DUPLICATE, "tok.duplicate-token");
    j = json_deep_copy(bl);
    json_array_append_new(json_object_get(j, "added_tokens"),
                          json_pack("{s:i,s:s,s:b}", "id", 65, "content", "<x>", "special", 1));
    expect_refused(bl, j, FP4_ERR_FORMAT, "tok.added-conflict");
    j = json_deep_copy(bl);
    json_array_append_new(json_object_get(j, "added_tokens"),
                          json_pack("{s:i,s:s,s:b}", "id", 300, "content", "", "special", 1));
    expect_refused(bl, j, FP4_ERR_FORMAT, "tok.added-empty");
    j = json_deep_copy(bl);
    json_t *dup = json_deep_copy(json_array_get(json_object_get(j, "added_tokens"), 0));
    json_object_set_new(dup, "content", json_string("<other>"));
    json_array_append_new(json_object_get(j, "added_tokens"), dup);
    expect_refused(bl, j, FP4_ERR_DUPLICATE, "tok.duplicate-added");
    /* issue 29: several Splits (DeepSeek-V3), a String pattern and MergedWithPrevious (Gemma 3); such a
     * pre-tokenizer has no GGUF form. " t" is one piece when the match "t" joins the space before
     * it (the merge "Ġ t" applies), two when isolated. */
    for (int merged = 0; merged < 2; merged++) {
        j = json_deep_copy(bl);
        json_t *seq = json_array();
        json_array_append_new(seq, json_pack("{s:s,s:{s:s},s:s,s:b}", "type", "Split", "pattern", "Regex",
                                             "\\p{N}", "behavior", "Isolated", "invert", 0));
        const char *beh = merged ? "MergedWithPrevious" : "Isolated";
        json_array_append_new(seq, json_pack("{s:s,s:{s:s},s:s,s:b}", "type", "Split", "pattern", "String",
                                             "t", "behavior", beh, "invert", 0));
        json_array_append_new(seq, json_pack("{s:s,s:b,s:b}", "type", "ByteLevel", "add_prefix_space", 0,
                                             "use_regex", 0));
        json_object_set_new(j, "pre_tokenizer",
                            json_pack("{s:s,s:o}", "type", "Sequence", "pretokenizers", seq));
        CHECK_OK(from(j, &t, &e));
        if (t) {
            int32_t *ids = NULL;
            size_t ni = 0;
            CHECK_OK(fp4_tokenizer_encode(t, " t", 2, 0, &ids, &ni));
            CHECK_MSG(ni == (merged ? 1u : 2u), "merged %d: %zu ids", merged, ni);
            free(ids);
            fp4_gguf_writer *w = NULL;
            CHECK_OK(fp4_gguf_writer_create(&w, &gerr));
            CHECK(fp4_tokenizer_write_gguf(t, w, &e) == FP4_ERR_UNSUPPORTED);
            fp4_gguf_writer_free(w);
        }
        fp4_tokenizer_free(t);
        t = NULL;
        json_decref(j);
    }
    /* an empty merges array: refused where the vocabulary has tokens merges alone could make
     * (issue 27 item 25); legitimate with single-character tokens only, or with ignore_merges */
    j = json_deep_copy(bl), json_object_set_new(model(j), "merges", json_array());
    expect_refused(bl, j, FP4_ERR_FORMAT, "tok.merges-empty");
    {
        j = json_deep_copy(bl);
        json_object_set_new(model(j), "merges", json_array());
        json_object_set_new(model(j), "ignore_merges", json_true());
        CHECK_OK(from(j, &t, &e));
        fp4_tokenizer_free(t);
        t = NULL;
        json_t *v = json_object(), *old = json_object_get(model(j), "vocab");
        const char *k;
        json_t *x;
        json_object_foreach(old, k, x) {
            size_t l = strlen(k), c1 = (unsigned char)k[0] < 0x80 ? 1 : (unsigned char)k[0] < 0xE0 ? 2 : 3;
            if (l == c1) json_object_set(v, k, x);
        }
        json_object_set_new(model(j), "vocab", v);
        json_object_set_new(model(j), "ignore_merges", json_false());
        CHECK_OK(from(j, &t, &e)); /* single characters only: a byte-level vocabulary as HF allows */
        if (t) {
            int32_t *ids = NULL;
            size_t ni = 0;
            CHECK_OK(fp4_tokenizer_encode(t, "the", 3, 0, &ids, &ni));
            CHECK(ni == 3);
            free(ids);
        }
        fp4_tokenizer_free(t);
        t = NULL;
        json_decref(j);
    }
    /* merges */
    j = json_deep_copy(bl),
    json_array_append_new(json_object_get(model(j), "merges"), json_pack("[ss]", "q", "\xe2\x82\xac"));
    expect_refused(bl, j, FP4_ERR_FORMAT, "tok.merge-unknown");
    j = json_deep_copy(bl),
    json_array_append_new(json_object_get(model(j), "merges"), json_pack("[ss]", "q", "q"));
    expect_refused(bl, j, FP4_ERR_FORMAT, "tok.merge-result");
    j = json_deep_copy(bl), json_array_append(json_object_get(model(j), "merges"),
                                              json_array_get(json_object_get(model(j), "merges"), 1));
    expect_refused(bl, j, FP4_ERR_DUPLICATE, "tok.merge-duplicate");
    j = json_deep_copy(bl), json_array_append_new(json_object_get(model(j), "merges"), json_string("a b c"));
    expect_refused(bl, j, FP4_ERR_FORMAT, "tok.merge-form");
    j = json_deep_copy(bl), json_array_append_new(json_object_get(model(j), "merges"), json_integer(3));
    expect_refused(bl, j, FP4_ERR_FORMAT, "tok.merge-form");
    j = json_deep_copy(bl), json_object_set_new(model(j), "unk_token", json_string("<nope>"));
    expect_refused(bl, j, FP4_ERR_FORMAT, "tok.unk-unknown");
    j = json_deep_copy(bl);
    json_object_set_new(
        json_object_get(json_array_get(json_object_get(json_object_get(j, "post_processor"), "single"), 0),
                        "SpecialToken"),
        "id", json_string("<nope>"));
    expect_refused(bl, j, FP4_ERR_FORMAT, "tok.template-unknown");
    /* a vocabulary string with U+0000 in it: jansson refuses NUL in object keys (a known limit;
     * no real vocabulary has one), never a silently shortened token */
    j = json_deep_copy(bl);
    json_object_setn_new(json_object_get(model(j), "vocab"), "a\0b", 3, json_integer(4000));
    CHECK(from(j, &t, &e) == FP4_ERR_FORMAT && !strcmp(e.rule, "tok.json") && !t);
    json_decref(j);
    /* a tokenizer_config.json option that changes encoding and is not applied: refused */
    {
        char *js = json_dumps(bl, JSON_COMPACT);
        const char *cfg_bad = "{\"remove_space\": true}",
                   *cfg_ok = "{\"remove_space\": false, \"eos_token\": \"<|end|>\"}";
        CHECK(fp4_tokenizer_from_json("x", js, strlen(js), cfg_bad, strlen(cfg_bad), &t, &e) ==
                  FP4_ERR_UNSUPPORTED &&
              !strcmp(e.rule, "tok.unsupported") && !strcmp(e.tensor, "remove_space"));
        CHECK_OK(fp4_tokenizer_from_json("x", js, strlen(js), cfg_ok, strlen(cfg_ok), &t, &e));
        CHECK(t && fp4_tokenizer_eos(t) == fp4_tokenizer_find(t, "<|end|>", 7) &&
              fp4_tokenizer_cleanup_default(t) == 1);
        fp4_tokenizer_free(t);
        t = NULL;
        free(js);
    }
    /* duplicate keys in the JSON itself */
    CHECK(fp4_tokenizer_from_json("x", "{\"model\":{},\"model\":{}}", 24, NULL, 0, &t, &e) ==
              FP4_ERR_FORMAT &&
          !strcmp(e.rule, "tok.json"));
    json_decref(bl);
}

/* GGUF: write the tiny tokenizers, reread; then mutate keys one at a time */
typedef struct gkv {
    const char *drop;   /* key left out */
    const char *key;    /* key added or replaced, with a u32 or string value */
    int is_str;
    const char *s;
    uint32_t u;
} gkv;

static fp4_status gguf_variant(const fp4_tokenizer *t, const gkv *v, fp4_tokenizer **out, fp4_error *err) {
    /* write t's keys into a first file, then copy every key except the mutated ones into a second */
    char p1[600], p2[600];
    snprintf(p1, sizeof p1, "%s/a.gguf", tmpdir);
    snprintf(p2, sizeof p2, "%s/b.gguf", tmpdir);
    fp4_gguf_writer *w = NULL;
    fp4_error e;
    fp4_gguf_writer_create(&w, &gerr);
    CHECK_OK(fp4_tokenizer_write_gguf(t, w, &e));
    CHECK_OK(fp4_gguf_writer_write_header(w, p1, &gerr));
    CHECK_OK(fp4_gguf_writer_finish(w, &gerr));
    fp4_gguf_writer_free(w);
    fp4_gguf *g = NULL;
    CHECK_OK(fp4_gguf_open(p1, &g, &e));
    fp4_gguf_writer_create(&w, &gerr);
    for (int64_t i = 0; g && i < fp4_gguf_n_kv(g); i++) {
        const char *k = fp4_gguf_key(g, i);
        if ((v->drop && !strcmp(k, v->drop)) || (v->key && !strcmp(k, v->key))) continue;
        fp4_gguf_type ty = fp4_gguf_kv_type(g, i);
        if (ty == FP4_GGUF_STRING) {
            const char *s;
            uint64_t l;
            fp4_gguf_get_str(g, i, &s, &l);
            fp4_gguf_writer_add_str(w, k, s, l, &gerr);
        } else if (ty == FP4_GGUF_UINT32) {
            uint32_t u;
            fp4_gguf_get_u32(g, i, &u);
            fp4_gguf_writer_add_u32(w, k, u, &gerr);
        } else if (ty == FP4_GGUF_BOOL) {
            int b;
            fp4_gguf_get_bool(g, i, &b);
            fp4_gguf_writer_add_bool(w, k, b, &gerr);
        } else if (fp4_gguf_arr_type(g, i) == FP4_GGUF_STRING) {
            int64_t n;
            fp4_gguf_get_arr_str_count(g, i, &n);
            const char **ss = calloc((size_t)n + 1, sizeof *ss);
            uint64_t *ll = calloc((size_t)n + 1, sizeof *ll);
            for (int64_t j = 0; j < n; j++) fp4_gguf_get_arr_str(g, i, j, &ss[j], &ll[j]);
            fp4_gguf_writer_add_arr_str(w, k, ss, ll, n, &gerr);
            free(ss);
            free(ll);
        } else {
            const void *d;
            int64_t n;
            fp4_gguf_type et = fp4_gguf_arr_type(g, i);
            fp4_gguf_get_arr(g, i, et, &d, &n);
            void *copy = malloc((size_t)n * fp4_gguf_type_size(et) + 1);
            memcpy(copy, d, (size_t)n * fp4_gguf_type_size(et)); /* little-endian host */
            fp4_gguf_writer_add_arr(w, k, et, copy, n, &gerr);
            free(copy);
        }
    }
    if (v->key) {
        if (v->is_str) fp4_gguf_writer_add_str(w, v->key, v->s, strlen(v->s), &gerr);
        else fp4_gguf_writer_add_u32(w, v->key, v->u, &gerr);
    }
    fp4_gguf_close(g);
    CHECK_OK(fp4_gguf_writer_write_header(w, p2, &gerr));
    CHECK_OK(fp4_gguf_writer_finish(w, &gerr));
    fp4_gguf_writer_free(w);
    fp4_status st = fp4_tokenizer_load(p2, out, err);
    unlink(p1);
    unlink(p2);
    return st;
}

static void gguf_rejections(void) {
    fp4_tokenizer *bl = NULL, *spm = NULL, *t = NULL;
    fp4_error e;
    CHECK_OK(fp4_tokenizer_load("tests/data/text/tiny_bytelevel.json", &bl, &e));
    CHECK_OK(fp4_tokenizer_load("tests/data/text/tiny_spm.json", &spm, &e));
    if (!bl || !spm) return;
    static const struct {
        gkv v;
        fp4_status code;
        const char *rule;
    } cases[] = {
        {{NULL, NULL, 0, NULL, 0}, FP4_OK, ""},
        {{"tokenizer.ggml.model", NULL, 0, NULL, 0}, FP4_ERR_NOT_FOUND, "tok.gguf-missing"},
        {{NULL, "tokenizer.ggml.model", 1, "t5", 0}, FP4_ERR_UNSUPPORTED, "tok.gguf-model"},
        {{"tokenizer.ggml.merges", "tokenizer.ggml.model", 1, "gemma4", 0}, FP4_ERR_NOT_FOUND,
         "tok.gguf-missing"},
        {{NULL, "tokenizer.ggml.model", 0, NULL, 7}, FP4_ERR_DTYPE, "tok.gguf-type"},
        {{"tokenizer.ggml.tokens", NULL, 0, NULL, 0}, FP4_ERR_NOT_FOUND, "tok.gguf-missing"},
        {{"tokenizer.ggml.merges", NULL, 0, NULL, 0}, FP4_ERR_NOT_FOUND, "tok.gguf-missing"},
        {{NULL, "tokenizer.ggml.pre", 1, "deepseek-v9", 0}, FP4_ERR_UNSUPPORTED, "tok.gguf-pre"},
        {{NULL, "tokenizer.ggml.bos_token_id", 0, NULL, 100000}, FP4_ERR_FORMAT, "tok.id-range"},
        {{NULL, "tokenizer.ggml.token_type", 0, NULL, 1}, FP4_ERR_FORMAT, "tok.gguf-type"},
        {{NULL, "tokenizer.ggml.add_bos_token", 1, "yes", 0}, FP4_ERR_DTYPE, "tok.gguf-type"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memset(&e, 0, sizeof e);
        fp4_status st = gguf_variant(bl, &cases[i].v, &t, &e);
        CHECK_MSG(st == cases[i].code && !strcmp(e.rule, cases[i].rule), "case %zu: %s %s", i, e.rule, e.msg);
        if (st == FP4_OK) { /* the valid twin encodes like the JSON */
            int32_t *a = NULL, *b = NULL;
            size_t na = 0, nb = 0;
            const char *txt = "The then in 1234 \xe6\x97\xa5\xe6\x9c\xac <|end|><think>x";
            CHECK_OK(fp4_tokenizer_encode(bl, txt, strlen(txt), FP4_TOK_PARSE_SPECIAL | FP4_TOK_ADD_SPECIAL,
                                          &a, &na));
            CHECK_OK(fp4_tokenizer_encode(t, txt, strlen(txt), FP4_TOK_PARSE_SPECIAL | FP4_TOK_ADD_SPECIAL,
                                          &b, &nb));
            CHECK(na == nb && na > 5 && !memcmp(a, b, na * sizeof *a));
            free(a);
            free(b);
        }
        fp4_tokenizer_free(t);
        t = NULL;
    }
    /* llama: without scores and merges; valid twin */
    gkv v0 = {NULL, NULL, 0, NULL, 0}, v1 = {"tokenizer.ggml.merges", NULL, 0, NULL, 0};
    CHECK_OK(gguf_variant(spm, &v0, &t, &e));
    fp4_tokenizer_free(t);
    t = NULL;
    CHECK_OK(gguf_variant(spm, &v1, &t, &e)); /* scores only: llama.cpp's rule */
    if (t) {
        int32_t *a = NULL;
        size_t na = 0;
        CHECK_OK(fp4_tokenizer_encode(t, "the", 3, 0, &a, &na));
        /* "▁the" via ▁t + he: the written scores rank the merge results like the merges did */
        CHECK(na == 1 && a && a[0] == fp4_tokenizer_find(t, "\xe2\x96\x81the", 6));
        free(a);
    }
    fp4_tokenizer_free(t);
    t = NULL;
    /* writing refuses what GGUF cannot say */
    json_t *j = load_json("tests/data/text/tiny_bytelevel.json");
    json_object_set_new(json_array_get(json_object_get(j, "added_tokens"), 1), "rstrip", json_true());
    CHECK_OK(from(j, &t, &e));
    fp4_gguf_writer *w = NULL;
    fp4_gguf_writer_create(&w, &gerr);
    CHECK(fp4_tokenizer_write_gguf(t, w, &e) == FP4_ERR_UNSUPPORTED && !strcmp(e.rule, "tok.gguf-added"));
    fp4_tokenizer_free(t);
    t = NULL;
    json_object_set_new(json_array_get(json_object_get(j, "added_tokens"), 1), "rstrip", json_false());
    json_object_set_new(model(j), "ignore_merges", json_true());
    CHECK_OK(from(j, &t, &e));
    CHECK(fp4_tokenizer_write_gguf(t, w, &e) == FP4_ERR_UNSUPPORTED && !strcmp(e.rule, "tok.gguf-shape"));
    fp4_gguf_writer_free(w);
    fp4_tokenizer_free(t);
    json_decref(j);
    fp4_tokenizer_free(bl);
    fp4_tokenizer_free(spm);
}

static int ids_eq(const fp4_tokenizer *t, const char *s, size_t n, unsigned flags, const int32_t *want,
                  size_t nw) {
    int32_t *a = NULL;
    size_t na = 0;
    if (fp4_tokenizer_encode(t, s, n, flags, &a, &na) != FP4_OK) return 0;
    int ok = na == nw && (!nw || !memcmp(a, want, nw * sizeof *a));
    free(a);
    return ok;
}

static void behaviour(void) {
    fp4_tokenizer *t = NULL, *s = NULL;
    fp4_error e;
    CHECK_OK(fp4_tokenizer_load("tests/data/text/tiny_bytelevel.json", &t, &e));
    CHECK_OK(fp4_tokenizer_load("tests/data/text/tiny_spm.json", &s, &e));
    if (!t || !s) return;
    int32_t end = fp4_tokenizer_find(t, "<|end|>", 7), think = fp4_tokenizer_find(t, "<think>", 7);
    CHECK(end >= 0 && think >= 0 && fp4_tokenizer_is_special(t, end) && !fp4_tokenizer_is_special(t, think));
    /* special tokens only with PARSE_SPECIAL; the non-special added token always */
    int32_t *a = NULL;
    size_t na = 0;
    CHECK_OK(fp4_tokenizer_encode(t, "<|end|>", 7, 0, &a, &na));
    CHECK(na > 1);
    for (size_t i = 0; i < na; i++) CHECK(a[i] != end);
    free(a);
    CHECK(ids_eq(t, "<|end|>", 7, FP4_TOK_PARSE_SPECIAL, &end, 1));
    CHECK(ids_eq(t, "<think>", 7, 0, &think, 1));
    /* the template adds the BOS only on request */
    int32_t two[2] = {end, think};
    CHECK(ids_eq(t, "<think>", 7, FP4_TOK_ADD_SPECIAL, two, 2));
    CHECK(fp4_tokenizer_bos(t) == end);
    /* invalid UTF-8: each maximal invalid subpart is one U+FFFD */
    int32_t *b = NULL;
    size_t nb = 0;
    CHECK_OK(fp4_tokenizer_encode(t, "a\xe2\x82" "b\xff", 5, 0, &a, &na));
    CHECK_OK(fp4_tokenizer_encode(t, "a\xef\xbf\xbd" "b\xef\xbf\xbd", 8, 0, &b, &nb));
    CHECK(na == nb && na > 0 && !memcmp(a, b, na * sizeof *a));
    char *txt = NULL;
    size_t tl = 0;
    CHECK_OK(fp4_tokenizer_decode(t, a, na, 0, &txt, &tl, &e));
    CHECK(tl == 8 && txt && !memcmp(txt, "a\xef\xbf\xbd" "b\xef\xbf\xbd", 8));
    free(txt);
    free(a);
    free(b);
    /* empty text, NULL text with length 0 */
    CHECK_OK(fp4_tokenizer_encode(t, NULL, 0, FP4_TOK_ADD_SPECIAL, &a, &na));
    CHECK(na == 1 && a[0] == end);
    free(a);
    CHECK(fp4_tokenizer_encode(t, NULL, 3, 0, &a, &na) == FP4_ERR_INVALID_ARG);
    /* ids out of range: a clear refusal */
    int32_t bad[3] = {1, fp4_tokenizer_n_vocab(t), 2};
    txt = NULL;
    CHECK(fp4_tokenizer_decode(t, bad, 3, 0, &txt, &tl, &e) == FP4_ERR_INVALID_ARG && !txt &&
          !strcmp(e.rule, "tok.decode-id") && strstr(e.msg, "position 1"));
    bad[1] = -5;
    CHECK(fp4_tokenizer_decode(t, bad, 3, 0, &txt, &tl, &e) == FP4_ERR_INVALID_ARG &&
          !strcmp(e.rule, "tok.decode-id"));
    /* skip special */
    int32_t sk[3] = {end, 84, end};
    CHECK_OK(fp4_tokenizer_decode(t, sk, 3, FP4_TOK_SKIP_SPECIAL, &txt, &tl, &e));
    CHECK(tl == 1 && txt[0] == 'T');
    free(txt);
    /* streaming: 日 (e6 97 a5) as three byte tokens comes out whole, once */
    fp4_detok_stream *st = NULL;
    CHECK_OK(fp4_detok_stream_create(t, 0, &st));
    const char *o;
    size_t ol;
    int32_t by[3] = {fp4_tokenizer_find(t, "\xc3\xa6", 2), fp4_tokenizer_find(t, "\xc4\xb9", 2),
                     fp4_tokenizer_find(t, "\xc2\xa5", 2)};
    CHECK(by[0] >= 0 && by[1] >= 0 && by[2] >= 0);
    CHECK(st && fp4_detok_stream_push(st, by[0], &o, &ol, &e) == FP4_OK && ol == 0);
    CHECK(st && fp4_detok_stream_push(st, by[1], &o, &ol, &e) == FP4_OK && ol == 0);
    CHECK(st && fp4_detok_stream_push(st, by[2], &o, &ol, &e) == FP4_OK && ol == 3 &&
          !memcmp(o, "\xe6\x97\xa5", 3));
    /* a cut character at the end: flush gives U+FFFD, as decode does */
    CHECK(st && fp4_detok_stream_push(st, by[0], &o, &ol, &e) == FP4_OK && ol == 0);
    CHECK(st && fp4_detok_stream_flush(st, &o, &ol) == FP4_OK && ol == 3 && !memcmp(o, "\xef\xbf\xbd", 3));
    CHECK(st && fp4_detok_stream_push(st, 1 << 30, &o, &ol, &e) == FP4_ERR_INVALID_ARG &&
          !strcmp(e.rule, "tok.decode-id"));
    fp4_detok_stream_free(st);
    /* SentencePiece: byte fallback, the leading space stripped once, streaming alike */
    CHECK_OK(fp4_tokenizer_encode(s, " the \xe2\x82\xac", 8, 0, &a, &na));
    CHECK_OK(fp4_tokenizer_decode(s, a, na, 0, &txt, &tl, &e));
    CHECK(tl == 8 && !memcmp(txt, " the \xe2\x82\xac", 8));
    CHECK_OK(fp4_detok_stream_create(s, 0, &st));
    char acc[64];
    size_t an = 0;
    for (size_t i = 0; st && i <= na; i++) {
        fp4_status r =
            i < na ? fp4_detok_stream_push(st, a[i], &o, &ol, &e) : fp4_detok_stream_flush(st, &o, &ol);
        CHECK(r == FP4_OK && an + ol < sizeof acc);
        if (r == FP4_OK && an + ol < sizeof acc) memcpy(acc + an, o, ol), an += ol;
    }
    CHECK(an == tl && !memcmp(acc, txt, tl));
    fp4_detok_stream_free(st);
    free(txt);
    free(a);
    /* a 1 MB run of spaces and one of letters: no regex limit is hit */
    size_t big = 1 << 20;
    char *sp = malloc(big);
    memset(sp, ' ', big);
    CHECK_OK(fp4_tokenizer_encode(t, sp, big, 0, &a, &na));
    free(a);
    memset(sp, 'x', big);
    CHECK_OK(fp4_tokenizer_encode(t, sp, big, 0, &a, &na));
    CHECK(na == big);
    free(a);
    CHECK_OK(fp4_tokenizer_encode(s, sp, big, 0, &a, &na));
    free(a);
    free(sp);
    fp4_tokenizer_free(t);
    fp4_tokenizer_free(s);
}

static int run(const char *cmd, char *out, size_t cap) {
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    int rc = pclose(p);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void cli(void) {
    const char *b = getenv("FP4_BUILD") ? getenv("FP4_BUILD") : "build";
    char cmd[2048], out[4096];
    snprintf(cmd, sizeof cmd, "%s/fp4lane tokenize tests/data/text/tiny_bytelevel.json 'The <|end|>' --json",
             b);
    CHECK(run(cmd, out, sizeof out) == 0 && strstr(out, "\"ids\":[84,257,32,60,124,101,110,100,124,62]") &&
          strstr(out, "\"tokens\":[\"T\",\"he\""));
    snprintf(
        cmd, sizeof cmd,
        "%s/fp4lane tokenize tests/data/text/tiny_bytelevel.json 'The <|end|>' --parse-special --add-special",
        b);
    CHECK(run(cmd, out, sizeof out) == 0 && !strcmp(out, "265 84 257 32 265\n"));
    snprintf(
        cmd, sizeof cmd,
        "printf 'The' > %s/in.txt && %s/fp4lane tokenize tests/data/text/tiny_bytelevel.json -f %s/in.txt",
        tmpdir, b, tmpdir);
    CHECK(run(cmd, out, sizeof out) == 0 && !strcmp(out, "84 257\n"));
    snprintf(cmd, sizeof cmd, "%s/fp4lane detokenize tests/data/text/tiny_bytelevel.json 84,257 32 265", b);
    CHECK(run(cmd, out, sizeof out) == 0 && !strcmp(out, "The <|end|>"));
    snprintf(cmd, sizeof cmd, "%s/fp4lane detokenize tests/data/text/tiny_bytelevel.json 84 999999 2>&1", b);
    CHECK(run(cmd, out, sizeof out) == 1 && strstr(out, "tok.decode-id"));
    /* a GGUF is recognised by its magic, whatever its name */
    {
        fp4_tokenizer *t = NULL;
        fp4_error e;
        char gp[600];
        snprintf(gp, sizeof gp, "%s/tok.bin", tmpdir);
        CHECK_OK(fp4_tokenizer_load("tests/data/text/tiny_bytelevel.json", &t, &e));
        fp4_gguf_writer *w = NULL;
        CHECK_OK(fp4_gguf_writer_create(&w, &gerr));
        CHECK_OK(fp4_tokenizer_write_gguf(t, w, &e));
        CHECK_OK(fp4_gguf_writer_write_header(w, gp, &gerr));
        CHECK_OK(fp4_gguf_writer_finish(w, &gerr));
        fp4_gguf_writer_free(w);
        fp4_tokenizer_free(t);
        snprintf(cmd, sizeof cmd, "%s/fp4lane tokenize %s 'The <|end|>' --parse-special --add-special", b,
                 gp);
        CHECK(run(cmd, out, sizeof out) == 0 && !strcmp(out, "265 84 257 32 265\n"));
    }
    snprintf(cmd, sizeof cmd, "%s/fp4lane tokenize 2>&1", b);
    CHECK(run(cmd, out, sizeof out) == 2 && strstr(out, "usage"));
    snprintf(cmd, sizeof cmd, "%s/fp4lane tokenize %s/missing.json x 2>&1", b, tmpdir);
    CHECK(run(cmd, out, sizeof out) == 1 && strstr(out, "tok.io"));
}

/* one handle, two threads: the same ids as one thread (encode and decode keep no shared state) */
typedef struct thr_arg {
    const fp4_tokenizer *t;
    const char *text;
    size_t n;
    int32_t *want;
    size_t nw;
    int ok;
} thr_arg;
static void *thr_run(void *p) {
    thr_arg *a = p;
    a->ok = 1;
    for (int r = 0; r < 30; r++) {
        int32_t *ids = NULL;
        size_t ni = 0;
        char *txt = NULL;
        size_t tl = 0;
        if (fp4_tokenizer_encode(a->t, a->text, a->n, FP4_TOK_PARSE_SPECIAL, &ids, &ni) || ni != a->nw ||
            memcmp(ids, a->want, ni * sizeof *ids) || fp4_tokenizer_decode(a->t, ids, ni, 0, &txt, &tl, NULL))
            a->ok = 0;
        free(ids);
        free(txt);
    }
    return NULL;
}
static void threads(void) {
    fp4_tokenizer *t = NULL;
    fp4_error e;
    CHECK_OK(fp4_tokenizer_load("tests/data/text/tiny_bytelevel.json", &t, &e));
    if (!t) return;
    char text[4000];
    size_t n = 0;
    while (n + 40 < sizeof text)
        n += (size_t)snprintf(text + n, sizeof text - n, "The then \xe6\x97\xa5 <|end|> %zu  x\n", n);
    thr_arg a[2] = {{t, text, n, NULL, 0, 0}, {t, text, n, NULL, 0, 0}};
    CHECK_OK(fp4_tokenizer_encode(t, text, n, FP4_TOK_PARSE_SPECIAL, &a[0].want, &a[0].nw));
    a[1].want = a[0].want;
    a[1].nw = a[0].nw;
    pthread_t th[2];
    for (int i = 0; i < 2; i++) CHECK(pthread_create(&th[i], NULL, thr_run, &a[i]) == 0);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    CHECK(a[0].ok && a[1].ok && a[0].nw > 100);
    free(a[0].want);
    fp4_tokenizer_free(t);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "%s/fp4-text-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmpdir)) return perror("mkdtemp"), 1;
    json_rejections();
    gguf_rejections();
    behaviour();
    threads();
    cli();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", tmpdir);
    return check_report();
}
