/* test_codec.c — exhaustive proofs of the scalar codecs (SPEC §1) and the worked fixture (§2). */
#define FP4LANE_ORACLE_API /* the integer codec forms and single-row dots */
#include "check.h"
#include "fp4lane.h"
#include <math.h>

static const double e2m1_table[16] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                                      -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0};

/* Independent E4M3FN decode straight from the definition, in double. */
static double e4m3_ref(unsigned b) {
    int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
    double v = e == 0 ? m * pow(2.0, -9) : (1.0 + m / 8.0) * pow(2.0, e - 7);
    return s ? -v : v;
}

static void test_e2m1(void) {
    for (unsigned c = 0; c < 16; c++) {
        float v = fp4_e2m1_decode((uint8_t)c);
        CHECK(v == (float)e2m1_table[c]);
        CHECK(!!signbit(v) == (c >= 8));                   /* code 8 is -0.0 */
        CHECK((float)fp4_e2m1_q1((uint8_t)c) * 0.5f == v); /* the integer encoding equals the float */
        CHECK(fp4_e2m1_decode((uint8_t)(c | 0xF0)) == v); /* only the low nibble counts */
    }
    /* encode: the decision table of SPEC §3 step 5, ties to even */
    static const struct { float x; uint8_t code; } cases[] = {
        {0.0f, 0}, {-0.0f, 0}, {0.25f, 0}, {0.2500001f, 1}, {0.5f, 1}, {0.7499999f, 1}, {0.75f, 2}, {1.0f, 2},
        {1.25f, 2}, {1.2500001f, 3}, {1.5f, 3}, {1.7499999f, 3}, {1.75f, 4}, {2.5f, 4}, {2.5000002f, 5},
        {3.0f, 5}, {3.4999998f, 5}, {3.5f, 6}, {5.0f, 6}, {5.0000005f, 7}, {6.0f, 7}, {1e30f, 7},
        {INFINITY, 7}, {-1e-30f, 8}, {-0.25f, 8}, {-0.75f, 10}, {-1.75f, 12}, {-3.5f, 14}, {-5.5f, 15},
        {-INFINITY, 15}, {NAN, 7}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK_MSG(fp4_e2m1_encode(cases[i].x) == cases[i].code, "x=%g got %u want %u", cases[i].x,
                  fp4_e2m1_encode(cases[i].x), cases[i].code);
    /* brute force: nearest grid value, ties to the even code (even mantissa), on random inputs */
    test_rng r = {42};
    for (int i = 0; i < 200000; i++) {
        float x = (rng_uniform(&r) * 2.0f - 1.0f) * 7.0f;
        if (i % 4 == 0) x = (float)((int)(x * 4.0f)) * 0.25f; /* land on quarter points: many ties */
        double a = fabs(x);
        int best = 0;
        for (int c = 1; c < 8; c++) {
            double dc = fabs(a - e2m1_table[c]), db = fabs(a - e2m1_table[best]);
            if (dc < db || (dc == db && (c % 2 == 0))) best = c;
        }
        uint8_t want = (uint8_t)((x < 0.0f ? 8 : 0) | best);
        CHECK_MSG(fp4_e2m1_encode(x) == want, "x=%.9g got %u want %u", x, fp4_e2m1_encode(x), want);
    }
}

static void test_e4m3_decode(void) {
    int finite = 0;
    for (unsigned b = 0; b < 256; b++) {
        float v = fp4_e4m3fn_decode((uint8_t)b);
        if ((b & 0x7F) == 0x7F) {
            CHECK(isnan(v));
            CHECK(fp4_e4m3fn_is_nan((uint8_t)b));
            CHECK(fp4_e4m3fn_q9((uint8_t)b) == 0);
            continue;
        }
        finite++;
        CHECK(!fp4_e4m3fn_is_nan((uint8_t)b));
        CHECK((double)v == e4m3_ref(b));
        CHECK(!!signbit(v) == (b >= 0x80));
        CHECK(ldexpf((float)fp4_e4m3fn_q9((uint8_t)b), -9) == v); /* q9 equals the float decode */
    }
    CHECK(finite == 254);
    CHECK(fp4_e4m3fn_decode(0x7E) == 448.0f);
    CHECK(fp4_e4m3fn_q9(0x7E) == 229376);
    CHECK(fp4_e4m3fn_decode(0x38) == 1.0f);
    CHECK(fp4_e4m3fn_decode(0x01) == 0x1p-9f);
    CHECK(fp4_e4m3fn_decode(0x08) == 0x1p-6f);
}

/* Brute-force RNE onto the finite E4M3FN grid with saturation, from the definition. */
static uint8_t e4m3_encode_ref(float x) {
    if (isnan(x)) return 0x7F;
    double a = fabs((double)x);
    unsigned best = 0;
    for (unsigned b = 1; b <= 0x7E; b++) {
        double db = fabs(a - e4m3_ref(b)), dc = fabs(a - e4m3_ref(best));
        if (db < dc || (db == dc && (b % 2 == 0))) best = b;
    }
    if (a >= 448.0) best = 0x7E;
    return (uint8_t)((signbit(x) ? 0x80 : 0) | best);
}

static void test_e4m3_encode(void) {
    for (unsigned b = 0; b < 256; b++) { /* every finite byte round-trips */
        if ((b & 0x7F) == 0x7F) continue;
        CHECK_MSG(fp4_e4m3fn_encode(fp4_e4m3fn_decode((uint8_t)b)) == b, "byte 0x%02x", b);
    }
    for (unsigned b = 0; b < 0x7E; b++) { /* every midpoint rounds to even, both signs */
        float lo = fp4_e4m3fn_decode((uint8_t)b), hi = fp4_e4m3fn_decode((uint8_t)(b + 1));
        float mid = (lo + hi) * 0.5f; /* exact: at most 5 significant bits */
        CHECK((double)mid == ((double)lo + (double)hi) / 2.0);
        uint8_t even = (b % 2 == 0) ? (uint8_t)b : (uint8_t)(b + 1);
        CHECK_MSG(fp4_e4m3fn_encode(mid) == even, "mid %g -> 0x%02x", mid, fp4_e4m3fn_encode(mid));
        CHECK(fp4_e4m3fn_encode(-mid) == (0x80 | even));
        CHECK(fp4_e4m3fn_encode(nextafterf(mid, 0.0f)) == b);
        CHECK(fp4_e4m3fn_encode(nextafterf(mid, INFINITY)) == b + 1);
    }
    CHECK(fp4_e4m3fn_encode(448.0f) == 0x7E);
    CHECK(fp4_e4m3fn_encode(464.0f) == 0x7E);
    CHECK(fp4_e4m3fn_encode(1e30f) == 0x7E);
    CHECK(fp4_e4m3fn_encode(INFINITY) == 0x7E);
    CHECK(fp4_e4m3fn_encode(-INFINITY) == 0xFE);
    CHECK(fp4_e4m3fn_encode(NAN) == 0x7F);
    CHECK(fp4_e4m3fn_encode(0x1p-10f) == 0x00);
    CHECK(fp4_e4m3fn_encode(nextafterf(0x1p-10f, 1.0f)) == 0x01);
    CHECK(fp4_e4m3fn_encode(1e-45f) == 0x00);
    CHECK(fp4_e4m3fn_encode(-0.0f) == 0x80);
    test_rng r = {7};
    for (int i = 0; i < 30000; i++) { /* random magnitudes across the whole range */
        float x = ldexpf(rng_uniform(&r) + 0.5f, (int)(rng_u64(&r) % 30) - 16);
        if (rng_u64(&r) & 1) x = -x;
        CHECK_MSG(fp4_e4m3fn_encode(x) == e4m3_encode_ref(x), "x=%.9g", x);
    }
}

/* The compiler's binary16 conversion when it has one (gcc on x86-64); otherwise an independent
 * round-to-nearest-even in double arithmetic. Returns the f16 bits. */
static uint16_t f16_ref(float f) {
#if defined(__FLT16_MAX__)
    _Float16 h = (_Float16)f;
    uint16_t b;
    memcpy(&b, &h, 2);
    return b;
#else
    double a = fabs((double)f);
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    if (a >= 65520.0) return sign | 0x7C00;
    int e = a < 0x1p-14 ? -14 : (int)floor(log2(a));
    if (a >= 0x1p-14 && ldexp(1.0, e) > a) e--; /* log2 rounding at powers of two */
    if (a >= 0x1p-14 && ldexp(1.0, e + 1) <= a) e++;
    double ulp = ldexp(1.0, e - 10), q = a / ulp, r = floor(q), frac = q - r;
    if (frac > 0.5 || (frac == 0.5 && fmod(r, 2.0) == 1.0)) r += 1.0;
    return sign | fp4_f32_to_f16((float)(r * ulp)); /* r·ulp is an f16 value: converted exactly */
#endif
}

static void test_f16_bf16(void) {
    for (uint32_t h = 0; h < 65536; h++) { /* every f16 and bf16 pattern round-trips */
        float f = fp4_f16_to_f32((uint16_t)h);
        if (isnan(f)) {
            CHECK(isnan(fp4_f16_to_f32(fp4_f32_to_f16(f))));
        } else {
            CHECK_MSG(fp4_f32_to_f16(f) == h, "f16 0x%04x", h);
            CHECK(f16_ref(f) == h); /* decode agrees with the reference encoder */
        }
        float g = fp4_bf16_to_f32((uint16_t)h);
        if (isnan(g)) CHECK(isnan(fp4_bf16_to_f32(fp4_f32_to_bf16(g))));
        else CHECK_MSG(fp4_f32_to_bf16(g) == h, "bf16 0x%04x", h);
    }
    test_rng r = {99};
    for (int i = 0; i < 2000000; i++) { /* f32 -> f16 RNE against the reference */
        float f = bits_f32((uint32_t)rng_u64(&r));
        if (i % 2) f = ldexpf(rng_uniform(&r), (int)(rng_u64(&r) % 50) - 30); /* f16 range incl. subnormals */
        uint16_t rb = isnan(f) ? 0 : f16_ref(f);
        uint16_t got = fp4_f32_to_f16(f);
        if (isnan(f)) CHECK((got & 0x7C00) == 0x7C00 && (got & 0x3FF));
        else CHECK_MSG(got == rb, "f=%a got 0x%04x want 0x%04x", f, got, rb);
        /* bf16: nearest of the two neighbours, ties to even, checked in double */
        if (!isnan(f)) {
            uint16_t b = fp4_f32_to_bf16(f);
            uint32_t lo = f32_bits(f) & 0xFFFF0000u;
            double dlo = fabs((double)f - (double)bits_f32(lo));
            float hif = bits_f32(lo + 0x10000u);
            double hid = isinf(hif) ? copysign(0x1p128, (double)f) : (double)hif; /* overflow rounds to Inf */
            double dhi = fabs(hid - (double)f);
            uint16_t want = (uint16_t)(lo >> 16);
            if (dhi < dlo || (dhi == dlo && (want & 1))) want++;
            if (isinf(f)) want = (uint16_t)(lo >> 16);
            CHECK_MSG(b == want, "bf16 f=%a", f);
        }
    }
    CHECK(fp4_f32_to_f16(65504.0f) == 0x7BFF);
    CHECK(fp4_f32_to_f16(65519.996f) == 0x7BFF);
    CHECK(fp4_f32_to_f16(65520.0f) == 0x7C00);
    CHECK(fp4_f32_to_f16(0x1p-25f) == 0x0000);            /* tie at half the smallest subnormal: even */
    CHECK(fp4_f32_to_f16(nextafterf(0x1p-25f, 1)) == 1);
    CHECK(fp4_round_f16(1.0f + 0x1p-11f) == 1.0f);        /* tie to even */
    CHECK(fp4_round_f16(1.0f + 0x1p-10f + 0x1p-11f) == 1.0f + 0x1p-9f);
}

static void test_fixture(void) {
    /* SPEC §2: bytes 10 32 54 76 98 BA DC FE, scale 0x38, scale2 0.25 */
    const uint8_t packed[8] = {0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE};
    const uint8_t scale = 0x38;
    const float want[16] = {0.0f, 0.125f, 0.25f, 0.375f, 0.5f, 0.75f, 1.0f, 1.5f,
                            -0.0f, -0.125f, -0.25f, -0.375f, -0.5f, -0.75f, -1.0f, -1.5f};
    float got[16];
    CHECK_OK(fp4_nvfp4_dequant_row(packed, &scale, 0.25f, 16, got));
    for (int i = 0; i < 16; i++) CHECK_MSG(f32_bits(got[i]) == f32_bits(want[i]), "element %d", i);
    CHECK(fp4_nvfp4_dequant_row(packed, &scale, 0.25f, 8, got) == FP4_ERR_SHAPE);
    CHECK(fp4_nvfp4_dequant_row(NULL, &scale, 0.25f, 16, got) == FP4_ERR_INVALID_ARG);
    /* the pinned order for every code × every finite scale byte × several scale2 */
    const float s2s[] = {1.0f, 0.25f, 3.0f / 2688.0f, 1.1754944e-38f, 7.0e-5f};
    for (unsigned b = 0; b < 256; b++) {
        if ((b & 0x7F) == 0x7F) continue;
        uint8_t sb = (uint8_t)b;
        for (size_t k = 0; k < sizeof s2s / sizeof s2s[0]; k++) {
            float row[16];
            CHECK_OK(fp4_nvfp4_dequant_row(packed, &sb, s2s[k], 16, row));
            for (int i = 0; i < 16; i++) {
                uint8_t code = (uint8_t)((packed[i / 2] >> (4 * (i & 1))) & 15);
                volatile float p = fp4_e2m1_decode(code) * fp4_e4m3fn_decode(sb);
                float w = p * s2s[k];
                CHECK(f32_bits(row[i]) == f32_bits(w));
            }
        }
    }
}

static void test_status(void) {
    for (int s = 0; s < FP4_STATUS_COUNT_; s++)
        CHECK(strcmp(fp4_status_str((fp4_status)s), "unknown status") != 0);
    CHECK(strcmp(fp4_status_str((fp4_status)999), "unknown status") == 0);
    CHECK(strcmp(fp4_version(), FP4LANE_VERSION_STRING) == 0);
}

int main(void) {
    test_e2m1();
    test_e4m3_decode();
    test_e4m3_encode();
    test_f16_bf16();
    test_fixture();
    test_status();
    return check_report();
}
