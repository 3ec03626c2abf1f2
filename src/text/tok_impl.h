/* tok_impl.h — internals of the tokenizers (src/text): the tokenizer object, string/merge maps,
 * the pipeline step tables shared by the loaders (tok_json.c, tok_gguf.c), the encoder
 * (tok_encode.c, tok_bpe.c) and the decoder (tok_decode.c). */
#ifndef FP4_TOK_IMPL_H
#define FP4_TOK_IMPL_H

#include "fp4_impl.h"
#include "fp4lane_text.h"
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdbool.h>

typedef struct tok_span {
    uint32_t off, len; /* into fp4_tokenizer.arena */
} tok_span;

/* open addressing, string -> id; strings live in the tokenizer (by id). A slot holds the id in its
 * low 22 bits and 9 bits of the string's hash above them (TOK_SMAP_TAG), so that a probe passes
 * over the other strings' slots without reading their spans and bytes. */
typedef struct tok_smap {
    int32_t *slot; /* -1 empty, else TOK_SMAP_TAG(hash) | id */
    uint32_t mask; /* below 2^23 (at most 2^23 slots for 2^22 ids): the tag's hash bits are others */
} tok_smap;
#define TOK_SMAP_ID_MASK (FP4_TOK_MAX_VOCAB - 1)
#define TOK_SMAP_TAG(h) ((int32_t)((uint32_t)(h) >> 23) << 22)
_Static_assert(FP4_TOK_MAX_VOCAB == 1 << 22, "the slot's id and tag bits");

/* open addressing, (left id, right id) -> (rank, merged id); one 16-byte slot per entry so that
 * a lookup touches one cache line */
typedef struct tok_mslot {
    uint64_t key; /* UINT64_MAX empty */
    uint32_t rank;
    int32_t out;
} tok_mslot;
typedef struct tok_mmap {
    tok_mslot *slot;
    uint32_t mask;
} tok_mmap;

enum { TOKF_PRESENT = 1, TOKF_SPECIAL = 2, TOKF_ADDED = 4, TOKF_MODEL = 8, TOKF_RAWOK = 16 };

typedef struct tok_added {
    int32_t id;
    tok_span content;
    tok_span norm; /* normalized content (normalized == 1 and a normalizer exists) */
    uint8_t special, lstrip, rstrip, normalized, single_word;
} tok_added;

typedef struct tok_charsmap tok_charsmap; /* tok_precompiled.c */
typedef enum tok_norm_kind {
    TN_NFC, TN_NFD, TN_NFKC, TN_NFKD, TN_PREPEND, TN_REPLACE, TN_BERT, TN_LOWER, TN_STRIP,
    TN_STRIP_ACCENTS, TN_PRECOMPILED
} tok_norm_kind;
/* TOK_BERT_JS: as the JavaScript reference (C* without Cn, JavaScript's \s, CJK of the BMP only,
 * toLowerCase before the accents go); else as the Rust library (llama.cpp's GGUF vectors) */
enum { TOK_BERT_CLEAN = 1, TOK_BERT_CHINESE = 2, TOK_BERT_STRIP = 4, TOK_BERT_LOWER = 8, TOK_BERT_JS = 16 };
typedef struct tok_norm {
    tok_norm_kind kind;
    uint8_t bert;  /* BERT: TOK_BERT_*; STRIP: 1 left, 2 right */
    tok_span a, b; /* PREPEND: a; REPLACE: a -> b (a: the regex's source when re) */
    pcre2_code *re;  /* REPLACE with a Regex pattern */
    uint32_t minlen; /* REPLACE with a Regex: the fewest bytes a match has (at least 1) */
    struct tok_charsmap *map; /* PRECOMPILED */
} tok_norm;

typedef enum tok_pre_kind { TP_SPLIT, TP_BYTELEVEL, TP_BERT, TP_METASPACE } tok_pre_kind;
/* what a Split keeps: matches and the text between them, the matches alone, the text alone */
enum { TOKP_ISOLATED, TOKP_MATCHES, TOKP_GAPS };
/* Metaspace's prepend_scheme */
enum { TOKP_ALWAYS, TOKP_FIRST, TOKP_NEVER };
typedef struct tok_pre {
    tok_pre_kind kind;
    uint8_t mode;          /* SPLIT: TOKP_ISOLATED / MATCHES / GAPS */
    uint8_t prepend;       /* METASPACE: TOKP_ALWAYS / FIRST / NEVER */
    tok_span a, b;         /* METASPACE: the replacement character, the string spaces become */
    pcre2_code *re;        /* SPLIT, or BYTELEVEL with use_regex */
    uint8_t prefix_space;  /* BYTELEVEL add_prefix_space */
    uint8_t merge_prev;    /* SPLIT behavior MergedWithPrevious: a match joins the piece before it */
    uint8_t fast;          /* SPLIT: a regex tok_prefast.c matches on ASCII (tok_prefast_kind), 0 none */
} tok_pre;

