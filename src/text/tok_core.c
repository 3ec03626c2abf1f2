/* tok_core.c — the tokenizer object: arena, id tables, string and merge maps, UTF-8 helpers, the
 * byte-level character table, and tok_finish (shared by the JSON and GGUF loaders). */
#include "tok_impl.h"
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

fp4_tokenizer *tok_new(void) {
    fp4_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->bos = t->eos = t->pad = t->unk = -1;
    for (int i = 0; i < 256; i++) t->byte_id[i] = -1;
    tok_wcache_init(t);
    return t;
}

void fp4_tokenizer_free(fp4_tokenizer *t) {
    if (!t) return;
    for (int i = 0; i < t->n_pre; i++) pcre2_code_free(t->pre[i].re);
    for (int i = 0; i < t->n_norm; i++) {
        pcre2_code_free(t->norm[i].re);
        tok_charsmap_free(t->norm[i].map);
    }
    free(t->arena);
    free(t->text);
    free(t->raw);
    free(t->flags);
    free(t->by_text.slot);
    free(t->by_raw.slot);
    free(t->merges.slot);
    free(t->cp_id);
    free(t->scores);
    free(t->uscore);
    tok_trie_free(&t->trie);
    free(t->added);
    tok_ac_free(&t->ac[0]);
    tok_ac_free(&t->ac[1]);
    free(t->pre_regex);
    tok_wcache_free(t);
    free(t);
}

fp4_status tok_reserve_ids(fp4_tokenizer *t, int32_t n_vocab) {
    if (n_vocab <= 0 || n_vocab > FP4_TOK_MAX_VOCAB) return FP4_ERR_LIMIT;
    tok_span *a = realloc(t->text, (size_t)n_vocab * sizeof *a);
    if (!a) return FP4_ERR_NOMEM;
    t->text = a;
    uint8_t *f = realloc(t->flags, (size_t)n_vocab);
    if (!f) return FP4_ERR_NOMEM;
    t->flags = f;
    for (int32_t i = t->n_vocab; i < n_vocab; i++) {
        t->text[i] = (tok_span){0, 0};
        t->flags[i] = 0;
    }
    if (n_vocab > t->n_vocab) t->n_vocab = n_vocab;
    return FP4_OK;
}

fp4_status tok_arena_reserve(fp4_tokenizer *t, size_t cap) {
    if (cap <= t->arena_cap) return FP4_OK;
    if (cap > UINT32_MAX) cap = UINT32_MAX;
    char *p = realloc(t->arena, cap);
    if (!p) return FP4_ERR_NOMEM;
    t->arena = p;
    t->arena_cap = cap;
    return FP4_OK;
}

fp4_status tok_arena_add(fp4_tokenizer *t, const char *s, size_t n, tok_span *out) {
    if (n > UINT32_MAX || t->arena_len + n + 1 > UINT32_MAX) return FP4_ERR_LIMIT;
    if (t->arena_len + n + 1 > t->arena_cap) {
        size_t cap = t->arena_cap ? t->arena_cap * 2 : 1 << 16;
        while (cap < t->arena_len + n + 1) cap *= 2;
        char *p = realloc(t->arena, cap);
        if (!p) return FP4_ERR_NOMEM;
        t->arena = p;
        t->arena_cap = cap;
    }
    if (n) memcpy(t->arena + t->arena_len, s, n);
    t->arena[t->arena_len + n] = 0;
    out->off = (uint32_t)t->arena_len;
    out->len = (uint32_t)n;
    t->arena_len += n + 1;
    return FP4_OK;
}

uint64_t tok_hash(const char *s, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
    }
    uint64_t w = 0; /* the last n % 8 bytes: 4, 2, 1 at a time (n itself is in h) */
    const char *p = s + i;
    if ((n - i) & 4) {
        uint32_t x;
        memcpy(&x, p, 4);
        w = x;
        p += 4;
    }
    if ((n - i) & 2) {
        uint16_t x;
        memcpy(&x, p, 2);
        w = (w << 16) | x;
        p += 2;
    }
    if ((n - i) & 1) w = (w << 8) | (uint8_t)*p;
    return tok_mix(h ^ w); /* a full avalanche: the map masks the low bits */
}

