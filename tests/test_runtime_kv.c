/* test_runtime_kv.c — the KV cache: a snapshot saved after a prefix and loaded into a fresh engine
 * continues to the same bits as an uninterrupted run; a snapshot of another identity (mode, model)
 * is refused, so are truncated, corrupted and padded ones; positions past the context and bad
 * tokens are clear errors that compute nothing; the samplers are deterministic. */
#include "check.h"
#include "rt_fixture.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>
#include <openssl/evp.h>

static char tmp[512];
enum { N = 10, SPLIT = 6 };
static const int32_t ids[N] = {1, 30, 31, 200, 7, 7, 64, 128, 256, 3};

static fp4_rt *engine(const fp4_model *m, fp4_mode mode, int64_t n_ctx) {
    fp4_rt_opts o = {.mode = mode, .n_ctx = n_ctx, .n_threads = 2};
    fp4_rt *rt = NULL;
    fp4_error e;
    CHECK_OK(fp4_rt_create(m, &o, &rt, &e));
    return rt;
}

static void feed(fp4_rt *rt, int32_t s, const int32_t *t, int n, float *lg) {
    fp4_rt_tok c[32];
    fp4_error e;
    for (int i = 0; i < n; i++)
        c[i] = (fp4_rt_tok){s, t[i], 1};
    CHECK_OK(fp4_rt_step(rt, c, n, lg, &e));
}

static long file_size(const char *p) {
    struct stat sb;
    return stat(p, &sb) ? -1 : (long)sb.st_size;
}
static void copy_edit(const char *from, const char *to, long trunc, long flip_at, int append) {
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    long i = 0;
    int c;
    while ((c = fgetc(a)) != EOF && (trunc < 0 || i < trunc))
        fputc(i++ == flip_at ? c ^ 0x10 : c, b);
    if (append) fputc(0, b);
    fclose(a), fclose(b);
}

