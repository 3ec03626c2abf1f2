/* cmd_run.c — fp4lane run: a prompt in (text through MODEL's tokenizer: -p / -f / stdin; or ids),
 * the continuation out as it is generated (text streamed through the detokenizer and the stop
 * strings; or ids), optional logits of every position processed, prompt caches. The last line is
 * the summary: on stdout after ids, on stderr after text (stdout then holds the text alone).
 * Without MODEL: the default model (run_text.h); without a prompt: a fixed prompt, sampled with a
 * fixed seed. Ctrl-C: summary of what was done, 130; --logits-out and --kv-save are not written.
 * --kv-save / --kv-load compose: a snapshot holds the sequence's tokens, the last printed one
 * pending, and a run continued from it (with or without a prompt, which then gets no BOS) prints
 * what one longer run would have printed after it, with the same logits bits. */
#include "cli.h"
#include "rt_cli.h"
#include "io/outfile.h"
#include "run_spec.h"
#include "run_text.h"
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t interrupted;
static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

typedef struct run_args {
    rt_cli_engine e;
    const char *prompt, *batch_file, *logits_out, *kv_save, *kv_load;
    const char *text, *text_file; /* -p TEXT (or - for stdin), -f FILE                     */
    const char *stops[FP4_STOP_MAX];
    int n_stops;
    long long n_gen;
    int ignore_eos, json, timing, n_given, sampling_given, default_prompt, force;
    int think_hide;      /* --think hide                                                       */
    char think_tail[32]; /* the prompt's last bytes: does it open a reasoning span             */
    size_t n_think_tail;
    fp4_sampler_params sp;
    int32_t eos[FP4_ARCH_MAX_EOS];
    int n_eos;
    char model_buf[4200];
    fp4_model *draft_m; /* --draft: the draft model and engine (run_spec.h)            */
    fp4_rt *draft;
    fp4_spec_stats spec;
    int32_t *tr; /* --kv-save: every token of sequence 0 (snapshot history, fed, emitted) */
    int64_t n_tr, cap_tr;
    int tr_known, kv_written;
    int32_t *hist;      /* --kv-load: the snapshot's tokens; hist[0..n_hist_acc) not fed again */
    int64_t n_hist_acc;
    rt_text_out *prime; /* text mode: the detokenizer the snapshot's history primes        */
} run_args;

/* With no prompt: this prompt (printed before its continuation), sampled (temperature 0.7, top-k
 * 40, repetition penalty 1.1 over the last 64 tokens, seed 4: picked by reading the continuations
 * of seeds 1-5 on models/tiny) unless --temp/--seed are given: the README's output is reproducible. */
#define RUN_DEFAULT_PROMPT "This section describes"
#define RUN_DEFAULT_N 48
#define RUN_TEXT_N 128 /* -n when a text prompt is given without -n (capped by the context) */
#define RUN_BATCH_MAX 4096              /* prompts of one --batch-file (the engine's sequences) */
#define RUN_BATCH_LINE_MAX (16u << 20) /* bytes of one --batch-file line */

/* a token leaves the engine; returns 1 to end its sequence (a stop string), -1 on error */
typedef int (*token_fn)(void *ctx, int32_t seq, int32_t token);
static int print_token(void *ctx, int32_t seq, int32_t token) {
    int *first = ctx;
    printf("%s%d", first[seq] ? "" : " ", token);
    first[seq] = 0;
    fflush(stdout);
    return 0;
}
static int print_text(void *ctx, int32_t seq, int32_t token) {
    (void)seq;
    return rt_text_out_push(ctx, token);
}

/* --kv-save: the emitted tokens of sequence 0 recorded on their way out */
typedef struct track_ctx {
    token_fn cb;
    void *ctx;
    run_args *a;
} track_ctx;
static void track(run_args *a, const int32_t *t, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (a->n_tr < a->cap_tr) a->tr[a->n_tr++] = t[i];
        else a->tr_known = 0;
}
static int track_token(void *ctx, int32_t seq, int32_t token) {
    track_ctx *t = ctx;
    if (!seq) track(t->a, &token, 1);
    return t->cb(t->ctx, seq, token);
}

static int usage(void) {
    fprintf(
        stderr,
        "usage: fp4lane run [MODEL] [-p TEXT | -p - | -f FILE | --prompt-ids 1,2,3 | --prompt-ids @FILE |\n"
        "       --batch-file PROMPTS] [-n N] [--stop STR]... [--think show|hide]\n"
        "       [--draft DRAFT [--draft-n K]]\n"
        "       [--device cpu|cuda] [--mode exact|native] [--threads N] [--tp N] [--prefill-chunk N]\n"
        "       [--ctx N] [--temp T] [--top-k K] [--top-p P] [--min-p P] [--repeat-penalty R]\n"
        "       [--presence-penalty P] [--penalty-last-n N] [--seed S] [--ignore-eos]\n"
        "       [--logits-out FILE.npy] [--kv-save F] [--kv-load F] [--json]\n"
        "       [--force] [--timing]\n");
    return 2;
}

