/* test_cpu_paths.c — the CPU code paths (cpu_path.c): the choice rule, and every path this CPU has
 * giving the same bits as the portable one for the exact A16 and W4A4 matvecs, the Q4_K and Q6_K dots,
 * the dense (BF16, F32) rows of both modes, the native NVFP4 route and the pinned attention, on random
 * and adversarial inputs,
 * for thread counts 1, 2 and 3. The portable path is itself checked against an element-by-element
 * reimplementation here (A16, W4A4) and against ggml's generic dots (Q4_K, Q6_K: test_ggml_oracle,
 * also on every path). */
#define FP4LANE_ORACLE_API /* the integer codec forms and single-row dots */
#include "check.h"
#include "fp4lane.h"
#include "cpu/cpu_impl.h"
#include "cpu/native.h"
#include "format/pinned.h"
#include <math.h>
#include <stddef.h>
#include <stdlib.h>

/* ---- the choice rule ---- */
static void test_pick(void) {
    CHECK_EQ_INT(fp4_cpu_pick(FP4_CPU_AVX512, NULL), FP4_CPU_AVX512);
    CHECK_EQ_INT(fp4_cpu_pick(FP4_CPU_AVX512, "portable"), FP4_CPU_PORTABLE);
    CHECK_EQ_INT(fp4_cpu_pick(FP4_CPU_AVX512, "avx2"), FP4_CPU_AVX2);
    CHECK_EQ_INT(fp4_cpu_pick(FP4_CPU_AVX512, "avx512"), FP4_CPU_AVX512);
    /* a CPU without AVX-512: asking for it falls back to the best path below */
    CHECK_EQ_INT(fp4_cpu_pick(FP4_CPU_AVX2, "avx512"), FP4_CPU_AVX2);
    CHECK_EQ_INT(fp4_cpu_pick(FP4_CPU_AVX2, NULL), FP4_CPU_AVX2);
    CHECK_EQ_INT(fp4_cpu_pick(FP4_CPU_PORTABLE, "avx512"), FP4_CPU_PORTABLE);
    CHECK_EQ_INT(fp4_cpu_pick(FP4_CPU_PORTABLE, "avx2"), FP4_CPU_PORTABLE);
    /* unknown values are ignored, the rule's inputs are clamped */
    CHECK_EQ_INT(fp4_cpu_pick(FP4_CPU_AVX512, "AVX512"), FP4_CPU_AVX512);
    CHECK_EQ_INT(fp4_cpu_pick(FP4_CPU_AVX2, ""), FP4_CPU_AVX2);
    CHECK_EQ_INT(fp4_cpu_pick(-3, NULL), FP4_CPU_PORTABLE);
    CHECK_EQ_INT(fp4_cpu_pick(99, NULL), FP4_CPU_N_PATHS - 1);
    CHECK(!strcmp(fp4_cpu_path_name(FP4_CPU_AVX512), "avx512") && !strcmp(fp4_cpu_path_name(7), "unknown"));

    /* the process's choice: what the CPU has, under $FP4_CPU_PATH */
    const int best = fp4_cpu_best_path(), path = fp4_cpu_path();
    CHECK_EQ_INT(path, fp4_cpu_pick(best, getenv("FP4_CPU_PATH")));
    CHECK(path <= best);
    fp4_cpu_force_path(FP4_CPU_PORTABLE);
    CHECK_EQ_INT(fp4_cpu_path(), FP4_CPU_PORTABLE);
    fp4_cpu_force_path(FP4_CPU_N_PATHS + 5); /* forcing never goes above the choice */
    CHECK_EQ_INT(fp4_cpu_path(), path);
    fp4_cpu_force_path(-1);
    CHECK_EQ_INT(fp4_cpu_path(), path);
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vbmi"))
        CHECK_EQ_INT(best, FP4_CPU_AVX512);
    else if (__builtin_cpu_supports("avx2"))
        CHECK_EQ_INT(best, FP4_CPU_AVX2);
#endif
    printf("CPU paths: best %s, in use %s; checking %d path(s)\n", fp4_cpu_path_name(best),
           fp4_cpu_path_name(path), path + 1);
}

