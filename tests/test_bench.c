/* test_bench.c — fp4lane bench: the statistics and the verdict rule (src/bench/bench_stats.h) on
 * synthetic timings, then one tiny end-to-end run on models/tiny (2 pairs, a few tokens) whose
 * JSON receipt is read back field by field. No speed is asserted anywhere. */
#include "bench/bench_stats.h"
#include "check.h"
#include "fp4lane.h"
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int near(double a, double b) {
    return fabs(a - b) <= 1e-12 * (fabs(a) + fabs(b) + 1);
}

static void test_summary(void) {
    const double x[4] = {2, 4, 4, 6};
    fp4b_summary s;
    CHECK(fp4b_summarize(x, 4, &s) == 0);
    CHECK_EQ_INT(s.n, 4);
    CHECK(near(s.mean, 4.0));
    CHECK(near(s.sd, sqrt(8.0 / 3.0))); /* sample sd: sum of squares 8 over n - 1 = 3 */
    CHECK(near(s.cv, sqrt(8.0 / 3.0) / 4.0));
    CHECK(s.min == 2 && s.max == 6);
    CHECK(fp4b_summarize(x, 1, &s) == 0 && s.sd == 0 && s.cv == 0 && s.mean == 2);
    CHECK(fp4b_summarize(x, 0, &s) == -1);
    const double bad[2] = {1, NAN};
    CHECK(fp4b_summarize(bad, 2, &s) == -1);
}

static void test_verdicts(void) {
    fp4b_result r;
    /* B clearly higher in every pair, noise small: "B faster" */
    const double a1[5] = {100, 101, 99, 100, 100.5}, b1[5] = {120, 121, 119, 120, 120.5};
    CHECK(fp4b_compare(a1, b1, 5, &r) == 0);
    CHECK(r.verdict == FP4B_B_FASTER && !strcmp(fp4b_verdict_text(r.verdict), "B faster"));
    CHECK(near(r.ratio, r.b.mean / r.a.mean));
    CHECK(r.n_b_higher == 5 && r.n_a_higher == 0 && r.n_pairs == 5);
    CHECK(near(r.pair_min, 121.0 / 101.0) && near(r.pair_max, 119.0 / 99.0));
    CHECK(near(r.noise, r.a.cv > r.b.cv ? r.a.cv : r.b.cv));
    /* the same with A and B exchanged: "A faster" */
    CHECK(fp4b_compare(b1, a1, 5, &r) == 0 && r.verdict == FP4B_A_FASTER &&
          !strcmp(fp4b_verdict_text(r.verdict), "A faster"));
    /* the chapter's case: +0.14 % between cells whose CVs are ~0.1 %: parity within noise */
    const double a2[5] = {35.44, 35.48, 35.40, 35.45, 35.43}, b2[5] = {35.49, 35.45, 35.53, 35.50, 35.48};
    CHECK(fp4b_compare(a2, b2, 5, &r) == 0 && r.verdict == FP4B_PARITY &&
          !strcmp(fp4b_verdict_text(r.verdict), "parity within noise"));
    /* every pair agrees in sign but one clears 1 by less than the noise: parity */
    const double a3[5] = {100, 100, 100, 100, 100}, b3[5] = {110, 110, 110, 110, 100.5};
    CHECK(fp4b_compare(a3, b3, 5, &r) == 0 && r.n_b_higher == 5 && r.pair_min < 1 + r.noise &&
          r.verdict == FP4B_PARITY);
    /* one pair disagrees in sign: parity, however large the mean difference */
    const double b4[5] = {150, 150, 150, 150, 99};
    CHECK(fp4b_compare(a3, b4, 5, &r) == 0 && r.ratio > 1.3 && r.n_a_higher == 1 && r.verdict == FP4B_PARITY);
    /* noise larger than the gap: parity (the CVs are ~10 %, the gap 5 %) */
    const double a5[4] = {90, 110, 90, 110}, b5[4] = {95, 115.5, 94.5, 115.5};
    CHECK(fp4b_compare(a5, b5, 4, &r) == 0 && r.pair_min > 1 && r.noise > 0.09 && r.verdict == FP4B_PARITY);
    /* too few pairs: parity even when every pair clears by far */
    const double a6[2] = {100, 100.1}, b6[2] = {200, 200.1};
    CHECK(fp4b_compare(a6, b6, 2, &r) == 0 && r.pair_min > 1.9 && r.verdict == FP4B_PARITY);
    CHECK(fp4b_compare(a6, b6, 1, &r) == 0 && r.verdict == FP4B_PARITY && r.noise == 0);
    /* exactly FP4B_MIN_PAIRS pairs clearing the noise: a directional verdict */
    const double a7[3] = {100, 100, 100}, b7[3] = {150, 151, 149};
    CHECK(fp4b_compare(a7, b7, FP4B_MIN_PAIRS, &r) == 0 && r.verdict == FP4B_B_FASTER);
    /* rejected inputs */
    const double z[3] = {100, 0, 100}, ng[3] = {100, -1, 100}, in[3] = {100, INFINITY, 100};
    CHECK(fp4b_compare(a7, z, 3, &r) == -1 && fp4b_compare(ng, b7, 3, &r) == -1 &&
          fp4b_compare(a7, in, 3, &r) == -1);
    CHECK(fp4b_compare(a7, b7, 0, &r) == -1);
    CHECK(strstr(fp4b_rule_text(), "parity within noise") != NULL);
}

