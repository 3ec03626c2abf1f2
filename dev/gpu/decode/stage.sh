#!/usr/bin/env bash
# decode (issue 32 item 1): builds what run.sh carries into gpuwork/decode/bin.tar.xz (git-ignored):
# this tree's fp4lane CLI, libfp4lane_cuda.so, the GPU tests run.sh runs, the kernel lab (gemv_lab:
# the read ceiling and the projections alone) and attn_lab, and the shared libraries a bare device
# lacks.
#   bash dev/gpu/decode/stage.sh
set -e
cd "$(git rev-parse --show-toplevel)"
B=${B:-build-cuda}
make -j2 BUILD=$B all cuda
make -C dev/cuda BUILD=$PWD/$B $PWD/$B/dev/cuda/gemv_lab $PWD/$B/dev/cuda/attn_lab
S=$(mktemp -d); mkdir -p $S/f/$B/tests/gpu $S/f/$B/dev/cuda $S/f/lib gpuwork/decode
cp $B/fp4lane $B/libfp4lane_cuda.so $S/f/$B/
for t in exact native runtime; do cp $B/tests/gpu/test_gpu_$t $S/f/$B/tests/gpu/; done
cp $B/dev/cuda/gemv_lab $B/dev/cuda/attn_lab $S/f/$B/dev/cuda/
nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -cudart static -o $S/f/$B/dev/cuda/ceiling \
  dev/gpu/decode/ceiling.cu
# every shared library of the CLI and the tests but the C runtime's own and the CUDA ones the device has
ldd $B/fp4lane $S/f/$B/tests/gpu/* $S/f/$B/dev/cuda/* | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|libcudart|libcublas(Lt)?)\.so' |
  grep -vE '/ld-linux[^/]*\.so' |
  while read -r p; do cp -L "$p" $S/f/lib/; done
{ git rev-parse HEAD; git status --short | grep -v '^??' | head -5; date -u; } > $S/f/BUILT.txt
(cd $S/f && tar cJf - .) > gpuwork/decode/bin.tar.xz
rm -rf $S; ls -la gpuwork/decode
