"""hf_reference.py — reference checkpoints and logits made by HF transformers (tests/data/hf/).

Two phases, both run on the device machine (where torch and transformers are installed):

  python3 dev/ref/hf_reference.py make OUTDIR
      for each model in MODELS: a random-init checkpoint built by transformers from a config,
      weights drawn from a seeded numpy generator (statistics below), rounded to bf16 and saved
      with save_pretrained (safetensors); then reloaded from disk by from_pretrained, widened to
      float64 (model.to(torch.float64): exact) and run once, eager attention, no cache, on 24
      seeded token ids: OUTDIR/<name>/{config.json, model.safetensors, generation_config.json,
      ids.txt, logits_bf16.npy, stats_bf16.json}; OUTDIR/versions.json.

  python3 dev/ref/hf_reference.py dequant DATADIR OUTDIR
      for each DATADIR/<name> holding nvfp4/ (the output of `fp4lane quantize DATADIR/<name>
      DATADIR/<name>/nvfp4 --layout modelopt`): the bf16 checkpoint reloaded in float64, every
      quantized Linear weight replaced by its dequantization from nvfp4/ (dev/ref/hf_dequant.py, the
      pinned order of SPEC §2 in f32, widened to f64), the other tensors kept as in the bf16 file:
      OUTDIR/<name>/{logits_nvfp4.npy, stats_nvfp4.json}.

Weight statistics (transformers' own init is N(0, 0.02), which gives nearly flat logits at this
size): every matrix (embeddings, projections, head) N(0, SIGMA) with SIGMA = 0.08 (also written as
initializer_range); every RMSNorm weight (input/post-attention/final, Qwen3 q/k norms)
U(0.5, 1.5); Qwen2's q/k/v biases N(0, 0.5). Seeds: weights 1000 + i, ids 2000 + i, i the
model's index in MODELS.

Mixture of experts (issue 28): qwen3_moe (per-expert tensors as save_pretrained writes them; 4 experts,
top-2, norm_topk_prob, layer 1 dense through mlp_only_layers), qwen3_moe_fused (the same model with
its experts written in the fused 3-D form `mlp.experts.gate_up_proj` [E, 2I, H] / `down_proj`
[E, H, I], whatever transformers itself saves; the generator checks that transformers loads it to
the per-expert model's logits) and mixtral (4 local experts, intermediate 256, top-2, softmax over
the top-k). These run 64 positions (T_MOE); the router weights are N(0, SIGMA) like every matrix, so
routing varies with the token. For each sparse layer the generator records the routing it saw
(routing_bf16.json /
routing_nvfp4.json: per position the top-k experts of the router logits recomputed in f64 from the
router's input, and the gap between the k-th and the (k+1)-th logit), so a test can tell a routing
flip at a near tie from a wrong operation.

Gemma 3 and DeepSeek-V3 (issue 31): `gemma3`, `deepseek_v3` and `deepseek_v3_nolora`, defined with what
they need beyond the loop below in dev/ref/hf_families.py (configs, the two rotary tables, Gemma's
(1 + w) norms drawn around 0, the router bias buffer, per-expert files, group-limited routing records);
64 positions each, fixed seeds (1000 + 100.., 2000 + 100..) whatever MODELS becomes.

Only some models: `make OUTDIR NAME...` / `dequant DATADIR OUTDIR NAME...`.
"""
import json
import math
import os
import platform
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_families as fam  # noqa: E402  (Gemma 3 and DeepSeek-V3, issue 31)