/* ---- exact A16: element by element from the integer encodings (SPEC §4) ---- */
static float a16_slow(const uint8_t *p, const uint8_t *s, float s2, const fp4_block_q8_K *xq, int64_t n_in) {
    float acc = 0.0f;
    for (int64_t sb = 0; sb < n_in / 256; sb++) {
        if (xq[sb].d == 0.0f) continue;
        int64_t total = 0;
        for (int g = 0; g < 16; g++) {
            int64_t dot = 0;
            for (int j = 0; j < 16; j++) {
                int64_t k = sb * 256 + g * 16 + j;
                dot +=
                    (int64_t)fp4_e2m1_q1((uint8_t)((p[k / 2] >> (4 * (k & 1))) & 15)) * xq[sb].qs[g * 16 + j];
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

enum { A16_RANDOM, A16_MAX_POS, A16_MAX_NEG, A16_MAX_MIXED, A16_ALL_SCALES, A16_ZERO_SBS, A16_KINDS };
static const char *const a16_names[A16_KINDS] = {
    "random", "max+", "max-", "max-mixed", "all-scale-bytes", "zero-super-blocks"};

/* weights and activations of one case; x gets n_cols columns */
static void a16_case(int kind, test_rng *r, uint8_t *p, uint8_t *s, float *x, int64_t n_out, int64_t n_in,
                     int64_t n_cols) {
    const int64_t np = n_out * n_in / 2, ns = n_out * n_in / 16, nx = n_cols * n_in;
    for (int64_t i = 0; i < np; i++)
        p[i] = (uint8_t)rng_u64(r);
    for (int64_t i = 0; i < ns; i++)
        s[i] = (uint8_t)rng_u64(r);
    for (int64_t i = 0; i < nx; i++)
        x[i] = rng_normal(r);
    switch (kind) {
    case A16_MAX_POS: /* every code +6 (0x7), every scale 448 (0x7E), activations all at +127 */
    case A16_MAX_NEG: /* every code -6 (0xF), every scale -448 (0xFE): the largest |group dot · q9| */
        memset(p, kind == A16_MAX_POS ? 0x77 : 0xFF, (size_t)np);
        memset(s, kind == A16_MAX_POS ? 0x7E : 0xFE, (size_t)ns);
        for (int64_t i = 0; i < nx; i++)
            x[i] = 3.0f;
        break;
    case A16_MAX_MIXED: /* ±6 codes against ±127 activations of the other sign pattern */
        for (int64_t i = 0; i < np; i++)
            p[i] = (i / 3) % 2 ? 0x7F : 0xF7;
        for (int64_t i = 0; i < ns; i++)
            s[i] = i % 2 ? 0x7E : 0xFE;
        for (int64_t i = 0; i < nx; i++)
            x[i] = i % 2 ? -2.5f : 2.5f;
        break;
    case A16_ALL_SCALES: /* every scale byte, NaN bytes and negative ones included */
        for (int64_t i = 0; i < ns; i++)
            s[i] = (uint8_t)(i * 7 + i / 256);
        break;
    case A16_ZERO_SBS: /* whole zero super-blocks in the activations (skipped: +0 contribution) */
        for (int64_t i = 0; i < nx; i++)
            if ((i / 256) % 3 != 1) x[i] = 0.0f;
        break;
    default:
        break;
    }
}

static void test_a16_paths(void) {
    static const int64_t shapes[][3] = {{1, 256, 1},  {2, 256, 2},   {3, 512, 1},  {7, 768, 3},
                                        {5, 4352, 2}, {37, 1024, 5}, {4, 16384, 1}};
    const int top = fp4_cpu_path();
    test_rng r = {0xA16A16ull};
    long compared = 0, bad_slow = 0, bad_path = 0, bad_threads = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int64_t n_out = shapes[si][0], n_in = shapes[si][1], n_cols = shapes[si][2], nsb = n_in / 256;
        uint8_t *p = malloc((size_t)(n_out * n_in / 2)), *s = malloc((size_t)(n_out * n_in / 16));
        float *x = malloc((size_t)(n_cols * n_in) * sizeof(float));
        float *ref = malloc((size_t)(n_cols * n_out) * sizeof(float)),
              *y = malloc((size_t)(n_cols * n_out) * sizeof(float));
        fp4_block_q8_K *xq = malloc((size_t)nsb * sizeof *xq);
        for (int kind = 0; kind < A16_KINDS; kind++) {
            const float s2s[3] = {1.0f / 2688.0f, 1.0f, 0x1p-30f};
            a16_case(kind, &r, p, s, x, n_out, n_in, n_cols);
            fp4_nvfp4_view w = {p, s, s2s[(si + (size_t)kind) % 3], 0.0f, n_out, n_in, FP4_PACK_CANONICAL};
            fp4_cpu_force_path(FP4_CPU_PORTABLE);
            CHECK_OK(fp4_nvfp4_matvec_a16_exact(&w, x, n_cols, ref, 1));
            for (int64_t c = 0; c < n_cols; c++) {
                CHECK_OK(fp4_q8_K_quantize(x + c * n_in, n_in, xq));
                for (int64_t o = 0; o < n_out; o++)
                    bad_slow += f32_bits(a16_slow(p + o * n_in / 2, s + o * n_in / 16, w.scale2, xq, n_in)) !=
                                f32_bits(ref[c * n_out + o]);
            }
            for (int path = 0; path <= top; path++) {
                fp4_cpu_force_path(path);
                for (int nt = 1; nt <= 3; nt++) {
                    memset(y, 0x7F, (size_t)(n_cols * n_out) * sizeof(float));
                    CHECK_OK(fp4_nvfp4_matvec_a16_exact(&w, x, n_cols, y, nt));
                    int64_t bad = 0;
                    for (int64_t i = 0; i < n_cols * n_out; i++)
                        bad += f32_bits(y[i]) != f32_bits(ref[i]);
                    CHECK_MSG(bad == 0, "a16 %s %lldx%lld path %s threads %d: %lld values differ",
                              a16_names[kind], (long long)n_out, (long long)n_in, fp4_cpu_path_name(path), nt,
                              (long long)bad);
                    *(nt == 1 ? &bad_path : &bad_threads) += bad;
                    compared += n_cols * n_out;
                }
            }
        }
        fp4_cpu_force_path(-1);
        free(p), free(s), free(x), free(ref), free(y), free(xq);
    }
    CHECK_EQ_INT(bad_slow, 0);
    CHECK_EQ_INT(bad_path, 0);
    CHECK_EQ_INT(bad_threads, 0);
    printf("exact A16: %ld values compared across paths and thread counts\n", compared);
}

/* ---- W4A4 (SPEC §5): element by element, then every path and thread count ---- */
static float w4a4_slow(const uint8_t *p, const uint8_t *s, float s2, const uint8_t *ac, const uint8_t *as,
                       float in_inv, int64_t n_in) {
    int64_t total = 0;
    for (int64_t g = 0; g < n_in / 16; g++) {
        int64_t dot = 0;
        for (int j = 0; j < 16; j++) {
            const int64_t k = g * 16 + j;
            const int sh = 4 * (int)(k & 1);
            dot += (int64_t)fp4_e2m1_q1((uint8_t)((p[k / 2] >> sh) & 15)) *
                   fp4_e2m1_q1((uint8_t)((ac[k / 2] >> sh) & 15));
        }
        total += dot * fp4_e4m3fn_q9(s[g]) * fp4_e4m3fn_q9(as[g]);
    }
    const float in_s = 1.0f / in_inv;
    float y = (float)total * 0x1p-20f;
    y = y * s2;
    y = y * in_s;
    return fp4_round_f16(y);
}

static void test_w4a4_paths(void) {
    /* n_in: multiples of 16 around the 128-value steps of the AVX-512 loop (masked tails) */
    static const int64_t shapes[][3] = {{1, 16, 1},  {2, 32, 2},  {3, 112, 1},  {2, 128, 3},
                                        {5, 144, 2}, {4, 256, 1}, {7, 1040, 2}, {3, 4096, 1}};
    const int top = fp4_cpu_path();
    test_rng r = {0x5734A4ull};
    long compared = 0, bad_slow = 0, bad = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int64_t n_out = shapes[si][0], n_in = shapes[si][1], n_cols = shapes[si][2];
        uint8_t *p = malloc((size_t)(n_out * n_in / 2)), *s = malloc((size_t)(n_out * n_in / 16));
        uint8_t *ac = malloc((size_t)(n_in / 2)), *as = malloc((size_t)(n_in / 16));
        float *x = malloc((size_t)(n_cols * n_in) * sizeof(float));
        float *ref = malloc((size_t)(n_cols * n_out) * sizeof(float)),
              *y = malloc((size_t)(n_cols * n_out) * sizeof(float));
        for (int kind = 0; kind < A16_KINDS; kind++) {
            a16_case(kind, &r, p, s, x, n_out, n_in, n_cols);
            const float in_invs[3] = {6.0f / 3.0f, 1.0f / 448.0f, 37.5f};
            fp4_nvfp4_view w = {.payload = p,
                                .scales = s,
                                .scale2 = kind % 2 ? 1.0f / 2688.0f : 0x1p-12f,
                                .input_scale_inv = in_invs[(si + (size_t)kind) % 3],
                                .n_out = n_out,
                                .n_in = n_in};
            fp4_cpu_force_path(FP4_CPU_PORTABLE);
            CHECK_OK(fp4_nvfp4_matvec_w4a4(&w, x, n_cols, ref, 1));
            for (int64_t c = 0; c < n_cols; c++) {
                CHECK_OK(fp4_nvfp4_quantize_act(x + c * n_in, n_in, w.input_scale_inv, ac, as));
                for (int64_t o = 0; o < n_out; o++)
                    bad_slow += f32_bits(w4a4_slow(p + o * n_in / 2, s + o * n_in / 16, w.scale2, ac, as,
                                                   w.input_scale_inv, n_in)) != f32_bits(ref[c * n_out + o]);
            }
            for (int path = 0; path <= top; path++) {
                fp4_cpu_force_path(path);
                for (int nt = 1; nt <= 3; nt++) {
                    memset(y, 0x7F, (size_t)(n_cols * n_out) * sizeof(float));
                    CHECK_OK(fp4_nvfp4_matvec_w4a4(&w, x, n_cols, y, nt));
                    int64_t nbad = 0;
                    for (int64_t i = 0; i < n_cols * n_out; i++)
                        nbad += f32_bits(y[i]) != f32_bits(ref[i]);
                    CHECK_MSG(nbad == 0, "w4a4 %s %lldx%lld path %s threads %d: %lld values differ",
                              a16_names[kind], (long long)n_out, (long long)n_in, fp4_cpu_path_name(path), nt,
                              (long long)nbad);
                    bad += nbad;
                    compared += n_cols * n_out;
                }
            }
        }
        fp4_cpu_force_path(-1);
        free(p), free(s), free(ac), free(as), free(x), free(ref), free(y);
    }
    CHECK_EQ_INT(bad_slow, 0);
    CHECK_EQ_INT(bad, 0);
    printf("W4A4: %ld values compared across paths and thread counts\n", compared);
}

/* ---- Q4_K: every path against the portable dot ---- */
static void rand_q8_K(test_rng *r, fp4_block_q8_K *b, int64_t nb, int extreme) {
    for (int64_t i = 0; i < nb; i++) {
        b[i].d =
            ldexpf(rng_uniform(r) + 0.01f, (int)(rng_u64(r) % 40) - 30) * (rng_u64(r) & 1 ? -1.0f : 1.0f);
        for (int j = 0; j < FP4_QK_K; j++)
            b[i].qs[j] =
                extreme ? (int8_t)(extreme > 0 ? 127 : -128) : (int8_t)((int)(rng_u64(r) % 256) - 128);
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int j = 0; j < 16; j++)
                s += b[i].qs[16 * g + j];
            b[i].bsums[g] = (int16_t)s;
        }
    }
}

