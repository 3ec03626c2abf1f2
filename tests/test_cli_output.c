/* test_cli_output.c — issue 12 items 5 and 12: what the CLI writes.
 *  5. a write error on standard output (a full device, a closed descriptor) is exit 1 with the
 *     reason on stderr, for every verb that prints (dump --raw, dump, inspect, inspect --json,
 *     validate, validate --json, selftest --json), never a silent 0;
 * 12. tensor names with terminal controls (OSC title, CR, ANSI clear, C1 CSI) are printed escaped
 *     by inspect and in error messages: no control byte reaches the terminal. */
#include "check.h"
#include "cli_util.h"
#include "fp4lane_io.h"
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static char bin[512], tmp[512];

/* Runs "bin args" with the shell redirection redir; returns the exit status (-1: signal). */
static int sh(const char *args, const char *redir, char **out, char **err) {
    char cmd[3000], fo[600], fe[600];
    snprintf(fo, sizeof fo, "%s/out", tmp);
    snprintf(fe, sizeof fe, "%s/err", tmp);
    if (redir) snprintf(cmd, sizeof cmd, "%s %s %s 2>'%s'", bin, args, redir, fe);
    else snprintf(cmd, sizeof cmd, "%s %s >'%s' 2>'%s'", bin, args, fo, fe);
    return cu_system(cmd, fo, fe, out, err);
}

/* no byte below 0x20 other than \n, no DEL, no C1 control (UTF-8 C2 80..9F) */
static int terminal_safe(const char *s) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; u[i]; i++) {
        if ((u[i] < 0x20 && u[i] != '\n') || u[i] == 0x7F) return 0;
        if (u[i] == 0xC2 && u[i + 1] >= 0x80 && u[i + 1] <= 0x9F) return 0;
    }
    return 1;
}

static void write_hostile_names(const char *path, int orphan) {
    static const char *const names[] = {"a\x1b]0;owned\x07.weight", "b\r\x1b[2J\x1b[H.weight",
                                        "c\xc2\x9b\x33\x31m.weight"}; /* C1 CSI, "31m" */
    fp4_st_writer *w = NULL;
    fp4_error e;
    int64_t sh1[2] = {2, 16};
    CHECK_OK(fp4_st_writer_create(&w, &e));
    for (int i = 0; i < 3; i++) CHECK_OK(fp4_st_writer_add_tensor(w, names[i], FP4_ST_F32, 2, sh1, &e));
    int64_t shs[2] = {2, 1};
    if (orphan) CHECK_OK(fp4_st_writer_add_tensor(w, "d\x1b[31m.weight_scale", FP4_ST_F8_E4M3, 2, shs, &e));
    CHECK_OK(fp4_st_writer_begin(w, path, &e));
    float z[32] = {0};
    for (int i = 0; i < 3; i++) CHECK_OK(fp4_st_writer_write(w, z, sizeof z, &e));
    uint8_t s[2] = {0x38, 0x38};
    if (orphan) CHECK_OK(fp4_st_writer_write(w, s, 2, &e));
    CHECK_OK(fp4_st_writer_finish(w, &e));
    fp4_st_writer_free(w);
}

int main(void) {
    snprintf(bin, sizeof bin, "%s/fp4lane", getenv("FP4_BUILD") ? getenv("FP4_BUILD") : "build");
    snprintf(tmp, sizeof tmp, "%s/fp4lane-cliout-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) return perror("mkdtemp"), 1;
    char *o = NULL, *e = NULL, args[1600];
#define RUN(a, r) (free(o), free(e), o = e = NULL, sh(a, r, &o, &e))
    const char *golden = "../shared/data/modelopt-golden/modelopt_cuda.safetensors";

    /* 5: every printing verb, to a full device and to a closed stdout */
    const char *verbs[] = {"dump %s model.layers.0.mlp.down_proj.weight --raw",
                           "dump %s model.layers.0.mlp.down_proj.weight",
                           "inspect %s", "inspect --json %s", "validate %s", "validate --json %s",
                           "selftest --json"};
    for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++) {
        snprintf(args, sizeof args, verbs[i], golden);
        CHECK_MSG(RUN(args, NULL) == 0 && strlen(o) > 0, "%s", args);
        CHECK_MSG(RUN(args, ">/dev/full") == 1 && strstr(e, "standard output"), "%s >/dev/full: %s", args, e);
        CHECK_MSG(RUN(args, ">&-") == 1 && strstr(e, "standard output is closed"), "%s >&-: %s", args, e);
    }
    /* a closed stdout is never handed to an output file: convert's file gets only its own bytes */
    snprintf(args, sizeof args, "convert %s %s/c.gguf --layout gguf", golden, tmp);
    CHECK(RUN(args, ">&-") == 1);
    snprintf(args, sizeof args, "validate %s/c.gguf", tmp);
    CHECK(RUN(args, NULL) == 0);

    /* 12: hostile names, escaped in inspect and in errors */
    char p[700];
    snprintf(p, sizeof p, "%s/names.safetensors", tmp);
    write_hostile_names(p, 0);
    snprintf(args, sizeof args, "inspect '%s'", p);
    CHECK(RUN(args, NULL) == 0 && terminal_safe(o) && strstr(o, "a\\x1B]0;owned\\x07.weight") &&
          strstr(o, "\\xC2\\x9B31m"));
    snprintf(args, sizeof args, "inspect --json '%s'", p);
    CHECK(RUN(args, NULL) == 0 && terminal_safe(o) && strstr(o, "\\u001B]0;owned\\u0007"));
    snprintf(args, sizeof args, "dump '%s' 'x\x1b[2J'", p);
    CHECK(RUN(args, NULL) == 1 && terminal_safe(e) && strstr(e, "x\\x1B[2J"));
    snprintf(p, sizeof p, "%s/orphan.safetensors", tmp);
    write_hostile_names(p, 1);
    snprintf(args, sizeof args, "validate '%s'", p);
    CHECK(RUN(args, NULL) == 1 && terminal_safe(e) && strstr(e, "d\\x1B[31m"));
    snprintf(args, sizeof args, "validate --json '%s'", p);
    CHECK(RUN(args, NULL) == 1 && terminal_safe(o) && terminal_safe(e));
    free(o);
    free(e);
    snprintf(args, sizeof args, "rm -rf '%s'", tmp);
    if (system(args) != 0) fprintf(stderr, "could not remove %s\n", tmp);
    return check_report();
}
