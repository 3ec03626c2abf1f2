/* round_f16_all.c — fp4_round_f16_avx512 / _avx2 (F16C) against fp4_round_f16 (C) on every one of
 * the 2^32 f32 bit patterns, bits compared.
 *   cc -O2 -Iinclude -Isrc bench/receipts/s6-cpu/round_f16_all.c build/libfp4lane.a -lm -lpthread \
 *      -o /tmp/round_f16_all && /tmp/round_f16_all */
#include "fp4_impl.h"
#include <stdio.h>
#include <string.h>

int main(void) {
    uint64_t bad512 = 0, bad2 = 0;
    for (uint64_t u = 0; u <= 0xFFFFFFFFull; u++) {
        float f, want, a, b;
        const uint32_t v = (uint32_t)u;
        memcpy(&f, &v, 4);
        want = fp4_round_f16(f), a = fp4_round_f16_avx512(f), b = fp4_round_f16_avx2(f);
        bad512 += memcmp(&want, &a, 4) != 0;
        bad2 += memcmp(&want, &b, 4) != 0;
    }
    printf("2^32 patterns: avx512 %llu differ, avx2 %llu differ\n", (unsigned long long)bad512,
           (unsigned long long)bad2);
    return bad512 || bad2;
}
