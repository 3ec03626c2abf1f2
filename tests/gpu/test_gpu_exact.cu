/* test_gpu_exact.cu — the exact A16 route (SPEC §4) on the GPU against the CPU oracle, bit for
 * bit: Q8_K blocks (d, qs, bsums) equal fp4_q8_K_quantize on random and adversarial activations;
 * y from fp4_cuda_project(FP4_MODE_EXACT) equals fp4_nvfp4_matvec_a16_exact for every column
 * count 1..16 (the dp4a kernel at 1, the integer MMA from 2) and 17, 18, 24, 40 (chunks of 16, a
 * remainder of 1 on the dp4a kernel), several shapes, random and adversarial weights; two runs
 * give identical bits. The CPU and CUDA tables refuse the same keys with the same status. */
#include "gpu_test.h"

static void q8k_blocks(int64_t n, int n_cols, int kind, uint64_t seed) {
    float *x = (float *)malloc((size_t)(n * n_cols) * 4);
    gt_make_act(x, n * n_cols, kind, seed);
    const int64_t nb = n / 256 * n_cols;
    fp4_block_q8_K *want = (fp4_block_q8_K *)calloc((size_t)nb, sizeof *want);
    fp4_block_q8_K *got = (fp4_block_q8_K *)calloc((size_t)nb, sizeof *got);
    for (int c = 0; c < n_cols; c++) CHECK_OK(fp4_q8_K_quantize(x + c * n, n, want + c * (n / 256)));
    float *dx = gt_dev_floats(x, n * n_cols);
    fp4_block_q8_K *db = (fp4_block_q8_K *)gt_dev((size_t)nb * sizeof *db);
    cudaMemset(db, 0xA5, (size_t)nb * sizeof *db);
    CHECK_OK(fp4_cuda_q8_K_quantize(dx, n, n_cols, db, NULL));
    gt_sync("q8k");
    gt_down(got, db, (size_t)nb * sizeof *got);
    int64_t bad = 0;
    for (int64_t b = 0; b < nb; b++) {
        const int same = f32_bits(want[b].d) == f32_bits(got[b].d) && !memcmp(want[b].qs, got[b].qs, 256) &&
                         !memcmp(want[b].bsums, got[b].bsums, sizeof want[b].bsums);
        if (!same && bad++ < 3)
            fprintf(stderr, "  q8k block %lld: d want %a got %a, qs[0..3] want %d %d %d %d got %d %d %d %d\n",
                    (long long)b, want[b].d, got[b].d, want[b].qs[0], want[b].qs[1], want[b].qs[2],
                    want[b].qs[3], got[b].qs[0], got[b].qs[1], got[b].qs[2], got[b].qs[3]);
    }
    CHECK_MSG(bad == 0, "q8k n=%lld cols=%d kind=%d: %lld blocks differ", (long long)n, n_cols, kind,
              (long long)bad);
    cudaFree(dx);
    cudaFree(db);
    free(x);
    free(want);
    free(got);
}

/* FP4LANE_CUDA_IMMA (read at every call): unless "0", from IMMA_MIN columns the integer tensor-core
 * route (a16_imma.cu: FP4_CU_IMMA_MIN_COLS) instead of the 16-column chunks */
#define IMMA_MIN 256
static int imma_on;

