/* test_outfile.c — issue 12, data loss (items 1–4 and 10): every output is atomic.
 *  1. output = input under any name (same path, ./path, hard link, symbolic link, a directory
 *     holding the input) is refused and the input keeps every byte;
 *  2. a path that is not a regular file (a FIFO, a directory, /dev/null) or a symbolic link is
 *     refused and left as it was; a failed write (file size limit) leaves the old output;
 *  3. processes killed (SIGKILL) at many points of a write leave the old output or the complete
 *     new one, and SIGINT/SIGTERM to the CLI also removes its temporary files;
 *  4. sharded outputs never mix two runs: a non-empty directory is refused without --force, with
 *     it the old checkpoint is replaced whole (other files kept), kills leave old or new;
 * 10. a re-run with another --shard-size into an earlier output never leaves a directory the
 *     loader refuses;
 * and an existing output file is replaced only with force (--force): refused before any work
 * without it (library and CLI: quantize, convert, run's --logits-out / --kv-save), and a file
 * that appears at the path while a run writes keeps its bytes (the rename never replaces). */
#include "check.h"
#include "fp4lane_io.h"
#include "io/outfile.h" /* fp4_outfile_test_fallback */
#include "tmpnames.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char tmp[512], bin[512];

/* tmp/name, interned: each distinct name gets its own buffer for the whole run */
static const char *path_in(const char *name) {
    static char buf[32][800];
    static int n;
    char p[800];
    snprintf(p, sizeof p, "%s/%s", tmp, name);
    for (int i = 0; i < n; i++)
        if (!strcmp(buf[i], p)) return buf[i];
    if (n == 32) abort(); /* a test bug, not a finding */
    memcpy(buf[n], p, sizeof p);
    return buf[n++];
}

static uint8_t *slurp(const char *path, long *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return *n = -1, NULL;
    fseek(f, 0, SEEK_END);
    *n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc((size_t)*n + 1);
    if (fread(p, 1, (size_t)*n, f) != (size_t)*n) *n = -1;
    fclose(f);
    return p;
}

static void copy_file(const char *from, const char *to) {
    long n;
    uint8_t *p = slurp(from, &n);
    FILE *f = fopen(to, "wb");
    CHECK(p && f && n >= 0 && fwrite(p, 1, (size_t)n, f) == (size_t)n);
    if (f) fclose(f);
    free(p);
}

static int loads(const char *path) {
    fp4_model *m = NULL;
    fp4_error e;
    fp4_status st = fp4_model_open(path, NULL, &m, &e);
    fp4_model_close(m);
    return st == FP4_OK;
}

/* A bf16 checkpoint of n_layers × 3 projections (rows × cols each), seeded values. */
static void make_bf16(const char *path, int n_layers, int rows, int cols, uint64_t seed) {
    fp4_st_writer *w = NULL;
    fp4_error e;
    CHECK_OK(fp4_st_writer_create(&w, &e));
    char name[128];
    int64_t shape[2] = {rows, cols};
    static const char *const proj[3] = {"mlp.down_proj", "mlp.up_proj", "self_attn.o_proj"};
    for (int l = 0; l < n_layers; l++)
        for (int j = 0; j < 3; j++) {
            snprintf(name, sizeof name, "model.layers.%d.%s.weight", l, proj[j]);
            CHECK_OK(fp4_st_writer_add_tensor(w, name, FP4_ST_BF16, 2, shape, &e));
        }
    CHECK_OK(fp4_st_writer_begin(w, path, &e));
    uint16_t *buf = malloc((size_t)rows * (size_t)cols * 2);
    test_rng r = {seed};
    for (int t = 0; t < 3 * n_layers; t++) {
        for (long k = 0; k < (long)rows * cols; k++) buf[k] = fp4_f32_to_bf16(rng_normal(&r) * 0.02f);
        CHECK_OK(fp4_st_writer_write(w, buf, (size_t)rows * (size_t)cols * 2, &e));
    }
    CHECK_OK(fp4_st_writer_finish(w, &e));
    fp4_st_writer_free(w);
    free(buf);
}

/* ---- 1. output = input ---- */