/* the K-quant matvecs (activations rearranged once per column on the vector paths): every path and
 * thread count equals the portable single-thread result. q6: Q6_K, else Q4_K. */
static void kq_matvec_paths(test_rng *r, int q6) {
    enum { NO = 23, NI = 1280, NC = 3 };
    const int top = fp4_cpu_path();
    const size_t bs = q6 ? sizeof(fp4_block_q6_K) : sizeof(fp4_block_q4_K);
    void *w = malloc((size_t)(NO * NI / FP4_QK_K) * bs);
    float *wf = malloc(sizeof(float) * NO * NI), *xf = malloc(sizeof(float) * NC * NI);
    float ref[NO * NC], y[NO * NC];
    for (int64_t i = 0; i < NO * NI; i++)
        wf[i] = rng_normal(r) * (1.0f + (float)(i % 5));
    for (int64_t i = 0; i < NC * NI; i++)
        xf[i] = (i / 256) % 4 == 2 ? 0.0f : rng_normal(r);
    CHECK_OK(q6 ? fp4_q6_K_quantize(wf, NO * NI, w) : fp4_q4_K_quantize(wf, NO * NI, w));
    for (int path = -1; path <= top; path++) { /* -1: the reference, portable at 1 thread */
        fp4_cpu_force_path(path < 0 ? FP4_CPU_PORTABLE : path);
        for (int nt = 1; nt <= (path < 0 ? 1 : 3); nt++) {
            float *out = path < 0 ? ref : y;
            CHECK_OK(q6 ? fp4_q6_K_matvec(w, NO, NI, xf, NC, out, nt)
                        : fp4_q4_K_matvec(w, NO, NI, xf, NC, out, nt));
            if (path >= 0)
                CHECK_MSG(!memcmp(y, ref, sizeof y), "%s matvec path %s threads %d", q6 ? "q6_K" : "q4_K",
                          fp4_cpu_path_name(path), nt);
        }
    }
    fp4_cpu_force_path(-1);
    free(w), free(wf), free(xf);
}

