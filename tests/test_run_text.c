/* test_run_text.c — text in, text out: the stop-string filter (held-back text across token
 * boundaries, earliest match, UTF-8 never split, refusals), generation_config.json's EOS, and
 * fp4lane run on models/tiny as a user meets it: -p / -f / stdin give the same text, the text is
 * the detokenized ids of --prompt-ids, EOS from generation_config.json stops, --stop ends the text
 * before the stop string, --seed reproduces, 1 and 2 threads give the same text in exact mode,
 * the summary is stderr's last line, the default model and prompt, usage errors exit 2. */
#include "check.h"
#include "cli_util.h"
#include "fp4lane_runtime.h"
#include "fp4lane_text.h"
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char bin[512], tmp[512];

/* runs "env bin args" with stdout/stderr captured; returns the exit status */
static int cli(const char *env, const char *args, char **out, char **err) {
    return cu_run(bin, tmp, env, args, out, err);
}

static int utf8_ok(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c < 0x80             ? 1
                   : (c & 0xE0) == 0xC0 ? 2
                   : (c & 0xF0) == 0xE0 ? 3
                   : (c & 0xF8) == 0xF0 ? 4
                                        : 0;
        if (!k || i + k > n) return 0;
        for (size_t j = 1; j < k; j++)
            if (((unsigned char)s[i + j] & 0xC0) != 0x80) return 0;
        i += k;
    }
    return 1;
}

/* pushes pieces through a filter; returns everything it gave back (flushed at the end unless stopped) */
static char *through(const char *const *stops, size_t ns, const char *const *pieces, size_t np,
                     int *stopped) {
    fp4_stop_filter *f = NULL;
    fp4_error e;
    static char acc[4096];
    size_t n = 0;
    *stopped = 0;
    if (fp4_stop_filter_create(stops, ns, &f, &e)) return NULL;
    for (size_t i = 0; i < np; i++) {
        const char *o;
        size_t l;
        int st;
        if (fp4_stop_filter_push(f, pieces[i], strlen(pieces[i]), &o, &l, &st)) break;
        memcpy(acc + n, o, l), n += l;
        if (st) *stopped = 1;
    }
    const char *o;
    size_t l;
    fp4_stop_filter_flush(f, &o, &l);
    memcpy(acc + n, o, l), n += l;
    acc[n] = 0;
    fp4_stop_filter_free(f);
    return acc;
}

