/* cli.h — the fp4lane CLI's verb table. Each verb lives in its own tools/cmd_*.c and uses only
 * the public header. Exit codes: 0 success, 1 refused/failed, 2 usage error. */
#ifndef FP4_CLI_H
#define FP4_CLI_H

#include "fp4lane_io.h"
#include <stdio.h>

typedef struct cli_verb {
    const char *name;
    int (*run)(int argc, char **argv); /* argv[0] is the verb */
    const char *summary;
    const char *usage;
} cli_verb;

int cmd_selftest(int argc, char **argv);
int cmd_help(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_validate(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_detokenize(int argc, char **argv);
int cmd_template(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cli_report_error(const char *verb, fp4_status st, const fp4_error *e);

extern const cli_verb cli_verbs[];
extern const int cli_n_verbs;

/* shared helpers */
int cli_isatty_stderr(void);
int cli_usage(const char *verb); /* the verb's usage line from cli_verbs, on stderr; returns 2 */
void cli_progress(const char *what, int64_t done, int64_t total); /* TTY only; total 0 ends the line */

/* cli_args.c */
const char *cli_verb_options(const char *verb); /* the verb's options with defaults, or NULL */
int cli_wants_help(int argc, char **argv);      /* --help or -h among argv[1..] (before a "--") */
int cli_parse_size(const char *s, uint64_t *out); /* N[K|M|G], strict; 0 ok, -1 refused */
int cli_output_path_ok(const char *verb, const char *out); /* 0 (after a message) for "-" */
/* 1 when two output paths name one file: the same string, the same dev/inode when both exist,
 * or the same directory (dev/inode) and last component when not */
int cli_same_path(const char *a, const char *b);

/* cli_out.c: standard output checked to the last byte, untrusted text escaped */
void cli_stdio_guard(void);            /* first thing in main: fds 0-2 are never left closed */
int cli_stdout_finish(int rc);         /* flush + close stdout; a failure turns rc 0 into 1 */
int cli_stdout_failed(void);           /* a write to stdout has failed already */
void cli_put_escaped(FILE *f, const char *s);      /* controls and non-UTF-8 bytes as \xNN */
const char *cli_escaped(const char *s, char *buf, size_t n);  /* the same into buf */
/* a JSON object streamed element by element (memory: one element): head's members, list_key:
 * [item(ctx, i) for i < n], tail_key: tail (may be NULL); 0 when every write succeeded */
struct json_t;
int cli_json_stream(FILE *f, const struct json_t *head, const char *list_key,
                    struct json_t *(*item)(const void *ctx, int64_t i), const void *ctx, int64_t n,
                    const char *tail_key, const struct json_t *tail);

#endif
