/* tok_gguf_pre.c — the pre-tokenizers a GGUF names by tokenizer.ggml.pre, as llama.cpp names them:
 * each a list of regexes applied one after the other as Isolated Splits (a match and the text
 * between matches are pieces of their own), then the byte-level mapping. The regexes are the
 * families' tokenizer.json patterns in the form llama.cpp keeps them (facts from its
 * llama-vocab.cpp); NULL as the last one stands for ByteLevel's own GPT-2 regex. Held by llama.cpp's
 * test vectors (tests/test_llama_vocab.c). */
#include "tok_impl.h"
#include <stdio.h>
#include <stdlib.h>

#define GPT2_RE "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define QWEN2_RE                                                                                             \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "                                    \
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define QWEN35_RE                                                                                            \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| "                            \
    "?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define LLAMA3_RE                                                                                            \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "                               \
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* DeepSeek LLM's letters: the cased scripts, listed as its tokenizer.json lists them */
#define DS_LETTERS                                                                                           \
    "\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293\u0295-\u02AF"        \
    "\u0370-\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C\u038E-\u03A1\u03A3-\u03F5"     \
    "\u03F7-\u0481\u048A-\u052F\u0531-\u0556\u10A0-\u10C5\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA"         \
    "\u1CBD-\u1CBF\u1D00-\u1D2B\u1D6B-\u1D77\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45"         \
    "\u1F48-\u1F4D\u1F50-\u1F57\u1F59\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE\u1FC2-"   \
    "\u1FC4\u1FC6-\u1FCC\u1FD0-\u1FD3\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC\u2102\u2107"   \
    "\u210A-\u2113\u2115\u2119-\u211D\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139\u213C-\u213F"   \
    "\u2145-\u2149\u214E\u2183\u2184\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE\u2CF2\u2CF3\uA640-\uA66D"   \
    "\uA680-\uA69B\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E\uAB70-\uABBF\uFB00-\uFB06\uFB13-\uFB17"       \
    "\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-\U0001044F\U000104B0-\U000104D3\U000104D8-\U000104FB"        \
    "\U00010C80-\U00010CB2\U00010CC0-\U00010CF2\U000118A0-\U000118DF\U0001E900-\U0001E943]+"
/* CJK ideographs, U+0800-U+4E00 and Hangul (as the tokenizer.json writes them) */
#define CJK_RUN "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+"
#define DS_PUNCT "\\s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+"

static const char *const deepseek_llm[] = {"[\\r\\n]", DS_LETTERS, DS_PUNCT, "\\s+$",
                                           CJK_RUN,    "\\p{N}+",  NULL};
static const char *const deepseek_coder[] = {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", CJK_RUN,
                                             "\\p{N}", NULL};
static const char *const falcon[] = {"[\\p{P}\\$\\+<=>\\^~\\|`]+", GPT2_RE, "[0-9][0-9][0-9]", NULL};
/* Digits(individual_digits) before ByteLevel(use_regex) */
static const char *const digits[] = {"\\p{N}", NULL};

const tok_pre_entry tok_pre_table[] = {
    /* name, one regex, several, nfc, ignore_merges, ByteLevel's own regex last */
    {"gpt-2", NULL, NULL, 0, 0, 1},
    {"llama-bpe", LLAMA3_RE, NULL, 0, 1, 0},
    {"qwen2", QWEN2_RE, NULL, 1, 0, 0},
    {"qwen35", QWEN35_RE, NULL, 0, 0, 0},
    {"mpt", NULL, NULL, 1, 0, 1},
    {"deepseek-llm", NULL, deepseek_llm, 0, 0, 0},
    {"deepseek-coder", NULL, deepseek_coder, 0, 0, 0},
    {"falcon", NULL, falcon, 0, 0, 0},
    {"starcoder", NULL, digits, 0, 0, 1},
    {"refact", NULL, digits, 0, 0, 1},
    {"command-r", NULL, digits, 1, 0, 1},
};
const int tok_pre_table_n = (int)(sizeof tok_pre_table / sizeof tok_pre_table[0]);

const tok_pre_entry *tok_pre_find(const char *name, size_t n) {
    for (int i = 0; i < tok_pre_table_n; i++)
        if (strlen(tok_pre_table[i].name) == n && !memcmp(tok_pre_table[i].name, name, n))
            return &tok_pre_table[i];
    return NULL;
}

static fp4_status add_split(fp4_tokenizer *t, const char *re, char *why, size_t why_n) {
    if (t->n_pre >= TOK_MAX_STEPS - 1) {
        snprintf(why, why_n, "more than %d pre-tokenizer steps", TOK_MAX_STEPS);
        return FP4_ERR_LIMIT;
    }
    tok_pre *p = &t->pre[t->n_pre];
    *p = (tok_pre){.kind = TP_SPLIT};
    fp4_status st = tok_compile_regex(re, false, &p->re, why, why_n);
    p->fast = tok_prefast_kind(re);
    if (!st) t->n_pre++;
    return st;
}

fp4_status tok_pre_setup(fp4_tokenizer *t, const tok_pre_entry *pe, char *why, size_t why_n) {
    fp4_status st;
    if (pe->nfc) t->norm[t->n_norm++] = (tok_norm){.kind = TN_NFC};
    t->ignore_merges = pe->ignore_merges;
    if (pe->regex) {
        if ((st = add_split(t, pe->regex, why, why_n))) return st;
        if (!(t->pre_regex = strdup(pe->regex))) return FP4_ERR_NOMEM;
    }
    for (size_t k = 0; pe->seq && pe->seq[k]; k++)
        if ((st = add_split(t, pe->seq[k], why, why_n))) return st;
    t->pre_other = pe->seq != NULL; /* several Splits: the GGUF writer's one-regex forms do not fit */
    tok_pre *p = &t->pre[t->n_pre++];
    *p = (tok_pre){.kind = TP_BYTELEVEL};
    if (!pe->gpt2) return FP4_OK;
    t->pre_gpt2 = !pe->seq;
    return tok_compile_regex(NULL, true, &p->re, why, why_n);
}
