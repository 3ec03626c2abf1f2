#!/usr/bin/env python3
"""Held-out loss and sample continuations of models/tiny in Hugging Face transformers, in f32.

    python3 dev/tiny/tiny_eval.py MODEL_DIR HELDOUT.u16 OUT.json [--weights W.safetensors] [--label L]

MODEL_DIR is the bf16 checkpoint written by dev/tiny/train_tiny.py (config, weights, tokenizer.json).
With --weights, every tensor of W (f32, Hugging Face names; e.g. dev/tiny/tiny_dequant.py's output of the
NVFP4 checkpoint) replaces the checkpoint's, so the two runs differ in the weights alone. Weights are
held and computed in f32 with TF32 off, so bf16 weights (widened exactly) and NVFP4 weights (the
pinned dequantization, in f32) are compared without a further rounding. The held-out loss is the mean
next-token cross-entropy over every non-overlapping window of max_position_embeddings + 1 tokens.
Samples: 5 greedy and 5 sampled (temperature 0.8, top-k 40, seeds 1000..1004) continuations of
64 tokens; the prompt is BOS followed by the prompt's tokens.
"""
import argparse
import json
import math
import os

import numpy as np
import torch
import torch.nn.functional as F
from tokenizers import Tokenizer

PROMPTS = [
    "This section describes how",
    "The database server",
    "A function that returns",
    "If the file does not exist,",
    "In this tutorial, you will learn",
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("heldout")
    ap.add_argument("out")
    ap.add_argument("--weights")
    ap.add_argument("--label", default="")
    ap.add_argument("--new-tokens", type=int, default=64)
    a = ap.parse_args()

    from transformers import LlamaForCausalLM
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    model = LlamaForCausalLM.from_pretrained(a.model, dtype=torch.float32).to(dev)
    model.eval()
    if a.weights:
        from safetensors.torch import load_file
        sd = load_file(a.weights)
        res = model.load_state_dict(sd, strict=False)
        missing = [k for k in res.missing_keys if k != "lm_head.weight"]
        if res.unexpected_keys or missing:
            raise SystemExit(f"weights do not match the model: missing {missing}, "
                             f"unexpected {res.unexpected_keys}")
        if model.config.tie_word_embeddings:
            assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
        print(f"loaded {len(sd)} tensors from {a.weights}")
    tok = Tokenizer.from_file(os.path.join(a.model, "tokenizer.json"))
    gcfg = json.load(open(os.path.join(a.model, "generation_config.json")))
    bos, eos = gcfg["bos_token_id"], gcfg["eos_token_id"]
    seq = model.config.max_position_embeddings

    held = torch.from_numpy(np.fromfile(a.heldout, dtype="<u2").astype(np.int64)).to(dev)
    n = (len(held) - 1) // seq
    total, count = 0.0, 0
    with torch.no_grad():
        for i in range(0, n, 32):
            k = min(32, n - i)
            idx = torch.arange(i, i + k, device=dev)[:, None] * seq + torch.arange(seq + 1, device=dev)
            w = held[idx]
            logits = model(input_ids=w[:, :-1], use_cache=False).logits
            total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), w[:, 1:].reshape(-1),
                                     reduction="sum").item()
            count += w[:, 1:].numel()
    loss = total / count
    print(f"[{a.label}] held-out loss {loss:.5f} (perplexity {math.exp(loss):.3f}) "
          f"over {count} tokens ({n} windows of {seq})")

    samples = []
    for mode in ("greedy", "sampled"):
        for i, p in enumerate(PROMPTS):
            ids = torch.tensor([[bos] + tok.encode(p, add_special_tokens=False).ids], device=dev)
            kw = dict(do_sample=False) if mode == "greedy" else dict(do_sample=True, temperature=0.8,
                                                                     top_k=40, top_p=1.0)
            if mode == "sampled":
                torch.manual_seed(1000 + i)
            with torch.no_grad():
                out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                     max_new_tokens=a.new_tokens, eos_token_id=eos, pad_token_id=eos,
                                     **kw)
            new = out[0, ids.shape[1]:].tolist()
            text = tok.decode(new, skip_special_tokens=True)
            samples.append({"mode": mode, "prompt": p, "ids": new, "text": text})
            print(f"[{a.label}] {mode} | {p}|{text}".replace("\n", " / "))

    hf_tok = None
    try:
        from transformers import AutoTokenizer
        t = AutoTokenizer.from_pretrained(a.model)
        probe = "Hello, world. The tokenizer's ids"
        hf_ids = t(probe)["input_ids"]
        ref = tok.encode(probe).ids
        hf_tok = {"class": type(t).__name__, "ids": hf_ids, "tokenizers_ids": ref, "same": hf_ids == ref}
        print(f"AutoTokenizer: {hf_tok}")
    except Exception as e:  # noqa: BLE001 - informational only
        hf_tok = {"error": f"{type(e).__name__}: {e}"}
        print(f"AutoTokenizer failed: {hf_tok['error']}")

    with open(a.out, "w") as f:
        json.dump({"label": a.label, "weights": a.weights or "checkpoint", "heldout_loss": loss,
                   "perplexity": math.exp(loss), "heldout_tokens_scored": count, "window": seq,
                   "samples": samples, "autotokenizer": hf_tok}, f, indent=2)


if __name__ == "__main__":
    main()
