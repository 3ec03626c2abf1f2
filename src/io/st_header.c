/* st_header.c — the safetensors JSON header parsed in one pass, without a JSON tree (issue 12
 * item 11). A tree costs a few hundred bytes and several allocations per tensor (1.15 GB and
 * seconds for 1 M tensors); this parser writes each entry straight into its fp4_st_tensor and
 * each string into one arena: memory is the tensor array (72 bytes a tensor) plus the names.
 *
 * Grammar accepted (RFC 8259 JSON, restricted to what a safetensors header is): the root object;
 * members "__metadata__" (an object of string values without NUL) or a tensor name (an object with
 * exactly dtype: string, shape: array of non-negative integers, data_offsets: array of two
 * non-negative integers). Strings: escapes \" \\ \/ \b \f \n \r \t \uXXXX (surrogates paired;
 * \u0000 allowed in values, refused in keys), no raw control bytes. Numbers: the JSON grammar;
 * an integer outside int64 is st.number. Duplicate keys are refused at every level (st.dup).
 * The rules and their order are those of the jansson reader this replaces: every syntax or
 * duplicate error first, in text order, then the first entry that breaks a rule. The caller has
 * checked the framing (length, UTF-8, BOM, nesting depth, counts: st_frame). */
#include "io/st_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct hp {
    const uint8_t *p, *end, *base;
    const char *file;
    fp4_error *err;
    char *arena;               /* decoded strings, NUL-terminated; offsets until the end */
    size_t a_len, a_cap;
    fp4_st_hdr *out;
    size_t t_cap, m_cap;
    size_t *meta_off;          /* arena offsets of key0, value0, ... */
    fp4_error deferred;        /* first entry-rule error, reported after a clean parse */
    bool have_deferred;
} hp;

enum { V_STR, V_INT, V_REAL, V_BOOL, V_NULL, V_ARRAY, V_OBJECT };

/* a parsed value inside an entry: scalars, or an array of scalars (depth is bounded by st_frame) */
typedef struct val {
    int type;
    int64_t i;                 /* V_INT */
    size_t s_off, s_len;       /* V_STR: in the arena */
    size_t n;                  /* V_ARRAY: element count */
    int64_t el[FP4_MAX_DIMS + 1];
    bool el_ok;                /* every element seen so far is a non-negative integer */
} val;

static fp4_status syntax(hp *h, const char *what) {
    return fp4_fail(h->err, FP4_ERR_FORMAT, h->file, NULL, "st.json", "header JSON at byte %ld: %s",
                    (long)(h->p - h->base), what);
}

static void ws(hp *h) {
    while (h->p < h->end && (*h->p == ' ' || *h->p == '\t' || *h->p == '\n' || *h->p == '\r')) h->p++;
}

static bool eat(hp *h, char c) {
    ws(h);
    if (h->p < h->end && *h->p == (uint8_t)c) return h->p++, true;
    return false;
}

static fp4_status arena_put(hp *h, const void *s, size_t n) {
    if (h->a_len + n + 1 > h->a_cap) {
        size_t cap = h->a_cap ? h->a_cap : 4096;
        while (cap < h->a_len + n + 1) cap *= 2;
        char *a = realloc(h->arena, cap);
        if (!a) return fp4_fail(h->err, FP4_ERR_NOMEM, h->file, NULL, "st.nomem", "out of memory");
        h->arena = a;
        h->a_cap = cap;
    }
    memcpy(h->arena + h->a_len, s, n);
    h->a_len += n;
    return FP4_OK;
}

