/* test_ggml_oracle.c — bit-for-bit agreement with llama.cpp's own ggml (npm prebuilt, pinned in
 * the Makefile, opened with dlopen by ggml_oracle.c):
 *   (a) NVFP4 dequantization: our rows repacked into ggml's 36-byte blocks, ggml's
 *       dequantize_row_nvfp4 times scale2 in f32, against fp4_nvfp4_dequant_row;
 *   (b) Q8_K activations: fp4_q8_K_quantize against quantize_row_q8_K_ref;
 *   (c) Q4_K / Q6_K: quantize bytes, dequantize floats, and dots against the portable
 *       ggml_vec_dot_q{4,6}_K_q8_K_generic, on every CPU path (cpu_path.c) this machine has.
 *       The contract is the generic kernel's f32 order, not ggml's SIMD kernels' (those use
 *       FMA and another summation order; dev/bench_cpu counts how often they differ).
 * A missing library is a failure, not a skip: CI installs it (`make oracle`). */
#define FP4LANE_ORACLE_API /* the integer codec forms and single-row dots */
#include "check.h"
#include "fp4lane.h"
#include "ggml_oracle.h"
#include "cpu/cpu_impl.h" /* fp4_cpu_force_path: the K-quant dots on every CPU path */
#include <math.h>
#include <stdlib.h>

static ggml_oracle G;

/* ---------------------------------------------------------------------------------------- */
/* Row generators: random families and adversarial shapes.                                  */

enum {
    ROW_GAUSS,
    ROW_GAUSS_SMALL,
    ROW_UNIFORM,
    ROW_UNIFORM_POS,
    ROW_HEAVY,
    ROW_SCALED_GROUPS,
    ROW_ZERO,
    ROW_NEG_ZERO,
    ROW_TINY,
    ROW_SUBNORMAL,
    ROW_HUGE,
    ROW_OUTLIER,
    ROW_OUTLIER_ZEROS,
    ROW_EQUAL,
    ROW_EQUAL_NEG,
    ROW_ALTERNATE,
    ROW_TIES,
    ROW_SMALL_INTS,
    ROW_SPARSE,
    ROW_MIXED_EXP,
    ROW_TINY_GROUPS,
    ROW_KINDS
};
static const char *const row_names[ROW_KINDS] = {
    "gauss", "gauss-small", "uniform", "uniform-pos", "heavy", "scaled-groups", "zero", "neg-zero",
    "tiny", "subnormal", "huge", "outlier", "outlier-zeros", "equal", "equal-neg", "alternate",
    "ties", "small-ints", "sparse", "mixed-exp", "tiny-groups"};

static float rng_sign(test_rng *r) { return (rng_u64(r) & 1) ? -1.0f : 1.0f; }

/* Student-t with 3 degrees of freedom: heavy tails. */
static float rng_heavy(test_rng *r) {
    float z = rng_normal(r);
    float a = rng_normal(r), b = rng_normal(r), c = rng_normal(r);
    float chi = (a * a + b * b + c * c) / 3.0f;
    return z / sqrtf(chi > 1e-6f ? chi : 1e-6f);
}

