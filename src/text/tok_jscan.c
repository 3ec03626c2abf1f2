/* tok_jscan.c — a bounded reader for the two large members of a tokenizer.json: model.vocab
 * ({"string": id, ...}) and model.merges (["a b", ...] or [["a", "b"], ...]).
 *
 * jansson builds a value, a hash entry and a string copy per vocabulary entry and per merge, and
 * frees them all again: ~90 % of loading a 150k-token tokenizer.json. tok_jscan walks the document
 * once, finds the two members by their path (root object -> "model" -> "vocab" / "merges"), reads
 * the vocabulary straight into the tokenizer (keys decoded into the arena, text[] and flags[] by
 * id, the spelling map from hashes taken as each key is decoded) and locates the merges (their
 * extent and an upper bound of their count); tok_jscan_merges later reads the merges strictly, in
 * order, checks them as the jansson pass does and inserts them (a merge that spells the next token
 * is compared in place, not decoded; the lookups of 64 merges at a time are prefetched in stages).
 * jansson parses everything else (tok_json.c hands it a copy of the document with the two values
 * replaced by {} and []), so the accepted language is jansson's.
 *
 * What is read is a strict subset of what jansson accepts, each string decoded as jansson decodes
 * it (escapes \" \\ \/ \b \f \n \r \t \uXXXX with surrogate pairs; raw UTF-8 validated; no control
 * characters). Outside that subset — a syntax error, a lone surrogate, U+0000 in a key (jansson
 * refuses it), a key twice (JSON_REJECT_DUPLICATES), an id that is not a plain integer of at most
 * 9 digits below FP4_TOK_MAX_VOCAB or that is given twice, an empty or over-long key, a merge of
 * another shape, more merges than counted, nesting deeper than TOK_JSCAN_DEPTH — the fast pass
 * fails, and so does it on any refusal of the loader's own rules: fp4_tokenizer_from_json then
 * runs the jansson-only pass, whose verdict and message stand. The fast pass succeeds only where
 * that pass would, with the same tables (tests/test_tok_jscan.c compares them).
 *
 * The walk outside the two members is lenient (strings, brackets and scalars skipped, not
 * checked): the jansson parse of the copy checks it. Where that parse succeeds, the walk saw the
 * same tokens jansson did (strings end at the same unescaped quote, scalars at the same
 * delimiter), so the values it replaced are the ones at model.vocab and model.merges; the end of
 * the merges, when guessed from the document's tail, is confirmed by the strict read ending there. */
#include "tok_impl.h"
#include <stdlib.h>

#define TOK_JSCAN_DEPTH 64

typedef struct scan {
    const uint8_t *s;
    size_t n, i;
} scan;

static inline bool is_ws(uint8_t c) {
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}
/* pretty-printed files put a newline and 6-12 spaces before every merge (and both its halves): a
 * run of spaces eight at a time, its end found in the last word (the first byte that differs from a
 * space: x ^ spaces has it as its lowest nonzero byte) */
static inline void skip_ws(scan *c) {
    const uint8_t *s = c->s;
    size_t i = c->i, n = c->n;
    const uint64_t spaces = 0x2020202020202020ull;
    while (i < n) {
        uint8_t b = s[i];
        if (b == ' ') {
            uint64_t w8 = spaces;
            while (i + 8 <= n && (memcpy(&w8, s + i, 8), w8 == spaces))
                i += 8;
            if (i + 8 <= n) {
                i += (size_t)__builtin_ctzll(w8 ^ spaces) >> 3;
                continue;
            }
            while (i < n && s[i] == ' ')
                i++;
        } else if (b == '\n' || b == '\r' || b == '\t')
            i++;
        else
            break;
    }
    c->i = i;
}

