/* tok_encode.c — text to ids, in the reference's order:
 *   invalid UTF-8 -> U+FFFD; split out added tokens (unnormalized spellings; special ones only
 *   with FP4_TOK_PARSE_SPECIAL; lstrip/rstrip trim the neighbours); each remaining section is
 *   normalized, split again on normalized added tokens, pre-tokenized (regex Split / ByteLevel),
 *   and each piece goes through the model (tok_bpe.c); the template adds BOS/EOS on request. */
#include "tok_impl.h"
#include <stdlib.h>
#include <utf8proc.h>

fp4_status tok_ivec_push(tok_ivec *v, int32_t x) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 256;
        int32_t *p = realloc(v->p, cap * sizeof *p);
        if (!p) return FP4_ERR_NOMEM;
        v->p = p;
        v->cap = cap;
    }
    v->p[v->n++] = x;
    return FP4_OK;
}

/* ---- normalizers ---- */
static fp4_status norm_unicode(tok_norm_kind k, const char *s, size_t n, tok_buf *out) {
    if (k == TN_NFC) { /* code points below U+0300 are NFC-stable and never combine */
        size_t i = 0;
        while (i < n && (uint8_t)s[i] < 0xCC) i++;
        if (i == n) return tok_buf_add(out, s, n);
    } else if (k == TN_NFD || k == TN_NFKD || k == TN_NFKC) {
        size_t i = 0;
        while (i < n && (uint8_t)s[i] < 0x80) i++;
        if (i == n) return tok_buf_add(out, s, n);
    }
    int opt = UTF8PROC_STABLE;
    if (k == TN_NFC) opt |= UTF8PROC_COMPOSE;
    else if (k == TN_NFD) opt |= UTF8PROC_DECOMPOSE;
    else if (k == TN_NFKC) opt |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
    else opt |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
    utf8proc_uint8_t *dst = NULL;
    utf8proc_ssize_t r =
        utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &dst, (utf8proc_option_t)opt);
    if (r < 0) {
        free(dst);
        return r == UTF8PROC_ERROR_NOMEM ? FP4_ERR_NOMEM : FP4_ERR_FORMAT;
    }
    fp4_status st = tok_buf_add(out, dst, (size_t)r);
    free(dst);
    return st;
}

fp4_status tok_replace_all(const char *s, size_t n, const char *a, size_t an, const char *b, size_t bn,
                           tok_buf *out, size_t cap) {
    if (an == 0) return tok_buf_add(out, s, n);
    if (an == 1 && bn <= 8 && out->n <= cap && n <= (cap - out->n) / 8) { /* a byte (a space) to a few */
        if (out->n + n * 8 + 1 > out->cap) { /* room for the most it can make */
            char *q = realloc(out->p, out->n + n * 8 + 1);
            if (!q) return FP4_ERR_NOMEM;
            out->p = q;
            out->cap = out->n + n * 8 + 1;
        }
        char *o = out->p + out->n, c = a[0];
        for (size_t i = 0; i < n; i++) {
            if (s[i] != c) *o++ = s[i];
            else memcpy(o, b, bn), o += bn;
        }
        out->n = (size_t)(o - out->p);
        out->p[out->n] = 0;
        return FP4_OK;
    }
    size_t i = 0, last = 0;
    while (i + an <= n) {
        const char *p = memchr(s + i, a[0], n - i - an + 1);
        if (!p) break;
        i = (size_t)(p - s);
        if (!memcmp(p, a, an)) {
            if (out->n + (i - last) + bn > cap) return FP4_ERR_LIMIT;
            if (tok_buf_add(out, s + last, i - last) || tok_buf_add(out, b, bn)) return FP4_ERR_NOMEM;
            i += an;
            last = i;
        } else i++;
    }
    if (out->n + (n - last) > cap) return FP4_ERR_LIMIT;
    return tok_buf_add(out, s + last, n - last);
}

