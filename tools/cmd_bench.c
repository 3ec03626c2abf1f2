/* cmd_bench.c — fp4lane bench: the paired measurement discipline (seed chapter §7.5). Two engine
 * configurations A and B over one model; cells alternate A B A B ...; every cell runs the same
 * fixed prefix (one prefill) and then the same teacher-forced tokens (one decode step each),
 * timed separately; warm-up pairs are discarded. Reports each side's mean and CV, the ratio B/A
 * with the min..max of the per-pair ratios, and the verdict of src/bench/bench_stats.h's rule:
 * "parity within noise" unless every pair clears the noise. --json FILE writes the receipt
 * (command, version, git commit, host, date, every cell's raw timings) that docs/CLAIMS.md cites.
 *
 * The git commit is the one of the checkout that holds the running executable, read at run time
 * with `git -C <dir of the executable> rev-parse HEAD` (plus a "dirty" flag from `git status`);
 * null when the executable is not inside a git checkout. */
#include "bench/bench_stats.h"
#include "cli.h"
#include "fp4_rng.h"
#include "io/outfile.h"
#include "rt_cli.h"
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int usage(void) {
    fprintf(stderr, "usage: fp4lane bench MODEL --a \"OPTIONS\" --b \"OPTIONS\" [--pairs N] [--prefix N] "
                    "[--tokens N] [--warmup N]\n"
                    "       [--seed S] [--seqs N] [--logits] [--order abab|abba] [--json FILE]\n"
                    "  OPTIONS: --mode exact|native --device cpu|cuda --threads N --prefill-chunk N --ctx N "
                    "--model PATH\n"
                    "           and NAME=VALUE: an environment variable set while that side's engine is "
                    "created\n"
                    "           and while its cells run (e.g. FP4LANE_CUDA_ATT_CLUSTER=0; docs/ROUTES.md)\n"
                    "  defaults: 5 pairs, a 66-token prefix, 32 teacher-forced tokens, 1 warm-up pair\n");
    return 2;
}

#define BENCH_MAX_ENV 8
typedef struct bench_side {
    const char *spec;
    char *keep;
    char *env[BENCH_MAX_ENV]; /* NAME=VALUE words of OPTIONS (pointers into keep) */
    int n_env;
    rt_cli_engine e;
    fp4_model *m;
    fp4_rt *rt;
} bench_side;

typedef struct bench_cell {
    int side, warmup;
    double t_prefill, t_decode;
} bench_cell;

typedef struct bench_cfg {
    long long pairs, prefix, tokens, warmup;
    unsigned long long seed;
    int logits; /* --logits: decode steps copy every logit to the host (else greedy steps) */
    int abba;   /* --order abba: pairs alternate A B, B A (a first-in-pair advantage cancels) */
    int seqs;   /* --seqs N: sequences decoded together in every cell (the same prefix and tokens) */
} bench_cfg;

/* the side of cell c (pair c / 2, place c % 2) */
static int cell_side(const bench_cfg *cfg, int c) {
    return cfg->abba && (c / 2) % 2 ? 1 - c % 2 : c % 2;
}

