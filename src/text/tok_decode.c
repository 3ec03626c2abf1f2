/* tok_decode.c — ids to text through the decoder steps (ByteLevel, Replace, ByteFallback, Fuse,
 * Strip) as the reference applies them to the list of token strings, and the streaming
 * detokenizer that emits only complete UTF-8 characters. */
#include "tok_impl.h"
#include <stdio.h>
#include <stdlib.h>

/* a list of strings in one buffer; added[i]: the string is an added token's content */
typedef struct strs {
    tok_buf b;
    size_t *off; /* n + 1 offsets */
    uint8_t *added;
    size_t n, cap;
} strs;

static fp4_status strs_open(strs *l) { /* start the next string */
    if (l->n + 2 > l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        size_t *o = realloc(l->off, cap * sizeof *o);
        if (!o) return FP4_ERR_NOMEM;
        l->off = o;
        uint8_t *a = realloc(l->added, cap);
        if (!a) return FP4_ERR_NOMEM;
        l->added = a;
        l->cap = cap;
    }
    if (l->n == 0) l->off[0] = l->b.n;
    return FP4_OK;
}
static fp4_status strs_close(strs *l, bool added) {
    l->added[l->n] = added;
    l->off[++l->n] = l->b.n;
    return FP4_OK;
}
static fp4_status strs_push(strs *l, const char *s, size_t n, bool added) {
    if (strs_open(l) || tok_buf_add(&l->b, s, n)) return FP4_ERR_NOMEM;
    return strs_close(l, added);
}
static void strs_reset(strs *l) {
    l->n = 0;
    l->b.n = 0;
}
static void strs_free(strs *l) {
    free(l->b.p);
    free(l->off);
    free(l->added);
}
static inline const char *S(const strs *l, size_t i) { return l->b.p + l->off[i]; }
static inline size_t L(const strs *l, size_t i) { return l->off[i + 1] - l->off[i]; }

/* byte-level characters back to bytes (a character outside the table gives 0x00) */
static fp4_status bytelevel_raw(const char *s, size_t n, tok_buf *raw) {
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += (size_t)tok_utf8_dec((const uint8_t *)s + i, n - i, &cp);
        int b = tok_cp_to_byte(cp);
        uint8_t c = (uint8_t)(b < 0 ? 0 : b);
        if (tok_buf_add(raw, &c, 1)) return FP4_ERR_NOMEM;
    }
    return FP4_OK;
}

/* <0xXY> as the reference reads it: 6 UTF-16 units, parseInt of the two after "0x" */
static int byte_token(const char *s, size_t n) {
    if (n < 6 || n > 8 || memcmp(s, "<0x", 3) || s[n - 1] != '>') return -1;
    uint32_t c1, c2;
    int l1 = tok_utf8_dec((const uint8_t *)s + 3, n - 4, &c1);
    if (3 + (size_t)l1 >= n - 1) return -1;
    int l2 = tok_utf8_dec((const uint8_t *)s + 3 + l1, n - 4 - (size_t)l1, &c2);
    if (3 + (size_t)l1 + (size_t)l2 != n - 1 || c2 >= 0x10000) return -1;
#define HEXV(c)                                                                                              \
    ((c) >= '0' && (c) <= '9'                     ? (int)(c) - '0'                                           \
     : ((c) | 0x20) >= 'a' && ((c) | 0x20) <= 'f' ? ((int)(c) | 0x20) - 'a' + 10                             \
                                                  : -1)
    int h1 = c1 < 128 ? HEXV(c1) : -1, h2 = c2 < 128 ? HEXV(c2) : -1;
#undef HEXV
    if (h1 < 0) return -1;
    return h2 < 0 ? h1 : h1 * 16 + h2;
}

static fp4_status cleanup(const char *s, size_t n, tok_buf *out);

/* WordPiece's decoder on the i-th string: a space before it unless it is the first or starts with
 * the prefix (then dropped); the clean-up on each string when asked */