/* JavaScript's String.prototype.trim set: WhiteSpace + LineTerminator */
bool tok_js_space(uint32_t c) {
    return c == 9 || c == 10 || c == 11 || c == 12 || c == 13 || c == 32 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
           c == 0x3000 || c == 0xFEFF;
}
static size_t trim_start(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        int l = tok_utf8_dec((const uint8_t *)s + i, n - i, &cp);
        if (!tok_js_space(cp)) break;
        i += (size_t)l;
    }
    return i;
}
static size_t trim_end(const char *s, size_t n) { /* new length */
    while (n > 0) {
        size_t j = n - 1;
        while (j > 0 && ((uint8_t)s[j] & 0xC0) == 0x80) j--;
        uint32_t cp;
        tok_utf8_dec((const uint8_t *)s + j, n - j, &cp);
        if (!tok_js_space(cp)) break;
        n = j;
    }
    return n;
}

/* JavaScript's toLowerCase: each code point's lowercase, U+0130 to "i" + U+0307, and a capital
 * sigma that ends a word (a letter before it, none after it) to the final form */
static bool js_cased(uint32_t c) {
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT;
}
static bool js_case_ignorable(uint32_t c) {
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return k == UTF8PROC_CATEGORY_MN || k == UTF8PROC_CATEGORY_ME || k == UTF8PROC_CATEGORY_CF ||
           k == UTF8PROC_CATEGORY_LM || k == UTF8PROC_CATEGORY_SK || c == '\'' || c == '.' || c == ':' ||
           c == 0xB7 || c == 0x2019;
}
static bool final_sigma(const char *s, size_t n, size_t at, size_t len) {
    bool before = false, after = false;
    for (size_t i = at; i > 0;) {
        size_t j = i - 1;
        while (j > 0 && ((uint8_t)s[j] & 0xC0) == 0x80) j--;
        uint32_t c;
        tok_utf8_dec((const uint8_t *)s + j, n - j, &c);
        i = j;
        if (js_case_ignorable(c)) continue;
        before = js_cased(c);
        break;
    }
    for (size_t i = at + len; i < n;) {
        uint32_t c;
        i += (size_t)tok_utf8_dec((const uint8_t *)s + i, n - i, &c);
        if (js_case_ignorable(c)) continue;
        after = js_cased(c);
        break;
    }
    return before && !after;
}
fp4_status tok_js_lower(const char *s, size_t n, tok_buf *out) {
    fp4_status st = FP4_OK;
    for (size_t i = 0; !st && i < n;) {
        uint32_t c;
        int l = tok_utf8_dec((const uint8_t *)s + i, n - i, &c);
        char u[8];
        int k;
        if (c == 0x130) k = tok_utf8_enc('i', u), k += tok_utf8_enc(0x307, u + k);
        else if (c == 0x3A3) k = tok_utf8_enc(final_sigma(s, n, i, (size_t)l) ? 0x3C2 : 0x3C3, u);
        else k = tok_utf8_enc((uint32_t)utf8proc_tolower((utf8proc_int32_t)c), u);
        st = tok_buf_add(out, u, (size_t)k);
        i += (size_t)l;
    }
    return st;
}

