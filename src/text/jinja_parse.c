/* jinja_parse.c — tokens to the syntax tree, with the reference parser's grammar and precedence
 * (lowest first): ternary / select `if`, or, and, not, comparisons and membership, + - ~,
 * * / // %, ** (left-associative), `is` tests, `|` filters, unary signs, calls and members,
 * primaries. Nesting is capped (max_depth) so hostile input cannot exhaust the stack. */
#include "jinja_impl.h"
#include <stdlib.h>

typedef struct parser {
    jarena *a;
    const jtok *t;
    size_t n, i;
    unsigned depth, max_depth;
    fp4_error *err;
    int failed;
} parser;

typedef struct nlist {
    jnode **v;
    size_t n, cap;
} nlist;

static uint32_t cur_line(const parser *P) {
    if (P->i < P->n) return P->t[P->i].line;
    return P->n ? P->t[P->n - 1].line : 1;
}

static jnode *fail(parser *P, const char *fmt, const char *arg) {
    int depth = P->depth > P->max_depth;
    if (!P->failed)
        fp4_fail(P->err,
                 P->a->oom ? FP4_ERR_NOMEM
                 : depth   ? FP4_ERR_LIMIT
                           : FP4_ERR_FORMAT,
                 NULL, NULL,
                 P->a->oom ? "jinja.memory"
                 : depth   ? "jinja.cap.depth"
                           : "jinja.syntax",
                 "line %u: %s%s", cur_line(P), P->a->oom ? "out of memory" : fmt, arg ? arg : "");
    P->failed = 1;
    return NULL;
}

static jnode *node(parser *P, jnode_type t) {
    jnode *n = ja_alloc(P->a, sizeof *n);
    if (!n) return fail(P, "out of memory", NULL);
    n->type = (uint8_t)t;
    n->line = cur_line(P);
    return n;
}

static int nl_push(parser *P, nlist *l, jnode *n) {
    if (!n) return -1;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 8;
        jnode **v = ja_alloc(P->a, cap * sizeof *v);
        if (!v) return fail(P, "out of memory", NULL), -1;
        if (l->n) memcpy(v, l->v, l->n * sizeof *v);
        l->v = v, l->cap = cap;
    }
    l->v[l->n++] = n;
    return 0;
}

static int is(const parser *P, jtok_type t) {
    return P->i < P->n && P->t[P->i].type == t;
}
static int is_ident(const parser *P, size_t off, const char *name) {
    return P->i + off < P->n && P->t[P->i + off].type == JT_IDENT && !strcmp(P->t[P->i + off].s, name);
}
static int is_stmt(const parser *P, const char *const *names) {
    if (!is(P, JT_OPEN_STMT) || P->i + 1 >= P->n || P->t[P->i + 1].type != JT_IDENT) return 0;
    for (; *names; names++)
        if (!strcmp(P->t[P->i + 1].s, *names)) return 1;
    return 0;
}
static int expect(parser *P, jtok_type t, const char *what) {
    if (P->i >= P->n || P->t[P->i].type != t) return fail(P, what, NULL), -1;
    P->i++;
    return 0;
}
static int expect_ident(parser *P, const char *name) {
    if (!is_ident(P, 0, name)) return fail(P, "Expected ", name), -1;
    P->i++;
    return 0;
}

static jnode *parse_any(parser *P);
static jnode *parse_expr(parser *P);
static jnode *parse_primary(parser *P);

static int enter(parser *P) {
    if (++P->depth > P->max_depth) return fail(P, "nesting deeper than the cap", NULL), -1;
    return 0;
}

/* statements until one of the names opens a statement */
static int parse_body(parser *P, const char *const *until, nlist *body) {
    while (!P->failed && !is_stmt(P, until)) {
        if (P->i >= P->n) return fail(P, "Unexpected end of template, expected {% ", until[0]), -1;
        if (nl_push(P, body, parse_any(P))) return -1;
    }
    return P->failed ? -1 : 0;
}

