#!/usr/bin/env python3
"""spec_draft.py SRC DST LAYERS — a draft for speculative decoding (bench/runtime.md): the first
LAYERS decoder layers of the HF checkpoint SRC (one model.safetensors), its embeddings, final norm
and head, and every other file of SRC (tokenizer, quantization config) copied; config.json's
num_hidden_layers set to LAYERS. An "early exit" draft: same vocabulary and tokenizer, fewer
layers. Python standard library only."""
import json, os, re, shutil, struct, sys

src, dst, keep = sys.argv[1], sys.argv[2], int(sys.argv[3])
os.makedirs(dst, exist_ok=True)
with open(os.path.join(src, "model.safetensors"), "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    hdr = json.loads(f.read(n))
    base = 8 + n
    out, blobs, off = {}, [], 0
    for name, t in sorted(hdr.items(), key=lambda kv: kv[1]["data_offsets"][0] if kv[0] != "__metadata__" else -1):
        if name == "__metadata__":
            out[name] = t
            continue
        m = re.match(r"model\.layers\.(\d+)\.", name)
        if m and int(m.group(1)) >= keep:
            continue
        a, b = t["data_offsets"]
        f.seek(base + a)
        blobs.append(f.read(b - a))
        out[name] = dict(t, data_offsets=[off, off + (b - a)])
        off += b - a
h = json.dumps(out, separators=(",", ":")).encode()
h += b" " * (-len(h) % 8)
with open(os.path.join(dst, "model.safetensors"), "wb") as g:
    g.write(struct.pack("<Q", len(h)) + h)
    for x in blobs:
        g.write(x)
for fn in os.listdir(src):
    p = os.path.join(src, fn)
    if fn in ("model.safetensors", "config.json") or not os.path.isfile(p):
        continue
    shutil.copy(p, os.path.join(dst, fn))
cfg = json.load(open(os.path.join(src, "config.json")))
cfg["num_hidden_layers"] = keep
json.dump(cfg, open(os.path.join(dst, "config.json"), "w"), indent=2)