static fp4_status wordpiece_one(const fp4_tokenizer *t, const tok_dec *d, size_t i, const char *s, size_t n,
                                tok_buf *out) {
    tok_buf x = {0};
    const char *pf = tok_str(t, d->a);
    fp4_status st = tok_buf_add(&x, "", 0);
    if (!st && i > 0 && d->a.len && n >= d->a.len && !memcmp(s, pf, d->a.len)) s += d->a.len, n -= d->a.len;
    else if (!st && i > 0) st = tok_buf_add(&x, " ", 1);
    if (!st) st = tok_buf_add(&x, s, n);
    if (!st) st = d->start ? cleanup(x.p, x.n, out) : tok_buf_add(out, x.p, x.n);
    free(x.p);
    return st;
}

static fp4_status dec_step(const fp4_tokenizer *t, const tok_dec *d, const strs *in, strs *out) {
    tok_buf raw = {0};
    fp4_status st = FP4_OK;
    switch (d->kind) {
    case TD_BYTELEVEL:
        for (size_t i = 0; !st && i <= in->n; i++) {
            if (i == in->n || in->added[i]) {
                if (raw.n) {
                    if ((st = strs_open(out)) ||
                        (st = tok_buf_lossy(&out->b, (const uint8_t *)raw.p, raw.n, false)))
                        break;
                    strs_close(out, false);
                    raw.n = 0;
                }
                if (i < in->n) st = strs_push(out, S(in, i), L(in, i), true);
            } else st = bytelevel_raw(S(in, i), L(in, i), &raw);
        }
        break;
    case TD_REPLACE:
        for (size_t i = 0; !st && i < in->n; i++) {
            if ((st = strs_open(out))) break;
            st = tok_replace_all(S(in, i), L(in, i), tok_str(t, d->a), d->a.len, tok_str(t, d->b), d->b.len,
                                 &out->b, TOK_MAX_OUT);
            strs_close(out, in->added[i]);
        }
        break;
    case TD_BYTEFALLBACK:
        for (size_t i = 0; !st && i <= in->n; i++) {
            int v = i < in->n ? byte_token(S(in, i), L(in, i)) : -1;
            if (v >= 0) {
                uint8_t c = (uint8_t)v;
                st = tok_buf_add(&raw, &c, 1);
                continue;
            }
            if (raw.n) {
                if ((st = strs_open(out)) ||
                    (st = tok_buf_lossy(&out->b, (const uint8_t *)raw.p, raw.n, true)))
                    break;
                strs_close(out, false);
                raw.n = 0;
            }
            if (i < in->n) st = strs_push(out, S(in, i), L(in, i), in->added[i]);
        }
        break;
    case TD_WORDPIECE:
        for (size_t i = 0; !st && i < in->n; i++) {
            if ((st = strs_open(out))) break;
            st = wordpiece_one(t, d, i, S(in, i), L(in, i), &out->b);
            strs_close(out, in->added[i]);
        }
        break;
    case TD_FUSE:
        if ((st = strs_open(out))) break;
        st = tok_buf_add(&out->b, in->n ? S(in, 0) : "", in->n ? in->off[in->n] - in->off[0] : 0);
        strs_close(out, false);
        break;
    case TD_STRIP: {
        const char *c = tok_str(t, d->a);
        size_t cl = d->a.len;
        for (size_t i = 0; !st && i < in->n; i++) {
            const char *s = S(in, i);
            size_t n = L(in, i), a = 0, e = n;
            if (d->first_only && i > 0) {
                st = strs_push(out, s, n, in->added[i]);
                continue;
            }
            for (int32_t k = 0; k < d->start && cl && a + cl <= n && !memcmp(s + a, c, cl); k++) a += cl;
            for (int32_t k = 0; k < d->stop && cl && e >= a + cl && !memcmp(s + e - cl, c, cl); k++) e -= cl;
            st = strs_push(out, s + a, e - a, in->added[i]);
        }
        break;
    }
    }
    free(raw.p);
    return st;
}

