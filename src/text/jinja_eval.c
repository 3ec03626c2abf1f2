/* jinja_eval.c — the interpreter: scopes, statements (text, if, for, set, macro, call, filter
 * blocks, break/continue) and expressions (operators, members, slices, calls), with the reference
 * runtime's semantics (scoping: a for loop and a macro get a scope of their own, an if does not;
 * `loop`; undefined values; JavaScript's == and number formatting). Every evaluation counts a
 * step; steps, output bytes, arena bytes and call depth are capped. */
#include "jinja_impl.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int jerr(jinterp *I, const jnode *at, const char *rule, const char *fmt, ...) {
    if (I->err && I->err->code) return J_ERR; /* the first error stands */
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fp4_status code = !strncmp(rule, "jinja.cap.", 10)     ? FP4_ERR_LIMIT
                      : !strcmp(rule, "jinja.unsupported") ? FP4_ERR_UNSUPPORTED
                                                           : FP4_ERR_INVALID_ARG;
    if (I->raised)
        fp4_fail(I->err, code, NULL, NULL, rule, "%s", msg);
    else
        fp4_fail(I->err, code, NULL, NULL, rule, "line %u: %s", at ? at->line : 0, msg);
    return J_ERR;
}

static int oom(jinterp *I, const jnode *at) {
    return jerr(I, at, "jinja.cap.memory", "the render passed its memory cap (%zu bytes)", I->a->cap);
}

jenv *jenv_new(jinterp *I, jenv *parent) {
    jenv *e = ja_alloc(I->a, sizeof *e);
    if (e) e->parent = parent;
    return e;
}

static int set_var(jinterp *I, const jnode *at, jenv *e, const char *k, size_t kn, jv v) {
    return jobj_set(I->a, &e->vars, k, kn, v) ? oom(I, at) : J_OK;
}

static jv lookup(jinterp *I, jenv *e, const char *k, size_t kn) {
    /* every scope starts with its own `namespace` */
    if (kn == 9 && !memcmp(k, "namespace", 9)) {
        jv *v = jobj_get(&e->vars, k, kn);
        if (v) return *v;
        jenv *g = e;
        while (g->parent)
            g = g->parent;
        v = jobj_get(&g->vars, "\x01namespace", 10);
        return v ? *v : jv_undef();
    }
    for (; e; e = e->parent) {
        jv *v = jobj_get(&e->vars, k, kn);
        if (v) return *v;
    }
    (void)I;
    return jv_undef();
}

int jstr_new(jinterp *I, const jnode *at, jbuf *b, jv *out) {
    if (b->over) return free(b->p), b->p = NULL, oom(I, at);
    char *s = ja_strdup(I->a, b->p ? b->p : "", b->n);
    size_t n = b->n;
    free(b->p);
    b->p = NULL;
    if (!s) return oom(I, at);
    *out = jv_str(s, n);
    return J_OK;
}

static int render_block(jinterp *I, jnode **list, size_t n, jenv *e);

/* renders a body into a string value */
static int render_to_string(jinterp *I, const jnode *at, jnode **list, size_t n, jenv *e, jv *out) {
    jbuf b = {0}, *saved = I->out;
    b.max = saved->max;
    I->out = &b;
    int rc = render_block(I, list, n, e);
    I->out = saved;
    if (rc) return free(b.p), rc;
    return jstr_new(I, at, &b, out);
}

/* ---- calls ---- */
int jeval_args(jinterp *I, jnode **args, size_t n, jenv *e, jarr *pos, jobj *kw, int *has_kw) {
    *has_kw = 0;
    for (size_t i = 0; i < n; i++) {
        jv v;
        if (args[i]->type == JN_KWARG || args[i]->type == JN_KWSPREAD) continue;
        int rc = jeval(I, args[i]->type == JN_SPREAD ? args[i]->a : args[i], e, &v);
        if (rc) return rc;
        if (args[i]->type == JN_SPREAD) {
            if (!jv_isarr(&v))
                return jerr(I, args[i], "jinja.eval", "Cannot unpack non-iterable type: %s",
                            jv_type_name(&v));
            for (size_t k = 0; k < v.u.a->n; k++)
                if (jarr_push(I->a, pos, v.u.a->v[k])) return oom(I, args[i]);
        } else if (jarr_push(I->a, pos, v)) {
            return oom(I, args[i]);
        }
    }
    for (size_t i = 0; i < n; i++) {
        jv v;
        if (args[i]->type != JN_KWARG && args[i]->type != JN_KWSPREAD) continue;
        int rc = jeval(I, args[i]->a, e, &v);
        if (rc) return rc;
        if (args[i]->type == JN_KWARG) {
            if (jobj_get(kw, args[i]->s, args[i]->sn))
                return jerr(I, args[i], "jinja.eval", "Got multiple values for keyword argument '%s'",
                            args[i]->s);
            if (jobj_set(I->a, kw, args[i]->s, args[i]->sn, v)) return oom(I, args[i]);
        } else {
            if (!jv_isobj(&v))
                return jerr(I, args[i], "jinja.eval", "Argument after ** must be a mapping, not %s",
                            jv_type_name(&v));
            for (size_t k = 0; k < v.u.o->n; k++) {
                if ((I->steps += kw->n / 8) > I->max_steps)
                    return jerr(I, args[i], "jinja.cap.steps", "more than %llu steps",
                                (unsigned long long)I->max_steps);
                if (jobj_get(kw, v.u.o->k[k], v.u.o->kn[k]))
                    return jerr(I, args[i], "jinja.eval", "Got multiple values for keyword argument '%s'",
                                v.u.o->k[k]);
                if (jobj_set(I->a, kw, v.u.o->k[k], v.u.o->kn[k], v.u.o->v[k])) return oom(I, args[i]);
            }
        }
        *has_kw = 1;
    }
    if (kw->n == 0) *has_kw = 0;
    return J_OK;
}