static void stop_filter(void) {
    int st;
    /* the stop string spans three pushes: the text before it comes out, nothing of it or after it */
    const char *s1[] = {"o wor"};
    const char *p1[] = {"Hel", "lo wo", "rld", " and more"};
    char *r = through(s1, 1, p1, 4, &st);
    CHECK(r && !strcmp(r, "Hell") && st);
    /* held back while it may still become the stop string, released when it cannot */
    fp4_stop_filter *f = NULL;
    fp4_error e;
    const char *o;
    size_t l;
    CHECK(fp4_stop_filter_create(s1, 1, &f, &e) == FP4_OK);
    CHECK(f && !fp4_stop_filter_push(f, "say o w", 7, &o, &l, &st) && l == 4 && !memcmp(o, "say ", 4) && !st);
    CHECK(f && !fp4_stop_filter_push(f, "x", 1, &o, &l, &st) && l == 4 && !memcmp(o, "o wx", 4) && !st);
    CHECK(f && !fp4_stop_filter_push(f, "o", 1, &o, &l, &st) && l == 0 && !st); /* "o" held */
    CHECK(f && !fp4_stop_filter_flush(f, &o, &l) && l == 1 && o[0] == 'o');
    fp4_stop_filter_free(f);
    /* no stop string met: everything comes back, in order */
    const char *s2[] = {"xyz", "\n\n"};
    const char *p2[] = {"ab", "x", "y", "\n", "c"};
    r = through(s2, 2, p2, 5, &st);
    CHECK(r && !strcmp(r, "abxy\nc") && !st);
    /* the earliest of several wins, also when a longer one started first */
    const char *s3[] = {"abcdef", "cd"};
    const char *p3[] = {"ab", "cde"};
    r = through(s3, 2, p3, 2, &st);
    CHECK(r && !strcmp(r, "ab") && st);
    /* a stop string inside one push */
    const char *s4[] = {"END"};
    const char *p4[] = {"one END two"};
    r = through(s4, 1, p4, 1, &st);
    CHECK(r && !strcmp(r, "one ") && st);
    /* multi-byte stop string: what is released is whole characters */
    const char *s5[] = {"\xc3\xa9t\xc3\xa9"}; /* "été" */
    const char *p5[] = {"caf\xc3\xa9", " \xc3\xa9", "t\xc3\xa9 ici"};
    r = through(s5, 1, p5, 3, &st);
    CHECK(r && !strcmp(r, "caf\xc3\xa9 ") && st);
    /* refusals */
    const char *bad1[] = {""}, *bad2[] = {"\xc3"}, *bad3[] = {"\xed\xa0\x80"};
    f = NULL;
    CHECK(fp4_stop_filter_create(bad1, 1, &f, &e) == FP4_ERR_INVALID_ARG && !f &&
          !strcmp(e.rule, "stop.empty"));
    CHECK(fp4_stop_filter_create(bad2, 1, &f, &e) == FP4_ERR_INVALID_ARG && !strcmp(e.rule, "stop.utf8"));
    CHECK(fp4_stop_filter_create(bad3, 1, &f, &e) == FP4_ERR_INVALID_ARG && !strcmp(e.rule, "stop.utf8"));
    char *big = malloc(FP4_STOP_MAX_BYTES + 2);
    memset(big, 'a', FP4_STOP_MAX_BYTES + 1), big[FP4_STOP_MAX_BYTES + 1] = 0;
    const char *bad4[] = {big};
    CHECK(fp4_stop_filter_create(bad4, 1, &f, &e) == FP4_ERR_LIMIT && !strcmp(e.rule, "stop.length"));
    free(big);
    /* no stop strings: a pass-through */
    CHECK(fp4_stop_filter_create(NULL, 0, &f, &e) == FP4_OK);
    CHECK(f && !fp4_stop_filter_push(f, "abc", 3, &o, &l, &st) && l == 3 && !st);
    fp4_stop_filter_free(f);
}

/* the penalties look at the last penalty_last_n accepted tokens only (the sampler's other steps:
 * tests/test_runtime_kv.c) */
static void penalty_window(void) {
    const float l[6] = {0.5f, 2.0f, 2.0f, -1.0f, 1.9f, 0.0f};
    for (int last_n = 1; last_n <= 4; last_n++) {
        fp4_sampler_params p = fp4_sampler_defaults();
        p.repeat_penalty = 2.0f, p.penalty_last_n = last_n;
        fp4_sampler *s = NULL;
        CHECK(fp4_sampler_create(&p, 6, &s) == FP4_OK);
        if (!s) continue;
        fp4_sampler_accept(s, 1), fp4_sampler_accept(s, 2);
        /* last_n 1: only 2 is penalized, 1 (2.0) wins; 2 or more: both, 4 (1.9) wins */
        CHECK(fp4_sampler_sample(s, l) == (last_n == 1 ? 1 : 4));
        fp4_sampler_accept(s, 5), fp4_sampler_accept(s, 5);
        /* history 1 2 5 5: 1 leaves the window unless last_n is 4 (then 1 and 2 are penalized) */
        CHECK(fp4_sampler_sample(s, l) == (last_n <= 3 ? 1 : 4));
        fp4_sampler_free(s);
    }
}

/* models/tiny's byte tokens (Ã = 0xC3, © = 0xA9, ...) split characters: the detokenizer and the
 * stop filter together never give back part of a character */
