/* tok_json.c — a Hugging Face tokenizer.json (+ tokenizer_config.json) into an fp4_tokenizer.
 *
 * Accepted (anything else is refused with rule tok.unsupported, naming the field):
 *   model          BPE: vocab {string: id}, merges ["a b" | ["a","b"]], unk_token, byte_fallback,
 *                  ignore_merges; dropout null; continuing_subword_prefix / end_of_word_suffix
 *                  empty or null. WordPiece: vocab, unk_token, continuing_subword_prefix,
 *                  max_input_chars_per_word (tok_wpm.c)
 *   normalizer     null | NFC | NFD | NFKC | NFKD | Prepend | Replace (String pattern) | Lowercase |
 *                  Strip | BertNormalizer | Sequence
 *   pre_tokenizer  null | Split (Regex or String; Isolated, MergedWithPrevious, Removed (Regex),
 *                  Removed with invert) | ByteLevel | Whitespace | WhitespaceSplit | Punctuation |
 *                  Digits | BertPreTokenizer | Metaspace | Sequence (Splits before a ByteLevel)
 *   post_processor null | ByteLevel | TemplateProcessing (single) | Sequence
 *   decoder        null | ByteLevel | Replace (String) | ByteFallback | Fuse | Strip | Metaspace |
 *                  WordPiece | Sequence
 * Where the pinned JavaScript reference and the Rust library differ, the reference's reading is
 * taken or the form is refused by name (docs/TEXT.md).
 * Rules: ids in [0, FP4_TOK_MAX_VOCAB), one token per id and one id per token (tok.duplicate-*),
 * added tokens agree with the vocabulary where they share an id (tok.added-conflict), every merge
 * names two tokens whose concatenation is a token (tok.merge-*), each pair once.
 * Two passes (tok_json_pass): the fast one reads model.vocab and model.merges with tok_jscan.c and
 * the rest with jansson; if it fails for any reason the jansson-only pass runs and decides. */
#include "tok_impl.h"
#include "io/infile.h"
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct jctx {
    fp4_tokenizer *t;
    const char *name;
    fp4_error *err;
    const char *tmpl_names[2][TOK_MAX_TMPL];
    tok_jbig *big; /* where model.vocab and model.merges are */
    bool fast;     /* tok_jscan read them (else jansson did) */
} jctx;

#define FAIL(c, code, field, rule, ...) fp4_fail((c)->err, code, (c)->name, field, rule, __VA_ARGS__)

static const char *jtype(json_t *o) {
    json_t *ty = json_object_get(o, "type");
    return json_is_string(ty) ? json_string_value(ty) : NULL;
}
static bool jflag(json_t *o, const char *k, bool dflt) {
    json_t *v = json_object_get(o, k);
    return json_is_boolean(v) ? json_is_true(v) : dflt;
}
static fp4_status jstr_span(jctx *c, json_t *v, tok_span *out, const char *field) {
    if (!json_is_string(v))
        return FAIL(c, FP4_ERR_FORMAT, field, "tok.json-type", "%s: expected a string", field);
    size_t n = json_string_length(v);
    if (n > FP4_TOK_MAX_TOKEN_BYTES)
        return FAIL(c, FP4_ERR_LIMIT, field, "tok.token-length", "%s: %zu bytes", field, n);
    if (tok_arena_add(c->t, json_string_value(v), n, out))
        return FAIL(c, FP4_ERR_NOMEM, field, "tok.nomem", "out of memory");
    return FP4_OK;
}
/* a String pattern ({"String": "x"}) */
static fp4_status jpattern_string(jctx *c, json_t *o, tok_span *out, const char *field) {
    json_t *p = json_object_get(o, "pattern");
    json_t *s = json_object_get(p, "String");
    if (!s)
        return FAIL(c, FP4_ERR_UNSUPPORTED, field, "tok.unsupported",
                    "%s: only String patterns are supported", field);
    return jstr_span(c, s, out, field);
}

/* a Replace's Regex pattern: compiled, refused where the references part: a pattern that can match
 * nothing (JavaScript's replaceAll puts the content between every two characters, the Rust library
 * does not), content with $ (JavaScript expands $&, $1, ...; Rust takes it as written) */
static fp4_status norm_regex(jctx *c, tok_norm *n) {
    char why[200] = "", *src = strndup(tok_str(c->t, n->a), n->a.len);
    if (!src) return FAIL(c, FP4_ERR_NOMEM, NULL, "tok.nomem", "out of memory");
    fp4_status st = FP4_ERR_FORMAT;
    if (strlen(src) == n->a.len) st = tok_compile_regex(src, false, &n->re, why, sizeof why);
    else snprintf(why, sizeof why, "a NUL in the regex");
    free(src);
    if (st)
        return FAIL(c, st, "normalizer.pattern", st == FP4_ERR_NOMEM ? "tok.nomem" : "tok.regex", "%s", why);
    if (memchr(tok_str(c->t, n->b), '$', n->b.len)) {
        pcre2_code_free(n->re);
        n->re = NULL;
        return FAIL(c, FP4_ERR_UNSUPPORTED, "normalizer.content", "tok.unsupported",
                    "a Regex Replace whose content has $ (the references expand it differently)");
    }
    uint32_t ml = 0;
    pcre2_pattern_info(n->re, PCRE2_INFO_MINLENGTH, &ml);
    if (ml == 0) {
        pcre2_code_free(n->re);
        n->re = NULL;
        return FAIL(c, FP4_ERR_UNSUPPORTED, "normalizer.pattern", "tok.unsupported",
                    "a Replace regex that can match an empty string (the references differ)");
    }
    n->minlen = ml; /* characters, so at least as many bytes */
    return FP4_OK;
}