static void test_snapshots(const char *bf, const char *nv) {
    fp4_model *m = NULL, *m2 = NULL;
    fp4_error e;
    CHECK_OK(fp4_model_open(bf, NULL, &m, &e));
    CHECK_OK(fp4_model_open(nv, NULL, &m2, &e));
    if (!m || !m2) return;
    const int64_t V = 320;
    float *full = malloc(sizeof(float) * N * V), *part = malloc(sizeof(float) * N * V);
    fp4_rt *rt = engine(m, FP4_MODE_EXACT, 32);
    int32_t s;
    CHECK_OK(fp4_rt_seq_open(rt, &s));
    feed(rt, s, ids, N, full);
    fp4_rt_free(rt);
    /* prefix, save, fresh engine, load, continue */
    char snap[600], bad[600];
    snprintf(snap, sizeof snap, "%s/prefix.kv", tmp);
    snprintf(bad, sizeof bad, "%s/bad.kv", tmp);
    rt = engine(m, FP4_MODE_EXACT, 32);
    CHECK_OK(fp4_rt_seq_open(rt, &s));
    feed(rt, s, ids, SPLIT, part);
    CHECK_OK(fp4_rt_kv_save(rt, s, snap, &e));
    CHECK(strlen(fp4_rt_identity(rt)) == 64);
    fp4_rt_free(rt);
    /* nothing but the snapshot was left in the directory (temporary name renamed) */
    DIR *dir = opendir(tmp);
    int stray = 0;
    for (struct dirent *d; dir && (d = readdir(dir));)
        stray += strstr(d->d_name, ".tmp.") != NULL || strstr(d->d_name, ".fp4lane-tmp-") != NULL;
    if (dir) closedir(dir);
    CHECK_EQ_INT(stray, 0);
    rt = engine(m, FP4_MODE_EXACT, 32);
    CHECK_OK(fp4_rt_seq_open(rt, &s));
    CHECK_OK(fp4_rt_kv_load(rt, s, snap, &e));
    CHECK_EQ_INT(fp4_rt_seq_pos(rt, s), SPLIT);
    feed(rt, s, ids + SPLIT, N - SPLIT, part + SPLIT * V);
    int64_t d = 0;
    for (int64_t i = 0; i < N * V; i++)
        d += f32_bits(full[i]) != f32_bits(part[i]);
    CHECK_MSG(d == 0, "save/load/continue differs from the uninterrupted run in %lld logits", (long long)d);
    /* loading into a sequence that is not empty */
    CHECK(fp4_rt_kv_load(rt, s, snap, &e) == FP4_ERR_INVALID_ARG && !strcmp(e.rule, "kv.seq"));
    fp4_rt_free(rt);
    /* identity: native mode, another model */
    rt = engine(m, FP4_MODE_NATIVE, 32);
    CHECK_OK(fp4_rt_seq_open(rt, &s));
    CHECK(fp4_rt_kv_load(rt, s, snap, &e) == FP4_ERR_FORMAT && !strcmp(e.rule, "kv.identity"));
    CHECK_EQ_INT(fp4_rt_seq_pos(rt, s), 0);
    fp4_rt_free(rt);
    rt = engine(m2, FP4_MODE_EXACT, 32);
    CHECK_OK(fp4_rt_seq_open(rt, &s));
    CHECK(fp4_rt_kv_load(rt, s, snap, &e) == FP4_ERR_FORMAT && !strcmp(e.rule, "kv.identity"));
    fp4_rt_free(rt);
    /* damaged files */
    rt = engine(m, FP4_MODE_EXACT, 32);
    CHECK_OK(fp4_rt_seq_open(rt, &s));
    const long size = file_size(snap);
    CHECK(size > 200);
    copy_edit(snap, bad, size - 7, -1, 0);
    CHECK(fp4_rt_kv_load(rt, s, bad, &e) == FP4_ERR_TRUNCATED && !strcmp(e.rule, "kv.truncated"));
    copy_edit(snap, bad, 40, -1, 0);
    CHECK(fp4_rt_kv_load(rt, s, bad, &e) == FP4_ERR_TRUNCATED);
    copy_edit(snap, bad, -1, size / 2, 0);
    CHECK(fp4_rt_kv_load(rt, s, bad, &e) == FP4_ERR_FORMAT && !strcmp(e.rule, "kv.checksum"));
    copy_edit(snap, bad, -1, 9, 0); /* inside the identity: the checksum sees it first */
    CHECK(fp4_rt_kv_load(rt, s, bad, &e) == FP4_ERR_FORMAT && !strcmp(e.rule, "kv.checksum"));
    copy_edit(snap, bad, -1, -1, 1);
    CHECK(fp4_rt_kv_load(rt, s, bad, &e) == FP4_ERR_FORMAT && !strcmp(e.rule, "kv.trailing"));
    copy_edit(snap, bad, -1, 0, 0);
    CHECK(fp4_rt_kv_load(rt, s, bad, &e) == FP4_ERR_FORMAT && !strcmp(e.rule, "kv.magic"));
    CHECK(fp4_rt_kv_load(rt, s, "/nonexistent/x.kv", &e) == FP4_ERR_IO);
    CHECK_EQ_INT(fp4_rt_seq_pos(rt, s), 0); /* nothing was loaded */
    fp4_rt_free(rt);
    /* a snapshot longer than this engine's context */
    rt = engine(m, FP4_MODE_EXACT, 4);
    CHECK_OK(fp4_rt_seq_open(rt, &s));
    CHECK(fp4_rt_kv_load(rt, s, snap, &e) == FP4_ERR_LIMIT && !strcmp(e.rule, "rt.context"));
    fp4_rt_free(rt);
    /* hostile sizes: a sparse 6 GiB file behind the snapshot's header (this engine's largest
     * snapshot is far smaller) is refused from its header alone, by what the header says, without
     * its body being read or allocated (the whole-file path would ask for 6 GiB: FP4_ERR_NOMEM or
     * a 6 GiB read, and kv.truncated/kv.checksum); each edit below is a header the check must
     * tell apart */
    rt = engine(m, FP4_MODE_EXACT, 32);
    CHECK_OK(fp4_rt_seq_open(rt, &s));
    static const struct {
        int at, width;
        uint64_t value;
        const char *rule;
    } huge[] = {{-1, 0, 0, "kv.trailing"}, /* the header as saved: the body trails */
                {0, 1, 'X', "kv.magic"},   /* not a snapshot */
                {72, 4, 7, "kv.shape"},    /* layers of another model */
                {76, 4, 3, "kv.shape"},    /* kv_dim of another model */
                {80, 8, 33, "rt.context"}, /* 33 positions, n_ctx 32 */
                {80, 8, UINT64_MAX, "rt.context"}};
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        copy_edit(snap, bad, 88, -1, 0);
        FILE *f = fopen(bad, "r+b");
        CHECK(f != NULL);
        if (!f) break;
        if (huge[i].at >= 0) {
            uint8_t b[8];
            for (int k = 0; k < 8; k++)
                b[k] = (uint8_t)(huge[i].value >> (8 * k));
            CHECK(fseek(f, huge[i].at, SEEK_SET) == 0 &&
                  fwrite(b, 1, (size_t)huge[i].width, f) == (size_t)huge[i].width);
        }
        CHECK(fflush(f) == 0 && ftruncate(fileno(f), (off_t)6 << 30) == 0);
        fclose(f);
        const fp4_status st = fp4_rt_kv_load(rt, s, bad, &e);
        CHECK_MSG(st != FP4_OK && !strcmp(e.rule, huge[i].rule), "huge file %zu: rule %s, want %s", i, e.rule,
                  huge[i].rule);
        CHECK_EQ_INT(fp4_rt_seq_pos(rt, s), 0);
    }
    remove(bad);
    fp4_rt_free(rt);
    free(full), free(part);
    fp4_model_close(m), fp4_model_close(m2);
}