static void make_row(int kind, test_rng *r, float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float v = 0.0f;
        switch (kind) {
        case ROW_GAUSS: v = rng_normal(r); break;
        case ROW_GAUSS_SMALL: v = 0.02f * rng_normal(r); break;
        case ROW_UNIFORM: v = 2.0f * rng_uniform(r) - 1.0f; break;
        case ROW_UNIFORM_POS: v = rng_uniform(r) + 0.25f; break;
        case ROW_HEAVY: v = rng_heavy(r); break;
        case ROW_SCALED_GROUPS: v = ldexpf(rng_normal(r), (int)((i / 32) % 13) - 6); break;
        case ROW_ZERO: v = 0.0f; break;
        case ROW_NEG_ZERO: v = (i & 1) ? -0.0f : 0.0f; break;
        case ROW_TINY: v = rng_sign(r) * 1e-30f * (1.0f + rng_uniform(r)); break;
        case ROW_SUBNORMAL: v = rng_sign(r) * bits_f32((uint32_t)(rng_u64(r) & 0x7FFFFF)); break;
        case ROW_HUGE: v = rng_sign(r) * 1e30f * (0.5f + rng_uniform(r)); break;
        case ROW_OUTLIER: v = 0.01f * rng_normal(r); break;
        case ROW_OUTLIER_ZEROS: v = 0.0f; break;
        case ROW_EQUAL: v = 0.37f; break;
        case ROW_EQUAL_NEG: v = -2.5f; break;
        case ROW_ALTERNATE: v = (i & 1) ? -1.0f : 1.0f; break;
        case ROW_TIES: v = 0.25f * (float)((int64_t)(rng_u64(r) % 49) - 24); break; /* quarter steps */
        case ROW_SMALL_INTS: v = (float)((int64_t)(rng_u64(r) % 31) - 15); break;
        case ROW_SPARSE: v = (rng_u64(r) % 16 == 0) ? rng_normal(r) : 0.0f; break;
        case ROW_MIXED_EXP:
            v = rng_sign(r) * ldexpf(1.0f + rng_uniform(r), (int)(rng_u64(r) % 60) - 30);
            break;
        case ROW_TINY_GROUPS: /* below/above ggml's 1e-15 */
            v = rng_normal(r) * ((i / 16) % 3 == 1 ? 1e-17f : 1.0f);
            break;
        default: break;
        }
        x[i] = v;
    }
    if (kind == ROW_OUTLIER || kind == ROW_OUTLIER_ZEROS) {
        int64_t k = (int64_t)(rng_u64(r) % (uint64_t)n);
        x[k] = rng_sign(r) * (kind == ROW_OUTLIER ? 3.0f : 1000.0f);
    }
}

static int same_bits(const void *a, const void *b, size_t n) { return memcmp(a, b, n) == 0; }

static int64_t first_float_diff(const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (f32_bits(a[i]) != f32_bits(b[i])) return i;
    return -1;
}

/* ---------------------------------------------------------------------------------------- */
/* (a) NVFP4 dequantization                                                                  */

/* Our row (even element in the low nibble, one scale byte per 16) to ggml's blocks of 64:
 * d[s] = scale byte of sub-block s; qs[8s+j] = code(16s+j) | code(16s+j+8) << 4. */
static void repack_ggml_nvfp4(const uint8_t *payload, const uint8_t *scales, int64_t n, uint8_t *blocks) {
    for (int64_t b = 0; b < n / 64; b++) {
        uint8_t *blk = blocks + 36 * b;
        for (int s = 0; s < 4; s++) {
            int64_t g = 4 * b + s;
            blk[s] = scales[g];
            for (int j = 0; j < 8; j++) {
                int64_t e0 = 16 * g + j, e1 = e0 + 8;
                uint8_t c0 = (uint8_t)((payload[e0 / 2] >> (4 * (e0 & 1))) & 15);
                uint8_t c1 = (uint8_t)((payload[e1 / 2] >> (4 * (e1 & 1))) & 15);
                blk[4 + 8 * s + j] = (uint8_t)(c0 | (c1 << 4));
            }
        }
    }
}

static long nvfp4_neg_zero_seen;

/* ggml's kvalues table holds the integer 0 for code 8, so ggml gives +0.0 where the contract
 * (SPEC §1) gives -0.0: that one, known difference is checked exactly; all else is bit-equal. */
