/* cmd_chat.c — fp4lane chat: an interactive loop over MODEL's chat template: its own chat_template
 * rendered by the Jinja engine (fp4_template_*), else a built-in one (--chat-template NAME, or a
 * template the engine cannot compile; the built-in family detected from the text still names the
 * end-of-turn token). Each turn renders the whole conversation, tokenizes it
 * and prefills only what follows the tokens already in the KV cache (the cache is kept across
 * turns; when the new tokens do not extend it, or the context is full, it is rebuilt). The answer
 * streams to stdout; a one-line summary per answer goes to stderr. /reset clears the history
 * (the system prompt stays), /exit or end of input ends the session (exit 0). Ctrl-C stops the
 * current answer, not the session. */
#include "cli.h"
#include "rt_cli.h"
#include "run_text.h"
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop_answer;
static void on_sigint(int sig) {
    (void)sig;
    stop_answer = 1;
}

typedef struct chat_args {
    rt_cli_engine e;
    const char *system, *tmpl_name;
    long long n_answer;
    int think_hide; /* --think hide */
    fp4_sampler_params sp;
    char model_buf[4200];
} chat_args;

static int usage(void) {
    fprintf(
        stderr,
        "usage: fp4lane chat [MODEL] [--system TEXT]\n"
        "       [--chat-template llama3|llama2|llama2-default|mistral|mistral-eos-space|qwen3|chatml|FILE]\n"
        "       [-n N] [--think show|hide] [--temp T] [--top-k K] [--top-p P] [--min-p P]\n"
        "       [--repeat-penalty R] [--seed S]\n"
        "       [--presence-penalty P] [--penalty-last-n N]\n"
        "       [--device cpu|cuda] [--mode exact|native] [--threads N] [--ctx N]\n");
    return 2;
}

static int num(const char *o, const char *v, double lo, double hi, double *x) {
    char *end;
    *x = v ? strtod(v, &end) : 0;
    if (!v || !*v || *end || !(*x >= lo && *x <= hi))
        return fprintf(stderr, "fp4lane chat: %s %s: expected a number in [%g, %g]\n", o, v ? v : "(missing)",
                       lo, hi),
               -1;
    return 0;
}

static int parse(int argc, char **argv, chat_args *a) {
    memset(a, 0, sizeof *a);
    rt_cli_engine_init(&a->e);
    a->e.verb = "chat";
    a->sp = fp4_sampler_defaults();
    /* a chat samples by default: temperature 0.7, top-k 40, repetition penalty 1.1 (last 64) */
    a->sp.temperature = 0.7f, a->sp.top_k = 40, a->sp.repeat_penalty = 1.1f, a->sp.penalty_last_n = 64;
    a->n_answer = 256;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int r = rt_cli_engine_opt(&a->e, argc, argv, &i);
        if (r < 0) return -1;
        if (r) continue;
        double x;
        if (!strcmp(o, "--system") && v)
            a->system = v, i++;
        else if (!strcmp(o, "--chat-template") && v)
            a->tmpl_name = v, i++;
        else if (!strcmp(o, "--think") && v) {
            if (strcmp(v, "show") && strcmp(v, "hide"))
                return fprintf(stderr, "fp4lane chat: --think %s: expected show or hide\n", v), -1;
            a->think_hide = !strcmp(v, "hide"), i++;
        }
        else if (!strcmp(o, "-n")) {
            if (num(o, v, 1, 1 << 24, &x)) return -1;
            a->n_answer = (long long)x, i++;
        } else if ((r = rt_cli_sampling_opt(o, v, &a->sp)) != 0) {
            if (r < 0) return -1;
            i++;
        } else if (o[0] != '-' && !a->e.model)
            a->e.model = o;
        else
            return fprintf(stderr, "fp4lane chat: unknown or incomplete option '%s'\n", o), -1;
    }
    if (a->tmpl_name && fp4_chat_template_by_name(a->tmpl_name) < 0 && access(a->tmpl_name, R_OK))
        return fprintf(stderr, "fp4lane chat: --chat-template %s: not a template fp4lane has, nor a file\n",
                       a->tmpl_name),
               -1;
    if (!a->e.model) {
        if (rt_text_default_model("chat", a->model_buf, sizeof a->model_buf)) return -2;
        a->e.model = a->model_buf;
    }
    return 0;
}