static int parse(int argc, char **argv, run_args *a) {
    memset(a, 0, sizeof *a);
    rt_cli_engine_init(&a->e);
    a->e.allow_draft = 1;
    a->sp = fp4_sampler_defaults();
    a->n_gen = 16;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int r = rt_cli_engine_opt(&a->e, argc, argv, &i);
        if (r < 0) return -1;
        if (r) continue;
        if (!strcmp(o, "--prompt-ids") && v)
            a->prompt = v, i++;
        else if ((!strcmp(o, "-p") || !strcmp(o, "--prompt")) && v)
            a->text = v, i++;
        else if (!strcmp(o, "-f") && v)
            a->text_file = v, i++;
        else if (!strcmp(o, "--stop") && v) {
            if (a->n_stops == FP4_STOP_MAX)
                return fprintf(stderr, "fp4lane run: more than %d --stop strings\n", FP4_STOP_MAX), -1;
            a->stops[a->n_stops++] = v, i++;
        } else if (!strcmp(o, "--think") && v) {
            if (strcmp(v, "show") && strcmp(v, "hide"))
                return fprintf(stderr, "fp4lane run: --think %s: expected show or hide\n", v), -1;
            a->think_hide = !strcmp(v, "hide"), i++;
        } else if (!strcmp(o, "--batch-file") && v)
            a->batch_file = v, i++;
        else if (!strcmp(o, "--logits-out") && v)
            a->logits_out = v, i++;
        else if (!strcmp(o, "--kv-save") && v)
            a->kv_save = v, i++;
        else if (!strcmp(o, "--kv-load") && v)
            a->kv_load = v, i++;
        else if (!strcmp(o, "--ignore-eos"))
            a->ignore_eos = 1;
        else if (!strcmp(o, "--force"))
            a->force = 1;
        else if (!strcmp(o, "--json"))
            a->json = 1;
        else if (!strcmp(o, "--timing"))
            a->timing = 1;
        else if (!strcmp(o, "-n") && v) {
            fp4_arg_val x;
            if (rt_cli_arg("n", o, v, &x)) return -1;
            a->n_gen = x.i;
            a->n_given = 1;
            i++;
        } else if ((r = rt_cli_sampling_opt(o, v, &a->sp)) != 0) {
            if (r < 0) return -1;
            a->sampling_given |= !strcmp(o, "--temp") || !strcmp(o, "--seed");
            i++;
        } else if (o[0] != '-' && !a->e.model)
            a->e.model = o;
        else
            return fprintf(stderr, "fp4lane run: unknown or incomplete option '%s'\n", o), -1;
    }
    if (!!a->prompt + !!a->batch_file + !!a->text + !!a->text_file > 1)
        return fprintf(stderr, "fp4lane run: give one of -p, -f, --prompt-ids and --batch-file\n"), -1;
    if ((a->prompt || a->batch_file) && a->n_stops)
        return fprintf(stderr, "fp4lane run: --stop needs a text prompt (-p / -f), not ids\n"), -1;
    if (!a->prompt && !a->batch_file && !a->text && !a->text_file && a->kv_load)
        a->text = ""; /* continue the snapshot's sequence: its pending token, then nothing more */
    else if (!a->prompt && !a->batch_file && !a->text && !a->text_file) {
        a->default_prompt = 1;
        a->text = RUN_DEFAULT_PROMPT;
        if (!a->sampling_given) {
            a->sp.temperature = 0.7f, a->sp.top_k = 40, a->sp.repeat_penalty = 1.1f,
            a->sp.penalty_last_n = 64;
            a->sp.seed = 4;
        }
        if (!a->n_given) a->n_gen = RUN_DEFAULT_N;
    } else if ((a->text || a->text_file) && !a->n_given)
        a->n_gen = RUN_TEXT_N;
    if (!a->e.model) {
        if (rt_text_default_model("run", a->model_buf, sizeof a->model_buf)) return -2;
        a->e.model = a->model_buf;
    }
    if (a->e.draft_n_given && !a->e.draft)
        return fprintf(stderr, "fp4lane run: --draft-n %d needs --draft DRAFT (a draft model)\n",
                       a->e.draft_n),
               -1;
    if (a->e.draft && (a->batch_file || a->kv_load))
        return fprintf(stderr, "fp4lane run: --draft drafts for one sequence from its start: not with %s\n",
                       a->batch_file ? "--batch-file"
                                     : "--kv-load (the draft has no cache of its positions)"),
               -1;
    /* the outputs are files written atomically (stdout carries the tokens): no '-', and no two
     * outputs of one run naming the same file (one would silently replace the other) */
    const char *const out_opt[2] = {"--logits-out", "--kv-save"}, *const out_val[2] = {a->logits_out,
                                                                                       a->kv_save};
    for (int k = 0; k < 2; k++)
        if (out_val[k] && !strcmp(out_val[k], "-"))
            return fprintf(stderr, "fp4lane run: %s -: written atomically under a file name, not streamed "
                                   "(standard output carries the tokens): name a file\n", out_opt[k]),
                   -1;
    if (a->logits_out && a->kv_save && cli_same_path(a->logits_out, a->kv_save))
        return fprintf(stderr, "fp4lane run: --logits-out %s and --kv-save %s name the same file: one output "
                               "would replace the other\n", a->logits_out, a->kv_save),
               -1;
    if (a->batch_file && (a->logits_out || a->kv_save || a->kv_load))
        return fprintf(
                   stderr,
                   "fp4lane run: --batch-file does not combine with --logits-out / --kv-save / --kv-load\n"),
               -1;
    return 0;
}

typedef struct run_stats {
    int64_t n_prefill, n_decode;
    double t_prefill, t_decode;
    double t_start, t_load, t_first; /* t_load, t_first: seconds from t_start (cmd_run's entry) */
} run_stats;

/* --json: one object at the end instead of the streamed ids and the summary line */
static void summary_json(const run_args *a, fp4_rt *rt, const run_stats *s, int32_t *const *ids,
                         const int64_t *n, int n_seq) {
    printf("{\"sequences\":[");
    for (int i = 0; i < n_seq; i++) {
        printf("%s[", i ? "," : "");
        for (int64_t j = 0; j < n[i]; j++)
            printf("%s%d", j ? "," : "", ids[i][j]);
        printf("]");
    }
    printf("],\"prefill_tokens\":%lld,\"prefill_tok_s\":%.3f,\"decode_tokens\":%lld,\"decode_tok_s\":%.3f,"
           "\"first_token_s\":%.3f,\"device\":\"%s\","
           "\"mode\":\"%s\",\"threads\":%d,\"routes\":\"%s\",\"draft_n\":%d,\"drafted\":%lld,"
           "\"accepted\":%lld,\"interrupted\":%s}\n",
           (long long)s->n_prefill, s->t_prefill > 0 ? s->n_prefill / s->t_prefill : 0.0,
           (long long)s->n_decode, s->t_decode > 0 ? s->n_decode / s->t_decode : 0.0, s->t_first,
           fp4_rt_device_name(rt), a->e.o.mode == FP4_MODE_EXACT ? "exact" : "native", a->e.o.n_threads,
           fp4_rt_routes(rt), a->draft ? a->e.draft_n : 0, (long long)a->spec.drafted,
           (long long)a->spec.accepted, interrupted ? "true" : "false");
}

