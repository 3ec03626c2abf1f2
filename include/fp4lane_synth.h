/* fp4lane_synth.h — random-weight Hugging Face checkpoints of real model shapes, so the real
 * shapes can be measured without downloads (`fp4lane synth`). Part of libfp4lane; needs fp4lane.h. */
#ifndef FP4LANE_SYNTH_H
#define FP4LANE_SYNTH_H

#include "fp4lane.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Shapes (the published configs): "tiny" (hidden 256, 2 layers, 4 heads x 64, 2 KV heads,
 * intermediate 512, vocab 512), "llama3-8b" (4096, 32 layers, 32 heads, 8 KV, 14336, vocab
 * 128256, rope_theta 5e5 + llama3 rope scaling), "qwen3-8b" (4096, 36 layers, 32 heads, 8 KV,
 * head_dim 128, 12288, vocab 151936, rope_theta 1e6), "llama3-70b" (8192, 80 layers, 64 heads,
 * 8 KV, 28672, vocab 128256), "llama-160m" (JackFram/llama-160m: 768, 12 layers, 12 heads x 64,
 * 12 KV, 3072, vocab 32000, rope_theta 1e4, untied; a CPU decode shape); mixtures of experts
 * (Qwen3-MoE): "tiny-moe" (tiny's attention, 8 experts, 2 per token, expert ffn 256),
 * "qwen3-30b-a3b" (2048, 48 layers, 32 heads x 128, 4 KV, 128 experts, 8 per token, expert ffn 768,
 * vocab 151936), "tiny-moe16" (tiny-moe with 16 experts, 4 per token) and
 * "small-moe" (1024, 8 layers, 16 heads x 64, 4 KV, 32 experts, 4 per token, expert ffn 512, vocab
 * 32000; a CPU benchmark shape). Architectures: "llama"
 * (LlamaForCausalLM; llama3 rope scaling where the shape has it), "qwen3" (Qwen3ForCausalLM:
 * per-head q_norm/k_norm, no rope scaling), and for the shapes with experts "qwen3-moe"
 * (Qwen3MoeForCausalLM) and "mixtral" (MixtralForCausalLM).
 *
 * Statistics of the bf16 values (every tensor its own seeded stream; documented and tested):
 *   matrices (embeddings, q/k/v/o, gate/up/down, lm_head): Student-t with 8 degrees of freedom
 *     (Bailey's polar method), scaled to std 0.02: heavy tails (excess kurtosis 1.5, |x| > 6 std
 *     about 60 000 times as often as a Gaussian);
 *   every projection (q/k/v/o, gate/up/down): FP4_SYNTH_OUTLIERS input channels (columns), drawn
 *     per tensor, multiplied by a factor drawn uniformly in [10, 50];
 *   RMSNorm weights (input/post-attention/final, q_norm/k_norm): 1 + 0.05 t8 (std 0.05).
 * The values depend only on (seed, shape, architecture): not on the thread count or shard size,
 * and the arithmetic is +, -, *, / and sqrt in IEEE double, all correctly rounded (no libm
 * transcendental), so the bytes do not depend on the C library (checked on x86-64 only). */
#define FP4_SYNTH_OUTLIERS 4
#define FP4_SYNTH_STD 0.02
#define FP4_SYNTH_NORM_STD 0.05

typedef struct fp4_synth_opts {
    const char *shape;             /* one of the names above                                    */
    const char *arch;              /* "llama" | "qwen3"; NULL: the shape's own                  */
    uint64_t seed;
    uint64_t max_shard_bytes;      /* 0: one model.safetensors; else shards + index (HF layout) */
    int n_threads;                 /* 0: every online CPU                                       */
    fp4_progress_fn progress;      /* what = the tensor being made; done/total in bytes         */
    void *progress_ctx;
    /* 1: NVFP4 in the ModelOpt layout, quantized as the tensors are made (the bf16 model never
     * exists, on disk or in memory): the same bytes as this bf16 checkpoint quantized by
     * fp4_quantize_checkpoint (layout modelopt, default options, the same max_shard_bytes). The
     * values are made twice (the amax pass, then the quantization); memory holds one tensor (its
     * bf16 and NVFP4 bytes), the unquantized embedding and head a piece at a time. Progress:
     * "amax" over the quantized tensors' bf16 bytes, then "quantize" over the output bytes. */
    int to_nvfp4;
    /* > 0: only the first n_layers layers of the shape (its real widths, fewer layers: a benchmark
     * checkpoint that is made in the time there is); 0: all of them. Above the shape's count or
     * negative: refused (rule synth.layers). */
    int64_t n_layers;
} fp4_synth_opts;

/* The i-th shape / architecture name (NULL past the last), and the shape's default arch. */
FP4_API const char *fp4_synth_shape_name(int i);
FP4_API const char *fp4_synth_arch_name(int i);
FP4_API const char *fp4_synth_shape_arch(const char *shape);   /* NULL for an unknown shape */
/* Bytes of tensor data the checkpoint will hold (FP4_ERR_INVALID_ARG for an unknown name). */
FP4_API fp4_status fp4_synth_data_bytes(const fp4_synth_opts *opts, uint64_t *bytes, fp4_error *err);

/* Writes the checkpoint as the directory `out`: config.json (sorted keys, transformers 4 key
 * names: rope_theta, rope_scaling, torch_dtype) and model.safetensors or its shards. Refuses an
 * `out` that exists and is not an empty directory, and a file system without room for the data.
 * Everything is made in a fresh `.fp4lane-tmp-<out>-*` directory beside it (each file fsynced),
 * renamed to `out` at the end; on failure only that temporary directory (all of it made here) is
 * removed. */
FP4_API fp4_status fp4_synth_checkpoint(const char *out, const fp4_synth_opts *opts, fp4_error *err);

#ifdef __cplusplus
}
#endif

#endif /* FP4LANE_SYNTH_H */
