/* tok_gguf.c — tokenizers in GGUF metadata (tokenizer.ggml.*), read and written.
 *
 * Read: model "gpt2" (byte-level BPE: tokens, merges, pre -> the regex table below) or "llama"
 * (SentencePiece-style: tokens, scores, token_type, add_space_prefix; merges when present, as
 * fp4lane writes them, else llama.cpp's score rule). token_type 3 (control) and 2 (unknown) are
 * special added tokens, 4 (user-defined) non-special added tokens. Refusals: tok.gguf-* rules
 * naming the key. Written: the same keys, so that reading the file back encodes identically. */
#include "tok_impl.h"
#include <stdio.h>
#include <stdlib.h>

enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };

#define GFAIL(code, key, rule, ...) fp4_fail(err, code, name, key, rule, __VA_ARGS__)

static fp4_status get_id(const fp4_gguf *g, const char *name, const char *key, int32_t n_vocab, int32_t *out,
                         fp4_error *err) {
    int64_t i = fp4_gguf_key_index(g, key);
    if (i < 0) return FP4_OK;
    uint32_t v;
    int32_t sv;
    if (fp4_gguf_get_u32(g, i, &v) == FP4_OK) {
    } else if (fp4_gguf_get_i32(g, i, &sv) == FP4_OK && sv >= -1) {
        if (sv == -1) return FP4_OK;
        v = (uint32_t)sv;
    } else return GFAIL(FP4_ERR_DTYPE, key, "tok.gguf-type", "%s is not a uint32", key);
    if (v >= (uint32_t)n_vocab)
        return GFAIL(FP4_ERR_FORMAT, key, "tok.id-range", "%s = %u, vocabulary has %d tokens", key, v,
                     (int)n_vocab);
    *out = (int32_t)v;
    return FP4_OK;
}

static fp4_status get_flag(const fp4_gguf *g, const char *name, const char *key, bool *out, fp4_error *err) {
    int64_t i = fp4_gguf_key_index(g, key);
    if (i < 0) return FP4_OK;
    int b;
    if (fp4_gguf_get_bool(g, i, &b))
        return GFAIL(FP4_ERR_DTYPE, key, "tok.gguf-type", "%s is not a bool", key);
    *out = b != 0;
    return FP4_OK;
}

static fp4_status add_span(fp4_tokenizer *t, const char *s, size_t n, tok_span *sp) {
    return tok_arena_add(t, s, n, sp);
}

/* model "bert": llama.cpp writes a word's first piece after U+2581 and the others bare; the
 * normalizer, pre-tokenizer and limits are BERT's (tok_wpm.c); [CLS] and [SEP] frame a sequence */
static fp4_status wpm_setup(const fp4_gguf *g, const char *name, fp4_tokenizer *t, fp4_error *err) {
    tok_span lower, space, none;
    if (add_span(t, "\xE2\x96\x81", 3, &lower) || add_span(t, " ", 1, &space) || add_span(t, "", 0, &none))
        return GFAIL(FP4_ERR_NOMEM, NULL, "tok.nomem", "out of memory");
    const uint8_t all = TOK_BERT_CLEAN | TOK_BERT_CHINESE | TOK_BERT_STRIP | TOK_BERT_LOWER;
    t->norm[t->n_norm++] = (tok_norm){.kind = TN_BERT, .bert = all};
    t->pre[t->n_pre++] = (tok_pre){.kind = TP_BERT};
    t->wp_start = lower;
    t->wp_cont = none;
    t->wp_max_chars = 100;
    for (int32_t i = 0; i < t->n_vocab; i++)
        if (t->text[i].len > t->wp_max_len) t->wp_max_len = t->text[i].len;
    t->dec[t->n_dec++] = (tok_dec){.kind = TD_REPLACE, .a = lower, .b = space};
    t->dec[t->n_dec++] = (tok_dec){.kind = TD_FUSE};
    t->dec[t->n_dec++] = (tok_dec){.kind = TD_STRIP, .a = space, .start = 1, .stop = 0};
    t->has_decoder = true;
    int32_t cls = -1, sep = -1;
    fp4_status st = get_id(g, name, "tokenizer.ggml.cls_token_id", t->n_vocab, &cls, err);
    if (!st) st = get_id(g, name, "tokenizer.ggml.seperator_token_id", t->n_vocab, &sep, err);
    if (!st && cls >= 0 && !t->n_tmpl_pre) t->tmpl_pre[t->n_tmpl_pre++] = cls;
    if (!st && sep >= 0 && !t->n_tmpl_post) t->tmpl_post[t->n_tmpl_post++] = sep;
    return st;
}