static void summary(FILE *f, const run_args *a, fp4_rt *rt, const run_stats *s, const char *end) {
    char dr[200] = "";
    if (a->draft)
        snprintf(dr, sizeof dr, ", draft-n %d: drafted %lld, accepted %lld (%.1f %%)", a->e.draft_n,
                 (long long)a->spec.drafted, (long long)a->spec.accepted,
                 a->spec.drafted ? 100.0 * a->spec.accepted / a->spec.drafted : 0.0);
    fprintf(f,
            "\nprefill %lld tok %.2f tok/s, decode %lld tok %.2f tok/s, first token %.3f s, device %s, "
            "mode %s, threads %d, routes: %s%s%s\n",
            (long long)s->n_prefill, s->t_prefill > 0 ? s->n_prefill / s->t_prefill : 0.0,
            (long long)s->n_decode, s->t_decode > 0 ? s->n_decode / s->t_decode : 0.0, s->t_first,
            fp4_rt_device_name(rt), a->e.o.mode == FP4_MODE_EXACT ? "exact" : "native", a->e.o.n_threads,
            fp4_rt_routes(rt), dr, end);
}

/* --timing, on stderr: load and first-token times, and the memory split of /proc/self/status
 * (VmHWM: peak resident; RssAnon / RssFile: now, with the engine still alive) */
static void timing_line(const run_stats *s) {
    char line[256], out[512] = "";
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f)) {
        long long kb;
        char key[32];
        if (sscanf(line, "%31[^:]: %lld kB", key, &kb) == 2 &&
            (!strcmp(key, "VmHWM") || !strcmp(key, "RssAnon") || !strcmp(key, "RssFile")))
            snprintf(out + strlen(out), sizeof out - strlen(out), ", %s %.1f MiB", key, kb / 1024.0);
    }
    if (f) fclose(f);
    fprintf(stderr, "timing: load %.3f s, first token %.3f s (from the start of run)%s\n", s->t_load,
            s->t_first, out);
}

/* One line of f without its newline into *buf (NUL-terminated): 1, 0 at the end of the file, -1
 * past max bytes, -2 a NUL byte (the id parser would stop there), -3 out of memory or a read error.
 * The cap applies while reading: a hostile line never costs more than max bytes. */
static int batch_line(FILE *f, char **buf, size_t *cap, size_t max) {
    size_t n = 0;
    int c, any = 0;
    while ((c = getc(f)) != EOF && c != '\n') {
        any = 1;
        if (!c) return -2;
        if (n == max) return -1;
        if (n + 1 >= *cap) {
            size_t nc = *cap ? 2 * *cap : 4096;
            char *p = realloc(*buf, nc);
            if (!p) return -3;
            *buf = p, *cap = nc;
        }
        (*buf)[n++] = (char)c;
    }
    if (ferror(f)) return -3;
    if (c == EOF && !any) return 0;
    if (!*buf && !(*buf = malloc(*cap = 64))) return -3;
    (*buf)[n] = 0;
    return 1;
}

/* --batch-file: one prompt of ids per non-blank line; every refusal names the file's line. 0, or
 * 2 (printed); *prompts / *plen hold *n_seq prompts either way */
static int read_batch(const char *path, int32_t ***prompts, int64_t **plen, int *n_seq) {
    FILE *f = fopen(path, "r");
    if (!f) return fprintf(stderr, "fp4lane run: --batch-file %s: %s\n", path, strerror(errno)), 2;
    char *line = NULL, where[4200];
    size_t cap = 0;
    int rc = 0, r;
    for (long ln = 1; !rc && (r = batch_line(f, &line, &cap, RUN_BATCH_LINE_MAX)) != 0; ln++) {
        snprintf(where, sizeof where, "--batch-file %s line %ld", path, ln);
        if (r < 0) {
            fprintf(stderr, "fp4lane run: %s: %s\n", where,
                    r == -1   ? "longer than 16 MiB"
                    : r == -2 ? "a NUL byte: not a list of token ids"
                              : "cannot read it (out of memory or a read error)");
            rc = 2;
            break;
        }
        if (strspn(line, " \t\r") == strlen(line)) continue;
        if (*n_seq == RUN_BATCH_MAX) {
            fprintf(stderr, "fp4lane run: %s: more than %d prompts in one batch\n", where, RUN_BATCH_MAX);
            rc = 2;
            break;
        }
        int32_t **np = realloc(*prompts, sizeof *np * (size_t)(*n_seq + 1));
        if (np) *prompts = np;
        int64_t *nl = np ? realloc(*plen, sizeof *nl * (size_t)(*n_seq + 1)) : NULL;
        if (nl) *plen = nl;
        if (!np || !nl) {
            fprintf(stderr, "fp4lane run: out of memory\n");
            rc = 2;
        } else if (rt_cli_parse_ids_text(line, where, &(*prompts)[*n_seq], &(*plen)[*n_seq])) {
            rc = 2;
        } else if (!(*plen)[*n_seq]) {
            free((*prompts)[*n_seq]);
            fprintf(stderr, "fp4lane run: %s: the prompt is empty\n", where);
            rc = 2;
        } else
            (*n_seq)++;
    }
    free(line);
    fclose(f);
    if (!rc && !*n_seq) fprintf(stderr, "fp4lane run: --batch-file %s holds no prompt\n", path), rc = 2;
    return rc;
}

