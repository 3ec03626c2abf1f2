/* test_gpu_w4a4.cu — the W4A4 routes (SPEC §5) on the GPU against the CPU oracle, bit for bit:
 * activation codes and scale bytes equal fp4_nvfp4_quantize_act (random, adversarial, E2M1
 * rounding ties); y from fp4_cuda_project (either mode: W4A4 always runs exact) equals
 * fp4_nvfp4_matvec_w4a4 at every width 1..16 and 17, 40 (the dp4a route, chunked), including
 * n_in not a multiple of 64 or 256, and at 16 columns with n_in % 64 == 0 (the integer-MMA
 * route: its int32 fast path and the int64 fallback); two runs identical. */
#include "gpu_test.h"

/* Values on the E2M1 decision boundaries of a group whose scale is known: ties to even. */
static void make_ties(float *x, int64_t n, float input_scale_inv) {
    const float input_scale = 1.0f / input_scale_inv;
    for (int64_t g = 0; g * 16 < n; g++) {
        float *v = x + g * 16;
        /* bmax = 6*input_scale*s with s = 1 -> scale byte 0x38, den = input_scale */
        const float den = input_scale;
        const float pts[15] = {0.25f,  0.75f,  1.25f, 1.75f, 2.5f, 3.5f,  5.0f, -0.25f,
                               -0.75f, -1.25f, -2.5f, -5.0f, 0.0f, -0.0f, 5.5f};
        for (int j = 0; j < 15; j++) v[j] = pts[(j + g) % 15] * den;
        v[15] = 6.0f * den;
    }
}

static void act_codes(int64_t n_in, int n_cols, int kind, float isi, uint64_t seed) {
    float *x = (float *)malloc((size_t)(n_in * n_cols) * 4);
    if (kind == 2) make_ties(x, n_in * n_cols, isi);
    else gt_make_act(x, n_in * n_cols, kind, seed);
    uint8_t *wc = (uint8_t *)malloc((size_t)(n_in * n_cols / 2)),
            *ws = (uint8_t *)malloc((size_t)(n_in * n_cols / 16));
    uint8_t *gc = (uint8_t *)malloc((size_t)(n_in * n_cols / 2)),
            *gs = (uint8_t *)malloc((size_t)(n_in * n_cols / 16));
    for (int c = 0; c < n_cols; c++)
        CHECK_OK(fp4_nvfp4_quantize_act(x + c * n_in, n_in, isi, wc + c * n_in / 2, ws + c * n_in / 16));
    float *dx = gt_dev_floats(x, n_in * n_cols);
    uint8_t *dc = (uint8_t *)gt_dev((size_t)(n_in * n_cols / 2)),
            *ds = (uint8_t *)gt_dev((size_t)(n_in * n_cols / 16));
    CHECK_OK(fp4_cuda_nvfp4_quantize_act(dx, n_in, n_cols, isi, dc, ds, NULL));
    gt_sync("act quant");
    gt_down(gc, dc, (size_t)(n_in * n_cols / 2));
    gt_down(gs, ds, (size_t)(n_in * n_cols / 16));
    gt_cmp_bytes("act codes", wc, gc, n_in * n_cols / 2);
    gt_cmp_bytes("act scales", ws, gs, n_in * n_cols / 16);
    cudaFree(dx);
    cudaFree(dc);
    cudaFree(ds);
    free(x);
    free(wc);
    free(ws);
    free(gc);
    free(gs);
}

static void matvec_case(int64_t n_out, int64_t n_in, int wkind, int xkind, float scale2, float isi,
                        const int *cols, int ncols_n, uint64_t seed) {
    gt_nvfp4 w;
    gt_make_nvfp4(&w, n_out, n_in, scale2, isi, wkind, seed);
    fp4_cuda_tensor t;
    CHECK_OK(fp4_cuda_tensor_upload_nvfp4(&w.view, &t));
    const int maxc = gt_max_cols(cols, ncols_n);
    float *x = (float *)malloc((size_t)(n_in * maxc) * 4),
          *want = (float *)malloc((size_t)(n_out * maxc) * 4);
    if (xkind == 2) make_ties(x, n_in * maxc, isi);
    else gt_make_act(x, n_in * maxc, xkind, seed ^ 0x7777);
    gt_case c;
    gt_case_init(&c, &t, x, maxc);
    for (int i = 0; i < ncols_n; i++) {
        const int nc = cols[i];
        CHECK_OK(fp4_nvfp4_matvec_w4a4(&w.view, x, nc, want, 8));
        const char *route = (nc == 16 && n_in % 64 == 0) ? "nvfp4.w4a4.tile16" : "nvfp4.w4a4.dp4a";
        for (int m = 0; m <= 1; m++) { /* W4A4 runs exact in either mode */
            gt_case_project(&c, m ? FP4_MODE_NATIVE : FP4_MODE_EXACT, nc, route);
            char what[96];
            snprintf(what, sizeof what, "w4a4 %lldx%lld w%d x%d cols %d mode %d", (long long)n_out,
                     (long long)n_in, wkind, xkind, nc, m);
            gt_cmp_bits(what, want, c.got, n_out * nc);
        }
    }
    gt_case_free(&c);
    free(x);
    free(want);
    gt_free_nvfp4(&w);
}

int main(void) {
    GT_REQUIRE_DEVICE();
    const int quick = gt_quick();
    for (int kind = 0; kind <= 2; kind++) {
        act_codes(256, 1, kind, 0.37f, 21);
        act_codes(4096 + 16, 3, kind, 5.0e-3f, 22 + kind);
        act_codes(160, 2, kind, 2.0f, 25 + kind);
    }
    static const int all16[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    static const int wide[] = {17, 40};
    static const int tile[] = {16};
    matvec_case(37, 272, 0, 0, 0.011f, 0.2f, all16, quick ? 4 : 16, 201);   /* n_in % 64 != 0 */
    matvec_case(37, 512, 1, 1, 2.1e-3f, 3.0f, all16, quick ? 4 : 16, 202);
    matvec_case(70, 320, 1, 2, 0.5f, 0.07f, all16, quick ? 4 : 16, 203);    /* tile with n_in % 256 != 0 */
    matvec_case(64, 8192, 1, 1, 1e-3f, 11.0f, tile, 1, 204);                 /* MMA, adversarial: int64 */
    matvec_case(96, 4096, 0, 0, 4e-3f, 0.7f, tile, 1, 209);                  /* MMA, int32 fast path */
    matvec_case(33, 1040, 0, 1, 4e-3f, 0.7f, tile, 1, 210);                  /* MMA, padded, mixed */
    if (!quick) {
        matvec_case(200, 1024, 0, 1, 0.25f, 1.0f, wide, 2, 205);
        matvec_case(1000, 2048, 1, 0, 3e-2f, 0.5f, tile, 1, 206);
        matvec_case(4100, 4096, 0, 0, 1e-2f, 0.9f, tile, 1, 207);            /* many row blocks */
        matvec_case(3, 16, 1, 1, 1.0f, 1.0f, all16, 16, 208);                /* one group */
    }
    return check_report();
}
