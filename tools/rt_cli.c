/* rt_cli.c — see rt_cli.h. */
#include "rt_cli.h"
#include "cli.h"
#include "io/outfile.h"
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define RT_CLI_MAX_IDS (1 << 24)
#define RT_CLI_IDS_FILE_MAX (256u << 20) /* bytes of a --prompt-ids @FILE */

double rt_cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void rt_cli_engine_init(rt_cli_engine *e) {
    memset(e, 0, sizeof *e);
    e->o.mode = FP4_MODE_EXACT;
    e->o.device = FP4_DEVICE_CPU;
    e->o.n_threads = 1;
    e->o.max_seqs = 1;
    e->prefill_chunk = 0;
    e->draft_n = 4;
    e->verb = "run";
}

int rt_cli_arg(const char *name, const char *opt, const char *text, fp4_arg_val *v) {
    fp4_error err;
    if (!fp4_arg_parse(name, opt, text, v, &err)) return 0;
    fprintf(stderr, "fp4lane: %s\n", err.msg);
    return -1;
}

/* Sampling options: the library's argument table (fp4_arg_parse, shared by run and chat and the
 * Python binding) names the range; this one where the value goes in fp4_sampler_params. */
#define SP_AT(f) offsetof(fp4_sampler_params, f)
static const struct {
    const char *opt, *name;
    size_t at;
    char kind; /* 'f' float, 'i' int32_t, 'u' uint64_t */
} sampling_opts[] = {
    {"--temp", "temperature", SP_AT(temperature), 'f'},
    {"--top-p", "top_p", SP_AT(top_p), 'f'},
    {"--min-p", "min_p", SP_AT(min_p), 'f'},
    {"--repeat-penalty", "repeat_penalty", SP_AT(repeat_penalty), 'f'},
    {"--presence-penalty", "presence_penalty", SP_AT(presence_penalty), 'f'},
    {"--top-k", "top_k", SP_AT(top_k), 'i'},
    {"--penalty-last-n", "penalty_last_n", SP_AT(penalty_last_n), 'i'},
    {"--seed", "seed", SP_AT(seed), 'u'},
};

int rt_cli_sampling_opt(const char *o, const char *v, fp4_sampler_params *sp) {
    for (size_t k = 0; k < sizeof sampling_opts / sizeof sampling_opts[0]; k++) {
        if (strcmp(o, sampling_opts[k].opt)) continue;
        fp4_arg_val x;
        if (rt_cli_arg(sampling_opts[k].name, o, v, &x)) return -1;
        const float f = (float)x.f;
        const int32_t i = (int32_t)x.i;
        char *dst = (char *)sp + sampling_opts[k].at;
        if (sampling_opts[k].kind == 'f') memcpy(dst, &f, sizeof f);
        else if (sampling_opts[k].kind == 'i') memcpy(dst, &i, sizeof i);
        else memcpy(dst, &x.u, sizeof x.u);
        return 1;
    }
    return 0;
}

int rt_cli_engine_opt(rt_cli_engine *e, int argc, char **argv, int *i) {
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    fp4_arg_val x;
    if (!strcmp(a, "--mode")) {
        if (v && !strcmp(v, "exact"))
            e->o.mode = FP4_MODE_EXACT;
        else if (v && !strcmp(v, "native"))
            e->o.mode = FP4_MODE_NATIVE;
        else
            return fprintf(stderr, "fp4lane: --mode %s: expected exact or native\n", v ? v : "(missing)"), -1;
    } else if (!strcmp(a, "--device")) {
        if (v && !strcmp(v, "cpu"))
            e->o.device = FP4_DEVICE_CPU;
        else if (v && !strcmp(v, "cuda"))
            e->o.device = FP4_DEVICE_CUDA;
        else
            return fprintf(stderr, "fp4lane: --device %s: expected cpu or cuda\n", v ? v : "(missing)"), -1;
    } else if (!strcmp(a, "--threads")) {
        if (rt_cli_arg("threads", a, v, &x)) return -1;
        e->o.n_threads = (int)x.i;
    } else if (!strcmp(a, "--tp")) {
        if (rt_cli_arg("tp", a, v, &x)) return -1;
        e->o.tp = (int)x.i;
    } else if (!strcmp(a, "--prefill-chunk")) {
        if (rt_cli_arg("prefill_chunk", a, v, &x)) return -1;
        e->prefill_chunk = (int)x.i;
    } else if (!strcmp(a, "--ctx")) {
        if (rt_cli_arg("ctx", a, v, &x)) return -1;
        e->o.n_ctx = x.i;
    } else if (!strcmp(a, "--draft") || !strcmp(a, "--draft-n")) {
        if (!e->allow_draft)
            return fprintf(stderr, "fp4lane: %s: speculative drafting is an option of `fp4lane run`\n", a),
                   -1;
        if (a[7]) {
            if (rt_cli_arg("draft_n", a, v, &x)) return -1;
            e->draft_n = (int)x.i;
            e->draft_n_given = 1;
        } else {
            if (!v) return fprintf(stderr, "fp4lane: --draft needs a model\n"), -1;
            e->draft = v;
            e->o.drafting = 1;
        }
    } else if (!strcmp(a, "--cuda-lib")) {
        if (!v) return fprintf(stderr, "fp4lane: --cuda-lib needs a path\n"), -1;
        e->o.cuda_lib = v;
    } else if (!strcmp(a, "--model")) {
        if (!v) return fprintf(stderr, "fp4lane: --model needs a path\n"), -1;
        e->model = v;
    } else
        return 0;
    (*i)++;
    return 1;
}

