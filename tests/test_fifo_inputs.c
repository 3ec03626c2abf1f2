/* test_fifo_inputs.c — issue 27 item 4: a FIFO where the library expects a file it reads is refused
 * ("not a regular file (a FIFO)", the file and a rule) and never blocks: tokenizer.json (in a folder
 * and named), tokenizer_config.json (tokenizer and chat template), generation_config.json, a model
 * path, a GGUF, a safetensors file, config.json and a KV snapshot (--kv-load). Each check runs in a
 * child that an alarm ends, so a blocking open fails the test instead of hanging it. */
#include "check.h"
#include "cli_util.h"
#include "fp4lane.h"
#include "fp4lane_text.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmp[256], bin[256];

/* fn() in a child under a 10 s alarm: its exit code (0 passed), 99 when it blocked */
static int in_child(int (*fn)(const char *), const char *arg) {
    fflush(NULL);
    pid_t p = fork();
    if (p == 0) {
        alarm(10);
        _exit(fn(arg));
    }
    int ws = 0;
    if (p < 0 || waitpid(p, &ws, 0) != p) return -1;
    if (WIFSIGNALED(ws)) return WTERMSIG(ws) == SIGALRM ? 99 : 98;
    return WEXITSTATUS(ws);
}

/* 0 when err names a FIFO that is not a regular file, the file and a rule */
static int refused_fifo(fp4_status st, const fp4_error *e, const char *file_part) {
    if (st != FP4_ERR_IO || !strstr(e->msg, "not a regular file") || !strstr(e->msg, "FIFO") || !e->rule[0] ||
        !strstr(e->file, file_part)) {
        fprintf(stderr, "  got %s: %s: %s: %s\n", fp4_status_str(st), e->file, e->rule, e->msg);
        return 1;
    }
    return 0;
}

static int tok_dir(const char *d) {
    fp4_tokenizer *t = NULL;
    fp4_error e = {0};
    return refused_fifo(fp4_tokenizer_load(d, &t, &e), &e, "tokenizer");
}
static int tok_config(const char *d) {
    char p[1024];
    snprintf(p, sizeof p, "%s/tokenizer.json", d); /* named: its tokenizer_config.json beside it */
    fp4_tokenizer *t = NULL;
    fp4_error e = {0};
    return refused_fifo(fp4_tokenizer_load(p, &t, &e), &e, "tokenizer_config.json") ||
           refused_fifo(fp4_tokenizer_load(d, &t, &e), &e, "tokenizer_config.json");
}
static int chat_config(const char *d) {
    char *tmpl = NULL;
    fp4_error e = {0};
    return refused_fifo(fp4_chat_template_read(d, &tmpl, &e), &e, "tokenizer_config.json");
}
static int gen_config(const char *d) {
    int32_t ids[4];
    int n = 0;
    fp4_error e = {0};
    return refused_fifo(fp4_generation_eos(d, ids, 4, &n, &e), &e, "generation_config.json");
}
/* a FIFO as the model path itself: no GGUF magic is read from it, its folder's files decide */
static int model_path(const char *fifo) {
    int32_t ids[4];
    int n = 0;
    fp4_error e = {0};
    char *tmpl = NULL;
    fp4_status a = fp4_generation_eos(fifo, ids, 4, &n, &e), b = fp4_chat_template_read(fifo, &tmpl, &e);
    free(tmpl);
    return a != FP4_OK || b != FP4_OK;
}
static int gguf_st(const char *fifo) {
    fp4_gguf *g = NULL;
    fp4_st *s = NULL;
    fp4_error e = {0};
    return refused_fifo(fp4_gguf_open(fifo, &g, &e), &e, "fifo") ||
           refused_fifo(fp4_st_open(fifo, &s, &e), &e, "fifo");
}

static void mk(const char *dir, const char *name) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    CHECK_MSG(mkfifo(p, 0600) == 0, "mkfifo %s", p);
}
static void cp(const char *from, const char *dir, const char *name) {
    char c[2048];
    snprintf(c, sizeof c, "cp '%s' '%s/%s'", from, dir, name);
    CHECK(system(c) == 0);
}