/* ---- normalizer ---- */
static fp4_status parse_norm(jctx *c, json_t *o, int depth) {
    fp4_tokenizer *t = c->t;
    if (json_is_null(o) || !o) return FP4_OK;
    const char *ty = jtype(o);
    if (!ty || depth > 4)
        return FAIL(c, FP4_ERR_FORMAT, "normalizer", "tok.json-type", "normalizer without a type");
    if (!strcmp(ty, "Sequence")) {
        json_t *a = json_object_get(o, "normalizers");
        if (!json_is_array(a))
            return FAIL(c, FP4_ERR_FORMAT, "normalizer", "tok.json-type", "Sequence without normalizers");
        for (size_t i = 0; i < json_array_size(a); i++) {
            fp4_status st = parse_norm(c, json_array_get(a, i), depth + 1);
            if (st) return st;
        }
        return FP4_OK;
    }
    if (t->n_norm >= TOK_MAX_STEPS)
        return FAIL(c, FP4_ERR_LIMIT, "normalizer", "tok.steps", "more than %d normalizers", TOK_MAX_STEPS);
    tok_norm *n = &t->norm[t->n_norm];
    static const struct { const char *name; tok_norm_kind k; } uni[] = {
        {"NFC", TN_NFC}, {"NFD", TN_NFD}, {"NFKC", TN_NFKC}, {"NFKD", TN_NFKD}};
    for (size_t i = 0; i < sizeof uni / sizeof uni[0]; i++)
        if (!strcmp(ty, uni[i].name)) {
            n->kind = uni[i].k;
            t->n_norm++;
            return FP4_OK;
        }
    fp4_status st;
    if (!strcmp(ty, "Lowercase")) n->kind = TN_LOWER;
    else if (!strcmp(ty, "BertNormalizer")) { /* as the reference runs it (TOK_BERT_JS; an absent flag off) */
        n->kind = TN_BERT;
        json_t *sa = json_object_get(o, "strip_accents");
        bool lower = jflag(o, "lowercase", false);
        n->bert = (uint8_t)(TOK_BERT_JS | (jflag(o, "clean_text", false) ? TOK_BERT_CLEAN : 0) |
                            (jflag(o, "handle_chinese_chars", false) ? TOK_BERT_CHINESE : 0) |
                            (lower ? TOK_BERT_LOWER : 0) |
                            ((lower ? !json_is_false(sa) : json_is_true(sa)) ? TOK_BERT_STRIP : 0));
    }
    else if (!strcmp(ty, "Strip")) {
        n->kind = TN_STRIP;
        n->bert = (uint8_t)((jflag(o, "strip_left", false) ? 1 : 0) |
                            (jflag(o, "strip_right", false) ? 2 : 0));
    } else if (!strcmp(ty, "Prepend")) {
        n->kind = TN_PREPEND;
        if ((st = jstr_span(c, json_object_get(o, "prepend"), &n->a, "normalizer.prepend"))) return st;
    } else if (!strcmp(ty, "Replace")) {
        n->kind = TN_REPLACE;
        json_t *re = json_object_get(json_object_get(o, "pattern"), "Regex");
        if ((st = re ? jstr_span(c, re, &n->a, "normalizer.pattern")
                     : jpattern_string(c, o, &n->a, "normalizer.pattern")))
            return st;
        if ((st = jstr_span(c, json_object_get(o, "content"), &n->b, "normalizer.content"))) return st;
        if (n->a.len == 0)
            return FAIL(c, FP4_ERR_FORMAT, "normalizer.pattern", "tok.json-value", "empty Replace pattern");
        if (re && (st = norm_regex(c, n))) return st;
    } else if (!strcmp(ty, "StripAccents"))
        n->kind = TN_STRIP_ACCENTS;
    else if (!strcmp(ty, "Precompiled")) {
        char why[200] = "";
        n->kind = TN_PRECOMPILED;
        json_t *m = json_object_get(o, "precompiled_charsmap");
        if (!json_is_string(m))
            return FAIL(c, FP4_ERR_FORMAT, "normalizer.precompiled_charsmap", "tok.json-type",
                        "precompiled_charsmap is not a string");
        if ((st = tok_charsmap_load(json_string_value(m), json_string_length(m), &n->map, why, sizeof why)))
            return FAIL(c, st, "normalizer.precompiled_charsmap",
                        st == FP4_ERR_NOMEM ? "tok.nomem" : "tok.charsmap", "%s", why);
    } else
        return FAIL(c, FP4_ERR_UNSUPPORTED, "normalizer", "tok.unsupported",
                    "normalizer type %s is not supported", ty);
    t->n_norm++;
    return FP4_OK;
}

/* ---- pre-tokenizer ---- */
/* the regex source that matches s literally */
static char *split_literal(const char *s) {
    size_t n = strlen(s), k = 0;
    char *o = malloc(2 * n + 1);
    if (!o) return NULL;
    for (size_t i = 0; i < n; i++) {
        if (strchr("\\^$.|?*+()[]{}/-#", s[i])) o[k++] = '\\';
        o[k++] = s[i];
    }
    o[k] = 0;
    return o;
}

/* JavaScript's \s (the reference's regexes) and the reference's punctuation class */
#define JS_WS                                                                                                \
    "\\t\\n\\x0B\\f\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"   \
    "\\x{FEFF}"
#define JS_PUNCT "\\p{P}\\x{21}-\\x{2F}\\x{3A}-\\x{40}\\x{5B}-\\x{60}\\x{7B}-\\x{7E}"
/* pre-tokenizers the reference runs as the matches of one regex (the text between them dropped) */
static const struct {
    const char *type, *re;
} match_pres[] = {
    {"Whitespace", "[A-Za-z0-9_]+|[^A-Za-z0-9_" JS_WS "]+"},
    {"WhitespaceSplit", "[^" JS_WS "]+"},
    {"Punctuation", "[^" JS_PUNCT "]+|[" JS_PUNCT "]+"},
    {"BertPreTokenizer", "[^" JS_WS JS_PUNCT "]+|[" JS_PUNCT "]"},
};

static fp4_status add_match_pre(jctx *c, tok_pre *p, const char *re) {
    char why[200] = "";
    *p = (tok_pre){.kind = TP_SPLIT, .mode = TOKP_MATCHES};
    fp4_status st = tok_compile_regex(re, false, &p->re, why, sizeof why);
    if (st) return FAIL(c, st, "pre_tokenizer", st == FP4_ERR_NOMEM ? "tok.nomem" : "tok.regex", "%s", why);
    c->t->pre_other = true;
    c->t->n_pre++;
    return FP4_OK;
}

static fp4_status parse_metaspace(jctx *c, json_t *o, tok_pre *p) {
    *p = (tok_pre){.kind = TP_METASPACE};
    json_t *r = json_object_get(o, "replacement"), *sr = json_object_get(o, "str_rep");
    fp4_status st = r ? jstr_span(c, r, &p->a, "pre_tokenizer.replacement")
                      : tok_arena_add(c->t, "\xE2\x96\x81", 3, &p->a);
    if (!st && json_is_string(sr) && json_string_length(sr))
        st = jstr_span(c, sr, &p->b, "pre_tokenizer.str_rep");
    else if (!st) p->b = p->a;
    if (st) return st == FP4_ERR_NOMEM ? FAIL(c, st, NULL, "tok.nomem", "out of memory") : st;
    if (p->a.len == 0 || p->b.len > 64)
        return FAIL(c, FP4_ERR_FORMAT, "pre_tokenizer.replacement", "tok.json-value",
                    "Metaspace needs a replacement (and a str_rep of at most 64 bytes)");
    const char *ps = json_string_value(json_object_get(o, "prepend_scheme"));
    static const char *const schemes[] = {"always", "first", "never"};
    p->prepend = TOKP_ALWAYS;
    for (uint8_t k = 0; ps && k < 3; k++)
        if (!strcmp(ps, schemes[k])) p->prepend = k;
    if (ps && strcmp(ps, schemes[p->prepend]))
        return FAIL(c, FP4_ERR_UNSUPPORTED, "pre_tokenizer.prepend_scheme", "tok.unsupported",
                    "Metaspace prepend_scheme %s is not always, first or never", ps);
    c->t->pre_other = true;
    c->t->n_pre++;
    return FP4_OK;
}