typedef enum tok_dec_kind {
    TD_BYTELEVEL, TD_REPLACE, TD_BYTEFALLBACK, TD_FUSE, TD_STRIP, TD_WORDPIECE
} tok_dec_kind;
typedef struct tok_dec {
    tok_dec_kind kind;
    tok_span a, b;        /* REPLACE a -> b; STRIP: a = the content character; WORDPIECE: a = prefix */
    int32_t start, stop;  /* STRIP; WORDPIECE: start = cleanup */
    uint8_t first_only;   /* STRIP: the first string only (Metaspace's decoder), else every one */
} tok_dec;

/* Added-token matcher (tok_added.c): an Aho-Corasick automaton over the reversed spellings of the
 * added tokens of one pass. State 0 is the root; out[0]/out[1]: per state, the index (into
 * fp4_tokenizer.added) of the longest token among all / the non-special ones that the state's
 * string ends with, -1 when none. */
typedef struct tok_ac {
    int32_t n, n_tokens[2]; /* states; tokens [0] all, [1] non-special */
    uint32_t max_len;       /* the longest token's bytes */
    int32_t *fail, *out[2];
    uint64_t *key;          /* (state << 8 | byte) -> to[], open addressing, UINT64_MAX empty */
    int32_t *to;
    uint32_t mask;
    int32_t root[256];      /* the root's transitions, -1 none */
} tok_ac;
#define TOK_MAX_ADDED_BYTES (16u << 20) /* bytes of the added tokens' spellings of one pass */
#define TOK_AC_WINDOW 65536            /* positions per right-to-left scan (bounded scratch) */

/* Replace steps can only grow text by the product of their |content| / |pattern| (above 1): at most
 * TOK_MAX_GROWTH bytes out per byte in for the normalizer's chain and for the decoder's (a loader
 * refusal, tok.replace-growth); no normalized section or decoded text passes TOK_MAX_OUT bytes. */
#define TOK_MAX_GROWTH 16
#define TOK_MAX_OUT (256u << 20)

#define TOK_MAX_STEPS 8
#define TOK_MAX_TMPL 8

/* Unigram (tok_unigram.c): a byte trie of the pieces; the root's children direct, the others by
 * open addressing, one 8-byte slot per edge (key node << 8 | byte in the high half, the child in the
 * low half, UINT64_MAX empty) so that a step reads one cache line */
typedef struct tok_trie {
    uint64_t *slot;
    int32_t *piece; /* per node: the piece that ends there, -1 none */
    uint32_t mask;
    int32_t n, n_edges;
    int32_t root[256];
} tok_trie;
/* one encode call's Viterbi arrays, reused from word to word */
typedef struct tok_uni_scratch {
    double *score;
    int32_t *from, *id;
    size_t cap;
} tok_uni_scratch;

/* Known pre-tokenizers by their llama.cpp name (tokenizer.ggml.pre; tok_gguf_pre.c). */
typedef struct tok_pre_entry {
    const char *name;
    const char *regex;       /* one Isolated Split (Oniguruma source as in tokenizer.json), or NULL */
    const char *const *seq;  /* several Isolated Splits, NULL-terminated, or NULL */
    uint8_t nfc, ignore_merges;
    uint8_t gpt2;            /* ByteLevel's own regex after the Splits (else the byte mapping alone) */
} tok_pre_entry;
extern const tok_pre_entry tok_pre_table[];
extern const int tok_pre_table_n;
const tok_pre_entry *tok_pre_find(const char *name, size_t n);
/* the entry's normalizer, Splits and ByteLevel step into t (t has none yet) */
fp4_status tok_pre_setup(fp4_tokenizer *t, const tok_pre_entry *pe, char *why, size_t why_n);

