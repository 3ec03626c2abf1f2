#!/usr/bin/env bash
# Session 9, device call 5. gpuwork/s9e/bin.tar.xz: f/ = the working tree after 0b9bd4d: the frag
# route taken for 2..8 columns only where one launch fits (dispatch row min 2; fp4_cu_frag_takes),
# frag copies made for engines of more than one sequence (or FP4LANE_CUDA_FRAG=1); o/ = 04a524f.
# 1. GPU tests (runtime and generate also with FP4LANE_CUDA_FRAG=1), memcheck; 2. lab at 2, 4, 8
# columns; 3. load with --timing old/new; 4. 8 sequences old/new, one sequence old/new;
# 5. fp4lane bench --seqs 8 frag vs FP4LANE_CUDA_NO_FRAG=1.
set -u
G=gpuwork/s9e; tar xJf $G/bin.tar.xz -C $G; F=$G/f; O=$G/o
export LD_LIBRARY_PATH=$PWD/gpuwork/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/tests.txt
( $F/fp4lane synth /tmp/s8 --shape llama3-8b --threads 12 --seed 1 > /dev/null 2>&1
  $F/fp4lane quantize /tmp/s8 /tmp/l8nv.gguf --layout gguf-ggml > /dev/null 2>&1; rm -rf /tmp/s8
  echo "model t=$SECONDS" ) > /tmp/model.txt 2>&1 &
export FP4_BUILD=$F
for t in native ggml_repack runtime generate exact; do timeout 150 $F/tests/gpu/test_gpu_$t > /tmp/t_$t.txt 2>&1
  echo "test_gpu_$t rc=$? t=$SECONDS" >> $OUT/tests.txt; grep -E "passed, |FAIL|CHECK" /tmp/t_$t.txt | head -12 >> $OUT/tests.txt; done
grep "^frag " /tmp/t_native.txt > $OUT/frag_nrmse.txt
for t in runtime generate; do FP4LANE_CUDA_FRAG=1 timeout 150 $F/tests/gpu/test_gpu_$t > /tmp/tf_$t.txt 2>&1
  echo "FRAG=1 test_gpu_$t rc=$? t=$SECONDS" >> $OUT/tests.txt; grep -E "passed, |FAIL|CHECK" /tmp/tf_$t.txt | head -12 >> $OUT/tests.txt; done
FP4_GPU_QUICK=1 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 10 $F/tests/gpu/test_gpu_native > /tmp/san.txt 2>&1
echo "memcheck native-quick rc=$? t=$SECONDS" >> $OUT/tests.txt; grep -E "passed, |ERROR SUMMARY" /tmp/san.txt | head -3 >> $OUT/tests.txt
FP4LANE_CUDA_FRAG=1 FP4_GPU_QUICK=1 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 10 $F/tests/gpu/test_gpu_runtime > /tmp/san2.txt 2>&1
echo "memcheck FRAG=1 runtime-quick rc=$? t=$SECONDS" >> $OUT/tests.txt; grep -E "passed, |ERROR SUMMARY" /tmp/san2.txt | head -3 >> $OUT/tests.txt
timeout 120 $F/gemv_lab --decode --cols 2,4,8 --vars native.route,exact.route,native.92 > $OUT/lab.txt 2>&1; echo "lab rc=$? t=$SECONDS" >> $OUT/tests.txt
wait; cat /tmp/model.txt >> $OUT/tests.txt
python3 -c 'import random
for s in range(8):
    r = random.Random(100 + s); print(",".join(str(r.randrange(128000)) for _ in range(512)))' > /tmp/b8
head -1 /tmp/b8 > /tmp/p512
cat /tmp/l8nv.gguf > /dev/null
for m in exact native; do for b in $O $F; do echo "== $b $m"
  timeout 60 $b/fp4lane run /tmp/l8nv.gguf --device cuda --mode $m --prompt-ids @/tmp/p512 -n 1 --ignore-eos --ctx 4096 --timing 2>&1 | grep -v "^fp4lane: memory"
done; done > $OUT/load.txt 2>&1
echo "load t=$SECONDS" >> $OUT/tests.txt
for rep in 1 2; do for b in $O $F; do echo "== $b batch8 native"
  timeout 60 $b/fp4lane run /tmp/l8nv.gguf --device cuda --mode native --batch-file /tmp/b8 -n 64 --ignore-eos --ctx 4096 2>&1 | grep -E "tok/s|rror" | tail -3; done; done > $OUT/runs.txt
R="/tmp/l8nv.gguf --device cuda --prompt-ids @/tmp/p512 -n 128 --ignore-eos --ctx 4096"
for b in $O $F; do echo "== $b native 1 seq"; timeout 60 $b/fp4lane run $R --mode native 2>&1 | grep -E "prefill|rror"; done >> $OUT/runs.txt
echo "runs t=$SECONDS" >> $OUT/tests.txt
left=$((540 - SECONDS))
if [ $left -gt 60 ]; then timeout $((left - 5)) $F/fp4lane bench /tmp/l8nv.gguf --a "--device cuda --mode native --ctx 4096" \
  --b "--device cuda --mode native --ctx 4096 FP4LANE_CUDA_NO_FRAG=1" --seqs 8 --pairs 3 --prefix 512 --tokens 64 --order abba \
  --json $OUT/bench_frag8.json > $OUT/bench.txt 2>&1; echo "bench rc=$? t=$SECONDS" >> $OUT/tests.txt; fi
echo "end t=$SECONDS" >> $OUT/tests.txt
