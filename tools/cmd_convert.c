/* cmd_convert.c — `fp4lane quantize` and `fp4lane convert`: shared option parsing, a progress bar
 * on a TTY, errors on stderr naming the file, the tensor and the rule. */
#include "cli.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_META 32

typedef struct conv_args {
    const char *in, *out;
    fp4_layout layout;
    int have_layout, to_q4_k, no_fusion, quant_emb, json, force;
    fp4_scale2_rule rule;
    uint64_t shard;
    const char *meta[2 * MAX_META + 2];
    int n_meta;
    char meta_buf[MAX_META][512];
} conv_args;

static void progress(void *ctx, const char *what, uint64_t done, uint64_t total) {
    (void)ctx;
    cli_progress(what, (int64_t)done, done >= total ? 0 : (int64_t)total);
}

/* Names and messages come from files: printed escaped (cli_out.c). */
int cli_report_error(const char *verb, fp4_status st, const fp4_error *e) {
    fprintf(stderr, "fp4lane %s: %s", verb, fp4_status_str(st));
    static const char *const label[4] = {"\n  file:   ", "\n  tensor: ", "\n  rule:   ", "\n  "};
    const char *field[4] = {e->file, e->tensor, e->rule, e->msg};
    for (int i = 0; i < 4; i++)
        if (field[i][0]) {
            fputs(label[i], stderr);
            cli_put_escaped(stderr, field[i]);
        }
    fprintf(stderr, "\n");
    return 1;
}

static int ends_with(const char *s, const char *x) {
    size_t a = strlen(s), b = strlen(x);
    return a >= b && !strcmp(s + a - b, x);
}

static int parse(int argc, char **argv, int quantize, conv_args *a) {
    memset(a, 0, sizeof *a);
    int pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(s, "--layout") && v) {
            if (fp4_layout_from_name(v, &a->layout) || a->layout == FP4_LAYOUT_NONE)
                return fprintf(stderr, "fp4lane: unknown layout '%s'\n", v), 2;
            a->have_layout = 1, i++;
        } else if (quantize && !strcmp(s, "--to") && v) {
            if (!strcmp(v, "q4_k")) a->to_q4_k = 1;
            else if (strcmp(v, "nvfp4")) return fprintf(stderr, "fp4lane: --to nvfp4|q4_k\n"), 2;
            i++;
        } else if (quantize && !strcmp(s, "--scale2-rule") && v) {
            if (!strcmp(v, "cpu")) a->rule = FP4_SCALE2_CPU;
            else if (strcmp(v, "gpu")) return fprintf(stderr, "fp4lane: --scale2-rule gpu|cpu\n"), 2;
            i++;
        } else if (!strcmp(s, "--force")) {
            a->force = 1;
        } else if (quantize && !strcmp(s, "--no-fusion")) {
            a->no_fusion = 1;
        } else if (quantize && !strcmp(s, "--quantize-embeddings")) {
            a->quant_emb = 1;
        } else if (!strcmp(s, "--shard-size") && v) {
            char *end;
            a->shard = strtoull(v, &end, 10);
            if (*end == 'M') a->shard <<= 20;
            else if (*end == 'G') a->shard <<= 30;
            else if (*end) return fprintf(stderr, "fp4lane: --shard-size BYTES[M|G]\n"), 2;
            i++;
        } else if (!strcmp(s, "--metadata") && v) {
            const char *eq = strchr(v, '=');
            if (!eq || a->n_meta == MAX_META || strlen(v) >= 512)
                return fprintf(stderr, "fp4lane: --metadata KEY=VALUE\n"), 2;
            snprintf(a->meta_buf[a->n_meta], 512, "%s", v);
            a->meta_buf[a->n_meta][eq - v] = 0;
            a->meta[2 * a->n_meta] = a->meta_buf[a->n_meta];
            a->meta[2 * a->n_meta + 1] = a->meta_buf[a->n_meta] + (eq - v) + 1;
            a->n_meta++, i++;
        } else if (s[0] == '-' && s[1]) {
            return fprintf(stderr, "fp4lane: unknown option '%s'\n", s), 2;
        } else if (pos == 0) {
            a->in = s, pos++;
        } else if (pos == 1) {
            a->out = s, pos++;
        } else {
            return fprintf(stderr, "fp4lane: too many arguments\n"), 2;
        }
    }
    if (!a->in || !a->out) return 2;
    if (!a->have_layout) { /* a .gguf name means llama.cpp's own layout (README, "The CLI") */
        if (!quantize && !ends_with(a->out, ".gguf"))
            return fprintf(stderr, "fp4lane convert: --layout is required\n"), 2;
        a->layout = ends_with(a->out, ".gguf") ? FP4_LAYOUT_GGUF_GGML : FP4_LAYOUT_MODELOPT;
    }
    if (a->to_q4_k && a->layout != FP4_LAYOUT_GGUF && a->layout != FP4_LAYOUT_GGUF_GGML)
        return fprintf(stderr, "fp4lane quantize: --to q4_k writes GGUF only\n"), 2;
    return 0;
}

