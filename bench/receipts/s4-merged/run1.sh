#!/usr/bin/env bash
# session 4, call 1: the merged tree (d07eabb) on the H200 — every GPU test, compare, sanitizers,
# the lab's routes and round-9 variants, then the decode timings, the profile and 8 sequences
set -u
G=gpuwork/s4; tar xJf $G/bin.tar.xz -C $G
export LD_LIBRARY_PATH=$PWD/$G/lib:${LD_LIBRARY_PATH:-}
export FP4_GPU_TESTS="test_gpu_exact test_gpu_native test_gpu_dense test_gpu_dense_pinned test_gpu_w4a4 test_gpu_dequant test_gpu_errors test_gpu_runtime test_gpu_generate test_gpu_fp8"
R=$OUT/rt; mkdir -p $R
OUT=$R bash bench/runtime_cuda.sh $G/bin test,compare,sanitize 2>&1
echo "t=$SECONDS"
for t in test_gpu_generate test_gpu_exact test_gpu_native; do
  echo "== sanitize $t" >> $R/sanitize.txt
  FP4_GPU_QUICK=1 FP4_BUILD=$G/bin timeout 100 compute-sanitizer --error-exitcode 1 --print-limit 20 $G/bin/tests/gpu/$t >> $R/sanitize.txt 2>&1
  echo "sanitize $t rc=$? t=$SECONDS"
done
timeout 90 $G/bin/gemv_lab --vars exact.route,exact.71,exact.72,native.route,native.64,native.71,native.72 --cols 1,8,16 > $OUT/lab.txt 2>&1
echo "lab rc=$? t=$SECONDS"; grep -E "^ceil|^\| [0-9]|FAIL" $OUT/lab.txt | cut -d'|' -f2-7 | tr -s ' '
OUT=$R bash bench/runtime_cuda.sh $G/bin bench,profile,batch 2>&1 | tail -40
echo "end t=$SECONDS"
