/* test_text_hostile.c — issue 27 items 1, 2 and 23: what a hostile tokenizer.json costs and says.
 *  1. Replace chains in the normalizer and the decoder that multiply text ("a" -> 16 x "a", eight
 *     times) are refused at load (tok.replace-growth); a chain at the cap loads and works.
 *  2. 4 089 overlapping added tokens "ab", "aab", ... and 200 KB of "a": encoding stays linear
 *     (it took 27.7 s), and random added-token sets split text exactly as the leftmost-longest
 *     rule says (checked against a direct scan written here).
 *  23. Refusals while encoding name the file and a rule (a regex past its match limit:
 *     tok.regex-limit, not a bare "limit exceeded"); an empty Split regex is refused as such. */
#include "check.h"
#include "cli_util.h"
#include "fp4lane_text.h"
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static char tmp[256], bin[256];

static json_t *base(void) {
    json_error_t e;
    json_t *j = json_load_file("tests/data/text/tiny_bytelevel.json", 0, &e);
    CHECK_MSG(j != NULL, "%s", e.text);
    return j;
}

static fp4_status load(json_t *j, const char *name, fp4_tokenizer **t, fp4_error *e) {
    char *s = json_dumps(j, JSON_COMPACT);
    memset(e, 0, sizeof *e);
    *t = NULL;
    fp4_status st = fp4_tokenizer_from_json(name, s, strlen(s), NULL, 0, t, e);
    free(s);
    return st;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* a Sequence of n Replace steps pat -> rep */
static json_t *replaces(const char *kind, int n, const char *pat, const char *rep) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, json_pack("{s:s, s:{s:s}, s:s}", "type", "Replace", "pattern", "String", pat,
                                           "content", rep));
    return json_pack("{s:s, s:o}", "type", "Sequence", kind, a);
}

static void replace_growth(void) {
    const char *x16 = "aaaaaaaaaaaaaaaa";
    fp4_tokenizer *t;
    fp4_error e;
    /* the normalizer: eight steps of a -> 16 x a (11 bytes became 6.3 GB) */
    json_t *j = base();
    json_object_set_new(j, "normalizer", replaces("normalizers", 8, "a", x16));
    fp4_status st = load(j, "norm.json", &t, &e);
    CHECK_MSG(st == FP4_ERR_LIMIT && !strcmp(e.rule, "tok.replace-growth") && !strcmp(e.file, "norm.json") &&
                  strstr(e.msg, "normalizer"),
              "normalizer chain: %s %s: %s", fp4_status_str(st), e.rule, e.msg);
    fp4_tokenizer_free(t); /* loaded before the fix: not encoded (it would take gigabytes) */
    json_decref(j);
    /* the decoder's form (3 tokens became 805 MB) */
    j = base();
    json_object_set_new(j, "decoder", replaces("decoders", 8, "a", x16));
    st = load(j, "dec.json", &t, &e);
    CHECK_MSG(st == FP4_ERR_LIMIT && !strcmp(e.rule, "tok.replace-growth") && strstr(e.msg, "decoder"),
              "decoder chain: %s %s: %s", fp4_status_str(st), e.rule, e.msg);
    fp4_tokenizer_free(t);
    json_decref(j);
    /* two steps of x4 multiply by 16: at the cap, loads; encoding and decoding work */
    j = base();
    json_object_set_new(j, "normalizer", replaces("normalizers", 2, "b", "bbbb"));
    CHECK_OK(load(j, "ok.json", &t, &e));
    if (t) {
        int32_t *ids = NULL;
        size_t n = 0;
        CHECK_OK(fp4_tokenizer_encode_err(t, "abc", 3, 0, &ids, &n, &e));
        char *txt = NULL;
        size_t tl = 0;
        CHECK_OK(fp4_tokenizer_decode(t, ids, n, 0, &txt, &tl, &e));
        CHECK(tl == 18 && !memcmp(txt, "abbbbbbbbbbbbbbbbc", 18));
        free(ids);
        free(txt);
    }
    fp4_tokenizer_free(t);
    json_decref(j);
    /* growth 17 in three steps is one past the cap */
    j = base();
    json_t *d = replaces("decoders", 1, "ab", "abababababababababababababababababab");
    json_object_set_new(j, "decoder", d);
    st = load(j, "dec17.json", &t, &e);
    CHECK_MSG(st == FP4_ERR_LIMIT && !strcmp(e.rule, "tok.replace-growth"), "x17: %s", e.msg);
    fp4_tokenizer_free(t);
    json_decref(j);
}

