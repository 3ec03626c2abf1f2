/* backend.h — the decode step as a backend interface, implemented by the CPU backend
 * (src/cpu/step.c, in libfp4lane) and the CUDA twin (src/cuda/step/step.cu, built into
 * libfp4lane_cuda.so and found with dlopen, so `fp4lane` needs no CUDA to build or run on a CPU).
 *
 * ============================== THE STEP (the spec of both twins) ==============================
 * Notation: H = hidden, D = head_dim, NH = n_heads, NKV = n_kv_heads, G = NH / NKV, F = ffn,
 * V = vocab; all activations f32; "project(W, x)" is the backend's dispatch table on (weight type,
 * activation precision, mode) over all n columns at once (CPU: fp4_cpu_project; CUDA:
 * fp4_cuda_project); every other float operation is the pinned one in pinned.h (fp4p_*), in exact
 * mode bit for bit. Columns are independent except through the KV cache: the arithmetic of a
 * column never depends on which other columns share its step.
 *
 * Input: n columns c = (token t_c, slot s_c, position p_c). Columns of one slot have consecutive
 * increasing positions in column order; slot s_c already caches positions [0, first p_c).
 *
 *  1. x_c = row t_c of tok_embd, widened to f32: F16/BF16/F32 exactly; NVFP4 by the pinned
 *     dequant order (e2m1*e4m3)*scale2; Q4_K/Q6_K by ggml's dequantization (fp4_tensor_dequant_rows).
 *  2. for each layer L = 0 .. n_layers-1:
 *     a. h_c = rmsnorm(x_c, attn_norm)                   fp4p_rmsnorm (eps = arch.rms_eps)
 *     b. q = project(Wq, h) [NH*D], k = project(Wk, h) [NKV*D], v = project(Wv, h) [NKV*D]
 *        (three calls, in this order; a backend may fuse them only if the bits are unchanged)
 *     c. qkv_bias: q[i] += bq[i], k[i] += bk[i], v[i] += bv[i]          (one f32 add each)
 *     d. qk_permuted (llama.cpp GGUF Llama): per head, un-permute q and k:
 *        out[j*D/2 + i] = in[2i + j] for i < D/2, j in {0,1} (a copy, no arithmetic)
 *     e. qk_norm (Qwen3): each head of q by q_norm (D weights), each head of k by k_norm:
 *        fp4p_rmsnorm over D values
 *     f. RoPE of every q head and k head at position p_c: fp4p_rope with row p_c of the host
 *        table (rope_cos/rope_sin, [n_ctx][D/2] f32; the same table is uploaded to the GPU)
 *     g. KV write: K[s_c][L][p_c][kvh][d] = f16(k), V[...] = f16(v)      (fp4p_f32_to_f16, RNE)
 *     h. attention, per column c and query head hq (kv head hq / G): fp4p_attend over the slot's
 *        positions 0..p_c (the cache rows, f16 widened; this step's earlier columns of the
 *        slot included, written in g), scale = rt attn_scale -> o_c [NH*D]
 *     i. x_c[i] = x_c[i] + project(Wo, o)[i]                              (one f32 add)
 *     j. h_c = rmsnorm(x_c, ffn_norm)
 *     k. g = project(Wgate, h) [F], u = project(Wup, h) [F]
 *     l. a[i] = fp4p_swiglu(g[i], u[i])
 *     m. x_c[i] = x_c[i] + project(Wdown, a)[i]
 *     MoE layers (fp4_arch_layer_moe(arch, L); E = n_experts, K = n_experts_used, FE = moe_ffn)
 *     replace k..m by:
 *     k'. r = project(Wrouter, h) [E]      (the router is F16/BF16/F32, never quantized: exact mode
 *        runs it on dense.pinned)
 *     l'. per column, fp4p_moe_route(r, E, K, arch.moe_routing, arch.moe_norm_topk) (pinned.h):
 *        the K experts e_0..e_{K-1} in selection order (descending weight, ties to the lower
 *        expert index) and their weights w_0..w_{K-1}:
 *          SOFTMAX_TOPK (Qwen3-MoE): p = pinned softmax over all E logits, the top K of p;
 *            moe_norm_topk: w_j = p_j / (Σ p over the K, pinned sum in selection order), else p_j
 *          TOPK_SOFTMAX (Mixtral): the top K logits, w = pinned softmax over those K
 *     m'. for each chosen expert e_j of the column: a = fp4p_swiglu(project(Wgate_e, h),
 *        project(Wup_e, h)) [FE], y_j = project(Wdown_e, a) [H]; then
 *        x_c[i] = x_c[i] + fp4p_moe_combine (acc = w_0 y_0[i]; acc += w_j y_j[i] for j = 1..K-1,
 *        each product and sum one f32 rounding, in selection order)
 *        A backend groups a step's columns by expert (each expert's weights read once per step,
 *        the columns that chose it in column order through one multi-column project): the
 *        projections give each column its one-column bits, so grouping changes no bit.
 *     Latent attention (DeepSeek-V3, arch.kv_lora_rank > 0) replaces b..i before the residual add
 *     (src/cpu/mla.c; the order in docs/ROUTES.md, DeepSeek-V3): q through q_a / q_a_layernorm / q_b, the
 *     latent through kv_a / kv_a_layernorm, the cache row [latent, roped k_pe] in F16, each head
 *     attending with the absorbed query [W_UK_h^T q_nope, q_pe] over the rows, its value W_UV_h
 *     times the weighted latent, then project(Wo). MoE routing 3 (fp4p_moe_route_group) adds the
 *     shared experts' output to the combine before the residual add.
 *  3. for the columns that want logits (in column order): h = rmsnorm(x_c, output_norm);
 *     logits = project(head, h) [V]    (head = tok_embd when tied)
 *
 * Gemma 3 (family FP4_ARCH_GEMMA3; every op pinned in src/format/pinned_gemma.h):
 *  1. x_c = fp4p_embed_scale(x_c, dtype((float)sqrt(H)), dtype): one f32 multiply, rounded to the
 *     embedding's dtype (bf16 for a quantized table), as transformers' scaled embedding.
 *  a/e/j/3. norm gains: an HF checkpoint's weight w widened to the f32 gain fp4p_add(1, w) (the
 *     vec tables already hold it); llama.cpp's files store the gain.
 *  f. a local layer (fp4_arch_layer_local) rotates by rope_cos_local/rope_sin_local.
 *  h. scale = (float)(1 / sqrt(query_pre_attn_scalar)); a local layer attends to positions
 *     max(0, p_c - W + 1) .. p_c (W = sliding_window) in increasing order: its rows come from the
 *     ring (fp4_rt_kv_ring) in that order, so the bits are a full cache's.
 *  i. x_c[i] = x_c[i] + rmsnorm(project(Wo, o), attn_post_norm)[i]
 *  j. h_c = rmsnorm(x_c, ffn_norm) (pre_feedforward_layernorm)
 *  l. a[i] = fp4p_geglu(g[i], u[i]) (gelu_pytorch_tanh in PyTorch's order, fp4p_tanh)
 *  m. x_c[i] = x_c[i] + rmsnorm(project(Wdown, a), ffn_post_norm)[i]
 *  3. final_logit_softcapping c > 0: logits[i] = fp4p_softcap(logits[i], (float)c).
 *
 * Norm weights and biases are widened to f32 exactly (F16/BF16/F32 tensors).
 * Projections in exact mode (the routes the twin must match bit for bit):
 *   NVFP4 A16  -> SPEC §4 (Q8_K per column, integer dots, pinned epilogue, F16 boundary)
 *   NVFP4 W4A4 -> SPEC §5
 *   F16/BF16/F32 -> "dense.pinned": y[r] = fp4p_dot(w_row_r widened to f32, x_c, n_in)
 *   FP8 E4M3 + f32 scale (fp4_fp8_view) -> "fp8.dense.pinned": y[r] = fp4p_mul(fp4p_dot(e4m3 row r
 *                widened to f32 (exact), x_c, n_in), scale_r): the dense.pinned dot, then one
 *                pinned multiply by the tensor's (or row's) scale. A CUDA twin would widen E4M3 to
 *                bf16 at upload (exact: 3 mantissa bits, exponents 2^-9..2^8), run bf16.dense.pinned
 *                and apply the same fp4p_mul: src/cuda/fp8.cu does exactly that (routes
 *                fp8.dense.pinned / fp8.dense, tests/gpu/test_gpu_fp8.cu); until that test has
 *                run on a GPU the route table refuses FP8 on CUDA at startup (docs/ROUTES.md)
 *   Q4_K/Q6_K  -> CPU only (ggml's Q8_K dot); refused on CUDA in exact mode (docs/ROUTES.md)
 * Native mode: any kernel of the device's table; no bit contract (held to tolerances in tests).
 * ================================================================================================
 *
 * The CUDA twin as a library: libfp4lane_cuda.so exports exactly one symbol, FP4_RT_CUDA_ENTRY
 * (extern "C"), returning its ops for FP4_RT_BACKEND_ABI (NULL for another ABI; every op must be
 * set or the runtime refuses the library). It is dlopen'ed by a process whose own fp4lane symbols
 * are hidden, so it links what it needs itself (src/format objects, the src/cuda kernels,
 * cudart). It reads the desc's host tensors once in create() (fp4_cuda_tensor_upload*), uploads
 * desc->vec / out_norm_f32 / rope tables as they are, and owns its KV cache on the device.
 * Bit-identity check from the CLI: `fp4lane compare MODEL --a "--mode exact" --b "--mode exact
 * --device cuda" --prompt-ids ... --max-drift 0` (exit 1 on any differing logit bit).
 */
