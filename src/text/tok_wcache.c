/* tok_wcache.c — words through the BPE model once.
 * Natural text repeats its words: a word the model has already turned into ids is looked up in a
 * fixed table (two ways per set, the older way evicted) instead of merged again, as the reference
 * libraries cache their words. The table belongs to the tokenizer and outlives an encode call; one
 * call at a time holds it (an atomic claim, never a wait: a concurrent call encodes without it).
 * The ids are a function of the word alone, so a hit gives exactly the ids a miss computes.
 * SentencePiece-style BPE (Llama 2, Gemma 3) runs on a whole normalized section, which is never
 * repeated; it is cut before each U+2581 (the space) where no token of the vocabulary spans the
 * cut, and the parts, again words, go through the table. */
#include "tok_impl.h"
#include <stdatomic.h>
#include <stdlib.h>

#define TOK_WC_SETS 8192 /* x 2 ways x 64 bytes: 1 MiB (and the pair cache), allocated on first use */
#define TOK_WC_WORD 26   /* longer words are merged every time */
#define TOK_WC_IDS 8     /* words of more ids too */
typedef struct tok_wc_entry {
    uint32_t tag; /* the word's hash, high half */
    uint8_t len;  /* 0: empty */
    uint8_t n;
    char w[TOK_WC_WORD];
    int32_t id[TOK_WC_IDS];
} tok_wc_entry;
_Static_assert(sizeof(tok_wc_entry) == 64, "one cache line per entry");
struct tok_wcache {
    tok_wc_entry e[TOK_WC_SETS][2];
    tok_pair_cache pairs; /* the merge lookups, warm from call to call as the words */
};
struct tok_wshare {
    atomic_int busy;
    tok_wcache *c;
};

/* ---- the table ---- */
tok_wcache *tok_wcache_claim(const fp4_tokenizer *t) {
    struct tok_wshare *s = t->ws;
    if (!s || atomic_exchange_explicit(&s->busy, 1, memory_order_acquire)) return NULL;
    if (!s->c && (s->c = calloc(1, sizeof *s->c))) tok_pair_cache_init(&s->c->pairs);
    if (!s->c) atomic_store_explicit(&s->busy, 0, memory_order_release);
    return s->c;
}

tok_pair_cache *tok_wcache_pairs(tok_wcache *wc) { return &wc->pairs; }

void tok_wcache_release(const fp4_tokenizer *t) {
    if (t->ws) atomic_store_explicit(&t->ws->busy, 0, memory_order_release);
}

void tok_wcache_free(fp4_tokenizer *t) {
    if (t->ws) free(t->ws->c);
    free(t->ws);
    t->ws = NULL;
}

void tok_wcache_init(fp4_tokenizer *t) {
    t->ws = calloc(1, sizeof *t->ws);
    if (t->ws) atomic_init(&t->ws->busy, 0);
}

static fp4_status push_ids(tok_ivec *out, const int32_t *id, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (tok_ivec_push(out, id[i])) return FP4_ERR_NOMEM;
    return FP4_OK;
}

/* one word through the table: merges_only leaves out ignore_merges' whole-word lookup (a part of
 * a cut word; the whole was looked up before the cut) */
static fp4_status cached(const fp4_tokenizer *t, tok_wcache *wc, tok_pair_cache *pc, const char *w, size_t n,
                         bool merges_only, tok_ivec *out) {
    if (!wc || n == 0 || n > TOK_WC_WORD)
        return merges_only ? tok_bpe_merges(t, pc, w, n, out) : tok_bpe_word(t, pc, w, n, out);
    uint64_t h = tok_hash(w, n);
    tok_wc_entry *set = wc->e[h & (TOK_WC_SETS - 1)];
    uint32_t tag = (uint32_t)(h >> 32);
    for (int k = 0; k < 2; k++)
        if (set[k].len == n && set[k].tag == tag && tok_bytes_eq(set[k].w, w, n))
            return push_ids(out, set[k].id, set[k].n);
    size_t before = out->n;
    fp4_status st = merges_only ? tok_bpe_merges(t, pc, w, n, out) : tok_bpe_word(t, pc, w, n, out);
    size_t m = out->n - before;
    if (st || m > TOK_WC_IDS) return st;
    set[1] = set[0];
    set[0].tag = tag;
    set[0].len = (uint8_t)n;
    set[0].n = (uint8_t)m;
    memcpy(set[0].w, w, n);
    if (m) memcpy(set[0].id, out->p + before, m * sizeof *out->p); /* m == 0: out->p may be NULL */
    return FP4_OK;
}

/* ---- cutting SentencePiece-style words ---- */
static const char SPACE[3] = {(char)0xE2, (char)0x96, (char)0x81}; /* U+2581 */

/* the code point that ends at s[i] (valid UTF-8 before i > 0) */
static uint32_t cp_before(const char *s, size_t i) {
    size_t j = i - 1;
    while (j > 0 && i - j < 4 && ((uint8_t)s[j] & 0xC0) == 0x80) j--;
    uint32_t cp;
    tok_utf8_dec((const uint8_t *)s + j, i - j, &cp);
    return cp;
}

void tok_spm_split_setup(fp4_tokenizer *t) {
    t->spm_split = false;
    t->n_spm_bad = 0;
    if (t->kind != FP4_TOK_SPM_BPE) return;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        if (!(t->flags[id] & TOKF_PRESENT)) continue;
        const char *s = tok_str(t, t->text[id]);
        size_t n = t->text[id].len;
        const char *p = memchr(s, SPACE[0], n);
        for (; p; p = memchr(p + 1, SPACE[0], n - (size_t)(p + 1 - s))) {
            size_t i = (size_t)(p - s);
            if (i == 0 || i + 3 > n || memcmp(p, SPACE, 3)) continue;
            uint32_t c = cp_before(s, i);
            bool known = c == 0x2581;
            for (int k = 0; k < t->n_spm_bad && !known; k++) known = t->spm_bad[k] == c;
            if (known) continue;
            if (t->n_spm_bad == TOK_SPM_BAD) return; /* too many: words stay whole */
            t->spm_bad[t->n_spm_bad++] = c;
        }
    }
    t->spm_split = true;
}

static bool cut_before(const fp4_tokenizer *t, const char *w, size_t i) {
    uint32_t c = cp_before(w, i);
    if (c == 0x2581) return false;
    for (int k = 0; k < t->n_spm_bad; k++)
        if (t->spm_bad[k] == c) return false;
    return true;
}

fp4_status tok_bpe_text(const fp4_tokenizer *t, tok_wcache *wc, tok_pair_cache *pc, const char *w, size_t n,
                        tok_ivec *out) {
    if (!t->spm_split) return cached(t, wc, pc, w, n, false, out);
    if (n && t->ignore_merges) { /* the whole word first, as tok_bpe_word */
        int32_t id = tok_smap_find(t, &t->by_text, t->text, w, n);
        if (id >= 0) return tok_ivec_push(out, id);
    }
    size_t a = 0;
    const char *p = n > 3 ? memchr(w + 1, SPACE[0], n - 1) : NULL;
    for (; p; p = memchr(p + 1, SPACE[0], n - (size_t)(p + 1 - w))) {
        size_t i = (size_t)(p - w);
        if (i + 3 > n || memcmp(p, SPACE, 3) || !cut_before(t, w, i)) continue;
        fp4_status st = cached(t, wc, pc, w + a, i - a, true, out);
        if (st) return st;
        a = i;
    }
    return cached(t, wc, pc, w + a, n - a, true, out);
}