/* The context check (the library's, fp4_rt_check_room: checked arithmetic): what seq holds (-1:
 * nothing) + prompt + -n positions within the context. The message says what the user gave (-n,
 * --ctx) and what are defaults. 0, or 2 (printed). */
static int within_ctx(const run_args *a, const fp4_rt *rt, int32_t seq, int64_t prompt) {
    const int64_t ctx = fp4_rt_n_ctx(rt), train = fp4_rt_arch(rt)->n_ctx_train;
    const int64_t cached = seq < 0 ? 0 : fp4_rt_seq_pos(rt, seq);
    fp4_error err;
    if (!fp4_rt_check_room(rt, seq, prompt, a->n_gen, &err)) return 0;
    char c[64] = "", n[160], x[160];
    if (cached) snprintf(c, sizeof c, "%lld cached + ", (long long)cached);
    if (a->n_given)
        snprintf(n, sizeof n, "-n %lld tokens", a->n_gen);
    else
        snprintf(n, sizeof n, "%lld tokens to generate (the default with token ids; -n N sets it)", a->n_gen);
    if (a->e.o.n_ctx)
        snprintf(x, sizeof x, "the context length %lld (--ctx)", (long long)ctx);
    else if (ctx == train)
        snprintf(x, sizeof x, "the context length %lld (the model's)", (long long)ctx);
    else
        snprintf(x, sizeof x, "the context length %lld (the default; the model's is %lld, --ctx N raises it)",
                 (long long)ctx, (long long)train);
    if (!a->n_given && (a->text || a->text_file)) /* the default -n shrinks to fit: no room is left */
        fprintf(stderr, "fp4lane run: %s%lld prompt tokens leave no room to generate within %s\n", c,
                (long long)prompt, x);
    else
        fprintf(stderr, "fp4lane run: %s%lld prompt + %s is past %s\n", c, (long long)prompt, n, x);
    return 2;
}

static int is_eos(const run_args *a, int32_t t) {
    for (int i = 0; i < a->n_eos; i++)
        if (a->eos[i] == t) return 1;
    return 0;
}

/* One prompt, plain decoding: the library's generation loop (fp4_session, the server's too). cb
 * gets every generated token (the EOS too) and ends the generation by returning 1. */
typedef struct sess_ctx {
    token_fn cb;
    void *cb_ctx;
    run_stats *s;
    double t0;
    int failed;
} sess_ctx;
static int sess_token(void *user, const fp4_session_tok *t) {
    sess_ctx *c = user;
    if (t->id < 0) return 0;
    if (!c->s->n_decode) {
        c->s->t_first = rt_cli_now() - c->s->t_start;
        c->s->t_prefill = rt_cli_now() - c->t0;
    }
    c->s->n_decode++;
    const int r = c->cb(c->cb_ctx, 0, t->id);
    if (r < 0) c->failed = 1;
    return r != 0;
}
static int decode_session(run_args *a, fp4_rt *rt, const int32_t *prompt, int64_t plen, token_fn cb,
                          void *cb_ctx, run_stats *s) {
    fp4_session_req r = {.prompt = prompt,
                         .n_prompt = plen,
                         .sampling = a->sp,
                         .max_tokens = a->n_gen,
                         .stop_ids = a->eos,
                         .n_stop_ids = a->ignore_eos ? 0 : a->n_eos,
                         .prefill_chunk = a->e.prefill_chunk};
    sess_ctx c = {cb, cb_ctx, s, rt_cli_now(), 0};
    fp4_session *ss = NULL;
    fp4_error err;
    fp4_status st = fp4_session_create(rt, &r, sess_token, &c, &ss, &err);
    if (!st && a->draft) st = fp4_session_set_draft(ss, a->draft, a->e.draft_n, &err); /* --draft */
    if (!st) st = fp4_session_run(ss, (const volatile int *)&interrupted, &err);
    a->spec = fp4_session_spec_stats(ss);
    fp4_session_free(ss);
    s->n_prefill = plen;
    s->t_decode = s->n_decode ? rt_cli_now() - c.t0 - s->t_prefill : 0.0;
    if (!s->n_decode) s->t_prefill = rt_cli_now() - c.t0;
    if (st) return cli_report_error("run", err.code, &err);
    if (c.failed) return fprintf(stderr, "fp4lane run: cannot write the output\n"), 1;
    return 0;
}

/* Decodes n_seq prompts together: prefill steps of `chunk` positions of every sequence, then one
 * column per live sequence per step. cb gets every generated token. (One prompt without
 * --logits-out or prompt caches, --draft or not, goes through decode_session: see decode.) */
static int decode_seqs(run_args *a, fp4_rt *rt, int32_t **prompts, const int64_t *plen, int n_seq,
                       rt_npy *npy, token_fn cb, void *cb_ctx, run_stats *s, const int32_t *seq);

/* --kv-load: sequence 0 continues the snapshot's. Its history (the ids of the cached positions,
 * then the pending one: the last token the saving run printed and did not feed) primes the
 * sampler's penalties and the detokenizer; the pending token is fed before the prompt, so the
 * continuation is what one longer run would have done. A snapshot that ends with its prompt (no
 * token pending) and no new prompt: its last position is computed again (the same bits) to get
 * the logits to sample from. 0, or the exit status (printed). */
