/*
 * fp4lane_runtime.h — the decode runtime of fp4lane (the CPU library's runtime API).
 *
 * A loaded checkpoint (fp4_model_open) becomes an engine: its architecture (fp4_arch, from a HF
 * config.json or GGUF metadata), its tensors bound to layer slots, a route per projection (the
 * dispatch tables of fp4_cpu_project / the CUDA twin), a backend (CPU in this library; CUDA in
 * libfp4lane_cuda.so, found with dlopen) and a KV cache of F16 with an identity. The engine
 * decodes several independent sequences in one step: each column of a step is one token of one
 * sequence at that sequence's next position; sequences join and leave between steps.
 *
 * Modes: FP4_MODE_EXACT — integer-exact contractions (SPEC §4/§5) and every other operation
 * pinned (src/format/pinned.h): the same logits bits for any thread count, any prefill chunking,
 * any batch composition, and on the GPU. FP4_MODE_NATIVE — the fastest kernels.
 *
 * Conventions as fp4lane.h: fp4_status returns, a caller-owned fp4_error, no printing, no exit,
 * every _create has one _free that accepts NULL.
 */
#ifndef FP4LANE_RUNTIME_H
#define FP4LANE_RUNTIME_H

#include "fp4lane.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Architecture                                                                               */

typedef enum fp4_arch_family {
    FP4_ARCH_LLAMA = 0,     /* Llama 2/3/3.1/3.2 (model_type "llama"; GGUF "llama")            */
    FP4_ARCH_MISTRAL = 1,   /* Mistral dense (model_type "mistral"; no sliding window)        */
    FP4_ARCH_QWEN2 = 2,     /* Qwen2/2.5: q/k/v biases                                        */
    FP4_ARCH_QWEN3 = 3,     /* Qwen3: per-head q/k RMSNorm, explicit head_dim                 */
    FP4_ARCH_QWEN3_MOE = 4, /* Qwen3-MoE (model_type "qwen3_moe"; GGUF "qwen3moe"): Qwen3's
                               attention, softmax-then-top-k experts, dense layers mixed in    */
    FP4_ARCH_MIXTRAL = 5,   /* Mixtral (model_type "mixtral"; GGUF "llama" with expert_count):
                               Llama/Mistral attention, top-k-then-softmax experts             */
    FP4_ARCH_GEMMA3 = 6,    /* Gemma 3 text (model_type "gemma3_text", or "gemma3"'s text_config;
                               GGUF "gemma3"): local sliding-window and global layers, four norms
                               per block with the (1 + w) gain, GeGLU (gelu tanh), scaled embedding */
    FP4_ARCH_DEEPSEEK_V3 = 7, /* DeepSeek-V3/R1, Kimi-K2 (model_type "deepseek_v3"): multi-head
                               latent attention, sigmoid group-limited routing, shared experts */
    FP4_ARCH_COUNT_ = 8
} fp4_arch_family;

typedef enum fp4_rope_scaling {
    FP4_ROPE_NONE = 0,
    FP4_ROPE_LINEAR = 1, /* positions divided by factor (inv_freq / factor)                */
    FP4_ROPE_LLAMA3 = 2, /* Llama 3.1's smooth low/high frequency interpolation            */
    FP4_ROPE_YARN = 3    /* YaRN (DeepSeek-V3): ramped interpolation, cos/sin and softmax mscale */
} fp4_rope_scaling;

typedef enum fp4_arch_source { FP4_ARCH_FROM_HF = 0, FP4_ARCH_FROM_GGUF = 1 } fp4_arch_source;

#define FP4_ARCH_MAX_EOS 8
#define FP4_ARCH_MAX_LAYERS 1024
#define FP4_ARCH_MAX_HEAD_DIM 512

