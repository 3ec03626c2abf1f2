#!/usr/bin/env bash
# Session 10, device call 1. gpuwork/s10a/bin.tar.xz: f/ = branch normfuse at feffab0 (1b6f77c: the
# 1-column q/k/v and gate/up projections make their input from the residual, the add + RMSNorm in
# every block of the QIN item kernel; merged with tile-fastpath 05b9171: the native tile's
# activation scale only for columns outside [2^-10, 2^15)).
# 1. GPU tests; memcheck of the new test; 2. lab (tile route at 2..32 columns);
# 3. fp4lane bench, fused norm against FP4LANE_CUDA_NO_NORMFUSE=1, exact and native;
# 4. 8 sequences (run --batch-file) and one sequence.
set -u
G=gpuwork/s10a; tar xJf $G/bin.tar.xz -C $G; F=$G/f
export LD_LIBRARY_PATH=$PWD/gpuwork/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/tests.txt
date -u >> $OUT/tests.txt
( $F/fp4lane synth /tmp/s8 --shape llama3-8b --threads 12 --seed 1 > /dev/null 2>&1
  $F/fp4lane quantize /tmp/s8 /tmp/l8nv.gguf --layout gguf-ggml > /dev/null 2>&1; rm -rf /tmp/s8
  echo "model t=$SECONDS" ) > /tmp/model.txt 2>&1 &
export FP4_BUILD=$F
for t in normfuse native exact runtime generate; do timeout 150 $F/tests/gpu/test_gpu_$t > /tmp/t_$t.txt 2>&1
  echo "test_gpu_$t rc=$? t=$SECONDS" >> $OUT/tests.txt; grep -E "passed, |FAIL|CHECK" /tmp/t_$t.txt | head -12 >> $OUT/tests.txt; done
FP4_GPU_QUICK=1 timeout 100 compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 10 $F/tests/gpu/test_gpu_normfuse > /tmp/san.txt 2>&1
echo "memcheck normfuse-quick rc=$? t=$SECONDS" >> $OUT/tests.txt; grep -E "passed, |ERROR SUMMARY" /tmp/san.txt | head -3 >> $OUT/tests.txt
timeout 100 $F/gemv_lab --decode --cols 2,4,8,16,32 --vars native.route > $OUT/lab.txt 2>&1; echo "lab rc=$? t=$SECONDS" >> $OUT/tests.txt
wait; cat /tmp/model.txt >> $OUT/tests.txt
python3 -c 'import random
for s in range(8):
    r = random.Random(100 + s); print(",".join(str(r.randrange(128000)) for _ in range(512)))' > /tmp/b8
head -1 /tmp/b8 > /tmp/p512
cat /tmp/l8nv.gguf > /dev/null
for m in exact native; do
  left=$((560 - SECONDS)); [ $left -lt 60 ] && break
  timeout $((left - 5)) $F/fp4lane bench /tmp/l8nv.gguf --a "--device cuda --mode $m --ctx 4096" \
    --b "--device cuda --mode $m --ctx 4096 FP4LANE_CUDA_NO_NORMFUSE=1" --pairs 3 --prefix 512 --tokens 64 --order abba \
    --json $OUT/bench_normfuse_$m.json > $OUT/bench_$m.txt 2>&1; echo "bench $m rc=$? t=$SECONDS" >> $OUT/tests.txt
done
for rep in 1 2; do echo "== batch8 native"
  timeout 40 $F/fp4lane run /tmp/l8nv.gguf --device cuda --mode native --batch-file /tmp/b8 -n 64 --ignore-eos --ctx 4096 2>&1 | grep -E "tok/s|rror" | tail -3; done > $OUT/runs.txt
echo "end t=$SECONDS" >> $OUT/tests.txt
