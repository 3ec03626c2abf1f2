/* test_cli_harden.c — the CLI findings of the hostile audit (issue 27), each as a user or an
 * attacker meets it: -n near 2^63 (checked arithmetic, the context named), context errors that
 * say what was given, two outputs naming one file, --batch-file's long lines / line count / line
 * numbers, a NUL byte or a directory as --prompt-ids @FILE, escaped token-id errors, text output
 * on a terminal, a synthesized model's tokenizer, help text against behaviour, chat's history and
 * system prompt, synth --seed, tokenize --, detokenize without ids, --json's stopped_by. */
#include "check.h"
#include "cli_util.h"
#include "rt_fixture.h"
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char bin[600], tmp[512], args[12000], cmd[12000], nv[600], bf[600];
static char *o, *er;

static int cli(const char *a) {
    return cu_run(bin, tmp, NULL, a, &o, &er);
}
static void put(const char *name, const void *data, size_t n, char *path, size_t cap) {
    snprintf(path, cap, "%s/%s", tmp, name);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(data, 1, n, f) == n);
    if (f) fclose(f);
}
static int exists(const char *p) {
    struct stat sb;
    return !lstat(p, &sb);
}

/* 11, 24: -n 2^63-1 is refused before any work, naming -n and the context, with and without a
 * snapshot; the message names what the user gave and calls defaults defaults */
static void context_checks(void) {
    char kv[700], longp[700];
    snprintf(args, sizeof args, "run %s --prompt-ids 1,2 -n 9223372036854775807", nv);
    CHECK_MSG(cli(args) == 2 && cu_has(er, "-n 9223372036854775807") && cu_has(er, "context length"), "%s",
              er);
    snprintf(kv, sizeof kv, "%s/c.kv", tmp);
    snprintf(args, sizeof args, "run %s --prompt-ids 1,2,3 -n 0 --kv-save %s", nv, kv);
    CHECK(cli(args) == 0);
    snprintf(args, sizeof args, "run %s --prompt-ids 4 -n 9223372036854775807 --kv-load %s", nv, kv);
    CHECK_MSG(cli(args) == 2 && cu_has(er, "-n 9223372036854775807"), "%s", er);
    snprintf(args, sizeof args, "run %s --prompt-ids 4 -n 61 --kv-load %s", nv, kv); /* 3 + 1 + 61 > 64 */
    CHECK_MSG(cli(args) == 2 && cu_has(er, "3 cached + 1 prompt + -n 61") && cu_has(er, "64"), "%s", er);
    /* a text prompt, no -n, no --ctx: neither is named as given */
    snprintf(args, sizeof args, "run models/tiny -p \"Once upon a time there was\" --ctx 3");
    CHECK_MSG(cli(args) == 2 && cu_has(er, "(--ctx)") && !cu_has(er, "-n 128") && cu_has(er, "no room"), "%s",
              er);
    char *words = malloc(8000);
    words[0] = 0;
    for (int i = 0; i < 700; i++)
        strcat(words, "time ");
    put("long.txt", words, strlen(words), longp, sizeof longp);
    free(words);
    snprintf(args, sizeof args, "run models/tiny -f %s", longp);
    CHECK_MSG(cli(args) == 2 && cu_has(er, "the context length 512 (the model's)") && !cu_has(er, "--ctx)") &&
                  !cu_has(er, "-n "),
              "%s", er);
    snprintf(args, sizeof args, "run %s --prompt-ids 1,2,3 --ctx 3", nv);
    CHECK_MSG(cli(args) == 2 && cu_has(er, "16 tokens to generate (the default") && cu_has(er, "(--ctx)") &&
                  !cu_has(er, "-n 16"),
              "%s", er);
}

/* 12, 25: outputs are files: '-' refused (nothing named '-' appears), two outputs of one run
 * naming one file refused, by spelling, by a hard link, by the parent directory */
