/*
 * fp4lane_cuda.h — the public header of fp4lane's CUDA backend (build/libfp4lane_cuda.a, `make
 * cuda`), linked beside the CPU library; it includes fp4lane.h (the split of ggml.h / ggml-cuda.h).
 * Valid C11 and C++; needs no CUDA header (fp4_cuda_stream is cudaStream_t's own type).
 *
 * Conventions (on top of fp4lane.h's)
 *   - device pointers carry a d_ prefix;
 *   - every call checks shapes and alignment first (FP4_ERR_INVALID_ARG / FP4_ERR_SHAPE) and turns
 *     any CUDA failure into FP4_ERR_CUDA, whose detail (the failing call, cudaGetErrorString, file
 *     and line) fp4_cuda_last_error() returns in the same thread;
 *   - kernels are enqueued on `stream` (NULL = the legacy default stream) and the call returns
 *     without waiting, except the upload/alloc/free calls, which are synchronous;
 *   - one entry point for projections, fp4_cuda_project(), whose table is the only place a
 *     kernel is named; it takes the CPU table's fp4_mode and refuses the same keys with the same
 *     status as fp4_cpu_project().
 */
#ifndef FP4LANE_CUDA_H
#define FP4LANE_CUDA_H

#include "fp4lane.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct CUstream_st *fp4_cuda_stream;   /* the same type as cudaStream_t */

/* ---- errors ---------------------------------------------------------------------------------- */
/* The detail of the calling thread's last FP4_ERR_CUDA, e.g. "cudaMalloc(&p, bytes): out of memory
 * (fp4_cuda_scratch_alloc, src/cuda/device.cu:171)"; "" when no call of this thread has failed
 * with FP4_ERR_CUDA. Valid until the thread's next failing call (successful calls leave it).
 * A CLI prints it after fp4_status_str() whenever a call returns FP4_ERR_CUDA. */
FP4_API const char *fp4_cuda_last_error(void);

/* ---- devices --------------------------------------------------------------------------------- */
typedef struct fp4_cuda_device_info {
    char name[256];
    int cc_major, cc_minor;     /* compute capability; kernels need >= 8.0, tuned for 9.0 */
    int sm_count;
    size_t global_mem_bytes;
    size_t l2_bytes;
} fp4_cuda_device_info;

/* FP4_OK when at least one device of compute capability >= 8.0 is usable; FP4_ERR_NO_DEVICE
 * without a GPU (or driver), never FP4_ERR_CUDA. */
FP4_API fp4_status fp4_cuda_available(void);
FP4_API fp4_status fp4_cuda_device_count(int *count);
/* Make `device` current for the calling thread and describe it (info may be NULL). */
FP4_API fp4_status fp4_cuda_init(int device, fp4_cuda_device_info *info);

/* ---- tensors --------------------------------------------------------------------------------- */
/* A weight on the device: what kernels and the dispatch read. Plain data; an uploaded tensor
 * owns one cudaMalloc arena (d_arena) released by fp4_cuda_tensor_free(). A caller may also fill
 * one by hand over its own device memory (d_arena = NULL) if it keeps the layout below. */
typedef struct fp4_cuda_tensor {
    int64_t type;              /* FP4_TYPE_NVFP4_E2M1 (payload + E4M3FN scales), FP4_TYPE_F16,
                                  FP4_TYPE_BF16, FP4_TYPE_Q4_K, FP4_TYPE_Q6_K, or
                                  FP4_TYPE_F8_E4M3FN (FP8: see fp4_cuda_tensor_upload_fp8)       */
    int64_t n_out, n_in;       /* rows, values per row                                           */
    int64_t k_pad;             /* NVFP4: n_in rounded up to 256; the padding holds code 0 and
                                  scale byte 0x00 (value 0), so every kernel may read whole
                                  256-value super-blocks. Others: n_in.                          */
    const uint8_t *d_payload;  /* NVFP4: (n_out, k_pad/2) E2M1 pairs, low nibble = even element;
                                  F16/BF16: (n_out, n_in) 2-byte values; Q4_K/Q6_K: (n_out,
                                  n_in/256) ggml blocks                                          */
    const uint8_t *d_scales;   /* NVFP4: (n_out, k_pad/16) E4M3FN; NULL for the other types      */
    int64_t payload_stride;    /* bytes between rows of d_payload (NVFP4: multiple of 128)       */
    int64_t scale_stride;      /* bytes between rows of d_scales (NVFP4: multiple of 16)         */
    float scale2;              /* NVFP4 tensor scale, finite > 0                                 */
    float input_scale_inv;     /* NVFP4: 0 = W4A16, > 0 = W4A4 (SPEC §5)                         */
    void *d_arena;             /* owned allocation, NULL when borrowed                           */
    size_t arena_bytes;
    const uint8_t *d_frag;     /* NVFP4: the native route's tensor-core copy (fp4_cuda_tensor_make_frag),
                                  NULL when none; owned, freed by fp4_cuda_tensor_free            */
    size_t frag_bytes;
    uint32_t flags;            /* FP4_CUDA_TENSOR_*; 0 from every upload                          */
} fp4_cuda_tensor;
/* fp4_cuda_tensor.flags: a call of n columns gives every column the bits a 1-column call gives it
 * (fp4_cuda_project skips routes that would not; what speculative decoding's verify steps need) */
