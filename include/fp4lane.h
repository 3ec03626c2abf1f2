/*
 * fp4lane.h — fp4lane's public header for the numbers and the checkpoints: status codes, element
 * types, the NVFP4 codecs and contractions, the K-quants, the fail-closed loader, layouts,
 * conversion and quantization. Container I/O (GGUF, safetensors, HF directories) is in
 * fp4lane_io.h; the engine in fp4lane_runtime.h; tokenizers in fp4lane_text.h; CUDA in
 * fp4lane_cuda.h.
 *
 * fp4lane loads, validates, quantizes and runs LLM weights in NVIDIA's NVFP4 format
 * (E2M1 values, one E4M3FN scale per 16 values, one f32 scale2 per tensor: 4.5 bits/weight).
 * The numeric contract is docs/SPEC.md; section numbers below (§n) refer to it.
 *
 * Conventions
 *   - every fallible call returns fp4_status (FP4_OK == 0); fp4_status_str() names it;
 *   - calls that read files fill a caller-owned fp4_error with file, tensor and rule;
 *   - the library never prints and never exits; it allocates only where a call says so;
 *   - every _open/_create has one _close/_free that accepts NULL;
 *   - integers in files are little-endian and decoded explicitly; counts and indices are int64_t
 *     (an index out of range gives NULL or a status, never undefined behaviour), byte sizes
 *     size_t/uint64_t;
 *   - _find(handle, name) returns a pointer or NULL; a lookup that returns an index is named
 *     _index and returns -1 when absent;
 *   - helpers that only tests and the exhaustive proofs use (integer codec forms, single-row
 *     dots, Q8_K dequantization) are declared only when FP4LANE_ORACLE_API is defined before
 *     this header is included; they are exported either way.
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
    FP4_TYPE_F8_E4M3FN = 1025,    /* fp4lane: E4M3FN block scales, 1 per byte; FP8 weights    */
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

/* Scalar codecs (§1). Exhaustively tested.                                                   */

FP4_API float fp4_e2m1_decode(uint8_t code);         /* low 4 bits used; 8 -> -0.0            */
FP4_API uint8_t fp4_e2m1_encode(float x);            /* §3 step 5, ties to even, NaN -> 7      */

FP4_API float fp4_e4m3fn_decode(uint8_t b);          /* 0x7F/0xFF -> NaN                       */
FP4_API int fp4_e4m3fn_is_nan(uint8_t b);
/* RNE, saturating at ±448; NaN -> 0x7F; |x| below half the smallest subnormal -> ±0. */
FP4_API uint8_t fp4_e4m3fn_encode(float x);

FP4_API float fp4_f16_to_f32(uint16_t h);
FP4_API uint16_t fp4_f32_to_f16(float f);            /* RNE, subnormals, Inf, NaN kept quiet   */
FP4_API float fp4_bf16_to_f32(uint16_t h);
FP4_API uint16_t fp4_f32_to_bf16(float f);           /* RNE, NaN kept quiet                    */
FP4_API float fp4_round_f16(float f);                /* (float)(half)f: the F16 output boundary */

/* The in-memory NVFP4 tensor every layer passes around (ARCHITECTURE.md).                    */

/* How a view's bytes are laid out. FP4_PACK_CANONICAL (the zero value: every view fp4lane makes
 * unless asked otherwise) is the payload and scale planes below. FP4_PACK_GGML64 is llama.cpp's
 * type 40 as the file holds it, given by a model opened with FP4_LOAD_DEFER_REPACK: payload points
 * at n_out rows of n_in/64 blocks of 36 bytes (4 E4M3FN scale bytes, one per 16 values, then 32
 * bytes of codes: byte 8s+j of sub-block s holds element 16s+j in the low nibble and 16s+j+8 in the
 * high one; ggml_pack.c), scales is NULL and n_in % 64 == 0. Only fp4_nvfp4_view_check,
 * fp4_tensor_dequant_rows and the CUDA upload (fp4_cuda_tensor_upload_nvfp4) read such a view;
 * every other consumer refuses it with FP4_ERR_UNSUPPORTED. */
typedef enum fp4_nvfp4_packing { FP4_PACK_CANONICAL = 0, FP4_PACK_GGML64 = 1 } fp4_nvfp4_packing;