static char bin[512], tmp[512];

static int cli(const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s >'%s/out' 2>'%s/err'", bin, args, tmp, tmp);
    int rc = system(cmd);
    return rc == -1 || !WIFEXITED(rc) ? -1 : WEXITSTATUS(rc);
}

static const char *jstr(json_t *o, const char *k) {
    return json_string_value(json_object_get(o, k));
}

static void test_end_to_end(void) {
    char path[700], args[2000];
    snprintf(path, sizeof path, "%s/receipt.json", tmp);
    snprintf(args, sizeof args,
             "bench models/tiny --a \"--mode exact --threads 1\" --b \"--mode exact --threads 2\" --pairs 2 "
             "--prefix 5 --tokens 3 "
             "--warmup 1 --json %s",
             path);
    CHECK_EQ_INT(cli(args), 0);
    json_error_t je;
    json_t *r = json_load_file(path, 0, &je);
    CHECK_MSG(r != NULL, "%s", je.text);
    if (!r) return;
    CHECK(jstr(r, "schema") && !strcmp(jstr(r, "schema"), "fp4lane.bench/1"));
    CHECK(jstr(r, "command") && strstr(jstr(r, "command"), "fp4lane bench models/tiny") &&
          strstr(jstr(r, "command"), "'--mode exact --threads 2'"));
    CHECK(json_array_size(json_object_get(r, "argv")) == 16);
    CHECK(jstr(r, "fp4lane_version") && !strcmp(jstr(r, "fp4lane_version"), fp4_version()));
    json_t *gc = json_object_get(r, "git_commit");
    CHECK(json_is_null(gc) || (json_is_string(gc) && strlen(json_string_value(gc)) == 40 &&
                               strspn(json_string_value(gc), "0123456789abcdef") == 40));
    const char *d = jstr(r, "date_utc");
    CHECK(d && strlen(d) == 20 && d[4] == '-' && d[10] == 'T' && d[19] == 'Z');
    json_t *h = json_object_get(r, "host");
    CHECK(jstr(h, "cpu_model") && *jstr(h, "cpu_model") &&
          json_integer_value(json_object_get(h, "online_cpus")) >= 1);
    json_t *cfg = json_object_get(r, "config");
    CHECK(json_integer_value(json_object_get(cfg, "pairs")) == 2 &&
          json_integer_value(json_object_get(cfg, "warmup_pairs")) == 1 &&
          json_integer_value(json_object_get(cfg, "prefix_tokens")) == 5 &&
          json_integer_value(json_object_get(cfg, "forced_tokens")) == 3);
    json_t *a = json_object_get(r, "a"), *b = json_object_get(r, "b");
    CHECK(jstr(a, "device") && !strcmp(jstr(a, "device"), "cpu") &&
          json_integer_value(json_object_get(a, "threads")) == 1);
    CHECK(json_integer_value(json_object_get(b, "threads")) == 2 && jstr(b, "routes") &&
          strstr(jstr(b, "routes"), "exact"));
    json_t *cells = json_object_get(r, "cells");
    CHECK_EQ_INT(json_array_size(cells), 6); /* (1 warm-up + 2) pairs */
    for (size_t i = 0; i < json_array_size(cells); i++) {
        json_t *c = json_array_get(cells, i);
        CHECK(!strcmp(jstr(c, "side") ? jstr(c, "side") : "", i % 2 ? "B" : "A"));
        CHECK(json_is_true(json_object_get(c, "warmup")) == (i < 2));
        CHECK(json_real_value(json_object_get(c, "prefill_s")) > 0 &&
              json_real_value(json_object_get(c, "decode_s")) > 0);
        CHECK(near(json_real_value(json_object_get(c, "decode_tok_s")),
                   3 / json_real_value(json_object_get(c, "decode_s"))));
    }
    /* the summary is the statistics of the measured cells (warm-up excluded) */
    json_t *dec = json_object_get(r, "decode");
    const double a0 = json_real_value(json_object_get(json_array_get(cells, 2), "decode_tok_s"));
    const double a1 = json_real_value(json_object_get(json_array_get(cells, 4), "decode_tok_s"));
    CHECK(near(json_real_value(json_object_get(json_object_get(dec, "a"), "mean_tok_s")), (a0 + a1) / 2));
    CHECK(json_real_value(json_object_get(dec, "pair_ratio_min")) <=
          json_real_value(json_object_get(dec, "pair_ratio_max")));
    /* 2 pairs are below FP4B_MIN_PAIRS: the verdict can only be parity */
    CHECK(jstr(r, "verdict") && !strcmp(jstr(r, "verdict"), "parity within noise"));
    CHECK(jstr(dec, "verdict") && jstr(json_object_get(r, "prefill"), "verdict") && jstr(r, "rule"));
    json_decref(r);

    /* the receipt never replaces a file: exit 1, the file untouched */
    struct stat s0, s1;
    CHECK(stat(path, &s0) == 0);
    CHECK_EQ_INT(cli(args), 1);
    CHECK(stat(path, &s1) == 0 && s0.st_ino == s1.st_ino && s0.st_size == s1.st_size);
    /* a symbolic link as the receipt's path: refused before any cell runs (exit 1), nothing written */
    char lnk[800], tgt[800];
    snprintf(lnk, sizeof lnk, "%s/link.json", tmp);
    snprintf(tgt, sizeof tgt, "%s/target.json", tmp);
    CHECK(symlink(tgt, lnk) == 0);
    snprintf(args, sizeof args, "bench models/tiny --a \"\" --b \"--threads 2\" --pairs 1 --json %s", lnk);
    CHECK_EQ_INT(cli(args), 1);
    CHECK(access(tgt, F_OK) != 0);
    /* usage errors: exit 2 */
    CHECK_EQ_INT(cli("bench models/tiny --a \"--mode exact\""), 2);
    CHECK_EQ_INT(cli("bench models/tiny --a \"--mode exact\" --b \"--bogus\""), 2);
    CHECK_EQ_INT(cli("bench models/tiny --a \"--mode exact\" --b \"--mode native\" --pairs 0"), 2);
    CHECK_EQ_INT(
        cli("bench models/tiny --a \"--mode exact\" --b \"--mode native\" --prefix 100000 --tokens 10"), 2);
}