SIGMA = 0.08
T = 24
T_MOE = 64
COMMON = {
    "vocab_size": 512, "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-5, "initializer_range": SIGMA, "hidden_act": "silu", "bos_token_id": 1,
    "eos_token_id": 2, "tie_word_embeddings": False, "use_cache": True,
}
LLAMA31_ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192}
MODELS = [
    ("llama", "llama", {"architectures": ["LlamaForCausalLM"], "head_dim": 64, "rope_theta": 10000.0,
                        "attention_bias": False, "mlp_bias": False}),
    ("llama31", "llama", {"architectures": ["LlamaForCausalLM"], "head_dim": 64, "rope_theta": 500000.0,
                          "rope_scaling": LLAMA31_ROPE, "attention_bias": False, "mlp_bias": False}),
    ("qwen2", "qwen2", {"architectures": ["Qwen2ForCausalLM"], "rope_theta": 1000000.0,
                        "use_sliding_window": False}),
    ("qwen3", "qwen3", {"architectures": ["Qwen3ForCausalLM"], "head_dim": 64, "rope_theta": 1000000.0,
                        "attention_bias": False, "tie_word_embeddings": True, "use_sliding_window": False}),
    ("mistral", "mistral", {"architectures": ["MistralForCausalLM"], "head_dim": 64, "rope_theta": 1000000.0,
                            "sliding_window": None}),
]
QWEN3_MOE = {"architectures": ["Qwen3MoeForCausalLM"], "head_dim": 64, "rope_theta": 1000000.0,
             "attention_bias": False, "use_sliding_window": False, "num_hidden_layers": 2,
             "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 256,
             "norm_topk_prob": True, "decoder_sparse_step": 1, "mlp_only_layers": [1],
             "output_router_logits": False, "router_aux_loss_coef": 0.0}
MODELS += [
    ("qwen3_moe", "qwen3_moe", QWEN3_MOE),
    ("mixtral", "mixtral", {"architectures": ["MixtralForCausalLM"], "head_dim": 64, "rope_theta": 1000000.0,
                            "sliding_window": None, "num_local_experts": 4, "num_experts_per_tok": 2,
                            "intermediate_size": 256, "output_router_logits": False,
                            "router_aux_loss_coef": 0.0}),
    ("qwen3_moe_fused", "qwen3_moe", dict(QWEN3_MOE, fused_form=True)),
]
MODELS += fam.MODELS
MOE_TYPES = ("qwen3_moe", "mixtral")
EXPERT_RE = re.compile(r"^(.*)\.(mlp|block_sparse_moe)\.experts\.(\d+)\."
                       r"(gate_proj|up_proj|down_proj|w1|w3|w2)\.weight$")
FUSED_RE = re.compile(r"^(.*)\.(mlp|block_sparse_moe)\.experts\.(gate_up_proj|down_proj)$")


def log(*a):
    print(*a, flush=True)


def versions():
    import torch
    import transformers
    return {"python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__, "numpy": np.__version__,
            "platform": platform.platform(), "torch_threads": torch.get_num_threads()}


def n_positions(model_type):
    return T_MOE if model_type in MOE_TYPES or model_type in fam.FAMILY_TYPES else T


def fused_params(model, prefix):
    """(gate_up [E, 2I, H], down [E, H, I]) of a fused experts module under prefix, or None."""
    ps = dict(model.named_parameters())
    for mid in ("mlp", "block_sparse_moe"):
        gu, dn = ps.get(f"{prefix}.{mid}.experts.gate_up_proj"), ps.get(f"{prefix}.{mid}.experts.down_proj")
        if gu is not None and dn is not None:
            return gu, dn
    return None


def param_view(model, name):
    """The tensor (a view into the model's parameters) that the checkpoint tensor `name` is, in
    whichever form transformers holds the experts in memory (per expert or fused 3-D), or None."""
    ps = dict(model.named_parameters())
    if name in ps:
        return ps[name]
    alt = name.replace(".block_sparse_moe.", ".mlp.")  # Mixtral's file names, held as mlp.* in memory
    if alt in ps:
        return ps[alt]
    m = EXPERT_RE.match(name)
    if m:
        prefix, _, e, which = m.group(1), m.group(2), int(m.group(3)), m.group(4)
        for mid in ("mlp", "block_sparse_moe"):  # per-expert modules under the other name
            for a, b in (("gate_proj", "w1"), ("up_proj", "w3"), ("down_proj", "w2")):
                for w in (a, b):
                    if which in (a, b):
                        n2 = f"{prefix}.{mid}.experts.{e}.{w}.weight"
                        if n2 in ps:
                            return ps[n2]
        f = fused_params(model, prefix)
        if f is not None:
            gu, dn = f
            inter = gu.shape[1] // 2
            if which in ("gate_proj", "w1"):
                return gu[e, :inter]
            if which in ("up_proj", "w3"):
                return gu[e, inter:]
            return dn[e]
    m = FUSED_RE.match(name)
    if m:
        f = fused_params(model, m.group(1))
        if f is not None:
            return f[0] if m.group(3) == "gate_up_proj" else f[1]
    return dict(model.named_buffers()).get(name)  # DeepSeek's e_score_correction_bias


