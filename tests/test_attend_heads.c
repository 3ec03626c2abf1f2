/* test_attend_heads.c — the pinned attention of several heads at once (fp4_attend_heads_avx512,
 * src/cpu/attend_heads_x86.c; fp4_attend_heads_avx2, attend_heads_avx2.c) against fp4p_attend head by head,
 * bit for bit (NaN: any NaN, as attend_x86.c's note says); the vector exp and SwiGLU (pinned_x86.c) against
 * fp4p_exp and fp4p_swiglu on every class of bit pattern, AVX2 and AVX-512. What the CPU (or FP4_CPU_PATH)
 * lacks is skipped. */
#include "check.h"
#include "fp4lane.h"
#include "cpu/cpu_impl.h"
#include "format/pinned.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static float edge(test_rng *r) {
    static const float v[] = {0.0f,   -0.0f,   INFINITY, -INFINITY, NAN,
                              1e-45f, -1e-40f, 3e38f,    -3e38f,    65504.0f};
    return v[rng_u64(r) % (sizeof v / sizeof v[0])];
}

static int same_f32(float a, float b) {
    return f32_bits(a) == f32_bits(b) || (isnan(a) && isnan(b));
}

/* every exponent and sign with random mantissas, the range edges and their neighbours, NaNs */
static void test_exp(int with_avx512) {
    enum { N = 1 << 16 };
    float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N);
    test_rng r = {0xE4Bull};
    int64_t n = 0;
    static const float fixed[] = {FP4P_EXP_HI, FP4P_EXP_LO, 0.0f,    -0.0f,  INFINITY,
                                  -INFINITY,   NAN,         1.0f,    -1.0f,  88.0f,
                                  -87.5f,      -103.0f,     -104.0f, 1e-45f, -1e-45f};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        x[n++] = fixed[i];
        x[n++] = nextafterf(fixed[i], INFINITY);
        x[n++] = nextafterf(fixed[i], -INFINITY);
    }
    while (n < N) {
        const uint32_t u = (uint32_t)rng_u64(&r);
        float f;
        if (n % 3) { /* the interesting range: |x| < 128 */
            f = (rng_uniform(&r) * 2.0f - 1.0f) * 128.0f;
        } else
            memcpy(&f, &u, 4);
        x[n++] = f;
    }
    float *u = malloc(sizeof(float) * N), *g = malloc(sizeof(float) * N);
    for (int64_t i = 0; i < N; i++)
        u[i] = i % 97 == 0 ? edge(&r) : rng_normal(&r);
    int64_t bad = 0;
    for (int avx512 = 0; avx512 <= with_avx512; avx512++) {
        if (avx512)
            fp4_exp_avx512(x, y, N - 5); /* a ragged tail */
        else
            fp4_exp_avx2(x, y, N - 5);
        for (int64_t i = 0; i < N - 5; i++) {
            const float want = fp4p_exp(x[i]);
            if (f32_bits(y[i]) != f32_bits(want)) {
                if (bad < 5)
                    fprintf(stderr, "exp(%a): got %a want %a\n", (double)x[i], (double)y[i], (double)want);
                bad++;
            }
        }
        /* SwiGLU: g / (1 + exp(-g)) * u on the same inputs (x as the gate) */
        memcpy(g, x, sizeof(float) * N);
        if (avx512)
            fp4_swiglu_avx512(g, u, N - 3);
        else
            fp4_swiglu_avx2(g, u, N - 3);
        for (int64_t i = 0; i < N; i++) {
            const float want = i < N - 3 ? fp4p_swiglu(x[i], u[i]) : x[i];
            if (!same_f32(g[i], want)) {
                if (bad < 5)
                    fprintf(stderr, "swiglu(%a, %a): got %a want %a\n", (double)x[i], (double)u[i],
                            (double)g[i], (double)want);
                bad++;
            }
        }
    }
    CHECK_EQ_INT(bad, 0);
    printf("exp, swiglu: %d values against fp4p_exp / fp4p_swiglu, AVX2 and AVX-512\n", N - 5);
    free(x), free(y), free(u), free(g);
}

