/* test_runtime_continue.c — fp4lane run's prompt caches and outputs as a user meets them (issue 27):
 *   - --kv-save / --kv-load compose: a run continued from a snapshot prints what one longer run
 *     prints after the first, with the same logits bits (ids and text, a chain of two
 *     continuations, a snapshot of a prompt alone, the penalties' history);
 *   - a text continuation gets no second BOS;
 *   - a snapshot loads into the checkpoint's own GGUF conversion (the identity is the
 *     computation's, not the container's) and continues to the same bits;
 *   - every output is checked before any work (an unwritable --kv-save: nothing decoded, no
 *     --logits-out); Ctrl-C writes neither output and leaves no temporary name;
 *   - a snapshot of models/tiny whose K/V halves are all 65504 (sealed again) makes NaN logits:
 *     refused (rule rt.nonfinite, the position named) with and without --logits-out, never
 *     printed as token 0;
 *   - a context the host cannot hold is refused at once by the CPU memory plan (rule
 *     cpu.memory-plan, the plan in the message), under an address-space limit, and
 *     $FP4LANE_CPU_MEM_LIMIT is honoured. */
#include "check.h"
#include "cli_util.h"
#include "rt_fixture.h"
#include "tmpnames.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <openssl/evp.h>

static char bin[512], tmp[512];

static int cli(const char *args, char **out, char **err) {
    return cu_run(bin, tmp, NULL, args, out, err);
}
static int cli_env(const char *env, const char *args, char **out, char **err) {
    return cu_run(bin, tmp, env, args, out, err);
}

/* the float32 rows of an .npy written by run (NULL when it is not one); *bytes: their size */
static char *npy_body(const char *path, long *bytes) {
    long len;
    char *b = cu_slurp(path, &len);
    *bytes = -1;
    if (len < 128 || memcmp(b, "\x93NUMPY\x01\x00", 8)) {
        free(b);
        return NULL;
    }
    *bytes = len - 128;
    memmove(b, b + 128, (size_t)*bytes);
    return b;
}
/* a's rows then b's rows are exactly c's rows (skip: bytes of c's first rows not compared) */
static int rows_concat(const char *a, const char *b, const char *c, long skip) {
    long na, nb, nc;
    char *A = a ? npy_body(a, &na) : NULL, *B = npy_body(b, &nb), *C = npy_body(c, &nc);
    if (!a) na = 0;
    int ok = (!a || A) && B && C && na + nb + skip == nc && (!a || !memcmp(A, C + skip, (size_t)na)) &&
             !memcmp(B, C + skip + na, (size_t)nb);
    free(A), free(B), free(C);
    return ok;
}
static long file_size(const char *p) {
    struct stat sb;
    return stat(p, &sb) ? -1 : (long)sb.st_size;
}
/* stdout's first line (the ids a run printed), malloc'd */
static char *first_line(const char *s) {
    size_t n = strcspn(s ? s : "", "\n");
    char *r = malloc(n + 1);
    memcpy(r, s ? s : "", n);
    r[n] = 0;
    return r;
}
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ids: a run of 10 == a run of 5 saved + its continuation of 5 (ids and logits), and a chain */
static void compose_ids(const char *nv, const char *pen) {
    char a[3000], s1[700], s2[700], l1[700], l2[700], l[700], w[300];
    char *o = NULL, *er = NULL;
    snprintf(s1, sizeof s1, "%s/c1%s.kv", tmp, pen[0] ? "p" : ""), snprintf(s2, sizeof s2, "%s/c2.kv", tmp);
    snprintf(l1, sizeof l1, "%s/c1.npy", tmp), snprintf(l2, sizeof l2, "%s/c2.npy", tmp);
    snprintf(l, sizeof l, "%s/c.npy", tmp);
    remove(s2), remove(l1), remove(l2), remove(l);
    snprintf(a, sizeof a, "run %s --prompt-ids 1,2,3,4 -n 15 --ignore-eos %s", nv, pen);
    CHECK(cli(a, &o, &er) == 0);
    char *full = first_line(o);
    snprintf(a, sizeof a, "run %s --prompt-ids 1,2,3,4 -n 10 --ignore-eos %s --logits-out %s", nv, pen, l);
    CHECK(cli(a, &o, &er) == 0);
    snprintf(a, sizeof a, "run %s --prompt-ids 1,2,3,4 -n 5 --ignore-eos %s --kv-save %s --logits-out %s", nv,
             pen, s1, l1);
    CHECK(cli(a, &o, &er) == 0);
    char *p1 = first_line(o);
    snprintf(a, sizeof a,
             "run %s --kv-load %s --prompt-ids '' -n 5 --ignore-eos %s --kv-save %s --logits-out %s", nv, s1,
             pen, s2, l2);
    CHECK_MSG(cli(a, &o, &er) == 0, "continuation: %s", er);
    char *p2 = first_line(o);
    /* the snapshot's rows (prompt 4 + 4 fed) then the continuation's (the pending token + 4) */
    CHECK_MSG(rows_concat(l1, l2, l, 0), "%s: the logits of save + continue differ from one run", pen);
    snprintf(w, sizeof w, "%s %s", p1, p2);
    CHECK_MSG(!strncmp(full, w, strlen(w)), "%s: %s + %s, one run: %s", pen, p1, p2, full);
    free(p1), free(p2);
    /* the second snapshot continues too: tokens 11..15 */
    snprintf(a, sizeof a, "run %s --kv-load %s --prompt-ids '' -n 5 --ignore-eos %s", nv, s2, pen);
    CHECK(cli(a, &o, &er) == 0);
    p2 = first_line(o);
    const char *tail = full;
    for (int k = 0; k < 10 && tail; k++)
        tail = strchr(tail + 1, ' ');
    CHECK_MSG(tail && !strcmp(tail + 1, p2), "%s: chain: %s, one run's tail: %s", pen, p2, tail ? tail : "");
    free(p2), free(full);
    free(o), free(er);
}