static fp4_status cleanup(const char *s, size_t n, tok_buf *out) {
    static const char *const pairs[][2] = {{" .", "."},     {" ?", "?"},     {" !", "!"},   {" ,", ","},
                                           {" ' ", "'"},    {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"},
                                           {" 've", "'ve"}, {" 're", "'re"}};
    tok_buf a = {0}, b = {0};
    fp4_status st = tok_buf_add(&a, s, n);
    for (size_t k = 0; !st && k < sizeof pairs / sizeof pairs[0]; k++) {
        b.n = 0;
        st =
            tok_replace_all(a.p, a.n, pairs[k][0], strlen(pairs[k][0]), pairs[k][1], strlen(pairs[k][1]), &b,
                            SIZE_MAX);
        tok_buf_swap(&a, &b);
    }
    return tok_buf_drain(out, &a, &b, st);
}

static fp4_status check_id(const fp4_tokenizer *t, int32_t id, size_t pos, fp4_error *err) {
    if (id < 0 || id >= t->n_vocab || !(t->flags[id] & TOKF_PRESENT))
        return fp4_fail(err, FP4_ERR_INVALID_ARG, t->name, NULL, "tok.decode-id",
                        "id %lld at position %zu is not a token (vocabulary: %d ids)", (long long)id, pos,
                        (int)t->n_vocab);
    return FP4_OK;
}

fp4_status fp4_tokenizer_decode(const fp4_tokenizer *t, const int32_t *ids, size_t n, unsigned flags,
                                char **text, size_t *len, fp4_error *err) {
    if (!t || !text || !len || (!ids && n))
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "tok.arg", "NULL argument");
    *text = NULL;
    *len = 0;
    strs a = {0}, b = {0};
    fp4_status st = FP4_OK;
    for (size_t i = 0; !st && i < n; i++) {
        if ((st = check_id(t, ids[i], i, err))) break;
        uint8_t f = t->flags[ids[i]];
        if ((flags & FP4_TOK_SKIP_SPECIAL) && (f & TOKF_SPECIAL)) continue;
        st = strs_push(&a, tok_str(t, t->text[ids[i]]), t->text[ids[i]].len, (f & TOKF_ADDED) != 0);
    }
    for (int k = 0; !st && t->has_decoder && k < t->n_dec; k++) {
        strs_reset(&b);
        st = dec_step(t, &t->dec[k], &a, &b);
        strs tmp = a;
        a = b;
        b = tmp;
    }
    tok_buf out = {0};
    if (!st) {
        tok_buf joined = {0};
        st = tok_buf_add(&joined, "", 0);
        for (size_t i = 0; !st && i < a.n; i++) {
            if (!t->has_decoder && i) st = tok_buf_add(&joined, " ", 1);
            if (!st) st = tok_buf_add(&joined, S(&a, i), L(&a, i));
        }
        if (!st && (flags & FP4_TOK_CLEANUP_SPACES)) st = cleanup(joined.p, joined.n, &out);
        else if (!st) {
            out = joined;
            joined.p = NULL;
        }
        free(joined.p);
    }
    strs_free(&a);
    strs_free(&b);
    if (st) {
        free(out.p);
        if (st == FP4_ERR_NOMEM)
            fp4_fail(err, st, t->name, NULL, "tok.nomem", "out of memory decoding %zu ids", n);
        else if (st == FP4_ERR_LIMIT)
            fp4_fail(err, st, t->name, NULL, "tok.decode-limit",
                     "the decoder's Replace steps make more than %u bytes of %zu ids", TOK_MAX_OUT, n);
        return st;
    }
    if (!out.p && tok_buf_add(&out, "", 0))
        return fp4_fail(err, FP4_ERR_NOMEM, t->name, NULL, "tok.nomem", "out of memory");
    *text = out.p;
    *len = out.n;
    return FP4_OK;
}

/* ---- streaming ---- */
struct fp4_detok_stream {
    const fp4_tokenizer *t;
    unsigned flags;
    tok_buf pending; /* raw bytes not yet emitted */
    tok_buf out;     /* the last result */
    tok_buf tmp;
    int32_t strip_left; /* Strip start: content characters still to drop at the stream start */
    int strip;          /* index of the Strip step, -1 */
    bool started;       /* something other than stripped characters has been produced */
    bool in_group;      /* inside a run of <0xXX> tokens (ByteFallback) */
    size_t group_at, group_n;
    bool bf_bom;        /* ByteFallback present: a run's leading BOM is dropped */
    size_t n_tok;       /* strings decoded so far (WordPiece: the first has no space before it) */
};

