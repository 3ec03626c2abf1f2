/* test_runtime_tp.c — the CPU engine split over in-process ranks (opts.tp, src/cpu/tp_step.c,
 * docs/SCALE.md). For Llama (2 layers), Qwen2 (q/k/v bias), Qwen3 (q/k norm), Qwen3-MoE (a dense
 * layer beside the expert layers) and Mixtral, NVFP4 twins of a shape whose shards sit on
 * super-block boundaries at 2, 3 and 4 ranks (48 query heads of 64 over 12 KV heads, ffn 3072):
 * exact mode gives the unsplit engine's logits bit for bit on a prefill step and the decode steps
 * after it, the same KV cache (snapshot files byte-identical), and a snapshot saved by the unsplit
 * engine continues on the split one with the same bits; native mode stays within NATIVE_TOL of the
 * unsplit native run, and a native snapshot of --tp 2 is refused by --tp 3 (kv.identity). The tiny
 * and tiny-moe shapes (4 query heads over 2 KV heads): native --tp 2 within NATIVE_TOL; refused,
 * each by name: KV heads the ranks do not divide (tp.heads), an exact split off a super-block
 * boundary (tp.exact-split: o's shards are 128 wide), an exact row-parallel route that cannot keep
 * its order (tp.exact-route: bf16), --device cuda (route.tp-cuda), too many ranks (tp.ranks). */
#include "check.h"
#include "fp4lane_runtime.h"
#include "rt_fixture.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* native: |a - b| <= NATIVE_TOL * (max |logit| of the row + 1): the split sums the partial
 * outputs of o and down in another order (rank by rank), a few f32 roundings per layer */
#define NATIVE_TOL 1e-3
enum { T_PRE = 5, T_DEC = 3, T_ALL = T_PRE + T_DEC, MAX_V = 512 };

static char tmp[512];
static const int32_t prompt[T_PRE] = {1, 17, 250, 3, 99};

/* logits [T_ALL][V]: the prompt as one step, then T_DEC greedy decode steps; the KV cache of the
 * prompt saved to kv_path when given; a snapshot loaded from load_path first (its T_PRE positions
 * then taken from it and only the decode steps run) */
static int run(const fp4_model *m, fp4_mode mode, int tp, float *lg, const char *kv_path,
               const char *load_path) {
    fp4_rt_opts o = {0};
    o.mode = mode, o.tp = tp, o.n_ctx = 32;
    fp4_rt *rt;
    fp4_error e;
    if (fp4_rt_create(m, &o, &rt, &e)) {
        fprintf(stderr, "create tp %d: %s (%s)\n", tp, e.msg, e.rule);
        return -1;
    }
    const int64_t V = fp4_rt_vocab(rt);
    int32_t seq;
    int rc = fp4_rt_seq_open(rt, &seq) ? -1 : 0;
    fp4_rt_tok cols[T_PRE];
    for (int i = 0; i < T_PRE; i++)
        cols[i] = (fp4_rt_tok){seq, prompt[i], 1};
    if (!rc && load_path)
        rc = fp4_rt_kv_load(rt, seq, load_path, &e) ? -1 : 0;
    else if (!rc)
        rc = fp4_rt_step(rt, cols, T_PRE, lg, &e) ? -1 : 0;
    if (!rc && kv_path) rc = fp4_rt_kv_save(rt, seq, kv_path, &e) ? -1 : 0;
    int32_t next = 7;
    for (int t = T_PRE; t < T_ALL && !rc; t++) {
        fp4_rt_tok c = {seq, next, 1};
        rc = fp4_rt_step(rt, &c, 1, lg + t * V, &e) ? -1 : 0;
        int64_t best = 0;
        for (int64_t v = 1; v < V; v++)
            if (lg[t * V + v] > lg[t * V + best]) best = v;
        next = (int32_t)best;
    }
    if (rc) fprintf(stderr, "run tp %d: %s (%s)\n", tp, e.msg, e.rule);
    fp4_rt_free(rt);
    return rc;
}

/* the largest |a - b| over all rows, each relative to (max |logit| of a's row + 1) */
static double native_worst(const float *a, const float *b, int64_t V) {
    double worst = 0;
    for (int t = 0; t < T_ALL; t++) {
        double mx = 0;
        for (int64_t v = 0; v < V; v++)
            mx = fmax(mx, fabs(a[t * V + v]));
        for (int64_t v = 0; v < V; v++)
            worst = fmax(worst, fabs((double)b[t * V + v] - a[t * V + v]) / (mx + 1));
    }
    return worst;
}