static void test_limits(const char *bf) {
    fp4_model *m = NULL;
    fp4_error e;
    CHECK_OK(fp4_model_open(bf, NULL, &m, &e));
    if (!m) return;
    fp4_rt *rt = engine(m, FP4_MODE_EXACT, 8);
    int32_t s, s2;
    CHECK_OK(fp4_rt_seq_open(rt, &s));
    CHECK(fp4_rt_seq_open(rt, &s2) == FP4_ERR_LIMIT); /* max_seqs 1 */
    float *lg = malloc(sizeof(float) * 16 * 320);
    fp4_rt_tok c[16];
    for (int i = 0; i < 9; i++)
        c[i] = (fp4_rt_tok){s, 5, 1};
    CHECK(fp4_rt_step(rt, c, 9, lg, &e) == FP4_ERR_LIMIT && !strcmp(e.rule, "rt.context") &&
          strstr(e.msg, "8"));
    CHECK_EQ_INT(fp4_rt_seq_pos(rt, s), 0); /* refused before anything ran */
    CHECK_OK(fp4_rt_step(rt, c, 8, lg, &e));
    CHECK(fp4_rt_step(rt, c, 1, lg, &e) == FP4_ERR_LIMIT);
    CHECK_EQ_INT(fp4_rt_seq_pos(rt, s), 8);
    fp4_rt_seq_close(rt, s);
    CHECK_OK(fp4_rt_seq_open(rt, &s));
    c[0] = (fp4_rt_tok){s, 320, 1};
    CHECK(fp4_rt_step(rt, c, 1, lg, &e) == FP4_ERR_INVALID_ARG && strstr(e.msg, "320"));
    c[0] = (fp4_rt_tok){s, -1, 1};
    CHECK(fp4_rt_step(rt, c, 1, lg, &e) == FP4_ERR_INVALID_ARG);
    c[0] = (fp4_rt_tok){s + 1, 3, 1};
    CHECK(fp4_rt_step(rt, c, 1, lg, &e) == FP4_ERR_INVALID_ARG && !strcmp(e.rule, "rt.seq"));
    c[0] = (fp4_rt_tok){s, 3, 1};
    CHECK(fp4_rt_step(rt, c, 1, NULL, &e) == FP4_ERR_INVALID_ARG);
    CHECK_EQ_INT(fp4_rt_seq_pos(rt, s), 0);
    free(lg);
    fp4_rt_free(rt);
    fp4_rt_opts o = {.n_ctx = 65}; /* the model says 64 */
    CHECK(fp4_rt_create(m, &o, &rt, &e) == FP4_ERR_LIMIT && !strcmp(e.rule, "rt.context"));
    fp4_model_close(m);
}