typedef struct fp4_nvfp4_view {
    const uint8_t *payload;   /* (n_out, n_in/2)  E2M1 pairs, low nibble = even element      */
    const uint8_t *scales;    /* (n_out, n_in/16) E4M3FN                                     */
    float scale2;             /* finite, > 0                                                 */
    float input_scale_inv;    /* 0 when absent (W4A16); finite > 0 when present (W4A4)       */
    int64_t n_out;
    int64_t n_in;             /* multiple of 16                                              */
    fp4_nvfp4_packing packing; /* FP4_PACK_CANONICAL unless the loader deferred a repack      */
} fp4_nvfp4_view;

/* Checks shape (n_in % 16, limits; % 64 for FP4_PACK_GGML64), scale2/input scale, and every scale
 * byte (no 0x7F/0xFF; a GGML64 view's are read in place in its blocks). The first violation is
 * returned; bad_row and bad_col (may be NULL) locate a bad scale byte (col: its 16-value group). */
FP4_API fp4_status fp4_nvfp4_view_check(const fp4_nvfp4_view *w, int64_t *bad_row, int64_t *bad_col);

/* Row dequantization in the pinned order. n % 16 == 0. */
FP4_API fp4_status fp4_nvfp4_dequant_row(const uint8_t *payload, const uint8_t *scales, float scale2,
                                         int64_t n, float *dst);

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
 * choice: its blocks then store 0x38 and zero codes, and the file loads). So does a tensor so
 * small that the rule's scale2 is not a normal f32 (amax < 2688 * FLT_MIN, about 3.2e-35): it is
 * zero at NVFP4 precision, its values round to +-0, and the file loads (a subnormal scale2 would
 * be refused by every loader). FP4_ERR_NONFINITE for NaN/Inf amax. */
FP4_API fp4_status fp4_scale2_from_amax(float amax, fp4_scale2_rule rule, float *scale2);

/* Quantize n_rows rows of n_in values (n_in % 16 == 0) against a given scale2 (§3 steps 3–5).
 * payload: n_rows × n_in/2 bytes; scales: n_rows × n_in/16 bytes. */
FP4_API fp4_status fp4_nvfp4_quantize(const void *src, fp4_src_dtype dt, int64_t n_rows, int64_t n_in,
                                      float scale2, uint8_t *payload, uint8_t *scales);

/* Q8_K activations (§4 step 1; identical to ggml's quantize_row_q8_K_ref).                   */

#define FP4_QK_K 256
typedef struct fp4_block_q8_K {
    float d;                     /* 1/iscale; 0 for an all-zero super-block */
    int8_t qs[FP4_QK_K];
    int16_t bsums[FP4_QK_K / 16];
} fp4_block_q8_K;                /* 292 bytes, ggml's layout */

FP4_API fp4_status fp4_q8_K_quantize(const float *x, int64_t n, fp4_block_q8_K *dst);

/* Contractions (§4–6). Matvec layout: x is n_cols columns of n_in floats (column c at         */
/* x + c*n_in), y is n_cols columns of n_out floats (y + c*n_out). n_threads <= 1: one thread. */
/* Canonical views only: an FP4_PACK_GGML64 view gives FP4_ERR_UNSUPPORTED.                    */

/* Exact A16 (§4): n_in % 256 == 0; F16 output boundary applied. Bit-identical everywhere. */
FP4_API fp4_status fp4_nvfp4_matvec_a16_exact(const fp4_nvfp4_view *w, const float *x, int64_t n_cols,
                                              float *y, int n_threads);

/* W4A4 activation quantization (§5 steps 1–2): each 16-group gets its own E4M3FN byte and codes,
 * against input_scale = 1/input_scale_inv. Packs like a weight row. */
FP4_API fp4_status fp4_nvfp4_quantize_act(const float *x, int64_t n_in, float input_scale_inv,
                                          uint8_t *codes, uint8_t *scales);
/* Exact W4A4 matvec (§5): w->input_scale_inv must be set; n_in % 16 == 0. */
FP4_API fp4_status fp4_nvfp4_matvec_w4a4(const fp4_nvfp4_view *w, const float *x, int64_t n_cols, float *y,
                                         int n_threads);

/* Float A16 reference (§6): Σ dequant(w)·x accumulated in double, rounded once to f32, no F16
 * boundary. The tolerance reference for native kernels. */
