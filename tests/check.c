#include "check.h"
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>

long check_passed, check_failed;
const char *check_test_name;

float rng_normal(test_rng *r) {
    double u1 = ((rng_u64(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    double u2 = (rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

const char *check_data(const char *rel) {
    static char buf[8][1024];
    static int next, checked;
    const char *dir = getenv("FP4_SHARED_DIR");
    if (!dir || !*dir) dir = "../shared";
    if (!checked) {
        struct stat sb;
        snprintf(buf[0], sizeof buf[0], "%s/data", dir);
        if (stat(buf[0], &sb) || !S_ISDIR(sb.st_mode)) {
            fprintf(stderr, "shared test data not found: %s is not a directory; set FP4_SHARED_DIR to the "
                            "directory that holds data/ (default ../shared)\n", buf[0]);
            exit(1);
        }
        checked = 1;
    }
    char *p = buf[next++ % 8];
    snprintf(p, sizeof buf[0], "%s/data/%s", dir, rel);
    return p;
}

uint8_t *check_slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    long n = fseek(f, 0, SEEK_END) ? -1 : ftell(f);
    uint8_t *p = n >= 0 && !fseek(f, 0, SEEK_SET) ? malloc((size_t)n + 1) : NULL;
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    if (p) {
        p[n] = 0;
        *len = (size_t)n;
    }
    return p;
}

int check_report(void) {
    printf("%ld passed, %ld failed\n", check_passed, check_failed);
    return check_failed ? 1 : 0;
}