static char *slurp_tmp(const char *name) {
    char path[700];
    snprintf(path, sizeof path, "%s/%s", tmp, name);
    FILE *f = fopen(path, "rb");
    char *b = calloc(1, 1 << 16);
    if (f && b) b[fread(b, 1, (1 << 16) - 1, f)] = 0;
    if (f) fclose(f);
    return b;
}

/* run's first-token time (summary line, --json) and --timing's line (times and the memory split) */
static void test_run_timing(void) {
    CHECK_EQ_INT(cli("run models/tiny --prompt-ids 1,2,3 -n 2 --ignore-eos --timing"), 0);
    char *o = slurp_tmp("out"), *e = slurp_tmp("err");
    double ft = -1, ld = -1, ft2 = -1, hwm = -1, anon = -1, file = -1;
    const char *p = o ? strstr(o, ", first token ") : NULL;
    CHECK(p && sscanf(p, ", first token %lf s,", &ft) == 1 && ft > 0);
    p = e ? strstr(e, "timing: ") : NULL;
    CHECK(
        p &&
        sscanf(
            p,
            "timing: load %lf s, first token %lf s (from the start of run), VmHWM %lf MiB, RssAnon %lf MiB, "
            "RssFile %lf MiB",
            &ld, &ft2, &hwm, &anon, &file) == 5);
    CHECK(ld >= 0 && ft2 >= ld && ft2 == ft && hwm > 0 && anon > 0 && file > 0 && hwm >= anon);
    free(o), free(e);
    /* -n 0: no token, no first-token time */
    CHECK_EQ_INT(cli("run models/tiny --prompt-ids 1,2,3 -n 0"), 0);
    o = slurp_tmp("out");
    CHECK(o && strstr(o, "decode 0 tok") && strstr(o, ", first token 0.000 s,"));
    free(o);
    CHECK_EQ_INT(cli("run models/tiny --prompt-ids 1,2,3 -n 2 --ignore-eos --json"), 0);
    o = slurp_tmp("out");
    json_error_t je;
    json_t *j = o ? json_loads(o, 0, &je) : NULL;
    CHECK(j && json_real_value(json_object_get(j, "first_token_s")) > 0);
    json_decref(j);
    free(o);
}