static void test_q4_K_paths(void) {
    enum { NB = 6 };
    const int top = fp4_cpu_path();
    test_rng r = {0x51344Bull};
    fp4_block_q4_K w[NB];
    fp4_block_q8_K x[NB];
    long compared = 0, bad = 0, nan_seen = 0;
    for (int rep = 0; rep < 3000; rep++) {
        const int kind = rep % 6;
        uint8_t *pw = (uint8_t *)w;
        for (size_t i = 0; i < sizeof w; i++)
            pw[i] = (uint8_t)rng_u64(&r);
        rand_q8_K(&r, x, NB, kind == 2 ? 1 : kind == 3 ? -1 : 0);
        for (int b = 0; b < NB; b++) {
            if (kind == 0) { /* any f16 bits, NaN, Inf and subnormals included */
            } else if (kind == 1 || kind == 2 || kind == 3) { /* max nibbles, max 6-bit scales and mins */
                memset(w[b].qs, 0xFF, sizeof w[b].qs);
                memset(w[b].scales, 0xFF, sizeof w[b].scales);
                w[b].d = 0x7BFF, w[b].dmin = (uint16_t)(rep & 1 ? 0x7BFF : 0xFBFF);
            } else if (kind == 4) { /* zero blocks among the others */
                if (b % 2) memset(&w[b], 0, sizeof w[b]);
                if (b % 3 == 0) memset(&x[b], 0, sizeof x[b]);
                w[b].d &= 0x7BFF, w[b].dmin &= 0x7BFF;
            } else { /* finite scales, arbitrary bsums (the dot reads them as given) */
                w[b].d &= 0x7BFF, w[b].dmin &= 0x7BFF;
                x[b].bsums[rep % 16] = (int16_t)rng_u64(&r);
            }
        }
        for (int64_t nb = 1; nb <= NB; nb++) {
            fp4_cpu_force_path(FP4_CPU_PORTABLE);
            const float ref = fp4_q4_K_dot_q8_K(w, x, nb * FP4_QK_K);
            nan_seen += isnan(ref);
            CHECK(!isnan(ref) || f32_bits(ref) == 0xFFC00000u); /* one NaN, whatever the inputs' payloads */
            for (int path = 1; path <= top; path++) {
                fp4_cpu_force_path(path);
                const float got = fp4_q4_K_dot_q8_K(w, x, nb * FP4_QK_K);
                bad += f32_bits(got) != f32_bits(ref);
                CHECK_MSG(f32_bits(got) == f32_bits(ref),
                          "q4_K kind %d nb %lld path %s: %a (0x%08x) vs portable %a (0x%08x)", kind,
                          (long long)nb, fp4_cpu_path_name(path), (double)got, f32_bits(got), (double)ref,
                          f32_bits(ref));
                compared++;
            }
        }
    }
    fp4_cpu_force_path(-1);
    CHECK_EQ_INT(bad, 0);
    CHECK(nan_seen > 0 || top == FP4_CPU_PORTABLE); /* the NaN cases were reached */

    kq_matvec_paths(&r, 0);
    printf("q4_K: %ld dots compared against the portable path\n", compared);
}

/* ---- the K-quant matvecs' multi-row kernels (fp4_q{4,6}K_rows4_avx512): adversarial weights ----
 * Row counts below, at and past a multiple of the 4-row group (the rest one row at a time), 1-6
 * blocks a row, 1-3 or 6-8 columns (fp4_q4K_rows4_cols_avx512 takes up to 4 at once), every path and
 * 1-3 threads: each y must equal, bit for bit, the portable
 * single-row dot (fp4_q*_K_dot_q8_K) of its row and column against fp4_q8_K_quantize's blocks.
 * The weights are raw bytes with any f16 scale (NaN, Inf, subnormal), saturated nibbles and
 * scales, zero blocks; some activation columns are huge, so that the f32 sums overflow. */
static void kq_rows_block(test_rng *r, uint8_t *blk, int q6, int kind) {
    const size_t bs = q6 ? sizeof(fp4_block_q6_K) : sizeof(fp4_block_q4_K);
    for (size_t i = 0; i < bs; i++)
        blk[i] = (uint8_t)rng_u64(r);
    uint16_t d = (uint16_t)rng_u64(r), dmin = (uint16_t)rng_u64(r);
    if (kind == 1) { /* saturated: every nibble / 6-bit value at its top, the largest finite scales */
        memset(blk, 0xFF, bs);
        d = 0x7BFF, dmin = (uint16_t)(rng_u64(r) & 1 ? 0x7BFF : 0xFBFF);
    } else if (kind == 2) { /* a zero block */
        memset(blk, 0, bs);
    } else if (kind == 3) { /* subnormal f16 scales */
        d &= 0x83FF, dmin &= 0x83FF;
    } else if (kind == 4) { /* finite */
        d &= 0x7BFF, dmin &= 0x7BFF;
    } else if (kind == 5) { /* NaN or Inf */
        d = rng_u64(r) & 1 ? 0x7C00 : 0xFE01;
    } /* else: any f16 bits */
    if (q6) {
        memcpy(blk + offsetof(fp4_block_q6_K, d), &d, 2);
    } else {
        memcpy(blk + offsetof(fp4_block_q4_K, d), &d, 2);
        memcpy(blk + offsetof(fp4_block_q4_K, dmin), &dmin, 2);
    }
}