/* bytes that stand for themselves in a JSON string: 0x20-0x7F but '"' and '\\' */
#define P16 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1
#define Z16 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
static const uint8_t plain[256] = {
    Z16, Z16,                                                      /* 0x00-0x1F: control characters */
    1,   1,   0,   1,   1,   1,   1,   1,  1, 1, 1, 1, 1, 1, 1, 1, /* 0x22 '"' */
    P16, P16,                                                      /* 0x30-0x4F */
    1,   1,   1,   1,   1,   1,   1,   1,  1, 1, 1, 1, 0, 1, 1, 1, /* 0x5C '\\' */
    P16, P16,                                                      /* 0x60-0x7F */
    Z16, Z16, Z16, Z16, Z16, Z16, Z16, Z16};                       /* 0x80-0xFF: UTF-8, checked */
#undef P16
#undef Z16
static inline int peek(const scan *c) {
    return c->i < c->n ? c->s[c->i] : -1;
}

static int hex4(const uint8_t *p) {
    int v = 0;
    for (int k = 0; k < 4; k++) {
        uint8_t h = p[k];
        int d = h >= '0' && h <= '9'   ? h - '0'
                : h >= 'a' && h <= 'f' ? h - 'a' + 10
                : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                       : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* One JSON string at c->i (the opening quote) decoded into out[0..cap); *len its length.
 * false: not in the subset (or longer than cap); nothing else is reported. */
static bool get_string(scan *c, char *out, size_t cap, size_t *len, bool key) {
    const uint8_t *s = c->s;
    size_t i = c->i + 1, n = c->n, k = 0;
    /* every byte written consumes at least one byte read, so stopping the plain run at lim keeps
     * k <= cap (k <= i - (c->i + 1)); the multi-byte paths check */
    size_t lim = n - i > cap ? i + cap : n;
    for (;;) {
        while (i < lim && plain[s[i]])
            out[k++] = (char)s[i++];
        if (i >= n) return false; /* cut short */
        uint8_t b = s[i];
        if (b == '"') break;
        if (i >= lim) return false; /* longer than cap */
        if (b < 0x20) return false; /* a raw control character */
        if (b >= 0x80) {
            if (b >= 0xC2 && b <= 0xDF && i + 1 < n && (s[i + 1] & 0xC0) == 0x80) { /* the usual */
                if (cap - k < 2) return false;
                out[k] = (char)b;
                out[k + 1] = (char)s[i + 1];
                k += 2;
                i += 2;
                continue;
            }
            int l = tok_utf8_valid_len(s + i, n - i);
            if (l < 2 || (size_t)l > cap - k) return false;
            for (int q = 0; q < l; q++)
                out[k++] = (char)s[i + q];
            i += (size_t)l;
            continue;
        }
        /* an escape */
        if (i + 1 >= n) return false;
        static const char simple_in[] = "\"\\/bfnrt", simple_out[] = "\"\\/\b\f\n\r\t";
        const char *e = memchr(simple_in, s[i + 1], sizeof simple_in - 1);
        if (e) {
            if (k >= cap) return false;
            out[k++] = simple_out[e - simple_in];
            i += 2;
            continue;
        }
        if (s[i + 1] != 'u' || i + 6 > n) return false;
        int v = hex4(s + i + 2);
        if (v < 0) return false;
        i += 6;
        uint32_t cp = (uint32_t)v;
        if (cp >= 0xDC00 && cp <= 0xDFFF) return false; /* a lone low surrogate */
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (i + 6 > n || s[i] != '\\' || s[i + 1] != 'u') return false;
            int lo = hex4(s + i + 2);
            if (lo < 0xDC00 || lo > 0xDFFF) return false;
            cp = 0x10000u + ((cp - 0xD800u) << 10) + ((uint32_t)lo - 0xDC00u);
            i += 6;
        }
        if (cp == 0 && key) return false; /* jansson: "NUL byte in object key not supported" */
        if (cap - k < 4) return false;
        k += (size_t)tok_utf8_enc(cp, out + k);
    }
    c->i = i + 1;
    *len = k;
    return true;
}

/* A string, not decoded (lenient: jansson checks it in the copy). */
static bool skip_string(scan *c) {
    size_t i = c->i + 1;
    for (;;) {
        const uint8_t *q = memchr(c->s + i, '"', c->n - i);
        if (!q) return false;
        size_t j = (size_t)(q - c->s);
        size_t bs = 0; /* backslashes right before the quote: an odd count escapes it */
        while (j - bs > i && c->s[j - bs - 1] == '\\')
            bs++;
        if (!(bs & 1)) {
            c->i = j + 1;
            return true;
        }
        i = j + 1;
    }
}

/* Any value, not decoded (lenient). */
static bool skip_value(scan *c) {
    int b = peek(c);
    if (b == '"') return skip_string(c);
    if (b == '{' || b == '[') {
        size_t depth = 0;
        while (c->i < c->n) {
            uint8_t x = c->s[c->i];
            if (x == '"') {
                if (!skip_string(c)) return false;
                continue;
            }
            if (x == '{' || x == '[') {
                if (++depth > TOK_JSCAN_DEPTH) return false;
            } else if (x == '}' || x == ']') {
                if (--depth == 0) {
                    c->i++;
                    return true;
                }
            }
            c->i++;
        }
        return false;
    }
    size_t i0 = c->i;
    while (c->i < c->n && !is_ws(c->s[c->i]) && !strchr(",}]:[{\"", c->s[c->i]))
        c->i++;
    return c->i > i0;
}

/* After a member or element: true with *more set at ',', false at the closer or on anything else. */
static bool next_item(scan *c, int closer, bool *more) {
    skip_ws(c);
    int b = peek(c);
    c->i++;
    if (b == ',') {
        *more = true;
        return true;
    }
    *more = false;
    return b == closer;
}

/* One merge at c->i: "a b" or ["a", "b"], decoded into buf with a and b contiguous (the space
 * of "a b" closed up); *form TOK_JM_BADSTR when a string has no or more than one space. */
static bool merge_entry(scan *c, char *buf, size_t *an, size_t *bn, int *form) {
    size_t xn, yn;
    if (peek(c) == '"') {
        if (!get_string(c, buf, TOK_JM_BUF, &xn, false)) return false;
        const char *sp = memchr(buf, ' ', xn);
        *form = TOK_JM_PAIR;
        *an = *bn = 0;
        if (!sp || memchr(sp + 1, ' ', xn - (size_t)(sp - buf) - 1)) {
            *form = TOK_JM_BADSTR;
            return true;
        }
        *an = (size_t)(sp - buf);
        *bn = xn - *an - 1;
        memmove(buf + *an, sp + 1, *bn);
        return true;
    }
    if (peek(c) != '[') return false;
    c->i++;
    skip_ws(c);
    if (peek(c) != '"' || !get_string(c, buf, FP4_TOK_MAX_TOKEN_BYTES, &xn, false)) return false;
    skip_ws(c);
    if (peek(c) != ',') return false;
    c->i++;
    skip_ws(c);
    if (peek(c) != '"' || !get_string(c, buf + xn, FP4_TOK_MAX_TOKEN_BYTES, &yn, false)) return false;
    skip_ws(c);
    if (peek(c) != ']') return false;
    c->i++;
    *an = xn;
    *bn = yn;
    *form = TOK_JM_PAIR;
    return true;
}

/* The merges array at c->i: its extent and its element count (commas at its own depth), not
 * checked: tok_jscan_merges reads it strictly, after the vocabulary maps exist. */
static bool skip_merges(scan *c, size_t *count) {
    size_t depth = 0, commas = 0;
    bool empty = true;
    for (;;) {
        skip_ws(c);
        if (c->i >= c->n) return false;
        uint8_t x = c->s[c->i];
        if (x == '"') {
            if (!skip_string(c)) return false;
            empty = false;
            continue;
        }
        if (x == '[' || x == '{') {
            if (++depth > TOK_JSCAN_DEPTH) return false;
            if (depth > 1) empty = false;
        } else if (x == ']' || x == '}') {
            if (--depth == 0) {
                c->i++;
                *count = empty ? 0 : commas + 1;
                return true;
            }
        } else if (x == ',' && depth == 1)
            commas++;
        else if (depth == 1)
            empty = false;
        c->i++;
    }
}

/* Hugging Face writes merges last in model and model last in the document: where the text ends
 * with "] } }" (and whitespace), the "]" is taken for the end of the merges. A wrong guess is
 * caught by tok_jscan_merges, which must end exactly there. 0: not this layout. */
static size_t merges_end_guess(const scan *c) {
    static const char tail[] = "}}]";
    size_t i = c->n;
    for (int k = 0; k < 3; k++) {
        while (i > c->i && is_ws(c->s[i - 1]))
            i--;
        if (i <= c->i + 1 || c->s[i - 1] != (uint8_t)tail[k]) return 0;
        i--;
    }
    return i + 1;
}

/* An upper bound of the merges in [c->i, end): quotes / 4 when the first is a pair, else / 2
 * (escaped quotes only raise it). tok_jscan_merges refuses more. */
static size_t count_merges(const scan *c, size_t end) {
    scan f = *c;
    f.i++;
    skip_ws(&f);
    if (f.i >= end || f.s[f.i] == ']') return 0;
    /* the quotes, eight bytes at a time (memchr per quote is call-bound: one every ~12 bytes) */
    const uint64_t ones = 0x0101010101010101ull, low7 = 0x7F7F7F7F7F7F7F7Full;
    const uint8_t *p = c->s + c->i;
    size_t q = 0, i = 0, n = end - c->i;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        uint64_t x = w ^ (ones * '"');                         /* zero bytes where the quotes are */
        uint64_t z = (~(((x & low7) + low7) | x) >> 7) & ones; /* 1 in each of those bytes */
        q += (size_t)((z * ones) >> 56);                       /* their count (at most 8) */
    }
    for (; i < n; i++)
        q += p[i] == '"';
    return f.s[f.i] == '[' ? q / 4 : q / 2;
}

