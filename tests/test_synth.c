/* test_synth.c — fp4_synth_checkpoint: real shapes (parameter counts of the published models),
 * the tiny checkpoint loads and its config parses, the promised statistics hold, the bytes depend
 * on the seed alone (not on threads), and the output rules (refuse, build beside, rename). */
#include "check.h"
#include "fp4lane.h"
#include "fp4lane_synth.h"
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char base[256];

static void path_in(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", base, name); }

static void rm_tree(const char *dir) { /* only directories this test made, one level deep */
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[600];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat sb;
        if (!lstat(p, &sb) && S_ISDIR(sb.st_mode)) rm_tree(p);
        else unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

static int n_entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

/* check_slurp's size as a long, -1 when the file cannot be read */
static long file_bytes(const char *p, unsigned char **data) {
    size_t n = 0;
    *data = check_slurp(p, &n);
    return *data ? (long)n : -1;
}

static int same_file(const char *a, const char *b) {
    unsigned char *x = NULL, *y = NULL;
    long na = file_bytes(a, &x), nb = file_bytes(b, &y);
    int same = na > 0 && na == nb && !memcmp(x, y, (size_t)na);
    free(x);
    free(y);
    return same;
}

static void test_names_and_sizes(void) {
    CHECK(!strcmp(fp4_synth_shape_name(0), "tiny"));
    CHECK(!strcmp(fp4_synth_shape_name(4), "llama-160m"));
    CHECK(!strcmp(fp4_synth_shape_name(5), "tiny-moe") && !strcmp(fp4_synth_shape_name(6), "qwen3-30b-a3b"));
    CHECK(!strcmp(fp4_synth_shape_name(7), "tiny-gemma3") && !strcmp(fp4_synth_shape_name(8), "gemma3-27b"));
    CHECK(!strcmp(fp4_synth_shape_name(9), "tiny-moe16") && !strcmp(fp4_synth_shape_name(10), "small-moe"));
    CHECK(!strcmp(fp4_synth_shape_name(11), "tiny-deepseek") &&
          !strcmp(fp4_synth_shape_name(12), "deepseek-v3"));
    CHECK(!strcmp(fp4_synth_shape_name(13), "qwen3-30b-a3b-l8"));
    CHECK(!strcmp(fp4_synth_shape_name(14), "tiny-deepseek-nolora"));
    CHECK(fp4_synth_shape_name(15) == NULL && fp4_synth_shape_name(-1) == NULL);
    CHECK(!strcmp(fp4_synth_arch_name(1), "qwen3") && !strcmp(fp4_synth_arch_name(2), "qwen3-moe") &&
          !strcmp(fp4_synth_arch_name(3), "mixtral") && !strcmp(fp4_synth_arch_name(4), "gemma3") &&
          !strcmp(fp4_synth_arch_name(5), "deepseek-v3") && fp4_synth_arch_name(6) == NULL);
    CHECK(!strcmp(fp4_synth_shape_arch("gemma3-27b"), "gemma3"));
    CHECK(!strcmp(fp4_synth_shape_arch("qwen3-30b-a3b"), "qwen3-moe"));
    CHECK(!strcmp(fp4_synth_shape_arch("qwen3-8b"), "qwen3") &&
          !strcmp(fp4_synth_shape_arch("llama3-70b"), "llama"));
    CHECK(fp4_synth_shape_arch("gpt2") == NULL);
    /* the published parameter counts, 2 bytes each */
    static const struct { const char *shape; uint64_t params;
    } want[] = {{"llama3-8b", 8030261248ull},
                {"qwen3-8b", 8190735360ull},
                {"llama3-70b", 70553706496ull},
                {"tiny", 1443072ull},
                {"llama-160m", 162417408ull}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        fp4_synth_opts o = {.shape = want[i].shape};
        uint64_t b = 0;
        fp4_error e;
        CHECK_OK(fp4_synth_data_bytes(&o, &b, &e));
        CHECK_MSG(b == 2 * want[i].params, "%s: %llu bytes", want[i].shape, (unsigned long long)b);
    }
    fp4_synth_opts q = {.shape = "tiny", .arch = "qwen3"};
    uint64_t b = 0;
    fp4_error e;
    CHECK_OK(fp4_synth_data_bytes(&q, &b, &e));
    CHECK(b == 2 * (1443072ull + 2 * 2 * 64)); /* + q_norm, k_norm per layer */
    fp4_synth_opts bad = {.shape = "llama3-9b"};
    CHECK(fp4_synth_data_bytes(&bad, &b, &e) == FP4_ERR_INVALID_ARG && !strcmp(e.rule, "synth.shape"));
    fp4_synth_opts bad2 = {.shape = "tiny", .arch = "gpt2"};
    CHECK(fp4_synth_data_bytes(&bad2, &b, &e) == FP4_ERR_INVALID_ARG && !strcmp(e.rule, "synth.arch"));
    CHECK(fp4_synth_checkpoint(base, &bad, &e) == FP4_ERR_INVALID_ARG);
    /* n_layers: the shape's widths, its first n layers (gemma3-27b: 5376 wide, 262208 rows of
     * embedding, per layer q/k/v/o, three MLP matrices, four norms and two head norms) */
    fp4_synth_opts g6 = {.shape = "gemma3-27b", .n_layers = 6};
    const uint64_t H = 5376, per = H * (4096 + 2048 + 2048) + 4096 * H + 3 * 21504 * H + 4 * H + 2 * 128;
    CHECK_OK(fp4_synth_data_bytes(&g6, &b, &e));
    CHECK(b == 2 * (262208 * H + 6 * per + H));
    static const int64_t bad_n[] = {63, -1};
    for (size_t i = 0; i < 2; i++) {
        g6.n_layers = bad_n[i];
        CHECK(fp4_synth_data_bytes(&g6, &b, &e) == FP4_ERR_INVALID_ARG && !strcmp(e.rule, "synth.layers"));
        CHECK(fp4_synth_checkpoint(base, &g6, &e) == FP4_ERR_INVALID_ARG && !strcmp(e.rule, "synth.layers"));
    }
}

/* all values of a bf16 tensor as doubles */
static double *values(const fp4_tensor *t, int64_t *rows, int64_t *cols) {
    *cols = t->ne[0];
    *rows = t->n_dims == 2 ? t->ne[1] : 1;
    int64_t n = *rows * *cols;
    double *v = malloc(sizeof *v * (size_t)n);
    for (int64_t i = 0; v && i < n; i++) {
        uint16_t h;
        memcpy(&h, t->data + 2 * i, 2);
        v[i] = fp4_bf16_to_f32(h);
    }
    return v;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The statistics of fp4lane_synth.h, measured on the tiny checkpoint. */
static void check_statistics(fp4_model *m) {
    double s2 = 0, n_bulk = 0, tail4 = 0, tail6 = 0;
    int n_proj = 0, n_norm = 0;
    for (int64_t i = 0; i < fp4_model_n_tensors(m); i++) {
        const fp4_tensor *t = fp4_model_tensor(m, i);
        CHECK(t->type == FP4_TYPE_BF16);
        int64_t rows, cols;
        double *v = values(t, &rows, &cols);
        if (!v) continue;
        int proj = strstr(t->name, "_proj.") != NULL, norm = strstr(t->name, "norm.") != NULL;
        if (norm) { /* 1 + 0.05 t8 */
            double mean = 0, var = 0;
            for (int64_t k = 0; k < cols; k++) mean += v[k] / cols;
            for (int64_t k = 0; k < cols; k++) var += (v[k] - mean) * (v[k] - mean) / cols;
            CHECK_MSG(fabs(mean - 1.0) < 0.015 && sqrt(var) > 0.035 && sqrt(var) < 0.065,
                      "%s: mean %g std %g", t->name, mean, sqrt(var));
            n_norm++;
        } else { /* column RMS: exactly FP4_SYNTH_OUTLIERS outlier columns in a projection, none elsewhere */
            double *crms = calloc((size_t)cols, sizeof *crms),
                   *sorted = malloc(sizeof *sorted * (size_t)cols);
            for (int64_t r = 0; r < rows; r++)
                for (int64_t k = 0; k < cols; k++) crms[k] += v[r * cols + k] * v[r * cols + k] / rows;
            for (int64_t k = 0; k < cols; k++) sorted[k] = crms[k] = sqrt(crms[k]);
            qsort(sorted, (size_t)cols, sizeof *sorted, cmp_double);
            double med = sorted[cols / 2];
            int n_out = 0;
            for (int64_t k = 0; k < cols; k++) n_out += crms[k] > 5.0 * med;
            CHECK_MSG(n_out == (proj ? FP4_SYNTH_OUTLIERS : 0), "%s: %d outlier columns", t->name, n_out);
            if (proj) { /* factors in [10, 50]: the outliers' RMS is 8..60 x the median, the rest below 1.5 x
                         */
                CHECK_MSG(sorted[cols - FP4_SYNTH_OUTLIERS] > 8.0 * med && sorted[cols - 1] < 60.0 * med,
                          "%s: %g %g", t->name, sorted[cols - FP4_SYNTH_OUTLIERS] / med,
                          sorted[cols - 1] / med);
                CHECK(sorted[cols - FP4_SYNTH_OUTLIERS - 1] < 1.5 * med);
                n_proj++;
            }
            for (int64_t r = 0; r < rows; r++) /* the bulk: every value outside outlier columns */
                for (int64_t k = 0; k < cols; k++) {
                    if (crms[k] > 5.0 * med) continue;
                    double x = v[r * cols + k];
                    s2 += x * x, n_bulk++;
                    tail4 += fabs(x) > 4 * FP4_SYNTH_STD, tail6 += fabs(x) > 6 * FP4_SYNTH_STD;
                }
            free(crms);
            free(sorted);
        }
        free(v);
    }
    CHECK_EQ_INT(n_proj, 14);
    CHECK_EQ_INT(n_norm, 5);
    double sd = sqrt(s2 / n_bulk), p4 = tail4 / n_bulk, p6 = tail6 / n_bulk;
    printf("  tiny bulk: %.0f values, std %.5f, P(|x|>4sd) %.2e (Gaussian 6.3e-05, t8 1.7e-03), P(|x|>6sd) "
           "%.2e (Gaussian 2.0e-09)\n",
           n_bulk, sd, p4, p6);
    CHECK_MSG(fabs(sd - FP4_SYNTH_STD) < 0.0005, "bulk std %g", sd);
    CHECK_MSG(p4 > 1.0e-3 && p4 < 2.5e-3, "tail beyond 4 sd %g", p4); /* heavy tails: ~27x Gaussian */
    CHECK_MSG(p6 > 2.0e-5, "tail beyond 6 sd %g", p6);                 /* Gaussian would give ~0 */
}

static void test_tiny_loads(void) {
    char out[300];
    path_in(out, sizeof out, "tiny");
    fp4_synth_opts o = {.shape = "tiny", .seed = 3, .n_threads = 2};
    fp4_error e;
    CHECK_OK(fp4_synth_checkpoint(out, &o, &e));
    CHECK_EQ_INT(n_entries(base), 1); /* no temporary left beside it */
    fp4_model *m = NULL;
    CHECK_OK(fp4_model_open(out, NULL, &m, &e));
    if (!m) return;
    CHECK_EQ_INT(fp4_model_n_tensors(m), 21);
    CHECK(fp4_model_weight_precision(m) == FP4_WP_BF16);
    const fp4_tensor *k = fp4_model_find(m, "model.layers.1.self_attn.k_proj.weight");
    CHECK(k && k->n_dims == 2 && k->ne[0] == 256 && k->ne[1] == 128);
    const fp4_tensor *h = fp4_model_find(m, "lm_head.weight");
    CHECK(h && h->ne[0] == 256 && h->ne[1] == 512);
    CHECK(fp4_model_find(m, "model.layers.0.self_attn.q_norm.weight") == NULL);
    const char *cfg = fp4_model_config_json(m);
    json_error_t je;
    json_t *j = cfg ? json_loads(cfg, 0, &je) : NULL;
    CHECK(j != NULL);
    if (j) {
        CHECK_EQ_INT(json_integer_value(json_object_get(j, "hidden_size")), 256);
        CHECK_EQ_INT(json_integer_value(json_object_get(j, "num_key_value_heads")), 2);
        CHECK_EQ_INT(json_integer_value(json_object_get(j, "head_dim")), 64);
        CHECK(!strcmp(json_string_value(json_object_get(j, "model_type")), "llama"));
        CHECK(json_real_value(json_object_get(j, "rope_theta")) == 500000.0);
        CHECK(json_real_value(json_object_get(j, "rms_norm_eps")) == 1e-5);
        json_t *rs = json_object_get(j, "rope_scaling");
        CHECK(rs && !strcmp(json_string_value(json_object_get(rs, "rope_type")), "llama3"));
        CHECK(rs && json_real_value(json_object_get(rs, "factor")) == 8.0);
        CHECK(json_is_false(json_object_get(j, "tie_word_embeddings")));
        json_decref(j);
    }
    check_statistics(m);
    fp4_model_close(m);

    /* qwen3: per-head q/k norms, no rope scaling; sharded, the same tensors as one file */
    char q1[300], q2[300];
    path_in(q1, sizeof q1, "qwen3-one");
    path_in(q2, sizeof q2, "qwen3-shards");
    fp4_synth_opts qo = {.shape = "tiny", .arch = "qwen3", .seed = 3};
    CHECK_OK(fp4_synth_checkpoint(q1, &qo, &e));
    qo.max_shard_bytes = 1 << 20, qo.n_threads = 3;
    CHECK_OK(fp4_synth_checkpoint(q2, &qo, &e));
    fp4_model *a = NULL, *b = NULL;
    CHECK_OK(fp4_model_open(q1, NULL, &a, &e));
    CHECK_OK(fp4_model_open(q2, NULL, &b, &e));
    char idx[400];
    snprintf(idx, sizeof idx, "%s/model.safetensors.index.json", q2);
    CHECK(access(idx, R_OK) == 0);
    if (a && b) {
        CHECK_EQ_INT(fp4_model_n_tensors(a), 25);
        CHECK_EQ_INT(fp4_model_n_tensors(b), 25);
        const fp4_tensor *qn = fp4_model_find(a, "model.layers.1.self_attn.q_norm.weight");
        CHECK(qn && qn->n_dims == 1 && qn->ne[0] == 64);
        int same = 1;
        for (int64_t i = 0; i < fp4_model_n_tensors(a); i++) {
            const fp4_tensor *x = fp4_model_tensor(a, i), *y = fp4_model_find(b, x->name);
            same = same && y && x->nbytes == y->nbytes && !memcmp(x->data, y->data, x->nbytes);
        }
        CHECK_MSG(same, "sharded (3 threads) and one-file (all threads) tensors differ");
        const char *cfg2 = fp4_model_config_json(a);
        json_t *j2 = cfg2 ? json_loads(cfg2, 0, &je) : NULL;
        CHECK(j2 && json_is_null(json_object_get(j2, "rope_scaling")) &&
              !strcmp(json_string_value(json_object_get(j2, "model_type")), "qwen3"));
        json_decref(j2);
    }
    fp4_model_close(a);
    fp4_model_close(b);
}

static void test_determinism(void) {
    char a[300], b[300], c[300], fa[400], fb[400], fc[400];
    path_in(a, sizeof a, "seed9-a");
    path_in(b, sizeof b, "seed9-b");
    path_in(c, sizeof c, "seed10");
    fp4_error e;
    fp4_synth_opts o = {.shape = "tiny", .seed = 9, .n_threads = 1};
    CHECK_OK(fp4_synth_checkpoint(a, &o, &e));
    o.n_threads = 4;
    CHECK_OK(fp4_synth_checkpoint(b, &o, &e));
    o.seed = 10;
    CHECK_OK(fp4_synth_checkpoint(c, &o, &e));
    snprintf(fa, sizeof fa, "%s/model.safetensors", a);
    snprintf(fb, sizeof fb, "%s/model.safetensors", b);
    snprintf(fc, sizeof fc, "%s/model.safetensors", c);
    CHECK_MSG(same_file(fa, fb), "same seed, 1 vs 4 threads: bytes differ");
    CHECK_MSG(!same_file(fa, fc), "different seeds: identical bytes");
    snprintf(fa, sizeof fa, "%s/config.json", a);
    snprintf(fc, sizeof fc, "%s/config.json", c);
    CHECK(same_file(fa, fc)); /* the config does not depend on the seed */
    /* and the values differ tensor by tensor, not only in the metadata */
    fp4_model *ma = NULL, *mc = NULL;
    CHECK_OK(fp4_model_open(a, NULL, &ma, &e));
    CHECK_OK(fp4_model_open(c, NULL, &mc, &e));
    int differ = 0;
    for (int64_t i = 0; ma && mc && i < fp4_model_n_tensors(ma); i++) {
        const fp4_tensor *x = fp4_model_tensor(ma, i), *y = fp4_model_find(mc, x->name);
        differ += y && memcmp(x->data, y->data, x->nbytes) != 0;
    }
    CHECK_EQ_INT(differ, 21);
    fp4_model_close(ma);
    fp4_model_close(mc);
}

/* every file of a equal to b's file of that name, and as many files on both sides */
static int same_tree(const char *a, const char *b) {
    DIR *d = opendir(a);
    if (!d) return 0;
    int ok = n_entries(a) > 0 && n_entries(a) == n_entries(b);
    struct dirent *e;
    char fa[600], fb[600];
    while (ok && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(fa, sizeof fa, "%s/%s", a, e->d_name);
        snprintf(fb, sizeof fb, "%s/%s", b, e->d_name);
        ok = same_file(fa, fb);
        if (!ok) fprintf(stderr, "  differs: %s\n", e->d_name);
    }
    closedir(d);
    return ok;
}

/* --to nvfp4 streams: the bytes of synth bf16 then quantize --layout modelopt, for a mixture of
 * experts, a dense shape and Gemma 3 (norms stored as gain - 1), in shards, from any thread count */
static void test_to_nvfp4(void) {
    static const char *const shapes[] = {"tiny-moe", "tiny", "tiny-gemma3"};
    for (int k = 0; k < 3; k++) {
        char bf[300], q[300], nv[300], nv1[300];
        path_in(bf, sizeof bf, "nv-src");
        path_in(q, sizeof q, "nv-quantized");
        path_in(nv, sizeof nv, "nv-direct");
        path_in(nv1, sizeof nv1, "nv-direct-1");
        fp4_error e;
        fp4_synth_opts o = {.shape = shapes[k], .seed = 5, .max_shard_bytes = 1u << 20, .n_threads = 3};
        CHECK_OK(fp4_synth_checkpoint(bf, &o, &e));
        fp4_quantize_opts qo = {.layout = FP4_LAYOUT_MODELOPT, .max_shard_bytes = 1u << 20};
        CHECK_OK(fp4_quantize_checkpoint(bf, q, &qo, &e));
        o.to_nvfp4 = 1;
        CHECK_OK(fp4_synth_checkpoint(nv, &o, &e));
        o.n_threads = 1;
        CHECK_OK(fp4_synth_checkpoint(nv1, &o, &e));
        CHECK_MSG(n_entries(q) > 6, "%s: the output is sharded (%d files)", shapes[k], n_entries(q));
        CHECK_MSG(same_tree(q, nv), "%s: synth --to nvfp4 differs from synth + quantize", shapes[k]);
        CHECK_MSG(same_tree(nv, nv1), "%s: synth --to nvfp4 depends on the thread count", shapes[k]);
        fp4_model *m = NULL;
        CHECK_OK(fp4_model_open(nv, NULL, &m, &e));
        fp4_model_close(m);
        CHECK_EQ_INT(fp4_synth_checkpoint(nv, &o, &e), FP4_ERR_INVALID_ARG); /* exists: refused */
        CHECK(!strcmp(e.rule, "synth.out.exists"));
        rm_tree(bf), rm_tree(q), rm_tree(nv), rm_tree(nv1);
    }
}

static void test_output_rules(void) {
    char out[300], keep[400], file[300];
    fp4_error e;
    fp4_synth_opts o = {.shape = "tiny"};
    /* an existing non-empty directory is refused and left as it was */
    path_in(out, sizeof out, "occupied");
    mkdir(out, 0777);
    snprintf(keep, sizeof keep, "%s/mine.txt", out);
    FILE *f = fopen(keep, "w");
    if (f) fputs("keep", f), fclose(f);
    int before = n_entries(base);
    CHECK(fp4_synth_checkpoint(out, &o, &e) == FP4_ERR_INVALID_ARG && !strcmp(e.rule, "synth.out.exists"));
    CHECK_EQ_INT(n_entries(out), 1);
    CHECK(access(keep, R_OK) == 0);
    CHECK_EQ_INT(n_entries(base), before);
    /* so is an existing file */
    path_in(file, sizeof file, "a-file");
    f = fopen(file, "w");
    if (f) fclose(f);
    CHECK(fp4_synth_checkpoint(file, &o, &e) == FP4_ERR_INVALID_ARG && !strcmp(e.rule, "synth.out.exists"));
    /* an existing empty directory is filled (replaced by the finished one) */
    path_in(out, sizeof out, "empty");
    mkdir(out, 0777);
    CHECK_OK(fp4_synth_checkpoint(out, &o, &e));
    CHECK_EQ_INT(n_entries(out), 4); /* config, tokenizer.json, tokenizer_config.json, model.safetensors */
    /* a trailing slash names the same directory */
    char slash[320];
    path_in(out, sizeof out, "slash");
    snprintf(slash, sizeof slash, "%s/", out);
    CHECK_OK(fp4_synth_checkpoint(slash, &o, &e));
    CHECK_EQ_INT(n_entries(out), 4);
    /* missing parents are created (issue 13); a parent that cannot be (a component is a regular
     * file): refused, nothing made */
    before = n_entries(base);
    path_in(out, sizeof out, "no/such/dir");
    CHECK_OK(fp4_synth_checkpoint(out, &o, &e));
    CHECK_EQ_INT(n_entries(out), 4);
    CHECK_EQ_INT(n_entries(base), before + 1);
    path_in(out, sizeof out, "no/such/dir/config.json/below");
    CHECK(fp4_synth_checkpoint(out, &o, &e) == FP4_ERR_IO);
    path_in(out, sizeof out, "no/such/dir");
    CHECK_EQ_INT(n_entries(out), 4);
    CHECK_EQ_INT(n_entries(base), before + 1);
    CHECK(fp4_synth_checkpoint(NULL, &o, &e) == FP4_ERR_INVALID_ARG);
    CHECK(fp4_synth_checkpoint(out, NULL, &e) == FP4_ERR_INVALID_ARG);
}

/* The verb as a user meets it: exit codes 0 / 1 (refused) / 2 (usage), --json, and the output is a
 * quantize input (synth -> quantize -> validate). */
static int sh(const char *fmt, const char *a, const char *b) {
    char cmd[1600], bin[512];
    snprintf(bin, sizeof bin, "%s/fp4lane", getenv("FP4_BUILD") ? getenv("FP4_BUILD") : "build");
    int n = snprintf(cmd, sizeof cmd, "%s ", bin);
    snprintf(cmd + n, sizeof cmd - (size_t)n, fmt, a, b);
    int rc = system(cmd);
    return rc == -1 || !WIFEXITED(rc) ? -1 : WEXITSTATUS(rc);
}

static void test_cli(void) {
    char out[300], q[300], log[300];
    path_in(out, sizeof out, "cli");
    path_in(q, sizeof q, "cli-nvfp4");
    path_in(log, sizeof log, "cli.log");
    CHECK_EQ_INT(sh("synth %s%s >/dev/null 2>&1", out, ""), 2);                      /* no --shape */
    CHECK_EQ_INT(sh("synth %s --shape llama3-9b%s >/dev/null 2>&1", out, ""), 2);    /* unknown shape */
    CHECK_EQ_INT(sh("synth %s --shape tiny --seed x%s >/dev/null 2>&1", out, ""), 2);
    CHECK_EQ_INT(sh("synth %s --shape tiny --bogus%s >/dev/null 2>&1", out, ""), 2);
    CHECK_EQ_INT(sh("synth %s --shape tiny --layers 0%s >/dev/null 2>&1", out, ""), 2);
    CHECK_EQ_INT(sh("synth %s --shape tiny --layers 2x%s >/dev/null 2>&1", out, ""), 2);
    CHECK_EQ_INT(sh("synth %s --shape tiny --layers 3%s >/dev/null 2>&1", out, ""), 2); /* tiny has 2 */
    CHECK_EQ_INT(sh("synth %s --shape tiny --arch qwen3 --seed 0x2a --json > %s 2>&1", out, log), 0);
    unsigned char *text = NULL;
    long n = file_bytes(log, &text);
    json_error_t je;
    json_t *j = n > 0 ? (text[n] = 0, json_loads((const char *)text, 0, &je)) : NULL;
    CHECK(j && json_integer_value(json_object_get(j, "seed")) == 42 &&
          !strcmp(json_string_value(json_object_get(j, "arch")), "qwen3") &&
          json_integer_value(json_object_get(j, "bytes")) == 2 * 1443328);
    json_decref(j);
    free(text);
    CHECK_EQ_INT(sh("synth %s --shape tiny > %s 2>&1", out, log), 1); /* exists: refused */
    text = NULL;
    n = file_bytes(log, &text);
    CHECK(n > 0 && (text[n] = 0, strstr((const char *)text, "synth.out.exists") != NULL));
    free(text);
    CHECK_EQ_INT(sh("quantize %s %s --layout modelopt >/dev/null 2>&1", out, q), 0);
    CHECK_EQ_INT(sh("validate %s%s > /dev/null 2>&1", q, ""), 0);
    CHECK_EQ_INT(sh("help synth%s%s >/dev/null", "", ""), 0);
    CHECK_EQ_INT(sh("synth %s-x --shape tiny --to fp8%s >/dev/null 2>&1", out, ""), 2);
    CHECK_EQ_INT(sh("synth %s-nv --shape tiny-moe --to nvfp4 --json > %s 2>&1", out, log), 0);
    text = NULL;
    n = file_bytes(log, &text);
    CHECK(n > 0 && (text[n] = 0, strstr((const char *)text, "\"to\":\"nvfp4\"") != NULL));
    free(text);
    CHECK_EQ_INT(sh("validate %s-nv > /dev/null 2>&1%s", out, ""), 0);
}

int main(void) {
    const char *td = getenv("TMPDIR");
    snprintf(base, sizeof base, "%s/fp4lane-test-synth-XXXXXX", td && *td && strlen(td) < 200 ? td : "/tmp");
    if (!mkdtemp(base)) return perror("mkdtemp"), 1;
    test_names_and_sizes();
    test_tiny_loads();
    test_determinism();
    test_output_rules();
    test_to_nvfp4();
    test_cli();
    rm_tree(base);
    return check_report();
}
