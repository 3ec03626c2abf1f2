#!/usr/bin/env bash
# session 6, call 3: att_cluster v2 (den in the PV loop, K before q, 2 trips of K ahead, ring of 8,
# blocks-per-SM control, <= 4 columns). Lab at 1/2/4/8 columns, attention + runtime tests,
# decode base (8ed7fd3) / new / new with FP4LANE_CUDA_ATT_CLUSTER_BPS=0.
set -u
G=gpuwork/s6c; tar xJf $G/bin.tar.xz -C $G; mkdir -p $G/b; tar xJf gpuwork/s6b/bin.tar.xz -C $G/b
export LD_LIBRARY_PATH=$PWD/gpuwork/s5/lib:${LD_LIBRARY_PATH:-}
B=$G/b/f; F=$G/f; O=$OUT/o; mkdir -p $O
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; } > $O/env.txt 2>&1
( $F/fp4lane synth /tmp/rt_l8 --shape llama3-8b --threads 10 --seed 1 > $O/synth.txt 2>&1
  $F/fp4lane quantize /tmp/rt_l8 /tmp/rt_l8nv --layout modelopt >> $O/synth.txt 2>&1; rm -rf /tmp/rt_l8; echo "model t=$SECONDS" ) &
SYN=$!
timeout 60 $F/attn_lab 200 > $O/attn_lab.txt 2>&1; echo "attn_lab rc=$? t=$SECONDS"; grep -E "stages \(step\)|cluster|FAIL|identical" $O/attn_lab.txt
timeout 200 $F/tests/gpu/test_gpu_attention > $O/attention.txt 2>&1; echo "attention rc=$? t=$SECONDS"
grep -E "passed, |CHECK|cluster attention cases" $O/attention.txt | head -8
export FP4_BUILD=$F
timeout 200 $F/tests/gpu/test_gpu_runtime > $O/runtime.txt 2>&1; echo "runtime rc=$? t=$SECONDS"
grep -h "passed, \|CHECK failed" $O/runtime.txt | head -5
wait $SYN
python3 -c 'import random; r=random.Random(1); print(",".join(str(r.randrange(128000)) for _ in range(3968)))' > /tmp/p3968
cut -d, -f1-512 /tmp/p3968 > /tmp/p512
run() { local tag=$1 d=$2; shift 2; echo "== $tag $*"
  timeout 40 $d/fp4lane run /tmp/rt_l8nv --device cuda "$@" --ignore-eos --ctx 4096 2>&1 | grep -E "prefill|rror" | sed 's/, threads.*//'; }
for rep in 1 2; do for mode in exact native; do for p in 512 3968; do
  run "base $mode p$p r$rep" $B --mode $mode --prompt-ids @/tmp/p$p -n 128
  run "new $mode p$p r$rep" $F --mode $mode --prompt-ids @/tmp/p$p -n 128
  FP4LANE_CUDA_ATT_CLUSTER_BPS=0 run "new bps0 $mode p$p r$rep" $F --mode $mode --prompt-ids @/tmp/p$p -n 128
done; done; done 2>&1 | tee $O/decode.txt
echo "end t=$SECONDS"
rm -rf /tmp/rt_l8nv; (cd $OUT && tar cJf s6c.tar.xz o && rm -rf o)