/* ---- the merges into t->merges, a chunk at a time ----
 * A merge's result is looked for first at the id after the previous result (Hugging Face's trainer
 * gives merge i the id base + i: a sequential read), then at the previous result itself (Llama 3's
 * later merges make each token again from other halves, in id order), else by its spelling; its
 * halves are then the first an and the last bn bytes of the result's spelling. The lookups of a chunk of
 * TOK_JM_CHUNK merges (hashed while the decoded bytes are at hand) go in stages that prefetch what
 * the next stage reads (the slots, the spans, the spellings, the merge slots), so that their cache
 * misses overlap instead of following one another; the pairs are inserted in order. */
#define TOK_JM_CHUNK 64
#define TOK_JM_SCRATCH (4 * TOK_JM_BUF)
typedef struct jm_ent {
    uint32_t ho, ha, hb; /* hashes of the result (looked up by spelling) and the halves: the low 32 bits */
    int32_t io, ia, ib;  /* io -1: to be looked up (its spelling at scratch + at) */
    uint32_t an, bn, at;
} jm_ent;
typedef struct jm_chunk {
    jm_ent e[TOK_JM_CHUNK];
    size_t ne, first; /* entries; the index of the first merge */
    size_t used;      /* of scratch: the spellings of the results to look up */
    bool deferred;    /* some io is -1 */
    int32_t last;     /* the last result of the chunk flushed last */
    char scratch[TOK_JM_SCRATCH];
} jm_chunk;