/* Streams follow decode exactly for step lists of the form
 *   Replace* [ByteLevel | ByteFallback] [Fuse [Strip(start, stop = 0)] | Strip(first only, stop = 0)]
 * (every tokenizer this library loads from GGUF, and the common tokenizer.json ones); others are
 * FP4_ERR_UNSUPPORTED. */
fp4_status fp4_detok_stream_create(const fp4_tokenizer *t, unsigned flags, fp4_detok_stream **out) {
    if (!t || !out) return FP4_ERR_INVALID_ARG;
    *out = NULL;
    if (!t->has_decoder) return FP4_ERR_UNSUPPORTED;
    int k = 0;
    while (k < t->n_dec && t->dec[k].kind == TD_REPLACE) k++;
    if (k < t->n_dec && (t->dec[k].kind == TD_BYTELEVEL || t->dec[k].kind == TD_BYTEFALLBACK)) k++;
    if (k < t->n_dec && t->dec[k].kind == TD_FUSE) {
        k++;
        if (k < t->n_dec && t->dec[k].kind == TD_STRIP && t->dec[k].stop == 0) k++;
    } else if (k < t->n_dec && t->dec[k].kind == TD_STRIP && t->dec[k].first_only && t->dec[k].stop == 0)
        k++; /* Metaspace's: the first string's leading characters, as at the start of a fused text */
    if (k == 0 && t->n_dec == 1 && t->dec[0].kind == TD_WORDPIECE) k = 1; /* string by string */
    if (k != t->n_dec) return FP4_ERR_UNSUPPORTED;
    fp4_detok_stream *s = calloc(1, sizeof *s);
    if (!s) return FP4_ERR_NOMEM;
    s->t = t;
    s->flags = flags & FP4_TOK_SKIP_SPECIAL;
    s->strip = -1;
    for (k = 0; k < t->n_dec; k++) {
        if (t->dec[k].kind == TD_STRIP) {
            s->strip_left = t->dec[k].start;
            s->strip = k;
        }
        if (t->dec[k].kind == TD_BYTEFALLBACK) s->bf_bom = true;
    }
    *out = s;
    return FP4_OK;
}

void fp4_detok_stream_free(fp4_detok_stream *s) {
    if (!s) return;
    free(s->pending.p);
    free(s->out.p);
    free(s->tmp.p);
    free(s);
}

/* the bytes one token adds, through the steps other than Fuse/Strip */
static fp4_status token_bytes(fp4_detok_stream *s, int32_t id, tok_buf *o, bool *is_byte) {
    const fp4_tokenizer *t = s->t;
    bool added = (t->flags[id] & TOKF_ADDED) != 0;
    tok_buf cur = {0}, nxt = {0};
    fp4_status st = tok_buf_add(&cur, tok_str(t, t->text[id]), t->text[id].len);
    bool raw = false;
    *is_byte = false;
    for (int k = 0; !st && k < t->n_dec && !raw; k++) {
        const tok_dec *d = &t->dec[k];
        nxt.n = 0;
        if (d->kind == TD_BYTELEVEL) {
            if (added) continue;
            st = bytelevel_raw(cur.p, cur.n, &nxt);
            raw = true;
        } else if (d->kind == TD_BYTEFALLBACK) {
            int v = byte_token(cur.p, cur.n);
            if (v < 0) continue;
            uint8_t c = (uint8_t)v;
            st = tok_buf_add(&nxt, &c, 1);
            raw = true;
            *is_byte = true;
        } else if (d->kind == TD_REPLACE) {
            st = tok_replace_all(cur.p, cur.n, tok_str(t, d->a), d->a.len, tok_str(t, d->b), d->b.len, &nxt,
                                 TOK_MAX_OUT);
        } else if (d->kind == TD_WORDPIECE) {
            st = wordpiece_one(t, d, s->n_tok, cur.p, cur.n, &nxt);
        } else continue;
        tok_buf x = cur;
        cur = nxt;
        nxt = x;
    }
    if (!st) st = tok_buf_add(o, cur.p, cur.n);
    free(cur.p);
    free(nxt.p);
    return st;
}