/* every match of re (never empty: the loader refuses such patterns) replaced by b, left to right */
static fp4_status regex_replace(const pcre2_code *re, const char *s, size_t n, const char *b, size_t bn,
                                tok_buf *out, size_t cap) {
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    pcre2_match_context *mc = pcre2_match_context_create(NULL);
    fp4_status st = md && mc ? FP4_OK : FP4_ERR_NOMEM;
    if (!st) {
        pcre2_set_match_limit(mc, 10000000);
        pcre2_set_depth_limit(mc, 100000);
        pcre2_set_heap_limit(mc, 64 * 1024); /* KiB */
    }
    size_t at = 0;
    while (!st && at < n) {
        int rc = pcre2_match(re, (PCRE2_SPTR)s, n, at, PCRE2_NO_UTF_CHECK, md, mc);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            st = rc == PCRE2_ERROR_NOMEMORY ? FP4_ERR_NOMEM : FP4_ERR_LIMIT;
            break;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        if (ov[1] <= ov[0] || ov[0] < at) { /* \K tricks or an empty match: taken as no more matches */
            break;
        }
        if (out->n + (ov[0] - at) + bn > cap) st = FP4_ERR_LIMIT;
        else if (tok_buf_add(out, s + at, ov[0] - at) || tok_buf_add(out, b, bn)) st = FP4_ERR_NOMEM;
        at = ov[1];
    }
    if (!st) st = out->n + (n - at) > cap ? FP4_ERR_LIMIT : tok_buf_add(out, s + at, n - at);
    pcre2_match_data_free(md);
    pcre2_match_context_free(mc);
    return st;
}

/* StripAccents: every combining mark (general category M) dropped, as both references do */
static fp4_status strip_marks(const char *s, size_t n, tok_buf *out) {
    fp4_status st = FP4_OK;
    for (size_t i = 0; !st && i < n;) {
        uint32_t c;
        int l = tok_utf8_dec((const uint8_t *)s + i, n - i, &c);
        utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
        if (k != UTF8PROC_CATEGORY_MN && k != UTF8PROC_CATEGORY_MC && k != UTF8PROC_CATEGORY_ME)
            st = tok_buf_add(out, s + i, (size_t)l);
        i += (size_t)l;
    }
    return st;
}

fp4_status tok_normalize(const fp4_tokenizer *t, const char *s, size_t n, tok_buf *out) {
    tok_buf a = {0}, b = {0};
    /* the loader bounds the Replace chain's growth; Unicode forms and Prepend add a little more */
    size_t cap = TOK_MAX_OUT;
    if (n < (TOK_MAX_OUT - 65536) / (4 * TOK_MAX_GROWTH)) cap = n * 4 * TOK_MAX_GROWTH + 65536;
    fp4_status st = tok_buf_add(&a, s, n);
    for (int i = 0; !st && i < t->n_norm; i++) {
        const tok_norm *nm = &t->norm[i];
        b.n = 0;
        switch (nm->kind) {
        case TN_PREPEND:
            st = tok_buf_add(&b, tok_str(t, nm->a), nm->a.len);
            if (!st) st = tok_buf_add(&b, a.p, a.n);
            break;
        case TN_REPLACE:
            if (nm->re) st = regex_replace(nm->re, a.p, a.n, tok_str(t, nm->b), nm->b.len, &b, cap);
            else
                st = tok_replace_all(a.p, a.n, tok_str(t, nm->a), nm->a.len, tok_str(t, nm->b), nm->b.len, &b,
                                     cap);
            break;
        case TN_STRIP_ACCENTS:
            st = strip_marks(a.p, a.n, &b);
            break;
        case TN_PRECOMPILED:
            st = tok_charsmap_normalize(nm->map, a.p, a.n, &b, cap);
            break;
        case TN_BERT:
            st = tok_bert_normalize(nm->bert, a.p, a.n, &b);
            break;
        case TN_LOWER:
            st = tok_js_lower(a.p, a.n, &b);
            break;
        case TN_STRIP: {
            size_t from = (nm->bert & 1) ? trim_start(a.p, a.n) : 0;
            size_t to = (nm->bert & 2) ? from + trim_end(a.p + from, a.n - from) : a.n;
            st = tok_buf_add(&b, a.p + from, to - from);
            break;
        }
        default:
            st = norm_unicode(nm->kind, a.p, a.n, &b);
            break;
        }
        if (!st && b.n > cap) st = FP4_ERR_LIMIT;
        tok_buf_swap(&a, &b);
    }
    return tok_buf_drain(out, &a, &b, st);
}