/* the slots, spans and spellings that lookups of these hashes will read, one stage after another
 * (the span and spelling of the first slot with the hash's tag) */
static void jm_prefetch(const fp4_tokenizer *t, const uint32_t *h, size_t nh) {
    const tok_smap *m = &t->by_text;
    int32_t id[2 * TOK_JM_CHUNK];
    for (size_t k = 0; k < nh; k++)
        __builtin_prefetch(&m->slot[h[k] & m->mask]);
    for (size_t k = 0; k < nh; k++) {
        uint32_t i = h[k] & m->mask;
        int32_t x = m->slot[i], tag = TOK_SMAP_TAG(h[k]);
        for (int p = 0; p < 3 && x >= 0 && (x & ~TOK_SMAP_ID_MASK) != tag; p++)
            x = m->slot[i = (i + 1) & m->mask];
        id[k] = x >= 0 && (x & ~TOK_SMAP_ID_MASK) == tag ? x & TOK_SMAP_ID_MASK : -1;
        if (id[k] >= 0) __builtin_prefetch(&t->text[id[k]]);
    }
    for (size_t k = 0; k < nh; k++)
        if (id[k] >= 0) __builtin_prefetch(t->arena + t->text[id[k]].off);
}

static bool jm_flush(fp4_tokenizer *t, jm_chunk *ch) {
    const tok_smap *m = &t->by_text;
    jm_ent *e = ch->e;
    uint32_t h[2 * TOK_JM_CHUNK];
    size_t nh = 0;
    if (ch->deferred) {
        for (size_t k = 0; k < ch->ne; k++)
            if (e[k].io < 0) h[nh++] = e[k].ho;
        jm_prefetch(t, h, nh);
        for (size_t k = 0; k < ch->ne; k++) {
            if (e[k].io >= 0) continue;
            e[k].io = tok_smap_find_h(t, m, t->text, ch->scratch + e[k].at, e[k].an + e[k].bn, e[k].ho);
            if (e[k].io < 0) return false; /* the result is not a token */
        }
    }
    nh = 0;
    for (size_t k = 0; k < ch->ne; k++) {
        h[nh++] = e[k].ha;
        h[nh++] = e[k].hb;
    }
    jm_prefetch(t, h, nh);
    for (size_t k = 0; k < ch->ne; k++) {
        const char *ab = tok_str(t, t->text[e[k].io]);
        e[k].ia = tok_smap_find_h(t, m, t->text, ab, e[k].an, e[k].ha);
        e[k].ib = tok_smap_find_h(t, m, t->text, ab + e[k].an, e[k].bn, e[k].hb);
        if (e[k].ia < 0 || e[k].ib < 0) return false;
        __builtin_prefetch(tok_mmap_slot(&t->merges, e[k].ia, e[k].ib), 1);
    }
    for (size_t k = 0; k < ch->ne; k++)
        if (!tok_mmap_put(&t->merges, e[k].ia, e[k].ib, (uint32_t)(ch->first + k), e[k].io)) return false;
    ch->last = e[ch->ne - 1].io;
    ch->first += ch->ne;
    ch->ne = ch->used = 0;
    ch->deferred = false;
    return true;
}

