#!/usr/bin/env bash
# serve4's device call (issue 30, Deliver 6: speed): the CLI and libfp4lane_cuda.so of this tree, main's
# CLI at BASE (the same-machine baseline of the server's per-request overhead; the CUDA library's ABI is
# unchanged), the shared libraries a bare device lacks (ldd of the CLI), and the load generator, into the
# git-ignored gpuwork/serve4/. B: this tree's build (`make BUILD=$B $B/fp4lane $B/libfp4lane_cuda.so`);
# MAIN_BIN: main's fp4lane built at BASE (default /tmp/s4main/build/fp4lane, from `git archive BASE`).
set -e
cd "$(git rev-parse --show-toplevel)"
B=${B:-build-s4}; BASE=${BASE:-57504bd}; MAIN_BIN=${MAIN_BIN:-/tmp/s4main/build/fp4lane}
G=gpuwork/serve4; S=$(mktemp -d); mkdir -p $S/f/bin $S/f/lib $G
cp $B/fp4lane $B/libfp4lane_cuda.so $S/f/bin/
cp "$MAIN_BIN" $S/f/bin/fp4lane_main
cp bench/serve/loadgen.py $S/f/
for so in $(ldd $B/fp4lane $B/libfp4lane_cuda.so | awk '$2=="=>"{print $1}' | sort -u); do
  case $so in libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|libpthread.so*|libdl.so*|librt.so*) continue;; esac
  case $so in libcuda.so*|libcudart.so*|libcublas*) continue;; esac
  p=$(ldconfig -p | awk -v n=$so '$1==n{print $NF; exit}'); [ -n "$p" ] && cp -L "$p" $S/f/lib/
done
{ git rev-parse HEAD; git status --short | head -5; echo "main binary: $BASE"; date -u; } > $S/f/BUILT.txt
(cd $S/f && tar cJf - .) > $G/bin.tar.xz
cp dev/gpu/serve4/run.sh $G/run.sh # the call needs nothing else of the tree: bash gpuwork/serve4/run.sh
rm -rf $S; ls -la $G