fp4_status fp4_tokenizer_from_gguf(const fp4_gguf *g, const char *name, fp4_tokenizer **out, fp4_error *err) {
    if (!g || !out) return fp4_fail(err, FP4_ERR_INVALID_ARG, name, NULL, "tok.arg", "NULL argument");
    *out = NULL;
    if (!name) name = "gguf";
    const char *ms;
    uint64_t ml;
    int64_t ki = fp4_gguf_key_index(g, "tokenizer.ggml.model");
    if (ki < 0)
        return GFAIL(FP4_ERR_NOT_FOUND, "tokenizer.ggml.model", "tok.gguf-missing",
                     "no tokenizer in this GGUF");
    if (fp4_gguf_get_str(g, ki, &ms, &ml))
        return GFAIL(FP4_ERR_DTYPE, "tokenizer.ggml.model", "tok.gguf-type",
                     "tokenizer.ggml.model is not a string");
    bool gpt2 = ml == 4 && !memcmp(ms, "gpt2", 4), llama = ml == 5 && !memcmp(ms, "llama", 5);
    /* Gemma 4: SentencePiece-style BPE by merges on the text's own characters, split at newlines */
    bool gemma4 = ml == 6 && !memcmp(ms, "gemma4", 6);
    if (gemma4 && fp4_gguf_key_index(g, "tokenizer.ggml.merges") < 0)
        return GFAIL(FP4_ERR_NOT_FOUND, "tokenizer.ggml.merges", "tok.gguf-missing",
                     "a gemma4 tokenizer needs merges");
    llama = llama || gemma4;
    bool bert = ml == 4 && !memcmp(ms, "bert", 4); /* WordPiece, spelled as llama.cpp converts it */
    if (!gpt2 && !llama && !bert)
        return GFAIL(FP4_ERR_UNSUPPORTED, "tokenizer.ggml.model", "tok.gguf-model",
                     "tokenizer model '%.*s' is not supported", (int)(ml > 32 ? 32 : ml), ms);
    int64_t kt = fp4_gguf_key_index(g, "tokenizer.ggml.tokens");
    int64_t n;
    if (kt < 0)
        return GFAIL(FP4_ERR_NOT_FOUND, "tokenizer.ggml.tokens", "tok.gguf-missing",
                     "no tokenizer.ggml.tokens");
    if (fp4_gguf_get_arr_str_count(g, kt, &n))
        return GFAIL(FP4_ERR_DTYPE, "tokenizer.ggml.tokens", "tok.gguf-type",
                     "tokenizer.ggml.tokens is not a string array");
    if (n == 0 || n > FP4_TOK_MAX_VOCAB)
        return GFAIL(FP4_ERR_LIMIT, "tokenizer.ggml.tokens", "tok.limit", "%llu tokens",
                     (unsigned long long)n);
    const uint8_t *types = NULL; /* int32 little-endian, unaligned in the file */
    const float *scores = NULL;
    const void *data;
    int64_t cnt;
    int64_t ky = fp4_gguf_key_index(g, "tokenizer.ggml.token_type");
    if (ky >= 0) {
        if (fp4_gguf_get_arr(g, ky, FP4_GGUF_INT32, &data, &cnt) || cnt != n)
            return GFAIL(FP4_ERR_FORMAT, "tokenizer.ggml.token_type", "tok.gguf-type",
                         "token_type is not an int32 array of %llu", (unsigned long long)n);
        types = data;
    }
    int64_t ksc = fp4_gguf_key_index(g, "tokenizer.ggml.scores");
    if (ksc >= 0) {
        if (fp4_gguf_get_arr(g, ksc, FP4_GGUF_FLOAT32, &data, &cnt) || cnt != n)
            return GFAIL(FP4_ERR_FORMAT, "tokenizer.ggml.scores", "tok.gguf-type",
                         "scores is not a float32 array of %llu", (unsigned long long)n);
        scores = data;
    }
    int64_t km = fp4_gguf_key_index(g, "tokenizer.ggml.merges");
    int64_t n_merges = 0;
    if (km >= 0 && fp4_gguf_get_arr_str_count(g, km, &n_merges))
        return GFAIL(FP4_ERR_DTYPE, "tokenizer.ggml.merges", "tok.gguf-type", "merges is not a string array");
    if (gpt2 && km < 0)
        return GFAIL(FP4_ERR_NOT_FOUND, "tokenizer.ggml.merges", "tok.gguf-missing",
                     "a gpt2 tokenizer needs merges");
    if (llama && km < 0 && !scores)
        return GFAIL(FP4_ERR_NOT_FOUND, "tokenizer.ggml.scores", "tok.gguf-missing",
                     "a llama tokenizer needs scores or merges");
    if (n_merges > (int64_t)FP4_TOK_MAX_VOCAB * 2)
        return GFAIL(FP4_ERR_LIMIT, "tokenizer.ggml.merges", "tok.limit", "too many merges");

    fp4_tokenizer *t = tok_new();
    if (!t || tok_reserve_ids(t, (int32_t)n)) {
        fp4_tokenizer_free(t);
        return GFAIL(FP4_ERR_NOMEM, NULL, "tok.nomem", "out of memory");
    }
    fp4_status st = FP4_OK;
    t->kind = gpt2 ? FP4_TOK_BYTE_BPE : bert ? FP4_TOK_WORDPIECE : FP4_TOK_SPM_BPE;
    int32_t n_added = 0;
    for (int64_t i = 0; i < n && types; i++)
        {
        int32_t ty = (int32_t)fp4_rd_le32(types + 4 * i);
        if (ty == TT_CONTROL || ty == TT_USER || ty == TT_UNKNOWN) n_added++;
    }
    if (n_added > FP4_TOK_MAX_ADDED)
        st = GFAIL(FP4_ERR_LIMIT, "tokenizer.ggml.token_type", "tok.limit", "too many added tokens");
    t->added = st ? NULL : calloc((size_t)n_added + 1, sizeof *t->added);
    if (!st && !t->added) st = GFAIL(FP4_ERR_NOMEM, NULL, "tok.nomem", "out of memory");
    for (int64_t i = 0; !st && i < n; i++) {
        const char *s;
        uint64_t l;
        fp4_gguf_get_arr_str(g, kt, i, &s, &l);
        if (l == 0)
            st = GFAIL(FP4_ERR_FORMAT, "tokenizer.ggml.tokens", "tok.token-empty", "token %llu is empty",
                       (unsigned long long)i);
        else if (l > FP4_TOK_MAX_TOKEN_BYTES)
            st = GFAIL(FP4_ERR_LIMIT, "tokenizer.ggml.tokens", "tok.token-length",
                       "token %llu has %llu bytes", (unsigned long long)i, (unsigned long long)l);
        else if (add_span(t, s, (size_t)l, &t->text[i]))
            st = GFAIL(FP4_ERR_NOMEM, NULL, "tok.nomem", "out of memory");
        for (uint64_t k = 0; !st && k < l;) {
            if ((uint8_t)s[k] < 0x80) {
                k++;
                continue;
            }
            int vl = tok_utf8_valid_len((const uint8_t *)s + k, (size_t)(l - k));
            if (vl < 0)
                st = GFAIL(FP4_ERR_FORMAT, "tokenizer.ggml.tokens", "tok.token-utf8",
                           "token %llu is not valid UTF-8", (unsigned long long)i);
            k += (uint64_t)(vl < 0 ? 1 : vl);
        }
        if (st) break;
        int ty = types ? (int32_t)fp4_rd_le32(types + 4 * i) : TT_NORMAL;
        if (ty < TT_NORMAL || ty > TT_BYTE)
            st = GFAIL(FP4_ERR_FORMAT, "tokenizer.ggml.token_type", "tok.gguf-token-type",
                       "token %llu has type %d", (unsigned long long)i, ty);
        t->flags[i] = TOKF_PRESENT | TOKF_MODEL;
        if (ty == TT_CONTROL || ty == TT_USER || ty == TT_UNKNOWN) {
            tok_added *a = &t->added[t->n_added++];
            a->id = (int32_t)i;
            a->content = t->text[i];
            a->special = ty != TT_USER;
            t->flags[i] = TOKF_PRESENT | TOKF_ADDED | (a->special ? TOKF_SPECIAL : 0) |
                          (ty == TT_UNKNOWN ? TOKF_MODEL : 0);
        }
    }
    bool add_bos = llama, add_eos = false, space_prefix = true;
    if (!st) st = get_id(g, name, "tokenizer.ggml.bos_token_id", t->n_vocab, &t->bos, err);
    if (!st) st = get_id(g, name, "tokenizer.ggml.eos_token_id", t->n_vocab, &t->eos, err);
    if (!st) st = get_id(g, name, "tokenizer.ggml.padding_token_id", t->n_vocab, &t->pad, err);
    if (!st) st = get_id(g, name, "tokenizer.ggml.unknown_token_id", t->n_vocab, &t->unk, err);
    if (!st) st = get_flag(g, name, "tokenizer.ggml.add_bos_token", &add_bos, err);
    if (!st) st = get_flag(g, name, "tokenizer.ggml.add_eos_token", &add_eos, err);
    if (!st) st = get_flag(g, name, "tokenizer.ggml.add_space_prefix", &space_prefix, err);
    if (!st && add_bos) {
        if (t->bos < 0)
            st = GFAIL(FP4_ERR_FORMAT, "tokenizer.ggml.add_bos_token", "tok.gguf-bos",
                       "add_bos_token without a bos id");
        t->tmpl_pre[t->n_tmpl_pre++] = t->bos;
    }
    if (!st && add_eos) {
        if (t->eos < 0)
            st = GFAIL(FP4_ERR_FORMAT, "tokenizer.ggml.add_eos_token", "tok.gguf-eos",
                       "add_eos_token without an eos id");
        t->tmpl_post[t->n_tmpl_post++] = t->eos;
    }
    /* pipeline */
    char why[200] = "";
    if (!st && gpt2) {
        const tok_pre_entry *pe = NULL;
        int64_t kp = fp4_gguf_key_index(g, "tokenizer.ggml.pre");
        const char *ps = "gpt-2";
        uint64_t pl = 5;
        if (kp >= 0 && fp4_gguf_get_str(g, kp, &ps, &pl))
            st = GFAIL(FP4_ERR_DTYPE, "tokenizer.ggml.pre", "tok.gguf-type",
                       "tokenizer.ggml.pre is not a string");
        if (!st) pe = tok_pre_find(ps, (size_t)pl);
        if (!st && !pe)
            st = GFAIL(FP4_ERR_UNSUPPORTED, "tokenizer.ggml.pre", "tok.gguf-pre",
                       "pre-tokenizer '%.*s' is not supported", (int)(pl > 32 ? 32 : pl), ps);
        if (!st && (st = tok_pre_setup(t, pe, why, sizeof why)))
            st = GFAIL(st, "tokenizer.ggml.pre", st == FP4_ERR_NOMEM ? "tok.nomem" : "tok.regex", "%s", why);
        t->dec[t->n_dec++] = (tok_dec){.kind = TD_BYTELEVEL};
        t->has_decoder = true;
    } else if (!st && bert) {
        st = wpm_setup(g, name, t, err);
    } else if (!st) {
        tok_span lower = {0, 0}, space = {0, 0};
        if (add_span(t, "\xE2\x96\x81", 3, &lower) || add_span(t, " ", 1, &space))
            st = GFAIL(FP4_ERR_NOMEM, NULL, "tok.nomem", "out of memory");
        if (gemma4) { /* the newline runs and the text between them are words of their own */
            t->pre[0] = (tok_pre){.kind = TP_SPLIT};
            st = tok_compile_regex("[^\\n]+|[\\n]+", false, &t->pre[0].re, why, sizeof why);
            if (st) st = GFAIL(st, "tokenizer.ggml.model", "tok.regex", "%s", why);
            t->n_pre = 1;
            t->pre_other = true;
        }
        if (space_prefix) t->norm[t->n_norm++] = (tok_norm){.kind = TN_PREPEND, .a = lower};
        t->norm[t->n_norm++] = (tok_norm){.kind = TN_REPLACE, .a = space, .b = lower};
        t->dec[t->n_dec++] = (tok_dec){.kind = TD_REPLACE, .a = lower, .b = space};
        t->dec[t->n_dec++] = (tok_dec){.kind = TD_BYTEFALLBACK};
        t->dec[t->n_dec++] = (tok_dec){.kind = TD_FUSE};
        if (space_prefix) t->dec[t->n_dec++] = (tok_dec){.kind = TD_STRIP, .a = space, .start = 1, .stop = 0};
        t->has_decoder = true;
        t->byte_fallback = true;
    }
    if (!st) st = tok_finish(t, name, err);
    if (!st && llama) {
        bool any = false;
        for (int b = 0; b < 256; b++) any = any || t->byte_id[b] >= 0;
        t->byte_fallback = any;
    }
    if (!st && km >= 0) {
        if (tok_mmap_init(&t->merges, (uint32_t)n_merges + 1))
            st = GFAIL(FP4_ERR_NOMEM, NULL, "tok.nomem", "out of memory");
        char buf[2 * FP4_TOK_MAX_TOKEN_BYTES + 2];
        for (int64_t i = 0; !st && i < n_merges; i++) {
            const char *s;
            uint64_t l;
            fp4_gguf_get_arr_str(g, km, i, &s, &l);
            const char *sp = l ? memchr(s, ' ', (size_t)l) : NULL;
            if (!sp || memchr(sp + 1, ' ', (size_t)(l - (uint64_t)(sp - s) - 1)) || l > sizeof buf) {
                st = GFAIL(FP4_ERR_FORMAT, "tokenizer.ggml.merges", "tok.merge-form",
                           "merge %llu is not \"a b\"", (unsigned long long)i);
                break;
            }
            size_t an = (size_t)(sp - s), bn = (size_t)l - an - 1;
            int32_t ia = tok_smap_find(t, &t->by_text, t->text, s, an),
                    ib = tok_smap_find(t, &t->by_text, t->text, sp + 1, bn);
            memcpy(buf, s, an);
            memcpy(buf + an, sp + 1, bn);
            int32_t io = tok_smap_find(t, &t->by_text, t->text, buf, an + bn);
            if (ia < 0 || ib < 0)
                st = GFAIL(FP4_ERR_FORMAT, "tokenizer.ggml.merges", "tok.merge-unknown",
                           "merge %llu names an unknown token", (unsigned long long)i);
            else if (io < 0)
                st = GFAIL(FP4_ERR_FORMAT, "tokenizer.ggml.merges", "tok.merge-result",
                           "merge %llu makes an unknown token", (unsigned long long)i);
            else if (!tok_mmap_put(&t->merges, ia, ib, (uint32_t)i, io))
                st = GFAIL(FP4_ERR_DUPLICATE, "tokenizer.ggml.merges", "tok.merge-duplicate",
                           "merge %llu repeats a pair", (unsigned long long)i);
        }
        t->n_merges = (uint32_t)n_merges;
    } else if (!st && !bert) {
        t->use_scores = true;
        t->scores = malloc((size_t)n * sizeof *t->scores);
        if (!t->scores) st = GFAIL(FP4_ERR_NOMEM, NULL, "tok.nomem", "out of memory");
        for (int64_t i = 0; !st && i < n; i++) {
            t->scores[i] = fp4_rd_lef32((const uint8_t *)scores + 4 * i);
            if (t->scores[i] != t->scores[i])
                st = GFAIL(FP4_ERR_FORMAT, "tokenizer.ggml.scores", "tok.gguf-score", "score %llu is NaN",
                           (unsigned long long)i);
        }
    }
    if (st) {
        fp4_tokenizer_free(t);
        return st;
    }
    *out = t;
    return FP4_OK;
}