static void list_templates(FILE *f) {
    for (int i = 0; i < fp4_chat_n_templates(); i++)
        fprintf(f, "%s%s", i ? ", " : "", fp4_chat_template_name(i));
}

/* --chat-template FILE: compiled by the Jinja engine (its family, when a built-in one matches,
 * names the end of turn); -1 refused (printed), else the family or -2 */
static int user_template(const char *path, fp4_template **own) {
    FILE *f = fopen(path, "rb");
    char *t = f ? malloc(FP4_TEMPLATE_MAX_BYTES + 1) : NULL;
    size_t n = t ? fread(t, 1, FP4_TEMPLATE_MAX_BYTES + 1, f) : 0;
    if (f) fclose(f);
    if (!t || n > FP4_TEMPLATE_MAX_BYTES) {
        free(t);
        return fprintf(stderr, "fp4lane chat: --chat-template %s: cannot read it (at most %u bytes)\n", path,
                       (unsigned)FP4_TEMPLATE_MAX_BYTES),
               -1;
    }
    t[n] = 0;
    fp4_error err;
    fp4_status st = fp4_template_compile(t, n, own, &err);
    int id = st ? -1 : fp4_chat_template_detect(t);
    free(t);
    if (st) return cli_report_error("chat", st, &err), -1;
    return id >= 0 ? id : -2;
}

/* the template: --chat-template, else detected from MODEL's chat_template (and *own, that text
 * compiled by the Jinja engine); -1 refused (printed), -2 the checkpoint's own template only */
static int pick_template(const chat_args *a, fp4_template **own) {
    int named = a->tmpl_name ? fp4_chat_template_by_name(a->tmpl_name) : -1;
    if (named >= 0) return named;
    char *t = NULL;
    fp4_error err;
    if (a->tmpl_name) /* a file: the user's template */
        return user_template(a->tmpl_name, own);
    if (fp4_chat_template_read(a->e.model, &t, &err)) return cli_report_error("chat", err.code, &err), -1;
    /* the checkpoint's own template through the Jinja engine; a built-in family only for an exact
     * copy of one (fp4_chat_template_detect: by SHA-256, never by parts of the text) */
    int id = fp4_chat_template_detect(t);
    fp4_error cerr = {0};
    if (t && fp4_template_compile(t, strlen(t), own, &cerr)) *own = NULL;
    if (id < 0 && *own) return free(t), -2;
    if (id < 0) {
        if (t && cerr.rule[0]) cli_report_error("chat", cerr.code, &cerr); /* why the engine refused it */
        fp4_status st = fp4_chat_template_identify(t, a->e.model, &id, &err);
        cli_report_error("chat", st ? st : FP4_ERR_UNSUPPORTED, &err);
        fprintf(stderr, "  give --chat-template NAME to use one anyway (one of: ");
        list_templates(stderr);
        fprintf(stderr, ")\n");
    }
    free(t);
    return id;
}

/* the conversation */
typedef struct conv {
    fp4_chat_msg *m;
    size_t n, cap;
} conv;
static int conv_add(conv *c, const char *role, const char *content, size_t len) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 16;
        fp4_chat_msg *m = realloc(c->m, cap * sizeof *m);
        if (!m) return -1;
        c->m = m, c->cap = cap;
    }
    char *s = malloc(len + 1);
    if (!s) return -1;
    memcpy(s, content, len), s[len] = 0;
    c->m[c->n].role = role, c->m[c->n].content = s;
    c->n++;
    return 0;
}
static void conv_truncate(conv *c, size_t n) {
    while (c->n > n)
        free((char *)c->m[--c->n].content);
}

