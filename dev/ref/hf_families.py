"""hf_families.py — Gemma 3 and DeepSeek-V3 for dev/ref/hf_reference.py (issue 31).

What these two families need beyond the dense and MoE models of hf_reference.py, kept here so the
generator's own loop stays as it is:

  gemma3              Gemma3ForCausalLM (model_type gemma3_text): 3 layers typed sliding / full /
                      sliding, sliding_window 16 (64 positions cross it), the global rope theta 1e6
                      with linear scaling 8, the local rope base 1e4 (rope_local_base_freq),
                      query_pre_attn_scalar 96 (not head_dim 64), final_logit_softcapping 15, tied
                      embeddings, hidden 256 so the embedding scale sqrt(256) = 16 is exact in every
                      dtype. Gemma's RMSNorm multiplies by (1 + w): its norm weights (the four per
                      block, q/k norms, the final norm) are drawn U(-0.5, 0.5), gains 0.5..1.5 as the
                      other models' U(0.5, 1.5). attn_logit_softcapping stays null: Gemma 3 has none
                      (fp4lane refuses Gemma 2's attention soft-capping by name).
  deepseek_v3         DeepseekV3ForCausalLM: 2 layers, layer 0 dense (first_k_dense_replace 1),
                      layer 1 8 routed experts in 4 groups (topk_group 2, 2 per token, sigmoid
                      scores, norm_topk_prob, routed_scaling_factor 1.5) plus one shared expert;
                      e_score_correction_bias (a buffer, not a parameter) drawn N(0, 0.03) so the
                      selection differs from the raw scores'; latent attention with q_lora_rank 64,
                      kv_lora_rank 64, qk_nope 32, qk_rope 32, v 32; rope_interleave true; YaRN
                      factor 8 over original_max_position_embeddings 256 (max_position_embeddings
                      2048 = 8 x 256, so transformers' two readings of the factor agree), beta 32/1,
                      mscale 1.0 and mscale_all_dim 0.8 (cos/sin scaled by their ratio, the softmax by
                      mscale(8, 0.8)^2). vocab 256 and widths 256 where NVFP4 exact needs them (the
                      experts' inputs); the checkpoint stays under 5 MB.
  deepseek_v3_nolora  the same attention with q_lora_rank null (a plain q_proj), rope_interleave
                      false, mscale = mscale_all_dim = 1.0 (DeepSeek-V3's own values), both layers
                      dense (first_k_dense_replace 2): the attention variants at ~1 MB.

Routing (deepseek_v3): per position the experts chosen as transformers chooses them (sigmoid of the
router logits, plus the bias for the choice, groups scored by the sum of their top two, topk_group
groups kept, the others' scores set to 0, top-k), recomputed in float64 from the router's input, and
`gap`: the smaller of the group margin (topk_group-th minus next group score) and the expert margin
(k-th minus (k+1)-th choice score) — in score space, so a near tie in this file is ~4x tighter in
router-logit units than the Qwen3-MoE / Mixtral files' gaps. `top_k_model` is what the model's own
route_tokens_to_experts returned (f32 router logits), where it could be captured.
"""
import math
import os
import re

import numpy as np

SIGMA = 0.08
FAMILY_TYPES = ("gemma3_text", "deepseek_v3")
META = ("seed", "drop", "fused_form")

