/* test_runtime_pinned.c — the pinned exact-mode operations (src/format/pinned.h): the reduction
 * equals an explicit simulation of a warp's strided lanes + __shfl_xor butterfly; the pinned exp
 * is within 2 ulp of e^x; the KV f16 store equals the library codec; RMSNorm/RoPE/attention by
 * their written formulas. */
#include "check.h"
#include "fp4lane.h"
#include "format/pinned.h"
#include <math.h>
#include <stdlib.h>

/* A warp simulated literally: 32 lanes, each with its own partial, then for every off every lane
 * adds the value of lane l^off as it was before this step (what __shfl_xor_sync returns). */
static float warp_sum(const float *t, int64_t n) {
    float p[32], q[32];
    for (int l = 0; l < 32; l++) {
        p[l] = 0.0f;
        for (int64_t i = l; i < n; i += 32)
            p[l] = p[l] + t[i];
    }
    for (int off = 16; off >= 1; off >>= 1) {
        for (int l = 0; l < 32; l++)
            q[l] = p[l] + p[l ^ off];
        for (int l = 0; l < 32; l++)
            p[l] = q[l];
    }
    for (int l = 1; l < 32; l++)
        if (f32_bits(p[l]) != f32_bits(p[0])) return NAN; /* every lane ends equal */
    return p[0];
}

static void test_reduction(void) {
    test_rng r = {1};
    static float t[5000], a[5000], b[5000];
    const int64_t ns[] = {0, 1, 5, 31, 32, 33, 64, 100, 255, 256, 1000, 4096, 4999};
    int bad = 0;
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        int64_t n = ns[k];
        for (int64_t i = 0; i < n; i++) {
            a[i] = rng_normal(&r) * 3.0f;
            b[i] = rng_normal(&r);
            t[i] = a[i] * b[i];
        }
        float w = warp_sum(t, n);
        bad += f32_bits(fp4p_sum(t, n, 1)) != f32_bits(w);
        bad += f32_bits(fp4p_dot(a, b, n)) != f32_bits(w);
    }
    CHECK_EQ_INT(bad, 0);
    /* the order matters (so the test above can fail): a sequential sum differs somewhere */
    int differs = 0;
    for (int trial = 0; trial < 50 && !differs; trial++) {
        float s = 0.0f;
        for (int i = 0; i < 1000; i++)
            s += (t[i] = rng_normal(&r));
        differs = f32_bits(s) != f32_bits(fp4p_sum(t, 1000, 1));
    }
    CHECK(differs);
    /* strided access */
    for (int i = 0; i < 300; i++)
        t[i] = rng_normal(&r);
    float g[100];
    for (int i = 0; i < 100; i++)
        g[i] = t[3 * i];
    CHECK(f32_bits(fp4p_sum(t, 100, 3)) == f32_bits(warp_sum(g, 100)));
}

static double ulp_err(float got, double want) {
    if (want == 0.0) return got == 0.0f ? 0.0 : 1e30;
    int e;
    frexp(want, &e);
    double ulp = ldexp(1.0, (e - 24) < -149 ? -149 : e - 24);
    return fabs((double)got - want) / ulp;
}

static void test_exp(void) {
    double worst = 0.0;
    int bad = 0;
    for (float x = -103.9f; x < 88.7f; x += 0.0137f) {
        double e = ulp_err(fp4p_exp(x), exp((double)x));
        if (exp((double)x) >= 1.1754943508222875e-38 && e > worst) worst = e;
        if (e > 2.0 && exp((double)x) >= 1.1754943508222875e-38) bad++;
    }
    test_rng r = {7};
    for (int i = 0; i < 200000; i++) {
        float x = (rng_uniform(&r) - 0.5f) * 40.0f;
        double e = ulp_err(fp4p_exp(x), exp((double)x));
        if (e > worst) worst = e;
        bad += e > 2.0;
    }
    CHECK_MSG(bad == 0, "%d values past 2 ulp (worst %.3f)", bad, worst);
    CHECK(fp4p_exp(0.0f) == 1.0f);
    CHECK(isinf(fp4p_exp(89.0f)) && fp4p_exp(89.0f) > 0);
    CHECK(fp4p_exp(-104.0f) == 0.0f && !signbit(fp4p_exp(-104.0f)));
    CHECK(fp4p_exp(-INFINITY) == 0.0f);
    CHECK(isnan(fp4p_exp(NAN)));
    CHECK(fp4p_exp(-100.0f) > 0.0f); /* subnormal results exist */
    CHECK(fp4p_silu(0.0f) == 0.0f);
    CHECK(fabsf(fp4p_silu(2.0f) - 1.7615942f) < 1e-6f);
    CHECK(f32_bits(fp4p_silu(-200.0f)) == f32_bits(-0.0f));
}

