#!/usr/bin/env bash
# int8mma (issue 32 item 2): builds what run.sh carries into gpuwork/int8mma/bin.tar.xz (git-ignored):
# this tree's fp4lane CLI, libfp4lane_cuda.so and the two GPU tests run.sh runs (build-v2), the same of
# an earlier build of the kernel for an A/B in one sitting where build-dev holds one (call 1: the
# per-warp decoding kernel of 66a4cb6, built there), and the shared libraries a bare device lacks.
#   bash dev/gpu/int8mma/stage.sh
set -e
cd "$(git rev-parse --show-toplevel)"
B=build-v2
make -j2 BUILD=$B all cuda
# dev/gpu/int8mma/bench_imma.cu against each build's libraries, linked as the GPU tests are
for d in $B build-dev; do
  [ -f $d/libfp4lane_cuda.a ] || continue
  mkdir -p $d/dev
  nvcc -O3 -std=c++17 -Iinclude -Isrc --fmad=false -gencode arch=compute_90a,code=sm_90a \
    -DFP4_CU_BUILD_CC=90 -Itests -Itests/gpu -o $d/dev/bench_imma dev/gpu/int8mma/bench_imma.cu \
    $d/tests/gpu/check.o $d/libfp4lane_step.a $d/libfp4lane_cuda.a $d/libfp4lane_host.a \
    -L/usr/local/cuda/lib64 -lcudart -lpthread -lm
done
S=$(mktemp -d); mkdir -p $S/f/lib gpuwork/int8mma
for d in $B build-dev; do
  [ -f $d/libfp4lane_cuda.so ] || continue
  mkdir -p $S/f/$d/tests/gpu
  cp $d/fp4lane $d/libfp4lane_cuda.so $S/f/$d/
  cp $d/tests/gpu/test_gpu_exact $d/tests/gpu/test_gpu_runtime $S/f/$d/tests/gpu/
  cp $d/dev/bench_imma $S/f/$d/tests/gpu/
  [ -f $d/BUILT_COMMIT ] && cp $d/BUILT_COMMIT $S/f/$d/ # the commit an earlier build was made from
done
# every shared library of the CLI and the tests but the C runtime's own and the CUDA runtime (the
# device's: earlier sessions' stages carried none) — libmicrohttpd pulls gnutls
ldd $B/fp4lane $S/f/$B/tests/gpu/* | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|libcudart|ld-linux[^/]*)\.so' |
  while read -r p; do cp -L "$p" $S/f/lib/; done
{ git rev-parse HEAD; git status --short | head -5; date -u; } > $S/f/BUILT.txt
(cd $S/f && tar cJf - .) > gpuwork/int8mma/bin.tar.xz
rm -rf $S; ls -la gpuwork/int8mma
