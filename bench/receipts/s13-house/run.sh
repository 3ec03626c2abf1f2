#!/usr/bin/env bash
# Session 13 (House II) on the device: the GPU tests of the restructured tree (the CUDA step as real
# translation units), CPU exact = CUDA exact through the CLI on models/tiny and the transformers
# checkpoints, compute-sanitizer on the runtime test. Logs to $OUT.
#   bash gpuwork/s13/run.sh      (from the repository root, gpuwork/s13 carried)
set -u
OUT=${OUT:-device-out}; mkdir -p "$OUT"
tar xJf gpuwork/s13/bin.tar.xz
export LD_LIBRARY_PATH=$PWD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export FP4_BUILD=build-dev
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; cat BUILT.txt; } | tee "$OUT/env.txt"
for t in build-dev/tests/gpu/test_gpu_*; do
  n=$(basename $t); timeout 300 $t > "$OUT/$n.txt" 2>&1; rc=$?
  echo "$n rc=$rc $(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$OUT/$n.txt" | tail -1)"
  [ $rc -ne 0 ] && grep -m 8 -E "CHECK|FAIL|want" "$OUT/$n.txt"
done 2>&1 | tee "$OUT/summary.txt"
FP4LANE_CUDA_GEMM=0 timeout 300 build-dev/tests/gpu/test_gpu_runtime > "$OUT/runtime_nogemm.txt" 2>&1
echo "test_gpu_runtime (FP4LANE_CUDA_GEMM=0) rc=$? $(tail -1 "$OUT/runtime_nogemm.txt")" | tee -a "$OUT/summary.txt"
for m in models/tiny tests/data/hf/qwen3/nvfp4 tests/data/hf/llama31; do
  timeout 120 build-dev/fp4lane compare "$m" --a "--mode exact" --b "--mode exact --device cuda" \
    --prompt-ids 1,5,9,200,33,7,81,4 --max-drift 0 > "$OUT/cmp.txt" 2>&1
  echo "compare $m exact cpu vs cuda rc=$? $(tail -1 "$OUT/cmp.txt")" | tee -a "$OUT/summary.txt"
done
FP4_GPU_QUICK=1 timeout 240 compute-sanitizer --error-exitcode 1 --print-limit 20 \
  build-dev/tests/gpu/test_gpu_runtime > "$OUT/sanitize_runtime.txt" 2>&1
echo "sanitize test_gpu_runtime rc=$? $(grep 'ERROR SUMMARY' "$OUT/sanitize_runtime.txt")" | tee -a "$OUT/summary.txt"
# issue 28: the MoE reference models, phase 1 (checkpoints + bf16 logits made by transformers itself;
# the generator is the moe branch's dev/ref/hf_reference.py, carried in gpuwork/s13/ref)
if [ -f gpuwork/s13/ref/hf_reference.py ]; then
  rm -rf /tmp/hf; timeout 240 python3 gpuwork/s13/ref/hf_reference.py make /tmp/hf qwen3_moe qwen3_moe_fused mixtral \
    > "$OUT/moe_ref.txt" 2>&1; echo "moe reference make rc=$?" | tee -a "$OUT/summary.txt"; tail -5 "$OUT/moe_ref.txt"
  tar czf "$OUT/moe_ref.tgz" -C /tmp/hf .
fi
