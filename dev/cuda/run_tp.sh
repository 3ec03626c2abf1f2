#!/usr/bin/env bash
# run_tp.sh — issue 33 on a multi-GPU device (nvidia-h100-x2 or larger): builds `make cuda` and runs
# the NCCL communicator's test over every GPU of the host (one process per GPU, the ncclUniqueId
# through a file), then the CPU split engine's test as the reference. Logs to $OUT (or ./tp-logs).
# One command: bash dev/cuda/run_tp.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-tp-logs}"; mkdir -p "$out"
n=$(nvidia-smi -L | wc -l)
echo "GPUs: $n" | tee "$out/tp.log"
nvidia-smi topo -m >> "$out/tp.log" 2>&1 || true
make -j"$(nproc)" BUILD=build-cuda cuda 2>&1 | tail -5 | tee -a "$out/tp.log"
if [ "$n" -lt 2 ]; then echo "needs two GPUs or more; found $n" | tee -a "$out/tp.log"; exit 2; fi
NCCL_DEBUG=WARN build-cuda/tests/gpu/test_nccl_comm "$n" 2>&1 | tee -a "$out/tp.log"
make -j"$(nproc)" BUILD=build-cuda build-cuda/tests/test_runtime_tp 2>&1 | tail -1
build-cuda/tests/test_runtime_tp 2>&1 | tee -a "$out/tp.log"
