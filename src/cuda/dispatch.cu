/* dispatch.cu — the projection dispatch: one table keyed by (tensor type, mode, activation
 * precision, column count) -> route launcher. The table is the one place that names a
 * production kernel; the runtime calls fp4_cuda_project() and never a kernel by name
 * (ARCHITECTURE.md). First matching row wins; a row may also demand a shape property (n_in % 256
 * for exact A16, n_in % 64 for the W4A4 16-column tile). A row whose keys match but whose shape
 * does not is a refused route (FP4_ERR_REFUSED_ROUTE), exactly as in src/cpu/project.c. The
 * scratch a call needs is the largest of the rows that may serve the tensor. */
#include "common.cuh"

typedef enum { ACT_ANY = -1, ACT_A16 = 0, ACT_NVFP4 = 1 } act_key;
typedef enum { MODE_ANY = -1 } mode_key;

typedef struct route {
    int64_t type;
    int mode;              /* fp4_mode or MODE_ANY */
    int act;               /* act_key */
    int64_t min_cols, max_cols;
    int64_t n_in_multiple; /* 0: any */
    fp4_cu_route_fn fn;
    fp4_cu_scratch_fn scratch; /* NULL: the route needs no scratch beyond the counters */
    const char *name;
    int (*available)(void); /* NULL: always; else the row serves only where this returns nonzero */
    fp4_cu_pre_fn pre;      /* NULL: no 1-column form from a given activation pass */
    int (*takes)(const fp4_cuda_tensor *w, int64_t n_cols); /* NULL: any tensor of the keys; else only
                                                              * where nonzero */
} route;

#define NO_MAX INT64_MAX
/* the fewest columns the native GEMM route (prefill) serves: below, the tile kernels read the
 * NVFP4 bytes once per call, where the GEMM route also writes and reads them widened to f16.
 * Above the runtime's 64 logit columns a step, so no decode step (every column wants logits)
 * reaches it: decode steps are graph-captured, prefill steps are not. */
#define FP4_CU_GEMM_MIN_COLS 128
static const route routes[] = {
    /* NVFP4, W4A4 (input_scale_inv present): always the exact integer contraction */
    {FP4_TYPE_NVFP4_E2M1, MODE_ANY, ACT_NVFP4, 16, 16, 64, fp4_cu_w4a4_mma16, fp4_cu_w4a4_scratch,
     "nvfp4.w4a4.tile16"},
    {FP4_TYPE_NVFP4_E2M1, MODE_ANY, ACT_NVFP4, 1, NO_MAX, 0, fp4_cu_w4a4_dp4a, fp4_cu_w4a4_scratch,
     "nvfp4.w4a4.dp4a"},
    /* NVFP4, W4A16; exact from FP4_CU_IMMA_MIN_COLS columns on the integer tensor cores, up to 128
     * columns a launch (a16_imma.cu, CLAIMS imma-1), unless FP4LANE_CUDA_IMMA=0 */
    {FP4_TYPE_NVFP4_E2M1, FP4_MODE_EXACT, ACT_A16, 2, NO_MAX, 256, fp4_cu_a16_imma, fp4_cu_a16_imma_scratch,
     "nvfp4.a16.exact.imma", NULL, NULL, fp4_cu_imma_takes},
    {FP4_TYPE_NVFP4_E2M1, FP4_MODE_EXACT, ACT_A16, 1, NO_MAX, 256, fp4_cu_a16_exact, fp4_cu_a16_exact_scratch,
     "nvfp4.a16.exact.dp4a", NULL, fp4_cu_a16_exact_pre},
    /* native, 2..8 columns from the tensor-core copy where the tensor has one and the call fits one
     * launch (frag.cu; at 1 column the item kernel of native.mma is faster, bench/gpu.md session 9) */
    {FP4_TYPE_NVFP4_E2M1, FP4_MODE_NATIVE, ACT_A16, 2, 8, 0, fp4_cu_a16_frag, fp4_cu_a16_frag_scratch,
     "nvfp4.a16.native.frag", NULL, NULL, fp4_cu_frag_takes},
    {FP4_TYPE_NVFP4_E2M1, FP4_MODE_NATIVE, ACT_A16, FP4_CU_GEMM_MIN_COLS, NO_MAX, 0, fp4_cu_a16_gemm,
     fp4_cu_a16_gemm_scratch, "nvfp4.a16.native.gemm", fp4_cu_gemm_available},
    {FP4_TYPE_NVFP4_E2M1, FP4_MODE_NATIVE, ACT_A16, 1, NO_MAX, 0, fp4_cu_a16_native,
     fp4_cu_a16_native_scratch, "nvfp4.a16.native.mma", NULL, fp4_cu_a16_native_pre},
    /* unquantized: exact mode is the CPU's dense.pinned bit for bit (f32 products, the pinned
     * 32-lane reduction of src/format/pinned.h); native mode the FMA kernel */
    {FP4_TYPE_F16, FP4_MODE_EXACT, ACT_ANY, 1, NO_MAX, 0, fp4_cu_dense_pinned, NULL, "f16.dense.pinned"},
    {FP4_TYPE_BF16, FP4_MODE_EXACT, ACT_ANY, 1, NO_MAX, 0, fp4_cu_dense_pinned, NULL, "bf16.dense.pinned"},
    /* BF16 native from 2 columns: the tensor cores on bf16 hi/lo activation terms (dense_mma.cu;
     * F16 weights have no such split: f16.dense) */
    {FP4_TYPE_BF16, FP4_MODE_NATIVE, ACT_ANY, 2, NO_MAX, 0, fp4_cu_dense_mma, NULL, "bf16.dense.mma",
     fp4_cu_dense_mma_on, NULL, fp4_cu_dense_mma_takes},
    /* unquantized (native) and kquant lanes: one kernel whatever the mode */
    {FP4_TYPE_F16, MODE_ANY, ACT_ANY, 1, NO_MAX, 0, fp4_cu_dense, NULL, "f16.dense"},
    {FP4_TYPE_BF16, MODE_ANY, ACT_ANY, 1, NO_MAX, 0, fp4_cu_dense, NULL, "bf16.dense"},
    /* FP8 (E4M3 widened to bf16 at upload, f32 row scales): the bf16 routes, then the scale */
    {FP4_TYPE_F8_E4M3FN, FP4_MODE_EXACT, ACT_ANY, 1, NO_MAX, 0, fp4_cu_fp8_pinned, NULL, "fp8.dense.pinned"},
    {FP4_TYPE_F8_E4M3FN, MODE_ANY, ACT_ANY, 1, NO_MAX, 0, fp4_cu_fp8_dense, NULL, "fp8.dense"},
    {FP4_TYPE_Q4_K, MODE_ANY, ACT_ANY, 1, NO_MAX, 0, fp4_cu_kquant, NULL, "q4_K.float"},
    {FP4_TYPE_Q6_K, MODE_ANY, ACT_ANY, 1, NO_MAX, 0, fp4_cu_kquant, NULL, "q6_K.float"},
};
#define N_ROUTES (sizeof routes / sizeof routes[0])

