/* gemv_lab.cu — the NVFP4 matvec lab: every variant validated against the CPU oracle on sampled
 * rows, then timed (CUDA-graph replay, weight copies rotated past the L2), printed as GB/s of
 * weight bytes (payload + scales; activations and outputs are < 1% and not counted) next to
 * the measured read-only and copy ceilings and cuBLAS bf16 on the same shapes.
 *
 *   build+run:  make lab            (or: make -C dev/cuda run BUILD=/abs/build LAB_ARGS=...)
 *   args:       --quick             small shapes only;   --cols 1,16   column counts
 *               --decode            the llama3-8b decode step's shapes (q/k/v, o, gate/up, down)
 *               --l2                one weight copy replayed (L2-resident where it fits)
 *               --vars native.route,cublas.9   only these rows;   --shape 2   only the third shape
 *               --head              the BF16 LM head instead (lab_head.cu: 128256 x 4096, its own rows)
 *
 * Rows: <op>.route is production, fp4_cuda_project() through the dispatch table (native: the
 * native A16 route; exact: the exact A16 route; w4a4: the W4A4 routes, the 16-column MMA at 16
 * columns, dp4a otherwise). The numbered variants are the lab's (lab_native.cu, lab_exact.cu,
 * lab_w4a4.cu list them; bench/gpu.md has their history):
 *   native.1..16, exact.1..9 (exact.1N: the matvec of exact.N alone, activations quantized
 *   beforehand; 17: exact.7, 18, 19: exact.8, 9 up to 16 columns), w4a4.2 (16 columns),
 *   native.30..36, exact.30..36 (1 column: the row-team kernels, lab_team.cu; exact.40 the
 *   kernel of exact.30 alone), native.50..58, exact.50..58 (1 column: the stream kernels,
 *   lab_stream.cu; exact.60 the kernel of exact.50 alone; .61..66 one item per lane,
 *   exact.69 the kernel of exact.61 alone; .71, .72 the lookup words from shared memory,
 *   exact.79 the kernel of exact.71 alone),
 *   native.90..97 (1..8 columns: the frag kernels on the tensor cores, lab_frag.cu),
 *   cublas.9 (cublasGemmEx bf16 x bf16 -> f32 of the dequantized weights, the baseline).
 */
#include "lab.h"
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <math.h>

#define SAMPLE_ROWS 64
#define NATIVE_NRMSE_MAX 2e-3
#define BF16_NRMSE_MAX 1e-2
#define MAX_COLS 32

struct lab_shape {
    int64_t n_out, n_in;
};

struct lab_case {
    /* weights */
    fp4_cuda_tensor t[8];       /* rotated copies, same layout */
    __nv_bfloat16 *wb[8];
    int ncopies, ncopies_bf;
    fp4_cuda_scratch scratch;
    cublasHandle_t blas;
    /* activations */
    float *dx;
    __nv_bfloat16 *dxb;
    int8_t *dq, *dqf; /* Q8_K values: plain (8 columns), fragment order (16 columns, exact.18/19) */
    float *dd, *ddf;
    float *dy;
    int64_t cols;
    int variant;
    const char *op;
};

