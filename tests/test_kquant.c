/* test_kquant.c — the kquant control lane without the external oracle: hand-built blocks
 * decoded by the layout in the header, round-trip error bounds, determinism across thread
 * counts, and argument rejection. (Bit-identity with ggml is test_ggml_oracle.c.) */
#define FP4LANE_ORACLE_API /* the integer codec forms and single-row dots */
#include "check.h"
#include "fp4lane.h"
#include <math.h>
#include <stdlib.h>

#define QK FP4_QK_K

/* ---- independent packers, from the layout documented in fp4lane.h ---- */

static void pack_q4_K(fp4_block_q4_K *b, uint16_t d, uint16_t dmin, const uint8_t sc[8], const uint8_t mn[8],
                      const uint8_t q[QK]) {
    memset(b, 0, sizeof *b);
    b->d = d;
    b->dmin = dmin;
    for (int j = 0; j < 4; j++) {
        b->scales[j] = (uint8_t)((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        b->scales[j + 4] = (uint8_t)((mn[j] & 63) | ((mn[j + 4] >> 4) << 6));
        b->scales[j + 8] = (uint8_t)((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
    }
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) b->qs[32 * c + l] = (uint8_t)(q[64 * c + l] | (q[64 * c + 32 + l] << 4));
}

static void pack_q6_K(fp4_block_q6_K *b, uint16_t d, const int8_t sc[16], const uint8_t q[QK]) {
    memset(b, 0, sizeof *b);
    b->d = d;
    memcpy(b->scales, sc, 16);
    for (int i = 0; i < QK; i++) {
        int h = i / 128, r = i % 128, quarter = r / 32, l = r % 32;
        /* quarter 0: ql[l] low, qh bits 0-1; 1: ql[l+32] low, bits 2-3; 2: ql[l] high, bits 4-5;
         * 3: ql[l+32] high, bits 6-7 */
        uint8_t *ql = b->ql + 64 * h + l + ((quarter & 1) ? 32 : 0);
        *ql |= (uint8_t)((q[i] & 15) << ((quarter & 2) ? 4 : 0));
        b->qh[32 * h + l] |= (uint8_t)((q[i] >> 4) << (2 * quarter));
    }
}

static void test_q4_K_hand_block(void) {
    static const uint8_t sc[8] = {1, 17, 33, 63, 5, 40, 62, 16};
    static const uint8_t mn[8] = {0, 63, 2, 31, 48, 7, 33, 20};
    uint8_t q[QK];
    for (int i = 0; i < QK; i++) q[i] = (uint8_t)((i * 7 + i / 32) % 16);
    fp4_block_q4_K b;
    pack_q4_K(&b, 0x3C00 /* 1.0 */, 0x3800 /* 0.5 */, sc, mn, q);
    float y[QK];
    CHECK_OK(fp4_q4_K_dequantize(&b, QK, y));
    int bad = 0;
    for (int i = 0; i < QK; i++) {
        float want = (float)(1.0 * sc[i / 32] * q[i] - 0.5 * mn[i / 32]); /* exact in f32 */
        bad += f32_bits(y[i]) != f32_bits(want);
    }
    CHECK_EQ_INT(bad, 0);

    /* a Q8_K of all ones (d = 1): the dot is Σ values */
    fp4_block_q8_K a;
    a.d = 1.0f;
    for (int i = 0; i < QK; i++) a.qs[i] = 1;
    for (int g = 0; g < 16; g++) a.bsums[g] = 16;
    double want = 0;
    for (int i = 0; i < QK; i++) want += y[i];
    CHECK(fp4_q4_K_dot_q8_K(&b, &a, QK) == (float)want);
}

static void test_q6_K_hand_block(void) {
    static const int8_t sc[16] = {1, -1, 2, -128, 127, 3, -7, 0, 64, -64, 5, 9, 11, -13, 17, 100};
    uint8_t q[QK];
    for (int i = 0; i < QK; i++) q[i] = (uint8_t)((i * 13 + i / 64) % 64);
    fp4_block_q6_K b;
    pack_q6_K(&b, 0x3400 /* 0.25 */, sc, q);
    float y[QK];
    CHECK_OK(fp4_q6_K_dequantize(&b, QK, y));
    int bad = 0;
    for (int i = 0; i < QK; i++) {
        float want = (float)(0.25 * sc[i / 16] * ((int)q[i] - 32));
        bad += f32_bits(y[i]) != f32_bits(want);
    }
    CHECK_EQ_INT(bad, 0);

    fp4_block_q8_K a;
    a.d = 0.5f;
    for (int i = 0; i < QK; i++) a.qs[i] = (int8_t)((i % 5) - 2);
    for (int g = 0; g < 16; g++) a.bsums[g] = 0; /* Q6_K's dot does not read bsums */
    double want = 0;
    for (int i = 0; i < QK; i++) want += (double)y[i] * 0.5 * a.qs[i];
    CHECK(fp4_q6_K_dot_q8_K(&b, &a, QK) == (float)want); /* small integers × 2^-k: exact */
}

/* All zeros: zero blocks, zero floats, zero dots. */
static void test_zero_rows(void) {
    float x[QK] = {0}, y[QK];
    fp4_block_q4_K b4;
    fp4_block_q6_K b6, z6;
    CHECK_OK(fp4_q4_K_quantize(x, QK, &b4));
    CHECK_OK(fp4_q6_K_quantize(x, QK, &b6));
    memset(&z6, 0, sizeof z6);
    CHECK(memcmp(&b6, &z6, sizeof z6) == 0);
    CHECK(b4.d == 0 && b4.dmin == 0);
    CHECK_OK(fp4_q4_K_dequantize(&b4, QK, y));
    int nz = 0;
    for (int i = 0; i < QK; i++) nz += y[i] != 0.0f;
    CHECK_EQ_INT(nz, 0);
    CHECK_OK(fp4_q6_K_dequantize(&b6, QK, y));
    for (int i = 0; i < QK; i++) nz += y[i] != 0.0f;
    CHECK_EQ_INT(nz, 0);
}

static double rel_rmse(const float *a, const float *b, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = (double)a[i] - b[i];
        num += e * e;
        den += (double)b[i] * b[i];
    }
    return sqrt(num / den);
}

/* Round trip on gaussian data: Q4_K ≈ 0.07 relative RMSE (4.5 bits), Q6_K ≈ 0.02. Also each
 * value is within its sub-block step of the input, except for clamped extremes. */
static void test_round_trip(void) {
    const int64_t n = 64 * QK;
    float *x = malloc((size_t)n * sizeof(float)), *y = malloc((size_t)n * sizeof(float));
    fp4_block_q4_K *b4 = malloc((size_t)(n / QK) * sizeof *b4);
    fp4_block_q6_K *b6 = malloc((size_t)(n / QK) * sizeof *b6);
    test_rng r = {42};
    for (int64_t i = 0; i < n; i++) x[i] = 0.02f * rng_normal(&r);
    CHECK_OK(fp4_q4_K_quantize(x, n, b4));
    CHECK_OK(fp4_q4_K_dequantize(b4, n, y));
    double e4 = rel_rmse(y, x, n);
    CHECK_MSG(e4 > 0.03 && e4 < 0.10, "q4_K rel rmse %.4f", e4);
    CHECK_OK(fp4_q6_K_quantize(x, n, b6));
    CHECK_OK(fp4_q6_K_dequantize(b6, n, y));
    double e6 = rel_rmse(y, x, n);
    CHECK_MSG(e6 > 0.002 && e6 < 0.03, "q6_K rel rmse %.4f", e6);
    CHECK(e6 < e4 / 3);
    /* positive-only data: Q4_K's min term is 0 and its values are never negative */
    for (int64_t i = 0; i < n; i++) x[i] = 1.0f + rng_uniform(&r);
    CHECK_OK(fp4_q4_K_quantize(x, n, b4));
    CHECK_OK(fp4_q4_K_dequantize(b4, n, y));
    int neg = 0;
    for (int64_t i = 0; i < n; i++) neg += y[i] < 0.0f;
    CHECK_EQ_INT(neg, 0);
    CHECK_MSG(rel_rmse(y, x, n) < 0.04, "q4_K positive rel rmse %.4f", rel_rmse(y, x, n));
    free(x);
    free(y);
    free(b4);
    free(b6);
}

/* Quantizing twice gives the same bytes; matvec results do not depend on the thread count and
 * equal the per-row dots; the dot is close to the float reference. */
static void test_determinism_and_matvec(void) {
    const int64_t n_out = 29, n_in = 1024, n_cols = 3, nb = n_in / QK;
    test_rng r = {7};
    float *w = malloc((size_t)(n_out * n_in) * sizeof(float)),
          *x = malloc((size_t)(n_cols * n_in) * sizeof(float));
    float *wd = malloc((size_t)(n_out * n_in) * sizeof(float));
    fp4_block_q4_K *q4 = malloc((size_t)(n_out * nb) * sizeof *q4),
                   *q4b = malloc((size_t)(n_out * nb) * sizeof *q4b);
    fp4_block_q6_K *q6 = malloc((size_t)(n_out * nb) * sizeof *q6),
                   *q6b = malloc((size_t)(n_out * nb) * sizeof *q6b);
    float y1[29 * 3], y2[29 * 3], y5[29 * 3];
    fp4_block_q8_K xq[4];
    for (int64_t i = 0; i < n_out * n_in; i++) w[i] = rng_normal(&r) * (1.0f + (float)(i % 7));
    for (int64_t i = 0; i < n_cols * n_in; i++) x[i] = rng_normal(&r);
    CHECK_OK(fp4_q4_K_quantize(w, n_out * n_in, q4));
    CHECK_OK(fp4_q4_K_quantize(w, n_out * n_in, q4b));
    CHECK(memcmp(q4, q4b, (size_t)(n_out * nb) * sizeof *q4) == 0);
    CHECK_OK(fp4_q6_K_quantize(w, n_out * n_in, q6));
    CHECK_OK(fp4_q6_K_quantize(w, n_out * n_in, q6b));
    CHECK(memcmp(q6, q6b, (size_t)(n_out * nb) * sizeof *q6) == 0);

    for (int kind = 0; kind < 2; kind++) {
        const void *wq = kind ? (const void *)q6 : (const void *)q4;
        fp4_status (*mv)(const void *, int64_t, int64_t, const float *, int64_t, float *, int) =
            kind ? fp4_q6_K_matvec : fp4_q4_K_matvec;
        CHECK_OK(mv(wq, n_out, n_in, x, n_cols, y1, 1));
        CHECK_OK(mv(wq, n_out, n_in, x, n_cols, y2, 2));
        CHECK_OK(mv(wq, n_out, n_in, x, n_cols, y5, 5));
        CHECK(memcmp(y1, y2, sizeof y1) == 0);
        CHECK(memcmp(y1, y5, sizeof y1) == 0);
        if (kind)
            CHECK_OK(fp4_q6_K_dequantize(q6, n_out * n_in, wd));
        else
            CHECK_OK(fp4_q4_K_dequantize(q4, n_out * n_in, wd));
        int bad_dot = 0, bad_close = 0;
        for (int64_t c = 0; c < n_cols; c++) {
            CHECK_OK(fp4_q8_K_quantize(x + c * n_in, n_in, xq));
            for (int64_t o = 0; o < n_out; o++) {
                float d = kind ? fp4_q6_K_dot_q8_K(q6 + o * nb, xq, n_in)
                               : fp4_q4_K_dot_q8_K(q4 + o * nb, xq, n_in);
                bad_dot += f32_bits(d) != f32_bits(y1[c * n_out + o]);
                double ref = 0, mag = 0;
                for (int64_t k = 0; k < n_in; k++) {
                    ref += (double)wd[o * n_in + k] * x[c * n_in + k];
                    mag += fabs((double)wd[o * n_in + k] * x[c * n_in + k]);
                }
                /* Q8_K activations: |error| well under 1% of Σ|w·x| */
                bad_close += fabs(d - ref) > 0.01 * mag;
            }
        }
        CHECK_EQ_INT(bad_dot, 0);
        CHECK_EQ_INT(bad_close, 0);
    }
    free(w);
    free(x);
    free(wd);
    free(q4);
    free(q4b);
    free(q6);
    free(q6b);
}

static void test_bad_arguments(void) {
    float x[2 * QK], y[2 * QK];
    fp4_block_q4_K b4[2];
    fp4_block_q6_K b6[2];
    fp4_block_q8_K a[2];
    for (int i = 0; i < 2 * QK; i++) x[i] = (float)(i % 9) - 4.0f;
    CHECK_OK(fp4_q8_K_quantize(x, 2 * QK, a));

    CHECK_EQ_INT(fp4_q4_K_quantize(x, 100, b4), FP4_ERR_SHAPE);
    CHECK_EQ_INT(fp4_q4_K_quantize(x, -256, b4), FP4_ERR_SHAPE);
    CHECK_EQ_INT(fp4_q4_K_quantize(NULL, QK, b4), FP4_ERR_INVALID_ARG);
    CHECK_EQ_INT(fp4_q4_K_quantize(x, QK, NULL), FP4_ERR_INVALID_ARG);
    CHECK_EQ_INT(fp4_q6_K_quantize(x, QK + 16, b6), FP4_ERR_SHAPE);
    CHECK_EQ_INT(fp4_q6_K_quantize(NULL, QK, b6), FP4_ERR_INVALID_ARG);
    CHECK_EQ_INT(fp4_q6_K_quantize(x, QK, NULL), FP4_ERR_INVALID_ARG);
    CHECK_EQ_INT(fp4_q4_K_dequantize(b4, 255, y), FP4_ERR_SHAPE);
    CHECK_EQ_INT(fp4_q4_K_dequantize(NULL, QK, y), FP4_ERR_INVALID_ARG);
    CHECK_EQ_INT(fp4_q4_K_dequantize(b4, QK, NULL), FP4_ERR_INVALID_ARG);
    CHECK_EQ_INT(fp4_q6_K_dequantize(b6, 512 + 1, y), FP4_ERR_SHAPE);
    CHECK_EQ_INT(fp4_q6_K_dequantize(NULL, QK, y), FP4_ERR_INVALID_ARG);
    CHECK_EQ_INT(fp4_q6_K_dequantize(b6, QK, NULL), FP4_ERR_INVALID_ARG);
    /* n == 0 is an empty, valid row */
    CHECK_OK(fp4_q4_K_quantize(NULL, 0, NULL));
    CHECK_OK(fp4_q6_K_dequantize(NULL, 0, NULL));

    /* NaN / Inf inputs: rejected before anything is written */
    memset(b4, 0x77, sizeof b4);
    memset(b6, 0x77, sizeof b6);
    x[QK + 3] = NAN;
    CHECK_EQ_INT(fp4_q4_K_quantize(x, 2 * QK, b4), FP4_ERR_NONFINITE);
    CHECK_EQ_INT(fp4_q6_K_quantize(x, 2 * QK, b6), FP4_ERR_NONFINITE);
    x[QK + 3] = -INFINITY;
    CHECK_EQ_INT(fp4_q4_K_quantize(x, 2 * QK, b4), FP4_ERR_NONFINITE);
    CHECK_EQ_INT(fp4_q6_K_quantize(x, 2 * QK, b6), FP4_ERR_NONFINITE);
    CHECK(b4[0].d == 0x7777 && b6[0].d == 0x7777);
    x[QK + 3] = 1.0f;
    CHECK_OK(fp4_q8_K_quantize(x, 2 * QK, a));

    /* dots: NaN for a bad n or NULL, 0 for the empty row */
    CHECK_OK(fp4_q4_K_quantize(x, 2 * QK, b4));
    CHECK_OK(fp4_q6_K_quantize(x, 2 * QK, b6));
    CHECK(isnan(fp4_q4_K_dot_q8_K(b4, a, 128)));
    CHECK(isnan(fp4_q4_K_dot_q8_K(b4, a, -256)));
    CHECK(isnan(fp4_q4_K_dot_q8_K(NULL, a, QK)));
    CHECK(isnan(fp4_q6_K_dot_q8_K(b6, NULL, QK)));
    CHECK(isnan(fp4_q6_K_dot_q8_K(b6, a, 300)));
    CHECK(fp4_q4_K_dot_q8_K(b4, a, 0) == 0.0f);
    CHECK(fp4_q6_K_dot_q8_K(NULL, NULL, 0) == 0.0f);
    CHECK(!isnan(fp4_q4_K_dot_q8_K(b4, a, 2 * QK)));

    /* matvec */
    CHECK_EQ_INT(fp4_q4_K_matvec(b4, 1, 100, x, 1, y, 1), FP4_ERR_SHAPE);
    CHECK_EQ_INT(fp4_q4_K_matvec(b4, -1, QK, x, 1, y, 1), FP4_ERR_SHAPE);
    CHECK_EQ_INT(fp4_q6_K_matvec(b6, 1, QK, x, -1, y, 1), FP4_ERR_SHAPE);
    CHECK_EQ_INT(fp4_q4_K_matvec(NULL, 1, QK, x, 1, y, 1), FP4_ERR_INVALID_ARG);
    CHECK_EQ_INT(fp4_q6_K_matvec(b6, 1, QK, NULL, 1, y, 1), FP4_ERR_INVALID_ARG);
    CHECK_EQ_INT(fp4_q6_K_matvec(b6, 1, QK, x, 1, NULL, 1), FP4_ERR_INVALID_ARG);
    CHECK_EQ_INT(fp4_q4_K_matvec(b4, INT64_MAX / 2, QK, x, 4, y, 1), FP4_ERR_OVERFLOW);
    CHECK_OK(fp4_q4_K_matvec(b4, 0, QK, x, 1, y, 1));    /* nothing to do */
    CHECK_OK(fp4_q4_K_matvec(b4, 1, 2 * QK, x, 1, y, 0)); /* n_threads 0: one thread */
    CHECK_OK(fp4_q6_K_matvec(b6, 1, 2 * QK, x, 1, y + 1, -3));
    CHECK(f32_bits(y[0]) == f32_bits(fp4_q4_K_dot_q8_K(b4, a, 2 * QK)));
    CHECK(f32_bits(y[1]) == f32_bits(fp4_q6_K_dot_q8_K(b6, a, 2 * QK)));
}

int main(void) {
    test_q4_K_hand_block();
    test_q6_K_hand_block();
    test_zero_rows();
    test_round_trip();
    test_determinism_and_matvec();
    test_bad_arguments();
    return check_report();
}