static void kq_rows_case(test_rng *r, int q6, int64_t no, int64_t nb, int64_t nc, long *compared,
                         long *nan_inf) {
    const int top = fp4_cpu_path();
    const size_t bs = q6 ? sizeof(fp4_block_q6_K) : sizeof(fp4_block_q4_K);
    const int64_t ni = nb * FP4_QK_K;
    uint8_t *w = malloc((size_t)(no * nb) * bs);
    float *x = malloc(sizeof(float) * (size_t)(nc * ni));
    float *ref = malloc(sizeof(float) * (size_t)(nc * no)), *y = malloc(sizeof(float) * (size_t)(nc * no));
    fp4_block_q8_K *xq = malloc(sizeof(fp4_block_q8_K) * (size_t)(nc * nb));
    const int mostly = (int)(rng_u64(r) % 7); /* most blocks of this case are of one kind */
    for (int64_t i = 0; i < no * nb; i++)
        kq_rows_block(r, w + (size_t)i * bs, q6, rng_u64(r) % 3 ? mostly : (int)(rng_u64(r) % 7));
    for (int64_t c = 0; c < nc; c++) {
        const float scale = c == 2 ? 3e37f : 1.0f; /* the third column overflows the f32 sums */
        for (int64_t i = 0; i < ni; i++)
            x[c * ni + i] = (i / FP4_QK_K) % 3 == 1 && c == 1 ? 0.0f : scale * rng_normal(r);
        CHECK_OK(fp4_q8_K_quantize(x + c * ni, ni, xq + c * nb));
    }
    fp4_cpu_force_path(FP4_CPU_PORTABLE);
    for (int64_t c = 0; c < nc; c++)
        for (int64_t o = 0; o < no; o++) {
            const void *row = w + (size_t)(o * nb) * bs;
            ref[c * no + o] =
                q6 ? fp4_q6_K_dot_q8_K(row, xq + c * nb, ni) : fp4_q4_K_dot_q8_K(row, xq + c * nb, ni);
            nan_inf[0] += isnan(ref[c * no + o]), nan_inf[1] += isinf(ref[c * no + o]);
        }
    for (int path = FP4_CPU_PORTABLE; path <= top; path++) {
        fp4_cpu_force_path(path);
        for (int nt = 1; nt <= 3; nt++) {
            memset(y, 0x55, sizeof(float) * (size_t)(nc * no));
            CHECK_OK(q6 ? fp4_q6_K_matvec(w, no, ni, x, nc, y, nt)
                        : fp4_q4_K_matvec(w, no, ni, x, nc, y, nt));
            for (int64_t k = 0; k < nc * no; k++) {
                CHECK_MSG(
                    f32_bits(y[k]) == f32_bits(ref[k]),
                    "%s rows %lld blocks %lld column %lld row %lld path %s threads %d: 0x%08x vs 0x%08x",
                    q6 ? "q6_K" : "q4_K", (long long)no, (long long)nb, (long long)(k / no),
                    (long long)(k % no), fp4_cpu_path_name(path), nt, f32_bits(y[k]), f32_bits(ref[k]));
                (*compared)++;
            }
        }
    }
    fp4_cpu_force_path(-1);
    free(w), free(x), free(ref), free(y), free(xq);
}

static void test_kq_rows_paths(void) {
    test_rng r = {0x4B5257ull};
    static const int64_t rows[] = {1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 31, 37};
    long compared = 0, nan_inf[2] = {0, 0};
    for (int q6 = 0; q6 <= 1; q6++)
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
            for (int64_t nb = 1; nb <= 6; nb += (nb < 3 ? 1 : 3)) {
                /* 1-3 columns, or 6-8 (the four-column kernel and its rest) */
                const int64_t cols = 1 + (int64_t)((i + (size_t)nb) % 3) + (i % 3 == 2 ? 5 : 0);
                kq_rows_case(&r, q6, rows[i], nb, cols, &compared, nan_inf);
            }
    CHECK(nan_inf[0] > 0 && nan_inf[1] > 0); /* the NaN and Inf results were reached */
    printf("k-quant multi-row matvecs: %ld outputs compared against the portable single-row dots "
           "(references: %ld NaN, %ld Inf)\n",
           compared, nan_inf[0], nan_inf[1]);
}

/* ---- Q6_K: every path against the portable dot ---- */
static void test_q6_K_paths(void) {
    enum { NB = 6 };
    const int top = fp4_cpu_path();
    test_rng r = {0x51364Bull};
    fp4_block_q6_K w[NB];
    fp4_block_q8_K x[NB];
    long compared = 0, bad = 0, nan_seen = 0;
    for (int rep = 0; rep < 3000; rep++) {
        const int kind = rep % 7;
        uint8_t *pw = (uint8_t *)w;
        for (size_t i = 0; i < sizeof w; i++)
            pw[i] = (uint8_t)rng_u64(&r);
        rand_q8_K(&r, x, NB, kind == 2 ? 1 : kind == 3 ? -1 : 0);
        for (int b = 0; b < NB; b++) {
            if (kind == 0) { /* any f16 bits, NaN, Inf and subnormals included */
            } else if (kind == 1 || kind == 2 || kind == 3) { /* q = 63 or 0, scales ±127 / -128 */
                const int lo = rep & 1;
                memset(w[b].ql, lo ? 0x00 : 0xFF, sizeof w[b].ql);
                memset(w[b].qh, lo ? 0x00 : 0xFF, sizeof w[b].qh);
                memset(w[b].scales, rep & 2 ? 0x80 : 0x7F, sizeof w[b].scales);
                w[b].d = (uint16_t)(rep & 4 ? 0x7BFF : 0xFBFF);
            } else if (kind == 4) { /* zero blocks among the others */
                if (b % 2) memset(&w[b], 0, sizeof w[b]);
                if (b % 3 == 0) memset(&x[b], 0, sizeof x[b]);
                w[b].d &= 0x7BFF;
            } else if (kind == 5) { /* one value of one position set, the rest 0: the lane mapping */
                memset(&w[b], 0, sizeof w[b]);
                const int pos = (int)(rng_u64(&r) % FP4_QK_K), q = (int)(rng_u64(&r) % 64);
                const int h = pos / 128, l = pos % 32, k = (pos % 128) / 32;
                uint8_t *ql = w[b].ql + 64 * h + l + (k & 1) * 32;
                *ql = (uint8_t)(k < 2 ? (q & 0xF) | (*ql & 0xF0) : (q & 0xF) << 4 | (*ql & 0x0F));
                w[b].qh[32 * h + l] |= (uint8_t)((q >> 4) << (2 * k));
                for (int g = 0; g < 16; g++)
                    w[b].scales[g] = (int8_t)(g + 1 - 8 * (g & 1));
                w[b].d = 0x3C00;
            } else { /* finite scales */
                w[b].d &= 0x7BFF;
            }
        }
        for (int64_t nb = 1; nb <= NB; nb++) {
            fp4_cpu_force_path(FP4_CPU_PORTABLE);
            const float ref = fp4_q6_K_dot_q8_K(w, x, nb * FP4_QK_K);
            nan_seen += isnan(ref);
            CHECK(!isnan(ref) || f32_bits(ref) == 0xFFC00000u);
            for (int path = 1; path <= top; path++) {
                fp4_cpu_force_path(path);
                const float got = fp4_q6_K_dot_q8_K(w, x, nb * FP4_QK_K);
                bad += f32_bits(got) != f32_bits(ref);
                CHECK_MSG(f32_bits(got) == f32_bits(ref),
                          "q6_K kind %d nb %lld path %s: %a (0x%08x) vs portable %a (0x%08x)", kind,
                          (long long)nb, fp4_cpu_path_name(path), (double)got, f32_bits(got), (double)ref,
                          f32_bits(ref));
                compared++;
            }
        }
    }
    fp4_cpu_force_path(-1);
    CHECK_EQ_INT(bad, 0);
    CHECK(nan_seen > 0 || top == FP4_CPU_PORTABLE);

    kq_matvec_paths(&r, 1);
    printf("q6_K: %ld dots compared against the portable path\n", compared);
}