static void outputs(void) {
    char a1[700], a2[700];
    snprintf(a1, sizeof a1, "%s/same.npy", tmp);
    snprintf(args, sizeof args, "run %s --prompt-ids 1 -n 1 --logits-out %s --kv-save %s/./same.npy", nv, a1,
             tmp);
    CHECK_MSG(cli(args) == 2 && cu_has(er, "same file") && !exists(a1), "%s", er);
    snprintf(args, sizeof args, "run %s --prompt-ids 1 -n 1 --logits-out %s --kv-save %s/../%s/same.npy", nv,
             a1, tmp, strrchr(tmp, '/') + 1);
    CHECK_MSG(cli(args) == 2 && cu_has(er, "same file"), "%s", er);
    put("a.npy", "x", 1, a1, sizeof a1);
    snprintf(a2, sizeof a2, "%s/hard.kv", tmp);
    CHECK(link(a1, a2) == 0);
    snprintf(args, sizeof args, "run %s --prompt-ids 1 -n 1 --logits-out %s --kv-save %s --force", nv, a1,
             a2);
    CHECK_MSG(cli(args) == 2 && cu_has(er, "same file"), "%s", er);
    snprintf(args, sizeof args, "run %s --prompt-ids 1 -n 1 --logits-out %s/l.npy --kv-save %s/k.kv", nv, tmp,
             tmp);
    CHECK_MSG(cli(args) == 0, "two different outputs: %s", er);
    static const char *const opt[2] = {"--logits-out", "--kv-save"};
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd, "cd '%s' && %s run %s --prompt-ids 1 -n 1 %s - >out 2>err", tmp, bin, nv,
                 opt[i]);
        char fo[700], fe[700], dash[700];
        snprintf(fo, sizeof fo, "%s/out", tmp), snprintf(fe, sizeof fe, "%s/err", tmp);
        snprintf(dash, sizeof dash, "%s/-", tmp);
        CHECK_MSG(cu_system(cmd, fo, fe, &o, &er) == 2 && cu_has(er, "name a file") && !exists(dash), "%s",
                  er);
    }
}

/* 13: --batch-file reads whole lines: a 70 KB line is one prompt; more than 4096 prompts are
 * refused, not dropped; errors name the file's line; a NUL byte and a line past 16 MiB refused */
static void batch_file(void) {
    char p[700];
    size_t n = 70000;
    char *b = malloc(20u << 20);
    memcpy(b, "1,", 2), memset(b + 2, ' ', n), memcpy(b + 2 + n, "2\n", 2);
    put("wide.txt", b, n + 4, p, sizeof p);
    snprintf(args, sizeof args, "run %s --batch-file %s -n 1", nv, p);
    CHECK_MSG(cli(args) == 0 && !cu_has(o, "1:") && cu_has(o, "prefill 2 tok"), "%s %s", o,
              er); /* one prompt */
    size_t k = 0;
    for (int i = 0; i < 4097; i++)
        b[k++] = '1', b[k++] = '\n';
    put("many.txt", b, k, p, sizeof p);
    snprintf(args, sizeof args, "run %s --batch-file %s -n 1", nv, p);
    CHECK_MSG(cli(args) == 2 && cu_has(er, "line 4097") && cu_has(er, "more than 4096"), "%s", er);
    put("lines.txt", "1,2\n\n\n1,x\n", 11, p, sizeof p);
    snprintf(args, sizeof args, "run %s --batch-file %s -n 1", nv, p);
    CHECK_MSG(cli(args) == 2 && cu_has(er, "line 4:") && cu_has(er, "token id x"), "%s", er);
    put("nul.txt", "1,2\n3\0,4\n", 9, p, sizeof p);
    snprintf(args, sizeof args, "run %s --batch-file %s -n 1", nv, p);
    CHECK_MSG(cli(args) == 2 && cu_has(er, "line 2") && cu_has(er, "NUL"), "%s", er);
    memset(b, ' ', (17u << 20) - 2), memcpy(b + (17u << 20) - 2, "1\n", 2);
    put("huge.txt", b, 17u << 20, p, sizeof p);
    snprintf(args, sizeof args, "run %s --batch-file %s -n 1", nv, p);
    CHECK_MSG(cli(args) == 2 && cu_has(er, "line 1") && cu_has(er, "16 MiB"), "%s", er);
    unlink(p);
    free(b);
}

/* 14, 15: --prompt-ids @FILE: a NUL byte and a directory refused as such; the bytes of a bad id
 * escaped (no ESC, no OSC title sequence reaches the terminal) */