/* the added tokens a^k b (k = 1 .. n), not special, ids from 267 */
static void add_ab(json_t *j, int n) {
    json_t *a = json_object_get(j, "added_tokens");
    char *s = malloc((size_t)n + 2);
    for (int k = 1; k <= n; k++) {
        memset(s, 'a', (size_t)k);
        s[k] = 'b', s[k + 1] = 0;
        json_array_append_new(a, json_pack("{s:i, s:s, s:b, s:b, s:b, s:b, s:b}", "id", 266 + k, "content", s,
                                           "special", 0, "normalized", 0, "lstrip", 0, "rstrip", 0,
                                           "single_word", 0));
    }
    free(s);
}

static void overlapping_added(void) {
    json_t *j = base();
    add_ab(j, 4089);
    fp4_tokenizer *t;
    fp4_error e;
    CHECK_OK(load(j, "overlap.json", &t, &e));
    json_decref(j);
    if (!t) return;
    size_t n = 200000;
    char *s = malloc(n + 1);
    memset(s, 'a', n);
    int32_t *ids = NULL;
    size_t ni = 0;
    double t0 = now();
    CHECK_OK(fp4_tokenizer_encode(t, s, n, 0, &ids, &ni));
    double dt = now() - t0;
    /* 27.7 s before (quadratic); linear now: well under a second, 5 s leaves room for sanitizers */
    CHECK_MSG(dt < 5.0, "200 KB of 'a' with 4089 overlapping added tokens took %.1f s", dt);
    free(ids);
    /* with a b at the end the longest token that fits is taken from the left: a^4089 b at the end */
    s[n - 1] = 'b';
    t0 = now();
    CHECK_OK(fp4_tokenizer_encode(t, s, n, 0, &ids, &ni));
    dt = now() - t0;
    CHECK_MSG(dt < 5.0, "with a final b: %.1f s", dt);
    CHECK(ni >= 1 && ids[ni - 1] == 266 + 4089);
    free(ids);
    free(s);
    fp4_tokenizer_free(t);
}

/* leftmost-longest by a direct scan (the reference's rule): each added token's section, the text
 * between them encoded on its own */
static void expect_split(const fp4_tokenizer *t, const char *const *tok, const int32_t *tid, int nt,
                         const char *s, size_t n, unsigned flags) {
    int32_t *want = NULL, *got = NULL;
    size_t nw = 0, ng = 0, start = 0, i = 0;
    while (i <= n) {
        int best = -1;
        size_t bl = 0;
        for (int k = 0; i < n && k < nt; k++) {
            size_t l = strlen(tok[k]);
            if (l > bl && l <= n - i && !memcmp(s + i, tok[k], l)) best = k, bl = l;
        }
        if (best < 0 && i < n) {
            i++;
            continue;
        }
        if (i > start) {
            int32_t *p = NULL;
            size_t np = 0;
            CHECK_OK(fp4_tokenizer_encode(t, s + start, i - start, flags, &p, &np));
            want = realloc(want, (nw + np + 1) * sizeof *want);
            memcpy(want + nw, p, np * sizeof *p);
            nw += np;
            free(p);
        }
        if (best < 0) break;
        want = realloc(want, (nw + 1) * sizeof *want);
        want[nw++] = tid[best];
        i += bl;
        start = i;
    }
    CHECK_OK(fp4_tokenizer_encode(t, s, n, flags, &got, &ng));
    CHECK_MSG(ng == nw && (!nw || !memcmp(got, want, nw * sizeof *got)), "'%.*s': %zu ids, want %zu", (int)n,
              s, ng, nw);
    free(want);
    free(got);
}

