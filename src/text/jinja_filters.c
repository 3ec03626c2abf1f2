/* jinja_filters.c — filters and tests as the reference applies them: a filter without arguments
 * dispatches on the operand's type (an array knows list/first/last/length/reverse/sort/join/
 * string/unique, a string length/upper/lower/title/capitalize/trim/indent/join/string/int/float,
 * and so on), a filter called with arguments knows tojson/join/int/float/default and, by type,
 * sort/selectattr/rejectattr/map, indent/replace and the object methods. Anything else is an
 * error naming the filter, the type and the line. */
#include "jinja_impl.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <utf8proc.h>

int jcompare(jinterp *I, const jnode *at, const jv *x, const jv *y, int case_sensitive, int *res);
int jstr_replace(jinterp *I, const jnode *at, const jv *self, const jv *a, size_t n, jv *out);
jbuiltin jmethod_fn(const jv *self, const char *name);

static int oom(jinterp *I, const jnode *at) {
    return jerr(I, at, "jinja.cap.memory", "the render passed its memory cap (%zu bytes)", I->a->cap);
}

/* ---- tests ---- */
enum {
    T_BOOLEAN,
    T_CALLABLE,
    T_ODD,
    T_EVEN,
    T_FALSE,
    T_TRUE,
    T_NONE,
    T_STRING,
    T_NUMBER,
    T_INTEGER,
    T_ITERABLE,
    T_MAPPING,
    T_SEQUENCE,
    T_LOWER,
    T_UPPER,
    T_DEFINED,
    T_UNDEFINED,
    T_EQ
};
static const struct {
    const char *name;
    int id;
} TESTS[] = {{"boolean", T_BOOLEAN},
             {"callable", T_CALLABLE},
             {"odd", T_ODD},
             {"even", T_EVEN},
             {"false", T_FALSE},
             {"true", T_TRUE},
             {"none", T_NONE},
             {"string", T_STRING},
             {"number", T_NUMBER},
             {"integer", T_INTEGER},
             {"iterable", T_ITERABLE},
             {"mapping", T_MAPPING},
             {"sequence", T_SEQUENCE},
             {"lower", T_LOWER},
             {"upper", T_UPPER},
             {"defined", T_DEFINED},
             {"undefined", T_UNDEFINED},
             {"equalto", T_EQ},
             {"eq", T_EQ}};

static int test_id(const char *name) {
    for (size_t i = 0; i < sizeof TESTS / sizeof TESTS[0]; i++)
        if (!strcmp(TESTS[i].name, name)) return TESTS[i].id;
    return -1;
}
int jtest_exists(const char *name) {
    return test_id(name) >= 0;
}

static int same_case(const jv *x, int upper) {
    for (size_t i = 0; i < x->n;) {
        uint32_t cp;
        i += (size_t)ju_next(x->u.s, x->n, i, &cp);
        if (cp < 0x80 && (upper ? (cp >= 'a' && cp <= 'z') : (cp >= 'A' && cp <= 'Z'))) return 0;
        if (cp >= 0x80) {
            if ((uint32_t)(upper ? utf8proc_toupper((int32_t)cp) : utf8proc_tolower((int32_t)cp)) != cp)
                return 0;
        }
    }
    return 1;
}

int japply_test(jinterp *I, const jnode *at, const char *name, const jv *x, const jv *arg, int *res) {
    int id = test_id(name);
    switch (id) {
    case T_BOOLEAN:
        *res = x->t == JV_BOOL;
        break;
    case T_CALLABLE:
        *res = x->t == JV_FUNC;
        break;
    case T_ODD:
    case T_EVEN:
        if (x->t != JV_INT) return jerr(I, at, "jinja.eval", "cannot %s on %s", name, jv_type_name(x));
        *res = (fmod(x->u.d, 2) != 0) == (id == T_ODD);
        break;
    case T_FALSE:
        *res = x->t == JV_BOOL && !x->u.b;
        break;
    case T_TRUE:
        *res = x->t == JV_BOOL && x->u.b;
        break;
    case T_NONE:
        *res = x->t == JV_NULL;
        break;
    case T_STRING:
        *res = x->t == JV_STR;
        break;
    case T_NUMBER:
        *res = jv_isnum(x);
        break;
    case T_INTEGER:
        *res = x->t == JV_INT;
        break;
    case T_ITERABLE:
        *res = (x->t == JV_ARRAY && !x->tuple) || x->t == JV_STR;
        break;
    case T_MAPPING:
        *res = jv_isobj(x);
        break;
    case T_SEQUENCE:
        *res = jv_isarr(x) || jv_isobj(x) || x->t == JV_STR;
        break;
    case T_LOWER:
        *res = x->t == JV_STR && same_case(x, 0);
        break;
    case T_UPPER:
        *res = x->t == JV_STR && same_case(x, 1);
        break;
    case T_DEFINED:
        *res = x->t != JV_UNDEF;
        break;
    case T_UNDEFINED:
        *res = x->t == JV_UNDEF;
        break;
    case T_EQ: {
        jv u = jv_undef();
        *res = jv_strict_eq(x, arg ? arg : &u);
        break;
    }
    default:
        return jerr(I, at, "jinja.unsupported", "Unknown test: %s", name);
    }
    return J_OK;
}