static fp4_status parse_pre(jctx *c, json_t *o, int depth, bool *byte_level) {
    fp4_tokenizer *t = c->t;
    if (json_is_null(o) || !o) return FP4_OK;
    const char *ty = jtype(o);
    if (!ty || depth > 4)
        return FAIL(c, FP4_ERR_FORMAT, "pre_tokenizer", "tok.json-type", "pre_tokenizer without a type");
    if (!strcmp(ty, "Sequence")) {
        json_t *a = json_object_get(o, "pretokenizers");
        if (!json_is_array(a))
            return FAIL(c, FP4_ERR_FORMAT, "pre_tokenizer", "tok.json-type",
                        "Sequence without pretokenizers");
        for (size_t i = 0; i < json_array_size(a); i++) {
            fp4_status st = parse_pre(c, json_array_get(a, i), depth + 1, byte_level);
            if (st) return st;
        }
        return FP4_OK;
    }
    if (t->n_pre >= TOK_MAX_STEPS)
        return FAIL(c, FP4_ERR_LIMIT, "pre_tokenizer", "tok.steps", "more than %d pre-tokenizers",
                    TOK_MAX_STEPS);
    tok_pre *p = &t->pre[t->n_pre];
    char why[200] = "";
    for (size_t k = 0; k < sizeof match_pres / sizeof match_pres[0]; k++)
        if (!strcmp(ty, match_pres[k].type)) return add_match_pre(c, p, match_pres[k].re);
    if (!strcmp(ty, "Digits"))
        return add_match_pre(c, p, jflag(o, "individual_digits", false) ? "[^0-9]+|[0-9]" : "[^0-9]+|[0-9]+");
    if (!strcmp(ty, "Metaspace")) return parse_metaspace(c, o, p);
    if (!strcmp(ty, "Split")) {
        if (*byte_level)
            return FAIL(c, FP4_ERR_UNSUPPORTED, "pre_tokenizer", "tok.unsupported",
                        "a Split after a ByteLevel pre-tokenizer");
        json_t *pat = json_object_get(o, "pattern"), *re = json_object_get(pat, "Regex"),
               *lit = json_object_get(pat, "String");
        json_t *beh = json_object_get(o, "behavior");
        if (!json_is_string(re) && !json_is_string(lit))
            return FAIL(c, FP4_ERR_UNSUPPORTED, "pre_tokenizer.pattern", "tok.unsupported",
                        "a Split pattern is a Regex or a String");
        const char *bs = json_string_value(beh);
        bool inv = jflag(o, "invert", false), removed = bs && !strcmp(bs, "Removed");
        /* what the reference and the Rust library agree on: Isolated, MergedWithPrevious, Removed
         * (Regex), and invert with Removed (the matches alone); the reference runs MergedWithNext and
         * Contiguous as Isolated, invert as the matches alone and a removed String as Isolated */
        if (!bs || (strcmp(bs, "Isolated") && strcmp(bs, "MergedWithPrevious") && !removed) ||
            (inv && !removed) || (removed && !inv && !json_is_string(re)))
            return FAIL(c, FP4_ERR_UNSUPPORTED, "pre_tokenizer.behavior", "tok.unsupported",
                        "Split behavior %s%s is not supported (the reference and the Rust library differ)",
                        bs ? bs : "(none)", inv ? " with invert" : "");
        if (json_is_string(lit) && json_string_length(lit) == 0 && !inv) return FP4_OK; /* matches nothing */
        /* a String pattern is a regex of its characters, each metacharacter escaped */
        char *src =
            json_is_string(re) ? strdup(json_string_value(re)) : split_literal(json_string_value(lit));
        if (!src) return FAIL(c, FP4_ERR_NOMEM, NULL, "tok.nomem", "out of memory");
        fp4_status st = tok_compile_regex(src, false, &p->re, why, sizeof why);
        if (st) {
            free(src);
            return FAIL(c, st, "pre_tokenizer.pattern", st == FP4_ERR_NOMEM ? "tok.nomem" : "tok.regex", "%s",
                        why);
        }
        if (json_is_string(re)) p->fast = tok_prefast_kind(src);
        /* the GGUF writer describes one Isolated Regex Split (a llama.cpp pre name); others it refuses */
        if (!t->pre_regex && json_is_string(re) && !strcmp(bs, "Isolated") && !inv) t->pre_regex = src;
        else {
            free(src);
            t->pre_other = true;
        }
        p->kind = TP_SPLIT;
        p->merge_prev = !strcmp(bs, "MergedWithPrevious");
        p->mode = inv ? TOKP_MATCHES : removed ? TOKP_GAPS : TOKP_ISOLATED;
        uint32_t caps = 0;
        if (removed && !inv && (pcre2_pattern_info(p->re, PCRE2_INFO_CAPTURECOUNT, &caps) || caps)) {
            pcre2_code_free(p->re);
            p->re = NULL;
            return FAIL(c, FP4_ERR_UNSUPPORTED, "pre_tokenizer.pattern", "tok.unsupported",
                        "a Removed Split whose regex captures (the reference keeps the groups)");
        }
        t->n_pre++;
        return FP4_OK;
    }
    if (!strcmp(ty, "ByteLevel")) {
        p->kind = TP_BYTELEVEL;
        p->prefix_space = jflag(o, "add_prefix_space", false);
        if (jflag(o, "use_regex", true)) {
            fp4_status st = tok_compile_regex(NULL, true, &p->re, why, sizeof why);
            if (st) return FAIL(c, st, "pre_tokenizer", "tok.regex", "%s", why);
            t->pre_gpt2 = true;
        }
        *byte_level = true;
        t->n_pre++;
        return FP4_OK;
    }
    return FAIL(c, FP4_ERR_UNSUPPORTED, "pre_tokenizer", "tok.unsupported",
                "pre-tokenizer type %s is not supported", ty);
}