static void test_same_file(void) {
    const char *g = path_in("m.gguf");
    fp4_model *m = NULL;
    fp4_error e;
    CHECK_OK(fp4_model_open("../shared/data/modelopt-golden/modelopt_cuda.safetensors", NULL, &m, &e));
    fp4_write_opts o = {.layout = FP4_LAYOUT_GGUF};
    CHECK_OK(fp4_model_write(m, g, &o, &e));
    fp4_model_close(m);
    long n0;
    uint8_t *before = slurp(g, &n0);
    CHECK_OK(fp4_model_open(g, NULL, &m, &e));
    CHECK(link(g, path_in("hard.gguf")) == 0 && symlink("m.gguf", path_in("soft.gguf")) == 0);
    char dotted[800];
    snprintf(dotted, sizeof dotted, "%s/./m.gguf", tmp);
    const char *names[] = {g, dotted, path_in("hard.gguf"), path_in("soft.gguf")};
    for (int i = 0; i < 4; i++) {
        CHECK(fp4_model_write(m, names[i], &o, &e) == FP4_ERR_IO && !strcmp(e.rule, "out.same-file"));
        CHECK(file_equals(g, before, n0) && tmp_names_beside(g) == 0);
    }
    fp4_model_close(m);
    /* quantize x x: the same refusal, and the input keeps its bytes */
    const char *x = path_in("x.safetensors");
    copy_file("../shared/data/modelopt-golden/input.safetensors", x);
    long nx;
    uint8_t *xb = slurp(x, &nx);
    fp4_quantize_opts q = {.layout = FP4_LAYOUT_GGUF};
    CHECK(fp4_quantize_checkpoint(x, x, &q, &e) == FP4_ERR_IO && !strcmp(e.rule, "out.same-file"));
    CHECK(file_equals(x, xb, nx));
    /* a directory holding the input is the input too (with --force its files would go) */
    const char *d = path_in("din");
    CHECK(mkdir(d, 0777) == 0);
    char inner[900];
    snprintf(inner, sizeof inner, "%s/model.safetensors", d);
    copy_file(x, inner);
    q.layout = FP4_LAYOUT_MODELOPT;
    q.force = 1;
    CHECK(fp4_quantize_checkpoint(inner, d, &q, &e) == FP4_ERR_IO && !strcmp(e.rule, "out.same-file"));
    CHECK(fp4_quantize_checkpoint(d, d, &q, &e) == FP4_ERR_IO && !strcmp(e.rule, "out.same-file"));
    CHECK(file_equals(inner, xb, nx));
    free(before);
    free(xb);
}

/* ---- 2. what is at the output path and was not made by the run stays ---- */

