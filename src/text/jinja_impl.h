/* jinja_impl.h — internals of the sandboxed Jinja engine (src/text/jinja_*.c): the arena, the
 * tokens, the syntax tree, the runtime values and the interpreter state. The engine reproduces
 * @huggingface/jinja (the pinned reference; docs/TEXT.md): its lexer's preprocessing (trim_blocks,
 * lstrip_blocks, transformers' generation tag), its grammar and precedence, and its runtime, whose
 * values are JavaScript values (numbers are doubles, integers a flag; strings are UTF-16 there and
 * UTF-8 here, with length, indexing and slicing counted as the reference counts them). */
#ifndef FP4_JINJA_IMPL_H
#define FP4_JINJA_IMPL_H

#include "fp4_impl.h"
#include "fp4lane_text.h"
#include <stddef.h>
#include <stdint.h>

/* ---- arena: every allocation of a compile or a render, freed at once; capped ---- */
typedef struct jarena_blk jarena_blk;
typedef struct jarena {
    jarena_blk *head;
    size_t used, cap; /* bytes handed out, and the cap on them */
    int oom;          /* an allocation failed or passed the cap */
} jarena;
void *ja_alloc(jarena *a, size_t n);                 /* zeroed, 16-aligned; NULL (and a->oom) on failure */
char *ja_strdup(jarena *a, const char *s, size_t n); /* NUL-terminated copy */
void ja_free(jarena *a);

/* growable byte buffer (malloc'd, not in the arena): output and string building */
typedef struct jbuf {
    char *p;
    size_t n, cap;
    size_t max; /* 0: unlimited */
    int over;   /* a put failed (out of memory or past max) */
} jbuf;
void jb_put(jbuf *b, const char *s, size_t n);
void jb_puts(jbuf *b, const char *s);
void jb_putc(jbuf *b, char c);

/* ---- tokens (jinja_lex.c) ---- */
typedef enum jtok_type {
    JT_TEXT,
    JT_NUM,
    JT_STR,
    JT_IDENT,
    JT_EQUALS,
    JT_LPAREN,
    JT_RPAREN,
    JT_OPEN_STMT,
    JT_CLOSE_STMT,
    JT_OPEN_EXPR,
    JT_CLOSE_EXPR,
    JT_LBRACKET,
    JT_RBRACKET,
    JT_LBRACE,
    JT_RBRACE,
    JT_COMMA,
    JT_DOT,
    JT_COLON,
    JT_PIPE,
    JT_ADD,   /* + - ~ */
    JT_MUL,   /* * / // % */
    JT_POW,   /* ** */
    JT_CMP,   /* < > <= >= == != */
    JT_UNARY, /* a lone - or + */
    JT_COMMENT
} jtok_type;

typedef struct jtok {
    jtok_type type;
    uint32_t line;
    const char *s; /* value (arena), NUL-terminated */
    size_t n;
} jtok;

/* Tokenizes text as the reference's tokenize(text, {lstrip_blocks, trim_blocks}) does. */
fp4_status jinja_lex(jarena *a, const char *text, size_t len, jtok **toks, size_t *n, fp4_error *err);

/* ---- syntax tree (jinja_parse.c) ---- */
typedef enum jnode_type {
    JN_PROGRAM,
    JN_TEXT, /* a text token or string literal: s */
    JN_INT,
    JN_FLOAT,
    JN_IDENT,
    JN_ARRAY,       /* list */
    JN_TUPLE,       /* list */
    JN_OBJECT,      /* list of key, value pairs (list2 holds the values) */
    JN_BINARY,      /* op, a, b */
    JN_UNARY,       /* op, a */
    JN_MEMBER,      /* a . b (flag: computed) */
    JN_SLICE,       /* a:b:c, each may be NULL */
    JN_CALL,        /* a (list) */
    JN_FILTER,      /* a | b (b: IDENT or CALL) */
    JN_TEST,        /* a is [not] s (flag: negate) */
    JN_TERNARY,     /* b if a else c */
    JN_SELECT,      /* a if b */
    JN_KWARG,       /* s = a */
    JN_SPREAD,      /* *a */
    JN_KWSPREAD,    /* **a */
    JN_IF,          /* a: test, list: body, list2: alternate */
    JN_FOR,         /* a: loop variable, b: iterable, list: body, list2: else */
    JN_SET,         /* a: assignee, b: value or NULL, list: body */
    JN_MACRO,       /* s: name, list: params, list2: body */
    JN_CALLBLOCK,   /* a: the CALL, list: caller params, list2: body */
    JN_FILTERBLOCK, /* b: filter, list: body */
    JN_BREAK,
    JN_CONTINUE,
    JN_COMMENT
} jnode_type;

