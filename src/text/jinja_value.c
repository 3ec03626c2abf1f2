/* jinja_value.c — the engine's memory (a capped arena) and its runtime values as the reference's
 * JavaScript sees them: number formatting (Number.prototype.toString), String() and toString(),
 * toJSON (Python's json.dumps layout), == and ===, parseInt/parseFloat, and JSON input converted
 * with JavaScript's object key order (integer-like keys first, ascending). */
#include "jinja_impl.h"
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

struct jarena_blk {
    jarena_blk *next;
    size_t size, used;
    max_align_t data[];
};

void *ja_alloc(jarena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (!n) n = 16;
    if (a->oom || n > a->cap || a->used > a->cap - n) {
        a->oom = 1;
        return NULL;
    }
    jarena_blk *b = a->head;
    if (!b || b->size - b->used < n) {
        size_t size = n > (1u << 16) ? n : (1u << 16);
        b = malloc(sizeof *b + size);
        if (!b) {
            a->oom = 1;
            return NULL;
        }
        b->size = size, b->used = 0, b->next = a->head;
        a->head = b;
    }
    void *p = (char *)b->data + b->used;
    b->used += n;
    a->used += n;
    memset(p, 0, n);
    return p;
}

char *ja_strdup(jarena *a, const char *s, size_t n) {
    char *p = ja_alloc(a, n + 1);
    if (p && n) memcpy(p, s, n);
    return p;
}

void ja_free(jarena *a) {
    for (jarena_blk *b = a->head, *nx; b; b = nx)
        nx = b->next, free(b);
    a->head = NULL;
    a->used = 0;
}

void jb_put(jbuf *b, const char *s, size_t n) {
    if (b->over || !n) return;
    if ((b->max && n > b->max - b->n) || n > SIZE_MAX / 4 - b->n) {
        b->over = 1;
        return;
    }
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->over = 1;
            return;
        }
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
void jb_puts(jbuf *b, const char *s) {
    jb_put(b, s, strlen(s));
}
void jb_putc(jbuf *b, char c) {
    jb_put(b, &c, 1);
}

/* ---- UTF-8 ---- */
int ju_next(const char *s, size_t n, size_t i, uint32_t *cp) {
    const uint8_t *u = (const uint8_t *)s;
    uint8_t c = u[i];
    if (c < 0x80) return *cp = c, 1;
    int need = c >= 0xF8 ? 0 : c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : 0;
    if (!need) return *cp = 0xFFFD, 1;
    uint32_t v = c & (0x3Fu >> need);
    for (int k = 1; k <= need; k++) {
        if (i + (size_t)k >= n || (u[i + k] & 0xC0) != 0x80) return *cp = 0xFFFD, 1;
        v = v << 6 | (u[i + k] & 0x3F);
    }
    *cp = v;
    return need + 1;
}

size_t ju_u16_len(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += (size_t)ju_next(s, n, i, &cp);
        k += cp >= 0x10000 ? 2 : 1;
    }
    return k;
}

int ju_is_space(const char *s, size_t n, size_t i, size_t *len) {
    uint8_t c = (uint8_t)s[i];
    *len = 1;
    if (c < 0x80) return c == ' ' || (c >= 9 && c <= 13);
    uint32_t cp;
    *len = (size_t)ju_next(s, n, i, &cp);
    return cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
           cp == 0x202F || cp == 0x205F || cp == 0x3000 || cp == 0xFEFF;
}

/* ---- containers ---- */
jv jv_arr_new(jarena *a, size_t cap, int tuple) {
    jv v = {0};
    v.t = JV_ARRAY;
    v.tuple = (uint8_t)tuple;
    v.u.a = ja_alloc(a, sizeof(jarr));
    if (v.u.a && cap) {
        v.u.a->v = ja_alloc(a, cap * sizeof(jv));
        v.u.a->cap = v.u.a->v ? cap : 0;
    }
    return v;
}

int jarr_push(jarena *a, jarr *r, jv v) {
    if (!r) return -1;
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 4;
        jv *nv = ja_alloc(a, cap * sizeof *nv);
        if (!nv) return -1;
        if (r->n) memcpy(nv, r->v, r->n * sizeof *nv);
        r->v = nv, r->cap = cap;
    }
    r->v[r->n++] = v;
    return 0;
}

