/* cpu_path.c — which CPU code path the exact contractions take (exact A16, W4A4, the Q4_K and Q6_K
 * dots, the dense rows).
 *
 * Every path gives the same bits (only order-free integer work differs between them), so the
 * choice is a speed matter only. It is made once per process from CPUID, lowered by the
 * environment variable FP4_CPU_PATH=portable|avx2|avx512 (a ceiling: asking for a path the CPU
 * lacks gives the best one it has below it; any other value is ignored), and tests can force a
 * path with fp4_cpu_force_path. */
#include "cpu/cpu_impl.h"
#include <pthread.h>
#include <stdlib.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

static const char *const path_names[FP4_CPU_N_PATHS] = {"portable", "avx2", "avx512"};

const char *fp4_cpu_path_name(int path) {
    return path >= 0 && path < FP4_CPU_N_PATHS ? path_names[path] : "unknown";
}

int fp4_cpu_pick(int best, const char *env) {
    if (best < 0) best = FP4_CPU_PORTABLE;
    if (best >= FP4_CPU_N_PATHS) best = FP4_CPU_N_PATHS - 1;
    if (!env) return best;
    for (int p = 0; p < FP4_CPU_N_PATHS; p++)
        if (!strcmp(env, path_names[p])) return p < best ? p : best;
    return best;
}

int fp4_cpu_best_path(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    /* F16C (CPUID leaf 1, ECX bit 29; every AVX2 and AVX-512 CPU has it): both vector paths use it */
    unsigned a, b, c, d;
    const int f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
    /* the AVX-512 kernels use F, BW, VL, VNNI, VBMI (vpermb), DQ (vcvtqq2ps) and FMA (every CPU with
     * VBMI has the last two); __builtin_cpu_supports also checks that the OS saves the vector state */
    if (f16c && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
        __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("fma"))
        return FP4_CPU_AVX512;
    /* the AVX2 kernels use AVX2, FMA (every AVX2 CPU has it) and F16C */
    if (f16c && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return FP4_CPU_AVX2;
#endif
    return FP4_CPU_PORTABLE;
}

/* The CPU backend's environment switches, read here once per process and nowhere else. */
static fp4_cpu_env env;
static int chosen;
static pthread_once_t chosen_once = PTHREAD_ONCE_INIT;
static void choose(void) {
    env.path_ceiling = getenv("FP4_CPU_PATH");
    env.no_cols = getenv("FP4_CPU_NO_COLS") != NULL;
    chosen = fp4_cpu_pick(fp4_cpu_best_path(), env.path_ceiling);
}

const fp4_cpu_env *fp4_cpu_env_get(void) {
    pthread_once(&chosen_once, choose);
    return &env;
}

static int forced_cols = -1; /* tests: fp4_cpu_force_cols */

int fp4_cpu_cols_on(void) {
    const int f = __atomic_load_n(&forced_cols, __ATOMIC_RELAXED);
    return f >= 0 ? f : !fp4_cpu_env_get()->no_cols;
}

void fp4_cpu_force_cols(int on) {
    __atomic_store_n(&forced_cols, on < 0 ? -1 : !!on, __ATOMIC_RELAXED);
}

static int forced = -1; /* tests: fp4_cpu_force_path */

int fp4_cpu_path(void) {
    int f = __atomic_load_n(&forced, __ATOMIC_RELAXED);
    pthread_once(&chosen_once, choose);
    if (f >= 0) return f < chosen ? f : chosen;
    return chosen;
}

void fp4_cpu_force_path(int path) {
    __atomic_store_n(&forced, path < 0 ? -1 : path, __ATOMIC_RELAXED);
}