/* an edit of a snapshot, sealed again (its SHA-256 recomputed): what the loader sees is the edit:
 * at byte off, width bytes of value (little-endian); fill_kv: every K/V half set to value */
static void edit_sealed(const char *from, const char *to, long off, int width, uint64_t value, int fill_kv) {
    long n = 0;
    FILE *f = fopen(from, "rb");
    uint8_t *b = malloc(1 << 20);
    if (f) n = (long)fread(b, 1, 1 << 20, f), fclose(f);
    const long kv0 = 96 + 4 * (long)(b[88] | b[89] << 8);
    for (int k = 0; k < width; k++)
        b[off + k] = (uint8_t)(value >> (8 * k));
    for (long i = kv0; fill_kv && i + 1 < n - 32; i += 2)
        b[i] = (uint8_t)value, b[i + 1] = (uint8_t)(value >> 8);
    unsigned int dl = 32;
    EVP_Digest(b, (size_t)(n - 32), b + n - 32, &dl, EVP_sha256(), NULL);
    f = fopen(to, "wb");
    fwrite(b, 1, (size_t)n, f);
    fclose(f);
    free(b);
}

/* the token history of a snapshot (the pending token included) and its refusals; a cache whose
 * values overflow gives NaN logits, refused by the step (rule rt.nonfinite) naming the position */
static void test_history(const char *bf) {
    fp4_model *m = NULL;
    fp4_error e;
    CHECK_OK(fp4_model_open(bf, NULL, &m, &e));
    if (!m) return;
    char snap[600], bad[600];
    snprintf(snap, sizeof snap, "%s/hist.kv", tmp);
    snprintf(bad, sizeof bad, "%s/hist-bad.kv", tmp);
    fp4_rt *rt = engine(m, FP4_MODE_EXACT, 32);
    int32_t s;
    CHECK_OK(fp4_rt_seq_open(rt, &s));
    float *lg = malloc(sizeof(float) * 320 * N);
    feed(rt, s, ids, SPLIT, lg);
    CHECK(fp4_rt_kv_save_tokens(rt, s, snap, ids, 3, &e) == FP4_ERR_INVALID_ARG &&
          !strcmp(e.rule, "kv.tokens"));
    const int32_t oov[SPLIT + 1] = {1, 2, 3, 4, 5, 6, 320};
    CHECK(fp4_rt_kv_save_tokens(rt, s, snap, oov, SPLIT + 1, &e) == FP4_ERR_INVALID_ARG &&
          !strcmp(e.rule, "kv.tokens"));
    CHECK(file_size(snap) < 0);
    CHECK_OK(fp4_rt_kv_save_tokens(rt, s, snap, ids, SPLIT + 1, &e)); /* ids[SPLIT] pending */
    fp4_rt_free(rt);
    rt = engine(m, FP4_MODE_EXACT, 32);
    CHECK_OK(fp4_rt_seq_open(rt, &s));
    int32_t h[40];
    int64_t nh = -1;
    CHECK_OK(fp4_rt_kv_load_tokens(rt, s, snap, h, 40, &nh, &e));
    CHECK(nh == SPLIT + 1 && !memcmp(h, ids, sizeof(int32_t) * (SPLIT + 1)) &&
          fp4_rt_seq_pos(rt, s) == SPLIT);
    fp4_rt_seq_close(rt, s);
    CHECK_OK(fp4_rt_seq_open(rt, &s));
    CHECK(fp4_rt_kv_load_tokens(rt, s, snap, h, 3, &nh, &e) == FP4_ERR_LIMIT && !strcmp(e.rule, "kv.tokens"));
    CHECK_EQ_INT(fp4_rt_seq_pos(rt, s), 0);
    static const struct {
        long off;
        int width;
        uint64_t value;
        const char *rule;
    } edits[] = {{88, 8, SPLIT + 2, "kv.tokens"},   /* more tokens than positions + 1 */
                 {88, 8, 1, "kv.tokens"},           /* fewer than the positions */
                 {96 + 8, 4, 320, "kv.tokens"},     /* an id past the vocabulary */
                 {7, 1, '1', "kv.version"}};        /* FP4LKV01: an older format */
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        edit_sealed(snap, bad, edits[i].off, edits[i].width, edits[i].value, 0);
        const fp4_status st = fp4_rt_kv_load_tokens(rt, s, bad, h, 40, &nh, &e);
        CHECK_MSG(st != FP4_OK && !strcmp(e.rule, edits[i].rule), "edit %zu: rule %s, want %s", i, e.rule,
                  edits[i].rule);
        CHECK_EQ_INT(fp4_rt_seq_pos(rt, s), 0);
    }
    /* a cache of f16 infinities: the attention's scores and the logits are NaN */
    edit_sealed(snap, bad, 0, 0, 0x7C00, 1);
    for (int greedy = 0; greedy < 2; greedy++) {
        fp4_rt_seq_close(rt, s);
        CHECK_OK(fp4_rt_seq_open(rt, &s));
        CHECK_OK(fp4_rt_kv_load(rt, s, bad, &e));
        fp4_rt_tok c = {s, ids[SPLIT], 1};
        int32_t t = -1;
        const fp4_status st = greedy ? fp4_rt_step_greedy(rt, &c, 1, &t, &e) : fp4_rt_step(rt, &c, 1, lg, &e);
        CHECK_MSG(st == FP4_ERR_NONFINITE && !strcmp(e.rule, "rt.nonfinite") && strstr(e.msg, "position 6"),
                  "%s: %s %s %s", greedy ? "greedy" : "logits", fp4_status_str(st), e.rule, e.msg);
    }
    remove(bad);
    free(lg);
    fp4_rt_free(rt);
    fp4_model_close(m);
}

