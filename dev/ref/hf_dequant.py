"""hf_dequant.py — read a ModelOpt-layout NVFP4 checkpoint (as written by `fp4lane quantize
--layout modelopt`) with numpy alone and dequantize its weights in the pinned order of SPEC §2:

    w = (e2m1(code) * e4m3fn(scale)) * scale2      f32, left to right, never regrouped

The codebooks are decoded from their definitions (SPEC §1), not from a library, and the
safetensors container is parsed by hand (8-byte little-endian header length, JSON header, data),
so this file depends on numpy only: it runs on the device machine (beside torch, for the
reference logits) and here (to check fp4lane's own `dump` against it).

    /usr/bin/python3 dev/ref/hf_dequant.py NVFP4_DIR [--check-dump FP4LANE]

prints each quantized tensor and, with --check-dump, compares every one bit for bit against
`FP4LANE dump NVFP4_DIR TENSOR --raw`.
"""
import glob
import json
import os
import struct
import subprocess
import sys

import numpy as np

E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                 -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], dtype=np.float32)


def e4m3fn_table():
    """All 256 E4M3FN bytes as f32 (NaN at 0x7F/0xFF), from the definition in SPEC §1."""
    t = np.zeros(256, dtype=np.float32)
    for b in range(256):
        s, e, m = b >> 7, (b >> 3) & 15, b & 7
        if e == 15 and m == 7:
            v = float("nan")
        elif e == 0:
            v = m * 2.0 ** -9
        else:
            v = (1 + m / 8.0) * 2.0 ** (e - 7)
        t[b] = -v if s else v
    return t


E4M3 = e4m3fn_table()
ST_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "U8": np.uint8, "I8": np.int8,
             "F8_E4M3": np.uint8, "I32": np.int32, "I64": np.int64, "BF16": np.uint16}


def read_safetensors(path):
    """name -> (dtype string, shape, raw numpy array: BF16 as uint16 bits, F8_E4M3 as uint8)."""
    with open(path, "rb") as f:
        blob = f.read()
    (hlen,) = struct.unpack_from("<Q", blob, 0)
    header = json.loads(blob[8:8 + hlen])
    base = 8 + hlen
    out = {}
    for name, d in header.items():
        if name == "__metadata__":
            continue
        a, b = d["data_offsets"]
        dt = np.dtype(ST_DTYPES[d["dtype"]]).newbyteorder("<")
        arr = np.frombuffer(blob, dtype=dt, count=(b - a) // dt.itemsize, offset=base + a).reshape(d["shape"])
        out[name] = (d["dtype"], tuple(d["shape"]), arr)
    return out


def read_dir(d):
    out = {}
    for p in sorted(glob.glob(os.path.join(d, "*.safetensors"))):
        out.update(read_safetensors(p))
    return out


def bf16_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def dequant(payload, scales, scale2):
    """payload uint8 [n_out, n_in/2], scales uint8 [n_out, n_in/16], scale2 f32 -> f32 [n_out, n_in]."""
    n_out = payload.shape[0]
    codes = np.empty((n_out, payload.shape[1] * 2), dtype=np.uint8)
    codes[:, 0::2] = payload & 15   # element 2j: low nibble
    codes[:, 1::2] = payload >> 4   # element 2j+1: high nibble
    q = E2M1[codes]                                         # f32
    s = np.repeat(E4M3[scales], 16, axis=1)                 # f32, one per 16-block
    w = (q * s).astype(np.float32)                          # exact: 2 x 4 significant bits
    return (w * np.float32(scale2)).astype(np.float32)      # one f32 rounding


def quantized_weights(d):
    """name -> f32 dequantized weight, for every NVFP4 weight in a ModelOpt-layout directory,
    plus the rest of the tensors (name -> (dtype, shape, raw)) not part of an NVFP4 triple."""
    t = read_dir(d)
    deq, rest = {}, {}
    for name, (dt, shape, arr) in t.items():
        if name.endswith(".weight") and dt == "U8" and name + "_scale" in t:
            s_dt, _, s = t[name + "_scale"]
            g_dt, _, g = t[name + "_scale_2"]
            assert s_dt == "F8_E4M3" and g_dt == "F32" and g.size == 1, name
            deq[name] = dequant(arr, s, g.reshape(-1)[0])
    for name, v in t.items():
        base = name
        for suf in ("_scale_2", "_scale"):
            if name.endswith(".weight" + suf):
                base = name[: -len(suf)]
        if base not in deq and not name.endswith(".input_scale"):
            rest[name] = v
    return deq, rest


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    deq, rest = quantized_weights(argv[1])
    tool = argv[argv.index("--check-dump") + 1] if "--check-dump" in argv else None
    bad = 0
    for name in sorted(deq):
        w = deq[name]
        line = f"{name} {list(w.shape)} rms {float(np.sqrt(np.mean(w.astype(np.float64) ** 2))):.6g}"
        if tool:
            raw = subprocess.run([tool, "dump", argv[1], name, "--raw"], check=True,
                                 capture_output=True).stdout
            ref = np.frombuffer(raw, dtype="<f4").reshape(w.shape)
            same = np.array_equal(ref.view(np.uint32), w.view(np.uint32))
            bad += not same
            line += " dump: " + ("bit-identical" if same else "DIFFERS")
        print(line)
    print(f"{len(deq)} NVFP4 weights, {len(rest)} other tensors"
          + (f", {bad} differ from dump" if tool else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
