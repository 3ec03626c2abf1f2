#!/usr/bin/env bash
# gpustep run 2: the new step's GPU tests (fused and FP4LANE_CUDA_NO_FUSE=1), stop on failure;
# then base vs new timings in one sitting, the profile, and compute-sanitizer on the new step.
set -u
G=gpuwork/gpustep
export LD_LIBRARY_PATH=$PWD/$G/lib:${LD_LIBRARY_PATH:-}
chmod +x $G/base/fp4lane $G/new/fp4lane $G/new/tests/gpu/*
export FP4_BUILD=$G/new
fail=0
date -u
for env in "FP4LANE_CUDA_NO_FUSE=0" "FP4LANE_CUDA_NO_FUSE=1"; do
  for t in test_gpu_runtime test_gpu_dense_pinned; do
    [ "$env" = FP4LANE_CUDA_NO_FUSE=1 ] && [ $t = test_gpu_dense_pinned ] && continue
    echo "== $t $env" >> "$OUT/tests.txt"
    env $env timeout 150 $G/new/tests/gpu/$t >> "$OUT/tests.txt" 2>&1; rc=$?
    echo "$t [$env] rc=$rc"; [ $rc = 0 ] || fail=1
  done
done
grep -E "passed, |CHECK failed|differ in bits \(|max \|dlogit\|" "$OUT/tests.txt" | grep -v " 0 differ" | head -40
grep -c " 0 differ in bits" "$OUT/tests.txt" | sed 's/^/bit-identical comparisons: /'
date -u
[ $fail = 0 ] || exit 1
OUT=$OUT bash $G/runtime_cuda.sh $G/new:$G/base bench,batch,profile 2>&1 | grep -v "^==" | tail -60
date -u
FP4_GPU_QUICK=1 timeout 90 compute-sanitizer --error-exitcode 1 --print-limit 20 $G/new/tests/gpu/test_gpu_runtime \
  > "$OUT/sanitize.txt" 2>&1; echo "sanitize rc=$?"
grep -E "ERROR SUMMARY|passed, " "$OUT/sanitize.txt"
date -u