jv jv_obj_new(jarena *a, jv_type t) {
    jv v = {0};
    v.t = (uint8_t)t;
    v.u.o = ja_alloc(a, sizeof(jobj));
    return v;
}

jv *jobj_get(const jobj *o, const char *k, size_t kn) {
    if (!o) return NULL;
    for (size_t i = 0; i < o->n; i++)
        if (o->kn[i] == kn && !memcmp(o->k[i], k, kn)) return &o->v[i];
    return NULL;
}

int jobj_set(jarena *a, jobj *o, const char *k, size_t kn, jv v) {
    if (!o) return -1;
    jv *p = jobj_get(o, k, kn);
    if (p) return *p = v, 0;
    return jobj_append(a, o, k, kn, v);
}

int jobj_append(jarena *a, jobj *o, const char *k, size_t kn, jv v) {
    if (!o) return -1;
    if (o->n == o->cap) {
        size_t cap = o->cap ? 2 * o->cap : 4;
        const char **nk = ja_alloc(a, cap * sizeof *nk);
        size_t *nkn = ja_alloc(a, cap * sizeof *nkn);
        jv *nv = ja_alloc(a, cap * sizeof *nv);
        if (!nk || !nkn || !nv) return -1;
        if (o->n) {
            memcpy(nk, o->k, o->n * sizeof *nk);
            memcpy(nkn, o->kn, o->n * sizeof *nkn);
            memcpy(nv, o->v, o->n * sizeof *nv);
        }
        o->k = nk, o->kn = nkn, o->v = nv, o->cap = cap;
    }
    o->k[o->n] = k, o->kn[o->n] = kn, o->v[o->n] = v;
    o->n++;
    return 0;
}

int jobj_del(jobj *o, const char *k, size_t kn) {
    for (size_t i = 0; o && i < o->n; i++)
        if (o->kn[i] == kn && !memcmp(o->k[i], k, kn)) {
            memmove(o->k + i, o->k + i + 1, (o->n - i - 1) * sizeof *o->k);
            memmove(o->kn + i, o->kn + i + 1, (o->n - i - 1) * sizeof *o->kn);
            memmove(o->v + i, o->v + i + 1, (o->n - i - 1) * sizeof *o->v);
            o->n--;
            return 1;
        }
    return 0;
}

const char *jv_type_name(const jv *v) {
    static const char *const N[] = {
        "UndefinedValue", "NullValue",  "BooleanValue", "IntegerValue",   "FloatValue",
        "StringValue",    "ArrayValue", "ObjectValue",  "NamespaceValue", "KeywordArgumentsValue",
        "FunctionValue"};
    if (v->t == JV_ARRAY && v->tuple) return "TupleValue";
    return v->t < sizeof N / sizeof N[0] ? N[v->t] : "?";
}

int jv_truthy(const jv *v) {
    switch (v->t) {
    case JV_BOOL:
        return v->u.b;
    case JV_INT:
    case JV_FLOAT:
        return v->u.d != 0 && !isnan(v->u.d);
    case JV_STR:
        return v->n > 0;
    case JV_ARRAY:
        return v->u.a->n > 0;
    case JV_OBJECT:
    case JV_KWARGS:
        return v->u.o->n > 0;
    case JV_NS:
    case JV_FUNC:
        return 1;
    default:
        return 0;
    }
}

/* ---- numbers ---- */
void js_number(double d, jbuf *b) {
    if (isnan(d)) return jb_puts(b, "NaN");
    if (isinf(d)) return jb_puts(b, d < 0 ? "-Infinity" : "Infinity");
    if (d == 0) return jb_puts(b, "0");
    char tmp[40], dig[24];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, d);
        if (strtod(tmp, NULL) == d) break;
    }
    /* tmp: [-]d.ddde[+-]xx : digits and the decimal exponent */
    const char *p = tmp;
    int neg = *p == '-';
    if (neg) p++;
    int k = 0;
    for (; *p && *p != 'e'; p++)
        if (*p != '.') dig[k++] = *p;
    while (k > 1 && dig[k - 1] == '0')
        k--;
    dig[k] = 0;
    int e = atoi(p + 1), n = e + 1;
    if (neg) jb_putc(b, '-');
    if (k <= n && n <= 21) {
        jb_put(b, dig, (size_t)k);
        for (int i = 0; i < n - k; i++)
            jb_putc(b, '0');
    } else if (0 < n && n <= 21) {
        jb_put(b, dig, (size_t)n);
        jb_putc(b, '.');
        jb_put(b, dig + n, (size_t)(k - n));
    } else if (-6 < n && n <= 0) {
        jb_puts(b, "0.");
        for (int i = 0; i < -n; i++)
            jb_putc(b, '0');
        jb_put(b, dig, (size_t)k);
    } else {
        jb_putc(b, dig[0]);
        if (k > 1) jb_putc(b, '.'), jb_put(b, dig + 1, (size_t)(k - 1));
        snprintf(tmp, sizeof tmp, "e%c%d", n - 1 < 0 ? '-' : '+', abs(n - 1));
        jb_puts(b, tmp);
    }
}