#ifndef FP4_RT_BACKEND_H
#define FP4_RT_BACKEND_H

#include "fp4lane_runtime.h"

#define FP4_RT_BACKEND_ABI 8u /* 6: paged KV, Gemma 3; 7: the split engine's desc member tp; 8: the
                               * DeepSeek-V3 layer slots (FP4_LW_Q_A ..) */
/* The symbol libfp4lane_cuda.so exports (extern "C"): returns its ops for this ABI or NULL. */
#define FP4_RT_CUDA_ENTRY "fp4_rt_cuda_backend"
#define FP4_RT_CUDA_LIBNAME "libfp4lane_cuda.so"

/* Per-layer weight slots; optional ones are NULL when the architecture has none. */
typedef enum fp4_rt_lw {
    FP4_LW_ATTN_NORM = 0,
    FP4_LW_Q,
    FP4_LW_K,
    FP4_LW_V,
    FP4_LW_O,
    FP4_LW_Q_BIAS,
    FP4_LW_K_BIAS,
    FP4_LW_V_BIAS, /* qkv_bias */
    FP4_LW_Q_NORM,
    FP4_LW_K_NORM, /* qk_norm  */
    FP4_LW_FFN_NORM,
    FP4_LW_GATE,
    FP4_LW_UP,
    FP4_LW_DOWN,
    FP4_LW_ATTN_POST_NORM, /* Gemma 3: the attention output's norm before the residual add   */
    FP4_LW_FFN_POST_NORM,  /* Gemma 3: the MLP output's norm before the residual add         */
    /* DeepSeek-V3 (MLA, latent attention: Q is q_b_proj when q_lora_rank > 0; K, V absent) */
    FP4_LW_Q_A,       /* q_a_proj [q_lora_rank, H]                                       */
    FP4_LW_Q_A_NORM,  /* q_a_layernorm [q_lora_rank]                                     */
    FP4_LW_KV_A,      /* kv_a_proj_with_mqa [kv_lora_rank + qk_rope_dim, H]              */
    FP4_LW_KV_A_NORM, /* kv_a_layernorm [kv_lora_rank]                                   */
    FP4_LW_KV_B,      /* kv_b_proj [NH * (qk_nope_dim + v_head_dim), kv_lora_rank]       */
    FP4_LW_SH_GATE,   /* shared experts of a MoE layer: [n_shared * moe_ffn, H]          */
    FP4_LW_SH_UP,
    FP4_LW_SH_DOWN,
    FP4_LW_EXP_BIAS, /* e_score_correction_bias [E] (selection only)                    */
    FP4_LW_K_B,      /* llama.cpp's split kv_b (instead of KV_B): attn_k_b ne [nope, R, NH] */
    FP4_LW_V_B,      /*                                           attn_v_b ne [R, v, NH]    */
    FP4_LW_COUNT_
} fp4_rt_lw;

