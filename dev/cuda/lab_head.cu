/* lab_head.cu — the BF16 LM head lab (gemv_lab --head): an n_out x n_in BF16 weight (llama3-8b's
 * 128256 x 4096 unless --head-shape N,K) at 1, 2, 4, 8, 16 columns (--cols), each row validated on
 * sampled rows against an f64 dot, then timed (graph replay, two weight copies: 1 GB each is far
 * past the L2), printed as GB/s of weight bytes.
 *
 *   run:   make lab LAB_ARGS="--head"    (or: gemv_lab --head --cols 1,2,4,8 --vars head.route,cublas)
 *
 * Rows:
 *   head.route    fp4_cuda_project, native mode (the table: bf16.dense at 1 column, bf16.dense.mma from 2)
 *   head.exact    fp4_cuda_project, exact mode (bf16.dense.pinned)
 *   head.dense    the f32 FMA kernel (fp4_cu_dense) at every width
 *   head.1 .. 6   dense_mma_kernel (src/cuda/dense_mma.cuh) with (row tiles a warp, k-steps in flight
 *                 at <= 8 / 9..16 columns, activation terms): 1 (2, 3|2, 2) = production, 2 (1, 4|3, 2),
 *                 3 (4, 2|1, 2), 4 (2, 2|2, 2), 5 (2, 4|2, 2), 6 (2, 3|2, 3)
 *   cublas        cublasGemmEx bf16 weights x bf16(x) -> f32 (x rounded to bf16: a time baseline whose
 *                 numerics are looser, checked at 1e-2)
 */
#include "cuda/dense_mma.cuh"
#include "lab.h"
#include <cublas_v2.h>
#include <math.h>

#define HEAD_SAMPLE 64
#define HEAD_NRMSE_MAX 1e-5
#define HEAD_BLAS_NRMSE_MAX 1e-2
#define HEAD_MAX_COLS 16

/* the weight value of element i: sign, exponent 2^-7..2^-3, 7 mantissa bits from a hash, so that
 * the device fills the rows and the host rebuilds the sampled ones without a 1 GB copy */
static __host__ __device__ uint16_t head_bits(uint64_t i) {
    uint64_t z = i * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const uint32_t e = 120u + (uint32_t)(z % 5u), m = (uint32_t)(z >> 8) & 0x7Fu,
                   s = (uint32_t)(z >> 20) & 1u;
    return (uint16_t)((s << 15) | (e << 7) | m);
}
static __global__ void head_fill(uint16_t *w, int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        w[i] = head_bits((uint64_t)i);
}

template <int R, int U8, int U16, int NS, int PF = 0>
static fp4_status head_mma(const fp4_cuda_tensor *t, const float *x, int64_t n_cols, float *y,
                           cudaStream_t s) {
    for (int64_t c0 = 0; c0 < n_cols; c0 += DM_MAX_COLS) {
        const int nc = (int)(n_cols - c0 < DM_MAX_COLS ? n_cols - c0 : DM_MAX_COLS);
        const fp4_status st =
            nc > 8 ? launch_dense_mma<2, R, U16, NS, PF>(t, x + c0 * t->n_in, nc, y + c0 * t->n_out, s)
                   : launch_dense_mma<1, R, U8, NS, PF>(t, x + c0 * t->n_in, nc, y + c0 * t->n_out, s);
        if (st != FP4_OK) return st;
    }
    return FP4_OK;
}

struct head_case {
    fp4_cuda_tensor t[2];
    float *dx, *dy;
    uint16_t *dxb; /* x rounded to bf16, for cuBLAS */
    fp4_cuda_scratch scratch;
    cublasHandle_t blas;
    int64_t cols;
    int variant; /* -1 route, -2 exact, -3 dense, -4 cublas, 1..6 the kernel shapes */
};

