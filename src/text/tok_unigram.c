/* tok_unigram.c — the Unigram model (SentencePiece's): scored pieces; each pre-tokenized piece is cut
 * where the sum of the pieces' scores is highest (Viterbi over a byte trie of the pieces, forward,
 * the first best path into each position kept); a character no piece of one character covers is the
 * unknown token at the lowest score less 10; a run of unknowns is one token, spelled as <0xXX> byte
 * tokens with byte_fallback (when all of them exist), else the unknown id. This is how the Rust
 * library (tokenizers 0.22, models/unigram) encodes; the JavaScript reference cuts the same way. */
#include "tok_impl.h"
#include <jansson.h>
#include <math.h>
#include <stdlib.h>

#define UNK_PENALTY 10.0
#define TRIE_MAX_NODES ((1 << 24) - 2) /* node << 8 | byte below UINT32_MAX: never the empty slot */

void tok_trie_free(tok_trie *tr) {
    free(tr->slot);
    free(tr->piece);
    memset(tr, 0, sizeof *tr);
}

static inline uint32_t trie_hash(uint32_t k) {
    k ^= k >> 16;
    k *= 0x7FEB352Du;
    k ^= k >> 15;
    k *= 0x846CA68Bu;
    return k ^ (k >> 16);
}

static inline int32_t trie_child(const tok_trie *tr, int32_t node, uint8_t b) {
    if (node == 0) return tr->root[b];
    uint32_t k = (uint32_t)node << 8 | b;
    for (uint32_t i = trie_hash(k) & tr->mask;; i = (i + 1) & tr->mask) {
        uint64_t e = tr->slot[i];
        if ((uint32_t)(e >> 32) == k) return (int32_t)(uint32_t)e;
        if (e == UINT64_MAX) return -1;
    }
}

static fp4_status trie_grow(tok_trie *tr) {
    uint32_t cap = tr->mask ? (tr->mask + 1) * 2 : 1u << 12;
    uint64_t *slot = malloc((size_t)cap * sizeof *slot);
    if (!slot) return FP4_ERR_NOMEM;
    memset(slot, 0xFF, (size_t)cap * sizeof *slot);
    for (uint32_t i = 0; tr->mask && i <= tr->mask; i++) {
        if (tr->slot[i] == UINT64_MAX) continue;
        uint32_t j = trie_hash((uint32_t)(tr->slot[i] >> 32)) & (cap - 1);
        while (slot[j] != UINT64_MAX) j = (j + 1) & (cap - 1);
        slot[j] = tr->slot[i];
    }
    free(tr->slot);
    tr->slot = slot;
    tr->mask = cap - 1;
    return FP4_OK;
}

/* the child of node by b, made if absent */
static fp4_status trie_step(tok_trie *tr, int32_t node, uint8_t b, size_t *cap_nodes, int32_t *out) {
    int32_t c = trie_child(tr, node, b);
    if (c >= 0) {
        *out = c;
        return FP4_OK;
    }
    if (tr->n >= TRIE_MAX_NODES) return FP4_ERR_LIMIT;
    if ((size_t)tr->n == *cap_nodes) {
        size_t nc = *cap_nodes * 2;
        int32_t *p = realloc(tr->piece, nc * sizeof *p);
        if (!p) return FP4_ERR_NOMEM;
        tr->piece = p;
        *cap_nodes = nc;
    }
    c = tr->n++;
    tr->piece[c] = -1;
    if (node == 0) tr->root[b] = c;
    else {
        if (((size_t)tr->n_edges + 1) * 4 > ((size_t)tr->mask + 1) * 3 && trie_grow(tr)) return FP4_ERR_NOMEM;
        uint32_t k = (uint32_t)node << 8 | b, i = trie_hash(k) & tr->mask;
        while (tr->slot[i] != UINT64_MAX) i = (i + 1) & tr->mask;
        tr->slot[i] = (uint64_t)k << 32 | (uint32_t)c;
        tr->n_edges++;
    }
    *out = c;
    return FP4_OK;
}

#define FAIL(code, field, rule, ...) fp4_fail(err, code, name, field, rule, __VA_ARGS__)

