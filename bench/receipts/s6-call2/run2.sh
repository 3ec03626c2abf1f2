#!/usr/bin/env bash
# session 6, call 2: the one-launch cluster attention (att_cluster.cuh) + the norm's w prefetch.
# Tests (attention full, runtime, generate), attention lab, paired decode base (11c897f) / new,
# ncu of the new native decode step.
set -u
G=gpuwork/s6b; tar xJf $G/bin.tar.xz -C $G; tar xJf gpuwork/s6a/bin.tar.xz -C $G m
export LD_LIBRARY_PATH=$PWD/gpuwork/s5/lib:${LD_LIBRARY_PATH:-}
B=$G/m; F=$G/f; O=$OUT/o; mkdir -p $O
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; } > $O/env.txt 2>&1
( $F/fp4lane synth /tmp/rt_l8 --shape llama3-8b --threads 10 --seed 1 > $O/synth.txt 2>&1
  $F/fp4lane quantize /tmp/rt_l8 /tmp/rt_l8nv --layout modelopt >> $O/synth.txt 2>&1; rm -rf /tmp/rt_l8; echo "model t=$SECONDS" ) &
SYN=$!
timeout 200 $F/tests/gpu/test_gpu_attention > $O/attention.txt 2>&1; echo "attention rc=$? t=$SECONDS"
grep -E "passed, |CHECK|cluster attention cases" $O/attention.txt | head -8
timeout 40 $F/attn_lab 200 > $O/attn_lab.txt 2>&1; echo "attn_lab rc=$? t=$SECONDS"; grep -E "stages \(step\)|cluster|FAIL|identical" $O/attn_lab.txt
export FP4_BUILD=$F
timeout 200 $F/tests/gpu/test_gpu_runtime > $O/runtime.txt 2>&1; echo "runtime rc=$? t=$SECONDS"
timeout 120 $F/tests/gpu/test_gpu_generate > $O/generate.txt 2>&1; echo "generate rc=$? t=$SECONDS"
grep -h "passed, \|CHECK failed" $O/runtime.txt $O/generate.txt | head -8
wait $SYN
python3 -c 'import random; r=random.Random(1); print(",".join(str(r.randrange(128000)) for _ in range(3968)))' > /tmp/p3968
cut -d, -f1-512 /tmp/p3968 > /tmp/p512
python3 -c 'import random
for s in range(8):
    r = random.Random(100 + s); print(",".join(str(r.randrange(128000)) for _ in range(512)))' > /tmp/b8
run() { local tag=$1 d=$2; shift 2; echo "== $tag $*"
  timeout 40 $d/fp4lane run /tmp/rt_l8nv --device cuda "$@" --ignore-eos --ctx 4096 2>&1 | grep -E "prefill|rror" | sed 's/, threads.*//'; }
for rep in 1 2; do for mode in native exact; do for p in 512 3968; do
  run "base $mode p$p r$rep" $B --mode $mode --prompt-ids @/tmp/p$p -n 128
  run "new $mode p$p r$rep" $F --mode $mode --prompt-ids @/tmp/p$p -n 128
done; done; done 2>&1 | tee $O/decode.txt
for p in 512 3968; do FP4LANE_CUDA_ATT_CLUSTER=8 run "new cl8 native p$p" $F --mode native --prompt-ids @/tmp/p$p -n 128; done 2>&1 | tee -a $O/decode.txt
for mode in native exact; do
  run "base $mode seq8" $B --mode $mode --batch-file /tmp/b8 -n 128; run "new $mode seq8" $F --mode $mode --batch-file /tmp/b8 -n 128
done 2>&1 | tee -a $O/decode.txt
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
timeout 150 $NCU --clock-control none --cache-control none --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size --csv --print-units base $F/fp4lane run /tmp/rt_l8nv --device cuda --mode native --prompt-ids @/tmp/p512 -n 3 --ignore-eos --ctx 4096 > $O/ncu_native512.csv 2> $O/ncu.err; echo "ncu rc=$? t=$SECONDS"
echo "end t=$SECONDS"
rm -rf /tmp/rt_l8nv; (cd $OUT && tar cJf s6b.tar.xz o && rm -rf o)