fp4_status tok_smap_build(fp4_tokenizer *t, tok_smap *m, const tok_span *spans, uint8_t need_flag) {
    return tok_smap_build_h(t, m, spans, need_flag, NULL);
}

fp4_status tok_smap_build_h(fp4_tokenizer *t, tok_smap *m, const tok_span *spans, uint8_t need_flag,
                            const uint32_t *hash) {
    uint32_t cap = 16;
    while (cap < (uint32_t)t->n_vocab + (uint32_t)t->n_vocab / 2)
        cap *= 2; /* load <= 2/3; at most 2^23 slots, below the tag's bits */
    free(m->slot);
    m->slot = malloc((size_t)cap * sizeof *m->slot);
    if (!m->slot) return FP4_ERR_NOMEM;
    memset(m->slot, 0xFF, (size_t)cap * sizeof *m->slot);
    m->mask = cap - 1;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        if ((t->flags[id] & need_flag) != need_flag) continue;
        const char *s = tok_str(t, spans[id]);
        size_t n = spans[id].len;
        uint32_t h = hash ? hash[id] : (uint32_t)tok_hash(s, n);
        int32_t tag = TOK_SMAP_TAG(h);
        for (uint32_t i = h & m->mask;; i = (i + 1) & m->mask) {
            int32_t o = m->slot[i];
            if (o < 0) {
                m->slot[i] = tag | id;
                break;
            }
            if ((o & ~TOK_SMAP_ID_MASK) == tag && spans[o & TOK_SMAP_ID_MASK].len == n &&
                tok_bytes_eq(tok_str(t, spans[o & TOK_SMAP_ID_MASK]), s, n))
                return FP4_ERR_DUPLICATE;
        }
    }
    return FP4_OK;
}

int32_t tok_smap_find(const fp4_tokenizer *t, const tok_smap *m, const tok_span *spans, const char *s,
                      size_t n) {
    return m->slot ? tok_smap_find_h(t, m, spans, s, n, (uint32_t)tok_hash(s, n)) : -1;
}

fp4_status tok_mmap_init(tok_mmap *m, uint32_t n) {
    uint32_t cap = 16;
    while (cap < n + n / 2)
        cap *= 2; /* load <= 2/3 */
    free(m->slot);
    size_t bytes = (size_t)cap * sizeof *m->slot, huge = (size_t)2 << 20;
    if (bytes >= huge) { /* a multiple of 2 MiB: huge pages where the kernel offers them (fewer faults
                          * and TLB misses, in loading and in encoding); refused advice is fine */
        m->slot = aligned_alloc(huge, bytes);
        if (m->slot) (void)madvise(m->slot, bytes, MADV_HUGEPAGE);
    } else
        m->slot = malloc(bytes);
    if (!m->slot) return FP4_ERR_NOMEM;
    for (uint32_t i = 0; i < cap; i++) m->slot[i].key = UINT64_MAX;
    m->mask = cap - 1;
    return FP4_OK;
}

bool tok_mmap_put(tok_mmap *m, int32_t a, int32_t b, uint32_t rank, int32_t out) {
    uint64_t k = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    for (uint32_t i = (uint32_t)tok_mix(k) & m->mask;; i = (i + 1) & m->mask) {
        tok_mslot *e = &m->slot[i];
        if (e->key == k) return false;
        if (e->key == UINT64_MAX) {
            *e = (tok_mslot){k, rank, out};
            return true;
        }
    }
}

/* GPT-2: printable bytes map to themselves, the 68 others (0x00-0x20, 0x7F-0xA0, 0xAD) to
 * U+0100.. in byte order. Closed forms both ways: no shared table to initialise. */
