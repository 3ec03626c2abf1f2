/* bench_llama_cpu.c — CPU decode tok/s of fp4lane beside llama.cpp's CPU build on the same GGUF
 * (issue 10, item 6): `make bench-llama-cpu` (results in bench/cpu.md). A benchmark, not a test.
 *
 * The model: `fp4lane synth --shape llama-160m` (JackFram/llama-160m's shape, 162 M parameters,
 * random bf16 weights), made into two GGUFs that both engines run:
 *   q4_k_m.gguf  llama.cpp's own Q4_K_M: `fp4lane convert --layout gguf-ggml` to BF16, the
 *                fp4lane.* keys dropped (tests/gguf_strip.c), llama_model_quantize (libllama);
 *   nvfp4.gguf   `fp4lane quantize --layout gguf-ggml`: NVFP4 as llama.cpp's type 40, BF16
 *                token_embd/output.
 * llama.cpp: libllama from the pinned npm package (@node-llama-cpp/linux-x64 3.22.1) through dlopen
 * (tests/llama_oracle.c), the best libggml-cpu-<variant>.so for this CPU, llama_decode one token
 * at a time. fp4lane: the runtime (fp4_rt) on the CPU, fp4_rt_step one token at a time.
 *
 * The discipline of `fp4lane bench` (src/bench/bench_stats.h): for each (file, fp4lane mode,
 * threads) cells of A = llama.cpp and B = fp4lane alternate A B A B ...; every cell starts an empty
 * sequence, decodes the same fixed prefix one token at a time (untimed), then the same
 * teacher-forced tokens one token at a time (timed: tokens / seconds); the warm-up pairs are
 * discarded. Reported: each side's mean tok/s and CV, the ratio B/A with the min..max of the pair
 * ratios, and the verdict in the chapter's words ("parity within noise" unless every pair clears
 * the noise). Before timing, both engines decode the same tokens once and their last logits are
 * compared (the sanity line: they run the same model).
 *
 * --prefill: the cells time the prefix instead, as ONE step (fp4_rt_step of all its columns; one
 * llama_decode of a batch of the whole prefix, logits of the last position): prompt tok/s.
 *
 * usage: bench_llama_cpu FP4LANE_BIN WORKDIR [--pairs N] [--warmup N] [--prefix N] [--tokens N]
 *        [--threads LIST] [--lanes q4_k_m,nvfp4] [--prefill] [--shape S]
 * --shape: another synth shape (default llama-160m), e.g. the mixtures of experts tiny-moe16 and
 * small-moe with --lanes q4_k_m (NVFP4 experts have no llama.cpp 3-D form: gguf-ggml refuses them). */
#include "bench/bench_stats.h"
#include "fp4_rng.h"
#include "fp4lane.h"
#include "fp4lane_runtime.h"
#include "gguf_strip.h"
#include "llama_oracle.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

enum { MAX_PAIRS = 64, MAX_TOK = 1024 };

typedef struct cfg {
    int pairs, warmup, prefix, tokens, threads[4], n_threads;
    int lane_q4, lane_nv, prefill;
    const char *shape; /* fp4lane synth --shape (default llama-160m) */
} cfg;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int exists(const char *p) {
    struct stat s;
    return stat(p, &s) == 0;
}

static int sh(const char *cmd) {
    fprintf(stderr, "+ %s\n", cmd);
    return system(cmd);
}

/* ---- the two engines, one token per step ---- */
typedef struct fp4_side {
    fp4_model *m;
    fp4_rt *rt;
    float *logits;
    int64_t vocab;
} fp4_side;

