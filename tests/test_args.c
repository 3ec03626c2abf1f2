/* test_args.c — the library's one table of user arguments (fp4_arg_parse) and the room check of a
 * generation (fp4_rt_check_room), then the CLI refusing through them: the values the Python
 * binding once accepted and the CLI refused (threads 0/-1/10000, temperature -1, top_p 2, top_k -3,
 * shard_size -1, token ids 2^40 and 0.5) are refused by both with the same rule, the Python side
 * in tests/python/test_fp4lane.py. */
#include "check.h"
#include "cli_util.h"
#include "fp4lane_runtime.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char bin[512], tmp[512];

static void accepts(const char *name, const char *text, fp4_arg_val *v) {
    fp4_error e;
    fp4_status st = fp4_arg_parse(name, NULL, text, v, &e);
    CHECK_MSG(st == FP4_OK, "%s '%s' refused: %s", name, text, e.msg);
}

static void refuses(const char *name, const char *text) {
    fp4_error e;
    fp4_arg_val v = {7, 7, 7};
    char rule[64];
    snprintf(rule, sizeof rule, "arg.%s", name);
    fp4_status st = fp4_arg_parse(name, "--opt", text, &v, &e);
    CHECK_MSG(st == FP4_ERR_INVALID_ARG && !strcmp(e.rule, rule) && strstr(e.msg, "--opt") &&
                  strstr(e.msg, "expected"),
              "%s '%s': status %d rule %s msg %s", name, text ? text : "(null)", st, e.rule, e.msg);
    CHECK_MSG(v.i == 7 && v.u == 7 && v.f == 7, "%s '%s': out written on a refusal", name, text);
}

static void library(void) {
    fp4_arg_val v;
    /* integers: the bounds are in, one past them out; only decimal digits after an optional '-' */
    accepts("threads", "1", &v);
    CHECK(v.i == 1 && v.u == 1 && v.f == 1.0);
    accepts("threads", "256", &v);
    CHECK_EQ_INT((int)v.i, 256);
    static const char *const bad_threads[] = {"0",  "-1", "10000", "257",  "",    " 5",
                                              "+5", "5 ", "2.0",   "0x10", "1e2", "99999999999999999999"};
    for (size_t k = 0; k < sizeof bad_threads / sizeof *bad_threads; k++)
        refuses("threads", bad_threads[k]);
    refuses("threads", NULL);
    accepts("ctx", "16777216", &v);
    refuses("ctx", "16777217");
    refuses("ctx", "0");
    accepts("max_seqs", "4096", &v);
    refuses("max_seqs", "4097");
    refuses("max_seqs", "0");
    accepts("prefill_chunk", "0", &v);
    refuses("prefill_chunk", "1048577");
    accepts("draft_n", "32", &v);
    refuses("draft_n", "33");
    refuses("draft_n", "0");
    accepts("n", "0", &v);
    accepts("n", "9223372036854775807", &v);
    CHECK(v.i == INT64_MAX);
    refuses("n", "-1");
    refuses("n", "9223372036854775808");
    accepts("token", "0", &v);
    accepts("token", "2147483647", &v);
    CHECK(v.i == INT32_MAX);
    refuses("token", "1099511627776");
    refuses("token", "0.5");
    refuses("token", "-1"), refuses("token", "x3");
    accepts("top_k", "0", &v);
    refuses("top_k", "-3");
    refuses("top_k", "2147483648");
    accepts("penalty_last_n", "64", &v);
    refuses("penalty_last_n", "-1");
    /* reals: strtof's value, finite, in range */
    accepts("temperature", "0.7", &v);
    CHECK(v.f == (double)0.7f);
    accepts("temperature", "100", &v);
    static const char *const bad_temp[] = {"-1", "100.5", "nan", "inf", "-inf", "", "0.7x", "x"};
    for (size_t k = 0; k < sizeof bad_temp / sizeof *bad_temp; k++)
        refuses("temperature", bad_temp[k]);
    accepts("top_p", "1", &v);
    accepts("top_p", "0", &v);
    refuses("top_p", "2");
    refuses("top_p", "-0.1");
    accepts("min_p", "0.05", &v);
    refuses("min_p", "1.5");
    accepts("repeat_penalty", "0.001", &v);
    refuses("repeat_penalty", "0");
    accepts("presence_penalty", "-100", &v);
    refuses("presence_penalty", "100.1"), refuses("presence_penalty", "nan");
    /* seed: all of uint64, nothing else */
    accepts("seed", "18446744073709551615", &v);
    CHECK(v.u == UINT64_MAX);
    refuses("seed", "18446744073709551616");
    refuses("seed", "-1");
    refuses("seed", "-0");
    /* shard_size: the CLI's byte grammar */
    accepts("shard_size", "4G", &v);
    CHECK(v.u == (UINT64_C(4) << 30));
    accepts("shard_size", "0", &v);
    CHECK(v.u == 0);
    refuses("shard_size", "-1");
    refuses("shard_size", "1X");
    refuses("shard_size", "4294967297G");
    /* the message quotes the text with control bytes replaced and long texts cut */
    fp4_error e;
    fp4_arg_parse("threads", NULL, "1\x1b]0;title\x07", &v, &e);
    CHECK_MSG(!strchr(e.msg, '\x1b') && !strchr(e.msg, '\x07') && strstr(e.msg, "threads 1?]0;title?"), "%s",
              e.msg);
    char long_text[300];
    memset(long_text, '9', sizeof long_text - 1), long_text[sizeof long_text - 1] = 0;
    fp4_arg_parse("token", NULL, long_text, &v, &e);
    CHECK(strlen(e.msg) < 120 && strstr(e.msg, "..."));
    /* an unknown name */
    CHECK(fp4_arg_parse("no_such_argument", NULL, "1", &v, &e) == FP4_ERR_NOT_FOUND &&
          !strcmp(e.rule, "arg.name"));
    CHECK(fp4_arg_parse(NULL, NULL, "1", &v, &e) == FP4_ERR_NOT_FOUND);
}

