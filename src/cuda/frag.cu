/* frag.cu — the native A16 route on the tensor cores from the frag copy (frag.cuh): the copy's
 * making (fp4_cuda_tensor_make_frag) and the route the dispatch table names for 1 to 8 columns
 * ("nvfp4.a16.native.frag", taken where the tensor has its frag copy). Where one launch's shared
 * memory cannot hold 8 columns of a long row's activations (down's 14 336 values), every call on the
 * tensor splits K into parts (frag_parts: 4 for down) and adds the parts' sums in a second launch
 * (session 11; before, the tile route served down from 3 columns); where not even that fits, the
 * columns go in halves, and where not even one column fits, the tile route (a16_native.cu). bench/gpu.md
 * ("Session 9") has the measurements behind the kernel's shape. */
#include "frag.cuh"

/* the launch shape, the fastest the lab found (bench/gpu.md "Session 9"): 16 warps, one item a warp
 * per stage, 3 stages */
#define FRAG_NW 16
#define FRAG_IPW 1
#define FRAG_NST 3
template <int NCP>
static fp4_status frag_launch(const fp4_cuda_tensor *w, const float *x, int64_t nc, float *y, float *parts,
                              cudaStream_t s) {
    return launch_frag<FRAG_NW, FRAG_IPW, FRAG_NST, NCP>(w, w->d_frag, x, nc, y, parts, s, 1);
}
/* 1 when one launch of NCP columns fits the shared memory (launch_frag's own rule) */
template <int NCP> static int frag_fits(const fp4_cuda_tensor *w) {
    return frag_plan<FRAG_NW, FRAG_IPW, FRAG_NST, NCP>(w, NULL, NULL, NULL) == FP4_OK;
}

static fp4_status frag_cols(const fp4_cuda_tensor *w, const float *x, int64_t nc, float *y, float *parts,
                            cudaStream_t s) {
    fp4_status st;
    if (nc == 1)
        st = frag_launch<1>(w, x, nc, y, parts, s);
    else if (nc == 2)
        st = frag_launch<2>(w, x, nc, y, parts, s);
    else if (nc <= 4)
        st = frag_launch<4>(w, x, nc, y, parts, s);
    else
        st = frag_launch<8>(w, x, nc, y, parts, s);
    if (st != FP4_ERR_UNSUPPORTED || nc == 1) return st;
    const int64_t h = (nc + 1) / 2; /* the activations of nc columns do not fit: two halves */
    FP4_CU_TRY(frag_cols(w, x, h, y, parts, s));
    return frag_cols(w, x + h * w->n_in, nc - h, y + h * w->n_out, parts, s);
}

/* the K parts' sums of a call of nc columns (frag_parts > 1), in the scratch after the counters */
static size_t frag_parts_bytes(const fp4_cuda_tensor *w, int64_t nc) {
    const int kp = frag_parts<FRAG_NW, FRAG_IPW, FRAG_NST>(w);
    return kp > 1 ? FP4_CU_ALIGN((size_t)kp * (size_t)nc * (size_t)w->n_out * 4) : 0;
}

extern "C" {

size_t fp4_cu_a16_frag_scratch(const fp4_cuda_tensor *w, int64_t n_cols) {
    if (!w || n_cols < 1) return 0;
    const size_t a = fp4_cu_a16_native_scratch(w, n_cols); /* the tile route's, where frag declines */
    const size_t b = w->frag_bytes && n_cols <= FRAG_MAX_COLS ? frag_parts_bytes(w, n_cols) : 0;
    return a > b ? a : b;
}

FP4_API fp4_status fp4_cuda_tensor_make_frag(fp4_cuda_tensor *t) {
    if (!t) return FP4_ERR_INVALID_ARG;
    if (t->type != FP4_TYPE_NVFP4_E2M1 || t->input_scale_inv > 0.0f || !t->d_payload || !t->d_scales ||
        t->k_pad % 256 || t->k_pad < t->n_in || t->n_out < 1)
        return FP4_ERR_UNSUPPORTED;
    if (t->d_frag) return FP4_OK;
    if (!stream_device_ok()) return FP4_ERR_UNSUPPORTED;
    const size_t bytes = frag_bytes(t->n_out, t->k_pad);
    uint8_t *f = NULL;
    FP4_CUDA_CHECK(cudaMalloc((void **)&f, bytes));
    fp4_status st = frag_repack(t, f, 0);
    if (st == FP4_OK) {
        const cudaError_t e = cudaDeviceSynchronize();
        if (e != cudaSuccess) st = FP4_CUDA_FAIL(e, "cudaDeviceSynchronize(frag repack)");
    }
    if (st != FP4_OK) {
        cudaFree(f);
        return st;
    }
    t->d_frag = f;
    t->frag_bytes = bytes;
    return FP4_OK;
}

int fp4_cu_frag_takes(const fp4_cuda_tensor *w, int64_t n_cols) {
    if (w->frag_bytes == 0 || n_cols < 1 || n_cols > FRAG_MAX_COLS || (w->flags & FP4_CUDA_TENSOR_INVARIANT))
        return 0;
    return n_cols == 1   ? frag_fits<1>(w)
           : n_cols == 2 ? frag_fits<2>(w)
           : n_cols <= 4 ? frag_fits<4>(w)
                         : frag_fits<8>(w);
}

fp4_status fp4_cu_a16_frag(const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols, float *d_y,
                           const fp4_cuda_scratch *s, cudaStream_t stream) {
    if (!w || !d_x || !d_y || n_cols < 1 || n_cols > FRAG_MAX_COLS) return FP4_ERR_INVALID_ARG;
    if (!w->d_frag) return FP4_ERR_INVALID_ARG;
    float *parts = NULL;
    const size_t pb = frag_parts_bytes(w, n_cols);
    if (pb) {
        if (!s || !s->d_base || s->bytes < FP4_CU_COUNTER_BYTES + pb) return FP4_ERR_INVALID_ARG;
        parts = (float *)((uint8_t *)s->d_base + FP4_CU_COUNTER_BYTES);
    }
    const fp4_status st = frag_cols(w, d_x, n_cols, d_y, parts, stream);
    if (st != FP4_ERR_UNSUPPORTED) return st;
    return fp4_cu_a16_native(w, d_x, n_cols, d_y, s, stream);
}

} /* extern "C" */
