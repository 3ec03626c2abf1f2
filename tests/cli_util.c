/* cli_util.c — see cli_util.h. */
#include "cli_util.h"
#include "check.h"
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

char *cu_slurp(const char *path, long *len) {
    size_t n = 0;
    char *b = (char *)check_slurp(path, &n);
    if (!b) b = calloc(1, 1), n = 0;
    if (len) *len = (long)n;
    return b;
}

int cu_system(const char *cmd, const char *fo, const char *fe, char **out, char **err) {
    const int rc = system(cmd);
    if (out) free(*out), *out = cu_slurp(fo, NULL);
    if (err) free(*err), *err = cu_slurp(fe, NULL);
    if (rc == -1 || !WIFEXITED(rc)) return -1;
    return WEXITSTATUS(rc);
}

int cu_has(const char *s, const char *x) {
    return s && strstr(s, x) != NULL;
}
