#!/usr/bin/env bash
# Session 9, device call 2 (call 1: every frag launch refused: 256 bytes of static shared memory beside the 227 KB opt-in). Binaries built on the project VM: gpuwork/s9b/bin.tar.xz holds f/ (the
# working tree with the frag route: src/cuda/frag.cuh, frag.cu; fp4lane, libfp4lane_cuda.so, gemv_lab,
# the GPU tests) and o/ (fp4lane + libfp4lane_cuda.so of 04a524f, the session's starting commit).
# 1. every GPU test of the new tree (test_gpu_native has the frag cases), memcheck on native quick;
# 2. the lab: the frag variants native.90-94 beside the routes at the decode shapes and issue 10's;
# 3. decode old/new alternating, fp4lane bench frag vs FP4LANE_CUDA_NO_FRAG=1, 8 sequences.
set -u
G=gpuwork/s9b; tar xJf $G/bin.tar.xz -C $G; F=$G/f; O=$G/o
export LD_LIBRARY_PATH=$PWD/gpuwork/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/tests.txt
( $F/fp4lane synth /tmp/s8 --shape llama3-8b --threads 12 --seed 1 > /dev/null 2>&1
  $F/fp4lane quantize /tmp/s8 /tmp/l8nv.gguf --layout gguf-ggml > /dev/null 2>&1; rm -rf /tmp/s8
  echo "model t=$SECONDS" ) > /tmp/model.txt 2>&1 &
export FP4_BUILD=$F
for t in native runtime generate exact attention argmax dense dense_pinned dequant errors fp8 w4a4; do
  timeout 150 $F/tests/gpu/test_gpu_$t > /tmp/t_$t.txt 2>&1
  echo "test_gpu_$t rc=$? t=$SECONDS" >> $OUT/tests.txt; grep -E "passed, |FAIL|CHECK|frag " /tmp/t_$t.txt | head -30 >> $OUT/tests.txt; done
FP4_GPU_QUICK=1 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 10 $F/tests/gpu/test_gpu_native > /tmp/san.txt 2>&1
echo "memcheck native-quick rc=$? t=$SECONDS" >> $OUT/tests.txt; grep -E "passed, |ERROR SUMMARY|Invalid" /tmp/san.txt | head -5 >> $OUT/tests.txt
FP4_GPU_QUICK=1 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 10 $F/tests/gpu/test_gpu_runtime > /tmp/san2.txt 2>&1
echo "memcheck runtime-quick rc=$? t=$SECONDS" >> $OUT/tests.txt; grep -E "passed, |ERROR SUMMARY|Invalid" /tmp/san2.txt | head -5 >> $OUT/tests.txt
V=native.route,exact.route,native.90,native.91,native.92,native.93,native.94
timeout 150 $F/gemv_lab --decode --cols 1,2,4,8 --vars $V > $OUT/lab.txt 2>&1; echo "lab decode rc=$? t=$SECONDS" >> $OUT/tests.txt
timeout 150 $F/gemv_lab --cols 1,8 --vars $V >> $OUT/lab.txt 2>&1; echo "lab full rc=$? t=$SECONDS" >> $OUT/tests.txt
wait; cat /tmp/model.txt >> $OUT/tests.txt
python3 -c 'import random
for s in range(8):
    r = random.Random(100 + s); print(",".join(str(r.randrange(128000)) for _ in range(512)))' > /tmp/b8
head -1 /tmp/b8 > /tmp/p512
R="/tmp/l8nv.gguf --device cuda --prompt-ids @/tmp/p512 -n 128 --ignore-eos --ctx 4096"
for rep in 1 2; do for m in native exact; do for b in $O $F; do
  echo "== $b $m"; timeout 60 $b/fp4lane run $R --mode $m 2>&1 | grep -E "prefill|rror"; done; done; done > $OUT/runs.txt
echo "runs t=$SECONDS" >> $OUT/tests.txt
for rep in 1 2; do for b in $O $F; do echo "== $b batch8 native"
  timeout 60 $b/fp4lane run /tmp/l8nv.gguf --device cuda --mode native --batch-file /tmp/b8 -n 64 --ignore-eos --ctx 4096 2>&1 | grep -E "tok/s|rror" | tail -3; done; done >> $OUT/runs.txt
echo "batch t=$SECONDS" >> $OUT/tests.txt
left=$((560 - SECONDS))
if [ $left -gt 70 ]; then timeout $((left - 10)) $F/fp4lane bench /tmp/l8nv.gguf --a "--device cuda --mode native --ctx 4096" \
  --b "--device cuda --mode native --ctx 4096 FP4LANE_CUDA_NO_FRAG=1" --pairs 3 --prefix 512 --tokens 64 --order abba \
  --json $OUT/bench_frag.json > $OUT/bench.txt 2>&1; echo "bench rc=$? t=$SECONDS" >> $OUT/tests.txt; fi
echo "end t=$SECONDS" >> $OUT/tests.txt