static void random_added(void) {
    uint64_t r = 12345;
    for (int round = 0; round < 40; round++) {
        json_t *j = base();
        json_t *a = json_object_get(j, "added_tokens");
        char toks[24][8];
        const char *tp[24];
        int32_t tid[24];
        int nt = 0;
        for (int k = 0; k < 24; k++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            int l = 1 + (int)((r >> 33) % 5);
            for (int c = 0; c < l; c++) {
                r = r * 6364136223846793005ull + 1442695040888963407ull;
                toks[nt][c] = "abc"[(r >> 33) % 3];
            }
            toks[nt][l] = 0;
            int dup = 0;
            for (int q = 0; q < nt; q++) dup |= !strcmp(toks[q], toks[nt]);
            if (dup) continue;
            tp[nt] = toks[nt], tid[nt] = 300 + nt;
            json_t *o = json_pack("{s:i, s:s, s:b, s:b, s:b, s:b, s:b}", "id", tid[nt], "content", toks[nt],
                                  "special", 0, "normalized", 0, "lstrip", 0, "rstrip", 0, "single_word", 0);
            json_array_append_new(a, o);
            nt++;
        }
        fp4_tokenizer *t;
        fp4_error e;
        CHECK_OK(load(j, "rand.json", &t, &e));
        json_decref(j);
        if (!t) continue;
        for (int q = 0; q < 20; q++) {
            char s[200];
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            size_t n = (r >> 33) % sizeof s;
            for (size_t c = 0; c < n; c++) {
                r = r * 6364136223846793005ull + 1442695040888963407ull;
                s[c] = "abc d"[(r >> 33) % 5];
            }
            expect_split(t, tp, tid, nt, s, n, 0);
        }
        fp4_tokenizer_free(t);
    }
}

static void refusals_named(void) {
    fp4_tokenizer *t;
    fp4_error e;
    json_t *j = base();
    json_t *split = json_array_get(json_object_get(json_object_get(j, "pre_tokenizer"), "pretokenizers"), 0);
    /* an empty regex: refused as such (was PCRE2's "pattern passed as NULL") */
    json_object_set_new(json_object_get(split, "pattern"), "Regex", json_string(""));
    fp4_status st = load(j, "empty.json", &t, &e);
    CHECK_MSG(st == FP4_ERR_FORMAT && !strcmp(e.rule, "tok.regex") && strstr(e.msg, "empty") &&
                  !strstr(e.msg, "NULL") && !strcmp(e.file, "empty.json"),
              "empty regex: %s %s: %s", fp4_status_str(st), e.rule, e.msg);
    fp4_tokenizer_free(t);
    /* a regex that backtracks past PCRE2's match limit on 40 "a": the file and tok.regex-limit */
    json_object_set_new(json_object_get(split, "pattern"), "Regex", json_string("(a|aa)+(c|d)"));
    char path[512];
    snprintf(path, sizeof path, "%s/tokenizer.json", tmp);
    CHECK(json_dump_file(j, path, JSON_COMPACT) == 0);
    json_decref(j);
    CHECK_OK(fp4_tokenizer_load(path, &t, &e));
    if (t) {
        char s[64];
        memset(s, 'a', 60);
        int32_t *ids = NULL;
        size_t n = 0;
        memset(&e, 0, sizeof e);
        st = fp4_tokenizer_encode_err(t, s, 60, 0, &ids, &n, &e);
        CHECK_MSG(st == FP4_ERR_LIMIT && !strcmp(e.rule, "tok.regex-limit") &&
                      strstr(e.file, "tokenizer.json"),
                  "%s %s %s: %s", fp4_status_str(st), e.file, e.rule, e.msg);
        free(ids);
    }
    fp4_tokenizer_free(t);
    /* the CLI says the same */
    char *o = NULL, *er = NULL, args[1024];
    snprintf(args, sizeof args, "tokenize %s %.60s", path,
             "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
    int rc = cu_run(bin, tmp, NULL, args, &o, &er);
    CHECK_MSG(rc == 1 && cu_has(er, "tok.regex-limit") && cu_has(er, "tokenizer.json"), "rc %d: %s", rc,
              er ? er : "");
    free(o);
    free(er);
}

int main(void) {
    const char *b = getenv("FP4_BUILD");
    char cwd[200];
    CHECK(getcwd(cwd, sizeof cwd) != NULL);
    snprintf(bin, sizeof bin, "%s/%s/fp4lane", cwd, b ? b : "build");
    snprintf(tmp, sizeof tmp, "%s/fp4lane-texthostile-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    CHECK(mkdtemp(tmp) != NULL);
    replace_growth();
    overlapping_added();
    random_added();
    refusals_named();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    CHECK(system(cmd) == 0);
    return check_report();
}
