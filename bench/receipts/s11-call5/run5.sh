#!/usr/bin/env bash
# Session 11, device call 5. gpuwork/s11e/bin.tar.xz: f/ = main at 98fbfd3, o/ = main df92d76.
# 2 and 4 sequences (where down's K parts cost at 2 columns and the wide attention serves 2-4
# columns): run --batch-file old/new alternating; bench --seqs 2 and 4, att_wide on / off.
set -u
G=gpuwork/s11e; tar xJf $G/bin.tar.xz -C $G; F=$G/f; O=$G/o; W=/tmp/out; mkdir -p $W
export LD_LIBRARY_PATH=$PWD/gpuwork/lib:${LD_LIBRARY_PATH:-}
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $W/tests.txt
$F/fp4lane synth /tmp/s8 --shape llama3-8b --threads 12 --seed 1 > /dev/null 2>&1
$F/fp4lane quantize /tmp/s8 /tmp/l8nv.gguf --layout gguf-ggml > /dev/null 2>&1; rm -rf /tmp/s8; echo "model t=$SECONDS" >> $W/tests.txt
python3 -c 'import random
for s in range(8):
    r = random.Random(100 + s); print(",".join(str(r.randrange(128000)) for _ in range(512)))' > /tmp/b8
head -2 /tmp/b8 > /tmp/b2; head -4 /tmp/b8 > /tmp/b4
for rep in 1 2 3; do for n in 2 4; do for b in $O $F; do echo "== $b batch$n native"
  FP4_BUILD=$b timeout 30 $b/fp4lane run /tmp/l8nv.gguf --device cuda --mode native --batch-file /tmp/b$n -n 64 --ignore-eos --ctx 4096 2>&1 | grep -E "tok/s|rror" | tail -2
done; done; done > $W/runs.txt 2>&1; echo "runs t=$SECONDS" >> $W/tests.txt
export FP4_BUILD=$F
for n in 2 4; do timeout 120 $F/fp4lane bench /tmp/l8nv.gguf --a "--device cuda --mode native --ctx 4096" \
  --b "--device cuda --mode native --ctx 4096 FP4LANE_CUDA_ATT_CLUSTER_WIDE=0" --seqs $n --pairs 3 --prefix 512 --tokens 64 --order abba \
  --json $W/bench_wide$n.json > $W/bench_wide$n.txt 2>&1; echo "bench wide$n rc=$? t=$SECONDS" >> $W/tests.txt; done
tar czf $OUT/out.tar.gz -C $W .; cat $W/tests.txt; for n in 2 4; do grep -E "decode|verdict" $W/bench_wide$n.txt; done; cut -c1-70 $W/runs.txt