/* NAME=VALUE words of a side's OPTIONS: in the environment while that side's engine is created
 * (FP4LANE_CUDA_LIB, read when --device cuda opens the library, names a file that does not
 * exist: B's error names it), and gone again for the other side; malformed or too many words are
 * usage errors */
static void test_side_env(void) {
    unsetenv("FP4LANE_CUDA_LIB");
    const char *lib = "/nonexistent/fp4-bench-env.so";
    char args[1000];
    snprintf(args, sizeof args,
             "bench models/tiny --a \"--threads 1\" --b \"--device cuda FP4LANE_CUDA_LIB=%s\" --pairs 1 "
             "--prefix 2 --tokens 1 --warmup 0",
             lib);
    CHECK(cli(args) != 0);
    char *e = slurp_tmp("err");
    CHECK_MSG(e && strstr(e, lib), "B's engine did not see its FP4LANE_CUDA_LIB: %s", e ? e : "");
    CHECK_MSG(e && !strncmp(e, "fp4lane bench: ", 15), "the error is not reported under bench: %s",
              e ? e : "");
    free(e);
    snprintf(args, sizeof args,
             "bench models/tiny --a \"--threads 1 FP4LANE_CUDA_LIB=%s\" --b \"--device cuda\" --pairs 1 "
             "--prefix 2 --tokens 1 --warmup 0",
             lib);
    cli(args); /* B may run (a GPU and its library) or fail (none): either way without A's word */
    e = slurp_tmp("err");
    CHECK_MSG(e && !strstr(e, lib), "A's FP4LANE_CUDA_LIB reached B: %s", e ? e : "");
    free(e);
    CHECK_EQ_INT(cli("bench models/tiny --a \"--threads 1 FP4_BENCH_TEST_WORD=1\" --b \"--threads 1\" "
                     "--pairs 1 --prefix 2 --tokens 1 --warmup 0"),
                 0);
    CHECK_EQ_INT(cli("bench models/tiny --a \"lower_case=1\" --b \"--threads 1\" --pairs 1"), 2);
    CHECK_EQ_INT(cli("bench models/tiny --a \"=1\" --b \"--threads 1\" --pairs 1"), 2);
    CHECK_EQ_INT(cli("bench models/tiny --a \"A=1 B=1 C=1 D=1 E=1 F=1 G=1 H=1 I=1\" --b \"--threads 1\" "
                     "--pairs 1"),
                 2);
}

/* `fp4lane bench models/tiny OPTS --json TMP/NAME`: exit 0 and the receipt parsed (NULL, a failed
 * check, otherwise; the caller frees it) */
static json_t *bench_receipt(const char *name, const char *opts) {
    char path[700], args[2000];
    snprintf(path, sizeof path, "%s/%s", tmp, name);
    snprintf(args, sizeof args, "bench models/tiny %s --json %s", opts, path);
    CHECK_EQ_INT(cli(args), 0);
    json_error_t je;
    json_t *r = json_load_file(path, 0, &je);
    CHECK_MSG(r != NULL, "%s: %s", name, je.text);
    return r;
}

/* --order abba: the cells' sides A B, B A, A B (warm-up pair first), the statistics by side (a
 * receipt whose pairs were read by place would give A the B cells' times), the order recorded;
 * an unknown order is a usage error */