static inline bool byte_printable(uint32_t b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

uint32_t tok_byte_to_cp(uint8_t b) {
    if (byte_printable(b)) return b;
    if (b <= 0x20) return 256u + b;
    if (b <= 0xA0) return 256u + 33u + (b - 0x7Fu);
    return 256u + 67u; /* 0xAD */
}

static inline int cp_to_byte(uint32_t cp) {
    if (cp < 256) return byte_printable(cp) ? (int)cp : -1;
    if (cp < 256 + 33) return (int)(cp - 256);
    if (cp < 256 + 67) return (int)(cp - 256 - 33 + 0x7F);
    return cp == 256 + 67 ? 0xAD : -1;
}

int tok_cp_to_byte(uint32_t cp) { return cp_to_byte(cp); }

int tok_utf8_dec(const uint8_t *s, size_t n, uint32_t *cp) {
    uint8_t b = s[0];
    if (b < 0x80 || n < 2) {
        *cp = b;
        return 1;
    }
    if (b < 0xE0) {
        *cp = ((uint32_t)(b & 0x1F) << 6) | (s[1] & 0x3F);
        return 2;
    }
    if (b < 0xF0 || n < 4) {
        if (n < 3) {
            *cp = b;
            return 1;
        }
        *cp = ((uint32_t)(b & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
        return 3;
    }
    *cp = ((uint32_t)(b & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) | ((uint32_t)(s[2] & 0x3F) << 6) |
          (s[3] & 0x3F);
    return 4;
}

int tok_utf8_enc(uint32_t cp, char *o) {
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Length of the valid UTF-8 sequence at s (1..4), or -k: the first k bytes are a maximal invalid
 * subpart (replaced by one U+FFFD). */
int tok_utf8_valid_len(const uint8_t *s, size_t n) {
    uint8_t b = s[0];
    if (b < 0x80) return 1;
    int need;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) need = 1;
    else if (b >= 0xE0 && b <= 0xEF) {
        need = 2;
        if (b == 0xE0) lo = 0xA0;
        if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        need = 3;
        if (b == 0xF0) lo = 0x90;
        if (b == 0xF4) hi = 0x8F;
    } else return -1;
    for (int k = 1; k <= need; k++) {
        if ((size_t)k >= n) return -k;
        uint8_t c = s[k];
        if (c < lo || c > hi) return -k;
        lo = 0x80;
        hi = 0xBF;
    }
    return need + 1;
}

fp4_status tok_utf8_sanitize(const char *s, size_t n, char **out, size_t *out_n) {
    const uint8_t *u = (const uint8_t *)s;
    size_t i = 0;
    while (i < n) {
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        int l = tok_utf8_valid_len(u + i, n - i);
        if (l < 0) break;
        i += (size_t)l;
    }
    if (i == n) {
        *out = (char *)s;
        *out_n = n;
        return FP4_OK;
    }
    tok_buf b = {0};
    if (tok_buf_lossy(&b, u, n, false) != FP4_OK) {
        free(b.p);
        return FP4_ERR_NOMEM;
    }
    *out = b.p;
    *out_n = b.n;
    return FP4_OK;
}

fp4_status tok_buf_add(tok_buf *b, const void *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return FP4_ERR_NOMEM;
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return FP4_OK;
}

void tok_buf_swap(tok_buf *a, tok_buf *b) {
    tok_buf tmp = *a;
    *a = *b;
    *b = tmp;
}

fp4_status tok_buf_drain(tok_buf *out, tok_buf *a, tok_buf *b, fp4_status st) {
    if (!st) st = tok_buf_add(out, a->p, a->n);
    free(a->p);
    free(b->p);
    return st;
}

fp4_status tok_buf_lossy(tok_buf *b, const uint8_t *s, size_t n, bool strip_bom) {
    static const char fffd[3] = {(char)0xEF, (char)0xBF, (char)0xBD};
    size_t i = 0;
    if (strip_bom && n >= 3 && s[0] == 0xEF && s[1] == 0xBB && s[2] == 0xBF) i = 3;
    if (tok_buf_add(b, "", 0)) return FP4_ERR_NOMEM;
    while (i < n) {
        size_t j = i;
        while (j < n && s[j] < 0x80) j++;
        if (j > i && tok_buf_add(b, s + i, j - i)) return FP4_ERR_NOMEM;
        i = j;
        if (i >= n) break;
        int l = tok_utf8_valid_len(s + i, n - i);
        if (l > 0) {
            if (tok_buf_add(b, s + i, (size_t)l)) return FP4_ERR_NOMEM;
            i += (size_t)l;
        } else {
            if (tok_buf_add(b, fffd, 3)) return FP4_ERR_NOMEM;
            i += (size_t)(-l);
        }
    }
    return FP4_OK;
}

int tok_added_cmp_id(const void *a, const void *b) {
    const tok_added *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

/* ---- accessors ---- */
fp4_tok_kind fp4_tokenizer_kind(const fp4_tokenizer *t) { return t ? t->kind : FP4_TOK_BYTE_BPE; }
int32_t fp4_tokenizer_n_vocab(const fp4_tokenizer *t) { return t ? t->n_vocab : 0; }
int32_t fp4_tokenizer_bos(const fp4_tokenizer *t) { return t ? t->bos : -1; }
int32_t fp4_tokenizer_eos(const fp4_tokenizer *t) { return t ? t->eos : -1; }
int32_t fp4_tokenizer_pad(const fp4_tokenizer *t) { return t ? t->pad : -1; }
int fp4_tokenizer_cleanup_default(const fp4_tokenizer *t) { return t && t->cleanup; }

fp4_status fp4_tokenizer_token(const fp4_tokenizer *t, int32_t id, const char **s, size_t *len) {
    if (!t || !s || !len || id < 0 || id >= t->n_vocab || !(t->flags[id] & TOKF_PRESENT))
        return FP4_ERR_INVALID_ARG;
    *s = tok_str(t, t->text[id]);
    *len = t->text[id].len;
    return FP4_OK;
}

int fp4_tokenizer_is_special(const fp4_tokenizer *t, int32_t id) {
    return t && id >= 0 && id < t->n_vocab && (t->flags[id] & TOKF_SPECIAL) != 0;
}

int32_t fp4_tokenizer_find(const fp4_tokenizer *t, const char *s, size_t len) {
    if (!t || (!s && len)) return -1;
    for (int32_t i = 0; i < t->n_added; i++)
        if (t->added[i].content.len == len && !memcmp(tok_str(t, t->added[i].content), s, len))
            return t->added[i].id;
    return tok_smap_find(t, &t->by_text, t->text, s, len);
}

/* ---- Oniguruma (tokenizer.json) -> PCRE2, as the reference translates to JavaScript:
 * \s/\S are Unicode White_Space; (?i:...) folds ASCII letters only. Other constructs whose
 * meaning differs between the engines (\w \b \h, classes inside (?i:)) are refused. ---- */
static bool re_add(tok_buf *b, const char *s) { return tok_buf_add(b, s, strlen(s)) == FP4_OK; }

fp4_status tok_compile_regex(const char *src, bool gpt2, pcre2_code **out, char *why, size_t why_n) {
    /* ByteLevel's own pattern is written for JavaScript, whose \s is not Unicode's White_Space:
     * it has U+FEFF and lacks U+0085 */
#define JS_WS                                                                                                \
    "\\t\\n\\x0B\\f\\r "                                                                                     \
    "\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}"
    static const char gpt2_re[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" JS_WS "\\p{L}\\p{N}]+"
                                  "|[" JS_WS "]+(?![^" JS_WS "])|[" JS_WS "]+";
#undef JS_WS
    tok_buf b = {0};
    bool ok = true;
    if (!gpt2 && (!src || !src[0])) { /* PCRE2 would say "pattern passed as NULL" */
        snprintf(why, why_n, "an empty Split regex (it would match nothing but empty strings)");
        return FP4_ERR_FORMAT;
    }
    if (gpt2) ok = re_add(&b, gpt2_re);
    else {
        int ci_depth = -1, depth = 0, in_class = 0;
        size_t n = strlen(src);
        for (size_t i = 0; ok && i < n; i++) {
            char c = src[i];
            if (c == '\\') {
                if (i + 1 >= n) {
                    snprintf(why, why_n, "a trailing backslash");
                    ok = false;
                    break;
                }
                char e = src[++i];
                if (e == 's') ok = re_add(&b, "\\p{White_Space}");
                else if (e == 'S') ok = re_add(&b, "\\P{White_Space}");
                else if (strchr("wWbBhHGKRXyYzZA", e) || (e >= '1' && e <= '9')) {
                    snprintf(why, why_n, "the escape \\%c is not supported", e);
                    ok = false;
                } else {
                    char two[3] = {'\\', e, 0};
                    ok = re_add(&b, two);
                    /* copy \p{..}, \x{..} whole */
                    if (ok && (e == 'p' || e == 'P' || e == 'x') && i + 1 < n && src[i + 1] == '{') {
                        size_t j = i + 1;
                        while (j < n && src[j] != '}') j++;
                        if (j >= n) {
                            snprintf(why, why_n, "an unterminated \\%c{", e);
                            ok = false;
                        } else {
                            ok = tok_buf_add(&b, src + i + 1, j - i) == FP4_OK;
                            i = j;
                        }
                    }
                }
                continue;
            }
            if (in_class) {
                if (c == '[') {
                    snprintf(why, why_n, "nested character classes are not supported");
                    ok = false;
                } else {
                    if (c == ']') in_class = 0;
                    ok = tok_buf_add(&b, &c, 1) == FP4_OK;
                }
                continue;
            }
            if (c == '[') {
                if (ci_depth >= 0) {
                    snprintf(why, why_n, "a character class inside (?i:) is not supported");
                    ok = false;
                    break;
                }
                in_class = 1;
                ok = tok_buf_add(&b, &c, 1) == FP4_OK;
                if (ok && i + 1 < n && src[i + 1] == '^') ok = tok_buf_add(&b, src + ++i, 1) == FP4_OK;
                if (ok && i + 1 < n && src[i + 1] == ']') ok = tok_buf_add(&b, src + ++i, 1) == FP4_OK;
                continue;
            }
            if (c == '(') {
                if (i + 2 < n && src[i + 1] == '?' && src[i + 2] == 'i' && i + 3 < n && src[i + 3] == ':') {
                    if (ci_depth >= 0) {
                        snprintf(why, why_n, "nested (?i:) groups are not supported");
                        ok = false;
                        break;
                    }
                    ci_depth = depth;
                    depth++;
                    ok = re_add(&b, "(?:");
                    i += 3;
                    continue;
                }
                if (i + 1 < n && src[i + 1] == '?' && i + 2 < n && !strchr(":=!<", src[i + 2])) {
                    snprintf(why, why_n, "the group (?%c is not supported", src[i + 2]);
                    ok = false;
                    break;
                }
                depth++;
            } else if (c == ')') {
                depth--;
                if (depth == ci_depth) ci_depth = -1;
            } else if (ci_depth >= 0 && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) {
                char cls[5] = {'[', (char)(c | 0x20), (char)(c & ~0x20), ']', 0};
                ok = re_add(&b, cls);
                continue;
            }
            ok = tok_buf_add(&b, &c, 1) == FP4_OK;
        }
        if (ok && in_class) {
            snprintf(why, why_n, "an unterminated character class");
            ok = false;
        }
    }
    if (!ok) {
        if (!why[0]) snprintf(why, why_n, "out of memory");
        free(b.p);
        return why[0] == 'o' && !strcmp(why, "out of memory") ? FP4_ERR_NOMEM : FP4_ERR_UNSUPPORTED;
    }
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *re =
        pcre2_compile((PCRE2_SPTR)b.p, b.n, PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &ec, &eo, NULL);
    free(b.p);
    if (!re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(ec, msg, sizeof msg);
        snprintf(why, why_n, "regex does not compile at %zu: %s", (size_t)eo, (const char *)msg);
        return FP4_ERR_FORMAT;
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* falls back to the interpreter if JIT is unavailable */
    *out = re;
    return FP4_OK;
}

/* The most a chain of Replace steps can multiply a text by: each step at most |content| / |pattern|
 * per byte (eight steps of "a" -> 16 x "a" made 11 bytes into 6.3 GB). */
static fp4_status replace_growth(const fp4_tokenizer *t, const char *name, fp4_error *err) {
    double g[2] = {1, 1};
    for (int i = 0; i < t->n_norm; i++)
        if (t->norm[i].kind == TN_REPLACE) {
            uint32_t in = t->norm[i].re ? t->norm[i].minlen : t->norm[i].a.len;
            if (t->norm[i].b.len > in) g[0] *= (double)t->norm[i].b.len / in;
        }
    for (int i = 0; i < t->n_dec; i++)
        if (t->dec[i].kind == TD_REPLACE && t->dec[i].b.len > t->dec[i].a.len)
            g[1] *= (double)t->dec[i].b.len / t->dec[i].a.len;
    for (int k = 0; k < 2; k++)
        if (g[k] > TOK_MAX_GROWTH)
            return fp4_fail(err, FP4_ERR_LIMIT, name, k ? "decoder" : "normalizer", "tok.replace-growth",
                            "the %s's Replace steps can make %.3g bytes of each byte, above the cap of %d",
                            k ? "decoder" : "normalizer", g[k], TOK_MAX_GROWTH);
    return FP4_OK;
}

fp4_status tok_finish(fp4_tokenizer *t, const char *name, fp4_error *err) {
    fp4_status st;
    snprintf(t->name, sizeof t->name, "%s", name ? name : "tokenizer");
    if ((st = replace_growth(t, name, err))) return st;
    /* raw spellings */
    tok_span *raw = realloc(t->raw, (size_t)t->n_vocab * sizeof *t->raw); /* its pages kept */
    if (!raw) return fp4_fail(err, FP4_ERR_NOMEM, name, NULL, "tok.nomem", "out of memory");
    t->raw = raw;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        t->raw[id] = t->text[id];
        if (!(t->flags[id] & TOKF_PRESENT)) continue;
        if (t->kind != FP4_TOK_BYTE_BPE || (t->flags[id] & TOKF_ADDED)) {
            t->flags[id] |= TOKF_RAWOK;
            continue;
        }
        /* byte-level: every character back to its byte; one outside the table gives 0x00 (as the
         * reference's decoder does); decoded straight into the arena (at most n bytes). Printable
         * ASCII stands for itself: a token of nothing else is its own raw spelling. */
        size_t n = t->text[id].len, i = 0, k = 0;
        if (t->arena_len + n + 1 > t->arena_cap &&
            (st = tok_arena_reserve(t, t->arena_cap * 2 + n + 1)) != FP4_OK)
            return fp4_fail(err, st, name, NULL, "tok.nomem", "out of memory");
        if (t->arena_len + n + 1 > t->arena_cap)
            return fp4_fail(err, FP4_ERR_LIMIT, name, NULL, "tok.nomem", "out of memory");
        const uint8_t *s = (const uint8_t *)tok_str(t, t->text[id]);
        char *o = t->arena + t->arena_len;
        bool all = true, same = true;
        while (i < n) {
            if (s[i] >= 0x21 && s[i] <= 0x7E) {
                o[k++] = (char)s[i++];
                continue;
            }
            uint32_t cp;
            if (s[i] >= 0xC2 && s[i] <= 0xDF && i + 1 < n) { /* the table's others: two bytes */
                cp = ((uint32_t)(s[i] & 0x1F) << 6) | (s[i + 1] & 0x3F);
                i += 2;
            } else
                i += (size_t)tok_utf8_dec(s + i, n - i, &cp);
            int byte = cp_to_byte(cp);
            if (byte < 0) all = false;
            o[k++] = (char)(byte < 0 ? 0 : byte);
            same = false;
        }
        if (all) t->flags[id] |= TOKF_RAWOK;
        if (same) continue; /* raw[id] = text[id] */
        o[k] = 0;
        t->raw[id] = (tok_span){(uint32_t)t->arena_len, (uint32_t)k};
        t->arena_len += k + 1;
    }
    st = t->by_text_ready ? FP4_OK : tok_smap_build(t, &t->by_text, t->text, TOKF_PRESENT | TOKF_MODEL);
    if (st == FP4_ERR_DUPLICATE)
        return fp4_fail(err, st, name, "vocab", "tok.duplicate-token",
                        "two vocabulary ids have the same token string");
    if (st) return fp4_fail(err, st, name, NULL, "tok.nomem", "out of memory");
    if (t->kind == FP4_TOK_BYTE_BPE) {
        st = t->ignore_merges ? tok_smap_build(t, &t->by_raw, t->raw, TOKF_PRESENT | TOKF_MODEL | TOKF_RAWOK)
                              : FP4_OK;
        if (st)
            return fp4_fail(err, st, name, "vocab", "tok.duplicate-token",
                            "two vocabulary ids spell the same bytes");
        for (int b = 0; b < 256; b++) {
            char u[4];
            int l = tok_utf8_enc(tok_byte_to_cp((uint8_t)b), u);
            t->byte_id[b] = tok_smap_find(t, &t->by_text, t->text, u, (size_t)l);
        }
    } else {
        for (int b = 0; b < 256; b++) {
            char u[8];
            snprintf(u, sizeof u, "<0x%02X>", b);
            t->byte_id[b] = tok_smap_find(t, &t->by_text, t->text, u, 6);
        }
        free(t->cp_id);
        t->cp_id = malloc(65536 * sizeof *t->cp_id);
        if (!t->cp_id) return fp4_fail(err, FP4_ERR_NOMEM, name, NULL, "tok.nomem", "out of memory");
        for (uint32_t cp = 0; cp < 65536; cp++) {
            char u[4];
            t->cp_id[cp] = cp >= 0xD800 && cp < 0xE000
                               ? -1
                               : tok_smap_find(t, &t->by_text, t->text, u, (size_t)tok_utf8_enc(cp, u));
        }
    }
    tok_spm_split_setup(t);
    /* added tokens: sorted by id, normalized spellings, the matchers (tok_added.c) */
    qsort(t->added, (size_t)t->n_added, sizeof *t->added, tok_added_cmp_id);
    t->any_norm_added = false;
    for (int32_t i = 0; i < t->n_added; i++) {
        tok_added *a = &t->added[i];
        if (i && a->id == t->added[i - 1].id)
            return fp4_fail(err, FP4_ERR_DUPLICATE, name, "added_tokens", "tok.duplicate-added",
                            "added token id %d appears twice", (int)a->id);
        if (a->content.len == 0)
            return fp4_fail(err, FP4_ERR_FORMAT, name, "added_tokens", "tok.added-empty",
                            "added token %d is empty", (int)a->id);
        a->norm = a->content;
        if (a->normalized && t->n_norm > 0) {
            tok_buf nb = {0};
            if (tok_normalize(t, tok_str(t, a->content), a->content.len, &nb) ||
                tok_arena_add(t, nb.p ? nb.p : "", nb.n, &a->norm)) {
                free(nb.p);
                return fp4_fail(err, FP4_ERR_NOMEM, name, NULL, "tok.nomem", "out of memory");
            }
            free(nb.p);
            if (a->norm.len == 0)
                return fp4_fail(err, FP4_ERR_FORMAT, name, "added_tokens", "tok.added-empty",
                                "added token %d normalizes to nothing", (int)a->id);
            t->any_norm_added = true;
        } else {
            a->normalized = 0;
        }
    }
    for (int pass = 0; pass < 2; pass++)
        if ((st = tok_ac_build(t, pass, name, err))) return st;
    return FP4_OK;
}
