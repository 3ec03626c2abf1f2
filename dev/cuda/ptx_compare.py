#!/usr/bin/python3
"""ptx_compare.py — are two trees' CUDA kernels the same instructions? (no GPU needed)

    dev/cuda/ptx_compare.py OLD_TREE NEW_TREE

Compiles every src/cuda/*.cu of both trees to PTX (sm_90a, the library's numerics flags) and
compares each kernel of NEW_TREE with the OLD_TREE kernel of the same demangled name (after the
renames below), with virtual registers, labels, mangled names and shared-memory symbols
normalized. Prints one line per kernel: "same" (the instruction sequence is identical),
"reordered" (the same instructions in another order), "different (old N, new M ops)", or "new".
A kernel whose PTX is the same runs the same: a refactor that leaves every production kernel
"same" needs no new timing.
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

RENAMES = [  # new name -> the old name of the same kernel (renames of the issue-11 split)
    ("a16_exact_mma_kernel", "a16_exact_mma2_kernel"),
    ("native_tile_kernel", "native_v5_kernel"),
    ("native_dp2a_kernel", "native1_kernel"),
    ("a16_exact_kernel<1, 2, a16_dot_split>", "a16_exact_kernel<1, 2, 2>"),
]
FLAGS = ["-O3", "-std=c++17", "--fmad=false", "-gencode", "arch=compute_90a,code=sm_90a", "-ptx"]


def kernels(tree, out):
    found = {}
    for src in sorted(glob.glob(os.path.join(tree, "src/cuda/*.cu"))):
        ptx = os.path.join(out, os.path.basename(src) + ".ptx")
        subprocess.run(["nvcc", *FLAGS, "-I" + os.path.join(tree, "include"),
                        "-I" + os.path.join(tree, "src"), src, "-o", ptx], check=True, capture_output=True)
        text = open(ptx).read()
        for m in re.finditer(r"\.entry (\w+)", text):
            body = text[m.start():text.index("\n}\n", m.start())]
            body = re.sub(r"//.*", "", body)
            body = re.sub(r"_Z\w+", "NAME", body)
            body = re.sub(r"\$L__\w+", "L", body)
            body = re.sub(r"%\w+", "R", body)
            body = re.sub(r"\.reg \.\w+ \s*R<\d+>;", "", body)
            body = re.sub(r"\b\w+_smem\b", "SMEM", body)
            name = subprocess.run(["c++filt", m.group(1)], capture_output=True, text=True).stdout.strip()
            found[name.split("(")[0].replace("void ", "")] = [l.strip() for l in body.split("\n")
                                                              if l.strip()]
    return found


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with tempfile.TemporaryDirectory() as t:
        os.makedirs(t + "/old")
        os.makedirs(t + "/new")
        old, new = kernels(sys.argv[1], t + "/old"), kernels(sys.argv[2], t + "/new")
    for name in sorted(new):
        was = name
        for a, b in RENAMES:
            was = was.replace(a, b)
        if was not in old:
            print("new        ", name)
        elif old[was] == new[name]:
            print("same       ", name)
        elif sorted(old[was]) == sorted(new[name]):
            print("reordered  ", name)
        else:
            print("different  ", name, "(old %d, new %d ops)" % (len(old[was]), len(new[name])))


if __name__ == "__main__":
    main()