/* ---- splitting on added tokens: leftmost, longest at each position ---- */
typedef struct sect {
    size_t off, len;
    int32_t id; /* -1: text */
    int32_t added; /* index into t->added, -1 for text */
} sect;
typedef struct sect_vec {
    sect *p;
    size_t n, cap;
} sect_vec;
static fp4_status sect_push(sect_vec *v, sect s) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        sect *p = realloc(v->p, cap * sizeof *p);
        if (!p) return FP4_ERR_NOMEM;
        v->p = p;
        v->cap = cap;
    }
    v->p[v->n++] = s;
    return FP4_OK;
}

/* the Rust regex crate's \w: Alphabetic (letters, Nl and the Other_Alphabetic symbols outside M:
 * the circled and squared Latin letters), marks, decimal digits, connector punctuation, ZWNJ/ZWJ */
static bool rust_word_char(uint32_t c) {
    switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_PC:
        return true;
    default:
        return c == 0x200C || c == 0x200D || (c >= 0x24B6 && c <= 0x24E9) || (c >= 0x1F130 && c <= 0x1F149) ||
               (c >= 0x1F150 && c <= 0x1F169) || (c >= 0x1F170 && c <= 0x1F189);
    }
}

/* a single_word added token matches s[i, i + len) only if no word character touches it (the Rust
 * library's reading; the JavaScript reference ignores single_word) */
static bool single_word_at(const char *s, size_t n, size_t i, size_t len) {
    uint32_t c;
    if (i > 0) {
        size_t j = i - 1;
        while (j > 0 && ((uint8_t)s[j] & 0xC0) == 0x80) j--;
        tok_utf8_dec((const uint8_t *)s + j, n - j, &c);
        if (rust_word_char(c)) return false;
    }
    if (i + len < n) {
        tok_utf8_dec((const uint8_t *)s + i + len, n - i - len, &c);
        if (rust_word_char(c)) return false;
    }
    return true;
}

/* best: scratch of TOK_AC_WINDOW ids (tok_added.c fills it a window at a time: a token that starts
 * in the window ends at most max_len bytes past it) */
static fp4_status split_added(const fp4_tokenizer *t, const char *s, size_t n, bool normalized_pass,
                              bool special, sect_vec *out, int32_t *best) {
    size_t start = 0, i = 0, lo = 0, hi = 0;
    const int pass = normalized_pass ? 1 : 0;
    const tok_ac *ac = &t->ac[pass];
    out->n = 0;
    if (!ac->n_tokens[special ? 0 : 1]) i = n; /* no token to look for: one text section */
    while (i < n) {
        if (i >= hi) {
            lo = i;
            hi = n - i > TOK_AC_WINDOW ? i + TOK_AC_WINDOW : n;
            size_t end = n - hi > ac->max_len ? hi + ac->max_len : n;
            if (!tok_ac_longest(t, pass, special, s + lo, end - lo, hi - lo, best)) { /* no token here */
                i = hi;
                continue;
            }
        }
        int32_t k = best[i - lo];
        if (k < 0) {
            i++;
            continue;
        }
        size_t len = normalized_pass ? t->added[k].norm.len : t->added[k].content.len;
        if (t->added[k].single_word && !single_word_at(s, n, i, len)) {
            i += len; /* the match is text (the Rust library's matcher resumes after it) */
            continue;
        }
        if (i > start && sect_push(out, (sect){start, i - start, -1, -1})) return FP4_ERR_NOMEM;
        if (sect_push(out, (sect){i, len, t->added[k].id, k})) return FP4_ERR_NOMEM;
        i += len;
        start = i;
    }
    if (start < n && sect_push(out, (sect){start, n - start, -1, -1})) return FP4_ERR_NOMEM;
    /* lstrip / rstrip trim the text neighbours */
    for (size_t k = 0; k < out->n; k++) {
        if (out->p[k].added < 0) continue;
        const tok_added *a = &t->added[out->p[k].added];
        if (a->lstrip && k > 0 && out->p[k - 1].added < 0)
            out->p[k - 1].len = trim_end(s + out->p[k - 1].off, out->p[k - 1].len);
        if (a->rstrip && k + 1 < out->n && out->p[k + 1].added < 0) {
            size_t d = trim_start(s + out->p[k + 1].off, out->p[k + 1].len);
            out->p[k + 1].off += d;
            out->p[k + 1].len -= d;
        }
    }
    return FP4_OK;
}

