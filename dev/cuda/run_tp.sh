#!/usr/bin/env bash
# run_tp.sh — issue 33 on a multi-GPU device (nvidia-h100-x2 or larger): builds `make cuda`, then
# `make test-gpu-tp`: the split CUDA step through NCCL, one rank per GPU (test_gpu_tp with
# FP4LANE_CUDA_TP_NCCL=1: exact = CPU bit for bit, native within tolerance, at every --tp up to the
# GPUs), and the NCCL communicator's own test over every GPU (one process per GPU, the ncclUniqueId
# through a file); then the CPU split engine's test as the reference. libnccl.so.2 from the CUDA
# toolkit, or from pip's nvidia-nccl package (torch's) when the toolkit has none. Logs to $OUT (or
# ./tp-logs). One command: bash dev/cuda/run_tp.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-tp-logs}"; mkdir -p "$out"
n=$(nvidia-smi -L | wc -l)
echo "GPUs: $n" | tee "$out/tp.log"
nvidia-smi topo -m >> "$out/tp.log" 2>&1 || true
if ! ldconfig -p | grep -q libnccl.so.2; then
  d=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' \
      2>/dev/null || true)
  if [ -n "$d" ]; then export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; fi
fi
make -j"$(nproc)" BUILD=build-cuda cuda 2>&1 | tail -5 | tee -a "$out/tp.log"
if [ "$n" -lt 2 ]; then echo "needs two GPUs or more; found $n" | tee -a "$out/tp.log"; exit 2; fi
make BUILD=build-cuda test-gpu-tp 2>&1 | tee -a "$out/tp.log"
make -j"$(nproc)" BUILD=build-cuda build-cuda/tests/test_runtime_tp 2>&1 | tail -1
build-cuda/tests/test_runtime_tp 2>&1 | tee -a "$out/tp.log"