/* FloatValue.toString: -0.0, integral values with one decimal (toFixed(1)), else JavaScript's */
static void float_str(double d, jbuf *b) {
    if (d == 0 && signbit(d)) return jb_puts(b, "-0.0");
    if (isfinite(d) && fmod(d, 1) == 0 && fabs(d) < 1e21) {
        char tmp[64];
        snprintf(tmp, sizeof tmp, "%.1f", d);
        return jb_puts(b, tmp);
    }
    js_number(d, b);
}

static int is_js_space_str(const char *s, size_t n, size_t *i) {
    size_t l;
    if (*i < n && ju_is_space(s, n, *i, &l)) return *i += l, 1;
    return 0;
}

double js_parse_int(const char *s, size_t n) {
    size_t i = 0;
    while (is_js_space_str(s, n, &i)) {
    }
    int neg = 0;
    if (i < n && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
    double v = 0;
    size_t st = i;
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++)
        v = v * 10 + (s[i] - '0');
    if (i == st) return NAN;
    if (i - st > 15) { /* past 2^53 the digits are rounded as one decimal number */
        char *tmp = malloc(i - st + 1);
        if (tmp) {
            memcpy(tmp, s + st, i - st);
            tmp[i - st] = 0;
            v = strtod(tmp, NULL);
            free(tmp);
        }
    }
    return neg ? -v : v;
}

/* the longest prefix that is a StrDecimalLiteral */
static size_t decimal_prefix(const char *s, size_t n, size_t i) {
    size_t st = i, d = 0;
    if (i < n && (s[i] == '+' || s[i] == '-')) i++;
    if (n - i >= 8 && !memcmp(s + i, "Infinity", 8)) return i + 8 - st;
    while (i < n && s[i] >= '0' && s[i] <= '9')
        i++, d++;
    if (i < n && s[i] == '.') {
        size_t j = i + 1, f = 0;
        while (j < n && s[j] >= '0' && s[j] <= '9')
            j++, f++;
        if (d || f) i = j, d += f;
    }
    if (!d) return 0;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        size_t j = i + 1;
        if (j < n && (s[j] == '+' || s[j] == '-')) j++;
        size_t e0 = j;
        while (j < n && s[j] >= '0' && s[j] <= '9')
            j++;
        if (j > e0) i = j;
    }
    return i - st;
}

static double strtod_n(const char *s, size_t n) {
    char tmp[128];
    char *h = n < sizeof tmp ? tmp : malloc(n + 1);
    if (!h) return NAN;
    memcpy(h, s, n);
    h[n] = 0;
    double v;
    const char *inf = h + (h[0] == '+' || h[0] == '-');
    if (!strcmp(inf, "Infinity"))
        v = h[0] == '-' ? -INFINITY : INFINITY;
    else
        v = strtod(h, NULL);
    if (h != tmp) free(h);
    return v;
}

double js_parse_float(const char *s, size_t n) {
    size_t i = 0;
    while (is_js_space_str(s, n, &i)) {
    }
    size_t l = decimal_prefix(s, n, i);
    return l ? strtod_n(s + i, l) : NAN;
}