def fused_state(model):
    """The model's tensors with every layer's experts in the fused 3-D form (gate rows, then up
    rows), built from the in-memory parameters in whichever form they are."""
    import torch
    out, done = {}, set()
    for name, p in model.named_parameters():
        m = EXPERT_RE.match(name)
        if not m and not FUSED_RE.match(name):
            out[name] = p.detach().contiguous()
            continue
        prefix = m.group(1) if m else FUSED_RE.match(name).group(1)
        if prefix in done:
            continue
        done.add(prefix)
        f = fused_params(model, prefix)
        if f is not None:
            gu, dn = (t.detach() for t in f)
        else:
            n_exp = model.config.num_experts if hasattr(model.config, "num_experts") \
                else model.config.num_local_experts
            g = [param_view(model, f"{prefix}.mlp.experts.{e}.gate_proj.weight") for e in range(n_exp)]
            u = [param_view(model, f"{prefix}.mlp.experts.{e}.up_proj.weight") for e in range(n_exp)]
            d = [param_view(model, f"{prefix}.mlp.experts.{e}.down_proj.weight") for e in range(n_exp)]
            gu = torch.stack([torch.cat([a.detach(), b.detach()], 0) for a, b in zip(g, u)])
            dn = torch.stack([x.detach() for x in d])
        out[f"{prefix}.mlp.experts.gate_up_proj"] = gu.contiguous()
        out[f"{prefix}.mlp.experts.down_proj"] = dn.contiguous()
    return out


def routers(model):
    """(layer index, router weight param, top-k) of every sparse layer."""
    k = getattr(model.config, "num_experts_per_tok", 0)  # dense configs (Gemma 3) have none
    out = []
    for name, p in model.named_parameters():
        mm = re.match(r"^model\.layers\.(\d+)\.(mlp|block_sparse_moe)\.gate\.weight$", name)
        if mm:
            out.append((int(mm.group(1)), p, k))
    return out


def record_routing(model, ids):
    """Per sparse layer and position: the top-k experts of the router logits (recomputed in f64
    from the router's input) and the gap between the k-th and the (k+1)-th logit."""
    import torch
    seen = {}
    hooks = []
    for name, mod in model.named_modules():
        mm = re.match(r"^model\.layers\.(\d+)\.(mlp|block_sparse_moe)\.gate$", name)
        if mm:
            def hook(mod, inp, _out, layer=int(mm.group(1))):
                seen[layer] = inp[0].detach().to(torch.float64).reshape(-1, inp[0].shape[-1]).cpu().numpy()
            hooks.append(mod.register_forward_hook(hook))
    run_logits(model, ids)
    for h in hooks:
        h.remove()
    out = {}
    for layer, w, k in routers(model):
        h = seen.get(layer)
        assert h is not None, f"router of layer {layer} never ran"
        lg = h @ w.detach().to(torch.float64).cpu().numpy().T
        order = np.argsort(-lg, axis=1, kind="stable")
        top = order[:, :k]
        kth = np.take_along_axis(lg, order[:, k - 1:k], 1)[:, 0]
        gap = kth - np.take_along_axis(lg, order[:, k:k + 1], 1)[:, 0]
        out[str(layer)] = {"top_k": top.tolist(), "gap": [float(g) for g in gap],
                           "min_gap": float(gap.min()), "experts_used": sorted(set(top.ravel().tolist()))}
    return out


def saved_names(d):
    from safetensors import safe_open
    names = []
    for f in sorted(os.listdir(d)):
        if f.endswith(".safetensors"):
            with safe_open(os.path.join(d, f), "pt") as h:
                names += list(h.keys())
    return names


