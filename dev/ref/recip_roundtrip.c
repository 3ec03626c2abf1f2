/* recip_roundtrip.c — fraction of f32 mantissas in [1,2) (10 M seeded samples) for which
 * 1/(1/x) != x. Build: make build/dev/recip_roundtrip (receipt for docs/FORMATS.md). The samples
 * come from a fixed LCG, kept so that the receipt's figure stays reproducible. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

int main(void) {
    uint64_t s = 1;
    long n = 0, bad = 0;
    for (long i = 0; i < 10000000; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t u = (uint32_t)(s >> 32);
        u = (u & 0x007FFFFF) | (0x3F800000u);
        float x;
        memcpy(&x, &u, 4);
        volatile float r = 1.0f / x;
        volatile float b = 1.0f / r;
        n++;
        bad += (b != x);
    }
    printf("%.4f\n", (double)bad / n);
}