static int kv_continue(run_args *a, fp4_rt *rt, int32_t seq, int32_t **prompt, int64_t *plen) {
    fp4_error err;
    const int64_t cap = fp4_rt_n_ctx(rt) + 1;
    int32_t *h = malloc(sizeof *h * (size_t)cap);
    int64_t n_h = 0;
    if (!h) return fprintf(stderr, "fp4lane run: out of memory\n"), 1;
    if (fp4_rt_kv_load_tokens(rt, seq, a->kv_load, h, cap, &n_h, &err))
        return free(h), cli_report_error("run", err.code, &err);
    const int64_t n_pos = fp4_rt_seq_pos(rt, seq);
    int64_t fed = n_h > n_pos ? 1 : 0; /* the pending token */
    if (!n_h && !*plen) {
        free(h);
        fprintf(stderr,
                "fp4lane run: --kv-load %s holds no token history (written by fp4_rt_kv_save): give a "
                "prompt to continue from it\n",
                a->kv_load);
        return 2;
    }
    if (n_h && n_h == n_pos && !*plen) { /* its prompt's last position again, for its logits */
        fp4_rt_seq_truncate(rt, seq, n_pos - 1);
        fed = 1;
    }
    int32_t *p = malloc(sizeof *p * (size_t)(fed + *plen + 1));
    if (!p) return free(h), fprintf(stderr, "fp4lane run: out of memory\n"), 1;
    if (fed) p[0] = h[n_h - 1];
    if (*plen) memcpy(p + fed, *prompt, sizeof *p * (size_t)*plen); /* an empty prompt may be NULL */
    free(*prompt);
    *prompt = p, *plen += fed;
    if (!n_h) a->tr_known = 0; /* a history of unknown tokens: saved again without one */
    track(a, h, n_h - fed);
    a->hist = h, a->n_hist_acc = n_h - fed;
    if (a->prime && n_h && rt_text_out_prime(a->prime, h, (size_t)n_h))
        return fprintf(stderr, "fp4lane run: cannot decode the snapshot's tokens\n"), 1;
    return 0;
}

static int decode(run_args *a, fp4_rt *rt, int32_t **prompts, int64_t *plen, int n_seq, rt_npy *npy,
                  token_fn cb, void *cb_ctx, run_stats *s) {
    if (n_seq == 1 && !npy && !a->kv_load && !a->kv_save && a->n_gen >= 1)
        return decode_session(a, rt, prompts[0], plen[0], cb, cb_ctx, s); /* the library's loop */
    int32_t *seq = malloc(sizeof *seq * (size_t)n_seq);
    int rc = 0, n_open = 0;
    if (!seq) return fprintf(stderr, "fp4lane run: out of memory\n"), 1;
    for (; n_open < n_seq && !rc; n_open++)
        if (fp4_rt_seq_open(rt, &seq[n_open]))
            rc = 1, fprintf(stderr, "fp4lane run: cannot open sequence %d\n", n_open);
    track_ctx tc = {cb, cb_ctx, a};
    if (!rc && a->kv_save) { /* the history the snapshot will hold */
        a->cap_tr = fp4_rt_n_ctx(rt) + 1;
        a->tr = malloc(sizeof *a->tr * (size_t)a->cap_tr);
        a->tr_known = a->tr != NULL;
        cb = track_token, cb_ctx = &tc;
    }
    if (!rc && a->kv_load) rc = kv_continue(a, rt, seq[0], &prompts[0], &plen[0]);
    /* a text continuation without -n: as many tokens as the context leaves after the cache */
    const int64_t room = rc ? 0 : fp4_rt_n_ctx(rt) - fp4_rt_seq_pos(rt, seq[0]) - plen[0];
    if (a->kv_load && !a->n_given && a->n_gen > room && room > 0) a->n_gen = room;
    if (!rc && a->kv_save) track(a, prompts[0], plen[0]);
    if (!rc && a->kv_load) rc = within_ctx(a, rt, seq[0], plen[0]);
    if (!rc) rc = decode_seqs(a, rt, prompts, plen, n_seq, npy, cb, cb_ctx, s, seq);
    if (!rc && a->kv_save && !interrupted) {
        fp4_error err;
        const int64_t pos = fp4_rt_seq_pos(rt, seq[0]); /* a history that does not fit: none */
        const int64_t n_tok = a->tr_known && (a->n_tr == pos || a->n_tr == pos + 1) ? a->n_tr : 0;
        if (fp4_rt_kv_save_tokens(rt, seq[0], a->kv_save, a->tr, n_tok, &err))
            rc = cli_report_error("run", err.code, &err);
        else
            a->kv_written = 1;
    }
    free(seq), free(a->tr), free(a->hist);
    a->tr = a->hist = NULL;
    return rc;
}

