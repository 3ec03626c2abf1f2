#!/usr/bin/env bash
# imma2 (issue 32 item 2, session 16) on the device, from the repository root with gpuwork/imma2
# carried. Correctness first: test_gpu_attention (att_tiled.cuh's kernel against fp4p_attend bit for
# bit, a 512-column prefill step on the llama3-8b shape included), test_gpu_runtime and `fp4lane
# compare` CPU exact vs CUDA exact with FP4LANE_CUDA_ATT_TILED=1 (every exact step of 16+ columns
# takes it), test_gpu_exact with FP4LANE_CUDA_IMMA_OCC=2, =3 and FP4LANE_CUDA_IMMA_WC=2 (quick);
# then speed: bench_imma2 (the projection alone per llama3-8b shape at 128/256/512 columns: chunks,
# imma by width, WC 4, WC 2, OCC 2, OCC 3, same bytes checked), `fp4lane bench` exact prefill 512 (A: main's
# route, B: ATT_TILED=1; then two imma variants with it), native prefill, and the per-op profile
# of one exact prefill with ATT_TILED=1. Logs under $OUT/imma2/; summary on stdout.
set -u
G=gpuwork/imma2; OUT=${OUT:-device-out}; O=$OUT/imma2; mkdir -p "$O"
tar xJf $G/bin.tar.xz -C $G
# the slimmed tree lacks tests/data/hf/llama, which test_gpu_runtime reads: carried (stage.sh)
[ -f tests/data/hf/llama/config.json ] || tar xJf $G/hfllama.tar.xz -C tests/data/hf
B=$G/build-dev; F=$B/fp4lane; T=$B/tests/gpu
chmod +x $F $T/* 2>/dev/null
export CUDA_MODULE_LOADING=EAGER FP4_BUILD=$B LD_LIBRARY_PATH=$PWD/$G/lib:${LD_LIBRARY_PATH:-}
S=$O/summary.txt
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv,noheader
  cat $G/BUILT.txt; } | tee "$O/env.txt"
M=/tmp/im2_l8; Q=/tmp/im2_l8nv
( timeout 150 $F synth $M --shape llama3-8b --threads 14 --seed 1 > $O/make.txt 2>&1
  echo "synth rc=$?" >> $O/make.txt
  timeout 150 $F quantize $M $Q --layout modelopt >> $O/make.txt 2>&1
  echo "quantize rc=$? at ${SECONDS} s" >> $O/make.txt; rm -rf $M ) &
MK=$!
res() { echo "$1 rc=$2 $(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$3" | tail -1)" | tee -a $S
  [ "$2" = 0 ] || grep -m 6 -E "CHECK|FAIL|differ|ERROR" "$3" | tee -a $S; }
FP4_GPU_QUICK=1 timeout 100 $T/test_gpu_attention > $O/att.txt 2>&1
res "test_gpu_attention (quick)" $? $O/att.txt
grep -E "cluster attention cases" $O/att.txt | tee -a $S
FP4LANE_CUDA_ATT_TILED=1 FP4_GPU_QUICK=1 timeout 100 $T/test_gpu_runtime > $O/rt.txt 2>&1
res "test_gpu_runtime ATT_TILED=1 (quick)" $? $O/rt.txt
for m in tests/data/hf/llama31/nvfp4 tests/data/hf/qwen3/nvfp4; do
  ids=tests/data/hf/$(echo "$m" | cut -d/ -f4)/ids.txt
  FP4LANE_CUDA_ATT_TILED=1 timeout 60 $F compare "$m" --a "--device cpu --mode exact" \
    --b "--device cuda --mode exact" --prompt-ids "@$ids" --max-drift 0 >> $O/compare.txt 2>&1
  echo "compare ATT_TILED=1 $m rc=$? $(tail -1 $O/compare.txt)" | tee -a $S
done
FP4LANE_CUDA_IMMA_OCC=2 FP4_GPU_QUICK=1 timeout 60 $T/test_gpu_exact > $O/exact_occ2.txt 2>&1
res "test_gpu_exact IMMA_OCC=2 (quick)" $? $O/exact_occ2.txt
FP4LANE_CUDA_IMMA_OCC=3 FP4_GPU_QUICK=1 timeout 60 $T/test_gpu_exact > $O/exact_occ3.txt 2>&1
res "test_gpu_exact IMMA_OCC=3 (quick)" $? $O/exact_occ3.txt
FP4LANE_CUDA_IMMA_WC=2 FP4_GPU_QUICK=1 timeout 60 $T/test_gpu_exact > $O/exact_wc2.txt 2>&1
res "test_gpu_exact IMMA_WC=2 (quick)" $? $O/exact_wc2.txt
timeout 60 $T/bench_imma2 7 > $O/proj.txt 2>&1; echo "bench_imma2 rc=$?" | tee -a $S
cat $O/proj.txt | tee -a $S
wait $MK; tail -2 $O/make.txt | tee -a $S
if [ -f $Q/config.json ]; then
  A="--device cuda --mode exact --ctx 4096"
  bench() { timeout 75 $F bench $Q --a "$2" --b "$3" --pairs 2 --prefix 512 --tokens 4 > $O/bench_$1.txt 2>&1
    echo "bench $1 rc=$?" | tee -a $S; grep -iE "prefill" $O/bench_$1.txt | tail -3 | tee -a $S; }
  bench tiled "$A" "$A FP4LANE_CUDA_ATT_TILED=1"
  AT="$A FP4LANE_CUDA_ATT_TILED=1"
  N="--device cuda --mode native --ctx 4096"
  bench native "$N" "$N"
  [ $SECONDS -lt 150 ] && bench imma "$AT FP4LANE_CUDA_IMMA_OCC=2" "$AT FP4LANE_CUDA_IMMA_OCC=3"
  python3 -c 'print(",".join(str((p*37+11)%1000+1) for p in range(512)))' > /tmp/im2_p512
  FP4LANE_CUDA_ATT_TILED=1 FP4LANE_CUDA_PROFILE=$O/prof_tiled.txt timeout 60 $F run $Q --device cuda \
    --mode exact --ctx 4096 --prompt-ids @/tmp/im2_p512 -n 2 > $O/run_tiled.txt 2>&1
  echo "run exact ATT_TILED=1 rc=$? $(grep -iE 'prefill' $O/run_tiled.txt | tail -1)" | tee -a $S
  sed -n '/prefill/,$p' $O/prof_tiled.txt 2>/dev/null | head -14 | tee -a $S
fi
rm -rf $Q
echo "total ${SECONDS} s" | tee -a $S
tar czf "$O/logs.tgz" -C "$O" $(cd "$O" && ls *.txt) 2>/dev/null &&
  (cd "$O" && ls | grep -vE '^(logs.tgz|summary.txt)$' | xargs rm -f)
