#!/usr/bin/env bash
# Prepared for the next device session (NOT RUN: the device was withdrawn in session 4 before this
# call). Package first, on the project VM, from the tree to test:
#   make -j2 BUILD=build-gpu cuda build-gpu/fp4lane
#   W=gpuwork/s4c; mkdir -p $W/lib /tmp/st/bin/tests/gpu /tmp/st/base
#   cp build-gpu/fp4lane build-gpu/libfp4lane_cuda.so /tmp/st/bin/; cp build-gpu/tests/gpu/test_gpu_* /tmp/st/bin/tests/gpu/
#   rm -f /tmp/st/bin/tests/gpu/*.o; (base: fp4lane + libfp4lane_cuda.so of d07eabb into /tmp/st/base)
#   (cd /tmp/st && tar cJf $OLDPWD/$W/bin.tar.xz bin base)
#   cp -L /lib/x86_64-linux-gnu/{libutf8proc.so.2,libpcre2-8.so.0,libjansson.so.4} /usr/lib/x86_64-linux-gnu/libcrypto.so.3 $W/lib/
# then `run` this with carry ["gpuwork/s4c"], timeout 480. It measures what session 4 could not:
# the native GEMM prefill route (FP4LANE_CUDA_GEMM=1) against the tiles, with its prefill profile.
set -u
G=gpuwork/s4c; tar xJf $G/bin.tar.xz -C $G
export LD_LIBRARY_PATH=$PWD/$G/lib:${LD_LIBRARY_PATH:-}
export FP4_GPU_TESTS="test_gpu_native test_gpu_runtime test_gpu_generate test_gpu_exact test_gpu_errors"
R=$OUT/rt; mkdir -p $R
OUT=$R bash bench/runtime_cuda.sh $G/bin test,compare 2>&1 | grep -vE "transformers|bf16 native"
echo "== test_gpu_native FP4LANE_CUDA_GEMM=0" >> $R/tests.txt
FP4LANE_CUDA_GEMM=0 timeout 120 $G/bin/tests/gpu/test_gpu_native >> $R/tests.txt 2>&1; echo "native gemm-off rc=$?"
echo "== test_gpu_runtime FP4LANE_CUDA_GEMM=1" >> $R/tests.txt
FP4LANE_CUDA_GEMM=1 FP4_BUILD=$G/bin timeout 150 $G/bin/tests/gpu/test_gpu_runtime >> $R/tests.txt 2>&1
echo "runtime gemm-on rc=$?"
grep -E "2300 positions|CHECK" $R/tests.txt | head; echo "t=$SECONDS"
for t in test_gpu_native test_gpu_runtime; do
  echo "== sanitize $t" >> $R/sanitize.txt
  FP4LANE_CUDA_GEMM=1 FP4_GPU_QUICK=1 FP4_BUILD=$G/bin timeout 120 compute-sanitizer --error-exitcode 1 \
    --print-limit 20 $G/bin/tests/gpu/$t >> $R/sanitize.txt 2>&1
  echo "sanitize $t rc=$? t=$SECONDS"
done
grep -E "ERROR SUMMARY|passed, " $R/sanitize.txt
OUT=$R bash bench/runtime_cuda.sh $G/bin:$G/base prefill,bench 2>&1 | tail -44
echo "end t=$SECONDS"