/* One description of a decoder-only transformer, built from either source. Plain data. */
typedef struct fp4_arch {
    fp4_arch_family family;
    fp4_arch_source source;
    int64_t n_layers;
    int64_t hidden;     /* hidden_size / n_embd                                           */
    int64_t n_heads;    /* query heads                                                    */
    int64_t n_kv_heads; /* key/value heads (n_heads % n_kv_heads == 0)                    */
    int64_t head_dim;   /* explicit (Qwen3, some Mistral) or hidden / n_heads; even       */
    int64_t ffn;        /* intermediate_size                                               */
    int64_t vocab;
    int64_t n_ctx_train; /* max_position_embeddings / context_length                        */
    float rms_eps;
    double rope_theta;
    fp4_rope_scaling rope_scaling;
    double rope_factor; /* linear / llama3                                                 */
    double rope_low_freq_factor, rope_high_freq_factor; /* llama3                               */
    int64_t rope_orig_ctx; /* llama3: original_max_position_embeddings                        */
    int rope_freq_factors; /* 1: GGUF tensor rope_freqs.weight (F32, head_dim/2) divides each  */
                           /*    frequency (llama.cpp's form of Llama 3.1 scaling)           */
    int tied_head;         /* 1: the LM head is the embedding table                           */
    int qkv_bias;          /* 1: q/k/v projections carry biases (Qwen2)                       */
    int qk_norm;           /* 1: per-head RMSNorm of q and k before RoPE (Qwen3)              */
    int qk_permuted;       /* 1: q/k rows in llama.cpp's converter order (GGUF Llama family): */
                           /*    the step un-permutes q and k after the projection           */
    int32_t bos;           /* -1 when unknown                                                 */
    int32_t n_eos;
    int32_t eos[FP4_ARCH_MAX_EOS];
    /* Mixture of experts (n_experts 0: dense). A sparse layer's MLP is a router (a linear map to
     * n_experts logits, never quantized) and n_experts SwiGLU experts of moe_ffn; each column runs
     * the n_experts_used experts moe_routing picks, weighted (backend.h, THE STEP, MoE).        */
    int64_t n_experts;      /* num_experts / num_local_experts / <arch>.expert_count           */
    int64_t n_experts_used; /* num_experts_per_tok / <arch>.expert_used_count (top-k)          */
    int64_t moe_ffn;        /* moe_intermediate_size (Mixtral: intermediate_size)              */
    int32_t moe_routing;    /* fp4_moe_routing                                                 */
    int32_t moe_norm_topk;  /* 1: the k softmax weights renormalized to sum 1 (norm_topk_prob) */
    uint64_t moe_dense[FP4_ARCH_MAX_LAYERS / 64]; /* bit L set: layer L has a dense MLP of ffn
                                                     (mlp_only_layers, decoder_sparse_step)    */
    /* Gemma 3 (zero for every other family). A local layer attends to the sliding_window latest
     * positions (its own included) with its own rope base and no rope scaling; a global layer to
     * all of them with rope_theta and the rope scaling above.                                 */
    int64_t sliding_window;                       /* 0: none                                    */
    uint64_t swa_layers[FP4_ARCH_MAX_LAYERS / 64]; /* bit L set: layer L is local              */
    double rope_local_theta;                      /* rope_local_base_freq                       */
    double query_pre_attn_scalar;                 /* attention scale 1/sqrt of it (0: head_dim) */
    double final_softcap;                         /* final_logit_softcapping (0: none)          */
    int32_t hidden_act;                           /* fp4_hidden_act                             */
    int32_t embed_scale;                          /* 1: embedding rows times sqrt(hidden)       */
    /* DeepSeek-V3 (kv_lora_rank 0: none of this). Multi-head latent attention: head_dim is the
     * q/k head (qk_nope_dim + qk_rope_dim), n_kv_heads = n_heads; the cache holds per token and
     * layer the normed latent (kv_lora_rank) and the roped shared key (qk_rope_dim) only.      */
    int64_t q_lora_rank;  /* 0: a plain q projection; else q_a -> q_a_layernorm -> q_b         */
    int64_t kv_lora_rank; /* the latent width                                                  */
    int64_t qk_nope_dim, qk_rope_dim, v_head_dim;
    int32_t rope_interleave; /* 1: the rope part's pairs are interleaved (transformers' default) */
    int32_t n_nextn;         /* num_nextn_predict_layers: MTP layers in the file, not run        */
    double rope_beta_fast, rope_beta_slow, rope_mscale, rope_mscale_all_dim; /* yarn            */
    int64_t moe_n_group, moe_topk_group; /* group-limited routing (FP4_MOE_SIGMOID_GROUP)    */
    int64_t n_shared_experts;            /* shared experts' width: n_shared_experts * moe_ffn */
    double routed_scaling;               /* routed_scaling_factor                             */
} fp4_arch;

typedef enum fp4_hidden_act {
    FP4_ACT_SILU = 0,     /* SwiGLU: silu(gate) * up                                            */
    FP4_ACT_GELU_TANH = 1 /* GeGLU: gelu_pytorch_tanh(gate) * up                                */
} fp4_hidden_act;

/* 1 when layer L of a attends through a sliding window (a Gemma 3 local layer). */
static inline int fp4_arch_layer_local(const fp4_arch *a, int64_t L) {
    return a->sliding_window > 0 && L >= 0 && L < FP4_ARCH_MAX_LAYERS &&
           ((a->swa_layers[L / 64] >> (L % 64)) & 1u);
}

/* The KV cache's halves per token and layer in each of its two buffers (K and V): n_kv_heads *
 * head_dim, or for latent attention half the latent row (kv_lora_rank + qk_rope_dim, rounded up
 * to even): the first half of the row in K, the rest in V. */
static inline int64_t fp4_arch_kv_dim(const fp4_arch *a) {
    return a->kv_lora_rank > 0 ? (a->kv_lora_rank + a->qk_rope_dim + 1) / 2 : a->n_kv_heads * a->head_dim;
}

typedef enum fp4_moe_routing {
    FP4_MOE_NONE = 0,
    FP4_MOE_SOFTMAX_TOPK = 1, /* Qwen3-MoE: softmax over all experts, then the top k           */
    FP4_MOE_TOPK_SOFTMAX = 2, /* Mixtral: the top k logits, then a softmax over those k        */
    FP4_MOE_SIGMOID_GROUP = 3 /* DeepSeek-V3: sigmoid scores, bias for selection, top groups    */
} fp4_moe_routing;

/* 1 when layer L of a has a mixture-of-experts MLP. */
static inline int fp4_arch_layer_moe(const fp4_arch *a, int64_t L) {
    return a->n_experts > 0 && L >= 0 && L < FP4_ARCH_MAX_LAYERS &&
           !((a->moe_dense[L / 64] >> (L % 64)) & 1u);
}