int rt_cli_parse_ids_text(const char *text, const char *where, int32_t **ids, int64_t *n) {
    int64_t cap = 64, k = 0;
    int32_t *v = malloc(sizeof *v * (size_t)cap);
    if (!v) return -1;
    const char *p = text;
    for (;;) {
        while (*p == ',' || *p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
            p++;
        if (!*p) break;
        /* one id: the library's "token" argument (the Python binding's ids are checked alike); a
         * piece too long for any id is cut and marked, so it stays refused */
        const size_t len = strcspn(p, ", \t\n\r");
        char piece[32];
        fp4_arg_val x;
        fp4_error err;
        if (len < sizeof piece)
            memcpy(piece, p, len), piece[len] = 0;
        else
            memcpy(piece, p, sizeof piece - 4), memcpy(piece + sizeof piece - 4, "...", 4);
        if (fp4_arg_parse("token", "token id", piece, &x, &err)) {
            /* the message holds bytes of a file: escaped (cli_out.c), never raw to the terminal */
            char esc[4 * sizeof err.msg];
            fprintf(stderr, "fp4lane: %s: %s\n", where, cli_escaped(err.msg, esc, sizeof esc));
            free(v);
            return -1;
        }
        const char *end = p + len;
        if (k == RT_CLI_MAX_IDS) {
            fprintf(stderr, "fp4lane: %s: more than %d token ids\n", where, RT_CLI_MAX_IDS);
            free(v);
            return -1;
        }
        if (k == cap) {
            int32_t *nv = realloc(v, sizeof *v * (size_t)(cap *= 2));
            if (!nv) return free(v), -1;
            v = nv;
        }
        v[k++] = (int32_t)x.i;
        p = end;
    }
    *ids = v;
    *n = k;
    return 0;
}

int rt_cli_parse_ids(const char *arg, int32_t **ids, int64_t *n) {
    if (arg[0] != '@') return rt_cli_parse_ids_text(arg, "--prompt-ids", ids, n);
    FILE *f = fopen(arg + 1, "rb");
    if (!f) return fprintf(stderr, "fp4lane: --prompt-ids %s: %s\n", arg, strerror(errno)), -1;
    struct stat sb;
    if (!fstat(fileno(f), &sb) && S_ISDIR(sb.st_mode))
        return fclose(f), fprintf(stderr, "fp4lane: --prompt-ids %s: a directory, not a file of token ids\n",
                                  arg), -1;
    /* the whole file, or a refusal: never a silent cut (a read error, past the cap, a NUL byte) */
    size_t cap = 1 << 16, len = 0, r;
    char *buf = malloc(cap);
    const char *why = buf ? NULL : "out of memory";
    while (!why && (r = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += r;
        if (len > RT_CLI_IDS_FILE_MAX) why = "larger than 256 MiB";
        if (why || len + 1 < cap) continue;
        char *nb = realloc(buf, cap *= 2);
        if (nb) buf = nb;
        else why = "out of memory";
    }
    if (!why && ferror(f)) why = strerror(errno);
    fclose(f);
    const char *nul = buf && !why ? memchr(buf, 0, len) : NULL;
    if (why || nul) {
        if (nul)
            fprintf(stderr, "fp4lane: --prompt-ids %s: byte %zu is NUL: not a list of token ids\n", arg,
                    (size_t)(nul - buf));
        else
            fprintf(stderr, "fp4lane: --prompt-ids %s: %s\n", arg, why);
        free(buf);
        return -1;
    }
    buf[len] = 0;
    int rc = rt_cli_parse_ids_text(buf, arg, ids, n);
    free(buf);
    return rc;
}

/* a device backend's memory plan, before it uploads anything (stderr: stdout carries tokens) */
static void print_plan(const fp4_rt_mem_plan *p, void *user) {
    (void)user;
    const double g = 1024.0 * 1024.0 * 1024.0;
    fprintf(stderr,
            "fp4lane: memory plan on %s: weights %.3f GiB + KV cache %.3f GiB + scratch %.3f GiB = %.3f GiB "
            "(%.3f GiB available)\n",
            p->device, p->weights_bytes / g, p->kv_bytes / g, p->scratch_bytes / g, p->total_bytes / g,
            p->available_bytes / g);
}

/* the load options of an engine: on cuda the upload repacks llama.cpp's type-40 blocks on the device,
 * so the host keeps the file's mapping only (FP4_LOAD_DEFER_REPACK); the CPU reads canonical rows */
static fp4_load_opts load_opts(const rt_cli_engine *e) {
    fp4_load_opts lo = {0};
    if (e->o.device == FP4_DEVICE_CUDA) lo.flags = FP4_LOAD_DEFER_REPACK;
    return lo;
}

int rt_cli_open(const rt_cli_engine *e, fp4_model **m, fp4_rt **rt) {
    fp4_error err;
    *m = NULL;
    *rt = NULL;
    const fp4_load_opts lo = load_opts(e);
    fp4_status st = fp4_model_open(e->model, &lo, m, &err);
    if (st) return cli_report_error(e->verb, st, &err);
    fp4_rt_opts o = e->o;
    if (!o.on_plan) o.on_plan = print_plan;
    st = fp4_rt_create(*m, &o, rt, &err);
    if (st) {
        fp4_model_close(*m);
        *m = NULL;
        return cli_report_error(e->verb, st, &err);
    }
    return 0;
}

int rt_cli_open_draft(const rt_cli_engine *e, const fp4_rt *target, fp4_model **m, fp4_rt **rt) {
    fp4_error err;
    *m = NULL;
    *rt = NULL;
    const fp4_load_opts lo = load_opts(e);
    fp4_status st = fp4_model_open(e->draft, &lo, m, &err);
    if (st) return cli_report_error("run --draft", st, &err);
    fp4_rt_opts o = e->o;
    o.drafting = 0, o.max_seqs = 1, o.n_ctx = fp4_rt_n_ctx(target);
    if (!o.on_plan) o.on_plan = print_plan;
    st = fp4_rt_create(*m, &o, rt, &err);
    if (st == FP4_ERR_LIMIT && !strcmp(err.rule, "rt.context")) { /* a draft with a shorter context */
        o.n_ctx = 0;
        st = fp4_rt_create(*m, &o, rt, &err);
    }
    if (!st && fp4_rt_vocab(*rt) != fp4_rt_vocab(target)) {
        fprintf(stderr,
                "fp4lane run: refused: the draft model %s has a vocabulary of %lld tokens, the target %s "
                "one of %lld: a draft must share the target's tokenizer\n",
                e->draft, (long long)fp4_rt_vocab(*rt), e->model, (long long)fp4_rt_vocab(target));
        fp4_rt_free(*rt);
        fp4_model_close(*m);
        *rt = NULL, *m = NULL;
        return 1;
    }
    if (st) {
        fp4_model_close(*m);
        *m = NULL;
        return cli_report_error("run --draft", st, &err);
    }
    return 0;
}

/* ---- .npy: magic, version 1.0, header length, header padded with spaces to a multiple of 64 ---- */
#define NPY_HEADER 128

static void npy_header(uint8_t *h, int64_t rows, int64_t cols) {
    memset(h, ' ', NPY_HEADER);
    memcpy(h, "\x93NUMPY\x01\x00", 8);
    h[8] = (uint8_t)(NPY_HEADER - 10), h[9] = 0;
    char d[NPY_HEADER];
    int n = snprintf(d, sizeof d, "{'descr': '<f4', 'fortran_order': False, 'shape': (%lld, %lld), }",
                     (long long)rows, (long long)cols);
    memcpy(h + 10, d, (size_t)n);
    h[NPY_HEADER - 1] = '\n';
}

static int npy_fail(rt_npy *w, fp4_status st, const fp4_error *e) {
    rt_npy_abort(w);
    cli_report_error("run --logits-out", st, e);
    return -1;
}

int rt_npy_open(rt_npy *w, const char *path, int64_t cols, int noreplace) {
    memset(w, 0, sizeof *w);
    w->cols = cols;
    fp4_error e;
    uint8_t h[NPY_HEADER];
    npy_header(h, 0, cols);
    fp4_status st = fp4_outfile_open(path, &w->o, &e);
    if (!st && noreplace) fp4_outfile_set_noreplace(w->o); /* a file that appears meanwhile stays */
    if (!st) st = fp4_outfile_write(w->o, h, NPY_HEADER, &e);
    return st ? npy_fail(w, st, &e) : 0;
}

int rt_npy_row(rt_npy *w, const float *row) {
    uint8_t b[4096];
    int64_t k = 0;
    fp4_error e;
    while (k < w->cols) {
        int64_t n = w->cols - k < 1024 ? w->cols - k : 1024;
        for (int64_t i = 0; i < n; i++) fp4_wr_lef32(b + 4 * i, row[k + i]);
        fp4_status st = fp4_outfile_write(w->o, b, (size_t)n * 4, &e);
        if (st) return npy_fail(w, st, &e);
        k += n;
    }
    w->rows++;
    return 0;
}

void rt_npy_abort(rt_npy *w) {
    fp4_outfile_abort(w->o); /* removes the temporary name; the path was never touched */
    w->o = NULL;
}

int rt_npy_finish(rt_npy *w) {
    uint8_t h[NPY_HEADER];
    npy_header(h, w->rows, w->cols);
    fp4_error e;
    fp4_status st = fp4_outfile_write_at(w->o, 0, h, NPY_HEADER, &e);
    if (st) return npy_fail(w, st, &e);
    st = fp4_outfile_commit(w->o, &e); /* frees it, whatever the result */
    w->o = NULL;
    if (st) cli_report_error("run --logits-out", st, &e);
    return st ? -1 : 0;
}