static void prompt_files(void) {
    char p[700];
    put("nul.ids", "5,6\0,7,8", 8, p, sizeof p);
    snprintf(args, sizeof args, "run %s --prompt-ids @%s -n 1", nv, p);
    CHECK_MSG(cli(args) == 2 && cu_has(er, "NUL") && !cu_has(o, "prefill 2 tok"), "%s", er);
    snprintf(args, sizeof args, "run %s --prompt-ids @%s -n 1", nv, tmp);
    CHECK_MSG(cli(args) == 2 && cu_has(er, "directory") && !cu_has(er, "empty"), "%s", er);
    put("esc.ids", "5,\033]0;pwned\007x,7", strlen("5,\033]0;pwned\007x,7"), p, sizeof p);
    snprintf(args, sizeof args, "run %s --prompt-ids @%s -n 1", nv, p);
    CHECK_MSG(cli(args) == 2 && !strchr(er, '\033') && !strchr(er, '\007') &&
                  cu_has(er, "]0;pwned"),
              "%s", er);
}

/* 19, 25: text out: exact into a pipe, a final newline on a terminal; --json's stopped_by; a
 * synthesized model runs text through its own byte-level tokenizer */
static void text_out(void) {
    snprintf(args, sizeof args, "run models/tiny -p \"Once upon\" -n 5 --json");
    CHECK_MSG(cli(args) == 0 && cu_has(o, "\"stopped_by\":\"length\""), "%s", o);
    snprintf(args, sizeof args, "run models/tiny -p \"Once upon\" -n 5 --stop the --json");
    CHECK_MSG(cli(args) == 0 && cu_has(o, "\"stopped_by\":\"stop\""), "%s", o);
    snprintf(args, sizeof args, "run models/tiny -p \"Once upon\" -n 5");
    CHECK(cli(args) == 0 && *o && o[strlen(o) - 1] != '\n'); /* a pipe: the text exactly */
    char fo[700], fe[700];
    snprintf(fo, sizeof fo, "%s/tty.out", tmp), snprintf(fe, sizeof fe, "%s/tty.err", tmp);
    if (system("command -v script >/dev/null 2>&1") == 0) {
        snprintf(cmd, sizeof cmd,
                 "script -qec \"%s run models/tiny -p 'Once upon' -n 5 2>/dev/null\" /dev/null "
                 ">%s 2>%s",
                 bin, fo, fe);
        CHECK(cu_system(cmd, fo, fe, &o, &er) == 0);
        size_t l = strlen(o);
        CHECK_MSG(l > 2 && o[l - 1] == '\n' && !cu_has(o, "\n\r\n"), "terminal output '%s'", o);
    } else
        printf("  (no script(1): the terminal case is not run)\n");
    char dir[700];
    snprintf(dir, sizeof dir, "%s/synth", tmp);
    snprintf(args, sizeof args, "synth %s --shape tiny", dir);
    CHECK(cli(args) == 0);
    snprintf(args, sizeof args, "run %s -p \"Hello, caf\xc3\xa9\" -n 4 --json", dir);
    CHECK_MSG(cli(args) == 0 && cu_has(o, "\"decode_tokens\":4"), "%s %s", o, er);
    snprintf(args, sizeof args, "tokenize %s \"Hello, caf\xc3\xa9 -- ok\"", dir);
    CHECK(cli(args) == 0);
    char ids[2000];
    snprintf(ids, sizeof ids, "%.*s", (int)strcspn(o, "\n"), o);
    snprintf(args, sizeof args, "detokenize %s %s", dir, ids);
    CHECK_MSG(cli(args) == 0 && !strcmp(o, "Hello, caf\xc3\xa9 -- ok"), "round trip '%s'", o);
}

/* 20: the help text says what the code does: --layout's defaults, read from the help, are the
 * layouts quantize and convert write */