static void utf8_stream(void) {
    fp4_tokenizer *t = NULL;
    fp4_error e;
    CHECK(fp4_tokenizer_load("models/tiny", &t, &e) == FP4_OK);
    if (!t) return;
    /* "é€x" as byte tokens: C3 A9, E2 82 AC, then 'x' */
    const char *sym[] = {"\xc3\x83", "\xc2\xa9", "\xc3\xa2", "\xc4\xa4", "\xc2\xac", "x"};
    int32_t id[6];
    for (int i = 0; i < 6; i++)
        CHECK((id[i] = fp4_tokenizer_find(t, sym[i], strlen(sym[i]))) >= 0);
    fp4_detok_stream *ds = NULL;
    fp4_stop_filter *f = NULL;
    const char *stops[] = {"\xe2\x82\xacy"}; /* "€y": "€" is held back, then released by "x" */
    CHECK(fp4_detok_stream_create(t, FP4_TOK_SKIP_SPECIAL, &ds) == FP4_OK);
    CHECK(fp4_stop_filter_create(stops, 1, &f, &e) == FP4_OK);
    char acc[64];
    size_t n = 0;
    int chunks_ok = 1;
    for (int i = 0; ds && f && i < 6; i++) {
        const char *o, *o2;
        size_t l, l2;
        int st;
        if (id[i] < 0 || fp4_detok_stream_push(ds, id[i], &o, &l, &e) ||
            fp4_stop_filter_push(f, o, l, &o2, &l2, &st))
            break;
        chunks_ok &= utf8_ok(o, l) && utf8_ok(o2, l2);
        if (i == 3) CHECK(l2 == 0);           /* the € still incomplete */
        if (i == 4) CHECK(l == 3 && l2 == 0); /* € complete, held back as a stop string's start */
        memcpy(acc + n, o2, l2), n += l2;
    }
    CHECK(chunks_ok);
    CHECK(n == 6 && !memcmp(acc, "\xc3\xa9\xe2\x82\xacx", 6));
    fp4_detok_stream_free(ds);
    fp4_stop_filter_free(f);
    fp4_tokenizer_free(t);
}

static void gen_config(void) {
    char d[700], p[800];
    snprintf(d, sizeof d, "%s/gc", tmp);
    snprintf(p, sizeof p, "mkdir -p %s", d);
    CHECK(system(p) == 0);
    int32_t ids[8];
    int n = -1;
    fp4_error e;
    CHECK(fp4_generation_eos(d, ids, 8, &n, &e) == FP4_OK && n == 0); /* no file */
    snprintf(p, sizeof p, "%s/generation_config.json", d);
    const char *cases[] = {"{\"eos_token_id\": 7}",    "{\"eos_token_id\": [3, 9, 11]}",
                           "{\"bos_token_id\": 1}",    "{\"eos_token_id\": \"x\"}",
                           "{\"eos_token_id\": [-1]}", "{\"eos_token_id\": [1,"};
    for (int c = 0; c < 6; c++) {
        FILE *f = fopen(p, "w");
        fputs(cases[c], f);
        fclose(f);
        fp4_status st = fp4_generation_eos(d, ids, 8, &n, &e);
        if (c == 0) CHECK(st == FP4_OK && n == 1 && ids[0] == 7);
        if (c == 1) CHECK(st == FP4_OK && n == 3 && ids[0] == 3 && ids[1] == 9 && ids[2] == 11);
        if (c == 2) CHECK(st == FP4_OK && n == 0);
        if (c >= 3) CHECK(st == FP4_ERR_FORMAT);
    }
    /* a side file past 16 MiB is refused before it is read */
    FILE *big = fopen(p, "w");
    CHECK(big && !ftruncate(fileno(big), (16 << 20) + 1));
    if (big) fclose(big);
    CHECK(fp4_generation_eos(d, ids, 8, &n, &e) == FP4_ERR_LIMIT && !strcmp(e.rule, "text.limit"));
    /* a file in the folder names the folder */
    snprintf(p, sizeof p, "%s/generation_config.json", d);
    FILE *f = fopen(p, "w");
    fputs("{\"eos_token_id\": [5]}", f);
    fclose(f);
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    CHECK(fp4_generation_eos(p, ids, 8, &n, &e) == FP4_OK && n == 1 && ids[0] == 5);
    /* bos_token_id: an integer id, absent (-1), or refused */
    const char *bcases[] = {"{\"bos_token_id\": 7}", "{\"eos_token_id\": 2}", "{\"bos_token_id\": null}",
                            "{\"bos_token_id\": [1]}", "{\"bos_token_id\": -3}", "{\"bos_token_id\": \"x\"}"};
    snprintf(p, sizeof p, "%s/generation_config.json", d);
    for (int c = 0; c < 6; c++) {
        f = fopen(p, "w");
        fputs(bcases[c], f);
        fclose(f);
        int32_t bos = 99;
        fp4_status st = fp4_generation_bos(d, &bos, &e);
        if (c == 0) CHECK(st == FP4_OK && bos == 7);
        if (c == 1 || c == 2) CHECK(st == FP4_OK && bos == -1);
        if (c >= 3) CHECK(st == FP4_ERR_FORMAT && !strcmp(e.rule, "text.bos"));
    }
}

