#!/usr/bin/env bash
# Session 17's rebased branches on the device (nativemoe17 inside tpcuda17), held to BUDGET seconds
# (default 165), each part only while its time is left, in order of importance:
#   1. test_gpu_moe: the experts' projection in every form (pairs, pairs in expert order = the step's
#      default, grouped = FP4LANE_CUDA_MOE_GROUPED's kernel), exact bits, native within its bound;
#   2. test_gpu_runtime's MoE cases, quick (FP4_GPU_MOE_ONLY=1 FP4_GPU_QUICK=1): exact CUDA == CPU bits,
#      default and grouped; NVFP4 native held to 3e-3 of max |logit| position by position (the check
#      that opens route.moe-cuda);
#   3. test_gpu_tp with FP4LANE_CUDA_UNPROVEN=1 (the split CUDA step, 1..4 ranks on the one GPU:
#      exact = CPU bits, native within tolerance, MoE experts per rank; the check that opens
#      route.tp-cuda), then compute-sanitizer on it (quick);
#   4. bench/moe.md's cells on qwen3-30b-a3b in 8 layers (synth --to nvfp4 --seed 1; /tmp/q3m reused if
#      there): exact and native, 1 and 8 sequences, prefix 512, grouped (A) against the default (B);
#   5. with time left: compute-sanitizer on test_gpu_moe (quick), test_gpu_tp quick with the grouped
#      kernel.
# Logs under $OUT/rb17/ (summary.txt, env.txt, logs.tgz), the summary on stdout. From the repository
# root with gpuwork/rb17 carried:   bash dev/gpu/rb17/run.sh   (or bash gpuwork/rb17/run.sh)
set -u
OUT=${OUT:-device-out}; L=$OUT/rb17; mkdir -p "$L"
W=$(mktemp -d); tar xJf gpuwork/rb17/bin.tar.xz -C "$W"
export LD_LIBRARY_PATH=$W/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} FP4_BUILD=$W/build-cuda
export CUDA_MODULE_LOADING=EAGER FP4_GPU_REQUIRE=1
B=$W/build-cuda; F=$B/fp4lane; t00=$SECONDS; BUDGET=${BUDGET:-165}
left() { echo $((BUDGET - (SECONDS - t00))); }  # seconds left
fits() { [ "$(left)" -gt "$1" ]; }                # more than $1 seconds left
cap() { local l=$(($(left) - 5)); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; } # min(limit, left - 5)
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  cat $W/BUILT.txt; command -v compute-sanitizer; } > "$L/env.txt" 2>&1
head -3 "$L/env.txt"
S="$L/summary.txt"; : > "$S"
say() { echo "$*" | tee -a "$S"; }
res() { grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -1; }
timeout $(cap 35) $B/tests/gpu/test_gpu_moe > "$L/test_gpu_moe.txt" 2>&1
say "test_gpu_moe (pairs, ordered, grouped) rc=$? $(res $L/test_gpu_moe.txt)"
grep -m 6 -E "FAIL|differ" "$L/test_gpu_moe.txt" | cut -c1-200 | tee -a "$S"
FP4_GPU_MOE_ONLY=1 FP4_GPU_QUICK=1 timeout $(cap 45) $B/tests/gpu/test_gpu_runtime > "$L/rt_moe.txt" 2>&1
say "test_gpu_runtime MoE cases quick rc=$? $(res $L/rt_moe.txt)"
grep -E "FAIL|native cuda vs cpu|grouped" "$L/rt_moe.txt" | cut -c1-200 | head -16 | tee -a "$S"
FP4LANE_CUDA_UNPROVEN=1 timeout $(cap 70) $B/tests/gpu/test_gpu_tp > "$L/test_gpu_tp.txt" 2>&1
say "test_gpu_tp (UNPROVEN=1) rc=$? $(res $L/test_gpu_tp.txt)"
grep -E "FAIL|DIFFERS|skipped" "$L/test_gpu_tp.txt" | cut -c1-200 | head -12 | tee -a "$S"
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
san() { # name, then the command: memcheck, quick shapes
  local n=$1; shift
  if [ -z "$SAN" ]; then say "sanitize $n: no compute-sanitizer"; return; fi
  FP4_GPU_QUICK=1 FP4LANE_CUDA_UNPROVEN=1 timeout $(cap 50) "$SAN" --error-exitcode 1 --print-limit 20 "$@" \
    > "$L/sanitize_$n.txt" 2>&1
  say "sanitize $n (quick) rc=$? $(grep 'ERROR SUMMARY' "$L/sanitize_$n.txt" | tail -1) \
$(res $L/sanitize_$n.txt)"
}
fits 20 && san test_gpu_tp $B/tests/gpu/test_gpu_tp
say "tests done at $((SECONDS - t00)) s"
export FP4LANE_CUDA_UNPROVEN=1 # native MoE stays refused by name until this call passes
M=/tmp/q3m
if [ ! -e $M/config.json ] && fits 75; then
  M=/tmp/rb17q3m; rm -rf $M
  ( time timeout $(($(left) - 30)) $F synth $M --shape qwen3-30b-a3b --layers 8 --seed 1 --to nvfp4 ) \
    > "$L/synth.txt" 2>&1
  say "synth qwen3-30b-a3b --layers 8 --to nvfp4 rc=$? $(grep -E 'real' "$L/synth.txt" | tr '\n' ' ')"
fi
[ -e $M/config.json ] && say "model $M ($(du -sh $M | cut -f1)) at $((SECONDS - t00)) s"
cell() { # mode seqs (skipped without the model or 20 s left)
  local md=$1 n=$2 f="$L/bench_$1_$2.txt"
  if ! [ -e $M/config.json ] || ! fits 20; then say "bench $md seqs $n: skipped ($(left) s left)"; return; fi
  timeout $(($(left) - 8)) $F bench $M \
    --a "--mode $md --device cuda --ctx 640 FP4LANE_CUDA_MOE_GROUPED=1" \
    --b "--mode $md --device cuda --ctx 640" \
    --pairs 1 --warmup 1 --prefix 512 --tokens 32 --seqs $n > "$f" 2>&1
  say "bench $md seqs $n prefix 512 (A grouped, B pairs) rc=$? $(grep -E '^ *(decode|prefill) +A' "$f" |
    sed 's/  */ /g' | tr '\n' ' ' | cut -c1-260)"
}
cell exact 8; cell native 8; cell exact 1; cell native 1
say "bench done at $((SECONDS - t00)) s"
fits 25 && san test_gpu_moe $B/tests/gpu/test_gpu_moe
if fits 25; then
  FP4LANE_CUDA_MOE_GROUPED=1 FP4LANE_CUDA_UNPROVEN=1 FP4_GPU_QUICK=1 timeout $(cap 40) \
    $B/tests/gpu/test_gpu_tp > "$L/test_gpu_tp_grouped.txt" 2>&1
  say "test_gpu_tp quick, FP4LANE_CUDA_MOE_GROUPED=1 rc=$? $(res $L/test_gpu_tp_grouped.txt)"
fi
rm -rf "$W" /tmp/rb17q3m
say "run.sh done in $((SECONDS - t00)) s"
(cd "$L" && tar czf logs.tgz $(ls | grep -v -e '^summary.txt$' -e '^env.txt$') &&
  find . -maxdepth 1 -type f ! -name summary.txt ! -name env.txt ! -name logs.tgz -delete)