def make_config(model_type, extra):
    from transformers import AutoConfig
    d = dict(COMMON)
    d.update({k: v for k, v in extra.items() if k not in fam.META})
    for k in extra.get("drop", []):
        d.pop(k, None)
    d["model_type"] = model_type
    # from_dict is the path a real config.json takes, legacy keys (rope_theta, rope_scaling) included
    try:
        cls = type(AutoConfig.for_model(model_type))
    except Exception:
        from transformers import CONFIG_MAPPING
        cls = CONFIG_MAPPING[model_type]
    cfg = cls.from_dict(d)
    cfg._attn_implementation = "eager"
    cfg._experts_implementation = "eager"  # MoE: the per-expert loop (grouped_mm has no float64)
    return cfg


def init_weights(model, seed, norm=(0.5, 1.5)):
    import torch
    rng = np.random.default_rng(seed)
    drawn = []
    for name, p in model.named_parameters():  # a tied head is the embedding: named once
        shape = tuple(p.shape)
        if name.endswith("norm.weight"):
            v = rng.uniform(norm[0], norm[1], shape)
            kind = f"U({norm[0]},{norm[1]})"
        elif name.endswith(".bias"):
            v = rng.normal(0.0, 0.5, shape)
            kind = "N(0,0.5)"
        elif len(shape) in (2, 3):  # 3-D: fused experts [E, rows, cols]
            v = rng.normal(0.0, SIGMA, shape)
            kind = f"N(0,{SIGMA})"
        else:
            raise RuntimeError(f"no rule for parameter {name} {shape}")  # this model fails, not the run
        with torch.no_grad():
            p.copy_(torch.from_numpy(v).to(p.dtype))
        drawn.append((name, list(shape), kind))
    return drawn + fam.init_buffers(model, rng)


def expected_inv_freq(cfg_extra, head_dim):
    theta = cfg_extra["rope_theta"]
    inv = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    rs = cfg_extra.get("rope_scaling")
    if not rs:
        return inv
    f, lo, hi, old = (rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"],
                      rs["original_max_position_embeddings"])
    wl = 2 * math.pi / inv
    out = np.where(wl > old / lo, inv / f, inv)
    smooth = (old / wl - lo) / (hi - lo)
    mid = ~(wl < old / hi) & ~(wl > old / lo)
    return np.where(mid, (1 - smooth) * out / f + smooth * out, out)


def rotary_inv_freq(model):
    for _, m in model.named_modules():
        if hasattr(m, "inv_freq"):
            return m.inv_freq.detach().double().cpu().numpy()
    return None


def load_f64(d):
    import torch
    from transformers import AutoModelForCausalLM
    try:  # MoE: the per-expert loop (transformers' grouped_mm has no float64)
        m = AutoModelForCausalLM.from_pretrained(d, attn_implementation="eager",
                                                 experts_implementation="eager")
    except TypeError:
        m = AutoModelForCausalLM.from_pretrained(d, attn_implementation="eager")
    for mod in m.modules():
        c = getattr(mod, "config", None)
        if c is not None:
            c._experts_implementation = "eager"
    m = m.to(torch.float64).eval()
    for n, p in m.named_parameters():
        assert p.dtype == torch.float64, n
    return m


def run_logits(model, ids):
    import torch
    x = torch.tensor([ids], dtype=torch.long)
    with torch.no_grad():
        out = model(input_ids=x, use_cache=False)
        lg = out.logits[0]
        how = "model(input_ids).logits"
        if lg.dtype != torch.float64:  # an upcast/downcast inside the head: recompute in f64
            h = model.model(input_ids=x, use_cache=False).last_hidden_state
            lg = model.lm_head(h)[0]
            how = f"lm_head(model.model(...).last_hidden_state) (logits came back {out.logits.dtype})"
    return lg.cpu().numpy().astype(np.float64), how


def stats(lg):
    return {"shape": list(lg.shape), "dtype": str(lg.dtype), "finite": bool(np.isfinite(lg).all()),
            "std_over_vocab_mean": float(lg.std(axis=1).mean()),
            "std_over_vocab_min": float(lg.std(axis=1).min()),
            "max_abs": float(np.abs(lg).max()), "argmax": [int(a) for a in lg.argmax(axis=1)]}