/* ---- helpers ---- */
static int call_fn(jinterp *I, const jnode *at, jbuiltin fn, const jv *self, const jv *a, size_t n, jv *out) {
    return fn(I, at, self, a, n, out);
}

static jv attr_path(const jv *item, const char *path, size_t pn) {
    jv v = *item;
    size_t st = 0;
    for (size_t i = 0; i <= pn; i++) {
        if (i < pn && path[i] != '.') continue;
        const char *part = path + st;
        size_t l = i - st;
        st = i + 1;
        if (jv_isattr(&v)) {
            jv *x = jobj_get(v.u.o, part, l);
            v = x ? *x : jv_undef();
        } else if (jv_isarr(&v)) {
            double idx = js_parse_int(part, l);
            if (isnan(idx) || idx < 0 || idx >= (double)v.u.a->n) return jv_undef();
            v = v.u.a->v[(size_t)idx];
        } else {
            return jv_undef();
        }
    }
    return v;
}

static int sort_array(jinterp *I, const jnode *at, const jv *arr, int rev, int cs, const jv *attr, jv *out) {
    *out = jv_arr_new(I->a, arr->u.a->n, 0);
    if (!out->u.a) return oom(I, at);
    jv *v = out->u.a->v;
    char key[32];
    const char *path = NULL;
    size_t pl = 0;
    if (attr && attr->t == JV_STR)
        path = attr->u.s, pl = attr->n;
    else if (attr && attr->t == JV_INT)
        snprintf(key, sizeof key, "%.0f", attr->u.d), path = key, pl = strlen(key);
    for (size_t i = 0; i < arr->u.a->n; i++) {
        v[i] = arr->u.a->v[i];
        out->u.a->n++;
        for (size_t j = i; j > 0; j--) {
            if (++I->steps > I->max_steps)
                return jerr(I, at, "jinja.cap.steps", "more than %llu steps",
                            (unsigned long long)I->max_steps);
            jv x = path ? attr_path(&v[j - 1], path, pl) : v[j - 1],
               y = path ? attr_path(&v[j], path, pl) : v[j];
            int c;
            if (jcompare(I, at, &x, &y, cs, &c)) return J_ERR;
            if (rev) c = -c;
            if (c <= 0) break;
            jv t = v[j];
            v[j] = v[j - 1], v[j - 1] = t;
        }
    }
    return J_OK;
}

static int join_values(jinterp *I, const jnode *at, const jv *arr, const char *sep, size_t sl, jv *out) {
    jbuf b = {0};
    for (size_t i = 0; i < arr->u.a->n; i++) {
        const jv *x = &arr->u.a->v[i];
        if (i) jb_put(&b, sep, sl);
        if (x->t == JV_NULL || x->t == JV_UNDEF) continue; /* Array.prototype.join writes "" for them */
        if (jv_raw_str(I->a, x, &b)) {
            free(b.p);
            return jerr(I, at, "jinja.unsupported", "joining a function");
        }
    }
    return jstr_new(I, at, &b, out);
}

static int indent_str(jinterp *I, const jnode *at, const jv *s, const char *ind, size_t il, int first,
                      int blank, jv *out) {
    jbuf b = {0};
    size_t st = 0;
    for (size_t i = 0, line = 0; i <= s->n; i++) {
        if (i < s->n && s->u.s[i] != '\n') continue;
        size_t l = i - st;
        if (line) jb_putc(&b, '\n');
        if (!((!first && line == 0) || (!blank && l == 0))) jb_put(&b, ind, il);
        jb_put(&b, s->u.s + st, l);
        st = i + 1, line++;
    }
    return jstr_new(I, at, &b, out);
}

