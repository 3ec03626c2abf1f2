#!/usr/bin/env bash
# Session 10, device call 4 (tests only). gpuwork/s10d/bin.tar.xz: f/ = main at the commit after
# ad7bd04 (engines of drafting-qualified lanes flagged FP4_CUDA_TENSOR_INVARIANT). Every GPU test.
set -u
G=gpuwork/s10d; tar xJf $G/bin.tar.xz -C $G; F=$G/f; W=/tmp/out; mkdir -p $W
export LD_LIBRARY_PATH=$PWD/gpuwork/lib:${LD_LIBRARY_PATH:-}
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $W/tests.txt
export FP4_BUILD=$F
for t in generate dense runtime native exact attention argmax dense_pinned dequant errors fp8 ggml_repack w4a4; do
  timeout 150 $F/tests/gpu/test_gpu_$t > /tmp/t_$t.txt 2>&1
  echo "test_gpu_$t rc=$? t=$SECONDS" >> $W/tests.txt; grep -E "passed, |FAIL|CHECK" /tmp/t_$t.txt | head -8 >> $W/tests.txt; done
FP4LANE_CUDA_GEMM=0 timeout 100 $F/tests/gpu/test_gpu_runtime > /tmp/t_rg.txt 2>&1; echo "GEMM=0 test_gpu_runtime rc=$? t=$SECONDS" >> $W/tests.txt; grep -E "passed, |FAIL" /tmp/t_rg.txt | head -4 >> $W/tests.txt
FP4_GPU_QUICK=1 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 10 $F/tests/gpu/test_gpu_generate > /tmp/san.txt 2>&1
echo "memcheck generate-quick rc=$? t=$SECONDS" >> $W/tests.txt; grep -E "passed, |ERROR SUMMARY" /tmp/san.txt | head -3 >> $W/tests.txt
cp $W/tests.txt $OUT/tests.txt; cat $W/tests.txt