/* y for all column counts listed, through the route, against the oracle. */
static void matvec_case(int64_t n_out, int64_t n_in, int wkind, int xkind, float scale2, const int *cols,
                        int ncols_n, uint64_t seed) {
    gt_nvfp4 w;
    gt_make_nvfp4(&w, n_out, n_in, scale2, 0.0f, wkind, seed);
    fp4_cuda_tensor t;
    CHECK_OK(fp4_cuda_tensor_upload_nvfp4(&w.view, &t));
    const int maxc = gt_max_cols(cols, ncols_n);
    float *x = (float *)malloc((size_t)(n_in * maxc) * 4),
          *want = (float *)malloc((size_t)(n_out * maxc) * 4);
    gt_make_act(x, n_in * maxc, xkind, seed ^ 0x5555);
    gt_case c;
    gt_case_init(&c, &t, x, maxc);
    for (int i = 0; i < ncols_n; i++) {
        const int nc = cols[i];
        CHECK_OK(fp4_nvfp4_matvec_a16_exact(&w.view, x, nc, want, 8));
        gt_case_project(&c, FP4_MODE_EXACT, nc,
                        imma_on && nc >= IMMA_MIN ? "nvfp4.a16.exact.imma" : "nvfp4.a16.exact.dp4a");
        char what[96];
        snprintf(what, sizeof what, "a16 %lldx%lld w%d x%d cols %d", (long long)n_out, (long long)n_in, wkind,
                 xkind, nc);
        gt_cmp_bits(what, want, c.got, n_out * nc);
    }
    gt_case_free(&c);
    free(x);
    free(want);
    gt_free_nvfp4(&w);
}

/* The same keys refused the same way on both backends: exact A16 needs n_in % 256 == 0 (the
 * CPU's fp4_cpu_project and the GPU's fp4_cuda_project both say FP4_ERR_REFUSED_ROUTE and
 * "none"); native mode serves the shape on both. */
static void refusals(void) {
    gt_nvfp4 w;
    gt_make_nvfp4(&w, 4, 272, 1.0f, 0.0f, 0, 3); /* n_in % 256 != 0: not an exact-A16 shape */
    fp4_cuda_tensor t;
    CHECK_OK(fp4_cuda_tensor_upload_nvfp4(&w.view, &t));
    fp4_tensor ct;
    memset(&ct, 0, sizeof ct);
    ct.type = FP4_TYPE_NVFP4_E2M1;
    ct.n_dims = 2;
    ct.ne[0] = 272;
    ct.ne[1] = 4;
    ct.ne[2] = ct.ne[3] = 1;
    ct.nvfp4 = w.view;
    fp4_cuda_scratch s;
    CHECK_OK(fp4_cuda_scratch_alloc(fp4_cuda_scratch_bytes(&t, 4), &s));
    float *dx = (float *)gt_dev(272 * 4 * 4), *dy = (float *)gt_dev(16 * 4);
    float x[272] = {0}, y[4];
    const fp4_status cpu = fp4_cpu_project(&ct, FP4_MODE_EXACT, x, 1, y, 1);
    const fp4_status gpu = fp4_cuda_project(&t, FP4_MODE_EXACT, dx, 1, dy, &s, NULL);
    CHECK_EQ_INT(cpu, FP4_ERR_REFUSED_ROUTE);
    CHECK_EQ_INT(gpu, cpu);
    CHECK(!strcmp(fp4_cpu_route_name(&ct, FP4_MODE_EXACT), "none"));
    CHECK(!strcmp(fp4_cuda_route_name(&t, FP4_MODE_EXACT, 1), "none"));
    CHECK_OK(fp4_cpu_project(&ct, FP4_MODE_NATIVE, x, 1, y, 1));
    CHECK_OK(fp4_cuda_project(&t, FP4_MODE_NATIVE, dx, 1, dy, &s, NULL));
    gt_sync("native 272");
    /* argument errors */
    CHECK_EQ_INT(fp4_cuda_project(&t, FP4_MODE_EXACT, dx, 0, dy, &s, NULL), FP4_ERR_INVALID_ARG);
    CHECK_EQ_INT(fp4_cuda_project(&t, (fp4_mode)7, dx, 1, dy, &s, NULL), FP4_ERR_INVALID_ARG);
    CHECK_EQ_INT(fp4_cuda_q8_K_quantize(dx, 100, 1, (fp4_block_q8_K *)dy, NULL), FP4_ERR_SHAPE);
    /* a type no CUDA route serves (F32 weights are CPU only) */
    fp4_cuda_tensor f = t;
    f.type = FP4_TYPE_F32;
    CHECK_EQ_INT(fp4_cuda_project(&f, FP4_MODE_EXACT, dx, 1, dy, &s, NULL), FP4_ERR_UNSUPPORTED);
    cudaFree(dx);
    cudaFree(dy);
    fp4_cuda_scratch_free(&s);
    fp4_cuda_tensor_free(&t);
    gt_free_nvfp4(&w);
}