/* ---- dense rows (project.c's dense routes): every path against the portable dots ---- */
static float edge_f32(test_rng *r) {
    static const float v[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-45f, -1e-40f, 3e38f, -3e38f, 1e-20f};
    return v[rng_u64(r) % (sizeof v / sizeof v[0])];
}

/* the portable orders written out: the pinned 32 lanes + butterfly, and native's 8 lanes */
static float ref_pinned(const float *a, const float *b, int64_t n) {
    float p[32] = {0};
    for (int64_t i = 0; i < n; i++)
        p[i % 32] = p[i % 32] + a[i] * b[i];
    for (int off = 16; off >= 1; off >>= 1)
        for (int l = 0; l < off; l++)
            p[l] = p[l] + p[l + off];
    return p[0];
}
static float ref_dot8(const float *a, const float *b, int64_t n) {
    float p[8] = {0};
    for (int64_t i = 0; i < n; i++)
        p[i % 8] += a[i] * b[i];
    return ((p[0] + p[4]) + (p[2] + p[6])) + ((p[1] + p[5]) + (p[3] + p[7]));
}

static void test_dense_paths(void) {
    enum { NO = 7, NC = 3, MAXN = 1001 };
    static const int64_t sizes[] = {1, 5, 31, 32, 33, 63, 64, 100, 768, 1001};
    const int top = fp4_cpu_path();
    test_rng r = {0xD3A5Eull};
    uint16_t *hb = malloc(sizeof(uint16_t) * NO * MAXN);
    float *wf = malloc(sizeof(float) * NO * MAXN), *wd = malloc(sizeof(float) * NO * MAXN);
    float *x = malloc(sizeof(float) * NC * MAXN), ref[NO * NC], y[NO * NC];
    long compared = 0, bad = 0;
    for (int rep = 0; rep < 60; rep++) {
        const int64_t n = sizes[rep % 10];
        const int kind = (rep / 10) % 3; /* 0: normal values; 1: edge values mixed in; 2: any bf16 bits */
        for (int64_t i = 0; i < NO * n; i++) {
            wf[i] = kind == 1 && rng_u64(&r) % 8 == 0 ? edge_f32(&r) : rng_normal(&r);
            hb[i] = kind == 2 ? (uint16_t)rng_u64(&r) : fp4_f32_to_bf16(wf[i]);
            wd[i] = fp4_bf16_to_f32(hb[i]);
        }
        for (int64_t i = 0; i < NC * n; i++)
            x[i] = kind == 1 && rng_u64(&r) % 8 == 0 ? edge_f32(&r) : rng_normal(&r);
        for (int ty = 0; ty < 2; ty++) { /* BF16 (read by the fused dots), F32 (a widened row) */
            fp4_tensor t = {.name = "d", .n_dims = 2, .ne = {n, NO, 1, 1}, .st_dtype = -1};
            t.type = ty ? FP4_TYPE_F32 : FP4_TYPE_BF16;
            t.data = ty ? (const uint8_t *)wf : (const uint8_t *)hb;
            t.nbytes = (size_t)(NO * n) * (ty ? 4 : 2);
            const float *wr = ty ? wf : wd;
            for (int mode = 0; mode < 2; mode++) {
                const fp4_mode m = mode ? FP4_MODE_NATIVE : FP4_MODE_EXACT;
                fp4_cpu_force_path(FP4_CPU_PORTABLE);
                CHECK_OK(fp4_cpu_project(&t, m, x, NC, ref, 1));
                for (int c = 0; c < NC; c++) /* the portable route is the written-out order */
                    for (int o = 0; o < NO; o++) {
                        const float e = mode ? ref_dot8(wr + o * n, x + c * n, n)
                                             : ref_pinned(wr + o * n, x + c * n, n);
                        const float g = ref[c * NO + o]; /* a NaN: the one NaN, whatever the inputs' */
                        CHECK_MSG(f32_bits(e) == f32_bits(g) || (isnan(e) && f32_bits(g) == 0xFFC00000u),
                                  "dense portable type %d mode %d n %lld: %a vs %a", ty, mode, (long long)n,
                                  (double)g, (double)e);
                    }
                for (int path = 1; path <= top; path++) {
                    fp4_cpu_force_path(path);
                    for (int nt = 1; nt <= 3; nt += 2) {
                        CHECK_OK(fp4_cpu_project(&t, m, x, NC, y, nt));
                        for (int i = 0; i < NO * NC; i++) {
                            bad += f32_bits(y[i]) != f32_bits(ref[i]);
                            compared++;
                        }
                        CHECK_MSG(!memcmp(y, ref, sizeof y),
                                  "dense type %d mode %d n %lld path %s threads %d", ty, mode, (long long)n,
                                  fp4_cpu_path_name(path), nt);
                    }
                }
            }
        }
    }
    fp4_cpu_force_path(-1);
    CHECK_EQ_INT(bad, 0);
    free(hb), free(wf), free(wd), free(x);
    printf("dense: %ld values compared against the portable path\n", compared);
}

/* native NVFP4's order (native.c), written out: 64 lanes, then the halving tree */
static float ref_dot64(const float *a, const float *b, int64_t n) {
    float p[64] = {0};
    for (int64_t i = 0; i < n; i++)
        p[i % 64] += a[i] * b[i];
    for (int w = 32; w >= 1; w /= 2)
        for (int l = 0; l < w; l++)
            p[l] += p[l + w];
    return p[0];
}

/* ---- the native NVFP4 A16 route (native.c / native_x86.c) on every path, 1 column (the fused
 * decode-and-dot) and 3 ---- */