static jnode *parse_expr_seq(parser *P, int primary) {
    jnode *first = primary ? parse_primary(P) : parse_expr(P);
    if (!first || !is(P, JT_COMMA)) return first;
    nlist l = {0};
    nl_push(P, &l, first);
    while (is(P, JT_COMMA)) {
        P->i++;
        if (nl_push(P, &l, primary ? parse_primary(P) : parse_expr(P))) return NULL;
        if (!is(P, JT_COMMA)) break;
    }
    jnode *t = node(P, JN_TUPLE);
    if (t) t->list = l.v, t->n = l.n, t->line = first->line;
    return t;
}

/* (a, b=c, *d, **e): mode 0 call, 1 parameters */
static int parse_args(parser *P, int params, nlist *out) {
    if (expect(P, JT_LPAREN, "Expected opening parenthesis for arguments list")) return -1;
    int saw_kw = 0, saw_spread = 0;
    while (!P->failed && !is(P, JT_RPAREN)) {
        if (P->i >= P->n) return fail(P, "Unexpected end of arguments list", NULL), -1;
        int kws = is(P, JT_POW), ps = is(P, JT_MUL) && !strcmp(P->t[P->i].s, "*");
        if (params && (kws || ps))
            return fail(P, "Argument unpacking is not allowed in parameter declarations", NULL), -1;
        if (kws) {
            P->i++;
            jnode *k = node(P, JN_KWSPREAD);
            if (!k || !(k->a = parse_expr(P)) || nl_push(P, out, k)) return -1;
            if (is(P, JT_COMMA)) P->i++;
            if (!is(P, JT_RPAREN)) return fail(P, "`**` must be applied to the final argument", NULL), -1;
            break;
        }
        jnode *arg;
        if (ps) {
            if (saw_spread) return fail(P, "Only one `*` argument unpacking is allowed", NULL), -1;
            saw_spread = 1;
            P->i++;
            arg = node(P, JN_SPREAD);
            if (!arg || !(arg->a = parse_expr(P))) return -1;
        } else {
            arg = parse_expr(P);
            if (!arg) return -1;
            if (is(P, JT_EQUALS)) {
                P->i++;
                if (arg->type != JN_IDENT)
                    return fail(P, "Expected identifier for keyword argument", NULL), -1;
                jnode *kw = node(P, JN_KWARG);
                if (!kw) return -1;
                kw->s = arg->s, kw->sn = arg->sn, kw->line = arg->line;
                if (!(kw->a = parse_expr(P))) return -1;
                arg = kw;
            }
            if (params) {
                if (arg->type != JN_IDENT && arg->type != JN_KWARG)
                    return fail(P, "Expected identifier for parameter declaration", NULL), -1;
                for (size_t j = 0; j < out->n; j++)
                    if (!strcmp(out->v[j]->s, arg->s))
                        return fail(P, "Duplicate parameter name: ", arg->s), -1;
            }
            if (arg->type == JN_KWARG)
                saw_kw = 1;
            else if (saw_kw)
                return fail(P,
                            params ? "Non-default argument follows default argument"
                                   : "Positional arguments must come before keyword arguments",
                            NULL),
                       -1;
            else if (saw_spread)
                return fail(P, "Positional arguments must not follow `*` argument unpacking", NULL), -1;
        }
        if (nl_push(P, out, arg)) return -1;
        if (is(P, JT_COMMA)) P->i++;
    }
    if (P->failed) return -1;
    return expect(P, JT_RPAREN, "Expected closing parenthesis for arguments list");
}

static jnode *parse_member(parser *P, jnode *obj);

static jnode *parse_call(parser *P, jnode *callee) {
    if (enter(P)) return NULL;
    jnode *c = node(P, JN_CALL);
    nlist args = {0};
    if (!c || parse_args(P, 0, &args)) return NULL;
    c->a = callee, c->list = args.v, c->n = args.n, c->line = callee->line;
    jnode *e = parse_member(P, c);
    if (e && is(P, JT_LPAREN)) e = parse_call(P, e);
    P->depth--;
    return e;
}

