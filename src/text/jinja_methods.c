/* jinja_methods.c — what a value offers as members (string, object and array methods) and the
 * global functions (namespace, range, raise_exception, strftime_now), as the reference defines
 * them: e.g. strip() ignores its argument, split() follows Python, get() gives none for a missing
 * key, title() upper-cases ASCII letters at word starts, capitalize() leaves the rest alone. */
#include "jinja_impl.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <utf8proc.h>

static int oom(jinterp *I, const jnode *at) {
    return jerr(I, at, "jinja.cap.memory", "the render passed its memory cap (%zu bytes)", I->a->cap);
}

static jv bound(jinterp *I, jbuiltin fn, const jv *self) {
    jv v = {0};
    v.t = JV_FUNC;
    v.u.f = ja_alloc(I->a, sizeof(jfunc));
    if (v.u.f)
        v.u.f->fn = fn, v.u.f->self = *self;
    else
        v.t = JV_UNDEF;
    return v;
}

/* ---- strings ---- */
static void put_cp(jbuf *b, int32_t cp) {
    uint8_t u[4];
    utf8proc_ssize_t l = utf8proc_encode_char(cp, u);
    jb_put(b, (const char *)u, (size_t)l);
}

/* JavaScript's toUpperCase / toLowerCase use Unicode's full mappings (SpecialCasing.txt), where a
 * character may become several: the unconditional ones of Latin text, and the final sigma */
static const struct {
    uint32_t cp;
    const char *to;
} UPPER_FULL[] = {{0xDF, "SS"},          {0x149, "\xCA\xBCN"},  {0x1F0, "J\xCC\x8C"},  {0xFB00, "FF"},
                  {0xFB01, "FI"},        {0xFB02, "FL"},        {0xFB03, "FFI"},       {0xFB04, "FFL"},
                  {0xFB05, "ST"},        {0xFB06, "ST"},        {0x1E96, "H\xCC\xB1"}, {0x1E97, "T\xCC\x88"},
                  {0x1E98, "W\xCC\x8A"}, {0x1E99, "Y\xCC\x8A"}, {0x1E9A, "A\xCA\xBE"}};

static int cased(uint32_t cp) {
    utf8proc_category_t c = utf8proc_category((int32_t)cp);
    return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT;
}

/* a capital sigma ends a word: a cased letter before it and none after it */
static int final_sigma(const jv *s, size_t at, size_t len) {
    uint32_t cp;
    int before = 0, after = 0;
    for (size_t i = 0; i < at;) {
        i += (size_t)ju_next(s->u.s, s->n, i, &cp);
        before = cased(cp);
    }
    if (at + len < s->n) ju_next(s->u.s, s->n, at + len, &cp), after = cased(cp);
    return before && !after;
}

static int case_map(jinterp *I, const jnode *at, const jv *s, int upper, jv *out) {
    jbuf b = {0};
    for (size_t i = 0; i < s->n;) {
        uint32_t cp;
        size_t l = (size_t)ju_next(s->u.s, s->n, i, &cp);
        const char *full = NULL;
        for (size_t k = 0; upper && k < sizeof UPPER_FULL / sizeof UPPER_FULL[0]; k++)
            if (UPPER_FULL[k].cp == cp) full = UPPER_FULL[k].to;
        if (!upper && cp == 0x130) full = "i\xCC\x87";
        if (!upper && cp == 0x3A3 && final_sigma(s, i, l)) full = "\xCF\x82";
        if (full)
            jb_puts(&b, full);
        else
            put_cp(&b, upper ? utf8proc_toupper((int32_t)cp) : utf8proc_tolower((int32_t)cp));
        i += l;
    }
    return jstr_new(I, at, &b, out);
}

static size_t ws_at_end(const char *s, size_t lo, size_t e) {
    for (size_t back = 1; back <= 3 && back <= e - lo; back++) {
        size_t l;
        if (ju_is_space(s, e, e - back, &l) && l == back) return back;
    }
    return 0;
}