/* the arguments of a call in the FunctionValue convention: positional, then one KWARGS */
static int call_args(jinterp *I, jnode **args, size_t n, jenv *e, jv *arr) {
    *arr = jv_arr_new(I->a, n + 1, 0);
    jv kw = jv_obj_new(I->a, JV_KWARGS);
    if (!arr->u.a || !kw.u.o) return oom(I, NULL);
    int has_kw, rc = jeval_args(I, args, n, e, arr->u.a, kw.u.o, &has_kw);
    if (rc) return rc;
    if (has_kw && jarr_push(I->a, arr->u.a, kw)) return oom(I, NULL);
    return J_OK;
}

static int bind_args(jinterp *I, const jnode *at, const char *name, jnode **params, size_t np,
                     uint8_t special, const jv *args, size_t n, jenv *scope) {
    jv kw = jv_obj_new(I->a, JV_OBJECT);
    if (!kw.u.o) return oom(I, at);
    if (n && args[n - 1].t == JV_KWARGS) {
        const jobj *src = args[n - 1].u.o;
        for (size_t i = 0; i < src->n; i++) /* keyword names are unique already */
            if (jobj_append(I->a, kw.u.o, src->k[i], src->kn[i], src->v[i])) return oom(I, at);
        n--;
    }
    int pending[256] = {0};
    if (np > 256) return jerr(I, at, "jinja.cap.depth", "more than 256 parameters");
    for (size_t i = 0; i < np; i++) {
        const jnode *p = params[i];
        jv v = jv_undef();
        int set = 0;
        if (i < n) v = args[i], set = 1;
        if (!set) {
            jv *k = jobj_get(kw.u.o, p->s, p->sn);
            if (k) v = *k, set = 1, jobj_del(kw.u.o, p->s, p->sn);
        }
        if (!set && p->type == JN_KWARG) pending[i] = 1;
        if (set_var(I, at, scope, p->s, p->sn, v)) return J_ERR;
    }
    if (special & 2) {
        if (set_var(I, at, scope, "kwargs", 6, kw)) return J_ERR;
    } else if (kw.u.o->n) {
        return jerr(I, at, "jinja.eval", "macro %s takes no keyword argument '%s'", name, kw.u.o->k[0]);
    }
    if (special & 4) {
        jv va = jv_arr_new(I->a, 0, 0);
        for (size_t i = np; i < n; i++)
            if (jarr_push(I->a, va.u.a, args[i])) return oom(I, at);
        if (set_var(I, at, scope, "varargs", 7, va)) return J_ERR;
    } else if (n > np) {
        return jerr(I, at, "jinja.eval", "macro %s takes not more than %zu argument(s)", name, np);
    }
    for (size_t i = 0; i < np; i++) {
        if (!pending[i]) continue;
        jv v;
        int rc = jeval(I, params[i]->a, scope, &v);
        if (rc) return rc;
        if (set_var(I, at, scope, params[i]->s, params[i]->sn, v)) return J_ERR;
    }
    return J_OK;
}

int jcall_value(jinterp *I, const jnode *at, const jv *fn, const jv *args, size_t n, jenv *callsite,
                jv *out) {
    if (fn->t != JV_FUNC)
        return jerr(I, at, "jinja.eval", "Cannot call something that is not a function: got %s",
                    jv_type_name(fn));
    const jfunc *f = fn->u.f;
    if (f->fn) return f->fn(I, at, &f->self, args, n, out);
    if (++I->depth > I->max_depth)
        return jerr(I, at, "jinja.cap.depth", "calls nested deeper than the cap (%u)", I->max_depth);
    const jnode *m = f->macro;
    int rc;
    if (f->is_caller) { /* a {% call %} block's body */
        jenv *scope = jenv_new(I, f->env);
        if (!scope) return oom(I, at);
        rc = bind_args(I, at, "None", m->list, m->n, m->special, args, n, scope);
        if (!rc) rc = render_to_string(I, at, m->list2, m->n2, scope, out);
    } else {
        jenv *parent = f->env;
        if (m->special & 1) {
            jv caller = jv_undef(),
               *c = callsite && callsite->call_block ? jobj_get(&callsite->vars, "caller", 6) : NULL;
            if (c) caller = *c;
            if (!(parent = jenv_new(I, f->env)) || set_var(I, at, parent, "caller", 6, caller))
                return oom(I, at);
        }
        jenv *scope = jenv_new(I, parent);
        char name[80];
        snprintf(name, sizeof name, "'%s'", m->s);
        if (!scope) return oom(I, at);
        rc = bind_args(I, at, name, m->list, m->n, m->special, args, n, scope);
        if (!rc) rc = render_to_string(I, at, m->list2, m->n2, scope, out);
    }
    I->depth--;
    return rc;
}

