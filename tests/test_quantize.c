/* test_quantize.c — the ModelOpt-identical quantizer (SPEC §3): hand vectors, scale2 rules, the
 * zero-tensor rule, requantization idempotence, error bounds, determinism, rejections. */
#include "check.h"
#include "fp4lane.h"
#include <math.h>
#include <stdlib.h>

static void test_scale2_rules(void) {
    float s;
    CHECK_OK(fp4_scale2_from_amax(2688.0f, FP4_SCALE2_CPU, &s));
    CHECK(s == 1.0f);
    CHECK_OK(fp4_scale2_from_amax(0.0f, FP4_SCALE2_GPU, &s));
    CHECK(s == 1.0f); /* the all-zero tensor rule */
    CHECK(fp4_scale2_from_amax(NAN, FP4_SCALE2_GPU, &s) == FP4_ERR_NONFINITE);
    CHECK(fp4_scale2_from_amax(INFINITY, FP4_SCALE2_GPU, &s) == FP4_ERR_NONFINITE);
    /* a scale2 that would be subnormal or 0 is the all-zero tensor's 1.0 (it must load) */
    CHECK(fp4_scale2_from_amax(1e-45f, FP4_SCALE2_GPU, &s) == FP4_OK && s == 1.0f);
    CHECK(fp4_scale2_from_amax(1e-36f, FP4_SCALE2_CPU, &s) == FP4_OK && s == 1.0f);
    CHECK(fp4_scale2_from_amax(0x1p-126f * 2688.0f, FP4_SCALE2_CPU, &s) == FP4_OK && s == 0x1p-126f);
    CHECK(fp4_scale2_from_amax(1.0f, (fp4_scale2_rule)7, &s) == FP4_ERR_INVALID_ARG);
    /* GPU rule = amax * fl32(1/2688) = amax * 0x39C30C31; CPU = correctly rounded division. They differ
     * for some amax: find one and check both, bit for bit. */
    test_rng r = {5};
    int differ = 0;
    for (int i = 0; i < 10000; i++) {
        float amax = ldexpf(rng_uniform(&r) + 0.5f, (int)(rng_u64(&r) % 20) - 10);
        float g, c;
        CHECK_OK(fp4_scale2_from_amax(amax, FP4_SCALE2_GPU, &g));
        CHECK_OK(fp4_scale2_from_amax(amax, FP4_SCALE2_CPU, &c));
        CHECK(f32_bits(g) == f32_bits(amax * bits_f32(0x39C30C31u)));
        CHECK((double)c == (double)(float)((double)amax / 2688.0)); /* correctly rounded */
        differ += f32_bits(g) != f32_bits(c);
    }
    CHECK(differ > 500 && differ < 5000); /* ~22% per nvfp4-peers.md §1.1 */
}

static void test_hand_vectors(void) {
    /* scale2 = 0.25 and a block max of 6 give t = 6/(6*0.25) = 4 -> 0x48 (= 4.0), den = 1.0, so the
     * codes are exactly the E2M1 rounding of the inputs, ties to even. */
    const float v[16] = {6.0f, 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f,
                         -1e-30f, -0.0f, -0.75f, 2.4f, 0.5f, -6.0f, 5.5f, 0.0f};
    const uint8_t want_codes[16] = {7, 0, 2, 2, 4, 4, 6, 6, 8, 0, 10, 4, 1, 15, 7, 0};
    uint8_t packed[8], scale;
    CHECK_OK(fp4_nvfp4_quantize(v, FP4_SRC_F32, 1, 16, 0.25f, packed, &scale));
    CHECK(scale == 0x48);
    for (int i = 0; i < 16; i++) {
        uint8_t c = (uint8_t)((packed[i / 2] >> (4 * (i & 1))) & 15);
        CHECK_MSG(c == want_codes[i], "element %d: code %u want %u", i, c, want_codes[i]);
    }
    /* a zero block inside a nonzero tensor stores 1.0 (0x38) and zero codes */
    float z[32] = {0};
    z[16] = 3.0f;
    uint8_t p2[16], s2[2];
    CHECK_OK(fp4_nvfp4_quantize(z, FP4_SRC_F32, 1, 32, 3.0f / 2688.0f, p2, s2));
    CHECK(s2[0] == 0x38);
    for (int i = 0; i < 8; i++) CHECK(p2[i] == 0);
    /* a tiny block clamps its scale at 2^-9 (byte 0x01), a block beyond 448 at 0x7E */
    float tiny[16] = {1e-12f};
    CHECK_OK(fp4_nvfp4_quantize(tiny, FP4_SRC_F32, 1, 16, 1.0f, p2, s2));
    CHECK(s2[0] == 0x01);
    float big[16] = {1e6f};
    CHECK_OK(fp4_nvfp4_quantize(big, FP4_SRC_F32, 1, 16, 1.0f, p2, s2));
    CHECK(s2[0] == 0x7E);
    CHECK((p2[0] & 15) == 7);
}