/* the same cache of f16 infinities under the NVFP4 twin: the attention's output is NaN for every
 * head, and the exact A16 contraction's Q8_K pass (SPEC §4 step 1) finds no |x| above 0 in such a
 * super-block, which contributes nothing: the logits are finite, and the step is not refused (the
 * CUDA step must give these bits too: tests/gpu/test_gpu_generate.cu (d)) */
static void test_nonfinite_nvfp4(const char *nv) {
    fp4_model *m = NULL;
    fp4_error e;
    CHECK_OK(fp4_model_open(nv, NULL, &m, &e));
    if (!m) return;
    char snap[600], bad[600];
    snprintf(snap, sizeof snap, "%s/nv-inf.kv", tmp);
    snprintf(bad, sizeof bad, "%s/nv-inf-bad.kv", tmp);
    fp4_rt *rt = engine(m, FP4_MODE_EXACT, 32);
    int32_t s;
    CHECK_OK(fp4_rt_seq_open(rt, &s));
    float *lg = malloc(sizeof(float) * 320 * N);
    feed(rt, s, ids, SPLIT, lg);
    CHECK_OK(fp4_rt_kv_save(rt, s, snap, &e));
    edit_sealed(snap, bad, 0, 0, 0x7C00, 1);
    for (int greedy = 0; greedy < 2; greedy++) {
        fp4_rt_seq_close(rt, s);
        CHECK_OK(fp4_rt_seq_open(rt, &s));
        CHECK_OK(fp4_rt_kv_load(rt, s, bad, &e));
        CHECK_EQ_INT(fp4_rt_seq_pos(rt, s), SPLIT);
        fp4_rt_tok c = {s, ids[SPLIT], 1};
        int32_t t = -1;
        const fp4_status st = greedy ? fp4_rt_step_greedy(rt, &c, 1, &t, &e) : fp4_rt_step(rt, &c, 1, lg, &e);
        CHECK_MSG(st == FP4_OK, "nvfp4 %s: %s %s %s", greedy ? "greedy" : "logits", fp4_status_str(st),
                  e.rule, e.msg);
        int finite = 1;
        for (int64_t i = 0; !greedy && i < fp4_rt_vocab(rt); i++)
            finite &= isfinite(lg[i]) != 0;
        CHECK(finite && (!greedy || (t >= 0 && t < fp4_rt_vocab(rt))));
    }
    remove(snap), remove(bad);
    free(lg);
    fp4_rt_free(rt);
    fp4_model_close(m);
}

/* greedy as defined: NaN as -inf, the first maximum in index order (0 when nothing beats -inf) */
static int32_t ref_greedy(const float *l, int64_t n) {
    int64_t best = 0;
    float bv = l[0] != l[0] ? -INFINITY : l[0];
    for (int64_t i = 1; i < n; i++) {
        const float v = l[i] != l[i] ? -INFINITY : l[i];
        if (v > bv) best = i, bv = v;
    }
    return (int32_t)best;
}