FP4_API fp4_status fp4_nvfp4_matvec_a16_float(const fp4_nvfp4_view *w, const float *x, int64_t n_cols,
                                              float *y, int n_threads);

/* Normalized error used to hold native kernels: sqrt(Σ(a-b)^2 / Σ b^2) (0 when both are 0). */
FP4_API double fp4_nrmse(const float *a, const float *b, int64_t n);

/* kquant control lane: Q4_K and Q6_K (identical to ggml's reference).                        */
/* ggml's K-quant blocks, byte for byte (256 values per block; f16 fields are IEEE half bits in
 * host order, as ggml stores them). Quantize/dequantize are bit-identical to ggml's
 * quantize_row_q{4,6}_K_ref / dequantize_row_q{4,6}_K; the dots are bit-identical to
 * ggml_vec_dot_q{4,6}_K_q8_K_generic (the same f32 operations in the same order).
 *
 * Q4_K: 8 sub-blocks of 32; value = fp16(d)*sc[j]*q - fp16(dmin)*m[j], q in 0..15.
 *   scales: 6-bit sc/m; j < 4: sc = scales[j] & 63, m = scales[j+4] & 63;
 *           j >= 4: sc = (scales[j+4] & 15) | (scales[j-4] >> 6) << 4,
 *                   m  = (scales[j+4] >> 4) | (scales[j]   >> 6) << 4.
 *   qs[32c + l]: low nibble = element 64c + l, high nibble = element 64c + 32 + l.
 * Q6_K: 16 sub-blocks of 16; value = fp16(d)*scales[j]*(q - 32), q in 0..63. For each 128-value
 *   half h and l < 32 (ql/qh offset by 64h/32h): element 128h+l = ql[l] & 15 | (qh[l] & 3) << 4,
 *   +32: ql[l+32] & 15 | (qh[l]>>2 & 3) << 4, +64: ql[l] >> 4 | (qh[l]>>4 & 3) << 4,
 *   +96: ql[l+32] >> 4 | (qh[l]>>6 & 3) << 4. */
typedef struct fp4_block_q4_K {
    uint16_t d;              /* f16: super-scale of the 6-bit scales   */
    uint16_t dmin;           /* f16: super-scale of the 6-bit mins     */
    uint8_t scales[12];
    uint8_t qs[FP4_QK_K / 2];
} fp4_block_q4_K;            /* 144 bytes = 4.5 bits/weight */

typedef struct fp4_block_q6_K {
    uint8_t ql[FP4_QK_K / 2];   /* low 4 bits                          */
    uint8_t qh[FP4_QK_K / 4];   /* high 2 bits                         */
    int8_t scales[FP4_QK_K / 16];
    uint16_t d;                 /* f16 super-scale                     */
} fp4_block_q6_K;               /* 210 bytes = 6.5625 bits/weight */

#ifdef __cplusplus
static_assert(sizeof(fp4_block_q4_K) == 144, "block_q4_K is 144 bytes");
static_assert(sizeof(fp4_block_q6_K) == 210, "block_q6_K is 210 bytes");
#else
_Static_assert(sizeof(fp4_block_q4_K) == 144, "block_q4_K is 144 bytes");
_Static_assert(sizeof(fp4_block_q6_K) == 210, "block_q6_K is 210 bytes");
#endif

/* n values (n % 256 == 0, n >= 0) to/from n/256 blocks. FP4_ERR_SHAPE for a bad n,
 * FP4_ERR_INVALID_ARG for NULL (when n > 0), FP4_ERR_NONFINITE when x holds NaN/Inf (checked
 * before anything is written). Finite inputs give ggml's bytes exactly. */
FP4_API fp4_status fp4_q4_K_quantize(const float *x, int64_t n, fp4_block_q4_K *dst);
FP4_API fp4_status fp4_q4_K_dequantize(const fp4_block_q4_K *src, int64_t n, float *dst);
FP4_API fp4_status fp4_q6_K_quantize(const float *x, int64_t n, fp4_block_q6_K *dst);
FP4_API fp4_status fp4_q6_K_dequantize(const fp4_block_q6_K *src, int64_t n, float *dst);