static void test_zero_tensor(void) {
    float z[64] = {0};
    z[5] = -0.0f;
    float amax = 0.0f, s2 = 0.0f;
    CHECK_OK(fp4_amax_update(z, FP4_SRC_F32, 64, &amax));
    CHECK(amax == 0.0f);
    CHECK_OK(fp4_scale2_from_amax(amax, FP4_SCALE2_GPU, &s2));
    uint8_t p[64], s[8];
    CHECK_OK(fp4_nvfp4_quantize(z, FP4_SRC_F32, 2, 32, s2, p, s));
    for (int i = 0; i < 32; i++) CHECK(p[i] == 0);
    for (int i = 0; i < 4; i++) CHECK(s[i] == 0x38);
    fp4_nvfp4_view w = {p, s, s2, 0.0f, 2, 32, FP4_PACK_CANONICAL};
    CHECK_OK(fp4_nvfp4_view_check(&w, NULL, NULL)); /* the zero tensor loads */
}

/* Quantize n_out×n_in random rows (GPU rule), returning payload/scales/scale2. */
static void make_tensor(test_rng *r, int kind, int64_t n_out, int64_t n_in, float *w, uint8_t *p, uint8_t *s,
                        float *s2) {
    for (int64_t i = 0; i < n_out * n_in; i++) {
        float g = rng_normal(r) * 0.02f;
        if (kind == 1 && rng_u64(r) % 997 == 0) g *= 40.0f;                         /* outliers */
        if (kind == 2) g = g / (0.05f + rng_uniform(r));                             /* heavy tail */
        if (kind == 3 && (i / 16) % 5 == 0) g = 0.0f;                                /* zero blocks */
        if (kind == 4 && (i / 16) % 3 == 0) g *= 1e-6f;                              /* tiny blocks */
        w[i] = g;
    }
    float amax = 0.0f;
    CHECK_OK(fp4_amax_update(w, FP4_SRC_F32, n_out * n_in, &amax));
    CHECK_OK(fp4_scale2_from_amax(amax, FP4_SCALE2_GPU, s2));
    CHECK_OK(fp4_nvfp4_quantize(w, FP4_SRC_F32, n_out, n_in, *s2, p, s));
}

