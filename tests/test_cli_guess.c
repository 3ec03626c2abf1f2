/* test_cli_guess.c — a CLI people can guess (issue 13 item 5): --help after any verb, full option
 * help with defaults, shapes labelled by order, output parents created (and removed again when the
 * run fails), file-like names never made directories, strict sizes, --metadata refused where it
 * cannot go, a non-model file and a FIFO named as such, "-" refused as an output, a negative scale
 * byte not called NaN, a progress bar with phase and ETA, and no leftovers after a failed run. */
#include "check.h"
#include "cli_util.h"
#include "fp4lane.h"
#include "io/outfile.h"
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tools/cli_args.c" /* cli_parse_size, tested directly */

static char bin[512], tmp[512];

static int cli(const char *args, char **out, char **err) {
    char cmd[4096], fo[600], fe[600];
    snprintf(fo, sizeof fo, "%s/out", tmp);
    snprintf(fe, sizeof fe, "%s/err", tmp);
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s >'%s' 2>'%s' </dev/null", tmp, bin, args, fo, fe);
    return cu_system(cmd, fo, fe, out, err);
}

static int exists(const char *rel) {
    char p[1200];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", tmp, rel);
    return lstat(p, &sb) == 0;
}

/* entries of tmp whose name starts with prefix */
static int count_prefixed(const char *dir, const char *prefix) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (!strncmp(de->d_name, prefix, strlen(prefix))) n++;
    if (d) closedir(d);
    return n;
}