/* the greedy fast path (no penalties) against the definition: random logits with NaNs, -inf, +inf
 * and ties, every length from 1 to 40 and a 128k vocabulary, all-NaN and all -inf rows */
static void test_greedy(void) {
    test_rng r = {1202};
    float *l = malloc(sizeof *l * 128257);
    int bad = 0, n_cases = 0;
    for (int64_t n = 1; n <= 128257; n = n < 40 ? n + 1 : n * 3 + 1) {
        if (n > 128257) n = 128257;
        for (int rep = 0; rep < 40; rep++, n_cases++) {
            for (int64_t i = 0; i < n; i++) {
                const uint64_t x = rng_u64(&r);
                l[i] = (float)(x % 7) - 3.0f; /* many ties */
                if (x % 11 == 0) l[i] = NAN;
                if (x % 13 == 0) l[i] = -INFINITY;
                if (rep == 1) l[i] = NAN;
                if (rep == 2) l[i] = -INFINITY;
                if (rep == 3 && x % 97 == 0) l[i] = INFINITY;
            }
            if (rep == 4) l[n - 1] = 100.0f; /* the maximum in the tail after the 8-wide part */
            fp4_sampler_params p = fp4_sampler_defaults();
            fp4_sampler *s = NULL;
            CHECK_OK(fp4_sampler_create(&p, n, &s));
            bad += fp4_sampler_sample(s, l) != ref_greedy(l, n);
            fp4_sampler_free(s);
        }
        if (n == 128257) break;
    }
    CHECK_MSG(bad == 0, "greedy differs from its definition in %d of %d cases", bad, n_cases);
    free(l);
}

