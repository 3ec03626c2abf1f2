#!/usr/bin/python3
"""Dequantize an fp4lane ModelOpt NVFP4 checkpoint to one f32 safetensors file (for the quality check
of models/tiny in Hugging Face transformers: dev/tiny/tiny_eval.py --weights).

    dev/tiny/tiny_dequant.py NVFP4_DIR OUT.safetensors [FP4LANE|none]

Each NVFP4 weight is decoded twice: by `fp4lane dump DIR TENSOR --raw` (the library's pinned order
w = (e2m1(code) * e4m3(scale)) * scale2, in f32) and here with numpy in the same order; the two must
agree bit for bit (with FP4LANE `none`, where no fp4lane is built, numpy's decode alone is used:
compare the output's sha256 with one made where fp4lane ran). Tensors that are not NVFP4 (the
embedding, the norms) are widened from bf16 to f32 exactly. Needs numpy (/usr/bin/python3).
"""
import json
import os
import struct
import subprocess
import sys

import numpy as np


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    out = {}
    for name, h in header.items():
        a, b = h["data_offsets"]
        out[name] = (h["dtype"], tuple(h["shape"]), data[a:b])
    return out


def e4m3fn_table():
    t = np.zeros(256, np.float32)
    for b in range(256):
        s, e, m = b >> 7, (b >> 3) & 15, b & 7
        if e == 15 and m == 7:
            v = np.nan
        elif e == 0:
            v = m / 8.0 * 2.0 ** -6
        else:
            v = (1 + m / 8.0) * 2.0 ** (e - 7)
        t[b] = -v if s else v
    return t


E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], np.float32)


def numpy_dequant(codes, scales, scale2, shape):
    rows, n_in = shape
    c = np.frombuffer(codes, np.uint8).reshape(rows, n_in // 2)
    vals = np.empty((rows, n_in), np.float32)
    vals[:, 0::2] = E2M1[c & 15]
    vals[:, 1::2] = E2M1[c >> 4]
    s = e4m3fn_table()[np.frombuffer(scales, np.uint8)].reshape(rows, n_in // 16)
    block = (vals.reshape(rows, n_in // 16, 16) * s[:, :, None]).astype(np.float32)  # exact in f32
    w = (block * np.float32(scale2)).astype(np.float32)
    return w.reshape(rows, n_in)


def bf16_to_f32(raw, shape):
    u = np.frombuffer(raw, np.uint16).astype(np.uint32) << 16
    return u.view(np.float32).reshape(shape)


def write_safetensors(path, tensors):
    header, off, blobs = {}, 0, []
    for name in sorted(tensors):
        b = np.ascontiguousarray(tensors[name], dtype=np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape),
                        "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def main():
    src, out = sys.argv[1], sys.argv[2]
    fp4lane = sys.argv[3] if len(sys.argv) > 3 else "./build/fp4lane"
    t = read_safetensors(os.path.join(src, "model.safetensors"))
    res = {}
    nq = 0
    for name in sorted(t):
        dtype, shape, raw = t[name]
        if name.endswith("_scale") or name.endswith("_scale_2"):
            continue
        if name + "_scale" in t:
            rows, half = shape
            shape2 = (rows, half * 2)
            s2 = np.frombuffer(t[name + "_scale_2"][2], np.float32)[0]
            mine = numpy_dequant(raw, t[name + "_scale"][2], s2, shape2)
            if fp4lane != "none":
                dumped = subprocess.run([fp4lane, "dump", src, name, "--raw"], check=True,
                                        capture_output=True).stdout
                theirs = np.frombuffer(dumped, np.float32).reshape(shape2)
                if mine.tobytes() != theirs.tobytes():
                    sys.exit(f"{name}: numpy decode differs from fp4lane dump")
            res[name] = mine
            nq += 1
        elif dtype == "BF16":
            res[name] = bf16_to_f32(raw, shape)
        elif dtype == "F32":
            res[name] = np.frombuffer(raw, np.float32).reshape(shape)
        else:
            sys.exit(f"{name}: unexpected dtype {dtype}")
    write_safetensors(out, res)
    how = "numpy only" if fp4lane == "none" else "fp4lane dump == numpy, bit for bit"
    print(f"{nq} NVFP4 tensors dequantized ({how}), "
          f"{len(res) - nq} widened; wrote {out}")


if __name__ == "__main__":
    main()