/* ---- pre-tokenization ---- */
typedef struct piece {
    const char *p;
    size_t n;
} piece;
typedef struct piece_vec {
    piece *p;
    size_t n, cap;
} piece_vec;
static fp4_status piece_push(piece_vec *v, const char *p, size_t n) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 256;
        piece *q = realloc(v->p, cap * sizeof *q);
        if (!q) return FP4_ERR_NOMEM;
        v->p = q;
        v->cap = cap;
    }
    v->p[v->n++] = (piece){p, n};
    return FP4_OK;
}

typedef struct enc_ctx {
    const fp4_tokenizer *t;
    pcre2_match_data *md;
    pcre2_match_context *mc; /* bounds the work of one match: a hostile regex ends in FP4_ERR_LIMIT */
    tok_pair_cache *pc;
    tok_wcache *wc; /* the tokenizer's word cache, when this call holds it */
    piece_vec a, b;
    tok_buf scratch[TOK_MAX_STEPS]; /* strings made by a step (prefix spaces) */
    size_t section;                 /* the index of the added-token split's section being encoded */
    tok_uni_scratch us;             /* Unigram's Viterbi arrays */
} enc_ctx;

/* Metaspace as the reference runs it: in each piece every space becomes str_rep, then str_rep goes
 * in front unless the piece starts with the replacement (prepend_scheme "always", or "first" in the
 * text's first section); no split. Pieces point into sb. */
static fp4_status metaspace(enc_ctx *c, const tok_pre *p, tok_buf *sb, piece_vec *cur) {
    const fp4_tokenizer *t = c->t;
    const char *rep = tok_str(t, p->a), *sr = tok_str(t, p->b);
    size_t need = 1;
    for (size_t i = 0; i < cur->n; i++) {
        size_t sp = 0;
        for (size_t k = 0; k < cur->p[i].n; k++) sp += cur->p[i].p[k] == ' ';
        if (need + cur->p[i].n + (sp + 1) * p->b.len > TOK_MAX_OUT) return FP4_ERR_LIMIT;
        need += cur->p[i].n + (sp + 1) * p->b.len;
    }
    sb->n = 0;
    if (need > sb->cap) {
        char *q = realloc(sb->p, need);
        if (!q) return FP4_ERR_NOMEM;
        sb->p = q;
        sb->cap = need;
    }
    bool pre = p->prepend == TOKP_ALWAYS || (p->prepend == TOKP_FIRST && c->section == 0);
    for (size_t i = 0; i < cur->n; i++) {
        size_t o = sb->n;
        for (size_t k = 0; k < cur->p[i].n; k++) {
            if (cur->p[i].p[k] != ' ') sb->p[sb->n++] = cur->p[i].p[k];
            else memcpy(sb->p + sb->n, sr, p->b.len), sb->n += p->b.len;
        }
        size_t len = sb->n - o;
        if (pre && !(len >= p->a.len && !memcmp(sb->p + o, rep, p->a.len))) {
            memmove(sb->p + o + p->b.len, sb->p + o, len);
            memcpy(sb->p + o, sr, p->b.len);
            sb->n += p->b.len;
        }
        cur->p[i] = (piece){sb->p + o, sb->n - o};
    }
    return FP4_OK;
}

/* one match from start: straight into the JIT code when the pattern has it (pcre2_match would
 * call the same code after checks the encoder has no use for: the text is valid UTF-8) */