static void test_heads(int with_avx512) {
    enum { MAXN = 300, MAXD = 160, MAXH = 20 };
    static const int dims[] = {16, 32, 48, 64, 80, 128, 160, 24, 13, 8, 40};
    static const int groups[] = {1, 2, 4, 3};
    test_rng r = {0xA77E4D5ull};
    long compared = 0, bad = 0;
    for (int rep = 0; rep < 480; rep++) { /* even reps AVX-512 (where present), odd AVX2 */
        const int D = dims[(rep / 2) % 11], kind = (rep / 44) % 4;
        int G = groups[(rep / 22) % 4], nkv = 1 + (int)(rng_u64(&r) % 5);
        if (rep == 4 || rep == 5)
            G = 1, nkv = MAXH; /* more heads than FP4_ATTEND_MAX_HEADS: the per-head fallback */
        const int NH = nkv * G;
        const int64_t hq0 = rep == 4 || rep == 5 ? 0 : (int64_t)(rng_u64(&r) % (uint64_t)NH);
        int nh = 1 + (int)(rng_u64(&r) % (uint64_t)(NH - hq0));
        if (rep % 17 == 0 || rep == 4 || rep == 5) nh = NH - (int)hq0; /* to the last head */
        const int64_t n = rep % 7 == 0 ? 1 : 1 + (int64_t)(rng_u64(&r) % MAXN);
        const int64_t stride = (int64_t)nkv * D + (int64_t)(rng_u64(&r) % 3) * 8;
        const int64_t kv_n = n * stride;
        float *q = malloc(sizeof(float) * (size_t)(nh * D)), *o = malloc(sizeof(float) * (size_t)(nh * D));
        float *s = malloc(sizeof(float) * (size_t)(nh * n)),
              *P = malloc(sizeof(float) * 32 * (size_t)(nh * D));
        float *s1 = malloc(sizeof(float) * (size_t)n), o1[MAXD];
        uint16_t *k = malloc(2 * (size_t)kv_n), *v = malloc(2 * (size_t)kv_n);
        for (int i = 0; i < nh * D; i++)
            q[i] = kind == 3 && rng_u64(&r) % 16 == 0 ? edge(&r) : rng_normal(&r);
        for (int64_t i = 0; i < kv_n; i++) { /* kind 2: any f16 bits (Inf, NaN, subnormals) */
            const float kf = rng_normal(&r) * (kind == 1 ? 40.0f : 1.0f), vf = rng_normal(&r);
            k[i] = kind == 2 && rng_u64(&r) % 8 == 0 ? (uint16_t)rng_u64(&r) : fp4_f32_to_f16(kf);
            v[i] = kind == 2 && rng_u64(&r) % 8 == 0 ? (uint16_t)rng_u64(&r) : fp4_f32_to_f16(vf);
        }
        const float scale = 1.0f / sqrtf((float)D);
        const int avx512 = rep % 2 == 0 && with_avx512;
        if (avx512)
            fp4_attend_heads_avx512(q, k, v, stride, n, D, hq0, nh, G, scale, s, P, o);
        else
            fp4_attend_heads_avx2(q, k, v, stride, n, D, hq0, nh, G, scale, s, P, o);
        for (int h = 0; h < nh; h++) {
            const int64_t hk = (hq0 + h) / G;
            fp4p_attend(q + h * D, k + hk * D, v + hk * D, stride, n, D, scale, s1, o1);
            int same = 1;
            for (int d = 0; d < D; d++)
                same &= same_f32(o[h * D + d], o1[d]);
            bad += !same;
            compared++;
            CHECK_MSG(same, "heads: D %d G %d nh %d hq0 %lld h %d n %lld kind %d", D, G, nh, (long long)hq0,
                      h, (long long)n, kind);
        }
        free(q), free(o), free(s), free(P), free(s1), free(k), free(v);
    }
    CHECK_EQ_INT(bad, 0);
    printf("attend heads: %ld heads compared against fp4p_attend\n", compared);
}

int main(void) {
    const int top = fp4_cpu_path(); /* a path above it would not run here */
    if (top >= FP4_CPU_AVX2) test_exp(top >= FP4_CPU_AVX512);
    if (top >= FP4_CPU_AVX2) test_heads(top >= FP4_CPU_AVX512);
    if (top < FP4_CPU_AVX512)
        printf("attend heads: no AVX-512 on this CPU (or FP4_CPU_PATH below it): %s\n",
               top >= FP4_CPU_AVX2 ? "AVX2 only" : "skipped");
    return check_report();
}