static void run_variant(void *c, int copy, cudaStream_t s) {
    lab_case *k = (lab_case *)c;
    const fp4_cuda_tensor *t = &k->t[copy % k->ncopies];
    fp4_status st = FP4_OK;
    if (k->variant == 0 && strcmp(k->op, "cublas")) { /* production: the dispatch table */
        st = fp4_cuda_project(t, !strcmp(k->op, "native") ? FP4_MODE_NATIVE : FP4_MODE_EXACT, k->dx, k->cols,
                              k->dy, &k->scratch, s);
    } else if (k->variant >= 90 && !strcmp(k->op, "native")) { /* the frag kernels (lab_frag.cu) */
        st = lab_frag(k->variant, t, k->dx, k->cols, k->dy, s);
    } else if (k->variant >= 30 && k->variant < 40) { /* the row-team kernels (lab_team.cu) */
        st = lab_team(!strcmp(k->op, "exact"), k->variant, t, k->dx, k->cols, k->dy, &k->scratch, s);
    } else if (!strcmp(k->op, "exact") && (k->variant == 60 || k->variant == 69 || k->variant == 79)) {
        st = lab_stream_matvec(k->variant, t, k->dq, k->dd, k->dy, s);
    } else if (k->variant >= 50 && k->variant < 90) { /* the stream kernels (lab_stream.cu) */
        st = lab_stream(!strcmp(k->op, "exact"), k->variant, t, k->dx, k->cols, k->dy, &k->scratch, s);
    } else if (!strcmp(k->op, "exact") && k->variant == 40) {
        st = lab_team_matvec(k->variant, t, k->dq, k->dd, k->dy, s);
    } else if (!strcmp(k->op, "native")) {
        st = lab_native(k->variant, t, k->dx, k->cols, k->dy, &k->scratch, s);
    } else if (!strcmp(k->op, "exact")) {
        if (k->variant >= 10 && k->variant < 20) /* the matvec alone, activations quantized beforehand */
            st = k->variant >= 18 ? lab_exact_matvec(k->variant - 10, t, k->dqf, k->ddf, k->cols, k->dy, s)
                                  : lab_exact_matvec(k->variant - 10, t, k->dq, k->dd, k->cols, k->dy, s);
        else st = lab_exact(k->variant, t, k->dx, k->cols, k->dy, &k->scratch, s);
    } else if (!strcmp(k->op, "w4a4")) {
        st = lab_w4a4(k->variant, t, k->dx, k->cols, k->dy, &k->scratch, s);
    } else {
        const float one = 1.0f, zero = 0.0f;
        cublasSetStream(k->blas, s);
        const cublasStatus_t bs = cublasGemmEx(
            k->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)t->n_out, (int)k->cols, (int)t->n_in, &one,
            k->wb[copy % k->ncopies_bf], CUDA_R_16BF, (int)t->n_in, k->dxb, CUDA_R_16BF, (int)t->n_in, &zero,
            k->dy, CUDA_R_32F, (int)t->n_out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        if (bs != CUBLAS_STATUS_SUCCESS) st = FP4_ERR_CUDA;
    }
    if (st != FP4_OK) {
        fprintf(stderr, "%s.%d cols %lld: %s %s\n", k->op, k->variant, (long long)k->cols, fp4_status_str(st),
                st == FP4_ERR_CUDA ? fp4_cuda_last_error() : "");
        exit(1);
    }
}

/* ---- CPU references on sampled rows ---- */
struct lab_ref {
    int64_t rows[SAMPLE_ROWS];
    float *exact, *w4a4, *flt; /* [col][sample] */
};

static void make_refs(const fp4_nvfp4_view *v, const float *x, int64_t cols, float isi, lab_ref *ref) {
    const int64_t n_in = v->n_in;
    for (int i = 0; i < SAMPLE_ROWS; i++)
        ref->rows[i] = i == SAMPLE_ROWS - 1 ? v->n_out - 1 : (v->n_out / SAMPLE_ROWS) * i + (i % 7);
    fp4_block_q8_K *xq = (fp4_block_q8_K *)malloc(sizeof(fp4_block_q8_K) * (size_t)(n_in / 256));
    uint8_t *ac = (uint8_t *)malloc((size_t)n_in / 2), *as = (uint8_t *)malloc((size_t)n_in / 16);
    float *deq = (float *)malloc((size_t)n_in * 4);
    for (int64_t c = 0; c < cols; c++) {
        const float *xc = x + c * n_in;
        LAB_OK(fp4_q8_K_quantize(xc, n_in, xq));
        LAB_OK(fp4_nvfp4_quantize_act(xc, n_in, isi, ac, as));
        for (int i = 0; i < SAMPLE_ROWS; i++) {
            const int64_t r = ref->rows[i];
            const uint8_t *p = v->payload + r * (n_in / 2), *s = v->scales + r * (n_in / 16);
            ref->exact[c * SAMPLE_ROWS + i] = fp4_nvfp4_dot_a16_exact(p, s, v->scale2, xq, n_in);
            ref->w4a4[c * SAMPLE_ROWS + i] = fp4_nvfp4_dot_w4a4(p, s, v->scale2, ac, as, isi, n_in);
            LAB_OK(fp4_nvfp4_dequant_row(p, s, v->scale2, n_in, deq));
            double acc = 0;
            for (int64_t k = 0; k < n_in; k++) acc += (double)deq[k] * (double)xc[k];
            ref->flt[c * SAMPLE_ROWS + i] = (float)acc;
        }
    }
    free(xq);
    free(ac);
    free(as);
    free(deq);
}