static void compare_nvfp4_row(const uint8_t *payload, const uint8_t *scales, float scale2, int64_t n,
                              const char *what) {
    uint8_t *blocks = calloc((size_t)(n / 64), 36);
    float *ours = malloc((size_t)n * sizeof(float)), *theirs = malloc((size_t)n * sizeof(float));
    repack_ggml_nvfp4(payload, scales, n, blocks);
    G.dequantize_row_nvfp4(blocks, theirs, n);
    for (int64_t i = 0; i < n; i++) theirs[i] = theirs[i] * scale2;
    CHECK_OK(fp4_nvfp4_dequant_row(payload, scales, scale2, n, ours));
    int64_t bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i++) {
        uint8_t code = (uint8_t)((payload[i / 2] >> (4 * (i & 1))) & 15);
        if (code == 8) {
            nvfp4_neg_zero_seen++;
            if (f32_bits(ours[i]) != 0x80000000u || f32_bits(theirs[i]) != 0) bad = i;
        } else if (f32_bits(ours[i]) != f32_bits(theirs[i])) {
            bad = i;
        }
    }
    CHECK_MSG(bad < 0, "nvfp4 %s: element %lld ours %a (0x%08x) ggml %a (0x%08x)", what, (long long)bad,
              bad < 0 ? 0.0 : (double)ours[bad], bad < 0 ? 0u : f32_bits(ours[bad]),
              bad < 0 ? 0.0 : (double)theirs[bad], bad < 0 ? 0u : f32_bits(theirs[bad]));
    free(blocks);
    free(ours);
    free(theirs);
}

static void test_nvfp4_dequant(void) {
    const int64_t n = 1024;
    float *x = malloc((size_t)n * sizeof(float));
    uint8_t *payload = malloc((size_t)n / 2), *scales = malloc((size_t)n / 16);
    test_rng r = {0x4E5646500001ull};
    long rows = 0;
    /* rows from our quantizer */
    for (int kind = 0; kind < ROW_KINDS; kind++) {
        for (int rep = 0; rep < 24; rep++) {
            make_row(kind, &r, x, n);
            float amax = 0.0f, scale2 = 0.0f;
            CHECK_OK(fp4_amax_update(x, FP4_SRC_F32, n, &amax));
            fp4_status st = fp4_scale2_from_amax(amax, rep & 1 ? FP4_SCALE2_CPU : FP4_SCALE2_GPU, &scale2);
            if (st == FP4_ERR_SCALE2) continue; /* a subnormal amax too small for any scale2 */
            CHECK_OK(st);
            CHECK_OK(fp4_nvfp4_quantize(x, FP4_SRC_F32, 1, n, scale2, payload, scales));
            compare_nvfp4_row(payload, scales, scale2, n, row_names[kind]);
            rows++;
        }
    }
    /* arbitrary bytes: every finite scale byte, random nibbles, assorted scale2 */
    const float s2[] = {1.0f, 0.25f, 3.0517578125e-05f, 1.1754944e-38f, 2.5e-38f, 7.3e-3f, 1e30f, 0.1f};
    for (int rep = 0; rep < 64; rep++) {
        for (int64_t i = 0; i < n / 2; i++) payload[i] = (uint8_t)rng_u64(&r);
        for (int64_t g = 0; g < n / 16; g++) {
            scales[g] = (uint8_t)((rep * (n / 16) + g) % 127); /* 0x00..0x7E: every finite unsigned byte */
        }
        float scale2 = s2[rep % 8] * (1.0f + 0.125f * (float)(rep / 8));
        compare_nvfp4_row(payload, scales, scale2, n, "random-bytes");
        rows++;
    }
    CHECK(nvfp4_neg_zero_seen > 0);
    printf("nvfp4 dequant: %ld rows bit-identical (%ld code-8 elements: ours -0.0, ggml +0.0)\n", rows,
           nvfp4_neg_zero_seen);
    free(x);
    free(payload);
    free(scales);
}

/* ---------------------------------------------------------------------------------------- */
/* (b) Q8_K                                                                                  */