enum jop {
    JO_NONE,
    JO_ADD,
    JO_SUB,
    JO_CAT,
    JO_MUL,
    JO_DIV,
    JO_FLOORDIV,
    JO_MOD,
    JO_POW,
    JO_LT,
    JO_GT,
    JO_LE,
    JO_GE,
    JO_EQ,
    JO_NE,
    JO_AND,
    JO_OR,
    JO_NOT,
    JO_IN,
    JO_NOTIN,
    JO_NEG,
    JO_POS
};

typedef struct jnode jnode;
struct jnode {
    uint8_t type;    /* jnode_type */
    uint8_t flag;    /* MEMBER: computed; TEST: negate */
    uint8_t op;      /* enum jop */
    uint8_t special; /* MACRO/CALLBLOCK: bit 0 caller, 1 kwargs, 2 varargs read; FOR: reads `loop` */
    uint32_t line;
    jnode *a, *b, *c;
    jnode **list, **list2;
    size_t n, n2;
    const char *s; /* NUL-terminated (arena) */
    size_t sn;
    double num;
};

fp4_status jinja_parse(jarena *a, const jtok *toks, size_t n, unsigned max_depth, jnode **prog,
                       fp4_error *err);

/* ---- values (jinja_value.c) ---- */
typedef enum jv_type {
    JV_UNDEF,
    JV_NULL,
    JV_BOOL,
    JV_INT, /* a double with no fraction (the reference's IntegerValue) */
    JV_FLOAT,
    JV_STR,
    JV_ARRAY, /* tuple: flag set */
    JV_OBJECT,
    JV_NS,     /* namespace(): attribute container without mapping behaviour */
    JV_KWARGS, /* the keyword arguments of a call (an object) */
    JV_FUNC
} jv_type;

typedef struct jarr jarr;
typedef struct jobj jobj;
typedef struct jfunc jfunc;
typedef struct jv {
    uint8_t t;
    uint8_t tuple;
    size_t n; /* string bytes */
    union {
        double d;
        int b;
        const char *s;
        jarr *a;
        jobj *o;
        jfunc *f;
    } u;
} jv;

struct jarr {
    size_t n, cap;
    jv *v;
};
struct jobj {
    size_t n, cap;
    const char **k;
    size_t *kn;
    jv *v;
};

typedef struct jinterp jinterp;
/* a built-in function: args (positional, then one JV_KWARGS when there are keyword arguments) */
typedef int (*jbuiltin)(jinterp *I, const jnode *at, const jv *self, const jv *args, size_t n, jv *out);
typedef struct jenv jenv;
struct jfunc {
    jbuiltin fn;
    jv self;            /* bound receiver of a method */
    const jnode *macro; /* a macro or call block */
    jenv *env;          /* where it was defined */
    int is_caller;      /* a call block's caller() */
};

struct jenv {
    jenv *parent;
    jobj vars;
    int call_block; /* the scope a {% call %} passes to the macro it calls */
};

static inline jv jv_undef(void) {
    jv v = {0};
    v.t = JV_UNDEF;
    return v;
}
static inline jv jv_null(void) {
    jv v = {0};
    v.t = JV_NULL;
    return v;
}
static inline jv jv_bool(int b) {
    jv v = {0};
    v.t = JV_BOOL;
    v.u.b = !!b;
    return v;
}
static inline jv jv_int(double d) {
    jv v = {0};
    v.t = JV_INT;
    v.u.d = d;
    return v;
}
static inline jv jv_float(double d) {
    jv v = {0};
    v.t = JV_FLOAT;
    v.u.d = d;
    return v;
}
static inline jv jv_str(const char *s, size_t n) {
    jv v = {0};
    v.t = JV_STR;
    v.u.s = s;
    v.n = n;
    return v;
}
static inline int jv_isnum(const jv *v) {
    return v->t == JV_INT || v->t == JV_FLOAT;
}
static inline int jv_isarr(const jv *v) {
    return v->t == JV_ARRAY;
}
static inline int jv_isobj(const jv *v) {
    return v->t == JV_OBJECT || v->t == JV_KWARGS;
} /* ObjectValue */
static inline int jv_isattr(const jv *v) {
    return jv_isobj(v) || v->t == JV_NS;
}