static void test_properties(void) {
    enum { NO = 24, NI = 512 };
    static float w[NO * NI], dq[NO * NI], dq2[NO * NI];
    static uint8_t p[NO * NI / 2], s[NO * NI / 16], p2[NO * NI / 2], s2b[NO * NI / 16], p3[NO * NI / 2],
        s3[NO * NI / 16];
    test_rng r = {1234};
    for (int kind = 0; kind < 5; kind++) {
        float s2;
        make_tensor(&r, kind, NO, NI, w, p, s, &s2);
        for (int row = 0; row < NO; row++)
            CHECK_OK(fp4_nvfp4_dequant_row(p + row * NI / 2, s + row * NI / 16, s2, NI, dq + row * NI));
        /* requantizing the dequantized tensor with the same scale2 returns the same bytes, up to
         * two canonicalizations: code 8 (a tiny negative, "-0") dequantizes to -0.0, which
         * requantizes to code 0; a block whose codes are all zero gets scale 0x38. After one such
         * pass the bytes are a fixed point. */
        CHECK_OK(fp4_nvfp4_quantize(dq, FP4_SRC_F32, NO, NI, s2, p2, s2b));
        int64_t mismatch = 0;
        for (int g = 0; g < NO * NI / 16; g++) {
            int allzero = 1;
            for (int j = 0; j < 8; j++) allzero &= (p[g * 8 + j] & 0x77) == 0;
            uint8_t canon[8];
            for (int j = 0; j < 8; j++) {
                uint8_t lo = p[g * 8 + j] & 15, hi = p[g * 8 + j] >> 4;
                canon[j] = (uint8_t)((lo == 8 ? 0 : lo) | ((hi == 8 ? 0 : hi) << 4));
            }
            int same = s[g] == s2b[g] && !memcmp(canon, p2 + g * 8, 8);
            if (!same && !(allzero && s2b[g] == 0x38)) mismatch++;
        }
        CHECK_MSG(mismatch == 0, "kind %d: %lld blocks changed on requantization", kind, (long long)mismatch);
        for (int row = 0; row < NO; row++)
            CHECK_OK(fp4_nvfp4_dequant_row(p2 + row * NI / 2, s2b + row * NI / 16, s2, NI, dq2 + row * NI));
        CHECK_OK(fp4_nvfp4_quantize(dq2, FP4_SRC_F32, NO, NI, s2, p3, s3));
        CHECK(!memcmp(p2, p3, sizeof p2) && !memcmp(s2b, s3, sizeof s3));
        /* error bound: |w - dq| <= half the widest E2M1 gap (1.0) x the block's den, and the
         * block max is within one E4M3 rounding of exact */
        double num = 0, den = 0;
        for (int i = 0; i < NO * NI; i++) {
            float d = fp4_e4m3fn_decode(s[i / 16]) * s2;
            CHECK_MSG(fabsf(w[i] - dq[i]) <= d * 1.0f + 1e-30f, "kind %d i %d", kind, i);
            num += ((double)w[i] - dq[i]) * ((double)w[i] - dq[i]);
            den += (double)w[i] * w[i];
        }
        if (kind == 0) CHECK_MSG(sqrt(num / den) < 0.11, "gaussian relative rmse %g", sqrt(num / den));
        /* determinism, and f16/bf16 inputs give the same bytes as their exact f32 widening */
        uint8_t pd[NO * NI / 2], sd[NO * NI / 16];
        CHECK_OK(fp4_nvfp4_quantize(w, FP4_SRC_F32, NO, NI, s2, pd, sd));
        CHECK(!memcmp(p, pd, sizeof pd) && !memcmp(s, sd, sizeof sd));
        static uint16_t h[NO * NI];
        static float hw[NO * NI];
        for (int i = 0; i < NO * NI; i++) {
            h[i] = fp4_f32_to_bf16(w[i]);
            hw[i] = fp4_bf16_to_f32(h[i]);
        }
        uint8_t pb[NO * NI / 2], sb[NO * NI / 16], pf[NO * NI / 2], sf[NO * NI / 16];
        CHECK_OK(fp4_nvfp4_quantize(h, FP4_SRC_BF16, NO, NI, s2, pb, sb));
        CHECK_OK(fp4_nvfp4_quantize(hw, FP4_SRC_F32, NO, NI, s2, pf, sf));
        CHECK(!memcmp(pb, pf, sizeof pf) && !memcmp(sb, sf, sizeof sf));
        for (int i = 0; i < NO * NI; i++) {
            h[i] = fp4_f32_to_f16(w[i]);
            hw[i] = fp4_f16_to_f32(h[i]);
        }
        CHECK_OK(fp4_nvfp4_quantize(h, FP4_SRC_F16, NO, NI, s2, pb, sb));
        CHECK_OK(fp4_nvfp4_quantize(hw, FP4_SRC_F32, NO, NI, s2, pf, sf));
        CHECK(!memcmp(pb, pf, sizeof pf) && !memcmp(sb, sf, sizeof sf));
        fp4_nvfp4_view v = {p, s, s2, 0.0f, NO, NI, FP4_PACK_CANONICAL};
        CHECK_OK(fp4_nvfp4_view_check(&v, NULL, NULL));
    }
}

