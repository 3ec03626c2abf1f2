#!/usr/bin/env bash
# decode (issue 32 item 1) on the device, from the repository root with gpuwork/decode carried. Most
# wanted first, each step under `timeout`, every later step skipped past its guard (BUDGET seconds,
# default 165: the lead's short call; BUDGET=520 runs all of it in under 9 minutes):
#   1. the read ceiling of this sitting (ceiling: a plain 16-byte streaming read of 2 GiB);
#   2. the variants' bits: test_gpu_exact and test_gpu_native (every 1-column case runs each DECODE bit, all
#      of them and none against the default's bytes; exact's default against the CPU oracle);
#   3. fp4lane bench on the llama3-8b shape (synth --seed 1, quantize --layout gguf-ggml, made in the
#      background meanwhile): A = default, B = FP4LANE_CUDA_DECODE=63 (every variant), one process a pair
#      of sides, greedy decode, prefix 512, exact and native;
#   4. test_gpu_runtime (quick) with DECODE=63 (engines created with every variant: exact logits = the
#      CPU's); then each bit alone, all bits at prefix 3968, ncu per-kernel durations and DRAM bytes of one
#      graph step (ncu_step.py), the labs (LABS=1 stages only).
# Logs under $OUT/decode/ (summary.txt written as it goes, logs.tgz at the end); the summary on stdout.
set -u
BUDGET=${BUDGET:-165}
G=gpuwork/decode; OUT=${OUT:-device-out}; O=$OUT/decode; W=/tmp/dc_w; mkdir -p "$O" $W
[ -f $G/bin.tar.xz ] && tar xJf $G/bin.tar.xz -C $G # else laid out by dev/gpu/s17/prep.sh
[ -d tests/data/hf/llama ] || tar xf $G/hf_llama.tar -C tests/data/hf # test_gpu_runtime's (slim.sh)
B=$G/build-cuda; F=$B/fp4lane
chmod +x $F $B/tests/gpu/* $B/dev/cuda/* 2>/dev/null
export FP4_BUILD=$B LD_LIBRARY_PATH=$PWD/$G/lib:${LD_LIBRARY_PATH:-}
# cuBLAS for gemv_lab's cuBLAS rows and the native GEMM route: the device's own, or torch's wheel
CB=$(python3 -c 'import nvidia.cublas as c, os; print(os.path.join(list(c.__path__)[0], "lib"))' 2>/dev/null)
[ -n "$CB" ] && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$CB
S=$O/summary.txt
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,memory.total \
    --format=csv,noheader; cat $G/BUILT.txt; } | tee $W/env.txt > $S
M=/tmp/dc_l8; Q=/tmp/dc_l8.gguf
( timeout 200 $F synth $M --shape llama3-8b --threads 14 --seed 1 > $W/make.txt 2>&1
  echo "synth rc=$? t=$SECONDS" >> $W/make.txt
  timeout 150 $F quantize $M $Q --layout gguf-ggml >> $W/make.txt 2>&1
  echo "quantize rc=$? t=$SECONDS" >> $W/make.txt; rm -rf $M ) &
MK=$!
say() { echo "$*" | tee -a $S; }
res() { say "$1 rc=$2 t=$SECONDS $(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$3" | tail -1)"
  [ "$2" = 0 ] || grep -m 6 -E "CHECK|FAIL|differ|ERROR|rror" "$3" | tee -a $S; }
timeout 30 $B/dev/cuda/ceiling 5 > $W/ceiling.txt 2>&1; say "ceiling rc=$? $(tail -1 $W/ceiling.txt)"
for v in 0 4; do
  [ -x $B/dev/cuda/gemv_lab ] || break
  FP4LANE_CUDA_DECODE=$v timeout 90 $B/dev/cuda/gemv_lab --decode --cols 1 --vars exact.route,native.route \
    > $W/lab_$v.txt 2>&1; say "gemv_lab DECODE=$v rc=$?"
  grep -E "ceilings|^ *[0-9]+x[0-9]+|route" $W/lab_$v.txt | head -14 | tee -a $S
done
timeout 60 $B/tests/gpu/test_gpu_exact > $W/exact.txt 2>&1; res test_gpu_exact $? $W/exact.txt
timeout 50 $B/tests/gpu/test_gpu_native > $W/native.txt 2>&1; res test_gpu_native $? $W/native.txt
while kill -0 $MK 2>/dev/null && [ $SECONDS -lt $((BUDGET - 25)) ]; do sleep 1; done
tail -2 $W/make.txt | tee -a $S
grep -q "quantize rc=0" $W/make.txt || Q=/nonexistent # no model in time: no bench
bench() { # mode prefix seqs variant
  local A="--device cuda --mode $1 --ctx 4096" t=$W/bench_$1_$2_$3_$4.txt
  [ $SECONDS -lt $((BUDGET - 15)) ] || { say "skip bench $1 p$2 s$3 v$4 (time)"; return; }
  timeout $((BUDGET - SECONDS > 60 ? 60 : BUDGET - SECONDS)) $F bench $Q --a "$A" \
    --b "$A FP4LANE_CUDA_DECODE=$4" --pairs 2 --prefix $2 --tokens 120 \
    --seqs $3 --order abba > $t 2>&1
  say "bench $1 prefix $2 seqs $3 B=DECODE=$4 rc=$? t=$SECONDS: $(grep -E '^ *decode  A' $t | sed 's/^ *//')"
  say "    $(grep -E '^ *decode  B/A' $t | sed 's/^ *//')"
}
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
python3 -c 'import random
r = random.Random(100); print(",".join(str(r.randrange(128000)) for _ in range(512)))' > /tmp/dc_p512
NR=launch__registers_per_thread,launch__shared_mem_per_block_dynamic
prof() { # mode variant: ncu's isolated per-kernel durations and DRAM bytes of the last (graph) step
  [ -n "$NCU" ] && [ $SECONDS -lt $((BUDGET - 75)) ] || { say "skip ncu $1 DECODE=$2"; return; }
  FP4LANE_CUDA_DECODE=$2 timeout 75 $NCU --clock-control none --cache-control none \
    --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size,dram__bytes_read.sum,$NR --csv \
    --print-units base $F run $Q --device cuda --mode $1 --prompt-ids @/tmp/dc_p512 -n 3 --ignore-eos \
    --ctx 4096 > $W/ncu_$1_$2.csv 2> $W/ncu_$1_$2.err
  say "ncu $1 DECODE=$2 rc=$? t=$SECONDS"
  python3 dev/cuda/ncu_step.py $W/ncu_$1_$2.csv > $W/ncu_step_$1_$2.txt 2>&1
  head -24 $W/ncu_step_$1_$2.txt | tee -a $S
}
if [ -f $Q ]; then # most wanted first: every variant at once against none, both modes
  bench exact 512 1 63; bench native 512 1 63