static jv make_func(jinterp *I, const jnode *macro, jenv *env, int is_caller) {
    jv v = {0};
    v.t = JV_FUNC;
    v.u.f = ja_alloc(I->a, sizeof(jfunc));
    if (v.u.f) v.u.f->macro = macro, v.u.f->env = env, v.u.f->is_caller = is_caller;
    return v;
}

/* ---- operators ---- */
static int binop_err(jinterp *I, const jnode *at, const jv *l, const jv *r) {
    static const char *const S[] = {"",  "+",  "-",  "~",  "*",  "/",   "//", "%",   "**", "<",
                                    ">", "<=", ">=", "==", "!=", "and", "or", "not", "in", "not in"};
    return jerr(I, at, "jinja.eval", "Unknown operator \"%s\" between %s and %s", S[at->op], jv_type_name(l),
                jv_type_name(r));
}

static int concat(jinterp *I, const jnode *at, const jv *l, const jv *r, int undef_empty, jv *out) {
    jbuf b = {0};
    if (!(undef_empty && l->t == JV_UNDEF) && jv_raw_str(I->a, l, &b)) goto fn;
    if (!(undef_empty && r->t == JV_UNDEF) && jv_raw_str(I->a, r, &b)) goto fn;
    return jstr_new(I, at, &b, out);
fn:
    free(b.p);
    return jerr(I, at, "jinja.unsupported", "a function converted to a string");
}

static int str_contains(const jv *hay, const jv *needle) {
    if (needle->n == 0) return 1;
    if (needle->n > hay->n) return 0;
    return memmem(hay->u.s, hay->n, needle->u.s, needle->n) != NULL;
}

static int numeric(jinterp *I, const jnode *at, double a, double b, int isf, jv *out) {
    double r;
    switch (at->op) {
    case JO_ADD:
        r = a + b;
        break;
    case JO_SUB:
        r = a - b;
        break;
    case JO_MUL:
        r = a * b;
        break;
    case JO_DIV:
        *out = jv_float(a / b);
        return J_OK;
    case JO_FLOORDIV:
        r = floor(a / b);
        break;
    case JO_MOD:
        r = fmod(a, b);
        break;
    case JO_LT:
        *out = jv_bool(a < b);
        return J_OK;
    case JO_GT:
        *out = jv_bool(a > b);
        return J_OK;
    case JO_LE:
        *out = jv_bool(a <= b);
        return J_OK;
    case JO_GE:
        *out = jv_bool(a >= b);
        return J_OK;
    default:
        return -1;
    }
    *out = isf ? jv_float(r) : jv_int(r);
    (void)I;
    return J_OK;
}