static int fp4_open(fp4_side *s, const char *gguf, fp4_mode mode, int threads, int n_ctx) {
    fp4_error e;
    fp4_status st = fp4_model_open(gguf, NULL, &s->m, &e);
    fp4_rt_opts o = {.mode = mode, .device = FP4_DEVICE_CPU, .n_threads = threads, .n_ctx = n_ctx};
    if (!st) st = fp4_rt_create(s->m, &o, &s->rt, &e);
    if (st) {
        fprintf(stderr, "fp4lane on %s: %s [%s] %s %s\n", gguf, fp4_status_str(st), e.rule, e.tensor, e.msg);
        return -1;
    }
    s->vocab = fp4_rt_vocab(s->rt);
    s->logits = malloc(sizeof(float) * (size_t)s->vocab);
    return s->logits ? 0 : -1;
}

static void fp4_close(fp4_side *s) {
    fp4_rt_free(s->rt);
    fp4_model_close(s->m);
    free(s->logits);
    memset(s, 0, sizeof *s);
}

/* decodes ids[0..n) one step each in a fresh sequence; the time of steps [from, n) in *dt */
static int fp4_run(fp4_side *s, const int32_t *ids, int n, int from, double *dt) {
    int32_t seq = -1;
    fp4_error e;
    fp4_status st = fp4_rt_seq_open(s->rt, &seq);
    double t0 = 0;
    for (int i = 0; !st && i < n; i++) {
        if (i == from) t0 = now();
        fp4_rt_tok c = {seq, ids[i], 1};
        st = fp4_rt_step(s->rt, &c, 1, s->logits, &e);
    }
    *dt = now() - t0;
    if (seq >= 0) fp4_rt_seq_close(s->rt, seq);
    if (st) fprintf(stderr, "fp4lane step: %s [%s] %s\n", fp4_status_str(st), e.rule, e.msg);
    return st ? -1 : 0;
}

/* --prefill: ids[0..n) as one step of n columns in a fresh sequence, timed */
static int fp4_prefill(fp4_side *s, const int32_t *ids, int n, double *dt) {
    int32_t seq = -1;
    fp4_error e;
    fp4_status st = fp4_rt_seq_open(s->rt, &seq);
    fp4_rt_tok *c = malloc(sizeof *c * (size_t)n);
    if (!c) st = FP4_ERR_NOMEM;
    for (int i = 0; !st && i < n; i++) /* the last position's logits only, as llama.cpp's batch */
        c[i] = (fp4_rt_tok){seq, ids[i], i == n - 1};
    const double t0 = now();
    if (!st) st = fp4_rt_step(s->rt, c, n, s->logits, &e);
    *dt = now() - t0;
    free(c);
    if (seq >= 0) fp4_rt_seq_close(s->rt, seq);
    if (st) fprintf(stderr, "fp4lane prefill: %s\n", fp4_status_str(st));
    return st ? -1 : 0;
}

static int llama_prefill(llama_oracle_session *s, const int32_t *ids, int n, double *dt, const float **last) {
    char err[2600];
    llama_oracle_session_clear(s);
    const double t0 = now();
    const int r = llama_oracle_session_prefill(s, ids, n, last, err, sizeof err);
    *dt = now() - t0;
    if (r) fprintf(stderr, "%s\n", err);
    return r;
}

