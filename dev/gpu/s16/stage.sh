#!/usr/bin/env bash
# Session 16's lead calls: the CLI, libfp4lane_cuda.so, the GPU tests the calls run and the shared libraries a
# bare device lacks (ldd of the CLI), into the git-ignored gpuwork/s16/bin.tar.xz. B=build dir (build-dev).
set -e
cd "$(git rev-parse --show-toplevel)"
B=${B:-build-dev}; S=$(mktemp -d); mkdir -p $S/f/bin $S/f/lib $S/f/$B/tests/gpu gpuwork/s16
cp $B/fp4lane $B/libfp4lane_cuda.so $S/f/bin/
for t in ${TESTS:-gemma moe exact runtime generate native}; do cp $B/tests/gpu/test_gpu_$t \
  $S/f/$B/tests/gpu/; done
for so in $(ldd $B/fp4lane $B/libfp4lane_cuda.so | awk '$2=="=>"{print $1}' | sort -u); do
  case $so in libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|libpthread.so*|libdl.so*|librt.so*) continue;; esac
  case $so in libcuda.so*|libcudart.so*|libcublas*) continue;; esac
  p=$(ldconfig -p | awk -v n=$so '$1==n{print $NF; exit}'); [ -n "$p" ] && cp -L "$p" $S/f/lib/
done
{ git rev-parse HEAD; git status --short | head -5; date -u; } > $S/f/BUILT.txt
(cd $S/f && tar cJf - .) > gpuwork/s16/bin.tar.xz
rm -rf $S; ls -la gpuwork/s16