#define TOK_SPM_BAD 16 /* more code points before a U+2581 inside tokens: no cutting */
struct fp4_tokenizer {
    fp4_tok_kind kind;
    int32_t n_vocab;
    char *arena;
    size_t arena_len, arena_cap;
    tok_span *text;   /* per id: the vocabulary spelling */
    tok_span *raw;    /* per id: bytes the token stands for (byte-level decoded; SPM: = text); set by
                       * tok_finish (tok_jscan keeps the spellings' hashes there until then) */
    uint8_t *flags;   /* per id: TOKF_* */
    tok_smap by_text; /* model vocabulary spelling -> id */
    bool by_text_ready; /* by_text built by the loader (tok_jbig_install_by_text): tok_finish keeps it */
    tok_smap by_raw;  /* byte-level: raw bytes -> id (ignore_merges) */
    tok_mmap merges;
    uint32_t n_merges;
    int32_t byte_id[256]; /* BYTE_BPE: id of each byte's character; SPM: id of <0xXX> (-1) */
    int32_t *cp_id;       /* SPM: id of each BMP code point's one-character token (-1), 65536 */
    float *scores;        /* GGUF llama without merges: score merging */
    double *uscore;       /* UNIGRAM: per piece (ids below n_pieces) */
    double unk_score;     /* UNIGRAM: an unknown character's score */
    int32_t n_pieces;     /* UNIGRAM: the model's pieces, ids [0, n_pieces) */
    tok_trie trie;        /* UNIGRAM */
    bool use_scores;
    tok_added *added;
    int32_t n_added;
    tok_norm norm[TOK_MAX_STEPS];
    int n_norm;
    tok_pre pre[TOK_MAX_STEPS];
    int n_pre;
    char *pre_regex;      /* the first Isolated Regex Split's source (for GGUF write), NULL if none */
    bool pre_other;       /* another Split (a second one, a String, MergedWithPrevious): no GGUF form */
    bool pre_gpt2;        /* ByteLevel(use_regex) is the only splitter */
    tok_dec dec[TOK_MAX_STEPS];
    int n_dec;
    bool has_decoder;
    int32_t tmpl_pre[TOK_MAX_TMPL], tmpl_post[TOK_MAX_TMPL];
    int n_tmpl_pre, n_tmpl_post;
    int32_t bos, eos, pad, unk;
    tok_span wp_start, wp_cont; /* WORDPIECE: a word's first piece and the others are spelled after these */
    uint32_t wp_max_chars;      /* WORDPIECE: a longer word is the unknown token */
    uint32_t wp_max_len;        /* WORDPIECE: the longest token's bytes */
    bool ignore_merges, byte_fallback, cleanup;
    bool any_norm_added;  /* some added token is matched after normalization */
    tok_ac ac[2];            /* added-token matchers: [0] raw spellings, [1] normalized ones */
    struct tok_wshare *ws;   /* the word cache (tok_wcache.c): written while encoding, one call at a time */
    bool spm_split;          /* SPM_BPE: a word is cut before a U+2581 that follows another code point
                              * not in spm_bad (no token spans such a place, so no merge does) */
    int n_spm_bad;
    uint32_t spm_bad[TOK_SPM_BAD];
    char name[256];          /* the file it was loaded from, for errors while encoding/decoding */
};

/* ---- tok_core.c ---- */
fp4_tokenizer *tok_new(void);
fp4_status tok_reserve_ids(fp4_tokenizer *t, int32_t n_vocab);
/* grow the arena's capacity to at least cap bytes (at most UINT32_MAX) */
fp4_status tok_arena_reserve(fp4_tokenizer *t, size_t cap);
/* append bytes to the arena; span out */
fp4_status tok_arena_add(fp4_tokenizer *t, const char *s, size_t n, tok_span *out);
static inline const char *tok_str(const fp4_tokenizer *t, tok_span s) { return t->arena + s.off; }
uint64_t tok_hash(const char *s, size_t n);
fp4_status tok_smap_build(fp4_tokenizer *t, tok_smap *m, const tok_span *spans, uint8_t need_flag);
/* the same with hash[id] = tok_hash of spans[id] (its low 32 bits) known for the ids it takes */
fp4_status tok_smap_build_h(fp4_tokenizer *t, tok_smap *m, const tok_span *spans, uint8_t need_flag,
                            const uint32_t *hash);
int32_t tok_smap_find(const fp4_tokenizer *t, const tok_smap *m, const tok_span *spans, const char *s,
                      size_t n);
/* a == b over n bytes, inline: the strings looked up are short, a call to memcmp costs more than
 * the comparison (overlapping loads, never a byte outside [0, n)) */
