/* tmpnames.c — see tmpnames.h. */
#include "tmpnames.h"
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tmp_names_beside(const char *path) {
    char dir[1024], prefix[300];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    snprintf(prefix, sizeof prefix, ".fp4lane-tmp-%.64s-", slash ? slash + 1 : dir);
    if (slash) *slash = 0;
    else snprintf(dir, sizeof dir, ".");
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        n += strncmp(de->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

int file_equals(const char *path, const void *data, long n) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char *buf = malloc((size_t)n + 1);
    long got = buf ? (long)fread(buf, 1, (size_t)n + 1, f) : -1;
    fclose(f);
    int same = got == n && memcmp(buf, data, (size_t)n) == 0;
    free(buf);
    return same;
}