FP4_API const char *fp4_arch_family_name(fp4_arch_family f); /* "llama", ...; "?"          */
/* From a HF config.json text (transformers 4: rope_theta/rope_scaling; transformers 5:
 * rope_parameters). Refuses (FP4_ERR_UNSUPPORTED, err->rule "arch.*", err->msg naming the key
 * and the value) MoE keys outside qwen3_moe / mixtral, a self-contradicting MoE config (rule
 * "arch.moe", naming the key), sliding window, ALiBi, unknown rope types and unknown model_type. */
FP4_API fp4_status fp4_arch_from_hf_config(const char *config_json, fp4_arch *out, fp4_error *err);
/* From GGUF metadata (llama.cpp keys: general.architecture, <arch>.block_count, ...). */
FP4_API fp4_status fp4_arch_from_gguf(const fp4_gguf *g, fp4_arch *out, fp4_error *err);
/* The architecture an engine over m would run (fp4_rt_arch after fp4_rt_create): config.json,
 * the config a GGUF written by fp4lane carries, or llama.cpp's GGUF keys. `fp4lane inspect --json`
 * prints it as "arch". */
FP4_API fp4_status fp4_model_arch(const fp4_model *m, fp4_arch *out, fp4_error *err);

/* Routes (docs/ROUTES.md): (weights lane, activation precision, mode, device, drafting)      */

typedef enum fp4_device { FP4_DEVICE_CPU = 0, FP4_DEVICE_CUDA = 1 } fp4_device;
typedef enum fp4_rt_lane {
    FP4_LANE_NVFP4 = 0,  /* NVFP4 weights, A16 or W4A4 (act below)                           */
    FP4_LANE_KQUANT = 1, /* Q4_K/Q6_K control lane                                          */
    FP4_LANE_DENSE = 2,  /* F16/BF16/F32 reference lane                                     */
    FP4_LANE_FP8 = 3,    /* FP8 E4M3 weights with f32 scales, weight-only (fp4_fp8_view)    */
    FP4_LANE_COUNT_ = 4
} fp4_rt_lane;

typedef struct fp4_route_key {
    fp4_rt_lane lane;
    fp4_act_precision act; /* FP4_AP_A16 or FP4_AP_NVFP4 (W4A4); A16 for the other lanes       */
    fp4_mode mode;
    fp4_device device;
    int drafting; /* 1: speculative drafting requested                              */
} fp4_route_key;

/* FP4_OK with the route's name in name (may be NULL), or FP4_ERR_REFUSED_ROUTE with a message
 * (in msg, msg_size bytes) that names the nearest allowed route. */
FP4_API fp4_status fp4_route_check(const fp4_route_key *k, const char **name, char *msg, size_t msg_size);

/* The engine                                                                                 */

typedef enum fp4_kv_dtype { FP4_KV_F16 = 0 } fp4_kv_dtype;

/* What a device backend will allocate, computed before the upload. If total_bytes is above
 * available_bytes, fp4_rt_create refuses (FP4_ERR_NOMEM, rule "cuda.memory-plan") after the
 * report and before allocating anything. $FP4LANE_CUDA_MEM_LIMIT (bytes) caps available_bytes. */
typedef struct fp4_rt_mem_plan {
    char device[64];          /* e.g. "NVIDIA H200"                                               */
    uint64_t weights_bytes;   /* uploaded tensors, norm/bias vectors, RoPE tables                 */
    uint64_t kv_bytes;        /* the F16 KV cache: slots × rows (n_ctx, or a ring) × NKV·D × 2 (K, V) */
    uint64_t scratch_bytes;   /* activations, attention buffers, projection scratch, logits      */
    uint64_t total_bytes;     /* the sum                                                           */
    uint64_t available_bytes; /* free device memory minus a reserve for the context and graphs   */
} fp4_rt_mem_plan;

typedef struct fp4_rt_opts {
    fp4_mode mode;     /* FP4_MODE_EXACT (0) or FP4_MODE_NATIVE                           */
    fp4_device device; /* FP4_DEVICE_CPU (0) or FP4_DEVICE_CUDA                           */
    int n_threads;     /* CPU: rows split over this many threads (<= 1: one)              */
    int64_t n_ctx;     /* positions per sequence; 0: min(n_ctx_train, 4096)               */
    int32_t max_seqs;  /* sequences held at once; 0: 1                                     */
    fp4_kv_dtype kv_dtype;
    int drafting;         /* 1: this engine verifies a draft (fp4_spec); the route table    */
                          /* decides (docs/ROUTES.md) before any weight is read             */
    const char *cuda_lib; /* path of libfp4lane_cuda.so; NULL: $FP4LANE_CUDA_LIB, then the   */
                          /* directory of the running executable, then the loader's path    */
    int cuda_device;
    /* A device backend's memory plan, reported before any weight is uploaded (NULL: not told).
     * The CPU backend does not call it. */
    void (*on_plan)(const fp4_rt_mem_plan *plan, void *user);
    void *plan_user;
    /* Tensor parallelism (docs/SCALE.md): the CPU engine split over this many in-process ranks
     * (<= 1: not split). Heads and KV cache by KV head, ffn by row, experts whole, vocabulary by
     * row; exact mode keeps the unsplit engine's bits or refuses (rules tp.*); CUDA refuses it
     * (rule route.tp-cuda). Each rank's memory plan goes to on_plan. */
    int tp;
} fp4_rt_opts;

