/* bench_cpu.c — CPU matvec throughput (one activation column) of fp4lane's exact NVFP4 A16 path
 * and its Q4_K / Q6_K control lane, next to ggml's own CPU kernels on the same shapes.
 *
 *   make bench-cpu                      # builds $(BUILD)/dev/bench/bench_cpu and runs it
 *   build/dev/bench/bench_cpu [reps] [nvfp4|q4_K|q6_K|w4a4]   # reps timed pairs (default 9) after one
 * warm-up of # each; optionally one kernel family only FP4_GGML_CPU=haswell build/dev/bench/bench_cpu    #
 * choose ggml's CPU variant (default: by CPU flags)
 *
 * Paired: each fp4lane path is timed against the matching ggml kernel in alternation (ours,
 * ggml, ours, ggml, ...), so that load from other processes on a shared machine hits both
 * sides alike; the table gives each side's median and the distribution of the per-pair speed
 * ratios (ggml time / ours: > 1 means fp4lane is faster), by wall time and by process CPU time
 * (which leaves out the time a run spent descheduled). fp4lane's CPU paths (portable, avx2,
 * avx512) are forced in turn, those this CPU has. The load average is printed before and after.
 *
 * Weights are random valid blocks (throughput does not depend on the values): NVFP4 payload
 * bytes uniform, scale bytes 0x00..0x7E, scale2 = 1/2688; Q4_K/Q6_K blocks uniform with finite
 * f16 super-scales. GB/s counts weight bytes only (NVFP4 and Q4_K are both 4.5 bits/weight).
 * ggml rows are driven one vec_dot per row, after quantizing the column once (Q8_K for the
 * K-quants, Q8_0 for ggml's NVFP4 dot), on 1 or 2 threads split by rows like fp4lane.
 * Dev tool: prints, and exits non-zero on failure. */