/* ---- writing ---- */
static bool span_is(const fp4_tokenizer *t, tok_span s, const char *lit) {
    return s.len == strlen(lit) && !memcmp(tok_str(t, s), lit, s.len);
}

/* which GGUF description fits t; -1 when none does */
static int gguf_shape(const fp4_tokenizer *t, const tok_pre_entry **pe, bool *space_prefix) {
    if (t->pre_other || t->kind == FP4_TOK_WORDPIECE || t->kind == FP4_TOK_UNIGRAM) return -1;
    if (t->kind == FP4_TOK_BYTE_BPE) {
        if (t->n_dec != 1 || t->dec[0].kind != TD_BYTELEVEL) return -1;
        for (int i = 0; i < tok_pre_table_n; i++) {
            const tok_pre_entry *e = &tok_pre_table[i];
            if (e->ignore_merges != t->ignore_merges || t->n_norm != e->nfc ||
                (e->nfc && t->norm[0].kind != TN_NFC))
                continue;
            if (!e->regex && !e->seq && t->n_pre == 1 && t->pre_gpt2 && !t->pre[0].prefix_space) *pe = e;
            if (e->regex && t->n_pre == 2 && t->pre_regex && !strcmp(t->pre_regex, e->regex) &&
                t->pre[1].kind == TP_BYTELEVEL && !t->pre[1].re && !t->pre[1].prefix_space)
                *pe = e;
            if (*pe) return 0;
        }
        return -1;
    }
    if (t->n_pre || t->ignore_merges || t->use_scores) return t->use_scores && !t->n_pre ? 1 : -1;
    int k = 0;
    *space_prefix = t->n_norm == 2;
    if (t->n_norm == 2 && !(t->norm[0].kind == TN_PREPEND && span_is(t, t->norm[0].a, "\xE2\x96\x81")))
        return -1;
    if (t->n_norm < 1 || t->n_norm > 2) return -1;
    k = t->n_norm - 1;
    if (t->norm[k].kind != TN_REPLACE || !span_is(t, t->norm[k].a, " ") ||
        !span_is(t, t->norm[k].b, "\xE2\x96\x81"))
        return -1;
    int nd = *space_prefix ? 4 : 3;
    if (t->n_dec != nd || t->dec[0].kind != TD_REPLACE || !span_is(t, t->dec[0].a, "\xE2\x96\x81") ||
        !span_is(t, t->dec[0].b, " ") || t->dec[1].kind != TD_BYTEFALLBACK || t->dec[2].kind != TD_FUSE)
        return -1;
    if (*space_prefix && (t->dec[3].kind != TD_STRIP || !span_is(t, t->dec[3].a, " ") ||
                          t->dec[3].start != 1 || t->dec[3].stop != 0))
        return -1;
    return 1;
}

