/* cli.h — the fp4lane CLI's verb table. Each verb lives in its own tools/cmd_*.c and uses only
 * the public header. Exit codes: 0 success, 1 refused/failed, 2 usage error. */
#ifndef FP4_CLI_H
#define FP4_CLI_H

#include "fp4lane.h"

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
int cmd_compare(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_detokenize(int argc, char **argv);
int cli_report_error(const char *verb, fp4_status st, const fp4_error *e);

extern const cli_verb cli_verbs[];
extern const int cli_n_verbs;

/* shared helpers */
int cli_isatty_stderr(void);
int cli_usage(const char *verb); /* the verb's usage line from cli_verbs, on stderr; returns 2 */
void cli_progress(const char *what, int64_t done, int64_t total); /* TTY only; total 0 ends the line */

#endif
