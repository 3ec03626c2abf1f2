/* tok_precompiled.c — the Precompiled normalizer: SentencePiece's precompiled_charsmap (base64 in
 * tokenizer.json): a little-endian u32 byte count, a Darts double-array trie of that many bytes
 * (u32 units), then a pool of NUL-terminated UTF-8 replacement strings. Read as the Rust library
 * reads it (tokenizers 0.22, normalizers/precompiled.rs with spm_precompiled): the text is cut into
 * extended grapheme clusters; a cluster of under 6 bytes with a key among its prefixes becomes the
 * replacement of the shortest such key (the whole cluster, whatever the key's length); otherwise each
 * character is replaced the same way, or kept. The JavaScript reference does not read the blob (it
 * approximates it with NFKC and a few character classes), so the Rust library is the oracle here.
 * Hostile blobs: every index is checked (a unit outside the array or a string outside the pool, or
 * a replacement that is not whole UTF-8, is no match), the blob is capped. */
#include "tok_impl.h"
#include <stdio.h>
#include <stdlib.h>
#include <utf8proc.h>

#define CHARSMAP_MAX_BYTES (16u << 20)

struct tok_charsmap {
    uint32_t *unit;
    size_t n_unit;
    char *pool;
    size_t n_pool;
};

void tok_charsmap_free(tok_charsmap *m) {
    if (!m) return;
    free(m->unit);
    free(m->pool);
    free(m);
}

static int b64_val(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* standard base64 with padding (what the Rust library writes and requires); NULL on any other */
static uint8_t *b64_decode(const char *s, size_t n, size_t *out_n) {
    if (n % 4) return NULL;
    uint8_t *o = malloc(n / 4 * 3 + 1);
    if (!o) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4], pad = 0;
        for (int j = 0; j < 4; j++) {
            unsigned char c = (unsigned char)s[i + j];
            if (c == '=' && i + 4 == n && j >= 2 && (j == 3 || s[i + 3] == '=')) {
                v[j] = 0;
                pad++;
            } else if ((v[j] = b64_val(c)) < 0 || pad) {
                free(o);
                return NULL;
            }
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        o[k++] = (uint8_t)(w >> 16);
        if (pad < 2) o[k++] = (uint8_t)(w >> 8);
        if (pad < 1) o[k++] = (uint8_t)w;
    }
    *out_n = k;
    return o;
}

fp4_status tok_charsmap_load(const char *b64, size_t n, tok_charsmap **out, char *why, size_t why_n) {
    *out = NULL;
    if (n > CHARSMAP_MAX_BYTES / 3 * 4 + 4) {
        snprintf(why, why_n, "a precompiled_charsmap of %zu base64 bytes, above the cap of %u bytes", n,
                 CHARSMAP_MAX_BYTES);
        return FP4_ERR_LIMIT;
    }
    size_t bn = 0;
    uint8_t *b = b64_decode(b64, n, &bn);
    if (!b) {
        snprintf(why, why_n, "precompiled_charsmap is not padded standard base64");
        return FP4_ERR_FORMAT;
    }
    uint32_t trie_bytes = bn >= 4 ? fp4_rd_le32(b) : 0;
    if (bn < 8 || trie_bytes > bn - 4 || trie_bytes < 4) {
        snprintf(why, why_n, "precompiled_charsmap: %zu bytes cannot hold a trie of %u bytes", bn,
                 trie_bytes);
        free(b);
        return FP4_ERR_FORMAT;
    }
    tok_charsmap *m = calloc(1, sizeof *m);
    size_t nu = trie_bytes / 4, pool_at = 4 + nu * 4;
    if (m) m->unit = malloc(nu * sizeof *m->unit);
    if (m && m->unit) m->pool = malloc(bn - pool_at + 1);
    if (!m || !m->unit || !m->pool) {
        tok_charsmap_free(m);
        free(b);
        snprintf(why, why_n, "out of memory");
        return FP4_ERR_NOMEM;
    }
    for (size_t i = 0; i < nu; i++) m->unit[i] = fp4_rd_le32(b + 4 + 4 * i);
    m->n_unit = nu;
    m->n_pool = bn - pool_at;
    memcpy(m->pool, b + pool_at, m->n_pool);
    m->pool[m->n_pool] = 0;
    free(b);
    /* the Rust library takes the pool as one UTF-8 string */
    for (size_t i = 0; i < m->n_pool;) {
        int l = tok_utf8_valid_len((const uint8_t *)m->pool + i, m->n_pool - i);
        if (l <= 0) {
            snprintf(why, why_n, "precompiled_charsmap: its strings are not UTF-8 (byte %zu)", i);
            tok_charsmap_free(m);
            return FP4_ERR_FORMAT;
        }
        i += (size_t)l;
    }
    *out = m;
    return FP4_OK;
}

