/* tok_wpm.c — WordPiece (BERT) as Hugging Face's tokenizers defines it: the BertNormalizer (drop
 * NUL, U+FFFD and other-category characters, whitespace to a space, spaces around CJK ideographs,
 * accents stripped after NFD, lowercase), the BertPreTokenizer (split at whitespace, each
 * punctuation character a word of its own) and the WordPiece model (greedy longest match from the
 * left; a word that cannot be covered, or longer than max_input_chars_per_word characters, is the
 * unknown token). Two spellings of the vocabulary: tokenizer.json's (a word's first piece as is,
 * the others after "##") and llama.cpp's GGUF (the first after U+2581, the others as is). */
#include "tok_impl.h"
#include <stdlib.h>
#include <utf8proc.h>

/* Rust's char::is_whitespace: Unicode White_Space */
static bool bert_space(uint32_t c) {
    return (c >= 9 && c <= 13) || c == 32 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
           c == 0x3000;
}
static bool bert_other(uint32_t c) { /* general category C*: Cc, Cf, Cs, Co, Cn */
    if (c == '\t' || c == '\n' || c == '\r') return false;
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return k == UTF8PROC_CATEGORY_CN || k >= UTF8PROC_CATEGORY_CC;
}
static bool bert_chinese(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) ||
           (c >= 0x2B920 && c <= 0x2CEAF) || (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}
static bool bert_punct(uint32_t c) { /* ASCII punctuation (symbols included) or Unicode P* */
    if (c < 128)
        return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return k >= UTF8PROC_CATEGORY_PC && k <= UTF8PROC_CATEGORY_PO;
}

static fp4_status put_cp(tok_buf *b, uint32_t c) {
    char u[4];
    return tok_buf_add(b, u, (size_t)tok_utf8_enc(c, u));
}

/* NFD, then the nonspacing marks dropped */
static fp4_status strip_accents(const char *s, size_t n, tok_buf *out) {
    utf8proc_uint8_t *d = NULL;
    if (!n) return FP4_OK;
    utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &d,
                                      (utf8proc_option_t)(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE));
    if (r < 0) return r == UTF8PROC_ERROR_NOMEM ? FP4_ERR_NOMEM : FP4_ERR_FORMAT;
    fp4_status st = FP4_OK;
    for (size_t i = 0; !st && i < (size_t)r;) {
        uint32_t c;
        int l = tok_utf8_dec(d + i, (size_t)r - i, &c);
        if (utf8proc_category((utf8proc_int32_t)c) != UTF8PROC_CATEGORY_MN)
            st = tok_buf_add(out, d + i, (size_t)l);
        i += (size_t)l;
    }
    free(d);
    return st;
}

/* the Rust library's lowercase of one code point (U+0130 is the one that becomes two) */
static fp4_status rust_lower(const char *s, size_t n, tok_buf *out) {
    fp4_status st = FP4_OK;
    for (size_t i = 0; !st && i < n;) {
        uint32_t c;
        i += (size_t)tok_utf8_dec((const uint8_t *)s + i, n - i, &c);
        if (c == 0x130) {
            st = put_cp(out, 'i');
            if (!st) st = put_cp(out, 0x307);
        } else st = put_cp(out, (uint32_t)utf8proc_tolower((utf8proc_int32_t)c));
    }
    return st;
}