/* ---- decoder ---- */
static fp4_status parse_dec(jctx *c, json_t *o, int depth) {
    fp4_tokenizer *t = c->t;
    if (json_is_null(o) || !o) return FP4_OK;
    const char *ty = jtype(o);
    if (!ty || depth > 4)
        return FAIL(c, FP4_ERR_FORMAT, "decoder", "tok.json-type", "decoder without a type");
    t->has_decoder = true;
    if (!strcmp(ty, "Sequence")) {
        json_t *a = json_object_get(o, "decoders");
        if (!json_is_array(a))
            return FAIL(c, FP4_ERR_FORMAT, "decoder", "tok.json-type", "Sequence without decoders");
        for (size_t i = 0; i < json_array_size(a); i++) {
            fp4_status st = parse_dec(c, json_array_get(a, i), depth + 1);
            if (st) return st;
        }
        return FP4_OK;
    }
    if (t->n_dec >= TOK_MAX_STEPS)
        return FAIL(c, FP4_ERR_LIMIT, "decoder", "tok.steps", "more than %d decoders", TOK_MAX_STEPS);
    tok_dec *d = &t->dec[t->n_dec];
    fp4_status st;
    if (!strcmp(ty, "Metaspace")) { /* the replacement back to a space; the first string's leading one off */
        tok_span rep, sp;
        json_t *r = json_object_get(o, "replacement");
        st = r ? jstr_span(c, r, &rep, "decoder.replacement") : tok_arena_add(t, "\xE2\x96\x81", 3, &rep);
        if (!st) st = tok_arena_add(t, " ", 1, &sp);
        if (st) return st == FP4_ERR_NOMEM ? FAIL(c, st, NULL, "tok.nomem", "out of memory") : st;
        if (rep.len == 0)
            return FAIL(c, FP4_ERR_FORMAT, "decoder.replacement", "tok.json-value",
                        "empty Metaspace replacement");
        if (t->n_dec + 2 > TOK_MAX_STEPS)
            return FAIL(c, FP4_ERR_LIMIT, "decoder", "tok.steps", "more than %d decoders", TOK_MAX_STEPS);
        t->dec[t->n_dec++] = (tok_dec){.kind = TD_REPLACE, .a = rep, .b = sp};
        t->dec[t->n_dec++] = (tok_dec){.kind = TD_STRIP, .a = sp, .start = 1, .first_only = 1};
        return FP4_OK;
    }
    if (!strcmp(ty, "WordPiece")) { /* a space before each string but the first, unless it has the prefix */
        d->kind = TD_WORDPIECE;
        json_t *pf = json_object_get(o, "prefix");
        st = json_is_string(pf) ? jstr_span(c, pf, &d->a, "decoder.prefix") : tok_arena_add(t, "", 0, &d->a);
        if (st) return st == FP4_ERR_NOMEM ? FAIL(c, st, NULL, "tok.nomem", "out of memory") : st;
        d->start = jflag(o, "cleanup", true);
    } else if (!strcmp(ty, "ByteLevel")) d->kind = TD_BYTELEVEL;
    else if (!strcmp(ty, "ByteFallback")) d->kind = TD_BYTEFALLBACK;
    else if (!strcmp(ty, "Fuse")) d->kind = TD_FUSE;
    else if (!strcmp(ty, "Replace")) {
        d->kind = TD_REPLACE;
        if ((st = jpattern_string(c, o, &d->a, "decoder.pattern"))) return st;
        if ((st = jstr_span(c, json_object_get(o, "content"), &d->b, "decoder.content"))) return st;
        if (d->a.len == 0)
            return FAIL(c, FP4_ERR_FORMAT, "decoder.pattern", "tok.json-value", "empty Replace pattern");
    } else if (!strcmp(ty, "Strip")) {
        d->kind = TD_STRIP;
        if ((st = jstr_span(c, json_object_get(o, "content"), &d->a, "decoder.content"))) return st;
        json_t *a = json_object_get(o, "start"), *b = json_object_get(o, "stop");
        json_int_t s0 = json_is_integer(a) ? json_integer_value(a) : 0,
                   s1 = json_is_integer(b) ? json_integer_value(b) : 0;
        uint32_t cp;
        if (s0 < 0 || s1 < 0 || s0 > 64 || s1 > 64 || d->a.len == 0 ||
            (size_t)tok_utf8_dec((const uint8_t *)tok_str(t, d->a), d->a.len, &cp) != d->a.len)
            return FAIL(c, FP4_ERR_FORMAT, "decoder", "tok.json-value",
                        "Strip needs one content character and 0..64 start/stop");
        d->start = (int32_t)s0;
        d->stop = (int32_t)s1;
    } else
        return FAIL(c, FP4_ERR_UNSUPPORTED, "decoder", "tok.unsupported", "decoder type %s is not supported",
                    ty);
    t->n_dec++;
    return FP4_OK;
}

/* ---- post-processor: the single-sequence template ---- */
static fp4_status parse_post(jctx *c, json_t *o, int depth) {
    fp4_tokenizer *t = c->t;
    if (json_is_null(o) || !o) return FP4_OK;
    const char *ty = jtype(o);
    if (!ty || depth > 4)
        return FAIL(c, FP4_ERR_FORMAT, "post_processor", "tok.json-type", "post_processor without a type");
    if (!strcmp(ty, "ByteLevel")) return FP4_OK;
    if (!strcmp(ty, "Sequence")) {
        json_t *a = json_object_get(o, "processors");
        if (!json_is_array(a))
            return FAIL(c, FP4_ERR_FORMAT, "post_processor", "tok.json-type", "Sequence without processors");
        for (size_t i = 0; i < json_array_size(a); i++) {
            fp4_status st = parse_post(c, json_array_get(a, i), depth + 1);
            if (st) return st;
        }
        return FP4_OK;
    }
    if (strcmp(ty, "TemplateProcessing"))
        return FAIL(c, FP4_ERR_UNSUPPORTED, "post_processor", "tok.unsupported",
                    "post-processor type %s is not supported", ty);
    json_t *single = json_object_get(o, "single");
    if (!json_is_array(single))
        return FAIL(c, FP4_ERR_FORMAT, "post_processor.single", "tok.json-type", "template without single");
    int side = 0, seen_a = 0;
    for (size_t i = 0; i < json_array_size(single); i++) {
        json_t *it = json_array_get(single, i), *sp = json_object_get(it, "SpecialToken"),
               *sq = json_object_get(it, "Sequence");
        if (sq) {
            if (seen_a++)
                return FAIL(c, FP4_ERR_FORMAT, "post_processor.single", "tok.json-value",
                            "two sequences in single");
            side = 1;
            continue;
        }
        json_t *id = json_object_get(sp, "id");
        if (!json_is_string(id))
            return FAIL(c, FP4_ERR_FORMAT, "post_processor.single", "tok.json-type",
                        "SpecialToken without id");
        int *n = side ? &t->n_tmpl_post : &t->n_tmpl_pre;
        if (*n >= TOK_MAX_TMPL)
            return FAIL(c, FP4_ERR_LIMIT, "post_processor.single", "tok.steps", "template too long");
        c->tmpl_names[side][(*n)++] = json_string_value(id);
    }
    return FP4_OK;
}