static void test_native_a16_paths(void) {
    enum { NO = 9, NC = 3, MAXN = 1040 };
    static const int64_t sizes[] = {16, 48, 256, 272, 1040};
    static const float e2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
    const int top = fp4_cpu_path();
    test_rng r = {0xA7E5ull};
    uint8_t *pay = malloc(NO * MAXN / 2), *sc = malloc(NO * MAXN / 16);
    float *x = malloc(sizeof(float) * NC * MAXN), *row = malloc(sizeof(float) * MAXN);
    float ref[NO * NC], y[NO * NC];
    long compared = 0, bad = 0;
    for (int rep = 0; rep < 30; rep++) {
        const int64_t n = sizes[rep % 5];
        const int kind = (rep / 5) % 3; /* 0: scales 0x20..0x5F; 1: any scale byte (NaN 0x7F/0xFF, zero,
                                            subnormal); 2: edge activations mixed in */
        const float scale2 = rep % 2 ? 1.0f / 2688.0f : 0.75f;
        for (int64_t i = 0; i < NO * n / 2; i++)
            pay[i] = (uint8_t)rng_u64(&r);
        for (int64_t i = 0; i < NO * n / 16; i++)
            sc[i] = kind == 1 ? (uint8_t)rng_u64(&r) : (uint8_t)(0x20 + rng_u64(&r) % 0x40);
        for (int64_t i = 0; i < NC * n; i++)
            x[i] = kind == 2 && rng_u64(&r) % 8 == 0 ? edge_f32(&r) : rng_normal(&r);
        fp4_nvfp4_view w = {.payload = pay, .scales = sc, .n_out = NO, .n_in = n, .scale2 = scale2};
        fp4_cpu_force_path(FP4_CPU_PORTABLE);
        CHECK_OK(fp4_cpu_nvfp4_a16_native(&w, x, NC, ref, 1));
        for (int o = 0; o < NO; o++) { /* the portable route is the written-out decode and dot8 */
            for (int64_t i = 0; i < n; i++) {
                const uint8_t b = pay[o * n / 2 + i / 2];
                const float sb = fp4_e4m3fn_decode(sc[o * n / 16 + i / 16]) * scale2;
                row[i] = e2m1[i % 2 ? b >> 4 : b & 15] * sb;
            }
            for (int c = 0; c < NC; c++) {
                const float e = ref_dot64(row, x + c * n, n), g = ref[c * NO + o];
                CHECK_MSG(f32_bits(e) == f32_bits(g) || (isnan(e) && f32_bits(g) == 0xFFC00000u),
                          "native a16 portable n %lld kind %d: %a vs %a", (long long)n, kind, (double)g,
                          (double)e);
            }
        }
        float ref1[NO]; /* one column: column 0 alone */
        CHECK_OK(fp4_cpu_nvfp4_a16_native(&w, x, 1, ref1, 1));
        CHECK(!memcmp(ref1, ref, sizeof ref1));
        for (int path = 1; path <= top; path++) {
            fp4_cpu_force_path(path);
            for (int nt = 1; nt <= 3; nt++) {
                CHECK_OK(fp4_cpu_nvfp4_a16_native(&w, x, NC, y, nt));
                for (int i = 0; i < NO * NC; i++)
                    bad += f32_bits(y[i]) != f32_bits(ref[i]), compared++;
                CHECK_MSG(!memcmp(y, ref, sizeof y), "native a16 n %lld kind %d path %s threads %d",
                          (long long)n, kind, fp4_cpu_path_name(path), nt);
                CHECK_OK(fp4_cpu_nvfp4_a16_native(&w, x, 1, y, nt));
                for (int i = 0; i < NO; i++)
                    bad += f32_bits(y[i]) != f32_bits(ref1[i]), compared++;
                CHECK_MSG(!memcmp(y, ref1, sizeof ref1),
                          "native a16 1 column n %lld kind %d path %s threads %d", (long long)n, kind,
                          fp4_cpu_path_name(path), nt);
            }
            const float d64 =
                path == FP4_CPU_AVX512 ? fp4_dot64_f32_avx512(row, x, n) : fp4_dot64_f32_avx2(row, x, n);
            CHECK(f32_bits(d64) == f32_bits(fp4_cpu_dot64_f32(row, x, n)));
            /* the row decode alone, every value */
            float *row2 = malloc(sizeof(float) * (size_t)n);
            float stab[256];
            fp4_nvfp4_scale_table(scale2, stab);
            fp4_nvfp4_row_decode(pay, sc, stab, n, row);
            if (path == FP4_CPU_AVX512) fp4_nvfp4_row_decode_avx512(pay, sc, stab, n, row2);
            else fp4_nvfp4_row_decode_avx2(pay, sc, stab, n, row2);
            CHECK_MSG(!memcmp(row, row2, sizeof(float) * (size_t)n), "native row decode n %lld path %s",
                      (long long)n, fp4_cpu_path_name(path));
            free(row2);
        }
    }
    fp4_cpu_force_path(-1);
    CHECK_EQ_INT(bad, 0);
    free(pay), free(sc), free(x), free(row);
    printf("native a16: %ld values compared against the portable path\n", compared);
}

