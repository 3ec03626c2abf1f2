/* ggml_oracle.h — the external oracle: llama.cpp's prebuilt ggml libraries (npm
 * @node-llama-cpp/linux-x64, pinned in the Makefile), opened with dlopen. Self-contained test
 * support code: it depends on libc and libdl only.
 *
 * Directory: $FP4_GGML_DIR, else third_party/npm/node_modules/@node-llama-cpp/linux-x64/bins/
 * linux-x64 (relative to the working directory). libggml-base.so is opened first (RTLD_NOW |
 * RTLD_GLOBAL), then libggml-cpu-<variant>.so (variant "x64" unless given; $FP4_GGML_CPU
 * overrides), and ggml_cpu_init() is called once. */
#ifndef FP4_GGML_ORACLE_H
#define FP4_GGML_ORACLE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ggml's vec_dot signature: s[0] = dot of n values of vx and vy (nrc == 1; strides unused). */
typedef void (*ggml_vec_dot_fn)(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy,
                                size_t by, int nrc);
typedef void (*ggml_to_float_fn)(const void *x, float *y, int64_t k);
typedef void (*ggml_from_float_fn)(const float *x, void *y, int64_t k);

/* struct gguf_init_params, passed by value */
typedef struct ggml_oracle_gguf_params {
    bool no_alloc;
    void **ctx; /* struct ggml_context ** */
} ggml_oracle_gguf_params;

typedef struct ggml_oracle {
    void *base, *cpu;
    char dir[1024];
    char cpu_name[64];
    /* libggml-base.so */
    ggml_to_float_fn dequantize_row_nvfp4;      /* 36-byte blocks of 64; no scale2 */
    ggml_from_float_fn quantize_row_q8_K_ref;
    ggml_from_float_fn quantize_row_q4_K_ref;
    ggml_to_float_fn dequantize_row_q4_K;
    ggml_from_float_fn quantize_row_q6_K_ref;
    ggml_to_float_fn dequantize_row_q6_K;
    const char *(*ggml_version)(void);
    const char *(*ggml_commit)(void);
    void *(*gguf_init_from_file)(const char *fname, ggml_oracle_gguf_params params);
    void (*gguf_free)(void *ctx);
    int64_t (*gguf_get_n_tensors)(const void *ctx);
    int64_t (*gguf_get_n_kv)(const void *ctx);
    /* libggml-cpu-<variant>.so */
    ggml_vec_dot_fn vec_dot_q4_K_q8_K_generic;
    ggml_vec_dot_fn vec_dot_q6_K_q8_K_generic;
    ggml_vec_dot_fn vec_dot_q4_K_q8_K;          /* the variant's own (SIMD) kernels, for benches */
    ggml_vec_dot_fn vec_dot_q6_K_q8_K;
    ggml_vec_dot_fn vec_dot_nvfp4_q8_0;
    ggml_from_float_fn quantize_row_q8_K;       /* the variant's activation quantizers */
    ggml_from_float_fn quantize_row_q8_0;
} ggml_oracle;

/* Opens both libraries and resolves every symbol above. cpu_variant NULL -> "x64".
 * Returns 0 on success; on failure, fills err (a sentence naming the missing file or symbol). */
int ggml_oracle_open(ggml_oracle *o, const char *cpu_variant, char *err, size_t err_len);
void ggml_oracle_close(ggml_oracle *o);

#endif
