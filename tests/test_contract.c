/* test_contract.c — the CPU oracle contractions (SPEC §4–6): Q8_K, exact A16, W4A4, float A16. */
#define FP4LANE_ORACLE_API /* the integer codec forms and single-row dots */
#include "check.h"
#include "fp4lane.h"
#include "cpu/cpu_impl.h"
#include <math.h>
#include <stdlib.h>

static void test_q8k(void) {
    float x[512] = {0};
    fp4_block_q8_K q[2];
    for (int i = 0; i < 256; i++) x[256 + i] = (float)(i - 100) * 0.01f;
    x[256 + 7] = -3.0f;   /* first largest |x| ... */
    x[256 + 9] = 3.0f;    /* ... a later equal |x| does not replace it */
    CHECK_OK(fp4_q8_K_quantize(x, 512, q));
    CHECK(q[0].d == 0.0f);
    for (int i = 0; i < 256; i++) CHECK(q[0].qs[i] == 0);
    CHECK(q[1].d == 1.0f / (-127.0f / -3.0f));
    CHECK(q[1].qs[7] == -127 && q[1].qs[9] == 127);
    int s = 0;
    for (int i = 0; i < 16; i++) s += q[1].qs[i];
    CHECK(q[1].bsums[0] == s);
    CHECK(fp4_q8_K_quantize(x, 100, q) == FP4_ERR_SHAPE);
    float back[512];
    CHECK_OK(fp4_q8_K_dequantize(q, 512, back));
    for (int i = 0; i < 256; i++) CHECK(fabsf(back[256 + i] - x[256 + i]) <= 3.0f / 127.0f * 0.5f + 1e-6f);
}

/* The A16 contraction recomputed the slow way, element by element, from the integer encodings. */
static float a16_slow(const uint8_t *p, const uint8_t *s, float s2, const fp4_block_q8_K *xq, int64_t n_in) {
    float acc = 0.0f;
    for (int64_t sb = 0; sb < n_in / 256; sb++) {
        if (xq[sb].d == 0.0f) continue;
        int64_t total = 0;
        for (int g = 0; g < 16; g++) {
            int64_t dot = 0;
            for (int j = 0; j < 16; j++) {
                int64_t k = sb * 256 + g * 16 + j;
                uint8_t code = (uint8_t)((p[k / 2] >> (4 * (k & 1))) & 15);
                dot += (int64_t)fp4_e2m1_q1(code) * xq[sb].qs[g * 16 + j];
            }
            total += dot * fp4_e4m3fn_q9(s[sb * 16 + g]);
        }
        float c = fmaf((float)total, 0x1p-10f, 0.0f);
        c = fmaf(c, xq[sb].d, 0.0f);
        c = fmaf(c, s2, 0.0f);
        acc = fmaf(1.0f, c, acc);
    }
    return fp4_round_f16(acc);
}

static void fill(test_rng *r, float *x, int64_t n, float scale) {
    for (int64_t i = 0; i < n; i++) x[i] = rng_normal(r) * scale;
}

static void test_a16_fixture(void) {
    /* all weights 1.0 (code 2, scale 1.0, scale2 1), x all 1: y = 256 exactly after the F16 boundary */
    uint8_t p[128], s[16];
    memset(p, 0x22, sizeof p);
    memset(s, 0x38, sizeof s);
    float x[256], y = -1;
    for (int i = 0; i < 256; i++) x[i] = 1.0f;
    fp4_nvfp4_view w = {p, s, 1.0f, 0.0f, 1, 256, FP4_PACK_CANONICAL};
    CHECK_OK(fp4_nvfp4_matvec_a16_exact(&w, x, 1, &y, 1));
    CHECK(y == 256.0f);
    /* a zero activation super-block contributes nothing: the result is exactly +0 */
    memset(x, 0, sizeof x);
    CHECK_OK(fp4_nvfp4_matvec_a16_exact(&w, x, 1, &y, 1));
    CHECK(f32_bits(y) == 0);
    CHECK(fp4_nvfp4_matvec_a16_exact(&(fp4_nvfp4_view){p, s, 1.0f, 0.0f, 1, 128, FP4_PACK_CANONICAL}, x, 1,
                                     &y, 1) == FP4_ERR_SHAPE);
    CHECK(fp4_nvfp4_matvec_a16_exact(&w, NULL, 1, &y, 1) == FP4_ERR_INVALID_ARG);
}

