#!/usr/bin/env bash
# Session 10, device call 7. gpuwork/s10g/bin.tar.xz: f/ = branch pinned-l2 (dense.pinned's weight
# loads with the L2's 256-byte fetch), o/gemv_lab = call 6's (main df92d76). 1. test_gpu_dense_pinned,
# runtime (exact logits = the CPU's), fp8; 2. lab --head, exact route, old and new alternating.
set -u
G=gpuwork/s10g; tar xJf $G/bin.tar.xz -C $G; F=$G/f; O=$G/o
export LD_LIBRARY_PATH=$PWD/gpuwork/lib:${LD_LIBRARY_PATH:-}
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $OUT/tests.txt
export FP4_BUILD=$F
for t in dense_pinned runtime fp8; do timeout 100 $F/tests/gpu/test_gpu_$t > /tmp/t_$t.txt 2>&1
  echo "test_gpu_$t rc=$? t=$SECONDS" >> $OUT/tests.txt; grep -E "passed, |FAIL|CHECK" /tmp/t_$t.txt | head -8 >> $OUT/tests.txt; done
for rep in 1 2; do for b in $O $F; do echo "== $b"; timeout 60 $b/gemv_lab --head --cols 1,2,4,8 --vars head.exact,head.route | grep "head\."; done; done > $OUT/lab_exact.txt 2>&1
echo "end t=$SECONDS" >> $OUT/tests.txt; cat $OUT/tests.txt $OUT/lab_exact.txt