static int to_json(jinterp *I, const jnode *at, const jv *x, const jjson_opts *o, jv *out) {
    jbuf b = {0};
    const char *why = NULL;
    if (jv_to_json(x, o, 0, &b, &why)) {
        free(b.p);
        return jerr(I, at, "jinja.eval", "Cannot convert to JSON: %s", why);
    }
    return jstr_new(I, at, &b, out);
}

static int fstr(jinterp *I, const jnode *at, const jv *x, jv *out) {
    jbuf b = {0};
    if (jv_to_string(I->a, x, &b)) {
        free(b.p);
        return jerr(I, at, "jinja.eval", "Cannot convert to JSON: %s", jv_type_name(x));
    }
    return jstr_new(I, at, &b, out);
}

#define IS(s) (!strcmp(name, s))

/* |name without arguments */
static int filter_plain(jinterp *I, const jnode *at, const char *name, const jv *x, jv *out) {
    if (IS("safe")) return *out = *x, J_OK;
    if (IS("tojson")) {
        jjson_opts o = {-1, 0, 0, 1, NULL, NULL};
        return to_json(I, at, x, &o, out);
    }
    if (jv_isarr(x)) {
        const jarr *a = x->u.a;
        if (IS("list")) return *out = *x, J_OK;
        if (IS("first") || IS("last")) {
            if (!a->n) return jerr(I, at, "jinja.eval", "%s of an empty array", name);
            return *out = a->v[IS("first") ? 0 : a->n - 1], J_OK;
        }
        if (IS("length")) return *out = jv_int((double)a->n), J_OK;
        if (IS("reverse")) {
            *out = jv_arr_new(I->a, a->n, 0);
            for (size_t i = 0; out->u.a && i < a->n; i++)
                jarr_push(I->a, out->u.a, a->v[a->n - 1 - i]);
            return out->u.a ? J_OK : oom(I, at);
        }
        if (IS("sort")) return sort_array(I, at, x, 0, 0, NULL, out);
        if (IS("join")) return join_values(I, at, x, "", 0, out);
        if (IS("string")) {
            jjson_opts o = {-1, 0, 0, 0, NULL, NULL};
            return to_json(I, at, x, &o, out);
        }
        if (IS("unique")) {
            *out = jv_arr_new(I->a, a->n, 0);
            if (!out->u.a) return oom(I, at);
            for (size_t i = 0; i < a->n; i++) {
                int seen = 0;
                if ((I->steps += out->u.a->n / 8 + 1) > I->max_steps)
                    return jerr(I, at, "jinja.cap.steps", "more than %llu steps",
                                (unsigned long long)I->max_steps);
                for (size_t j = 0; j < out->u.a->n && !seen; j++)
                    seen = jv_strict_eq(&out->u.a->v[j], &a->v[i]);
                if (!seen) jarr_push(I->a, out->u.a, a->v[i]);
            }
            return J_OK;
        }
        return jerr(I, at, "jinja.unsupported", "Unknown ArrayValue filter: %s", name);
    }
    if (x->t == JV_STR) {
        if (IS("length")) return *out = jv_int((double)ju_u16_len(x->u.s, x->n)), J_OK;
        if (IS("upper") || IS("lower") || IS("title") || IS("capitalize"))
            return call_fn(I, at, jmethod_fn(x, name), x, NULL, 0, out);
        if (IS("trim")) return call_fn(I, at, jmethod_fn(x, "strip"), x, NULL, 0, out);
        if (IS("indent")) return indent_str(I, at, x, "    ", 4, 0, 0, out);
        if (IS("join") || IS("string")) return *out = *x, J_OK;
        if (IS("int")) {
            double v = js_parse_int(x->u.s, x->n);
            return *out = jv_int(isnan(v) ? 0 : v), J_OK;
        }
        if (IS("float")) {
            double v = js_parse_float(x->u.s, x->n);
            return *out = jv_float(isnan(v) ? 0 : v), J_OK;
        }
        return jerr(I, at, "jinja.unsupported", "Unknown StringValue filter: %s", name);
    }
    if (jv_isnum(x)) {
        if (IS("abs")) return *out = x->t == JV_INT ? jv_int(fabs(x->u.d)) : jv_float(fabs(x->u.d)), J_OK;
        if (IS("int")) return *out = jv_int(trunc(x->u.d) + 0.0), J_OK;
        if (IS("float")) return *out = jv_float(x->u.d), J_OK;
        if (IS("string")) return fstr(I, at, x, out);
        return jerr(I, at, "jinja.unsupported", "Unknown NumericValue filter: %s", name);
    }
    if (jv_isobj(x)) {
        if (IS("length")) return *out = jv_int((double)x->u.o->n), J_OK;
        jbuiltin fn = jmethod_fn(x, name);
        if (fn) return call_fn(I, at, fn, x, NULL, 0, out);
        return jerr(I, at, "jinja.unsupported", "Unknown ObjectValue filter: %s", name);
    }
    if (x->t == JV_BOOL) {
        if (IS("bool")) return *out = *x, J_OK;
        if (IS("int")) return *out = jv_int(x->u.b), J_OK;
        if (IS("float")) return *out = jv_float(x->u.b), J_OK;
        if (IS("string")) return *out = x->u.b ? jv_str("true", 4) : jv_str("false", 5), J_OK;
        return jerr(I, at, "jinja.unsupported", "Unknown BooleanValue filter: %s", name);
    }
    return jerr(I, at, "jinja.eval", "Cannot apply filter \"%s\" to type: %s", name, jv_type_name(x));
}

