#!/usr/bin/env bash
# Session 7, device call 1. Binaries built on the project VM from the working tree (QIN: the 1-column
# item kernel quantizes its own input; FP4LANE_CUDA_NO_QIN=1 restores the separate pass), packed as
# gpuwork/s7a/bin.tar.xz (fp4lane, libfp4lane_cuda.so, attn_lab, gemv_lab, five GPU tests); runtime
# libraries gpuwork/s5/lib. Writes 7 files.
set -u
G=gpuwork/s7a; tar xJf $G/bin.tar.xz -C $G; F=$G/f
export LD_LIBRARY_PATH=$PWD/gpuwork/s5/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/tests.txt
( $F/fp4lane synth /tmp/s8 --shape llama3-8b --threads 12 --seed 1 > /dev/null 2>&1
  $F/fp4lane quantize /tmp/s8 /tmp/l8nv.gguf --layout gguf-ggml > /dev/null 2>&1; rm -rf /tmp/s8
  echo "model t=$SECONDS" ) > /tmp/model.txt 2>&1 &
export FP4_BUILD=$F
# 1. the GPU tests (exact/native: QIN against the CPU oracle and against the separate pass)
for t in exact native attention runtime generate; do timeout 150 $F/tests/gpu/test_gpu_$t > /tmp/t_$t.txt 2>&1
  echo "test_gpu_$t rc=$? t=$SECONDS" >> $OUT/tests.txt; grep -E "passed, |FAIL|CHECK" /tmp/t_$t.txt | head -8 >> $OUT/tests.txt; done
FP4_GPU_QUICK=1 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 10 $F/tests/gpu/test_gpu_native > /tmp/san1.txt 2>&1
echo "memcheck native-quick rc=$? t=$SECONDS" >> $OUT/tests.txt; tail -3 /tmp/san1.txt >> $OUT/tests.txt
FP4_GPU_QUICK=1 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 10 $F/tests/gpu/test_gpu_exact > /tmp/san2.txt 2>&1
echo "memcheck exact-quick rc=$? t=$SECONDS" >> $OUT/tests.txt; tail -3 /tmp/san2.txt >> $OUT/tests.txt
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 10 $F/attn_lab 1 quick > /tmp/san3.txt 2>&1
echo "memcheck attn_lab rc=$? t=$SECONDS" >> $OUT/tests.txt; tail -3 /tmp/san3.txt >> $OUT/tests.txt
# 2. the routes at the decode shapes, QIN on / off / on (kernel lab, graph replays)
for q in 0 1 0; do echo "== FP4LANE_CUDA_NO_QIN=$q"; FP4LANE_CUDA_NO_QIN=$q timeout 60 $F/gemv_lab --decode --cols 1 --vars native.route,exact.route; done > $OUT/lab.txt 2>&1
echo "lab t=$SECONDS" >> $OUT/tests.txt
wait; cat /tmp/model.txt >> $OUT/tests.txt
# 3. decode, QIN against the separate pass, paired (fp4lane bench), context 512
for mode in exact native; do
  timeout 150 $F/fp4lane bench /tmp/l8nv.gguf --a "--device cuda --mode $mode --ctx 4096" \
    --b "--device cuda --mode $mode --ctx 4096 FP4LANE_CUDA_NO_QIN=1" --pairs 5 --prefix 512 --tokens 64 \
    --json $OUT/bench_qin_$mode.json >> $OUT/bench.txt 2>&1; echo "bench $mode rc=$? t=$SECONDS" >> $OUT/bench.txt
done
# 4. the GPU load of a type-40 GGUF: first token and host peak
python3 -c 'import random
for s in range(8):
    r = random.Random(100 + s); print(",".join(str(r.randrange(128000)) for _ in range(512)))' > /tmp/b8
head -1 /tmp/b8 > /tmp/p512
for rep in 1 2; do for mode in exact native; do
  timeout 60 python3 dev/peak_rss.py $F/fp4lane run /tmp/l8nv.gguf --device cuda --mode $mode --prompt-ids @/tmp/p512 -n 1 --ignore-eos --ctx 4096
done; done > $OUT/load.txt 2>&1
echo "load t=$SECONDS" >> $OUT/tests.txt
# 5. ncu of the 8-sequence decode step (native), with what time is left
left=$((560 - SECONDS)); NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ $left -gt 60 ]; then
  timeout $left $NCU --clock-control none --cache-control none \
    --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size --csv --print-units base \
    $F/fp4lane run /tmp/l8nv.gguf --device cuda --mode native --batch-file /tmp/b8 -n 3 --ignore-eos --ctx 4096 \
    > /tmp/ncu.csv 2>/dev/null; echo "ncu rc=$? t=$SECONDS" >> $OUT/tests.txt
  python3 dev/cuda/ncu_step.py /tmp/ncu.csv > $OUT/ncu_seq8.txt 2>&1
fi
echo "end t=$SECONDS" >> $OUT/tests.txt
