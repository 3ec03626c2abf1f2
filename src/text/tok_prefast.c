/* tok_prefast.c — the pre-tokenizer regexes of the common families, matched by hand on ASCII.
 * Most text is ASCII, and there these regexes (GPT-4's as Llama 3 and Qwen write it, o200k's as
 * gpt-oss writes it, DeepSeek-V3's three) reduce to a few character classes; PCRE2's JIT spends
 * most of the encoder's time on them. A pattern is recognized by its exact source. Each function
 * below follows its regex's alternation, branch by branch; whenever a decision needs a character
 * outside ASCII (its Unicode class, or whether a run goes on through it) it gives up and tells
 * where PCRE2 must take over, so the matches are PCRE2's exactly (test_tok_fast checks each
 * answer against PCRE2 on random text). */
#include "tok_impl.h"

enum { PF_NONE, PF_GPT4, PF_GPT4_N1, PF_O200K, PF_DIGITS3, PF_CJK, PF_DEEPSEEK };

static const struct {
    uint8_t kind;
    const char *src;
} known[] = {
    {PF_GPT4, "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}|"
              " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    {PF_GPT4_N1, "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"
                 " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    {PF_O200K, "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
               "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"
               "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
               "[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    {PF_DIGITS3, "\\p{N}{1,3}"},
    {PF_CJK, "[\xE4\xB8\x80-\xE9\xBE\xA5\xE3\x81\x80-\xE3\x82\x9F\xE3\x82\xA0-\xE3\x83\xBF]+"},
    {PF_DEEPSEEK, "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|"
                  "[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|"
                  "\\s+(?!\\S)|\\s+"},
};

uint8_t tok_prefast_kind(const char *src) {
    for (size_t i = 0; src && i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(src, known[i].src)) return known[i].kind;
    return PF_NONE;
}

/* ASCII classes: letters (L; Lu, Ll), digits (N), Unicode's White_Space (the translation's \s),
 * punctuation and symbols (P, S: all 32 of ASCII's), CR and LF */
static inline bool hi(uint8_t c) { return c >= 0x80; }
static inline bool up(uint8_t c) { return c >= 'A' && c <= 'Z'; }
static inline bool low(uint8_t c) { return c >= 'a' && c <= 'z'; }
static inline bool let(uint8_t c) { return up(c) || low(c); }
static inline bool dig(uint8_t c) { return c >= '0' && c <= '9'; }
static inline bool ws(uint8_t c) { return c == ' ' || (c >= 9 && c <= 13); }
static inline bool nl(uint8_t c) { return c == '\r' || c == '\n'; }
static inline bool punct(uint8_t c) { return c > ' ' && c < 0x7F && !let(c) && !dig(c); }
static inline bool oth(uint8_t c) { return !hi(c) && !ws(c) && !let(c) && !dig(c); } /* [^\s\p{L}\p{N}] */

typedef struct pf {
    const uint8_t *s;
    size_t n;
    size_t me; /* the match's end */
} pf;
/* a branch's answer: matched (me set), failed, or needs a character outside ASCII */
enum { NO, YES, ASK };

/* (?i:'s|'t|'re|'ve|'m|'ll|'d) at j: its length, 0 none (the classes are ASCII: [sS], ...) */
static size_t contraction(const pf *p, size_t j) {
    if (j + 1 >= p->n || p->s[j] != '\'') return 0;
    uint8_t a = p->s[j + 1] | 0x20, b = j + 2 < p->n ? p->s[j + 2] | 0x20 : 0;
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

/* the end of the run of class f from j; ASK when it stops at a character outside ASCII */
#define RUN(f, j)                                                                                            \
    do {                                                                                                     \
        while ((j) < p->n && f(p->s[j])) (j)++;                                                              \
        if ((j) < p->n && hi(p->s[j])) return ASK;                                                           \
    } while (0)

/* \s*[\r\n]+|\s+(?!\S)|\s+ at i (s[i] white space) */
static int spaces(pf *p, size_t i) {
    size_t j = i;
    RUN(ws, j);
    for (size_t q = j; q-- > i;)
        if (nl(p->s[q])) return p->me = q + 1, YES;
    p->me = j == p->n || j - i == 1 ? j : j - 1;
    return YES;
}

/* ' ?[^\s\p{L}\p{N}]+' then [\r\n]* (slash: [\r\n/]*) at i */
static int others(pf *p, size_t i, bool slash) {
    size_t j = i + (p->s[i] == ' ');
    if (j >= p->n) return NO;
    if (hi(p->s[j])) return ASK;
    if (!oth(p->s[j])) return NO; /* (without the space: s[i] = ' ' is white space) */
    RUN(oth, j);
    while (j < p->n && (nl(p->s[j]) || (slash && p->s[j] == '/'))) j++;
    p->me = j;
    return YES;
}

/* [^\r\n\p{L}\p{N}]? then a run: whether s[i] is the optional character before it */
static int prefix(const pf *p, size_t i) {
    uint8_t c = p->s[i];
    if (let(c) || dig(c) || nl(c)) return NO;
    if (i + 1 >= p->n) return NO;
    return hi(p->s[i + 1]) ? ASK : YES;
}

/* GPT-4's regex (Llama 3; Qwen's with \p{N} alone: max_digits 1) at i */
static int gpt4(pf *p, size_t i, size_t max_digits) {
    uint8_t c = p->s[i];
    size_t k = contraction(p, i), j;
    if (k) return p->me = i + k, YES;
    int pre = prefix(p, i);
    if (pre == ASK) return ASK;
    if ((pre == YES && let(p->s[i + 1])) || let(c)) {
        j = i + (pre == YES);
        RUN(let, j);
        return p->me = j, YES;
    }
    if (dig(c)) {
        for (j = i + 1; j < p->n && j - i < max_digits && dig(p->s[j]);) j++;
        if (j - i < max_digits && j < p->n && hi(p->s[j])) return ASK;
        return p->me = j, YES;
    }
    int r = others(p, i, false);
    if (r != NO) return r;
    return ws(c) ? spaces(p, i) : NO;
}

/* o200k (gpt-oss): [^\r\n\p{L}\p{N}]?U*L+C? | [^\r\n\p{L}\p{N}]?U+L*C? | \p{N}{1,3} | ... at i */
static int o200k(pf *p, size_t i) {
    uint8_t c = p->s[i];
    int pre = prefix(p, i);
    if (pre == ASK) return ASK;
    size_t j = i + (pre == YES);
    if (pre == YES || let(c)) {
        size_t u = j, l;
        RUN(up, u);
        l = u;
        RUN(low, l);
        /* U*L+ when a lowercase run follows the uppercase one, else U+L* (L* empty); without the
         * optional character neither can match, s[i] being no letter */
        if (l > u || u > j) return p->me = l + contraction(p, l), YES;
    }
    if (dig(c)) {
        for (j = i + 1; j < p->n && j - i < 3 && dig(p->s[j]);) j++;
        if (j - i < 3 && j < p->n && hi(p->s[j])) return ASK;
        return p->me = j, YES;
    }
    int r = others(p, i, true);
    if (r != NO) return r;
    return ws(c) ? spaces(p, i) : NO;
}

/* DeepSeek-V3's third: [ASCII P/S][A-Za-z]+ | [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+ |
 * ' ?[\p{P}\p{S}]+[\r\n]*' | the spaces' three */
static int deepseek(pf *p, size_t i) {
    uint8_t c = p->s[i];
    size_t j = i + 1;
    if (punct(c) && j < p->n && let(p->s[j])) { /* an ASCII class: no question outside it */
        while (j < p->n && let(p->s[j])) j++;
        return p->me = j, YES;
    }
    bool pre = !let(c) && !punct(c) && !nl(c);
    if (pre && j < p->n && hi(p->s[j])) return ASK;
    if ((pre && j < p->n && let(p->s[j])) || let(c)) {
        j = i + (pre ? 1 : 0);
        RUN(let, j);
        return p->me = j, YES;
    }
    j = i + (c == ' ');
    if (j < p->n && hi(p->s[j])) return ASK;
    if (j < p->n && punct(p->s[j])) {
        RUN(punct, j);
        while (j < p->n && nl(p->s[j])) j++;
        return p->me = j, YES;
    }
    return ws(c) ? spaces(p, i) : NO;
}

int tok_prefast_next(uint8_t kind, const char *s, size_t n, size_t start, size_t *ms, size_t *me) {
    pf p = {(const uint8_t *)s, n, 0};
    if (kind == PF_CJK) { /* a class of code points: decided for every character */
        for (size_t i = start; i < n;) {
            uint32_t cp;
            if (!hi(p.s[i])) {
                i++;
                continue;
            }
            size_t j = i, l;
            while (j < n && (l = (size_t)tok_utf8_dec(p.s + j, n - j, &cp)) &&
                   ((cp >= 0x4E00 && cp <= 0x9FA5) || (cp >= 0x3040 && cp <= 0x30FF)))
                j += l;
            if (j > i) return *ms = i, *me = j, 1;
            i += (size_t)tok_utf8_dec(p.s + i, n - i, &cp);
        }
        return 0;
    }
    if (kind == PF_DIGITS3) {
        size_t i = start;
        while (i < n && !dig(p.s[i]) && !hi(p.s[i])) i++;
        if (i == n) return 0;
        if (hi(p.s[i])) return *ms = i, -1;
        size_t j = i + 1;
        while (j < n && j - i < 3 && dig(p.s[j])) j++;
        if (j - i < 3 && j < n && hi(p.s[j])) return *ms = i, -1;
        return *ms = i, *me = j, 1;
    }
    for (size_t i = start; i < n; i++) {
        if (hi(p.s[i])) return *ms = i, -1;
        int r = NO;
        switch (kind) {
        case PF_GPT4: r = gpt4(&p, i, 3); break;
        case PF_GPT4_N1: r = gpt4(&p, i, 1); break;
        case PF_O200K: r = o200k(&p, i); break;
        case PF_DEEPSEEK: r = deepseek(&p, i); break;
        default: return *ms = i, -1;
        }
        if (r == ASK) return *ms = i, -1;
        if (r == YES) return *ms = i, *me = p.me, 1;
    }
    return 0;
}