#define FP4_CUDA_TENSOR_INVARIANT 1u

/* Upload an NVFP4 view into one zeroed arena, rows padded to k_pad, refusing what
 * fp4_nvfp4_view_check refuses (no other kernel ever sees a NaN scale): the shape and scales are
 * checked on the host first, every scale byte on the device as it arrives (FP4_ERR_NAN_SCALE,
 * nothing kept). The rows go through two pinned buffers of at most 32 MiB held only during the
 * call. A view of llama.cpp's type-40 blocks (FP4_PACK_GGML64, from FP4_LOAD_DEFER_REPACK) is
 * repacked on the device: the arena's bytes are those the upload of the same weights in canonical
 * rows leaves. */
FP4_API fp4_status fp4_cuda_tensor_upload_nvfp4(const fp4_nvfp4_view *w, fp4_cuda_tensor *out);
/* The native A16 route's second copy of an uploaded W4A16 NVFP4 tensor (t->d_frag): the same bytes
 * repacked on the device into the tensor cores' fragment order (src/cuda/frag.cuh), from which
 * fp4_cuda_project(FP4_MODE_NATIVE) serves 1 to 8 columns in one pass over the weights. It costs
 * another 4.5 bits a weight of device memory; exact mode never reads it. FP4_ERR_UNSUPPORTED for
 * other types, W4A4 tensors, and devices without the sm_90a code. Idempotent. */
FP4_API fp4_status fp4_cuda_tensor_make_frag(fp4_cuda_tensor *t);
/* Upload n_out rows of n_in values of type F16, BF16 (2-byte values) or Q4_K/Q6_K (blocks;
 * n_in % 256 == 0). */
FP4_API fp4_status fp4_cuda_tensor_upload(int64_t type, const void *host_data, int64_t n_out, int64_t n_in,
                                          fp4_cuda_tensor *out);
/* Upload an FP8 weight (type FP4_TYPE_F8_E4M3FN with its fp4_fp8_view, as the loader gives it;
 * n_in % 8 == 0): type FP4_TYPE_F8_E4M3FN, d_payload (n_out, n_in) bf16 values widened exactly
 * from the E4M3FN bytes, d_scales n_out f32 row scales (the per-tensor scale repeated),
 * scale2 = the per-tensor scale (0 when per-channel). NaN bytes and bad scales are refused. */
FP4_API fp4_status fp4_cuda_tensor_upload_fp8(const fp4_tensor *w, fp4_cuda_tensor *out);
FP4_API void fp4_cuda_tensor_free(fp4_cuda_tensor *t);   /* NULL and borrowed tensors are fine */

/* ---- scratch --------------------------------------------------------------------------------- */
/* Device scratch for activation quantization and split-K partials. Zeroed at allocation; kernels
 * leave its counter region zero. One scratch serves one stream at a time. */
typedef struct fp4_cuda_scratch {
    void *d_base;
    size_t bytes;
} fp4_cuda_scratch;
/* Bytes any route of fp4_cuda_project() (either mode) needs for w and up to n_cols columns. */
FP4_API size_t fp4_cuda_scratch_bytes(const fp4_cuda_tensor *w, int64_t n_cols);
FP4_API fp4_status fp4_cuda_scratch_alloc(size_t bytes, fp4_cuda_scratch *s);
FP4_API void fp4_cuda_scratch_free(fp4_cuda_scratch *s);