/* "ok" or a short failure; exact variants compare bits, the others a normalized error. */
static const char *validate(lab_case *k, const lab_ref *ref, int64_t n_out, char *buf, size_t cap) {
    float *y = (float *)malloc((size_t)(n_out * k->cols) * 4);
    LAB_CUDA(cudaMemset(k->dy, 0xFF, (size_t)(n_out * k->cols) * 4));
    run_variant(k, 0, 0);
    LAB_CUDA(cudaDeviceSynchronize());
    LAB_CUDA(cudaMemcpy(y, k->dy, (size_t)(n_out * k->cols) * 4, cudaMemcpyDeviceToHost));
    float got[MAX_COLS * SAMPLE_ROWS];
    for (int64_t c = 0; c < k->cols; c++)
        for (int i = 0; i < SAMPLE_ROWS; i++) got[c * SAMPLE_ROWS + i] = y[c * n_out + ref->rows[i]];
    free(y);
    const int64_t n = k->cols * SAMPLE_ROWS;
    if (!strcmp(k->op, "exact") || !strcmp(k->op, "w4a4")) {
        const float *want = !strcmp(k->op, "exact") ? ref->exact : ref->w4a4;
        int64_t bad = 0;
        for (int64_t i = 0; i < n; i++) bad += memcmp(&want[i], &got[i], 4) != 0;
        if (bad) snprintf(buf, cap, "FAIL %lld/%lld bits", (long long)bad, (long long)n);
        else snprintf(buf, cap, "bits ok");
        return buf;
    }
    const double e = fp4_nrmse(got, ref->flt, n);
    const double lim = !strcmp(k->op, "cublas") ? BF16_NRMSE_MAX : NATIVE_NRMSE_MAX;
    snprintf(buf, cap, "%s nrmse %.1e", e < lim ? "ok" : "FAIL", e);
    return buf;
}

static int has_col(const int64_t *cols, int ncols, int64_t c) {
    for (int i = 0; i < ncols; i++)
        if (cols[i] == c) return 1;
    return 0;
}