typedef struct fp4_rt fp4_rt;

/* Builds the engine over an open model (borrowed: it must outlive the engine). Order: arch ->
 * routes (refusals before any weight byte is read) -> bind (names, shapes) -> memory plan ->
 * backend upload. On the CPU the plan (RoPE table, KV cache, scratch) is refused with
 * FP4_ERR_NOMEM, rule "cpu.memory-plan" (the plan in the message), before anything is allocated
 * when it is above 3/4 of the physical memory or $FP4LANE_CPU_MEM_LIMIT bytes. On failure err
 * names the key/tensor/route. */
FP4_API fp4_status fp4_rt_create(const fp4_model *m, const fp4_rt_opts *opts, fp4_rt **out, fp4_error *err);
FP4_API void fp4_rt_free(fp4_rt *rt);
FP4_API const fp4_arch *fp4_rt_arch(const fp4_rt *rt);
FP4_API int64_t fp4_rt_n_ctx(const fp4_rt *rt);
FP4_API int64_t fp4_rt_vocab(const fp4_rt *rt);
/* "cpu" / "cuda"; and a one-line description of the routes taken (e.g. "q,k,v,o,gate,up,down:
 * cpu.nvfp4.a16.exact head: cpu.bf16.dense.pinned"), valid while rt lives. */
FP4_API const char *fp4_rt_device_name(const fp4_rt *rt);
FP4_API const char *fp4_rt_routes(const fp4_rt *rt);

/* Sequences: a slot with its own KV cache and position. */
FP4_API fp4_status fp4_rt_seq_open(fp4_rt *rt, int32_t *seq);  /* FP4_ERR_LIMIT when all are used */
FP4_API void fp4_rt_seq_close(fp4_rt *rt, int32_t seq);        /* its positions are forgotten     */
FP4_API int64_t fp4_rt_seq_pos(const fp4_rt *rt, int32_t seq); /* next position; -1 if not open   */
/* The KV cache in blocks: returns the positions per block, *used the blocks held by the open
 * sequences, *total the blocks of every slot at full context. The CPU cache is paged: a sequence
 * holds the blocks its positions fill, committed as it grows and given back when it is closed or
 * truncated (an unpaged backend, CUDA, allocates the total at creation; its blocks of 16 count
 * the positions held). */
FP4_API int64_t fp4_rt_kv_blocks(const fp4_rt *rt, int64_t *used, int64_t *total);
/* Rolls a sequence back to pos (0 <= pos <= its position; FP4_ERR_INVALID_ARG otherwise or for a
 * closed sequence): positions >= pos are forgotten and the next step writes position pos. The
 * cache keeps its identity; a snapshot saved afterwards holds positions [0, pos). A model with
 * sliding-window layers (Gemma 3) keeps only their window: FP4_ERR_LIMIT when the step at pos
 * would read rows no longer held (a rollback deeper than a step's columns, or below a loaded
 * snapshot's window). */
FP4_API fp4_status fp4_rt_seq_truncate(fp4_rt *rt, int32_t seq, int64_t pos);

/* One column of a step: token `token` of sequence `seq`, at that sequence's next position.
 * Several columns may belong to one sequence (a prefill chunk): they take consecutive positions
 * in column order. want_logits: 1 to receive this column's logits. */
typedef struct fp4_rt_tok {
    int32_t seq;
    int32_t token;
    int32_t want_logits;
} fp4_rt_tok;

/* Runs one step over n columns. logits: (number of want_logits columns) rows of vocab floats,
 * in column order (may be NULL when none is wanted). FP4_ERR_INVALID_ARG for a token outside
 * [0, vocab) or a closed sequence; FP4_ERR_LIMIT (rule "rt.context") when a position would pass
 * n_ctx — nothing is computed then, never a wrap. If the backend fails mid-step, the sequences of
 * the step are closed (their caches are incomplete). A logits row holding NaN or an infinity is
 * FP4_ERR_NONFINITE, rule "rt.nonfinite", naming the sequence and position (the step's sequences
 * are closed: their caches overflowed). */
FP4_API fp4_status fp4_rt_step(fp4_rt *rt, const fp4_rt_tok *cols, int64_t n, float *logits, fp4_error *err);
/* fp4_rt_step, but instead of logits the greedy choice of each want_logits column (in column
 * order): the first index of its largest logit, NaN never chosen, 0 when all are -inf or NaN —
 * what a plain greedy fp4_sampler picks from fp4_rt_step's logits (the same logits; exact mode's
 * invariance carries over). On CUDA it is taken on the device and only the tokens cross to the
 * host; elsewhere (or FP4LANE_CUDA_NO_ARGMAX=1) from the logits on the host. tokens may be NULL
 * when no column wants logits. */
FP4_API fp4_status fp4_rt_step_greedy(fp4_rt *rt, const fp4_rt_tok *cols, int64_t n, int32_t *tokens,
                                      fp4_error *err);

