/* test_runtime_cli.c — fp4lane run and fp4lane compare as a user meets them: ids out and the
 * summary as the last line, --logits-out (.npy, bit-equal to the library's logits), prompt caches
 * across two runs, --batch-file, usage errors (exit 2) that name the value, refusals (exit 1),
 * Ctrl-C (summary, exit 130), the comparator's verdicts. */
#include "check.h"
#include "cli_util.h"
#include "rt_fixture.h"
#include "tmpnames.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char bin[512], tmp[512];

static int cli(const char *args, char **out, char **err) {
    return cu_run(bin, tmp, NULL, args, out, err);
}
/* the float32 rows of an .npy written by run: checks the header, returns rows */
static float *npy_rows(const char *path, long *rows, long cols) {
    long len;
    char *b = cu_slurp(path, &len);
    *rows = -1;
    if (len < 128 || memcmp(b, "\x93NUMPY\x01\x00", 8) || !strstr(b + 10, "'descr': '<f4'") ||
        (len - 128) % (4 * cols)) {
        free(b);
        return NULL;
    }
    *rows = (len - 128) / (4 * cols);
    char shape[64];
    snprintf(shape, sizeof shape, "'shape': (%ld, %ld)", *rows, cols);
    if (!strstr(b + 10, shape)) *rows = -2;
    float *f = malloc((size_t)(len - 128) + 4);
    memcpy(f, b + 128, (size_t)(len - 128));
    free(b);
    return f;
}

