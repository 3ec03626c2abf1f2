/* jinja_lex.c — the template's tokens, as the reference's lexer makes them: first its
 * preprocessing (one trailing newline dropped, lstrip_blocks, trim_blocks, transformers'
 * {% generation %} tags removed), then the scan, with {%- -%} {{- -}} {#- -#} whitespace control
 * and its unary-sign rule for numbers. Every byte keeps the line it came from, for messages. */
#include "jinja_impl.h"
#include <stdlib.h>

typedef struct pbuf {
    char *s;
    uint32_t *ln;
    size_t n;
} pbuf;

static void pb_put(pbuf *o, const char *s, const uint32_t *ln, size_t n) {
    memcpy(o->s + o->n, s, n);
    memcpy(o->ln + o->n, ln, n * sizeof *ln);
    o->n += n;
}

static int line_start(const char *s, size_t i) {
    if (i == 0) return 1;
    if (s[i - 1] == '\n' || s[i - 1] == '\r') return 1;
    /* U+2028, U+2029 end a line for a multiline ^ too */
    return i >= 3 && (uint8_t)s[i - 3] == 0xE2 && (uint8_t)s[i - 2] == 0x80 &&
           ((uint8_t)s[i - 1] == 0xA8 || (uint8_t)s[i - 1] == 0xA9);
}

/* template.replace(/^[ \t]*({[#%-])/gm, "$1") */
static void lstrip_blocks(const pbuf *in, pbuf *o) {
    size_t i = 0;
    while (i < in->n) {
        if (line_start(in->s, i)) {
            size_t j = i;
            while (j < in->n && (in->s[j] == ' ' || in->s[j] == '\t'))
                j++;
            if (j + 1 < in->n && in->s[j] == '{' && strchr("#%-", in->s[j + 1]) && in->s[j + 1]) {
                pb_put(o, in->s + j, in->ln + j, 2);
                i = j + 2;
                continue;
            }
        }
        pb_put(o, in->s + i, in->ln + i, 1);
        i++;
    }
}

/* template.replace(/([#%-]})\n/g, "$1") */
static void trim_blocks(const pbuf *in, pbuf *o) {
    size_t i = 0;
    while (i < in->n) {
        if (i + 2 < in->n && in->s[i] && strchr("#%-", in->s[i]) && in->s[i + 1] == '}' &&
            in->s[i + 2] == '\n') {
            pb_put(o, in->s + i, in->ln + i, 2);
            i += 3;
            continue;
        }
        pb_put(o, in->s + i, in->ln + i, 1);
        i++;
    }
}

static size_t skip_ws(const char *s, size_t n, size_t i) {
    size_t l;
    while (i < n && ju_is_space(s, n, i, &l))
        i += l;
    return i;
}

/* length of the whitespace character that ends at byte i (exclusive), 0 when none */
static size_t ws_before(const char *s, size_t lo, size_t i) {
    for (size_t back = 1; back <= 3 && back <= i - lo; back++) {
        size_t l;
        if (ju_is_space(s, i, i - back, &l) && l == back) return back;
    }
    return 0;
}

/* the match of /{%(-?)\s*(?:end)?generation\s*(-?)%}(\s*)/ at i: its end, 0 when none */
static size_t gen_match(const char *s, size_t n, size_t i, int *lstrip, int *rstrip, size_t *after) {
    if (i + 2 > n || s[i] != '{' || s[i + 1] != '%') return 0;
    size_t j = i + 2;
    *lstrip = j < n && s[j] == '-';
    j = skip_ws(s, n, j + (size_t)*lstrip);
    if (j + 3 <= n && !memcmp(s + j, "end", 3)) j += 3;
    if (j + 10 > n || memcmp(s + j, "generation", 10)) return 0;
    j = skip_ws(s, n, j + 10);
    *rstrip = j < n && s[j] == '-';
    j += (size_t)*rstrip;
    if (j + 2 > n || s[j] != '%' || s[j + 1] != '}') return 0;
    j += 2;
    *after = j;
    return skip_ws(s, n, j);
}

static void generation_tags(const pbuf *in, pbuf *o) {
    size_t last = 0;
    for (size_t i = 0; i < in->n;) {
        int ls, rs;
        size_t after, end = gen_match(in->s, in->n, i, &ls, &rs, &after);
        if (!end) {
            i++;
            continue;
        }
        size_t cut = i, w;
        while (ls && cut > last && (w = ws_before(in->s, last, cut)))
            cut -= w;
        pb_put(o, in->s + last, in->ln + last, cut - last);
        if (!rs) pb_put(o, in->s + after, in->ln + after, end - after);
        last = i = end;
    }
    pb_put(o, in->s + last, in->ln + last, in->n - last);
}