static void compose(const char *nv, const char *bf) {
    char a[3000], s0[700], l[700], l2[700];
    char *o = NULL, *er = NULL;
    compose_ids(nv, "");
    compose_ids(nv, "--repeat-penalty 1.5 --penalty-last-n 0"); /* the penalties see the history */
    /* a snapshot of a prompt alone (-n 0): continued without a prompt, its last position is
     * computed again for its logits; the tokens are the longer run's */
    snprintf(s0, sizeof s0, "%s/c0.kv", tmp);
    snprintf(a, sizeof a, "run %s --prompt-ids 1,2,3,4 -n 0 --kv-save %s", nv, s0);
    CHECK(cli(a, &o, &er) == 0);
    snprintf(a, sizeof a, "run %s --kv-load %s --prompt-ids '' -n 5 --ignore-eos", nv, s0);
    CHECK(cli(a, &o, &er) == 0);
    char *p = first_line(o);
    snprintf(a, sizeof a, "run %s --prompt-ids 1,2,3,4 -n 5 --ignore-eos", nv);
    CHECK(cli(a, &o, &er) == 0);
    char *q = first_line(o);
    CHECK_MSG(!strcmp(p, q), "continued %s, one run %s", p, q);
    free(p), free(q);
    /* the GGUF conversion of the checkpoint computes the same bits: it takes the snapshot and
     * continues to the same logits; another model still refuses it */
    char gg[700], s1[700];
    snprintf(gg, sizeof gg, "%s/nv.gguf", tmp);
    snprintf(s1, sizeof s1, "%s/c1.kv", tmp);
    snprintf(a, sizeof a, "convert %s %s", nv, gg);
    CHECK(cli(a, &o, &er) == 0);
    snprintf(l, sizeof l, "%s/g.npy", tmp), snprintf(l2, sizeof l2, "%s/h.npy", tmp);
    remove(l), remove(l2);
    snprintf(a, sizeof a, "run %s --kv-load %s --prompt-ids '' -n 5 --ignore-eos --logits-out %s", gg, s1, l);
    CHECK_MSG(cli(a, &o, &er) == 0, "the GGUF twin refuses the snapshot: %s", er);
    snprintf(a, sizeof a, "run %s --kv-load %s --prompt-ids '' -n 5 --ignore-eos --logits-out %s", nv, s1,
             l2);
    CHECK(cli(a, &o, &er) == 0);
    CHECK(rows_concat(NULL, l, l2, 0));
    snprintf(a, sizeof a, "run %s --kv-load %s --prompt-ids '' -n 5", bf, s1);
    CHECK(cli(a, &o, &er) == 1 && cu_has(er, "kv.identity"));
    /* a snapshot without a history (the library's fp4_rt_kv_save) needs a prompt */
    fp4_model *m = NULL;
    fp4_rt *rt = NULL;
    fp4_error e;
    CHECK_OK(fp4_model_open(nv, NULL, &m, &e));
    fp4_rt_opts ro = {0};
    CHECK_OK(fp4_rt_create(m, &ro, &rt, &e));
    if (rt) {
        int32_t sq;
        fp4_rt_seq_open(rt, &sq);
        fp4_rt_tok c[2] = {{sq, 5, 0}, {sq, 6, 0}};
        CHECK_OK(fp4_rt_step(rt, c, 2, NULL, &e));
        snprintf(s0, sizeof s0, "%s/nohist.kv", tmp);
        CHECK_OK(fp4_rt_kv_save(rt, sq, s0, &e));
    }
    fp4_rt_free(rt), fp4_model_close(m);
    snprintf(a, sizeof a, "run %s --kv-load %s --prompt-ids '' -n 2", nv, s0);
    CHECK(cli(a, &o, &er) == 2 && cu_has(er, "no token history"));
    snprintf(a, sizeof a, "run %s --kv-load %s --prompt-ids 7 -n 2", nv, s0);
    CHECK(cli(a, &o, &er) == 0);
    free(o), free(er);
}