fp4_status fp4_tokenizer_write_gguf(const fp4_tokenizer *t, fp4_gguf_writer *w, fp4_error *err) {
    return fp4_tokenizer_write_gguf_n(t, w, 0, -1, -1, err);
}

fp4_status fp4_tokenizer_write_gguf_n(const fp4_tokenizer *t, fp4_gguf_writer *w, int32_t n_vocab,
                                      int32_t bos_dflt, int32_t eos_dflt, fp4_error *err) {
    const char *name = "gguf writer";
    if (!t || !w) return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "tok.arg", "NULL argument");
    const tok_pre_entry *pe = NULL;
    bool space_prefix = true;
    int shape = gguf_shape(t, &pe, &space_prefix);
    if (shape < 0)
        return GFAIL(FP4_ERR_UNSUPPORTED, NULL, "tok.gguf-shape",
                     "this tokenizer's pipeline has no GGUF description");
    if (t->n_tmpl_pre > 1 || t->n_tmpl_post > 1 ||
        (t->n_tmpl_pre && t->bos >= 0 && t->tmpl_pre[0] != t->bos) ||
        (t->n_tmpl_post && t->eos >= 0 && t->tmpl_post[0] != t->eos))
        return GFAIL(FP4_ERR_UNSUPPORTED, NULL, "tok.gguf-template",
                     "the post-processor template is not BOS/EOS");
    for (int32_t i = 0; i < t->n_added; i++)
        if (t->added[i].lstrip || t->added[i].rstrip || t->added[i].normalized || t->added[i].single_word)
            return GFAIL(FP4_ERR_UNSUPPORTED, NULL, "tok.gguf-added",
                         "added token %d has lstrip/rstrip/normalized/single_word", (int)t->added[i].id);
    if (n_vocab > FP4_TOK_MAX_VOCAB)
        return GFAIL(FP4_ERR_LIMIT, "tokenizer.ggml.tokens", "tok.limit", "%d tokens", (int)n_vocab);
    int32_t n = t->n_vocab > n_vocab ? t->n_vocab : n_vocab; /* ids past t's: placeholders */
    const char **strs = calloc((size_t)n, sizeof *strs);
    uint64_t *lens = calloc((size_t)n, sizeof *lens);
    int32_t *types = calloc((size_t)n, sizeof *types);
    float *scores = shape == 1 ? calloc((size_t)n, sizeof *scores) : NULL;
    char (*pads)[24] = calloc((size_t)n, sizeof *pads);
    char **mstr = calloc((size_t)t->n_merges + 1, sizeof *mstr);
    uint64_t *mlen = calloc((size_t)t->n_merges + 1, sizeof *mlen);
    fp4_status st =
        (strs && lens && types && pads && mstr && mlen && (shape != 1 || scores)) ? FP4_OK : FP4_ERR_NOMEM;
    for (int32_t i = 0; !st && i < n; i++) {
        if (i >= t->n_vocab || !(t->flags[i] & TOKF_PRESENT)) { /* a gap: a placeholder no text makes */
            snprintf(pads[i], sizeof pads[i], "[PAD%d]", (int)i);
            strs[i] = pads[i];
            lens[i] = strlen(pads[i]);
            types[i] = TT_UNUSED;
            continue;
        }
        strs[i] = tok_str(t, t->text[i]);
        lens[i] = t->text[i].len;
        uint8_t f = t->flags[i];
        types[i] = (f & TOKF_ADDED) ? ((f & TOKF_SPECIAL) ? (i == t->unk ? TT_UNKNOWN : TT_CONTROL) : TT_USER)
                                    : TT_NORMAL;
        if (types[i] == TT_NORMAL && t->kind == FP4_TOK_SPM_BPE && lens[i] == 6) {
            int b = -1;
            for (int k = 0; k < 256; k++)
                if (t->byte_id[k] == i) b = k;
            if (b >= 0) types[i] = TT_BYTE;
        }
        if (scores && t->use_scores) scores[i] = t->scores[i];
    }
    /* merges in rank order */
    for (uint32_t s = 0; !st && t->merges.slot && s <= t->merges.mask; s++) {
        const tok_mslot *ms = &t->merges.slot[s];
        if (ms->key == UINT64_MAX) continue;
        int32_t a = (int32_t)(ms->key >> 32), b = (int32_t)(uint32_t)ms->key;
        uint32_t r = ms->rank;
        if (r >= t->n_merges || mstr[r]) {
            st = FP4_ERR_FORMAT;
            break;
        }
        if (memchr(tok_str(t, t->text[a]), ' ', t->text[a].len) ||
            memchr(tok_str(t, t->text[b]), ' ', t->text[b].len)) {
            st = FP4_ERR_UNSUPPORTED;
            break;
        }
        size_t l = (size_t)t->text[a].len + 1 + t->text[b].len;
        mstr[r] = malloc(l + 1);
        if (!mstr[r]) {
            st = FP4_ERR_NOMEM;
            break;
        }
        memcpy(mstr[r], tok_str(t, t->text[a]), t->text[a].len);
        mstr[r][t->text[a].len] = ' ';
        memcpy(mstr[r] + t->text[a].len + 1, tok_str(t, t->text[b]), t->text[b].len);
        mstr[r][l] = 0;
        mlen[r] = l;
        if (scores && !t->use_scores && scores[ms->out] == 0.0f) scores[ms->out] = -(float)(r + 1);
    }
    if (st == FP4_ERR_UNSUPPORTED)
        st = GFAIL(st, "tokenizer.ggml.merges", "tok.gguf-merge-space", "a merged token holds a space");
    else if (st)
        st = GFAIL(st, NULL, st == FP4_ERR_NOMEM ? "tok.nomem" : "tok.internal", "cannot list the merges");
    fp4_error we = {0};