static void test_sampler(void) {
    enum { V = 6 };
    const float l[V] = {0.5f, 2.0f, 2.0f, -1.0f, 1.9f, 0.0f};
    fp4_sampler *s = NULL;
    fp4_sampler_params p = fp4_sampler_defaults();
    CHECK_OK(fp4_sampler_create(&p, V, &s));
    CHECK_EQ_INT(fp4_sampler_sample(s, l), 1); /* ties: the lowest id */
    /* repetition penalty: 1 and 2 seen -> 2.0/2 = 1.0 each, 4 wins */
    fp4_sampler_free(s);
    p.repeat_penalty = 2.0f;
    CHECK_OK(fp4_sampler_create(&p, V, &s));
    fp4_sampler_accept(s, 1), fp4_sampler_accept(s, 2), fp4_sampler_accept(s, 2);
    CHECK_EQ_INT(fp4_sampler_sample(s, l), 4);
    fp4_sampler_free(s);
    p = fp4_sampler_defaults();
    p.presence_penalty = 0.15f;
    CHECK_OK(fp4_sampler_create(&p, V, &s));
    fp4_sampler_accept(s, 1), fp4_sampler_accept(s, 2);
    CHECK_EQ_INT(fp4_sampler_sample(s, l), 4); /* 1.85 < 1.9 */
    fp4_sampler_free(s);
    /* seeded: the same seed gives the same draws, another seed other draws; top-k 1 and a tiny
     * top-p reduce to the argmax, min-p 1 to the tied maxima */
    int32_t a[64], b[64], c[64];
    for (int run = 0; run < 3; run++) {
        p = fp4_sampler_defaults();
        p.temperature = 1.0f;
        p.seed = run == 2 ? 43 : 42;
        CHECK_OK(fp4_sampler_create(&p, V, &s));
        for (int i = 0; i < 64; i++)
            (run == 0 ? a : run == 1 ? b : c)[i] = fp4_sampler_sample(s, l);
        fp4_sampler_free(s);
    }
    CHECK(!memcmp(a, b, sizeof a) && memcmp(a, c, sizeof a));
    const struct {
        int k;
        float p, minp;
    } red[] = {{1, 1.0f, 0}, {0, 0.01f, 0}, {0, 1.0f, 1.0f}};
    for (int r = 0; r < 3; r++) {
        p = fp4_sampler_defaults();
        p.temperature = 1.5f, p.top_k = red[r].k, p.top_p = red[r].p, p.min_p = red[r].minp, p.seed = 9;
        CHECK_OK(fp4_sampler_create(&p, V, &s));
        int ok = 1;
        for (int i = 0; i < 50; i++) {
            int32_t t = fp4_sampler_sample(s, l);
            ok &= t == 1 || (r == 2 && t == 2); /* min-p 1 keeps both tied maxima */
        }
        CHECK(ok);
        fp4_sampler_free(s);
    }
    /* the draws follow softmax(l / T): frequencies within 4 sigma over 40000 draws */
    p = fp4_sampler_defaults();
    p.temperature = 0.7f, p.seed = 1234;
    CHECK_OK(fp4_sampler_create(&p, V, &s));
    int cnt[V] = {0};
    for (int i = 0; i < 40000; i++)
        cnt[fp4_sampler_sample(s, l)]++;
    fp4_sampler_free(s);
    double z = 0, pr[V];
    for (int i = 0; i < V; i++)
        z += (pr[i] = exp(l[i] / 0.7));
    int ok = 1;
    for (int i = 0; i < V; i++) {
        double q = pr[i] / z, sd = sqrt(40000 * q * (1 - q));
        ok &= fabs(cnt[i] - 40000 * q) <= 4 * sd + 1;
    }
    CHECK(ok);
    /* top-k 2 never draws outside the two best */
    p.top_k = 2;
    CHECK_OK(fp4_sampler_create(&p, V, &s));
    ok = 1;
    for (int i = 0; i < 2000; i++) {
        int32_t t = fp4_sampler_sample(s, l);
        ok &= t == 1 || t == 2;
    }
    CHECK(ok);
    fp4_sampler_free(s);
    /* top-k over a large vocabulary with many ties at the cut: exactly the k first of (logit desc,
     * id asc), each of them drawn */
    enum { BV = 1000, K = 10 };
    static float bl[BV];
    test_rng rr = {77};
    for (int i = 0; i < BV; i++)
        bl[i] = (float)(int)(rng_uniform(&rr) * 40.0f) * 0.25f;
    int in_set[BV] = {0}, taken = 0;
    for (float v = 100; taken < K; v -= 0.25f) /* walk the order: values descending, ids ascending */
        for (int i = 0; i < BV && taken < K; i++)
            if (bl[i] == v) in_set[i] = 1, taken++;
    p = fp4_sampler_defaults();
    p.temperature = 1.0f, p.top_k = K, p.seed = 5;
    CHECK_OK(fp4_sampler_create(&p, BV, &s));
    int seen[BV] = {0};
    ok = 1;
    for (int i = 0; i < 5000; i++) {
        int32_t t = fp4_sampler_sample(s, bl);
        ok &= t >= 0 && t < BV && in_set[t];
        if (t >= 0 && t < BV) seen[t] = 1;
    }
    int n_seen = 0;
    for (int i = 0; i < BV; i++)
        n_seen += seen[i];
    CHECK(ok && n_seen == K);
    fp4_sampler_free(s);
    CHECK(fp4_sampler_create(&p, 0, &s) == FP4_ERR_INVALID_ARG);
    p.repeat_penalty = 0;
    CHECK(fp4_sampler_create(&p, V, &s) == FP4_ERR_INVALID_ARG);
    p = fp4_sampler_defaults(), p.temperature = INFINITY;
    CHECK(fp4_sampler_create(&p, V, &s) == FP4_ERR_INVALID_ARG);
    p = fp4_sampler_defaults(), p.top_p = NAN;
    CHECK(fp4_sampler_create(&p, V, &s) == FP4_ERR_INVALID_ARG);
    p = fp4_sampler_defaults(), p.presence_penalty = -INFINITY;
    CHECK(fp4_sampler_create(&p, V, &s) == FP4_ERR_INVALID_ARG);
}

/* fp4_rt_step_greedy: the same tokens a plain greedy sampler picks from fp4_rt_step's logits, for
 * two sequences with columns that do and do not want logits, over several steps; the plain-greedy
 * predicate; the refusals */
