#!/usr/bin/env bash
# Session 9, device call 3. gpuwork/s9c/bin.tar.xz: f/ = main after the merge of ggml-defer (9570f10 +
# the deferred type-40 load: FP4_LOAD_DEFER_REPACK, src/cuda/ggml_repack.cu) with the frag kernel's
# activation prologue in 32-bit, vectorized form, a ring of tile slots for the partial sums, the
# route's shape 16 warps / 3 stages (lab .92); o/ = 04a524f (the session's start).
# 1. every GPU test (test_gpu_ggml_repack new), memcheck quick on native, runtime, ggml_repack;
# 2. lab: frag .90-.95 at the decode shapes; 3. load (first token, host peak) old/new;
# 4. decode old/new alternating, 8 sequences, fp4lane bench frag vs NO_FRAG.
set -u
G=gpuwork/s9c; tar xJf $G/bin.tar.xz -C $G; F=$G/f; O=$G/o
export LD_LIBRARY_PATH=$PWD/gpuwork/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/tests.txt
( $F/fp4lane synth /tmp/s8 --shape llama3-8b --threads 12 --seed 1 > /dev/null 2>&1
  $F/fp4lane quantize /tmp/s8 /tmp/l8nv.gguf --layout gguf-ggml > /dev/null 2>&1; rm -rf /tmp/s8
  echo "model t=$SECONDS" ) > /tmp/model.txt 2>&1 &
export FP4_BUILD=$F
for t in native ggml_repack runtime generate exact attention argmax dense dense_pinned dequant errors fp8 w4a4; do
  timeout 150 $F/tests/gpu/test_gpu_$t > /tmp/t_$t.txt 2>&1
  echo "test_gpu_$t rc=$? t=$SECONDS" >> $OUT/tests.txt; grep -E "passed, |FAIL|CHECK" /tmp/t_$t.txt | head -12 >> $OUT/tests.txt; done
grep "^frag " /tmp/t_native.txt > $OUT/frag_nrmse.txt
for t in native runtime ggml_repack; do
  FP4_GPU_QUICK=1 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 10 $F/tests/gpu/test_gpu_$t > /tmp/san_$t.txt 2>&1
  echo "memcheck $t-quick rc=$? t=$SECONDS" >> $OUT/tests.txt; grep -E "passed, |ERROR SUMMARY|Invalid" /tmp/san_$t.txt | head -4 >> $OUT/tests.txt; done
V=native.route,exact.route,native.90,native.91,native.92,native.93,native.94,native.95
timeout 150 $F/gemv_lab --decode --cols 1,2,4,8 --vars $V > $OUT/lab.txt 2>&1; echo "lab decode rc=$? t=$SECONDS" >> $OUT/tests.txt
wait; cat /tmp/model.txt >> $OUT/tests.txt
python3 -c 'import random
for s in range(8):
    r = random.Random(100 + s); print(",".join(str(r.randrange(128000)) for _ in range(512)))' > /tmp/b8
head -1 /tmp/b8 > /tmp/p512
cat /tmp/l8nv.gguf > /dev/null
for rep in 1 2; do for m in exact native; do for b in $O $F; do echo "== $b $m"
  timeout 60 python3 dev/peak_rss.py $b/fp4lane run /tmp/l8nv.gguf --device cuda --mode $m --prompt-ids @/tmp/p512 -n 1 --ignore-eos --ctx 4096
done; done; done > $OUT/load.txt 2>&1
echo "load t=$SECONDS" >> $OUT/tests.txt
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