/* Everything a backend needs to build its copy of the model. Every pointer stays valid until the
 * backend's destroy(): tensors point into the open fp4_model (host memory), the tables into the
 * engine. */
typedef struct fp4_rt_model_desc {
    fp4_arch arch;
    fp4_mode mode;
    const fp4_tensor *tok_embd;       /* [V rows, H]                                         */
    const fp4_tensor *out_norm;       /* [H]                                                 */
    const fp4_tensor *head;           /* [V rows, H]; == tok_embd when tied                  */
    const fp4_tensor *const *layer;   /* n_layers * FP4_LW_COUNT_, slot-major per layer      */
    const float *const *vec;          /* n_layers * FP4_LW_COUNT_: the norm weights and biases
                                         widened to f32 (exact), NULL for matrices and absent
                                         slots; a backend uploads these, never re-widens      */
    const float *out_norm_f32;        /* [H] output_norm widened to f32                       */
    const float *rope_cos, *rope_sin; /* [n_ctx][D/2]                                        */
    float attn_scale;                 /* (float)(1 / sqrt((double)D))                        */
    int64_t n_ctx;                    /* positions per slot                                  */
    int32_t n_slots;                  /* KV slots                                            */
    int invariant;                    /* the lane qualifies for drafting (fp4_spec): a k-column
                                         step must give each column a 1-column step's bits (on
                                         CUDA no route that would not: FP4_CUDA_TENSOR_INVARIANT) */
    int n_threads;                    /* CPU                                                 */
    int device;                       /* CUDA device index                                   */
    /* ABI 2: a device backend reports its memory plan here before uploading (may be NULL) */
    void (*on_plan)(const fp4_rt_mem_plan *plan, void *user);
    void *plan_user;
    /* ABI 3: at most this many columns of a step want logits (the runtime splits a step at it;
     * <= create's max_cols) */
    int64_t max_logit_cols;
    /* ABI 5: mixture of experts. NULL for a dense model; else n_layers * FP4_MOE_STRIDE(E) tensors:
     * per layer the router, then gate, up, down of expert 0, of expert 1, ...; all NULL for a
     * dense layer (its GATE/UP/DOWN slots are set instead; a MoE layer's are NULL). */
    const fp4_tensor *const *moe;
    /* ABI 6: Gemma 3's local layers rotate by this table (rope_local_theta, no scaling; NULL when
     * the model has no local layer), and their K/V rows live in a ring (fp4_rt_kv_ring) */
    const float *rope_cos_local, *rope_sin_local;
    /* ABI 7: ranks of a tensor-parallel engine (fp4_rt_cpu_tp_backend; <= 1 for the others) */
    int tp;
} fp4_rt_model_desc;

