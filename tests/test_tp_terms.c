/* test_tp_terms.c — the exact A16 row-parallel split's arithmetic (src/cpu/tp_shard.c): on every
 * CPU path this machine has, the super-block terms of input shards on 256-value boundaries,
 * gathered rank by rank and summed by fp4_tp_a16_reduce, give fp4_nvfp4_matvec_a16_exact's bits for
 * the whole row (1 to 4 shards, 1 to 3 columns, an all-zero super-block and NaN scale bytes
 * included), and the paths give the same terms. The shard copies: fp4_tp_cols of an NVFP4 weight
 * and of a bf16 one hold the columns asked for; a split off a 16-value group is refused (tp.route). */
#include "check.h"
#include "cpu/cpu_impl.h"
#include "cpu/tp_impl.h"
#include <stdlib.h>
#include <string.h>

enum { N_OUT = 64, N_IN = 2048, NSB = N_IN / 256, MAXC = 3 };

static uint8_t pay[N_OUT * N_IN / 2], sc[N_OUT * N_IN / 16];
static float x[MAXC * N_IN];

static fp4_tensor weight(void) {
    fp4_tensor w = {
        .name = "w", .type = FP4_TYPE_NVFP4_E2M1, .n_dims = 2, .ne = {N_IN, N_OUT}, .st_dtype = -1};
    w.nvfp4 = (fp4_nvfp4_view){pay, sc, 0.0371f, 0.0f, N_OUT, N_IN, FP4_PACK_CANONICAL};
    return w;
}

/* y = the weight times x through `ranks` equal shards: terms per shard, gathered rank by rank, summed */
static void split(int ranks, int cols, float *y) {
    const fp4_tensor w = weight();
    const int64_t nin_r = N_IN / ranks, nsb = nin_r / 256;
    static float g[4 * MAXC * N_OUT * NSB], xs[MAXC * N_IN];
    for (int r = 0; r < ranks; r++) {
        fp4_tensor s;
        uint8_t *own;
        fp4_error e;
        CHECK_OK(fp4_tp_cols(&w, r * nin_r, (r + 1) * nin_r, &s, &own, &e));
        for (int c = 0; c < cols; c++)
            memcpy(xs + c * nin_r, x + c * N_IN + r * nin_r, sizeof(float) * (size_t)nin_r);
        CHECK_OK(fp4_tp_a16_terms(&s, xs, cols, g + (int64_t)r * cols * N_OUT * nsb, 2));
        free(own);
    }
    fp4_tp_a16_reduce(g, ranks, cols, N_OUT, nsb, y);
}

static void test_paths(void) {
    test_rng rng = {11};
    for (size_t i = 0; i < sizeof pay; i++)
        pay[i] = (uint8_t)rng_u64(&rng);
    for (size_t i = 0; i < sizeof sc; i++)
        sc[i] = (uint8_t)(0x28 + rng_u64(&rng) % 24);
    sc[5] = 0x7F, sc[N_IN / 16 + 3] = 0xFF; /* NaN scale bytes: q9 0 */
    for (int i = 0; i < MAXC * N_IN; i++)
        x[i] = rng_uniform(&rng) * 8 - 4;
    memset(x + N_IN + 256, 0, sizeof(float) * 256); /* column 1's second super-block: d = 0 */
    const fp4_tensor w = weight();
    for (int path = 0; path <= fp4_cpu_best_path(); path++) {
        if (path == FP4_CPU_AVX2) continue; /* the terms have a portable and an AVX-512 form */
        fp4_cpu_force_path(path);
        for (int cols = 1; cols <= MAXC; cols++) {
            float want[MAXC * N_OUT], got[MAXC * N_OUT];
            CHECK_OK(fp4_nvfp4_matvec_a16_exact(&w.nvfp4, x, cols, want, 1));
            for (int ranks = 1; ranks <= 4; ranks *= 2) {
                memset(got, 0xff, sizeof got);
                split(ranks, cols, got);
                CHECK_MSG(!memcmp(want, got, sizeof(float) * (size_t)(cols * N_OUT)),
                          "path %d, %d cols, %d ranks", path, cols, ranks);
            }
        }
        /* the terms themselves: the same bits on each path */
        static float t0[MAXC * N_OUT * NSB], t1[MAXC * N_OUT * NSB];
        CHECK_OK(fp4_tp_a16_terms(&w, x, MAXC, path == 0 ? t0 : t1, 1));
        if (path) CHECK(!memcmp(t0, t1, sizeof t0));
    }
    fp4_cpu_force_path(-1);
}

static void test_cols(void) {
    const fp4_tensor w = weight();
    fp4_tensor s;
    uint8_t *own;
    fp4_error e;
    CHECK_OK(fp4_tp_cols(&w, 256, 512, &s, &own, &e));
    CHECK(s.nvfp4.n_in == 256 && s.ne[0] == 256 && s.nvfp4.n_out == N_OUT);
    for (int r = 0; r < N_OUT; r++)
        CHECK(!memcmp(s.nvfp4.payload + r * 128, pay + r * (N_IN / 2) + 128, 128) &&
              !memcmp(s.nvfp4.scales + r * 16, sc + r * (N_IN / 16) + 16, 16));
    free(own);
    CHECK(fp4_tp_cols(&w, 8, 512, &s, &own, &e) == FP4_ERR_UNSUPPORTED && !strcmp(e.rule, "tp.route") &&
          !own);
    uint16_t bf[3 * 40];
    for (int i = 0; i < 3 * 40; i++)
        bf[i] = (uint16_t)(0x3F80 + i);
    fp4_tensor b = {.name = "b", .type = FP4_TYPE_BF16, .n_dims = 2, .ne = {40, 3}, .st_dtype = -1};
    b.data = (const uint8_t *)bf, b.nbytes = sizeof bf;
    CHECK_OK(fp4_tp_cols(&b, 10, 30, &s, &own, &e));
    CHECK(s.ne[0] == 20 && s.nbytes == 3 * 20 * 2);
    for (int r = 0; r < 3; r++)
        CHECK(!memcmp(s.data + r * 40, bf + r * 40 + 10, 40));
    free(own);
    CHECK_OK(fp4_tp_rows(&b, 1, 3, &s, &e));
    CHECK(s.ne[1] == 2 && s.data == (const uint8_t *)(bf + 40) && s.nbytes == 2 * 80);
}

int main(void) {
    test_paths();
    test_cols();
    return check_report();
}
