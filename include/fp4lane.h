/*
 * fp4lane.h — the one public header of fp4lane.
 *
 * fp4lane loads, validates, quantizes and runs LLM weights in NVIDIA's NVFP4 format
 * (E2M1 values, one E4M3FN scale per 16 values, one f32 scale2 per tensor: 4.5 bits/weight).
 * The numeric contract is ../shared/SPEC.md; section numbers below (§n) refer to it.
 *
 * Conventions
 *   - every fallible call returns fp4_status (FP4_OK == 0); fp4_status_str() names it;
 *   - calls that read files fill a caller-owned fp4_error with file, tensor and rule;
 *   - the library never prints and never exits; it allocates only where a call says so;
 *   - every _open/_create has one _close/_free that accepts NULL;
 *   - integers in files are little-endian and decoded explicitly; sizes are int64_t/size_t.
 *
 * NVFP4 bytes (§2): a tensor of n_out rows × n_in values (n_in % 16 == 0) is
 *   payload  n_out × n_in/2 bytes, byte j of a row = element 2j (low nibble), 2j+1 (high);
 *   scales   n_out × n_in/16 E4M3FN bytes, one per 16 consecutive elements of a row;
 *   scale2   one f32, finite and > 0;
 *   input_scale_inv  optional f32, finite and > 0; present <=> W4A4 (§5).
 * Dequantization order is pinned: w = (e2m1(code) * e4m3fn(scale)) * scale2, in f32.
 */
#ifndef FP4LANE_H
#define FP4LANE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define FP4_API
#else
#define FP4_API __attribute__((visibility("default")))
#endif

#define FP4LANE_VERSION_MAJOR 0
#define FP4LANE_VERSION_MINOR 1
#define FP4LANE_VERSION_PATCH 0
#define FP4LANE_VERSION_STRING "0.1.0"

/* ------------------------------------------------------------------------------------------ */
/* Status codes. Values are pinned: append only.                                              */

typedef enum fp4_status {
    FP4_OK = 0,
    FP4_ERR_INVALID_ARG = 1,  /* a caller's argument is out of its documented domain      */
    FP4_ERR_NOMEM = 2,        /* an allocation failed                                     */
    FP4_ERR_IO = 3,           /* open/read/write/mmap failed (errno in the message)        */
    FP4_ERR_FORMAT = 4,       /* bytes do not follow the container's grammar               */
    FP4_ERR_TRUNCATED = 5,    /* the file ends before a declared field or region           */
    FP4_ERR_LIMIT = 6,        /* a count, length or size is above a named FP4_MAX_* limit   */
    FP4_ERR_OVERFLOW = 7,     /* size arithmetic from file values would overflow           */
    FP4_ERR_UNSUPPORTED = 8,  /* well-formed but not handled (a type, a version, a route)  */
    FP4_ERR_SHAPE = 9,        /* a shape is not what the contract requires                 */
    FP4_ERR_DTYPE = 10,       /* a tensor has the wrong element type                       */
    FP4_ERR_NAN_SCALE = 11,   /* an E4M3FN scale byte is 0x7F or 0xFF                      */
    FP4_ERR_SCALE2 = 12,      /* scale2 / input scale not a finite positive normal scalar  */
    FP4_ERR_COMPANION = 13,   /* a companion tensor is missing, duplicated or foreign      */
    FP4_ERR_LANE = 14,        /* lane metadata and tensor types disagree                   */
    FP4_ERR_NONFINITE = 15,   /* an input to the quantizer holds NaN or Inf                */
    FP4_ERR_NOT_FOUND = 16,   /* a named tensor or key does not exist                      */
    FP4_ERR_DUPLICATE = 17,   /* a name appears twice                                      */
    FP4_ERR_BOUNDS = 18,      /* a data region lies outside the file or overlaps another   */
    FP4_ERR_CUDA = 19,        /* a CUDA call failed                                        */
    FP4_ERR_NO_DEVICE = 20,   /* no CUDA device, or the library was built without CUDA     */
    FP4_ERR_REFUSED_ROUTE = 21, /* a measured, unqualified route (SPEC §9)                 */
    FP4_STATUS_COUNT_ = 22
} fp4_status;