double js_to_number(const char *s, size_t n) {
    size_t i = 0, e = n, w;
    while (is_js_space_str(s, n, &i)) {
    }
    while (e > i) {
        size_t back = 1;
        for (; back <= 3 && back <= e - i; back++)
            if (ju_is_space(s, e, e - back, &w) && w == back) break;
        if (back > 3 || back > e - i) break;
        e -= back;
    }
    if (i == e) return 0;
    if (e - i > 2 && s[i] == '0' && strchr("xXoObB", s[i + 1])) {
        int base = (s[i + 1] | 32) == 'x' ? 16 : (s[i + 1] | 32) == 'o' ? 8 : 2;
        double v = 0;
        for (size_t j = i + 2; j < e; j++) {
            int c = s[j] | 32, d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : 99;
            if (d >= base) return NAN;
            v = v * base + d;
        }
        return v;
    }
    size_t l = decimal_prefix(s, e, i);
    return l == e - i ? strtod_n(s + i, l) : NAN;
}

/* ---- strings of values ---- */
int jv_raw_str(jarena *a, const jv *v, jbuf *b) {
    switch (v->t) {
    case JV_UNDEF:
        jb_puts(b, "undefined");
        return 0;
    case JV_NULL:
        jb_puts(b, "null");
        return 0;
    case JV_BOOL:
        jb_puts(b, v->u.b ? "true" : "false");
        return 0;
    case JV_INT:
    case JV_FLOAT:
        js_number(v->u.d, b);
        return 0;
    case JV_STR:
        jb_put(b, v->u.s, v->n);
        return 0;
    case JV_ARRAY: /* Array.prototype.join(",") over the elements' toString() */
        for (size_t i = 0; i < v->u.a->n; i++) {
            if (i) jb_putc(b, ',');
            if (jv_to_string(a, &v->u.a->v[i], b)) return -1;
        }
        return 0;
    case JV_FUNC:
        return -1;
    default:
        jb_puts(b, "[object Map]");
        return 0;
    }
}

int jv_to_string(jarena *a, const jv *v, jbuf *b) {
    if (v->t == JV_FLOAT) return float_str(v->u.d, b), 0;
    if (v->t == JV_ARRAY || v->t == JV_OBJECT || v->t == JV_NS || v->t == JV_KWARGS) {
        jjson_opts o = {-1, 0, 0, 0, NULL, NULL};
        const char *why;
        return jv_to_json(v, &o, 0, b, &why);
    }
    return jv_raw_str(a, v, b);
}

static void jstr_json(const char *s, size_t n, int ascii, jbuf *b) {
    static const char hex[] = "0123456789abcdef";
    jb_putc(b, '"');
    for (size_t i = 0; i < n;) {
        uint8_t c = (uint8_t)s[i];
        const char *esc = c == '"'    ? "\\\""
                          : c == '\\' ? "\\\\"
                          : c == '\n' ? "\\n"
                          : c == '\r' ? "\\r"
                          : c == '\t' ? "\\t"
                          : c == '\b' ? "\\b"
                          : c == '\f' ? "\\f"
                                      : NULL;
        if (esc) {
            jb_puts(b, esc), i++;
        } else if (c < 0x20 || (ascii && c == 0x7F)) {
            char u[7] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15], 0};
            jb_puts(b, u), i++;
        } else if (c < 0x80 || !ascii) {
            jb_putc(b, (char)c), i++;
        } else {
            uint32_t cp;
            i += (size_t)ju_next(s, n, i, &cp);
            uint32_t units[2] = {cp, 0};
            int nu = 1;
            if (cp >= 0x10000)
                units[0] = 0xD800 + ((cp - 0x10000) >> 10), units[1] = 0xDC00 + (cp & 0x3FF), nu = 2;
            for (int k = 0; k < nu; k++) {
                char u[7] = {'\\',
                             'u',
                             hex[units[k] >> 12],
                             hex[(units[k] >> 8) & 15],
                             hex[(units[k] >> 4) & 15],
                             hex[units[k] & 15],
                             0};
                jb_puts(b, u);
            }
        }
    }
    jb_putc(b, '"');
}

static void pad(jbuf *b, int indent, int depth) {
    jb_putc(b, '\n');
    for (long i = 0; i < (long)indent * depth; i++)
        jb_putc(b, ' ');
}

static int key_cmp(const jobj *o, size_t x, size_t y) {
    size_t m = o->kn[x] < o->kn[y] ? o->kn[x] : o->kn[y];
    int c = memcmp(o->k[x], o->k[y], m);
    return c ? c : (o->kn[x] > o->kn[y]) - (o->kn[x] < o->kn[y]);
}