static int eval_binary(jinterp *I, const jnode *n, jenv *e, jv *out) {
    jv l, r;
    int rc = jeval(I, n->a, e, &l);
    if (rc) return rc;
    if (n->op == JO_AND) return jv_truthy(&l) ? jeval(I, n->b, e, out) : (*out = l, J_OK);
    if (n->op == JO_OR) return jv_truthy(&l) ? (*out = l, J_OK) : jeval(I, n->b, e, out);
    if ((rc = jeval(I, n->b, e, &r))) return rc;
    if (n->op == JO_EQ || n->op == JO_NE) {
        int eq = jv_loose_eq(I->a, &l, &r);
        *out = jv_bool(n->op == JO_EQ ? eq : !eq);
        return J_OK;
    }
    int in = n->op == JO_IN || n->op == JO_NOTIN;
    if (jv_isnum(&l) && jv_isnum(&r) && n->op != JO_CAT && n->op != JO_POW) {
        if (numeric(I, n, l.u.d, r.u.d, l.t == JV_FLOAT || r.t == JV_FLOAT, out) == J_OK) return J_OK;
    } else if (l.t == JV_UNDEF || r.t == JV_UNDEF) {
        if (r.t == JV_UNDEF && in) return *out = jv_bool(n->op == JO_NOTIN), J_OK;
        if (n->op == JO_CAT && l.t != JV_NULL && r.t != JV_NULL) return concat(I, n, &l, &r, 1, out);
        return jerr(I, n, "jinja.eval", "Cannot perform operation on undefined values");
    } else if (l.t == JV_NULL || r.t == JV_NULL) {
        return jerr(I, n, "jinja.eval", "Cannot perform operation on null values");
    } else if (n->op == JO_CAT) {
        return concat(I, n, &l, &r, 0, out);
    } else if (n->op == JO_POW && (jv_isnum(&l) || l.t == JV_BOOL) && (jv_isnum(&r) || r.t == JV_BOOL)) {
        double a = l.t == JV_BOOL ? l.u.b : l.u.d, b = r.t == JV_BOOL ? r.u.b : r.u.d;
        if (a == 0 && b < 0) return jerr(I, n, "jinja.eval", "0.0 cannot be raised to a negative power");
        double res = pow(a, b);
        if (!isfinite(res))
            return jerr(I, n, "jinja.eval", "Exponentiation result is not a finite real number");
        *out = l.t == JV_FLOAT || r.t == JV_FLOAT || b < 0 ? jv_float(res) : jv_int(res);
        return J_OK;
    } else if (jv_isarr(&l) && jv_isarr(&r)) {
        if (n->op == JO_ADD) {
            *out = jv_arr_new(I->a, l.u.a->n + r.u.a->n, 0);
            if (!out->u.a) return oom(I, n);
            for (size_t i = 0; i < l.u.a->n; i++)
                jarr_push(I->a, out->u.a, l.u.a->v[i]);
            for (size_t i = 0; i < r.u.a->n; i++)
                jarr_push(I->a, out->u.a, r.u.a->v[i]);
            return J_OK;
        }
    } else if (jv_isarr(&r)) {
        int found = 0;
        if ((I->steps += r.u.a->n / 8) > I->max_steps)
            return jerr(I, n, "jinja.cap.steps", "more than %llu steps", (unsigned long long)I->max_steps);
        for (size_t i = 0; i < r.u.a->n && !found; i++)
            found = jv_strict_eq(&r.u.a->v[i], &l);
        if (in) return *out = jv_bool(n->op == JO_IN ? found : !found), J_OK;
    }
    if ((l.t == JV_STR || r.t == JV_STR) && n->op == JO_ADD) return concat(I, n, &l, &r, 0, out);
    if (l.t == JV_STR && r.t == JV_STR && in) {
        int c = str_contains(&r, &l);
        return *out = jv_bool(n->op == JO_IN ? c : !c), J_OK;
    }
    if (l.t == JV_STR && jv_isobj(&r) && in) {
        int c = jobj_get(r.u.o, l.u.s, l.n) != NULL;
        return *out = jv_bool(n->op == JO_IN ? c : !c), J_OK;
    }
    return binop_err(I, n, &l, &r);
}

static int eval_unary(jinterp *I, const jnode *n, jenv *e, jv *out) {
    jv a;
    int rc = jeval(I, n->a, e, &a);
    if (rc) return rc;
    if (n->op == JO_NOT) return *out = jv_bool(!jv_truthy(&a)), J_OK;
    if (!jv_isnum(&a) && a.t != JV_BOOL)
        return jerr(I, n, "jinja.eval", "Unknown operator \"%s\" for %s", n->op == JO_NEG ? "-" : "+",
                    jv_type_name(&a));
    double v = a.t == JV_BOOL ? a.u.b : a.u.d, r = n->op == JO_NEG ? -v : v;
    *out = a.t == JV_FLOAT ? jv_float(r) : jv_int(r);
    return J_OK;
}

/* ---- members and slices ---- */
static int slice_bound(jinterp *I, const jnode *at, const jnode *x, jenv *e, int *set, double *v) {
    jv b = jv_undef();
    int rc = x ? jeval(I, x, e, &b) : J_OK;
    if (rc) return rc;
    if (b.t != JV_INT && b.t != JV_UNDEF)
        return jerr(I, at, "jinja.eval", "Slice indices must be numeric or undefined");
    *set = b.t == JV_INT;
    *v = b.t == JV_INT ? b.u.d : 0;
    return J_OK;
}

