#!/usr/bin/env bash
# session 4, call 3: cuBLAS made at create, prefill profile; tests, compare, sanitizers; prefill and
# decode before (base = d07eabb) / after
set -u
G=gpuwork/s4c; tar xJf $G/bin.tar.xz -C $G
export LD_LIBRARY_PATH=$PWD/$G/lib:${LD_LIBRARY_PATH:-}
export FP4_GPU_TESTS="test_gpu_native test_gpu_runtime test_gpu_generate test_gpu_exact test_gpu_errors"
R=$OUT/rt; mkdir -p $R
OUT=$R bash bench/runtime_cuda.sh $G/bin test,compare 2>&1 | grep -vE "transformers|bf16 native"
echo "== test_gpu_native FP4LANE_CUDA_NO_CUBLAS=1" >> $R/tests.txt
FP4LANE_CUDA_NO_CUBLAS=1 timeout 120 $G/bin/tests/gpu/test_gpu_native >> $R/tests.txt 2>&1; echo "native no-cublas rc=$?"
grep -E "2300 positions|CHECK" $R/tests.txt | head; echo "t=$SECONDS"
for t in test_gpu_native test_gpu_runtime; do
  echo "== sanitize $t" >> $R/sanitize.txt
  FP4_GPU_QUICK=1 FP4_BUILD=$G/bin timeout 120 compute-sanitizer --error-exitcode 1 --print-limit 20 $G/bin/tests/gpu/$t >> $R/sanitize.txt 2>&1
  echo "sanitize $t rc=$? t=$SECONDS"
done
grep -E "ERROR SUMMARY|passed, " $R/sanitize.txt
OUT=$R bash bench/runtime_cuda.sh $G/bin:$G/base prefill,bench 2>&1 | tail -44
echo "end t=$SECONDS"