static void test_foreign_paths(void) {
    fp4_model *m = NULL;
    fp4_error e;
    CHECK_OK(fp4_model_open(path_in("m.gguf"), NULL, &m, &e));
    fp4_write_opts o = {.layout = FP4_LAYOUT_GGUF};
    const char *fifo = path_in("fifo"), *dir = path_in("adir");
    const char *link_out = path_in("link.gguf"), *other = path_in("other");
    CHECK(mkfifo(fifo, 0666) == 0 && mkdir(dir, 0777) == 0);
    FILE *f = fopen(other, "wb");
    CHECK(f && fputs("not fp4lane's", f) >= 0);
    if (f) fclose(f);
    CHECK(symlink(other, link_out) == 0);
    struct stat sb;
    CHECK(fp4_model_write(m, fifo, &o, &e) == FP4_ERR_IO && !strcmp(e.rule, "out.not-regular"));
    CHECK(lstat(fifo, &sb) == 0 && S_ISFIFO(sb.st_mode));
    CHECK(fp4_model_write(m, dir, &o, &e) == FP4_ERR_IO && !strcmp(e.rule, "out.not-regular"));
    CHECK(lstat(dir, &sb) == 0 && S_ISDIR(sb.st_mode));
    CHECK(fp4_model_write(m, "/dev/null", &o, &e) == FP4_ERR_IO && !strcmp(e.rule, "out.not-regular"));
    CHECK(lstat("/dev/null", &sb) == 0 && S_ISCHR(sb.st_mode));
    CHECK(fp4_model_write(m, link_out, &o, &e) == FP4_ERR_IO && !strcmp(e.rule, "out.symlink"));
    CHECK(file_equals(other, "not fp4lane's", 13) && lstat(link_out, &sb) == 0 && S_ISLNK(sb.st_mode));
    o.layout = FP4_LAYOUT_MODELOPT; /* a directory output where a file is */
    CHECK(fp4_model_write(m, other, &o, &e) == FP4_ERR_IO && !strcmp(e.rule, "out.not-regular"));
    CHECK(file_equals(other, "not fp4lane's", 13) && tmp_names_beside(other) == 0);
    /* a write that fails midway (file size limit) leaves the old output and no temporary name */
    const char *out = path_in("limited.gguf");
    f = fopen(out, "wb");
    CHECK(f && fputs("old output", f) >= 0);
    if (f) fclose(f);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {40000, 40000};
        setrlimit(RLIMIT_FSIZE, &rl);
        fp4_write_opts og = {.layout = FP4_LAYOUT_GGUF, .force = 1};
        fp4_status st = fp4_model_write(m, out, &og, &e);
        _exit(st == FP4_ERR_IO && !strcmp(e.rule, "out.io") ? 0 : 1);
    }
    int ws = 0;
    waitpid(pid, &ws, 0);
    CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    CHECK(file_equals(out, "old output", 10) && tmp_names_beside(out) == 0);
    /* a replaced file keeps its permissions (the new inode is not left at the default mode) */
    CHECK(chmod(out, 0640) == 0);
    fp4_write_opts og = {.layout = FP4_LAYOUT_GGUF, .force = 1};
    CHECK_OK(fp4_model_write(m, out, &og, &e));
    CHECK(stat(out, &sb) == 0 && (sb.st_mode & 07777) == 0640 && loads(out));
    fp4_model_close(m);
}

/* ---- an existing output file: replaced only with force ---- */

/* the progress callback of test_existing_file: puts a foreign file at the output path during the
 * write (after its first chunk), as another process could */
static const char *appear_path;
static void progress_appear(void *ctx, const char *what, uint64_t done, uint64_t total) {
    (void)ctx, (void)what, (void)done, (void)total;
    if (!appear_path) return;
    FILE *f = fopen(appear_path, "wb");
    if (f) fputs("appeared", f), fclose(f);
    appear_path = NULL;
}

