#!/usr/bin/env bash
# int8mma (issue 32 item 2) on the device, from the repository root with gpuwork/int8mma carried:
# the exact A16 route on the integer tensor cores (a16_imma.cu, FP4LANE_CUDA_IMMA=1) against the CPU
# oracle (test_gpu_exact: 2..512 columns; test_gpu_runtime and `fp4lane compare` with the switch on,
# so every exact projection of 2+ columns and the 512-column exact steps take it), compute-sanitizer
# (memcheck and racecheck on the quick exact test), then exact prefill 512 on the llama3-8b shape
# before/after (`fp4lane bench`, one process, the switch per side) beside native prefill, and the
# per-op profile of one exact prefill with the switch on; bench_imma (the projection alone, chunks of
# 16 vs imma per llama3-8b shape and width). Where the carried tree also holds build-dev (an earlier
# build of the kernel, stage.sh), its quick test_gpu_exact and bench_imma run too (A/B in one
# sitting). Logs under $OUT/int8mma/; summary on stdout.
set -u
G=gpuwork/int8mma; OUT=${OUT:-device-out}; O=$OUT/int8mma; mkdir -p "$O"
tar xJf $G/bin.tar.xz -C $G
B=$G/build-v2; F=$B/fp4lane; B1=$G/build-dev
chmod +x $F $B/tests/gpu/* $B1/fp4lane $B1/tests/gpu/* 2>/dev/null
export CUDA_MODULE_LOADING=EAGER FP4_BUILD=$B LD_LIBRARY_PATH=$PWD/$G/lib:${LD_LIBRARY_PATH:-}
S=$O/summary.txt
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv,noheader
  cat $G/BUILT.txt; cat $G/build-dev/BUILT_COMMIT 2>/dev/null; } | tee "$O/env.txt"
M=/tmp/i8_l8; Q=/tmp/i8_l8nv
( t0=$(date +%s.%N); timeout 150 $F synth $M --shape llama3-8b --threads 14 --seed 1 > $O/make.txt 2>&1
  echo "synth rc=$? $(awk -v a=$t0 -v b=$(date +%s.%N) 'BEGIN{printf "%.1f s", b-a}')" >> $O/make.txt
  t0=$(date +%s.%N); timeout 150 $F quantize $M $Q --layout modelopt >> $O/make.txt 2>&1
  echo "quantize rc=$? $(awk -v a=$t0 -v b=$(date +%s.%N) 'BEGIN{printf "%.1f s", b-a}')" >> $O/make.txt
  rm -rf $M ) &
MK=$!
res() { echo "$1 rc=$2 $(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$3" | tail -1)" | tee -a $S
  [ "$2" = 0 ] || grep -m 6 -E "CHECK|FAIL|differ|ERROR" "$3" | tee -a $S; }
timeout 100 $B/tests/gpu/test_gpu_exact > $O/exact.txt 2>&1; res test_gpu_exact $? $O/exact.txt
if [ -x $B1/fp4lane ]; then
  FP4_BUILD=$B1 FP4_GPU_QUICK=1 timeout 100 $B1/tests/gpu/test_gpu_exact > $O/exact_b1.txt 2>&1
  res "test_gpu_exact (build-dev, quick)" $? $O/exact_b1.txt
fi
FP4LANE_CUDA_IMMA=1 FP4_GPU_QUICK=1 timeout 100 $B/tests/gpu/test_gpu_runtime > $O/rt_imma.txt 2>&1
res "test_gpu_runtime IMMA=1 (quick)" $? $O/rt_imma.txt
for m in tests/data/hf/llama/nvfp4 tests/data/hf/qwen2/nvfp4; do
  ids=tests/data/hf/$(echo "$m" | cut -d/ -f4)/ids.txt
  FP4LANE_CUDA_IMMA=1 timeout 60 $F compare "$m" --a "--device cpu --mode exact" \
    --b "--device cuda --mode exact" --prompt-ids "@$ids" --max-drift 0 >> $O/compare.txt 2>&1
  echo "compare IMMA=1 $m rc=$? $(tail -1 $O/compare.txt)" | tee -a $S
done
FP4_GPU_QUICK=1 timeout 90 compute-sanitizer --error-exitcode 1 --print-limit 20 $B/tests/gpu/test_gpu_exact \
  > $O/san_mem.txt 2>&1
echo "memcheck test_gpu_exact (quick) rc=$? $(grep 'ERROR SUMMARY' $O/san_mem.txt)" | tee -a $S
FP4_GPU_QUICK=1 timeout 60 compute-sanitizer --tool racecheck --error-exitcode 1 --print-limit 10 \
  $B/tests/gpu/test_gpu_exact > $O/san_race.txt 2>&1
echo "racecheck test_gpu_exact (quick) rc=$? $(grep SUMMARY $O/san_race.txt)" | tee -a $S
for d in $B $B1; do # the projection alone: chunks of 16 vs imma per shape and width (while the model is made)
  [ -x $d/tests/gpu/bench_imma ] || continue
  timeout 90 $d/tests/gpu/bench_imma 9 > $O/proj_$(basename $d).txt 2>&1
  echo "bench_imma $(basename $d) rc=$?" | tee -a $S; cat $O/proj_$(basename $d).txt | tee -a $S
done
wait $MK; tail -2 $O/make.txt | tee -a $S
if [ -f $Q/config.json ]; then
  A="--device cuda --mode exact --ctx 4096"
  timeout 150 $F bench $Q --a "$A" --b "$A FP4LANE_CUDA_IMMA=1" --pairs 2 --prefix 512 --tokens 4 \
    > $O/bench_exact.txt 2>&1; echo "bench exact (a: chunks of 16, b: imma) rc=$?" | tee -a $S
  grep -iE "prefill|tok/s" $O/bench_exact.txt | tail -8 | tee -a $S
  N="--device cuda --mode native --ctx 4096"
  timeout 100 $F bench $Q --a "$N" --b "$N" --pairs 2 --prefix 512 --tokens 4 > $O/bench_native.txt 2>&1
  echo "bench native rc=$?" | tee -a $S; grep -iE "prefill|tok/s" $O/bench_native.txt | tail -6 | tee -a $S
  python3 -c 'print(",".join(str((p*37+11)%1000+1) for p in range(512)))' > /tmp/i8_p512
  FP4LANE_CUDA_IMMA=1 FP4LANE_CUDA_PROFILE=$O/prof_exact_imma.txt timeout 60 $F run $Q --device cuda \
    --mode exact --ctx 4096 --prompt-ids @/tmp/i8_p512 -n 2 > $O/run_imma.txt 2>&1
  echo "run exact IMMA=1 rc=$? $(grep -iE 'prefill' $O/run_imma.txt | tail -1)" | tee -a $S
  head -30 $O/prof_exact_imma.txt 2>/dev/null | tee -a $S
fi
rm -rf $Q
echo "total ${SECONDS} s" | tee -a $S
tar czf "$O/logs.tgz" -C "$O" $(cd "$O" && ls *.txt) 2>/dev/null &&
  (cd "$O" && ls | grep -vE '^(logs.tgz|summary.txt)$' | xargs rm -f)