static jnode *parse_subscript(parser *P) {
    jnode *sl[4] = {0};
    size_t k = 0;
    int slice = 0;
    while (!P->failed && !is(P, JT_RBRACKET)) {
        if (P->i >= P->n) return fail(P, "Expected closing square bracket", NULL);
        if (k == 4) return fail(P, "Expected 0-3 arguments for slice expression", NULL);
        if (is(P, JT_COLON)) {
            sl[k++] = NULL;
            P->i++;
            slice = 1;
        } else {
            if (!(sl[k++] = parse_expr(P))) return NULL;
            if (is(P, JT_COLON)) P->i++, slice = 1;
        }
    }
    if (P->failed) return NULL;
    if (k == 0) return fail(P, "Expected at least one argument for member/slice expression", NULL);
    if (!slice) return sl[0];
    if (k > 3) return fail(P, "Expected 0-3 arguments for slice expression", NULL);
    jnode *s = node(P, JN_SLICE);
    if (s) s->a = sl[0], s->b = sl[1], s->c = sl[2];
    return s;
}

static jnode *parse_member(parser *P, jnode *obj) {
    while (obj && (is(P, JT_DOT) || is(P, JT_LBRACKET))) {
        int computed = is(P, JT_LBRACKET);
        P->i++;
        jnode *m = node(P, JN_MEMBER), *prop;
        if (!m) return NULL;
        if (computed) {
            if (!(prop = parse_subscript(P)) || expect(P, JT_RBRACKET, "Expected closing square bracket"))
                return NULL;
        } else {
            if (!(prop = parse_primary(P))) return NULL;
            if (prop->type != JN_IDENT && prop->type != JN_INT)
                return fail(P, "Expected identifier or integer following dot operator", NULL);
        }
        m->a = obj, m->b = prop, m->flag = (uint8_t)computed, m->line = obj->line;
        obj = m;
    }
    return obj;
}

static jnode *parse_call_member(parser *P) {
    jnode *m = parse_member(P, parse_primary(P));
    if (m && is(P, JT_LPAREN)) return parse_call(P, m);
    return m;
}

static jnode *binary(parser *P, enum jop op, jnode *l, jnode *r) {
    if (!l || !r) return NULL;
    jnode *b = node(P, JN_BINARY);
    if (b) b->op = (uint8_t)op, b->a = l, b->b = r, b->line = l->line;
    return b;
}

static enum jop op_of(const char *s) {
    static const struct {
        const char *s;
        enum jop op;
    } T[] = {{"+", JO_ADD},       {"-", JO_SUB}, {"~", JO_CAT},  {"*", JO_MUL}, {"/", JO_DIV},
             {"//", JO_FLOORDIV}, {"%", JO_MOD}, {"**", JO_POW}, {"<", JO_LT},  {">", JO_GT},
             {"<=", JO_LE},       {">=", JO_GE}, {"==", JO_EQ},  {"!=", JO_NE}};
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++)
        if (!strcmp(T[i].s, s)) return T[i].op;
    return JO_NONE;
}

static jnode *parse_unary_sign(parser *P) {
    if (P->i < P->n && (P->t[P->i].type == JT_UNARY || P->t[P->i].type == JT_ADD) &&
        (!strcmp(P->t[P->i].s, "-") || !strcmp(P->t[P->i].s, "+"))) {
        jnode *u = node(P, JN_UNARY);
        if (!u || enter(P)) return NULL;
        u->op = P->t[P->i++].s[0] == '-' ? JO_NEG : JO_POS;
        u->a = parse_unary_sign(P);
        P->depth--;
        return u->a ? u : NULL;
    }
    return parse_call_member(P);
}

static jnode *parse_filter(parser *P) {
    jnode *x = parse_unary_sign(P);
    while (x && is(P, JT_PIPE)) {
        P->i++;
        jnode *f = parse_primary(P);
        if (!f) return NULL;
        if (f->type != JN_IDENT) return fail(P, "Expected identifier for the filter", NULL);
        if (is(P, JT_LPAREN) && !(f = parse_call(P, f))) return NULL;
        jnode *fx = node(P, JN_FILTER);
        if (!fx) return NULL;
        fx->a = x, fx->b = f, fx->line = x->line;
        x = fx;
    }
    return x;
}

