/* ggml_deepseek.c — DeepSeek-V3 / R1 written as llama.cpp's own deepseek2 GGUF (layout gguf-ggml;
 * ggml_arch.c does the rest, ggml_moe.c stacks the routed experts): the latent attention's and the
 * shared experts' names (llama-arch.cpp LLM_TENSOR_*: attn_q_a, attn_q_a_norm, attn_q_b,
 * attn_kv_a_mqa, attn_kv_a_norm, attn_kv_b, ffn_*_shexp, exp_probs_b), and deepseek2's keys:
 * leading_dense_block_count, expert_shared_count, expert_weights_scale / _norm, expert_gating_func
 * (2: sigmoid), expert_group_count / _used_count, attention.q_lora_rank / kv_lora_rank, and yarn as
 * rope.scaling.{type, factor, original_context_length, yarn_log_multiplier = 0.1 * mscale_all_dim}.
 * kv_b stays whole (llama.cpp reads attn_kv_b without the _mla keys as the expanded form), the rope
 * pairs adjacent (llama.cpp's deepseek2 ropes as rope_interleave true does), and the
 * multi-token-prediction layer is left out, as llama.cpp's converter leaves it.
 *
 * Not llama.cpp's form (the checkpoint then keeps its HF names, as for a family not mapped):
 * q_lora_rank null (llama.cpp's deepseek2 takes a plain q projection from the layer count of
 * DeepSeek-V2-Lite only), rope_interleave false, mscale != mscale_all_dim (llama.cpp derives both
 * yarn factors from one multiplier), rope scaling other than yarn or none. */
#include "layout_impl.h"
#include "fp4lane_runtime.h"
#include <stdio.h>
#include <string.h>

static const struct {
    const char *hf, *gg;
} ds_names[] = {
    {"self_attn.q_a_proj.", "attn_q_a."},
    {"self_attn.q_a_layernorm.", "attn_q_a_norm."},
    {"self_attn.q_b_proj.", "attn_q_b."},
    {"self_attn.kv_a_proj_with_mqa.", "attn_kv_a_mqa."},
    {"self_attn.kv_a_layernorm.", "attn_kv_a_norm."},
    {"self_attn.kv_b_proj.", "attn_kv_b."},
    {"mlp.shared_experts.gate_proj.", "ffn_gate_shexp."},
    {"mlp.shared_experts.up_proj.", "ffn_up_shexp."},
    {"mlp.shared_experts.down_proj.", "ffn_down_shexp."},
    {"mlp.gate.e_score_correction_bias", "exp_probs_b.bias"}, /* whole names: no suffix */
};

int fp4_ggml_ds_map(const char *in, char *out, size_t n, int to_gg) {
    for (size_t i = 0; i < sizeof ds_names / sizeof ds_names[0]; i++) {
        const char *from = to_gg ? ds_names[i].hf : ds_names[i].gg,
                   *to = to_gg ? ds_names[i].gg : ds_names[i].hf;
        const size_t l = strlen(from);
        if (strncmp(in, from, l) || (from[l - 1] != '.' && in[l] && in[l] != '.')) continue;
        return snprintf(out, n, "%s%s", to, in + l) < (int)n;
    }
    return 0;
}

int fp4_ggml_ds_supported(const fp4_arch *a) {
    return a->q_lora_rank > 0 && a->rope_interleave &&
           (a->rope_scaling == FP4_ROPE_NONE ||
            (a->rope_scaling == FP4_ROPE_YARN && a->rope_mscale == a->rope_mscale_all_dim));
}

static fp4_status kv_add(plan *p, const char *key, int is_u32, int64_t u, float f, fp4_error *err) {
    if (is_u32 && (u < 0 || u > (int64_t)UINT32_MAX))
        return fp4_fail(err, FP4_ERR_LIMIT, NULL, NULL, "ggml.kv", "deepseek2.%s = %lld does not fit a u32",
                        key, (long long)u);
    plan_kv *k = fp4_plan_kv_add(p);
    if (!k) return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
    snprintf(k->key, sizeof k->key, "deepseek2.%s", key);
    if (is_u32 == 2)
        k->is_bool = 1;
    else if (is_u32)
        k->is_u32 = 1, k->u = (uint32_t)u;
    else
        k->is_f32 = 1, k->f = f;
    return FP4_OK;
}

fp4_status fp4_ggml_ds_kvs(plan *p, const fp4_arch *a, fp4_error *err) {
    int64_t lead = 0;
    while (lead < a->n_layers && !fp4_arch_layer_moe(a, lead))
        lead++;
    const struct {
        const char *key;
        int64_t v;
    } u[] = {
        {"leading_dense_block_count", lead},
        {"expert_shared_count", a->n_shared_experts},
        {"expert_gating_func", 2}, /* llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE_SIGMOID */
        {"attention.q_lora_rank", a->q_lora_rank},
        {"attention.kv_lora_rank", a->kv_lora_rank},
    };
    fp4_status st = FP4_OK;
    for (size_t i = 0; i < sizeof u / sizeof u[0] && !st; i++)
        st = kv_add(p, u[i].key, 1, u[i].v, 0, err);
    /* groups: llama.cpp asserts topk_group < n_group; keeping every group is no group limit at all */
    if (!st && a->moe_n_group > 1 && a->moe_topk_group < a->moe_n_group) {
        st = kv_add(p, "expert_group_count", 1, a->moe_n_group, 0, err);
        if (!st) st = kv_add(p, "expert_group_used_count", 1, a->moe_topk_group, 0, err);
    }
    if (!st) st = kv_add(p, "expert_weights_scale", 0, 0, (float)a->routed_scaling, err);
    if (!st && a->moe_norm_topk) st = kv_add(p, "expert_weights_norm", 2, 0, 0, err);
    if (!st && a->rope_scaling == FP4_ROPE_YARN) {
        if (fp4_plan_kv_str(p, "deepseek2.rope.scaling.type", "yarn"))
            return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
        st = kv_add(p, "rope.scaling.factor", 0, 0, (float)a->rope_factor, err);
        if (!st) st = kv_add(p, "rope.scaling.original_context_length", 1, a->rope_orig_ctx, 0, err);
        if (!st)
            st = kv_add(p, "rope.scaling.yarn_log_multiplier", 0, 0, (float)(0.1 * a->rope_mscale_all_dim),
                        err);
    }
    return st;
}
