/* rt_cli.h — helpers shared by the runtime verbs (run, compare): engine options from argv, token id
 * lists, the .npy logits writer, the decode session with a per-token callback. */
#ifndef FP4_RT_CLI_H
#define FP4_RT_CLI_H

#include "fp4lane_runtime.h"
#include <stdio.h>

/* Engine options a verb accepts; parsed by rt_cli_engine_opt. */
typedef struct rt_cli_engine {
    const char *model;
    fp4_rt_opts o;
    int prefill_chunk; /* 0: the whole prompt in one step                          */
    const char *draft; /* --draft MODEL (run only: allow_draft)                    */
    int draft_n;       /* --draft-n K (default 4)                                  */
    int draft_n_given; /* --draft-n was given (it needs --draft)                   */
    int allow_draft;   /* set by a verb that drafts before parsing                 */
    const char *verb;  /* the verb errors are reported under (default "run")       */
} rt_cli_engine;

void rt_cli_engine_init(rt_cli_engine *e);
/* Consumes argv[*i] (and its value) when it is an engine option: 1 consumed, 0 not one, -1 usage
 * error (message printed). */
int rt_cli_engine_opt(rt_cli_engine *e, int argc, char **argv, int *i);

/* fp4_arg_parse (the library's one table of ranges, shared with the Python binding) for the CLI
 * option opt: 0 with *v filled, or -1 with "fp4lane: <opt> <value>: <what is expected>" printed. */
int rt_cli_arg(const char *name, const char *opt, const char *text, fp4_arg_val *v);

/* --temp, --top-p, --min-p, --repeat-penalty, --presence-penalty, --top-k, --penalty-last-n,
 * --seed through rt_cli_arg: 1 consumed (the value stored in *sp), 0 not a sampling option, -1
 * refused (printed). */
int rt_cli_sampling_opt(const char *opt, const char *value, fp4_sampler_params *sp);

/* "1,2,3" or "@FILE" (ids separated by commas/whitespace). Returns 0, or -1 with a message
 * printed naming the bad value. *ids is malloc'd. */
int rt_cli_parse_ids(const char *arg, int32_t **ids, int64_t *n);
int rt_cli_parse_ids_text(const char *text, const char *where, int32_t **ids, int64_t *n);

/* Opens the model and the engine; prints the typed error and returns the exit code (1) on failure. */
int rt_cli_open(const rt_cli_engine *e, fp4_model **m, fp4_rt **rt);

/* Opens the draft model (e->draft) and its engine for the target: the target's mode, device and
 * threads, no drafting of its own, the target's context length (or the draft's own when that is
 * shorter); refuses a vocabulary that differs from the target's, naming both sizes. Prints the
 * error and returns the exit code (1) on failure. */
int rt_cli_open_draft(const rt_cli_engine *e, const fp4_rt *target, fp4_model **m, fp4_rt **rt);

/* .npy writer: float32 little-endian [rows, cols], rows known at the end. Written under a
 * temporary name beside the path (src/io/outfile.h), fsynced and renamed by rt_npy_finish; a
 * symbolic link or a special file as the path is refused before anything is written. */
struct fp4_outfile;
typedef struct rt_npy {
    struct fp4_outfile *o;
    int64_t rows, cols;
} rt_npy;
/* noreplace: the commit refuses a path that exists by then (out.exists) */
int rt_npy_open(rt_npy *w, const char *path, int64_t cols, int noreplace);
int rt_npy_row(rt_npy *w, const float *row);
int rt_npy_finish(rt_npy *w); /* 0 ok */
void rt_npy_abort(rt_npy *w);

double rt_cli_now(void);

#endif