typedef struct fargs {
    jv pos;   /* array */
    jobj *kw; /* keyword arguments */
} fargs;

static const jv *pos_at(const fargs *f, size_t i) {
    return i < f->pos.u.a->n ? &f->pos.u.a->v[i] : NULL;
}
static const jv *kw_at(const fargs *f, const char *k) {
    return jobj_get(f->kw, k, strlen(k));
}
static const jv *arg_or(const fargs *f, size_t i, const char *k) {
    const jv *p = pos_at(f, i);
    return p ? p : kw_at(f, k);
}

static int f_tojson(jinterp *I, const jnode *at, const jv *x, const fargs *f, jv *out) {
    const jv *ind = kw_at(f, "indent"), *asc = kw_at(f, "ensure_ascii"), *sk = kw_at(f, "sort_keys");
    const jv *sep = kw_at(f, "separators");
    if (ind && ind->t != JV_INT && ind->t != JV_NULL)
        return jerr(I, at, "jinja.eval", "If set, indent must be a number");
    if (asc && asc->t != JV_BOOL) return jerr(I, at, "jinja.eval", "If set, ensure_ascii must be a boolean");
    if (sk && sk->t != JV_BOOL) return jerr(I, at, "jinja.eval", "If set, sort_keys must be a boolean");
    jjson_opts o = {-1, asc && asc->u.b, sk && sk->u.b, 1, NULL, NULL};
    if (ind && ind->t == JV_INT) {
        if (ind->u.d < 0 || ind->u.d > 64)
            return jerr(I, at, "jinja.unsupported", "tojson indent out of range");
        o.indent = (int)ind->u.d;
    }
    char *seps[2] = {0};
    if (sep && sep->t != JV_NULL) {
        if (!jv_isarr(sep) || sep->u.a->n != 2 || sep->u.a->v[0].t != JV_STR || sep->u.a->v[1].t != JV_STR)
            return jerr(I, at, "jinja.eval", "separators must be a tuple of two strings");
        for (int k = 0; k < 2; k++)
            if (!(seps[k] = ja_strdup(I->a, sep->u.a->v[k].u.s, sep->u.a->v[k].n))) return oom(I, at);
        o.item_sep = seps[0], o.key_sep = seps[1];
    }
    return to_json(I, at, x, &o, out);
}