int main(void) {
    GT_REQUIRE_DEVICE();
    const int quick = gt_quick();
    setenv("FP4LANE_CUDA_IMMA", "0", 1); /* the 16-column chunks first */
    refusals();
    for (int kind = 0; kind <= 1; kind++) {
        q8k_blocks(256, 1, kind, 11);
        q8k_blocks(4096, 3, kind, 12 + kind);
    }
    static const int all16[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    static const int wide[] = {17, 18, 24, 40};
    static const int few[] = {1, 2, 5, 8, 16};
    /* every column count on a small shape; both weight kinds, both activation kinds */
    matvec_case(37, 512, 0, 0, 0.013f, all16, quick ? 4 : 16, 101);
    matvec_case(37, 512, 1, 1, 1.7e-3f, all16, quick ? 4 : 16, 102);
    matvec_case(5, 256, 1, 1, 3.0f, few, 5, 103);
    if (!quick) {
        matvec_case(300, 1024, 1, 0, 0.5f, few, 5, 104);
        matvec_case(129, 4096, 0, 1, 2.5e-4f, few, 5, 105);
        matvec_case(1000, 2816, 0, 0, 1e-2f, few, 5, 106);
        matvec_case(64, 1024, 1, 1, 7.0f, wide, 4, 107);
        matvec_case(1, 14336, 1, 1, 0.031f, all16, 16, 108);
        /* the 1-column QIN launch's three shapes (a16_stream.cuh launch_item_qin): 16 384+ rows
         * (2 blocks per SM), 4 097..16 383 rows, 4 096 rows (16 warps) */
        static const int one[] = {1, 2};
        matvec_case(20000, 512, 1, 0, 0.02f, one, 2, 109);
        matvec_case(6144, 1024, 0, 1, 0.3f, one, 2, 110);
        matvec_case(4096, 4096, 1, 1, 4e-3f, one, 2, 111);
    }
    /* the integer tensor-core route: 2..512 columns, ragged rows (past the 64-row block) and columns
     * (past the 128-column block and the 16-column warp), both weight kinds (kind 1: the int64
     * path, zero groups and rows, negative and extreme scales), both activation kinds */
    unsetenv("FP4LANE_CUDA_IMMA"); /* on by default */
    imma_on = 1;
    static const int imma_cols[] = {2,  3,   7,   8,   9,   15,  16,  17,  31,
                                    64, 127, 128, 129, 200, 256, 257, 511, 512};
    matvec_case(37, 512, 0, 0, 0.013f, all16, quick ? 4 : 16, 201);
    matvec_case(37, 512, 1, 1, 1.7e-3f, all16, quick ? 4 : 16, 202);
    static const int imma_quick[] = {2, 17, 255, 256, 257}; /* both sides of IMMA_MIN */
    matvec_case(5, 256, 1, 1, 3.0f, quick ? imma_quick : imma_cols, quick ? 5 : 18, 203);
    matvec_case(130, 768, 0, 1, 0.5f, quick ? imma_quick : imma_cols, quick ? 5 : 18, 204);
    if (!quick) {
        matvec_case(300, 1024, 1, 0, 0.5f, imma_cols, 18, 205);
        matvec_case(1000, 2816, 0, 0, 1e-2f, few, 5, 206);
        matvec_case(64, 1024, 1, 1, 7.0f, wide, 4, 207);
        matvec_case(129, 14336, 1, 1, 0.031f, few, 5, 208);
        static const int big[] = {2, 256};
        matvec_case(4096, 4096, 1, 1, 4e-3f, big, 2, 209);
    }
    imma_on = 0;
    return check_report();
}