fp4_status tok_bert_normalize(uint8_t flags, const char *s, size_t n, tok_buf *out) {
    tok_buf a = {0}, b = {0};
    const bool js = flags & TOK_BERT_JS;
    fp4_status st = tok_buf_add(&a, "", 0);
    for (size_t i = 0; !st && i < n;) { /* clean_text, handle_chinese_chars */
        uint32_t c;
        i += (size_t)tok_utf8_dec((const uint8_t *)s + i, n - i, &c);
        bool other = js ? bert_other(c) && utf8proc_category((utf8proc_int32_t)c) != UTF8PROC_CATEGORY_CN
                        : bert_other(c);
        if ((flags & TOK_BERT_CLEAN) && (c == 0 || c == 0xFFFD || other)) continue;
        if ((flags & TOK_BERT_CLEAN) && (js ? tok_js_space(c) : bert_space(c))) c = ' ';
        if ((flags & TOK_BERT_CHINESE) && bert_chinese(c) && (!js || c < 0x10000)) {
            st = tok_buf_add(&a, " ", 1);
            if (!st) st = put_cp(&a, c);
            if (!st) st = tok_buf_add(&a, " ", 1);
        } else st = put_cp(&a, c);
    }
    /* the reference lowercases first (the whole text, as JavaScript does), the Rust library last */
    if (!st && js && (flags & TOK_BERT_LOWER)) st = tok_js_lower(a.p, a.n, &b), tok_buf_swap(&a, &b);
    if (!st && (flags & TOK_BERT_STRIP)) b.n = 0, st = strip_accents(a.p, a.n, &b), tok_buf_swap(&a, &b);
    if (!st && !js && (flags & TOK_BERT_LOWER)) b.n = 0, st = rust_lower(a.p, a.n, &b), tok_buf_swap(&a, &b);
    if (!st) st = tok_buf_add(out, a.p, a.n);
    free(a.p);
    free(b.p);
    return st;
}

bool tok_bert_next(const char *s, size_t n, size_t *pos, size_t *off, size_t *len) {
    size_t i = *pos;
    for (;;) { /* whitespace is dropped */
        if (i >= n) {
            *pos = n;
            return false;
        }
        uint32_t c;
        int l = tok_utf8_dec((const uint8_t *)s + i, n - i, &c);
        if (!bert_space(c)) break;
        i += (size_t)l;
    }
    *off = i;
    uint32_t c;
    int l = tok_utf8_dec((const uint8_t *)s + i, n - i, &c);
    i += (size_t)l;
    if (!bert_punct(c))
        while (i < n) {
            l = tok_utf8_dec((const uint8_t *)s + i, n - i, &c);
            if (bert_space(c) || bert_punct(c)) break;
            i += (size_t)l;
        }
    *len = i - *off;
    *pos = i;
    return true;
}

fp4_status tok_wpm_word(const fp4_tokenizer *t, const char *w, size_t n, tok_ivec *out) {
    size_t chars = 0;
    for (size_t i = 0; i < n; i++)
        chars += ((uint8_t)w[i] & 0xC0) != 0x80;
    if (chars > t->wp_max_chars) return t->unk >= 0 ? tok_ivec_push(out, t->unk) : FP4_OK;
    size_t mark = out->n, start = 0;
    char buf[FP4_TOK_MAX_TOKEN_BYTES + 8];
    while (start < n) {
        tok_span pre = start ? t->wp_cont : t->wp_start;
        size_t end = n - start > t->wp_max_len ? start + t->wp_max_len : n;
        while (end > start && end < n && ((uint8_t)w[end] & 0xC0) == 0x80)
            end--; /* whole characters */
        int32_t id = -1;
        while (end > start) {
            if (pre.len + (end - start) <= sizeof buf) {
                memcpy(buf, tok_str(t, pre), pre.len);
                memcpy(buf + pre.len, w + start, end - start);
                if ((id = tok_smap_find(t, &t->by_text, t->text, buf, pre.len + (end - start))) >= 0) break;
            }
            end--;
            while (end > start && ((uint8_t)w[end] & 0xC0) == 0x80)
                end--;
        }
        if (id < 0) { /* the word cannot be covered: it is the unknown token */
            out->n = mark;
            return t->unk >= 0 ? tok_ivec_push(out, t->unk) : FP4_OK;
        }
        if (tok_ivec_push(out, id)) return FP4_ERR_NOMEM;
        start = end;
    }
    return FP4_OK;
}