/* utils.slice: Python's slicing; n items of which item i is fetched by get */
static int eval_slice(jinterp *I, const jnode *sl, const jv *obj, jenv *e, jv *out) {
    if (!jv_isarr(obj) && obj->t != JV_STR)
        return jerr(I, sl, "jinja.eval", "Slice object must be an array or string");
    int s0, s1, s2;
    double start, stop, step;
    int rc;
    if ((rc = slice_bound(I, sl, sl->a, e, &s0, &start)) || (rc = slice_bound(I, sl, sl->b, e, &s1, &stop)) ||
        (rc = slice_bound(I, sl, sl->c, e, &s2, &step)))
        return rc;
    if (!s2) step = 1;
    /* strings slice by code points (Array.from) */
    size_t cnt = 0, *offs = NULL;
    if (obj->t == JV_STR) {
        offs = malloc((obj->n + 1) * sizeof *offs);
        if (!offs) return oom(I, sl);
        for (size_t i = 0; i < obj->n;) {
            uint32_t cp;
            offs[cnt++] = i;
            i += (size_t)ju_next(obj->u.s, obj->n, i, &cp);
        }
        offs[cnt] = obj->n;
    } else {
        cnt = obj->u.a->n;
    }
    double len = (double)cnt, dir = step > 0 ? 1 : step < 0 ? -1 : 0;
    if (dir >= 0) {
        start = !s0 ? 0 : start < 0 ? fmax(len + start, 0) : fmin(start, len);
        stop = !s1 ? len : stop < 0 ? fmax(len + stop, 0) : fmin(stop, len);
    } else {
        start = !s0 ? len - 1 : start < 0 ? fmax(len + start, -1) : fmin(start, len - 1);
        stop = !s1 ? -1 : stop < -1 ? fmax(len + stop, -1) : fmin(stop, len - 1);
    }
    if (dir == 0) { /* the reference loops forever on a zero step: refused */
        free(offs);
        return jerr(I, sl, "jinja.cap.steps", "slice step 0");
    }
    jbuf b = {0};
    if (obj->t != JV_STR) *out = jv_arr_new(I->a, 0, 0);
    for (double i = start; dir * i < dir * stop; i += step) {
        if (++I->steps > I->max_steps) {
            free(offs), free(b.p);
            return jerr(I, sl, "jinja.cap.steps", "more than %llu steps", (unsigned long long)I->max_steps);
        }
        size_t k = (size_t)i;
        if (obj->t == JV_STR)
            jb_put(&b, obj->u.s + offs[k], offs[k + 1] - offs[k]);
        else if (jarr_push(I->a, out->u.a, obj->u.a->v[k]))
            return free(offs), oom(I, sl);
    }
    free(offs);
    if (obj->t == JV_STR) return jstr_new(I, sl, &b, out);
    return J_OK;
}

/* s.at(i) on UTF-16 code units; half of a surrogate pair comes out as U+FFFD */
static int str_at(jinterp *I, const jnode *at, const jv *s, double idx, jv *out) {
    double len = (double)ju_u16_len(s->u.s, s->n);
    if (idx < 0) idx += len;
    if (idx < 0 || idx >= len) return *out = jv_undef(), J_OK;
    size_t want = (size_t)idx, u = 0;
    for (size_t i = 0; i < s->n;) {
        uint32_t cp;
        int l = ju_next(s->u.s, s->n, i, &cp);
        size_t w = cp >= 0x10000 ? 2 : 1;
        if (want < u + w) {
            char *p = w == 2 ? ja_strdup(I->a, "\xEF\xBF\xBD", 3) : ja_strdup(I->a, s->u.s + i, (size_t)l);
            if (!p) return oom(I, at);
            *out = jv_str(p, w == 2 ? 3 : (size_t)l);
            return J_OK;
        }
        u += w, i += (size_t)l;
    }
    return *out = jv_undef(), J_OK;
}

static int eval_member(jinterp *I, const jnode *n, jenv *e, jv *out) {
    jv obj, prop;
    int rc = jeval(I, n->a, e, &obj);
    if (rc) return rc;
    if (n->flag) {
        if (n->b->type == JN_SLICE) return eval_slice(I, n->b, &obj, e, out);
        if ((rc = jeval(I, n->b, e, &prop))) return rc;
    } else if (n->b->type == JN_INT) {
        prop = jv_int(n->b->num);
    } else {
        prop = jv_str(n->b->s, n->b->sn);
    }
    if (jv_isattr(&obj)) {
        if ((I->steps += obj.u.o->n / 8) > I->max_steps) /* a lookup scans the keys */
            return jerr(I, n, "jinja.cap.steps", "more than %llu steps", (unsigned long long)I->max_steps);
        if (prop.t != JV_STR)
            return jerr(I, n, "jinja.eval", "Cannot access property with non-string: got %s",
                        jv_type_name(&prop));
        jv *v = jobj_get(obj.u.o, prop.u.s, prop.n);
        *out = v ? *v : obj.t != JV_NS ? jmethod(I, &obj, prop.u.s, prop.n) : jv_undef();
        return J_OK;
    }
    if (jv_isarr(&obj) || obj.t == JV_STR) {
        if (prop.t == JV_INT) {
            if (obj.t == JV_STR) return str_at(I, n, &obj, prop.u.d, out);
            double i = prop.u.d < 0 ? prop.u.d + (double)obj.u.a->n : prop.u.d;
            *out = i >= 0 && i < (double)obj.u.a->n ? obj.u.a->v[(size_t)i] : jv_undef();
            return J_OK;
        }
        if (prop.t == JV_STR) return *out = jmethod(I, &obj, prop.u.s, prop.n), J_OK;
        return jerr(I, n, "jinja.eval", "Cannot access property with non-string/non-number: got %s",
                    jv_type_name(&prop));
    }
    if (prop.t != JV_STR)
        return jerr(I, n, "jinja.eval", "Cannot access property with non-string: got %s",
                    jv_type_name(&prop));
    *out = jmethod(I, &obj, prop.u.s, prop.n);
    return J_OK;
}

