#!/usr/bin/env bash
# Issue 28, session 16 (native CUDA MoE, experts grouped by expert): builds here what run.sh and run_llb.sh
# carry (the device has no -dev headers) into the git-ignored gpuwork/nativemoe/bin.tar.xz: build-cuda's
# CLI, libfp4lane_cuda.so, test_gpu_moe and test_gpu_runtime, and the shared libraries a bare device lacks
# (ldd of the CLI and the library). MAIN_LIB=path: main's libfp4lane_cuda.so too (main/ in the archive), so
# run.sh shows the new native check failing on the library before the fix.
#   bash dev/gpu/nativemoe/stage.sh
set -e
cd "$(git rev-parse --show-toplevel)"
B=build-cuda
make -j2 BUILD=$B all cuda > /dev/null
S=$(mktemp -d); mkdir -p $S/f/$B/tests/gpu $S/f/lib gpuwork/nativemoe
cp $B/fp4lane $B/libfp4lane_cuda.so $S/f/$B/
for t in test_gpu_moe test_gpu_runtime; do cp $B/tests/gpu/$t $S/f/$B/tests/gpu/; done
if [ -n "${MAIN_LIB:-}" ]; then mkdir -p $S/f/main && cp "$MAIN_LIB" $S/f/main/; fi
for so in $(ldd $B/fp4lane $B/libfp4lane_cuda.so | awk '$2=="=>"{print $1}' | sort -u); do
  case $so in libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|libpthread.so*|libdl.so*|librt.so*) continue;; esac
  case $so in libcuda.so*|libcudart.so*|libcublas*) continue;; esac
  p=$(ldconfig -p | awk -v n=$so '$1==n{print $NF; exit}'); [ -n "$p" ] && cp -L "$p" $S/f/lib/
done
{ git rev-parse HEAD; git status --short | head -5; date -u; } > $S/f/BUILT.txt
(cd $S/f && tar cJf - .) > gpuwork/nativemoe/bin.tar.xz
rm -rf $S; ls -la gpuwork/nativemoe