typedef struct lexer {
    jarena *a;
    const char *s;
    const uint32_t *ln;
    size_t n, pos;
    jtok *t;
    size_t nt, cap;
    fp4_error *err;
} lexer;

static fp4_status lex_fail(lexer *L, const char *fmt, const char *arg) {
    uint32_t line = L->pos < L->n ? L->ln[L->pos] : (L->n ? L->ln[L->n - 1] : 1);
    return fp4_fail(L->err, FP4_ERR_FORMAT, NULL, NULL, "jinja.syntax", "line %u: %s%s", line, fmt,
                    arg ? arg : "");
}

static int push(lexer *L, jtok_type type, const char *s, size_t n, uint32_t line) {
    if (L->nt == L->cap) {
        size_t cap = L->cap ? 2 * L->cap : 256;
        jtok *t = ja_alloc(L->a, cap * sizeof *t);
        if (!t) return -1;
        if (L->nt) memcpy(t, L->t, L->nt * sizeof *t);
        L->t = t, L->cap = cap;
    }
    char *v = ja_strdup(L->a, s, n);
    if (!v) return -1;
    L->t[L->nt++] = (jtok){type, line, v, n};
    return 0;
}

static jtok_type last_type(const lexer *L) {
    return L->nt ? L->t[L->nt - 1].type : (jtok_type)-1;
}

static void strip_trailing(lexer *L) {
    if (!L->nt || L->t[L->nt - 1].type != JT_TEXT) return;
    jtok *t = &L->t[L->nt - 1];
    size_t w;
    while (t->n && (w = ws_before(t->s, 0, t->n)))
        t->n -= w;
    ((char *)t->s)[t->n] = 0;
    if (!t->n) L->nt--;
}