static void test_existing_file(void) {
    fp4_model *m = NULL;
    fp4_error e;
    CHECK_OK(fp4_model_open(path_in("m.gguf"), NULL, &m, &e));
    const char *keep = path_in("keep.gguf"), *x = path_in("x.safetensors");
    FILE *f = fopen(keep, "wb");
    CHECK(f && fputs("the user's file", f) >= 0);
    if (f) fclose(f);
    fp4_write_opts o = {.layout = FP4_LAYOUT_GGUF_GGML};
    CHECK(fp4_model_write(m, keep, &o, &e) == FP4_ERR_IO && !strcmp(e.rule, "out.exists"));
    CHECK(file_equals(keep, "the user's file", 15) && tmp_names_beside(keep) == 0);
    fp4_quantize_opts q = {.layout = FP4_LAYOUT_GGUF};
    CHECK(fp4_quantize_checkpoint(x, keep, &q, &e) == FP4_ERR_IO && !strcmp(e.rule, "out.exists"));
    CHECK(file_equals(keep, "the user's file", 15) && tmp_names_beside(keep) == 0);
    /* the CLI: exit 1 with the rule, the file intact; --force replaces it with a checkpoint */
    char cmd[2400];
    snprintf(cmd, sizeof cmd, "'%s' quantize '%s' '%s' 2>/dev/null", bin, x, keep);
    CHECK(WEXITSTATUS(system(cmd)) == 1 && file_equals(keep, "the user's file", 15));
    snprintf(cmd, sizeof cmd, "'%s' convert '%s' '%s' --layout gguf 2>/dev/null", bin, path_in("m.gguf"),
             keep);
    CHECK(WEXITSTATUS(system(cmd)) == 1 && file_equals(keep, "the user's file", 15));
    snprintf(cmd, sizeof cmd, "'%s' convert '%s' '%s' --layout gguf --force >/dev/null 2>&1", bin,
             path_in("m.gguf"), keep);
    CHECK(WEXITSTATUS(system(cmd)) == 0 && loads(keep) && tmp_names_beside(keep) == 0);
    /* a file that appears at the path while the write runs: the commit refuses, it keeps its
     * bytes, the run's temporary file is removed (library, without force) */
    const char *late = path_in("late.gguf");
    appear_path = late;
    fp4_write_opts ol = {.layout = FP4_LAYOUT_GGUF, .progress = progress_appear};
    CHECK(fp4_model_write(m, late, &ol, &e) == FP4_ERR_IO && !strcmp(e.rule, "out.exists"));
    CHECK(!appear_path && file_equals(late, "appeared", 8) && tmp_names_beside(late) == 0);
    /* with force the same race replaces it (the caller asked for that) */
    appear_path = late;
    ol.force = 1;
    CHECK_OK(fp4_model_write(m, late, &ol, &e));
    CHECK(!appear_path && loads(late) && tmp_names_beside(late) == 0);
    /* the same race on the fallbacks (a filesystem without RENAME_NOREPLACE: a hard link; without
     * hard links either: a check of the name, then a plain rename): refused, and a plain write still
     * lands */
    for (int level = 1; level <= 2; level++) {
        fp4_outfile_test_fallback(level);
        remove(late);
        appear_path = late;
        ol.force = 0;
        CHECK(fp4_model_write(m, late, &ol, &e) == FP4_ERR_IO && !strcmp(e.rule, "out.exists"));
        CHECK(!appear_path && file_equals(late, "appeared", 8) && tmp_names_beside(late) == 0);
        remove(late);
        fp4_write_opts plain = {.layout = FP4_LAYOUT_GGUF};
        CHECK_OK(fp4_model_write(m, late, &plain, &e));
        CHECK(loads(late) && tmp_names_beside(late) == 0);
        fp4_outfile_test_fallback(0);
    }
    /* quantize: the same, through the read pass and the write */
    const char *lq = path_in("lateq.gguf");
    appear_path = lq;
    fp4_quantize_opts qa = {.layout = FP4_LAYOUT_GGUF, .progress = progress_appear};
    CHECK(fp4_quantize_checkpoint(x, lq, &qa, &e) == FP4_ERR_IO && !strcmp(e.rule, "out.exists"));
    CHECK(!appear_path && file_equals(lq, "appeared", 8) && tmp_names_beside(lq) == 0);
    fp4_model_close(m);
}

/* ---- 3. killed at many points ---- */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* Removes the temporary names a SIGKILLed writer left beside path (they are allowed, and the
 * next run must not need them gone). Returns how many there were. */
static int sweep_tmp(const char *path) {
    char dir[800], prefix[300];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    snprintf(prefix, sizeof prefix, ".fp4lane-tmp-%s-", slash + 1);
    *slash = 0;
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *de;
    char cmd[1400];
    while (d && (de = readdir(d)))
        if (!strncmp(de->d_name, prefix, strlen(prefix))) {
            snprintf(cmd, sizeof cmd, "rm -rf '%s/%s'", dir, de->d_name);
            n += system(cmd) == 0;
        }
    if (d) closedir(d);
    return n;
}

/* The write's progress callback as a kill switch: the child SIGKILLs itself at its n-th call
 * (each call follows one chunk of tensor bytes), or only counts the calls (kill_at 0). */
static long progress_calls, kill_at;
static void progress_kill(void *ctx, const char *what, uint64_t done, uint64_t total) {
    (void)ctx, (void)what, (void)done, (void)total;
    if (++progress_calls == kill_at) raise(SIGKILL);
}

static fp4_status quantize_gguf(const char *in, const char *out) {
    fp4_quantize_opts q = {.layout = FP4_LAYOUT_GGUF, .progress = progress_kill, .force = 1};
    fp4_error e;
    return fp4_quantize_checkpoint(in, out, &q, &e);
}

/* Runs argv (the CLI) or, with argv NULL, a library quantize into out that kills itself at
 * progress call self_kill; the parent sends sig after delay seconds (delay < 0: no signal).
 * Returns the wait status. */