/* y = W x for a weight of n_out rows × n_in values (n_in % 256 == 0), w = n_out rows of
 * n_in/256 blocks each. Same column layout as fp4_nvfp4_matvec_a16_exact; each column of x is
 * quantized to Q8_K once; rows are split over n_threads pthreads (<= 1: the calling thread).
 * Every y value equals fp4_q*_K_dot_q8_K of its row and column, whatever n_threads is. */
FP4_API fp4_status fp4_q4_K_matvec(const void *w, int64_t n_out, int64_t n_in, const float *x, int64_t n_cols,
                                   float *y, int n_threads);
FP4_API fp4_status fp4_q6_K_matvec(const void *w, int64_t n_out, int64_t n_in, const float *x, int64_t n_cols,
                                   float *y, int n_threads);

/* Oracle helpers: the integer forms and single-row dots that the exhaustive proofs and the     */
/* tests check the contractions against. Opt in with #define FP4LANE_ORACLE_API.               */
#ifdef FP4LANE_ORACLE_API
FP4_API int fp4_e2m1_q1(uint8_t code);               /* value in units of 2^-1, signed         */
FP4_API int32_t fp4_e4m3fn_q9(uint8_t b);            /* units of 2^-9; 0 for the NaN bytes     */
FP4_API fp4_status fp4_q8_K_dequantize(const fp4_block_q8_K *src, int64_t n, float *dst);
/* One row against an already-quantized activation (n_in/256 blocks); returns the F16-rounded f32. */
FP4_API float fp4_nvfp4_dot_a16_exact(const uint8_t *payload_row, const uint8_t *scales_row, float scale2,
                                      const fp4_block_q8_K *xq, int64_t n_in);
/* One row against quantized activations (§5 steps 3–4); returns the F16-rounded f32. */
FP4_API float fp4_nvfp4_dot_w4a4(const uint8_t *payload_row, const uint8_t *scales_row, float scale2,
                                 const uint8_t *act_codes, const uint8_t *act_scales, float input_scale_inv,
                                 int64_t n_in);
/* Dot of n values (n/256 blocks of each), what fp4_q{4,6}_K_matvec promise to equal. Returns NaN
 * for NULL or n not a non-negative multiple of 256; 0 for n == 0. */
FP4_API float fp4_q4_K_dot_q8_K(const fp4_block_q4_K *w, const fp4_block_q8_K *x, int64_t n);
FP4_API float fp4_q6_K_dot_q8_K(const fp4_block_q6_K *w, const fp4_block_q8_K *x, int64_t n);
#endif /* FP4LANE_ORACLE_API */

/* Checkpoints: layouts, the fail-closed loader, conversion and quantization (SPEC §7–8).     */

/* The four NVFP4 layouts of SPEC §7, plus unquantized checkpoints. */
typedef enum fp4_layout {
    FP4_LAYOUT_NONE = 0,        /* no NVFP4 tensors (f32/f16/bf16/q4_k weights)                  */
    FP4_LAYOUT_GGUF = 1,        /* fp4lane GGUF: NVFP4_E2M1 + .nvfp4_scale/.nvfp4_scale2/...      */
    FP4_LAYOUT_GGUF_GGML = 2,   /* llama.cpp GGUF: type 40 + .scale/.input_scale sidecars         */
    FP4_LAYOUT_MODELOPT = 3,    /* ModelOpt safetensors: weight/weight_scale/weight_scale_2       */
    FP4_LAYOUT_CT = 4,          /* compressed-tensors: weight_packed/weight_global_scale (1/s2)   */
    FP4_LAYOUT_COUNT_ = 5
} fp4_layout;

FP4_API const char *fp4_layout_name(fp4_layout l);   /* "none", "gguf", "gguf-ggml", "modelopt", ... */
FP4_API fp4_status fp4_layout_from_name(const char *name, fp4_layout *out);

/* Lane metadata (SPEC §7): fp4lane.weight_precision / fp4lane.activation_precision. */
/* FP4_WP_FP8: FP8 E4M3 weights with per-tensor (or per-channel) f32 scales and no NVFP4 tensor;
 * a checkpoint that mixes NVFP4 and FP8 layers is FP4_WP_NVFP4 (its FP8 tensors run on their own
 * route, see fp4_fp8_view). */
