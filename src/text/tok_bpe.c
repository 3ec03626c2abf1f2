/* tok_bpe.c — the BPE model on one pre-tokenized word.
 * Symbols start as bytes (byte-level) or code points (SentencePiece-style); the adjacent pair with
 * the lowest merge rank merges first, the leftmost among equal ranks (a binary heap keyed by
 * rank << 32 | position, stale entries skipped on pop). GGUF "llama" files without merges use
 * llama.cpp's rule instead: any adjacent pair whose concatenation is a token, highest score first.
 * Symbols left without a token become <0xXX> byte tokens (byte_fallback) or the unknown token. */
#include "tok_impl.h"
#include <stdlib.h>

typedef struct sym {
    int32_t id, prev, next;
    uint32_t off, len;
} sym;

/* a candidate merge: rank << 32 | left position, and what it was made from, so that a stale
 * entry is recognised without a second lookup */
typedef struct cand {
    uint64_t key;
    int32_t r, lid, rid, out;
} cand;

typedef struct heap {
    cand *k;
    size_t n;
} heap;

static void heap_push(heap *h, cand c) {
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (h->k[p].key <= c.key) break;
        h->k[i] = h->k[p];
        i = p;
    }
    h->k[i] = c;
}

static cand heap_pop(heap *h) {
    cand top = h->k[0], last = h->k[--h->n];
    size_t i = 0, n = h->n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && h->k[c + 1].key < h->k[c].key) c++;
        if (h->k[c].key >= last.key) break;
        h->k[i] = h->k[c];
        i = c;
    }
    if (n) h->k[i] = last;
    return top;
}

static inline uint32_t score_key(float f) { /* higher score -> smaller key */
    uint32_t u;
    memcpy(&u, &f, 4);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ~u;
}

void tok_pair_cache_init(tok_pair_cache *c) {
    for (int i = 0; i < TOK_PAIR_CACHE; i++) c->e[i].key = UINT64_MAX;
}

static bool pair(const fp4_tokenizer *t, tok_pair_cache *pc, const char *w, const sym *s, int32_t l,
                 uint32_t *rank, int32_t *out) {
    int32_t r = s[l].next;
    if (r < 0) return false;
    if (!t->use_scores) {
        if (s[l].id < 0 || s[r].id < 0) return false;
        if (!pc) return tok_mmap_get(&t->merges, s[l].id, s[r].id, rank, out);
        uint64_t k = ((uint64_t)(uint32_t)s[l].id << 32) | (uint32_t)s[r].id;
        tok_mslot *e = &pc->e[(uint32_t)(k * 0x9E3779B97F4A7C15ull >> 52) & (TOK_PAIR_CACHE - 1)];
        if (e->key != k) {
            e->key = k;
            if (!tok_mmap_get(&t->merges, s[l].id, s[r].id, &e->rank, &e->out)) e->rank = UINT32_MAX;
        }
        *rank = e->rank;
        *out = e->out;
        return e->rank != UINT32_MAX;
    }
    int32_t id = tok_smap_find(t, &t->by_text, t->text, w + s[l].off, (size_t)s[l].len + s[r].len);
    if (id < 0) return false;
    *rank = score_key(t->scores[id]);
    *out = id;
    return true;
}

static fp4_status emit_unknown(const fp4_tokenizer *t, const char *w, const sym *s, tok_ivec *out) {
    if (t->byte_fallback) {
        bool all = true;
        for (uint32_t i = 0; i < s->len; i++) all = all && t->byte_id[(uint8_t)w[s->off + i]] >= 0;
        if (all) {
            for (uint32_t i = 0; i < s->len; i++)
                if (tok_ivec_push(out, t->byte_id[(uint8_t)w[s->off + i]])) return FP4_ERR_NOMEM;
            return FP4_OK;
        }
    }
    return t->unk >= 0 ? tok_ivec_push(out, t->unk) : FP4_OK;
}