static int is_digit(int c) {
    return c >= '0' && c <= '9';
}
static int is_word(int c) {
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

/* consumeWhile: the input may not end while the predicate holds */
static int consume_while(lexer *L, int (*pred)(int)) {
    while (L->pos < L->n && pred((uint8_t)L->s[L->pos]))
        if (++L->pos >= L->n) return -1;
    return 0;
}

static const struct {
    const char *seq;
    jtok_type type;
} RULES[] = {
    {"{%", JT_OPEN_STMT}, {"%}", JT_CLOSE_STMT}, {"{{", JT_OPEN_EXPR}, {"}}", JT_CLOSE_EXPR},
    {"(", JT_LPAREN},     {")", JT_RPAREN},      {"{", JT_LBRACE},     {"}", JT_RBRACE},
    {"[", JT_LBRACKET},   {"]", JT_RBRACKET},    {",", JT_COMMA},      {".", JT_DOT},
    {":", JT_COLON},      {"|", JT_PIPE},        {"<=", JT_CMP},       {">=", JT_CMP},
    {"==", JT_CMP},       {"!=", JT_CMP},        {"<", JT_CMP},        {">", JT_CMP},
    {"+", JT_ADD},        {"-", JT_ADD},         {"~", JT_ADD},        {"**", JT_POW},
    {"*", JT_MUL},        {"//", JT_MUL},        {"/", JT_MUL},        {"%", JT_MUL},
    {"=", JT_EQUALS},
};

static fp4_status lex_string(lexer *L, char q) {
    uint32_t line = L->ln[L->pos];
    L->pos++;
    jbuf b = {0};
    for (;;) {
        if (L->pos >= L->n) {
            free(b.p);
            return lex_fail(L, "Unexpected end of input", NULL);
        }
        char c = L->s[L->pos++];
        if (c == q) break;
        if (c != '\\') {
            jb_putc(&b, c);
            continue;
        }
        if (L->pos >= L->n) {
            free(b.p);
            return lex_fail(L, "Unexpected end of input", NULL);
        }
        char e = L->s[L->pos++];
        static const char from[] = "ntrbfv'\"\\", to[] = "\n\t\r\b\f\v'\"\\";
        const char *k = e ? strchr(from, e) : NULL;
        if (e == 'x' || e == 'u') {
            size_t hl = e == 'x' ? 2 : 4;
            unsigned v = 0;
            for (size_t i = 0; i < hl; i++) {
                char h = L->pos + i < L->n ? L->s[L->pos + i] : 0;
                int d = is_digit(h)              ? h - '0'
                        : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                        : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                                 : -1;
                if (d < 0) {
                    free(b.p);
                    return lex_fail(L, "Invalid hexadecimal escape sequence", NULL);
                }
                v = v * 16 + (unsigned)d;
            }
            L->pos += hl;
            if (v >= 0xD800 && v < 0xE000) v = 0xFFFD; /* a lone surrogate is written as U+FFFD */
            char u[4];
            size_t m = v < 0x80 ? 1 : v < 0x800 ? 2 : 3;
            if (m == 1)
                u[0] = (char)v;
            else if (m == 2)
                u[0] = (char)(0xC0 | v >> 6), u[1] = (char)(0x80 | (v & 63));
            else
                u[0] = (char)(0xE0 | v >> 12), u[1] = (char)(0x80 | ((v >> 6) & 63)),
                u[2] = (char)(0x80 | (v & 63));
            jb_put(&b, u, m);
        } else if (k) {
            jb_putc(&b, to[k - from]);
        } else {
            char m[2] = {e, 0};
            free(b.p);
            return lex_fail(L, "Unexpected escaped character: ", m);
        }
    }
    int bad = b.over || push(L, JT_STR, b.p ? b.p : "", b.n, line);
    free(b.p);
    return bad ? fp4_fail(L->err, FP4_ERR_NOMEM, NULL, NULL, "jinja.memory", "out of memory") : FP4_OK;
}

static fp4_status lex_number(lexer *L, const char *sign, int allow_frac) {
    uint32_t line = L->ln[L->pos < L->n ? L->pos : L->n - 1];
    size_t st = L->pos;
    if (consume_while(L, is_digit)) return lex_fail(L, "Unexpected end of input", NULL);
    size_t end = L->pos;
    if (end > st && allow_frac && L->pos + 1 < L->n && L->s[L->pos] == '.' &&
        is_digit((uint8_t)L->s[L->pos + 1])) {
        L->pos++;
        if (consume_while(L, is_digit)) return lex_fail(L, "Unexpected end of input", NULL);
        end = L->pos;
    }
    char tmp[512];
    size_t sl = strlen(sign), dl = end - st;
    if (dl + sl >= sizeof tmp) return lex_fail(L, "number literal too long", NULL);
    memcpy(tmp, sign, sl);
    memcpy(tmp + sl, L->s + st, dl);
    jtok_type ty = dl ? JT_NUM : JT_UNARY;
    return push(L, ty, tmp, sl + dl, line)
               ? fp4_fail(L->err, FP4_ERR_NOMEM, NULL, NULL, "jinja.memory", "out of memory")
               : FP4_OK;
}

static int is_ws_byte(lexer *L) {
    size_t l;
    return L->pos < L->n && ju_is_space(L->s, L->n, L->pos, &l);
}

static fp4_status lex_scan(lexer *L) {
    size_t curly = 0;
    while (L->pos < L->n) {
        jtok_type lt = last_type(L);
        const char *s = L->s;
        if (lt == (jtok_type)-1 || lt == JT_CLOSE_STMT || lt == JT_CLOSE_EXPR || lt == JT_COMMENT) {
            size_t end = L->pos;
            while (end < L->n) {
                const char *p = memchr(s + end, '{', L->n - end);
                if (!p) {
                    end = L->n;
                    break;
                }
                end = (size_t)(p - s);
                char nx = end + 1 < L->n ? s[end + 1] : 0;
                if (nx == '%' || nx == '{' || nx == '#') break;
                end++;
            }
            if (end > L->pos) {
                if (push(L, JT_TEXT, s + L->pos, end - L->pos, L->ln[L->pos])) goto oom;
                L->pos = end;
                continue;
            }
        }
        uint32_t line = L->ln[L->pos];
        if (s[L->pos] == '{') {
            char nx = L->pos + 1 < L->n ? s[L->pos + 1] : 0;
            if (nx == '#') {
                L->pos += 2;
                int before = L->pos < L->n && s[L->pos] == '-';
                if (before) L->pos++;
                const char *e = NULL;
                for (size_t i = L->pos; i + 1 < L->n && !e; i++)
                    if (s[i] == '#' && s[i + 1] == '}') e = s + i;
                if (!e) return lex_fail(L, "Missing end of comment tag", NULL);
                size_t cl = (size_t)(e - (s + L->pos));
                int after = cl && s[L->pos + cl - 1] == '-';
                if (before) strip_trailing(L);
                if (push(L, JT_COMMENT, s + L->pos, cl - (size_t)after, line)) goto oom;
                L->pos += cl + 2;
                if (after)
                    while (is_ws_byte(L)) {
                        size_t l;
                        ju_is_space(s, L->n, L->pos, &l);
                        L->pos += l;
                    }
                continue;
            }
            if (L->pos + 2 < L->n && s[L->pos + 2] == '-' && (nx == '%' || nx == '{')) {
                strip_trailing(L);
                if (push(L, nx == '%' ? JT_OPEN_STMT : JT_OPEN_EXPR, nx == '%' ? "{%" : "{{", 2, line))
                    goto oom;
                if (nx == '{') curly = 0;
                L->pos += 3;
                continue;
            }
        }
        while (is_ws_byte(L)) {
            size_t l;
            ju_is_space(s, L->n, L->pos, &l);
            L->pos += l;
            if (L->pos >= L->n) return lex_fail(L, "Unexpected end of input", NULL);
        }
        char c = s[L->pos];
        line = L->ln[L->pos];
        if (c == '-' && L->pos + 2 < L->n && s[L->pos + 2] == '}' &&
            (s[L->pos + 1] == '%' || s[L->pos + 1] == '}')) {
            if (push(L, s[L->pos + 1] == '%' ? JT_CLOSE_STMT : JT_CLOSE_EXPR,
                     s[L->pos + 1] == '%' ? "%}" : "}}", 2, line))
                goto oom;
            L->pos += 3;
            while (is_ws_byte(L)) {
                size_t l;
                ju_is_space(s, L->n, L->pos, &l);
                L->pos += l;
            }
            continue;
        }
        if (c == '-' || c == '+') {
            if (lt == JT_TEXT || lt == (jtok_type)-1) {
                char m[2] = {c, 0};
                return lex_fail(L, "Unexpected character: ", m);
            }
            if (lt != JT_IDENT && lt != JT_NUM && lt != JT_STR && lt != JT_RPAREN && lt != JT_RBRACKET) {
                char sign[2] = {c, 0};
                L->pos++;
                fp4_status st = lex_number(L, sign, 1);
                if (st) return st;
                continue;
            }
        }
        int matched = 0;
        for (size_t r = 0; r < sizeof RULES / sizeof RULES[0] && !matched; r++) {
            size_t sl = strlen(RULES[r].seq);
            if (RULES[r].type == JT_CLOSE_EXPR && curly > 0) continue;
            if (L->pos + sl <= L->n && !memcmp(s + L->pos, RULES[r].seq, sl)) {
                if (push(L, RULES[r].type, RULES[r].seq, sl, line)) goto oom;
                if (RULES[r].type == JT_OPEN_EXPR)
                    curly = 0;
                else if (RULES[r].type == JT_LBRACE)
                    curly++;
                else if (RULES[r].type == JT_RBRACE)
                    curly--;
                L->pos += sl;
                matched = 1;
            }
        }
        if (matched) continue;
        if (c == '\'' || c == '"') {
            fp4_status st = lex_string(L, c);
            if (st) return st;
            continue;
        }
        if (is_digit((uint8_t)c)) {
            fp4_status st = lex_number(L, "", lt != JT_DOT);
            if (st) return st;
            continue;
        }
        if (is_word((uint8_t)c)) {
            size_t st = L->pos;
            if (consume_while(L, is_word)) return lex_fail(L, "Unexpected end of input", NULL);
            if (push(L, JT_IDENT, s + st, L->pos - st, line)) goto oom;
            continue;
        }
        char m[8] = {0};
        size_t cl = (size_t)ju_next(s, L->n, L->pos, &(uint32_t){0});
        memcpy(m, s + L->pos, cl < 7 ? cl : 7);
        return lex_fail(L, "Unexpected character: ", m);
    }
    return FP4_OK;
oom:
    return fp4_fail(L->err, FP4_ERR_NOMEM, NULL, NULL, "jinja.memory", "out of memory");
}

fp4_status jinja_lex(jarena *a, const char *text, size_t len, jtok **toks, size_t *n, fp4_error *err) {
    pbuf p[2];
    for (int i = 0; i < 2; i++) {
        p[i].s = malloc(len + 1);
        p[i].ln = malloc((len + 1) * sizeof(uint32_t));
        p[i].n = 0;
    }
    fp4_status st = FP4_OK;
    if (!p[0].s || !p[0].ln || !p[1].s || !p[1].ln) {
        st = fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "jinja.memory", "out of memory");
        goto done;
    }
    uint32_t line = 1;
    for (size_t i = 0; i < len; i++) {
        p[0].s[i] = text[i];
        p[0].ln[i] = line;
        if (text[i] == '\n') line++;
    }
    p[0].n = len && text[len - 1] == '\n' ? len - 1 : len;
    lstrip_blocks(&p[0], &p[1]);
    p[0].n = 0;
    trim_blocks(&p[1], &p[0]);
    p[1].n = 0;
    generation_tags(&p[0], &p[1]);
    lexer L = {a, p[1].s, p[1].ln, p[1].n, 0, NULL, 0, 0, err};
    st = lex_scan(&L);
    *toks = L.t;
    *n = L.nt;
done:
    for (int i = 0; i < 2; i++)
        free(p[i].s), free(p[i].ln);
    return st;
}
