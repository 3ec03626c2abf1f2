/* chat.c — chat templates as a table: each family's Jinja chat_template (as its checkpoints ship
 * it) rendered by a small C function that writes the same bytes for the messages it accepts and
 * refuses where the template raises. A template is recognised by its exact text (its SHA-256),
 * never by fragments. The
 * expected strings of tests/test_chat.c were rendered from the real templates by
 * @huggingface/jinja (dev/ref/chat_expected.mjs). */
#include "fp4_impl.h"
#include "fp4lane_text.h"
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct cbuf {
    char *p;
    size_t n, cap;
    int oom;
} cbuf;

static void put(cbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->n + n + 1 > 2 * b->cap ? b->n + n + 1 + 256 : 2 * b->cap;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void puts_(cbuf *b, const char *s) {
    put(b, s, strlen(s));
}

/* Python's str.strip() / Jinja's trim for ASCII whitespace; chars: the set to strip */
static void put_stripped(cbuf *b, const char *s, const char *chars, int left, int right) {
    size_t n = strlen(s), i = 0;
    while (left && i < n && strchr(chars, s[i]))
        i++;
    while (right && n > i && strchr(chars, s[n - 1]))
        n--;
    put(b, s + i, n - i);
}
#define WS " \t\n\r\f\v"

static int is(const fp4_chat_msg *m, const char *role) {
    return m->role && !strcmp(m->role, role);
}

/* variant: a family's published revisions that render otherwise (chat_family.variant) */
typedef fp4_status (*render_fn)(const fp4_chat_msg *m, size_t n, const char *bos, const char *eos, int gen,
                                int variant, cbuf *b, fp4_error *err);

static fp4_status alternate_fail(fp4_error *err) {
    return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "chat.alternate",
                    "Conversation roles must alternate user/assistant/user/assistant/...");
}

/* ChatML: <|im_start|>ROLE\nCONTENT<|im_end|>\n per message */
static fp4_status r_chatml(const fp4_chat_msg *m, size_t n, const char *bos, const char *eos, int gen,
                           int variant, cbuf *b, fp4_error *err) {
    for (size_t i = 0; i < n; i++) {
        puts_(b, "<|im_start|>"), puts_(b, m[i].role), puts_(b, "\n"), puts_(b, m[i].content);
        puts_(b, "<|im_end|>\n");
    }
    if (gen) puts_(b, "<|im_start|>assistant\n");
    return FP4_OK;
}

/* Qwen3: ChatML, a leading system message, assistant turns after the last user turn carry their
 * reasoning in <think> (empty when none) when they are last; "</think>" in content splits it. */
static fp4_status r_qwen3(const fp4_chat_msg *m, size_t n, const char *bos, const char *eos, int gen,
                          int variant, cbuf *b, fp4_error *err) {
    size_t last_query = n ? n - 1 : 0;
    for (size_t k = n; k-- > 0;) {
        if (!is(&m[k], "user")) continue;
        const char *c = m[k].content;
        size_t l = strlen(c);
        if (l >= 15 && !strncmp(c, "<tool_response>", 15) && l >= 16 &&
            !strcmp(c + l - 16, "</tool_response>"))
            continue;
        last_query = k;
        break;
    }
    if (n && is(&m[0], "system"))
        puts_(b, "<|im_start|>system\n"), puts_(b, m[0].content), puts_(b, "<|im_end|>\n");
    for (size_t i = 0; i < n; i++) {
        if (is(&m[i], "user") || (is(&m[i], "system") && i)) {
            puts_(b, "<|im_start|>"), puts_(b, m[i].role), puts_(b, "\n"), puts_(b, m[i].content);
            puts_(b, "<|im_end|>\n");
        } else if (is(&m[i], "assistant")) {
            const char *c = m[i].content, *end = NULL, *p = c;
            while ((p = strstr(p, "</think>")))
                end = p, p += 8;
            cbuf reason = {0}, content = {0};
            if (end) {
                put_stripped(&content, end + 8, "\n", 1, 0);
                /* split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') */
                const char *first = strstr(c, "</think>");
                cbuf head = {0};
                put(&head, c, (size_t)(first - c));
                const char *h = head.p ? head.p : "", *q = h, *after = h;
                while ((q = strstr(q, "<think>")))
                    after = q + 7, q += 7;
                size_t hn = strlen(after);
                while (hn && after[hn - 1] == '\n')
                    hn--;
                /* rstrip first, then the part after the last <think>: same as rstrip on that part
                 * unless <think> sits inside the trailing newlines (it cannot: they are newlines) */
                cbuf tmp = {0};
                put(&tmp, after, hn);
                put_stripped(&reason, tmp.p ? tmp.p : "", "\n", 1, 0);
                free(tmp.p), free(head.p);
            } else
                puts_(&content, c);
            const char *cs = content.p ? content.p : "", *rs = reason.p ? reason.p : "";
            puts_(b, "<|im_start|>assistant\n");
            if (i > last_query && (i == n - 1 || *rs)) {
                puts_(b, "<think>\n"), put_stripped(b, rs, "\n", 1, 1), puts_(b, "\n</think>\n\n");
                put_stripped(b, cs, "\n", 1, 0);
            } else
                puts_(b, cs);
            puts_(b, "<|im_end|>\n");
            free(content.p), free(reason.p);
        } else if (!is(&m[i], "system"))
            return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "chat.role", "role '%s' is not supported",
                            m[i].role ? m[i].role : "(null)");
    }
    if (gen) puts_(b, "<|im_start|>assistant\n");
    return FP4_OK;
}

