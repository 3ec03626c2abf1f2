#!/usr/bin/env bash
# Session 10, device call 5 (lab only). gpuwork/s10e/bin.tar.xz: f/gemv_lab of main after 7bcdcb4 +
# lab variants head.7-10 (the L2's 256-byte fetch hint on the weight loads, deeper load rings).
set -u
G=gpuwork/s10e; tar xJf $G/bin.tar.xz -C $G; F=$G/f
export LD_LIBRARY_PATH=$PWD/gpuwork/lib:${LD_LIBRARY_PATH:-}
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $OUT/lab_head.txt
timeout 200 $F/gemv_lab --head --cols 2,3,4,5,6,7,8,16 --vars head.route,head.dense,head.1,head.7,head.8,head.9,head.10,cublas >> $OUT/lab_head.txt 2>&1
echo "rc=$? t=$SECONDS" >> $OUT/lab_head.txt; cat $OUT/lab_head.txt