/* a NAME=VALUE word: NAME of upper-case letters, digits and '_', not starting with a digit */
static int env_word(const char *t) {
    const char *eq = strchr(t, '=');
    if (!eq || eq == t || (*t >= '0' && *t <= '9')) return 0;
    for (const char *c = t; c < eq; c++)
        if (!((*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_')) return 0;
    return 1;
}

/* splits an OPTIONS string on whitespace into engine options (as compare does) and NAME=VALUE
 * environment assignments (set while that side's engine is created and its cells run) */
static int parse_side(bench_side *s, const char *which) {
    char *buf = s->keep = strdup(s->spec), *argv[64];
    if (!buf) return -1;
    int argc = 0;
    for (char *t = strtok(buf, " \t"); t && argc < 63; t = strtok(NULL, " \t")) {
        if (!env_word(t)) {
            argv[argc++] = t;
            continue;
        }
        if (s->n_env == BENCH_MAX_ENV)
            return fprintf(stderr, "fp4lane bench: %s: more than %d NAME=VALUE words\n", which,
                           BENCH_MAX_ENV),
                   -1;
        s->env[s->n_env++] = t;
    }
    for (int i = 0; i < argc; i++) {
        int r = rt_cli_engine_opt(&s->e, argc, argv, &i);
        if (r == 0) fprintf(stderr, "fp4lane bench: %s: '%s' is not an engine option\n", which, argv[i]);
        if (r <= 0) return -1;
    }
    return 0;
}

/* a side's NAME=VALUE words put into the environment (bench_env_set) and what was there before,
 * put back by bench_env_restore (an unset name unset again), so the other side never sees them */
typedef struct bench_env_saved {
    char *old[BENCH_MAX_ENV];
    int had[BENCH_MAX_ENV];
} bench_env_saved;

static int bench_env_set(bench_side *s, bench_env_saved *sv) {
    int rc = 0;
    memset(sv, 0, sizeof *sv);
    for (int i = 0; i < s->n_env && !rc; i++) {
        char *eq = strchr(s->env[i], '=');
        *eq = 0;
        const char *prev = getenv(s->env[i]);
        sv->had[i] = prev != NULL;
        sv->old[i] = prev ? strdup(prev) : NULL;
        if ((sv->had[i] && !sv->old[i]) || setenv(s->env[i], eq + 1, 1))
            fprintf(stderr, "fp4lane bench: cannot set %s\n", s->env[i]), rc = 1;
        *eq = '=';
    }
    return rc;
}

static void bench_env_restore(bench_side *s, bench_env_saved *sv) {
    for (int i = s->n_env - 1; i >= 0; i--) {
        char *eq = strchr(s->env[i], '=');
        *eq = 0;
        if (sv->had[i] && sv->old[i]) setenv(s->env[i], sv->old[i], 1);
        else if (!sv->had[i]) unsetenv(s->env[i]);
        *eq = '=';
        free(sv->old[i]);
        sv->old[i] = NULL;
    }
}

/* opens one side's engine with its NAME=VALUE words in the environment */
static int bench_open(bench_side *s) {
    bench_env_saved sv;
    int rc = bench_env_set(s, &sv);
    if (!rc) rc = rt_cli_open(&s->e, &s->m, &s->rt);
    bench_env_restore(s, &sv);
    return rc;
}

static int parse_ll(const char *opt, const char *v, long long lo, long long hi, long long *out) {
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (!*v || *end || errno || x < lo || x > hi)
        return fprintf(stderr, "fp4lane bench: %s %s: expected an integer in [%lld, %lld]\n", opt, v, lo, hi),
               -1;
    *out = x;
    return 0;
}

/* one cell: ns fresh sequences, the prefix of each as one prefill step of all of them (or
 * --prefill-chunk pieces of each), then the teacher-forced tokens one step of ns columns each —
 * greedy steps (fp4_rt_step_greedy, what a greedy `run` decodes with: the choices are taken and
 * dropped) or, logits, steps that bring every logit to the host; the sequences are closed again.
 * lg: ns rows of vocab floats, tok: ns ids, cols: ns * max(prefix, 1) columns. */
static int run_cell(bench_side *s, int ns, const int32_t *prefix, int64_t n_prefix, const int32_t *forced,
                    int64_t n_forced, int logits, float *lg, int32_t *tok, fp4_rt_tok *cols, bench_cell *c) {
    fp4_error err;
    int32_t seq[64];
    int rc = 0, opened = 0;
    while (opened < ns && !rc) {
        if (fp4_rt_seq_open(s->rt, &seq[opened])) {
            fprintf(stderr, "fp4lane bench: cannot open sequence %d\n", opened + 1);
            rc = 1;
        } else
            opened++;
    }
    const int64_t chunk = s->e.prefill_chunk > 0 ? s->e.prefill_chunk : n_prefix;
    double t0 = rt_cli_now();
    for (int64_t i = 0; !rc && i < n_prefix; i += chunk) {
        const int64_t n = n_prefix - i < chunk ? n_prefix - i : chunk;
        for (int q = 0; q < ns; q++)
            for (int64_t j = 0; j < n; j++)
                cols[q * n + j] = (fp4_rt_tok){seq[q], prefix[i + j], i + j == n_prefix - 1};
        if (fp4_rt_step(s->rt, cols, n * ns, lg, &err)) rc = cli_report_error("bench", err.code, &err);
    }
    double t1 = rt_cli_now();
    for (int64_t i = 0; !rc && i < n_forced; i++) {
        for (int q = 0; q < ns; q++)
            cols[q] = (fp4_rt_tok){seq[q], forced[i], 1};
        if (logits ? fp4_rt_step(s->rt, cols, ns, lg, &err) : fp4_rt_step_greedy(s->rt, cols, ns, tok, &err))
            rc = cli_report_error("bench", err.code, &err);
    }
    double t2 = rt_cli_now();
    for (int q = 0; q < opened; q++)
        fp4_rt_seq_close(s->rt, seq[q]);
    c->t_prefill = t1 - t0;
    c->t_decode = t2 - t1;
    return rc;
}

/* ---- receipt helpers ---- */

/* first line of a command's stdout, trailing newline removed; "" when it fails */
static void popen_line(const char *cmd, char *out, size_t n) {
    out[0] = 0;
    FILE *p = popen(cmd, "r");
    if (!p) return;
    if (!fgets(out, (int)n, p)) out[0] = 0;
    out[strcspn(out, "\n")] = 0;
    pclose(p);
}

static void exe_dir(char *dir, size_t n) {
    ssize_t k = readlink("/proc/self/exe", dir, n - 1);
    dir[k > 0 ? k : 0] = 0;
    char *sl = strrchr(dir, '/');
    if (sl)
        *sl = 0;
    else
        snprintf(dir, n, ".");
}

/* the directory is single-quoted for the shell; a quote in it gives up */
static void git_info(char *commit, size_t n, int *dirty) {
    char dir[PATH_MAX], cmd[PATH_MAX + 128], line[256];
    exe_dir(dir, sizeof dir);
    commit[0] = 0;
    *dirty = -1;
    if (strchr(dir, '\'')) return;
    snprintf(cmd, sizeof cmd, "git -C '%s' rev-parse HEAD 2>/dev/null", dir);
    popen_line(cmd, commit, n);
    if (strlen(commit) != 40) return (void)(commit[0] = 0);
    snprintf(cmd, sizeof cmd, "git -C '%s' status --porcelain --untracked-files=no 2>/dev/null | head -n 1",
             dir);
    popen_line(cmd, line, sizeof line);
    *dirty = line[0] != 0;
}

static void cpu_model(char *out, size_t n) {
    snprintf(out, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            const char *v = strchr(line, ':') + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            snprintf(out, n, "%.*s", (int)strcspn(v, "\n"), v);
            break;
        }
    fclose(f);
}

static void loadavg(char *out, size_t n) {
    out[0] = 0;
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f) return;
    if (!fgets(out, (int)n, f)) out[0] = 0;
    out[strcspn(out, "\n")] = 0;
    fclose(f);
}

static json_t *summary_json(const fp4b_summary *s) {
    return json_pack("{s:i,s:f,s:f,s:f,s:f,s:f}", "n", s->n, "mean_tok_s", s->mean, "sd_tok_s", s->sd, "cv",
                     s->cv, "min_tok_s", s->min, "max_tok_s", s->max);
}

static json_t *result_json(const fp4b_result *r) {
    return json_pack("{s:o,s:o,s:f,s:f,s:f,s:f,s:i,s:i,s:s}", "a", summary_json(&r->a), "b",
                     summary_json(&r->b), "ratio_b_over_a", r->ratio, "pair_ratio_min", r->pair_min,
                     "pair_ratio_max", r->pair_max, "noise", r->noise, "pairs_b_higher", r->n_b_higher,
                     "pairs_a_higher", r->n_a_higher, "verdict", fp4b_verdict_text(r->verdict));
}

/* through src/io/outfile.h (a temporary name beside the path, fsynced, renamed, the directory
 * fsynced); a receipt is evidence, so an existing file at the path is refused (checked before the
 * cells run and again just before the rename) */
static int write_receipt(const char *path, const char *text) {
    fp4_outfile *o = NULL;
    fp4_error e;
    fp4_status st = fp4_outfile_open(path, &o, &e);
    if (!st) fp4_outfile_set_noreplace(o); /* the rename itself refuses a file that appeared meanwhile */
    if (!st) st = fp4_outfile_write(o, text, strlen(text), &e);
    if (!st && access(path, F_OK) == 0) {
        fp4_outfile_abort(o);
        return fprintf(stderr, "fp4lane bench: --json %s appeared during the run: not replaced\n", path), 1;
    }
    if (!st) return fp4_outfile_commit(o, &e) ? cli_report_error("bench --json", e.code, &e) : 0;
    fp4_outfile_abort(o);
    return cli_report_error("bench --json", st, &e);
}

static json_t *side_json(const bench_side *s) {
    return json_pack("{s:s,s:s,s:s,s:s,s:i,s:i,s:s}", "options", s->spec, "model", s->e.model, "device",
                     fp4_rt_device_name(s->rt), "mode", s->e.o.mode == FP4_MODE_EXACT ? "exact" : "native",
                     "threads", s->e.o.n_threads, "prefill_chunk", s->e.prefill_chunk, "routes",
                     fp4_rt_routes(s->rt));
}

static int receipt(const char *path, int argc, char **argv, const bench_cfg *cfg, bench_side *sd,
                   const bench_cell *cells, int n_cells, const fp4b_result *dec, const fp4b_result *pre,
                   const char *date, const char *load0, const char *load1) {
    char commit[64], cpu[256], gpu[256] = "";
    int dirty;
    git_info(commit, sizeof commit, &dirty);
    cpu_model(cpu, sizeof cpu);
    if (sd[0].e.o.device == FP4_DEVICE_CUDA || sd[1].e.o.device == FP4_DEVICE_CUDA)
        popen_line("nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null", gpu, sizeof gpu);
    json_t *av = json_array(), *cl = json_array();
    size_t clen = 0;
    for (int i = 0; i < argc; i++)
        json_array_append_new(av, json_string(argv[i])), clen += strlen(argv[i]) + 3;
    char *cmd = malloc(clen + 16), *p = cmd;
    if (!cmd) return json_decref(av), json_decref(cl), 1;
    p += sprintf(p, "fp4lane");
    for (int i = 0; i < argc; i++)
        p += sprintf(p, strpbrk(argv[i], " \t\"'") || !*argv[i] ? " '%s'" : " %s", argv[i]);
    for (int i = 0; i < n_cells; i++)
        json_array_append_new(cl, json_pack("{s:i,s:s,s:b,s:f,s:f,s:f,s:f}", "index", i, "side",
                                            cells[i].side ? "B" : "A", "warmup", cells[i].warmup, "prefill_s",
                                            cells[i].t_prefill, "decode_s", cells[i].t_decode,
                                            "prefill_tok_s", cfg->prefix / cells[i].t_prefill, "decode_tok_s",
                                            cfg->tokens / cells[i].t_decode));
    json_t *host =
        json_pack("{s:s,s:i,s:s,s:s}", "cpu_model", cpu, "online_cpus", (int)sysconf(_SC_NPROCESSORS_ONLN),
                  "loadavg_start", load0, "loadavg_end", load1);
    json_object_set_new(host, "gpu", gpu[0] ? json_string(gpu) : json_null());
    json_t *r = json_pack("{s:s,s:s,s:o,s:s}", "schema", "fp4lane.bench/1", "command", cmd, "argv", av,
                          "fp4lane_version", fp4_version());
    free(cmd);
    json_object_set_new(r, "git_commit", commit[0] ? json_string(commit) : json_null());
    json_object_set_new(r, "git_dirty", dirty < 0 ? json_null() : json_boolean(dirty));
    json_object_set_new(r, "date_utc", json_string(date));
    json_object_set_new(r, "host", host);
    json_object_set_new(r, "config",
                        json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:s,s:s}", "pairs", cfg->pairs, "warmup_pairs",
                                  cfg->warmup, "sequences", (json_int_t)cfg->seqs, "prefix_tokens",
                                  cfg->prefix, "forced_tokens", cfg->tokens,
                                  "seed", (json_int_t)cfg->seed, "order",
                                  cfg->abba ? "A B B A ..., warm-up pairs first and discarded"
                                            : "A B A B ..., warm-up pairs first and discarded",
                                  "decode_step",
                                  cfg->logits ? "logits to the host" : "greedy (fp4_rt_step_greedy)"));
    json_object_set_new(r, "a", side_json(&sd[0]));
    json_object_set_new(r, "b", side_json(&sd[1]));
    json_object_set_new(r, "rule", json_string(fp4b_rule_text()));
    json_object_set_new(r, "decode", result_json(dec));
    json_object_set_new(r, "prefill", result_json(pre));
    json_object_set_new(r, "verdict", json_string(fp4b_verdict_text(dec->verdict)));
    json_object_set_new(r, "cells", cl);
    char *text = json_dumps(r, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(r);
    if (!text) return fprintf(stderr, "fp4lane bench: out of memory\n"), 1;
    size_t tl = strlen(text);
    char *t2 = realloc(text, tl + 2);
    if (!t2) return free(text), 1;
    t2[tl] = '\n', t2[tl + 1] = 0;
    int rc = write_receipt(path, t2);
    free(t2);
    return rc;
}

static void print_result(const char *what, const fp4b_result *r) {
    printf("  %-7s B/A %.4f (per-pair %.4f..%.4f), noise %.2f %%: %s\n", what, r->ratio, r->pair_min,
           r->pair_max, 100 * r->noise, fp4b_verdict_text(r->verdict));
}

int cmd_bench(int argc, char **argv) {
    bench_side sd[2];
    memset(sd, 0, sizeof sd);
    rt_cli_engine_init(&sd[0].e), rt_cli_engine_init(&sd[1].e);
    sd[0].e.verb = sd[1].e.verb = "bench";
    bench_cfg cfg = {5, 66, 32, 1, 1, 0, 0, 1};
    const char *model = NULL, *json_path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long x;
        if (!strcmp(o, "--a") && v)
            sd[0].spec = v, i++;
        else if (!strcmp(o, "--b") && v)
            sd[1].spec = v, i++;
        else if (!strcmp(o, "--json") && v)
            json_path = v, i++;
        else if (!strcmp(o, "--logits"))
            cfg.logits = 1;
        else if (!strcmp(o, "--seqs") && v) {
            if (parse_ll(o, v, 1, 64, &x)) return 2;
            cfg.seqs = (int)x, i++;
        } else if (!strcmp(o, "--order") && v) {
            if (strcmp(v, "abab") && strcmp(v, "abba"))
                return fprintf(stderr, "fp4lane bench: --order %s: expected abab or abba\n", v), 2;
            cfg.abba = !strcmp(v, "abba"), i++;
        }
        else if (!strcmp(o, "--pairs") && v) {
            if (parse_ll(o, v, 1, 1000, &cfg.pairs)) return 2;
            i++;
        } else if (!strcmp(o, "--prefix") && v) {
            if (parse_ll(o, v, 1, 1 << 20, &cfg.prefix)) return 2;
            i++;
        } else if (!strcmp(o, "--tokens") && v) {
            if (parse_ll(o, v, 1, 1 << 20, &cfg.tokens)) return 2;
            i++;
        } else if (!strcmp(o, "--warmup") && v) {
            if (parse_ll(o, v, 0, 100, &cfg.warmup)) return 2;
            i++;
        } else if (!strcmp(o, "--seed") && v) {
            if (parse_ll(o, v, 0, LLONG_MAX, &x)) return 2;
            cfg.seed = (unsigned long long)x, i++;
        } else if (o[0] != '-' && !model)
            model = o;
        else
            return fprintf(stderr, "fp4lane bench: unknown or incomplete option '%s'\n", o), usage();
    }
    if (!model || !sd[0].spec || !sd[1].spec) return usage();
    if (json_path && access(json_path, F_OK) == 0)
        return fprintf(stderr, "fp4lane bench: --json %s exists: the receipt never replaces a file\n",
                       json_path),
               1;
    if (json_path) {
        fp4_error e;
        if (fp4_out_preflight(NULL, json_path, 0, 0, &e)) return cli_report_error("bench --json", e.code, &e);
    }
    int rc = 0;
    for (int k = 0; k < 2 && !rc; k++)
        rc = parse_side(&sd[k], k ? "--b" : "--a") ? 2 : 0;
    for (int k = 0; k < 2; k++) {
        if (!sd[k].e.model) sd[k].e.model = model;
        sd[k].e.o.max_seqs = cfg.seqs;
    }
    for (int k = 0; k < 2 && !rc; k++)
        rc = bench_open(&sd[k]);
    const int64_t n_tok = cfg.prefix + cfg.tokens;
    int64_t V = 0;
    for (int k = 0; k < 2 && !rc; k++) {
        const int64_t v = fp4_rt_vocab(sd[k].rt);
        V = k == 0 || v < V ? v : V;
        if (n_tok > fp4_rt_n_ctx(sd[k].rt))
            fprintf(stderr,
                    "fp4lane bench: --prefix %lld + --tokens %lld is past the context length %lld of %s "
                    "(--ctx)\n",
                    cfg.prefix, cfg.tokens, (long long)fp4_rt_n_ctx(sd[k].rt), k ? "B" : "A"),
                rc = 2;
    }
    const int n_cells = (int)(2 * (cfg.pairs + cfg.warmup));
    int32_t *ids = rc ? NULL : malloc(sizeof *ids * (size_t)n_tok);
    float *lg = rc ? NULL : malloc(sizeof(float) * (size_t)V * (size_t)cfg.seqs);
    int32_t *tok = rc ? NULL : malloc(sizeof *tok * (size_t)cfg.seqs);
    fp4_rt_tok *cols = rc ? NULL : malloc(sizeof *cols * (size_t)cfg.prefix * (size_t)cfg.seqs);
    bench_cell *cells = rc ? NULL : calloc((size_t)n_cells, sizeof *cells);
    if (!rc && (!ids || !lg || !tok || !cols || !cells))
        fprintf(stderr, "fp4lane bench: out of memory\n"), rc = 1;
    char date[32], load0[128], load1[128];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    loadavg(load0, sizeof load0);
    if (!rc) {
        /* the fixed prefix and the teacher-forced tokens: seeded ids in [0, vocab) of both sides */
        uint64_t st = cfg.seed;
        for (int64_t i = 0; i < n_tok; i++)
            ids[i] = (int32_t)(fp4_splitmix64(&st) % (uint64_t)V);
        printf("bench: %s, %lld pairs (%s) after %lld warm-up pair%s, prefix %lld tokens, %lld "
               "teacher-forced tokens, %d sequence%s a cell\n",
               model, cfg.pairs, cfg.abba ? "A B B A ..." : "A B A B ...", cfg.warmup,
               cfg.warmup == 1 ? "" : "s", cfg.prefix, cfg.tokens, cfg.seqs, cfg.seqs == 1 ? "" : "s");
        for (int k = 0; k < 2; k++)
            printf("  %c: %s  [device %s, routes %s]\n", 'A' + k, sd[k].spec, fp4_rt_device_name(sd[k].rt),
                   fp4_rt_routes(sd[k].rt));
        fflush(stdout);
    }
    for (int c = 0; !rc && c < n_cells; c++) {
        const int k = cell_side(&cfg, c);
        cells[c].side = k;
        cells[c].warmup = c < 2 * cfg.warmup;
        bench_env_saved sv; /* the side's words again while its cell runs (knobs read at each call) */
        rc = bench_env_set(&sd[k], &sv);
        if (!rc)
            rc = run_cell(&sd[k], cfg.seqs, ids, cfg.prefix, ids + cfg.prefix, cfg.tokens, cfg.logits, lg,
                          tok, cols, &cells[c]);
        bench_env_restore(&sd[k], &sv);
        cli_progress("bench cells", c + 1, n_cells);
    }
    cli_progress("", 0, 0);
    loadavg(load1, sizeof load1);
    if (!rc) {
        const int np = (int)cfg.pairs;
        double *v = malloc(sizeof(double) * 4 * (size_t)np);
        fp4b_result dec, pre;
        if (!v) rc = 1;
        for (int i = 0; !rc && i < np; i++) {
            const bench_cell *a = &cells[2 * (cfg.warmup + i)], *b = a + 1;
            if (a->side) a = b, b = a - 1; /* a B A pair (--order abba) */
            const double ns = cfg.seqs; /* tok/s over every sequence of the cell */
            v[i] = ns * cfg.tokens / a->t_decode, v[np + i] = ns * cfg.tokens / b->t_decode;
            v[2 * np + i] = ns * cfg.prefix / a->t_prefill, v[3 * np + i] = ns * cfg.prefix / b->t_prefill;
        }
        if (!rc && (fp4b_compare(v, v + np, np, &dec) || fp4b_compare(v + 2 * np, v + 3 * np, np, &pre)))
            fprintf(stderr, "fp4lane bench: a cell took no measurable time (timer resolution)\n"), rc = 1;
        free(v);
        if (!rc) {
            printf("  %-7s A %.3f tok/s (CV %.2f %%), B %.3f tok/s (CV %.2f %%)\n", "decode", dec.a.mean,
                   100 * dec.a.cv, dec.b.mean, 100 * dec.b.cv);
            printf("  %-7s A %.3f tok/s (CV %.2f %%), B %.3f tok/s (CV %.2f %%)\n", "prefill", pre.a.mean,
                   100 * pre.a.cv, pre.b.mean, 100 * pre.b.cv);
            print_result("decode", &dec);
            print_result("prefill", &pre);
            printf("verdict (decode): %s\n", fp4b_verdict_text(dec.verdict));
            if (json_path)
                rc = receipt(json_path, argc, argv, &cfg, sd, cells, n_cells, &dec, &pre, date, load0, load1);
        }
    }
    free(ids), free(lg), free(tok), free(cols), free(cells);
    for (int k = 0; k < 2; k++)
        fp4_rt_free(sd[k].rt), fp4_model_close(sd[k].m), free(sd[k].keep);
    return rc;
}
