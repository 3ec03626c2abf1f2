#!/usr/bin/python3
"""A numpy f32 reference of models/tiny (Llama: RMSNorm, RoPE, grouped-query attention, SwiGLU, tied
head): held-out loss and greedy / sampled continuations, on a CPU, for bf16 and NVFP4 weights alike.

    dev/tiny/tiny_ref.py WEIGHTS.safetensors MODEL_DIR HELDOUT.u16 OUT.json [--label L] [--windows N]

WEIGHTS: f32 or bf16 safetensors with Hugging Face names (the bf16 checkpoint, or dev/tiny/tiny_dequant.py's
dequantized NVFP4). MODEL_DIR gives config.json, tokenizer.json (read with the standard library: only
the vocabulary is needed, to print ids as text) and generation_config.json. It is checked against
transformers: on the bf16 weights its held-out loss and greedy ids must match dev/tiny/tiny_eval.py's
(models/tiny/MODEL_CARD.md has both). Sampling uses numpy's PCG64 (seed 1000 + prompt index),
temperature 0.8, top-k 40, so its sampled text differs from transformers' but is the same draw for
both weight sets. For speed, point LD_LIBRARY_PATH at an OpenBLAS (Debian libopenblas0-pthread).
"""
import argparse
import json
import math
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tiny_dequant import bf16_to_f32, read_safetensors  # noqa: E402

PROMPTS = [
    "This section describes how",
    "The database server",
    "A function that returns",
    "If the file does not exist,",
    "In this tutorial, you will learn",
]


def load_weights(path):
    out = {}
    for name, (dtype, shape, raw) in read_safetensors(path).items():
        if dtype == "F32":
            out[name] = np.frombuffer(raw, np.float32).reshape(shape)
        elif dtype == "BF16":
            out[name] = bf16_to_f32(raw, shape)
        else:
            raise SystemExit(f"{name}: {dtype} (expected F32 or BF16)")
    return out