static void test_rejections(void) {
    float x[32] = {0};
    uint8_t p[16], s[2];
    x[3] = NAN;
    CHECK(fp4_nvfp4_quantize(x, FP4_SRC_F32, 1, 32, 1.0f, p, s) == FP4_ERR_NONFINITE);
    float amax = 0;
    CHECK(fp4_amax_update(x, FP4_SRC_F32, 32, &amax) == FP4_ERR_NONFINITE);
    x[3] = INFINITY;
    CHECK(fp4_amax_update(x, FP4_SRC_F32, 32, &amax) == FP4_ERR_NONFINITE);
    x[3] = 0;
    CHECK(fp4_nvfp4_quantize(x, FP4_SRC_F32, 1, 24, 1.0f, p, s) == FP4_ERR_SHAPE);
    CHECK(fp4_nvfp4_quantize(x, FP4_SRC_F32, 1, 32, 0.0f, p, s) == FP4_ERR_SCALE2);
    CHECK(fp4_nvfp4_quantize(x, FP4_SRC_F32, 1, 32, NAN, p, s) == FP4_ERR_SCALE2);
    CHECK(fp4_nvfp4_quantize(x, (fp4_src_dtype)9, 1, 32, 1.0f, p, s) == FP4_ERR_INVALID_ARG);
    CHECK(fp4_nvfp4_quantize(NULL, FP4_SRC_F32, 1, 32, 1.0f, p, s) == FP4_ERR_INVALID_ARG);
    /* the view check refuses NaN scale bytes and reports where */
    uint8_t sc[4] = {0x38, 0x38, 0x38, 0xFF}, pl[32] = {0};
    fp4_nvfp4_view v = {pl, sc, 1.0f, 0.0f, 2, 32, FP4_PACK_CANONICAL};
    int64_t br = -1, bc = -1;
    CHECK(fp4_nvfp4_view_check(&v, &br, &bc) == FP4_ERR_NAN_SCALE);
    CHECK(br == 1 && bc == 1);
    sc[3] = 0x7F;
    CHECK(fp4_nvfp4_view_check(&v, NULL, NULL) == FP4_ERR_NAN_SCALE);
    sc[3] = 0x38;
    CHECK_OK(fp4_nvfp4_view_check(&v, NULL, NULL));
    v.scale2 = INFINITY;
    CHECK(fp4_nvfp4_view_check(&v, NULL, NULL) == FP4_ERR_SCALE2);
    v.scale2 = -1.0f;
    CHECK(fp4_nvfp4_view_check(&v, NULL, NULL) == FP4_ERR_SCALE2);
    v.scale2 = 1e-40f; /* subnormal */
    CHECK(fp4_nvfp4_view_check(&v, NULL, NULL) == FP4_ERR_SCALE2);
    v.scale2 = 1.0f;
    v.input_scale_inv = NAN;
    CHECK(fp4_nvfp4_view_check(&v, NULL, NULL) == FP4_ERR_SCALE2);
    v.input_scale_inv = 0.0f;
    v.n_in = 24;
    CHECK(fp4_nvfp4_view_check(&v, NULL, NULL) == FP4_ERR_SHAPE);
}

int main(void) {
    test_scale2_rules();
    test_hand_vectors();
    test_zero_tensor();
    test_properties();
    test_rejections();
    return check_report();
}