/* models/tiny, text: save + continue == one run (text and logits); no BOS in a continuation;
 * the snapshot continues on its GGUF conversion */
static void compose_text(void) {
    char a[3000], s[700], l1[700], l2[700], l[700];
    char *o = NULL, *er = NULL;
    snprintf(s, sizeof s, "%s/t.kv", tmp);
    snprintf(l1, sizeof l1, "%s/t1.npy", tmp), snprintf(l2, sizeof l2, "%s/t2.npy", tmp);
    snprintf(l, sizeof l, "%s/t.npy", tmp);
    snprintf(a, sizeof a, "run models/tiny -p 'The cat sat' -n 6 --kv-save %s --logits-out %s", s, l1);
    CHECK(cli(a, &o, &er) == 0);
    char *t1 = strdup(o ? o : "");
    snprintf(a, sizeof a, "run models/tiny --kv-load %s -n 6 --logits-out %s", s, l2);
    CHECK_MSG(cli(a, &o, &er) == 0, "%s", er);
    char *t2 = strdup(o ? o : "");
    snprintf(a, sizeof a, "run models/tiny -p 'The cat sat' -n 12 --logits-out %s", l);
    CHECK(cli(a, &o, &er) == 0);
    char both[2000];
    snprintf(both, sizeof both, "%s%s", t1, t2);
    CHECK_MSG(!strcmp(both, o ? o : ""), "text: '%s' + '%s', one run '%s'", t1, t2, o);
    CHECK(rows_concat(l1, l2, l, 0));
    /* the conversion of models/tiny to GGUF (bit-identical) continues the same text */
    char gg[700];
    snprintf(gg, sizeof gg, "%s/tiny.gguf", tmp);
    snprintf(a, sizeof a, "convert models/tiny %s", gg);
    CHECK(cli(a, &o, &er) == 0);
    snprintf(a, sizeof a, "run %s --kv-load %s -n 6", gg, s);
    CHECK_MSG(cli(a, &o, &er) == 0 && !strcmp(o, t2), "GGUF twin: '%s' (%s), want '%s'", o, er, t2);
    free(t1), free(t2);
    /* -p after --kv-load: no BOS at the continuation point. Its logits are those of one run of
     * BOS + "The cat" + " sat on" as ids (the two texts tokenized apart) */
    snprintf(a, sizeof a, "run models/tiny -p 'The cat' -n 0 --kv-save %s --force", s);
    CHECK(cli(a, &o, &er) == 0);
    snprintf(a, sizeof a, "run models/tiny --kv-load %s -p ' sat on' -n 2 --logits-out %s --force", s, l2);
    CHECK(cli(a, &o, &er) == 0);
    char ids[600] = "";
    CHECK(cli("tokenize models/tiny --add-special 'The cat'", &o, &er) == 0);
    snprintf(ids, sizeof ids, "%.*s", (int)strcspn(o, "\n"), o);
    long na = 0; /* the ids of BOS + "The cat": rows of the one run before the continuation's */
    for (const char *p = ids; *p; p++)
        na += *p == ' ';
    na += ids[0] != 0;
    CHECK(cli("tokenize models/tiny ' sat on'", &o, &er) == 0);
    snprintf(ids + strlen(ids), sizeof ids - strlen(ids), " %.*s", (int)strcspn(o, "\n"), o);
    for (char *p = ids; *p; p++)
        if (*p == ' ') *p = ',';
    snprintf(a, sizeof a, "run models/tiny --prompt-ids %s -n 2 --logits-out %s --force", ids, l);
    CHECK(cli(a, &o, &er) == 0);
    CHECK_MSG(rows_concat(NULL, l2, l, na * 4096 * 4),
              "continuation with -p: logits of another sequence (%s)", ids);
    free(o), free(er);
}

