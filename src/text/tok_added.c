/* tok_added.c — finding added tokens in text in linear time.
 *
 * The reference splits out added tokens leftmost first, the longest at a position. Trying every
 * added token at every position costs (text bytes) x (tokens) x (token bytes): 4 089 overlapping
 * tokens "ab", "aab", ... made 200 KB of "a" take half a minute. Here one Aho-Corasick automaton
 * over the tokens' spellings written backwards reads the text once from its end: after reading
 * s[i], the state's longest output is the longest token that starts at i. A left-to-right pass then
 * takes the leftmost, longest ones as before: the same sections for every input, in O(text + tokens).
 *
 * One automaton per pass (raw spellings; normalized spellings), each with two outputs per state:
 * among all its tokens, and among the non-special ones (special tokens are matched only on request).
 * Transitions: a dense table at the root (the frequent case: a byte that ends no token) and one
 * hash table of (state, byte) -> state for the rest. */
#include "tok_impl.h"
#include <stdlib.h>

static uint32_t ac_slot(uint64_t key, uint32_t mask) { return (uint32_t)tok_mix(key) & mask; }

static int32_t ac_get(const tok_ac *a, int32_t state, uint8_t c) {
    if (state == 0) return a->root[c];
    uint64_t k = ((uint64_t)(uint32_t)state << 8) | c;
    for (uint32_t i = ac_slot(k, a->mask);; i = (i + 1) & a->mask) {
        if (a->key[i] == k) return a->to[i];
        if (a->key[i] == UINT64_MAX) return -1;
    }
}

static void ac_put(tok_ac *a, int32_t state, uint8_t c, int32_t to) {
    if (state == 0) {
        a->root[c] = to;
        return;
    }
    uint64_t k = ((uint64_t)(uint32_t)state << 8) | c;
    uint32_t i = ac_slot(k, a->mask);
    while (a->key[i] != UINT64_MAX) i = (i + 1) & a->mask;
    a->key[i] = k;
    a->to[i] = to;
}

void tok_ac_free(tok_ac *a) {
    free(a->fail);
    free(a->out[0]);
    free(a->out[1]);
    free(a->key);
    free(a->to);
    memset(a, 0, sizeof *a);
}

static tok_span pass_span(const tok_added *a, int pass) { return pass ? a->norm : a->content; }
static bool in_pass(const tok_added *a, int pass) { return (bool)a->normalized == (bool)pass; }

/* doubles the hash table */
static bool ac_rehash(tok_ac *a) {
    size_t old = a->key ? (size_t)a->mask + 1 : 0, slots = old ? old * 2 : 1024;
    uint64_t *ok = a->key;
    int32_t *ot = a->to;
    a->key = malloc(slots * sizeof *a->key);
    a->to = malloc(slots * sizeof *a->to);
    if (!a->key || !a->to) {
        free(a->key), free(a->to);
        a->key = ok, a->to = ot;
        return false;
    }
    memset(a->key, 0xFF, slots * sizeof *a->key);
    a->mask = (uint32_t)(slots - 1);
    for (size_t i = 0; i < old; i++)
        if (ok[i] != UINT64_MAX) {
            uint32_t j = ac_slot(ok[i], a->mask);
            while (a->key[j] != UINT64_MAX) j = (j + 1) & a->mask;
            a->key[j] = ok[i];
            a->to[j] = ot[i];
        }
    free(ok);
    free(ot);
    return true;
}

/* per-state arrays of the build, grown with the trie */
typedef struct ac_tmp {
    int32_t *parent;
    uint8_t *via;
    uint32_t *depth;
    size_t cap;
} ac_tmp;

static bool ac_grow(tok_ac *a, ac_tmp *b) {
    size_t cap = b->cap ? b->cap * 2 : 1024;
    int32_t *p = realloc(b->parent, cap * sizeof *p), *o0 = NULL, *o1 = NULL;
    if (p) b->parent = p;
    uint8_t *v = p ? realloc(b->via, cap) : NULL;
    if (v) b->via = v;
    uint32_t *d = v ? realloc(b->depth, cap * sizeof *d) : NULL;
    if (d) b->depth = d;
    if (d && (o0 = realloc(a->out[0], cap * sizeof *o0))) a->out[0] = o0;
    if (o0 && (o1 = realloc(a->out[1], cap * sizeof *o1))) a->out[1] = o1;
    if (!o1) return false;
    b->cap = cap;
    return true;
}