/* The K/V rows a local layer keeps per slot: a ring of R = sliding_window + max_cols positions
 * (a step's later columns and a rollback of up to max_cols positions overwrite none of the rows a
 * column still reads), each position stored at row p % R and again at row p % R + R, so the
 * window of any position is one run of consecutive rows. 0 when the layer keeps all n_ctx rows
 * (a global layer, or a window that does not save memory). */
static inline int64_t fp4_rt_kv_ring(const fp4_arch *a, int64_t L, int64_t n_ctx, int64_t max_cols) {
    if (!fp4_arch_layer_local(a, L)) return 0;
    const int64_t r = a->sliding_window + max_cols;
    return 2 * r < n_ctx ? r : 0;
}

#define FP4_MOE_STRIDE(n_experts) (1 + 3 * (n_experts))
enum { FP4_MOE_ROUTER = 0, FP4_MOE_GATE = 1, FP4_MOE_UP = 2, FP4_MOE_DOWN = 3 };
/* index of expert e's part (FP4_MOE_GATE/UP/DOWN) in one layer's run of FP4_MOE_STRIDE tensors */
#define FP4_MOE_AT(e, part) (1 + 3 * (e) + ((part)-1))

/* One column of a step (see THE STEP). */
typedef struct fp4_rt_col {
    int32_t token;
    int32_t slot;
    int64_t pos;
    int32_t want_logits;
} fp4_rt_col;

