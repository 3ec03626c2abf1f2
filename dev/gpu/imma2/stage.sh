#!/usr/bin/env bash
# imma2 (issue 32 item 2, session 16): builds what run.sh carries into gpuwork/imma2/bin.tar.xz
# (git-ignored): this tree's fp4lane CLI, libfp4lane_cuda.so, the GPU tests run.sh runs
# (test_gpu_attention, test_gpu_exact, test_gpu_runtime), bench_imma2 (linked as the GPU tests are),
# the shared libraries a bare device lacks, and tests/data/hf/llama (the slimmed tree lacks it).
#   bash dev/gpu/imma2/stage.sh
set -e
cd "$(git rev-parse --show-toplevel)"
B=build-dev
make -j2 BUILD=$B all cuda
mkdir -p $B/dev
nvcc -O3 -std=c++17 -Iinclude -Isrc --fmad=false -gencode arch=compute_90a,code=sm_90a \
  -DFP4_CU_BUILD_CC=90 -Itests -Itests/gpu -o $B/dev/bench_imma2 dev/gpu/imma2/bench_imma2.cu \
  $B/tests/gpu/check.o $B/libfp4lane_step.a $B/libfp4lane_cuda.a $B/libfp4lane_host.a \
  -L/usr/local/cuda/lib64 -lcudart -lpthread -lm
S=$(mktemp -d); mkdir -p $S/f/lib $S/f/$B/tests/gpu gpuwork/imma2
cp $B/fp4lane $B/libfp4lane_cuda.so $S/f/$B/
cp $B/tests/gpu/test_gpu_attention $B/tests/gpu/test_gpu_exact $B/tests/gpu/test_gpu_runtime \
  $B/dev/bench_imma2 $S/f/$B/tests/gpu/
# every shared library of the CLI and the tests but the C runtime's own and the CUDA runtime (the
# device's) — libmicrohttpd pulls gnutls
ldd $B/fp4lane $S/f/$B/tests/gpu/* | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|libcudart|ld-linux[^/]*)\.so' |
  while read -r p; do cp -L "$p" $S/f/lib/; done
{ git rev-parse HEAD; git status --short | head -5; date -u; } > $S/f/BUILT.txt
(cd $S/f && tar cJf - .) > gpuwork/imma2/bin.tar.xz
tar cJf gpuwork/imma2/hfllama.tar.xz -C tests/data/hf llama # test_gpu_runtime's; the slimmed tree lacks it
rm -rf $S; ls -la gpuwork/imma2