fp4_status tok_bpe_word(const fp4_tokenizer *t, tok_pair_cache *pc, const char *w, size_t n, tok_ivec *out) {
    if (n && t->ignore_merges) {
        int32_t id = t->kind == FP4_TOK_BYTE_BPE ? tok_smap_find(t, &t->by_raw, t->raw, w, n)
                                                 : tok_smap_find(t, &t->by_text, t->text, w, n);
        if (id >= 0) return tok_ivec_push(out, id);
    }
    return tok_bpe_merges(t, pc, w, n, out);
}

fp4_status tok_bpe_merges(const fp4_tokenizer *t, tok_pair_cache *pc, const char *w, size_t n,
                          tok_ivec *out) {
    if (n == 0) return FP4_OK;
    if (n > INT32_MAX / 2) return FP4_ERR_LIMIT;
    sym stack_s[128];
    cand stack_h[256];
    sym *s = stack_s;
    heap h = {stack_h, 0};
    if (n > 128) {
        s = malloc(n * sizeof *s);
        h.k = malloc(2 * n * sizeof *h.k);
        if (!s || !h.k) {
            if (s != stack_s) free(s);
            if (h.k != stack_h) free(h.k);
            return FP4_ERR_NOMEM;
        }
    }
    int32_t ns = 0;
    if (t->kind == FP4_TOK_BYTE_BPE) {
        for (size_t i = 0; i < n; i++)
            s[ns++] = (sym){t->byte_id[(uint8_t)w[i]], (int32_t)i - 1, (int32_t)i + 1, (uint32_t)i, 1};
    } else {
        for (size_t i = 0; i < n;) {
            uint32_t cp;
            int l = tok_utf8_dec((const uint8_t *)w + i, n - i, &cp);
            int32_t id = cp < 65536 ? t->cp_id[cp] : tok_smap_find(t, &t->by_text, t->text, w + i, (size_t)l);
            s[ns] = (sym){id, ns - 1, ns + 1, (uint32_t)i, (uint32_t)l};
            ns++;
            i += (size_t)l;
        }
    }
    s[ns - 1].next = -1;
    size_t hcap = n > 128 ? 2 * n : 256;
    uint32_t rank;
    int32_t mid;
#define CAND(L) ((cand){((uint64_t)rank << 32) | (uint32_t)(L), s[L].next, s[L].id, s[s[L].next].id, mid})
    for (int32_t i = 0; i + 1 < ns; i++)
        if (pair(t, pc, w, s, i, &rank, &mid)) heap_push(&h, CAND(i));
    fp4_status st = FP4_OK;
    while (h.n) {
        cand c = heap_pop(&h);
        int32_t l = (int32_t)(uint32_t)c.key, r = c.r;
        /* stale: the left symbol was merged away, or either side changed since the push */
        if (s[l].len == 0 || s[l].next != r || s[l].id != c.lid || s[r].id != c.rid) continue;
        s[l].id = c.out;
        s[l].len += s[r].len;
        s[l].next = s[r].next;
        if (s[r].next >= 0) s[s[r].next].prev = l;
        s[r].len = 0;
        s[r].id = -2;
        if (h.n + 2 > hcap) {
            size_t nc = hcap * 2;
            cand *q = h.k == stack_h ? malloc(nc * sizeof *q) : realloc(h.k, nc * sizeof *q);
            if (!q) {
                st = FP4_ERR_NOMEM;
                break;
            }
            if (h.k == stack_h) memcpy(q, stack_h, h.n * sizeof *q);
            h.k = q;
            hcap = nc;
        }
        if (s[l].prev >= 0 && pair(t, pc, w, s, s[l].prev, &rank, &mid)) heap_push(&h, CAND(s[l].prev));
        if (pair(t, pc, w, s, l, &rank, &mid)) heap_push(&h, CAND(l));
    }
#undef CAND
    for (int32_t i = 0; !st && i >= 0 && i < ns; i = s[i].next) {
        if (s[i].id >= 0) st = tok_ivec_push(out, s[i].id);
        else if (t->kind == FP4_TOK_BYTE_BPE) st = t->unk >= 0 ? tok_ivec_push(out, t->unk) : FP4_OK;
        else st = emit_unknown(t, w, &s[i], out);
    }
    if (s != stack_s) free(s);
    if (h.k != stack_h) free(h.k);
    return st;
}
