#!/usr/bin/env bash
# session 4, call 2: round 9's 1-column routes on, the native GEMM prefill route (a16_gemm.cu) and
# 512-column CUDA steps; tests, compare, sanitizers, lab, then before (base = d07eabb) / after timings
set -u
G=gpuwork/s4b; tar xJf $G/bin.tar.xz -C $G
export LD_LIBRARY_PATH=$PWD/$G/lib:${LD_LIBRARY_PATH:-}
export FP4_GPU_TESTS="test_gpu_native test_gpu_exact test_gpu_runtime test_gpu_generate test_gpu_errors test_gpu_w4a4 test_gpu_dense test_gpu_dense_pinned test_gpu_dequant test_gpu_fp8"
R=$OUT/rt; mkdir -p $R
OUT=$R bash bench/runtime_cuda.sh $G/bin test,compare 2>&1
echo "== test_gpu_native FP4LANE_CUDA_NO_CUBLAS=1" >> $R/tests.txt
FP4LANE_CUDA_NO_CUBLAS=1 timeout 120 $G/bin/tests/gpu/test_gpu_native >> $R/tests.txt 2>&1; echo "native no-cublas rc=$?"
grep -E "^native .*cols|passed|CHECK" $R/tests.txt | head -40
echo "t=$SECONDS"
for t in test_gpu_native test_gpu_runtime test_gpu_exact; do
  echo "== sanitize $t" >> $R/sanitize.txt
  FP4_GPU_QUICK=1 FP4_BUILD=$G/bin timeout 120 compute-sanitizer --error-exitcode 1 --print-limit 20 $G/bin/tests/gpu/$t >> $R/sanitize.txt 2>&1
  echo "sanitize $t rc=$? t=$SECONDS"
done
grep -E "ERROR SUMMARY|passed, " $R/sanitize.txt
timeout 60 $G/bin/gemv_lab --vars exact.route,native.route --cols 1,8,16 > $OUT/lab.txt 2>&1
echo "lab rc=$? t=$SECONDS"; grep -E "^ceil|^\| [0-9]|FAIL" $OUT/lab.txt | cut -d'|' -f2-7 | tr -s ' '
OUT=$R bash bench/runtime_cuda.sh $G/bin:$G/base bench,batch 2>&1 | tail -30
Q=/tmp/rt_l8nv
for v in 0 1; do
  echo "== native 3968 FP4LANE_CUDA_NO_CUBLAS=$v" >> $R/bench.txt
  if [ $v = 1 ]; then export FP4LANE_CUDA_NO_CUBLAS=1; fi
  timeout 100 $G/bin/fp4lane run $Q --device cuda --mode native --prompt-ids @/tmp/p3968 -n 16 --ignore-eos --ctx 4096 2>&1 | grep -E "prefill|rror" | tee -a $R/bench.txt
done
unset FP4LANE_CUDA_NO_CUBLAS
OUT=$R bash bench/runtime_cuda.sh $G/bin profile 2>&1 | grep -E "ms per step|attention|proj|norm" | head -40
echo "end t=$SECONDS"