FP4_API const char *fp4_status_str(fp4_status s);
FP4_API const char *fp4_version(void);

/* Error detail for calls that read files. Caller-owned; filled on failure (code != FP4_OK).
 * rule is a short stable identifier (e.g. gguf.magic, nvfp4.scale-nan) that tests match. */
typedef struct fp4_error {
    fp4_status code;
    char file[256];
    char tensor[128];
    char rule[64];
    char msg[512];
} fp4_error;

/* ------------------------------------------------------------------------------------------ */
/* Limits (named, checked wherever a value comes from a file).                                */

#define FP4_MAX_N_IN (1 << 20)          /* W4A4 int64 row sum stays exact below this        */
#define FP4_MAX_DIMS 4
#define FP4_MAX_NAME 256                /* tensor name bytes (GGUF/safetensors)             */
#define FP4_MAX_KEY 65535               /* GGUF metadata key bytes                          */
#define FP4_MAX_STRING (64u << 20)      /* one metadata string value                        */
#define FP4_MAX_ARRAY (64u << 20)       /* elements of one metadata array                   */
#define FP4_MAX_TENSORS 1000000         /* tensors in one file                              */
#define FP4_MAX_KV 1000000              /* metadata pairs in one GGUF                       */
#define FP4_MAX_ST_HEADER (100u << 20)  /* safetensors JSON header bytes                    */
#define FP4_MAX_SHARDS 4096

/* ------------------------------------------------------------------------------------------ */
/* Element types. Ids below 1024 are ggml's GGUF type ids; fp4lane's own ids are >= 1024,     */
/* fixed once and never reused. (§7)                                                          */

typedef enum fp4_type {
    FP4_TYPE_F32 = 0,
    FP4_TYPE_F16 = 1,
    FP4_TYPE_Q8_0 = 8,
    FP4_TYPE_Q4_K = 12,
    FP4_TYPE_Q6_K = 14,
    FP4_TYPE_Q8_K = 15,
    FP4_TYPE_I8 = 24,
    FP4_TYPE_I16 = 25,
    FP4_TYPE_I32 = 26,
    FP4_TYPE_I64 = 27,
    FP4_TYPE_F64 = 28,
    FP4_TYPE_BF16 = 30,
    FP4_TYPE_GGML_NVFP4 = 40,     /* ggml: 36-byte blocks of 64 values (see §7)               */
    FP4_TYPE_NVFP4_E2M1 = 1024,   /* fp4lane: packed E2M1 payload, 2 values per byte          */
    FP4_TYPE_F8_E4M3FN = 1025,    /* fp4lane: E4M3FN block scales, 1 per byte                 */
    FP4_TYPE_U8 = 1026            /* fp4lane: raw bytes (safetensors U8)                      */
} fp4_type;

typedef struct fp4_type_info {
    fp4_type type;
    const char *name;      /* "f32", "nvfp4_e2m1", ...                                      */
    int64_t block_size;    /* values per block                                              */
    int64_t type_size;     /* bytes per block                                               */
} fp4_type_info;

/* NULL for an id fp4lane does not know. */
FP4_API const fp4_type_info *fp4_type_get(int64_t type_id);
/* Bytes of one row of n values; FP4_ERR_SHAPE when n is not a multiple of the block size,
 * FP4_ERR_OVERFLOW when the byte count does not fit. */
FP4_API fp4_status fp4_type_row_size(int64_t type_id, int64_t n, size_t *bytes);

/* ------------------------------------------------------------------------------------------ */
/* Scalar codecs (§1). Exhaustively tested.                                                   */

FP4_API float fp4_e2m1_decode(uint8_t code);         /* low 4 bits used; 8 -> -0.0            */
FP4_API int fp4_e2m1_q1(uint8_t code);               /* value in units of 2^-1, signed         */
FP4_API uint8_t fp4_e2m1_encode(float x);            /* §3 step 5, ties to even, NaN -> 7      */