static int decode_seqs(run_args *a, fp4_rt *rt, int32_t **prompts, const int64_t *plen, int n_seq,
                       rt_npy *npy, token_fn cb, void *cb_ctx, run_stats *s, const int32_t *seq) {
    const int64_t V = fp4_rt_vocab(rt);
    fp4_error err;
    int64_t maxp = 0, total = 0;
    for (int i = 0; i < n_seq; i++)
        total += plen[i], maxp = plen[i] > maxp ? plen[i] : maxp;
    /* prefill steps of `chunk` positions per sequence (default 256: the engine splits a step into
     * backend calls anyway; this bounds the logits buffer when every position's logits are kept) */
    const int64_t chunk = a->e.prefill_chunk > 0 ? a->e.prefill_chunk : (maxp < 256 ? maxp : 256);
    const size_t max_cols = (size_t)(chunk * n_seq + n_seq);
    const size_t max_logit_rows = npy ? max_cols : (size_t)n_seq; /* else only each prompt's last column */
    fp4_rt_tok *cols = malloc(sizeof *cols * max_cols);
    int *owner = malloc(sizeof *owner * max_cols), *is_last = malloc(sizeof *is_last * max_cols);
    float *lg = malloc(sizeof(float) * (size_t)V * max_logit_rows);
    int32_t *next = malloc(sizeof *next * (size_t)n_seq);
    int32_t *gtok = malloc(sizeof *gtok * (size_t)n_seq); /* a greedy decode step's tokens */
    int *live = malloc(sizeof *live * (size_t)n_seq);
    fp4_sampler **smp = calloc((size_t)n_seq, sizeof *smp);
    int rc = 0;
    if (!cols || !owner || !is_last || !lg || !next || !gtok || !live || !smp) {
        fprintf(stderr, "fp4lane run: out of memory\n");
        rc = 1;
        goto out;
    }
    for (int i = 0; i < n_seq; i++) {
        live[i] = 1;
        if (fp4_sampler_create(&a->sp, V, &smp[i])) {
            fprintf(stderr, "fp4lane run: cannot open sequence %d\n", i);
            rc = 1;
            goto out;
        }
        /* the penalties see a continued sequence's history (its pending token is fed below) */
        for (int64_t j = 0; !i && a->hist && j < a->n_hist_acc; j++)
            fp4_sampler_accept(smp[i], a->hist[j]);
        for (int64_t j = 0; j < plen[i]; j++)
            fp4_sampler_accept(smp[i], prompts[i][j]);
    }
    /* prefill */
    double t0 = rt_cli_now();
    for (int64_t p0 = 0; p0 < maxp && !interrupted; p0 += chunk) {
        int64_t n = 0;
        for (int i = 0; i < n_seq; i++)
            for (int64_t j = p0; j < plen[i] && j < p0 + chunk; j++) {
                owner[n] = i, is_last[n] = j == plen[i] - 1;
                cols[n++] = (fp4_rt_tok){seq[i], prompts[i][j], npy != NULL || j == plen[i] - 1};
            }
        if (fp4_rt_step(rt, cols, n, lg, &err)) {
            rc = cli_report_error("run", err.code, &err);
            goto out;
        }
        for (int64_t c = 0, k = 0; c < n; c++) {
            if (!cols[c].want_logits) continue;
            if (npy && rt_npy_row(npy, lg + k * V)) {
                fprintf(stderr, "fp4lane run: --logits-out: write failed\n");
                rc = 1;
                goto out;
            }
            if (is_last[c]) next[owner[c]] = fp4_sampler_sample(smp[owner[c]], lg + k * V);
            k++;
        }
    }
    /* --draft: the draft caches the prompt too (one sequence; run_spec.h) */
    run_spec sp = {.target = rt, .draft = a->draft, .tseq = seq[0], .draft_n = a->e.draft_n, .smp = smp[0],
                   .token = cb, .token_ctx = cb_ctx, .npy = npy, .eos = a->eos, .n_eos = a->n_eos,
                   .ignore_eos = a->ignore_eos, .n_gen = a->n_gen, .interrupted = &interrupted};
    if (a->draft && !interrupted &&
        (fp4_rt_seq_open(a->draft, &sp.dseq) || run_spec_prefill(&sp, prompts[0], plen[0]))) {
        rc = 1;
        goto out;
    }
    s->n_prefill = total;
    s->t_prefill = rt_cli_now() - t0;
    /* decode: emit each sequence's next token; feed it unless it ends the sequence. Plain greedy
     * sampling without --logits-out needs the tokens only: fp4_rt_step_greedy (the same choice) */
    int greedy = !npy;
    for (int i = 0; i < n_seq; i++)
        greedy = greedy && fp4_sampler_is_greedy(smp[i]);
    t0 = rt_cli_now();
    if (a->draft && !interrupted) {
        if ((rc = run_spec_decode(&sp, prompts[0], plen[0], next[0]))) goto out;
        s->n_decode = sp.n_decode, a->spec = sp.stats;
        if (sp.n_decode) s->t_first = sp.t_first - s->t_start;
    } else
    for (int64_t g = 0; g < a->n_gen && !interrupted; g++) {
        int64_t n = 0;
        for (int i = 0; i < n_seq; i++) {
            if (!live[i]) continue;
            if (!s->n_decode) s->t_first = rt_cli_now() - s->t_start;
            const int stop = cb(cb_ctx, i, next[i]);
            if (stop < 0) {
                fprintf(stderr, "fp4lane run: cannot write the output\n");
                rc = 1;
                goto out;
            }
            fp4_sampler_accept(smp[i], next[i]);
            s->n_decode++;
            if (stop || (!a->ignore_eos && is_eos(a, next[i])) || g + 1 == a->n_gen) {
                live[i] = 0;
                continue;
            }
            owner[n] = i;
            cols[n++] = (fp4_rt_tok){seq[i], next[i], 1};
        }
        if (!n) break;
        if (greedy) { /* the tokens alone cross from the device (fp4_rt_step_greedy) */
            if (fp4_rt_step_greedy(rt, cols, n, gtok, &err)) {
                rc = cli_report_error("run", err.code, &err);
                goto out;
            }
            for (int64_t c = 0; c < n; c++)
                next[owner[c]] = gtok[c];
            continue;
        }
        if (fp4_rt_step(rt, cols, n, lg, &err)) {
            rc = cli_report_error("run", err.code, &err);
            goto out;
        }
        for (int64_t c = 0; c < n; c++) {
            if (npy && rt_npy_row(npy, lg + c * V)) {
                fprintf(stderr, "fp4lane run: --logits-out: write failed\n");
                rc = 1;
                goto out;
            }
            next[owner[c]] = fp4_sampler_sample(smp[owner[c]], lg + c * V);
        }
    }
    s->t_decode = rt_cli_now() - t0;
out:
    for (int i = 0; smp && i < n_seq; i++)
        fp4_sampler_free(smp[i]);
    free(smp), free(cols), free(owner), free(is_last), free(lg), free(next), free(gtok);
    free(live);
    return rc;
}

/* batch output: one line per sequence at the end */
typedef struct batch_out {
    int32_t **ids;
    int64_t *n, *cap;
} batch_out;
static int collect_token(void *ctx, int32_t seq, int32_t token) {
    batch_out *b = ctx;
    if (b->n[seq] == b->cap[seq]) {
        int64_t c = b->cap[seq] ? 2 * b->cap[seq] : 64;
        int32_t *p = realloc(b->ids[seq], sizeof *p * (size_t)c);
        if (!p) return -1;
        b->ids[seq] = p, b->cap[seq] = c;
    }
    b->ids[seq][b->n[seq]++] = token;
    return 0;
}