/* The merge at c->i when it spells w (the n bytes of a token: valid UTF-8) literally, as "a b" or
 * ["a", "b"] with a and b not empty and apart at a character boundary: c->i moves past it, *an is
 * a's length. Literally: no byte of w that a JSON string must escape (or, in "a b", a space), so each
 * string stands for its bytes, as get_string would decode them. false: c is left as it was and
 * merge_entry reads the merge. */
static inline bool literal_byte(uint8_t x) {
    return x >= 0x20 && x != '"' && x != '\\';
}
static bool merge_literal(scan *c, const uint8_t *w, size_t n, size_t *an) {
    scan d = *c;
    const uint8_t *s = d.s;
    size_t k = 0, split = 0;
    if (peek(&d) == '"') {
        for (d.i++; k < n; k++, d.i++) {
            if (d.i < d.n && s[d.i] == ' ' && !split && k > 0) {
                split = k;
                d.i++;
            }
            if (d.i >= d.n || !literal_byte(w[k]) || w[k] == ' ' || s[d.i] != w[k]) return false;
        }
        if (peek(&d) != '"') return false;
    } else if (peek(&d) == '[') {
        d.i++;
        skip_ws(&d);
        if (peek(&d) != '"') return false;
        for (d.i++; d.i < d.n && s[d.i] != '"'; k++, d.i++)
            if (k >= n || !literal_byte(w[k]) || s[d.i] != w[k]) return false;
        split = k;
        d.i++;
        skip_ws(&d);
        if (peek(&d) != ',') return false;
        d.i++;
        skip_ws(&d);
        if (peek(&d) != '"') return false;
        for (d.i++; k < n; k++, d.i++)
            if (d.i >= d.n || !literal_byte(w[k]) || s[d.i] != w[k]) return false;
        if (peek(&d) != '"') return false;
        d.i++;
        skip_ws(&d);
        if (peek(&d) != ']') return false;
    } else
        return false;
    if (split == 0 || split >= n || (w[split] & 0xC0) == 0x80) return false;
    c->i = d.i + 1; /* past the closing quote or bracket */
    *an = split;
    return true;
}