static fp4_status parse_model(jctx *c, json_t *m, json_t *added, bool byte_level) {
    fp4_tokenizer *t = c->t;
    const char *ty = jtype(m);
    if (!json_is_object(m)) return FAIL(c, FP4_ERR_FORMAT, "model", "tok.json-type", "no model object");
    bool wp = ty && !strcmp(ty, "WordPiece"), uni = ty && !strcmp(ty, "Unigram");
    if (ty && strcmp(ty, "BPE") && !wp && !uni)
        return FAIL(c, FP4_ERR_UNSUPPORTED, "model.type", "tok.unsupported", "model type %s is not supported",
                    ty);
    json_t *vocab = json_object_get(m, "vocab"), *merges = json_object_get(m, "merges");
    if (wp && (c->fast || !json_is_object(vocab)))
        return FAIL(c, FP4_ERR_FORMAT, "model", "tok.json-type", "WordPiece model needs a vocab object");
    if (wp) {
        json_t *pre = json_object_get(m, "continuing_subword_prefix"),
               *mx = json_object_get(m, "max_input_chars_per_word");
        fp4_status st = pre ? jstr_span(c, pre, &t->wp_cont, "model.continuing_subword_prefix")
                            : tok_arena_add(t, "##", 2, &t->wp_cont);
        if (!st) st = tok_arena_add(t, "", 0, &t->wp_start);
        if (st) return st == FP4_ERR_NOMEM ? FAIL(c, st, NULL, "tok.nomem", "out of memory") : st;
        if (mx && (!json_is_integer(mx) || json_integer_value(mx) < 1 || json_integer_value(mx) > 1000000))
            return FAIL(c, FP4_ERR_FORMAT, "model.max_input_chars_per_word", "tok.json-value",
                        "max_input_chars_per_word is not an integer in [1, 1000000]");
        t->wp_max_chars = mx ? (uint32_t)json_integer_value(mx) : 100;
        t->kind = FP4_TOK_WORDPIECE;
    } else if (uni) {
        if (c->fast || !json_is_array(vocab) || json_array_size(vocab) > FP4_TOK_MAX_VOCAB)
            return FAIL(c, FP4_ERR_FORMAT, "model", "tok.json-type",
                        "Unigram model needs a vocab array of at most %d pieces", FP4_TOK_MAX_VOCAB);
        t->kind = FP4_TOK_UNIGRAM;
    } else if (!json_is_object(vocab) || !json_is_array(merges))
        return FAIL(c, FP4_ERR_FORMAT, "model", "tok.json-type",
                    "BPE model needs a vocab object and a merges array");
    if (!json_is_null(json_object_get(m, "dropout")) && json_object_get(m, "dropout"))
        return FAIL(c, FP4_ERR_UNSUPPORTED, "model.dropout", "tok.unsupported",
                    "BPE dropout is not supported");
    static const char *const affix[] = {"continuing_subword_prefix", "end_of_word_suffix",
                                        "continuing_subword_suffix"};
    for (int i = 0; i < 3 && !wp && !uni; i++) {
        json_t *v = json_object_get(m, affix[i]);
        if (v && !json_is_null(v) && !(json_is_string(v) && json_string_length(v) == 0))
            return FAIL(c, FP4_ERR_UNSUPPORTED, affix[i], "tok.unsupported", "%s is not supported", affix[i]);
    }
    if (!wp && !uni) t->kind = byte_level ? FP4_TOK_BYTE_BPE : FP4_TOK_SPM_BPE;
    t->byte_fallback = !wp && jflag(m, "byte_fallback", false);
    t->ignore_merges = jflag(m, "ignore_merges", false);
    /* ids: vocabulary and added tokens (tok_jscan has read the vocabulary into t already) */
    int64_t max_id = c->fast ? (int64_t)t->n_vocab - 1 : uni ? (int64_t)json_array_size(vocab) - 1 : -1;
    const char *k;
    json_t *v;
    if (!c->fast) json_object_foreach(vocab, k, v) {
            if (!json_is_integer(v) || json_integer_value(v) < 0 ||
                json_integer_value(v) >= FP4_TOK_MAX_VOCAB)
                return FAIL(c, FP4_ERR_FORMAT, "model.vocab", "tok.id-range", "token id out of [0, %d)",
                            FP4_TOK_MAX_VOCAB);
            if (json_integer_value(v) > max_id) max_id = json_integer_value(v);
        }
    if (!json_is_array(added) && added && !json_is_null(added))
        return FAIL(c, FP4_ERR_FORMAT, "added_tokens", "tok.json-type", "added_tokens is not an array");
    if (json_array_size(added) > FP4_TOK_MAX_ADDED)
        return FAIL(c, FP4_ERR_LIMIT, "added_tokens", "tok.limit", "too many added tokens");
    for (size_t i = 0; i < json_array_size(added); i++) {
        json_t *id = json_object_get(json_array_get(added, i), "id");
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= FP4_TOK_MAX_VOCAB)
            return FAIL(c, FP4_ERR_FORMAT, "added_tokens", "tok.id-range", "added token id out of [0, %d)",
                        FP4_TOK_MAX_VOCAB);
        if (json_integer_value(id) > max_id) max_id = json_integer_value(id);
    }
    if (max_id < 0) return FAIL(c, FP4_ERR_FORMAT, "model.vocab", "tok.empty", "empty vocabulary");
    if (tok_reserve_ids(t, (int32_t)max_id + 1))
        return FAIL(c, FP4_ERR_NOMEM, NULL, "tok.nomem", "out of memory");
    size_t kl;
    if (!c->fast)
        json_object_keylen_foreach(vocab, k, kl, v) { /* keys may hold U+0000: their length, not strlen */
            int32_t id = (int32_t)json_integer_value(v);
            if (t->flags[id] & TOKF_PRESENT)
                return FAIL(c, FP4_ERR_DUPLICATE, "model.vocab", "tok.duplicate-id",
                            "id %d is given to two tokens", (int)id);
            if (kl > FP4_TOK_MAX_TOKEN_BYTES)
                return FAIL(c, FP4_ERR_LIMIT, "model.vocab", "tok.token-length", "a %zu-byte token", kl);
            if (kl == 0)
                return FAIL(c, FP4_ERR_FORMAT, "model.vocab", "tok.token-empty",
                            "an empty token string (id %d)", (int)id);
            if (tok_arena_add(t, k, kl, &t->text[id]))
                return FAIL(c, FP4_ERR_NOMEM, NULL, "tok.nomem", "out of memory");
            t->flags[id] = TOKF_PRESENT | TOKF_MODEL;
        }
    if (uni) {
        fp4_status st = tok_unigram_vocab(t, m, c->name, c->err);
        if (st) return st;
    }
    t->n_added = 0;
    t->added = calloc(json_array_size(added) + 1, sizeof *t->added);
    if (!t->added) return FAIL(c, FP4_ERR_NOMEM, NULL, "tok.nomem", "out of memory");
    for (size_t i = 0; i < json_array_size(added); i++) {
        json_t *a = json_array_get(added, i);
        tok_added *x = &t->added[t->n_added];
        x->id = (int32_t)json_integer_value(json_object_get(a, "id"));
        fp4_status st = jstr_span(c, json_object_get(a, "content"), &x->content, "added_tokens.content");
        if (st) return st;
        x->special = jflag(a, "special", false);
        x->lstrip = jflag(a, "lstrip", false);
        x->rstrip = jflag(a, "rstrip", false);
        x->normalized = jflag(a, "normalized", !x->special);
        x->single_word = jflag(a, "single_word", false);
        uint8_t *f = &t->flags[x->id];
        if (*f & TOKF_ADDED)
            return FAIL(c, FP4_ERR_DUPLICATE, "added_tokens", "tok.duplicate-added",
                        "added token id %d twice", (int)x->id);
        if (*f & TOKF_PRESENT) {
            if (t->text[x->id].len != x->content.len ||
                memcmp(tok_str(t, t->text[x->id]), tok_str(t, x->content), x->content.len))
                return FAIL(c, FP4_ERR_FORMAT, "added_tokens", "tok.added-conflict",
                            "added token %d differs from the vocabulary's", (int)x->id);
        } else t->text[x->id] = x->content;
        *f |= TOKF_PRESENT | TOKF_ADDED | (x->special ? TOKF_SPECIAL : 0);
        t->n_added++;
    }
    /* two added tokens with one spelling */
    for (int32_t i = 0; i < t->n_added; i++)
        for (int32_t j = i + 1; j < t->n_added && t->n_added <= 4096; j++)
            if (t->added[i].content.len == t->added[j].content.len &&
                !memcmp(tok_str(t, t->added[i].content), tok_str(t, t->added[j].content),
                        t->added[i].content.len))
                return FAIL(c, FP4_ERR_DUPLICATE, "added_tokens", "tok.duplicate-token",
                            "two added tokens spell the same string");
    json_t *unk = json_object_get(m, "unk_token");
    if (json_is_string(unk)) {
        /* resolved after the maps exist */
    } else if (unk && !json_is_null(unk))
        return FAIL(c, FP4_ERR_FORMAT, "model.unk_token", "tok.json-type", "unk_token is not a string");
    return FP4_OK;
}

