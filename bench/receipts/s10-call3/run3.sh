#!/usr/bin/env bash
# Session 10, device call 3. gpuwork/s10c/bin.tar.xz: f/ = main at ad7bd04 (tile-fastpath, head-mma
# with FP4LANE_CUDA_NO_DENSE_MMA and FP4_CUDA_TENSOR_INVARIANT for drafting engines, load-fast, the
# parallel type-40 check at open; not normfuse); o/ = session 9 call 6's binaries (main 49a3d0d's code).
# 1. GPU tests (dense, generate, runtime, ggml_repack, fp8, errors); 2. models; 3. load old/new
# (type-40 GGUF and ModelOpt, exact and native, 3 rounds); 4. 8 sequences: bench dense.mma vs
# NO_DENSE_MMA (3 pairs); 5. one sequence: bench exact vs native. Every output in out.tar.gz.
set -u
G=gpuwork/s10c; tar xJf $G/bin.tar.xz -C $G; F=$G/f; O=$G/o; W=/tmp/out; mkdir -p $W
export LD_LIBRARY_PATH=$PWD/gpuwork/lib:${LD_LIBRARY_PATH:-}
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; date -u; } > $W/tests.txt
( $F/fp4lane synth /tmp/s8 --shape llama3-8b --threads 12 --seed 1 > /dev/null 2>&1
  $F/fp4lane quantize /tmp/s8 /tmp/l8nv.gguf --layout gguf-ggml > /dev/null 2>&1; echo "gguf t=$SECONDS"
  $F/fp4lane quantize /tmp/s8 /tmp/l8mo --layout modelopt > /dev/null 2>&1; rm -rf /tmp/s8
  echo "model t=$SECONDS" ) > /tmp/model.txt 2>&1 &
export FP4_BUILD=$F
for t in dense generate runtime ggml_repack fp8 errors; do timeout 170 $F/tests/gpu/test_gpu_$t > /tmp/t_$t.txt 2>&1
  echo "test_gpu_$t rc=$? t=$SECONDS" >> $W/tests.txt; grep -E "passed, |FAIL|CHECK" /tmp/t_$t.txt | head -12 >> $W/tests.txt; done
wait; cat /tmp/model.txt >> $W/tests.txt
python3 -c 'import random
for s in range(8):
    r = random.Random(100 + s); print(",".join(str(r.randrange(128000)) for _ in range(512)))' > /tmp/b8
head -1 /tmp/b8 > /tmp/p512
cat /tmp/l8nv.gguf /tmp/l8mo/* > /dev/null
for rep in 1 2 3; do for f in /tmp/l8nv.gguf /tmp/l8mo; do for m in exact native; do for b in $O $F; do
  [ $SECONDS -gt 400 ] && break 4
  echo "== $b $m $f round $rep"
  timeout 60 $b/fp4lane run $f --device cuda --mode $m --prompt-ids @/tmp/p512 -n 1 --ignore-eos --ctx 4096 --timing 2>&1 | grep -E "timing|prefill|rror"
done; done; done; done > $W/load.txt 2>&1
echo "load t=$SECONDS" >> $W/tests.txt
tar czf $OUT/out.tar.gz -C $W .
timeout 90 $F/fp4lane bench /tmp/l8nv.gguf --a "--device cuda --mode native --ctx 4096" \
  --b "--device cuda --mode native --ctx 4096 FP4LANE_CUDA_NO_DENSE_MMA=1" --seqs 8 --pairs 3 --prefix 512 --tokens 64 --order abba \
  --json $W/bench_head8.json > $W/bench_head8.txt 2>&1; echo "bench head8 rc=$? t=$SECONDS" >> $W/tests.txt
tar czf $OUT/out.tar.gz -C $W .
left=$((585 - SECONDS))
[ $left -gt 30 ] && timeout $left $F/fp4lane bench /tmp/l8nv.gguf --a "--device cuda --mode exact --ctx 4096" \
  --b "--device cuda --mode native --ctx 4096" --pairs 3 --prefix 512 --tokens 64 --order abba \
  --json $W/bench_modes.json > $W/bench_modes.txt 2>&1; echo "bench modes rc=$? t=$SECONDS" >> $W/tests.txt
echo "end t=$SECONDS" >> $W/tests.txt
tar czf $OUT/out.tar.gz -C $W .
cat $W/tests.txt
