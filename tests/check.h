/* check.h — the test harness: CHECK macros that report file:line and count, and a seeded RNG.
 * Each test binary ends with check_report(), which prints "N passed, N failed" and returns
 * the exit status. Tests never depend on NDEBUG. */
#ifndef FP4_CHECK_H
#define FP4_CHECK_H
#undef NDEBUG
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fp4_rng.h"

extern long check_passed, check_failed;
extern const char *check_test_name;

#define CHECK(cond)                                                                           \
    do {                                                                                      \
        if (cond) {                                                                           \
            check_passed++;                                                                   \
        } else {                                                                              \
            check_failed++;                                                                   \
            if (check_failed <= 20)                                                           \
                fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);      \
        }                                                                                     \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                  \
    do {                                                                                      \
        if (cond) {                                                                           \
            check_passed++;                                                                   \
        } else {                                                                              \
            check_failed++;                                                                   \
            if (check_failed <= 20) {                                                         \
                fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);      \
                fprintf(stderr, __VA_ARGS__);                                                 \
                fputc('\n', stderr);                                                          \
            }                                                                                 \
        }                                                                                     \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                                   \
    CHECK_MSG((long long)(a) == (long long)(b), "%lld != %lld", (long long)(a), (long long)(b))
#define CHECK_OK(expr)                                                                        \
    do {                                                                                      \
        fp4_status st_ = (expr);                                                              \
        CHECK_MSG(st_ == FP4_OK, "%s -> %s", #expr, fp4_status_str(st_));                     \
    } while (0)

/* Bits of a float, for bit-for-bit comparisons (the sign of -0.0 included). */
static inline uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* Seeded RNG (the project's splitmix64, src/fp4_rng.h): identical streams on every machine. */
typedef struct test_rng { uint64_t s; } test_rng;
static inline uint64_t rng_u64(test_rng *r) { return fp4_splitmix64(&r->s); }
static inline float rng_uniform(test_rng *r) { return (float)((rng_u64(r) >> 40) * (1.0 / 16777216.0)); }
float rng_normal(test_rng *r);           /* Box–Muller, deterministic */

/* A GPU test on a machine without a usable CUDA device or library says so and counts nothing; where
 * FP4_GPU_REQUIRE=1 (the device scripts, make test-gpu) that is a failure, so a run whose library was not
 * found can never read as a pass. */
static inline void check_gpu_skip(void) {
    const char *r = getenv("FP4_GPU_REQUIRE");
    printf("no CUDA device: GPU tests skipped\n");
    if (r && r[0] == '1')
        CHECK_MSG(0, "FP4_GPU_REQUIRE=1, but no CUDA device or libfp4lane_cuda.so was usable");
}
int check_report(void);                  /* prints "N passed, N failed"; returns 0/1 */

/* The path of a file of the shared test data: $FP4_SHARED_DIR/data/<rel>, FP4_SHARED_DIR being
 * ../shared (the checkout's sibling) unless set. When that data directory is missing the test
 * exits at once with a message that names the variable. The string lives for 8 further calls. */
const char *check_data(const char *rel);
/* A whole file in a malloc'd buffer with a NUL after its *len bytes; NULL when unreadable. */
uint8_t *check_slurp(const char *path, size_t *len);

#endif