static int re_match(enc_ctx *c, const pcre2_code *re, const char *s, size_t n, size_t start) {
    int rc = pcre2_jit_match(re, (PCRE2_SPTR)s, n, start, 0, c->md, c->mc);
    if (rc == PCRE2_ERROR_JIT_BADOPTION)
        rc = pcre2_match(re, (PCRE2_SPTR)s, n, start, PCRE2_NO_UTF_CHECK, c->md, c->mc);
    return rc;
}

/* isolated split: matches and the gaps between them, empty pieces dropped; merge_prev
 * (MergedWithPrevious): a match that follows a gap joins the gap's piece; mode TOKP_MATCHES keeps
 * the matches alone, TOKP_GAPS the text between them */
static fp4_status regex_split(enc_ctx *c, const tok_pre *p, const char *s, size_t n, piece_vec *out) {
    size_t start = 0, prev = 0, first = out->n;
    bool prev_match = false, merge_prev = p->merge_prev;
    int mode = p->mode;
    while (start <= n) {
        size_t ms, me;
        int f = p->fast ? tok_prefast_next(p->fast, s, n, start, &ms, &me) : -1;
        if (f == 0) break;
        if (f < 0) { /* PCRE2 from where the hand matcher stopped (no match starts before it) */
            int rc = re_match(c, p->re, s, n, p->fast ? ms : start);
            if (rc == PCRE2_ERROR_NOMATCH) break;
            if (rc < 0) return rc == PCRE2_ERROR_NOMEMORY ? FP4_ERR_NOMEM : FP4_ERR_LIMIT;
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
            ms = ov[0], me = ov[1];
        }
        if (me < ms) return FP4_ERR_UNSUPPORTED; /* \K-style lookbehind tricks */
        if (ms > prev && mode != TOKP_MATCHES) {
            if (piece_push(out, s + prev, ms - prev)) return FP4_ERR_NOMEM;
            prev_match = false;
        }
        if (mode == TOKP_GAPS) {
        } else if (me > ms && merge_prev && !prev_match && out->n > first)
            out->p[out->n - 1].n = me - (size_t)(out->p[out->n - 1].p - s);
        else if (me > ms && piece_push(out, s + ms, me - ms))
            return FP4_ERR_NOMEM;
        if (me > ms) prev_match = true;
        prev = me;
        if (me == ms) { /* empty match: step one code point */
            if (me >= n) break;
            uint32_t cp;
            start = me + (size_t)tok_utf8_dec((const uint8_t *)s + me, n - me, &cp);
        } else start = me;
    }
    if (prev < n && mode != TOKP_MATCHES && piece_push(out, s + prev, n - prev)) return FP4_ERR_NOMEM;
    return FP4_OK;
}

static fp4_status pretokenize(enc_ctx *c, const char *s, size_t n, piece_vec **res) {
    const fp4_tokenizer *t = c->t;
    piece_vec *cur = &c->a, *nxt = &c->b;
    cur->n = 0;
    if (piece_push(cur, s, n)) return FP4_ERR_NOMEM;
    for (int k = 0; k < t->n_pre; k++) {
        const tok_pre *p = &t->pre[k];
        nxt->n = 0;
        if (p->kind == TP_BYTELEVEL && p->prefix_space) {
            /* a space before every piece that does not start with one; pointers into scratch are
             * fixed up after the buffer stops growing */
            tok_buf *sb = &c->scratch[k];
            sb->n = 0;
            size_t need = 0;
            for (size_t i = 0; i < cur->n; i++) need += cur->p[i].n + 1;
            if (need + 1 > sb->cap) {
                char *q = realloc(sb->p, need + 1);
                if (!q) return FP4_ERR_NOMEM;
                sb->p = q;
                sb->cap = need + 1;
            }
            for (size_t i = 0; i < cur->n; i++) {
                size_t o = sb->n;
                if (cur->p[i].n == 0 || cur->p[i].p[0] != ' ') sb->p[sb->n++] = ' ';
                memcpy(sb->p + sb->n, cur->p[i].p, cur->p[i].n);
                sb->n += cur->p[i].n;
                cur->p[i] = (piece){sb->p + o, sb->n - o};
            }
        }
        if (p->kind == TP_METASPACE) {
            fp4_status st = metaspace(c, p, &c->scratch[k], cur);
            if (st) return st;
            continue;
        }
        if (p->kind == TP_BERT) {
            for (size_t i = 0; i < cur->n; i++)
                for (size_t pos = 0, off, len; tok_bert_next(cur->p[i].p, cur->p[i].n, &pos, &off, &len);)
                    if (piece_push(nxt, cur->p[i].p + off, len)) return FP4_ERR_NOMEM;
        }
        for (size_t i = 0; p->re && i < cur->n; i++) {
            fp4_status st = regex_split(c, p, cur->p[i].p, cur->p[i].n, nxt);
            if (st) return st;
        }
        if (!p->re && p->kind != TP_BERT) continue;
        piece_vec *tmp = cur;
        cur = nxt;
        nxt = tmp;
    }
    *res = cur;
    return FP4_OK;
}

