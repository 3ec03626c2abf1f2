#!/usr/bin/env python3
"""Train models/tiny: a byte-level BPE tokenizer and a small Llama on the Debian documentation corpus.

    PYTHONUNBUFFERED=1 python3 dev/tiny/train_tiny.py CORPUS.txt.gz OUTDIR [--seconds 240] [--seed 0]

Runs on one GPU (torch, transformers, tokenizers). CORPUS comes from dev/tiny/tiny_data.sh. Writes
OUTDIR/tiny-bf16/ (config.json, model.safetensors in bf16, tokenizer.json, tokenizer_config.json,
generation_config.json), OUTDIR/loss.csv, OUTDIR/heldout.u16 (the held-out token ids, little-endian
uint16, for dev/tiny/tiny_eval.py) and OUTDIR/train.json (shape, counts, losses, timings).

Deterministic choices: documents whose index is 50 mod 100 are held out (about 1 %); the tokenizer is
trained on the other documents; every random draw is seeded. Training runs for a fixed wall-clock
budget: after 50 steps the step time is measured and the number of steps fixed from it (printed and
saved; --steps N replays a run with exactly N steps). The GPU's own kernels are not bit-reproducible
from run to run, so a replay gives close, not identical, losses.
"""
import argparse
import copy
import gzip
import json
import math
import os
import time

import numpy as np
import torch
import torch.nn.functional as F
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

BOS, EOS = "<|begin_of_text|>", "<|end_of_text|>"


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus")
    ap.add_argument("out")
    ap.add_argument("--seconds", type=float, default=240.0)
    ap.add_argument("--steps", type=int, default=0, help="fixed step count (0: from --seconds)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--intermediate", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--eval-every", type=int, default=500)
    ap.add_argument("--no-compile", action="store_true")
    return ap.parse_args()


def train_tokenizer(docs, vocab):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, min_frequency=2, special_tokens=[BOS, EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(docs, trainer=trainer, length=len(docs))
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B",
        special_tokens=[(BOS, tok.token_to_id(BOS))])
    return tok


def encode(tok, docs):
    bos, eos = tok.token_to_id(BOS), tok.token_to_id(EOS)
    parts = []
    for e in tok.encode_batch(docs, add_special_tokens=False):
        parts.append(np.array([bos] + e.ids + [eos], dtype=np.uint16))
    return np.concatenate(parts)


def save_tokenizer(tok, d, seq):
    tok.save(os.path.join(d, "tokenizer.json"))
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": BOS, "eos_token": EOS,
                   "model_max_length": seq, "clean_up_tokenization_spaces": False}, f, indent=2)
        f.write("\n")
    with open(os.path.join(d, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": tok.token_to_id(BOS), "eos_token_id": tok.token_to_id(EOS),
                   "max_length": seq}, f, indent=2)
        f.write("\n")


@torch.no_grad()
def evaluate(model, held, seq, max_windows=None, batch=32):
    """Mean next-token loss over non-overlapping windows of seq+1 tokens of the held-out stream."""
    was = model.training
    model.eval()
    n = (len(held) - 1) // seq
    if max_windows:
        n = min(n, max_windows)
    total, count = 0.0, 0
    for i in range(0, n, batch):
        k = min(batch, n - i)
        idx = (torch.arange(i, i + k, device=held.device)[:, None] * seq
               + torch.arange(seq + 1, device=held.device))
        w = held[idx]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(input_ids=w[:, :-1], use_cache=False).logits
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), w[:, 1:].reshape(-1),
                               reduction="sum")
        total += loss.item()
        count += w[:, 1:].numel()
    model.train(was)
    return total / count