static jv trimmed(const jv *s, int left, int right) {
    size_t i = 0, e = s->n, l, w;
    while (left && i < e && ju_is_space(s->u.s, s->n, i, &l))
        i += l;
    while (right && e > i && (w = ws_at_end(s->u.s, i, e)))
        e -= w;
    return jv_str(s->u.s + i, e - i);
}

static int m_upper(jinterp *I, const jnode *at, const jv *self, const jv *a, size_t n, jv *out) {
    (void)a, (void)n;
    return case_map(I, at, self, 1, out);
}
static int m_lower(jinterp *I, const jnode *at, const jv *self, const jv *a, size_t n, jv *out) {
    (void)a, (void)n;
    return case_map(I, at, self, 0, out);
}
static int m_strip(jinterp *I, const jnode *at, const jv *self, const jv *a, size_t n, jv *out) {
    (void)I, (void)at, (void)a, (void)n;
    return *out = trimmed(self, 1, 1), J_OK;
}
static int m_lstrip(jinterp *I, const jnode *at, const jv *self, const jv *a, size_t n, jv *out) {
    (void)I, (void)at, (void)a, (void)n;
    return *out = trimmed(self, 1, 0), J_OK;
}
static int m_rstrip(jinterp *I, const jnode *at, const jv *self, const jv *a, size_t n, jv *out) {
    (void)I, (void)at, (void)a, (void)n;
    return *out = trimmed(self, 0, 1), J_OK;
}