/* ---- expressions ---- */
static int eval_object(jinterp *I, const jnode *n, jenv *e, jv *out) {
    *out = jv_obj_new(I->a, JV_OBJECT);
    if (!out->u.o) return oom(I, n);
    for (size_t i = 0; i < n->n; i++) {
        jv k, v;
        int rc = jeval(I, n->list[i], e, &k);
        if (rc) return rc;
        if (k.t != JV_STR)
            return jerr(I, n, "jinja.eval", "Object keys must be strings: got %s", jv_type_name(&k));
        if ((rc = jeval(I, n->list2[i], e, &v))) return rc;
        if (jobj_set(I->a, out->u.o, k.u.s, k.n, v)) return oom(I, n);
    }
    return J_OK;
}

static int eval_list(jinterp *I, const jnode *n, jenv *e, jv *out) {
    *out = jv_arr_new(I->a, n->n, n->type == JN_TUPLE);
    if (!out->u.a) return oom(I, n);
    for (size_t i = 0; i < n->n; i++) {
        jv v;
        int rc = jeval(I, n->list[i], e, &v);
        if (rc) return rc;
        if (jarr_push(I->a, out->u.a, v)) return oom(I, n);
    }
    return J_OK;
}

static int eval_call(jinterp *I, const jnode *n, jenv *e, jv *out) {
    jv args, fn;
    int rc = call_args(I, n->list, n->n, e, &args);
    if (rc || (rc = jeval(I, n->a, e, &fn))) return rc;
    return jcall_value(I, n, &fn, args.u.a->v, args.u.a->n, e, out);
}

static int eval_test(jinterp *I, const jnode *n, jenv *e, jv *out) {
    jv x;
    int rc = jeval(I, n->a, e, &x), res;
    if (rc) return rc;
    if ((rc = japply_test(I, n, n->s, &x, NULL, &res))) return rc;
    *out = jv_bool(n->flag ? !res : res);
    return J_OK;
}

static int eval_node(jinterp *I, const jnode *n, jenv *e, jv *out);

/* every nested evaluation counts against the C stack's cap, whatever nests it (a long operator
 * chain, blocks, macro calls) */
static int enter(jinterp *I, const jnode *n) {
    if (++I->edepth > JINJA_MAX_EVAL_DEPTH)
        return jerr(I, n, "jinja.cap.depth", "evaluation nested deeper than the cap (%u)",
                    JINJA_MAX_EVAL_DEPTH);
    return J_OK;
}

int jeval(jinterp *I, const jnode *n, jenv *e, jv *out) {
    if (!n) return *out = jv_undef(), J_OK;
    if (++I->steps > I->max_steps)
        return jerr(I, n, "jinja.cap.steps", "more than %llu steps", (unsigned long long)I->max_steps);
    if (I->a->oom) return oom(I, n);
    int rc = enter(I, n);
    if (!rc) rc = eval_node(I, n, e, out);
    I->edepth--;
    return rc;
}

static int eval_node(jinterp *I, const jnode *n, jenv *e, jv *out) {
    switch (n->type) {
    case JN_IDENT:
        *out = lookup(I, e, n->s, n->sn);
        return J_OK;
    case JN_INT:
        *out = jv_int(n->num);
        return J_OK;
    case JN_FLOAT:
        *out = jv_float(n->num);
        return J_OK;
    case JN_TEXT:
        *out = jv_str(n->s, n->sn);
        return J_OK;
    case JN_BINARY:
        return eval_binary(I, n, e, out);
    case JN_MEMBER:
        return eval_member(I, n, e, out);
    case JN_CALL:
        return eval_call(I, n, e, out);
    case JN_FILTER: {
        jv x;
        int rc = jeval(I, n->a, e, &x);
        return rc ? rc : japply_filter(I, &x, n->b, e, out);
    }
    case JN_TEST:
        return eval_test(I, n, e, out);
    case JN_TERNARY: {
        jv c;
        int rc = jeval(I, n->a, e, &c);
        return rc ? rc : jeval(I, jv_truthy(&c) ? n->b : n->c, e, out);
    }
    case JN_SELECT: {
        jv c;
        int rc = jeval(I, n->b, e, &c);
        if (rc) return rc;
        return jv_truthy(&c) ? jeval(I, n->a, e, out) : (*out = jv_undef(), J_OK);
    }
    case JN_UNARY:
        return eval_unary(I, n, e, out);
    case JN_ARRAY:
    case JN_TUPLE:
        return eval_list(I, n, e, out);
    case JN_OBJECT:
        return eval_object(I, n, e, out);
    default:
        return jerr(I, n, "jinja.unsupported", "this construct is not an expression here");
    }
}