static jnode *parse_test(parser *P) {
    jnode *x = parse_filter(P);
    while (x && is_ident(P, 0, "is")) {
        P->i++;
        int neg = is_ident(P, 0, "not");
        if (neg) P->i++;
        jnode *t = parse_primary(P);
        if (!t) return NULL;
        if (t->type != JN_IDENT) return fail(P, "Expected identifier for the test", NULL);
        jnode *te = node(P, JN_TEST);
        if (!te) return NULL;
        te->a = x, te->s = t->s, te->sn = t->sn, te->flag = (uint8_t)neg, te->line = t->line;
        x = te;
    }
    return x;
}

static jnode *parse_pow(parser *P) {
    jnode *l = parse_test(P);
    while (l && is(P, JT_POW)) {
        P->i++;
        l = binary(P, JO_POW, l, parse_test(P));
    }
    return l;
}

static jnode *parse_mul(parser *P) {
    jnode *l = parse_pow(P);
    while (l && is(P, JT_MUL)) {
        enum jop op = op_of(P->t[P->i++].s);
        l = binary(P, op, l, parse_pow(P));
    }
    return l;
}

static jnode *parse_add(parser *P) {
    jnode *l = parse_mul(P);
    while (l && is(P, JT_ADD)) {
        enum jop op = op_of(P->t[P->i++].s);
        l = binary(P, op, l, parse_mul(P));
    }
    return l;
}

static jnode *parse_cmp(parser *P) {
    jnode *l = parse_add(P);
    while (l) {
        enum jop op;
        if (is_ident(P, 0, "not") && is_ident(P, 1, "in"))
            op = JO_NOTIN, P->i += 2;
        else if (is_ident(P, 0, "in"))
            op = JO_IN, P->i++;
        else if (is(P, JT_CMP))
            op = op_of(P->t[P->i++].s);
        else
            break;
        l = binary(P, op, l, parse_add(P));
    }
    return l;
}

static jnode *parse_not(parser *P) {
    if (is_ident(P, 0, "not")) {
        jnode *u = node(P, JN_UNARY);
        if (!u || enter(P)) return NULL;
        P->i++;
        u->op = JO_NOT;
        u->a = parse_not(P);
        P->depth--;
        return u->a ? u : NULL;
    }
    return parse_cmp(P);
}

static jnode *parse_and(parser *P) {
    jnode *l = parse_not(P);
    while (l && is_ident(P, 0, "and")) {
        P->i++;
        l = binary(P, JO_AND, l, parse_not(P));
    }
    return l;
}

static jnode *parse_or(parser *P) {
    jnode *l = parse_and(P);
    while (l && is_ident(P, 0, "or")) {
        P->i++;
        l = binary(P, JO_OR, l, parse_and(P));
    }
    return l;
}

static jnode *parse_expr(parser *P) {
    if (enter(P)) return NULL;
    jnode *a = parse_or(P);
    if (a && is_ident(P, 0, "if")) {
        P->i++;
        jnode *test = parse_or(P);
        if (!test) return NULL;
        if (is_ident(P, 0, "else")) {
            P->i++;
            jnode *t = node(P, JN_TERNARY);
            if (!t) return NULL;
            t->a = test, t->b = a, t->line = a->line;
            if (!(t->c = parse_expr(P))) return NULL;
            a = t;
        } else {
            jnode *s = node(P, JN_SELECT);
            if (!s) return NULL;
            s->a = a, s->b = test, s->line = a->line;
            a = s;
        }
    }
    P->depth--;
    return a;
}

