/* test_hostile_cost.c — issue 12 item 11: what a hostile file inside every cap costs.
 *  - a safetensors file with FP4_MAX_TENSORS tensors (an ~60 MB header): the loader (validate) and
 *    inspect --json (streamed) stay under the memory bound docs/FORMATS.md states;
 *  - an HF index with more weight_map entries than a checkpoint may hold tensors is refused before
 *    any JSON tree is built (small peak memory), and so are shards that hold more in all.
 * Peak memory is the child process's maximum resident set (wait4). The bound is not checked under
 * AddressSanitizer (its shadow memory is not the program's). */
#include "check.h"
#include "fp4lane_io.h"
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

#define LOAD_BOUND_MB 600  /* docs/FORMATS.md: validate of a FP4_MAX_TENSORS-tensor header */
#define INSPECT_BOUND_MB 900
#define REFUSE_BOUND_MB 150

static char tmp[512], bin[512];

/* n tensors "model.layers.<i%100>.t<i>" F32 [1]: the shape of the 68 MB header */
static void write_many(const char *path, long n) {
    size_t cap = (size_t)n * 96 + 64, len = 0;
    char *h = malloc(cap);
    h[len++] = '{';
    for (long i = 0; i < n; i++)
        len += (size_t)snprintf(h + len, cap - len,
                                "%s\"model.layers.%ld.t%07ld\":{\"dtype\":\"F32\",\"shape\":[1],"
                                "\"data_offsets\":[%ld,%ld]}",
                                i ? "," : "", i % 100, i, 4 * i, 4 * i + 4);
    h[len++] = '}';
    while (len % 8) h[len++] = ' ';
    FILE *f = fopen(path, "wb");
    uint8_t l8[8];
    for (int i = 0; i < 8; i++) l8[i] = (uint8_t)((uint64_t)len >> (8 * i));
    CHECK(f && fwrite(l8, 1, 8, f) == 8 && fwrite(h, 1, len, f) == len);
    static const uint8_t zero[4096];
    for (long left = 4 * n; f && left > 0; left -= 4096)
        CHECK(fwrite(zero, 1, left < 4096 ? (size_t)left : 4096, f) > 0);
    if (f) fclose(f);
    free(h);
}

/* Runs the CLI with args (stdout to /dev/null); returns the exit code, *peak_mb the child's peak RSS. */
static int run_cli(const char *args, long *peak_mb) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "exec %s %s >/dev/null 2>&1", bin, args);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    int ws = 0;
    struct rusage ru;
    wait4(pid, &ws, 0, &ru);
    *peak_mb = ru.ru_maxrss / 1024;
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
}

int main(void) {
    snprintf(bin, sizeof bin, "%s/fp4lane", getenv("FP4_BUILD") ? getenv("FP4_BUILD") : "build");
    snprintf(tmp, sizeof tmp, "%s/fp4lane-cost-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) return perror("mkdtemp"), 1;
    char p[700], args[1000];
    long mb;
    snprintf(p, sizeof p, "%s/many.safetensors", tmp);
    write_many(p, FP4_MAX_TENSORS);
    snprintf(args, sizeof args, "validate %s", p);
    CHECK(run_cli(args, &mb) == 0);
    printf("validate, %d tensors in one safetensors header: peak %ld MB (bound %d)\n", FP4_MAX_TENSORS, mb,
           LOAD_BOUND_MB);
    CHECK_MSG(UNDER_ASAN || mb < LOAD_BOUND_MB, "validate peaked at %ld MB", mb);
    snprintf(args, sizeof args, "inspect --json %s", p);
    CHECK(run_cli(args, &mb) == 0);
    printf("inspect --json, the same file: peak %ld MB (bound %d)\n", mb, INSPECT_BOUND_MB);
    CHECK_MSG(UNDER_ASAN || mb < INSPECT_BOUND_MB, "inspect --json peaked at %ld MB", mb);
    unlink(p);

    /* an index naming more tensors than a checkpoint may hold: refused before it is parsed */
    snprintf(p, sizeof p, "%s/dir", tmp);
    CHECK(mkdir(p, 0777) == 0);
    snprintf(args, sizeof args, "%s/dir/model.safetensors.index.json", tmp);
    FILE *f = fopen(args, "wb");
    CHECK(f && fputs("{\"metadata\":{},\"weight_map\":{", f) >= 0);
    for (long i = 0; f && i <= FP4_MAX_TENSORS + 64; i++) fprintf(f, "%s\"t%ld\":\"a\"", i ? "," : "", i);
    if (f) fputs("}}", f), fclose(f);
    fp4_hfdir *d = NULL;
    fp4_error e;
    CHECK(fp4_hfdir_open(p, &d, &e) == FP4_ERR_LIMIT && !strcmp(e.rule, "index.tensor_count") && !d);
    snprintf(args, sizeof args, "validate %s", p);
    CHECK(run_cli(args, &mb) == 1);
    printf("validate, an index of %d entries: refused, peak %ld MB (bound %d)\n", FP4_MAX_TENSORS + 65, mb,
           REFUSE_BOUND_MB);
    CHECK_MSG(UNDER_ASAN || mb < REFUSE_BOUND_MB, "the refusal peaked at %ld MB", mb);
    snprintf(args, sizeof args, "rm -rf '%s'", tmp);
    if (system(args) != 0) fprintf(stderr, "could not remove %s\n", tmp);
    return check_report();
}
