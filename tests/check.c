#include "check.h"
#include <math.h>

long check_passed, check_failed;
const char *check_test_name;

float rng_normal(test_rng *r) {
    double u1 = ((rng_u64(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    double u2 = (rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

int check_report(void) {
    printf("%ld passed, %ld failed\n", check_passed, check_failed);
    return check_failed ? 1 : 0;
}