static jnode *parse_primary(parser *P) {
    if (P->i >= P->n) return fail(P, "Unexpected end of template", NULL);
    const jtok *t = &P->t[P->i++];
    jnode *n;
    switch (t->type) {
    case JT_NUM:
        if (!(n = node(P, strchr(t->s, '.') ? JN_FLOAT : JN_INT))) return NULL;
        n->num = strtod(t->s, NULL);
        n->line = t->line;
        return n;
    case JT_STR: {
        jbuf b = {0};
        jb_put(&b, t->s, t->n);
        while (is(P, JT_STR))
            jb_put(&b, P->t[P->i].s, P->t[P->i].n), P->i++;
        n = node(P, JN_TEXT);
        if (n) {
            n->s = ja_strdup(P->a, b.p ? b.p : "", b.n), n->sn = b.n, n->line = t->line;
            if (!n->s || b.over) n = fail(P, "out of memory", NULL);
        }
        free(b.p);
        return n;
    }
    case JT_IDENT:
        if ((n = node(P, JN_IDENT))) n->s = t->s, n->sn = t->n, n->line = t->line;
        return n;
    case JT_LPAREN:
        if (enter(P)) return NULL;
        n = parse_expr_seq(P, 0);
        P->depth--;
        if (!n || expect(P, JT_RPAREN, "Expected closing parenthesis")) return NULL;
        return n;
    case JT_LBRACKET: {
        nlist l = {0};
        if (enter(P)) return NULL;
        while (!P->failed && !is(P, JT_RBRACKET)) {
            if (P->i >= P->n) return fail(P, "Expected closing square bracket", NULL);
            if (nl_push(P, &l, parse_expr(P))) return NULL;
            if (is(P, JT_COMMA)) P->i++;
        }
        P->i++, P->depth--;
        if ((n = node(P, JN_ARRAY))) n->list = l.v, n->n = l.n, n->line = t->line;
        return n;
    }
    case JT_LBRACE: {
        nlist k = {0}, v = {0};
        if (enter(P)) return NULL;
        while (!P->failed && !is(P, JT_RBRACE)) {
            if (P->i >= P->n) return fail(P, "Expected closing curly bracket", NULL);
            if (nl_push(P, &k, parse_expr(P))) return NULL;
            if (expect(P, JT_COLON, "Expected colon between key and value in object literal")) return NULL;
            if (nl_push(P, &v, parse_expr(P))) return NULL;
            if (is(P, JT_COMMA)) P->i++;
        }
        P->i++, P->depth--;
        if ((n = node(P, JN_OBJECT))) n->list = k.v, n->list2 = v.v, n->n = k.n, n->line = t->line;
        return n;
    }
    default:
        P->i--;
        return fail(P, "Unexpected token: ", t->s);
    }
}

static const char *const END_IF[] = {"elif", "else", "endif", NULL};
static const char *const ENDIF[] = {"endif", NULL};

static jnode *parse_if(parser *P) {
    jnode *n = node(P, JN_IF);
    nlist body = {0}, alt = {0};
    if (!n || enter(P) || !(n->a = parse_expr(P)) ||
        expect(P, JT_CLOSE_STMT, "Expected closing statement token"))
        return NULL;
    if (parse_body(P, END_IF, &body)) return NULL;
    if (is_stmt(P, (const char *const[]){"elif", NULL})) {
        P->i += 2;
        if (nl_push(P, &alt, parse_if(P))) return NULL;
    } else if (is_stmt(P, (const char *const[]){"else", NULL})) {
        P->i += 2;
        if (expect(P, JT_CLOSE_STMT, "Expected closing statement token") || parse_body(P, ENDIF, &alt))
            return NULL;
    }
    n->list = body.v, n->n = body.n, n->list2 = alt.v, n->n2 = alt.n;
    P->depth--;
    return n;
}

static int end_stmt(parser *P, const char *name) {
    if (expect(P, JT_OPEN_STMT, "Expected {% token") || expect_ident(P, name)) return -1;
    return expect(P, JT_CLOSE_STMT, "Expected %} token");
}

/* which of caller / kwargs / varargs the body reads (the reference's analysis, without its
 * declaration-order refinement: a body that assigns one of these names is refused) */