fp4_status tok_unigram_vocab(fp4_tokenizer *t, const void *model, const char *name, fp4_error *err) {
    json_t *m = (json_t *)model, *vocab = json_object_get(m, "vocab"), *unk = json_object_get(m, "unk_id");
    size_t n = json_array_size(vocab);
    if (!unk || json_is_null(unk))
        return FAIL(FP4_ERR_UNSUPPORTED, "model.unk_id", "tok.unsupported",
                    "a Unigram model without unk_id is not supported (an unknown character has no id)");
    if (!json_is_integer(unk) || json_integer_value(unk) < 0 || (size_t)json_integer_value(unk) >= n)
        return FAIL(FP4_ERR_FORMAT, "model.unk_id", "tok.id-range", "unk_id is not a piece's index");
    t->uscore = malloc((n ? n : 1) * sizeof *t->uscore);
    if (!t->uscore) return FAIL(FP4_ERR_NOMEM, NULL, "tok.nomem", "out of memory");
    double lo = INFINITY;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(vocab, i), *s = json_array_get(e, 0), *sc = json_array_get(e, 1);
        if (json_array_size(e) != 2 || !json_is_string(s) || !json_is_number(sc) ||
            !isfinite(json_number_value(sc)))
            return FAIL(FP4_ERR_FORMAT, "model.vocab", "tok.json-type",
                        "Unigram piece %zu is not [string, finite number]", i);
        size_t kl = json_string_length(s);
        if (kl > FP4_TOK_MAX_TOKEN_BYTES)
            return FAIL(FP4_ERR_LIMIT, "model.vocab", "tok.token-length", "a %zu-byte piece", kl);
        if (kl == 0) return FAIL(FP4_ERR_FORMAT, "model.vocab", "tok.token-empty", "an empty piece (%zu)", i);
        if (tok_arena_add(t, json_string_value(s), kl, &t->text[i]))
            return FAIL(FP4_ERR_NOMEM, NULL, "tok.nomem", "out of memory");
        t->flags[i] = TOKF_PRESENT | TOKF_MODEL;
        t->uscore[i] = json_number_value(sc);
        if (t->uscore[i] < lo) lo = t->uscore[i];
    }
    t->n_pieces = (int32_t)n;
    t->unk = (int32_t)json_integer_value(unk);
    t->unk_score = lo - UNK_PENALTY;
    json_t *bf = json_object_get(m, "byte_fallback");
    t->byte_fallback = json_is_true(bf);
    return FP4_OK;
}

fp4_status tok_unigram_build(fp4_tokenizer *t, const char *name, fp4_error *err) {
    tok_trie *tr = &t->trie;
    size_t cap_nodes = 1024;
    tr->piece = malloc(cap_nodes * sizeof *tr->piece);
    if (!tr->piece) return FAIL(FP4_ERR_NOMEM, NULL, "tok.nomem", "out of memory");
    tr->piece[0] = -1;
    tr->n = 1;
    for (int b = 0; b < 256; b++) tr->root[b] = -1;
    fp4_status st = trie_grow(tr);
    for (int32_t id = 0; !st && id < t->n_pieces; id++) {
        const uint8_t *s = (const uint8_t *)tok_str(t, t->text[id]);
        int32_t node = 0;
        for (uint32_t i = 0; !st && i < t->text[id].len; i++)
            st = trie_step(tr, node, s[i], &cap_nodes, &node);
        if (!st) tr->piece[node] = id;
    }
    if (st == FP4_ERR_LIMIT)
        return FAIL(st, "model.vocab", "tok.limit", "the Unigram pieces make more than %d trie nodes",
                    TRIE_MAX_NODES);
    if (st) return FAIL(FP4_ERR_NOMEM, NULL, "tok.nomem", "out of memory");
    return FP4_OK;
}

void tok_uni_scratch_free(tok_uni_scratch *u) {
    free(u->score);
    free(u->from);
    free(u->id);
    memset(u, 0, sizeof *u);
}