static void test_a16_random(void) {
    enum { NO = 37, NI = 1024, NC = 5 };
    static float wf[NO * NI], x[NC * NI], y1[NC * NO], y2[NC * NO], y3[NC * NO], yf[NC * NO];
    static uint8_t p[NO * NI / 2], s[NO * NI / 16];
    test_rng r = {77};
    fill(&r, wf, NO * NI, 0.03f);
    for (int i = 0; i < NO * NI; i += 97) wf[i] *= 30.0f;
    float amax = 0, s2;
    CHECK_OK(fp4_amax_update(wf, FP4_SRC_F32, NO * NI, &amax));
    CHECK_OK(fp4_scale2_from_amax(amax, FP4_SCALE2_GPU, &s2));
    CHECK_OK(fp4_nvfp4_quantize(wf, FP4_SRC_F32, NO, NI, s2, p, s));
    fill(&r, x, NC * NI, 1.0f);
    for (int i = 0; i < 256; i++) x[2 * NI + 256 + i] = 0.0f; /* a zero super-block in column 2 */
    x[3 * NI + 5] = 1e4f;                                      /* an outlier in column 3 */
    fp4_nvfp4_view w = {p, s, s2, 0.0f, NO, NI, FP4_PACK_CANONICAL};
    CHECK_OK(fp4_nvfp4_matvec_a16_exact(&w, x, NC, y1, 1));
    CHECK_OK(fp4_nvfp4_matvec_a16_exact(&w, x, NC, y2, 2));
    CHECK_OK(fp4_nvfp4_matvec_a16_exact(&w, x, NC, y3, 3));
    CHECK(!memcmp(y1, y2, sizeof y1) && !memcmp(y1, y3, sizeof y1)); /* thread-count invariant */
    CHECK_OK(fp4_nvfp4_matvec_a16_float(&w, x, NC, yf, 2));
    for (int c = 0; c < NC; c++) {
        fp4_block_q8_K xq[NI / 256];
        CHECK_OK(fp4_q8_K_quantize(x + c * NI, NI, xq));
        float ycol[NO];
        CHECK_OK(fp4_nvfp4_matvec_a16_exact(&w, x + c * NI, 1, ycol, 1));
        for (int o = 0; o < NO; o++) {
            float slow = a16_slow(p + o * NI / 2, s + o * NI / 16, s2, xq, NI);
            CHECK(f32_bits(slow) == f32_bits(y1[c * NO + o]));
            CHECK(f32_bits(ycol[o]) == f32_bits(y1[c * NO + o])); /* columns are independent */
            CHECK(f32_bits(fp4_nvfp4_dot_a16_exact(p + o * NI / 2, s + o * NI / 16, s2, xq, NI)) ==
                  f32_bits(y1[c * NO + o]));
        }
        double e = fp4_nrmse(y1 + c * NO, yf + c * NO, NO);
        CHECK_MSG(e < 0.02, "column %d: exact vs float nrmse %g", c, e); /* Q8 + F16 rounding only */
    }
}