static _Thread_local const jobj *sort_obj; /* the object whose key order qsort computes */
static int key_cmp_q(const void *x, const void *y) {
    return key_cmp(sort_obj, *(const size_t *)x, *(const size_t *)y);
}

int jv_to_json(const jv *v, const jjson_opts *o, int depth, jbuf *b, const char **why) {
    const char *isep = o->item_sep ? o->item_sep : o->indent > 0 ? "," : ", ";
    const char *ksep = o->key_sep ? o->key_sep : ": ";
    if (depth > 512) return *why = "nesting too deep", -1;
    switch (v->t) {
    case JV_NULL:
        jb_puts(b, "null");
        return 0;
    case JV_UNDEF:
        jb_puts(b, o->undef_null ? "null" : "undefined");
        return 0;
    case JV_BOOL:
        jb_puts(b, v->u.b ? "true" : "false");
        return 0;
    case JV_INT:
    case JV_FLOAT:
        if (!isfinite(v->u.d))
            jb_puts(b, "null");
        else
            js_number(v->u.d, b);
        return 0;
    case JV_STR:
        jstr_json(v->u.s, v->n, o->ensure_ascii, b);
        return 0;
    case JV_ARRAY:
        if (v->tuple) return *why = "TupleValue", -1;
        jb_putc(b, '[');
        for (size_t i = 0; i < v->u.a->n; i++) {
            if (i) jb_puts(b, isep);
            if (o->indent > 0) pad(b, o->indent, depth + 1);
            if (jv_to_json(&v->u.a->v[i], o, depth + 1, b, why)) return -1;
        }
        if (o->indent > 0 && v->u.a->n) pad(b, o->indent, depth);
        jb_putc(b, ']');
        return 0;
    case JV_OBJECT:
    case JV_NS: {
        const jobj *ob = v->u.o;
        size_t *ord = malloc((ob->n + 1) * sizeof *ord);
        if (!ord) return *why = "out of memory", -1;
        for (size_t i = 0; i < ob->n; i++)
            ord[i] = i;
        if (o->sort_keys) {
            sort_obj = ob;
            qsort(ord, ob->n, sizeof *ord, key_cmp_q);
        }
        jb_putc(b, '{');
        int rc = 0;
        for (size_t i = 0; i < ob->n && !rc; i++) {
            if (i) jb_puts(b, isep);
            if (o->indent > 0) pad(b, o->indent, depth + 1);
            jstr_json(ob->k[ord[i]], ob->kn[ord[i]], o->ensure_ascii, b);
            jb_puts(b, ksep);
            rc = jv_to_json(&ob->v[ord[i]], o, depth + 1, b, why);
        }
        free(ord);
        if (rc) return -1;
        if (o->indent > 0 && ob->n) pad(b, o->indent, depth);
        jb_putc(b, '}');
        return 0;
    }
    default:
        *why = jv_type_name(v);
        return -1;
    }
}

/* ---- equality ---- */
int jv_strict_eq(const jv *x, const jv *y) {
    int xn = jv_isnum(x), yn = jv_isnum(y);
    if (xn || yn) return xn && yn && x->u.d == y->u.d;
    if (x->t != y->t) return 0;
    switch (x->t) {
    case JV_UNDEF:
    case JV_NULL:
        return 1;
    case JV_BOOL:
        return x->u.b == y->u.b;
    case JV_STR:
        return x->n == y->n && !memcmp(x->u.s, y->u.s, x->n);
    case JV_ARRAY:
        return x->u.a == y->u.a;
    case JV_FUNC:
        return x->u.f == y->u.f;
    default:
        return x->u.o == y->u.o;
    }
}

static int prim(const jv *v) {
    return v->t == JV_BOOL || jv_isnum(v) || v->t == JV_STR;
}
static double num_of(const jv *v) {
    return v->t == JV_BOOL ? v->u.b : jv_isnum(v) ? v->u.d : js_to_number(v->u.s, v->n);
}