FP4_API float fp4_e4m3fn_decode(uint8_t b);          /* 0x7F/0xFF -> NaN                       */
FP4_API int fp4_e4m3fn_is_nan(uint8_t b);
FP4_API int32_t fp4_e4m3fn_q9(uint8_t b);            /* units of 2^-9; 0 for the NaN bytes     */
/* RNE, saturating at ±448; NaN -> 0x7F; |x| below half the smallest subnormal -> ±0. */
FP4_API uint8_t fp4_e4m3fn_encode(float x);

FP4_API float fp4_f16_to_f32(uint16_t h);
FP4_API uint16_t fp4_f32_to_f16(float f);            /* RNE, subnormals, Inf, NaN kept quiet   */
FP4_API float fp4_bf16_to_f32(uint16_t h);
FP4_API uint16_t fp4_f32_to_bf16(float f);           /* RNE, NaN kept quiet                    */
FP4_API float fp4_round_f16(float f);                /* (float)(half)f: the F16 output boundary */

/* ------------------------------------------------------------------------------------------ */
/* The in-memory NVFP4 tensor every layer passes around (ARCHITECTURE.md).                    */

typedef struct fp4_nvfp4_view {
    const uint8_t *payload;   /* (n_out, n_in/2)  E2M1 pairs, low nibble = even element      */
    const uint8_t *scales;    /* (n_out, n_in/16) E4M3FN                                     */
    float scale2;             /* finite, > 0                                                 */
    float input_scale_inv;    /* 0 when absent (W4A16); finite > 0 when present (W4A4)       */
    int64_t n_out;
    int64_t n_in;             /* multiple of 16                                              */
} fp4_nvfp4_view;

/* Checks shape (n_in % 16, limits), scale2/input scale, and every scale byte (no 0x7F/0xFF).
 * The first violation is returned; bad_row and bad_col (may be NULL) locate a bad scale byte. */
FP4_API fp4_status fp4_nvfp4_view_check(const fp4_nvfp4_view *w, int64_t *bad_row, int64_t *bad_col);

/* Row dequantization in the pinned order. n % 16 == 0. */
FP4_API fp4_status fp4_nvfp4_dequant_row(const uint8_t *payload, const uint8_t *scales, float scale2,
                                         int64_t n, float *dst);

/* ------------------------------------------------------------------------------------------ */
/* The ModelOpt-identical quantizer (§3).                                                     */

typedef enum fp4_src_dtype { FP4_SRC_F32 = 0, FP4_SRC_F16 = 1, FP4_SRC_BF16 = 2 } fp4_src_dtype;

typedef enum fp4_scale2_rule {
    FP4_SCALE2_GPU = 0,   /* fl32(amax * fl32(1/2688)): how NVIDIA's checkpoints are made (default) */
    FP4_SCALE2_CPU = 1    /* fl32(amax / 2688): ModelOpt run on a CPU                               */
} fp4_scale2_rule;

/* *amax = max(*amax, max |x|) over count values (widened exactly to f32). Call once per tensor
 * of a fusion group with the same accumulator. FP4_ERR_NONFINITE on NaN/Inf. */
FP4_API fp4_status fp4_amax_update(const void *src, fp4_src_dtype dt, int64_t count, float *amax);

/* scale2 from amax by the rule. The all-zero tensor (amax == 0) gets scale2 = 1.0 (documented
 * choice: its blocks then store 0x38 and zero codes, and the file loads). FP4_ERR_NONFINITE for
 * NaN/Inf amax; FP4_ERR_SCALE2 when a positive amax underflows scale2 to 0. */
FP4_API fp4_status fp4_scale2_from_amax(float amax, fp4_scale2_rule rule, float *scale2);

/* Quantize n_rows rows of n_in values (n_in % 16 == 0) against a given scale2 (§3 steps 3–5).
 * payload: n_rows × n_in/2 bytes; scales: n_rows × n_in/16 bytes. */
