#!/usr/bin/env bash
# runtime_cuda.sh — one batched session on the GPU machine for the CUDA decode step (step_cuda.cu):
# the GPU runtime tests, the CLI bit-identity check (`fp4lane compare`, CPU exact vs CUDA exact),
# compute-sanitizer over the runtime tests, then the llama3-8b-shape timings of bench/runtime.md
# (synth + quantize on the machine itself, in /tmp, each model made once per session; nothing of
# 16 GB travels).
# Usage, from the repository root: bash bench/runtime_cuda.sh BIN_DIR[:BASE_DIR] [STAGES]
# STAGES: a comma list run in the order given, from test, compare, sanitize, bench (NVFP4 native
# and exact, context 512 and 4096), profile (the per-op profile of each), lanes (Q4_K native; bf16
# native and exact), batch (8 sequences decoded together vs 1, NVFP4 native), prefill (native
# prefill of 512 and 3968 tokens with the GEMM route on and off, and its per-op profile); default
# test,compare,sanitize,bench,profile. FP4_KEEP_MODELS=1 keeps the models in /tmp for a later call
# of this script in the same device session (else they are removed at the end).
# FP4_GPU_TESTS: the GPU test binaries of the test stage (default test_gpu_runtime
# test_gpu_dense_pinned test_gpu_dense).
# BIN_DIR holds fp4lane, libfp4lane_cuda.so and the GPU test binaries (`make cuda` output, copied
# where jansson's headers are missing); with :BASE_DIR, every timed run of bench and batch runs
# BASE_DIR's binaries then BIN_DIR's, alternating (a before/after pair in one sitting); tests use
# BIN_DIR. Logs go to $OUT (or ./device-out).
set -u
B=${1:-build}
BASE=
case "$B" in *:*) BASE=${B#*:}; B=${B%%:*} ;; esac
STAGES=${2:-test,compare,sanitize,bench,profile}
OUT=${OUT:-device-out}
mkdir -p "$OUT"
export FP4_BUILD=$B
{
  date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv
  nvcc --version | tail -2; nproc
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
st_test() {
  for t in ${FP4_GPU_TESTS:-test_gpu_runtime test_gpu_dense_pinned test_gpu_dense}; do
    echo "== $t" >> "$OUT/tests.txt"
    timeout 150 "$B/tests/gpu/$t" >> "$OUT/tests.txt" 2>&1; echo "$t rc=$?"
  done
  grep -E "passed, |CHECK failed|differ in bits \(|max \|dlogit\||refused|memory plan" "$OUT/tests.txt" | grep -v " 0 differ" | head -40
  grep -c " 0 differ in bits" "$OUT/tests.txt" | sed 's/^/bit-identical comparisons: /'
}
st_compare() {
  for m in tests/data/hf/llama tests/data/hf/llama/nvfp4 tests/data/hf/qwen3 tests/data/hf/qwen2/nvfp4; do
    ids=tests/data/hf/$(echo "$m" | cut -d/ -f4)/ids.txt
    echo "== compare $m" >> "$OUT/tests.txt"
    timeout 60 "$B/fp4lane" compare "$m" --a "--device cpu --mode exact" --b "--device cuda --mode exact" \
      --prompt-ids "@$ids" --max-drift 0 >> "$OUT/tests.txt" 2>&1; echo "compare $m rc=$?"
  done
  grep -E "^compare:|memory plan|rt\.|cuda\." "$OUT/tests.txt" | tail -12
}
st_sanitize() {
  for t in test_gpu_runtime test_gpu_dense_pinned; do
    echo "== sanitize $t" >> "$OUT/sanitize.txt"
    FP4_GPU_QUICK=1 timeout 100 compute-sanitizer --error-exitcode 1 --print-limit 20 "$B/tests/gpu/$t" \
      >> "$OUT/sanitize.txt" 2>&1; echo "sanitize $t rc=$?"
  done
  grep -E "ERROR SUMMARY|passed, " "$OUT/sanitize.txt"
}
M=/tmp/rt_l8; Q=/tmp/rt_l8nv; K=/tmp/rt_l8q4k.gguf; L=$OUT/bench.txt
elapsed() {
  awk -v a="$1" -v b="$(date +%s.%N)" -v w="$2" 'BEGIN { printf "%s %.1f s\n", w, b - a }' | tee -a "$L"
}
need_bf16() {
  [ -f $M/config.json ] && return 0
  local t0; t0=$(date +%s.%N)
  "$B/fp4lane" synth $M --shape llama3-8b --threads "$(nproc)" --seed 1 >> "$L" 2>&1
  echo "synth rc=$?" | tee -a "$L"
  elapsed "$t0" synth
}
need_nvfp4() {
  [ -f $Q/config.json ] && return 0
  need_bf16; local t0; t0=$(date +%s.%N)
  "$B/fp4lane" quantize $M $Q --layout modelopt >> "$L" 2>&1; echo "quantize nvfp4 rc=$?" | tee -a "$L"
  elapsed "$t0" "quantize nvfp4"
}
need_q4k() {
  [ -f $K ] && return 0
  need_bf16; local t0; t0=$(date +%s.%N)
  "$B/fp4lane" quantize $M $K --layout gguf-ggml --to q4_k >> "$L" 2>&1
  echo "quantize q4_k rc=$?" | tee -a "$L"
  elapsed "$t0" "quantize q4_k"
}
prompts() {
  [ -f /tmp/p512 ] && return 0
  python3 -c 'import random; r=random.Random(1); print(",".join(str(r.randrange(128000)) for _ in range(3968)))' \
    > /tmp/p3968
  cut -d, -f1-512 /tmp/p3968 > /tmp/p512
  python3 -c 'import random
for s in range(8):
    r = random.Random(100 + s); print(",".join(str(r.randrange(128000)) for _ in range(512)))' > /tmp/b8
  head -1 /tmp/b8 > /tmp/b1
}
export CUDA_MODULE_LOADING=EAGER
# timed DIR LABEL MODEL MODE ARGS...: one `fp4lane run`, its summary line into the log
timed() {
  local d=$1 label=$2 model=$3 mode=$4; shift 4
  echo "== run $label $mode $* [$d]" >> "$L"
  timeout 150 "$d/fp4lane" run "$model" --device cuda --mode "$mode" "$@" --ignore-eos 2>&1 \
    | grep -E "memory plan|prefill|rror|refus|Killed" >> "$L"
}
bins() { if [ -n "$BASE" ]; then echo "$BASE $B"; else echo "$B"; fi; }
st_bench() {
  need_nvfp4; prompts
  for mode in native exact; do
    for p in 512 3968; do
      for d in $(bins); do timed "$d" nvfp4 $Q $mode --prompt-ids @/tmp/p$p -n 128 --ctx 4096; done
    done
  done
  grep -E "^==|prefill|memory plan|rc=" "$L" | tail -30
}
st_profile() { # FP4LANE_CUDA_PROFILE: the eager step's per-op shares, context 512 and 4096
  need_nvfp4; prompts
  for mode in native exact; do
    for p in 512 3968; do
      for d in $(bins); do
        tag=${mode}_$p; [ "$d" = "$BASE" ] && tag=${tag}_base
        FP4LANE_CUDA_PROFILE=$OUT/prof_$tag.txt timeout 60 "$d/fp4lane" run $Q --device cuda --mode $mode \
          --prompt-ids @/tmp/p$p -n 33 --ignore-eos --ctx 4096 > /dev/null 2>&1
      done
    done
  done
  tail -n +1 "$OUT"/prof_*.txt 2>/dev/null
}
st_lanes() {
  need_q4k; prompts
  for p in 512 3968; do timed "$B" q4k $K native --prompt-ids @/tmp/p$p -n 128 --ctx 4096; done
  rm -f $K
  for mode in native exact; do
    for p in 512 3968; do timed "$B" bf16 $M $mode --prompt-ids @/tmp/p$p -n 128 --ctx 4096; done
  done
  grep -E "^==|prefill|memory plan|rc=" "$L" | tail -24
}
st_prefill() { # native prefill at 512 and 3968 (-n 1), the GEMM route off (FP4LANE_CUDA_GEMM=0) and on (the default)
  need_nvfp4; prompts
  for p in 512 3968; do
    for d in $(bins); do
      FP4LANE_CUDA_GEMM=0 timed "$d" nvfp4-tiles $Q native --prompt-ids @/tmp/p$p -n 1 --ctx 4096
      timed "$d" nvfp4-gemm $Q native --prompt-ids @/tmp/p$p -n 1 --ctx 4096
    done
    FP4LANE_CUDA_PROFILE=$OUT/prof_prefill_native_$p.txt timeout 60 "$B/fp4lane" run $Q --device cuda \
      --mode native --prompt-ids @/tmp/p$p -n 1 --ignore-eos --ctx 4096 > /dev/null 2>&1
  done
  grep -E "^==|prefill|rc=" "$L" | tail -16
  cat "$OUT"/prof_prefill_native_*.txt 2>/dev/null | sed -n '/prefill/,$p'
}
st_batch() {
  need_nvfp4; prompts
  for d in $(bins); do
    timed "$d" nvfp4-seq1 $Q native --batch-file /tmp/b1 -n 128 --ctx 4096
    timed "$d" nvfp4-seq8 $Q native --batch-file /tmp/b8 -n 128 --ctx 4096
  done
  grep -E "^==|prefill|memory plan|rc=" "$L" | tail -12
}
for stage in ${STAGES//,/ }; do
  case $stage in
    test|compare|sanitize|bench|profile|lanes|batch|prefill) "st_$stage" ;;
    *) echo "unknown stage $stage" ;;
  esac
done
[ -n "${FP4_KEEP_MODELS:-}" ] || rm -rf $M $Q $K
