/* cli_util.c — see cli_util.h. */
#include "cli_util.h"
#include "check.h"
#include <stdio.h>
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

int cu_run(const char *bin, const char *dir, const char *env, const char *args, char **out, char **err) {
    char cmd[8192], fo[600], fe[600];
    snprintf(fo, sizeof fo, "%s/out", dir);
    snprintf(fe, sizeof fe, "%s/err", dir);
    snprintf(cmd, sizeof cmd, "%s %s %s >'%s' 2>'%s'", env ? env : "", bin, args, fo, fe);
    return cu_system(cmd, fo, fe, out, err);
}

int cu_run_loud(const char *bin, const char *dir, const char *args) {
    char *err = NULL;
    int rc = cu_run(bin, dir, NULL, args, NULL, &err);
    if (rc && err) fputs(err, stderr);
    free(err);
    return rc;
}

int cu_has(const char *s, const char *x) {
    return s && strstr(s, x) != NULL;
}

const char *cu_last_line(const char *s) {
    const char *e = s + strlen(s);
    while (e > s && e[-1] == '\n')
        e--;
    const char *p = e;
    while (p > s && p[-1] != '\n')
        p--;
    return p;
}