static int f_select(jinterp *I, const jnode *at, const jnode *call, const jv *x, int sel, jenv *e, jv *out) {
    for (size_t i = 0; i < x->u.a->n; i++)
        if (!jv_isattr(&x->u.a->v[i]))
            return jerr(I, at, "jinja.eval", "`%s` can only be applied to array of objects",
                        sel ? "selectattr" : "rejectattr");
    jv a[3] = {jv_undef(), jv_undef(), jv_undef()};
    for (size_t i = 0; i < call->n; i++)
        if (call->list[i]->type != JN_TEXT)
            return jerr(I, at, "jinja.unsupported", "arguments of `%s` must be strings",
                        sel ? "selectattr" : "rejectattr");
    for (size_t i = 0; i < call->n && i < 3; i++) {
        int rc = jeval(I, call->list[i], e, &a[i]);
        if (rc) return rc;
    }
    if (call->n == 0) return jerr(I, at, "jinja.eval", "selectattr needs an attribute");
    if (call->n > 1 && !jtest_exists(a[1].u.s))
        return jerr(I, at, "jinja.unsupported", "Unknown test: %s", a[1].u.s);
    *out = jv_arr_new(I->a, x->u.a->n, 0);
    if (!out->u.a) return oom(I, at);
    for (size_t i = 0; i < x->u.a->n; i++) {
        const jv *it = &x->u.a->v[i], *v = jobj_get(it->u.o, a[0].u.s, a[0].n);
        int r = 0;
        if (v) {
            if (call->n > 1) {
                if (japply_test(I, at, a[1].u.s, v, call->n > 2 ? &a[2] : NULL, &r)) return J_ERR;
            } else {
                r = jv_truthy(v);
            }
        }
        if (sel ? r : !r) jarr_push(I->a, out->u.a, *it);
    }
    return J_OK;
}

static int f_map(jinterp *I, const jnode *at, const jv *x, const fargs *f, jv *out) {
    const jv *attr = kw_at(f, "attribute"), *dflt = kw_at(f, "default");
    if (!attr)
        return jerr(I, at, "jinja.unsupported",
                    "`map` expressions without `attribute` set are not supported");
    if (attr->t != JV_STR) return jerr(I, at, "jinja.eval", "attribute must be a string");
    *out = jv_arr_new(I->a, x->u.a->n, 0);
    if (!out->u.a) return oom(I, at);
    for (size_t i = 0; i < x->u.a->n; i++) {
        if (!jv_isattr(&x->u.a->v[i])) return jerr(I, at, "jinja.eval", "items in map must be an object");
        jv v = attr_path(&x->u.a->v[i], attr->u.s, attr->n);
        jarr_push(I->a, out->u.a, v.t == JV_UNDEF && dflt ? *dflt : v);
    }
    return J_OK;
}