static void compare_q8_K(const float *x, int64_t n, const char *what) {
    int64_t nb = n / FP4_QK_K;
    fp4_block_q8_K *ours = malloc((size_t)nb * sizeof *ours), *theirs = calloc((size_t)nb, sizeof *theirs);
    memset(ours, 0xA5, (size_t)nb * sizeof *ours);
    CHECK_OK(fp4_q8_K_quantize(x, n, ours));
    G.quantize_row_q8_K_ref(x, theirs, n);
    for (int64_t b = 0; b < nb; b++) {
        CHECK_MSG(f32_bits(ours[b].d) == f32_bits(theirs[b].d), "q8_K %s block %lld: d %a vs %a", what,
                  (long long)b, (double)ours[b].d, (double)theirs[b].d);
        CHECK_MSG(same_bits(ours[b].qs, theirs[b].qs, sizeof ours[b].qs), "q8_K %s block %lld: qs differ",
                  what, (long long)b);
        if (theirs[b].d != 0.0f) {
            CHECK_MSG(same_bits(ours[b].bsums, theirs[b].bsums, sizeof ours[b].bsums),
                      "q8_K %s block %lld: bsums differ", what, (long long)b);
        } else { /* ggml leaves bsums unwritten for an all-zero block; ours are defined zeros */
            int16_t zero[FP4_QK_K / 16] = {0};
            CHECK_MSG(same_bits(ours[b].bsums, zero, sizeof zero), "q8_K %s block %lld: zero block bsums",
                      what, (long long)b);
        }
    }
    free(ours);
    free(theirs);
}

static void test_q8_K(void) {
    const int64_t n = 1024;
    float *x = malloc((size_t)n * sizeof(float));
    test_rng r = {0x51384B0002ull};
    for (int kind = 0; kind < ROW_KINDS; kind++)
        for (int rep = 0; rep < 32; rep++) {
            make_row(kind, &r, x, n);
            compare_q8_K(x, n, row_names[kind]);
        }
    free(x);
}

/* ---------------------------------------------------------------------------------------- */
/* (c) Q4_K and Q6_K                                                                         */

static void rand_q8_K(test_rng *r, fp4_block_q8_K *b, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        b[i].d = ldexpf(rng_uniform(r) + 0.01f, (int)(rng_u64(r) % 40) - 30) * rng_sign(r);
        for (int j = 0; j < FP4_QK_K; j++) b[i].qs[j] = (int8_t)((int)(rng_u64(r) % 255) - 127);
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int j = 0; j < 16; j++) s += b[i].qs[16 * g + j];
            b[i].bsums[g] = (int16_t)s;
        }
    }
}

/* a random finite f16 (not NaN/Inf): sign, exponent 0..30, mantissa */
static uint16_t rand_f16(test_rng *r) {
    uint16_t h = (uint16_t)rng_u64(r);
    if (((h >> 10) & 31) == 31) h = (uint16_t)(h & ~(1u << 14));
    return h;
}

static void check_floats(const float *ours, const float *theirs, int64_t n, const char *what,
                         const char *kind) {
    int64_t i = first_float_diff(ours, theirs, n);
    CHECK_MSG(i < 0, "%s %s: element %lld ours %a ggml %a", what, kind, (long long)i,
              i < 0 ? 0.0 : (double)ours[i], i < 0 ? 0.0 : (double)theirs[i]);
}

static void check_dot(float ours, float theirs, const char *what, const char *kind) {
    CHECK_MSG(f32_bits(ours) == f32_bits(theirs), "%s %s: ours %a (0x%08x) ggml %a (0x%08x)", what, kind,
              (double)ours, f32_bits(ours), (double)theirs, f32_bits(theirs));
}

static long kq_rows, kq_dots;