int jv_loose_eq(jarena *a, const jv *x, const jv *y) {
    int xnil = x->t == JV_UNDEF || x->t == JV_NULL, ynil = y->t == JV_UNDEF || y->t == JV_NULL;
    if (xnil || ynil) return xnil && ynil;
    if (x->t == y->t || (jv_isnum(x) && jv_isnum(y))) return jv_strict_eq(x, y);
    if (x->t == JV_ARRAY && y->t == JV_ARRAY) return 0;
    if (prim(x) && prim(y)) {
        if (x->t == JV_STR && y->t == JV_STR) return jv_strict_eq(x, y);
        return num_of(x) == num_of(y);
    }
    if (!prim(x) && !prim(y)) return 0; /* two objects of different kinds */
    /* an object against a primitive: the object's string form */
    const jv *ob = prim(x) ? y : x, *pv = prim(x) ? x : y;
    jbuf b = {0};
    if (jv_raw_str(a, ob, &b) || b.over) return free(b.p), 0;
    jv s = jv_str(b.p ? b.p : "", b.n);
    int r = pv->t == JV_STR ? jv_strict_eq(&s, pv) : js_to_number(s.u.s, s.n) == num_of(pv);
    free(b.p);
    return r;
}

/* ---- JSON in ---- */
static int canonical_index(const char *k, size_t n) {
    if (!n || n > 10 || (n > 1 && k[0] == '0')) return 0;
    double v = 0;
    for (size_t i = 0; i < n; i++) {
        if (k[i] < '0' || k[i] > '9') return 0;
        v = v * 10 + (k[i] - '0');
    }
    return v < 4294967295.0;
}

static int from_json(jarena *a, json_t *j, jv *out, unsigned depth) {
    if (depth > 512) return -1;
    switch (json_typeof(j)) {
    case JSON_NULL:
        *out = jv_null();
        return 0;
    case JSON_TRUE:
        *out = jv_bool(1);
        return 0;
    case JSON_FALSE:
        *out = jv_bool(0);
        return 0;
    case JSON_INTEGER:
        *out = jv_int((double)json_integer_value(j));
        return 0;
    case JSON_REAL: {
        double d = json_real_value(j);
        *out = isfinite(d) && fmod(d, 1) == 0 ? jv_int(d) : jv_float(d);
        return 0;
    }
    case JSON_STRING: {
        size_t n = json_string_length(j);
        const char *s = ja_strdup(a, json_string_value(j), n);
        if (!s) return -1;
        *out = jv_str(s, n);
        return 0;
    }
    case JSON_ARRAY: {
        *out = jv_arr_new(a, json_array_size(j), 0);
        if (!out->u.a) return -1;
        for (size_t i = 0; i < json_array_size(j); i++) {
            jv e;
            if (from_json(a, json_array_get(j, i), &e, depth + 1) || jarr_push(a, out->u.a, e)) return -1;
        }
        return 0;
    }
    case JSON_OBJECT: {
        *out = jv_obj_new(a, JV_OBJECT);
        if (!out->u.o) return -1;
        for (int pass = 0; pass < 2; pass++) { /* integer-like keys first, ascending, as JavaScript orders */
            size_t base = out->u.o->n;
            const char *k;
            json_t *val;
            void *tmp;
            json_object_foreach_safe(j, tmp, k, val) {
                size_t kn = strlen(k);
                if (canonical_index(k, kn) != !pass) continue;
                jv e;
                char *kk = ja_strdup(a, k, kn);
                /* jansson's keys are unique: no search */
                if (!kk || from_json(a, val, &e, depth + 1) || jobj_append(a, out->u.o, kk, kn, e)) return -1;
                if (!pass) /* keep the integer keys sorted by value */
                    for (size_t m = out->u.o->n - 1; m > base; m--) {
                        jobj *o = out->u.o;
                        double p = strtod(o->k[m - 1], NULL), q = strtod(o->k[m], NULL);
                        if (p <= q) break;
                        const char *tk = o->k[m];
                        size_t tn = o->kn[m];
                        jv tv = o->v[m];
                        o->k[m] = o->k[m - 1], o->kn[m] = o->kn[m - 1], o->v[m] = o->v[m - 1];
                        o->k[m - 1] = tk, o->kn[m - 1] = tn, o->v[m - 1] = tv;
                    }
            }
        }
        return 0;
    }
    default:
        return -1;
    }
}

int jv_from_json(jarena *a, const void *json, jv *out, unsigned depth) {
    return from_json(a, (json_t *)json, out, depth);
}