/* Llama 3: BOS, then <|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT|trim<|eot_id|> */
static fp4_status r_llama3(const fp4_chat_msg *m, size_t n, const char *bos, const char *eos, int gen,
                           int variant, cbuf *b, fp4_error *err) {
    for (size_t i = 0; i < n; i++) {
        if (!i) puts_(b, bos);
        puts_(b, "<|start_header_id|>"), puts_(b, m[i].role), puts_(b, "<|end_header_id|>\n\n");
        put_stripped(b, m[i].content, WS, 1, 1);
        puts_(b, "<|eot_id|>");
    }
    if (gen) puts_(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
    return FP4_OK;
}

/* Llama 2: a leading system message folded into the first user turn in <<SYS>>; user/assistant
 * alternate; BOS [INST] user [/INST] assistant EOS (contents stripped). Variant 1, the default
 * template of transformers' LlamaTokenizer (use_default_system_prompt off): a later system message
 * (where the alternation lets one stand) renders as its own <<SYS>> block; Meta's drops it. */
static fp4_status r_llama2(const fp4_chat_msg *m, size_t n, const char *bos, const char *eos, int gen,
                           int variant, cbuf *b, fp4_error *err) {
    const char *sys = NULL;
    if (n && is(&m[0], "system")) sys = m[0].content, m++, n--;
    for (size_t i = 0; i < n; i++) {
        if (is(&m[i], "user") != (i % 2 == 0)) return alternate_fail(err);
        cbuf c = {0};
        if (!i && sys) puts_(&c, "<<SYS>>\n"), puts_(&c, sys), puts_(&c, "\n<</SYS>>\n\n");
        puts_(&c, m[i].content);
        const char *cs = c.p ? c.p : "";
        if (is(&m[i], "user"))
            puts_(b, bos), puts_(b, "[INST] "), put_stripped(b, cs, WS, 1, 1), puts_(b, " [/INST]");
        else if (is(&m[i], "assistant"))
            puts_(b, " "), put_stripped(b, cs, WS, 1, 1), puts_(b, " "), puts_(b, eos);
        else if (variant == 1 && is(&m[i], "system"))
            puts_(b, "<<SYS>>\n"), put_stripped(b, cs, WS, 1, 1), puts_(b, "\n<</SYS>>\n\n");
        free(c.p);
    }
    return FP4_OK;
}

/* Mistral (v0.1 instruct): BOS, then [INST] user [/INST]assistant EOS; user/assistant only. Variant 1,
 * the template of late 2023 (@huggingface/jinja's README renders it): a space after each EOS. */
static fp4_status r_mistral(const fp4_chat_msg *m, size_t n, const char *bos, const char *eos, int gen,
                            int variant, cbuf *b, fp4_error *err) {
    puts_(b, bos);
    for (size_t i = 0; i < n; i++) {
        if (is(&m[i], "user") != (i % 2 == 0)) return alternate_fail(err);
        if (is(&m[i], "user"))
            puts_(b, "[INST] "), puts_(b, m[i].content), puts_(b, " [/INST]");
        else if (is(&m[i], "assistant"))
            puts_(b, m[i].content), puts_(b, eos), puts_(b, variant == 1 ? " " : "");
        else
            return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "chat.role",
                            "Only user and assistant roles are supported!");
    }
    return FP4_OK;
}

/* A family is recognised only by the exact text of a template it renders (outer whitespace aside):
 * the SHA-256 of each known revision. Substrings were not enough: a ChatML template with a
 * hard-coded system message, or one naming <|im_start|> only in a comment, rendered as plain
 * ChatML. The texts are those of tests/text/chat_expected.json (dev/chat_expected.mjs). */
