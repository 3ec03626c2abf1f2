#!/usr/bin/env bash
# decode (issue 32 item 1): builds what run.sh carries into gpuwork/decode/bin.tar.xz (git-ignored):
# this tree's fp4lane CLI, libfp4lane_cuda.so, the GPU tests run.sh runs, the read-ceiling kernel, with
# LABS=1 the kernel lab (gemv_lab: the projections alone) and attn_lab, and the shared libraries a bare
# device lacks; beside it hf_llama.tar (test_gpu_runtime's checkpoint, absent from the slimmed tree).
#   bash dev/gpu/decode/stage.sh
set -e
cd "$(git rev-parse --show-toplevel)"
B=${B:-build-cuda}; GW=${GW:-gpuwork/decode} # GW: where the carry goes
make -j2 BUILD=$B all cuda
# the labs where they build (LABS=1; else none); run.sh skips what is absent
[ "${LABS:-0}" = 0 ] ||
  make -j2 -C dev/cuda BUILD=$PWD/$B $PWD/$B/dev/cuda/gemv_lab $PWD/$B/dev/cuda/attn_lab || true
S=$(mktemp -d); mkdir -p $S/f/$B/tests/gpu $S/f/$B/dev/cuda $S/f/lib $GW
cp $B/fp4lane $B/libfp4lane_cuda.so $S/f/$B/
for t in exact native runtime; do cp $B/tests/gpu/test_gpu_$t $S/f/$B/tests/gpu/; done
# (37 MB: with them and test_gpu_runtime's checkpoint the carry is above 15 MB; LABS=1 takes them)
[ "${LABS:-0}" = 0 ] ||
  for l in gemv_lab attn_lab; do [ -f $B/dev/cuda/$l ] && cp $B/dev/cuda/$l $S/f/$B/dev/cuda/; done
nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -cudart static -o $S/f/$B/dev/cuda/ceiling \
  dev/gpu/decode/ceiling.cu
# every shared library of the CLI and the tests but the C runtime's own and the CUDA ones the device has
ldd $B/fp4lane $S/f/$B/tests/gpu/* $S/f/$B/dev/cuda/* | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|libcudart|libcublas(Lt)?)\.so' |
  grep -vE '/ld-linux[^/]*\.so' |
  while read -r p; do cp -L "$p" $S/f/lib/; done
{ git rev-parse HEAD; git status --short | grep -v '^??' | head -5; date -u; } > $S/f/BUILT.txt
(cd $S/f && tar cJf - .) > $GW/bin.tar.xz
# test_gpu_runtime's reference checkpoint, which the slimmed device tree lacks (dev/gpu/slim.sh)
tar cf $GW/hf_llama.tar -C tests/data/hf llama
rm -rf $S; ls -la $GW