/* the ids of --json's "sequences" */
static char *sequences(const char *out) {
    const char *s = out ? strstr(out, "\"sequences\":[[") : NULL, *end = s ? strstr(s, "]]") : NULL;
    return s && end ? strndup(s, (size_t)(end - s)) : strdup("none");
}

/* an empty text prompt starts from bos_token_id, as transformers' generate() does: generation_config.json's,
 * else config.json's (models/tiny: 0); a tokenizer that adds no BOS, so the prompt encodes to nothing */
static void bos_start(void) {
    char md[700], cmd[2000], a[1200], *out = NULL, *err = NULL;
    snprintf(md, sizeof md, "%s/tinybos", tmp);
    snprintf(cmd, sizeof cmd, "mkdir -p %s && cp models/tiny/*.json models/tiny/model.safetensors %s/", md,
             md);
    CHECK(system(cmd) == 0);
    snprintf(cmd, sizeof cmd, "%s/tokenizer.json", md);
    json_t *tj = json_load_file(cmd, 0, NULL);
    CHECK(tj && !json_object_set_new(tj, "post_processor", json_null()) && !json_dump_file(tj, cmd, 0));
    json_decref(tj);
    static const struct {
        const char *gen;
        int bos; /* the start the empty prompt must get; -1: refused */
    } cases[] = {{"{\"bos_token_id\": 7, \"eos_token_id\": 1}", 7}, {"{\"eos_token_id\": 1}", 0},
                 {"{\"bos_token_id\": \"x\"}", -1}};
    for (int c = 0; c < 3; c++) {
        snprintf(cmd, sizeof cmd, "%s/generation_config.json", md);
        FILE *f = fopen(cmd, "w");
        fputs(cases[c].gen, f);
        fclose(f);
        snprintf(a, sizeof a, "run %s -p '' -n 3 --json", md);
        int rc = cli(NULL, a, &out, &err);
        if (cases[c].bos < 0) {
            CHECK_MSG(rc == 1 && strstr(err, "text.bos"), "case %d: rc %d: %s", c, rc, err);
            continue;
        }
        CHECK_MSG(rc == 0, "case %d: rc %d: %s", c, rc, err);
        char *got = sequences(out);
        snprintf(a, sizeof a, "run %s --prompt-ids %d -n 3 --json", md, cases[c].bos);
        CHECK(cli(NULL, a, &out, &err) == 0);
        char *want = sequences(out);
        CHECK_MSG(!strcmp(got, want) && strcmp(want, "none"), "case %d: %s, want %s", c, got, want);
        free(got), free(want);
    }
    free(out), free(err);
}