/* ---- projections ----------------------------------------------------------------------------- */
/* The projection entry point, the twin of fp4_cpu_project: y (n_cols columns of n_out f32,
 * column c at d_y + c*n_out) = W x (column c of x at d_x + c*n_in). The kernel comes from one
 * table keyed by (w->type, mode, activation precision = input_scale_inv > 0 ? nvfp4 : a16,
 * n_cols); any n_cols >= 1 is served (wide calls run in chunks). d_x and d_y 16-byte aligned.
 * FP4_MODE_EXACT is bit-identical to the CPU oracle (SPEC §4 / §5); FP4_MODE_NATIVE is the fast
 * A16 path (SPEC §6); W4A4 tensors always run exact. FP4_ERR_REFUSED_ROUTE, as on the CPU, when a
 * route of these keys exists but refuses the shape (exact A16 needs n_in % 256 == 0: use
 * FP4_MODE_NATIVE); FP4_ERR_UNSUPPORTED when no route serves the type. */
FP4_API fp4_status fp4_cuda_project(const fp4_cuda_tensor *w, fp4_mode mode, const float *d_x, int64_t n_cols,
                                    float *d_y, const fp4_cuda_scratch *scratch, fp4_cuda_stream stream);
/* The table's choice for these keys (a static string; "none" when no route serves them). */
FP4_API const char *fp4_cuda_route_name(const fp4_cuda_tensor *w, fp4_mode mode, int64_t n_cols);

/* ---- the other device operations ----------------------------------------------------------- */
/* Rows [row0, row0+n_rows) dequantized in the pinned order into dst_type = FP4_TYPE_F32, F16 or
 * BF16 (RNE from the f32 value): (n_rows, n_in) contiguous at d_dst. */
FP4_API fp4_status fp4_cuda_nvfp4_dequant(const fp4_cuda_tensor *w, int64_t row0, int64_t n_rows,
                                          int64_t dst_type, void *d_dst, fp4_cuda_stream stream);
/* n_cols columns of n values (n % 256 == 0) to Q8_K blocks, bits identical to fp4_q8_K_quantize
 * (an all-zero super-block gives an all-zero block). */
FP4_API fp4_status fp4_cuda_q8_K_quantize(const float *d_x, int64_t n, int64_t n_cols, fp4_block_q8_K *d_dst,
                                          fp4_cuda_stream stream);
/* W4A4 activation quantization, bits identical to fp4_nvfp4_quantize_act, per column:
 * d_codes (n_cols, n_in/2), d_scales (n_cols, n_in/16). */
FP4_API fp4_status fp4_cuda_nvfp4_quantize_act(const float *d_x, int64_t n_in, int64_t n_cols,
                                               float input_scale_inv, uint8_t *d_codes, uint8_t *d_scales,
                                               fp4_cuda_stream stream);
/* Embedding lookup: the rows d_ids[0..n_ids) of an F16, BF16 or NVFP4 table -> f32 (n_ids, n_in)
 * at d_out; NVFP4 rows use the pinned dequantization order. The ids live on the device and are
 * not seen by the host: an id outside [0, n_out) yields a row of zeros. */
FP4_API fp4_status fp4_cuda_embed(const fp4_cuda_tensor *w, const int32_t *d_ids, int64_t n_ids, float *d_out,
                                  fp4_cuda_stream stream);
/* Greedy argmax of rows: d_out[r] = the first index of the largest of the V floats at d_x + r*ld,
 * NaN never chosen, 0 when every value is NaN or -inf (fp4_sampler_sample's greedy choice).
 * d_nonfinite (may be NULL): d_nonfinite[r] = 1 when row r holds a NaN or an infinity, else 0.
 * d_work: fp4_cuda_argmax_work_bytes(rows) bytes of device memory, 8-aligned, zeroed before the
 * first call and left zeroed by each; one call at a time per work buffer. */
FP4_API size_t fp4_cuda_argmax_work_bytes(int64_t rows);
FP4_API fp4_status fp4_cuda_argmax_rows(const float *d_x, int64_t rows, int64_t V, int64_t ld, void *d_work,
                                        int32_t *d_out, int32_t *d_nonfinite, fp4_cuda_stream stream);

#ifdef __cplusplus
}
#endif

#endif /* FP4LANE_CUDA_H */