typedef struct fp4_rt_backend_ops {
    uint32_t abi;     /* FP4_RT_BACKEND_ABI                                  */
    const char *name; /* "cpu", "cuda"                                       */
    /* The route this backend takes for w in mode (a static string), or NULL when it has none
     * (the runtime then refuses before create). Called before any weight byte is read. */
    const char *(*route)(const fp4_tensor *w, fp4_mode mode);
    /* Upload weights, build tables, allocate (or reserve, when paged: kv_trim below) the KV cache of
     * n_slots × n_layers × n_ctx × fp4_arch_kv_dim halves for K and for V (latent attention: one
     * latent row across the two), and scratch for up to max_cols columns per step. A device backend
     * first computes its memory plan, reports it (d->on_plan) and refuses with FP4_ERR_NOMEM, rule
     * "cuda.memory-plan", before allocating anything when the plan does not fit. */
    fp4_status (*create)(const fp4_rt_model_desc *d, int64_t max_cols, void **state, fp4_error *err);
    void (*destroy)(void *state);
    /* THE STEP over n columns (n <= max_cols; the runtime splits). logits: host, one row of V
     * floats per want_logits column, in column order. Synchronous. */
    fp4_status (*step)(void *state, const fp4_rt_col *cols, int64_t n, float *logits, fp4_error *err);
    /* Copy positions [0, n_pos) of a slot's cache to / from host memory, laid out
     * [layer][pos][fp4_arch_kv_dim] halves (k then v buffers). */
    fp4_status (*kv_read)(void *state, int32_t slot, int64_t n_pos, uint16_t *k, uint16_t *v);
    fp4_status (*kv_write)(void *state, int32_t slot, int64_t n_pos, const uint16_t *k, const uint16_t *v);
    /* ABI 3, optional (NULL: the runtime's default of 64): the columns per step this backend wants
     * for this model (create's max_cols; its prefill runs in steps of that many). Exact mode's bits
     * do not depend on it. */
    int64_t (*step_cols)(const fp4_rt_model_desc *d);
    /* ABI 4, optional (NULL: the runtime takes step's logits and argmax.h on the host): THE STEP,
     * but tokens[k] = fp4_rt_greedy_argmax of the k-th want_logits column's logits instead of the
     * logits themselves (a device backend reduces them where they are); -1 for a row that holds
     * NaN or an infinity (the runtime refuses it, rule rt.nonfinite). Synchronous. */
    fp4_status (*step_greedy)(void *state, const fp4_rt_col *cols, int64_t n, int32_t *tokens,
                              fp4_error *err);
    /* ABI 6, optional (NULL: a cache allocated whole at create, as CUDA's is): a paged cache.
     * kv_trim gives back the slot's blocks wholly past n_pos (0: the sequence ended; the runtime
     * calls it on close and truncation); kv_blocks returns the positions per block and sets
     * *used to the blocks held over all slots. Neither changes a cached row below n_pos. */
    void (*kv_trim)(void *state, int32_t slot, int64_t n_pos);
    int64_t (*kv_blocks)(void *state, int64_t *used);
} fp4_rt_backend_ops;

/* The CPU backend (step_cpu.c). */
const fp4_rt_backend_ops *fp4_rt_cpu_backend(void);
/* The CPU engine split over desc->tp in-process ranks (src/cpu/tp_step.c, docs/SCALE.md); create
 * refuses a split it cannot run or, in exact mode, cannot keep bit for bit (rules tp.*). */
const fp4_rt_backend_ops *fp4_rt_cpu_tp_backend(void);
/* The CPU engine's host memory plan for these sizes (src/cpu/mem_plan.c): FP4_ERR_NOMEM, rule
 * "cpu.memory-plan", before anything is allocated when it is above the cap (3/4 of the physical
 * memory, or $FP4LANE_CPU_MEM_LIMIT bytes); FP4_ERR_OVERFLOW when the sizes overflow. */
fp4_status fp4_rt_cpu_plan(const fp4_arch *a, int64_t n_ctx, int32_t n_slots, int64_t max_cols,
                           int64_t max_logit_cols, int n_threads, fp4_rt_mem_plan *p, fp4_error *err);
/* What libfp4lane_cuda.so exports under FP4_RT_CUDA_ENTRY. */
typedef const fp4_rt_backend_ops *(*fp4_rt_backend_entry)(uint32_t abi);

/* The host RoPE table (rope.c): cos/sin[pos][i] for pos < n_ctx, i < D/2, computed in double
 * from arch (theta, scaling; freq_factors: D/2 divisors of the frequencies, or NULL) and rounded
 * to f32 once. Caller frees both with free(). */
fp4_status fp4_rt_rope_table(const fp4_arch *a, int64_t n_ctx, const float *freq_factors, float **cos_out,
                             float **sin_out);
/* The rotated width (head_dim; latent attention: qk_rope_dim): the table holds half of it per row. */
int64_t fp4_rt_rope_dim(const fp4_arch *a);
/* The softmax scale: (float)(1 / sqrt(head_dim)) (Gemma 3: of query_pre_attn_scalar), times yarn's
 * mscale(factor, mscale_all_dim)^2 (in double, rounded once) when the config sets mscale_all_dim. */
float fp4_rt_attn_scale(const fp4_arch *a);

#endif