static int same_file(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa && fb;
    for (int ca = 0, cb = 0; same && ca != EOF;) {
        ca = fgetc(fa), cb = fgetc(fb);
        same = ca == cb;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

/* a native snapshot belongs to its split: native mode sums the ranks' partial outputs in rank
 * order, so --tp 2's state is not --tp 3's (kv.identity); exact state is the same at any --tp */
static void native_identity(const fp4_model *m, const char *dir) {
    char path[700];
    snprintf(path, sizeof path, "%s/native2.kv", dir);
    fp4_rt *a = NULL, *b = NULL;
    fp4_error e;
    fp4_rt_opts o = {0};
    o.mode = FP4_MODE_NATIVE, o.tp = 2, o.n_ctx = 32;
    int32_t sa, sb;
    CHECK_OK(fp4_rt_create(m, &o, &a, &e));
    CHECK_OK(fp4_rt_seq_open(a, &sa));
    fp4_rt_tok c = {sa, 5, 0};
    CHECK_OK(fp4_rt_step(a, &c, 1, NULL, &e));
    CHECK_OK(fp4_rt_kv_save(a, sa, path, &e));
    o.tp = 3;
    CHECK_OK(fp4_rt_create(m, &o, &b, &e));
    CHECK_OK(fp4_rt_seq_open(b, &sb));
    CHECK(fp4_rt_kv_load(b, sb, path, &e) == FP4_ERR_FORMAT && !strcmp(e.rule, "kv.identity"));
    fp4_rt_free(a), fp4_rt_free(b);
    remove(path);
}

static void split_model(const char *type, int experts) {
    /* 48 query heads of 64 over 12 KV heads, ffn 3072: at 2, 3 and 4 ranks every shard of o's and
     * down's input is a multiple of 256 */
    rtfx_spec s = experts ? rtfx_moe(type) : rtfx_default(type);
    s.heads = 48, s.kv_heads = 12, s.head_dim = 64, s.explicit_head_dim = 1, s.ffn = 3072,
    s.layers = experts                  ? 3
               : !strcmp(type, "llama") ? 2
                                        : 1;
    s.ctx = 32;
    if (!strcmp(type, "mixtral")) s.ffn = 256; /* Mixtral's intermediate_size is its experts' width */
    char dir[600], bf[700], nv[700], kv0[700], kvn[700];
    snprintf(dir, sizeof dir, "%s/%s", tmp, type);
    rtfx_write_pair(dir, &s, 7, bf, nv, sizeof bf);
    fp4_model *m;
    fp4_error e;
    CHECK_OK(fp4_model_open(nv, NULL, &m, &e));
    static float ref[T_ALL * MAX_V], got[T_ALL * MAX_V], nref[T_ALL * MAX_V];
    const int64_t V = s.vocab, nl = T_ALL * V;
    snprintf(kv0, sizeof kv0, "%s/plain.kv", dir);
    CHECK(run(m, FP4_MODE_EXACT, 1, ref, kv0, NULL) == 0);
    CHECK(run(m, FP4_MODE_NATIVE, 1, nref, NULL, NULL) == 0);
    for (int tp = 2; tp <= 4; tp++) {
        snprintf(kvn, sizeof kvn, "%s/tp%d.kv", dir, tp);
        memset(got, 0xff, sizeof got);
        CHECK(run(m, FP4_MODE_EXACT, tp, got, kvn, NULL) == 0);
        CHECK_MSG(!memcmp(ref, got, sizeof(float) * (size_t)nl), "%s --tp %d exact: logits differ", type, tp);
        CHECK_MSG(same_file(kv0, kvn), "%s --tp %d: KV snapshot differs", type, tp);
        /* the unsplit engine's snapshot, continued on the split one */
        memcpy(got, ref, sizeof(float) * (size_t)(T_PRE * V));
        CHECK(run(m, FP4_MODE_EXACT, tp, got, NULL, kv0) == 0);
        CHECK_MSG(!memcmp(ref, got, sizeof(float) * (size_t)nl), "%s --tp %d: continued snapshot differs",
                  type, tp);
        CHECK(run(m, FP4_MODE_NATIVE, tp, got, NULL, NULL) == 0);
        const double worst = native_worst(nref, got, V);
        CHECK_MSG(worst <= NATIVE_TOL, "%s --tp %d native: %g of the row's scale", type, tp, worst);
        remove(kvn);
    }
    remove(kv0);
    if (!strcmp(type, "llama")) native_identity(m, dir);
    fp4_model_close(m);
}

static void refused(const fp4_model *m, fp4_mode mode, fp4_device dev, int tp, const char *rule) {
    fp4_rt_opts o = {0};
    o.mode = mode, o.device = dev, o.tp = tp, o.n_ctx = 32;
    fp4_rt *rt = NULL;
    fp4_error e;
    fp4_status st = fp4_rt_create(m, &o, &rt, &e);
    CHECK_MSG(st != FP4_OK && !strcmp(e.rule, rule), "--tp %d: %s rule %s '%s' (want %s)", tp,
              fp4_status_str(st), e.rule, e.msg, rule);
    fp4_rt_free(rt);
}

static void refusals(void) {
    rtfx_spec s = rtfx_default("llama"); /* the tiny shape: 4 heads of 64 over 2 KV heads */
    s.ctx = 32;
    char dir[600], bf[700], nv[700];
    snprintf(dir, sizeof dir, "%s/tiny", tmp);
    rtfx_write_pair(dir, &s, 3, bf, nv, sizeof bf);
    fp4_model *m, *mb;
    fp4_error e;
    CHECK_OK(fp4_model_open(nv, NULL, &m, &e));
    CHECK_OK(fp4_model_open(bf, NULL, &mb, &e));
    refused(m, FP4_MODE_EXACT, FP4_DEVICE_CPU, 3, "tp.heads");
    refused(m, FP4_MODE_NATIVE, FP4_DEVICE_CPU, 4, "tp.heads");
    refused(m, FP4_MODE_EXACT, FP4_DEVICE_CPU, 2, "tp.exact-split"); /* o's shards are 128 wide */
    refused(mb, FP4_MODE_EXACT, FP4_DEVICE_CPU, 2, "tp.exact-route");
    refused(m, FP4_MODE_EXACT, FP4_DEVICE_CUDA, 2, "route.tp-cuda");
    refused(m, FP4_MODE_NATIVE, FP4_DEVICE_CPU, 1000, "tp.ranks");
    /* what exact mode refuses, native mode runs: within NATIVE_TOL of the unsplit run */
    static float a[T_ALL * MAX_V], b[T_ALL * MAX_V];
    CHECK(run(mb, FP4_MODE_NATIVE, 2, b, NULL, NULL) == 0); /* bf16: native splits what exact refuses */
    CHECK(run(m, FP4_MODE_NATIVE, 1, a, NULL, NULL) == 0 && run(m, FP4_MODE_NATIVE, 2, b, NULL, NULL) == 0);
    double worst = native_worst(a, b, s.vocab);
    CHECK_MSG(worst <= NATIVE_TOL, "tiny native --tp 2: %g of the row's scale", worst);
    fp4_model_close(m);
    fp4_model_close(mb);
    /* the tiny-moe shape (the same heads, 8 experts): refused exact, native within NATIVE_TOL */
    rtfx_spec q = rtfx_moe("qwen3_moe");
    q.ctx = 32;
    snprintf(dir, sizeof dir, "%s/tiny-moe", tmp);
    rtfx_write_pair(dir, &q, 5, bf, nv, sizeof bf);
    CHECK_OK(fp4_model_open(nv, NULL, &m, &e));
    refused(m, FP4_MODE_EXACT, FP4_DEVICE_CPU, 2, "tp.exact-split");
    refused(m, FP4_MODE_NATIVE, FP4_DEVICE_CPU, 3, "tp.heads");
    CHECK(run(m, FP4_MODE_NATIVE, 1, a, NULL, NULL) == 0 && run(m, FP4_MODE_NATIVE, 2, b, NULL, NULL) == 0);
    worst = native_worst(a, b, q.vocab);
    CHECK_MSG(worst <= NATIVE_TOL, "tiny-moe native --tp 2: %g of the row's scale", worst);
    fp4_model_close(m);
}

int main(void) {
    snprintf(tmp, sizeof tmp, "%s/fp4lane-rttp-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) return perror("mkdtemp"), 1;
    refusals();
    split_model("llama", 0);
    split_model("qwen2", 0);
    split_model("qwen3", 0);
    split_model("qwen3_moe", 1);
    split_model("mixtral", 1);
    rtfx_rmtree(tmp);
    return check_report();
}
