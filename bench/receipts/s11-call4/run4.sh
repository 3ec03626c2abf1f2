#!/usr/bin/env bash
# Session 11, device call 4 (tests only). gpuwork/s11d/bin.tar.xz: f/ = main at 98fbfd3 (branch s11
# merged). Every GPU test; GEMM=0 and ATT_CLUSTER_WIDE=0 runs of runtime; memcheck of the quick sets
# of attention, native and runtime.
set -u
G=gpuwork/s11d; tar xJf $G/bin.tar.xz -C $G; F=$G/f; W=/tmp/out; mkdir -p $W
export LD_LIBRARY_PATH=$PWD/gpuwork/lib:${LD_LIBRARY_PATH:-}
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $W/tests.txt
export FP4_BUILD=$F
for t in generate dense runtime native exact attention argmax dense_pinned dequant errors fp8 ggml_repack w4a4; do
  timeout 150 $F/tests/gpu/test_gpu_$t > /tmp/t_$t.txt 2>&1
  echo "test_gpu_$t rc=$? t=$SECONDS" >> $W/tests.txt; grep -E "passed, |FAIL|CHECK" /tmp/t_$t.txt | head -8 >> $W/tests.txt; done
FP4LANE_CUDA_GEMM=0 timeout 100 $F/tests/gpu/test_gpu_runtime > /tmp/t_rg.txt 2>&1; echo "GEMM=0 test_gpu_runtime rc=$? t=$SECONDS" >> $W/tests.txt; grep -E "passed, |FAIL" /tmp/t_rg.txt | head -4 >> $W/tests.txt
FP4LANE_CUDA_GEMM=0 timeout 100 $F/tests/gpu/test_gpu_native > /tmp/t_ng.txt 2>&1; echo "GEMM=0 test_gpu_native rc=$? t=$SECONDS" >> $W/tests.txt; grep -E "passed, |FAIL" /tmp/t_ng.txt | head -4 >> $W/tests.txt
for t in attention native runtime; do FP4_GPU_QUICK=1 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 10 $F/tests/gpu/test_gpu_$t > /tmp/san_$t.txt 2>&1
  echo "memcheck $t-quick rc=$? t=$SECONDS" >> $W/tests.txt; grep -E "passed, |ERROR SUMMARY" /tmp/san_$t.txt | head -3 >> $W/tests.txt; done
cp $W/tests.txt $OUT/tests.txt; cat $W/tests.txt