static void test_q4_K_row(const float *x, const float *act, int64_t n, const char *kind) {
    int64_t nb = n / FP4_QK_K;
    fp4_block_q4_K *ours = malloc((size_t)nb * sizeof *ours), *theirs = malloc((size_t)nb * sizeof *theirs);
    fp4_block_q8_K *xq = malloc((size_t)nb * sizeof *xq);
    float *yo = malloc((size_t)n * sizeof(float)), *yt = malloc((size_t)n * sizeof(float));
    memset(ours, 0x5A, (size_t)nb * sizeof *ours);
    memset(theirs, 0xC3, (size_t)nb * sizeof *theirs);
    CHECK_OK(fp4_q4_K_quantize(x, n, ours));
    G.quantize_row_q4_K_ref(x, theirs, n);
    for (int64_t b = 0; b < nb; b++)
        CHECK_MSG(same_bits(&ours[b], &theirs[b], sizeof ours[b]),
                  "q4_K quantize %s block %lld: bytes differ (d %04x/%04x dmin %04x/%04x)", kind,
                  (long long)b, ours[b].d, theirs[b].d, ours[b].dmin, theirs[b].dmin);
    CHECK_OK(fp4_q4_K_dequantize(theirs, n, yo));
    G.dequantize_row_q4_K(theirs, yt, n);
    check_floats(yo, yt, n, "q4_K dequantize", kind);
    G.quantize_row_q8_K_ref(act, xq, n);
    float s = 0.0f;
    G.vec_dot_q4_K_q8_K_generic((int)n, &s, 0, theirs, 0, xq, 0, 1);
    check_dot(fp4_q4_K_dot_q8_K(theirs, xq, n), s, "q4_K dot", kind);
    kq_rows++;
    kq_dots++;
    free(ours);
    free(theirs);
    free(xq);
    free(yo);
    free(yt);
}

static void test_q6_K_row(const float *x, const float *act, int64_t n, const char *kind) {
    int64_t nb = n / FP4_QK_K;
    fp4_block_q6_K *ours = malloc((size_t)nb * sizeof *ours), *theirs = malloc((size_t)nb * sizeof *theirs);
    fp4_block_q8_K *xq = malloc((size_t)nb * sizeof *xq);
    float *yo = malloc((size_t)n * sizeof(float)), *yt = malloc((size_t)n * sizeof(float));
    memset(ours, 0x5A, (size_t)nb * sizeof *ours);
    memset(theirs, 0xC3, (size_t)nb * sizeof *theirs);
    CHECK_OK(fp4_q6_K_quantize(x, n, ours));
    G.quantize_row_q6_K_ref(x, theirs, n);
    for (int64_t b = 0; b < nb; b++)
        CHECK_MSG(same_bits(&ours[b], &theirs[b], sizeof ours[b]),
                  "q6_K quantize %s block %lld: bytes differ (d %04x/%04x)", kind, (long long)b, ours[b].d,
                  theirs[b].d);
    CHECK_OK(fp4_q6_K_dequantize(theirs, n, yo));
    G.dequantize_row_q6_K(theirs, yt, n);
    check_floats(yo, yt, n, "q6_K dequantize", kind);
    G.quantize_row_q8_K_ref(act, xq, n);
    float s = 0.0f;
    G.vec_dot_q6_K_q8_K_generic((int)n, &s, 0, theirs, 0, xq, 0, 1);
    check_dot(fp4_q6_K_dot_q8_K(theirs, xq, n), s, "q6_K dot", kind);
    kq_rows++;
    kq_dots++;
    free(ours);
    free(theirs);
    free(xq);
    free(yo);
    free(yt);
}

static void test_kquants_rows(void) {
    const int64_t sizes[] = {256, 1024, 4096};
    test_rng r = {0x4B5155414E54ull};
    for (int si = 0; si < 3; si++) {
        int64_t n = sizes[si];
        float *x = malloc((size_t)n * sizeof(float)), *act = malloc((size_t)n * sizeof(float));
        int reps = si == 2 ? 3 : 24;
        for (int kind = 0; kind < ROW_KINDS; kind++)
            for (int rep = 0; rep < reps; rep++) {
                make_row(kind, &r, x, n);
                /* activations: mostly gaussian; sometimes the same adversarial family */
                make_row(rep % 3 == 0 ? kind : ROW_GAUSS, &r, act, n);
                test_q4_K_row(x, act, n, row_names[kind]);
                test_q6_K_row(x, act, n, row_names[kind]);
            }
        free(x);
        free(act);
    }
}

