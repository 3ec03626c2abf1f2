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
for e in FP4LANE_CUDA_FRAG=1 FP4LANE_CUDA_ATT_CLUSTER=0 FP4LANE_CUDA_ATT_CLUSTER_WIDE=0; do
  env $e FP4_GPU_QUICK=1 timeout 200 build-dev/tests/gpu/test_gpu_runtime > "$OUT/rt_env.txt" 2>&1
  echo "test_gpu_runtime $e (quick) rc=$? $(tail -1 "$OUT/rt_env.txt")" | tee -a "$OUT/summary.txt"
done
# issue 28: the MoE reference models made by transformers itself (dev/ref/hf_reference.py):
# phase 1 (checkpoints, bf16 logits), the NVFP4 twins by this build's quantize,
# phase 2 (the twins' dequantized weights through transformers, f64); the quantizer of this build
if [ -f dev/ref/hf_reference.py ] && [ -z "${S13_NO_MOE:-}" ]; then
  rm -rf /tmp/hf /tmp/nv; M="qwen3_moe qwen3_moe_fused mixtral"
  timeout 200 python3 dev/ref/hf_reference.py make /tmp/hf $M > "$OUT/moe_ref.txt" 2>&1
  echo "moe make rc=$?" | tee -a "$OUT/summary.txt"
  for m in $M; do build-dev/fp4lane quantize /tmp/hf/$m /tmp/hf/$m/nvfp4 --layout modelopt >> "$OUT/moe_ref.txt" 2>&1
    echo "quantize $m rc=$?" | tee -a "$OUT/summary.txt"; done
  timeout 200 python3 dev/ref/hf_reference.py dequant /tmp/hf /tmp/nv $M >> "$OUT/moe_ref.txt" 2>&1
  echo "moe dequant rc=$?" | tee -a "$OUT/summary.txt"
  for m in $M; do [ -d /tmp/nv/$m ] && cp /tmp/nv/$m/* /tmp/hf/$m/; done
  for m in $M; do [ -d /tmp/hf/$m ] && tar czf "$OUT/$m.tgz" -C /tmp/hf $m; done
  cp /tmp/hf/versions.json "$OUT/moe_versions.json" 2>/dev/null; tail -30 "$OUT/moe_ref.txt"
fi
# at most 8 files come back: the logs in one archive
tar czf "$OUT/logs.tgz" -C "$OUT" $(cd "$OUT" && ls *.txt) && (cd "$OUT" && rm -f test_gpu_*.txt cmp.txt rt_env.txt runtime_nogemm.txt sanitize_runtime.txt)