static int run_and_kill(char *const *argv, const char *in, const char *out, long self_kill, double delay,
                        int sig) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (argv) {
            int fd = open("/dev/null", O_WRONLY);
            dup2(fd, 1), dup2(fd, 2);
            execv(argv[0], argv);
            _exit(127);
        }
        kill_at = self_kill, progress_calls = 0;
        _exit(quantize_gguf(in, out) == FP4_OK ? 0 : 1);
    }
    if (delay >= 0) {
        sleep_s(delay);
        kill(pid, sig);
    }
    int ws = 0;
    waitpid(pid, &ws, 0);
    return ws;
}

static void test_kill_file(void) {
    const char *in = path_in("big.safetensors"), *out = path_in("o.gguf"), *ref = path_in("ref.gguf");
    make_bf16(in, 3, 512, 1536, 11); /* 4.5 MiB of bf16 */
    double t0 = now();
    progress_calls = kill_at = 0;
    CHECK_OK(quantize_gguf(in, ref)); /* the complete new file, and how many chunks its write has */
    double t_run = now() - t0;
    const long n_calls = progress_calls;
    long n_new, n_old;
    uint8_t *new_bytes = slurp(ref, &n_new), *old_bytes = slurp(path_in("m.gguf"), &n_old);
    CHECK(n_new > 0 && n_old > 0 && loads(ref) && n_calls >= 8);
    /* SIGKILL after every chunk of the write (the process dies holding a partial temporary file),
     * then at times spread over the run (reading, quantizing, committing) */
    int n_old_seen = 0, n_new_seen = 0, bad = 0, left = 0, n = 0;
    for (long k = 1; k <= n_calls + 8; k++, n++) {
        copy_file(path_in("m.gguf"), out);
        if (k <= n_calls) run_and_kill(NULL, in, out, k, -1, 0);
        else run_and_kill(NULL, in, out, 0, t_run * (double)(k - n_calls) / 8 * 1.2, SIGKILL);
        int is_old = file_equals(out, old_bytes, n_old), is_new = file_equals(out, new_bytes, n_new);
        CHECK_MSG(k > n_calls || is_old, "killed after chunk %ld of %ld: the old file is gone", k, n_calls);
        n_old_seen += is_old, n_new_seen += is_new, bad += !is_old && !is_new;
        left += sweep_tmp(out);
    }
    CHECK_MSG(bad == 0, "%d of %d killed runs left neither the old nor the new file", bad, n);
    CHECK(left >= n_calls); /* each mid-write kill did leave its partial file: the kills hit the write */
    printf("SIGKILL x%d (after each of %ld write chunks, then over a %.2f s run): old file %d, new file %d, "
           "mixed 0, stale temporaries %d (removed)\n", n, n_calls, t_run, n_old_seen, n_new_seen, left);
    /* SIGINT / SIGTERM to the CLI: old or new, and its temporary file removed */
    char *argv[] = {bin, "quantize", (char *)in, (char *)out, "--layout", "gguf", "--force", NULL};
    for (int k = 0; k < 6; k++) {
        copy_file(path_in("m.gguf"), out);
        int sig = k % 2 ? SIGTERM : SIGINT;
        int ws = run_and_kill(argv, in, out, 0, t_run * (k + 0.5) / 6, sig);
        int is_old = file_equals(out, old_bytes, n_old), is_new = file_equals(out, new_bytes, n_new);
        int by_sig = WIFSIGNALED(ws) && WTERMSIG(ws) == sig, done = WIFEXITED(ws) && WEXITSTATUS(ws) == 0;
        CHECK((by_sig && (is_old || is_new)) || (done && is_new)); /* stopped by the signal, or finished */
        CHECK_MSG(tmp_names_beside(out) == 0, "SIGINT/SIGTERM left a temporary file");
        sweep_tmp(out);
    }
    free(new_bytes);
    free(old_bytes);
}

/* ---- 4 and 10: directories ---- */

/* "name:size;..." of the regular files in dir, sorted, and whether each equals the one in ref */
static int same_tree(const char *a, const char *b) {
    char cmd[2000];
    snprintf(cmd, sizeof cmd, "diff -r '%s' '%s' >/dev/null 2>&1", a, b);
    return system(cmd) == 0;
}

