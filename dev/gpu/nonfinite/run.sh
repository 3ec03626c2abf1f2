#!/usr/bin/env bash
# The crafted +inf KV cache on CUDA, from the repository root with gpuwork/nonfinite carried:
# test_gpu_generate ((d): the CUDA step gives the CPU step's answer on the logits, device-argmax and
# host-argmax paths: rt.nonfinite on the bf16 checkpoint, the CPU's finite bits on the NVFP4 one),
# and test_gpu_attention / test_gpu_runtime (quick) beside it. Logs under $OUT/nonfinite/, a summary
# on stdout.
#   bash dev/gpu/nonfinite/run.sh
set -u
OUT=${OUT:-device-out}; O=$OUT/nonfinite; mkdir -p "$O"
X=/tmp/nonfinite; rm -rf $X; mkdir -p $X
tar xJf gpuwork/nonfinite/bin.tar.xz -C $X
export LD_LIBRARY_PATH=$X/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export FP4_BUILD=$X/build-dev
B=$X/build-dev
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; cat $X/BUILT.txt; } \
  > "$O/env.txt" 2>&1
res() {
  echo "$1 rc=$2 $(grep -E '^[0-9]+ passed, [0-9]+ failed' "$3" | tail -1)"
  [ "$2" -ne 0 ] && grep -m 8 -E "CHECK|FAIL|error" "$3"
  return 0
}
# quick: (d) runs whole; (a) and (b) on one model each (the whole run is held under 3 minutes)
FP4_GPU_QUICK=1 timeout 90 $B/tests/gpu/test_gpu_generate > "$O/generate.txt" 2>&1
res "test_gpu_generate (quick)" $? "$O/generate.txt"
timeout 30 $B/tests/gpu/test_gpu_attention > "$O/attention.txt" 2>&1
res test_gpu_attention $? "$O/attention.txt"
FP4_GPU_QUICK=1 timeout 45 $B/tests/gpu/test_gpu_runtime > "$O/runtime.txt" 2>&1
res "test_gpu_runtime (quick)" $? "$O/runtime.txt"
