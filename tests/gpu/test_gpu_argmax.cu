/* test_gpu_argmax.cu — fp4_cuda_argmax_rows against the host rule of greedy decoding (sample.c's
 * greedy_argmax: the first index of the largest value, NaN never chosen, 0 when every value is NaN
 * or -inf): random rows of a 128k vocabulary, ties (the first index wins, also across the kernel's
 * blocks and its strides), -0.0 beside +0.0, +inf, NaN and -inf everywhere, rows of one value, a
 * row stride past V, the work buffer reused over many calls; each row's NaN/infinity flag; argument
 * checks. */
#include "gpu_test.h"

static int32_t host_argmax(const float *l, int64_t V) {
    float best = -INFINITY;
    for (int64_t i = 0; i < V; i++)
        if (l[i] > best) best = l[i];
    if (best == -INFINITY) return 0;
    for (int64_t i = 0; i < V; i++)
        if (l[i] == best) return (int32_t)i;
    return 0;
}

static int host_nonfinite(const float *l, int64_t V) {
    for (int64_t i = 0; i < V; i++)
        if (!isfinite(l[i])) return 1;
    return 0;
}

/* the choices, and each row's non-finite flag (the decode step's rt.nonfinite) against the host */
static void run_rows(const char *what, const float *h, int64_t rows, int64_t V, int64_t ld, void *work) {
    float *d = gt_dev_floats(h, rows * ld);
    int32_t *dout = (int32_t *)gt_dev((size_t)rows * 8), *got = (int32_t *)malloc((size_t)rows * 8);
    CHECK_OK(fp4_cuda_argmax_rows(d, rows, V, ld, work, dout, dout + rows, NULL));
    gt_sync(what);
    gt_down(got, dout, (size_t)rows * 8);
    for (int64_t r = 0; r < rows; r++) {
        const int32_t want = host_argmax(h + r * ld, V), bad = host_nonfinite(h + r * ld, V);
        CHECK_MSG(got[r] == want, "%s row %lld: %d, want %d", what, (long long)r, got[r], want);
        CHECK_MSG(got[rows + r] == bad, "%s row %lld: non-finite flag %d, want %d", what, (long long)r,
                  got[rows + r], bad);
    }
    /* without flags: the same choices */
    CHECK_OK(fp4_cuda_argmax_rows(d, rows, V, ld, work, dout, NULL, NULL));
    gt_sync(what);
    gt_down(got, dout, (size_t)rows * 4);
    for (int64_t r = 0; r < rows; r++)
        CHECK_MSG(got[r] == host_argmax(h + r * ld, V), "%s row %lld (no flags): %d", what, (long long)r,
                  got[r]);
    cudaFree(d);
    cudaFree(dout);
    free(got);
}

int main(void) {
    GT_REQUIRE_DEVICE();
    const int64_t V = 128256, R = 64;
    void *work = gt_dev(fp4_cuda_argmax_work_bytes(R));
    cudaMemset(work, 0, fp4_cuda_argmax_work_bytes(R));
    float *h = (float *)malloc((size_t)(R * V) * 4);
    test_rng g = {0xA11A};
    for (int64_t i = 0; i < R * V; i++)
        h[i] = (float)(rng_u64(&g) % 2000001) * 1e-3f - 1000.0f;
    run_rows("random", h, R, V, V, work);
    /* one row per case */
    for (int64_t r = 0; r < R; r++) {
        float *l = h + r * V;
        const int64_t a = (int64_t)(rng_u64(&g) % (uint64_t)V), b = (int64_t)(rng_u64(&g) % (uint64_t)V);
        const int64_t lo = a < b ? a : b, hi = a < b ? b : a;
        switch (r % 8) {
        case 0:
            l[lo] = l[hi] = 5000.0f;
            break; /* a tie: the first index */
        case 1:
            for (int64_t i = 0; i < V; i++)
                l[i] = 0.0f;
            l[hi] = -0.0f;
            l[0] = -0.0f;
            break; /* zeros */
        case 2:
            for (int64_t i = 0; i < V; i++)
                l[i] = NAN;
            break; /* all NaN: 0 */
        case 3:
            for (int64_t i = 0; i < V; i++)
                l[i] = i % 2 ? NAN : -INFINITY;
            break; /* 0 */
        case 4:
            for (int64_t i = 0; i < V; i++)
                l[i] = NAN;
            l[hi] = -INFINITY;
            l[lo] = -3.0f;
            break;
        case 5:
            l[hi] = INFINITY;
            l[lo] = NAN;
            break;
        case 6:
            for (int64_t i = 0; i < V; i++)
                l[i] = -7.5f;
            break; /* one value: 0 */
        default:
            l[V - 1] = 3000.0f;
            l[lo] = 2999.999f;
            break; /* the last index */
        }
    }
    run_rows("cases", h, R, V, V, work);
    for (int rep = 0; rep < 20; rep++)
        run_rows("reuse", h + (rep % 8) * V, 3, V, V, work); /* zeroed again */
    run_rows("small", h, 5, 37, 1000, work);                 /* V below one block, stride past V */
    run_rows("one", h, 1, 1, 1, work);
    int32_t *dout = (int32_t *)gt_dev(4);
    float *dx = gt_dev_floats(h, 16);
    CHECK_EQ_INT(fp4_cuda_argmax_rows(dx, 1, 16, 8, work, dout, NULL, NULL),
                 FP4_ERR_INVALID_ARG); /* ld < V */
    CHECK_EQ_INT(fp4_cuda_argmax_rows(dx, 0, 16, 16, work, dout, NULL, NULL), FP4_ERR_INVALID_ARG);
    CHECK_EQ_INT(fp4_cuda_argmax_rows(NULL, 1, 16, 16, work, dout, NULL, NULL), FP4_ERR_INVALID_ARG);
    CHECK_EQ_INT(fp4_cuda_argmax_rows(dx, 1, 16, 16, (uint8_t *)work + 4, dout, NULL, NULL), FP4_ERR_LIMIT);
    CHECK_EQ_INT(fp4_cuda_argmax_rows(dx, 70000, 16, 16, work, dout, NULL, NULL), FP4_ERR_LIMIT);
    CHECK_EQ_INT((int)fp4_cuda_argmax_work_bytes(0), 0);
    free(h);
    return check_report();
}