int main(void) {
    snprintf(bin, sizeof bin, "%s/fp4lane", getenv("FP4_BUILD") ? getenv("FP4_BUILD") : "build");
    snprintf(tmp, sizeof tmp, "%s/fp4lane-rtcli-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) return perror("mkdtemp"), 1;
    char bf[600], nv[600], a[3000], f1[700], f2[700], f3[700];
    rtfx_spec s = rtfx_default("llama");
    s.ctx = 4096;
    rtfx_write_pair(tmp, &s, 8, bf, nv, sizeof bf);
    fp4_error e;
    char *o = NULL, *er = NULL;

    /* ids out, summary last */
    snprintf(a, sizeof a, "run %s --prompt-ids 1,2,3,4 -n 5 --ignore-eos", nv);
    CHECK(cli(a, &o, &er) == 0);
    CHECK(cu_has(cu_last_line(o), "prefill 4 tok") && cu_has(cu_last_line(o), "decode 5 tok") &&
          cu_has(cu_last_line(o), "device cpu") && cu_has(cu_last_line(o), "mode exact") &&
          cu_has(cu_last_line(o), "cpu.nvfp4.a16.exact") &&
          cu_has(cu_last_line(o), "head: cpu.bf16.dense.pinned"));
    int n_ids = 0;
    for (const char *p = o; *p && *p != '\n'; p++)
        n_ids += (*p >= '0' && *p <= '9') && (p == o || p[-1] == ' ');
    CHECK_EQ_INT(n_ids, 5);
    char first_run[256];
    snprintf(first_run, sizeof first_run, "%.*s", (int)strcspn(o, "\n"), o);
    /* same again with 3 threads, prefill chunk 1: the same ids (exact mode) */
    snprintf(a, sizeof a, "run %s --prompt-ids 1,2,3,4 -n 5 --ignore-eos --threads 3 --prefill-chunk 1", nv);
    CHECK(cli(a, &o, &er) == 0 && !strncmp(o, first_run, strlen(first_run)));
    /* sampling is seeded: the same seed twice gives the same ids, another seed (almost surely)
     * other ids; top-k 1 is greedy whatever the temperature */
    char s1[256], s2[256];
    snprintf(a, sizeof a, "run %s --prompt-ids 1,2,3,4 -n 12 --ignore-eos --temp 1.5 --top-p 0.95 --seed 7",
             nv);
    CHECK(cli(a, &o, &er) == 0);
    snprintf(s1, sizeof s1, "%.*s", (int)strcspn(o, "\n"), o);
    CHECK(cli(a, &o, &er) == 0 && !strncmp(o, s1, strlen(s1)));
    snprintf(a, sizeof a, "run %s --prompt-ids 1,2,3,4 -n 12 --ignore-eos --temp 1.5 --top-p 0.95 --seed 8",
             nv);
    CHECK(cli(a, &o, &er) == 0);
    snprintf(s2, sizeof s2, "%.*s", (int)strcspn(o, "\n"), o);
    CHECK(strcmp(s1, s2) != 0);
    snprintf(a, sizeof a, "run %s --prompt-ids 1,2,3,4 -n 5 --ignore-eos --temp 3 --top-k 1 --seed 9", nv);
    CHECK(cli(a, &o, &er) == 0 && !strncmp(o, first_run, strlen(first_run)));
    /* --json: the same ids as one object */
    snprintf(a, sizeof a, "run %s --prompt-ids 1,2,3,4 -n 5 --ignore-eos --json", nv);
    CHECK(cli(a, &o, &er) == 0);
    char want[300];
    snprintf(want, sizeof want, "{\"sequences\":[[%s]]", first_run + (first_run[0] == ' '));
    for (char *q = want; *q; q++)
        if (*q == ' ') *q = ',';
    CHECK_MSG(!strncmp(o, want, strlen(want)) && cu_has(o, "\"mode\":\"exact\"") &&
                  cu_has(o, "\"decode_tokens\":5"),
              "%s vs %s", o, want);
    /* -n 0: the prompt only */
    snprintf(a, sizeof a, "run %s --prompt-ids 1,2,3,4 -n 0", nv);
    CHECK(cli(a, &o, &er) == 0 && cu_has(o, "decode 0 tok"));

    /* --logits-out: every position processed; bit-equal to the library */
    snprintf(f1, sizeof f1, "%s/l.npy", tmp);
    snprintf(a, sizeof a, "run %s --prompt-ids 5,6,7 -n 3 --ignore-eos --logits-out %s", bf, f1);
    CHECK(cli(a, &o, &er) == 0);
    long rows;
    float *L = npy_rows(f1, &rows, 320);
    CHECK_MSG(L && rows == 5, "rows %ld", rows); /* 3 prompt + 2 generated tokens fed back */
    fp4_model *m = NULL;
    fp4_rt *rt = NULL;
    CHECK_OK(fp4_model_open(bf, NULL, &m, &e));
    fp4_rt_opts ro = {0};
    CHECK_OK(fp4_rt_create(m, &ro, &rt, &e));
    if (rt && L) {
        int32_t sq;
        fp4_rt_seq_open(rt, &sq);
        fp4_rt_tok c[3] = {{sq, 5, 1}, {sq, 6, 1}, {sq, 7, 1}};
        float *lg = malloc(sizeof(float) * 3 * 320);
        CHECK_OK(fp4_rt_step(rt, c, 3, lg, &e));
        CHECK(!memcmp(lg, L, sizeof(float) * 3 * 320));
        free(lg);
    }
    fp4_rt_free(rt);
    fp4_model_close(m);

    /* prompt cache: 6 ids saved, then 3 more from the snapshot == rows 6..8 of one run of 9 */
    snprintf(f2, sizeof f2, "%s/p.kv", tmp);
    snprintf(a, sizeof a, "run %s --prompt-ids 9,8,7,6,5,4 -n 0 --kv-save %s", nv, f2);
    CHECK(cli(a, &o, &er) == 0);
    snprintf(f3, sizeof f3, "%s/k.npy", tmp);
    snprintf(a, sizeof a, "run %s --prompt-ids 3,2,1 -n 0 --kv-load %s --logits-out %s", nv, f2, f3);
    CHECK(cli(a, &o, &er) == 0);
    /* f1 exists (written above): refused without --force, the file unchanged; replaced with it */
    long r0, r1;
    float *before = npy_rows(f1, &r0, 320);
    snprintf(a, sizeof a, "run %s --prompt-ids 9,8,7,6,5,4,3,2,1 -n 0 --logits-out %s --prefill-chunk 4", nv,
             f1);
    CHECK(cli(a, &o, &er) == 1 && cu_has(er, "out.exists") && cu_has(er, "--force"));
    float *after = npy_rows(f1, &r1, 320);
    CHECK(before && after && r0 == r1 && !memcmp(before, after, sizeof(float) * 320 * (size_t)r0));
    free(before), free(after);
    snprintf(a, sizeof a, "run %s --prompt-ids 1 -n 0 --kv-save %s", nv, f2);
    CHECK(cli(a, &o, &er) == 1 && cu_has(er, "out.exists"));
    snprintf(a, sizeof a,
             "run %s --prompt-ids 9,8,7,6,5,4,3,2,1 -n 0 --logits-out %s --prefill-chunk 4 --force", nv, f1);
    CHECK(cli(a, &o, &er) == 0);
    long r2;
    float *full = npy_rows(f1, &r1, 320), *cont = npy_rows(f3, &r2, 320);
    CHECK(full && cont && r1 == 9 && r2 == 3 && !memcmp(full + 6 * 320, cont, sizeof(float) * 3 * 320));
    free(full), free(cont), free(L);
    snprintf(a, sizeof a, "run %s --prompt-ids 3,2,1 -n 3 --kv-load %s --ctx 10", nv, f2);
    CHECK(cli(a, &o, &er) == 2 && cu_has(er, "6 cached") && cu_has(er, "10"));
    /* the snapshot of the nvfp4 exact engine is refused by native mode and by another model */
    snprintf(a, sizeof a, "run %s --prompt-ids 3 -n 0 --kv-load %s --mode native", nv, f2);
    CHECK(cli(a, &o, &er) == 1 && cu_has(er, "kv.identity"));
    snprintf(a, sizeof a, "run %s --prompt-ids 3 -n 0 --kv-load %s", bf, f2);
    CHECK(cli(a, &o, &er) == 1 && cu_has(er, "kv.identity"));

    /* --logits-out and --kv-save go through outfile: no temporary name is left beside them; a
     * symbolic link, or a file of the model, as the output is refused before any work and keeps
     * every byte */
    CHECK_EQ_INT(tmp_names_beside(f1), 0);
    CHECK_EQ_INT(tmp_names_beside(f2), 0);
    char ln[600], mf[700];
    snprintf(ln, sizeof ln, "%s/link.npy", tmp);
    CHECK(symlink(f1, ln) == 0);
    snprintf(a, sizeof a, "run %s --prompt-ids 1 -n 0 --logits-out %s", nv, ln);
    CHECK(cli(a, &o, &er) == 1 && cu_has(er, "out.symlink"));
    snprintf(a, sizeof a, "run %s --prompt-ids 1 -n 0 --kv-save %s", nv, ln);
    CHECK(cli(a, &o, &er) == 1 && cu_has(er, "out.symlink"));
    full = npy_rows(f1, &r1, 320);
    CHECK(full && r1 == 9);
    free(full);
    snprintf(mf, sizeof mf, "%s/model.safetensors", nv);
    snprintf(a, sizeof a, "run %s --prompt-ids 1 -n 0 --kv-save %s", nv, mf);
    CHECK(cli(a, &o, &er) == 1 && cu_has(er, "out.same-file"));
    snprintf(a, sizeof a, "run %s --prompt-ids 1 -n 0 --logits-out %s", nv, mf);
    CHECK(cli(a, &o, &er) == 1 && cu_has(er, "out.same-file"));
    CHECK_OK(fp4_model_open(nv, NULL, &m, &e));
    fp4_model_close(m);
    m = NULL;

    /* --batch-file: each line decoded inside the batch equals its lone run (greedy, exact) */
    snprintf(f3, sizeof f3, "%s/prompts.txt", tmp);
    FILE *pf = fopen(f3, "w");
    fprintf(pf, "1,2,3,4\n\n10,11\n7\n");
    fclose(pf);
    snprintf(a, sizeof a, "run %s --batch-file %s -n 5 --ignore-eos --threads 2", nv, f3);
    CHECK(cli(a, &o, &er) == 0);
    char line0[300];
    snprintf(line0, sizeof line0, "0: %s", first_run + (first_run[0] == ' '));
    CHECK_MSG(cu_has(o, line0) && cu_has(o, "\n1: ") && cu_has(o, "\n2: "), "batch output: %s (want %s)", o,
              line0);
    snprintf(a, sizeof a, "run %s --prompt-ids 10,11 -n 5 --ignore-eos", nv);
    char *o2 = NULL, *e2 = NULL;
    CHECK(cli(a, &o2, &e2) == 0);
    char line1[300];
    snprintf(line1, sizeof line1, "1: %.*s", (int)strcspn(o2, "\n"), o2);
    CHECK_MSG(cu_has(o, line1), "%s vs %s", o, line1);
    free(o2), free(e2);

    /* usage errors name the value; refusals exit 1 */
    snprintf(a, sizeof a, "run %s --prompt-ids 1,320,3", nv);
    CHECK(cli(a, &o, &er) == 2 && cu_has(er, "320"));
    snprintf(a, sizeof a, "run %s --prompt-ids 1,x3", nv);
    CHECK(cli(a, &o, &er) == 2 && cu_has(er, "x3"));
    snprintf(a, sizeof a, "run %s --prompt-ids ,", nv);
    CHECK(cli(a, &o, &er) == 2 && cu_has(er, "empty"));
    snprintf(a, sizeof a, "run %s --prompt-ids 1,2 -n 5000", nv);
    CHECK(cli(a, &o, &er) == 2 && cu_has(er, "5000") && cu_has(er, "context"));
    snprintf(a, sizeof a, "run %s --prompt-ids 1 --mode fast", nv);
    CHECK(cli(a, &o, &er) == 2 && cu_has(er, "fast"));
    /* sampler values out of range are usage errors, not silently "off" (top-p 2, min-p 1.5, seed -1) */
    static const char *const bad_sampling[] = {"--top-p 2", "--min-p 1.5", "--temp -1", "--temp inf",
                                               "--seed -1", "--repeat-penalty 0", "--presence-penalty nan"};
    for (size_t k = 0; k < sizeof bad_sampling / sizeof *bad_sampling; k++) {
        snprintf(a, sizeof a, "run %s --prompt-ids 1 -n 1 %s", nv, bad_sampling[k]);
        const char *val = strchr(bad_sampling[k], ' ') + 1;
        CHECK_MSG(cli(a, &o, &er) == 2 && cu_has(er, val), "%s: %s", bad_sampling[k], er);
    }
    snprintf(a, sizeof a, "run %s --prompt-ids @%s/nonexistent", nv, tmp);
    CHECK(cli(a, &o, &er) == 2);
    snprintf(a, sizeof a, "run %s --prompt-ids 1 --device cuda --cuda-lib %s/nonexistent.so", nv, tmp);
    CHECK(cli(a, &o, &er) == 1 && cu_has(er, "libfp4lane_cuda.so") && cu_has(er, "--device cpu"));
    snprintf(a, sizeof a, "run %s --prompt-ids 1 --mode native --draft %s", nv, nv);
    CHECK(cli(a, &o, &er) == 1 && cu_has(er, "unqualified"));
    snprintf(a, sizeof a, "run %s/nonexistent --prompt-ids 1", tmp);
    CHECK(cli(a, &o, &er) == 1 && cu_has(er, "file:"));
    /* a text prompt and a MODEL that is not there: the i/o error naming it, no tokenizer preface;
     * a MODEL without a tokenizer: the preface, then the error */
    snprintf(a, sizeof a, "run %s/nonexistent -p hello", tmp);
    CHECK_MSG(cli(a, &o, &er) == 1 && cu_has(er, "nonexistent") && cu_has(er, "io.open") &&
                  cu_has(er, "no such file") && !cu_has(er, "tokenizer is needed"),
              "missing MODEL, text prompt: %s", er);
    snprintf(a, sizeof a, "run %s/nonexistent", tmp); /* the default prompt: text too */
    CHECK_MSG(cli(a, &o, &er) == 1 && cu_has(er, "io.open") && cu_has(er, "no such file"), "%s", er);
    /* chat: the missing MODEL said as such, not as a missing chat template */
    snprintf(a, sizeof a, "chat %s/nonexistent", tmp);
    CHECK_MSG(cli(a, &o, &er) == 1 && cu_has(er, "io.open") && !cu_has(er, "chat_template"), "%s", er);
    snprintf(a, sizeof a, "run %s -p hello", tmp);
    CHECK_MSG(cli(a, &o, &er) == 1 && cu_has(er, "tokenizer is needed"), "MODEL without a tokenizer: %s", er);

    /* Ctrl-C: the summary of what was done, exit 130 */
    snprintf(f1, sizeof f1, "%s/sig.out", tmp);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(f1, "w", stdout) || !freopen("/dev/null", "w", stderr)) _exit(99);
        execl(bin, bin, "run", bf, "--prompt-ids", "1,2,3", "-n", "4000", "--ignore-eos", "--ctx", "4096",
              (char *)NULL);
        _exit(98);
    }
    usleep(700 * 1000);
    kill(pid, SIGINT);
    int ws = 0;
    waitpid(pid, &ws, 0);
    CHECK_MSG(WIFEXITED(ws) && WEXITSTATUS(ws) == 130, "status %d", ws);
    char *so = cu_slurp(f1, NULL);
    CHECK(cu_has(cu_last_line(so), "(interrupted)") && cu_has(cu_last_line(so), "decode"));
    free(so);

    /* compare: threads 1 vs 2 are bit-identical; exact vs native drift, --max-drift, --json */
    snprintf(a, sizeof a,
             "compare %s --a \"--threads 1\" --b \"--threads 2 --prefill-chunk 3\" --prompt-ids "
             "1,2,3,4,5,6,7 --max-drift 0",
             nv);
    CHECK(cli(a, &o, &er) == 0 && cu_has(o, "argmax identical at 7/7") &&
          cu_has(o, " 0 of 2240 logits differ"));
    snprintf(a, sizeof a,
             "compare %s --a \"--mode exact\" --b \"--mode native\" --prompt-ids 1,2,3,4,5,6,7 --max-drift 0",
             nv);
    CHECK(cli(a, &o, &er) == 1 && cu_has(o, "past --max-drift"));
    snprintf(a, sizeof a,
             "compare %s --a \"--mode exact\" --b \"--model %s\" --prompt-ids 1,2,3,4,5,6,7 --json", nv, bf);
    CHECK(cli(a, &o, &er) == 0 && cu_has(o, "\"positions\":7") && cu_has(o, "\"mean_kl\":") &&
          cu_has(o, "\"ok\":true"));
    snprintf(a, sizeof a, "compare %s --a \"--bogus\" --b \"\" --prompt-ids 1", nv);
    CHECK(cli(a, &o, &er) == 2);
    free(o), free(er);
    if (!check_failed) rtfx_rmtree(tmp);
    return check_report();
}
