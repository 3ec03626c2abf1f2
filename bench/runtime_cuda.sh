#!/usr/bin/env bash
# runtime_cuda.sh — one batched session on the GPU machine for the CUDA decode step (step_cuda.cu):
# the GPU runtime tests, the CLI bit-identity check (`fp4lane compare`, CPU exact vs CUDA exact),
# compute-sanitizer over the runtime tests, then the llama3-8b-shape timing of bench/runtime.md
# (synth + quantize on the machine itself, in /tmp; nothing of 16 GB travels).
# Usage, from the repository root: bash bench/runtime_cuda.sh BIN_DIR [test,compare,sanitize,bench]
# BIN_DIR holds fp4lane, libfp4lane_cuda.so and the GPU test binaries (`make cuda` output, copied
# where jansson's headers are missing); logs go to $OUT (or ./device-out), at most 8 files.
set -u
B=${1:-build}
STAGES=${2:-test,compare,sanitize,bench}
OUT=${OUT:-device-out}
mkdir -p "$OUT"
export FP4_BUILD=$B
has() { case ",$STAGES," in *",$1,"*) return 0 ;; esac; return 1; }
{
  date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv
  nvcc --version | tail -2; nproc
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
if has test; then
  for t in test_gpu_runtime test_gpu_dense_pinned test_gpu_dense; do
    echo "== $t" >> "$OUT/tests.txt"
    timeout 150 "$B/tests/gpu/$t" >> "$OUT/tests.txt" 2>&1; echo "$t rc=$?"
  done
  grep -E "passed, |CHECK failed|differ in bits \(|max \|dlogit\||refused|memory plan" "$OUT/tests.txt" | grep -v " 0 differ" | head -40
  grep -c " 0 differ in bits" "$OUT/tests.txt" | sed 's/^/bit-identical comparisons: /'
fi
if has compare; then
  for m in tests/data/hf/llama tests/data/hf/llama/nvfp4 tests/data/hf/qwen3 tests/data/hf/qwen2/nvfp4; do
    ids=tests/data/hf/$(echo "$m" | cut -d/ -f4)/ids.txt
    echo "== compare $m" >> "$OUT/tests.txt"
    timeout 60 "$B/fp4lane" compare "$m" --a "--device cpu --mode exact" --b "--device cuda --mode exact" \
      --prompt-ids "@$ids" --max-drift 0 >> "$OUT/tests.txt" 2>&1; echo "compare $m rc=$?"
  done
  grep -E "^compare:|memory plan|rt\.|cuda\." "$OUT/tests.txt" | tail -12
fi
if has sanitize; then
  for t in test_gpu_runtime test_gpu_dense_pinned; do
    echo "== sanitize $t" >> "$OUT/sanitize.txt"
    FP4_GPU_QUICK=1 timeout 100 compute-sanitizer --error-exitcode 1 --print-limit 20 "$B/tests/gpu/$t" \
      >> "$OUT/sanitize.txt" 2>&1; echo "sanitize $t rc=$?"
  done
  grep -E "ERROR SUMMARY|passed, " "$OUT/sanitize.txt"
fi
if has bench; then
  M=/tmp/rt_l8; Q=/tmp/rt_l8nv; L=$OUT/bench.txt
  t0=$(date +%s.%N)
  "$B/fp4lane" synth $M --shape llama3-8b --threads "$(nproc)" --seed 1 >> "$L" 2>&1
  t1=$(date +%s.%N)
  "$B/fp4lane" quantize $M $Q --layout modelopt >> "$L" 2>&1; echo "quantize rc=$?"
  t2=$(date +%s.%N)
  rm -rf $M
  awk -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN { printf "synth %.1f s, quantize %.1f s\n", b - a, c - b }' | tee -a "$L"
  python3 -c 'import random; r=random.Random(1); print(",".join(str(r.randrange(128000)) for _ in range(3968)))' > /tmp/p3968
  cut -d, -f1-512 /tmp/p3968 > /tmp/p512
  export CUDA_MODULE_LOADING=EAGER
  for mode in native exact; do
    for p in 512 3968; do
      echo "== run $mode prompt $p" >> "$L"
      timeout 120 "$B/fp4lane" run $Q --device cuda --mode $mode --prompt-ids @/tmp/p$p -n 128 --ignore-eos --ctx 4096 \
        2>&1 | grep -v "^[0-9, ]*$" | tail -4 >> "$L"
    done
    FP4LANE_CUDA_PROFILE=$OUT/prof_$mode.txt timeout 60 "$B/fp4lane" run $Q --device cuda --mode $mode \
      --prompt-ids @/tmp/p512 -n 33 --ignore-eos --ctx 4096 > /dev/null 2>&1
  done
  grep -E "^==|prefill|memory plan|synth|rc=" "$L"
  cat "$OUT"/prof_*.txt 2>/dev/null
  rm -rf $Q
fi
