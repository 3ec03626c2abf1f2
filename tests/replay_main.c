/* replay_main.c — replays a committed fuzz corpus through a libFuzzer harness without a fuzzing
 * engine (gcc or clang, sanitizers optional), so that past findings stay fixed. The corpus is
 * fuzz/corpus/<target>, where this binary is named replay_<target>. Prints "N passed, 0 failed";
 * a crash fails the run. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv) {
    const char *self = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    const char *target = strncmp(self, "replay_", 7) ? self : self + 7;
    char dir[512];
    if (argc > 1) snprintf(dir, sizeof dir, "%s", argv[1]);
    else snprintf(dir, sizeof dir, "fuzz/corpus/%s", target);
    DIR *d = opendir(dir);
    if (!d) {
        printf("cannot open %s\n0 passed, 1 failed\n", dir);
        return 1;
    }
    long n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        fseek(f, 0, SEEK_END);
        long sz = ftell(f);
        fseek(f, 0, SEEK_SET);
        uint8_t *buf = malloc(sz > 0 ? (size_t)sz : 1);
        if (buf && fread(buf, 1, (size_t)sz, f) == (size_t)sz) {
            LLVMFuzzerTestOneInput(buf, (size_t)sz);
            n++;
        }
        free(buf);
        fclose(f);
    }
    closedir(d);
    printf("%s: %ld inputs replayed\n%ld passed, 0 failed\n", target, n, n);
    return n ? 0 : 1;
}