fi
if [ $SECONDS -lt $((BUDGET - 35)) ]; then
  FP4LANE_CUDA_DECODE=63 FP4_GPU_QUICK=1 timeout $((BUDGET - SECONDS - 5)) $B/tests/gpu/test_gpu_runtime \
    > $W/rt63.txt 2>&1
  res "test_gpu_runtime DECODE=63 (quick)" $? $W/rt63.txt
fi
if [ -f $Q ]; then
  for v in 4 1 2 8 16 33; do bench native 512 1 $v; done
  for v in 4 1 8 16 33; do bench exact 512 1 $v; done
  for m in exact native; do bench $m 3968 1 63; done
  prof exact 0; prof exact 63
fi
if [ $SECONDS -lt $((BUDGET - 45)) ] && [ -x $B/dev/cuda/attn_lab ]; then
  timeout 45 $B/dev/cuda/attn_lab 200 > $W/attn_lab.txt 2>&1; say "attn_lab 200 rc=$? t=$SECONDS"
  grep -E "check pass|identical|FAIL|^ *1 +[0-9]" $W/attn_lab.txt | head -20 | tee -a $S
fi
if kill -0 $MK 2>/dev/null; then pkill -P $MK; kill $MK; fi # a model still being made: stopped
rm -f /tmp/dc_l8.gguf; rm -rf /tmp/dc_l8
say "total ${SECONDS} s"
tar czf "$O/logs.tgz" -C $W . 2>/dev/null