/* KV identity: a digest of the computation, not of its container: the step's inputs by slot
 * (weight types, shapes and bytes, NVFP4 as canonical planes, norm weights and biases as their
 * f32 values, llama.cpp's q/k row permutation undone), lane, mode, KV dtype, rope configuration
 * and architecture (native mode: and the device). A checkpoint and its conversion to another
 * container that compute the same bits share it (models/tiny and its GGUF). Hex, 64 characters
 * + NUL. Computed on first use (one SHA-256 pass over the weights). */
FP4_API const char *fp4_rt_identity(const fp4_rt *rt);
/* Prompt cache snapshots of one sequence (positions [0, seq_pos)), docs/FORMATS.md. Written to a
 * temporary name, fsynced, renamed. Load refuses (FP4_ERR_FORMAT rule "kv.identity") a snapshot
 * whose identity differs, a truncated one (FP4_ERR_TRUNCATED) and a corrupted one (checksum, rule
 * "kv.checksum"); the sequence must be empty. */
FP4_API fp4_status fp4_rt_kv_save(const fp4_rt *rt, int32_t seq, const char *path, fp4_error *err);
FP4_API fp4_status fp4_rt_kv_load(fp4_rt *rt, int32_t seq, const char *path, fp4_error *err);
/* The same with the sequence's token history, so that a continuation is the longer run's
 * (fp4lane run --kv-save / --kv-load): tokens[0..n_tok) are the ids of the cached positions, then
 * optionally one more, pending (emitted but not yet fed: a run's last printed token); n_tok is 0,
 * seq_pos or seq_pos + 1 (else FP4_ERR_INVALID_ARG rule "kv.tokens"). fp4_rt_kv_save writes
 * n_tok 0. Load copies the history into tokens (cap entries; n_ctx + 1 always suffice, else
 * FP4_ERR_LIMIT "kv.tokens"; tokens NULL and cap 0: not wanted) and its count into *n_tokens. */
FP4_API fp4_status fp4_rt_kv_save_tokens(const fp4_rt *rt, int32_t seq, const char *path,
                                         const int32_t *tokens, int64_t n_tok, fp4_error *err);
FP4_API fp4_status fp4_rt_kv_load_tokens(fp4_rt *rt, int32_t seq, const char *path, int32_t *tokens,
                                         int64_t cap, int64_t *n_tokens, fp4_error *err);

/* Samplers (deterministic: seeded xoshiro256** from splitmix64(seed))                       */

typedef struct fp4_sampler_params {
    float temperature;      /* <= 0: greedy (argmax, lowest id on ties)                        */
    int32_t top_k;          /* <= 0: off                                                        */
    float top_p;            /* >= 1: off                                                        */
    float min_p;            /* <= 0: off                                                        */
    float repeat_penalty;   /* 1: off (llama.cpp's rule: logit > 0 ? l / p : l * p)            */
    float presence_penalty; /* 0: off (subtracted once from each seen token)                    */
    int32_t penalty_last_n; /* tokens of history the penalties look at; 0: all                  */
    uint64_t seed;
} fp4_sampler_params;

FP4_API fp4_sampler_params fp4_sampler_defaults(void); /* greedy, penalties off, seed 0      */
typedef struct fp4_sampler fp4_sampler;
FP4_API fp4_status fp4_sampler_create(const fp4_sampler_params *p, int64_t vocab, fp4_sampler **out);
FP4_API void fp4_sampler_free(fp4_sampler *s);
/* Adds a token to the history the penalties see (prompt tokens and sampled ones). */
FP4_API void fp4_sampler_accept(fp4_sampler *s, int32_t token);
/* Picks a token from vocab logits (not modified). */
FP4_API int32_t fp4_sampler_sample(fp4_sampler *s, const float *logits);
/* 1 when s is plain greedy (temperature 0, penalties off): its choice is then
 * fp4_rt_step_greedy's, and the logits need not leave the device. */
FP4_API int fp4_sampler_is_greedy(const fp4_sampler *s);

/* Arguments from a user (docs/PYTHON.md): one parser and one set of ranges for every front end. */
/*
 * The CLI's options and the Python binding's arguments go through fp4_arg_parse, so both accept
 * exactly the same values. name (the rule is "arg.<name>"), what text may hold:
 *   threads          integer 1..256           ctx              integer 1..2^24
 *   max_seqs         integer 1..4096          prefill_chunk    integer 0..2^20
 *   draft_n          integer 1..32            n                integer 0..2^63-1 (tokens to generate)
 *   token            integer 0..2^31-1 (a token id; the engine checks it against its vocabulary)
 *   temperature      real 0..100              top_k            integer 0..2^31-1
 *   top_p, min_p     real 0..1                repeat_penalty   real 0.001..100
 *   presence_penalty real -100..100           penalty_last_n   integer 0..2^31-1
 *   seed             integer 0..2^64-1        shard_size       bytes: digits, then K, M or G
 *                                                              (powers of 1024), at most 2^62
 * Integers are decimal digits with an optional leading '-' (nothing else: no space, no '+', no
 * fraction); reals are what strtof reads, finite. label names the argument in the message (the
 * CLI's option, the binding's keyword; NULL: name), which quotes the text (at most 40 bytes,
 * control bytes as '?'). FP4_OK with out filled; FP4_ERR_INVALID_ARG, rule "arg.<name>", for a
 * text that is not such a value; FP4_ERR_NOT_FOUND, rule "arg.name", for an unknown name. */