typedef struct session {
    chat_args *a;
    fp4_rt *rt;
    fp4_tokenizer *tok;
    int tmpl;
    fp4_template *own; /* MODEL's own template, when the engine compiled it */
    int32_t seq;
    int32_t *kv; /* the token ids in the KV cache, in order */
    int64_t n_kv, cap_kv;
    int32_t eos[FP4_ARCH_MAX_EOS + 2];
    int n_eos;
    const char *stop_str[2];
    int n_stop;
    float *lg;
    char bos[256], eos_s[256]; /* the template's bos_token / eos_token: the tokenizer's spelling */
} session;

static void token_text(const fp4_tokenizer *t, int32_t id, char *buf, size_t n) {
    const char *s;
    size_t len;
    buf[0] = 0;
    if (id >= 0 && !fp4_tokenizer_token(t, id, &s, &len) && len < n) memcpy(buf, s, len), buf[len] = 0;
}

static int kv_push(session *s, int32_t t) {
    if (s->n_kv == s->cap_kv) {
        int64_t cap = s->cap_kv ? 2 * s->cap_kv : 1024;
        int32_t *p = realloc(s->kv, sizeof *p * (size_t)cap);
        if (!p) return -1;
        s->kv = p, s->cap_kv = cap;
    }
    s->kv[s->n_kv++] = t;
    return 0;
}
static void kv_reset(session *s) {
    fp4_rt_seq_close(s->rt, s->seq);
    fp4_rt_seq_open(s->rt, &s->seq);
    s->n_kv = 0;
}

/* feeds ids[0..n) after the cache; the last one's logits land in s->lg */
static int feed(session *s, const int32_t *ids, int64_t n) {
    fp4_rt_tok cols[256];
    fp4_error err;
    for (int64_t i = 0; i < n;) {
        int64_t k = 0;
        for (; k < 256 && i + k < n; k++)
            cols[k] = (fp4_rt_tok){s->seq, ids[i + k], i + k == n - 1};
        if (fp4_rt_step(s->rt, cols, k, i + k == n ? s->lg : NULL, &err))
            return cli_report_error("chat", err.code, &err), -1;
        for (int64_t j = 0; j < k; j++)
            if (kv_push(s, ids[i + j])) return -1;
        i += k;
    }
    return 0;
}

/* One answer through the library's generation loop (fp4_session, as run and serve): the
 * conversation's ids continue the sequence, whose first `same` positions hold them already; the
 * sampler sees every id of the conversation; an EOS id ends the answer unprinted; the text goes
 * through rt_text_out (the stop strings end it); Ctrl-C cancels before the next step. */
typedef struct chat_gen {
    rt_text_out *out;
    int32_t *ids; /* the answer's ids, the EOS included                                     */
    int64_t n, max;
    double t1; /* the first token's time                                                    */
    int rc;
} chat_gen;

static int chat_token(void *user, const fp4_session_tok *t) {
    chat_gen *g = user;
    if (t->id < 0 || g->n >= g->max) return 0;
    if (!g->n) g->t1 = rt_cli_now();
    g->ids[g->n++] = t->id;
    if (t->end) return 0;
    const int st = rt_text_out_push(g->out, t->id);
    if (st < 0) g->rc = -1;
    return st != 0;
}

static int generate(session *s, const int32_t *ids, int64_t n_ids, int64_t same, chat_gen *g) {
    fp4_session_req r = {.prompt = ids, .n_prompt = n_ids, .sampling = s->a->sp, .max_tokens = g->max};
    r.stop_ids = s->eos, r.n_stop_ids = s->n_eos, r.prefill_chunk = 256;
    fp4_session *ss = NULL;
    fp4_error err;
    if (!(g->ids = malloc(sizeof *g->ids * (size_t)g->max))) return -1;
    fp4_status st = fp4_session_create(s->rt, &r, chat_token, g, &ss, &err);
    if (!st) st = fp4_session_run_on(ss, s->seq, (const volatile int *)&stop_answer, &err);
    fp4_session_free(ss);
    int rc = st ? (cli_report_error("chat", st, &err), -1) : g->rc;
    /* the cache now: the conversation, then the answer's ids but the last (a failed step closed
     * the sequence: a fresh one) */
    const int64_t pos = fp4_rt_seq_pos(s->rt, s->seq);
    if (pos < same) {
        kv_reset(s);
        return rc;
    }
    s->n_kv = same;
    for (int64_t i = same; s->n_kv < pos && !rc; i++)
        if (kv_push(s, i < n_ids ? ids[i] : g->ids[i - n_ids])) rc = -1;
    return rc;
}