static void run_cli(void) {
    char *out = NULL, *err = NULL, a[4096];
    const char *P = "If the file does not exist,";
    /* -p: the greedy continuation on stdout, the summary as stderr's last line */
    snprintf(a, sizeof a, "run models/tiny -p '%s' -n 40", P);
    CHECK(cli(NULL, a, &out, &err) == 0);
    char *text = strdup(out);
    CHECK(strlen(text) > 40 && utf8_ok(text, strlen(text)) && !strstr(text, "prefill"));
    CHECK(!strncmp(cu_last_line(err), "prefill ", 8) && strstr(err, "decode 40 tok"));
    /* the same text from --prompt-ids + detokenize */
    snprintf(a, sizeof a, "tokenize models/tiny '%s' --add-special", P);
    CHECK(cli(NULL, a, &out, &err) == 0);
    char ids[1024];
    snprintf(ids, sizeof ids, "%s", out);
    for (char *c = ids; *c; c++)
        if (*c == ' ')
            *c = ',';
        else if (*c == '\n')
            *c = 0;
    CHECK(ids[0] == '0' && ids[1] == ','); /* BOS 0 added by the tokenizer */
    snprintf(a, sizeof a, "run models/tiny --prompt-ids %s -n 40", ids);
    CHECK(cli(NULL, a, &out, &err) == 0);
    char gen[2048];
    snprintf(gen, sizeof gen, "%.*s", (int)strcspn(out, "\n"), out);
    snprintf(a, sizeof a, "detokenize models/tiny %s", gen);
    CHECK(cli(NULL, a, &out, &err) == 0);
    size_t tl = strlen(text);
    CHECK(strlen(out) >= tl && !memcmp(out, text, tl)); /* detokenize adds a newline */
    /* -f FILE and stdin (-p -) give the same */
    char pf[700];
    snprintf(pf, sizeof pf, "%s/prompt.txt", tmp);
    FILE *f = fopen(pf, "w");
    fputs(P, f);
    fclose(f);
    snprintf(a, sizeof a, "run models/tiny -f '%s' -n 40", pf);
    CHECK(cli(NULL, a, &out, &err) == 0 && !strcmp(out, text));
    snprintf(a, sizeof a, "run models/tiny -p - -n 40 <'%s'", pf);
    CHECK(cli(NULL, a, &out, &err) == 0 && !strcmp(out, text));
    /* --stop: a stop string that starts inside one token and ends inside another */
    /* token boundaries of the text: the byte lengths of the decoded prefixes of the ids */
    size_t bound[64], nb = 0, at_off = 0;
    {
        fp4_tokenizer *tk = NULL;
        fp4_error te;
        int32_t gi[64];
        int ng = 0, off = 0, k;
        while (ng < 64 && sscanf(gen + off, "%d%n", &gi[ng], &k) == 1)
            ng++, off += k;
        CHECK(ng == 40 && fp4_tokenizer_load("models/tiny", &tk, &te) == FP4_OK);
        for (int j = 1; tk && j <= ng; j++) {
            char *d = NULL;
            size_t dl = 0;
            if (!fp4_tokenizer_decode(tk, gi, (size_t)j, 0, &d, &dl, &te)) bound[nb++] = dl;
            free(d);
        }
        fp4_tokenizer_free(tk);
    }
    /* the first start past byte 20 where neither the start nor the end (7 bytes on) is a token
     * boundary and at least one boundary lies between them */
    for (size_t o = 20; !at_off && o + 7 < strlen(text); o++) {
        int on = 0, inside = 0;
        for (size_t j = 0; j < nb; j++)
            on |= bound[j] == o || bound[j] == o + 7, inside |= bound[j] > o && bound[j] < o + 7;
        if (!on && inside) at_off = o;
    }
    CHECK(nb == 40 && at_off > 0);
    const char *at = text + at_off;
    char stop[16];
    snprintf(stop, sizeof stop, "%.7s", at);
    const char *first = strstr(text, stop);
    snprintf(a, sizeof a, "run models/tiny -p '%s' -n 40 --stop '%s' --stop 'never-there'", P, stop);
    CHECK(cli(NULL, a, &out, &err) == 0);
    CHECK(first && strlen(out) == (size_t)(first - text) && !memcmp(out, text, strlen(out)) &&
          !strstr(out, stop));
    CHECK(!strncmp(cu_last_line(err), "prefill ", 8));
    /* EOS from generation_config.json (a list): stop at the third generated token */
    char md[700], cmd[2000];
    snprintf(md, sizeof md, "%s/tinyeos", tmp);
    snprintf(cmd, sizeof cmd, "mkdir -p %s && cp models/tiny/*.json models/tiny/model.safetensors %s/", md,
             md);
    CHECK(system(cmd) == 0);
    int g[4] = {0};
    CHECK(sscanf(gen, "%d %d %d", &g[0], &g[1], &g[2]) == 3);
    snprintf(cmd, sizeof cmd, "%s/generation_config.json", md);
    f = fopen(cmd, "w");
    fprintf(f, "{\"eos_token_id\": [1, %d]}", g[2]);
    fclose(f);
    snprintf(a, sizeof a, "run %s --prompt-ids %s -n 40", md, ids);
    CHECK(cli(NULL, a, &out, &err) == 0);
    char want[64];
    snprintf(want, sizeof want, "%d %d %d\n", g[0], g[1], g[2]);
    CHECK(!strncmp(out, want, strlen(want)) && strstr(out, "decode 3 tok"));
    snprintf(a, sizeof a, "run %s -p '%s' -n 40", md, P);
    CHECK(cli(NULL, a, &out, &err) == 0 && strstr(err, "decode 3 tok") && strlen(out) < strlen(text) &&
          !memcmp(out, text, strlen(out)));
    /* sampled: --seed reproduces, another seed differs, 2 threads give the same text (exact mode) */
    snprintf(a, sizeof a, "run models/tiny -p '%s' -n 32 --temp 0.9 --top-k 50 --top-p 0.95 --seed 7", P);
    CHECK(cli(NULL, a, &out, &err) == 0);
    char *s7 = strdup(out);
    CHECK(cli(NULL, a, &out, &err) == 0 && !strcmp(out, s7));
    snprintf(a, sizeof a,
             "run models/tiny -p '%s' -n 32 --temp 0.9 --top-k 50 --top-p 0.95 --seed 7 --threads 2", P);
    CHECK(cli(NULL, a, &out, &err) == 0 && !strcmp(out, s7) && strstr(err, "threads 2"));
    snprintf(a, sizeof a, "run models/tiny -p '%s' -n 32 --temp 0.9 --top-k 50 --top-p 0.95 --seed 8", P);
    CHECK(cli(NULL, a, &out, &err) == 0 && strcmp(out, s7));
    snprintf(a, sizeof a,
             "run models/tiny -p '%s' -n 32 --temp 0.9 --min-p 0.05 --repeat-penalty 1.2 "
             "--presence-penalty 0.5 --seed 7 --json",
             P);
    CHECK(cli(NULL, a, &out, &err) == 0 && !strncmp(out, "{\"text\":\"", 9) &&
          strstr(out, "\"sequences\":[["));
    free(s7);
    /* no MODEL: $FP4LANE_MODEL, then the build tree's models/tiny; no prompt: a fixed one, sampled
     * with a fixed seed, so the output is the same every time */
    CHECK(cli(NULL, "run", &out, &err) == 0);
    char *d1 = strdup(out);
    CHECK(!strncmp(d1, "This section describes ", 23) && strlen(d1) > 80 && strstr(err, "seed 4"));
    CHECK(!strncmp(cu_last_line(err), "prefill ", 8) && strstr(err, "decode 48 tok"));
    CHECK(cli("FP4LANE_MODEL=models/tiny", "run", &out, &err) == 0 && !strcmp(out, d1));
    CHECK(cli("FP4LANE_MODEL=/nonexistent/model", "run", &out, &err) == 1 &&
          strstr(err, "/nonexistent/model"));
    free(d1);
    /* usage errors: exit 2, naming the problem */
    snprintf(a, sizeof a, "run models/tiny -p x --prompt-ids 0,1");
    CHECK(cli(NULL, a, &out, &err) == 2 && strstr(err, "give one of"));
    CHECK(cli(NULL, "run models/tiny --prompt-ids 0,1 --stop x", &out, &err) == 2 && strstr(err, "--stop"));
    CHECK(cli(NULL, "run models/tiny -p x --stop ''", &out, &err) == 2 && strstr(err, "empty"));
    CHECK(cli(NULL, "run models/tiny -p x --think maybe", &out, &err) == 2 && strstr(err, "--think"));
    CHECK(cli(NULL, "chat models/tiny --think maybe </dev/null", &out, &err) == 2 && strstr(err, "--think"));
    /* --think: a prompt that opens a reasoning span; the model never closes it in 24 tokens, so
     * hide prints nothing of them and show (the default) prints them all */
    char *shown = NULL;
    CHECK(cli(NULL, "run models/tiny -p 'Once upon a time <think>' -n 24", &shown, &err) == 0 && shown &&
          strlen(shown) > 20);
    CHECK(cli(NULL, "run models/tiny -p 'Once upon a time <think>' -n 24 --think show", &out, &err) == 0 &&
          shown && !strcmp(out, shown));
    CHECK(cli(NULL, "run models/tiny -p 'Once upon a time <think>' -n 24 --think hide", &out, &err) == 0 &&
          !strcmp(out, "") && strstr(err, "decode"));
    CHECK(cli(NULL, "run models/tiny -p 'Once upon a time' -n 24 --think hide", &out, &err) == 0 && shown &&
          strlen(out) > 20);
    free(shown);
    CHECK(cli(NULL, "run models/tiny -f /nonexistent/prompt.txt", &out, &err) == 2 && strstr(err, "-f"));
    CHECK(cli(NULL, "run models/tiny -p x -n -3", &out, &err) == 2);
    CHECK(cli(NULL, "run models/tiny -p x --temp abc", &out, &err) == 2 && strstr(err, "--temp"));
    CHECK(cli(NULL, "run models/tiny -p x -n 100000", &out, &err) == 2 && strstr(err, "context length"));
    free(out), free(err), free(text);
}