/* Volume: many single blocks, quantize bytes only (rare rounding paths of the scale searches). */
static void test_kquants_volume(void) {
    static const int kinds[] = {ROW_GAUSS, ROW_UNIFORM, ROW_UNIFORM_POS, ROW_HEAVY, ROW_TIES, ROW_SMALL_INTS,
                                ROW_SPARSE, ROW_OUTLIER, ROW_SCALED_GROUPS, ROW_TINY_GROUPS};
    test_rng r = {0x564F4C554D45ull};
    float x[FP4_QK_K];
    long bad4 = 0, bad6 = 0, n = 0;
    for (int rep = 0; rep < 6000; rep++) {
        int kind = kinds[rep % 10];
        make_row(kind, &r, x, FP4_QK_K);
        fp4_block_q4_K o4, t4;
        fp4_block_q6_K o6, t6;
        CHECK_OK(fp4_q4_K_quantize(x, FP4_QK_K, &o4));
        CHECK_OK(fp4_q6_K_quantize(x, FP4_QK_K, &o6));
        G.quantize_row_q4_K_ref(x, &t4, FP4_QK_K);
        G.quantize_row_q6_K_ref(x, &t6, FP4_QK_K);
        bad4 += !same_bits(&o4, &t4, sizeof o4);
        bad6 += !same_bits(&o6, &t6, sizeof o6);
        n++;
    }
    CHECK_EQ_INT(bad4, 0);
    CHECK_EQ_INT(bad6, 0);
    kq_rows += n;
}

/* Random block bytes (finite f16 super-scales) against random Q8_K blocks: the dequantizers and
 * dots on every bit pattern the quantizers might never produce. */
static void test_kquants_random_bytes(void) {
    const int64_t nb = 4, n = nb * FP4_QK_K;
    test_rng r = {0x52414E44ull};
    fp4_block_q4_K b4[4];
    fp4_block_q6_K b6[4];
    fp4_block_q8_K xq[4];
    float yo[4 * FP4_QK_K], yt[4 * FP4_QK_K];
    for (int rep = 0; rep < 400; rep++) {
        uint8_t *p4 = (uint8_t *)b4, *p6 = (uint8_t *)b6;
        for (size_t i = 0; i < sizeof b4; i++) p4[i] = (uint8_t)rng_u64(&r);
        for (size_t i = 0; i < sizeof b6; i++) p6[i] = (uint8_t)rng_u64(&r);
        for (int b = 0; b < nb; b++) {
            b4[b].d = rand_f16(&r);
            b4[b].dmin = rand_f16(&r);
            b6[b].d = rand_f16(&r);
        }
        rand_q8_K(&r, xq, nb);
        if (rep % 7 == 0) xq[rep % 4].bsums[rep % 16] = (int16_t)rng_u64(&r); /* inconsistent bsums */
        CHECK_OK(fp4_q4_K_dequantize(b4, n, yo));
        G.dequantize_row_q4_K(b4, yt, n);
        check_floats(yo, yt, n, "q4_K dequantize", "random-bytes");
        CHECK_OK(fp4_q6_K_dequantize(b6, n, yo));
        G.dequantize_row_q6_K(b6, yt, n);
        check_floats(yo, yt, n, "q6_K dequantize", "random-bytes");
        float s4 = 0.0f, s6 = 0.0f;
        G.vec_dot_q4_K_q8_K_generic((int)n, &s4, 0, b4, 0, xq, 0, 1);
        G.vec_dot_q6_K_q8_K_generic((int)n, &s6, 0, b6, 0, xq, 0, 1);
        check_dot(fp4_q4_K_dot_q8_K(b4, xq, n), s4, "q4_K dot", "random-bytes");
        check_dot(fp4_q6_K_dot_q8_K(b6, xq, n), s6, "q6_K dot", "random-bytes");
        kq_dots += 2;
    }
}