typedef enum fp4_weight_precision {
    FP4_WP_NVFP4 = 0, FP4_WP_Q4_K = 1, FP4_WP_F16 = 2, FP4_WP_BF16 = 3, FP4_WP_F32 = 4, FP4_WP_FP8 = 5,
    FP4_WP_COUNT_ = 6
} fp4_weight_precision;
typedef enum fp4_act_precision { FP4_AP_A16 = 0, FP4_AP_NVFP4 = 1, FP4_AP_COUNT_ = 2 } fp4_act_precision;
FP4_API const char *fp4_weight_precision_name(fp4_weight_precision p);
FP4_API const char *fp4_act_precision_name(fp4_act_precision p);

/* An FP8 weight (ModelOpt quant_algo FP8, or a MIXED_PRECISION layer "FP8"): the tensor's type is
 * FP4_TYPE_F8_E4M3FN, its data n_out x n_in E4M3FN bytes (never 0x7F/0xFF), and its weight_scale
 * one f32 per tensor or one per output row (per-channel), each finite, positive and normal:
 *   dequantized w[r][k] = e4m3fn(byte[r][k]) * scale_r            (one f32 multiply)
 * Projections do not dequantize: every E4M3 value is exact in f32 (and in bf16), so exact mode
 * computes y[r] = fp4p_mul(fp4p_dot(e4m3fn(row r), x), scale_r) — the pinned dense dot of
 * src/format/pinned.h, then one pinned f32 multiply by the row's scale. Activations stay f32
 * (weight-only): a producer's input_scale (its static FP8 activation scale, W8A8) is checked
 * and kept here, never applied.
 * Block-scaled FP8 (DeepSeek-V3/R1's own checkpoints: "<m>.weight_scale_inv", one f32 per
 * block_rows x block_cols block, config.json quantization_config.weight_block_size): scale and
 * row_scale are 0/NULL and
 *   dequantized w[r][k] = e4m3fn(byte[r][k]) * block_scale[(r / block_rows) * n_bc + k / block_cols]
 * (one f32 multiply, n_bc = ceil(n_in / block_cols)); projections run those f32 weights through
 * the dense routes (exact: the pinned dot), so a block-scaled FP8 weight gives the bits of an F32
 * weight holding its dequantization. */
typedef struct fp4_fp8_view {
    float scale;               /* per-tensor weight_scale; 0 when per-channel                     */
    const float *row_scale;    /* per-channel: n_out scales (owned by the model), else NULL       */
    float input_scale;         /* the file's input_scale, 0 when absent; not used (weight-only)   */
    int64_t n_out, n_in;
    const float *block_scale;  /* block-scaled: ceil(n_out/block_rows) x ceil(n_in/block_cols)
                                  f32 scales (row-major, owned by the model), else NULL          */
    int64_t block_rows, block_cols; /* block-scaled: the block's shape, else 0                   */
} fp4_fp8_view;

/* One logical tensor of a loaded checkpoint. An NVFP4 weight is one logical tensor (its
 * companions folded in); everything else is a plain tensor in the file's bytes. Dims are in
 * GGUF order: ne[0] is the row length (n_in); safetensors shapes are reversed into it. */
typedef struct fp4_tensor {
    const char *name;          /* logical name: the payload's name in the file               */
    fp4_type type;             /* FP4_TYPE_NVFP4_E2M1 for NVFP4; else the element type        */
    int32_t n_dims;            /* 0 (scalar) .. 4                                             */
    int64_t ne[FP4_MAX_DIMS];
    const uint8_t *data;       /* plain tensors: the bytes (unaligned); NULL for NVFP4        */
    uint64_t nbytes;
    fp4_nvfp4_view nvfp4;      /* NVFP4: payload/scales (see .packing), scale2, input inv     */
    int st_dtype;              /* the safetensors dtype when the source was safetensors, else -1 */
    fp4_fp8_view fp8;          /* FP8 weights (type FP4_TYPE_F8_E4M3FN): their scales; else 0s  */
} fp4_tensor;

typedef struct fp4_model fp4_model;

typedef struct fp4_load_opts {
    uint64_t max_file_bytes;   /* refuse checkpoints larger than this before mapping (0: no cap) */
    uint32_t flags;            /* FP4_LOAD_* bits; 0: the default open                         */
} fp4_load_opts;