/* ---- the pinned attention (fp4p_attend) on every path ---- */
static void test_attend_paths(void) {
    enum { MAXN = 70, MAXD = 160, STRIDE = 2 * MAXD + 8 };
    static const int dims[] = {8, 16, 24, 32, 48, 64, 80, 128, 160, 13};
    const int top = fp4_cpu_path();
    test_rng r = {0xA77E4Dull};
    float *q = malloc(sizeof(float) * MAXD), *s_ref = malloc(sizeof(float) * MAXN);
    float *s_got = malloc(sizeof(float) * MAXN), o_ref[MAXD], o_got[MAXD];
    uint16_t *k = malloc(sizeof(uint16_t) * MAXN * STRIDE), *v = malloc(sizeof(uint16_t) * MAXN * STRIDE);
    long compared = 0, bad = 0;
    for (int rep = 0; rep < 400; rep++) {
        const int hd = dims[rep % 10], kind = (rep / 10) % 4;
        const int64_t n = 1 + (int64_t)(rng_u64(&r) % MAXN), stride = hd + (int64_t)(rng_u64(&r) % 3) * 8;
        for (int d = 0; d < hd; d++)
            q[d] = kind == 3 && rng_u64(&r) % 16 == 0 ? edge_f32(&r) : rng_normal(&r);
        for (int64_t i = 0; i < n * stride; i++) { /* kind 2: any f16 bits (Inf, NaN, subnormals) */
            const float kf = rng_normal(&r) * (kind == 1 ? 40.0f : 1.0f), vf = rng_normal(&r);
            k[i] = kind == 2 && rng_u64(&r) % 8 == 0 ? (uint16_t)rng_u64(&r) : fp4_f32_to_f16(kf);
            v[i] = kind == 2 && rng_u64(&r) % 8 == 0 ? (uint16_t)rng_u64(&r) : fp4_f32_to_f16(vf);
        }
        const float scale = 0.125f;
        fp4p_attend(q, k, v, stride, n, hd, scale, s_ref, o_ref);
        for (int path = FP4_CPU_AVX2; path <= top; path++) {
            if (path == FP4_CPU_AVX2)
                fp4_attend_avx2(q, k, v, stride, n, hd, scale, s_got, o_got);
            else
                fp4_attend_avx512(q, k, v, stride, n, hd, scale, s_got, o_got);
            /* the same bits, but for NaN: which of two NaNs an add keeps depends on the operand order
             * the compiler picks for fp4p_attend's scalar code (the GPU twin's NaN is canonical) */
            int same = 1;
            for (int d = 0; d < hd; d++)
                same &= f32_bits(o_got[d]) == f32_bits(o_ref[d]) || (isnan(o_got[d]) && isnan(o_ref[d]));
            for (int64_t j = 0; j < n; j++)
                same &= f32_bits(s_got[j]) == f32_bits(s_ref[j]) || (isnan(s_got[j]) && isnan(s_ref[j]));
            bad += !same;
            compared++;
            CHECK_MSG(same, "attend path %s head_dim %d n %lld kind %d", fp4_cpu_path_name(path), hd,
                      (long long)n, kind);
        }
    }
    CHECK_EQ_INT(bad, 0);
    free(q), free(s_ref), free(s_got), free(k), free(v);
    printf("attend: %ld (column, head) attentions compared against fp4p_attend\n", compared);
}

/* the F16 output boundary by F16C (fp4_round_f16_avx2 / _avx512) against fp4_round_f16: every f16
 * value's f32 image, its neighbours and the rounding midpoints between consecutive f16 values with
 * theirs (both signs), f32 subnormals, NaNs with random payloads, and random patterns. (Every one of
 * the 2^32 patterns was compared once: bench/receipts/s6-cpu/round_f16.txt.) */
static uint32_t round_bits(int path, float f) {
    const float r = path == FP4_CPU_AVX512 ? fp4_round_f16_avx512(f)
                    : path == FP4_CPU_AVX2 ? fp4_round_f16_avx2(f)
                                           : fp4_round_f16(f);
    return f32_bits(r);
}

static void test_round_f16_paths(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    test_rng r = {0x16f16c};
    const int best = fp4_cpu_best_path();
    long compared = 0, bad = 0;
    for (int path = FP4_CPU_AVX2; path <= best; path++) {
        for (uint32_t h = 0; h < 65536; h++) {
            const uint32_t u = f32_bits(fp4_f16_to_f32((uint16_t)h));
            const uint32_t un = f32_bits(fp4_f16_to_f32((uint16_t)(h + 1)));
            const uint32_t mid = f32_bits((bits_f32(u) + bits_f32(un)) * 0.5f); /* exact: 11 -> 12 bits */
            const uint32_t probe[8] = {u, u + 1, u - 1, u + 2, mid, mid + 1, mid - 1, mid ^ 0x80000000u};
            for (int i = 0; i < 8; i++) {
                const float f = bits_f32(probe[i]);
                bad += round_bits(path, f) != f32_bits(fp4_round_f16(f)), compared++;
            }
        }
        for (int i = 0; i < 1 << 20; i++) {
            uint32_t u = (uint32_t)rng_u64(&r);
            if (i % 4 == 1) u &= 0x807FFFFFu;                    /* f32 subnormal or zero */
            if (i % 4 == 2) u |= 0x7F800000u;                    /* Inf or NaN, any payload */
            if (i % 4 == 3) u = (u & 0x87FFFFFFu) | 0x38000000u; /* around the f16 normal/subnormal edge */
            bad += round_bits(path, bits_f32(u)) != f32_bits(fp4_round_f16(bits_f32(u))), compared++;
        }
    }
    CHECK_EQ_INT(bad, 0);
    printf("round_f16: %ld values compared on the vector paths\n", compared);
#endif
}

/* column counts whose activation buffers would overflow are refused before anything is read */
static void test_overflow(void) {
    uint8_t p[128] = {0}, s[16] = {0};
    float x[256] = {0}, y[1];
    fp4_nvfp4_view w = {p, s, 1.0f, 2.0f, 1, 256, FP4_PACK_CANONICAL};
    CHECK_EQ_INT(fp4_nvfp4_matvec_a16_exact(&w, x, INT64_MAX / 200, y, 1), FP4_ERR_OVERFLOW);
    CHECK_EQ_INT(fp4_nvfp4_matvec_a16_exact(&w, x, INT64_MAX / 600, y, 1), FP4_ERR_OVERFLOW);
    CHECK_EQ_INT(fp4_nvfp4_matvec_w4a4(&w, x, INT64_MAX / 200, y, 1), FP4_ERR_OVERFLOW);
    CHECK_EQ_INT(fp4_nvfp4_matvec_w4a4(&w, x, INT64_MAX / 600, y, 1), FP4_ERR_OVERFLOW);
    CHECK_OK(fp4_nvfp4_matvec_a16_exact(&w, x, 1, y, 1)); /* the same view, one column: fine */
    CHECK_OK(fp4_nvfp4_matvec_w4a4(&w, x, 1, y, 1));
}

int main(void) {
    test_pick();
    test_overflow();
    test_a16_paths();
    test_w4a4_paths();
    test_q4_K_paths();
    test_q6_K_paths();
    test_kq_rows_paths();
    test_dense_paths();
    test_native_a16_paths();
    test_attend_paths();
    test_round_f16_paths();
    return check_report();
}