static int filter_call(jinterp *I, const jnode *at, const char *name, const jnode *call, const jv *x, jenv *e,
                       jv *out) {
    fargs f = {jv_arr_new(I->a, call->n, 0), NULL};
    jv kw = jv_obj_new(I->a, JV_KWARGS);
    int has_kw, rc;
    if (!f.pos.u.a || !kw.u.o) return oom(I, at);
    f.kw = kw.u.o;
    int lazy = jv_isarr(x) && (IS("selectattr") || IS("rejectattr"));
    if (!lazy && (rc = jeval_args(I, call->list, call->n, e, f.pos.u.a, f.kw, &has_kw))) return rc;
    if (IS("tojson")) return f_tojson(I, at, x, &f, out);
    if (IS("join")) {
        const jv *sep = arg_or(&f, 0, "separator");
        if (sep && sep->t != JV_STR) return jerr(I, at, "jinja.eval", "separator must be a string");
        const char *s = sep ? sep->u.s : "";
        size_t sl = sep ? sep->n : 0;
        if (jv_isarr(x)) return join_values(I, at, x, s, sl, out);
        if (x->t != JV_STR)
            return jerr(I, at, "jinja.eval", "Cannot apply filter \"join\" to type: %s", jv_type_name(x));
        jbuf b = {0};
        for (size_t i = 0; i < x->n;) {
            int l = ju_next(x->u.s, x->n, i, &(uint32_t){0});
            if (i) jb_put(&b, s, sl);
            jb_put(&b, x->u.s + i, (size_t)l);
            i += (size_t)l;
        }
        return jstr_new(I, at, &b, out);
    }
    if (IS("int") || IS("float")) {
        int isint = IS("int");
        const jv *d = arg_or(&f, 0, "default");
        jv dv = d ? *d : isint ? jv_int(0) : jv_float(0);
        if (x->t == JV_STR) {
            double v = isint ? js_parse_int(x->u.s, x->n) : js_parse_float(x->u.s, x->n);
            return *out = isnan(v) ? dv : isint ? jv_int(v) : jv_float(v), J_OK;
        }
        if (jv_isnum(x)) return *out = isint ? jv_int(trunc(x->u.d) + 0.0) : jv_float(x->u.d), J_OK;
        if (x->t == JV_BOOL) return *out = isint ? jv_int(x->u.b) : jv_float(x->u.b), J_OK;
        return jerr(I, at, "jinja.eval", "Cannot apply filter \"%s\" to type: %s", name, jv_type_name(x));
    }
    if (IS("default")) {
        const jv *d = pos_at(&f, 0), *bo = arg_or(&f, 1, "boolean");
        if (bo && bo->t != JV_BOOL)
            return jerr(I, at, "jinja.eval", "`default` filter flag must be a boolean");
        if (x->t == JV_UNDEF || (bo && bo->u.b && !jv_truthy(x))) return *out = d ? *d : jv_str("", 0), J_OK;
        return *out = *x, J_OK;
    }
    if (jv_isarr(x)) {
        if (IS("sort")) {
            const jv *rev = arg_or(&f, 0, "reverse"), *cs = arg_or(&f, 1, "case_sensitive"),
                     *attr = arg_or(&f, 2, "attribute");
            if (rev && rev->t != JV_BOOL) return jerr(I, at, "jinja.eval", "reverse must be a boolean");
            if (cs && cs->t != JV_BOOL) return jerr(I, at, "jinja.eval", "case_sensitive must be a boolean");
            if (attr && attr->t != JV_STR && attr->t != JV_INT && attr->t != JV_NULL)
                return jerr(I, at, "jinja.eval", "attribute must be a string, integer, or null");
            return sort_array(I, at, x, rev && rev->u.b, cs && cs->u.b,
                              attr && attr->t != JV_NULL ? attr : NULL, out);
        }
        if (IS("selectattr") || IS("rejectattr")) return f_select(I, at, call, x, IS("selectattr"), e, out);
        if (IS("map")) return f_map(I, at, x, &f, out);
        return jerr(I, at, "jinja.unsupported", "Unknown ArrayValue filter: %s", name);
    }
    if (x->t == JV_STR) {
        if (IS("indent")) {
            const jv *w = arg_or(&f, 0, "width"), *fi = arg_or(&f, 1, "first"), *bl = arg_or(&f, 2, "blank");
            if (w && w->t != JV_INT && w->t != JV_STR)
                return jerr(I, at, "jinja.eval", "width must be an integer or a string");
            char sp[256];
            const char *ind = "    ";
            size_t il = 4;
            if (w && w->t == JV_STR)
                ind = w->u.s, il = w->n;
            else if (w) {
                if (w->u.d > 255) return jerr(I, at, "jinja.unsupported", "indent width over 255");
                il = w->u.d > 0 ? (size_t)w->u.d : 0;
                memset(sp, ' ', il);
                ind = sp;
            }
            return indent_str(I, at, x, ind, il, fi && jv_truthy(fi), bl && jv_truthy(bl), out);
        }
        if (IS("replace")) {
            jarr_push(I->a, f.pos.u.a, kw);
            return jstr_replace(I, at, x, f.pos.u.a->v, f.pos.u.a->n, out);
        }
        return jerr(I, at, "jinja.unsupported", "Unknown StringValue filter: %s", name);
    }
    if (jv_isobj(x)) {
        jbuiltin fn = jmethod_fn(x, name);
        if (!fn) return jerr(I, at, "jinja.unsupported", "Unknown ObjectValue filter: %s", name);
        if (has_kw) jarr_push(I->a, f.pos.u.a, kw);
        return call_fn(I, at, fn, x, f.pos.u.a->v, f.pos.u.a->n, out);
    }
    return jerr(I, at, "jinja.eval", "Cannot apply filter \"%s\" to type: %s", name, jv_type_name(x));
}

int japply_filter(jinterp *I, const jv *operand, const jnode *filter, jenv *e, jv *out) {
    if (filter->type == JN_IDENT) return filter_plain(I, filter, filter->s, operand, out);
    if (filter->type == JN_CALL && filter->a->type == JN_IDENT)
        return filter_call(I, filter, filter->a->s, filter, operand, e, out);
    return jerr(I, filter, "jinja.unsupported", "Unknown filter");
}