static void test_dirs(void) {
    const char *in = path_in("big.safetensors"), *d = path_in("outdir");
    const char *ref5 = path_in("ref5"), *ref1 = path_in("ref1");
    fp4_quantize_opts q = {.layout = FP4_LAYOUT_MODELOPT, .max_shard_bytes = 1u << 20};
    fp4_error e;
    CHECK_OK(fp4_quantize_checkpoint(in, ref5, &q, &e)); /* several shards and an index */
    CHECK(loads(ref5));
    q.max_shard_bytes = 0;
    CHECK_OK(fp4_quantize_checkpoint(in, ref1, &q, &e)); /* one model.safetensors */
    /* the earlier output is not overwritten piecemeal: refused without force, intact, loads */
    char cmd[2000];
    snprintf(cmd, sizeof cmd, "cp -r '%s' '%s'", ref5, d);
    CHECK(system(cmd) == 0);
    CHECK(fp4_quantize_checkpoint(in, d, &q, &e) == FP4_ERR_IO && !strcmp(e.rule, "out.exists"));
    CHECK(same_tree(d, ref5) && loads(d));
    /* with force: the old checkpoint goes whole, a foreign regular file stays */
    char tok[900];
    snprintf(tok, sizeof tok, "%s/tokenizer.json", d);
    FILE *f = fopen(tok, "wb");
    CHECK(f && fputs("{}", f) >= 0);
    if (f) fclose(f);
    q.force = 1;
    CHECK_OK(fp4_quantize_checkpoint(in, d, &q, &e));
    CHECK(file_equals(tok, "{}", 2) && unlink(tok) == 0);
    CHECK(same_tree(d, ref1) && loads(d) && tmp_names_beside(d) == 0);
    /* an empty directory is an absent one */
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir '%s'", d, d);
    CHECK(system(cmd) == 0);
    q.force = 0;
    CHECK_OK(fp4_quantize_checkpoint(in, d, &q, &e));
    CHECK(same_tree(d, ref1));
    /* the raw sharded writer refuses weights files of another checkpoint in its directory */
    fp4_hfdir_writer *w = NULL;
    int64_t sh[1] = {4};
    CHECK_OK(fp4_hfdir_writer_create(ref5, 8, &w, &e));
    CHECK_OK(fp4_hfdir_writer_add_tensor(w, "a", FP4_ST_F32, 1, sh, &e));
    float v[4] = {0};
    CHECK(fp4_hfdir_writer_write(w, v, sizeof v, &e) == FP4_ERR_IO && !strcmp(e.rule, "hfw.stale"));
    fp4_hfdir_writer_free(w);
    CHECK(loads(ref5));
    /* killed at many points of a forced replacement: the old directory or the new one, whole */
    char *argv[] = {bin, "quantize", (char *)in, (char *)d, "--layout", "modelopt", "--shard-size", "1M",
                    "--force", NULL};
    double t0 = now();
    CHECK(WIFEXITED(run_and_kill(argv, NULL, NULL, 0, -1, 0)));
    double t_run = now() - t0;
    CHECK(same_tree(d, ref5));
    const int N = 8;
    int n_old = 0, n_new = 0, bad = 0;
    for (int k = 0; k < N; k++) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", d, ref1, d);
        CHECK(system(cmd) == 0);
        run_and_kill(argv, NULL, NULL, 0, t_run * (k + 0.5) / N * 1.3, k % 4 == 3 ? SIGINT : SIGKILL);
        int is_old = same_tree(d, ref1), is_new = same_tree(d, ref5);
        n_old += is_old, n_new += is_new, bad += !is_old && !is_new;
        CHECK(loads(d));
        sweep_tmp(d);
    }
    CHECK_MSG(bad == 0, "%d of %d killed directory writes left a mixed directory", bad, N);
    printf("killed x%d over a %.2f s sharded quantize --force: old directory %d, new directory %d, "
           "mixed 0\n", N, t_run, n_old, n_new);
}

int main(void) {
    snprintf(bin, sizeof bin, "%s/fp4lane", getenv("FP4_BUILD") ? getenv("FP4_BUILD") : "build");
    snprintf(tmp, sizeof tmp, "%s/fp4lane-outfile-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) return perror("mkdtemp"), 1;
    test_same_file();
    test_foreign_paths();
    test_existing_file();
    test_kill_file();
    test_dirs();
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp);
    return check_report();
}