fp4_status tok_jscan_merges(fp4_tokenizer *t, const char *s, const tok_jbig *b, size_t *count) {
    scan c = {(const uint8_t *)s, b->merges_at[1], b->merges_at[0] + 1}; /* just past the [ */
    jm_chunk *ch = malloc(sizeof *ch);
    if (!ch) return FP4_ERR_NOMEM;
    ch->ne = ch->first = ch->used = 0;
    ch->deferred = false;
    size_t i = 0;
    int32_t next = 0; /* the id after the previous result (-1: not known yet) */
    fp4_status st = FP4_ERR_FORMAT;
    skip_ws(&c);
    *count = 0;
    if (peek(&c) == ']') {
        free(ch);
        return c.i + 1 == c.n ? FP4_OK : FP4_ERR_FORMAT;
    }
    for (bool more = true; more; i++) {
        size_t an = 0, bn, n = 0;
        int form;
        int32_t io = -1, cand[2] = {next, next - 1}; /* the next token, or the previous result again */
        const char *buf = NULL;
        skip_ws(&c);
        if (i >= b->n_merges) goto out;
        for (int q = 0; q < 2 && io < 0; q++) /* the usual: a candidate, spelt out */
            if (cand[q] >= 0 && cand[q] < t->n_vocab && (t->flags[cand[q]] & TOKF_MODEL) &&
                merge_literal(&c, (const uint8_t *)tok_str(t, t->text[cand[q]]), t->text[cand[q]].len, &an)) {
                io = cand[q];
                buf = tok_str(t, t->text[io]);
                n = t->text[io].len;
            }
        if (io < 0) {
            char *d = ch->scratch + ch->used;
            if (!merge_entry(&c, d, &an, &bn, &form) || form != TOK_JM_PAIR) goto out;
            buf = d;
            n = an + bn;
            for (int q = 0; q < 2 && io < 0; q++)
                if (cand[q] >= 0 && cand[q] < t->n_vocab && (t->flags[cand[q]] & TOKF_MODEL) &&
                    t->text[cand[q]].len == n && tok_bytes_eq(tok_str(t, t->text[cand[q]]), buf, n))
                    io = cand[q];
        }
        bn = n - an;
        jm_ent *e = &ch->e[ch->ne++];
        *e = (jm_ent){io < 0 ? (uint32_t)tok_hash(buf, n) : 0, (uint32_t)tok_hash(buf, an),
                      (uint32_t)tok_hash(buf + an, bn), io, -1, -1, (uint32_t)an, (uint32_t)bn,
                      (uint32_t)ch->used};
        if (io < 0) {
            ch->used += n;
            ch->deferred = true;
        }
        next = io < 0 ? -1 : io + 1;
        if (ch->ne == TOK_JM_CHUNK || TOK_JM_SCRATCH - ch->used < TOK_JM_BUF) {
            if (!jm_flush(t, ch)) goto out;
            next = ch->last + 1;
        }
        if (!next_item(&c, ']', &more)) goto out;
    }
    if (ch->ne && !jm_flush(t, ch)) goto out;
    *count = i;
    st = c.i == c.n ? FP4_OK : FP4_ERR_FORMAT;
out:
    free(ch);
    return st;
}