static void test_w4a4(void) {
    /* fixture: weights 1.0, x = 1.0, input_scale = 1/6: every activation code is 6 with scale 1.0,
     * so y = 64 exactly for n_in = 64 */
    uint8_t p[32], s[4];
    memset(p, 0x22, sizeof p);
    memset(s, 0x38, sizeof s);
    float x[64], y;
    for (int i = 0; i < 64; i++) x[i] = 1.0f;
    fp4_nvfp4_view w = {p, s, 1.0f, 6.0f, 1, 64, FP4_PACK_CANONICAL};
    CHECK_OK(fp4_nvfp4_matvec_w4a4(&w, x, 1, &y, 1));
    CHECK(y == 64.0f);
    uint8_t ac[32], as[4];
    CHECK_OK(fp4_nvfp4_quantize_act(x, 64, 6.0f, ac, as));
    CHECK(as[0] == 0x38 && ac[0] == 0x77);
    w.input_scale_inv = 0.0f;
    CHECK(fp4_nvfp4_matvec_w4a4(&w, x, 1, &y, 1) == FP4_ERR_SCALE2);
    CHECK(fp4_nvfp4_quantize_act(x, 60, 6.0f, ac, as) == FP4_ERR_SHAPE);

    enum { NO = 29, NI = 320, NC = 4 };
    static float wf[NO * NI], xs[NC * NI], y1[NC * NO], y2[NC * NO], yf[NC * NO], xq[NC * NI];
    static uint8_t pw[NO * NI / 2], sw[NO * NI / 16], pa[NI / 2], sa[NI / 16];
    test_rng r = {31};
    fill(&r, wf, NO * NI, 0.05f);
    fill(&r, xs, NC * NI, 2.0f);
    float amax = 0, s2, xamax = 0, in_s;
    CHECK_OK(fp4_amax_update(wf, FP4_SRC_F32, NO * NI, &amax));
    CHECK_OK(fp4_scale2_from_amax(amax, FP4_SCALE2_GPU, &s2));
    CHECK_OK(fp4_nvfp4_quantize(wf, FP4_SRC_F32, NO, NI, s2, pw, sw));
    CHECK_OK(fp4_amax_update(xs, FP4_SRC_F32, NC * NI, &xamax));
    CHECK_OK(fp4_scale2_from_amax(xamax, FP4_SCALE2_GPU, &in_s));
    fp4_nvfp4_view ww = {pw, sw, s2, 1.0f / in_s, NO, NI, FP4_PACK_CANONICAL};
    CHECK_OK(fp4_nvfp4_matvec_w4a4(&ww, xs, NC, y1, 1));
    CHECK_OK(fp4_nvfp4_matvec_w4a4(&ww, xs, NC, y2, 2));
    CHECK(!memcmp(y1, y2, sizeof y1));
    for (int c = 0; c < NC; c++) {
        CHECK_OK(fp4_nvfp4_quantize_act(xs + c * NI, NI, ww.input_scale_inv, pa, sa));
        for (int g = 0; g < NI / 16; g++)
            CHECK_OK(fp4_nvfp4_dequant_row(pa + g * 8, sa + g, 1.0f, 16, xq + c * NI + g * 16));
        for (int o = 0; o < NO; o++) {
            /* the integer sum equals the exact product of the dequantized operands */
            double ref = 0;
            float wrow[NI];
            CHECK_OK(fp4_nvfp4_dequant_row(pw + o * NI / 2, sw + o * NI / 16, 1.0f, NI, wrow));
            for (int k = 0; k < NI; k++) ref += (double)wrow[k] * (double)xq[c * NI + k];
            float want = fp4_round_f16(((float)ref * s2) * (1.0f / ww.input_scale_inv));
            CHECK(fabsf(y1[c * NO + o] - want) <= fabsf(want) * 2e-3f + 1e-6f);
            CHECK(f32_bits(y1[c * NO + o]) ==
                  f32_bits(fp4_nvfp4_dot_w4a4(pw + o * NI / 2, sw + o * NI / 16, s2, pa, sa,
                                              ww.input_scale_inv, NI)));
        }
    }
    fp4_nvfp4_view wa = ww;
    CHECK_OK(fp4_nvfp4_matvec_a16_float(&wa, xs, NC, yf, 1));
    double e = fp4_nrmse(y1, yf, NC * NO);
    CHECK_MSG(e < 0.2, "w4a4 vs float nrmse %g", e);
}

int main(void) {
    test_q8k();
    test_a16_fixture();
    test_a16_random();                  /* the best path this CPU has (AVX2 on x86-64 when present) */
    fp4_cpu_force_path(FP4_CPU_PORTABLE);
    test_a16_random();                  /* the portable path: the same bits */
    fp4_cpu_force_path(-1);
    test_w4a4();
    return check_report();
}
