#!/usr/bin/env bash
# issue 31, the fix call (under 120 s): test_gpu_gemma with native against native; a gguf-ggml Gemma 3
# (f32 norms) on cuda, refused before the slot-name fix; the first speed cells at gemma3-27b's widths
# (6 layers) through that file. From the repository root, gpuwork/cudagemma carried.
set -u
OUT=${OUT:-device-out}; O=$OUT/cudagemma; mkdir -p "$O"
X=/tmp/cudagemma; rm -rf $X; mkdir -p $X
tar xJf gpuwork/cudagemma/bin.tar.xz -C $X
export LD_LIBRARY_PATH=$X/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export FP4_BUILD=$X/build-cuda FP4LANE_CUDA_UNPROVEN=1
B=$X/build-cuda; F=$B/fp4lane
timeout 45 $B/tests/gpu/test_gpu_gemma > "$O/gemma.txt" 2>&1
echo "test_gpu_gemma rc=$? $(tail -1 "$O/gemma.txt")"; grep -E "FAIL|native" "$O/gemma.txt"
rm -rf /tmp/tg; timeout 10 $F synth /tmp/tg --shape tiny-gemma3 --to nvfp4 > /dev/null 2>&1
timeout 10 $F convert /tmp/tg /tmp/tg.gguf --layout gguf-ggml > /dev/null 2>&1
timeout 15 $F compare /tmp/tg.gguf --a "--mode exact" --b "--mode exact --device cuda" \
  --prompt-ids $(seq -s, 1 7 600 | cut -d, -f1-80) --max-drift 0 > "$O/cmp_gguf.txt" 2>&1
echo "compare tiny-gemma3 gguf-ggml exact cpu vs cuda rc=$? $(tail -1 "$O/cmp_gguf.txt" | cut -c1-160)"
M=/tmp/g27b; t0=$(date +%s)
timeout 50 $F synth $M --shape gemma3-27b --layers 6 --to nvfp4 > /dev/null 2>&1 &&
  timeout 15 $F convert $M $M.gguf --layout gguf-ggml > /dev/null 2>&1
echo "gemma3-27b-L6 gguf made rc=$? in $(( $(date +%s) - t0 )) s"; rm -rf $M
seq 0 511 | awk '{printf "%s%d", (NR>1 ? "," : ""), ($1*7919+131)%262208}' > /tmp/p512
: > /tmp/b512; for s in 1 2 3 4 5 6 7 8; do cat /tmp/p512 >> /tmp/b512; echo >> /tmp/b512; done
for a in "--prompt-ids @/tmp/p512" "--batch-file /tmp/b512"; do
  timeout 20 $F run $M.gguf --device cuda --mode native --ignore-eos $a -n 64 --ctx 1024 > /tmp/fl.txt 2>&1
  echo "fp4lane native ${a%% *} 512 rc=$? $(grep -E '^prefill|rror|rule' /tmp/fl.txt | cut -d, -f1-3 |
    head -2)"
done