typedef struct fp4_arg_val {
    int64_t i;  /* integer arguments; 0 for the others                                          */
    uint64_t u; /* seed, shard_size, and every integer argument that is >= 0                   */
    double f;   /* real arguments (the float strtof reads, widened); integer ones too          */
} fp4_arg_val;
FP4_API fp4_status fp4_arg_parse(const char *name, const char *label, const char *text, fp4_arg_val *out,
                                 fp4_error *err);

/* Positions a generation needs: n_prompt + n_gen more tokens after what sequence seq already
 * caches (seq < 0: a fresh sequence) must fit in the context. FP4_OK; FP4_ERR_LIMIT rule
 * "rt.context" naming the three counts and the context length (overflow-checked); FP4_ERR_INVALID_ARG
 * for a negative count. The same rule as `fp4lane run`'s refusal before any work. */
FP4_API fp4_status fp4_rt_check_room(const fp4_rt *rt, int32_t seq, int64_t n_prompt, int64_t n_gen,
                                     fp4_error *err);

/* Struct layouts for bindings. */

/* One member of a public struct as this library was compiled: the bindings that mirror the
 * structs (python/fp4lane/_lib.py) compare their declarations with these rows when they load and
 * refuse to run on a difference. A row with field NULL ends its struct: offset is sizeof. */
typedef struct fp4_abi_field {
    const char *type;  /* "fp4_arch", ...                                                      */
    const char *field; /* the member, in declaration order; NULL on the struct's closing row   */
    uint64_t offset;   /* offsetof (sizeof on the closing row)                                 */
    uint64_t size;     /* sizeof the member (0 on the closing row)                             */
} fp4_abi_field;
/* Every struct the Python binding mirrors, all members in order: *n rows, static storage. */
FP4_API const fp4_abi_field *fp4_abi_layout(int64_t *n);

/* Generation: one request's loop (fp4_session) and many requests on one engine (fp4_sched)    */
/*
 * A request is prompt ids, sampling parameters, stop ids (EOS) and stop strings, a token budget
 * and optional log-probabilities. The loop: the prompt in chunks (prefill), then one token per
 * step: sampled by the request's own seeded sampler (on the device, fp4_rt_step_greedy, when the
 * sampler is plain greedy and no log-probability is asked), streamed as UTF-8 text (the streaming
 * detokenizer, then the stop strings) through a per-token callback, until a stop id, a stop
 * string, the budget, the context, a cancellation or an error. Every front end runs this loop.
 * In exact mode a request's tokens, text and log-probabilities depend on nothing but the request:
 * not on the other requests of a step (fp4_sched), not on the prefill chunking.
 */
typedef enum fp4_finish {
    FP4_FINISH_NONE = 0,      /* still running                                                 */
    FP4_FINISH_STOP = 1,      /* a stop id (EOS) or a stop string                              */
    FP4_FINISH_LENGTH = 2,    /* max_tokens, or the context is full                            */
    FP4_FINISH_CANCELLED = 3, /* the cancel flag, the callback, fp4_sched_cancel               */
    FP4_FINISH_ERROR = 4      /* the engine failed (the error says why)                        */
} fp4_finish;
FP4_API const char *fp4_finish_name(fp4_finish f); /* "stop", "length", "cancelled", "error"; "" */

#define FP4_SESSION_MAX_TOP_LOGPROBS 20
#define FP4_SESSION_MAX_STOP_IDS 64

struct fp4_tokenizer;
typedef struct fp4_session_req {
    const int32_t *prompt; /* n_prompt >= 1 ids (copied)                                       */
    int64_t n_prompt;
    fp4_sampler_params sampling;
    int64_t max_tokens;        /* tokens to generate, >= 1                                     */
    const int32_t *stop_ids;   /* ids that end the generation (EOS); the id is reported, with */
    int32_t n_stop_ids;        /* end = 1 and no text                                          */
    const char *const *stops;  /* stop strings (need tok); the text ends before the first     */
    int32_t n_stops;
    const struct fp4_tokenizer *tok; /* text through it (fp4lane_text.h, borrowed); NULL: ids  */
    int32_t logprobs;          /* 1: each token's log-probability (log-softmax of its logits)  */
    int32_t top_logprobs;      /* 0..FP4_SESSION_MAX_TOP_LOGPROBS alternatives per token       */
    int64_t prefill_chunk;     /* prompt positions per step; 0: min(n_prompt, 256)             */
} fp4_session_req;

/* One generated token, valid during the callback. id -1: no token, the text held back by the
 * stop strings or an unfinished UTF-8 character, given once at the end. */
typedef struct fp4_session_tok {
    int32_t id;
    int32_t end;      /* 1: a stop id (nothing follows)                                         */
    const char *text; /* the text complete after this token (may be empty; NULL without tok)   */
    size_t len;
    float logprob;    /* when req.logprobs or top_logprobs                                     */
    int32_t n_top;    /* top_logprobs alternatives, best first (ties: lower id first)          */
    const int32_t *top_ids;
    const float *top_logprobs;
} fp4_session_tok;
/* Return 0 to go on, nonzero to cancel the request (FP4_FINISH_CANCELLED). */
typedef int (*fp4_session_fn)(void *user, const fp4_session_tok *t);