class Llama:
    def __init__(self, w, cfg):
        self.w, self.c = w, cfg
        self.hd = cfg["head_dim"]
        self.nh, self.nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
        theta = cfg.get("rope_parameters", {}).get("rope_theta", cfg.get("rope_theta", 10000.0))
        self.inv_freq = (1.0 / (theta ** (np.arange(0, self.hd, 2, dtype=np.int64).astype(np.float32)
                                          / self.hd))).astype(np.float32)
        self.emb = w["model.embed_tokens.weight"]
        self.head = w.get("lm_head.weight", self.emb)

    def norm(self, x, wt):
        var = (x * x).mean(-1, keepdims=True, dtype=np.float32)
        return (x / np.sqrt(var + np.float32(self.c["rms_norm_eps"]))).astype(np.float32) * wt

    def rope(self, x, pos):  # x [T, H, hd]
        f = pos[:, None].astype(np.float32) * self.inv_freq[None, :]
        e = np.concatenate([f, f], -1)
        cos, sin = np.cos(e)[:, None, :], np.sin(e)[:, None, :]
        h = self.hd // 2
        rot = np.concatenate([-x[..., h:], x[..., :h]], -1)
        return x * cos + rot * sin

    def logits(self, ids):
        T = len(ids)
        x = self.emb[ids]
        pos = np.arange(T)
        mask = np.triu(np.full((T, T), -np.inf, np.float32), 1)
        g = self.nh // self.nkv
        for i in range(self.c["num_hidden_layers"]):
            p = f"model.layers.{i}."
            h = self.norm(x, self.w[p + "input_layernorm.weight"])
            q = (h @ self.w[p + "self_attn.q_proj.weight"].T).reshape(T, self.nh, self.hd)
            k = (h @ self.w[p + "self_attn.k_proj.weight"].T).reshape(T, self.nkv, self.hd)
            v = (h @ self.w[p + "self_attn.v_proj.weight"].T).reshape(T, self.nkv, self.hd)
            q, k = self.rope(q, pos), self.rope(k, pos)
            o = np.empty((T, self.nh, self.hd), np.float32)
            for hh in range(self.nh):
                s = (q[:, hh] @ k[:, hh // g].T) / np.float32(math.sqrt(self.hd)) + mask
                s = np.exp(s - s.max(-1, keepdims=True))
                s /= s.sum(-1, keepdims=True)
                o[:, hh] = s @ v[:, hh // g]
            x = x + o.reshape(T, -1) @ self.w[p + "self_attn.o_proj.weight"].T
            h = self.norm(x, self.w[p + "post_attention_layernorm.weight"])
            gt = h @ self.w[p + "mlp.gate_proj.weight"].T
            up = h @ self.w[p + "mlp.up_proj.weight"].T
            act = gt / (1 + np.exp(-gt)) * up
            x = x + act @ self.w[p + "mlp.down_proj.weight"].T
        x = self.norm(x, self.w["model.norm.weight"])
        return x @ self.head.T


def byte_decoder():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


ASCII_PRETOK = re.compile(r"'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+")


def bpe_encode(tj, text):
    """Byte-level BPE of ASCII text (GPT-2 pre-tokenizer; \\p{L}/\\p{N} reduce to ASCII classes)."""
    assert text.isascii()
    vocab = tj["model"]["vocab"]
    ranks = {}
    for r, mg in enumerate(tj["model"]["merges"]):
        pair = tuple(mg) if isinstance(mg, list) else tuple(mg.split(" ", 1))
        ranks[pair] = r
    enc = {b: c for c, b in byte_decoder().items()}
    ids = []
    for word in ASCII_PRETOK.findall(text):
        parts = [enc[b] for b in word.encode()]
        while len(parts) > 1:
            best = min(range(len(parts) - 1), key=lambda j: ranks.get((parts[j], parts[j + 1]), 1 << 30))
            if (parts[best], parts[best + 1]) not in ranks:
                break
            parts[best:best + 2] = [parts[best] + parts[best + 1]]
        ids += [vocab[t] for t in parts]
    return ids


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("weights")
    ap.add_argument("model")
    ap.add_argument("heldout")
    ap.add_argument("out")
    ap.add_argument("--label", default="")
    ap.add_argument("--windows", type=int, default=0, help="score only the first N windows (0: all)")
    ap.add_argument("--new-tokens", type=int, default=64)
    a = ap.parse_args()
    cfg = json.load(open(os.path.join(a.model, "config.json")))
    gcfg = json.load(open(os.path.join(a.model, "generation_config.json")))
    tj = json.load(open(os.path.join(a.model, "tokenizer.json")))
    inv = {i: t for t, i in tj["model"]["vocab"].items()}
    for t in tj.get("added_tokens", []):
        inv[t["id"]] = t["content"]
    specials = {t["id"] for t in tj.get("added_tokens", []) if t.get("special")}
    bd = byte_decoder()

    def decode(ids):
        return bytes(bd[ch] for i in ids if i not in specials for ch in inv[i]).decode("utf-8", "replace")

    m = Llama(load_weights(a.weights), cfg)
    seq = cfg["max_position_embeddings"]
    held = np.fromfile(a.heldout, dtype="<u2").astype(np.int64)
    n = (len(held) - 1) // seq
    if a.windows:
        n = min(n, a.windows)
    total, count = 0.0, 0
    for i in range(n):
        w = held[i * seq: i * seq + seq + 1]
        lg = m.logits(w[:-1]).astype(np.float64)
        mx = lg.max(-1, keepdims=True)
        lse = (mx[:, 0] + np.log(np.exp(lg - mx).sum(-1)))
        total += float((lse - lg[np.arange(seq), w[1:]]).sum())
        count += seq
    loss = total / count
    print(f"[{a.label}] held-out loss {loss:.5f} (perplexity {math.exp(loss):.3f}) over {count} tokens "
          f"({n} windows of {seq})", flush=True)

    prompt_ids = {p: bpe_encode(tj, p) for p in PROMPTS}
    samples = []
    for mode in ("greedy", "sampled"):
        for i, p in enumerate(PROMPTS):
            ids = [gcfg["bos_token_id"]] + prompt_ids[p]
            rng = np.random.Generator(np.random.PCG64(1000 + i))
            new = []
            for _ in range(a.new_tokens):
                lg = m.logits(np.array(ids + new))[-1].astype(np.float64)
                if mode == "greedy":
                    t = int(lg.argmax())
                else:
                    top = np.argsort(-lg, kind="stable")[:40]
                    z = lg[top] / 0.8
                    pr = np.exp(z - z.max())
                    pr /= pr.sum()
                    t = int(top[rng.choice(40, p=pr)])
                new.append(t)
                if t == gcfg["eos_token_id"]:
                    break
            text = decode(new)
            samples.append({"mode": mode, "prompt": p, "ids": new, "text": text})
            print(f"[{a.label}] {mode} | {p}|{text}".replace("\n", " / "), flush=True)
    with open(a.out, "w") as f:
        json.dump({"label": a.label, "weights": a.weights, "heldout_loss": loss,
                   "perplexity": math.exp(loss), "heldout_tokens_scored": count, "windows": n,
                   "samples": samples}, f, indent=2)


if __name__ == "__main__":
    main()