GEMMA3 = {"architectures": ["Gemma3ForCausalLM"], "seed": 100, "drop": ["hidden_act"],
          "hidden_size": 256, "intermediate_size": 256, "num_hidden_layers": 3, "num_attention_heads": 4,
          "num_key_value_heads": 2, "head_dim": 64, "hidden_activation": "gelu_pytorch_tanh",
          "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
          "rope_scaling": {"rope_type": "linear", "factor": 8.0},
          "rope_local_base_freq": 10000.0, "query_pre_attn_scalar": 96, "sliding_window": 16,
          "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
          "final_logit_softcapping": 15.0, "attn_logit_softcapping": None, "tie_word_embeddings": True,
          "attention_bias": False, "bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0}
DS_COMMON = {"architectures": ["DeepseekV3ForCausalLM"], "vocab_size": 256, "hidden_size": 256,
             "intermediate_size": 128, "moe_intermediate_size": 256, "num_hidden_layers": 2,
             "num_attention_heads": 4, "num_key_value_heads": 4, "kv_lora_rank": 64, "qk_nope_head_dim": 32,
             "qk_rope_head_dim": 32, "v_head_dim": 32, "n_routed_experts": 8, "n_group": 4, "topk_group": 2,
             "num_experts_per_tok": 2, "n_shared_experts": 1, "routed_scaling_factor": 1.5,
             "norm_topk_prob": True, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "attention_bias": False,
             "bos_token_id": 0, "eos_token_id": 1, "tie_word_embeddings": False}
DEEPSEEK = dict(DS_COMMON, seed=101, q_lora_rank=64, rope_interleave=True, first_k_dense_replace=1,
                rope_scaling={"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 256,
                              "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 0.8})
DEEPSEEK_NOLORA = dict(DS_COMMON, seed=102, q_lora_rank=None, rope_interleave=False, first_k_dense_replace=2,
                       rope_scaling={"rope_type": "yarn", "factor": 8.0,
                                     "original_max_position_embeddings": 256, "beta_fast": 32.0,
                                     "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0})
MODELS = [
    ("gemma3", "gemma3_text", GEMMA3),
    ("deepseek_v3", "deepseek_v3", DEEPSEEK),
    ("deepseek_v3_nolora", "deepseek_v3", DEEPSEEK_NOLORA),
]
T_FAMILY = 64


def log(*a):
    print(*a, flush=True)


# ---- configs ----

def config_forms(mt, extra):
    """(form, keys) to try in order: the legacy keys a transformers-4 config.json has, then
    transformers 5's rope_parameters."""
    yield "legacy", dict(extra)
    e = dict(extra)
    theta = e.pop("rope_theta")
    sc = e.pop("rope_scaling", None) or {"rope_type": "default"}
    if mt == "gemma3_text":
        local = e.pop("rope_local_base_freq")
        e["rope_parameters"] = {"full_attention": dict(sc, rope_theta=theta),
                                "sliding_attention": {"rope_type": "default", "rope_theta": local}}
    else:
        e["rope_parameters"] = dict(sc, rope_theta=theta)
    yield "rope_parameters", e


def default_inv(theta, dim):
    return 1.0 / theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim)


def yarn_inv(theta, dim, rs):
    """transformers' yarn frequencies (truncate true), in float64"""
    factor, orig = rs["factor"], rs["original_max_position_embeddings"]
    bf, bs = rs.get("beta_fast") or 32, rs.get("beta_slow") or 1

    def corr(rot):
        return dim * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(theta))

    lo, hi = max(math.floor(corr(bf)), 0), min(math.ceil(corr(bs)), dim - 1)
    if lo == hi:
        hi += 0.001
    ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - lo) / (hi - lo), 0, 1)
    extra_f = 1 - ramp
    pos = theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    return (1.0 / (factor * pos)) * (1 - extra_f) + (1.0 / pos) * extra_f


def expected_rope(mt, extra):
    """[(what, inv_freq)] every rotary table the model must hold"""
    if mt == "gemma3_text":
        g = default_inv(extra["rope_theta"], extra["head_dim"])
        sc = extra.get("rope_scaling") or {}
        if sc.get("rope_type") == "linear":
            g = g / sc["factor"]
        return [("full_attention", g), ("sliding_attention", default_inv(extra["rope_local_base_freq"],
                                                                        extra["head_dim"]))]
    return [("yarn", yarn_inv(extra["rope_theta"], extra["qk_rope_head_dim"], extra["rope_scaling"]))]


def inv_freq_buffers(model):
    return {n: b.detach().double().cpu().numpy() for n, b in model.named_buffers() if n.endswith("inv_freq")}


def rope_check(model, expected):
    """(ok, {what: name of the matching buffer or the first values found})"""
    bufs = inv_freq_buffers(model)
    out, ok = {}, True
    for what, exp in expected:
        hit = [n for n, v in bufs.items() if v.shape == exp.shape and np.allclose(v, exp, rtol=2e-6, atol=0)]
        ok &= bool(hit)
        out[what] = hit[0] if hit else {"expected": exp[:4].tolist(),
                                        "found": {n: v[:4].tolist() for n, v in bufs.items()}}
    return ok, out


# ---- weights ----

def norm_range(mt):
    return (-0.5, 0.5) if mt == "gemma3_text" else (0.5, 1.5)


def init_buffers(model, rng):
    """DeepSeek's e_score_correction_bias is a persistent buffer (saved, not a parameter)"""
    import torch
    drawn = []
    for name, b in model.named_buffers():
        if name.endswith("e_score_correction_bias"):
            v = rng.normal(0.0, 0.03, tuple(b.shape))
            with torch.no_grad():
                b.copy_(torch.from_numpy(v).to(b.dtype))
            drawn.append((name, list(b.shape), "N(0,0.03)"))
    return drawn


def bias_buffers(model):
    import torch
    return {n: b.detach().to(torch.float64).clone() for n, b in model.named_buffers()
            if n.endswith("e_score_correction_bias")}


FUSED = re.compile(r"^(.*\.mlp\.experts)\.(gate_up_proj|down_proj)$")


def to_per_expert(d):
    """If transformers wrote the routed experts fused ([E, 2I, H] gate_up_proj, [E, H, I] down_proj),
    rewrite the file with DeepSeek's own per-expert names (what NVIDIA's FP4 checkpoints keep).
    Returns the list of tensors rewritten (empty: the file was already per expert)."""
    from safetensors.torch import load_file, save_file
    files = [f for f in sorted(os.listdir(d)) if f.endswith(".safetensors")]
    sd = {}
    for f in files:
        sd.update(load_file(os.path.join(d, f)))
    fused = [n for n in sd if FUSED.match(n)]
    if not fused:
        return []
    out = {}
    for n, t in sd.items():
        m = FUSED.match(n)
        if not m:
            out[n] = t
            continue
        for e in range(t.shape[0]):
            if m.group(2) == "down_proj":
                out[f"{m.group(1)}.{e}.down_proj.weight"] = t[e].contiguous()
            else:
                inter = t.shape[1] // 2
                out[f"{m.group(1)}.{e}.gate_proj.weight"] = t[e, :inter].contiguous()
                out[f"{m.group(1)}.{e}.up_proj.weight"] = t[e, inter:].contiguous()
    for f in os.listdir(d):
        if f.endswith(".safetensors") or f.endswith(".safetensors.index.json"):
            os.remove(os.path.join(d, f))
    save_file(out, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    return fused


def expected_nvfp4(cfg):
    """how many weights `fp4lane quantize --layout modelopt` quantizes"""
    nl = cfg.num_hidden_layers
    if cfg.model_type == "deepseek_v3":  # routed experts only (NVIDIA's DeepSeek-R1-FP4 recipe)
        return 3 * cfg.n_routed_experts * max(0, nl - cfg.first_k_dense_replace)
    return 7 * nl


# ---- routing ----

def ds_choose(lg, bias, n_group, topk_group, k):
    """transformers' DeepseekV3MoE.route_tokens_to_experts in float64: (top [n, k], gap [n])"""
    s = 1.0 / (1.0 + np.exp(-lg))
    c = s + bias[None, :]
    n, E = c.shape
    g = c.reshape(n, n_group, E // n_group)
    gs = -np.sort(-g, axis=2)[:, :, :2].sum(axis=2)
    go = np.argsort(-gs, axis=1, kind="stable")
    ggap = np.full(n, np.inf)
    if topk_group < n_group:
        ggap = np.take_along_axis(gs, go[:, topk_group - 1:topk_group], 1)[:, 0] - \
            np.take_along_axis(gs, go[:, topk_group:topk_group + 1], 1)[:, 0]
    keep = np.zeros((n, n_group), dtype=bool)
    np.put_along_axis(keep, go[:, :topk_group], True, 1)
    cm = np.where(np.repeat(keep, E // n_group, axis=1), c, 0.0)
    eo = np.argsort(-cm, axis=1, kind="stable")
    egap = np.take_along_axis(cm, eo[:, k - 1:k], 1)[:, 0] - np.take_along_axis(cm, eo[:, k:k + 1], 1)[:, 0]
    top = eo[:, :k]
    # transformers fills the dropped groups' scores with 0.0 (DeepSeek's own code: -inf): an expert of a
    # dropped group is chosen where fewer than k kept scores are positive; count such positions
    masked = int((~np.take_along_axis(np.repeat(keep, E // n_group, axis=1), top, 1)).any(axis=1).sum())
    return top, np.minimum(ggap, egap), float(c.min()), masked


def record_routing(model, ids, run_logits):
    import torch
    cfg = model.config
    seen, used, hooks = {}, {}, []
    for name, mod in model.named_modules():
        mm = re.match(r"^model\.layers\.(\d+)\.mlp\.gate$", name)
        if mm:
            def hook(mod, inp, _out, layer=int(mm.group(1))):
                seen[layer] = inp[0].detach().to(torch.float64).reshape(-1, inp[0].shape[-1]).cpu().numpy()
            hooks.append(mod.register_forward_hook(hook))
        mm = re.match(r"^model\.layers\.(\d+)\.mlp$", name)
        if mm and hasattr(mod, "route_tokens_to_experts"):
            orig = mod.route_tokens_to_experts

            def wrap(*a, _orig=orig, layer=int(mm.group(1)), **kw):
                r = _orig(*a, **kw)
                used[layer] = r[0].detach().cpu().numpy()
                return r
            mod.route_tokens_to_experts = wrap
    run_logits(model, ids)
    for h in hooks:
        h.remove()
    out = {}
    ps = dict(model.named_parameters())
    bs = dict(model.named_buffers())
    for layer in sorted(seen):
        w = ps[f"model.layers.{layer}.mlp.gate.weight"].detach().to(torch.float64).cpu().numpy()
        b = bs[f"model.layers.{layer}.mlp.gate.e_score_correction_bias"]
        b = b.detach().to(torch.float64).cpu().numpy()
        top, gap, cmin, masked = ds_choose(seen[layer] @ w.T, b, cfg.n_group, cfg.topk_group,
                                           cfg.num_experts_per_tok)
        r = {"top_k": top.tolist(), "gap": [float(x) for x in gap], "min_gap": float(gap.min()),
             "experts_used": sorted(set(top.ravel().tolist())), "min_choice_score": cmin,
             "positions_choosing_a_dropped_group": masked,
             "gap_space": "sigmoid score + bias"}
        if layer in used:
            tm = np.sort(used[layer], axis=1)
            r["top_k_model"] = tm.tolist()
            r["model_agrees"] = int((np.sort(top, axis=1) == tm).all(axis=1).sum())
        out[str(layer)] = r
    return out