jv jv_arr_new(jarena *a, size_t cap, int tuple);
int jarr_push(jarena *a, jarr *r, jv v);
jv jv_obj_new(jarena *a, jv_type t);
jv *jobj_get(const jobj *o, const char *k, size_t kn);
int jobj_set(jarena *a, jobj *o, const char *k, size_t kn, jv v);    /* keeps the position of a key */
int jobj_append(jarena *a, jobj *o, const char *k, size_t kn, jv v); /* a key known to be new */
int jobj_del(jobj *o, const char *k, size_t kn);

const char *jv_type_name(const jv *v); /* the reference's type names, for its messages */
int jv_truthy(const jv *v);
/* String(v.value) of the reference (concatenation, join); fails only for a function */
int jv_raw_str(jarena *a, const jv *v, jbuf *b);
/* v.toString() (what {{ }} prints) */
int jv_to_string(jarena *a, const jv *v, jbuf *b);
/* toJSON: indent < 0 none; seps NULL for the defaults; undef_null: undefined -> null */
typedef struct jjson_opts {
    int indent;
    int ensure_ascii, sort_keys, undef_null;
    const char *item_sep, *key_sep;
} jjson_opts;
int jv_to_json(const jv *v, const jjson_opts *o, int depth, jbuf *b, const char **why);
void js_number(double d, jbuf *b);                    /* JavaScript's Number.prototype.toString() */
int jv_loose_eq(jarena *a, const jv *x, const jv *y); /* JavaScript == on the reference's values */
int jv_strict_eq(const jv *x, const jv *y);           /* === */
double js_to_number(const char *s, size_t n);
double js_parse_int(const char *s, size_t n);   /* parseInt(s, 10), NaN when none */
double js_parse_float(const char *s, size_t n); /* parseFloat(s) */
/* JSON text (jansson) to values with JavaScript's object key order */
int jv_from_json(jarena *a, const void *json, jv *out, unsigned depth);

/* UTF-8 helpers: the reference's string operations are on UTF-16 code units */
size_t ju_u16_len(const char *s, size_t n);
int ju_is_space(const char *s, size_t n, size_t i, size_t *len); /* JS \s at byte i */
int ju_next(const char *s, size_t n, size_t i, uint32_t *cp);    /* bytes of the code point at i */

/* ---- the interpreter (jinja_eval.c, jinja_builtins.c) ---- */
enum { J_OK = 0, J_ERR = 1, J_BREAK = 2, J_CONTINUE = 3 };
#define JINJA_MAX_EVAL_DEPTH 1500u /* nested evaluations: bounds the C stack (about 200 bytes each) */

struct jinterp {
    jarena *a;
    jbuf *out; /* where text goes now */
    fp4_error *err;
    uint64_t steps, max_steps;
    unsigned depth, max_depth;
    unsigned edepth; /* nested evaluations now (JINJA_MAX_EVAL_DEPTH) */
    int64_t now;     /* strftime_now: Unix seconds, or INT64_MIN for the real clock */
    int raised;      /* the error is the template's own raise_exception */
};

int jerr(jinterp *I, const jnode *at, const char *rule, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int jeval(jinterp *I, const jnode *n, jenv *e, jv *out);
int jcall_value(jinterp *I, const jnode *at, const jv *fn, const jv *args, size_t n, jenv *callsite, jv *out);
int jeval_args(jinterp *I, jnode **args, size_t n, jenv *e, jarr *pos, jobj *kw, int *has_kw);
jv jmethod(jinterp *I, const jv *self, const char *name, size_t n); /* a built-in member, or undefined */
int japply_filter(jinterp *I, const jv *operand, const jnode *filter, jenv *e, jv *out);
int japply_test(jinterp *I, const jnode *at, const char *name, const jv *x, const jv *arg, int *res);
int jtest_exists(const char *name);
void jglobals(jinterp *I, jenv *g);
jenv *jenv_new(jinterp *I, jenv *parent);
int jinja_run(jinterp *I, const jnode *prog, jenv *g); /* renders the program into I->out */
jv jv_keys(jarena *a, const jobj *o);                  /* the keys as an array (NULL array: out of memory) */
int jstr_new(jinterp *I, const jnode *at, jbuf *b, jv *out); /* a jbuf's bytes as a string value */

#endif
