#!/usr/bin/env bash
# Session 9, device call 6 (lean: 286 s of device time left). gpuwork/s9f/bin.tar.xz: f/ = call 5's
# tree + the native tile kernel's per-(column, K slice) power-of-two activation scale
# (native_tile.cuh; call 5's test_gpu_native failed its new 1e6-activation case at 3-8 columns of
# 14 336 values on the tile route: NaN). 1. test_gpu_native (new tile range cases), runtime (also
# with FP4LANE_CUDA_FRAG=1), generate, memcheck native quick; 2. the lab's tile route at 2..32 columns.
set -u
G=gpuwork/s9f; tar xJf $G/bin.tar.xz -C $G; F=$G/f
export LD_LIBRARY_PATH=$PWD/gpuwork/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/tests.txt
export FP4_BUILD=$F
for t in native runtime generate; do timeout 100 $F/tests/gpu/test_gpu_$t > /tmp/t_$t.txt 2>&1
  echo "test_gpu_$t rc=$? t=$SECONDS" >> $OUT/tests.txt; grep -E "passed, |FAIL|CHECK" /tmp/t_$t.txt | head -12 >> $OUT/tests.txt; done
grep -E "^frag |^native " /tmp/t_native.txt > $OUT/native_nrmse.txt
FP4LANE_CUDA_FRAG=1 timeout 100 $F/tests/gpu/test_gpu_runtime > /tmp/tf.txt 2>&1
echo "FRAG=1 test_gpu_runtime rc=$? t=$SECONDS" >> $OUT/tests.txt; grep -E "passed, |FAIL|CHECK" /tmp/tf.txt | head -6 >> $OUT/tests.txt
FP4_GPU_QUICK=1 timeout 60 compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 10 $F/tests/gpu/test_gpu_native > /tmp/san.txt 2>&1
echo "memcheck native-quick rc=$? t=$SECONDS" >> $OUT/tests.txt; grep -E "passed, |ERROR SUMMARY" /tmp/san.txt | head -3 >> $OUT/tests.txt
timeout 60 $F/gemv_lab --decode --cols 2,4,8,16,32 --vars native.route > $OUT/lab.txt 2>&1; echo "lab rc=$? t=$SECONDS" >> $OUT/tests.txt