static int hexv(uint8_t c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static bool hex4(hp *h, uint32_t *u) {
    if (h->end - h->p < 4) return false;
    *u = 0;
    for (int i = 0; i < 4; i++) {
        int v = hexv(h->p[i]);
        if (v < 0) return false;
        *u = *u << 4 | (uint32_t)v;
    }
    h->p += 4;
    return true;
}

static fp4_status put_cp(hp *h, uint32_t cp) {
    uint8_t b[4];
    size_t n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    static const uint8_t lead[5] = {0, 0x00, 0xC0, 0xE0, 0xF0};
    for (size_t i = n - 1; i > 0; i--, cp >>= 6) b[i] = (uint8_t)(0x80 | (cp & 63));
    b[0] = (uint8_t)(lead[n] | cp);
    return arena_put(h, b, n);
}

/* A string at h->p (after whitespace), decoded into the arena with a terminating NUL.
 * *has_nul: it holds \u0000. */
static fp4_status string(hp *h, size_t *off, size_t *len, bool *has_nul) {
    ws(h);
    if (h->p >= h->end || *h->p != '"') return syntax(h, "string expected");
    h->p++;
    *off = h->a_len;
    *has_nul = false;
    fp4_status s = FP4_OK;
    while (!s) {
        const uint8_t *run = h->p;
        while (h->p < h->end && *h->p != '"' && *h->p != '\\' && *h->p >= 0x20) h->p++;
        if ((s = arena_put(h, run, (size_t)(h->p - run)))) return s;
        if (h->p >= h->end) return syntax(h, "unterminated string");
        uint8_t c = *h->p++;
        if (c == '"') break;
        if (c < 0x20) return h->p--, syntax(h, "control character in a string");
        if (h->p >= h->end) return syntax(h, "unterminated escape");
        uint8_t e = *h->p++;
        static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
        const char *k = e ? strchr(from, e) : NULL;
        if (k) {
            char ch = to[k - from];
            s = arena_put(h, &ch, 1);
            continue;
        }
        uint32_t u, lo;
        if (e != 'u' || !hex4(h, &u)) return syntax(h, "invalid escape");
        if (u >= 0xDC00 && u <= 0xDFFF) return syntax(h, "invalid Unicode escape (lone low surrogate)");
        if (u >= 0xD800 && u <= 0xDBFF) {
            if (h->end - h->p < 2 || h->p[0] != '\\' || h->p[1] != 'u') return syntax(h,
                                                                                      "unpaired surrogate");
            h->p += 2;
            if (!hex4(h, &lo) || lo < 0xDC00 || lo > 0xDFFF) return syntax(h, "invalid surrogate pair");
            u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
        }
        if (u == 0) *has_nul = true;
        s = put_cp(h, u);
    }
    *len = h->a_len - *off;
    return s ? s : arena_put(h, "", 1);
}

/* A number at h->p: V_INT (int64) or V_REAL; st.number when it does not fit. */
static fp4_status number(hp *h, val *v) {
    const uint8_t *s = h->p, *q = h->p;
    if (q < h->end && *q == '-') q++;
    if (q >= h->end || *q < '0' || *q > '9') return syntax(h, "invalid token");
    if (*q == '0') q++;
    else
        while (q < h->end && *q >= '0' && *q <= '9') q++;
    bool real = false;
    if (q < h->end && *q == '.') {
        real = true, q++;
        if (q >= h->end || *q < '0' || *q > '9') return h->p = q, syntax(h, "invalid number");
        while (q < h->end && *q >= '0' && *q <= '9') q++;
    }
    if (q < h->end && (*q == 'e' || *q == 'E')) {
        real = true, q++;
        if (q < h->end && (*q == '+' || *q == '-')) q++;
        if (q >= h->end || *q < '0' || *q > '9') return h->p = q, syntax(h, "invalid number");
        while (q < h->end && *q >= '0' && *q <= '9') q++;
    }
    h->p = q;
    char buf[64];
    size_t n = (size_t)(q - s);
    if (!real) {
        int64_t x = 0;
        bool neg = *s == '-';
        for (const uint8_t *d = s + neg; d < q; d++)
            if (__builtin_mul_overflow(x, 10, &x) || __builtin_add_overflow(x, neg ? '0' - *d : *d - '0', &x))
                return fp4_fail(h->err, FP4_ERR_FORMAT, h->file, NULL, "st.number",
                                "header JSON at byte %ld: too big integer", (long)(s - h->base));
        v->type = V_INT, v->i = x;
        return FP4_OK;
    }
    if (n >= sizeof buf) n = sizeof buf - 1; /* only the magnitude matters: a long mantissa stays finite */
    memcpy(buf, s, n);
    buf[n] = 0;
    if (isinf(strtod(buf, NULL)))
        return fp4_fail(h->err, FP4_ERR_FORMAT, h->file, NULL, "st.number",
                        "header JSON at byte %ld: real number overflow",
                        (long)(s - h->base));
    v->type = V_REAL;
    return FP4_OK;
}

static fp4_status literal(hp *h, const char *word, int type, val *v) {
    size_t n = strlen(word);
    if ((size_t)(h->end - h->p) < n || memcmp(h->p, word, n)) return syntax(h, "invalid token");
    h->p += n;
    v->type = type;
    return FP4_OK;
}

static fp4_status value(hp *h, val *v, int depth);

static fp4_status array(hp *h, val *v, int depth) {
    h->p++; /* '[' */
    v->type = V_ARRAY, v->n = 0, v->el_ok = true;
    if (eat(h, ']')) return FP4_OK;
    for (;;) {
        val e;
        fp4_status s = value(h, &e, depth + 1);
        if (s) return s;
        if (v->n <= FP4_MAX_DIMS) v->el[v->n] = e.i;
        v->el_ok &= e.type == V_INT && e.i >= 0;
        v->n++;
        if (eat(h, ']')) return FP4_OK;
        if (!eat(h, ',')) return syntax(h, "',' or ']' expected");
    }
}

static fp4_status key(hp *h, size_t *off, size_t *len);

/* An object where a field value is expected: st_frame has refused any with members
 * (st.nested_object), so this is an empty one or a header st_frame did not see; its strings are
 * dropped from the arena. */
static fp4_status object(hp *h, val *v, int depth) {
    size_t mark = h->a_len;
    h->p++; /* '{' */
    v->type = V_OBJECT;
    if (eat(h, '}')) return FP4_OK;
    for (;;) {
        size_t ko, kl;
        val e;
        fp4_status s = key(h, &ko, &kl);
        if (!s) s = value(h, &e, depth + 1);
        if (s) return s;
        h->a_len = mark;
        if (eat(h, '}')) return FP4_OK;
        if (!eat(h, ',')) return syntax(h, "',' or '}' expected");
    }
}

static fp4_status value(hp *h, val *v, int depth) {
    v->i = 0;
    ws(h);
    if (h->p >= h->end) return syntax(h, "unexpected end of input");
    if (depth > 8) return fp4_fail(h->err, FP4_ERR_LIMIT, h->file, NULL, "st.depth", "header nests too deep");
    bool nul;
    switch (*h->p) {
    case '"': v->type = V_STR; return string(h, &v->s_off, &v->s_len, &nul);
    case '[': return array(h, v, depth);
    case '{': return object(h, v, depth);
    case 't': return literal(h, "true", V_BOOL, v);
    case 'f': return literal(h, "false", V_BOOL, v);
    case 'n': return literal(h, "null", V_NULL, v);
    default: return number(h, v);
    }
}

/* A member key; NUL inside a key is refused as jansson does (st.name). */
static fp4_status key(hp *h, size_t *off, size_t *len) {
    bool nul;
    fp4_status s = string(h, off, len, &nul);
    if (s) return s;
    if (nul) return fp4_fail(h->err, FP4_ERR_FORMAT, h->file, NULL, "st.name", "NUL byte in an object key");
    if (!eat(h, ':')) return syntax(h, "':' expected");
    return FP4_OK;
}

static fp4_status dup(hp *h, const char *what) {
    return fp4_fail(h->err, FP4_ERR_DUPLICATE, h->file, NULL, "st.dup", "duplicate object key %s", what);
}

/* First rule an entry breaks, kept until the whole header has parsed (jansson's order). */
#define DEFER(h, code, tensor, rule, ...)                                                            \
    do {                                                                                             \
        if (!(h)->have_deferred) {                                                                   \
            fp4_fail(&(h)->deferred, (code), (h)->file, (tensor), (rule), __VA_ARGS__);              \
            (h)->have_deferred = true;                                                               \
        }                                                                                            \
        return FP4_OK;                                                                               \
    } while (0)

/* the rules of one entry, in the old reader's order */
static fp4_status entry_rules(hp *h, fp4_st_tensor *t, const char *name, size_t name_len, const val *f,
                              int n_other,
                              int is_object) {
    if (name_len == 0) DEFER(h, FP4_ERR_FORMAT, NULL, "st.name", "empty tensor name");
    if (name_len > FP4_MAX_NAME)
        DEFER(h, FP4_ERR_LIMIT, NULL, "st.name_len", "tensor name of %zu bytes, above %d", name_len,
              FP4_MAX_NAME);
    if (!is_object) DEFER(h, FP4_ERR_FORMAT, name, "st.entry.type", "tensor entry is not a JSON object");
    const val *dt = &f[0], *sh = &f[1], *off = &f[2];
    if (dt->type < 0 || sh->type < 0 || off->type < 0)
        DEFER(h, FP4_ERR_FORMAT, name, "st.entry.fields", "tensor entry lacks dtype, shape or data_offsets");
    if (n_other) DEFER(h, FP4_ERR_FORMAT, name, "st.entry.extra", "tensor entry has unknown fields");
    if (dt->type != V_STR || sh->type != V_ARRAY || off->type != V_ARRAY)
        DEFER(h, FP4_ERR_FORMAT, name, "st.entry.type", "a tensor entry field has the wrong JSON type");
    const char *ds = h->arena + dt->s_off;
    fp4_st_dtype d;
    if (strlen(ds) != dt->s_len || fp4_st_dtype_from_name(ds, &d))
        DEFER(h, FP4_ERR_DTYPE, name, "st.dtype", "unknown dtype \"%.32s\"", ds);
    t->dtype = d;
    if (sh->n > FP4_MAX_DIMS) DEFER(h, FP4_ERR_LIMIT, name, "st.rank", "rank %zu above %d", sh->n,
                                    FP4_MAX_DIMS);
    if (!sh->el_ok) DEFER(h, FP4_ERR_SHAPE, name, "st.shape",
                          "a shape element is not a non-negative integer");
    t->rank = (int)sh->n;
    for (int i = 0; i < t->rank; i++) t->shape[i] = sh->el[i];
    uint64_t nbytes;
    const char *rule = NULL;
    fp4_status s = fp4_st_nbytes(t->dtype, t->rank, t->shape, &nbytes, &rule);
    if (s) DEFER(h, s, name, rule, "shape cannot describe a tensor of %s", fp4_st_dtype_name(t->dtype));
    t->nbytes = (size_t)nbytes;
    if (off->n != 2 || !off->el_ok)
        DEFER(h, FP4_ERR_FORMAT, name, "st.offsets", "data_offsets is not two non-negative integers");
    uint64_t b = (uint64_t)off->el[0], e = (uint64_t)off->el[1];
    if (e < b)
        DEFER(h, FP4_ERR_BOUNDS, name, "st.offsets_order", "data_offsets end %llu < begin %llu",
              (unsigned long long)e,
              (unsigned long long)b);
    if (e - b != (uint64_t)t->nbytes)
        DEFER(h, FP4_ERR_SHAPE, name, "st.offsets_size",
              "data_offsets span %llu bytes, dtype and shape need %zu",
              (unsigned long long)(e - b), t->nbytes);
    t->offset = b;
    return FP4_OK;
}

static fp4_status entry(hp *h, size_t name_off, size_t name_len) {
    if (h->out->n_t == h->t_cap) {
        size_t cap = h->t_cap ? 2 * h->t_cap : 64;
        fp4_st_tensor *t = realloc(h->out->t, (cap + 1) * sizeof *t);
        if (!t) return fp4_fail(h->err, FP4_ERR_NOMEM, h->file, NULL, "st.nomem", "out of memory");
        h->out->t = t;
        h->t_cap = cap;
    }
    fp4_st_tensor *t = &h->out->t[h->out->n_t++];
    memset(t, 0, sizeof *t);
    t->name = (const char *)(uintptr_t)name_off; /* an arena offset until the arena stops moving */
    val f[3] = {{.type = -1}, {.type = -1}, {.type = -1}};
    int n_other = 0;
    fp4_status s;
    ws(h);
    if (h->p >= h->end) return syntax(h, "unexpected end of input");
    if (*h->p != '{') {
        val v;
        if ((s = value(h, &v, 1))) return s;
        return entry_rules(h, t, h->arena + name_off, name_len, f, 0, 0);
    }
    h->p++;
    if (!eat(h, '}'))
        for (;;) {
            size_t ko, kl;
            size_t mark = h->a_len;
            if ((s = key(h, &ko, &kl))) return s;
            static const char *const names[3] = {"dtype", "shape", "data_offsets"};
            int which = -1;
            for (int i = 0; i < 3; i++)
                if (kl == strlen(names[i]) && !memcmp(h->arena + ko, names[i], kl)) which = i;
            if (which >= 0 && f[which].type >= 0) return dup(h, names[which]);
            val v;
            if ((s = value(h, &v, 2))) return s;
            if (which >= 0) f[which] = v;
            else n_other++;
            if (which != 0) h->a_len = mark; /* only dtype's text is read later */
            if (eat(h, '}')) break;
            if (!eat(h, ',')) return syntax(h, "',' or '}' expected");
        }
    return entry_rules(h, t, h->arena + name_off, name_len, f, n_other, 1);
}

static fp4_status metadata(hp *h) {
    if (h->out->meta) return dup(h, "__metadata__");
    h->m_cap = 8;
    h->meta_off = malloc(2 * h->m_cap * sizeof *h->meta_off);
    h->out->meta = (const char **)calloc(1, sizeof *h->out->meta); /* marks "seen" */
    if (!h->meta_off || !h->out->meta) return fp4_fail(h->err, FP4_ERR_NOMEM, h->file, NULL, "st.nomem",
                                                       "out of memory");
    ws(h);
    fp4_status s;
    if (h->p >= h->end || *h->p != '{') {
        val v;
        if ((s = value(h, &v, 1))) return s;
        DEFER(h, FP4_ERR_FORMAT, NULL, "st.metadata", "__metadata__ is not an object");
    }
    h->p++;
    if (eat(h, '}')) return FP4_OK;
    for (;;) {
        size_t ko, kl, vo = 0, vl;
        bool nul;
        if ((s = key(h, &ko, &kl))) return s;
        ws(h);
        if (h->p < h->end && *h->p == '"') {
            if ((s = string(h, &vo, &vl, &nul))) return s;
        } else {
            val v;
            if ((s = value(h, &v, 2))) return s;
            nul = true; /* not a string: refused below */
            vo = ko;
        }
        if (h->out->n_meta == h->m_cap) {
            size_t *m = realloc(h->meta_off, 4 * h->m_cap * sizeof *m);
            if (!m) return fp4_fail(h->err, FP4_ERR_NOMEM, h->file, NULL, "st.nomem", "out of memory");
            h->meta_off = m;
            h->m_cap *= 2;
        }
        h->meta_off[2 * h->out->n_meta] = ko;
        h->meta_off[2 * h->out->n_meta + 1] = vo;
        h->out->n_meta++;
        if (nul && !h->have_deferred) {
            fp4_fail(&h->deferred, FP4_ERR_FORMAT, h->file, NULL, "st.metadata.value",
                     "__metadata__ value of \"%.64s\" is not a string without NUL", h->arena + ko);
            h->have_deferred = true;
        }
        if (eat(h, '}')) return FP4_OK;
        if (!eat(h, ',')) return syntax(h, "',' or '}' expected");
    }
}

static int cstr_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* duplicate tensor names, duplicate metadata keys: sorted copies of the pointers */
static fp4_status dups(hp *h) {
    size_t n = h->out->n_t > h->out->n_meta ? h->out->n_t : h->out->n_meta;
    const char **p = malloc((n + 1) * sizeof *p);
    if (!p) return fp4_fail(h->err, FP4_ERR_NOMEM, h->file, NULL, "st.nomem", "out of memory");
    fp4_status s = FP4_OK;
    for (int pass = 0; pass < 2 && !s; pass++) {
        size_t m = pass ? h->out->n_meta : h->out->n_t;
        for (size_t i = 0; i < m; i++) p[i] = pass ? h->out->meta[2 * i] : h->out->t[i].name;
        qsort(p, m, sizeof *p, cstr_cmp);
        for (size_t i = 1; i < m && !s; i++)
            if (!strcmp(p[i - 1], p[i])) s = dup(h, pass ? "in __metadata__" : "(a tensor named twice)");
    }
    free(p);
    return s;
}

static fp4_status root(hp *h) {
    if (!eat(h, '{')) return fp4_fail(h->err, FP4_ERR_FORMAT, h->file, NULL, "st.not_object",
                                      "header is not a JSON object");
    fp4_status s;
    if (!eat(h, '}'))
        for (;;) {
            size_t ko, kl;
            if ((s = key(h, &ko, &kl))) return s;
            if (kl == 12 && !memcmp(h->arena + ko, "__metadata__", 12)) s = metadata(h);
            else s = entry(h, ko, kl);
            if (s) return s;
            if (h->out->n_t > FP4_MAX_TENSORS)
                return fp4_fail(h->err, FP4_ERR_LIMIT, h->file, NULL, "st.tensor_count",
                                "more than %d tensors",
                                FP4_MAX_TENSORS);
            if (eat(h, '}')) break;
            if (!eat(h, ',')) return syntax(h, "',' or '}' expected");
        }
    ws(h);
    if (h->p != h->end)
        return fp4_fail(h->err, FP4_ERR_FORMAT, h->file, NULL, "st.trailing",
                        "header JSON at byte %ld: end of file expected", (long)(h->p - h->base));
    return FP4_OK;
}

fp4_status fp4_st_header_parse(const uint8_t *text, size_t n, const char *file, fp4_st_hdr *out,
                               fp4_error *err) {
    memset(out, 0, sizeof *out);
    hp h = {.p = text, .end = text + n, .base = text, .file = file, .err = err, .out = out};
    fp4_status s = root(&h);
    if (!s) { /* the arena no longer moves: offsets become pointers */
        for (size_t i = 0; i < out->n_t; i++) out->t[i].name = h.arena + (uintptr_t)out->t[i].name;
        free(out->meta);
        out->meta = calloc(2 * out->n_meta + 1, sizeof *out->meta);
        if (!out->meta) s = fp4_fail(err, FP4_ERR_NOMEM, file, NULL, "st.nomem", "out of memory");
        for (size_t i = 0; !s && i < 2 * out->n_meta; i++) out->meta[i] = h.arena + h.meta_off[i];
    }
    if (!s) s = dups(&h);
    if (!s && h.have_deferred) {
        if (err) *err = h.deferred;
        s = h.deferred.code;
    }
    free(h.meta_off);
    out->arena = h.arena;
    if (!out->t) out->t = calloc(1, sizeof *out->t);
    if (!s && !out->t) s = fp4_fail(err, FP4_ERR_NOMEM, file, NULL, "st.nomem", "out of memory");
    return s;
}