static void specials(const jnode *n, uint8_t *acc, unsigned depth) {
    if (!n || depth > 4096) return;
    if (n->type == JN_IDENT) {
        if (!strcmp(n->s, "caller")) *acc |= 1;
        if (!strcmp(n->s, "kwargs")) *acc |= 2;
        if (!strcmp(n->s, "varargs")) *acc |= 4;
        return;
    }
    if (n->type == JN_FILTER && n->b->type == JN_IDENT) return specials(n->a, acc, depth + 1);
    if (n->type == JN_MEMBER && !n->flag) return specials(n->a, acc, depth + 1);
    specials(n->a, acc, depth + 1), specials(n->b, acc, depth + 1), specials(n->c, acc, depth + 1);
    for (size_t i = 0; i < n->n; i++)
        specials(n->list[i], acc, depth + 1);
    for (size_t i = 0; i < n->n2; i++)
        specials(n->list2[i], acc, depth + 1);
}

/* whether a subtree names `loop` (a for loop builds its loop object only then) */
static uint8_t reads_loop(const jnode *n, unsigned depth) {
    if (!n) return 0;
    if (depth > 4096 || (n->type == JN_IDENT && n->sn == 4 && !memcmp(n->s, "loop", 4))) return 1;
    if (reads_loop(n->a, depth + 1) || reads_loop(n->b, depth + 1) || reads_loop(n->c, depth + 1)) return 1;
    for (size_t i = 0; i < n->n; i++)
        if (reads_loop(n->list[i], depth + 1)) return 1;
    for (size_t i = 0; i < n->n2; i++)
        if (reads_loop(n->list2[i], depth + 1)) return 1;
    return 0;
}

static jnode *parse_stmt(parser *P) {
    if (expect(P, JT_OPEN_STMT, "Expected opening statement token")) return NULL;
    if (!is(P, JT_IDENT)) return fail(P, "Unknown statement", NULL);
    const char *name = P->t[P->i].s;
    uint32_t line = P->t[P->i].line;
    P->i++;
    jnode *n = NULL;
    nlist l1 = {0}, l2 = {0};
    if (!strcmp(name, "set")) {
        if (!(n = node(P, JN_SET)) || !(n->a = parse_expr_seq(P, 0))) return NULL;
        if (is(P, JT_EQUALS)) {
            P->i++;
            if (!(n->b = parse_expr_seq(P, 0))) return NULL;
        } else {
            if (expect(P, JT_CLOSE_STMT, "Expected %} token") ||
                parse_body(P, (const char *const[]){"endset", NULL}, &l1))
                return NULL;
            P->i++;
            if (expect_ident(P, "endset")) return NULL;
            n->list = l1.v, n->n = l1.n;
        }
        if (expect(P, JT_CLOSE_STMT, "Expected closing statement token")) return NULL;
    } else if (!strcmp(name, "if")) {
        if (!(n = parse_if(P)) || end_stmt(P, "endif")) return NULL;
    } else if (!strcmp(name, "macro")) {
        jnode *id = parse_primary(P);
        if (!id) return NULL;
        if (id->type != JN_IDENT) return fail(P, "Expected identifier following macro statement", NULL);
        if (!(n = node(P, JN_MACRO)) || parse_args(P, 1, &l1) ||
            expect(P, JT_CLOSE_STMT, "Expected closing statement token") ||
            parse_body(P, (const char *const[]){"endmacro", NULL}, &l2) || end_stmt(P, "endmacro"))
            return NULL;
        n->s = id->s, n->sn = id->sn, n->list = l1.v, n->n = l1.n, n->list2 = l2.v, n->n2 = l2.n;
        for (size_t i = 0; i < l2.n; i++)
            specials(l2.v[i], &n->special, 0);
    } else if (!strcmp(name, "for")) {
        if (!(n = node(P, JN_FOR)) || !(n->a = parse_expr_seq(P, 1))) return NULL;
        if (n->a->type != JN_IDENT && n->a->type != JN_TUPLE)
            return fail(P, "Expected identifier/tuple for the loop variable", NULL);
        if (!is_ident(P, 0, "in")) return fail(P, "Expected `in` keyword following loop variable", NULL);
        P->i++;
        if (!(n->b = parse_expr(P)) || expect(P, JT_CLOSE_STMT, "Expected closing statement token") ||
            parse_body(P, (const char *const[]){"endfor", "else", NULL}, &l1))
            return NULL;
        if (is_stmt(P, (const char *const[]){"else", NULL})) {
            P->i += 2;
            if (expect(P, JT_CLOSE_STMT, "Expected closing statement token") ||
                parse_body(P, (const char *const[]){"endfor", NULL}, &l2))
                return NULL;
        }
        if (end_stmt(P, "endfor")) return NULL;
        n->list = l1.v, n->n = l1.n, n->list2 = l2.v, n->n2 = l2.n;
        n->special = reads_loop(n->b, 0);
        for (size_t i = 0; i < l1.n && !n->special; i++)
            n->special = reads_loop(l1.v[i], 0);
    } else if (!strcmp(name, "call")) {
        if (!(n = node(P, JN_CALLBLOCK))) return NULL;
        if (is(P, JT_LPAREN) && parse_args(P, 1, &l1)) return NULL;
        jnode *callee = parse_primary(P);
        if (!callee) return NULL;
        if (callee->type != JN_IDENT) return fail(P, "Expected identifier following call statement", NULL);
        jnode *c = node(P, JN_CALL);
        nlist args = {0};
        if (!c || parse_args(P, 0, &args) || expect(P, JT_CLOSE_STMT, "Expected closing statement token") ||
            parse_body(P, (const char *const[]){"endcall", NULL}, &l2) || end_stmt(P, "endcall"))
            return NULL;
        c->a = callee, c->list = args.v, c->n = args.n;
        n->a = c, n->list = l1.v, n->n = l1.n, n->list2 = l2.v, n->n2 = l2.n;
        for (size_t i = 0; i < l2.n; i++)
            specials(l2.v[i], &n->special, 0);
    } else if (!strcmp(name, "break") || !strcmp(name, "continue")) {
        if (!(n = node(P, name[0] == 'b' ? JN_BREAK : JN_CONTINUE)) ||
            expect(P, JT_CLOSE_STMT, "Expected closing statement token"))
            return NULL;
    } else if (!strcmp(name, "filter")) {
        jnode *f = parse_primary(P);
        if (!f) return NULL;
        if (f->type == JN_IDENT && is(P, JT_LPAREN) && !(f = parse_call(P, f))) return NULL;
        if (!(n = node(P, JN_FILTERBLOCK)) || expect(P, JT_CLOSE_STMT, "Expected closing statement token") ||
            parse_body(P, (const char *const[]){"endfilter", NULL}, &l1) || end_stmt(P, "endfilter"))
            return NULL;
        n->b = f, n->list = l1.v, n->n = l1.n;
    } else {
        P->i--;
        return fail(P, "Unknown statement type: ", name);
    }
    if (n) n->line = line;
    return n;
}

