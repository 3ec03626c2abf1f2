#!/usr/bin/env bash
# decode, second call: the variant bits call 1 found fastest (gpuwork/decode/BEST, one decimal number: what
# DEC_DEFAULT becomes) checked and timed as the default would run them. Every test runs with
# FP4LANE_CUDA_DECODE=BEST in its environment, which is exactly the default's path once DEC_DEFAULT is BEST
# (a16_stream.cuh item_dec). Most wanted first, later steps skipped past their guard (BUDGET seconds,
# default 270, within sit.sh's 280; BUDGET=520 runs all of it): test_gpu_exact, test_gpu_native (each
# 1-column case also against every other variant's bytes); `fp4lane bench` A = FP4LANE_CUDA_DECODE=0
# (before) against B = BEST (after), exact and native, prefix 512; test_gpu_runtime (exact logits equal to
# the CPU's, engines created with the bits; quick below BUDGET 400); the per-op profile (FP4LANE_CUDA_PROFILE,
# eager) before and after; prefix 3968; `fp4lane compare` CPU exact against CUDA exact; 8 sequences.
set -u
BUDGET=${BUDGET:-270}
G=gpuwork/decode; OUT=${OUT:-device-out}; O=$OUT/decode; W=/tmp/dc_w2; mkdir -p "$O" $W
tar xJf $G/bin.tar.xz -C $G
[ -d tests/data/hf/llama ] || tar xf $G/hf_llama.tar -C tests/data/hf # test_gpu_runtime's (slim.sh)
B=$G/build-cuda; F=$B/fp4lane; BEST=$(cat $G/BEST)
chmod +x $F $B/tests/gpu/* $B/dev/cuda/* 2>/dev/null
export FP4_BUILD=$B LD_LIBRARY_PATH=$PWD/$G/lib:${LD_LIBRARY_PATH:-}
S=$O/summary.txt
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,memory.total \
    --format=csv,noheader; cat $G/BUILT.txt; echo "BEST=$BEST"; } | tee $W/env.txt > $S
M=/tmp/dc_l8; Q=/tmp/dc_l8.gguf
( timeout 200 $F synth $M --shape llama3-8b --threads 14 --seed 1 > $W/make.txt 2>&1
  echo "synth rc=$? t=$SECONDS" >> $W/make.txt
  timeout 150 $F quantize $M $Q --layout gguf-ggml >> $W/make.txt 2>&1
  echo "quantize rc=$? t=$SECONDS" >> $W/make.txt; rm -rf $M ) &
MK=$!
say() { echo "$*" | tee -a $S; }
res() { say "$1 rc=$2 t=$SECONDS $(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$3" | tail -1)"
  [ "$2" = 0 ] || grep -m 6 -E "CHECK|FAIL|differ|ERROR|rror" "$3" | tee -a $S; }
timeout 60 $B/dev/cuda/ceiling 20 > $W/ceiling.txt 2>&1; say "ceiling rc=$? $(tail -1 $W/ceiling.txt)"
bench() { # mode prefix seqs
  local A="--device cuda --mode $1 --ctx 4096" t=$W/bench_$1_$2_$3.txt
  [ $SECONDS -lt $((BUDGET - 15)) ] || { say "skip bench $1 p$2 s$3 (time)"; return; }
  timeout 60 $F bench $Q --a "$A FP4LANE_CUDA_DECODE=0" --b "$A FP4LANE_CUDA_DECODE=$BEST" --pairs 2 \
    --prefix $2 --tokens 120 --seqs $3 --order abba --json $W/bench_$1_$2_$3.json > $t 2>&1
  say "bench $1 prefix $2 seqs $3 A=0 B=$BEST rc=$? t=$SECONDS: $(grep -E '^ *decode  A' $t | sed 's/^ *//')"
  say "    $(grep -E '^ *decode  B/A' $t | sed 's/^ *//')"
}
python3 -c 'import random
r = random.Random(100); print(",".join(str(r.randrange(128000)) for _ in range(512)))' > /tmp/dc_p512
export FP4LANE_CUDA_DECODE=$BEST
for t in exact native; do
  timeout 110 $B/tests/gpu/test_gpu_$t > $W/$t.txt 2>&1; res "test_gpu_$t DECODE=$BEST" $? $W/$t.txt
done
unset FP4LANE_CUDA_DECODE
wait $MK; tail -2 $W/make.txt | tee -a $S
[ -f $Q ] && for m in exact native; do bench $m 512 1; done
if [ $SECONDS -lt $((BUDGET - 40)) ]; then
  QK=1; [ $BUDGET -ge 400 ] && QK=0
  FP4LANE_CUDA_DECODE=$BEST FP4_GPU_QUICK=$QK timeout $((BUDGET - SECONDS - 10)) \
    $B/tests/gpu/test_gpu_runtime > $W/runtime.txt 2>&1
  res "test_gpu_runtime DECODE=$BEST (quick=$QK)" $? $W/runtime.txt
fi
if [ -f $Q ]; then
  for m in exact native; do for v in 0 $BEST; do
    [ $SECONDS -lt $((BUDGET - 20)) ] || continue
    FP4LANE_CUDA_DECODE=$v FP4LANE_CUDA_PROFILE=$W/prof_${m}_$v.txt timeout 40 $F run $Q --device cuda \
      --mode $m --prompt-ids @/tmp/dc_p512 -n 33 --ignore-eos --ctx 4096 > $W/run_${m}_$v.txt 2>&1
    say "profile $m DECODE=$v rc=$? $(grep -E 'decode' $W/run_${m}_$v.txt | tail -1 | cut -c1-90)"
    head -11 $W/prof_${m}_$v.txt 2>/dev/null | tee -a $S
  done; done
  for m in exact native; do bench $m 3968 1; done
fi
for m in tests/data/hf/llama31/nvfp4 tests/data/hf/qwen3/nvfp4; do
  [ $SECONDS -lt $((BUDGET - 30)) ] || continue
  ids=$(dirname $m)/ids.txt
  FP4LANE_CUDA_DECODE=$BEST timeout 60 $F compare "$m" --a "--device cpu --mode exact" \
    --b "--device cuda --mode exact" --prompt-ids "@$ids" --max-drift 0 > $W/compare.txt 2>&1
  say "compare cpu/cuda exact DECODE=$BEST $m rc=$? $(tail -1 $W/compare.txt)"
done
[ -f $Q ] && for m in exact native; do bench $m 512 8; done
rm -f $Q
say "total ${SECONDS} s"
tar czf "$O/logs.tgz" -C $W . 2>/dev/null