static void help_text(void) {
    char def[64] = "", other[64] = "", out[700];
    CHECK(cli("quantize --help") == 0);
    const char *p = strstr(o, "(default: ");
    CHECK_MSG(p && sscanf(p, "(default: %63s when OUT", def) == 1, "quantize --help: %s", o);
    p = p ? strstr(p, ", else ") : NULL;
    CHECK_MSG(p && sscanf(p, ", else %63[a-z-]", other) == 1, "quantize --help: %s", o);
    snprintf(out, sizeof out, "(nvfp4, %s)", def);
    snprintf(args, sizeof args, "quantize %s %s/q.gguf", bf, tmp);
    CHECK_MSG(cli(args) == 0 && cu_has(o, out), "help says %s: %s %s", def, o, er);
    snprintf(out, sizeof out, "(nvfp4, %s)", other);
    snprintf(args, sizeof args, "quantize %s %s/qdir", bf, tmp);
    CHECK_MSG(cli(args) == 0 && cu_has(o, out), "help says %s: %s %s", other, o, er);
    CHECK(cli("convert --help") == 0);
    p = strstr(o, "(default: ");
    CHECK_MSG(p && sscanf(p, "(default: %63s when OUT", def) == 1 && cu_has(p, "else required"), "%s", o);
    snprintf(out, sizeof out, "(%s)", def);
    snprintf(args, sizeof args, "convert %s %s/c.gguf", nv, tmp);
    CHECK_MSG(cli(args) == 0 && cu_has(cu_last_line(o), out), "help says %s: %s %s", def, o, er);
    snprintf(args, sizeof args, "convert %s %s/cdir", nv, tmp);
    CHECK(cli(args) == 2);
}

/* 21: chat refuses a too-long message before forgetting any history; a system prompt that leaves
 * no room is refused at startup, naming --system */
static void chat(void) {
    char in[700], fo[700], fe[700];
    char *text = malloc(4000);
    strcpy(text, "hello\n");
    for (int i = 0; i < 300; i++)
        strcat(text, "word ");
    strcat(text, "\nhi\n");
    put("chat.in", text, strlen(text), in, sizeof in);
    snprintf(fo, sizeof fo, "%s/out", tmp), snprintf(fe, sizeof fe, "%s/err", tmp);
    snprintf(cmd, sizeof cmd, "%s chat models/tiny --ctx 128 -n 4 --temp 0 <%s >%s 2>%s", bin, in, fo, fe);
    CHECK(cu_system(cmd, fo, fe, &o, &er) == 0);
    CHECK_MSG(cu_has(er, "longer than the context") && !cu_has(er, "forgotten"), "%s", er);
    const char *last = strrchr(er, '[');
    CHECK_MSG(last && !cu_has(last, "(0 reused)"), "the history was kept: %s", er);
    text[strlen(text) - 4] = 0; /* the long line alone */
    snprintf(cmd, sizeof cmd, "%s chat models/tiny --ctx 64 --system \"%s\" </dev/null >%s 2>%s", bin,
             text + 6, fo, fe);
    CHECK_MSG(cu_system(cmd, fo, fe, &o, &er) == 2 && cu_has(er, "--system") && cu_has(er, "64"), "%s", er);
    free(text);
}

/* 25: synth --seed out of range, tokenize's "--", detokenize without ids */
static void small(void) {
    snprintf(args, sizeof args, "synth %s/s1 --shape tiny --seed -1", tmp);
    CHECK_MSG(cli(args) == 2 && cu_has(er, "-1"), "%s", er);
    snprintf(args, sizeof args, "synth %s/s2 --shape tiny --seed 99999999999999999999", tmp);
    CHECK_MSG(cli(args) == 2 && cu_has(er, "99999999999999999999"), "%s", er);
    CHECK(cli("tokenize models/tiny -- -hello") == 0 && *o >= '0' && *o <= '9');
    CHECK(cli("tokenize models/tiny -- --json") == 0 && !cu_has(o, "ids"));
    CHECK_MSG(cli("detokenize models/tiny") == 2 && cu_has(er, "no token ids"), "%s", er);
    CHECK(cli("detokenize models/tiny -- 300") == 0 && *o);
}

int main(void) {
    const char *b = getenv("FP4_BUILD") ? getenv("FP4_BUILD") : "build";
    char rel[600], abs_bin[PATH_MAX];
    snprintf(rel, sizeof rel, "%s/fp4lane", b);
    if (!realpath(rel, abs_bin) || strlen(abs_bin) >= sizeof bin) return perror(rel), 1;
    memcpy(bin, abs_bin, strlen(abs_bin) + 1);
    snprintf(tmp, sizeof tmp, "%s/fp4lane-harden-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) return perror("mkdtemp"), 1;
    rtfx_spec s = rtfx_default("llama");
    s.ctx = 64;
    rtfx_write_pair(tmp, &s, 5, bf, nv, sizeof bf);
    context_checks();
    outputs();
    batch_file();
    prompt_files();
    text_out();
    help_text();
    chat();
    small();
    free(o), free(er);
    if (!check_failed) rtfx_rmtree(tmp);
    return check_report();
}
