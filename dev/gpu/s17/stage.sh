#!/usr/bin/env bash
# Session 17: one carry for main's device calls. build-dev's CLI, libfp4lane_cuda.so, every GPU test, the
# helpers' extra programs (bench_imma2, the read ceiling, firsttok's probe) and the shared libraries a bare
# device lacks, into the git-ignored gpuwork/s17/bin.tar.xz. On the device prep.sh unpacks it once into
# /tmp/s17 and lays out what each staged run.sh (mla, decode, imma2, firsttok, s16/lead) expects.
set -e
cd "$(git rev-parse --show-toplevel)"
B=build-dev; S=$(mktemp -d); U=$S/f; mkdir -p $U/$B/tests/gpu $U/$B/dev/cuda $U/lib gpuwork/s17
make -j2 BUILD=$B all cuda
nvcc -O3 -std=c++17 -Iinclude -Isrc --fmad=false -gencode arch=compute_90a,code=sm_90a \
  -DFP4_CU_BUILD_CC=90 -Itests -Itests/gpu -o $U/$B/tests/gpu/bench_imma2 dev/gpu/imma2/bench_imma2.cu \
  $B/tests/gpu/check.o $B/libfp4lane_step.a $B/libfp4lane_cuda.a $B/libfp4lane_host.a \
  -L/usr/local/cuda/lib64 -lcudart -lpthread -lm
nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -cudart static -o $U/$B/dev/cuda/ceiling \
  dev/gpu/decode/ceiling.cu
gcc -O2 -Wall -Werror -I/usr/local/cuda/include dev/gpu/firsttok/probe.c -o $U/$B/probe \
  -L/usr/local/cuda/lib64 -lcudart_static -ldl -lpthread -lrt
cp $B/fp4lane $B/libfp4lane_cuda.so $U/$B/
for t in $B/tests/gpu/test_*; do case $t in *.o|*.d) continue;; esac; cp $t $U/$B/tests/gpu/; done
ldd $B/fp4lane $U/$B/tests/gpu/* | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|libcudart|libcublas(Lt)?)\.so' |
  grep -vE '/(libnccl|ld-linux[^/]*)\.so' |
  while read -r p; do cp -L "$p" $U/lib/; done
{ git rev-parse HEAD; git status --short | grep -v '^??' | head -5; date -u; } > $U/BUILT.txt
(cd $U && tar cJf - .) > gpuwork/s17/bin.tar.xz
rm -rf $S; ls -la gpuwork/s17