static int llama_run(llama_oracle_session *s, const int32_t *ids, int n, int from, double *dt,
                     const float **last) {
    char err[2600];
    llama_oracle_session_clear(s);
    double t0 = 0;
    for (int i = 0; i < n; i++) {
        if (i == from) t0 = now();
        if (llama_oracle_session_decode(s, ids[i], i, last, err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            return -1;
        }
    }
    *dt = now() - t0;
    return 0;
}

/* ---- one comparison: paired cells ---- */
static void pair_row(const cfg *c, llama_oracle *lo, const char *lane, const char *gguf, fp4_mode mode,
                     int threads, const int32_t *ids) {
    const int n = c->prefix + c->tokens, n_ctx = n < 256 ? 256 : n;
    llama_oracle_session *ls = NULL;
    fp4_side fs = {0};
    char err[2600];
    int nv = 0;
    if (llama_oracle_session_open(lo, gguf, n_ctx, threads, &ls, &nv, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return;
    }
    if (fp4_open(&fs, gguf, mode, threads, n_ctx)) {
        llama_oracle_session_close(ls);
        return;
    }
    /* sanity: the same tokens through both, every position compared (max |diff| relative to the
     * largest |logit|, argmax agreement, mean KL(llama.cpp || fp4lane)) */
    const float *theirs = NULL;
    double dt, amax = 0, dmax = 0, kl = 0;
    int same = 0, ok = nv == fs.vocab;
    int32_t seq = -1;
    fp4_error e;
    llama_oracle_session_clear(ls);
    ok = ok && fp4_rt_seq_open(fs.rt, &seq) == FP4_OK;
    for (int i = 0; ok && i < n; i++) {
        fp4_rt_tok col = {seq, ids[i], 1};
        ok = !llama_oracle_session_decode(ls, ids[i], i, &theirs, err, sizeof err) &&
             fp4_rt_step(fs.rt, &col, 1, fs.logits, &e) == FP4_OK;
        int64_t ta = 0, tb = 0;
        double ma = -INFINITY, mb = -INFINITY, za = 0, zb = 0, k = 0;
        for (int64_t j = 0; ok && j < nv; j++) {
            amax = fmax(amax, fabs(theirs[j]));
            dmax = fmax(dmax, fabs((double)theirs[j] - fs.logits[j]));
            if (theirs[j] > theirs[ta]) ta = j;
            if (fs.logits[j] > fs.logits[tb]) tb = j;
            ma = fmax(ma, theirs[j]);
            mb = fmax(mb, fs.logits[j]);
        }
        for (int64_t j = 0; ok && j < nv; j++)
            za += exp(theirs[j] - ma), zb += exp(fs.logits[j] - mb);
        for (int64_t j = 0; ok && j < nv; j++) {
            const double la = theirs[j] - ma - log(za), lb = fs.logits[j] - mb - log(zb);
            k += exp(la) * (la - lb);
        }
        kl += k / n;
        same += ta == tb;
    }
    if (seq >= 0) fp4_rt_seq_close(fs.rt, seq);
    (void)dt;
    const char *mname = mode == FP4_MODE_EXACT ? "exact" : "native";
    if (!ok) {
        fprintf(stderr, "%s %s: the sanity run failed\n", lane, mname);
    } else {
        fprintf(stderr,
                "sanity %s %s t%d, %d positions: max|diff|/max|logit| %.4f, argmax same at %d, mean KL %.2g; "
                "fp4lane routes: %s\n",
                lane, mname, threads, n, amax > 0 ? dmax / amax : 0.0, same, kl, fp4_rt_routes(fs.rt));
        double a[MAX_PAIRS], b[MAX_PAIRS];
        int np = 0;
        for (int p = 0; ok && p < c->warmup + c->pairs; p++) {
            double ta_s = 0, tb_s = 0;
            if (c->prefill)
                ok = !llama_prefill(ls, ids, c->prefix, &ta_s, &theirs) &&
                     !fp4_prefill(&fs, ids, c->prefix, &tb_s);
            else
                ok = !llama_run(ls, ids, n, c->prefix, &ta_s, &theirs) &&
                     !fp4_run(&fs, ids, n, c->prefix, &tb_s);
            if (ok && p >= c->warmup) {
                const int timed = c->prefill ? c->prefix : c->tokens;
                a[np] = timed / ta_s;
                b[np] = timed / tb_s;
                np++;
            }
        }
        fp4b_result r;
        if (ok && !fp4b_compare(a, b, np, &r)) {
            printf("| %s | %s | %d | %.1f (CV %.1f %%) | %.1f (CV %.1f %%) | **%.2f** | %.2f–%.2f | %s |\n",
                   lane, mname, threads, r.a.mean, 100 * r.a.cv, r.b.mean, 100 * r.b.cv, r.ratio, r.pair_min,
                   r.pair_max,
                   r.verdict == FP4B_B_FASTER   ? "fp4lane faster"
                   : r.verdict == FP4B_A_FASTER ? "llama.cpp faster"
                                                : fp4b_verdict_text(r.verdict));
            fflush(stdout);
        }
    }
    fp4_close(&fs);
    llama_oracle_session_close(ls);
}

/* ---- the files ---- */
static int make_files(const char *bin, const char *dir, llama_oracle *lo, const cfg *c, char *q4, char *nv,
                      size_t len) {
    char synth[900], bf16[900], plain[900], cmd[3000], err[2600];
    snprintf(synth, sizeof synth, "%s/synth-%s", dir, c->shape);
    snprintf(bf16, sizeof bf16, "%s/%s-bf16.gguf", dir, c->shape);
    snprintf(plain, sizeof plain, "%s/%s-plain-bf16.gguf", dir, c->shape);
    snprintf(q4, len, "%s/%s-q4_k_m.gguf", dir, c->shape);
    snprintf(nv, len, "%s/%s-nvfp4.gguf", dir, c->shape);
    if (!exists(synth)) {
        snprintf(cmd, sizeof cmd, "%s synth %s --shape %s --seed 1", bin, synth, c->shape);
        if (sh(cmd)) return -1;
    }
    if (c->lane_q4 && !exists(q4)) {
        long dropped = 0;
        snprintf(cmd, sizeof cmd, "%s convert %s %s --layout gguf-ggml --force", bin, synth, bf16);
        if (sh(cmd) || gguf_strip_fp4lane(bf16, plain, &dropped, err, sizeof err) ||
            llama_oracle_quantize(lo, plain, q4, LLAMA_ORACLE_Q4_K_M, 2, err, sizeof err)) {
            fprintf(stderr, "making %s: %s\n", q4, err);
            return -1;
        }
        remove(bf16);
        remove(plain);
    }
    if (c->lane_nv && !exists(nv)) {
        snprintf(cmd, sizeof cmd, "%s quantize %s %s --layout gguf-ggml", bin, synth, nv);
        if (sh(cmd)) return -1;
    }
    return 0;
}

static int parse_int(const char *v, int lo, int hi, int *out) {
    char *end;
    long x = strtol(v, &end, 10);
    if (!*v || *end || x < lo || x > hi) return fprintf(stderr, "bad value %s ([%d, %d])\n", v, lo, hi), -1;
    *out = (int)x;
    return 0;
}

/* the libggml-cpu-<variant>.so ggml loaded (from /proc/self/maps), for the receipt */
static void print_ggml_variant(void) {
    FILE *f = fopen("/proc/self/maps", "r");
    char line[1200], seen[1200] = "";
    while (f && fgets(line, sizeof line, f)) {
        const char *p = strstr(line, "libggml-cpu-");
        if (p && !strstr(seen, p)) {
            snprintf(seen, sizeof seen, "%s", p);
            printf("ggml CPU backend: %s", p);
        }
    }
    if (f) fclose(f);
}

int main(int argc, char **argv) {
    cfg c = {.pairs = 5,
             .warmup = 1,
             .prefix = 16,
             .tokens = 32,
             .threads = {1, 2},
             .n_threads = 2,
             .lane_q4 = 1,
             .lane_nv = 1,
             .shape = "llama-160m"};
    if (argc < 3) {
        fprintf(stderr, "usage: bench_llama_cpu FP4LANE_BIN WORKDIR [--pairs N] [--warmup N] [--prefix N] "
                        "[--tokens N] [--threads 1,2] [--lanes q4_k_m,nvfp4] [--prefill] [--shape S]\n");
        return 2;
    }
    for (int i = 3; i + 1 < argc + 1; i += 2) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        int bad = 0;
        if (!strcmp(o, "--prefill")) {
            c.prefill = 1;
            i--; /* no value */
            continue;
        }
        if (!strcmp(o, "--pairs"))
            bad = parse_int(v, 1, MAX_PAIRS, &c.pairs);
        else if (!strcmp(o, "--warmup"))
            bad = parse_int(v, 0, 16, &c.warmup);
        else if (!strcmp(o, "--prefix"))
            bad = parse_int(v, 0, MAX_TOK / 2, &c.prefix);
        else if (!strcmp(o, "--tokens"))
            bad = parse_int(v, 1, MAX_TOK / 2, &c.tokens);
        else if (!strcmp(o, "--threads")) {
            c.n_threads = 0;
            for (const char *p = v; *p && c.n_threads < 4;
                 p += strcspn(p, ",") + (p[strcspn(p, ",")] == ',')) {
                c.threads[c.n_threads] = atoi(p);
                bad |= c.threads[c.n_threads++] < 1;
            }
        } else if (!strcmp(o, "--shape")) {
            c.shape = v;
            bad = !*v || strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(v);
        } else if (!strcmp(o, "--lanes")) {
            c.lane_q4 = strstr(v, "q4_k_m") != NULL;
            c.lane_nv = strstr(v, "nvfp4") != NULL;
        } else
            bad = 1;
        if (bad) return fprintf(stderr, "bench_llama_cpu: bad option %s %s\n", o, v), 2;
    }
    llama_oracle *lo = NULL;
    char err[2600], q4[900], nv[900];
    if (llama_oracle_open(&lo, err, sizeof err)) return fprintf(stderr, "%s\n", err), 1;
    if (make_files(argv[1], argv[2], lo, &c, q4, nv, sizeof q4)) return 1;
    print_ggml_variant();
    int32_t ids[MAX_TOK];
    uint64_t s = 0x62656e6368ull;
    const int n = c.prefix + c.tokens;
    fp4_model *vm = NULL; /* the shape's vocabulary, from the file */
    fp4_arch va;
    fp4_error ve;
    if (fp4_model_open(c.lane_q4 ? q4 : nv, NULL, &vm, &ve) || fp4_model_arch(vm, &va, &ve))
        return fprintf(stderr, "bench_llama_cpu: %s\n", ve.msg), 1;
    fp4_model_close(vm);
    printf("shape %s (fp4lane synth --seed 1), vocabulary %lld\n", c.shape, (long long)va.vocab);
    for (int i = 0; i < n; i++)
        ids[i] = (int32_t)(fp4_splitmix64(&s) % (uint64_t)va.vocab);
    if (c.prefill)
        printf("CPU prefill: a %d-token prompt as one step (one llama_decode batch; one fp4_rt_step of %d "
               "columns), timed; %d pairs after %d warm-up, A = llama.cpp (libllama 3.22.1), B = fp4lane\n",
               c.prefix, c.prefix, c.pairs, c.warmup);
    else
        printf("CPU decode, one token per step: %d-token prefix (untimed), %d timed teacher-forced tokens; "
               "%d pairs after %d warm-up, A = llama.cpp (libllama 3.22.1), B = fp4lane\n",
               c.prefix, c.tokens, c.pairs, c.warmup);
    printf("verdict rule: %s\n\n", fp4b_rule_text());
    printf("| file | fp4lane mode | threads | llama.cpp tok/s | fp4lane tok/s | ratio B/A | pair min–max | "
           "verdict |\n|---|---|---|---|---|---|---|---|\n");
    static const fp4_mode modes[] = {FP4_MODE_EXACT, FP4_MODE_NATIVE};
    for (int f = 0; f < 2; f++) {
        if (!(f ? c.lane_nv : c.lane_q4)) continue;
        for (int t = 0; t < c.n_threads; t++)
            for (int m = 0; m < 2; m++)
                pair_row(&c, lo, f ? "nvfp4" : "q4_k_m", f ? nv : q4, modes[m], c.threads[t], ids);
    }
    llama_oracle_close(lo);
    return 0;
}