/* ---- statements ---- */
static int exec_set(jinterp *I, const jnode *n, jenv *e) {
    jv v;
    int rc = n->b ? jeval(I, n->b, e, &v) : render_to_string(I, n, n->list, n->n, e, &v);
    if (rc) return rc;
    const jnode *t = n->a;
    if (t->type == JN_IDENT) return set_var(I, n, e, t->s, t->sn, v);
    if (t->type == JN_TUPLE) {
        if (!jv_isarr(&v))
            return jerr(I, n, "jinja.eval", "Cannot unpack non-iterable type in set: %s", jv_type_name(&v));
        if (v.u.a->n != t->n)
            return jerr(I, n, "jinja.eval", "Too %s items to unpack in set",
                        t->n > v.u.a->n ? "few" : "many");
        for (size_t i = 0; i < t->n; i++) {
            if (t->list[i]->type != JN_IDENT)
                return jerr(I, n, "jinja.eval", "Cannot unpack to non-identifier in set");
            if (set_var(I, n, e, t->list[i]->s, t->list[i]->sn, v.u.a->v[i])) return J_ERR;
        }
        return J_OK;
    }
    if (t->type == JN_MEMBER) {
        jv obj;
        if ((rc = jeval(I, t->a, e, &obj))) return rc;
        if (obj.t != JV_NS)
            return jerr(I, n, "jinja.eval", "cannot assign attribute on non-namespace object");
        if (t->b->type != JN_IDENT)
            return jerr(I, n, "jinja.eval", "Cannot assign to member with non-identifier property");
        return jobj_set(I->a, obj.u.o, t->b->s, t->b->sn, v) ? oom(I, n) : J_OK;
    }
    return jerr(I, n, "jinja.eval", "Invalid LHS inside assignment expression");
}

static int bind_loop_var(jinterp *I, const jnode *n, const jnode *var, const jv *cur, jenv *scope) {
    if (var->type == JN_IDENT) return set_var(I, n, scope, var->s, var->sn, *cur);
    for (size_t j = 0; j < var->n; j++) {
        if (var->list[j]->type != JN_IDENT)
            return jerr(I, n, "jinja.eval", "Cannot unpack non-identifier type");
        if (set_var(I, n, scope, var->list[j]->s, var->list[j]->sn, cur->u.a->v[j])) return J_ERR;
    }
    return J_OK;
}

static int loop_obj(jinterp *I, const jnode *n, const jarr *items, size_t i, jv *out) {
    jarena *a = I->a;
    double len = (double)items->n, k = (double)i;
    *out = jv_obj_new(a, JV_OBJECT);
    if (!out->u.o) return oom(I, n);
    jobj *o = out->u.o;
    if (jobj_set(a, o, "index", 5, jv_int(k + 1)) || jobj_set(a, o, "index0", 6, jv_int(k)) ||
        jobj_set(a, o, "revindex", 8, jv_int(len - k)) ||
        jobj_set(a, o, "revindex0", 9, jv_int(len - k - 1)) || jobj_set(a, o, "first", 5, jv_bool(i == 0)) ||
        jobj_set(a, o, "last", 4, jv_bool(i + 1 == items->n)) || jobj_set(a, o, "length", 6, jv_int(len)) ||
        jobj_set(a, o, "previtem", 8, i > 0 ? items->v[i - 1] : jv_undef()) ||
        jobj_set(a, o, "nextitem", 8, i + 1 < items->n ? items->v[i + 1] : jv_undef()))
        return oom(I, n);
    return J_OK;
}

static int render_for(jinterp *I, const jnode *n, jenv *e) {
    jenv *scope = jenv_new(I, e);
    if (!scope) return oom(I, n);
    const jnode *test = NULL, *var = n->a;
    jv it;
    int rc = jeval(I, n->b->type == JN_SELECT ? n->b->a : n->b, scope, &it);
    if (rc) return rc;
    if (n->b->type == JN_SELECT) test = n->b->b;
    if (!jv_isarr(&it) && !jv_isobj(&it))
        return jerr(I, n, "jinja.eval", "Expected iterable or object type in for loop: got %s",
                    jv_type_name(&it));
    if (jv_isobj(&it)) it = jv_keys(I->a, it.u.o);
    if (!it.u.a) return oom(I, n);
    jv items = jv_arr_new(I->a, it.u.a->n, 0);
    if (!items.u.a) return oom(I, n);
    for (size_t i = 0; i < it.u.a->n; i++) {
        const jv *cur = &it.u.a->v[i];
        if (var->type == JN_TUPLE) {
            if (cur->t != JV_ARRAY || cur->tuple)
                return jerr(I, n, "jinja.eval", "Cannot unpack non-iterable type: %s", jv_type_name(cur));
            if (cur->u.a->n != var->n)
                return jerr(I, n, "jinja.eval", "Too %s items to unpack",
                            var->n > cur->u.a->n ? "few" : "many");
        }
        if (test) {
            jenv *ls = jenv_new(I, scope);
            jv t;
            if (!ls) return oom(I, n);
            if ((rc = bind_loop_var(I, n, var, cur, ls)) || (rc = jeval(I, test, ls, &t))) return rc;
            if (!jv_truthy(&t)) continue;
        }
        jarr_push(I->a, items.u.a, *cur);
    }
    int none = 1;
    for (size_t i = 0; i < items.u.a->n; i++) {
        if (++I->steps > I->max_steps)
            return jerr(I, n, "jinja.cap.steps", "more than %llu steps", (unsigned long long)I->max_steps);
        jv lp;
        if (n->special &&
            ((rc = loop_obj(I, n, items.u.a, i, &lp)) || (rc = set_var(I, n, scope, "loop", 4, lp))))
            return rc;
        if ((rc = bind_loop_var(I, n, var, &items.u.a->v[i], scope))) return rc;
        rc = render_block(I, n->list, n->n, scope);
        if (rc == J_CONTINUE) continue;
        if (rc == J_BREAK) break;
        if (rc) return rc;
        none = 0;
    }
    return none ? render_block(I, n->list2, n->n2, scope) : J_OK;
}

