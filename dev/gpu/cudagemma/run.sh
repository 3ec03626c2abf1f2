#!/usr/bin/env bash
# issue 31 (Gemma 3 on CUDA) on the device, from the repository root with gpuwork/cudagemma carried:
# test_gpu_gemma (CPU exact = CUDA exact bit for bit on tiny-gemma3 bf16 / NVFP4: chunks, batch, ring
# wrap, snapshots both ways, greedy; native within tolerance) plain and with the two-launch attention
# and without the GEMM route; the runtime and attention tests (the attention kernels now take a
# window); `fp4lane compare` exact cpu vs cuda --max-drift 0 on 100 positions; compute-sanitizer.
# Logs under $OUT/cudagemma/, a summary on stdout.
set -u
OUT=${OUT:-device-out}; O=$OUT/cudagemma; mkdir -p "$O"
X=/tmp/cudagemma; rm -rf $X; mkdir -p $X
tar xJf gpuwork/cudagemma/bin.tar.xz -C $X
export LD_LIBRARY_PATH=$X/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export FP4_BUILD=$X/build-cuda
B=$X/build-cuda
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; cat $X/BUILT.txt; } \
  > "$O/env.txt"
res() {
  echo "$1 rc=$2 $(grep -E '^[0-9]+ passed, [0-9]+ failed' "$3" | tail -1)"
  [ "$2" -ne 0 ] && grep -m 6 -E "FAIL|differ in|>" "$3"
}
timeout 90 $B/tests/gpu/test_gpu_gemma > "$O/gemma.txt" 2>&1; res test_gpu_gemma $? "$O/gemma.txt"
FP4_GPU_QUICK=1 FP4LANE_CUDA_ATT_CLUSTER=0 FP4LANE_CUDA_GEMM=0 timeout 60 $B/tests/gpu/test_gpu_gemma \
  > "$O/gemma_nocl.txt" 2>&1
res "test_gpu_gemma (quick) ATT_CLUSTER=0 GEMM=0" $? "$O/gemma_nocl.txt"
IDS=$(seq 0 99 | awk '{printf "%s%d", (NR>1 ? "," : ""), ($1*131+17)%512}')
for to in bf16 nvfp4; do
  rm -rf /tmp/tg-$to
  timeout 30 $B/fp4lane synth /tmp/tg-$to --shape tiny-gemma3 --to $to --seed 3 > /dev/null 2>&1
  FP4LANE_CUDA_UNPROVEN=1 timeout 40 $B/fp4lane compare /tmp/tg-$to --a "--mode exact" \
    --b "--mode exact --device cuda" --prompt-ids $IDS --max-drift 0 > "$O/cmp_$to.txt" 2>&1
  echo "compare tiny-gemma3 $to exact cpu vs cuda rc=$? $(tail -1 "$O/cmp_$to.txt")"
done
timeout 40 $B/tests/gpu/test_gpu_attention > "$O/attention.txt" 2>&1
res test_gpu_attention $? "$O/attention.txt"
FP4_GPU_QUICK=1 timeout 60 compute-sanitizer --error-exitcode 1 --print-limit 20 $B/tests/gpu/test_gpu_gemma \
  > "$O/sanitize_gemma.txt" 2>&1
echo "sanitize test_gpu_gemma (quick) rc=$? $(grep 'ERROR SUMMARY' "$O/sanitize_gemma.txt")"
FP4_GPU_QUICK=1 timeout 90 $B/tests/gpu/test_gpu_runtime > "$O/runtime.txt" 2>&1
res "test_gpu_runtime (quick)" $? "$O/runtime.txt"
# the speed cells at gemma3-27b's widths (6 layers: one local/global period), exact cpu = cuda there
# first; llama-bench beside when gpuwork/cudagemma carries it (bench.sh)
ls gpuwork/cudagemma/llb.tar.xz.* > /dev/null 2>&1 && mkdir -p $X/llb &&
  cat gpuwork/cudagemma/llb.tar.xz.* | xz -d | tar x -C $X/llb
X=$X O=$O LAYERS=6 timeout 200 bash dev/gpu/cudagemma/bench.sh
echo "bench rc=$?"
