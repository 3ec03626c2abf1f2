/* dispatch.cu — the projection dispatch: one table keyed by (tensor type, mode, activation
 * precision, column count) -> launcher. First matching row wins; a row may also demand a shape
 * property (n_in % 64 for the W4A4 tile). The runtime calls fp4_cuda_project() and never a kernel
 * by name (ARCHITECTURE.md). */
#include "common.cuh"

typedef enum { ACT_ANY = -1, ACT_A16 = 0, ACT_NVFP4 = 1 } act_key;
typedef enum { MODE_ANY = -1 } mode_key;

typedef fp4_status (*route_fn)(const fp4_cuda_tensor *w, const float *x, int64_t n_cols, float *y,
                               const fp4_cuda_scratch *s, cudaStream_t stream);

typedef struct route {
    int64_t type;
    int mode;            /* fp4_cuda_mode or MODE_ANY */
    int act;             /* act_key */
    int64_t min_cols, max_cols;
    int64_t n_in_multiple; /* 0: any */
    route_fn fn;
    const char *name;
} route;

static fp4_status r_a16_exact(const fp4_cuda_tensor *w, const float *x, int64_t n, float *y, const fp4_cuda_scratch *s,
                              cudaStream_t st) {
    return fp4_cu_a16_exact(21, w, x, n, y, s, st); /* round 6: dp4a at 1 column, integer MMA (exact.20) from 2 */
}
static fp4_status r_native(const fp4_cuda_tensor *w, const float *x, int64_t n, float *y, const fp4_cuda_scratch *s,
                           cudaStream_t st) {
    return fp4_cu_native(17, w, x, n, y, s, st); /* round 5: native1 at 1 column, 14 above */
}
static fp4_status r_w4a4_tile(const fp4_cuda_tensor *w, const float *x, int64_t n, float *y, const fp4_cuda_scratch *s,
                              cudaStream_t st) {
    return fp4_cu_w4a4(3, w, x, n, y, s, st); /* round 4: 8-warp IMMA, int32 fast weighting (was 2) */
}
static fp4_status r_w4a4(const fp4_cuda_tensor *w, const float *x, int64_t n, float *y, const fp4_cuda_scratch *s,
                         cudaStream_t st) {
    return fp4_cu_w4a4(1, w, x, n, y, s, st);
}
static fp4_status r_dense(const fp4_cuda_tensor *w, const float *x, int64_t n, float *y, const fp4_cuda_scratch *s,
                          cudaStream_t st) {
    return fp4_cuda_matvec_dense(w, x, n, y, (fp4_cuda_stream)st);
}
static fp4_status r_kquant(const fp4_cuda_tensor *w, const float *x, int64_t n, float *y, const fp4_cuda_scratch *s,
                           cudaStream_t st) {
    return fp4_cuda_matvec_kquant(w, x, n, y, (fp4_cuda_stream)st);
}

#define NO_MAX INT64_MAX
static const route routes[] = {
    /* NVFP4, W4A4 (input_scale_inv present): always the exact integer contraction */
    {FP4_TYPE_NVFP4_E2M1, MODE_ANY, ACT_NVFP4, 16, 16, 64, r_w4a4_tile, "nvfp4.w4a4.tile16"},
    {FP4_TYPE_NVFP4_E2M1, MODE_ANY, ACT_NVFP4, 1, NO_MAX, 0, r_w4a4, "nvfp4.w4a4.dp4a"},
    /* NVFP4, W4A16 */
    {FP4_TYPE_NVFP4_E2M1, FP4_CUDA_EXACT, ACT_A16, 1, NO_MAX, 256, r_a16_exact, "nvfp4.a16.exact.dp4a"},
    {FP4_TYPE_NVFP4_E2M1, FP4_CUDA_NATIVE, ACT_A16, 1, NO_MAX, 0, r_native, "nvfp4.a16.native.mma"},
    /* unquantized and kquant lanes: one kernel whatever the mode */
    {FP4_TYPE_F16, MODE_ANY, ACT_ANY, 1, NO_MAX, 0, r_dense, "f16.dense"},
    {FP4_TYPE_BF16, MODE_ANY, ACT_ANY, 1, NO_MAX, 0, r_dense, "bf16.dense"},
    {FP4_TYPE_Q4_K, MODE_ANY, ACT_ANY, 1, NO_MAX, 0, r_kquant, "q4_K.float"},
    {FP4_TYPE_Q6_K, MODE_ANY, ACT_ANY, 1, NO_MAX, 0, r_kquant, "q6_K.float"},
};

static const route *find_route(const fp4_cuda_tensor *w, int mode, int64_t n_cols) {
    if (!w || n_cols < 1) return NULL;
    const int act = (w->type == FP4_TYPE_NVFP4_E2M1 && w->input_scale_inv > 0.0f) ? ACT_NVFP4 : ACT_A16;
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        const route *r = &routes[i];
        if (r->type != w->type) continue;
        if (r->mode != MODE_ANY && r->mode != mode) continue;
        if (r->act != ACT_ANY && r->act != act) continue;
        if (n_cols < r->min_cols || n_cols > r->max_cols) continue;
        if (r->n_in_multiple && w->n_in % r->n_in_multiple) continue;
        return r;
    }
    return NULL;
}

extern "C" {

FP4_API const char *fp4_cuda_route_name(const fp4_cuda_tensor *w, fp4_cuda_mode mode, int64_t n_cols) {
    const route *r = find_route(w, (int)mode, n_cols);
    return r ? r->name : "none";
}

FP4_API fp4_status fp4_cuda_project(const fp4_cuda_tensor *w, fp4_cuda_mode mode, const float *d_x, int64_t n_cols,
                                    float *d_y, const fp4_cuda_scratch *scratch, fp4_cuda_stream stream) {
    if (!w || !d_x || !d_y || n_cols < 1) return FP4_ERR_INVALID_ARG;
    if (mode != FP4_CUDA_EXACT && mode != FP4_CUDA_NATIVE) return FP4_ERR_INVALID_ARG;
    const route *r = find_route(w, (int)mode, n_cols);
    if (!r) return w->type == FP4_TYPE_NVFP4_E2M1 && mode == FP4_CUDA_EXACT ? FP4_ERR_SHAPE : FP4_ERR_UNSUPPORTED;
    return r->fn(w, d_x, n_cols, d_y, scratch, (cudaStream_t)stream);
}

} /* extern "C" */