/* text mode: the ids kept (for --json) and the text streamed */
typedef struct text_ctx {
    batch_out *b;
    rt_text_out o;
} text_ctx;
static int text_token(void *ctx, int32_t seq, int32_t token) {
    text_ctx *t = ctx;
    if (collect_token(t->b, seq, token)) return -1;
    return print_text(&t->o, seq, token);
}

/* --json's stopped_by: "stop" (a --stop string), "eos", "length" (-n tokens, or as many as the
 * context left), "interrupted" (Ctrl-C) */
static const char *stopped_by(const run_args *a, const text_ctx *t, const batch_out *b) {
    const int64_t n = b->n[0];
    if (t->o.stopped) return "stop";
    if (interrupted) return "interrupted";
    if (n && !a->ignore_eos && is_eos(a, b->ids[0][n - 1])) return "eos";
    return n >= a->n_gen ? "length" : "other";
}

static void json_string(const char *s, size_t n) {
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

int cmd_run(int argc, char **argv) {
    const double t_start = rt_cli_now();
    run_args a;
    int pr = parse(argc, argv, &a);
    if (pr == -2) return 1; /* no default model: printed */
    if (pr) return usage();
    const int text_mode = a.text || a.text_file;
    int32_t **prompts = NULL;
    int64_t *plen = NULL;
    int n_seq = 0, rc = 0, empty_text = 0;
    fp4_tokenizer *tok = NULL;
    if (text_mode) {
        char *ptext;
        size_t plen_b;
        if (rt_text_read_prompt("run", a.text, a.text_file, &ptext, &plen_b)) return 2;
        if (rt_text_tokenizer("run", a.e.model, &tok)) return free(ptext), 1;
        prompts = malloc(sizeof *prompts), plen = malloc(sizeof *plen);
        int32_t *ids = NULL;
        size_t n_ids = 0;
        fp4_error te = {0};
        fp4_status ts = FP4_ERR_NOMEM;
        /* a continuation (--kv-load) gets no BOS: its sequence began in the snapshot */
        if (prompts && plen)
            ts = fp4_tokenizer_encode_err(tok, ptext, plen_b, a.kv_load ? 0 : FP4_TOK_ADD_SPECIAL, &ids,
                                          &n_ids, &te);
        if (ts) {
            if (te.rule[0]) cli_report_error("run", ts, &te);
            else fprintf(stderr, "fp4lane run: cannot encode the prompt\n");
            free(ptext), free(prompts), free(plen), fp4_tokenizer_free(tok);
            return 1;
        }
        a.n_think_tail = plen_b < sizeof a.think_tail ? plen_b : sizeof a.think_tail;
        memcpy(a.think_tail, ptext + plen_b - a.n_think_tail, a.n_think_tail);
        free(ptext);
        prompts[0] = ids, plen[0] = (int64_t)n_ids, n_seq = 1;
        empty_text = !n_ids && !a.kv_load; /* starts from the BOS once the model is open */
        if (a.default_prompt)
            fprintf(stderr,
                    "fp4lane run: no prompt given: model %s, prompt \"%s\", temperature %g, top-k %d, "
                    "repetition penalty %g, seed %llu\n",
                    a.e.model, RUN_DEFAULT_PROMPT, a.sp.temperature, a.sp.top_k, a.sp.repeat_penalty,
                    (unsigned long long)a.sp.seed);
    } else if (a.prompt) {
        prompts = malloc(sizeof *prompts), plen = malloc(sizeof *plen);
        if (!prompts || !plen || rt_cli_parse_ids(a.prompt, &prompts[0], &plen[0]))
            return free(prompts), free(plen), 2;
        n_seq = 1;
    } else {
        rc = read_batch(a.batch_file, &prompts, &plen, &n_seq);
        a.e.o.max_seqs = n_seq;
    }
    for (int i = 0; !rc && i < n_seq; i++)
        if (!plen[i] && !a.kv_load && !empty_text) /* --kv-load alone: the snapshot's sequence goes on */
            fprintf(stderr, "fp4lane run: the prompt%s is empty\n", n_seq > 1 ? " of a batch line" : ""),
                rc = 2;
    /* outputs checked before any work (io/outfile.h): not the model under another name, not a
     * symbolic link or a special file, not an existing file unless --force */
    const char *outs[2] = {a.logits_out, a.kv_save};
    for (int i = 0; !rc && i < 2; i++) {
        fp4_error oe;
        fp4_status os = outs[i] ? fp4_out_preflight(a.e.model, outs[i], 0, a.force, &oe) : FP4_OK;
        if (os) rc = cli_report_error("run", os, &oe);
    }
    fp4_model *m = NULL;
    fp4_rt *rt = NULL;
    if (!rc) rc = rt_cli_open(&a.e, &m, &rt);
    if (!rc && a.e.draft) rc = rt_cli_open_draft(&a.e, rt, &a.draft_m, &a.draft);
    if (!rc && a.e.draft && tok) rc = run_spec_same_tokenizer(a.e.draft, tok);
    const double t_load = rt_cli_now() - t_start;
    if (!rc && (a.n_eos = rt_text_eos("run", a.e.model, fp4_rt_arch(rt), tok, a.eos, FP4_ARCH_MAX_EOS)) < 0)
        rc = 1;
    if (!rc && empty_text) { /* an empty text prompt: generate() starts from bos_token_id */
        int32_t bos = rt_text_bos("run", a.e.model, fp4_rt_arch(rt), tok);
        int32_t *one = bos >= 0 ? malloc(sizeof *one) : NULL;
        if (bos == -2) rc = 1;
        else if (bos < 0)
            fprintf(stderr, "fp4lane run: the prompt is empty and the model names no BOS\n"), rc = 2;
        else if (!one) fprintf(stderr, "fp4lane run: out of memory\n"), rc = 1;
        else free(prompts[0]), one[0] = bos, prompts[0] = one, plen[0] = 1;
    }
    /* a text prompt without -n: as many tokens as the context leaves, up to RUN_TEXT_N */
    if (!rc && text_mode && !a.n_given && plen[0] < fp4_rt_n_ctx(rt) && a.n_gen > fp4_rt_n_ctx(rt) - plen[0])
        a.n_gen = fp4_rt_n_ctx(rt) - plen[0];
    /* usage checks that need the model: ids in range, positions within the context */
    for (int i = 0; !rc && i < n_seq; i++) {
        for (int64_t j = 0; j < plen[i] && !rc; j++)
            if (prompts[i][j] >= fp4_rt_vocab(rt))
                fprintf(stderr, "fp4lane run: prompt token id %d is outside the vocabulary [0, %lld)\n",
                        prompts[i][j], (long long)fp4_rt_vocab(rt)),
                    rc = 2;
        if (!rc) rc = within_ctx(&a, rt, -1, plen[i]);
    }
    rt_npy npy;
    int have_npy = 0;
    if (!rc && a.logits_out) {
        if (rt_npy_open(&npy, a.logits_out, fp4_rt_vocab(rt), !a.force))
            rc = 1;
        else
            have_npy = 1;
    }
    if (!rc) {
        int *first = malloc(sizeof(int) * (size_t)n_seq);
        for (int i = 0; first && i < n_seq; i++)
            first[i] = 1;
        struct sigaction sa, old;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_sigint;
        sa.sa_flags = SA_RESTART; /* a write to stdout that Ctrl-C interrupts is restarted, not lost */
        sigaction(SIGINT, &sa, &old);
        run_stats st = {0};
        st.t_start = t_start, st.t_load = t_load;
        batch_out b = {calloc((size_t)n_seq, sizeof(int32_t *)), calloc((size_t)n_seq, sizeof(int64_t)),
                       calloc((size_t)n_seq, sizeof(int64_t))};
        text_ctx tc = {&b, {0}};
        if (!b.ids || !b.n || !b.cap)
            rc = 1;
        else if (text_mode) {
            if (rt_text_out_open(&tc.o, "run", tok, a.stops, (size_t)a.n_stops, a.json ? NULL : stdout) ||
                rt_text_out_think(&tc.o, a.think_hide, a.think_tail, a.n_think_tail))
                rc = 2;
            else {
                if (a.default_prompt && !a.json) fputs(RUN_DEFAULT_PROMPT, stdout);
                a.prime = &tc.o;
                rc = decode(&a, rt, prompts, plen, 1, have_npy ? &npy : NULL, text_token, &tc, &st);
            }
            if ((!rc || interrupted) && rt_text_out_finish(&tc.o))
                fprintf(stderr, "fp4lane run: cannot write the output\n"), rc = 1;
            /* on a terminal the text ends with a newline (the shell's prompt starts on its own
             * line); into a file or a pipe stdout holds the continuation exactly, as generated */
            const char last = tc.o.n_text ? tc.o.text[tc.o.n_text - 1] : a.default_prompt ? 'd' : '\n';
            if (!a.json && (!rc || interrupted) && last != '\n' && isatty(STDOUT_FILENO) &&
                putchar('\n') == EOF)
                rc = 1;
        } else if (n_seq == 1 && !a.json)
            rc = decode(&a, rt, prompts, plen, 1, have_npy ? &npy : NULL, print_token, first, &st);
        else
            rc = decode(&a, rt, prompts, plen, n_seq, have_npy ? &npy : NULL, collect_token, &b, &st);
        if (a.json && (!rc || interrupted)) {
            if (text_mode) {
                printf("{\"text\":");
                json_string(tc.o.text ? tc.o.text : "", tc.o.n_text);
                printf(",\"stopped_by\":\"%s\",\"result\":", stopped_by(&a, &tc, &b));
            }
            summary_json(&a, rt, &st, b.ids, b.n, n_seq);
            if (text_mode) printf("}\n");
        }
        rt_text_out_close(&tc.o);
        for (int i = 0; b.ids && b.n && i < n_seq; i++) {
            if (n_seq > 1 && !a.json) {
                printf("%d:", i);
                for (int64_t j = 0; j < b.n[i]; j++)
                    printf(" %d", b.ids[i][j]);
                printf("\n");
            }
            free(b.ids[i]);
        }
        free(b.ids), free(b.n), free(b.cap);
        sigaction(SIGINT, &old, NULL);
        free(first);
        const int kv_lost = a.kv_save && !a.kv_written; /* a Ctrl-C after the save: it is there */
        if (interrupted && (have_npy || kv_lost))
            fprintf(stderr, "fp4lane run: interrupted: %s%s%s%s not written\n",
                    have_npy ? "--logits-out " : "", have_npy ? a.logits_out : "",
                    have_npy && kv_lost ? " and --kv-save " : kv_lost ? "--kv-save " : "",
                    kv_lost ? a.kv_save : "");
        if (have_npy) {
            if (rc || interrupted) /* Ctrl-C: no partial rows replace or create the target */
                rt_npy_abort(&npy);
            else if (rt_npy_finish(&npy))
                rc = 1;
            have_npy = 0;
        }
        if ((!rc || interrupted) && !a.json)
            summary(text_mode ? stderr : stdout, &a, rt, &st, interrupted ? " (interrupted)" : "");
        if (a.timing && (!rc || interrupted)) timing_line(&st);
        if (interrupted) rc = 130;
    }
    if (have_npy) rt_npy_abort(&npy);
    fp4_rt_free(a.draft);
    fp4_model_close(a.draft_m);
    fp4_rt_free(rt);
    fp4_model_close(m);
    fp4_tokenizer_free(tok);
    for (int i = 0; i < n_seq; i++)
        free(prompts[i]);
    free(prompts), free(plen);
    return rc;
}
