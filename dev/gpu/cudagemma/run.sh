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
FP4LANE_CUDA_ATT_CLUSTER=0 FP4LANE_CUDA_GEMM=0 timeout 90 $B/tests/gpu/test_gpu_gemma \
  > "$O/gemma_nocl.txt" 2>&1
res "test_gpu_gemma ATT_CLUSTER=0 GEMM=0" $? "$O/gemma_nocl.txt"
IDS=$(seq 0 99 | awk '{printf "%s%d", (NR>1 ? "," : ""), ($1*131+17)%512}')
for to in bf16 nvfp4; do
  rm -rf /tmp/tg-$to
  timeout 30 $B/fp4lane synth /tmp/tg-$to --shape tiny-gemma3 --to $to --seed 3 > /dev/null 2>&1
  FP4LANE_CUDA_UNPROVEN=1 timeout 40 $B/fp4lane compare /tmp/tg-$to --a "--mode exact" \
    --b "--mode exact --device cuda" --prompt-ids $IDS --max-drift 0 > "$O/cmp_$to.txt" 2>&1
  echo "compare tiny-gemma3 $to exact cpu vs cuda rc=$? $(tail -1 "$O/cmp_$to.txt")"
done
# the real widths (gemma3-27b, its first 2 layers, both local: window 1024): how long synth takes
# (for the benchmark's layer count), exact cpu = cuda there, a first native decode
t0=$(date +%s); rm -rf /tmp/g27
timeout 150 $B/fp4lane synth /tmp/g27 --shape gemma3-27b --layers 2 --to nvfp4 > "$O/synth27.txt" 2>&1
echo "synth gemma3-27b --layers 2 --to nvfp4 rc=$? in $(( $(date +%s) - t0 )) s: $(tail -1 "$O/synth27.txt")"
I12=$(seq 0 11 | awk '{printf "%s%d", (NR>1 ? "," : ""), ($1*7919+5)%262208}')
FP4LANE_CUDA_UNPROVEN=1 timeout 90 $B/fp4lane compare /tmp/g27 --a "--mode exact --threads 16" \
  --b "--mode exact --device cuda" --prompt-ids $I12 --max-drift 0 > "$O/cmp_27.txt" 2>&1
echo "compare gemma3-27b-L2 exact cpu vs cuda rc=$? $(tail -1 "$O/cmp_27.txt")"
seq 0 511 | awk '{printf "%s%d", (NR>1 ? "," : ""), ($1*7919+5)%262208}' > /tmp/p512
for md in native exact; do
  FP4LANE_CUDA_UNPROVEN=1 timeout 60 $B/fp4lane run /tmp/g27 --device cuda --mode $md \
    --prompt-ids @/tmp/p512 -n 64 --ignore-eos --ctx 1024 > "$O/run27_$md.txt" 2>&1
  echo "run gemma3-27b-L2 cuda $md rc=$? $(grep -E '^prefill' "$O/run27_$md.txt" | cut -c1-200)"
done
timeout 40 $B/tests/gpu/test_gpu_attention > "$O/attention.txt" 2>&1
res test_gpu_attention $? "$O/attention.txt"
FP4_GPU_QUICK=1 timeout 60 compute-sanitizer --error-exitcode 1 --print-limit 20 $B/tests/gpu/test_gpu_gemma \
  > "$O/sanitize_gemma.txt" 2>&1
echo "sanitize test_gpu_gemma (quick) rc=$? $(grep 'ERROR SUMMARY' "$O/sanitize_gemma.txt")"
FP4_GPU_QUICK=1 timeout 90 $B/tests/gpu/test_gpu_runtime > "$O/runtime.txt" 2>&1
res "test_gpu_runtime (quick)" $? "$O/runtime.txt"