FP4_API fp4_status fp4_nvfp4_quantize(const void *src, fp4_src_dtype dt, int64_t n_rows, int64_t n_in,
                                      float scale2, uint8_t *payload, uint8_t *scales);

/* ------------------------------------------------------------------------------------------ */
/* Q8_K activations (§4 step 1; identical to ggml's quantize_row_q8_K_ref).                   */

#define FP4_QK_K 256
typedef struct fp4_block_q8_K {
    float d;                     /* 1/iscale; 0 for an all-zero super-block */
    int8_t qs[FP4_QK_K];
    int16_t bsums[FP4_QK_K / 16];
} fp4_block_q8_K;                /* 292 bytes, ggml's layout */

FP4_API fp4_status fp4_q8_K_quantize(const float *x, int64_t n, fp4_block_q8_K *dst);
FP4_API fp4_status fp4_q8_K_dequantize(const fp4_block_q8_K *src, int64_t n, float *dst);

/* ------------------------------------------------------------------------------------------ */
/* Contractions (§4–6). Matvec layout: x is n_cols columns of n_in floats (column c at         */
/* x + c*n_in), y is n_cols columns of n_out floats (y + c*n_out). n_threads <= 1: one thread. */

/* Exact A16 (§4): n_in % 256 == 0; F16 output boundary applied. Bit-identical everywhere. */
FP4_API fp4_status fp4_nvfp4_matvec_a16_exact(const fp4_nvfp4_view *w, const float *x, int64_t n_cols,
                                              float *y, int n_threads);
/* One row against an already-quantized activation (n_in/256 blocks); returns the F16-rounded f32. */
FP4_API float fp4_nvfp4_dot_a16_exact(const uint8_t *payload_row, const uint8_t *scales_row, float scale2,
                                      const fp4_block_q8_K *xq, int64_t n_in);

/* W4A4 activation quantization (§5 steps 1–2): each 16-group gets its own E4M3FN byte and codes,
 * against input_scale = 1/input_scale_inv. Packs like a weight row. */
FP4_API fp4_status fp4_nvfp4_quantize_act(const float *x, int64_t n_in, float input_scale_inv,
                                          uint8_t *codes, uint8_t *scales);
/* One row against quantized activations (§5 steps 3–4); returns the F16-rounded f32. */
FP4_API float fp4_nvfp4_dot_w4a4(const uint8_t *payload_row, const uint8_t *scales_row, float scale2,
                                 const uint8_t *act_codes, const uint8_t *act_scales, float input_scale_inv,
                                 int64_t n_in);
/* Exact W4A4 matvec (§5): w->input_scale_inv must be set; n_in % 16 == 0. */
FP4_API fp4_status fp4_nvfp4_matvec_w4a4(const fp4_nvfp4_view *w, const float *x, int64_t n_cols, float *y,
                                         int n_threads);

/* Float A16 reference (§6): Σ dequant(w)·x accumulated in double, rounded once to f32, no F16
 * boundary. The tolerance reference for native kernels. */
FP4_API fp4_status fp4_nvfp4_matvec_a16_float(const fp4_nvfp4_view *w, const float *x, int64_t n_cols,
                                              float *y, int n_threads);

/* Normalized error used to hold native kernels: sqrt(Σ(a-b)^2 / Σ b^2) (0 when both are 0). */
FP4_API double fp4_nrmse(const float *a, const float *b, int64_t n);

/* ------------------------------------------------------------------------------------------ */
/* kquant control lane: Q4_K and Q6_K (identical to ggml's reference).                        */
/* BEGIN kquant section */
/* END kquant section */

/* ------------------------------------------------------------------------------------------ */
/* Containers: GGUF and safetensors.                                                          */
/* BEGIN io section */
/* END io section */

/* ------------------------------------------------------------------------------------------ */
/* CUDA backend (build with `make cuda`; absent symbols return FP4_ERR_NO_DEVICE).            */
/* BEGIN cuda section */
/* END cuda section */

#ifdef __cplusplus
}
#endif

#endif /* FP4LANE_H */
