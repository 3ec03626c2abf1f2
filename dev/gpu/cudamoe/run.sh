#!/usr/bin/env bash
# Issue 28 on the device: the CUDA MoE step. test_gpu_moe (the experts' projection against the CPU
# oracle), test_gpu_runtime's MoE cases (exact CPU == CUDA in bits: chunks, batch, KV snapshot;
# native within tolerance), the CLI's exact compare on NVFP4 MoE synth models, compute-sanitizer on
# the kernel test, the runtime test unchanged (its other cases), and a first speed probe. Logs under
# $OUT/cudamoe/, a summary on stdout. FP4LANE_CUDA_UNPROVEN=1: the route is refused until proven.
#   bash dev/gpu/cudamoe/run.sh      (from the repository root, gpuwork/cudamoe carried)
set -u
OUT=${OUT:-device-out}; L=$OUT/cudamoe; mkdir -p "$L"
W=$(mktemp -d); tar xJf gpuwork/cudamoe/bin.tar.xz -C "$W"
export LD_LIBRARY_PATH=$W/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export FP4_BUILD=$W/build-cuda
B=$W/build-cuda; T=$(mktemp -d)
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; cat $W/BUILT.txt; } > "$L/env.txt"
head -3 "$L/env.txt"
S="$L/summary.txt"; : > "$S"
say() { echo "$*" | tee -a "$S"; }
res() { grep -E '^[0-9]+ passed, [0-9]+ failed$' "$1" | tail -1; }
timeout 60 $B/tests/gpu/test_gpu_moe > "$L/test_gpu_moe.txt" 2>&1
say "test_gpu_moe rc=$? $(res $L/test_gpu_moe.txt)"; grep -m 6 -E "FAIL|differ|want" "$L/test_gpu_moe.txt"
FP4_GPU_MOE_ONLY=1 timeout 100 $B/tests/gpu/test_gpu_runtime > "$L/rt_moe.txt" 2>&1
say "test_gpu_runtime MoE cases rc=$? $(res $L/rt_moe.txt)"; grep -E "FAIL|moe|mixtral" "$L/rt_moe.txt" | head -40
export FP4LANE_CUDA_UNPROVEN=1
for a in qwen3-moe:tiny-moe16 mixtral:tiny-moe qwen3-moe:small-moe; do
  timeout 60 $B/fp4lane synth --shape ${a#*:} --arch ${a%%:*} --to nvfp4 $T/${a#*:}-${a%%:*} > /dev/null 2>&1
  timeout 60 $B/fp4lane compare $T/${a#*:}-${a%%:*} --a "--mode exact" --b "--mode exact --device cuda" \
    --prompt-ids 1,5,9,200,33,7,81,4,17,99,3,250 --max-drift 0 > "$L/cmp.txt" 2>&1
  say "compare $a nvfp4 exact cpu vs cuda rc=$? $(tail -1 "$L/cmp.txt")"
done
FP4_GPU_QUICK=1 timeout 90 compute-sanitizer --error-exitcode 1 --print-limit 20 $B/tests/gpu/test_gpu_moe \
  > "$L/sanitize_moe.txt" 2>&1
say "sanitize test_gpu_moe rc=$? $(grep 'ERROR SUMMARY' "$L/sanitize_moe.txt")"
# speed probe: how long synth --to nvfp4 of the full qwen3-30b-a3b shape takes (for the second window)
( time timeout 40 $B/fp4lane synth --shape qwen3-30b-a3b --to nvfp4 $T/q30 ) > "$L/synth30.txt" 2>&1
say "synth qwen3-30b-a3b (40 s cap): $(tail -c 300 "$L/synth30.txt" | tr '\r\n' '  ' | tail -c 200)"
df -h /tmp | tail -1 >> "$L/synth30.txt"
rm -rf "$T" "$W"
tar czf "$OUT/cudamoe-logs.tgz" -C "$OUT" cudamoe && rm -rf "$L"