static inline bool tok_bytes_eq(const char *a, const char *b, size_t n) {
    uint64_t x, y;
    uint32_t u, v;
    uint16_t p, q;
    if (n >= 8) {
        for (size_t i = 0; i + 8 < n; i += 8) {
            memcpy(&x, a + i, 8);
            memcpy(&y, b + i, 8);
            if (x != y) return false;
        }
        memcpy(&x, a + n - 8, 8);
        memcpy(&y, b + n - 8, 8);
        return x == y;
    }
    if (n >= 4) {
        memcpy(&u, a, 4);
        memcpy(&v, b, 4);
        if (u != v) return false;
        memcpy(&u, a + n - 4, 4);
        memcpy(&v, b + n - 4, 4);
        return u == v;
    }
    if (n >= 2) {
        memcpy(&p, a, 2);
        memcpy(&q, b, 2);
        return p == q && a[n - 1] == b[n - 1];
    }
    return n == 0 || a[0] == b[0];
}
/* tok_smap_find with h = tok_hash(s, n) (its low 32 bits) known */
static inline int32_t tok_smap_find_h(const fp4_tokenizer *t, const tok_smap *m, const tok_span *spans,
                                      const char *s, size_t n, uint32_t h) {
    if (!m->slot) return -1;
    int32_t tag = TOK_SMAP_TAG(h);
    for (uint32_t i = h & m->mask;; i = (i + 1) & m->mask) {
        int32_t o = m->slot[i];
        if (o < 0) return -1;
        if ((o & ~TOK_SMAP_ID_MASK) != tag) continue;
        o &= TOK_SMAP_ID_MASK;
        if (spans[o].len == n && tok_bytes_eq(t->arena + spans[o].off, s, n)) return o;
    }
}
fp4_status tok_mmap_init(tok_mmap *m, uint32_t n);
/* false: the pair is already there */
bool tok_mmap_put(tok_mmap *m, int32_t a, int32_t b, uint32_t rank, int32_t out);
static inline uint64_t tok_mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
/* the slot where the pair's probe starts */
static inline const tok_mslot *tok_mmap_slot(const tok_mmap *m, int32_t a, int32_t b) {
    return &m->slot[(uint32_t)tok_mix(((uint64_t)(uint32_t)a << 32) | (uint32_t)b) & m->mask];
}
static inline bool tok_mmap_get(const tok_mmap *m, int32_t a, int32_t b, uint32_t *rank, int32_t *out) {
    uint64_t k = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    for (uint32_t i = (uint32_t)tok_mix(k) & m->mask;; i = (i + 1) & m->mask) {
        const tok_mslot *e = &m->slot[i];
        if (e->key == k) {
            *rank = e->rank;
            *out = e->out;
            return true;
        }
        if (e->key == UINT64_MAX) return false;
    }
}
/* GPT-2's byte <-> character table */
uint32_t tok_byte_to_cp(uint8_t b);
int tok_cp_to_byte(uint32_t cp); /* -1 when cp is not one of the 256 */
/* UTF-8 helpers: decode one code point of valid UTF-8 (returns its length) */
int tok_utf8_dec(const uint8_t *s, size_t n, uint32_t *cp);
int tok_utf8_enc(uint32_t cp, char *out);
/* Replace invalid UTF-8 by U+FFFD (maximal subparts). *out is s itself when s is valid, else a
 * malloc'd copy (caller frees when *out != s). */
fp4_status tok_utf8_sanitize(const char *s, size_t n, char **out, size_t *out_n);
/* Append the lossy UTF-8 decoding of bytes to a buffer (strip_bom: drop a leading U+FFEF). */
typedef struct tok_buf {
    char *p;
    size_t n, cap;
} tok_buf;
fp4_status tok_buf_add(tok_buf *b, const void *s, size_t n);
fp4_status tok_buf_lossy(tok_buf *b, const uint8_t *s, size_t n, bool strip_bom);
/* A pass of a two-buffer pipeline is done: its output *b becomes the next pass's input *a. */
void tok_buf_swap(tok_buf *a, tok_buf *b);
/* The pipeline's end: appends the last result *a to out unless st is an error, frees both buffers;
 * returns the status. */
fp4_status tok_buf_drain(tok_buf *out, tok_buf *a, tok_buf *b, fp4_status st);
/* Finalize: compile regexes (with the Oniguruma -> PCRE2 translation), build maps, added-token
 * tables, byte tables and the raw spellings. name: for errors. */
