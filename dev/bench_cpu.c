/* bench_cpu.c — CPU matvec throughput (one activation column) of fp4lane's exact NVFP4 A16 path
 * and its Q4_K control lane, next to ggml's own CPU kernels on the same shapes.
 *
 *   make bench-cpu                      # builds $(BUILD)/dev/bench_cpu and runs it
 *   build/dev/bench_cpu [reps]          # median of reps timed runs (default 9) after one warm-up
 *   FP4_GGML_CPU=haswell build/dev/bench_cpu    # choose ggml's CPU variant (default: by CPU flags)
 *
 * Weights are random valid blocks (throughput does not depend on the values): NVFP4 payload
 * bytes uniform, scale bytes 0x00..0x7E, scale2 = 1/2688; Q4_K/Q6_K blocks uniform with finite
 * f16 super-scales. GB/s counts weight bytes only (NVFP4 and Q4_K are both 4.5 bits/weight).
 * ggml rows are driven one vec_dot per row, after quantizing the column once (Q8_K for the
 * K-quants, Q8_0 for ggml's NVFP4 dot), on 1 or 2 threads split by rows like fp4lane.
 * Dev tool: prints, and exits non-zero on failure. */
#include "fp4lane.h"
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

typedef struct timing {
    double median, best; /* seconds; median < 0 on failure */
} timing;

static timing time_runs(bench_fn fn, void *ctx, int n_threads, int reps) {
    double t[MAX_REPS];
    timing r = {-1, -1};
    if (fn(ctx, n_threads)) return r; /* warm-up */
    for (int i = 0; i < reps; i++) {
        double t0 = now_s();
        if (fn(ctx, n_threads)) return r;
        t[i] = now_s() - t0;
    }
    qsort(t, (size_t)reps, sizeof t[0], cmp_double);
    r.median = t[reps / 2];
    r.best = t[0];
    return r;
}

/* ---- the shapes' data ---- */
typedef struct bench {
    int64_t n_out, n_in;
    float *x, *y;
    fp4_nvfp4_view nv;      /* fp4lane NVFP4 */
    uint8_t *ggml_nvfp4;    /* ggml's 36-byte blocks (same bytes count) */
    fp4_block_q4_K *q4;
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
static int run_q4_K(void *p, int nt) {
    bench *b = p;
    return fp4_q4_K_matvec(b->q4, b->n_out, b->n_in, b->x, 1, b->y, nt) != FP4_OK;
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

static void row(const char *what, timing t, double bytes, int nt) {
    if (t.median < 0) {
        printf("| %-46s | %d | failed | | |\n", what, nt);
        return;
    }
    printf("| %-46s | %d | %8.2f | %6.2f | %6.2f |\n", what, nt, t.median * 1e3, bytes / t.median * 1e-9,
           bytes / t.best * 1e-9);
}

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
    b.x = malloc((size_t)n_in * sizeof(float));
    b.y = malloc((size_t)n_out * sizeof(float));
    b.xq = malloc((size_t)(n_in / 32) * 34 + (size_t)(n_in / 256) * 292);
    if (!payload || !scales || !b.ggml_nvfp4 || !b.q4 || !b.x || !b.y || !b.xq) return 1;
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
    for (int64_t i = 0; i < n_in; i++) b.x[i] = gauss();
    b.nv = (fp4_nvfp4_view){payload, scales, 1.0f / 2688.0f, 0.0f, n_out, n_in};

    printf("\n%lld x %lld (n_out x n_in), 1 column; NVFP4 %.1f MB, Q4_K %.1f MB\n\n", (long long)n_out,
           (long long)n_in, nv_bytes / 1e6, q4_bytes / 1e6);
    printf("| kernel | threads | ms (median of %d) | GB/s (median) | GB/s (best) |\n|---|---|---|---|---|\n",
           reps);
    for (int nt = 1; nt <= 2; nt++)
        row("fp4lane fp4_nvfp4_matvec_a16_exact", time_runs(run_nvfp4, &b, nt, reps), (double)nv_bytes, nt);
    for (int nt = 1; nt <= 2; nt++)
        row("fp4lane fp4_q4_K_matvec", time_runs(run_q4_K, &b, nt, reps), (double)q4_bytes, nt);

    char name[128];
    struct { const char *label; ggml_vec_dot_fn fn; int nvfp4; } gk[3] = {
        {"ggml_vec_dot_nvfp4_q8_0", g->vec_dot_nvfp4_q8_0, 1},
        {"ggml_vec_dot_q4_K_q8_K", g->vec_dot_q4_K_q8_K, 0},
        {"ggml_vec_dot_q4_K_q8_K_generic", g->vec_dot_q4_K_q8_K_generic, 0},
    };
    for (int k = 0; k < 3; k++) {
        b.dot = gk[k].fn;
        b.q8_0 = gk[k].nvfp4;
        b.w = gk[k].nvfp4 ? b.ggml_nvfp4 : (const uint8_t *)b.q4;
        b.row_bytes = gk[k].nvfp4 ? (size_t)(n_in / 64) * 36 : (size_t)(n_in / 256) * sizeof(fp4_block_q4_K);
        snprintf(name, sizeof name, "ggml %s (%s)", gk[k].label, variant);
        for (int nt = 1; nt <= 2; nt++)
            row(name, time_runs(run_ggml, &b, nt, reps), gk[k].nvfp4 ? (double)nv_bytes : (double)q4_bytes,
                nt);
    }
    free(payload);
    free(scales);
    free(b.ggml_nvfp4);
    free(b.q4);
    free(b.x);
    free(b.y);
    free(b.xq);
    return 0;
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 9;
    if (reps < 1 || reps > MAX_REPS) reps = 9;
    ggml_oracle g;
    char err[1024];
    const char *variant = pick_variant();
    if (ggml_oracle_open(&g, variant, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    printf("fp4lane %s; ggml %s (%s), CPU backend %s\n", fp4_version(), g.ggml_version(), g.ggml_commit(),
           g.cpu_name);
    if (bench_shape(4096, 14336, &g, variant, reps)) return 1;
    if (bench_shape(14336, 4096, &g, variant, reps)) return 1;
    return 0;
}