static fp4_status emit(fp4_detok_stream *s, bool all, const char **out, size_t *len) {
    size_t n = s->pending.n, keep = n;
    const uint8_t *p = (const uint8_t *)s->pending.p;
    if (!all) { /* hold back a character cut short by the end */
        keep = n;
        for (size_t back = 1; back <= 3 && back <= n; back++) {
            size_t i = n - back;
            if ((p[i] & 0xC0) == 0x80) continue;
            int l = tok_utf8_valid_len(p + i, back);
            if (l < 0 && (size_t)(-l) == back) keep = i;
            break;
        }
        if (s->in_group && s->bf_bom && s->group_n < 3 && s->group_at < keep) keep = s->group_at;
    }
    s->out.n = 0;
    fp4_status st = tok_buf_lossy(&s->out, p, keep, false);
    if (st) return st;
    if (s->strip >= 0 && !s->started) { /* Strip: up to start content characters at the very beginning */
        const tok_dec *d = &s->t->dec[s->strip];
        size_t a = 0;
        while (s->strip_left > 0 && a + d->a.len <= s->out.n &&
               !memcmp(s->out.p + a, tok_str(s->t, d->a), d->a.len)) {
            a += d->a.len;
            s->strip_left--;
        }
        memmove(s->out.p, s->out.p + a, s->out.n - a + 1);
        s->out.n -= a;
        if (s->out.n) s->started = true;
    }
    if (n > keep) memmove(s->pending.p, s->pending.p + keep, n - keep); /* p is NULL while nothing pends */
    s->pending.n = n - keep;
    if (s->in_group) s->group_at = s->group_at >= keep ? s->group_at - keep : 0;
    *out = s->out.p;
    *len = s->out.n;
    return FP4_OK;
}

fp4_status fp4_detok_stream_push(fp4_detok_stream *s, int32_t id, const char **out, size_t *len,
                                 fp4_error *err) {
    if (!s || !out || !len) return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "tok.arg", "NULL argument");
    fp4_status st = check_id(s->t, id, 0, err);
    if (st) return st;
    if ((s->flags & FP4_TOK_SKIP_SPECIAL) && (s->t->flags[id] & TOKF_SPECIAL)) {
        s->out.n = 0;
        if (tok_buf_add(&s->out, "", 0))
            return fp4_fail(err, FP4_ERR_NOMEM, s->t->name, NULL, "tok.nomem", "out of memory");
        *out = s->out.p;
        *len = 0;
        return FP4_OK;
    }
    s->tmp.n = 0;
    bool is_byte;
    st = token_bytes(s, id, &s->tmp, &is_byte);
    s->n_tok++;
    if (st)
        return fp4_fail(err, st, s->t->name, NULL, st == FP4_ERR_LIMIT ? "tok.decode-limit" : "tok.nomem",
                        st == FP4_ERR_LIMIT ? "the decoder's Replace steps make too many bytes of id %d"
                                            : "out of memory decoding id %d", (int)id);
    if (!is_byte) s->in_group = false;
    else if (!s->in_group) {
        s->in_group = true;
        s->group_at = s->pending.n;
        s->group_n = 0;
    }
    const char *b = s->tmp.p;
    size_t n = s->tmp.n;
    if ((st = tok_buf_add(&s->pending, b, n)))
        return fp4_fail(err, st, s->t->name, NULL, "tok.nomem", "out of memory");
    if (s->in_group && s->bf_bom) {
        s->group_n += n;
        if (s->group_n >= 3 && s->group_n - n < 3 && s->pending.n >= s->group_at + 3 &&
            !memcmp(s->pending.p + s->group_at, "\xEF\xBB\xBF", 3)) {
            memmove(s->pending.p + s->group_at, s->pending.p + s->group_at + 3,
                    s->pending.n - s->group_at - 3);
            s->pending.n -= 3;
        }
    }
    return emit(s, false, out, len);
}

fp4_status fp4_detok_stream_flush(fp4_detok_stream *s, const char **out, size_t *len) {
    if (!s || !out || !len) return FP4_ERR_INVALID_ARG;
    s->in_group = false;
    return emit(s, true, out, len);
}