/* FP4_LOAD_DEFER_REPACK: llama.cpp type-40 tensors are not repacked into canonical rows (a host
 * copy of every NVFP4 weight): each is checked exactly as without the flag (the same verdicts,
 * rules and messages; its scale bytes read in place) and exposed as an FP4_PACK_GGML64 view of the
 * file's own blocks, so the open costs the mapping alone. For a consumer that repacks on its own
 * (the CUDA upload: `fp4lane run --device cuda`) or reads nothing (`fp4lane validate`); the CPU
 * engine, the projections, the writers and fp4lane's other consumers refuse such tensors with
 * FP4_ERR_UNSUPPORTED. No effect on other layouts. */
#define FP4_LOAD_DEFER_REPACK 1u

/* Opens a GGUF file, a .safetensors file or a Hugging Face directory, selects the lane, pairs
 * it with the tensor types, validates every NVFP4 tensor's companions and every data range
 * before returning. On any violation: no handle, and err names the file, the tensor and the
 * rule. opts may be NULL. */
FP4_API fp4_status fp4_model_open(const char *path, const fp4_load_opts *opts, fp4_model **out,
                                  fp4_error *err);
/* The same over a GGUF or .safetensors image in memory (not copied; it must outlive the handle).
 * name is used in error messages. */
FP4_API fp4_status fp4_model_open_memory(const void *data, size_t size, const char *name,
                                         const fp4_load_opts *opts, fp4_model **out, fp4_error *err);
FP4_API void fp4_model_close(fp4_model *m);
FP4_API fp4_layout fp4_model_layout(const fp4_model *m);
FP4_API fp4_weight_precision fp4_model_weight_precision(const fp4_model *m);
FP4_API fp4_act_precision fp4_model_act_precision(const fp4_model *m);
FP4_API int64_t fp4_model_n_tensors(const fp4_model *m);
FP4_API const fp4_tensor *fp4_model_tensor(const fp4_model *m, int64_t i);      /* NULL out of range */
FP4_API const fp4_tensor *fp4_model_find(const fp4_model *m, const char *name); /* NULL if absent */
FP4_API uint64_t fp4_model_file_bytes(const fp4_model *m);                      /* all files, summed */
/* The container's own JSON (config.json / hf_quant_config.json text) or NULL. */
FP4_API const char *fp4_model_config_json(const fp4_model *m);
FP4_API const char *fp4_model_quant_config_json(const fp4_model *m);
/* The metadata of a GGUF checkpoint, for the runtime and the text layer (architecture,
 * hyperparameters, tokenizer): the model's own reader handle, read with fp4_gguf_key_index and
 * the fp4_gguf_get_* getters. It lives until fp4_model_close and must not be closed by the
 * caller. NULL for safetensors checkpoints, whose metadata is config.json
 * (fp4_model_config_json). */
typedef struct fp4_gguf fp4_gguf; /* fp4lane_io.h */
FP4_API const fp4_gguf *fp4_model_gguf(const fp4_model *m);

/* Dequantize rows [r0, r1) of a 2-D (or stacked) tensor to f32 (any weight type fp4lane reads;
 * NVFP4 in either packing, the same bits). */
FP4_API fp4_status fp4_tensor_dequant_rows(const fp4_tensor *t, int64_t r0, int64_t r1, float *dst);

/* The CPU projection entry point, the twin of fp4_cuda_project: y = W x for any weight type
 * fp4lane loads, the kernel chosen from one table keyed by (w->type, activation precision =
 * input_scale_inv > 0 ? nvfp4 : a16, mode). Layout as fp4_nvfp4_matvec_a16_exact. Exact mode is
 * the SPEC §4/§5 contraction (bit-identical to the GPU's exact kernels); native mode on the CPU
 * decodes rows to f32 and accumulates in f32 (SPEC §6; fp4_nvfp4_matvec_a16_float stays the double
 * reference). F32/F16/BF16 weights: f32 rows; native mode: f32 dots of eight partial sums;
 * exact mode: f32 products and the pinned 32-lane reduction
 * (src/format/pinned.h, the order a warp computes; the CUDA twin matches it bit for bit).
 * FP8 weights (FP4_TYPE_F8_E4M3FN, fp4_fp8_view): the same dense routes over the E4M3 values, then
 * one f32 multiply by the row's scale (exact mode: cpu.fp8.dense.pinned; native: cpu.fp8.dense).
 * FP4_ERR_REFUSED_ROUTE, with the route to use instead in the name, when no route serves the keys
 * (e.g. exact A16 needs n_in % 256 == 0). */