/* the audit's crafted snapshot: models/tiny's cache of a prompt, every K/V half 65504, resealed */
static void nonfinite(void) {
    char a[3000], snap[700], bad[700];
    char *o = NULL, *er = NULL;
    snprintf(snap, sizeof snap, "%s/nf.kv", tmp), snprintf(bad, sizeof bad, "%s/nf-bad.kv", tmp);
    char l[700];
    snprintf(l, sizeof l, "%s/nf.npy", tmp);
    snprintf(a, sizeof a, "run models/tiny --prompt-ids 0,5,6,7 -n 0 --kv-save %s", snap);
    CHECK(cli(a, &o, &er) == 0);
    long n;
    uint8_t *b = (uint8_t *)cu_slurp(snap, &n);
    const long kv0 = 96 + 4 * (long)(b[88] | b[89] << 8);
    for (long i = kv0; i + 1 < n - 32; i += 2)
        b[i] = 0xFF, b[i + 1] = 0x7B;
    unsigned int dl = 32;
    EVP_Digest(b, (size_t)(n - 32), b + n - 32, &dl, EVP_sha256(), NULL);
    FILE *f = fopen(bad, "wb");
    CHECK(f && fwrite(b, 1, (size_t)n, f) == (size_t)n);
    if (f) fclose(f);
    free(b);
    static const char *const modes[] = {"", "--temp 0.5", "--logits-out"};
    for (int i = 0; i < 3; i++) {
        snprintf(a, sizeof a, "run models/tiny --kv-load %s --prompt-ids 9 -n 4 %s%s%s", bad, modes[i],
                 i == 2 ? " " : "", i == 2 ? l : "");
        CHECK_MSG(cli(a, &o, &er) == 1 && cu_has(er, "rt.nonfinite") && cu_has(er, "position 4") && !o[0],
                  "%s: stdout '%s', %s", modes[i], o, er);
    }
    CHECK(tmp_names_beside(l) == 0);
    free(o), free(er);
}

/* outputs: an unwritable --kv-save is found before any work; Ctrl-C writes neither output */
static void outputs(const char *nv, const char *bf) {
    char a[3000], l[700], s[700];
    char *o = NULL, *er = NULL;
    snprintf(l, sizeof l, "%s/o.npy", tmp);
    snprintf(a, sizeof a, "run %s --prompt-ids 1,2 -n 3 --logits-out %s --kv-save /proc/fp4lane-no/dir/s.kv",
             nv, l);
    CHECK(cli(a, &o, &er) == 1 && cu_has(er, "/proc/fp4lane-no/dir/s.kv"));
    CHECK_MSG(!cu_has(o, "prefill") && !o[0], "decoded before the output was found unwritable: %s", o);
    CHECK(file_size(l) < 0 && tmp_names_beside(l) == 0);
    snprintf(a, sizeof a,
             "run %s --prompt-ids 1,2 -n 3 --kv-save %s/s.kv --logits-out /proc/fp4lane-no/l.npy", nv, tmp);
    CHECK(cli(a, &o, &er) == 1 && !o[0]);
    /* Ctrl-C during the decode: exit 130, the summary, neither output nor a temporary name */
    snprintf(s, sizeof s, "%s/sig.kv", tmp);
    char so[700];
    snprintf(so, sizeof so, "%s/sig.out", tmp);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(so, "w", stdout) || !freopen("/dev/null", "w", stderr)) _exit(99);
        execl(bin, bin, "run", bf, "--prompt-ids", "1,2,3", "-n", "4000", "--ignore-eos", "--ctx", "4096",
              "--logits-out", l, "--kv-save", s, (char *)NULL);
        _exit(98);
    }
    usleep(900 * 1000);
    kill(pid, SIGINT);
    int ws = 0;
    waitpid(pid, &ws, 0);
    CHECK_MSG(WIFEXITED(ws) && WEXITSTATUS(ws) == 130, "status %d", ws);
    char *out = cu_slurp(so, NULL);
    CHECK(cu_has(cu_last_line(out), "(interrupted)"));
    free(out);
    CHECK_MSG(file_size(l) < 0 && file_size(s) < 0, "Ctrl-C left --logits-out (%ld) / --kv-save (%ld)",
              file_size(l), file_size(s));
    CHECK(tmp_names_beside(l) == 0 && tmp_names_beside(s) == 0);
    free(o), free(er);
}