/* msgs[0..n) through MODEL's own template, as transformers renders it (bos/eos tokens, tools
 * none, the assistant's turn opened) */
static fp4_status render_own(const session *s, const fp4_chat_msg *msgs, size_t n, char **text, size_t *len,
                             fp4_error *err) {
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, json_pack("{s:s, s:s}", "role", msgs[i].role, "content", msgs[i].content));
    json_t *extra =
        json_pack("{s:s, s:s, s:n, s:n}", "bos_token", s->bos, "eos_token", s->eos_s, "tools", "documents");
    char *m = json_dumps(arr, JSON_COMPACT), *x = json_dumps(extra, JSON_COMPACT);
    json_decref(arr), json_decref(extra);
    fp4_status st = FP4_ERR_NOMEM;
    if (m && x)
        st = fp4_template_render(s->own, m, 1, x, NULL, text, len, err);
    else
        snprintf(err->msg, sizeof err->msg, "out of memory");
    free(m), free(x);
    return st;
}

/* the tokens of msgs[0..n) rendered with the answer's opening: 0 with *n_tok, 1 refused by the
 * template (printed), -1 failed */
static int conv_tokens(const session *s, const fp4_chat_msg *msgs, size_t n, int64_t *n_tok) {
    char *text = NULL;
    size_t len, n_ids = 0;
    int32_t *ids = NULL;
    fp4_error err;
    if (s->own ? render_own(s, msgs, n, &text, &len, &err)
               : fp4_chat_render(s->tmpl, msgs, n, s->bos, s->eos_s, 1, &text, &len, &err))
        return fprintf(stderr, "fp4lane chat: %s\n", err.msg), 1;
    fp4_status st = fp4_tokenizer_encode(s->tok, text, len, FP4_TOK_PARSE_SPECIAL, &ids, &n_ids);
    free(text), free(ids);
    if (st) return fprintf(stderr, "fp4lane chat: cannot encode the conversation\n"), -1;
    *n_tok = (int64_t)n_ids;
    return 0;
}

/* one answer to the conversation c (its last message is the user's): 1 with the answer appended,
 * 0 refused (printed; the user's message stays last), -1 failed */