/* fp4lane chat with its input piped: answers, the cache reused on the second turn, /reset, the end
 * of input ends it with 0; refusals (the terminal session itself: tests/test_chat_tmux.sh) */
static void chat_cli(void) {
    char *out = NULL, *err = NULL, a[2048], in[700];
    snprintf(in, sizeof in, "%s/chat.txt", tmp);
    FILE *f = fopen(in, "w");
    fputs("What is a table?\nAnd a row?\n/reset\nHello\n", f);
    fclose(f);
    snprintf(a, sizeof a, "chat models/tiny -n 12 --seed 3 --system 'You answer briefly.' <'%s'", in);
    CHECK(cli(NULL, a, &out, &err) == 0);
    CHECK(strstr(err, "template chatml") && strstr(out, "(history cleared)"));
    /* turn 1 and turn 3 (after /reset) start from an empty cache, turn 2 reuses turn 1's tokens */
    const char *t1 = strstr(err, "\n["), *t2 = t1 ? strstr(t1 + 1, "\n[") : NULL,
               *t3 = t2 ? strstr(t2 + 1, "\n[") : NULL;
    long nn[3] = {-1, -1, -1}, reused[3] = {-1, -1, -1};
    const char *t[3] = {t1, t2, t3};
    for (int i = 0; i < 3; i++)
        if (t[i]) sscanf(t[i], "\n[%ld new prompt tokens (%ld reused)", &nn[i], &reused[i]);
    CHECK(reused[0] == 0 && nn[0] > 10);
    CHECK(reused[1] > nn[0] && nn[1] > 0 && nn[1] < reused[1]);
    CHECK(reused[2] == 0 && nn[2] > 0);
    /* the same session twice: the same answers (seeded) */
    char *o1 = strdup(out);
    CHECK(cli(NULL, a, &out, &err) == 0 && !strcmp(out, o1));
    free(o1);
    snprintf(a, sizeof a, "chat models/tiny -n 4 </dev/null");
    CHECK(cli(NULL, a, &out, &err) == 0);
    CHECK(cli(NULL, "chat models/tiny --chat-template nope </dev/null", &out, &err) == 2 &&
          strstr(err, "nope"));
    CHECK(cli(NULL, "chat models/tiny --temp x </dev/null", &out, &err) == 2);
    /* a template no built-in knows runs as the checkpoint's own (the Jinja engine); one the engine
     * cannot compile either is refused, naming --chat-template; given, a built-in runs */
    char md[700], cmd[3000];
    snprintf(md, sizeof md, "%s/tinychat", tmp);
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s && cp models/tiny/*.json models/tiny/model.safetensors %s/ && "
             "sed -i 's/\"chat_template\": \".*\"/\"chat_template\": \"{{ messages }}\"/' "
             "%s/tokenizer_config.json",
             md, md, md);
    CHECK(system(cmd) == 0);
    snprintf(a, sizeof a, "chat %s -n 4 <'%s'", md, in);
    CHECK(cli(NULL, a, &out, &err) == 0 && strstr(err, "template its own") &&
          strstr(err, "new prompt tokens"));
    snprintf(cmd, sizeof cmd, "sed -i 's/{{ messages }}/{%% while %%}/' %s/tokenizer_config.json", md);
    CHECK(system(cmd) == 0);
    snprintf(a, sizeof a, "chat %s </dev/null", md);
    CHECK(cli(NULL, a, &out, &err) == 1 && strstr(err, "--chat-template NAME") && strstr(err, "chatml"));
    snprintf(a, sizeof a, "chat %s --chat-template llama3 -n 4 <'%s'", md, in);
    CHECK(cli(NULL, a, &out, &err) == 0 && strstr(err, "template llama3"));
    /* --chat-template FILE: the user's template through the engine */
    char uj[600];
    snprintf(uj, sizeof uj, "%s/user.jinja", tmp);
    f = fopen(uj, "w");
    fputs("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
          f);
    fclose(f);
    snprintf(a, sizeof a, "chat %s --chat-template '%s' -n 4 <'%s'", md, uj, in);
    CHECK(cli(NULL, a, &out, &err) == 0 && strstr(err, "new prompt tokens"));
    snprintf(a, sizeof a, "chat %s --chat-template '%s/nonexistent.jinja' </dev/null", md, tmp);
    CHECK(cli(NULL, a, &out, &err) == 2 && strstr(err, "nor a file"));
    free(out), free(err);
}