typedef struct fp4_session fp4_session;
/* Checks the request against the engine (ids in the vocabulary, prompt + max_tokens within the
 * context: FP4_ERR_LIMIT rule "rt.context"; stop strings rule "stop.*"; rule "session.*" for the
 * rest) and builds its state. rt is borrowed. */
FP4_API fp4_status fp4_session_create(fp4_rt *rt, const fp4_session_req *req, fp4_session_fn fn, void *user,
                                      fp4_session **out, fp4_error *err);
FP4_API void fp4_session_free(fp4_session *s);
/* Runs the request alone on a sequence of its own (opened and closed here) to its end. cancel
 * (may be NULL) is read before every step: nonzero cancels. FP4_OK for every finish but
 * FP4_FINISH_ERROR (then the engine's status and err). */
FP4_API fp4_status fp4_session_run(fp4_session *s, const volatile int *cancel, fp4_error *err);
/* The same on an open sequence the caller keeps (a conversation continued turn after turn): it
 * caches the prompt's first fp4_rt_seq_pos(seq) ids already (fewer than the prompt's; the caller
 * vouches that they are those ids), which are not fed again (the sampler saw the whole prompt).
 * The sequence stays open, caching the prompt and every emitted token but the last. */
FP4_API fp4_status fp4_session_run_on(fp4_session *s, int32_t seq, const volatile int *cancel,
                                      fp4_error *err);
FP4_API fp4_finish fp4_session_finish(const fp4_session *s);
/* Prompt tokens processed and tokens generated (the stop id included) so far. */
FP4_API void fp4_session_counts(const fp4_session *s, int64_t *n_prompt, int64_t *n_gen);

/* The scheduler: requests join the running batch between steps (continuous batching on the
 * multi-sequence step), new prompts are prefilled in chunks inside the steps that decode the
 * running ones, a request's sequence is closed as soon as it ends. One thread of its own runs the
 * steps; callbacks are called on it (keep them short). */
typedef struct fp4_sched fp4_sched;
/* The prefix cache: the KV blocks of prompt prefixes, reused by a later request whose prompt
 * starts with the same whole blocks of tokens (the blocks of fp4_rt_kv_blocks). A block is keyed
 * by the engine's KV identity (fp4_rt_identity: weights, lane, mode, ...), so one cache may serve
 * several engines and never hands one's rows to another. In exact mode a request's tokens and
 * log-probabilities are bit-identical whether its prefix came from the cache or not. Thread-safe;
 * max_blocks bounds it (least recently used blocks go first). */
typedef struct fp4_prefix_cache fp4_prefix_cache;
typedef struct fp4_prefix_stats {
    int64_t blocks, max_blocks;                 /* now                                        */
    int64_t lookups, hits, reused_tokens;       /* loads asked, loads that found a prefix     */
    int64_t stored_blocks, evicted;             /* since creation                             */
    int64_t recycled; /* blocks stored in an evicted block's buffers (nothing allocated)         */
    double load_seconds, store_seconds; /* spent in loads and stores (the engine's thread waits) */
} fp4_prefix_stats;
FP4_API fp4_status fp4_prefix_cache_create(int64_t max_blocks, fp4_prefix_cache **out, fp4_error *err);
FP4_API void fp4_prefix_cache_free(fp4_prefix_cache *c);
FP4_API fp4_prefix_stats fp4_prefix_cache_stats(fp4_prefix_cache *c);
typedef struct fp4_sched_opts {
    int32_t max_running; /* requests in the batch at once; 0: the engine's max_seqs               */
    int32_t max_queue;   /* requests waiting beyond those; 0: 64. Full: FP4_ERR_LIMIT "sched.queue" */
    int64_t step_tokens; /* columns per step (decodes first, the rest for prefill); 0: 256         */
    fp4_prefix_cache *prefix; /* NULL: none; else the caller's (it outlives the scheduler)       */
    int64_t step_prefill; /* prompt columns per step while a request decodes (at least 1; fewer
                           * make the streams' steps shorter, the new prompts' first tokens later);
                           * 0: what step_tokens leaves after the decodes (at least 16)          */
} fp4_sched_opts;
typedef struct fp4_sched_stats {
    int64_t running, queued;         /* now                                                       */
    int64_t steps, prompt_tokens, generated_tokens, finished; /* since creation                  */
    int64_t kv_block, kv_blocks_used, kv_blocks_total; /* now: fp4_rt_kv_blocks                  */
    int64_t cached_tokens; /* since creation: prompt positions loaded from the prefix cache     */
    /* since creation, the engine's steps apart: [0] decode columns only, [1] with prompt columns */
    int64_t kind_steps[2], kind_columns[2];
    double kind_seconds[2]; /* the engine's step calls (the callbacks and the prefix cache apart) */
} fp4_sched_stats;
/* Told once when a request ends (after its last token callback), with its finish and counts. */
typedef void (*fp4_sched_done_fn)(void *user, fp4_finish f, int64_t n_prompt, int64_t n_gen,
                                  const fp4_error *err);
FP4_API fp4_status fp4_sched_create(fp4_rt *rt, const fp4_sched_opts *o, fp4_sched **out, fp4_error *err);
/* Stops the thread: the requests still there end FP4_FINISH_CANCELLED (done is called). */
FP4_API void fp4_sched_free(fp4_sched *s);
/* Queues a request (fp4_session_create's checks first, reported here); *id names it for cancel.
 * FP4_ERR_LIMIT rule "sched.queue" when the queue is full; done is then not called. */