static fp4_status encode_text(enc_ctx *c, const char *s, size_t n, tok_ivec *out) {
    piece_vec *pv;
    fp4_status st = pretokenize(c, s, n, &pv);
    for (size_t i = 0; !st && i < pv->n; i++) {
        if (!pv->p[i].n) continue;
        if (c->t->kind == FP4_TOK_WORDPIECE) st = tok_wpm_word(c->t, pv->p[i].p, pv->p[i].n, out);
        else if (c->t->kind == FP4_TOK_UNIGRAM)
            st = tok_unigram_word(c->t, &c->us, pv->p[i].p, pv->p[i].n, out);
        else st = tok_bpe_text(c->t, c->wc, c->pc, pv->p[i].p, pv->p[i].n, out);
    }
    return st;
}

/* a refusal while encoding, naming the tokenizer's file and a rule */
static fp4_status enc_fail(const fp4_tokenizer *t, fp4_status st, const char *stage, size_t len,
                           fp4_error *err) {
    if (st == FP4_ERR_NOMEM)
        return fp4_fail(err, st, t->name, NULL, "tok.nomem", "out of memory encoding %zu bytes (%s)", len,
                        stage);
    if (st == FP4_ERR_LIMIT && !strcmp(stage, "normalizer"))
        return fp4_fail(err, st, t->name, "normalizer", "tok.normalize-limit",
                        "normalizing %zu bytes makes more than %d bytes per byte or %u bytes in all", len,
                        4 * TOK_MAX_GROWTH, TOK_MAX_OUT);
    if (st == FP4_ERR_LIMIT)
        return fp4_fail(err, st, t->name, "pre_tokenizer", "tok.regex-limit",
                        "a pre-tokenizer regex passed its match limits (backtracking, depth or heap) on this "
                        "text of %zu bytes", len);
    if (st == FP4_ERR_UNSUPPORTED)
        return fp4_fail(err, st, t->name, "pre_tokenizer", "tok.regex",
                        "a pre-tokenizer regex matched backwards (\\K) on this text");
    return fp4_fail(err, st, t->name, "normalizer", "tok.normalize", "the text cannot be normalized");
}