static void test_step_greedy(const char *bf) {
    fp4_model *m = NULL;
    fp4_error e;
    CHECK_OK(fp4_model_open(bf, NULL, &m, &e));
    if (!m) return;
    fp4_rt_opts o = {.mode = FP4_MODE_EXACT, .n_ctx = 64, .n_threads = 2, .max_seqs = 2};
    fp4_rt *ra = NULL, *rb = NULL;
    CHECK_OK(fp4_rt_create(m, &o, &ra, &e));
    CHECK_OK(fp4_rt_create(m, &o, &rb, &e));
    const int64_t V = ra ? fp4_rt_vocab(ra) : 1;
    float *lg = malloc(sizeof(float) * (size_t)V * 16);
    fp4_sampler_params p = fp4_sampler_defaults();
    fp4_sampler *smp = NULL;
    CHECK_OK(fp4_sampler_create(&p, V, &smp));
    CHECK(fp4_sampler_is_greedy(smp));
    int32_t sa[2], sb[2];
    int bad = 0, n_tok = 0;
    if (ra && rb) {
        for (int k = 0; k < 2; k++) {
            CHECK_OK(fp4_rt_seq_open(ra, &sa[k]));
            CHECK_OK(fp4_rt_seq_open(rb, &sb[k]));
        }
        for (int step = 0; step < 4; step++) {
            fp4_rt_tok ca[12], cb[12];
            int n = 0, nl = 0;
            for (int k = 0; k < 2; k++)
                for (int j = 0; j < 3 + step; j++, n++) {
                    const int32_t t = (int32_t)((step * 37 + k * 11 + j * 5) % V);
                    const int want = (j + step + k) % 2 == 0 || j == 2 + step;
                    ca[n] = (fp4_rt_tok){sa[k], t, want};
                    cb[n] = (fp4_rt_tok){sb[k], t, want};
                    nl += want;
                }
            int32_t got[12];
            CHECK_OK(fp4_rt_step(ra, ca, n, lg, &e));
            CHECK_OK(fp4_rt_step_greedy(rb, cb, n, got, &e));
            for (int q = 0; q < nl; q++, n_tok++)
                bad += got[q] != fp4_sampler_sample(smp, lg + (int64_t)q * V);
        }
        CHECK_MSG(bad == 0 && n_tok > 20, "step_greedy differs from the sampler in %d of %d", bad, n_tok);
        fp4_rt_tok c = {sb[0], 3, 1};
        CHECK(fp4_rt_step_greedy(rb, &c, 1, NULL, &e) == FP4_ERR_INVALID_ARG);
        c.want_logits = 0;
        CHECK_OK(fp4_rt_step_greedy(rb, &c, 1, NULL, &e)); /* nothing wanted: no buffer needed */
        c = (fp4_rt_tok){sb[0] + 5, 3, 1};
        int32_t t1;
        CHECK(fp4_rt_step_greedy(rb, &c, 1, &t1, &e) == FP4_ERR_INVALID_ARG && !strcmp(e.rule, "rt.seq"));
    }
    fp4_sampler_free(smp);
    p.temperature = 0.7f;
    CHECK_OK(fp4_sampler_create(&p, V, &smp));
    CHECK(!fp4_sampler_is_greedy(smp));
    fp4_sampler_free(smp);
    p = fp4_sampler_defaults();
    p.repeat_penalty = 1.1f;
    CHECK_OK(fp4_sampler_create(&p, V, &smp));
    CHECK(!fp4_sampler_is_greedy(smp) && !fp4_sampler_is_greedy(NULL));
    fp4_sampler_free(smp);
    free(lg);
    fp4_rt_free(ra);
    fp4_rt_free(rb);
    fp4_model_close(m);
}

int main(void) {
    snprintf(tmp, sizeof tmp, "%s/fp4lane-rtkv-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) return perror("mkdtemp"), 1;
    char bf[600], nv[600];
    rtfx_spec s = rtfx_default("llama");
    rtfx_write_pair(tmp, &s, 21, bf, nv, sizeof bf);
    test_snapshots(bf, nv);
    test_limits(bf);
    test_history(bf);
    test_nonfinite_nvfp4(nv);
    test_sampler();
    test_greedy();
    test_step_greedy(bf);
    if (!check_failed) rtfx_rmtree(tmp);
    return check_report();
}