def seed_index(name):
    """The seeds' index: the fused variant is qwen3_moe's model (same weights and ids) in another form."""
    for n, _, extra in MODELS:
        if n == name and "seed" in extra:  # issue 31's models: fixed seeds, whatever MODELS becomes
            return extra["seed"]
    names = [m[0] for m in MODELS]
    return names.index("qwen3_moe" if name == "qwen3_moe_fused" else name)


def save_fused(model, d):
    """Replace the checkpoint save_pretrained wrote in d by one file with the fused 3-D experts."""
    from safetensors.torch import save_file
    for f in os.listdir(d):
        if f.endswith(".safetensors") or f.endswith(".safetensors.index.json"):
            os.remove(os.path.join(d, f))
    save_file(fused_state(model), os.path.join(d, "model.safetensors"), metadata={"format": "pt"})


def make_family(name, mt, extra, i, d):
    """Gemma 3 / DeepSeek-V3 (dev/ref/hf_families.py): the dense models' steps, with the checks these
    families need (two rotary tables, the router bias buffer, per-expert files, group routing)."""
    import torch
    from transformers import AutoModelForCausalLM
    exp = fam.expected_rope(mt, extra)
    first, rope = None, None
    for form, e in fam.config_forms(mt, extra):
        try:
            cfg = make_config(mt, e)
            model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
        except Exception as ex:
            log(f"{name}: config form {form} refused: {ex!r}")
            continue
        ok, rope = fam.rope_check(model, exp)
        if ok:
            first = (form, model)
            break
        log(f"{name}: config form {form}: rope tables {rope}")
        first = first or (form, model)
    if first is None:
        raise RuntimeError("no config form builds the model")
    form, model = first
    model = model.to(torch.float32)
    drawn = init_weights(model, 1000 + i, fam.norm_range(mt))
    model = model.to(torch.bfloat16)
    model.save_pretrained(d)
    written_by_transformers = saved_names(d)
    import shutil
    saved = d + ".as_saved"
    shutil.rmtree(saved, ignore_errors=True)
    shutil.copytree(d, saved)
    rewritten = fam.to_per_expert(d) if mt == "deepseek_v3" else []
    ref = {n: p.detach().to(torch.float64).clone() for n, p in model.named_parameters()}
    refb = fam.bias_buffers(model)

    def reload():
        m = load_f64(d)
        got, gotb = dict(m.named_parameters()), fam.bias_buffers(m)
        return m, [n for n in ref if n not in got or not torch.equal(ref[n], got[n])] + \
            [n for n in refb if n not in gotb or not torch.equal(refb[n], gotb[n])]
    try:
        m64, diff = reload()
    except Exception as ex:
        m64, diff = None, [repr(ex)]
    if diff and rewritten:  # transformers did not take the per-expert file back: keep the one it wrote
        log(f"{name}: the per-expert rewrite does not reload ({diff[:3]}); keeping transformers' own file")
        shutil.rmtree(d)
        shutil.copytree(saved, d)
        rewritten = ["reverted: transformers did not reload the per-expert form"]
        m64, diff = reload()
    shutil.rmtree(saved, ignore_errors=True)
    assert not diff, f"reloaded weights differ from the bf16 ones: {diff[:5]}"
    vocab = model.config.vocab_size
    ids = [int(t) for t in np.random.default_rng(2000 + i).integers(0, vocab, n_positions(mt))]
    with open(os.path.join(d, "ids.txt"), "w") as f:
        f.write(",".join(map(str, ids)) + "\n")
    tied = m64.lm_head.weight.data_ptr() == m64.model.embed_tokens.weight.data_ptr()
    assert tied == bool(extra.get("tie_word_embeddings", False)), f"tied={tied}"
    rope_ok, rope = fam.rope_check(m64, exp)
    if not rope_ok:
        log(f"{name}: WARNING rope tables after reload differ from the expected ones: {rope}")
    lg, how = run_logits(m64, ids)
    st = stats(lg)
    es = getattr(m64.model.embed_tokens, "embed_scale", None)
    st.update({"how": how, "attn_implementation": m64.config._attn_implementation, "tied": tied,
               "weights": drawn, "seed_weights": 1000 + i, "seed_ids": 2000 + i,
               "rope_inv_freq_checked": bool(rope_ok), "rope_tables": rope, "config_form": form,
               "config_rope_keys": {k: v for k, v in m64.config.to_dict().items() if "rope" in k},
               "embed_scale": None if es is None else float(es.double()),
               "tensor_names_saved_by_transformers": sorted({re.sub(r"\.\d+\.", ".N.", n)
                                                             for n in written_by_transformers}),
               "rewritten_per_expert": rewritten})
    if mt == "deepseek_v3" and m64.config.first_k_dense_replace < m64.config.num_hidden_layers:
        routing = fam.record_routing(m64, ids, run_logits)
        with open(os.path.join(d, "routing_bf16.json"), "w") as f:
            json.dump(routing, f)
        st.update({"routing_min_gap": {k: r["min_gap"] for k, r in routing.items()},
                   "routing_experts_used": {k: r["experts_used"] for k, r in routing.items()},
                   "routing_model_agrees": {k: r.get("model_agrees") for k, r in routing.items()}})
    np.save(os.path.join(d, "logits_bf16.npy"), lg)
    with open(os.path.join(d, "stats_bf16.json"), "w") as f:
        json.dump(st, f, indent=1)
    log(f"{name}: ok, {sum(p.numel() for p in model.parameters())} params, logits {st['shape']} "
        f"std/vocab {st['std_over_vocab_mean']:.4f} (min {st['std_over_vocab_min']:.4f}) "
        f"max|l| {st['max_abs']:.3f} finite {st['finite']} via {how}; form {form}; rope ok {rope_ok}; "
        f"embed_scale {st['embed_scale']}; rewritten {len(rewritten)}; rope {st['config_rope_keys']}; "
        f"routing {st.get('routing_min_gap')} {st.get('routing_model_agrees')}")


