#!/usr/bin/env bash
# gpustep round 4, the checking call: every GPU test of the new tree and `fp4lane compare` (also at
# 2300 positions) while the llama3-8b model is made; then decode timings base / new per row, back
# to back on the same model files, REPS times; the read-only ceiling (gemv_lab); the eager
# profile; compute-sanitizer. Layout (carried as gpuwork/gpustep): bin.tar.xz holds new/ and
# base/ (fp4lane + libfp4lane_cuda.so; new/tests/gpu/ the GPU tests, new/gemv_lab); lib/ the
# project VM's libutf8proc, libpcre2-8, libjansson. Logs under $OUT; a short table last.
set -u
G=gpuwork/gpustep; N=$G/new; B=$G/base
tar xJf $G/bin.tar.xz -C $G
chmod +x $N/fp4lane $B/fp4lane $N/gemv_lab $N/tests/gpu/* 2>/dev/null
export CUDA_MODULE_LOADING=EAGER FP4_BUILD=$N LD_LIBRARY_PATH=$PWD/$G/lib:${LD_LIBRARY_PATH:-}
M=/tmp/rt_l8; Q=/tmp/rt_l8nv; L=$OUT/bench.txt
T0=$(date +%s)
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader; } | tee $OUT/env.txt
( t0=$(date +%s.%N); $N/fp4lane synth $M --shape llama3-8b --threads 16 --seed 1 > $OUT/make.txt 2>&1
  echo "synth rc=$? $(awk -v a=$t0 -v b=$(date +%s.%N) 'BEGIN{printf "%.1f s", b-a}')" >> $OUT/make.txt
  t0=$(date +%s.%N); $N/fp4lane quantize $M $Q --layout modelopt >> $OUT/make.txt 2>&1
  echo "quantize rc=$? $(awk -v a=$t0 -v b=$(date +%s.%N) 'BEGIN{printf "%.1f s", b-a}')" >> $OUT/make.txt
  rm -rf $M ) &
MK=$!
fail=0
for t in test_gpu_runtime test_gpu_generate test_gpu_dense_pinned test_gpu_exact test_gpu_native test_gpu_dense \
  test_gpu_w4a4 test_gpu_dequant test_gpu_errors test_gpu_fp8; do
  echo "== $t" >> $OUT/tests.txt
  timeout 120 $N/tests/gpu/$t >> $OUT/tests.txt 2>&1; rc=$?; echo "$t rc=$rc"; [ $rc = 0 ] || fail=1
done
grep -E "passed, |CHECK failed|differ in bits \(" $OUT/tests.txt | grep -v " 0 differ" | head -20
grep -E "positions, .* differ in bits" $OUT/tests.txt
grep -c " 0 differ in bits" $OUT/tests.txt | sed 's/^/bit-identical comparisons: /'
LD=/tmp/llama-long; mkdir -p $LD
ln -sf $PWD/tests/data/hf/llama/nvfp4/model.safetensors $PWD/tests/data/hf/llama/nvfp4/hf_quant_config.json $LD/
sed 's/"max_position_embeddings": 2048/"max_position_embeddings": 4096/' tests/data/hf/llama/nvfp4/config.json > $LD/config.json
python3 -c 'print(",".join(str((p*37+11)%512) for p in range(2300)))' > /tmp/long_ids
for m in tests/data/hf/llama tests/data/hf/llama/nvfp4 tests/data/hf/qwen3 tests/data/hf/qwen2/nvfp4 $LD; do
  ids=tests/data/hf/$(echo "$m" | cut -d/ -f4)/ids.txt; x=
  [ $m = $LD ] && ids=/tmp/long_ids x="--ctx 2304"
  echo "== compare $m" >> $OUT/tests.txt
  timeout 60 $N/fp4lane compare "$m" --a "--device cpu --mode exact $x" --b "--device cuda --mode exact $x" \
    --prompt-ids "@$ids" --max-drift 0 >> $OUT/tests.txt 2>&1; rc=$?; echo "compare $m rc=$rc"; [ $rc = 0 ] || fail=1
done
grep -E "^compare:" $OUT/tests.txt | tail -5
echo "tests done at +$(( $(date +%s) - T0 )) s"
wait $MK; grep rc= $OUT/make.txt
echo "model ready at +$(( $(date +%s) - T0 )) s"
[ $fail = 0 ] || { echo "TESTS FAILED: no timings"; exit 1; }
python3 -c 'import random; r=random.Random(1); print(",".join(str(r.randrange(128000)) for _ in range(3968)))' > /tmp/p3968
cut -d, -f1-512 /tmp/p3968 > /tmp/p512
one() { # label dir mode prompt
  echo "== $1 $3 $4 [$2]" >> $L
  timeout 40 $2/fp4lane run $Q --device cuda --mode $3 --prompt-ids @/tmp/p$4 -n 128 --ignore-eos \
    --ctx 4096 2>&1 | grep -E "prefill|rror|refus" >> $L
}
for r in $(seq ${REPS:-2}); do
  for cfg in "native 512" "exact 512" "native 3968" "exact 3968"; do
    set -- $cfg; one base $B $1 $2; one new $N $1 $2
  done
done
echo "bench done at +$(( $(date +%s) - T0 )) s"
timeout 40 $N/gemv_lab --vars exact.route --cols 1 > $OUT/lab.txt 2>&1; grep -E "^ceil" $OUT/lab.txt
for cfg in "native 512" "native 3968" "exact 512" "exact 3968"; do
  set -- $cfg
  FP4LANE_CUDA_PROFILE=$OUT/prof_$1_$2.txt timeout 30 $N/fp4lane run $Q --device cuda --mode $1 \
    --prompt-ids @/tmp/p$2 -n 33 --ignore-eos --ctx 4096 > /dev/null 2>&1
done
left=$(( ${BUDGET:-265} - ($(date +%s) - T0) ))
if [ $left -gt 30 ]; then
  FP4_GPU_QUICK=1 timeout $(( left - 8 )) compute-sanitizer --error-exitcode 1 --print-limit 20 \
    $N/tests/gpu/test_gpu_runtime > $OUT/sanitize.txt 2>&1; echo "sanitize test_gpu_runtime rc=$?"
  grep -E "ERROR SUMMARY|passed, " $OUT/sanitize.txt
fi
rm -rf $Q
echo "--- decode tok/s, prefill tok/s"
awk '/^== /{lab=$2" "$3" "$4} /prefill/{printf "%-18s decode %8s  prefill %8s\n", lab, $9, $4}' $L
head -1 $OUT/prof_*.txt; grep -h "attention\|rmsnorm" $OUT/prof_*.txt
echo "all done at +$(( $(date +%s) - T0 )) s"
