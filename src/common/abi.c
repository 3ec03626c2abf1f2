/* abi.c — fp4_abi_layout: the layout of every public struct the Python binding mirrors, as this
 * library was compiled, so the binding checks its ctypes declarations instead of trusting them
 * (a missing member shifts every later one silently). tests/test_abi.c holds this table against
 * the struct definitions of the public headers, member for member, in order. */
#include "fp4lane_runtime.h"
#include <stddef.h>

#define ABI_F(T, f)                                                                                          \
    { #T, #f, offsetof(T, f), sizeof(((T *)0)->f) }
#define ABI_END(T)                                                                                           \
    { #T, NULL, sizeof(T), 0 }

static const fp4_abi_field abi_rows[] = {
    ABI_F(fp4_abi_field, type),
    ABI_F(fp4_abi_field, field),
    ABI_F(fp4_abi_field, offset),
    ABI_F(fp4_abi_field, size),
    ABI_END(fp4_abi_field),

    ABI_F(fp4_error, code),
    ABI_F(fp4_error, file),
    ABI_F(fp4_error, tensor),
    ABI_F(fp4_error, rule),
    ABI_F(fp4_error, msg),
    ABI_END(fp4_error),

    ABI_F(fp4_nvfp4_view, payload),
    ABI_F(fp4_nvfp4_view, scales),
    ABI_F(fp4_nvfp4_view, scale2),
    ABI_F(fp4_nvfp4_view, input_scale_inv),
    ABI_F(fp4_nvfp4_view, n_out),
    ABI_F(fp4_nvfp4_view, n_in),
    ABI_F(fp4_nvfp4_view, packing),
    ABI_END(fp4_nvfp4_view),

    ABI_F(fp4_fp8_view, scale),
    ABI_F(fp4_fp8_view, row_scale),
    ABI_F(fp4_fp8_view, input_scale),
    ABI_F(fp4_fp8_view, n_out),
    ABI_F(fp4_fp8_view, n_in),
    ABI_END(fp4_fp8_view),

    ABI_F(fp4_tensor, name),
    ABI_F(fp4_tensor, type),
    ABI_F(fp4_tensor, n_dims),
    ABI_F(fp4_tensor, ne),
    ABI_F(fp4_tensor, data),
    ABI_F(fp4_tensor, nbytes),
    ABI_F(fp4_tensor, nvfp4),
    ABI_F(fp4_tensor, st_dtype),
    ABI_F(fp4_tensor, fp8),
    ABI_END(fp4_tensor),

    ABI_F(fp4_type_info, type),
    ABI_F(fp4_type_info, name),
    ABI_F(fp4_type_info, block_size),
    ABI_F(fp4_type_info, type_size),
    ABI_END(fp4_type_info),

    ABI_F(fp4_write_opts, layout),
    ABI_F(fp4_write_opts, max_shard_bytes),
    ABI_F(fp4_write_opts, st_metadata),
    ABI_F(fp4_write_opts, progress),
    ABI_F(fp4_write_opts, progress_ctx),
    ABI_F(fp4_write_opts, force),
    ABI_F(fp4_write_opts, cancel),
    ABI_END(fp4_write_opts),

    ABI_F(fp4_quantize_opts, layout),
    ABI_F(fp4_quantize_opts, to_q4_k),
    ABI_F(fp4_quantize_opts, rule),
    ABI_F(fp4_quantize_opts, no_fusion),
    ABI_F(fp4_quantize_opts, quantize_embeddings),
    ABI_F(fp4_quantize_opts, max_shard_bytes),
    ABI_F(fp4_quantize_opts, st_metadata),
    ABI_F(fp4_quantize_opts, progress),
    ABI_F(fp4_quantize_opts, progress_ctx),
    ABI_F(fp4_quantize_opts, force),
    ABI_F(fp4_quantize_opts, cancel),
    ABI_END(fp4_quantize_opts),

    ABI_F(fp4_arch, family),
    ABI_F(fp4_arch, source),
    ABI_F(fp4_arch, n_layers),
    ABI_F(fp4_arch, hidden),
    ABI_F(fp4_arch, n_heads),
    ABI_F(fp4_arch, n_kv_heads),
    ABI_F(fp4_arch, head_dim),
    ABI_F(fp4_arch, ffn),
    ABI_F(fp4_arch, vocab),
    ABI_F(fp4_arch, n_ctx_train),
    ABI_F(fp4_arch, rms_eps),
    ABI_F(fp4_arch, rope_theta),
    ABI_F(fp4_arch, rope_scaling),
    ABI_F(fp4_arch, rope_factor),
    ABI_F(fp4_arch, rope_low_freq_factor),
    ABI_F(fp4_arch, rope_high_freq_factor),
    ABI_F(fp4_arch, rope_orig_ctx),
    ABI_F(fp4_arch, rope_freq_factors),
    ABI_F(fp4_arch, tied_head),
    ABI_F(fp4_arch, qkv_bias),
    ABI_F(fp4_arch, qk_norm),
    ABI_F(fp4_arch, qk_permuted),
    ABI_F(fp4_arch, bos),
    ABI_F(fp4_arch, n_eos),
    ABI_F(fp4_arch, eos),
    ABI_F(fp4_arch, n_experts),
    ABI_F(fp4_arch, n_experts_used),
    ABI_F(fp4_arch, moe_ffn),
    ABI_F(fp4_arch, moe_routing),
    ABI_F(fp4_arch, moe_norm_topk),
    ABI_F(fp4_arch, moe_dense),
    ABI_F(fp4_arch, sliding_window),
    ABI_F(fp4_arch, swa_layers),
    ABI_F(fp4_arch, rope_local_theta),
    ABI_F(fp4_arch, query_pre_attn_scalar),
    ABI_F(fp4_arch, final_softcap),
    ABI_F(fp4_arch, hidden_act),
    ABI_F(fp4_arch, embed_scale),
    ABI_END(fp4_arch),

    ABI_F(fp4_rt_opts, mode),
    ABI_F(fp4_rt_opts, device),
    ABI_F(fp4_rt_opts, n_threads),
    ABI_F(fp4_rt_opts, n_ctx),
    ABI_F(fp4_rt_opts, max_seqs),
    ABI_F(fp4_rt_opts, kv_dtype),
    ABI_F(fp4_rt_opts, drafting),
    ABI_F(fp4_rt_opts, cuda_lib),
    ABI_F(fp4_rt_opts, cuda_device),
    ABI_F(fp4_rt_opts, on_plan),
    ABI_F(fp4_rt_opts, plan_user),
    ABI_END(fp4_rt_opts),

    ABI_F(fp4_rt_tok, seq),
    ABI_F(fp4_rt_tok, token),
    ABI_F(fp4_rt_tok, want_logits),
    ABI_END(fp4_rt_tok),

    ABI_F(fp4_sampler_params, temperature),
    ABI_F(fp4_sampler_params, top_k),
    ABI_F(fp4_sampler_params, top_p),
    ABI_F(fp4_sampler_params, min_p),
    ABI_F(fp4_sampler_params, repeat_penalty),
    ABI_F(fp4_sampler_params, presence_penalty),
    ABI_F(fp4_sampler_params, penalty_last_n),
    ABI_F(fp4_sampler_params, seed),
    ABI_END(fp4_sampler_params),

    ABI_F(fp4_arg_val, i),
    ABI_F(fp4_arg_val, u),
    ABI_F(fp4_arg_val, f),
    ABI_END(fp4_arg_val),
};

const fp4_abi_field *fp4_abi_layout(int64_t *n) {
    if (n) *n = (int64_t)(sizeof abi_rows / sizeof abi_rows[0]);
    return abi_rows;
}