static int answer(session *s, conv *c) {
    char *text = NULL;
    size_t len;
    fp4_error err;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    /* the message with the system prompt alone must fit, else it is refused before any of the
     * history is forgotten for it */
    const size_t first = c->n && !strcmp(c->m[0].role, "system") ? 1 : 0;
    fp4_chat_msg least[2] = {c->m[0], c->m[c->n - 1]};
    int64_t n_least = 0;
    int r = conv_tokens(s, least + 1 - first, first + 1, &n_least);
    if (r) return r < 0 ? -1 : 0;
    if (n_least + 1 >= fp4_rt_n_ctx(s->rt))
        return fprintf(stderr,
                       "fp4lane chat: the message is longer than the context: %lld tokens%s, the context "
                       "length is %lld; the history is kept\n",
                       (long long)n_least, first ? " with the system prompt" : "",
                       (long long)fp4_rt_n_ctx(s->rt)),
               0;
    char tail[32];
    size_t n_tail = 0;
    for (int attempt = 0;; attempt++) {
        if (s->own ? render_own(s, c->m, c->n, &text, &len, &err)
                   : fp4_chat_render(s->tmpl, c->m, c->n, s->bos, s->eos_s, 1, &text, &len, &err))
            return fprintf(stderr, "fp4lane chat: %s\n", err.msg), 0;
        fp4_status es =
            fp4_tokenizer_encode_err(s->tok, text, len, FP4_TOK_PARSE_SPECIAL, &ids, &n_ids, &err);
        if (es) return free(text), cli_report_error("chat", es, &err), -1;
        n_tail = len < sizeof tail ? len : sizeof tail; /* does the prompt open a reasoning span */
        memcpy(tail, text + len - n_tail, n_tail);
        free(text);
        if ((int64_t)n_ids + 1 < fp4_rt_n_ctx(s->rt)) break;
        free(ids);
        /* the context is full: forget the oldest turns (a system prompt stays) */
        if (c->n - first <= 1)
            return fprintf(stderr, "fp4lane chat: the message is longer than the context\n"), 0;
        free((char *)c->m[first].content);
        memmove(c->m + first, c->m + first + 1, (c->n - first - 1) * sizeof *c->m);
        c->n--;
        fprintf(stderr, "fp4lane chat: context full: the oldest message is forgotten\n");
    }
    /* reuse the cache when the conversation's tokens extend it */
    int64_t same = 0;
    while (same < s->n_kv && same < (int64_t)n_ids && s->kv[same] == ids[same])
        same++;
    if (same < s->n_kv || same == (int64_t)n_ids) kv_reset(s), same = 0;
    int64_t n_new = (int64_t)n_ids - same;
    rt_text_out out;
    if (rt_text_out_open(&out, "chat", s->tok, s->stop_str, (size_t)s->n_stop, stdout)) return free(ids), -1;
    if (rt_text_out_think(&out, s->a->think_hide, tail, n_tail))
        return rt_text_out_close(&out), free(ids), -1;
    /* the answer: at most -n tokens, and what the context leaves */
    const int64_t room = fp4_rt_n_ctx(s->rt) - (int64_t)n_ids;
    chat_gen g = {.out = &out, .max = s->a->n_answer < room ? s->a->n_answer : room};
    double t1 = rt_cli_now();
    int rc = g.max < 1 ? feed(s, ids + same, n_new) : generate(s, ids, (int64_t)n_ids, same, &g);
    if (!rc && rt_text_out_finish(&out)) rc = -1;
    double t2 = rt_cli_now();
    if (g.t1 > 0) t1 = g.t1;
    printf("\n");
    fflush(stdout);
    fprintf(stderr, "[%s%lld new prompt tokens (%lld reused), %lld generated, %.1f tok/s]\n",
            stop_answer ? "interrupted; " : "", (long long)n_new, (long long)same, (long long)g.n,
            t2 > t1 ? g.n / (t2 - t1) : 0.0);
    if (!rc) rc = conv_add(c, "assistant", out.text ? out.text : "", out.n_text) ? -1 : 1;
    rt_text_out_close(&out);
    free(g.ids), free(ids);
    return rc;
}