static int is_word(int c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static int m_title(jinterp *I, const jnode *at, const jv *self, const jv *a, size_t n, jv *out) {
    (void)a, (void)n;
    char *p = ja_strdup(I->a, self->u.s, self->n);
    if (!p) return oom(I, at);
    for (size_t i = 0; i < self->n; i++)
        if (is_word((uint8_t)p[i]) && (i == 0 || !is_word((uint8_t)p[i - 1])) && p[i] >= 'a' && p[i] <= 'z')
            p[i] -= 32;
    return *out = jv_str(p, self->n), J_OK;
}
static int m_capitalize(jinterp *I, const jnode *at, const jv *self, const jv *a, size_t n, jv *out) {
    (void)a, (void)n;
    if (!self->n) return *out = *self, J_OK;
    uint32_t cp;
    size_t l = (size_t)ju_next(self->u.s, self->n, 0, &cp);
    jbuf b = {0};
    if (cp < 0x10000)
        put_cp(&b, utf8proc_toupper((int32_t)cp));
    else
        jb_put(&b, self->u.s, l);
    jb_put(&b, self->u.s + l, self->n - l);
    return jstr_new(I, at, &b, out);
}

static int affix(jinterp *I, const jnode *at, const jv *self, const jv *a, size_t n, int end, jv *out) {
    const char *what = end ? "endswith" : "startswith";
    if (!n) return jerr(I, at, "jinja.eval", "%s() requires at least one argument", what);
    const jv *pats = &a[0];
    size_t np = pats->t == JV_STR ? 1 : jv_isarr(pats) ? pats->u.a->n : 0;
    if (pats->t != JV_STR && !jv_isarr(pats))
        return jerr(I, at, "jinja.eval", "%s() argument must be a string or tuple of strings", what);
    for (size_t i = 0; i < np; i++) {
        const jv *p = pats->t == JV_STR ? pats : &pats->u.a->v[i];
        if (p->t != JV_STR) return jerr(I, at, "jinja.eval", "%s() tuple elements must be strings", what);
        if (p->n <= self->n && !memcmp(self->u.s + (end ? self->n - p->n : 0), p->u.s, p->n))
            return *out = jv_bool(1), J_OK;
    }
    return *out = jv_bool(0), J_OK;
}
static int m_startswith(jinterp *I, const jnode *at, const jv *self, const jv *a, size_t n, jv *out) {
    return affix(I, at, self, a, n, 0, out);
}
static int m_endswith(jinterp *I, const jnode *at, const jv *self, const jv *a, size_t n, jv *out) {
    return affix(I, at, self, a, n, 1, out);
}

static int push_str(jinterp *I, const jnode *at, jv *arr, const char *s, size_t n) {
    return jarr_push(I->a, arr->u.a, jv_str(s, n)) ? oom(I, at) : J_OK;
}

static int m_split(jinterp *I, const jnode *at, const jv *self, const jv *a, size_t n, jv *out) {
    jv sep = n > 0 ? a[0] : jv_null(), maxs = n > 1 ? a[1] : jv_int(-1);
    if (sep.t != JV_STR && sep.t != JV_NULL)
        return jerr(I, at, "jinja.eval", "sep argument must be a string or null");
    if (maxs.t != JV_INT) return jerr(I, at, "jinja.eval", "maxsplit argument must be a number");
    double mx = maxs.u.d;
    *out = jv_arr_new(I->a, 0, 0);
    if (!out->u.a) return oom(I, at);
    const char *s = self->u.s;
    size_t len = self->n, l;
    if (sep.t == JV_NULL) {
        size_t i = 0;
        while (i < len && ju_is_space(s, len, i, &l))
            i += l;
        while (i < len) {
            size_t st = i;
            while (i < len && !ju_is_space(s, len, i, &l))
                i += (size_t)ju_next(s, len, i, &(uint32_t){0});
            if (mx >= 0 && (double)out->u.a->n >= mx) return push_str(I, at, out, s + st, len - st);
            if (push_str(I, at, out, s + st, i - st)) return J_ERR;
            while (i < len && ju_is_space(s, len, i, &l))
                i += l;
        }
        return J_OK;
    }
    if (!sep.n) return jerr(I, at, "jinja.eval", "empty separator");
    size_t st = 0;
    for (;;) {
        if (++I->steps > I->max_steps)
            return jerr(I, at, "jinja.cap.steps", "more than %llu steps", (unsigned long long)I->max_steps);
        const char *p =
            mx >= 0 && (double)out->u.a->n >= mx ? NULL : memmem(s + st, len - st, sep.u.s, sep.n);
        if (!p) return push_str(I, at, out, s + st, len - st);
        if (push_str(I, at, out, s + st, (size_t)(p - (s + st)))) return J_ERR;
        st = (size_t)(p - s) + sep.n;
    }
}

int jstr_replace(jinterp *I, const jnode *at, const jv *self, const jv *a, size_t n, jv *out);
int jstr_replace(jinterp *I, const jnode *at, const jv *self, const jv *a, size_t n, jv *out) {
    if (n < 2) return jerr(I, at, "jinja.eval", "replace() requires at least two arguments");
    if (a[0].t != JV_STR || a[1].t != JV_STR)
        return jerr(I, at, "jinja.eval", "replace() arguments must be strings");
    jv count = jv_null();
    if (n > 2) {
        if (a[2].t == JV_KWARGS) {
            jv *c = jobj_get(a[2].u.o, "count", 5);
            count = c ? *c : jv_null();
        } else {
            count = a[2];
        }
    }
    if (count.t != JV_INT && count.t != JV_NULL)
        return jerr(I, at, "jinja.eval", "replace() count argument must be a number or null");
    if (count.t == JV_INT && count.u.d == 0) return *out = *self, J_OK;
    double left = count.t == JV_NULL || count.u.d < 0 ? INFINITY : count.u.d;
    const jv *old = &a[0], *nw = &a[1];
    jbuf b = {0};
    size_t i = 0;
    if (!old->n) { /* an empty pattern matches before every code point and at the end */
        while (i <= self->n) {
            if (left > 0) jb_put(&b, nw->u.s, nw->n), left--;
            if (i == self->n) break;
            size_t l = (size_t)ju_next(self->u.s, self->n, i, &(uint32_t){0});
            jb_put(&b, self->u.s + i, l);
            i += l;
        }
        return jstr_new(I, at, &b, out);
    }
    while (i < self->n) {
        const char *p = left > 0 ? memmem(self->u.s + i, self->n - i, old->u.s, old->n) : NULL;
        if (!p) break;
        size_t k = (size_t)(p - self->u.s);
        jb_put(&b, self->u.s + i, k - i);
        jb_put(&b, nw->u.s, nw->n);
        left--;
        i = k + old->n;
    }
    jb_put(&b, self->u.s + i, self->n - i);
    return jstr_new(I, at, &b, out);
}

/* ---- objects ---- */
jv jv_keys(jarena *a, const jobj *o) {
    jv r = jv_arr_new(a, o->n, 0);
    for (size_t i = 0; r.u.a && i < o->n; i++)
        jarr_push(a, r.u.a, jv_str(o->k[i], o->kn[i]));
    return r;
}

static int m_get(jinterp *I, const jnode *at, const jv *self, const jv *a, size_t n, jv *out) {
    if (!n || a[0].t != JV_STR)
        return jerr(I, at, "jinja.eval", "Object key must be a string: got %s",
                    n ? jv_type_name(&a[0]) : "undefined");
    jv *v = jobj_get(self->u.o, a[0].u.s, a[0].n);
    *out = v ? *v : n > 1 ? a[1] : jv_null();
    return J_OK;
}
static int m_items(jinterp *I, const jnode *at, const jv *self, const jv *a, size_t n, jv *out) {
    (void)a, (void)n;
    const jobj *o = self->u.o;
    *out = jv_arr_new(I->a, o->n, 0);
    for (size_t i = 0; out->u.a && i < o->n; i++) {
        jv pair = jv_arr_new(I->a, 2, 0);
        if (!pair.u.a) return oom(I, at);
        jarr_push(I->a, pair.u.a, jv_str(o->k[i], o->kn[i]));
        jarr_push(I->a, pair.u.a, o->v[i]);
        jarr_push(I->a, out->u.a, pair);
    }
    return out->u.a ? J_OK : oom(I, at);
}
static int m_keys(jinterp *I, const jnode *at, const jv *self, const jv *a, size_t n, jv *out) {
    (void)a, (void)n;
    *out = jv_keys(I->a, self->u.o);
    return out->u.a ? J_OK : oom(I, at);
}
static int m_values(jinterp *I, const jnode *at, const jv *self, const jv *a, size_t n, jv *out) {
    (void)a, (void)n;
    *out = jv_arr_new(I->a, self->u.o->n, 0);
    for (size_t i = 0; out->u.a && i < self->u.o->n; i++)
        jarr_push(I->a, out->u.a, self->u.o->v[i]);
    return out->u.a ? J_OK : oom(I, at);
}

int jcompare(jinterp *I, const jnode *at, const jv *x, const jv *y, int case_sensitive, int *res);
int jcompare(jinterp *I, const jnode *at, const jv *x, const jv *y, int case_sensitive, int *res) {
    if (x->t == JV_NULL && y->t == JV_NULL) return *res = 0, J_OK;
    if (x->t == JV_UNDEF && y->t == JV_UNDEF) return *res = 0, J_OK;
    if (x->t == JV_NULL || y->t == JV_NULL || x->t == JV_UNDEF || y->t == JV_UNDEF)
        return jerr(I, at, "jinja.eval", "Cannot compare %s with %s", jv_type_name(x), jv_type_name(y));
    int xn = jv_isnum(x) || x->t == JV_BOOL, yn = jv_isnum(y) || y->t == JV_BOOL;
    if (xn && yn) {
        double a = x->t == JV_BOOL ? x->u.b : x->u.d, b = y->t == JV_BOOL ? y->u.b : y->u.d;
        return *res = a < b ? -1 : a > b ? 1 : 0, J_OK;
    }
    if (x->t != y->t || x->tuple != y->tuple)
        return jerr(I, at, "jinja.eval", "Cannot compare different types: %s and %s", jv_type_name(x),
                    jv_type_name(y));
    if (x->t != JV_STR) return jerr(I, at, "jinja.eval", "Cannot compare type: %s", jv_type_name(x));
    jv a = *x, b = *y;
    if (!case_sensitive && (case_map(I, at, x, 0, &a) || case_map(I, at, y, 0, &b))) return J_ERR;
    size_t m = a.n < b.n ? a.n : b.n;
    int c = memcmp(a.u.s, b.u.s, m);
    *res = c < 0 ? -1 : c > 0 ? 1 : (a.n > b.n) - (a.n < b.n);
    return J_OK;
}

static int m_dictsort(jinterp *I, const jnode *at, const jv *self, const jv *a, size_t n, jv *out) {
    const jobj *kw = n && a[n - 1].t == JV_KWARGS ? a[n - 1].u.o : NULL;
    size_t np = kw ? n - 1 : n;
    const jv *cs = np > 0 ? &a[0] : jobj_get(kw, "case_sensitive", 14);
    const jv *by = np > 1 ? &a[1] : jobj_get(kw, "by", 2);
    const jv *rev = np > 2 ? &a[2] : jobj_get(kw, "reverse", 7);
    if (cs && cs->t != JV_BOOL) return jerr(I, at, "jinja.eval", "case_sensitive must be a boolean");
    if (by && by->t != JV_STR) return jerr(I, at, "jinja.eval", "by must be a string");
    int byv = by && by->n == 5 && !memcmp(by->u.s, "value", 5);
    if (by && !byv && !(by->n == 3 && !memcmp(by->u.s, "key", 3)))
        return jerr(I, at, "jinja.eval", "by must be either 'key' or 'value'");
    if (rev && rev->t != JV_BOOL) return jerr(I, at, "jinja.eval", "reverse must be a boolean");
    int rc = m_items(I, at, self, a, 0, out);
    if (rc) return rc;
    jv *v = out->u.a->v;
    for (size_t i = 1; i < out->u.a->n; i++) /* insertion sort: stable like Array.prototype.sort */
        for (size_t j = i; j > 0; j--) {
            int c;
            if (++I->steps > I->max_steps)
                return jerr(I, at, "jinja.cap.steps", "more than %llu steps",
                            (unsigned long long)I->max_steps);
            if (jcompare(I, at, &v[j - 1].u.a->v[byv], &v[j].u.a->v[byv], cs && cs->u.b, &c)) return J_ERR;
            if (rev && rev->u.b) c = -c;
            if (c <= 0) break;
            jv t = v[j];
            v[j] = v[j - 1], v[j - 1] = t;
        }
    return J_OK;
}

static const struct {
    const char *name;
    jbuiltin fn;
} STR_METHODS[] = {{"upper", m_upper},   {"lower", m_lower},           {"strip", m_strip},
                   {"title", m_title},   {"capitalize", m_capitalize}, {"rstrip", m_rstrip},
                   {"lstrip", m_lstrip}, {"startswith", m_startswith}, {"endswith", m_endswith},
                   {"split", m_split},   {"replace", jstr_replace}},
  OBJ_METHODS[] = {
      {"get", m_get}, {"items", m_items}, {"keys", m_keys}, {"values", m_values}, {"dictsort", m_dictsort}};

jv jmethod(jinterp *I, const jv *self, const char *name, size_t n) {
    if (n == 6 && !memcmp(name, "length", 6)) {
        if (self->t == JV_STR) return jv_int((double)ju_u16_len(self->u.s, self->n));
        if (jv_isarr(self)) return jv_int((double)self->u.a->n);
    }
    if (self->t == JV_STR)
        for (size_t i = 0; i < sizeof STR_METHODS / sizeof STR_METHODS[0]; i++)
            if (strlen(STR_METHODS[i].name) == n && !memcmp(STR_METHODS[i].name, name, n))
                return bound(I, STR_METHODS[i].fn, self);
    if (jv_isobj(self))
        for (size_t i = 0; i < sizeof OBJ_METHODS / sizeof OBJ_METHODS[0]; i++)
            if (strlen(OBJ_METHODS[i].name) == n && !memcmp(OBJ_METHODS[i].name, name, n))
                return bound(I, OBJ_METHODS[i].fn, self);
    return jv_undef();
}

/* a method called as a filter with no arguments (|upper, |items ...): NULL when there is none */
jbuiltin jmethod_fn(const jv *self, const char *name);
jbuiltin jmethod_fn(const jv *self, const char *name) {
    size_t n = strlen(name);
    if (self->t == JV_STR)
        for (size_t i = 0; i < sizeof STR_METHODS / sizeof STR_METHODS[0]; i++)
            if (strlen(STR_METHODS[i].name) == n && !memcmp(STR_METHODS[i].name, name, n))
                return STR_METHODS[i].fn;
    if (jv_isobj(self))
        for (size_t i = 0; i < sizeof OBJ_METHODS / sizeof OBJ_METHODS[0]; i++)
            if (strlen(OBJ_METHODS[i].name) == n && !memcmp(OBJ_METHODS[i].name, name, n))
                return OBJ_METHODS[i].fn;
    return NULL;
}

/* ---- globals ---- */
static int g_raise(jinterp *I, const jnode *at, const jv *self, const jv *a, size_t n, jv *out) {
    (void)self, (void)out;
    jbuf b = {0};
    if (n && a[0].t != JV_UNDEF && jv_raw_str(I->a, &a[0], &b)) jb_puts(&b, "function");
    I->raised = 1;
    jerr(I, at, "jinja.raise", "%s", b.p ? b.p : "");
    free(b.p);
    if (I->err) snprintf(I->err->tensor, sizeof I->err->tensor, "line %u", at ? at->line : 0);
    return J_ERR;
}

static int g_range(jinterp *I, const jnode *at, const jv *self, const jv *a, size_t n, jv *out) {
    (void)self;
    for (size_t i = 0; i < n; i++)
        if (!jv_isnum(&a[i])) return jerr(I, at, "jinja.unsupported", "range() of a %s", jv_type_name(&a[i]));
    if (!n || n > 3) return jerr(I, at, "jinja.unsupported", "range() with %zu arguments", n);
    double start = n > 1 ? a[0].u.d : 0, stop = n > 1 ? a[1].u.d : a[0].u.d, step = n > 2 ? a[2].u.d : 1;
    if (step == 0) return jerr(I, at, "jinja.eval", "range() step must not be zero");
    *out = jv_arr_new(I->a, 0, 0);
    if (!out->u.a) return oom(I, at);
    for (double i = start; step > 0 ? i < stop : i > stop; i += step) {
        if (++I->steps > I->max_steps)
            return jerr(I, at, "jinja.cap.steps", "more than %llu steps", (unsigned long long)I->max_steps);
        if (jarr_push(I->a, out->u.a, fmod(i, 1) == 0 ? jv_int(i) : jv_float(i))) return oom(I, at);
    }
    return J_OK;
}

static int g_strftime(jinterp *I, const jnode *at, const jv *self, const jv *a, size_t n, jv *out) {
    (void)self;
    if (!n || a[0].t != JV_STR) return jerr(I, at, "jinja.eval", "strftime_now() takes a format string");
    static const char *const MON[] = {"January", "February", "March",     "April",   "May",      "June",
                                      "July",    "August",   "September", "October", "November", "December"};
    time_t t = I->now == INT64_MIN ? time(NULL) : (time_t)I->now;
    struct tm tm;
    if (!(I->now == INT64_MIN ? localtime_r(&t, &tm) : gmtime_r(&t, &tm)))
        return jerr(I, at, "jinja.eval", "strftime_now(): the clock is out of range");
    jbuf b = {0};
    const char *f = a[0].u.s;
    for (size_t i = 0; i < a[0].n; i++) {
        char c = i + 1 < a[0].n && f[i] == '%' ? f[i + 1] : 0, tmp[32];
        const char *rep = NULL;
        switch (c) {
        case 'Y':
            snprintf(tmp, sizeof tmp, "%d", tm.tm_year + 1900), rep = tmp;
            break;
        case 'm':
            snprintf(tmp, sizeof tmp, "%02d", tm.tm_mon + 1), rep = tmp;
            break;
        case 'd':
            snprintf(tmp, sizeof tmp, "%02d", tm.tm_mday), rep = tmp;
            break;
        case 'H':
            snprintf(tmp, sizeof tmp, "%02d", tm.tm_hour), rep = tmp;
            break;
        case 'M':
            snprintf(tmp, sizeof tmp, "%02d", tm.tm_min), rep = tmp;
            break;
        case 'B':
            rep = MON[tm.tm_mon];
            break;
        case 'b':
            snprintf(tmp, sizeof tmp, "%.3s", MON[tm.tm_mon]), rep = tmp;
            break;
        case '%':
            rep = "%";
            break;
        default:
            break;
        }
        if (rep)
            jb_puts(&b, rep), i++;
        else
            jb_putc(&b, f[i]);
    }
    return jstr_new(I, at, &b, out);
}

static int g_namespace(jinterp *I, const jnode *at, const jv *self, const jv *a, size_t n, jv *out) {
    (void)self;
    const jobj *kw = n && a[n - 1].t == JV_KWARGS ? a[n - 1].u.o : NULL;
    size_t np = kw ? n - 1 : n;
    if (np > 1) return jerr(I, at, "jinja.eval", "namespace expected at most 1 argument, got %zu", np);
    *out = jv_obj_new(I->a, JV_NS);
    if (!out->u.o) return oom(I, at);
    if (np == 1) {
        const jv *src = &a[0];
        if (jv_isobj(src)) {
            for (size_t i = 0; i < src->u.o->n; i++)
                if (jobj_append(I->a, out->u.o, src->u.o->k[i], src->u.o->kn[i], src->u.o->v[i]))
                    return oom(I, at);
        } else if (jv_isarr(src)) {
            for (size_t i = 0; i < src->u.a->n; i++) {
                const jv *p = &src->u.a->v[i];
                if (!jv_isarr(p) || p->u.a->n != 2)
                    return jerr(I, at, "jinja.eval",
                                "namespace expected an object or an iterable of [key, value] pairs");
                if (p->u.a->v[0].t != JV_STR)
                    return jerr(I, at, "jinja.eval", "namespace keys must be strings");
                if (jobj_set(I->a, out->u.o, p->u.a->v[0].u.s, p->u.a->v[0].n, p->u.a->v[1]))
                    return oom(I, at);
            }
        } else {
            return jerr(I, at, "jinja.eval", "'%s' object is not iterable", jv_type_name(src));
        }
    }
    for (size_t i = 0; kw && i < kw->n; i++)
        if (jobj_set(I->a, out->u.o, kw->k[i], kw->kn[i], kw->v[i])) return oom(I, at);
    return J_OK;
}

void jglobals(jinterp *I, jenv *g) {
    jv nul = jv_null();
    jobj_set(I->a, &g->vars, "\x01namespace", 10, bound(I, g_namespace, &nul));
    jobj_set(I->a, &g->vars, "false", 5, jv_bool(0));
    jobj_set(I->a, &g->vars, "true", 4, jv_bool(1));
    jobj_set(I->a, &g->vars, "none", 4, jv_null());
    jobj_set(I->a, &g->vars, "raise_exception", 15, bound(I, g_raise, &nul));
    jobj_set(I->a, &g->vars, "range", 5, bound(I, g_range, &nul));
    jobj_set(I->a, &g->vars, "strftime_now", 12, bound(I, g_strftime, &nul));
    jobj_set(I->a, &g->vars, "True", 4, jv_bool(1));
    jobj_set(I->a, &g->vars, "False", 5, jv_bool(0));
    jobj_set(I->a, &g->vars, "None", 4, jv_null());
}