static void test_order(void) {
    json_t *r = bench_receipt("abba.json",
                              "--a \"--mode exact --threads 1\" --b \"--mode exact --threads 1\" "
                              "--pairs 2 --prefix 4 --tokens 2 --warmup 1 --order abba");
    if (!r) return;
    json_t *cells = json_object_get(r, "cells");
    static const char *want = "ABBAAB";
    CHECK_EQ_INT(json_array_size(cells), 6);
    double a_dec = 0, b_dec = 0;
    for (size_t i = 0; i < json_array_size(cells) && i < 6; i++) {
        json_t *c = json_array_get(cells, i);
        const char *side = jstr(c, "side") ? jstr(c, "side") : "";
        CHECK_MSG(side[0] == want[i], "cell %zu: side %s, want %c", i, side, want[i]);
        if (i >= 2) {
            const double t = json_real_value(json_object_get(c, "decode_s"));
            if (side[0] == 'A') a_dec += 2 / t / 2;
            else b_dec += 2 / t / 2;
        }
    }
    json_t *dec = json_object_get(r, "decode");
    const double am = json_real_value(json_object_get(json_object_get(dec, "a"), "mean_tok_s")),
                 bm = json_real_value(json_object_get(json_object_get(dec, "b"), "mean_tok_s"));
    CHECK_MSG(fabs(am - a_dec) <= 1e-6 * a_dec && fabs(bm - b_dec) <= 1e-6 * b_dec,
              "decode means %g / %g, the cells by side give %g / %g", am, bm, a_dec, b_dec);
    const char *ord = jstr(json_object_get(r, "config"), "order");
    CHECK(ord && !strncmp(ord, "A B B A", 7));
    json_decref(r);
    CHECK_EQ_INT(cli("bench models/tiny --a \"--threads 1\" --b \"--threads 1\" --order aabb"), 2);
}

/* --seqs 3: three sequences a cell (each engine holds them), decode tok/s over all of them
 * (3 * tokens / the cell's decode seconds), recorded; 0 and 65 are usage errors */
static void test_seqs(void) {
    json_t *r = bench_receipt("seqs.json",
                              "--a \"--mode exact --threads 1\" --b \"--mode native --threads 1\" "
                              "--pairs 1 --prefix 5 --tokens 4 --warmup 0 --seqs 3");
    if (!r) return;
    CHECK(json_integer_value(json_object_get(json_object_get(r, "config"), "sequences")) == 3);
    json_t *c0 = json_array_get(json_object_get(r, "cells"), 0);
    const double t = json_real_value(json_object_get(c0, "decode_s")),
                 m = json_real_value(json_object_get(json_object_get(json_object_get(r, "decode"), "a"),
                                                     "mean_tok_s"));
    CHECK_MSG(t > 0 && fabs(m - 3 * 4 / t) <= 1e-6 * m, "decode mean %g, 3 x 4 tokens / %g s = %g", m, t,
              3 * 4 / t);
    json_decref(r);
    CHECK_EQ_INT(cli("bench models/tiny --a \"--threads 1\" --b \"--threads 1\" --seqs 0"), 2);
    CHECK_EQ_INT(cli("bench models/tiny --a \"--threads 1\" --b \"--threads 1\" --seqs 65"), 2);
}

/* the decode step a receipt says it timed: greedy steps by default, --logits the logits steps */
static void test_decode_step(void) {
    static const char *const opts[2] = {"", " --logits"};
    static const char *const want[2] = {"greedy (fp4_rt_step_greedy)", "logits to the host"};
    for (int k = 0; k < 2; k++) {
        char o[300], name[32];
        snprintf(o, sizeof o, "--a \"--threads 1\" --b \"--threads 1\" --pairs 1 --prefix 3 --tokens 2 "
                 "--warmup 0%s", opts[k]);
        snprintf(name, sizeof name, "step%d.json", k);
        json_t *r = bench_receipt(name, o);
        if (!r) continue;
        const char *st = jstr(json_object_get(r, "config"), "decode_step");
        CHECK_MSG(st && !strcmp(st, want[k]), "decode_step %s, want %s", st ? st : "(none)", want[k]);
        json_decref(r);
    }
}

int main(void) {
    test_summary();
    test_verdicts();
    snprintf(bin, sizeof bin, "%s/fp4lane", getenv("FP4_BUILD") ? getenv("FP4_BUILD") : "build");
    snprintf(tmp, sizeof tmp, "%s/fp4lane-bench-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) return perror("mkdtemp"), 1;
    test_end_to_end();
    test_run_timing();
    test_side_env();
    test_order();
    test_seqs();
    test_decode_step();
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", tmp);
    return check_report();
}
