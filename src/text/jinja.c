/* jinja.c — the public face of the Jinja engine: compile a template once (tokens and syntax tree
 * in the template's own arena; the handle is immutable, so renders may run on it from several
 * threads), render it with a JSON context in a fresh capped arena. */
#include "jinja_impl.h"
#include <jansson.h>
#include <stdlib.h>

struct fp4_template {
    jarena a;
    jnode *prog;
};

#define COMPILE_MEMORY (96u << 20)

static int valid_utf8(const char *s, size_t n, size_t *bad) {
    const uint8_t *u = (const uint8_t *)s;
    for (size_t i = 0; i < n;) {
        uint8_t c = u[i];
        size_t need = c < 0x80                 ? 0
                      : c >= 0xC2 && c <= 0xDF ? 1
                      : c >= 0xE0 && c <= 0xEF ? 2
                      : c >= 0xF0 && c <= 0xF4 ? 3
                                               : 9;
        if (need == 9 || i + need >= n + (need ? 0 : 1)) return *bad = i, 0;
        uint8_t lo = c == 0xE0   ? 0xA0
                     : c == 0xF0 ? 0x90
                                 : 0x80,
                hi = c == 0xED   ? 0x9F
                     : c == 0xF4 ? 0x8F
                                 : 0xBF;
        for (size_t k = 1; k <= need; k++) {
            if (u[i + k] < (k == 1 ? lo : 0x80) || u[i + k] > (k == 1 ? hi : 0xBF)) return *bad = i, 0;
        }
        i += need + 1;
    }
    return 1;
}

fp4_status fp4_template_compile(const char *text, size_t len, fp4_template **out, fp4_error *err) {
    fp4_error_clear(err);
    *out = NULL;
    if (!text && len) return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "jinja.arg", "no template text");
    if (len > FP4_TEMPLATE_MAX_BYTES)
        return fp4_fail(err, FP4_ERR_LIMIT, NULL, NULL, "jinja.cap.size", "template of %zu bytes (cap %u)",
                        len, (unsigned)FP4_TEMPLATE_MAX_BYTES);
    size_t bad;
    if (!valid_utf8(text ? text : "", len, &bad))
        return fp4_fail(err, FP4_ERR_FORMAT, NULL, NULL, "jinja.utf8", "template is not UTF-8 (byte %zu)",
                        bad);
    fp4_template *t = calloc(1, sizeof *t);
    if (!t) return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "jinja.memory", "out of memory");
    t->a.cap = COMPILE_MEMORY;
    jtok *toks = NULL;
    size_t n = 0;
    fp4_status st = jinja_lex(&t->a, text ? text : "", len, &toks, &n, err);
    if (!st) st = jinja_parse(&t->a, toks, n, FP4_TEMPLATE_MAX_DEPTH, &t->prog, err);
    if (st) {
        fp4_template_free(t);
        return st;
    }
    *out = t;
    return FP4_OK;
}

void fp4_template_free(fp4_template *t) {
    if (!t) return;
    ja_free(&t->a);
    free(t);
}

static fp4_status declare(jinterp *I, jenv *g, const char *k, size_t kn, jv v) {
    if (jobj_get(&g->vars, k, kn))
        return fp4_fail(I->err, FP4_ERR_INVALID_ARG, NULL, NULL, "jinja.context",
                        "Variable already declared: %.*s", (int)(kn > 100 ? 100 : kn), k);
    if (jobj_set(I->a, &g->vars, k, kn, v))
        return fp4_fail(I->err, FP4_ERR_LIMIT, NULL, NULL, "jinja.cap.memory",
                        "the context passed the memory cap");
    return FP4_OK;
}

static fp4_status load_json(jinterp *I, const char *what, const char *text, json_t **j) {
    json_error_t je;
    *j = json_loads(text, JSON_DECODE_INT_AS_REAL | JSON_ALLOW_NUL, &je);
    if (!*j)
        return fp4_fail(I->err, FP4_ERR_FORMAT, NULL, what, "jinja.context", "%s: line %d: %s", what, je.line,
                        je.text);
    return FP4_OK;
}

static fp4_status context(jinterp *I, jenv *g, const char *messages, int agp, const char *extra) {
    json_t *j = NULL;
    fp4_status st;
    jv v;
    if (messages) {
        if ((st = load_json(I, "messages", messages, &j))) return st;
        int bad = jv_from_json(I->a, j, &v, 0);
        json_decref(j);
        if (bad)
            return fp4_fail(I->err, FP4_ERR_LIMIT, NULL, "messages", "jinja.context",
                            "messages too large or deep");
        if ((st = declare(I, g, "messages", 8, v))) return st;
    }
    if ((st = declare(I, g, "add_generation_prompt", 21, jv_bool(agp)))) return st;
    if (!extra) return FP4_OK;
    if ((st = load_json(I, "extra", extra, &j))) return st;
    if (!json_is_object(j)) {
        json_decref(j);
        return fp4_fail(I->err, FP4_ERR_FORMAT, NULL, "extra", "jinja.context",
                        "the extra variables are not an object");
    }
    int bad = jv_from_json(I->a, j, &v, 0);
    json_decref(j);
    if (bad)
        return fp4_fail(I->err, FP4_ERR_LIMIT, NULL, "extra", "jinja.context",
                        "extra variables too large or deep");
    for (size_t i = 0; i < v.u.o->n; i++)
        if ((st = declare(I, g, v.u.o->k[i], v.u.o->kn[i], v.u.o->v[i]))) return st;
    return FP4_OK;
}

fp4_status fp4_template_render(const fp4_template *t, const char *messages_json, int add_generation_prompt,
                               const char *extra_json, const fp4_template_opts *opts, char **out, size_t *len,
                               fp4_error *err) {
    fp4_error_clear(err);
    *out = NULL;
    if (len) *len = 0;
    if (!t) return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "jinja.arg", "no template");
    fp4_template_opts o = {0};
    if (opts) o = *opts;
    jarena a = {0};
    a.cap = o.max_memory ? o.max_memory : FP4_TEMPLATE_MAX_MEMORY;
    jbuf b = {0};
    b.max = o.max_output ? o.max_output : FP4_TEMPLATE_MAX_OUTPUT;
    fp4_error local;
    jinterp I = {0};
    I.a = &a, I.out = &b, I.err = err ? err : &local;
    I.max_steps = o.max_steps ? o.max_steps : FP4_TEMPLATE_MAX_STEPS;
    I.max_depth = FP4_TEMPLATE_MAX_DEPTH;
    I.now = o.fixed_clock ? o.now : INT64_MIN;
    fp4_error_clear(I.err);
    jenv *g = jenv_new(&I, NULL);
    fp4_status st = g ? FP4_OK : fp4_fail(I.err, FP4_ERR_NOMEM, NULL, NULL, "jinja.memory", "out of memory");
    if (!st) {
        jglobals(&I, g);
        st = context(&I, g, messages_json, add_generation_prompt, extra_json);
    }
    if (!st && jinja_run(&I, t->prog, g)) st = I.err->code ? I.err->code : FP4_ERR_INVALID_ARG;
    if (!st && b.over)
        st = fp4_fail(I.err, FP4_ERR_LIMIT, NULL, NULL, "jinja.cap.output",
                      "the output passed its cap (%zu bytes)", b.max);
    ja_free(&a);
    if (st) {
        free(b.p);
        return st;
    }
    if (!b.p && !(b.p = calloc(1, 1)))
        return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "jinja.memory", "out of memory");
    *out = b.p;
    if (len) *len = b.n;
    return FP4_OK;
}
