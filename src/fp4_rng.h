/* fp4_rng.h — the project's one seeded generator, header-only so that the library, the CLI,
 * the tests and the dev tools share it: splitmix64 (Steele, Lea and Flood, 2014), the same
 * stream on every machine for a given seed. The runtime's sampler is meant to draw from it too. */
#ifndef FP4_RNG_H
#define FP4_RNG_H
#include <math.h>
#include <stdint.h>

/* Advances *state and returns the next 64 random bits. */
static inline uint64_t fp4_splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A standard normal from one draw (Box-Muller: 53 bits for the radius, 20 for the angle). */
static inline float fp4_rng_normal(uint64_t *state) {
    uint64_t z = fp4_splitmix64(state);
    double u1 = ((z >> 11) + 0.5) * (1.0 / 9007199254740992.0), u2 = ((z & 0xFFFFF) + 0.5) / 1048576.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}
#endif