static fp4_status scratch_reserve(tok_uni_scratch *u, size_t n) {
    if (n <= u->cap) return FP4_OK;
    size_t cap = n < 256 ? 256 : n + n / 2;
    double *s = realloc(u->score, cap * sizeof *s);
    if (s) u->score = s;
    int32_t *f = s ? realloc(u->from, cap * sizeof *f) : NULL;
    if (f) u->from = f;
    int32_t *d = f ? realloc(u->id, cap * sizeof *d) : NULL;
    if (!d) return FP4_ERR_NOMEM;
    u->id = d;
    u->cap = cap;
    return FP4_OK;
}

/* one output token of the best path, w[a, b): a piece's id, or a fused run of unknowns */
static fp4_status emit(const fp4_tokenizer *t, const char *w, size_t a, size_t b, int32_t id, bool unk,
                       tok_ivec *out) {
    if (!unk) return tok_ivec_push(out, id);
    int32_t found = tok_smap_find(t, &t->by_text, t->text, w + a, b - a);
    if (found >= 0) return tok_ivec_push(out, found);
    bool bytes = t->byte_fallback;
    for (size_t i = a; bytes && i < b; i++) bytes = t->byte_id[(uint8_t)w[i]] >= 0;
    if (!bytes) return tok_ivec_push(out, t->unk);
    fp4_status st = FP4_OK;
    for (size_t i = a; !st && i < b; i++) st = tok_ivec_push(out, t->byte_id[(uint8_t)w[i]]);
    return st;
}

fp4_status tok_unigram_word(const fp4_tokenizer *t, tok_uni_scratch *u, const char *w, size_t n,
                            tok_ivec *out) {
    if (n == 0) return FP4_OK;
    if (n >= (size_t)INT32_MAX) return FP4_ERR_LIMIT;
    fp4_status st = scratch_reserve(u, n + 1);
    if (st) return st;
    const tok_trie *tr = &t->trie;
    double *best = u->score;
    int32_t *from = u->from, *bid = u->id;
    for (size_t i = 0; i <= n; i++) from[i] = -1;
    best[0] = 0;
    for (size_t at = 0; at < n;) {
        uint32_t cp;
        size_t mb = (size_t)tok_utf8_dec((const uint8_t *)w + at, n - at, &cp);
        const double here = best[at];
        bool single = false;
        int32_t node = tr->root[(uint8_t)w[at]];
        for (size_t k = at + 1; node >= 0; k++) {
            int32_t id = tr->piece[node];
            if (id >= 0) {
                double sc = t->uscore[id] + here;
                if (from[k] < 0 || sc > best[k]) best[k] = sc, from[k] = (int32_t)at, bid[k] = id;
                if (k - at == mb) single = true;
            }
            if (k == n) break;
            node = trie_child(tr, node, (uint8_t)w[k]);
        }
        if (!single) {
            double sc = t->unk_score + here;
            size_t k = at + mb;
            if (from[k] < 0 || sc > best[k]) best[k] = sc, from[k] = (int32_t)at, bid[k] = -1;
        }
        at += mb;
    }
    /* back from the end: the path's tokens in reverse, unknown runs fused; then emitted in order
     * (the reversed list reuses best[] as int32 pairs would not fit: a second pass over from[]) */
    size_t n_tok = 0;
    for (size_t e = n; e > 0;) {
        size_t s = (size_t)from[e];
        bool unk = bid[e] < 0 || bid[e] == t->unk;
        if (unk)
            while (s > 0 && (bid[s] < 0 || bid[s] == t->unk)) s = (size_t)from[s];
        n_tok++;
        e = s;
    }
    /* ends of the tokens, in order, in the low half of score[] reused as size_t */
    size_t *ends = (size_t *)(void *)best; /* best[] is no longer read */
    _Static_assert(sizeof(size_t) <= sizeof(double), "ends fit in the scores' array");
    size_t k = n_tok;
    for (size_t e = n; e > 0;) {
        size_t s = (size_t)from[e];
        bool unk = bid[e] < 0 || bid[e] == t->unk;
        if (unk)
            while (s > 0 && (bid[s] < 0 || bid[s] == t->unk)) s = (size_t)from[s];
        ends[--k] = e;
        e = s;
    }
    for (size_t i = 0, a = 0; !st && i < n_tok; i++) {
        size_t b = ends[i];
        bool unk = bid[b] < 0 || bid[b] == t->unk;
        st = emit(t, w, a, b, bid[b], unk, out);
        a = b;
    }
    return st;
}
