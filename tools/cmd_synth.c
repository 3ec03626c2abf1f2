/* cmd_synth.c — `fp4lane synth OUT --shape S [--arch A] [--seed N]`: a random-weight bf16 HF
 * checkpoint of a real model's shape (fp4lane_synth.h), with a progress bar (phase, ETA) on a TTY. */
#include "cli.h"
#include "fp4lane_synth.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct synth_bar {
    double t0, last;
} synth_bar;

static void bar(void *ctx, const char *what, uint64_t done, uint64_t total) {
    synth_bar *b = ctx;
    double t = now_s();
    if (!cli_isatty_stderr() || (t - b->last < 0.2 && done < total)) return;
    b->last = t;
    int pct = total ? (int)(done * 100 / total) : 100, n = pct / 4;
    double el = t - b->t0, eta = done ? el * (double)(total - done) / (double)done : 0.0;
    fprintf(stderr, "\r\033[K%-40.40s [%.*s%*s] %3d%% %6.2f/%.2f GB  ETA %dm%02ds", what, n,
            "#########################", 25 - n, "", pct, done / 1e9, total / 1e9, (int)eta / 60,
            (int)eta % 60);
    if (done >= total) fprintf(stderr, "\r\033[K");
    fflush(stderr);
}

static int usage(void) { return cli_usage("synth"); }

int cmd_synth(int argc, char **argv) {
    fp4_synth_opts o = {.seed = 1, .max_shard_bytes = 4ull << 30};
    const char *out = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!strcmp(s, "--shape") && v) o.shape = v, i++;
        else if (!strcmp(s, "--arch") && v) o.arch = v, i++;
        else if (!strcmp(s, "--seed") && v) {
            errno = 0; /* strtoull would wrap "-1" and saturate what is past 2^64-1: both refused */
            o.seed = strtoull(v, &end, 0), i++;
            if (*end || !*v || errno || *v < '0' || *v > '9')
                return fprintf(stderr, "fp4lane synth: --seed %s: expected an integer in [0, %llu]\n", v,
                               (unsigned long long)UINT64_MAX), 2;
        } else if (!strcmp(s, "--threads") && v) {
            o.n_threads = (int)strtol(v, &end, 10), i++;
            if (*end || o.n_threads < 0 || o.n_threads > 256)
                return fprintf(stderr, "fp4lane synth: --threads 0..256\n"), 2;
        } else if (!strcmp(s, "--shard-size") && v) {
            if (cli_parse_size(v, &o.max_shard_bytes))
                return fprintf(stderr, "fp4lane synth: --shard-size N[K|M|G] (0: one file): '%s'\n", v), 2;
            i++;
        } else if (!strcmp(s, "--to") && v) {
            if (strcmp(v, "nvfp4") && strcmp(v, "bf16"))
                return fprintf(stderr, "fp4lane synth: --to bf16|nvfp4: '%s'\n", v), 2;
            o.to_nvfp4 = !strcmp(v, "nvfp4"), i++;
        } else if (!strcmp(s, "--layers") && v) {
            const long long n = strtoll(v, &end, 10);
            if (*end || !*v || n < 1 || n > 4096)
                return fprintf(stderr, "fp4lane synth: --layers N (1 .. the shape's): '%s'\n", v), 2;
            o.n_layers = n, i++;
        } else if (!strcmp(s, "--json")) json = 1;
        else if (s[0] == '-' && s[1])
            return fprintf(stderr, "fp4lane synth: unknown option '%s'\n", s), usage();
        else if (!out) out = s;
        else return fprintf(stderr, "fp4lane synth: too many arguments\n"), usage();
    }
    if (!out || !o.shape) return usage();
    if (!cli_output_path_ok("synth", out)) return 2;
    fp4_error e;
    uint64_t bytes = 0;
    fp4_status st = fp4_synth_data_bytes(&o, &bytes, &e);
    if (st) return cli_report_error("synth", st, &e), 2;
    synth_bar b = {now_s(), 0.0};
    o.progress = bar, o.progress_ctx = &b;
    st = fp4_synth_checkpoint(out, &o, &e);
    if (st) return cli_report_error("synth", st, &e);
    double dt = now_s() - b.t0;
    const char *arch = o.arch ? o.arch : fp4_synth_shape_arch(o.shape);
    if (json) {
        printf("{\"out\":\"");
        for (const char *c = out; *c; c++) /* JSON string escapes */
            if (*c == '"' || *c == '\\') printf("\\%c", *c);
            else if ((unsigned char)*c < 0x20) printf("\\u%04x", *c);
            else putchar(*c);
        printf("\",\"shape\":\"%s\",\"arch\":\"%s\",\"to\":\"%s\",\"seed\":%llu,\"bytes\":%llu,"
               "\"seconds\":%.3f}\n",
               o.shape, arch, o.to_nvfp4 ? "nvfp4" : "bf16", (unsigned long long)o.seed,
               (unsigned long long)bytes, dt);
    } else
        printf("synthesized %s: shape %s, arch %s, seed %llu, %.3f GB of bf16%s in %.1f s (%.0f MB/s)\n", out,
               o.shape, arch, (unsigned long long)o.seed, bytes / 1e9,
               o.to_nvfp4 ? " made and quantized to NVFP4 (modelopt)" : "", dt,
               dt > 0 ? bytes / 1e6 / dt : 0.0);
    return 0;
}