/* one merge of the jansson pass, in order: both halves and their concatenation are tokens, the pair
 * is new (the fast pass checks the same in tok_jscan_merges) */
static fp4_status merge_one(void *ctx, size_t i, const char *a, size_t an, const char *b, size_t bn,
                            int form) {
    jctx *c = ctx;
    fp4_tokenizer *t = c->t;
    if (form == TOK_JM_BADSTR)
        return FAIL(c, FP4_ERR_FORMAT, "model.merges", "tok.merge-form", "merge %zu is not \"a b\"", i);
    if (form == TOK_JM_BADSHAPE)
        return FAIL(c, FP4_ERR_FORMAT, "model.merges", "tok.merge-form",
                    "merge %zu is neither \"a b\" nor [a, b]", i);
    int32_t ia = tok_smap_find(t, &t->by_text, t->text, a, an),
            ib = tok_smap_find(t, &t->by_text, t->text, b, bn);
    if (ia < 0 || ib < 0)
        return FAIL(c, FP4_ERR_FORMAT, "model.merges", "tok.merge-unknown",
                    "merge %zu names a token not in the vocabulary", i);
    if (an + bn > 2 * FP4_TOK_MAX_TOKEN_BYTES)
        return FAIL(c, FP4_ERR_LIMIT, "model.merges", "tok.token-length", "merge %zu", i);
    char buf[2 * FP4_TOK_MAX_TOKEN_BYTES];
    const char *ab = a;
    if (b != a + an) { /* the halves of "a b" and of [a, b] lie apart */
        memcpy(buf, a, an);
        memcpy(buf + an, b, bn);
        ab = buf;
    }
    int32_t io = tok_smap_find(t, &t->by_text, t->text, ab, an + bn);
    if (io < 0)
        return FAIL(c, FP4_ERR_FORMAT, "model.merges", "tok.merge-result",
                    "merge %zu makes a token not in the vocabulary", i);
    if (!tok_mmap_put(&t->merges, ia, ib, (uint32_t)i, io))
        return FAIL(c, FP4_ERR_DUPLICATE, "model.merges", "tok.merge-duplicate",
                    "merge %zu repeats an earlier pair", i);
    return FP4_OK;
}

static fp4_status parse_merges(jctx *c, json_t *merges, const char *doc) {
    fp4_tokenizer *t = c->t;
    size_t n = c->fast ? c->big->n_merges : json_array_size(merges);
    if (n > (size_t)FP4_TOK_MAX_VOCAB * 2)
        return FAIL(c, FP4_ERR_LIMIT, "model.merges", "tok.limit", "%zu merges", n);
    if (tok_mmap_init(&t->merges, (uint32_t)n + 1))
        return FAIL(c, FP4_ERR_NOMEM, NULL, "tok.nomem", "out of memory");
    fp4_status st = FP4_OK;
    if (c->fast) /* checked here, as they are read (any failure: the jansson pass decides) */
        st = tok_jscan_merges(t, doc, c->big, &n);
    else
        for (size_t i = 0; !st && i < n; i++) {
            json_t *e = json_array_get(merges, i), *x = json_array_get(e, 0), *y = json_array_get(e, 1);
            if (json_is_string(e)) {
                const char *s = json_string_value(e), *sp = memchr(s, ' ', json_string_length(e));
                size_t len = json_string_length(e);
                if (!sp || memchr(sp + 1, ' ', len - (size_t)(sp - s) - 1))
                    st = merge_one(c, i, "", 0, "", 0, TOK_JM_BADSTR);
                else
                    st =
                        merge_one(c, i, s, (size_t)(sp - s), sp + 1, len - (size_t)(sp - s) - 1, TOK_JM_PAIR);
            } else if (json_is_array(e) && json_array_size(e) == 2 && json_is_string(x) && json_is_string(y))
                st = merge_one(c, i, json_string_value(x), json_string_length(x), json_string_value(y),
                               json_string_length(y), TOK_JM_PAIR);
            else
                st = merge_one(c, i, "", 0, "", 0, TOK_JM_BADSHAPE);
        }
    if (st) return st;
    t->n_merges = (uint32_t)n;
    return FP4_OK;
}