/* The vocabulary object at c->i, straight into t's tables: spellings into the arena, text[] and
 * flags[] by id, and each spelling's hash (for the map) into raw[] (as uint32_t[], until tok_finish
 * writes it): no array of its own to fault in. Gives up on what the jansson path reports (an id
 * out of range or given twice, an empty or over-long key) as well as on what jansson refuses. */
static bool scan_vocab(fp4_tokenizer *t, scan *c, tok_jbig *b) {
    const size_t key_max = FP4_TOK_MAX_TOKEN_BYTES;
    int32_t cap = 0, filled = 0; /* text[] and flags[] are set below filled */
    b->max_id = -1;
    c->i++; /* { */
    skip_ws(c);
    if (peek(c) == '}') {
        c->i++;
        return true;
    }
    for (bool more = true; more;) {
        skip_ws(c);
        size_t kl;
        if (t->arena_cap - t->arena_len < key_max + 1) { /* decoded straight into the arena */
            if (tok_arena_reserve(t, 2 * t->arena_cap + key_max + 1) ||
                t->arena_cap - t->arena_len < key_max + 1)
                return false;
        }
        char *key = t->arena + t->arena_len;
        if (peek(c) != '"' || !get_string(c, key, key_max, &kl, true) || kl == 0) return false;
        skip_ws(c);
        if (peek(c) != ':') return false;
        c->i++;
        skip_ws(c);
        /* the id: 0 or [1-9][0-9]{0,8}, then a delimiter (jansson's integer grammar, bounded) */
        size_t i0 = c->i;
        int64_t id = 0;
        while (c->i < c->n && c->s[c->i] >= '0' && c->s[c->i] <= '9' && c->i - i0 < 10)
            id = id * 10 + (c->s[c->i++] - '0');
        size_t nd = c->i - i0;
        if (nd == 0 || nd > 9 || (nd > 1 && c->s[i0] == '0') || id >= FP4_TOK_MAX_VOCAB) return false;
        if (c->i < c->n && !is_ws(c->s[c->i]) && c->s[c->i] != ',' && c->s[c->i] != '}') return false;
        if (id >= cap) { /* grow by doubling; t->n_vocab is set to max_id + 1 at the end */
            int64_t nc = cap ? (int64_t)cap * 2 : 4096;
            if (nc < id + 1) nc = id + 1;
            if (nc > FP4_TOK_MAX_VOCAB) nc = FP4_TOK_MAX_VOCAB;
            tok_span *x = realloc(t->text, (size_t)nc * sizeof *x);
            if (x) t->text = x;
            uint8_t *f = x ? realloc(t->flags, (size_t)nc) : NULL;
            if (f) t->flags = f;
            tok_span *r = f ? realloc(t->raw, (size_t)nc * sizeof *r) : NULL;
            if (!r) return false;
            t->raw = r;
            cap = (int32_t)nc;
        }
        if (id > filled) { /* ids skipped over are absent */
            memset(t->text + filled, 0, (size_t)(id - filled) * sizeof *t->text);
            memset(t->flags + filled, 0, (size_t)(id - filled));
        }
        if (id >= filled)
            filled = (int32_t)id + 1;
        else if (t->flags[id] & TOKF_PRESENT)
            return false;
        key[kl] = 0;
        ((uint32_t *)(void *)t->raw)[id] = (uint32_t)tok_hash(key, kl); /* while the key is at hand */
        t->text[id] = (tok_span){(uint32_t)t->arena_len, (uint32_t)kl};
        t->arena_len += kl + 1;
        t->flags[id] = TOKF_PRESENT | TOKF_MODEL;
        if (id > b->max_id) b->max_id = (int32_t)id;
        if (!next_item(c, '}', &more)) return false;
    }
    return true;
}

