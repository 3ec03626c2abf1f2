#!/usr/bin/env bash
# Session 11, device call 3. gpuwork/s11c/bin.tar.xz: f/ = branch s11 after call 2 (att_wide's rows
# by column count and position: 2 cols clusters of 8 to 2047, 3-4 of 4 to 1023, 5-8 of 2 to 639 and
# of 4 to 1023; 16 graphs), o/ = main df92d76. 1. tests runtime, generate; 2. 8 sequences: bench
# att_wide on / FP4LANE_CUDA_ATT_CLUSTER_WIDE=0 at prefix 512 and 900; runs old/new;
# 3. one sequence at context 3968 and 512, new, both modes.
set -u
G=gpuwork/s11c; tar xJf $G/bin.tar.xz -C $G; F=$G/f; O=$G/o; W=/tmp/out; mkdir -p $W
export LD_LIBRARY_PATH=$PWD/gpuwork/lib:${LD_LIBRARY_PATH:-}
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; date -u; } > $W/tests.txt
( $F/fp4lane synth /tmp/s8 --shape llama3-8b --threads 12 --seed 1 > /dev/null 2>&1
  $F/fp4lane quantize /tmp/s8 /tmp/l8nv.gguf --layout gguf-ggml > /dev/null 2>&1; rm -rf /tmp/s8
  echo "model t=$SECONDS" ) > /tmp/model.txt 2>&1 &
export FP4_BUILD=$F
for t in runtime generate; do timeout 120 $F/tests/gpu/test_gpu_$t > /tmp/t_$t.txt 2>&1
  echo "test_gpu_$t rc=$? t=$SECONDS" >> $W/tests.txt; grep -E "passed, |FAIL|CHECK|differ" /tmp/t_$t.txt | grep -v " 0 differ" | head -8 >> $W/tests.txt; done
FP4LANE_CUDA_ATT_CLUSTER_WIDE=0 timeout 100 $F/tests/gpu/test_gpu_runtime > /tmp/t_rw.txt 2>&1; echo "WIDE=0 test_gpu_runtime rc=$? t=$SECONDS" >> $W/tests.txt; grep -E "passed, |FAIL" /tmp/t_rw.txt | head -4 >> $W/tests.txt
wait; cat /tmp/model.txt >> $W/tests.txt; cat /tmp/l8nv.gguf > /dev/null
python3 -c 'import random
for s in range(8):
    r = random.Random(100 + s); print(",".join(str(r.randrange(128000)) for _ in range(512)))' > /tmp/b8
python3 -c 'import random
r = random.Random(7); print(",".join(str(r.randrange(128000)) for _ in range(3968)))' > /tmp/p3968
head -1 /tmp/b8 > /tmp/p512
for px in 512 900; do timeout 150 $F/fp4lane bench /tmp/l8nv.gguf --a "--device cuda --mode native --ctx 4096" \
  --b "--device cuda --mode native --ctx 4096 FP4LANE_CUDA_ATT_CLUSTER_WIDE=0" --seqs 8 --pairs 3 --prefix $px --tokens 64 --order abba \
  --json $W/bench_wide8_p$px.json > $W/bench_wide8_p$px.txt 2>&1; echo "bench wide8 p$px rc=$? t=$SECONDS" >> $W/tests.txt; done
for rep in 1 2; do for b in $O $F; do echo "== $b batch8 native"
  FP4_BUILD=$b timeout 30 $b/fp4lane run /tmp/l8nv.gguf --device cuda --mode native --batch-file /tmp/b8 -n 64 --ignore-eos --ctx 4096 2>&1 | grep -E "tok/s|rror" | tail -2
done; done > $W/runs8.txt 2>&1; echo "runs8 t=$SECONDS" >> $W/tests.txt
for rep in 1 2; do for p in p512 p3968; do for m in exact native; do echo "== $p $m"
  timeout 40 $F/fp4lane run /tmp/l8nv.gguf --device cuda --mode $m --prompt-ids @/tmp/$p -n 120 --ignore-eos --ctx 4096 2>&1 | grep -E "tok/s|rror" | tail -2
done; done; done > $W/runs1.txt 2>&1; echo "runs1 t=$SECONDS" >> $W/tests.txt
echo "end t=$SECONDS" >> $W/tests.txt
tar czf $OUT/out.tar.gz -C $W .; cat $W/tests.txt; for px in 512 900; do grep -E "decode|verdict" $W/bench_wide8_p$px.txt; done; cut -c1-70 $W/runs8.txt $W/runs1.txt