fp4_status tok_ac_build(fp4_tokenizer *t, int pass, const char *name, fp4_error *err) {
    tok_ac *a = &t->ac[pass];
    tok_ac_free(a);
    uint64_t bytes = 0;
    for (int32_t k = 0; k < t->n_added; k++)
        if (in_pass(&t->added[k], pass)) {
            bytes += pass_span(&t->added[k], pass).len;
            a->n_tokens[t->added[k].special ? 0 : 1]++;
        }
    a->n_tokens[0] += a->n_tokens[1]; /* [0]: all tokens, [1]: the non-special ones */
    for (int c = 0; c < 256; c++) a->root[c] = -1;
    if (!a->n_tokens[0]) return FP4_OK;
    if (bytes > TOK_MAX_ADDED_BYTES)
        return fp4_fail(err, FP4_ERR_LIMIT, name, "added_tokens", "tok.added-bytes",
                        "the added tokens spell %llu bytes, above the cap of %u", (unsigned long long)bytes,
                        TOK_MAX_ADDED_BYTES);
    ac_tmp b = {0};
    int32_t *order = NULL;
    uint32_t *count = NULL, max_depth = 0;
    fp4_status st = FP4_OK;
    if (!ac_rehash(a) || !ac_grow(a, &b)) goto nomem;
    a->n = 1;
    b.parent[0] = -1, b.depth[0] = 0, a->out[0][0] = a->out[1][0] = -1;
    /* the trie of the reversed spellings; a state's own output is its first token (lowest index) */
    for (int32_t k = 0; k < t->n_added; k++) {
        const tok_added *ad = &t->added[k];
        if (!in_pass(ad, pass)) continue;
        tok_span sp = pass_span(ad, pass);
        const uint8_t *s = (const uint8_t *)tok_str(t, sp);
        int32_t v = 0;
        for (uint32_t j = sp.len; j-- > 0;) {
            int32_t w = ac_get(a, v, s[j]);
            if (w < 0) {
                if ((size_t)a->n == b.cap && !ac_grow(a, &b)) goto nomem;
                if (2 * ((size_t)a->n + 1) > (size_t)a->mask + 1 && !ac_rehash(a)) goto nomem;
                w = a->n++;
                b.parent[w] = v, b.via[w] = s[j], b.depth[w] = b.depth[v] + 1;
                a->out[0][w] = a->out[1][w] = -1;
                ac_put(a, v, s[j], w);
                if (b.depth[w] > max_depth) max_depth = a->max_len = b.depth[w];
            }
            v = w;
        }
        if (a->out[0][v] < 0) a->out[0][v] = k;
        if (!ad->special && a->out[1][v] < 0) a->out[1][v] = k;
    }
    /* states by depth (counting sort): a state's failure link and inherited outputs come from
     * shallower states */
    a->fail = malloc((size_t)a->n * sizeof *a->fail);
    order = malloc((size_t)a->n * sizeof *order);
    count = calloc((size_t)max_depth + 2, sizeof *count);
    if (!a->fail || !order || !count) goto nomem;
    for (int32_t v = 0; v < a->n; v++) count[b.depth[v] + 1]++;
    for (uint32_t d = 1; d <= max_depth + 1; d++) count[d] += count[d - 1];
    for (int32_t v = 0; v < a->n; v++) order[count[b.depth[v]]++] = v;
    a->fail[0] = 0;
    for (int32_t i = 1; i < a->n; i++) {
        int32_t v = order[i], u = b.parent[v], f = 0;
        if (u != 0) {
            int32_t g = a->fail[u], w;
            while ((w = ac_get(a, g, b.via[v])) < 0 && g != 0) g = a->fail[g];
            f = w > 0 ? w : 0;
        }
        a->fail[v] = f;
        for (int o = 0; o < 2; o++)
            if (a->out[o][v] < 0) a->out[o][v] = a->out[o][f];
    }
    goto done;
nomem:
    st = fp4_fail(err, FP4_ERR_NOMEM, name, "added_tokens", "tok.nomem",
                  "out of memory for the added-token matcher (%llu bytes of tokens)",
                  (unsigned long long)bytes);
done:
    free(b.parent);
    free(b.via);
    free(b.depth);
    free(order);
    free(count);
    if (st) tok_ac_free(a);
    return st;
}

size_t tok_ac_longest(const fp4_tokenizer *t, int pass, bool special, const char *s, size_t n, size_t keep,
                      int32_t *best) {
    const tok_ac *a = &t->ac[pass];
    const int32_t *out = a->out[special ? 0 : 1];
    int32_t v = 0;
    size_t found = 0;
    for (size_t i = n; i-- > 0;) {
        uint8_t c = (uint8_t)s[i];
        int32_t w;
        if (v == 0 && a->root[c] < 0) { /* the usual byte: no token ends with it, the root stays */
            if (i < keep) best[i] = -1;
            continue;
        }
        while ((w = ac_get(a, v, c)) < 0 && v != 0) v = a->fail[v];
        v = w < 0 ? 0 : w;
        if (i < keep) found += (best[i] = out[v]) >= 0;
    }
    return found;
}
