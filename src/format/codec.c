/* codec.c — scalar codecs of the contract (SPEC §1): E2M1, E4M3FN, f16, bf16.
 * All integer/bit work; no dependence on the FPU rounding mode except where noted. */
#include "fp4_impl.h"
#include <math.h>

/* E2M1 magnitudes (SPEC §1 table), and the same in units of 2^-1. */
static const float e2m1_mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
static const int e2m1_mag_q1[8] = {0, 1, 2, 3, 4, 6, 8, 12};

float fp4_e2m1_decode(uint8_t code) {
    float m = e2m1_mag[code & 7];
    return (code & 8) ? -m : m; /* code 8 -> -0.0 */
}

int fp4_e2m1_q1(uint8_t code) {
    int m = e2m1_mag_q1[code & 7];
    return (code & 8) ? -m : m;
}

/* SPEC §3 step 5: round to the E2M1 grid, ties to even, saturating at 6; NaN -> 7 (sign 0);
 * the sign bit is set whenever x < 0, so a tiny negative gives code 8 and -0.0 gives code 0. */
uint8_t fp4_e2m1_encode(float x) {
    if (isnan(x)) return 7;
    float a = fabsf(x);
    uint8_t m = (uint8_t)((a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) + (a >= 3.5f) +
                          (a > 5.0f));
    return (uint8_t)((x < 0.0f ? 8 : 0) | m);
}

int fp4_e4m3fn_is_nan(uint8_t b) { return (b & 0x7F) == 0x7F; }

float fp4_e4m3fn_decode(uint8_t b) {
    if (fp4_e4m3fn_is_nan(b)) return NAN;
    int e = (b >> 3) & 15, m = b & 7;
    float v = e == 0 ? ldexpf((float)m, -9) : ldexpf((float)(8 + m), e - 10);
    return (b & 0x80) ? -v : v;
}

int32_t fp4_e4m3fn_q9(uint8_t b) {
    if (fp4_e4m3fn_is_nan(b)) return 0;
    int e = (b >> 3) & 15, m = b & 7;
    int32_t v = e == 0 ? m : (int32_t)(8 + m) << (e - 1);
    return (b & 0x80) ? -v : v;
}

/* Round-to-nearest-even on the E4M3FN grid, from the f32 bits (no FPU rounding involved). */
uint8_t fp4_e4m3fn_encode(float x) {
    uint32_t u = fp4_f32_bits(x);
    uint8_t sign = (uint8_t)((u >> 24) & 0x80);
    uint32_t ax = u & 0x7FFFFFFFu;
    if (ax > 0x7F800000u) return 0x7F;                /* NaN */
    if (ax >= 0x43E00000u) return sign | 0x7E;        /* >= 448 (and Inf): saturate */
    int E = (int)(ax >> 23) - 127;                    /* unbiased f32 exponent */
    if (E < -6) {
        /* subnormal range of E4M3 (and below): units of 2^-9, RNE. value = ax * 2^9. */
        if (E < -11) return sign;                     /* < 2^-11 < half of 2^-9 */
        uint32_t mant = (ax & 0x7FFFFFu) | (ax >= 0x00800000u ? 0x800000u : 0);
        int shift = 23 - (E + 9);                     /* mant * 2^(E-23) * 2^9 */
        uint32_t q = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return sign | (uint8_t)q;                     /* q == 8 is 0x08, the smallest normal */
    }
    uint32_t mant = (ax & 0x7FFFFFu) | 0x800000u;     /* 1.m with 23 fraction bits */
    uint32_t q = mant >> 20, rem = mant & 0xFFFFFu;    /* 4 bits: 1mmm */
    if (rem > 0x80000u || (rem == 0x80000u && (q & 1))) q++;
    int e = E + 7;
    if (q == 16) { q = 8; e++; }
    /* ax < 448 so the result is at most 0x7E */
    return sign | (uint8_t)((e << 3) | (q - 8));
}

/* ---- IEEE binary16 ---- */
float fp4_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t e = (h >> 10) & 0x1F, m = h & 0x3FF;
    uint32_t u;
    if (e == 0) {
        if (m == 0) {
            u = sign;
        } else { /* subnormal: normalize */
            int sh = 0;
            while (!(m & 0x400)) { m <<= 1; sh++; }
            m &= 0x3FF;
            u = sign | ((uint32_t)(127 - 15 + 1 - sh) << 23) | (m << 13);
        }
    } else if (e == 31) {
        u = sign | 0x7F800000u | (m << 13) | (m ? 0x400000u : 0);
    } else {
        u = sign | ((e - 15 + 127) << 23) | (m << 13);
    }
    return fp4_bits_f32(u);
}

uint16_t fp4_f32_to_f16(float f) {
    uint32_t u = fp4_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t ax = u & 0x7FFFFFFFu;
    if (ax > 0x7F800000u) return sign | 0x7E00 | (uint16_t)((ax >> 13) & 0x3FF); /* quiet NaN */
    if (ax >= 0x477FF000u) return sign | 0x7C00;   /* >= 65520 rounds to Inf */
    if (ax < 0x38800000u) {                         /* below 2^-14: f16 subnormal, units 2^-24 */
        int E = (int)(ax >> 23) - 127;
        if (E < -25) return sign;                   /* < 2^-25 = half of 2^-24 */
        uint32_t mant = (ax & 0x7FFFFFu) | 0x800000u;
        int shift = 23 - (E + 24);                  /* 14..24 */
        uint32_t q = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return sign | (uint16_t)q;
    }
    uint32_t h = ((((ax >> 23) - 127 + 15)) << 10) | ((ax >> 13) & 0x3FF);
    uint32_t rem = ax & 0x1FFF;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
    return sign | (uint16_t)h;
}

float fp4_round_f16(float f) { return fp4_f16_to_f32(fp4_f32_to_f16(f)); }

/* ---- bfloat16 ---- */
float fp4_bf16_to_f32(uint16_t h) { return fp4_bits_f32((uint32_t)h << 16); }

uint16_t fp4_f32_to_bf16(float f) {
    uint32_t u = fp4_f32_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7FFFu + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}