static void head_run(void *c, int copy, cudaStream_t s) {
    head_case *k = (head_case *)c;
    const fp4_cuda_tensor *t = &k->t[copy % 2];
    fp4_status st = FP4_OK;
    switch (k->variant) {
    case -1:
        st = fp4_cuda_project(t, FP4_MODE_NATIVE, k->dx, k->cols, k->dy, &k->scratch, s);
        break;
    case -2:
        st = fp4_cuda_project(t, FP4_MODE_EXACT, k->dx, k->cols, k->dy, &k->scratch, s);
        break;
    case -3:
        st = fp4_cu_dense(t, k->dx, k->cols, k->dy, NULL, s);
        break;
    case 1:
        st = head_mma<2, 3, 2, 2>(t, k->dx, k->cols, k->dy, s);
        break;
    case 2:
        st = head_mma<1, 4, 3, 2>(t, k->dx, k->cols, k->dy, s);
        break;
    case 3:
        st = head_mma<4, 2, 1, 2>(t, k->dx, k->cols, k->dy, s);
        break;
    case 4:
        st = head_mma<2, 2, 2, 2>(t, k->dx, k->cols, k->dy, s);
        break;
    case 5:
        st = head_mma<2, 4, 2, 2>(t, k->dx, k->cols, k->dy, s);
        break;
    case 6:
        st = head_mma<2, 3, 2, 3>(t, k->dx, k->cols, k->dy, s);
        break;
    /* session 10: the L2's 256-byte fetch (PF 1) and deeper load rings */
    case 7:
        st = head_mma<2, 3, 2, 2, 1>(t, k->dx, k->cols, k->dy, s);
        break;
    case 8:
        st = head_mma<1, 8, 4, 2, 1>(t, k->dx, k->cols, k->dy, s);
        break;
    case 9:
        st = head_mma<1, 8, 4, 2>(t, k->dx, k->cols, k->dy, s);
        break;
    case 10:
        st = head_mma<2, 6, 3, 2, 1>(t, k->dx, k->cols, k->dy, s);
        break;
    default: {
        const float one = 1.0f, zero = 0.0f;
        cublasSetStream(k->blas, s);
        if (cublasGemmEx(k->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)t->n_out, (int)k->cols, (int)t->n_in, &one,
                         t->d_payload, CUDA_R_16BF, (int)t->n_in, k->dxb, CUDA_R_16BF, (int)t->n_in, &zero,
                         k->dy, CUDA_R_32F, (int)t->n_out, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
            st = FP4_ERR_CUDA;
    }
    }
    if (st != FP4_OK) {
        fprintf(stderr, "head variant %d cols %lld: %s %s\n", k->variant, (long long)k->cols,
                fp4_status_str(st), fp4_cuda_last_error());
        exit(1);
    }
}

int lab_head(int argc, char **argv) {
    int64_t n_out = 128256, n_in = 4096, cols[8] = {1, 2, 4, 8, 16};
    int ncols = 5;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--vars") && i + 1 < argc)
            only = argv[++i];
        else if (!strcmp(argv[i], "--head-shape") && i + 1 < argc) {
            long long a = 0, b = 0;
            if (sscanf(argv[++i], "%lld,%lld", &a, &b) == 2 && a > 0 && b > 0 && b % 8 == 0) {
                n_out = a;
                n_in = b;
            }
        } else if (!strcmp(argv[i], "--cols") && i + 1 < argc) {
            ncols = 0;
            for (char *p = strtok(argv[++i], ","); p && ncols < 8; p = strtok(NULL, ","))
                cols[ncols++] = atoll(p);
        }
    }
    fp4_cuda_device_info info;
    LAB_OK(fp4_cuda_init(0, &info));
    cudaStream_t s;
    LAB_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    printf("device: %s (cc %d.%d, %d SMs, L2 %zu MB); BF16 head %lldx%lld, %.2f GB a copy\n\n", info.name,
           info.cc_major, info.cc_minor, info.sm_count, info.l2_bytes >> 20, (long long)n_out,
           (long long)n_in, 2e-9 * n_out * n_in);
    printf("| shape | cols | variant | check | us | GB/s | %% of 4.42 |\n|---|---|---|---|---|---|---|\n");
    head_case k;
    memset(&k, 0, sizeof k);
    const size_t wbytes = (size_t)(n_out * n_in) * 2;
    for (int c = 0; c < 2; c++) {
        void *d;
        LAB_CUDA(cudaMalloc(&d, wbytes));
        head_fill<<<4096, 256, 0, s>>>((uint16_t *)d, n_out * n_in);
        LAB_CUDA(cudaGetLastError());
        fp4_cuda_tensor *t = &k.t[c];
        t->type = FP4_TYPE_BF16;
        t->n_out = n_out;
        t->n_in = t->k_pad = n_in;
        t->d_payload = (const uint8_t *)d;
        t->payload_stride = n_in * 2;
    }
    float *x = (float *)malloc((size_t)(n_in * HEAD_MAX_COLS) * 4);
    uint16_t *xb = (uint16_t *)malloc((size_t)(n_in * HEAD_MAX_COLS) * 2);
    test_rng r = {4242};
    for (int64_t i = 0; i < n_in * HEAD_MAX_COLS; i++) {
        x[i] = rng_normal(&r);
        xb[i] = fp4_f32_to_bf16(x[i]);
    }
    LAB_CUDA(cudaMalloc(&k.dx, (size_t)(n_in * HEAD_MAX_COLS) * 4));
    LAB_CUDA(cudaMemcpy(k.dx, x, (size_t)(n_in * HEAD_MAX_COLS) * 4, cudaMemcpyHostToDevice));
    LAB_CUDA(cudaMalloc(&k.dxb, (size_t)(n_in * HEAD_MAX_COLS) * 2));
    LAB_CUDA(cudaMemcpy(k.dxb, xb, (size_t)(n_in * HEAD_MAX_COLS) * 2, cudaMemcpyHostToDevice));
    LAB_CUDA(cudaMalloc(&k.dy, (size_t)(n_out * HEAD_MAX_COLS) * 4));
    LAB_OK(fp4_cuda_scratch_alloc(fp4_cuda_scratch_bytes(&k.t[0], HEAD_MAX_COLS), &k.scratch));
    if (cublasCreate(&k.blas) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "cublasCreate failed\n");
        return 1;
    }
    /* f64 references of the sampled rows, every column */
    int64_t rows[HEAD_SAMPLE];
    double *ref = (double *)malloc(sizeof(double) * HEAD_SAMPLE * HEAD_MAX_COLS);
    float *wrow = (float *)malloc((size_t)n_in * 4);
    for (int i = 0; i < HEAD_SAMPLE; i++) {
        rows[i] = i == HEAD_SAMPLE - 1 ? n_out - 1 : (n_out / HEAD_SAMPLE) * i + (i % 7);
        for (int64_t q = 0; q < n_in; q++)
            wrow[q] = fp4_bf16_to_f32(head_bits((uint64_t)(rows[i] * n_in + q)));
        for (int c = 0; c < HEAD_MAX_COLS; c++) {
            double acc = 0.0;
            for (int64_t q = 0; q < n_in; q++)
                acc += (double)wrow[q] * (double)x[c * n_in + q];
            ref[c * HEAD_SAMPLE + i] = acc;
        }
    }
    LAB_CUDA(cudaStreamSynchronize(s));
    static const struct {
        const char *name;
        int variant;
    } vars[] = {{"head.route", -1}, {"head.exact", -2}, {"head.dense", -3}, {"head.1", 1}, {"head.2", 2},
                {"head.3", 3},      {"head.4", 4},      {"head.5", 5},      {"head.6", 6}, {"head.7", 7},
                {"head.8", 8},      {"head.9", 9},      {"head.10", 10},    {"cublas", -4}};
    float *y = (float *)malloc((size_t)(n_out * HEAD_MAX_COLS) * 4);
    int failures = 0;
    for (int ci = 0; ci < ncols; ci++) {
        const int64_t nc = cols[ci] < 1 ? 1 : cols[ci] > HEAD_MAX_COLS ? HEAD_MAX_COLS : cols[ci];
        for (size_t vi = 0; vi < sizeof vars / sizeof vars[0]; vi++) {
            if (only) {
                char name[40], list[256];
                snprintf(name, sizeof name, ",%s,", vars[vi].name);
                snprintf(list, sizeof list, ",%s,", only);
                if (!strstr(list, name)) continue;
            }
            k.variant = vars[vi].variant;
            k.cols = nc;
            LAB_CUDA(cudaMemset(k.dy, 0xFF, (size_t)(n_out * nc) * 4));
            head_run(&k, 0, s);
            LAB_CUDA(cudaStreamSynchronize(s));
            LAB_CUDA(cudaMemcpy(y, k.dy, (size_t)(n_out * nc) * 4, cudaMemcpyDeviceToHost));
            double se = 0.0, sr = 0.0;
            for (int64_t c = 0; c < nc; c++)
                for (int i = 0; i < HEAD_SAMPLE; i++) {
                    const double d = (double)y[c * n_out + rows[i]] - ref[c * HEAD_SAMPLE + i];
                    se += d * d;
                    sr += ref[c * HEAD_SAMPLE + i] * ref[c * HEAD_SAMPLE + i];
                }
            const double e = sqrt(se / (sr > 0 ? sr : 1.0));
            const int ok = e < (k.variant == -4 ? HEAD_BLAS_NRMSE_MAX : HEAD_NRMSE_MAX); /* NaN fails */
            failures += !ok;
            const double us = lab_time_us(head_run, &k, 2, 10, s);
            const double gbs = (double)wbytes / (us * 1e-6) / 1e9;
            const char *route = k.variant == -1   ? fp4_cuda_route_name(&k.t[0], FP4_MODE_NATIVE, nc)
                                : k.variant == -2 ? fp4_cuda_route_name(&k.t[0], FP4_MODE_EXACT, nc)
                                                  : "";
            printf("| %lldx%lld | %lld | %s%s%s%s | %s nrmse %.1e | %.1f | %.0f | %.0f%% |\n",
                   (long long)n_out, (long long)n_in, (long long)nc, vars[vi].name, *route ? " (" : "", route,
                   *route ? ")" : "", ok ? "ok" : "FAIL", e, us, gbs, 100.0 * gbs / 4420.0);
            fflush(stdout);
        }
    }
    printf("\n%d validation failures\n", failures);
    cublasDestroy(k.blas);
    for (int c = 0; c < 2; c++)
        cudaFree((void *)k.t[c].d_payload);
    cudaFree(k.dx);
    cudaFree(k.dxb);
    cudaFree(k.dy);
    fp4_cuda_scratch_free(&k.scratch);
    free(x);
    free(xb);
    free(ref);
    free(wrow);
    free(y);
    return failures ? 1 : 0;
}