typedef struct chat_family {
    const char *name;
    render_fn render;
    int variant;
    const char *sha256; /* hex, of the template text without leading/trailing whitespace */
} chat_family;

static const chat_family families[] = {
    {"llama3", r_llama3, 0, "ba03a121d097859c7b5b9cd03af99aafe95275210d2876f642ad9929a150f122"},
    {"llama2", r_llama2, 0, "e8d5b5a546d3f19df16a5320c614fab05bdc4edd50e850f1afd947b503ea41cf"},
    {"llama2-default", r_llama2, 1, "a9e8d963ce661540e7106b3e89d8ede17418e96dc62f3819e17153409d39fe81"},
    {"mistral", r_mistral, 0, "26a59556925c987317ce5291811ba3b7f32ec4c647c400c6cc7e3a9993007ba7"},
    {"mistral-eos-space", r_mistral, 1, "7e995b379ec01747807246483647cd99030abf331653f1119e16d7ac041a3495"},
    {"qwen3", r_qwen3, 0, "87a2728cb8dc9fe424d624542f6060ec05a1d285ebbec578bb078900e33396b5"},
    {"chatml", r_chatml, 0, "153280e3ff55d19da1398bdb3914ee2a51b80429bfaedde11d7d216c39db80f3"},
};
#define N_FAMILIES ((int)(sizeof families / sizeof families[0]))

int fp4_chat_n_templates(void) {
    return N_FAMILIES;
}
const char *fp4_chat_template_name(int id) {
    return id >= 0 && id < N_FAMILIES ? families[id].name : NULL;
}
int fp4_chat_template_by_name(const char *name) {
    for (int i = 0; name && i < N_FAMILIES; i++)
        if (!strcmp(families[i].name, name)) return i;
    return -1;
}

/* hex SHA-256 of jinja without its outer whitespace; false when it cannot be computed */
static bool template_sha256(const char *jinja, char hex[65]) {
    size_t n = strlen(jinja), i = 0;
    while (i < n && strchr(WS, jinja[i]))
        i++;
    while (n > i && strchr(WS, jinja[n - 1]))
        n--;
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int ml = 0;
    if (!EVP_Digest(jinja + i, n - i, md, &ml, EVP_sha256(), NULL) || ml != 32) return false;
    for (unsigned k = 0; k < 32; k++)
        snprintf(hex + 2 * k, 3, "%02x", md[k]);
    return true;
}

int fp4_chat_template_detect(const char *jinja) {
    char hex[65];
    if (!jinja || !template_sha256(jinja, hex)) return -1;
    for (int i = 0; i < N_FAMILIES; i++)
        if (!strcmp(families[i].sha256, hex)) return i;
    return -1;
}

fp4_status fp4_chat_template_identify(const char *jinja, const char *file, int *id, fp4_error *err) {
    if (!id) return fp4_fail(err, FP4_ERR_INVALID_ARG, file, NULL, "chat.arg", "NULL argument");
    *id = -1;
    if (!jinja)
        return fp4_fail(err, FP4_ERR_NOT_FOUND, file, "chat_template", "chat.template-missing",
                        "there is no chat_template");
    char hex[65];
    if (!template_sha256(jinja, hex))
        return fp4_fail(err, FP4_ERR_NOMEM, file, "chat_template", "chat.nomem", "cannot hash the template");
    if ((*id = fp4_chat_template_detect(jinja)) >= 0) return FP4_OK;
    return fp4_fail(err, FP4_ERR_UNSUPPORTED, file, "chat_template", "chat.template-unknown",
                    "the chat_template (%zu bytes, sha256 %.16s...) is not an exact copy of a template "
                    "fp4lane renders; a template is never guessed from its parts",
                    strlen(jinja), hex);
}

fp4_status fp4_chat_render(int id, const fp4_chat_msg *msgs, size_t n, const char *bos, const char *eos,
                           int add_generation_prompt, char **text, size_t *len, fp4_error *err) {
    if (!text || (n && !msgs) || id < 0 || id >= N_FAMILIES)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "chat.arg", "bad argument");
    *text = NULL;
    if (len) *len = 0;
    for (size_t i = 0; i < n; i++)
        if (!msgs[i].role || !msgs[i].content)
            return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "chat.arg",
                            "message %zu has no role or content", i);
    cbuf b = {0};
    puts_(&b, "");
    fp4_status st = families[id].render(msgs, n, bos ? bos : "", eos ? eos : "", add_generation_prompt,
                                        families[id].variant, &b, err);
    if (!st && b.oom) st = fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "chat.nomem", "out of memory");
    if (st) {
        free(b.p);
        return st;
    }
    *text = b.p;
    if (len) *len = b.n;
    return FP4_OK;
}