def phase_make(outdir, only):
    import torch
    from transformers import AutoModelForCausalLM
    torch.set_grad_enabled(False)
    os.makedirs(outdir, exist_ok=True)
    v = versions()
    log("versions:", json.dumps(v))
    with open(os.path.join(outdir, "versions.json" if not only else "versions_" + "_".join(only) + ".json"),
              "w") as f:
        json.dump(v, f, indent=1)
    failed = []
    for name, mt, extra in MODELS:
        if only and name not in only:
            continue
        i = seed_index(name)
        try:
            d = os.path.join(outdir, name)
            if mt in fam.FAMILY_TYPES:
                make_family(name, mt, extra, i, d)
                continue
            exp = expected_inv_freq(extra, 64)
            # the config.json keys of Llama 3.1, then transformers 5's
            for form in ("legacy", "rope_parameters"):
                e = dict(extra)
                if form == "rope_parameters":
                    e["rope_parameters"] = dict(e.pop("rope_scaling", {"rope_type": "default"}),
                                                rope_theta=e.pop("rope_theta"))
                try:
                    cfg = make_config(mt, e)
                    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
                    inv = rotary_inv_freq(model)
                except Exception as ex:
                    log(f"{name}: config form {form} refused: {ex!r}")
                    continue
                if inv is not None and np.allclose(inv, exp, rtol=2e-6, atol=0):
                    break
                log(f"{name}: config form {form}: "
                    f"rope inv_freq {None if inv is None else inv[:3]} != {exp[:3]}")
            else:
                raise RuntimeError("no config form gives the expected rope frequencies")
            model = model.to(torch.float32)
            drawn = init_weights(model, 1000 + i)
            model = model.to(torch.bfloat16)
            try:
                model.save_pretrained(d, safe_serialization=True)
            except TypeError:
                model.save_pretrained(d)
            written_by_transformers = saved_names(d)
            if extra.get("fused_form"):
                save_fused(model, d)
            ids = [int(t) for t in np.random.default_rng(2000 + i).integers(0, COMMON["vocab_size"],
                                                                               n_positions(mt))]
            with open(os.path.join(d, "ids.txt"), "w") as f:
                f.write(",".join(map(str, ids)) + "\n")
            ref = {n: p.detach().to(torch.float64).clone() for n, p in model.named_parameters()}
            m64 = load_f64(d)
            got = dict(m64.named_parameters())
            diff = [n for n in ref if n not in got or not torch.equal(ref[n], got[n])]
            assert not diff, f"reloaded weights differ from the bf16 ones: {diff[:5]}"
            tied = m64.lm_head.weight.data_ptr() == m64.model.embed_tokens.weight.data_ptr()
            assert tied == bool(extra.get("tie_word_embeddings", False)), f"tied={tied}"
            inv = rotary_inv_freq(m64)
            rope_ok = inv is not None and np.allclose(inv, exp, rtol=2e-6, atol=0)
            assert rope_ok, f"rope inv_freq {inv[:4] if inv is not None else None} != expected {exp[:4]}"
            lg, how = run_logits(m64, ids)
            st = stats(lg)
            st.update({"how": how, "attn_implementation": m64.config._attn_implementation, "tied": tied,
                       "weights": drawn, "seed_weights": 1000 + i, "seed_ids": 2000 + i,
                       "rope_inv_freq_checked": True, "config_form": form,
                       "config_rope_keys": {k: v for k, v in m64.config.to_dict().items() if "rope" in k}})
            if mt in MOE_TYPES:
                routing = record_routing(m64, ids)
                with open(os.path.join(d, "routing_bf16.json"), "w") as f:
                    json.dump(routing, f)
                names = saved_names(d)
                st.update({"moe_tensor_names_saved_by_transformers":
                           sorted({re.sub(r"\.\d+\.", ".N.", n) for n in written_by_transformers
                                   if "expert" in n or ".gate." in n}),
                           "moe_tensor_names_in_file": sorted({re.sub(r"\.\d+\.", ".N.", n) for n in names
                                                               if "expert" in n or ".gate." in n}),
                           "in_memory_expert_form": "fused" if fused_params(m64, "model.layers.0") is not None
                           or fused_params(m64, "model.layers.2") is not None else "per-expert",
                           "routing_min_gap": {k: r["min_gap"] for k, r in routing.items()},
                           "routing_experts_used": {k: r["experts_used"] for k, r in routing.items()}})
                twin = os.path.join(outdir, "qwen3_moe", "logits_bf16.npy")
                if extra.get("fused_form") and os.path.exists(twin):
                    same = np.array_equal(np.load(twin), lg)
                    st["logits_equal_to_qwen3_moe"] = bool(same)
                    assert same, "the fused form's logits differ from the per-expert form's"
            np.save(os.path.join(d, "logits_bf16.npy"), lg)
            with open(os.path.join(d, "stats_bf16.json"), "w") as f:
                json.dump(st, f, indent=1)
            log(f"{name}: ok, {sum(p.numel() for p in model.parameters())} params, logits {st['shape']} "
                f"std/vocab {st['std_over_vocab_mean']:.4f} (min {st['std_over_vocab_min']:.4f}) "
                f"max|l| {st['max_abs']:.3f} finite {st['finite']} via {how}; "
                f"attn {st['attn_implementation']}; "
                f"rope {st['config_rope_keys']}")
        except Exception:
            import traceback
            traceback.print_exc()
            failed.append(name)
    log("failed:", failed)
    return 1 if failed else 0