fp4_status fp4_tokenizer_encode_err(const fp4_tokenizer *t, const char *text, size_t len, unsigned flags,
                                    int32_t **ids, size_t *n_ids, fp4_error *err) {
    if (!t || !ids || !n_ids || (!text && len))
        return fp4_fail(err, FP4_ERR_INVALID_ARG, t ? t->name : NULL, NULL, "tok.arg", "NULL argument");
    *ids = NULL;
    *n_ids = 0;
    char *s;
    size_t n;
    const char *in = text ? text : "";
    const char *stage = "text";
    fp4_status st = tok_utf8_sanitize(in, len, &s, &n);
    if (st) return enc_fail(t, st, stage, len, err);
    enc_ctx c = {.t = t};
    tok_ivec out = {0};
    sect_vec secs = {0}, sub = {0};
    tok_buf nb = {0};
    c.md = pcre2_match_data_create(4, NULL);
    c.mc = pcre2_match_context_create(NULL);
    int32_t *best = malloc(TOK_AC_WINDOW * sizeof *best);
    if (t->kind == FP4_TOK_BYTE_BPE || t->kind == FP4_TOK_SPM_BPE) c.wc = tok_wcache_claim(t);
    tok_pair_cache *own_pc = NULL; /* without the tokenizer's cache: one for this call */
    if (c.wc) c.pc = tok_wcache_pairs(c.wc);
    else if (n >= 256 && (c.pc = own_pc = malloc(sizeof *c.pc))) tok_pair_cache_init(c.pc);
    if (!c.md || !c.mc || !best) st = FP4_ERR_NOMEM;
    else {
        pcre2_set_match_limit(c.mc, 10000000);
        pcre2_set_depth_limit(c.mc, 100000);
        pcre2_set_heap_limit(c.mc, 64 * 1024); /* KiB */
    }
    if (!st && (flags & FP4_TOK_ADD_SPECIAL))
        for (int i = 0; !st && i < t->n_tmpl_pre; i++) st = tok_ivec_push(&out, t->tmpl_pre[i]);
    if (!st) st = split_added(t, s, n, false, (flags & FP4_TOK_PARSE_SPECIAL) != 0, &secs, best);
    for (size_t k = 0; !st && k < secs.n; k++) {
        sect *q = &secs.p[k];
        c.section = k;
        if (q->added >= 0) {
            st = tok_ivec_push(&out, q->id);
            continue;
        }
        if (q->len == 0) continue;
        const char *sec = s + q->off;
        size_t sec_n = q->len;
        if (t->n_norm) {
            nb.n = 0;
            stage = "normalizer";
            if ((st = tok_normalize(t, sec, sec_n, &nb))) break;
            stage = "text";
            sec = nb.p;
            sec_n = nb.n;
            if (sec_n == 0) continue;
        }
        if (!t->any_norm_added) {
            st = encode_text(&c, sec, sec_n, &out);
            continue;
        }
        if ((st = split_added(t, sec, sec_n, true, (flags & FP4_TOK_PARSE_SPECIAL) != 0, &sub, best))) break;
        for (size_t j = 0; !st && j < sub.n; j++) {
            if (sub.p[j].added >= 0) st = tok_ivec_push(&out, sub.p[j].id);
            else if (sub.p[j].len) st = encode_text(&c, sec + sub.p[j].off, sub.p[j].len, &out);
        }
    }
    if (!st && (flags & FP4_TOK_ADD_SPECIAL))
        for (int i = 0; !st && i < t->n_tmpl_post; i++) st = tok_ivec_push(&out, t->tmpl_post[i]);
    if (c.wc) tok_wcache_release(t);
    pcre2_match_data_free(c.md);
    pcre2_match_context_free(c.mc);
    free(own_pc);
    tok_uni_scratch_free(&c.us);
    free(c.a.p);
    free(c.b.p);
    for (int i = 0; i < TOK_MAX_STEPS; i++) free(c.scratch[i].p);
    free(secs.p);
    free(sub.p);
    free(nb.p);
    free(best);
    if (s != in) free(s);
    if (st) {
        free(out.p);
        return enc_fail(t, st, stage, len, err);
    }
    *ids = out.p;
    *n_ids = out.n;
    return FP4_OK;
}

fp4_status fp4_tokenizer_encode(const fp4_tokenizer *t, const char *text, size_t len, unsigned flags,
                                int32_t **ids, size_t *n_ids) {
    return fp4_tokenizer_encode_err(t, text, len, flags, ids, n_ids, NULL);
}