static void test_f16(void) {
    int bad = 0;
    /* every f16 value widens exactly */
    for (uint32_t h = 0; h < 65536; h++) {
        float a = fp4p_f16_to_f32((uint16_t)h), b = fp4_f16_to_f32((uint16_t)h);
        if (isnan(b) ? !isnan(a) : f32_bits(a) != f32_bits(b)) bad++;
    }
    CHECK_EQ_INT(bad, 0);
    /* the store: every 97th f32 bit pattern (all exponents and many mantissas) + neighbourhoods */
    bad = 0;
    for (uint64_t u = 0; u < (1ull << 32); u += 97) {
        float f = bits_f32((uint32_t)u);
        if (isnan(f)) continue;
        bad += fp4p_f32_to_f16(f) != fp4_f32_to_f16(f);
    }
    const uint32_t edges[] = {0x477FE000u, 0x477FEFFFu, 0x477FF000u, 0x38800000u, 0x387FFFFFu, 0x33000000u,
                              0x33000001u, 0x32FFFFFFu, 0x33C00000u, 0x387FE000u, 0x387FF000u};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        for (int d = -2; d <= 2; d++)
            for (int s = 0; s < 2; s++) {
                float f = bits_f32((edges[i] + (uint32_t)d) | (s ? 0x80000000u : 0));
                bad += fp4p_f32_to_f16(f) != fp4_f32_to_f16(f);
            }
    CHECK_EQ_INT(bad, 0);
    CHECK((fp4p_f32_to_f16(NAN) & 0x7E00u) == 0x7E00u);
}

static void test_norm_rope_attend(void) {
    test_rng r = {3};
    float x[96], w[96], y[96];
    for (int i = 0; i < 96; i++)
        x[i] = rng_normal(&r), w[i] = rng_normal(&r);
    fp4p_rmsnorm(x, w, 96, 1e-6f, y);
    float ss = warp_sum((float[96]){0}, 0);
    float sq[96];
    for (int i = 0; i < 96; i++)
        sq[i] = x[i] * x[i];
    ss = warp_sum(sq, 96);
    float inv = 1.0f / sqrtf(ss / 96.0f + 1e-6f);
    int bad = 0;
    for (int i = 0; i < 96; i++)
        bad += f32_bits(y[i]) != f32_bits((x[i] * inv) * w[i]);
    CHECK_EQ_INT(bad, 0);
    double ref = 0;
    for (int i = 0; i < 96; i++)
        ref += (double)x[i] * x[i];
    CHECK(fabs(y[5] - x[5] / sqrt(ref / 96 + 1e-6) * w[5]) < 1e-5);

    float q[8] = {1, 2, 3, 4, 5, 6, 7, 8}, c[4] = {0.5f, 1, 0, -1}, s[4] = {0.25f, 0, 1, 0};
    fp4p_rope(q, c, s, 4);
    CHECK(q[0] == 1 * 0.5f - 5 * 0.25f && q[4] == 5 * 0.5f + 1 * 0.25f);
    CHECK(q[1] == 2 && q[5] == 6 && q[2] == -7 && q[6] == 3 && q[3] == -4 && q[7] == -8);

    /* attention against a double computation */
    enum { N = 70, D = 64, STRIDE = 2 * D };
    static uint16_t kc[N * STRIDE], vc[N * STRIDE];
    float qq[D], o[D], sc[N];
    for (int i = 0; i < D; i++)
        qq[i] = rng_normal(&r);
    for (int i = 0; i < N * STRIDE; i++)
        kc[i] = fp4_f32_to_f16(rng_normal(&r)), vc[i] = fp4_f32_to_f16(rng_normal(&r));
    fp4p_attend(qq, kc + D, vc + D, STRIDE, N, D, 0.125f, sc, o);
    double sd[N], mx = -1e30, den = 0, maxerr = 0;
    for (int j = 0; j < N; j++) {
        double d = 0;
        for (int i = 0; i < D; i++)
            d += (double)qq[i] * fp4_f16_to_f32(kc[j * STRIDE + D + i]);
        sd[j] = d * 0.125;
        if (sd[j] > mx) mx = sd[j];
    }
    for (int j = 0; j < N; j++)
        den += (sd[j] = exp(sd[j] - mx));
    for (int i = 0; i < D; i++) {
        double acc = 0;
        for (int j = 0; j < N; j++)
            acc += sd[j] * fp4_f16_to_f32(vc[j * STRIDE + D + i]);
        if (fabs(acc / den - o[i]) > maxerr) maxerr = fabs(acc / den - o[i]);
    }
    CHECK_MSG(maxerr < 1e-5, "attention max error %g", maxerr);
}

int main(void) {
    test_reduction();
    test_exp();
    test_f16();
    test_norm_rope_attend();
    return check_report();
}