static void room(void) {
    fp4_model *m = NULL;
    fp4_rt *rt = NULL;
    fp4_error e;
    CHECK_OK(fp4_model_open("models/tiny", NULL, &m, &e));
    fp4_rt_opts o = {0};
    CHECK_OK(fp4_rt_create(m, &o, &rt, &e));
    if (!rt) {
        fp4_model_close(m);
        return;
    }
    const int64_t ctx = fp4_rt_n_ctx(rt);
    CHECK_OK(fp4_rt_check_room(rt, -1, 3, ctx - 3, &e));
    CHECK(fp4_rt_check_room(rt, -1, 3, ctx - 2, &e) == FP4_ERR_LIMIT && !strcmp(e.rule, "rt.context"));
    CHECK(fp4_rt_check_room(rt, -1, 3, 600, &e) == FP4_ERR_LIMIT && strstr(e.msg, "600"));
    CHECK(fp4_rt_check_room(rt, -1, 1, INT64_MAX, &e) == FP4_ERR_LIMIT); /* no signed overflow */
    CHECK(fp4_rt_check_room(rt, -1, INT64_MAX, INT64_MAX, &e) == FP4_ERR_LIMIT);
    CHECK(fp4_rt_check_room(rt, -1, -1, 1, &e) == FP4_ERR_INVALID_ARG);
    CHECK(fp4_rt_check_room(rt, 0, 1, 1, &e) == FP4_ERR_INVALID_ARG && !strcmp(e.rule, "rt.seq"));
    /* what a sequence caches counts */
    int32_t seq;
    CHECK_OK(fp4_rt_seq_open(rt, &seq));
    fp4_rt_tok cols[4] = {{seq, 5, 0}, {seq, 6, 0}, {seq, 7, 0}, {seq, 8, 1}};
    float *lg = malloc(sizeof(float) * (size_t)fp4_rt_vocab(rt));
    CHECK_OK(fp4_rt_step(rt, cols, 4, lg, &e));
    CHECK_OK(fp4_rt_check_room(rt, seq, 1, ctx - 5, &e));
    CHECK(fp4_rt_check_room(rt, seq, 1, ctx - 4, &e) == FP4_ERR_LIMIT && strstr(e.msg, "4 cached"));
    free(lg);
    fp4_rt_free(rt);
    fp4_model_close(m);
}

static void cli(void) {
    static const char *const bad_run[] = {
        "--threads 0", "--threads -1", "--threads 10000", "--temp -1",          "--top-p 2",
        "--top-k -3",  "--seed -1",    "--ctx 0",         "--prefill-chunk -1", "-n -1"};
    char a[1200];
    char *o = NULL, *er = NULL;
    for (size_t k = 0; k < sizeof bad_run / sizeof *bad_run; k++) {
        snprintf(a, sizeof a, "run models/tiny --prompt-ids 1,2 -n 1 %s", bad_run[k]);
        const char *val = strchr(bad_run[k], ' ') + 1;
        CHECK_MSG(cu_run(bin, tmp, NULL, a, &o, &er) == 2 && cu_has(er, val) && cu_has(er, "expected"),
                  "run %s: %s", bad_run[k], er);
    }
    /* token ids: the same "token" row (2^40 and 0.5 are not ids) */
    static const char *const bad_ids[] = {"1,1099511627776", "0.5", "1,-2"};
    for (size_t k = 0; k < sizeof bad_ids / sizeof *bad_ids; k++) {
        snprintf(a, sizeof a, "run models/tiny --prompt-ids %s -n 1", bad_ids[k]);
        CHECK_MSG(cu_run(bin, tmp, NULL, a, &o, &er) == 2 && cu_has(er, "token id") &&
                      cu_has(er, "expected an integer in [0, 2147483647]"),
                  "--prompt-ids %s: %s", bad_ids[k], er);
    }
    /* chat takes run's sampling options through the same table */
    CHECK_MSG(cu_run(bin, tmp, NULL, "chat models/tiny --top-k -3", &o, &er) == 2 && cu_has(er, "-3"),
              "chat: %s", er);
    CHECK_MSG(cu_run(bin, tmp, NULL, "chat models/tiny --threads 0", &o, &er) == 2 && cu_has(er, "[1, 256]"),
              "chat: %s", er);
    /* quantize/convert: shard_size */
    snprintf(a, sizeof a, "quantize tests/data/hf/llama %s/q.gguf --shard-size -1", tmp);
    CHECK_MSG(cu_run(bin, tmp, NULL, a, &o, &er) == 2 && cu_has(er, "-1"), "quantize: %s", er);
    snprintf(a, sizeof a, "%s/q.gguf", tmp);
    CHECK(access(a, F_OK) != 0);
    /* a valid twin of each: accepted */
    CHECK_MSG(cu_run(bin, tmp, NULL,
                     "run models/tiny --prompt-ids 1,2 -n 2 --threads 256 --temp 100 --top-p 1 --top-k 0 "
                     "--seed 18446744073709551615",
                     &o, &er) == 0,
              "%s", er);
    free(o), free(er);
}

int main(void) {
    check_test_name = "args";
    snprintf(bin, sizeof bin, "%s/fp4lane", getenv("FP4_BUILD") ? getenv("FP4_BUILD") : "build");
    snprintf(tmp, sizeof tmp, "%s/fp4lane-args-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) return perror("mkdtemp"), 1;
    library();
    room();
    cli();
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd)) fprintf(stderr, "cannot remove %s\n", tmp);
    return check_report();
}
