#!/usr/bin/env bash
# Session 7, device call 5: SwiGLU making the down projection's activation pass at one column
# (stk_swiglu_act + fp4_cu_project_pre; FP4LANE_CUDA_NO_ACTFUSE=1: stk_swiglu, then the route's
# own pass), and the native QIN launch back to one shape (s7-call4: 20000x512 bytes differed).
# GPU tests, then decode paired with and without it. Binaries: gpuwork/s7e.
set -u
G=gpuwork/s7e; tar xJf $G/bin.tar.xz -C $G; F=$G/f
export LD_LIBRARY_PATH=$PWD/gpuwork/s5/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/tests.txt
( $F/fp4lane synth /tmp/s8 --shape llama3-8b --threads 12 --seed 1 > /dev/null 2>&1
  $F/fp4lane quantize /tmp/s8 /tmp/l8nv.gguf --layout gguf-ggml > /dev/null 2>&1; rm -rf /tmp/s8
  echo "model t=$SECONDS" ) > /tmp/model.txt 2>&1 &
export FP4_BUILD=$F
for t in runtime generate exact native; do timeout 150 $F/tests/gpu/test_gpu_$t > /tmp/t_$t.txt 2>&1
  echo "test_gpu_$t rc=$? t=$SECONDS" >> $OUT/tests.txt; grep -E "passed, |FAIL|CHECK" /tmp/t_$t.txt | head -8 >> $OUT/tests.txt; done
FP4_GPU_QUICK=1 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 10 $F/tests/gpu/test_gpu_runtime > /tmp/san.txt 2>&1
echo "memcheck runtime-quick rc=$? t=$SECONDS" >> $OUT/tests.txt; tail -2 /tmp/san.txt >> $OUT/tests.txt
wait; cat /tmp/model.txt >> $OUT/tests.txt
mkdir -p /tmp/rc
for mode in exact native; do
  timeout 150 $F/fp4lane bench /tmp/l8nv.gguf --a "--device cuda --mode $mode --ctx 4096" \
    --b "--device cuda --mode $mode --ctx 4096 FP4LANE_CUDA_NO_ACTFUSE=1" --pairs 5 --prefix 512 --tokens 64 \
    --json /tmp/rc/actfuse_$mode.json >> $OUT/bench.txt 2>&1; echo "bench $mode rc=$? t=$SECONDS" >> $OUT/bench.txt
done
(cd /tmp/rc && tar cf $OUT/receipts.tar *.json)
echo "end t=$SECONDS" >> $OUT/tests.txt