#define W(call)                                                                                    \
    do {                                                                                           \
        if (!st && (st = (call))) st = GFAIL(st, we.tensor, "tok.gguf-write", "%s", we.msg);         \
    } while (0)
    W(fp4_gguf_writer_add_str(w, "tokenizer.ggml.model", shape == 0 ? "gpt2" : "llama", shape == 0 ? 4 : 5,
                              &we));
    if (shape == 0) W(fp4_gguf_writer_add_str(w, "tokenizer.ggml.pre", pe->name, strlen(pe->name), &we));
    W(fp4_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", strs, lens, (uint64_t)n, &we));
    W(fp4_gguf_writer_add_arr(w, "tokenizer.ggml.token_type", FP4_GGUF_INT32, types, (uint64_t)n, &we));
    if (t->n_merges)
        W(fp4_gguf_writer_add_arr_str(w, "tokenizer.ggml.merges", (const char *const *)mstr, mlen,
                                      t->n_merges, &we));
    if (scores)
        W(fp4_gguf_writer_add_arr(w, "tokenizer.ggml.scores", FP4_GGUF_FLOAT32, scores, (uint64_t)n, &we));
    int32_t bos = t->n_tmpl_pre ? t->tmpl_pre[0] : t->bos, eos = t->n_tmpl_post ? t->tmpl_post[0] : t->eos;
    if (bos < 0 && bos_dflt >= 0 && bos_dflt < n) bos = bos_dflt;
    if (eos < 0 && eos_dflt >= 0 && eos_dflt < n) eos = eos_dflt;
    if (bos >= 0) W(fp4_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)bos, &we));
    if (eos >= 0) W(fp4_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)eos, &we));
    if (t->pad >= 0) W(fp4_gguf_writer_add_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)t->pad, &we));
    if (t->unk >= 0) W(fp4_gguf_writer_add_u32(w, "tokenizer.ggml.unknown_token_id", (uint32_t)t->unk, &we));
    W(fp4_gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", t->n_tmpl_pre > 0, &we));
    W(fp4_gguf_writer_add_bool(w, "tokenizer.ggml.add_eos_token", t->n_tmpl_post > 0, &we));
    if (shape == 1) W(fp4_gguf_writer_add_bool(w, "tokenizer.ggml.add_space_prefix", space_prefix, &we));
#undef W
    for (uint32_t r = 0; mstr && r < t->n_merges; r++) free(mstr[r]);
    free(mstr);
    free(mlen);
    free(strs);
    free(lens);
    free(types);
    free(scores);
    free(pads);
    if (st == FP4_ERR_NOMEM && err && !err->rule[0])
        fp4_fail(err, st, t->name, NULL, "tok.nomem", "out of memory writing the tokenizer's GGUF keys");
    return st;
}
