#!/usr/bin/env bash
# Issue 28 on the device: the CUDA MoE step. test_gpu_moe (the experts' projection against the CPU
# oracle), test_gpu_runtime's MoE cases (exact CPU == CUDA in bits: chunks, batch, KV snapshot;
# native within tolerance), the CLI's exact compare on NVFP4 MoE synth models, compute-sanitizer on
# the kernel test and a first speed probe. Logs under
# $OUT/cudamoe/, a summary on stdout. FP4LANE_CUDA_UNPROVEN=1: the route is refused until proven.
#   bash dev/gpu/cudamoe/run.sh      (from the repository root, gpuwork/cudamoe carried)
set -u
OUT=${OUT:-device-out}; L=$OUT/cudamoe; mkdir -p "$L"
W=$(mktemp -d); tar xJf gpuwork/cudamoe/bin.tar.xz -C "$W"
export LD_LIBRARY_PATH=$W/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export FP4_BUILD=$W/build-cuda
B=$W/build-cuda; T=$(mktemp -d)
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; cat $W/BUILT.txt; } \
  > "$L/env.txt"
head -3 "$L/env.txt"
S="$L/summary.txt"; : > "$S"
say() { echo "$*" | tee -a "$S"; }
res() { grep -E '^[0-9]+ passed, [0-9]+ failed$' "$1" | tail -1; }
timeout 60 $B/tests/gpu/test_gpu_moe > "$L/test_gpu_moe.txt" 2>&1
say "test_gpu_moe rc=$? $(res $L/test_gpu_moe.txt)"; grep -m 6 -E "FAIL|differ|want" "$L/test_gpu_moe.txt"
FP4_GPU_MOE_ONLY=1 timeout 100 $B/tests/gpu/test_gpu_runtime > "$L/rt_moe.txt" 2>&1
say "test_gpu_runtime MoE cases rc=$? $(res $L/rt_moe.txt)"
grep -E "FAIL|moe|mixtral" "$L/rt_moe.txt" | head -40
export FP4LANE_CUDA_UNPROVEN=1
for a in qwen3-moe:tiny-moe16 mixtral:tiny-moe qwen3-moe:small-moe; do
  timeout 60 $B/fp4lane synth --shape ${a#*:} --arch ${a%%:*} --to nvfp4 $T/${a#*:}-${a%%:*} > /dev/null 2>&1
  timeout 60 $B/fp4lane compare $T/${a#*:}-${a%%:*} --a "--mode exact" --b "--mode exact --device cuda" \
    --prompt-ids 1,5,9,200,33,7,81,4,17,99,3,250 --max-drift 0 > "$L/cmp.txt" 2>&1
  say "compare $a nvfp4 exact cpu vs cuda rc=$? $(tail -1 "$L/cmp.txt")"
done
FP4_GPU_QUICK=1 timeout 60 compute-sanitizer --error-exitcode 1 --print-limit 20 $B/tests/gpu/test_gpu_moe \
  > "$L/sanitize_moe.txt" 2>&1
say "sanitize test_gpu_moe rc=$? $(grep 'ERROR SUMMARY' "$L/sanitize_moe.txt")"
# speed probe on qwen3-30b-a3b's widths in 8 layers (synth time; decode tok/s exact vs native, 1 and
# 8 sequences, context 512 and 4096; per-op times of eager native steps)
( time timeout 60 $B/fp4lane synth --shape qwen3-30b-a3b-l8 --to nvfp4 $T/q8 ) > "$L/synth_l8.txt" 2>&1
say "synth qwen3-30b-a3b-l8 --to nvfp4: $(grep -E 'synthesized|real' "$L/synth_l8.txt" | tr '\n' ' ')"
for cfg in 512:1 512:8 4096:1; do
  IFS=: read -r ctx n <<< "$cfg"
  timeout 35 $B/fp4lane bench $T/q8 --a "--mode exact --device cuda --ctx $((ctx + 128))" \
    --b "--mode native --device cuda --ctx $((ctx + 128))" --pairs 1 --warmup 1 --prefix $ctx --tokens 32 \
    --seqs $n > "$L/bench_l8_${ctx}_$n.txt" 2>&1
  say "bench l8 ctx $ctx seqs $n rc=$? $(grep -E 'decode|prefill' "$L/bench_l8_${ctx}_$n.txt" |
    tr '\n' ' ')"
done
timeout 25 $B/fp4lane bench $T/q8 \
  --a "--mode exact --device cuda --ctx 1024 FP4LANE_CUDA_PROFILE=$L/prof_exact.txt" \
  --b "--mode native --device cuda --ctx 1024 FP4LANE_CUDA_PROFILE=$L/prof_native.txt" --pairs 1 --warmup 0 \
  --prefix 64 --tokens 16 > "$L/bench_prof.txt" 2>&1
say "profile rc=$?"; head -14 "$L/prof_native.txt" "$L/prof_exact.txt" 2>/dev/null
rm -rf "$T" "$W"
# few files come back: summary.txt, env.txt and the other logs in one archive
(cd "$L" && tar czf logs.tgz $(ls | grep -v -e '^summary.txt$' -e '^env.txt$') && \
  find . -maxdepth 1 -type f ! -name summary.txt ! -name env.txt ! -name logs.tgz -delete)