int cmd_chat(int argc, char **argv) {
    chat_args a;
    int pr = parse(argc, argv, &a);
    if (pr == -2) return 1;
    if (pr) return usage();
    session s = {0};
    s.a = &a;
    if (rt_text_model_present("chat", a.e.model) || (s.tmpl = pick_template(&a, &s.own)) == -1) return 1;
    if (rt_text_tokenizer("chat", a.e.model, &s.tok)) return 1;
    fp4_model *m = NULL;
    if (rt_cli_open(&a.e, &m, &s.rt)) return fp4_tokenizer_free(s.tok), 1;
    int rc = 0;
    s.n_eos = rt_text_eos("chat", a.e.model, fp4_rt_arch(s.rt), s.tok, s.eos, FP4_ARCH_MAX_EOS);
    if (s.n_eos < 0) rc = 1;
    /* the template's end of turn: an EOS when it is one token, else a stop string */
    static const char *const ends[][2] = {{"llama3", "<|eot_id|>"},
                                          {"qwen3", "<|im_end|>"},
                                          {"chatml", "<|im_end|>"},
                                          {"llama2", "</s>"},
                                          {"llama2-default", "</s>"},
                                          {"mistral", "</s>"},
                                          {"mistral-eos-space", "</s>"}};
    for (size_t i = 0; s.tmpl >= 0 && i < sizeof ends / sizeof ends[0]; i++)
        if (!strcmp(ends[i][0], fp4_chat_template_name(s.tmpl))) {
            int32_t id = fp4_tokenizer_find(s.tok, ends[i][1], strlen(ends[i][1]));
            if (id >= 0 && fp4_tokenizer_is_special(s.tok, id))
                s.eos[s.n_eos++] = id;
            else
                s.stop_str[s.n_stop++] = ends[i][1];
        }
    token_text(s.tok, fp4_tokenizer_bos(s.tok), s.bos, sizeof s.bos);
    token_text(s.tok, fp4_tokenizer_eos(s.tok), s.eos_s, sizeof s.eos_s);
    s.lg = malloc(sizeof(float) * (size_t)fp4_rt_vocab(s.rt));
    if (!rc && (!s.lg || fp4_rt_seq_open(s.rt, &s.seq))) rc = 1;
    conv c = {0};
    if (!rc && a.system && conv_add(&c, "system", a.system, strlen(a.system))) rc = 1;
    /* a system prompt that leaves no room for a message is refused now, naming it, not at every turn */
    if (!rc && a.system) {
        fp4_chat_msg least[2] = {c.m[0], {"user", ""}};
        int64_t n_sys = 0;
        int r = conv_tokens(&s, least, 2, &n_sys);
        if (r) rc = 1;
        else if (n_sys + 1 >= fp4_rt_n_ctx(s.rt))
            fprintf(stderr,
                    "fp4lane chat: --system: the system prompt is %lld tokens with the template, past the "
                    "context length %lld: no message would fit (a shorter --system, or a longer --ctx)\n",
                    (long long)n_sys, (long long)fp4_rt_n_ctx(s.rt)),
                rc = 2;
    }
    /* Ctrl-C: at the prompt it interrupts the read (no SA_RESTART around getline); during an answer
     * it only sets stop_answer, and the answer's writes to stdout are restarted (SA_RESTART), so an
     * interrupted write(2) never loses output nor ends the session with "cannot write" */
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, &old);
    if (!rc)
        fprintf(
            stderr,
            "fp4lane chat: %s, template %s. /reset clears the history, /exit ends; Ctrl-C stops an answer.\n",
            a.e.model, s.tmpl >= 0 ? fp4_chat_template_name(s.tmpl) : "its own");
    char *line = NULL;
    size_t cap = 0;
    while (!rc) {
        stop_answer = 0;
        fputs("> ", stdout);
        fflush(stdout);
        errno = 0;
        sa.sa_flags = 0;
        sigaction(SIGINT, &sa, NULL);
        ssize_t n = getline(&line, &cap, stdin);
        const int read_errno = errno;
        sa.sa_flags = SA_RESTART;
        sigaction(SIGINT, &sa, NULL);
        errno = read_errno;
        if (n < 0) {
            if (errno == EINTR || stop_answer) {
                clearerr(stdin);
                fputs("\n", stdout);
                continue;
            }
            fputs("\n", stdout);
            break; /* end of input */
        }
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = 0;
        if (!n) continue;
        if (!strcmp(line, "/exit")) break;
        if (!strcmp(line, "/reset")) {
            conv_truncate(&c, a.system ? 1 : 0);
            kv_reset(&s);
            printf("(history cleared)\n");
            continue;
        }
        if (conv_add(&c, "user", line, (size_t)n)) rc = 1;
        int r = rc ? -1 : answer(&s, &c);
        if (r < 0) rc = 1;
        if (!r) conv_truncate(&c, c.n - 1); /* refused: the user's message is dropped */
    }
    sigaction(SIGINT, &old, NULL);
    free(line);
    conv_truncate(&c, 0);
    free(c.m), free(s.kv), free(s.lg);
    fp4_rt_free(s.rt);
    fp4_model_close(m);
    fp4_tokenizer_free(s.tok);
    fp4_template_free(s.own);
    return rc;
}