/* The matvec equals the dot of each row against ggml's own Q8_K of the column. */
static void test_matvec_vs_ggml(void) {
    const int64_t n_out = 37, n_in = 768, n_cols = 3;
    test_rng r = {0x4D56ull};
    float *w = malloc((size_t)(n_out * n_in) * sizeof(float)),
          *x = malloc((size_t)(n_cols * n_in) * sizeof(float));
    float *y4 = malloc((size_t)(n_out * n_cols) * sizeof(float)),
          *y6 = malloc((size_t)(n_out * n_cols) * sizeof(float));
    fp4_block_q4_K *q4 = malloc((size_t)(n_out * n_in / 256) * sizeof *q4);
    fp4_block_q6_K *q6 = malloc((size_t)(n_out * n_in / 256) * sizeof *q6);
    fp4_block_q8_K xq[3];
    make_row(ROW_HEAVY, &r, w, n_out * n_in);
    make_row(ROW_GAUSS, &r, x, n_cols * n_in);
    G.quantize_row_q4_K_ref(w, q4, n_out * n_in);
    G.quantize_row_q6_K_ref(w, q6, n_out * n_in);
    CHECK_OK(fp4_q4_K_matvec(q4, n_out, n_in, x, n_cols, y4, 2));
    CHECK_OK(fp4_q6_K_matvec(q6, n_out, n_in, x, n_cols, y6, 3));
    int bad4 = 0, bad6 = 0;
    for (int64_t c = 0; c < n_cols; c++) {
        G.quantize_row_q8_K_ref(x + c * n_in, xq, n_in);
        for (int64_t o = 0; o < n_out; o++) {
            float s4 = 0.0f, s6 = 0.0f;
            G.vec_dot_q4_K_q8_K_generic((int)n_in, &s4, 0, q4 + o * (n_in / 256), 0, xq, 0, 1);
            G.vec_dot_q6_K_q8_K_generic((int)n_in, &s6, 0, q6 + o * (n_in / 256), 0, xq, 0, 1);
            bad4 += f32_bits(s4) != f32_bits(y4[c * n_out + o]);
            bad6 += f32_bits(s6) != f32_bits(y6[c * n_out + o]);
        }
    }
    CHECK_EQ_INT(bad4, 0);
    CHECK_EQ_INT(bad6, 0);
    free(w);
    free(x);
    free(y4);
    free(y6);
    free(q4);
    free(q6);
}

int main(void) {
    char err[1024];
    if (ggml_oracle_open(&G, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        CHECK_MSG(0, "the ggml oracle is required (make oracle)");
        return check_report();
    }
    printf("ggml oracle: version %s, commit %s (%s/%s)\n", G.ggml_version(), G.ggml_commit(), G.dir,
           G.cpu_name);
    /* no flush-to-zero / denormals-are-zero after loading the libraries */
    volatile float tiny = 1e-30f, small = 1e-10f;
    CHECK(tiny * small != 0.0f);

    test_nvfp4_dequant();
    test_q8_K();
    /* the dots are checked on every CPU path this machine has (portable, AVX-512 for Q4_K) */
    for (int path = fp4_cpu_path(); path >= 0; path--) {
        fp4_cpu_force_path(path);
        test_kquants_rows();
        test_kquants_random_bytes();
        test_matvec_vs_ggml();
    }
    fp4_cpu_force_path(-1);
    test_kquants_volume();
    printf("k-quants: %ld rows quantized/dequantized, %ld dots compared\n", kq_rows, kq_dots);
    return check_report();
}