typedef enum fp4_mode { FP4_MODE_EXACT = 0, FP4_MODE_NATIVE = 1 } fp4_mode;
FP4_API fp4_status fp4_cpu_project(const fp4_tensor *w, fp4_mode mode, const float *x, int64_t n_cols,
                                   float *y, int n_threads);
/* An NVFP4 tensor of FP4_PACK_GGML64 (FP4_LOAD_DEFER_REPACK) is refused: FP4_ERR_UNSUPPORTED.
 * The table's choice ("none" when nothing serves the keys, and for such a tensor). */
FP4_API const char *fp4_cpu_route_name(const fp4_tensor *w, fp4_mode mode);

/* Progress callback for long operations: done/total in bytes. */
typedef void (*fp4_progress_fn)(void *ctx, const char *what, uint64_t done, uint64_t total);

typedef struct fp4_write_opts {
    fp4_layout layout;             /* target layout                                              */
    uint64_t max_shard_bytes;      /* HF layouts: 0 = one file                                   */
    const char *const *st_metadata;/* HF layouts: key, value, key, value, ..., NULL              */
    fp4_progress_fn progress;
    void *progress_ctx;
    int force;                     /* replace an existing output file, or the checkpoint in a
                                      non-empty directory (default: refuse, out.exists)          */
    const volatile int *cancel;    /* polled between chunks: nonzero stops the write (out.interrupted) */
} fp4_write_opts;

/* Outputs are atomic (docs/RELIABILITY.md). A file output is written under a temporary name
 * ".fp4lane-tmp-*" in its directory, fsynced, loaded back by the fail-closed loader and only then
 * renamed over the target: the target holds its old bytes or the complete new file, never a mix,
 * whenever the process dies. An existing target file is refused (out.exists) unless force, before
 * any work and again at the rename (a file that appears meanwhile keeps its bytes). A directory
 * output is built beside the target and swapped in whole; a non-empty target directory is refused
 * (out.exists) unless force, which replaces its checkpoint files and keeps its other regular
 * files. Refused before anything is created: an output that is the input under any name
 * (out.same-file, hard and symbolic links included), a target that is a symbolic link
 * (out.symlink) or not a regular file / directory (out.not-regular). A failure or a cancel
 * removes only the temporary names the call created. */

/* Re-layout an NVFP4 checkpoint (fp4lane convert): no float is computed; payload nibbles,
 * scale bytes and per-tensor scalars are moved, and the scalars that a layout stores as
 * reciprocals keep their exact bits through fp4lane.exact.* metadata, so every round trip is
 * byte-identical. out: a .gguf file for GGUF layouts, a directory for HF layouts. */
FP4_API fp4_status fp4_model_write(const fp4_model *m, const char *out, const fp4_write_opts *opts,
                                   fp4_error *err);

typedef struct fp4_quantize_opts {
    fp4_layout layout;             /* target layout (FP4_LAYOUT_NONE with to_q4_k)               */
    int to_q4_k;                   /* 1: Q4_K (kquant control lane) instead of NVFP4             */
    fp4_scale2_rule rule;          /* GPU (default) or CPU                                      */
    int no_fusion;                 /* 1: no shared amax for q/k/v and gate/up                    */
    int quantize_embeddings;       /* 1: quantize embeddings and the LM head too                */
    uint64_t max_shard_bytes;
    const char *const *st_metadata;
    fp4_progress_fn progress;
    void *progress_ctx;
    int force;                     /* as fp4_write_opts */
    const volatile int *cancel;    /* as fp4_write_opts; also polled while reading the input */
} fp4_quantize_opts;

/* Quantize an unquantized checkpoint (f32/f16/bf16 safetensors file or HF directory, or GGUF)
 * with the ModelOpt recipe (SPEC §3). Memory stays O(one tensor). */
FP4_API fp4_status fp4_quantize_checkpoint(const char *in, const char *out, const fp4_quantize_opts *opts,
                                           fp4_error *err);

/* The CUDA backend (build/libfp4lane_cuda.a) is declared in fp4lane_cuda.h, which includes this. */

#ifdef __cplusplus
}
#endif

#endif /* FP4LANE_H */