def main():
    a = parse_args()
    t_start = time.time()
    torch.manual_seed(a.seed)
    np.random.seed(a.seed)
    os.makedirs(a.out, exist_ok=True)
    mdir = os.path.join(a.out, "tiny-bf16")
    os.makedirs(mdir, exist_ok=True)

    with gzip.open(a.corpus, "rt", encoding="ascii") as f:
        docs = [d for d in f.read().split("\n\n") if d.strip()]
    held_docs = [d for i, d in enumerate(docs) if i % 100 == 50]
    train_docs = [d for i, d in enumerate(docs) if i % 100 != 50]
    print(f"corpus: {len(docs)} documents, {sum(map(len, docs))} chars; "
          f"held out {len(held_docs)} documents ({sum(map(len, held_docs))} chars)")

    t0 = time.time()
    tok = train_tokenizer(train_docs, a.vocab)
    print(f"tokenizer: vocab {tok.get_vocab_size()} trained in {time.time() - t0:.1f} s")
    save_tokenizer(tok, mdir, a.seq)
    t0 = time.time()
    train_ids = encode(tok, train_docs)
    held_ids = encode(tok, held_docs)
    held_ids.astype("<u2").tofile(os.path.join(a.out, "heldout.u16"))
    chars = sum(map(len, train_docs))
    print(f"encoded in {time.time() - t0:.1f} s: train {len(train_ids)} tokens "
          f"({chars / len(train_ids):.2f} chars/token), held-out {len(held_ids)} tokens")

    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=tok.get_vocab_size(), hidden_size=a.hidden,
                      intermediate_size=a.intermediate, num_hidden_layers=a.layers,
                      num_attention_heads=a.heads, num_key_value_heads=a.kv_heads,
                      head_dim=a.hidden // a.heads, max_position_embeddings=a.seq,
                      rms_norm_eps=1e-5, tie_word_embeddings=True, hidden_act="silu",
                      bos_token_id=tok.token_to_id(BOS), eos_token_id=tok.token_to_id(EOS),
                      attention_bias=False, mlp_bias=False, initializer_range=0.02)
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    model = LlamaForCausalLM(cfg).to(dev)
    model.train()
    nparams = sum(p.numel() for p in model.parameters())
    print(f"model: {nparams} parameters (tied embeddings), {cfg.num_hidden_layers} layers, "
          f"hidden {cfg.hidden_size}, intermediate {cfg.intermediate_size}, "
          f"heads {cfg.num_attention_heads}x{cfg.head_dim}, kv heads {cfg.num_key_value_heads}")

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.wd},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)

    train_t = torch.from_numpy(train_ids.astype(np.int64)).to(dev)
    held_t = torch.from_numpy(held_ids.astype(np.int64)).to(dev)
    gen = torch.Generator(device=dev)
    gen.manual_seed(a.seed + 1)
    ar = torch.arange(a.seq + 1, device=dev)

    step_fn = model
    compiled = False
    if not a.no_compile:
        try:
            step_fn = torch.compile(model)
            compiled = True
        except Exception as e:  # noqa: BLE001 - fall back to eager, and say so
            print(f"torch.compile unavailable ({e}); eager")

    def lr_at(step, total):
        if step < a.warmup:
            return a.lr * (step + 1) / a.warmup
        p = min(1.0, (step - a.warmup) / max(1, total - a.warmup))
        return a.lr * (a.min_lr_frac + (1 - a.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * p)))

    def train_step(step, total):
        nonlocal step_fn, compiled
        for g in opt.param_groups:
            g["lr"] = lr_at(step, total)
        off = torch.randint(0, len(train_t) - a.seq - 1, (a.batch,), device=dev, generator=gen)
        w = train_t[off[:, None] + ar]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = step_fn(input_ids=w[:, :-1], use_cache=False).logits
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), w[:, 1:].reshape(-1))
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach(), gn.detach()

    # step 0 compiles (not counted in the budget); a failing compile falls back to eager
    t0 = time.time()
    total = a.steps if a.steps else 10 ** 9
    try:
        loss0, _ = train_step(0, total)
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001
        if not compiled:
            raise
        print(f"compiled step failed ({type(e).__name__}: {e}); eager")
        step_fn, compiled = model, False
        opt.zero_grad(set_to_none=True)
        loss0, _ = train_step(0, total)
        torch.cuda.synchronize()
    print(f"step 0 (compile={compiled}) took {time.time() - t0:.1f} s, loss {loss0.item():.4f}")

    rows = []
    best = (float("inf"), -1, None)
    loss_sum = torch.zeros((), device=dev)
    gn_sum = torch.zeros((), device=dev)
    nsum = 0
    step = 1
    t_mark = None
    init_eval = evaluate(model, held_t, a.seq, max_windows=64)
    rows.append({"step": 0, "tokens": a.batch * a.seq, "lr": lr_at(0, total), "train_loss": loss0.item(),
                 "grad_norm": "", "eval_loss": init_eval, "elapsed_s": 0.0})
    t_eval = 0.0
    t_train = time.time()
    while step < total:
        loss, gn = train_step(step, total)
        loss_sum += loss
        gn_sum += gn
        nsum += 1
        step += 1
        if step == 10:
            torch.cuda.synchronize()
            t_mark = time.time()
        if step == 50 and not a.steps:
            torch.cuda.synchronize()
            dt = (time.time() - t_mark) / 40
            spent = time.time() - t_train - t_eval
            total = 50 + int((a.seconds - spent) / dt)
            print(f"step time {dt * 1000:.1f} ms ({a.batch * a.seq / dt / 1e6:.2f} M tok/s): "
                  f"{total} steps in {a.seconds:.0f} s", flush=True)
        if step % a.log_every == 0 or step == total:
            row = {"step": step, "tokens": step * a.batch * a.seq, "lr": lr_at(step - 1, total),
                   "train_loss": (loss_sum / nsum).item(), "grad_norm": (gn_sum / nsum).item(),
                   "eval_loss": "", "elapsed_s": round(time.time() - t_train, 2)}
            loss_sum.zero_()
            gn_sum.zero_()
            nsum = 0
            if step % a.eval_every == 0 or step == total:
                te = time.time()
                ev = evaluate(model, held_t, a.seq, max_windows=64)
                t_eval += time.time() - te
                row["eval_loss"] = ev
                if ev < best[0]:
                    best = (ev, step, copy.deepcopy(model.state_dict()))
            rows.append(row)
            print(f"step {step}/{total} lr {row['lr']:.2e} train {row['train_loss']:.4f} "
                  f"eval {row['eval_loss'] if row['eval_loss'] == '' else round(row['eval_loss'], 4)} "
                  f"t {row['elapsed_s']:.0f}s", flush=True)
        if time.time() - t_train - t_eval > 1.15 * a.seconds:
            print(f"stopping at step {step}: over the wall budget")
            break
    torch.cuda.synchronize()
    train_s = time.time() - t_train
    final_step = step
    last_eval = rows[-1]["eval_loss"] if rows[-1]["eval_loss"] != "" else evaluate(model, held_t, a.seq, 64)
    restored = False
    if best[2] is not None and best[0] < last_eval - 0.005:
        model.load_state_dict(best[2])
        restored = True
        print(f"restored the best eval checkpoint: step {best[1]} ({best[0]:.4f} < {last_eval:.4f})")
    full_eval = evaluate(model, held_t, a.seq)
    print(f"trained {final_step} steps, {final_step * a.batch * a.seq} tokens in {train_s:.1f} s "
          f"({t_eval:.1f} s of it evaluating); held-out loss (bf16 autocast, all windows) {full_eval:.4f}")

    with open(os.path.join(a.out, "loss.csv"), "w") as f:
        cols = ["step", "tokens", "lr", "train_loss", "grad_norm", "eval_loss", "elapsed_s"]
        f.write(",".join(cols) + "\n")
        for r in rows:
            f.write(",".join(("%.6g" % r[c]) if isinstance(r[c], float) else str(r[c]) for c in cols) + "\n")

    model.to(torch.bfloat16)
    model.save_pretrained(mdir)
    save_tokenizer(tok, mdir, a.seq)  # save_pretrained may rewrite generation_config.json
    info = {"params": nparams, "config": cfg.to_dict(), "train_tokens_corpus": int(len(train_ids)),
            "heldout_tokens": int(len(held_ids)), "docs": len(docs), "held_docs": len(held_docs),
            "steps": final_step, "batch": a.batch, "seq": a.seq,
            "tokens_seen": final_step * a.batch * a.seq,
            "epochs": final_step * a.batch * a.seq / len(train_ids), "train_seconds": train_s,
            "eval_seconds": t_eval, "compiled": compiled, "restored_best": restored,
            "best_eval_step": best[1], "heldout_loss_autocast": full_eval, "args": vars(a),
            "torch": torch.__version__, "total_seconds": time.time() - t_start}
    import tokenizers
    import transformers
    info["transformers"] = transformers.__version__
    info["tokenizers"] = tokenizers.__version__
    info["gpu"] = torch.cuda.get_device_name(0)
    with open(os.path.join(a.out, "train.json"), "w") as f:
        json.dump(info, f, indent=2, default=str)
    print(json.dumps({k: v for k, v in info.items() if k not in ("config", "args")}, default=str))


if __name__ == "__main__":
    main()