static jnode *parse_any(parser *P) {
    const jtok *t = &P->t[P->i];
    jnode *n;
    switch (t->type) {
    case JT_COMMENT:
        P->i++;
        return node(P, JN_COMMENT);
    case JT_TEXT:
        if ((n = node(P, JN_TEXT))) n->s = t->s, n->sn = t->n;
        P->i++;
        return n;
    case JT_OPEN_STMT:
        return parse_stmt(P);
    case JT_OPEN_EXPR:
        P->i++;
        n = parse_expr(P);
        if (!n || expect(P, JT_CLOSE_EXPR, "Expected closing expression token")) return NULL;
        return n;
    default:
        return fail(P, "Unexpected token: ", t->s);
    }
}

fp4_status jinja_parse(jarena *a, const jtok *toks, size_t n, unsigned max_depth, jnode **prog,
                       fp4_error *err) {
    parser P = {a, toks, n, 0, 0, max_depth, err, 0};
    nlist body = {0};
    while (!P.failed && P.i < P.n)
        if (nl_push(&P, &body, parse_any(&P))) break;
    if (P.failed) return err ? err->code : FP4_ERR_FORMAT;
    jnode *p = node(&P, JN_PROGRAM);
    if (!p) return err ? err->code : FP4_ERR_NOMEM;
    p->list = body.v, p->n = body.n;
    *prog = p;
    return FP4_OK;
}