/* the CPU memory plan: a context the host cannot hold is refused at once, nothing allocated */
static void memory_plan(const char *nv) {
    char a[3000], big[600], bbf[600];
    char *o = NULL, *er = NULL;
    char dir[600];
    snprintf(dir, sizeof dir, "%s/big", tmp);
    rtfx_spec s = rtfx_default("llama");
    s.ctx = 1 << 24;
    rtfx_write_pair(dir, &s, 3, bbf, big, sizeof big);
    /* under a 4 GiB address-space limit (the old engine built the RoPE table and the KV cache of
     * 2^24 positions, GiBs, until an allocation failed): 64 sequences of 2^24 positions (1 TiB of
     * KV cache: above 3/4 of any host's memory this runs on), then the audit's one sequence
     * against an explicit cap of 8 GiB (its 20 GiB would fit a large host) */
    char fo[700], fe[700], bfile[700];
    snprintf(fo, sizeof fo, "%s/out", tmp), snprintf(fe, sizeof fe, "%s/err", tmp);
    snprintf(bfile, sizeof bfile, "%s/64.txt", tmp);
    FILE *bf = fopen(bfile, "w");
    for (int i = 0; bf && i < 64; i++)
        fprintf(bf, "1,%d\n", i + 2);
    if (bf) fclose(bf);
    static const char *const cases[2][2] = {{"", "--batch-file"},
                                            {"FP4LANE_CPU_MEM_LIMIT=8589934592 ", "--prompt-ids"}};
    /* AddressSanitizer reserves terabytes of shadow address space, which no address-space limit
     * allows: under it (make asan) the refusal and its time bound are checked without the limit */
#if defined(__SANITIZE_ADDRESS__)
    const char *limit = "";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    const char *limit = "";
#else
    const char *limit = "ulimit -v 4194304; ";
#endif
#else
    const char *limit = "ulimit -v 4194304; ";
#endif
    for (int k = 0; k < 2; k++) {
        const double t0 = now();
        snprintf(a, sizeof a, "sh -c '%s%sexec %s run %s %s %s -n 1 --ctx 16777216' >%s/out 2>%s/err", limit,
                 cases[k][0], bin, big, cases[k][1], k ? "1" : bfile, tmp, tmp);
        const int rc = cu_system(a, fo, fe, &o, &er);
        const double dt = now() - t0;
        CHECK_MSG(rc == 1 && cu_has(er, "cpu.memory-plan") && cu_has(er, "KV cache") &&
                      cu_has(er, "16777216"),
                  "%s: rc %d: %s", cases[k][1], rc, er);
        CHECK_MSG(dt < 5.0, "%s: the refusal took %.1f s", cases[k][1], dt);
    }
    /* the cap from the environment, read in one place; the same model fits within a sane one */
    snprintf(a, sizeof a, "run %s --prompt-ids 1 -n 1", nv);
    CHECK(cli_env("FP4LANE_CPU_MEM_LIMIT=100000", a, &o, &er) == 1 && cu_has(er, "cpu.memory-plan") &&
          cu_has(er, "FP4LANE_CPU_MEM_LIMIT"));
    CHECK(cli_env("FP4LANE_CPU_MEM_LIMIT=12x", a, &o, &er) == 1 && cu_has(er, "FP4LANE_CPU_MEM_LIMIT=12x"));
    CHECK(cli_env("FP4LANE_CPU_MEM_LIMIT=4000000000", a, &o, &er) == 0);
    snprintf(a, sizeof a, "run %s --prompt-ids 1 -n 1 --ctx 4096", big);
    CHECK(cli(a, &o, &er) == 0);
    /* the library: the same refusal, the plan in the error */
    fp4_model *m = NULL;
    fp4_rt *rt = NULL;
    fp4_error e;
    CHECK_OK(fp4_model_open(big, NULL, &m, &e));
    fp4_rt_opts ro = {0};
    ro.n_ctx = 1 << 24, ro.max_seqs = 64;
    const double t1 = now();
    CHECK(fp4_rt_create(m, &ro, &rt, &e) == FP4_ERR_NOMEM && !strcmp(e.rule, "cpu.memory-plan") && !rt);
    CHECK(now() - t1 < 2.0);
    fp4_model_close(m);
    free(o), free(er);
}

int main(void) {
    snprintf(bin, sizeof bin, "%s/fp4lane", getenv("FP4_BUILD") ? getenv("FP4_BUILD") : "build");
    snprintf(tmp, sizeof tmp, "%s/fp4lane-rtcont-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) return perror("mkdtemp"), 1;
    char bf[600], nv[600];
    rtfx_spec s = rtfx_default("llama");
    s.ctx = 4096;
    rtfx_write_pair(tmp, &s, 8, bf, nv, sizeof bf);
    compose(nv, bf);
    compose_text();
    nonfinite();
    outputs(nv, bf);
    memory_plan(nv);
    if (!check_failed) rtfx_rmtree(tmp);
    return check_report();
}