int main(int argc, char **argv) {
    int quick = 0, decode = 0, l2 = 0, shape_only = -1;
    int64_t cols[8] = {1, 2, 4, 8, 16, 32};
    int ncols = 6;
    const char *only = NULL; /* --vars native.11,exact.7: time only these (comma list of op.variant) */
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--head")) return lab_head(argc, argv);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--decode")) decode = 1; /* the llama3-8b decode step's four shapes */
        else if (!strcmp(argv[i], "--l2")) l2 = 1; /* one weight copy, replayed: L2-resident where it fits */
        else if (!strcmp(argv[i], "--vars") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--shape") && i + 1 < argc) shape_only = atoi(argv[++i]); /* one shape */
        else if (!strcmp(argv[i], "--cols") && i + 1 < argc) {
            ncols = 0;
            for (char *p = strtok(argv[++i], ","); p && ncols < 8; p = strtok(NULL, ","))
                cols[ncols++] = atoll(p);
        }
    }
    fp4_cuda_device_info info;
    LAB_OK(fp4_cuda_init(0, &info));
    cudaStream_t s;
    LAB_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    const lab_ceiling lim = lab_ceilings(s, info.sm_count);
    printf("device: %s (cc %d.%d, %d SMs, L2 %zu MB)\n", info.name, info.cc_major, info.cc_minor,
           info.sm_count, info.l2_bytes >> 20);
    printf(
        "ceilings: device copy %.2f TB/s (read+write), read-only stream %.2f TB/s (16-byte loads, 2 GiB)\n",
        lim.copy_tbs, lim.read_tbs);
    printf("reference ceiling: 4.42 TB/s (gpu-calibration.md)\n\n");
    printf("| shape (n_out x n_in) | cols | variant | check | us | GB/s | %% of read-only | %% of 4.42 |\n");
    printf("|---|---|---|---|---|---|---|---|\n");

    static const lab_shape full[] = {{4096, 14336}, {14336, 4096}, {8192, 28672}, {28672, 8192}};
    static const lab_shape small[] = {{1024, 4096}, {4096, 1024}};
    static const lab_shape dec[] = {{6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}};
    const lab_shape *shapes = decode ? dec : quick ? small : full;
    const int nshapes = quick && !decode ? 2 : 4;
    if (l2) printf("weights: one copy replayed (--l2: L2-resident where they fit)\n");
    const float isi = 0.7f;
    int failures = 0;
    for (int si = 0; si < nshapes; si++) {
        if (shape_only >= 0 && si != shape_only) continue;
        const int64_t n_out = shapes[si].n_out, n_in = shapes[si].n_in;
        test_rng seed = {1234 + (uint64_t)si};
        uint8_t *payload = (uint8_t *)malloc((size_t)(n_out * n_in / 2));
        uint8_t *scales = (uint8_t *)malloc((size_t)(n_out * n_in / 16));
        for (int64_t i = 0; i < n_out * n_in / 2; i += 8) {
            const uint64_t r = rng_u64(&seed);
            memcpy(payload + i, &r, 8);
        }
        for (int64_t i = 0; i < n_out * n_in / 16; i++) scales[i] = (uint8_t)(0x28 + rng_u64(&seed) % 0x38);
        fp4_nvfp4_view v = {payload, scales, 4.0e-3f, 0.0f, n_out, n_in};
        lab_case k;
        memset(&k, 0, sizeof k);
        LAB_OK(fp4_cuda_tensor_upload_nvfp4(&v, &k.t[0]));
        const double wbytes = (double)n_out * n_in / 2 + (double)n_out * n_in / 16;
        const double l2b = (double)info.l2_bytes;
        k.ncopies = l2 ? 1 : (int)std::min(8.0, std::max(2.0, ceil(3.0 * l2b / wbytes)));
        for (int c = 1; c < k.ncopies; c++) {
            k.t[c] = k.t[0];
            void *arena;
            LAB_CUDA(cudaMalloc(&arena, k.t[0].arena_bytes));
            LAB_CUDA(cudaMemcpy(arena, k.t[0].d_arena, k.t[0].arena_bytes, cudaMemcpyDeviceToDevice));
            k.t[c].d_arena = arena;
            k.t[c].d_payload = (const uint8_t *)arena;
            k.t[c].d_scales = (const uint8_t *)arena + (k.t[0].d_scales - k.t[0].d_payload);
        }
        const double bbytes = (double)n_out * n_in * 2;
        k.ncopies_bf = l2 ? 1 : (int)std::min(8.0, std::max(2.0, ceil(3.0 * l2b / bbytes)));
        for (int c = 0; c < k.ncopies_bf; c++) {
            LAB_CUDA(cudaMalloc(&k.wb[c], (size_t)bbytes));
            if (c == 0) {
                for (int64_t r0 = 0; r0 < n_out; r0 += 65535)
                    LAB_OK(fp4_cuda_nvfp4_dequant(&k.t[0], r0, std::min<int64_t>(65535, n_out - r0),
                                                  FP4_TYPE_BF16, (uint8_t *)k.wb[0] + (size_t)r0 * n_in * 2,
                                                  NULL));
            } else {
                LAB_CUDA(cudaMemcpy(k.wb[c], k.wb[0], (size_t)bbytes, cudaMemcpyDeviceToDevice));
            }
        }
        if (cublasCreate(&k.blas) != CUBLAS_STATUS_SUCCESS) {
            fprintf(stderr, "cublasCreate failed\n");
            return 1;
        }
        void *blas_ws;
        LAB_CUDA(cudaMalloc(&blas_ws, 32 << 20));
        cublasSetWorkspace(k.blas, blas_ws, 32 << 20);
        /* activations */
        float *x = (float *)malloc((size_t)(n_in * MAX_COLS) * 4);
        for (int64_t i = 0; i < n_in * MAX_COLS; i++) x[i] = rng_normal(&seed);
        uint16_t *xb = (uint16_t *)malloc((size_t)(n_in * MAX_COLS) * 2);
        for (int64_t i = 0; i < n_in * MAX_COLS; i++) xb[i] = fp4_f32_to_bf16(x[i]);
        LAB_CUDA(cudaMalloc(&k.dx, (size_t)(n_in * MAX_COLS) * 4));
        LAB_CUDA(cudaMemcpy(k.dx, x, (size_t)(n_in * MAX_COLS) * 4, cudaMemcpyHostToDevice));
        LAB_CUDA(cudaMalloc(&k.dxb, (size_t)(n_in * MAX_COLS) * 2));
        LAB_CUDA(cudaMemcpy(k.dxb, xb, (size_t)(n_in * MAX_COLS) * 2, cudaMemcpyHostToDevice));
        LAB_CUDA(cudaMalloc(&k.dq, (size_t)(n_in * MAX_COLS)));
        LAB_CUDA(cudaMalloc(&k.dd, (size_t)(n_in / 256 * MAX_COLS) * 4));
        LAB_CUDA(cudaMalloc(&k.dy, (size_t)(n_out * MAX_COLS) * 4));
        fp4_cuda_tensor tw = k.t[0];
        tw.input_scale_inv = isi;
        /* the routes' scratch, or what the lab's variants need: split-K partials of up to 64 slices
         * of MAX_COLS columns, the activation passes */
        size_t sb =
            std::max(fp4_cuda_scratch_bytes(&tw, MAX_COLS), fp4_cuda_scratch_bytes(&k.t[0], MAX_COLS));
        const size_t lab_b = std::max({(size_t)64 * MAX_COLS * n_out * 4, (size_t)MAX_COLS * n_in * 4,
                                       lab_w4a4_scratch(&tw), lab_exact_scratch(&k.t[0], 16)});
        sb = std::max(sb, FP4_CU_COUNTER_BYTES + lab_b + 4096);
        LAB_OK(fp4_cuda_scratch_alloc(sb, &k.scratch));
        LAB_OK(lab_frag_prepare(k.t, k.ncopies, s));
        LAB_OK(fp4_cu_q8k_quantize(k.dx, n_in, n_in, 8, k.dq, k.dd, NULL, 0, s));
        LAB_CUDA(cudaMalloc(&k.dqf, (size_t)(n_in * 16)));
        LAB_CUDA(cudaMalloc(&k.ddf, (size_t)(n_in / 256 * 16) * 4));
        LAB_OK(fp4_cu_q8k_quantize(k.dx, n_in, n_in, 16, k.dqf, k.ddf, NULL, 1, s));
        LAB_CUDA(cudaStreamSynchronize(s));

        lab_ref ref;
        ref.exact = (float *)malloc(sizeof(float) * SAMPLE_ROWS * MAX_COLS);
        ref.w4a4 = (float *)malloc(sizeof(float) * SAMPLE_ROWS * MAX_COLS);
        ref.flt = (float *)malloc(sizeof(float) * SAMPLE_ROWS * MAX_COLS);
        int64_t maxc = 1;
        for (int i = 0; i < ncols; i++) maxc = std::max(maxc, std::min<int64_t>(cols[i], MAX_COLS));
        make_refs(&v, x, maxc, isi, &ref);

        struct var {
            const char *op;
            int variant;
        } vars[] = {{"native", 0},  {"native", 1},  {"native", 2},  {"native", 3},  {"native", 7},
                    {"native", 10}, {"native", 11}, {"native", 12}, {"native", 13}, {"native", 14},
                    {"native", 15}, {"native", 16}, {"exact", 0},   {"exact", 1},   {"exact", 2},
                    {"exact", 4},   {"exact", 5},   {"exact", 6},   {"exact", 7},   {"exact", 17},
                    {"exact", 8},   {"exact", 9},   {"exact", 3},   {"exact", 18},  {"exact", 19},
                    {"w4a4", 0},    {"w4a4", 2},    {"cublas", 9},  {"native", 30}, {"native", 31},
                    {"native", 32}, {"native", 33}, {"native", 34}, {"native", 35}, {"native", 36},
                    {"exact", 30},  {"exact", 31},  {"exact", 32},  {"exact", 33},  {"exact", 34},
                    {"exact", 35},  {"exact", 36},  {"exact", 40},  {"native", 50}, {"native", 51},
                    {"native", 52}, {"native", 53}, {"native", 54}, {"native", 55}, {"native", 56},
                    {"native", 57}, {"native", 58}, {"exact", 50},  {"exact", 51},  {"exact", 52},
                    {"exact", 53},  {"exact", 54},  {"exact", 55},  {"exact", 56},  {"exact", 57},
                    {"exact", 58},  {"exact", 60},  {"native", 61}, {"native", 62}, {"native", 63},
                    {"native", 64}, {"native", 65}, {"native", 66}, {"native", 67}, {"exact", 61},
                    {"exact", 62},  {"exact", 63},  {"exact", 64},  {"exact", 65},  {"exact", 66},
                    {"exact", 69},  {"native", 71}, {"native", 72}, {"exact", 71},  {"exact", 72},
                    {"exact", 79},  {"exact", 73},  {"exact", 74},  {"exact", 75},  {"exact", 76},
                    {"exact", 82},  {"exact", 83},  {"exact", 84},  {"exact", 85},  {"exact", 86},
                    {"native", 73}, {"native", 74}, {"native", 75}, {"native", 76}, {"native", 82},
                    {"native", 83}, {"native", 84}, {"native", 85}, {"native", 86}, {"native", 90},
                    {"native", 91}, {"native", 92}, {"native", 93}, {"native", 94},
                    {"native", 95}, {"native", 96}, {"native", 97}};
        for (int ci = 0; ci < ncols; ci++) {
            const int64_t nc = std::min<int64_t>(cols[ci], MAX_COLS);
            if (nc < 1 || (ci > 0 && has_col(cols, ci, nc))) continue;
            for (size_t vi = 0; vi < sizeof vars / sizeof vars[0]; vi++) {
                const char *op = vars[vi].op;
                const int var = vars[vi].variant;
                if ((var == 1 && (!strcmp(op, "native") || !strcmp(op, "exact"))) && nc != 1) continue;
                if (var >= 90 && nc > 8) continue; /* the frag kernels: 1..8 columns */
                if (var >= 30 && var < 90 && nc != 1) continue; /* the row-team, stream kernels: 1 column */
                if (!strcmp(op, "exact") && var >= 10 && var < 18 &&
                    !(nc == 1 || nc == 2 || nc == 4 || nc == 8))
                    continue;
                if (!strcmp(op, "exact") && var >= 18 && var < 20 && nc > 16) continue;
                if (!strcmp(op, "exact") && var == 6 && nc != 1) continue;
                if (!strcmp(op, "native") && var == 7 && nc > 8) continue; /* 10 covers > 8 */
                if (!strcmp(op, "w4a4") && var >= 2 && nc != 16) continue;
                char vname[32];
                if (var == 0) snprintf(vname, sizeof vname, "%s.route", op);
                else snprintf(vname, sizeof vname, "%s.%d", op, var);
                if (only) {
                    char name[40];
                    snprintf(name, sizeof name, ",%s,", vname);
                    char list[256];
                    snprintf(list, sizeof list, ",%s,", only);
                    if (!strstr(list, name)) continue;
                }
                k.op = op;
                k.variant = var;
                k.cols = nc;
                fp4_cuda_tensor saved[8];
                memcpy(saved, k.t, sizeof saved);
                for (int c = 0; c < k.ncopies; c++) k.t[c].input_scale_inv = !strcmp(op, "w4a4") ? isi : 0.0f;
                char buf[64];
                const char *check = validate(&k, &ref, n_out, buf, sizeof buf);
                failures += strstr(check, "FAIL") != NULL;
                const int reps = wbytes * nc > 4e9 ? 5 : 20;
                const double us =
                    lab_time_us(run_variant, &k, !strcmp(op, "cublas") ? k.ncopies_bf : k.ncopies, reps, s);
                const double bytes = !strcmp(op, "cublas") ? bbytes : wbytes;
                const double gbs = bytes / (us * 1e-6) / 1e9;
                printf("| %lldx%lld | %lld | %s | %s | %.1f | %.0f | %.0f%% | %.0f%% |\n", (long long)n_out,
                       (long long)n_in, (long long)nc, vname, check, us, gbs,
                       100.0 * gbs / (lim.read_tbs * 1000), 100.0 * gbs / 4420.0);
                fflush(stdout);
                memcpy(k.t, saved, sizeof saved);
            }
        }
        free(ref.exact);
        free(ref.w4a4);
        free(ref.flt);
        free(x);
        free(xb);
        free(payload);
        free(scales);
        cudaFree(k.dx);
        cudaFree(k.dxb);
        cudaFree(k.dq);
        cudaFree(k.dd);
        cudaFree(k.dqf);
        cudaFree(k.ddf);
        cudaFree(k.dy);
        cudaFree(blas_ws);
        cublasDestroy(k.blas);
        for (int c = 0; c < k.ncopies_bf; c++) cudaFree(k.wb[c]);
        for (int c = 0; c < k.ncopies; c++) fp4_cuda_tensor_free(&k.t[c]);
        fp4_cuda_scratch_free(&k.scratch);
        lab_frag_release();
    }
    printf("\n%d validation failures\n", failures);
    return failures ? 1 : 0;
}