def phase_dequant(datadir, outdir, only):
    import torch
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import hf_dequant
    torch.set_grad_enabled(False)
    log("versions:", json.dumps(versions()))
    failed = []
    for name, mt, extra in MODELS:
        if only and name not in only:
            continue
        d = os.path.join(datadir, name)
        if not os.path.isdir(os.path.join(d, "nvfp4")):
            log(f"{name}: no nvfp4/, skipped")
            continue
        try:
            m64 = load_f64(d)
            deq, rest = hf_dequant.quantized_weights(os.path.join(d, "nvfp4"))
            nl = m64.config.num_hidden_layers
            n_sparse = len(routers(m64))  # every expert quantized, per expert; routers never
            n_exp = getattr(m64.config, "num_experts", None) or getattr(m64.config, "num_local_experts", 0)
            fused_file = any(FUSED_RE.match(n) for n in rest)  # 3-D experts stay bf16 under quantize
            want = 4 * nl + 3 * (nl - n_sparse) + (0 if fused_file else 3 * n_exp * n_sparse)
            if mt in fam.FAMILY_TYPES:
                want = fam.expected_nvfp4(m64.config)
            assert len(deq) == want, f"{len(deq)} NVFP4 weights, expected {want}"
            err = []
            for n, w in deq.items():
                p = param_view(m64, n)
                assert p is not None, f"{n}: no such parameter in the model"
                assert tuple(p.shape) == w.shape, n
                old = p.detach().clone()
                p.copy_(torch.from_numpy(w.astype(np.float64)))
                err.append(float(((p - old).norm() / old.norm()).item()))
            same = 0  # the unquantized tensors of nvfp4/ must be the bf16 file's, bit for bit
            for n, (dt, shape, arr) in rest.items():
                assert dt in ("BF16", "F32"), (n, dt)
                p = param_view(m64, n)
                assert p is not None, f"{n}: no such parameter in the model"
                v = hf_dequant.bf16_to_f32(arr) if dt == "BF16" else arr
                assert np.array_equal(v.astype(np.float64).reshape(p.shape), p.detach().numpy()), n
                same += 1
            ids = [int(t) for t in open(os.path.join(d, "ids.txt")).read().strip().split(",")]
            lg, how = run_logits(m64, ids)
            ref = np.load(os.path.join(d, "logits_bf16.npy"))
            st = stats(lg)
            st.update({"how": how, "n_nvfp4_weights": len(deq), "n_other_tensors_bit_identical": same,
                       "weight_rel_err_min": min(err), "weight_rel_err_max": max(err),
                       "logits_max_abs_diff_vs_bf16": float(np.abs(lg - ref).max()),
                       "logits_rel_rms_diff_vs_bf16":
                           float(np.sqrt(np.mean((lg - ref) ** 2) / np.mean(ref ** 2))),
                       "argmax_agree_vs_bf16": int((lg.argmax(1) == ref.argmax(1)).sum())})
            od = os.path.join(outdir, name)
            os.makedirs(od, exist_ok=True)
            if mt in MOE_TYPES or (mt == "deepseek_v3" and
                                   m64.config.first_k_dense_replace < m64.config.num_hidden_layers):
                routing = record_routing(m64, ids) if mt in MOE_TYPES else \
                    fam.record_routing(m64, ids, run_logits)
                with open(os.path.join(od, "routing_nvfp4.json"), "w") as f:
                    json.dump(routing, f)
                st["routing_min_gap"] = {k: r["min_gap"] for k, r in routing.items()}
            np.save(os.path.join(od, "logits_nvfp4.npy"), lg)
            with open(os.path.join(od, "stats_nvfp4.json"), "w") as f:
                json.dump(st, f, indent=1)
            log(f"{name}: ok, {len(deq)} weights dequantized (rel err {min(err):.4f}..{max(err):.4f}), "
                f"{same} other tensors identical; std/vocab {st['std_over_vocab_mean']:.4f}; vs bf16: "
                f"max|d| {st['logits_max_abs_diff_vs_bf16']:.4f} "
                f"rel rms {st['logits_rel_rms_diff_vs_bf16']:.4f} "
                f"argmax agree {st['argmax_agree_vs_bf16']}/{len(ids)}")
        except Exception:
            import traceback
            traceback.print_exc()
            failed.append(name)
    log("failed:", failed)
    return 1 if failed else 0


if __name__ == "__main__":
    known = {m[0] for m in MODELS}
    if len(sys.argv) >= 3 and sys.argv[1] == "make" and set(sys.argv[3:]) <= known:
        sys.exit(phase_make(sys.argv[2], sys.argv[3:]))
    if len(sys.argv) >= 4 and sys.argv[1] == "dequant" and set(sys.argv[4:]) <= known:
        sys.exit(phase_dequant(sys.argv[2], sys.argv[3], sys.argv[4:]))
    print(__doc__)
    sys.exit(2)