/* the replacement of the shortest key that is a prefix of s[0, n) (s cut at a NUL), or NULL */
static const char *transform(const tok_charsmap *m, const uint8_t *s, size_t n, size_t *out_n) {
    size_t pos = 0;
    uint32_t u = m->unit[0];
    pos ^= (size_t)((u >> 10) << ((u & (1u << 9)) >> 6));
    for (size_t i = 0; i < n && s[i]; i++) {
        pos ^= s[i];
        if (pos >= m->n_unit) return NULL;
        u = m->unit[pos];
        if ((u & ((1u << 31) | 0xFFu)) != s[i]) return NULL;
        pos ^= (size_t)((u >> 10) << ((u & (1u << 9)) >> 6));
        if (!((u >> 8) & 1)) continue;
        if (pos >= m->n_unit) return NULL;
        size_t at = m->unit[pos] & ((1u << 31) - 1);
        if (at > m->n_pool) return NULL;
        size_t end = at;
        while (end < m->n_pool && m->pool[end]) end++;
        /* whole characters only: the slice must start on a character */
        if (at < m->n_pool && ((uint8_t)m->pool[at] & 0xC0) == 0x80) return NULL;
        *out_n = end - at;
        return m->pool + at;
    }
    return NULL;
}

fp4_status tok_charsmap_normalize(const tok_charsmap *m, const char *s, size_t n, tok_buf *out, size_t cap) {
    const uint8_t *u = (const uint8_t *)s;
    utf8proc_int32_t state = 0;
    size_t g = 0;
    uint32_t prev = 0;
    for (size_t i = 0; i <= n;) {
        uint32_t cp = 0;
        int l = i < n ? tok_utf8_dec(u + i, n - i, &cp) : 0;
        bool brk = i == n;
        if (!brk && i > g && prev < 0x80 && cp < 0x80 && !(prev == '\r' && cp == '\n'))
            brk = true, state = 0; /* two ASCII characters but CR LF: a break, no context left (GB999) */
        else if (!brk && i > g)
            brk = utf8proc_grapheme_break_stateful((utf8proc_int32_t)prev, (utf8proc_int32_t)cp, &state);
        if (i > g && brk) { /* the cluster s[g, i) */
            size_t rn = 0;
            const char *r = i - g < 6 ? transform(m, u + g, i - g, &rn) : NULL;
            if (r) {
                if (tok_buf_add(out, r, rn)) return FP4_ERR_NOMEM;
            } else
                for (size_t k = g; k < i;) {
                    uint32_t c;
                    int cl = tok_utf8_dec(u + k, i - k, &c);
                    r = transform(m, u + k, (size_t)cl, &rn);
                    if (tok_buf_add(out, r ? r : s + k, r ? rn : (size_t)cl)) return FP4_ERR_NOMEM;
                    k += (size_t)cl;
                }
            if (out->n > cap) return FP4_ERR_LIMIT;
            g = i;
        }
        if (i == n) break;
        prev = cp;
        i += (size_t)l;
    }
    return FP4_OK;
}