fp4_status tok_finish(fp4_tokenizer *t, const char *name, fp4_error *err);
fp4_status tok_compile_regex(const char *onig, bool gpt2_builtin, pcre2_code **out, char *why, size_t why_n);
int tok_added_cmp_id(const void *a, const void *b);

/* ---- tok_added.c ---- */
/* builds t->ac[pass] from t->added (sorted, norm spans set) */
fp4_status tok_ac_build(fp4_tokenizer *t, int pass, const char *name, fp4_error *err);
void tok_ac_free(tok_ac *a);
/* best[i] for i < keep: the index of the longest added token of the pass (special ones only when
 * special) that starts at s[i] and ends within s[0, n), -1 none; returns how many are not -1 */
size_t tok_ac_longest(const fp4_tokenizer *t, int pass, bool special, const char *s, size_t n, size_t keep,
                      int32_t *best);

/* ---- tok_jscan.c: model.vocab and model.merges of a tokenizer.json without jansson ---- */
typedef struct tok_jbig {
    bool vocab_found, merges_found;
    size_t vocab_at[2], merges_at[2]; /* [start, end) of the two values in the document */
    int32_t max_id;                   /* the vocabulary's largest id (-1: empty) */
    size_t n_merges;                  /* at least the number of merges (exact when counted by a walk) */
} tok_jbig;
/* true: both members read; the vocabulary is in t (arena, text[], flags[] PRESENT | MODEL,
 * n_vocab = max_id + 1, by_text built and by_text_ready; raw[] allocated for n_vocab ids, its
 * contents left for tok_finish), the merges located and counted.
 * false: not in the reader's subset; the caller discards t and parses with jansson alone. */
bool tok_jscan(fp4_tokenizer *t, const char *s, size_t n, tok_jbig *b);
enum { TOK_JM_PAIR, TOK_JM_BADSTR, TOK_JM_BADSHAPE };
#define TOK_JM_BUF (2 * FP4_TOK_MAX_TOKEN_BYTES + 1)
/* the merges tok_jscan found, read strictly, in order, into t->merges (initialised, room for
 * b->n_merges): each names two tokens of t->by_text whose concatenation is one, each pair once.
 * FP4_ERR_FORMAT on anything else (outside the subset, more than b->n_merges, an array that does not
 * end at merges_at[1], a merge the loader refuses); the jansson pass then decides. *count: the
 * merges read. */
fp4_status tok_jscan_merges(fp4_tokenizer *t, const char *s, const tok_jbig *b, size_t *count);

/* ---- tok_json.c ---- */
/* One pass of fp4_tokenizer_from_json (json non-NULL, at most FP4_TOK_MAX_FILE bytes). fast: through
 * tok_jscan; any failure there is an error without a promise about err (the caller then runs the
 * jansson pass: fast == false, the reference, whose refusals fill err). test_tok_jscan runs both. */
fp4_status tok_json_pass(const char *name, const char *json, size_t json_len, const void *config,
                         size_t config_len, bool fast, fp4_tokenizer **out, fp4_error *err);

/* ---- tok_encode.c ---- */
/* the normalizer steps on valid UTF-8, appended to out */
fp4_status tok_normalize(const fp4_tokenizer *t, const char *s, size_t n, tok_buf *out);
/* every occurrence of a (an > 0) replaced by b, left to right, appended to out; FP4_ERR_LIMIT when
 * out would pass cap bytes */
fp4_status tok_replace_all(const char *s, size_t n, const char *a, size_t an, const char *b, size_t bn,
                           tok_buf *out, size_t cap);
/* utf8_valid_len: length of the valid sequence at s, or -k (k bytes form a maximal invalid
 * subpart; k == n means the sequence was cut short by the end) */
int tok_utf8_valid_len(const uint8_t *s, size_t n);

/* ---- tok_bpe.c ---- */
typedef struct tok_ivec {
    int32_t *p;
    size_t n, cap;
} tok_ivec;
fp4_status tok_ivec_push(tok_ivec *v, int32_t x);
/* A small direct-mapped cache of merge lookups, one per encode call (the tokenizer itself stays
 * immutable): the frequent pairs stay in L1 instead of probing the merge table. */
