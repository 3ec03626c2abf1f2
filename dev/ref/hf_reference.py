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
"""
import json
import math
import os
import platform
import sys

import numpy as np

SIGMA = 0.08
T = 24
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


def log(*a):
    print(*a, flush=True)


def versions():
    import torch
    import transformers
    return {"python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__, "numpy": np.__version__,
            "platform": platform.platform(), "torch_threads": torch.get_num_threads()}


def make_config(model_type, extra):
    from transformers import AutoConfig
    d = dict(COMMON)
    d.update(extra)
    d["model_type"] = model_type
    # from_dict is the path a real config.json takes, legacy keys (rope_theta, rope_scaling) included
    try:
        cls = type(AutoConfig.for_model(model_type))
    except Exception:
        from transformers import CONFIG_MAPPING
        cls = CONFIG_MAPPING[model_type]
    cfg = cls.from_dict(d)
    cfg._attn_implementation = "eager"
    return cfg


def init_weights(model, seed):
    import torch
    rng = np.random.default_rng(seed)
    drawn = []
    for name, p in model.named_parameters():  # a tied head is the embedding: named once
        shape = tuple(p.shape)
        if name.endswith("norm.weight"):
            v = rng.uniform(0.5, 1.5, shape)
            kind = "U(0.5,1.5)"
        elif name.endswith(".bias"):
            v = rng.normal(0.0, 0.5, shape)
            kind = "N(0,0.5)"
        elif len(shape) == 2:
            v = rng.normal(0.0, SIGMA, shape)
            kind = f"N(0,{SIGMA})"
        else:
            raise SystemExit(f"no rule for parameter {name} {shape}")
        with torch.no_grad():
            p.copy_(torch.from_numpy(v).to(p.dtype))
        drawn.append((name, list(shape), kind))
    return drawn


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
    m = AutoModelForCausalLM.from_pretrained(d, attn_implementation="eager")
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


def phase_make(outdir):
    import torch
    from transformers import AutoModelForCausalLM
    torch.set_grad_enabled(False)
    os.makedirs(outdir, exist_ok=True)
    v = versions()
    log("versions:", json.dumps(v))
    with open(os.path.join(outdir, "versions.json"), "w") as f:
        json.dump(v, f, indent=1)
    failed = []
    for i, (name, mt, extra) in enumerate(MODELS):
        try:
            d = os.path.join(outdir, name)
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
            ids = [int(t) for t in np.random.default_rng(2000 + i).integers(0, COMMON["vocab_size"], T)]
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


def phase_dequant(datadir, outdir):
    import torch
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import hf_dequant
    torch.set_grad_enabled(False)
    log("versions:", json.dumps(versions()))
    failed = []
    for name, _, extra in MODELS:
        d = os.path.join(datadir, name)
        if not os.path.isdir(os.path.join(d, "nvfp4")):
            log(f"{name}: no nvfp4/, skipped")
            continue
        try:
            m64 = load_f64(d)
            deq, rest = hf_dequant.quantized_weights(os.path.join(d, "nvfp4"))
            nl = m64.config.num_hidden_layers
            assert len(deq) == 7 * nl, f"{len(deq)} NVFP4 weights, expected {7 * nl}"
            err = []
            for n, w in deq.items():
                p = m64.get_parameter(n)
                assert tuple(p.shape) == w.shape, n
                old = p.detach().clone()
                p.copy_(torch.from_numpy(w.astype(np.float64)))
                err.append(float(((p - old).norm() / old.norm()).item()))
            same = 0  # the unquantized tensors of nvfp4/ must be the bf16 file's, bit for bit
            for n, (dt, shape, arr) in rest.items():
                assert dt == "BF16", (n, dt)
                assert np.array_equal(hf_dequant.bf16_to_f32(arr).astype(np.float64),
                                      m64.get_parameter(n).detach().numpy()), n
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
            np.save(os.path.join(od, "logits_nvfp4.npy"), lg)
            with open(os.path.join(od, "stats_nvfp4.json"), "w") as f:
                json.dump(st, f, indent=1)
            log(f"{name}: ok, {len(deq)} weights dequantized (rel err {min(err):.4f}..{max(err):.4f}), "
                f"{same} other tensors identical; std/vocab {st['std_over_vocab_mean']:.4f}; vs bf16: "
                f"max|d| {st['logits_max_abs_diff_vs_bf16']:.4f} "
                f"rel rms {st['logits_rel_rms_diff_vs_bf16']:.4f} "
                f"argmax agree {st['argmax_agree_vs_bf16']}/{T}")
        except Exception:
            import traceback
            traceback.print_exc()
            failed.append(name)
    log("failed:", failed)
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "make":
        sys.exit(phase_make(sys.argv[2]))
    if len(sys.argv) == 4 and sys.argv[1] == "dequant":
        sys.exit(phase_dequant(sys.argv[2], sys.argv[3]))
    print(__doc__)
    sys.exit(2)