static int eval_callblock(jinterp *I, const jnode *n, jenv *e, jv *out) {
    jv caller = make_func(I, n, e, 1), args, fn;
    if (!caller.u.f) return oom(I, n);
    const jnode *c = n->a;
    args = jv_arr_new(I->a, c->n + 1, 0);
    jv kw = jv_obj_new(I->a, JV_KWARGS);
    int has_kw, rc;
    if (!args.u.a || !kw.u.o) return oom(I, n);
    if ((rc = jeval_args(I, c->list, c->n, e, args.u.a, kw.u.o, &has_kw))) return rc;
    if (jarr_push(I->a, args.u.a, kw)) return oom(I, n);
    if ((rc = jeval(I, c->a, e, &fn))) return rc;
    if (fn.t != JV_FUNC)
        return jerr(I, n, "jinja.eval", "Cannot call something that is not a function: got %s",
                    jv_type_name(&fn));
    jenv *ne = jenv_new(I, e);
    if (!ne) return oom(I, n);
    ne->call_block = 1;
    if (set_var(I, n, ne, "caller", 6, caller)) return J_ERR;
    return jcall_value(I, n, &fn, args.u.a->v, args.u.a->n, ne, out);
}

static int emit(jinterp *I, const jnode *n, const jv *v) {
    if (v->t == JV_NULL || v->t == JV_UNDEF) return J_OK;
    if (v->t == JV_STR) {
        jb_put(I->out, v->u.s, v->n);
    } else if (v->t == JV_FUNC) {
        return jerr(I, n, "jinja.unsupported", "printing a function");
    } else {
        jbuf b = {0};
        if (jv_to_string(I->a, v, &b)) {
            free(b.p);
            return jerr(I, n, "jinja.eval", "Cannot convert to JSON: %s", "TupleValue");
        }
        jb_put(I->out, b.p ? b.p : "", b.n);
        free(b.p);
    }
    if (I->out->over)
        return jerr(I, n, "jinja.cap.output", "the output passed its cap (%zu bytes)", I->out->max);
    return J_OK;
}

static int render_stmt(jinterp *I, const jnode *n, jenv *e) {
    jv v;
    int rc;
    switch (n->type) {
    case JN_TEXT:
        return emit(I, n, &(jv){.t = JV_STR, .n = n->sn, .u.s = n->s});
    case JN_COMMENT:
        return J_OK;
    case JN_IF: {
        jv t;
        if ((rc = jeval(I, n->a, e, &t))) return rc;
        return jv_truthy(&t) ? render_block(I, n->list, n->n, e) : render_block(I, n->list2, n->n2, e);
    }
    case JN_FOR: {
        if (++I->depth > I->max_depth)
            return jerr(I, n, "jinja.cap.depth", "blocks nested deeper than the cap");
        rc = render_for(I, n, e);
        I->depth--;
        return rc;
    }
    case JN_SET:
        return exec_set(I, n, e);
    case JN_MACRO: {
        jv f = make_func(I, n, e, 0);
        if (!f.u.f) return oom(I, n);
        return set_var(I, n, e, n->s, n->sn, f);
    }
    case JN_CALLBLOCK:
        if ((rc = eval_callblock(I, n, e, &v))) return rc;
        return emit(I, n, &v);
    case JN_FILTERBLOCK: {
        jv body;
        if ((rc = render_to_string(I, n, n->list, n->n, e, &body)) ||
            (rc = japply_filter(I, &body, n->b, e, &v)))
            return rc;
        return emit(I, n, &v);
    }
    case JN_BREAK:
        return J_BREAK;
    case JN_CONTINUE:
        return J_CONTINUE;
    default:
        if ((rc = jeval(I, n, e, &v))) return rc;
        return emit(I, n, &v);
    }
}

static int render_block(jinterp *I, jnode **list, size_t n, jenv *e) {
    int rc = n ? enter(I, list[0]) : J_OK;
    for (size_t i = 0; i < n && !rc; i++)
        rc = render_stmt(I, list[i], e);
    if (n) I->edepth--;
    return rc;
}

int jinja_run(jinterp *I, const jnode *prog, jenv *g) {
    int rc = render_block(I, prog->list, prog->n, g);
    if (rc == J_BREAK || rc == J_CONTINUE)
        return jerr(I, prog, "jinja.eval", "%s outside of a loop", rc == J_BREAK ? "break" : "continue");
    return rc;
}