#define FP4LANE_ORACLE_API /* the single-row K-quant dots, for the bits line */
#include "fp4lane.h"
#include "cpu/cpu_impl.h" /* fp4_cpu_force_path: time each CPU path */
#include "fp4_rng.h"
#include "ggml_oracle.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static uint64_t rs = 0x243F6A8885A308D3ull;
static uint64_t rnd(void) { return fp4_splitmix64(&rs); }
static void fill_bytes(uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = rnd();
        for (size_t k = 0; k < 8 && i + k < n; k++) p[i + k] = (uint8_t)(v >> (8 * k));
    }
}
static float gauss(void) { /* sum of uniforms: plenty for activations */
    double s = 0;
    for (int i = 0; i < 12; i++) s += (double)(rnd() >> 11) * (1.0 / 9007199254740992.0);
    return (float)(s - 6.0);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define MAX_REPS 64
typedef int (*bench_fn)(void *ctx, int n_threads);

static double cpu_s(void) { /* CPU time of the whole process: all its threads, not time spent waiting */
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* wall seconds of one run (< 0 on failure); *cpu: its process CPU seconds */
static double time_one(bench_fn fn, void *ctx, int n_threads, double *cpu) {
    const double c0 = cpu_s(), t0 = now_s();
    if (fn(ctx, n_threads)) return -1;
    const double t = now_s() - t0;
    *cpu = cpu_s() - c0;
    return t;
}

typedef struct paired {
    double ours, theirs;                    /* median wall seconds; < 0 on failure */
    double r_min, r_q1, r_med, r_q3, r_max; /* per-pair wall-time ratios theirs/ours */
    double c_med, c_q1, c_q3;               /* per-pair CPU-time ratios theirs/ours */
} paired;

/* reps pairs, ours first in even pairs and second in odd ones (one warm-up of each first) */
static paired time_paired(bench_fn a, void *actx, bench_fn b, void *bctx, int n_threads, int reps) {
    double ta[MAX_REPS], tb[MAX_REPS], r[MAX_REPS], c[MAX_REPS], ca, cb;
    paired p = {-1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    if (time_one(a, actx, n_threads, &ca) < 0 || time_one(b, bctx, n_threads, &cb) < 0) return p;
    for (int i = 0; i < reps; i++) {
        if (i % 2 == 0) {
            ta[i] = time_one(a, actx, n_threads, &ca);
            tb[i] = time_one(b, bctx, n_threads, &cb);
        } else {
            tb[i] = time_one(b, bctx, n_threads, &cb);
            ta[i] = time_one(a, actx, n_threads, &ca);
        }
        if (ta[i] < 0 || tb[i] < 0 || !(ca > 0)) return p;
        r[i] = tb[i] / ta[i];
        c[i] = cb / ca;
    }
    qsort(ta, (size_t)reps, sizeof ta[0], cmp_double);
    qsort(tb, (size_t)reps, sizeof tb[0], cmp_double);
    qsort(r, (size_t)reps, sizeof r[0], cmp_double);
    qsort(c, (size_t)reps, sizeof c[0], cmp_double);
    p.ours = ta[reps / 2];
    p.theirs = tb[reps / 2];
    p.r_min = r[0];
    p.r_q1 = r[reps / 4];
    p.r_med = r[reps / 2];
    p.r_q3 = r[(3 * reps) / 4];
    p.r_max = r[reps - 1];
    p.c_med = c[reps / 2];
    p.c_q1 = c[reps / 4];
    p.c_q3 = c[(3 * reps) / 4];
    return p;
}

static void print_load(const char *when) {
    FILE *f = fopen("/proc/loadavg", "r");
    char buf[128] = "?";
    if (f) {
        if (!fgets(buf, sizeof buf, f)) snprintf(buf, sizeof buf, "?\n");
        fclose(f);
    }
    printf("load average (%s): %s", when, buf);
}

/* ---- the shapes' data ---- */
typedef struct bench {
    int64_t n_out, n_in;
    float *x, *y;
    fp4_nvfp4_view nv;      /* fp4lane NVFP4 */
    uint8_t *ggml_nvfp4;    /* ggml's 36-byte blocks (same bytes count) */
    fp4_block_q4_K *q4;
    fp4_block_q6_K *q6;
    ggml_oracle *g;
    void *xq;               /* ggml activation blocks */
    ggml_vec_dot_fn dot;    /* the ggml kernel being timed */
    const uint8_t *w;       /* its weight rows */
    size_t row_bytes;
    int q8_0;               /* activations as Q8_0 (NVFP4) instead of Q8_K */
} bench;

static int run_nvfp4(void *p, int nt) {
    bench *b = p;
    return fp4_nvfp4_matvec_a16_exact(&b->nv, b->x, 1, b->y, nt) != FP4_OK;
}
static int run_w4a4_path(bench *b, int nt, int path) {
    fp4_cpu_force_path(path);
    const int rc = fp4_nvfp4_matvec_w4a4(&b->nv, b->x, 1, b->y, nt) != FP4_OK;
    fp4_cpu_force_path(-1);
    return rc;
}
static int run_w4a4_best(void *p, int nt) {
    return run_w4a4_path(p, nt, FP4_CPU_N_PATHS);
}
static int run_w4a4_portable(void *p, int nt) {
    return run_w4a4_path(p, nt, FP4_CPU_PORTABLE);
}
static int run_q4_K(void *p, int nt) {
    bench *b = p;
    return fp4_q4_K_matvec(b->q4, b->n_out, b->n_in, b->x, 1, b->y, nt) != FP4_OK;
}
static int run_q6_K(void *p, int nt) {
    bench *b = p;
    return fp4_q6_K_matvec(b->q6, b->n_out, b->n_in, b->x, 1, b->y, nt) != FP4_OK;
}

typedef struct ggml_part {
    bench *b;
    int64_t r0, r1;
} ggml_part;
static void *ggml_rows(void *p) {
    ggml_part *t = p;
    bench *b = t->b;
    for (int64_t r = t->r0; r < t->r1; r++)
        b->dot((int)b->n_in, &b->y[r], 0, b->w + (size_t)r * b->row_bytes, 0, b->xq, 0, 1);
    return NULL;
}
static int run_ggml(void *p, int nt) {
    bench *b = p;
    if (b->q8_0)
        b->g->quantize_row_q8_0(b->x, b->xq, b->n_in);
    else
        b->g->quantize_row_q8_K(b->x, b->xq, b->n_in);
    ggml_part part[2] = {{b, 0, nt > 1 ? b->n_out / 2 : b->n_out}, {b, b->n_out / 2, b->n_out}};
    pthread_t tid;
    if (nt > 1 && pthread_create(&tid, NULL, ggml_rows, &part[1]) != 0) return 1;
    ggml_rows(&part[0]);
    if (nt > 1) pthread_join(tid, NULL);
    return 0;
}

static const char *pick_variant(void) {
    const char *e = getenv("FP4_GGML_CPU");
    if (e && *e) return e;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vbmi")) return "icelake";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "haswell";
    return "x64";
}

static void row(const char *ours, const char *theirs, paired p, double bytes, int nt) {
    if (p.ours < 0) {
        printf("| %s | %s | %d | failed | | | | | |\n", ours, theirs, nt);
        return;
    }
    printf("| %s | %s | %d | %.2f (%.2f GB/s) | %.2f (%.2f GB/s) | **%.2f** | %.2f–%.2f | %.2f–%.2f | %.2f "
           "(%.2f–%.2f) |\n",
           ours, theirs, nt, p.ours * 1e3, bytes / p.ours * 1e-9, p.theirs * 1e3, bytes / p.theirs * 1e-9,
           p.r_med, p.r_q1, p.r_q3, p.r_min, p.r_max, p.c_med, p.c_q1, p.c_q3);
}

static const char *only; /* argv[2]: "nvfp4", "q4_K", "q6_K" or "w4a4", else all */

static int bench_shape(int64_t n_out, int64_t n_in, ggml_oracle *g, const char *variant, int reps) {
    bench b;
    memset(&b, 0, sizeof b);
    b.n_out = n_out;
    b.n_in = n_in;
    b.g = g;
    const size_t nv_bytes = (size_t)(n_out * n_in / 2 + n_out * n_in / 16);
    const size_t q4_bytes = (size_t)(n_out * (n_in / 256)) * sizeof(fp4_block_q4_K);
    uint8_t *payload = malloc((size_t)(n_out * n_in / 2)), *scales = malloc((size_t)(n_out * n_in / 16));
    b.ggml_nvfp4 = malloc(nv_bytes);
    b.q4 = malloc(q4_bytes);
    const size_t q6_bytes = (size_t)(n_out * (n_in / 256)) * sizeof(fp4_block_q6_K);
    b.q6 = malloc(q6_bytes);
    b.x = malloc((size_t)n_in * sizeof(float));
    b.y = malloc((size_t)n_out * sizeof(float));
    b.xq = malloc((size_t)(n_in / 32) * 34 + (size_t)(n_in / 256) * 292);
    if (!payload || !scales || !b.ggml_nvfp4 || !b.q4 || !b.q6 || !b.x || !b.y || !b.xq) return 1;
    fill_bytes(payload, (size_t)(n_out * n_in / 2));
    for (int64_t i = 0; i < n_out * n_in / 16; i++) scales[i] = (uint8_t)(rnd() % 0x7F);
    fill_bytes(b.ggml_nvfp4, nv_bytes);
    for (size_t i = 0; i < nv_bytes / 36; i++)
        for (int s = 0; s < 4; s++) b.ggml_nvfp4[36 * i + s] = (uint8_t)(rnd() % 0x7F);
    fill_bytes((uint8_t *)b.q4, q4_bytes);
    for (int64_t i = 0; i < n_out * (n_in / 256); i++) {
        b.q4[i].d = (uint16_t)(0x2000 + rnd() % 0x1000);
        b.q4[i].dmin = (uint16_t)(0x1C00 + rnd() % 0x1000);
    }
    fill_bytes((uint8_t *)b.q6, q6_bytes);
    for (int64_t i = 0; i < n_out * (n_in / 256); i++)
        b.q6[i].d = (uint16_t)(0x2000 + rnd() % 0x1000);
    for (int64_t i = 0; i < n_in; i++) b.x[i] = gauss();
    b.nv = (fp4_nvfp4_view){payload, scales, 1.0f / 2688.0f, 0.0f, n_out, n_in, FP4_PACK_CANONICAL};

    printf("\n%lld x %lld (n_out x n_in), 1 column; NVFP4 %.1f MB, Q4_K %.1f MB, Q6_K %.1f MB\n\n",
           (long long)n_out, (long long)n_in, nv_bytes / 1e6, q4_bytes / 1e6, q6_bytes / 1e6);
    bench gb = b; /* ggml's side: its own dot, weights and activation format */
    static const char *const path_label[FP4_CPU_N_PATHS] = {"portable", "avx2", "avx512"};
    const int best = fp4_cpu_path();
    char ours[96];
    static const char *const kind_name[3] = {"nvfp4", "q4_K", "q6_K"};
    static const char *const ours_name[3] = {"`fp4_nvfp4_matvec_a16_exact`", "`fp4_q4_K_matvec`",
                                             "`fp4_q6_K_matvec`"};
    static const char *const theirs_name[3] = {"`ggml_vec_dot_nvfp4_q8_0`", "`ggml_vec_dot_q4_K_q8_K`",
                                               "`ggml_vec_dot_q6_K_q8_K`"};
    static bench_fn const run_ours[3] = {run_nvfp4, run_q4_K, run_q6_K};
    /* 0: NVFP4 exact A16 vs ggml NVFP4; 1: Q4_K vs ggml Q4_K; 2: Q6_K vs ggml Q6_K */
    for (int kind = 0; kind < 3; kind++) {
        if (only && strcmp(only, kind_name[kind])) continue;
        if (kind == 0 || only)
            printf("| fp4lane (path) | ggml (%s) | threads | fp4lane ms (median) | ggml ms (median) | speed "
                   "ratio "
                   "ggml/fp4lane (median of %d pairs) | quartiles | min–max | CPU-time ratio (quartiles) |\n"
                   "|---|---|---|---|---|---|---|---|---|\n",
                   variant, reps);
        gb.dot = kind == 2 ? g->vec_dot_q6_K_q8_K : kind ? g->vec_dot_q4_K_q8_K : g->vec_dot_nvfp4_q8_0;
        gb.q8_0 = !kind;
        gb.w = kind == 2 ? (const uint8_t *)b.q6 : kind ? (const uint8_t *)b.q4 : b.ggml_nvfp4;
        gb.row_bytes = kind == 2 ? (size_t)(n_in / 256) * sizeof(fp4_block_q6_K)
                       : kind    ? (size_t)(n_in / 256) * sizeof(fp4_block_q4_K)
                                 : (size_t)(n_in / 64) * 36;
        const double bytes = kind == 2 ? (double)q6_bytes : kind ? (double)q4_bytes : (double)nv_bytes;
        for (int path = best; path >= 0; path--) {
            fp4_cpu_force_path(path);
            snprintf(ours, sizeof ours, "%s (%s)", ours_name[kind], path_label[path]);
            for (int nt = 1; nt <= 2; nt++)
                row(ours, theirs_name[kind], time_paired(run_ours[kind], &b, run_ggml, &gb, nt, reps), bytes,
                    nt);
        }
        fp4_cpu_force_path(-1);
    }
    /* W4A4 (SPEC §5) has no ggml counterpart: the best path paired with the portable one */
    if ((!only || !strcmp(only, "w4a4")) && best > FP4_CPU_PORTABLE) {
        bench w4 = b;
        w4.nv.input_scale_inv = 0.5f;
        printf("\n| fp4lane (path) | against | threads | ms (median) | ms (median) | speed ratio (median of "
               "%d pairs) | "
               "quartiles | min–max | CPU-time ratio (quartiles) |\n|---|---|---|---|---|---|---|---|---|\n",
               reps);
        snprintf(ours, sizeof ours, "`fp4_nvfp4_matvec_w4a4` (%s)", path_label[best]);
        for (int nt = 1; nt <= 2; nt++)
            row(ours, "`fp4_nvfp4_matvec_w4a4` (portable)",
                time_paired(run_w4a4_best, &w4, run_w4a4_portable, &w4, nt, reps), (double)nv_bytes, nt);
    }
    /* bits: the reference is fp4lane's portable Q4_K / Q6_K dot, which test_ggml_oracle pins to ggml's
     * generic C as built for baseline x86-64 (libggml-cpu-x64.so); the other variants' builds of that same C
     * are compiled with FMA contraction, and their SIMD kernels sum in another order */
    for (int k6 = 0; k6 < 2; k6++) {
        if (only && strcmp(only, k6 ? "q6_K" : "q4_K")) continue;
        long simd_diff = 0, gen_diff = 0, ours_diff = 0;
        g->quantize_row_q8_K(b.x, b.xq, n_in);
        const size_t rb = (size_t)(n_in / 256) * (k6 ? sizeof(fp4_block_q6_K) : sizeof(fp4_block_q4_K));
        const ggml_vec_dot_fn gen = k6 ? g->vec_dot_q6_K_q8_K_generic : g->vec_dot_q4_K_q8_K_generic;
        const ggml_vec_dot_fn simd = k6 ? g->vec_dot_q6_K_q8_K : g->vec_dot_q4_K_q8_K;
        for (int64_t r = 0; r < n_out; r++) {
            float s_gen = 0, s_simd = 0, s_ref, s_ours;
            const uint8_t *wr = (k6 ? (const uint8_t *)b.q6 : (const uint8_t *)b.q4) + r * rb;
            gen((int)n_in, &s_gen, 0, wr, 0, b.xq, 0, 1);
            simd((int)n_in, &s_simd, 0, wr, 0, b.xq, 0, 1);
            for (int pass = 0; pass < 2; pass++) { /* portable, then the best path */
                fp4_cpu_force_path(pass ? -1 : FP4_CPU_PORTABLE);
                const float v = k6 ? fp4_q6_K_dot_q8_K((const fp4_block_q6_K *)(const void *)wr, b.xq, n_in)
                                   : fp4_q4_K_dot_q8_K((const fp4_block_q4_K *)(const void *)wr, b.xq, n_in);
                *(pass ? &s_ours : &s_ref) = v;
            }
            simd_diff += memcmp(&s_ref, &s_simd, 4) != 0;
            gen_diff += memcmp(&s_ref, &s_gen, 4) != 0;
            ours_diff += memcmp(&s_ref, &s_ours, 4) != 0;
        }
        const char *kn = k6 ? "q6_K" : "q4_K";
        printf("\n%s bits, %lld rows, against fp4lane's portable dot (= ggml's generic C built for baseline "
               "x86-64): ggml_vec_dot_%s_q8_K (%s) differs in %ld, ggml_vec_dot_%s_q8_K_generic (%s build) "
               "in %ld, fp4lane (%s) in %ld\n",
               k6 ? "Q6_K" : "Q4_K", (long long)n_out, kn, variant, simd_diff, kn, variant, gen_diff,
               fp4_cpu_path_name(fp4_cpu_path()), ours_diff);
    }
    free(payload);
    free(scales);
    free(b.ggml_nvfp4);
    free(b.q4);
    free(b.q6);
    free(b.x);
    free(b.y);
    free(b.xq);
    return 0;
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 9;
    if (reps < 1 || reps > MAX_REPS) reps = 9;
    only = argc > 2 ? argv[2] : NULL;
    ggml_oracle g;
    char err[1024];
    const char *variant = pick_variant();
    if (ggml_oracle_open(&g, variant, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    printf("fp4lane %s; ggml %s (%s), CPU backend %s\n", fp4_version(), g.ggml_version(), g.ggml_commit(),
           g.cpu_name);
    printf("fp4lane CPU path: %s (best this CPU has, after $FP4_CPU_PATH)\n",
           fp4_cpu_path_name(fp4_cpu_path()));
    print_load("start");
    if (bench_shape(4096, 14336, &g, variant, reps)) return 1;
    if (bench_shape(14336, 4096, &g, variant, reps)) return 1;
    print_load("end");
    return 0;
}