/* SIGINT, SIGTERM, SIGHUP during a write: the library sees the flag between chunks, removes its
 * temporary files and returns; the signal is then raised again with its default action, so the
 * exit status says what stopped the run. */
static volatile sig_atomic_t stop_signal;
static void on_signal(int sig) { stop_signal = sig; }
static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP};

static void catch_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof stop_signals / sizeof stop_signals[0]; i++)
        sigaction(stop_signals[i], &sa, NULL);
}

static int finish_signals(const char *verb, fp4_status st) {
    int sig = stop_signal;
    fprintf(stderr, "fp4lane %s: stopped by signal %d; %s\n", verb, sig,
            st ? "the output path was left as it was before the run" : "the output had been completed");
    fflush(stderr);
    signal(sig, SIG_DFL);
    raise(sig);
    return 128 + sig;
}

int cmd_quantize(int argc, char **argv) {
    conv_args a;
    int rc = parse(argc, argv, 1, &a);
    if (rc) {
        return cli_usage("quantize");
    }
    fp4_quantize_opts o = {
        a.layout, a.to_q4_k, a.rule, a.no_fusion, a.quant_emb, a.shard, a.n_meta ? a.meta : NULL,
        progress, NULL, a.force, (const volatile int *)&stop_signal};
    fp4_error e;
    catch_signals();
    fp4_status st = fp4_quantize_checkpoint(a.in, a.out, &o, &e);
    cli_progress("", 0, 0);
    if (stop_signal) return finish_signals("quantize", st);
    if (st) return cli_report_error("quantize", st, &e);
    printf("quantized %s -> %s (%s, %s)\n", a.in, a.out, a.to_q4_k ? "q4_k" : "nvfp4",
           fp4_layout_name(a.layout));
    return 0;
}

int cmd_convert(int argc, char **argv) {
    conv_args a;
    int rc = parse(argc, argv, 0, &a);
    if (rc) {
        return cli_usage("convert");
    }
    fp4_model *m = NULL;
    fp4_error e;
    fp4_status st = fp4_model_open(a.in, NULL, &m, &e);
    if (st) return cli_report_error("convert", st, &e);
    fp4_write_opts o = {a.layout, a.shard, a.n_meta ? a.meta : NULL, progress, NULL, a.force,
                        (const volatile int *)&stop_signal};
    catch_signals();
    st = fp4_model_write(m, a.out, &o, &e);
    cli_progress("", 0, 0);
    fp4_layout from = fp4_model_layout(m);
    fp4_model_close(m);
    if (stop_signal) return finish_signals("convert", st);
    if (st) return cli_report_error("convert", st, &e);
    printf("converted %s (%s) -> %s (%s)\n", a.in, fp4_layout_name(from), a.out, fp4_layout_name(a.layout));
    return 0;
}