FP4_API fp4_status fp4_sched_submit(fp4_sched *s, const fp4_session_req *req, fp4_session_fn fn,
                                    fp4_sched_done_fn done, void *user, uint64_t *id, fp4_error *err);
/* Cancels a request (no effect once it ended): it ends before the next step. */
FP4_API void fp4_sched_cancel(fp4_sched *s, uint64_t id);
FP4_API fp4_sched_stats fp4_sched_get_stats(fp4_sched *s);

/* Speculative decoding (docs/ROUTES.md, "Speculative decoding")                              */
/*
 * A draft engine (a second, smaller checkpoint with the same vocabulary) proposes up to K tokens
 * greedily; the target engine checks them in one step of K+1 columns of its sequence (the
 * pending token and the K drafted ones); the target's own sampler then picks, column by column in
 * order, the token plain decoding would pick from that column's logits. Drafted tokens are
 * accepted while they equal those picks; the first pick that differs (or the pick after the last
 * drafted token) is emitted too; both caches are rolled back (fp4_rt_seq_truncate) to what was
 * accepted. On the routes the table qualifies for drafting, the logits of a column do not depend
 * on the other columns of its step (exact mode: batch and chunk invariant; the kquant lane), so
 * the emitted tokens, the sampler's state and every logit equal plain decoding's bit for bit,
 * whatever the draft proposes: the draft changes only the speed. With temperature > 0 this is
 * not the rejection scheme of Leviathan et al.: a drafted token is accepted only when the
 * target's seeded sample equals it, which keeps the output exactly what plain decoding with the
 * same seed emits, at a lower acceptance rate than rejection sampling would reach.
 */
#define FP4_SPEC_MAX_DRAFT 32

typedef struct fp4_spec fp4_spec;
typedef struct fp4_spec_stats {
    int64_t rounds;   /* target steps made by rounds                                           */
    int64_t drafted;  /* tokens the draft proposed                                             */
    int64_t accepted; /* drafted tokens that equalled the target's pick                        */
    int64_t emitted;  /* tokens the rounds emitted                                             */
} fp4_spec_stats;

/* target: created with fp4_rt_opts.drafting = 1 (else FP4_ERR_INVALID_ARG, rule "spec.target");
 * draft: the same vocabulary (else FP4_ERR_FORMAT, rule "spec.vocab", naming both sizes); tseq
 * and dseq: open sequences of each; n_draft in [1, FP4_SPEC_MAX_DRAFT]. Both engines borrowed. */
FP4_API fp4_status fp4_spec_create(fp4_rt *target, int32_t tseq, fp4_rt *draft, int32_t dseq, int32_t n_draft,
                                   fp4_spec **out, fp4_error *err);
FP4_API void fp4_spec_free(fp4_spec *s);
FP4_API fp4_spec_stats fp4_spec_get_stats(const fp4_spec *s);

/* Told of each token a round emits, in order, with the target's logits row it was picked from
 * (vocab floats, valid during the call): return 0 to go on, 1 to end the generation with this
 * token (EOS, a stop string, the budget), < 0 to fail the round (FP4_ERR_IO, rule "spec.emit"). */
typedef int (*fp4_spec_emit_fn)(void *user, int32_t token, const float *logits);

/* One round. hist[0..n_hist): the sequence so far, prompt then emitted tokens; the last one is
 * pending (emitted, not yet cached by the target: fp4_rt_seq_pos(target) == n_hist - 1, else
 * FP4_ERR_INVALID_ARG rule "spec.pos"). The draft caches a prefix of hist and catches up first;
 * hist is read only before the first emit call. max_new >= 1: tokens the caller still takes; at
 * most min(n_draft, max_new - 1) are drafted, fewer near either engine's context length (none:
 * a plain step). smp (the target's sampler) samples each emitted token once, in order, and is
 * told of it (fp4_sampler_accept) before emit. *stopped = 1 when emit returned 1. Afterwards
 * the target caches every emitted token but the last, which is pending, as plain decoding
 * leaves it. On an engine error the sequences are closed (fp4_rt_step's rule). */
FP4_API fp4_status fp4_spec_round(fp4_spec *s, const int32_t *hist, int64_t n_hist, int64_t max_new,
                                  fp4_sampler *smp, fp4_spec_emit_fn emit, void *user, int *stopped,
                                  fp4_error *err);

/* Speculative decoding inside the generation loop (fp4_session): after the prompt and its first
 * token, the session decodes by fp4_spec_round with draft (borrowed; a sequence of its own opened
 * and closed by the run) proposing n_draft tokens a round; the session's engine must have been
 * created with drafting = 1. The tokens, logits and text are the loop's without a draft, bit for
 * bit in exact mode. Before the session runs (else rule "session.draft"); fp4_spec_create's
 * refusals come from the run. */
FP4_API fp4_status fp4_session_set_draft(fp4_session *s, fp4_rt *draft, int32_t n_draft, fp4_error *err);
/* The rounds' counts so far (all 0 without a draft). */
FP4_API fp4_spec_stats fp4_session_spec_stats(const fp4_session *s);

#ifdef __cplusplus
}
#endif

#endif /* FP4LANE_RUNTIME_H */