/* An empty merges array makes every vocabulary token of more than one character unreachable: the
 * text would come out character by character, silently. Legitimate only where no such token exists
 * (a vocabulary of single characters / bytes, as HF allows), or where ignore_merges looks words up
 * whole; byte-fallback tokens (<0x41>), added tokens and the unk token are not reached by merges. */
static fp4_status merges_empty(jctx *c, json_t *model) {
    fp4_tokenizer *t = c->t;
    if (t->n_merges || t->ignore_merges) return FP4_OK;
    json_t *unk = json_object_get(model, "unk_token");
    for (int32_t id = 0; id < t->n_vocab; id++) {
        const uint8_t want = TOKF_PRESENT | TOKF_MODEL;
        if ((t->flags[id] & (want | TOKF_ADDED)) != want) continue;
        const char *s = tok_str(t, t->text[id]);
        size_t n = t->text[id].len;
        uint32_t cp;
        int vl = tok_utf8_valid_len((const uint8_t *)s, n);
        if (vl > 0 && (size_t)vl == n && (size_t)tok_utf8_dec((const uint8_t *)s, n, &cp) == n)
            continue; /* one character */
        if (t->byte_fallback && n == 6 && !memcmp(s, "<0x", 3) && s[5] == '>') continue;
        if (json_is_string(unk) && json_string_length(unk) == n && !memcmp(json_string_value(unk), s, n))
            continue;
        return FAIL(c, FP4_ERR_FORMAT, "model.merges", "tok.merges-empty",
                    "the merges array is empty but token %d (%.*s) has more than one character: it could "
                    "never be produced (text would be split into single characters)",
                    (int)id, (int)(n > 40 ? 40 : n), s);
    }
    return FP4_OK;
}

static int32_t config_token(const fp4_tokenizer *t, json_t *cfg, const char *key) {
    json_t *v = json_object_get(cfg, key);
    if (json_is_object(v)) v = json_object_get(v, "content");
    if (!json_is_string(v)) return -1;
    return fp4_tokenizer_find(t, json_string_value(v), json_string_length(v));
}

/* The document with the values of model.vocab and model.merges (read by tok_jscan) replaced by
 * {} and []. */
static char *without_big(const char *s, size_t n, const tok_jbig *b, size_t *out_n) {
    const size_t *cut[2] = {b->vocab_at, b->merges_at};
    const char *fill[2] = {"{}", "[]"};
    int first = cut[0][0] < cut[1][0] ? 0 : 1;
    char *o = malloc(n - (cut[0][1] - cut[0][0]) - (cut[1][1] - cut[1][0]) + 5);
    if (!o) return NULL;
    size_t k = 0, at = 0;
    for (int r = 0; r < 2; r++) {
        int w = r ? !first : first;
        memcpy(o + k, s + at, cut[w][0] - at);
        k += cut[w][0] - at;
        memcpy(o + k, fill[w], 2);
        k += 2;
        at = cut[w][1];
    }
    memcpy(o + k, s + at, n - at);
    *out_n = k + n - at;
    return o;
}

/* One pass. fast: model.vocab and model.merges by tok_jscan, the rest by jansson from a copy
 * without them; whatever fails there (outside tok_jscan's subset, or any refusal at all) returns
 * an error and the caller runs the jansson pass, whose verdict and message stand. */
fp4_status tok_json_pass(const char *name, const char *json, size_t json_len, const void *config,
                         size_t config_len, bool fast, fp4_tokenizer **out, fp4_error *err) {
    fp4_tokenizer *t = tok_new();
    if (!t) return fp4_fail(err, FP4_ERR_NOMEM, name, NULL, "tok.nomem", "out of memory");
    tok_jbig big = {0};
    json_error_t je;
    json_t *root = NULL;
    if (fast) {
        size_t cn;
        char *copy = tok_jscan(t, json, json_len, &big) ? without_big(json, json_len, &big, &cn) : NULL;
        root = copy ? json_loadb(copy, cn, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je) : NULL;
        free(copy);
        json_t *m = json_object_get(root, "model"), *v = json_object_get(m, "vocab"),
               *mg = json_object_get(m, "merges");
        if (!json_is_object(root) || !json_is_object(v) || json_object_size(v) || !json_is_array(mg) ||
            json_array_size(mg)) {
            json_decref(root);
            fp4_tokenizer_free(t);
            return FP4_ERR_FORMAT;
        }
    } else
        root = json_loadb(json, json_len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!root || !json_is_object(root)) {
        json_decref(root);
        fp4_tokenizer_free(t);
        return fp4_fail(err, FP4_ERR_FORMAT, name, NULL, "tok.json", "not a JSON object: %s (line %d)",
                        root ? "" : je.text, je.line);
    }
    json_t *cfg = NULL;
    if (config && config_len) {
        cfg = json_loadb(config, config_len, JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL, &je);
        if (!json_is_object(cfg)) {
            json_decref(cfg);
            json_decref(root);
            fp4_tokenizer_free(t);
            return fp4_fail(err, FP4_ERR_FORMAT, name, "tokenizer_config.json", "tok.json",
                            "tokenizer_config.json: %s", je.text);
        }
    }
    jctx c = {.t = t, .name = name, .err = err, .big = &big, .fast = fast};
    fp4_status st = FP4_OK;
    bool byte_level = false;
    json_t *model = json_object_get(root, "model");
    if (!st) st = parse_norm(&c, json_object_get(root, "normalizer"), 0);
    if (!st) st = parse_pre(&c, json_object_get(root, "pre_tokenizer"), 0, &byte_level);
    if (!st) st = parse_dec(&c, json_object_get(root, "decoder"), 0);
    if (!st) st = parse_post(&c, json_object_get(root, "post_processor"), 0);
    if (!st) st = parse_model(&c, model, json_object_get(root, "added_tokens"), byte_level);
    if (!st) st = tok_finish(t, name, err);
    bool bpe = t->kind == FP4_TOK_BYTE_BPE || t->kind == FP4_TOK_SPM_BPE;
    if (!st && bpe) st = parse_merges(&c, json_object_get(model, "merges"), json);
    if (!st && bpe) st = merges_empty(&c, model);
    if (!st && t->kind == FP4_TOK_UNIGRAM) st = tok_unigram_build(t, name, err);
    for (int32_t id = 0; !st && t->kind == FP4_TOK_WORDPIECE && id < t->n_vocab; id++)
        if (t->text[id].len > t->wp_max_len) t->wp_max_len = t->text[id].len;
    if (!st) {
        json_t *unk = json_object_get(model, "unk_token");
        if (json_is_string(unk)) {
            t->unk = fp4_tokenizer_find(t, json_string_value(unk), json_string_length(unk));
            if (t->unk < 0)
                st = FAIL(&c, FP4_ERR_FORMAT, "model.unk_token", "tok.unk-unknown",
                          "unk_token is not a token");
        }
    }
    for (int side = 0; !st && side < 2; side++) {
        int n = side ? t->n_tmpl_post : t->n_tmpl_pre;
        for (int i = 0; !st && i < n; i++) {
            const char *nm = c.tmpl_names[side][i];
            int32_t id = fp4_tokenizer_find(t, nm, strlen(nm));
            if (id < 0)
                st = FAIL(&c, FP4_ERR_FORMAT, "post_processor", "tok.template-unknown",
                          "template token %s is not a token", nm);
            (side ? t->tmpl_post : t->tmpl_pre)[i] = id;
        }
    }
    /* tokenizer_config.json options that change encoding and that this library does not apply */
    static const char *const cfg_refused[] = {"remove_space", "do_lowercase_and_remove_accent",
                                              "do_lower_case"};
    for (size_t i = 0; !st && cfg && i < sizeof cfg_refused / sizeof cfg_refused[0]; i++)
        if (json_is_true(json_object_get(cfg, cfg_refused[i])))
            st = FAIL(&c, FP4_ERR_UNSUPPORTED, cfg_refused[i], "tok.unsupported",
                      "tokenizer_config.json: %s is not supported", cfg_refused[i]);
    if (!st) {
        t->bos = config_token(t, cfg, "bos_token");
        t->eos = config_token(t, cfg, "eos_token");
        t->pad = config_token(t, cfg, "pad_token");
        t->cleanup = cfg ? jflag(cfg, "clean_up_tokenization_spaces", true) : false;
        if (t->bos < 0 && t->n_tmpl_pre == 1) t->bos = t->tmpl_pre[0];
    }
    json_decref(root);
    json_decref(cfg);
    if (st) {
        fp4_tokenizer_free(t);
        return st;
    }
    *out = t;
    return FP4_OK;
}