#define TOK_PAIR_CACHE 4096
typedef struct tok_pair_cache {
    tok_mslot e[TOK_PAIR_CACHE]; /* rank UINT32_MAX: no merge */
} tok_pair_cache;
void tok_pair_cache_init(tok_pair_cache *c);
/* one pre-tokenized word (raw bytes) through the model; pc may be NULL */
fp4_status tok_bpe_word(const fp4_tokenizer *t, tok_pair_cache *pc, const char *w, size_t n, tok_ivec *out);
/* the same without ignore_merges' whole-word lookup: the merges alone */
fp4_status tok_bpe_merges(const fp4_tokenizer *t, tok_pair_cache *pc, const char *w, size_t n, tok_ivec *out);

/* ---- tok_prefast.c: known pre-tokenizer regexes by hand on ASCII ---- */
/* the pattern's kind by its source (as tokenizer.json writes it), 0 when not one of them */
uint8_t tok_prefast_kind(const char *src);
/* The leftmost match of the kind's regex in s[0, n) (valid UTF-8) at or after start, as PCRE2 finds
 * it: 1 and [*ms, *me), 0 when there is none, -1 when a character outside ASCII decides: no match
 * starts in [start, *ms) and PCRE2 must search from *ms. */
int tok_prefast_next(uint8_t kind, const char *s, size_t n, size_t start, size_t *ms, size_t *me);

/* ---- tok_wcache.c: words through the BPE model once ---- */
typedef struct tok_wcache tok_wcache;
/* t->ws (tok_new); NULL when out of memory: then no cache */
void tok_wcache_init(fp4_tokenizer *t);
/* the tokenizer's word cache for one encode call, or NULL (another call holds it, or no memory):
 * the caller then encodes without it; tok_wcache_release(t) when done */
tok_wcache *tok_wcache_claim(const fp4_tokenizer *t);
void tok_wcache_release(const fp4_tokenizer *t);
/* the claimed cache's merge lookups (a tok_pair_cache kept with the words) */
tok_pair_cache *tok_wcache_pairs(tok_wcache *wc);
void tok_wcache_free(fp4_tokenizer *t);
/* SPM_BPE: the code points c such that some token spells c followed by U+2581, which make
 * t->spm_split and t->spm_bad (tok_finish) */
void tok_spm_split_setup(fp4_tokenizer *t);
/* one pre-tokenized word through the BPE model (as tok_bpe_word), cut where no merge can reach
 * across (t->spm_split) and each part looked up in wc first (wc and pc may be NULL) */
fp4_status tok_bpe_text(const fp4_tokenizer *t, tok_wcache *wc, tok_pair_cache *pc, const char *w, size_t n,
                        tok_ivec *out);

/* ---- tok_unigram.c ---- */
/* model.vocab ([[piece, score], ...], ids = positions, into t's reserved ids), unk_id, byte_fallback */
fp4_status tok_unigram_vocab(fp4_tokenizer *t, const void *model_json, const char *name, fp4_error *err);
/* the trie, after tok_finish */
fp4_status tok_unigram_build(fp4_tokenizer *t, const char *name, fp4_error *err);
void tok_trie_free(tok_trie *tr);
void tok_uni_scratch_free(tok_uni_scratch *u);
fp4_status tok_unigram_word(const fp4_tokenizer *t, tok_uni_scratch *u, const char *w, size_t n,
                            tok_ivec *out);

/* ---- tok_precompiled.c ---- */
/* the base64 precompiled_charsmap of a Precompiled normalizer; why: the refusal */
fp4_status tok_charsmap_load(const char *b64, size_t n, tok_charsmap **out, char *why, size_t why_n);
void tok_charsmap_free(tok_charsmap *m);
/* s (valid UTF-8) normalized, appended to out; FP4_ERR_LIMIT past cap bytes */
fp4_status tok_charsmap_normalize(const tok_charsmap *m, const char *s, size_t n, tok_buf *out, size_t cap);

/* ---- tok_wpm.c: WordPiece (BERT) ---- */
/* JavaScript's toLowerCase (tok_encode.c) */
fp4_status tok_js_lower(const char *s, size_t n, tok_buf *out);
bool tok_js_space(uint32_t c);
fp4_status tok_bert_normalize(uint8_t flags, const char *s, size_t n, tok_buf *out);
/* the next word of the BertPreTokenizer at *pos: false at the end */
bool tok_bert_next(const char *s, size_t n, size_t *pos, size_t *off, size_t *len);
fp4_status tok_wpm_word(const fp4_tokenizer *t, const char *w, size_t n, tok_ivec *out);

#endif