static int act_of(const fp4_cuda_tensor *w) {
    return (w->type == FP4_TYPE_NVFP4_E2M1 && w->input_scale_inv > 0.0f) ? ACT_NVFP4 : ACT_A16;
}

static int keys_match(const route *r, const fp4_cuda_tensor *w, int mode) {
    return r->type == w->type && (r->mode == MODE_ANY || r->mode == mode) &&
           (r->act == ACT_ANY || r->act == act_of(w));
}

/* *refused = 1 when a row of these keys exists but refuses the shape (and none serves). */
static const route *find_route(const fp4_cuda_tensor *w, int mode, int64_t n_cols, int *refused) {
    *refused = 0;
    if (!w || n_cols < 1) return NULL;
    for (size_t i = 0; i < N_ROUTES; i++) {
        const route *r = &routes[i];
        if (!keys_match(r, w, mode) || n_cols < r->min_cols || n_cols > r->max_cols) continue;
        if (r->available && !r->available()) continue;
        if (r->takes && !r->takes(w, n_cols)) continue;
        if (r->n_in_multiple && w->n_in % r->n_in_multiple) {
            *refused = 1;
            continue;
        }
        return r;
    }
    return NULL;
}

extern "C" {

FP4_API const char *fp4_cuda_route_name(const fp4_cuda_tensor *w, fp4_mode mode, int64_t n_cols) {
    int refused;
    const route *r = find_route(w, (int)mode, n_cols, &refused);
    return r ? r->name : "none";
}

FP4_API fp4_status fp4_cuda_project(const fp4_cuda_tensor *w, fp4_mode mode, const float *d_x, int64_t n_cols,
                                    float *d_y, const fp4_cuda_scratch *scratch, fp4_cuda_stream stream) {
    if (!w || !d_x || !d_y || n_cols < 1) return FP4_ERR_INVALID_ARG;
    if (mode != FP4_MODE_EXACT && mode != FP4_MODE_NATIVE) return FP4_ERR_INVALID_ARG;
    int refused;
    const route *r = find_route(w, (int)mode, n_cols, &refused);
    if (!r) return refused ? FP4_ERR_REFUSED_ROUTE : FP4_ERR_UNSUPPORTED;
    if (r->scratch && (!scratch || !scratch->d_base || scratch->bytes < FP4_CU_COUNTER_BYTES))
        return FP4_ERR_INVALID_ARG;
    return r->fn(w, d_x, n_cols, d_y, scratch, (cudaStream_t)stream);
}

fp4_status fp4_cu_project_pre(const fp4_cuda_tensor *w, fp4_mode mode, const void *d_q, const float *d_d,
                              float *d_y, cudaStream_t stream) {
    if (!w || !d_q || !d_d || !d_y) return FP4_ERR_INVALID_ARG;
    int refused;
    const route *r = find_route(w, (int)mode, 1, &refused);
    if (!r || !r->pre) return FP4_ERR_UNSUPPORTED;
    return r->pre(w, d_q, d_d, d_y, stream);
}

int fp4_cu_project_has_pre(const fp4_cuda_tensor *w, fp4_mode mode) {
    int refused;
    const route *r = find_route(w, (int)mode, 1, &refused);
    return r && r->pre;
}

FP4_API size_t fp4_cuda_scratch_bytes(const fp4_cuda_tensor *w, int64_t n_cols) {
    if (!w || n_cols < 1) return 0;
    size_t need = 0;
    for (size_t i = 0; i < N_ROUTES; i++) {
        const route *r = &routes[i];
        if (!r->scratch || !keys_match(r, w, r->mode == MODE_ANY ? FP4_MODE_EXACT : r->mode)) continue;
        if (r->available && !r->available()) continue;
        const int64_t nc = n_cols < r->max_cols ? n_cols : r->max_cols;
        if (nc < r->min_cols) continue;
        const size_t b = r->scratch(w, nc);
        if (b > need) need = b;
    }
    return FP4_CU_COUNTER_BYTES + need;
}

} /* extern "C" */
