#!/usr/bin/env bash
# Session 10, device call 6. gpuwork/s10f/bin.tar.xz: f/ = main at df92d76 (bf16.dense.mma with the
# L2's 256-byte fetch). 1. test_gpu_dense / generate / runtime; 2. lab --head (route, FMA);
# 3. the type-40 GGUF; 4. 8 sequences: bench dense.mma vs FP4LANE_CUDA_NO_DENSE_MMA=1, 3 pairs;
# 5. one sequence native, run.
set -u
G=gpuwork/s10f; tar xJf $G/bin.tar.xz -C $G; F=$G/f; W=/tmp/out; mkdir -p $W
export LD_LIBRARY_PATH=$PWD/gpuwork/lib:${LD_LIBRARY_PATH:-}
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $W/tests.txt
( $F/fp4lane synth /tmp/s8 --shape llama3-8b --threads 12 --seed 1 > /dev/null 2>&1
  $F/fp4lane quantize /tmp/s8 /tmp/l8nv.gguf --layout gguf-ggml > /dev/null 2>&1; rm -rf /tmp/s8
  echo "model t=$SECONDS" ) > /tmp/model.txt 2>&1 &
export FP4_BUILD=$F
for t in dense generate runtime; do timeout 120 $F/tests/gpu/test_gpu_$t > /tmp/t_$t.txt 2>&1
  echo "test_gpu_$t rc=$? t=$SECONDS" >> $W/tests.txt; grep -E "passed, |FAIL|CHECK" /tmp/t_$t.txt | head -8 >> $W/tests.txt; done
grep "bf16.dense.mma" /tmp/t_dense.txt > $W/dense_nrmse.txt
timeout 60 $F/gemv_lab --head --cols 1,2,4,8,16 --vars head.route,head.dense > $W/lab_head.txt 2>&1; echo "lab rc=$? t=$SECONDS" >> $W/tests.txt
wait; cat /tmp/model.txt >> $W/tests.txt
python3 -c 'import random
for s in range(8):
    r = random.Random(100 + s); print(",".join(str(r.randrange(128000)) for _ in range(512)))' > /tmp/b8
cat /tmp/l8nv.gguf > /dev/null
timeout 100 $F/fp4lane bench /tmp/l8nv.gguf --a "--device cuda --mode native --ctx 4096" \
  --b "--device cuda --mode native --ctx 4096 FP4LANE_CUDA_NO_DENSE_MMA=1" --seqs 8 --pairs 3 --prefix 512 --tokens 64 --order abba \
  --json $W/bench_head8.json > $W/bench_head8.txt 2>&1; echo "bench head8 rc=$? t=$SECONDS" >> $W/tests.txt
for rep in 1 2; do echo "== batch8 native"; timeout 30 $F/fp4lane run /tmp/l8nv.gguf --device cuda --mode native --batch-file /tmp/b8 -n 64 --ignore-eos --ctx 4096 2>&1 | grep -E "tok/s|rror" | tail -2; done > $W/runs.txt
echo "end t=$SECONDS" >> $W/tests.txt
tar czf $OUT/out.tar.gz -C $W .; cat $W/tests.txt; grep -v "memory plan" $W/bench_head8.txt; cat $W/runs.txt; grep "head.route" $W/lab_head.txt