/* issue 27 item 22: convert carries the chat template into a GGUF; a template that is no string is
 * reported as such, not as "no chat_template" */
static void convert_template(void) {
    char *out = NULL, *err = NULL, a[2048], p[700];
    snprintf(a, sizeof a, "convert models/tiny %s/tiny.gguf", tmp);
    CHECK(cli(NULL, a, &out, &err) == 0);
    snprintf(p, sizeof p, "%s/tiny.gguf", tmp);
    char *t = NULL;
    fp4_error e;
    CHECK(fp4_chat_template_read(p, &t, &e) == FP4_OK && t &&
          fp4_chat_template_detect(t) == fp4_chat_template_by_name("chatml"));
    free(t);
    t = NULL;
    snprintf(a, sizeof a, "chat %s/tiny.gguf -n 2 </dev/null", tmp);
    CHECK_MSG(cli(NULL, a, &out, &err) == 0 && strstr(err, "template chatml"), "%s", err ? err : "");
    /* chat_template: 5 in tokenizer_config.json */
    char md[700], cmd[3000];
    snprintf(md, sizeof md, "%s/tinybad", tmp);
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s && cp models/tiny/*.json models/tiny/model.safetensors %s/ && "
             "sed -i 's/\"chat_template\": \".*\"/\"chat_template\": 5/' %s/tokenizer_config.json",
             md, md, md);
    CHECK(system(cmd) == 0);
    CHECK(fp4_chat_template_read(md, &t, &e) == FP4_ERR_FORMAT && !t &&
          !strcmp(e.rule, "text.chat-template") && strstr(e.msg, "neither a string"));
    snprintf(a, sizeof a, "convert %s %s/bad.gguf", md, tmp);
    CHECK(cli(NULL, a, &out, &err) == 1 && strstr(err, "text.chat-template"));
    snprintf(a, sizeof a, "chat %s </dev/null", md);
    CHECK(cli(NULL, a, &out, &err) == 1 && strstr(err, "text.chat-template") &&
          !strstr(err, "no chat_template"));
    /* a GGUF whose tokenizer.chat_template is a number */
    snprintf(p, sizeof p, "%s/num.gguf", tmp);
    fp4_gguf_writer *w = NULL;
    CHECK_OK(fp4_gguf_writer_create(&w, &e));
    CHECK_OK(fp4_gguf_writer_add_u32(w, "tokenizer.chat_template", 7, &e));
    CHECK_OK(fp4_gguf_writer_write_header(w, p, &e));
    CHECK_OK(fp4_gguf_writer_finish(w, &e));
    fp4_gguf_writer_free(w);
    CHECK(fp4_chat_template_read(p, &t, &e) == FP4_ERR_FORMAT && !t &&
          !strcmp(e.rule, "text.chat-template") && strstr(e.msg, "not a string"));
    free(out), free(err);
}

int main(void) {
    snprintf(bin, sizeof bin, "%s/fp4lane", getenv("FP4_BUILD") ? getenv("FP4_BUILD") : "build");
    snprintf(tmp, sizeof tmp, "%s/fp4lane-runtext-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) return perror("mkdtemp"), 1;
    stop_filter();
    penalty_window();
    utf8_stream();
    gen_config();
    bos_start();
    run_cli();
    chat_cli();
    convert_template();
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd)) fprintf(stderr, "cannot remove %s\n", tmp);
    return check_report();
}
