#!/usr/bin/env bash
# imma2 (issue 32 item 2, session 16) on the device, from the repository root with gpuwork/imma2
# carried; about 170 s. Correctness first: test_gpu_attention (att_tiled.cuh's kernel against
# fp4p_attend bit for bit, a 512-column prefill step on the llama3-8b shape included), `fp4lane
# compare` CPU exact vs CUDA exact with FP4LANE_CUDA_ATT_TILED=1 (every exact step of 16+ columns
# takes it), test_gpu_exact with FP4LANE_CUDA_IMMA_OCC=3 (quick); then speed: bench_imma2 (the
# projection alone per llama3-8b shape at 128/256/512 columns: chunks, imma by width, WC 4, WC 2,
# OCC 2, OCC 3, same bytes checked), `fp4lane bench` exact prefill 512 (A: main's route, B:
# ATT_TILED=1), native prefill, the per-op profile of one exact prefill with ATT_TILED=1, and
# test_gpu_runtime with it where time is left. Logs under $OUT/imma2/; summary on stdout.
set -u
G=gpuwork/imma2; OUT=${OUT:-device-out}; O=$OUT/imma2; mkdir -p "$O"
[ -f $G/bin.tar.xz ] && tar xJf $G/bin.tar.xz -C $G # else laid out by dev/gpu/s17/prep.sh
# the slimmed tree lacks tests/data/hf/llama, which test_gpu_runtime reads: carried (stage.sh)
[ -f tests/data/hf/llama/config.json ] || tar xJf $G/hfllama.tar.xz -C tests/data/hf
B=$G/build-dev; F=$B/fp4lane; T=$B/tests/gpu
chmod +x $F $T/* 2>/dev/null
export CUDA_MODULE_LOADING=EAGER FP4_BUILD=$B LD_LIBRARY_PATH=$PWD/$G/lib:${LD_LIBRARY_PATH:-}
S=$O/summary.txt
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv,noheader
  cat $G/BUILT.txt; } | tee "$O/env.txt"
Q=/tmp/im2_l8nv # NVFP4 straight from synth (no bf16 pass: the call is short)
( timeout 150 $F synth $Q --shape llama3-8b --threads 14 --seed 1 --to nvfp4 > $O/make.txt 2>&1
  echo "synth --to nvfp4 rc=$? at ${SECONDS} s" >> $O/make.txt ) &
MK=$!
res() { echo "$1 rc=$2 $(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$3" | tail -1)" | tee -a $S
  [ "$2" = 0 ] || grep -m 6 -E "CHECK|FAIL|differ|ERROR" "$3" | tee -a $S; }
FP4_GPU_QUICK=1 timeout 70 $T/test_gpu_attention > $O/att.txt 2>&1
res "test_gpu_attention (quick)" $? $O/att.txt
grep -E "cluster attention cases" $O/att.txt | tee -a $S
for m in tests/data/hf/llama31/nvfp4 tests/data/hf/qwen3/nvfp4; do
  ids=tests/data/hf/$(echo "$m" | cut -d/ -f4)/ids.txt
  FP4LANE_CUDA_ATT_TILED=1 timeout 40 $F compare "$m" --a "--device cpu --mode exact" \
    --b "--device cuda --mode exact" --prompt-ids "@$ids" --max-drift 0 >> $O/compare.txt 2>&1
  echo "compare ATT_TILED=1 $m rc=$? $(tail -1 $O/compare.txt)" | tee -a $S
done
FP4LANE_CUDA_IMMA_OCC=3 FP4_GPU_QUICK=1 timeout 40 $T/test_gpu_exact > $O/exact_occ3.txt 2>&1
res "test_gpu_exact IMMA_OCC=3 (quick)" $? $O/exact_occ3.txt
timeout 45 $T/bench_imma2 5 > $O/proj.txt 2>&1; echo "bench_imma2 rc=$?" | tee -a $S
cat $O/proj.txt | tee -a $S
wait $MK; tail -1 $O/make.txt | tee -a $S
if [ -f $Q/config.json ]; then
  A="--device cuda --mode exact --ctx 4096"
  bench() { timeout 60 $F bench $Q --a "$2" --b "$3" --pairs 2 --prefix 512 --tokens 4 > $O/bench_$1.txt 2>&1
    echo "bench $1 rc=$?" | tee -a $S; grep -iE "prefill" $O/bench_$1.txt | tail -3 | tee -a $S; }
  bench tiled "$A" "$A FP4LANE_CUDA_ATT_TILED=1"
  N="--device cuda --mode native --ctx 4096"
  bench native "$N" "$N"
  python3 -c 'print(",".join(str((p*37+11)%1000+1) for p in range(512)))' > /tmp/im2_p512
  P=$O/prof_tiled.txt
  [ $SECONDS -lt 150 ] && FP4LANE_CUDA_ATT_TILED=1 FP4LANE_CUDA_PROFILE=$P timeout 30 $F run $Q \
    --device cuda --mode exact --ctx 4096 --prompt-ids @/tmp/im2_p512 -n 2 > $O/run_tiled.txt 2>&1 &&
    sed -n '/prefill/,$p' $O/prof_tiled.txt 2>/dev/null | head -12 | tee -a $S
fi
if [ $SECONDS -lt 140 ]; then
  FP4LANE_CUDA_ATT_TILED=1 FP4_GPU_QUICK=1 timeout 40 $T/test_gpu_runtime > $O/rt.txt 2>&1
  res "test_gpu_runtime ATT_TILED=1 (quick)" $? $O/rt.txt
fi
rm -rf $Q
echo "total ${SECONDS} s" | tee -a $S
tar czf "$O/logs.tgz" -C "$O" $(cd "$O" && ls *.txt) 2>/dev/null &&
  (cd "$O" && ls | grep -vE '^(logs.tgz|summary.txt)$' | xargs rm -f)