int main(void) {
    const char *b = getenv("FP4_BUILD") ? getenv("FP4_BUILD") : "build";
    if (b[0] == '/') snprintf(bin, sizeof bin, "%s/fp4lane", b);
    else {
        char cwd[400];
        if (!getcwd(cwd, sizeof cwd)) return 1;
        snprintf(bin, sizeof bin, "%s/%s/fp4lane", cwd, b);
    }
    snprintf(tmp, sizeof tmp, "%s/fp4lane-guess-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) return perror("mkdtemp"), 1;
    char *o = NULL, *e = NULL, args[2048];
#define RUN(a) (free(o), free(e), o = e = NULL, cli(a, &o, &e))

    /* --help (or -h) after any verb: that verb's usage, summary and every option with defaults */
    static const char *const verbs[] = {"selftest", "validate", "inspect", "dump", "quantize", "convert",
                                        "run", "compare", "synth", "tokenize", "detokenize", "demo"};
    for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++) {
        snprintf(args, sizeof args, "%s --help", verbs[i]);
        int rc = RUN(args);
        char want[64];
        snprintf(want, sizeof want, "usage: fp4lane %s", verbs[i]);
        CHECK_MSG(rc == 0 && cu_has(o, want) && !cu_has(e, "unknown option"), "%s --help: rc %d", verbs[i],
                  rc);
        snprintf(args, sizeof args, "%s some-file -h", verbs[i]);
        CHECK_MSG(RUN(args) == 0 && cu_has(o, want), "%s -h", verbs[i]);
    }
    static const char *const quantize_opts[] = {"--layout", "--to", "--scale2-rule", "--no-fusion",
                                                "--quantize-embeddings", "--shard-size", "--metadata",
                                                "--force"};
    CHECK(RUN("help quantize") == 0);
    for (size_t i = 0; i < sizeof quantize_opts / sizeof quantize_opts[0]; i++) {
        char line[64];
        snprintf(line, sizeof line, "\n  %s ", quantize_opts[i]); /* an options line of its own */
        CHECK_MSG(cu_has(o, line), "help quantize lacks %s", quantize_opts[i]);
    }
    CHECK(cu_has(o, "default"));
    CHECK(RUN("quantize in out --frobnicate") == 2 && cu_has(e, "unknown option"));

    /* a small bf16 checkpoint to work on */
    CHECK(RUN("synth tiny --shape tiny") == 0);

    /* inspect labels the order: PyTorch order for safetensors, ne for GGUF; tiny's lm_head is
     * [vocab 512, hidden 256] in PyTorch order */
    CHECK(RUN("inspect tiny") == 0 && cu_has(o, "PyTorch order") && cu_has(o, "[512 x 256]"));
    CHECK(RUN("inspect tiny --json") == 0 && cu_has(o, "\"shape_order\": \"pytorch\"") &&
          cu_has(o, "\"shape\":[512,256]") && cu_has(o, "\"ne\":[256,512]"));
    CHECK(RUN("quantize tiny q.gguf") == 0);
    CHECK(RUN("inspect q.gguf") == 0 && cu_has(o, "GGUF ne") && cu_has(o, "[256 x 512]"));

    /* missing output parents are created */
    CHECK(RUN("quantize tiny a/b/c") == 0 && exists("a/b/c/model.safetensors"));
    CHECK(RUN("quantize tiny g/h/one.gguf") == 0 && exists("g/h/one.gguf"));
    /* ... and removed again when the write fails: an outdir opened then aborted, a file likewise */
    {
        char p[1200];
        fp4_outdir *d = NULL;
        fp4_outfile *f = NULL;
        snprintf(p, sizeof p, "%s/x/y/z", tmp);
        CHECK(fp4_outdir_open(p, 0, &d, NULL) == FP4_OK && exists("x/y"));
        fp4_outdir_abort(d);
        CHECK(!exists("x"));
        snprintf(p, sizeof p, "%s/a/new/deeper/f.bin", tmp);
        CHECK(fp4_outfile_open(p, &f, NULL) == FP4_OK && exists("a/new/deeper"));
        fp4_outfile_abort(f);
        CHECK(!exists("a/new") && exists("a/b/c")); /* what existed before stays */
    }

    /* a name that says "one file" never becomes a directory */
    CHECK(RUN("quantize tiny out.safetensors") == 1 && cu_has(e, "out.dir-name") &&
          !exists("out.safetensors"));
    CHECK(RUN("quantize tiny d.gguf --layout modelopt") == 1 && cu_has(e, "out.dir-name") &&
          !exists("d.gguf"));
    CHECK(RUN("convert a/b/c e.gguf --layout compressed-tensors") == 1 && cu_has(e, "out.dir-name"));
    CHECK(RUN("quantize tiny f.gguf --layout gguf") == 0);
    struct stat sb;
    snprintf(args, sizeof args, "%s/f.gguf", tmp);
    CHECK(stat(args, &sb) == 0 && S_ISREG(sb.st_mode));

    /* strict sizes */
    static const char *const bad_sizes[] = {"-5M", "99999999999G", "1MB", "", "M", "1.5G", " 5", "5 ",
                                            "+5", "0x10", "18446744073709551616"};
    for (size_t i = 0; i < sizeof bad_sizes / sizeof bad_sizes[0]; i++) {
        snprintf(args, sizeof args, "quantize tiny s%zu --shard-size '%s'", i, bad_sizes[i]);
        CHECK_MSG(RUN(args) == 2 && cu_has(e, "--shard-size"), "'%s' accepted", bad_sizes[i]);
        snprintf(args, sizeof args, "synth s%zu --shape tiny --shard-size '%s'", i, bad_sizes[i]);
        CHECK_MSG(RUN(args) == 2, "synth '%s' accepted", bad_sizes[i]);
    }
    uint64_t v = 1;
    CHECK(cli_parse_size("0", &v) == 0 && v == 0);
    CHECK(cli_parse_size("5M", &v) == 0 && v == 5ull << 20);
    CHECK(cli_parse_size("3K", &v) == 0 && v == 3072);
    CHECK(cli_parse_size("2G", &v) == 0 && v == 2ull << 30);
    CHECK(cli_parse_size("4611686018427387904", &v) == 0 && v == 1ull << 62);
    CHECK(cli_parse_size("4611686018427387905", &v) == -1);
    CHECK(cli_parse_size("4294967296G", &v) == 0 && v == 1ull << 62);
    CHECK(cli_parse_size("4294967297G", &v) == -1);
    CHECK(RUN("quantize tiny sh --shard-size 1M") == 0 && exists("sh/model.safetensors.index.json"));

    /* --metadata where it cannot be carried is refused, and nothing is written */
    CHECK(RUN("quantize tiny m.gguf --metadata a=b") == 1 && cu_has(e, "out.metadata") && !exists("m.gguf"));
    CHECK(RUN("convert a/b/c m2.gguf --layout gguf --metadata a=b") == 1 && cu_has(e, "out.metadata"));
    CHECK(RUN("quantize tiny mm --metadata a=b") == 0 && RUN("inspect mm") == 0 && cu_has(o, "\"b\""));

    /* a file that is no model, a FIFO, a device: said so */
    FILE *f = NULL;
    snprintf(args, sizeof args, "%s/notes.txt", tmp);
    if ((f = fopen(args, "w"))) fputs("hello, this is a text file and not a model at all\n", f), fclose(f);
    CHECK(RUN("inspect notes.txt") == 1 && cu_has(e, "not a model file") && !cu_has(e, "above the cap"));
    CHECK(RUN("validate notes.txt") == 1 && cu_has(e, "ckpt.not-model"));
    snprintf(args, sizeof args, "%s/fifo", tmp);
    CHECK(mkfifo(args, 0600) == 0);
    CHECK(RUN("inspect fifo") == 1 && cu_has(e, "not a regular file") && cu_has(e, "FIFO") &&
          !cu_has(e, "No such file"));
    CHECK(RUN("inspect /dev/null") == 1 && cu_has(e, "a device"));
    CHECK(RUN("inspect does-not-exist") == 1 && cu_has(e, "no such file"));
    CHECK(RUN("tokenize fifo hello") == 1 && cu_has(e, "not a regular file")); /* no hang */

    /* "-" is not a place for a checkpoint */
    CHECK(RUN("quantize tiny -") == 2 && cu_has(e, "'-'") && !exists("-"));
    CHECK(RUN("convert q.gguf - --layout gguf") == 2 && cu_has(e, "'-'") && !exists("-"));
    CHECK(RUN("synth - --shape tiny") == 2 && !exists("-"));

    /* a negative scale byte is not reported as NaN */
    CHECK(strstr(fp4_status_str(FP4_ERR_NAN_SCALE), "negative") != NULL);

    /* the progress bar names its phase and shows an ETA (on a TTY, through script(1)) */
    if (access("/usr/bin/script", X_OK) == 0) {
        snprintf(args, sizeof args,
                 "cd '%s' && /usr/bin/script -qec \"'%s' quantize tiny pb.gguf --to q4_k\" /dev/null "
                 ">'%s/tty' 2>&1",
                 tmp, bin, tmp);
        CHECK(system(args) == 0);
        snprintf(args, sizeof args, "%s/tty", tmp);
        char buf[1 << 16] = "";
        if ((f = fopen(args, "rb"))) buf[fread(buf, 1, sizeof buf - 1, f)] = 0, fclose(f);
        CHECK_MSG(cu_has(buf, "quantize") && cu_has(buf, "ETA") && cu_has(buf, "%"), "tty: %.200s", buf);
    } else {
        fprintf(stderr, "note: no script(1); the TTY progress bar was not exercised\n");
    }

    /* quantize (and convert to an HF layout) copies the input directory's non-weight files, never
     * its weight files or index; with --force the fresh copy replaces the old one */
    {
        static const char *const comp[][2] = {{"tokenizer.json", "{\"model\":{}}"},
                                              {"tokenizer_config.json", "{\"chat_template\":\"{{x}}\"}"},
                                              {"generation_config.json", "{\"do_sample\":false}"},
                                              {"chat_template.jinja", "{{ messages }}"},
                                              {"pytorch_model.bin", "weights"},
                                              {"model.safetensors.index.json.bak.bin", "x"}};
        char p[1200];
        for (size_t i = 0; i < sizeof comp / sizeof comp[0]; i++) {
            snprintf(p, sizeof p, "%s/tiny/%s", tmp, comp[i][0]);
            if ((f = fopen(p, "w"))) fputs(comp[i][1], f), fclose(f);
        }
        snprintf(p, sizeof p, "%s/tiny/subdir", tmp);
        mkdir(p, 0700);
        CHECK(RUN("quantize tiny withtok") == 0);
        CHECK(exists("withtok/tokenizer.json") && exists("withtok/tokenizer_config.json") &&
              exists("withtok/generation_config.json") && exists("withtok/chat_template.jinja"));
        CHECK(!exists("withtok/pytorch_model.bin") && !exists("withtok/subdir") &&
              !exists("withtok/model.safetensors.index.json.bak.bin"));
        CHECK(RUN("validate withtok") == 0 && RUN("convert withtok ct --layout compressed-tensors") == 0 &&
              exists("ct/tokenizer.json"));
        snprintf(p, sizeof p, "%s/tiny/tokenizer.json", tmp);
        if ((f = fopen(p, "w"))) fputs("{\"new\":1}", f), fclose(f);
        CHECK(RUN("quantize tiny withtok") == 1 && cu_has(e, "out.exists"));
        CHECK(RUN("quantize tiny withtok --force") == 0);
        snprintf(p, sizeof p, "%s/withtok/tokenizer.json", tmp);
        char buf[64] = "";
        if ((f = fopen(p, "r"))) buf[fread(buf, 1, sizeof buf - 1, f)] = 0, fclose(f);
        CHECK(!strcmp(buf, "{\"new\":1}"));
    }

    /* failed and refused runs leave no temporaries, no empty folders */
    CHECK(count_prefixed(tmp, FP4_TMP_PREFIX) == 0);
    CHECK(count_prefixed(tmp, "s") == 1); /* only sh: every strict-size refusal created nothing */
    /* the demo leaves no work directory behind, passed or interrupted */
    {
        char td[600];
        snprintf(td, sizeof td, "%s/demotmp", tmp);
        mkdir(td, 0700);
        snprintf(args, sizeof args, "TMPDIR='%s' '%s' demo >/dev/null 2>&1", td, bin);
        if (strlen(td) <= 16) {
            CHECK(system(args) == 0 && count_prefixed(td, "fp4lane-demo-") == 0);
        } else { /* demo only honours a short TMPDIR: use a short one of our own */
            char sd[32] = "/tmp/fg-XXXXXX";
            CHECK(mkdtemp(sd) != NULL);
            snprintf(args, sizeof args, "TMPDIR='%s' '%s' demo >/dev/null 2>&1", sd, bin);
            CHECK(system(args) == 0 && count_prefixed(sd, "fp4lane-demo-") == 0);
            snprintf(args, sizeof args, "TMPDIR='%s' timeout -s INT 0.3 '%s' demo >/dev/null 2>&1", sd, bin);
            (void)system(args);
            CHECK(count_prefixed(sd, "fp4lane-demo-") == 0);
            rmdir(sd);
        }
    }

    free(o), free(e);
    snprintf(args, sizeof args, "rm -rf '%s'", tmp);
    if (system(args) != 0) fprintf(stderr, "could not remove %s\n", tmp);
    return check_report();
}
