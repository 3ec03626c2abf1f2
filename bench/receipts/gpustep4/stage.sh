#!/usr/bin/env bash
# stage.sh [NEW_BUILD [BASE_BUILD [A_BUILD]]]: the binaries a device call carries, into /work/main/gpuwork/gpustep (git-ignored there)
set -e
W=/work/main/gpuwork/gpustep; S=/tmp/gsstage; NB=${1:-/work/wt-gpustep/build-gpu}; BB=${2:-/tmp/gsbase/build-gpu}
rm -rf $S; mkdir -p $S/new/tests/gpu $S/base $W/lib
cp $NB/fp4lane $NB/libfp4lane_cuda.so $NB/dev/cuda/gemv_lab $S/new/; cp $NB/tests/gpu/test_gpu_* $S/new/tests/gpu/
cp $BB/fp4lane $BB/libfp4lane_cuda.so $S/base/
AB=${3:-}; [ -n "$AB" ] && mkdir -p $S/A && cp $AB/fp4lane $AB/libfp4lane_cuda.so $S/A/ && strip --strip-debug $S/A/fp4lane
strip --strip-debug $S/new/fp4lane $S/base/fp4lane $S/new/tests/gpu/* $S/new/gemv_lab
(cd $S && tar cJf $W/bin.tar.xz new base $( [ -n "$AB" ] && echo A))
cp -L /lib/x86_64-linux-gnu/libutf8proc.so.2 /lib/x86_64-linux-gnu/libpcre2-8.so.0 /lib/x86_64-linux-gnu/libjansson.so.4 $W/lib/
cp /work/wt-gpustep/bench/receipts/gpustep4/run*.sh $W/
ls -la $W; du -sh $W
