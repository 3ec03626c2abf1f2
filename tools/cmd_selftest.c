/* cmd_selftest.c — `fp4lane selftest`: the exhaustive codec proofs and the contract fixtures,
 * run against the linked library in about a second. Exit 0 when every proof holds. */
#define FP4LANE_ORACLE_API /* the integer codec forms and single-row dots */
#include "cli.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct proof {
    const char *name;
    long checked, failed;
} proof;

static uint32_t bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static void expect(proof *p, int ok) {
    p->checked++;
    p->failed += !ok;
}

static double e4m3_def(unsigned b) { /* straight from SPEC §1 */
    int e = (b >> 3) & 15, m = b & 7;
    double v = e == 0 ? ldexp(m, -9) : (1.0 + m / 8.0) * ldexp(1.0, e - 7);
    return (b & 0x80) ? -v : v;
}

static void p_e2m1(proof *p) {
    static const float t[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    for (unsigned c = 0; c < 16; c++) {
        float v = fp4_e2m1_decode((uint8_t)c), want = c & 8 ? -t[c & 7] : t[c & 7];
        expect(p, bits(v) == bits(want));
        expect(p, (float)fp4_e2m1_q1((uint8_t)c) * 0.5f == v);
        expect(p, fp4_e2m1_encode(v) == (c == 8 ? 0 : c)); /* -0.0 encodes to code 0 */
    }
}

static void p_e4m3(proof *p) {
    int finite = 0;
    for (unsigned b = 0; b < 256; b++) {
        float v = fp4_e4m3fn_decode((uint8_t)b);
        if ((b & 0x7F) == 0x7F) {
            expect(p, isnan(v) && fp4_e4m3fn_is_nan((uint8_t)b));
            continue;
        }
        finite++;
        expect(p, (double)v == e4m3_def(b));
        expect(p, ldexpf((float)fp4_e4m3fn_q9((uint8_t)b), -9) == v);
        expect(p, fp4_e4m3fn_encode(v) == b); /* round trip */
        if ((b & 0x7F) < 0x7E) {             /* the midpoint above rounds to even */
            float hi = fp4_e4m3fn_decode((uint8_t)(b + 1)), mid = (v + hi) * 0.5f;
            expect(p, fp4_e4m3fn_encode(mid) == ((b & 1) ? b + 1 : b));
        }
    }
    expect(p, finite == 254);
    expect(p, fp4_e4m3fn_encode(1e9f) == 0x7E && fp4_e4m3fn_encode(NAN) == 0x7F);
}

static void p_half(proof *p) {
    for (uint32_t h = 0; h < 65536; h++) {
        float f = fp4_f16_to_f32((uint16_t)h), g = fp4_bf16_to_f32((uint16_t)h);
        expect(p, isnan(f) ? isnan(fp4_f16_to_f32(fp4_f32_to_f16(f))) : fp4_f32_to_f16(f) == h);
        expect(p, isnan(g) ? isnan(fp4_bf16_to_f32(fp4_f32_to_bf16(g))) : fp4_f32_to_bf16(g) == h);
    }
    expect(p, fp4_f32_to_f16(1.0f + 0x1p-11f) == 0x3C00); /* tie to even */
    expect(p, fp4_f32_to_f16(65520.0f) == 0x7C00);
}

static void p_fixture(proof *p) {
    const uint8_t packed[8] = {0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE}, sc = 0x38;
    const float want[16] = {0.0f, 0.125f, 0.25f, 0.375f, 0.5f, 0.75f, 1.0f, 1.5f,
                            -0.0f, -0.125f, -0.25f, -0.375f, -0.5f, -0.75f, -1.0f, -1.5f};
    float got[16];
    expect(p, fp4_nvfp4_dequant_row(packed, &sc, 0.25f, 16, got) == FP4_OK);
    for (int i = 0; i < 16; i++) expect(p, bits(got[i]) == bits(want[i]));
}

static void p_quantizer(proof *p) {
    const float v[16] = {6.0f, 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f,
                         -1e-30f, -0.0f, -0.75f, 2.4f, 0.5f, -6.0f, 5.5f, 0.0f};
    const uint8_t want[8] = {0x07, 0x22, 0x44, 0x66, 0x08, 0x4A, 0xF1, 0x07};
    uint8_t packed[8], sc;
    expect(p, fp4_nvfp4_quantize(v, FP4_SRC_F32, 1, 16, 0.25f, packed, &sc) == FP4_OK);
    expect(p, sc == 0x48 && !memcmp(packed, want, 8));
    float s2;
    expect(p, fp4_scale2_from_amax(448.0f, FP4_SCALE2_GPU, &s2) == FP4_OK &&
                  bits(s2) == bits(448.0f * 0x1.861862p-12f));
}

static void p_contract(proof *p) {
    uint8_t pl[128], sc[16];
    float x[256], y = 0;
    memset(pl, 0x22, sizeof pl);
    memset(sc, 0x38, sizeof sc);
    for (int i = 0; i < 256; i++) x[i] = 1.0f;
    fp4_nvfp4_view w = {pl, sc, 1.0f, 0.0f, 1, 256, FP4_PACK_CANONICAL};
    expect(p, fp4_nvfp4_matvec_a16_exact(&w, x, 1, &y, 1) == FP4_OK && y == 256.0f);
    w.input_scale_inv = 6.0f;
    expect(p, fp4_nvfp4_matvec_w4a4(&w, x, 1, &y, 1) == FP4_OK && y == 256.0f);
}

int cmd_selftest(int argc, char **argv) {
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = 1;
        else return cli_usage("selftest");
    }
    proof proofs[] = {{"e2m1: 16 codes, q1, encode", 0, 0},
                      {"e4m3fn: 256 bytes, q9, round trip, midpoints", 0, 0},
                      {"f16/bf16: 65536 patterns each", 0, 0},
                      {"SPEC 2 fixture, bit for bit", 0, 0},
                      {"quantizer: ties to even, scale2 rule", 0, 0},
                      {"A16/W4A4 exact fixtures", 0, 0}};
    void (*fns[])(proof *) = {p_e2m1, p_e4m3, p_half, p_fixture, p_quantizer, p_contract};
    int n = (int)(sizeof proofs / sizeof proofs[0]), bad = 0;
    for (int i = 0; i < n; i++) {
        fns[i](&proofs[i]);
        bad += proofs[i].failed != 0;
    }
    if (json) {
        printf("{\"version\":\"%s\",\"ok\":%s,\"proofs\":[", fp4_version(), bad ? "false" : "true");
        for (int i = 0; i < n; i++)
            printf("%s{\"name\":\"%s\",\"checked\":%ld,\"failed\":%ld}", i ? "," : "", proofs[i].name,
                   proofs[i].checked, proofs[i].failed);
        printf("]}\n");
    } else {
        printf("fp4lane %s selftest\n", fp4_version());
        for (int i = 0; i < n; i++)
            printf("  %s  %-48s %8ld checks%s\n", proofs[i].failed ? "FAIL" : "ok  ", proofs[i].name,
                   proofs[i].checked, proofs[i].failed ? " (failures!)" : "");
        printf("%s\n", bad ? "selftest FAILED" : "selftest passed: the contract holds on this machine");
    }
    return bad ? 1 : 0;
}