/* A member of an object at c->i: its key decoded into key[0..cap) (false: not in the subset). */
static bool member_key(scan *c, char *key, size_t cap, size_t *kl) {
    skip_ws(c);
    if (peek(c) != '"' || !get_string(c, key, cap, kl, true)) return false;
    skip_ws(c);
    if (peek(c) != ':') return false;
    c->i++;
    skip_ws(c);
    return true;
}

static bool key_is(const char *k, size_t kl, const char *want) {
    return kl == strlen(want) && !memcmp(k, want, kl);
}

static bool scan_model(fp4_tokenizer *t, scan *c, tok_jbig *b) {
    c->i++; /* { */
    skip_ws(c);
    if (peek(c) == '}') return false; /* no members: nothing to read */
    for (bool more = true; more;) {
        char key[64];
        size_t kl;
        if (!member_key(c, key, sizeof key, &kl)) return false;
        bool is_vocab = key_is(key, kl, "vocab"), is_merges = key_is(key, kl, "merges");
        size_t at = c->i;
        if (is_vocab && b->vocab_found) return false; /* a duplicate key: jansson's message */
        if (is_merges && b->merges_found) return false;
        if (is_vocab && peek(c) == '{') {
            if (!scan_vocab(t, c, b)) return false;
            b->vocab_at[0] = at;
            b->vocab_at[1] = c->i;
            b->vocab_found = true;
        } else if (is_merges && peek(c) == '[') {
            size_t end = merges_end_guess(c);
            if (end) { /* the usual layout: an upper bound of the count from the quotes */
                b->n_merges = count_merges(c, end);
                c->i = end;
            } else if (!skip_merges(c, &b->n_merges))
                return false;
            if (b->n_merges > (size_t)FP4_TOK_MAX_VOCAB * 2) return false;
            b->merges_at[0] = at;
            b->merges_at[1] = c->i;
            b->merges_found = true;
        } else if (is_vocab || is_merges || !skip_value(c))
            return false; /* a vocab that is not an object: jansson's path says so */
        if (!next_item(c, '}', &more)) return false;
    }
    return true;
}

bool tok_jscan(fp4_tokenizer *t, const char *s, size_t n, tok_jbig *b) {
    scan c = {(const uint8_t *)s, n, 0};
    memset(b, 0, sizeof *b);
    b->max_id = -1;
    skip_ws(&c);
    if (peek(&c) != '{') return false;
    c.i++;
    skip_ws(&c);
    bool model_seen = false;
    if (peek(&c) != '}')
        for (bool more = true; more;) {
            char key[64];
            size_t kl;
            if (!member_key(&c, key, sizeof key, &kl)) return false;
            if (key_is(key, kl, "model")) {
                if (model_seen || peek(&c) != '{' || !scan_model(t, &c, b)) return false;
                model_seen = true;
            } else if (!skip_value(&c))
                return false;
            if (!next_item(&c, '}', &more)) return false;
        }
    /* what follows the root is jansson's to judge (it parses the copy, tail included) */
    if (!b->vocab_found || !b->merges_found) return false;
    t->n_vocab = b->max_id + 1;
    /* a spelling twice is a duplicate key (jansson's refusal); the hashes are in raw[] (scan_vocab) */
    const uint32_t *hash = (const uint32_t *)(void *)t->raw;
    if (tok_smap_build_h(t, &t->by_text, t->text, TOKF_PRESENT | TOKF_MODEL, hash)) return false;
    t->by_text_ready = true;
    return true;
}
