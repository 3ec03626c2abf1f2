/* cli_util.h — test support for the tests that run the fp4lane executable: capture of its
 * standard output and error, the exit status, substring checks. */
#ifndef CLI_UTIL_H
#define CLI_UTIL_H

/* The whole file, NUL-terminated (malloc'd); "" when it cannot be read. *len gets its size when
 * len is not NULL. */
char *cu_slurp(const char *path, long *len);
/* Runs the shell command cmd (which redirects stdout to fo and stderr to fe); for out / err that
 * are not NULL, frees what they hold and gives them fo's / fe's contents. Returns the exit status,
 * -1 when system() failed or the command died of a signal. */
int cu_system(const char *cmd, const char *fo, const char *fe, char **out, char **err);
/* Runs "[env ]bin args" with stdout / stderr captured in dir/out and dir/err (cu_system). */
int cu_run(const char *bin, const char *dir, const char *env, const char *args, char **out, char **err);
/* cu_run without capture for the caller: returns the exit status and copies the command's stderr
 * to the test's stderr when the status is not 0 */
int cu_run_loud(const char *bin, const char *dir, const char *args);
/* s is not NULL and contains x */
int cu_has(const char *s, const char *x);
/* the start of the last non-empty line of s (trailing newlines skipped) */
const char *cu_last_line(const char *s);

#endif
