#!/usr/bin/env bash
# attn call 1: the new attention (tests, compare, sanitizer) while the 16 GB model is made, then
# the attention lab, the before/after decode timings (bench/runtime_cuda.sh's runs) and the
# native per-op profile, d07eabb's build (session 4's) as the base
set -u
G=gpuwork/attn; mkdir -p $G/base
tar xJf $G/bin.tar.xz -C $G; tar xJf $G/base.tar.xz -C $G/base
export LD_LIBRARY_PATH=$PWD/$G/lib:${LD_LIBRARY_PATH:-}
B=$G/bin; BASE=$G/base/bin; export FP4_BUILD=$B CUDA_MODULE_LOADING=EAGER
R=$OUT/rt; mkdir -p $R; T=$OUT/timeline.txt; L=$R/bench.txt
mark() { echo "$1 t=$SECONDS" | tee -a $T; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $OUT/env.txt 2>&1
( "$B/fp4lane" synth /tmp/rt_l8 --shape llama3-8b --threads 12 --seed 1 > $OUT/synth.txt 2>&1
  "$B/fp4lane" quantize /tmp/rt_l8 /tmp/rt_l8nv --layout modelopt >> $OUT/synth.txt 2>&1
  echo "synth+quantize rc=$? t=$SECONDS" >> $T; rm -rf /tmp/rt_l8 ) &
SYN=$!
( FP4_GPU_QUICK=1 timeout 50 compute-sanitizer --error-exitcode 1 --print-limit 20 $B/tests/gpu/test_gpu_attention \
    > $OUT/sanitize_attention.txt 2>&1; echo "sanitize attention rc=$? t=$SECONDS" >> $T
  FP4_GPU_QUICK=1 timeout 80 compute-sanitizer --error-exitcode 1 --print-limit 20 $B/tests/gpu/test_gpu_runtime \
    > $OUT/sanitize_runtime.txt 2>&1; echo "sanitize runtime rc=$? t=$SECONDS" >> $T ) &
SAN=$!
( timeout 80 $B/tests/gpu/test_gpu_runtime > $OUT/test_runtime.txt 2>&1; echo "test_gpu_runtime rc=$? t=$SECONDS" >> $T
  OUT=$R timeout 45 bash bench/runtime_cuda.sh $B compare > $OUT/compare.txt 2>&1
  echo "compare rc=$? t=$SECONDS" >> $T ) &
RT=$!
timeout 60 $B/tests/gpu/test_gpu_attention > $OUT/test_attention.txt 2>&1; mark "test_gpu_attention rc=$?"
tail -1 $OUT/test_attention.txt; grep -c " 0 differ\| 0 mismatch" $OUT/test_attention.txt
wait $RT; grep -E "passed, |CHECK failed|2300" $OUT/test_runtime.txt | head; grep "^compare" $OUT/compare.txt
wait $SAN; grep -E "ERROR SUMMARY|passed, " $OUT/sanitize_*.txt
wait $SYN; mark "model ready"
timeout 40 $B/attn_lab 200 > $OUT/attn_lab.txt 2>&1; mark "attn_lab rc=$?"; cat $OUT/attn_lab.txt
python3 -c 'import random; r=random.Random(1); print(",".join(str(r.randrange(128000)) for _ in range(3968)))' \
  > /tmp/p3968; cut -d, -f1-512 /tmp/p3968 > /tmp/p512
for mode in native exact; do for p in 512 3968; do for d in $BASE $B; do
  echo "== run nvfp4 $mode --prompt-ids @/tmp/p$p -n 128 --ctx 4096 [$d]" >> $L
  timeout 20 $d/fp4lane run /tmp/rt_l8nv --device cuda --mode $mode --prompt-ids @/tmp/p$p -n 128 --ctx 4096 \
    --ignore-eos 2>&1 | grep -E "memory plan|prefill|rror|refus|Killed" >> $L
done; done; done
mark "bench"; grep -E "^==|prefill" $L | sed 's/, first token.*//' | cut -c1-110
for p in 512 3968; do for d in $BASE $B; do
  tag=native_$p; [ $d = $BASE ] && tag=${tag}_base
  FP4LANE_CUDA_PROFILE=$R/prof_$tag.txt timeout 20 $d/fp4lane run /tmp/rt_l8nv --device cuda --mode native \
    --prompt-ids @/tmp/p$p -n 33 --ignore-eos --ctx 4096 > /dev/null 2>&1
done; done
mark "profile"; grep -H "attention\|per step" $R/prof_*.txt
rm -rf /tmp/rt_l8 /tmp/rt_l8nv