int main(void) {
    snprintf(bin, sizeof bin, "%s/fp4lane", getenv("FP4_BUILD") ? getenv("FP4_BUILD") : "build");
    snprintf(tmp, sizeof tmp, "%s/fp4lane-fifo-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    CHECK(mkdtemp(tmp) != NULL);
    char d[1024], p[1200];
    /* tokenizer.json a FIFO, in a folder */
    snprintf(d, sizeof d, "%s/a", tmp);
    CHECK(mkdir(d, 0700) == 0);
    mk(d, "tokenizer.json");
    CHECK_MSG(in_child(tok_dir, d) == 0, "tokenizer.json FIFO");
    /* tokenizer_config.json and generation_config.json FIFOs beside a valid tokenizer.json */
    snprintf(d, sizeof d, "%s/b", tmp);
    CHECK(mkdir(d, 0700) == 0);
    cp("tests/data/text/tiny_bytelevel.json", d, "tokenizer.json");
    mk(d, "tokenizer_config.json");
    mk(d, "generation_config.json");
    CHECK_MSG(in_child(tok_config, d) == 0, "tokenizer_config.json FIFO (tokenizer)");
    CHECK_MSG(in_child(chat_config, d) == 0, "tokenizer_config.json FIFO (chat template)");
    CHECK_MSG(in_child(gen_config, d) == 0, "generation_config.json FIFO");
    /* the model path a FIFO, GGUF and safetensors readers */
    snprintf(d, sizeof d, "%s/c", tmp);
    CHECK(mkdir(d, 0700) == 0);
    mk(d, "fifo");
    snprintf(p, sizeof p, "%s/fifo", d);
    CHECK_MSG(in_child(model_path, p) == 0, "model path FIFO");
    CHECK_MSG(in_child(gguf_st, p) == 0, "GGUF / safetensors FIFO");
    /* the CLI: a FIFO snapshot for --kv-load, config.json, a FIFO tokenizer.json in a model folder */
    char *o = NULL, *e = NULL, args[2048];
    snprintf(args, sizeof args, "timeout 20 %s run models/tiny --kv-load %s --prompt-ids 1,2 -n 1", bin, p);
    char fo[300], fe[300];
    snprintf(fo, sizeof fo, "%s/out", tmp);
    snprintf(fe, sizeof fe, "%s/err", tmp);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s >'%s' 2>'%s'", args, fo, fe);
    int rc = cu_system(cmd, fo, fe, &o, &e);
    CHECK_MSG(rc == 1 && cu_has(e, "not a regular file") && cu_has(e, "FIFO") && cu_has(e, "io.open"),
              "--kv-load FIFO: rc %d: %s", rc, e ? e : "");
    snprintf(d, sizeof d, "%s/m", tmp);
    CHECK(mkdir(d, 0700) == 0);
    static const char *const tiny[] = {"config.json", "hf_quant_config.json", "model.safetensors",
                                       "generation_config.json", "tokenizer_config.json"};
    for (int i = 0; i < 5; i++) {
        snprintf(p, sizeof p, "%s/%s/%s", getenv("PWD") ? getenv("PWD") : ".", "models/tiny", tiny[i]);
        cp(p, d, tiny[i]);
    }
    mk(d, "tokenizer.json");
    snprintf(cmd, sizeof cmd, "timeout 20 %s run %s -p hello -n 1 >'%s' 2>'%s'", bin, d, fo, fe);
    rc = cu_system(cmd, fo, fe, &o, &e);
    CHECK_MSG(rc == 1 && cu_has(e, "not a regular file") && cu_has(e, "tokenizer.json"),
              "run with a FIFO tokenizer.json: rc %d: %s", rc, e ? e : "");
    free(o);
    free(e);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    CHECK(system(cmd) == 0);
    return check_report();
}