fp4_status fp4_tokenizer_from_json(const char *name, const void *json, size_t json_len, const void *config,
                                   size_t config_len, fp4_tokenizer **out, fp4_error *err) {
    if (!out || (!json && json_len))
        return fp4_fail(err, FP4_ERR_INVALID_ARG, name, NULL, "tok.arg", "NULL argument");
    *out = NULL;
    if (!name) name = "tokenizer.json";
    if (json_len > FP4_TOK_MAX_FILE)
        return fp4_fail(err, FP4_ERR_LIMIT, name, NULL, "tok.limit", "%zu bytes", json_len);
    /* the fast pass succeeds only where the jansson pass would, with the same tokenizer (tok_jscan.c);
     * a refusal is always the jansson pass's */
    if (tok_json_pass(name, json, json_len, config, config_len, true, out, err) == FP4_OK) return FP4_OK;
    return tok_json_pass(name, json, json_len, config, config_len, false, out, err);
}

/* tokenizer.json mapped, not read: copying 10 MB into fresh pages costs more than parsing it */
static fp4_status map_file(const char *path, void **map, size_t *n, fp4_error *err) {
    *map = NULL;
    *n = 0;
    int fd;
    uint64_t size;
    fp4_status st = fp4_infile_open(path, "tok.io", false, &fd, &size, err);
    if (st) return st;
    if (size > FP4_TOK_MAX_FILE) {
        close(fd);
        return fp4_fail(err, FP4_ERR_LIMIT, path, NULL, "tok.limit", "%llu bytes, above the cap of %u",
                        (unsigned long long)size, FP4_TOK_MAX_FILE);
    }
    if (size == 0) {
        close(fd);
        return FP4_OK;
    }
    void *p = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) return fp4_fail(err, FP4_ERR_IO, path, NULL, "tok.io", "mmap: %s", strerror(e));
    *map = p;
    *n = (size_t)size;
    return FP4_OK;
}

fp4_status fp4_tokenizer_load(const char *path, fp4_tokenizer **out, fp4_error *err) {
    if (!path || !out) return fp4_fail(err, FP4_ERR_INVALID_ARG, path, NULL, "tok.arg", "NULL argument");
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb))
        return fp4_fail(err, FP4_ERR_IO, path, NULL, "tok.io", "cannot stat: %s", strerror(errno));
    if (!S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode)) /* opening a FIFO would block */
        return fp4_fail(err, FP4_ERR_IO, path, NULL, "tok.io", "not a regular file or a directory");
    char magic[4] = {0};
    if (S_ISREG(sb.st_mode)) { /* a GGUF by its magic, whatever its name */
        size_t got;
        fp4_status sh = fp4_infile_head(path, magic, 4, &got, "tok.io", err);
        if (sh) return sh;
        if (got != 4) memset(magic, 0, 4);
    }
    if (S_ISREG(sb.st_mode) && !memcmp(magic, "GGUF", 4)) {
        fp4_gguf *g = NULL;
        fp4_status st = fp4_gguf_open(path, &g, err);
        if (st) return st;
        st = fp4_tokenizer_from_gguf(g, path, out, err);
        fp4_gguf_close(g);
        return st;
    }
    char jpath[4096], cpath[4096];
    if (S_ISDIR(sb.st_mode)) {
        snprintf(jpath, sizeof jpath, "%s/tokenizer.json", path);
        snprintf(cpath, sizeof cpath, "%s/tokenizer_config.json", path);
    } else {
        snprintf(jpath, sizeof jpath, "%s", path);
        const char *sl = strrchr(path, '/');
        int dl = sl ? (int)(sl - path) : 0;
        snprintf(cpath, sizeof cpath, "%.*s%stokenizer_config.json", dl, path, sl ? "/" : "");
    }
    void *j = NULL;
    char *cf = NULL;
    size_t jn = 0, cn = 0;
    fp4_status st = map_file(jpath, &j, &jn, err);
    if (!st) st = fp4_infile_read(cpath, FP4_TOK_MAX_FILE, "tok.io", "tok.limit", true, &cf, &cn, err);
    if (!st) st = fp4_tokenizer_from_json(jpath, j ? j : "", jn, cf, cf ? cn : 0, out, err);
    if (j) munmap(j, jn);
    free(cf);
    return st;
}
