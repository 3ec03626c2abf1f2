#!/usr/bin/env bash
# issue 31 (DeepSeek-V3 on CUDA) on the device, from the repository root with gpuwork/mla carried:
# test_gpu_deepseek (CPU exact = CUDA exact bit for bit on tiny-deepseek and tiny-deepseek-nolora,
# bf16 and NVFP4: chunks 1/5/64, a batch of 3, snapshots both ways, greedy; native within tolerance);
# `fp4lane compare` exact cpu vs cuda --max-drift 0; test_gpu_moe and test_gpu_runtime (quick: the
# step's MLP and MoE code moved); compute-sanitizer on the quick test; test_gpu_gemma (quick), in
# that order of priority, each under timeout, none started past 150 s (the call fits 170 s). The
# speed cells are a call of their own (run_bench.sh). Logs under $OUT/mla/, a summary on stdout.
set -u
OUT=${OUT:-device-out}; O=$OUT/mla; mkdir -p "$O"
X=/tmp/mla # dev/gpu/s17/prep.sh lays it out where no tar is carried
if [ -f gpuwork/mla/bin.tar.xz ]; then rm -rf $X; mkdir -p $X; tar xJf gpuwork/mla/bin.tar.xz -C $X; fi
export LD_LIBRARY_PATH=$X/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export FP4_BUILD=$X/build-cuda FP4_GPU_REQUIRE=1 # the library is inside FP4_BUILD: never a skip
B=$X/build-cuda
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; cat $X/BUILT.txt; } \
  > "$O/env.txt"
res() {
  echo "$1 rc=$2 $(grep -E '^[0-9]+ passed, [0-9]+ failed' "$3" | tail -1)"
  [ "$2" -ne 0 ] && grep -m 8 -E "FAIL|differ in|>|rror" "$3"
}
T0=$(date +%s)
LB=$(command -v stdbuf > /dev/null && echo "stdbuf -oL") # a killed test's lines still reach the log
left() { [ $(( $(date +%s) - T0 )) -lt 150 ] || { echo "skipped (150 s): $1"; return 1; }; }
timeout 80 $LB $B/tests/gpu/test_gpu_deepseek > "$O/deepseek.txt" 2>&1
res test_gpu_deepseek $? "$O/deepseek.txt"
grep -E "native|greedy|snapshot" "$O/deepseek.txt" | head -12
IDS=$(seq 0 63 | awk '{printf "%s%d", (NR>1 ? "," : ""), ($1*131+17)%512}')
for to in bf16 nvfp4; do
  left "compare $to" || continue
  rm -rf /tmp/td-$to
  timeout 15 $B/fp4lane synth /tmp/td-$to --shape tiny-deepseek --to $to --seed 3 > /dev/null 2>&1
  FP4LANE_CUDA_UNPROVEN=1 timeout 20 $B/fp4lane compare /tmp/td-$to --a "--mode exact" \
    --b "--mode exact --device cuda" --prompt-ids $IDS --max-drift 0 > "$O/cmp_$to.txt" 2>&1
  echo "compare tiny-deepseek $to exact cpu vs cuda rc=$? $(tail -1 "$O/cmp_$to.txt")"
done
if left test_gpu_moe; then
  timeout 30 $B/tests/gpu/test_gpu_moe > "$O/moe.txt" 2>&1; res test_gpu_moe $? "$O/moe.txt"
fi
if left test_gpu_runtime; then
  FP4_GPU_QUICK=1 timeout 40 $B/tests/gpu/test_gpu_runtime > "$O/runtime.txt" 2>&1
  res "test_gpu_runtime (quick)" $? "$O/runtime.txt"
fi
if left sanitize; then
  FP4_GPU_QUICK=1 timeout $(( 165 - ($(date +%s) - T0) )) compute-sanitizer --error-exitcode 1 \
    --print-limit 20 $B/tests/gpu/test_gpu_deepseek > "$O/sanitize_deepseek.txt" 2>&1
  echo "sanitize test_gpu_deepseek (quick) rc=$? $(grep 'ERROR SUMMARY' "$O/sanitize_deepseek.txt")"
fi
if left test_gpu_gemma; then
  FP4_GPU_QUICK=1 timeout $(( 168 - ($(date +%s) - T0) )) $B/tests/gpu/test_gpu_gemma > "$O/gemma.txt" 2>&1
  res "test_gpu_gemma (quick)" $? "$O/gemma.txt"
fi
echo "done in $(( $(date +%s) - T0 )) s"
