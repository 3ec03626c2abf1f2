#!/usr/bin/env bash
# Session 15, the last call: the merged tree (all of the session's branches) on the device: the Gemma 3, MoE,
# runtime, exact and generate GPU tests, Gemma 3 through a gguf-ggml file, Gemma 3's first speed cells.
set -u
X=/tmp/int; rm -rf $X; mkdir -p $X; tar xJf gpuwork/int/bin.tar.xz -C $X
export LD_LIBRARY_PATH=$X/lib FP4_BUILD=$X/build-dev FP4LANE_CUDA_UNPROVEN=1
B=$X/build-dev; F=$B/fp4lane; O=$OUT; cat $X/BUILT.txt; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
r() { echo "$1 rc=$2 $(grep -E '^[0-9]+ passed, [0-9]+ failed' $3 | tail -1)"; grep -m 5 "CHECK failed" $3; }
timeout 60 $B/tests/gpu/test_gpu_gemma > $O/gemma.txt 2>&1; r test_gpu_gemma $? $O/gemma.txt
timeout 60 $B/tests/gpu/test_gpu_moe > $O/moe.txt 2>&1; r test_gpu_moe $? $O/moe.txt
timeout 60 $B/tests/gpu/test_gpu_exact > $O/exact.txt 2>&1; r test_gpu_exact $? $O/exact.txt
FP4_GPU_QUICK=1 timeout 90 $B/tests/gpu/test_gpu_runtime > $O/runtime.txt 2>&1; r "test_gpu_runtime (quick)" $? $O/runtime.txt
timeout 90 $B/tests/gpu/test_gpu_generate > $O/generate.txt 2>&1; r test_gpu_generate $? $O/generate.txt
rm -rf /tmp/tg; timeout 10 $F synth /tmp/tg --shape tiny-gemma3 --to nvfp4 > /dev/null 2>&1
timeout 10 $F convert /tmp/tg /tmp/tg.gguf --layout gguf-ggml > /dev/null 2>&1
timeout 15 $F compare /tmp/tg.gguf --a "--mode exact" --b "--mode exact --device cuda" \
  --prompt-ids $(seq -s, 1 7 600 | cut -d, -f1-80) --max-drift 0 > /tmp/c.txt 2>&1
echo "compare tiny-gemma3 gguf-ggml exact cpu vs cuda rc=$? $(tail -1 /tmp/c.txt | cut -c1-160)"
M=/tmp/g27b; t0=$(date +%s)
timeout 50 $F synth $M --shape gemma3-27b --layers 6 --to nvfp4 > /dev/null 2>&1
echo "gemma3-27b-L6 made rc=$? in $(( $(date +%s) - t0 )) s"
seq 0 511 | awk '{printf "%s%d", (NR>1 ? "," : ""), ($1*7919+131)%262208}' > /tmp/p512
: > /tmp/b512; for s in 1 2 3 4 5 6 7 8; do cat /tmp/p512 >> /tmp/b512; echo >> /tmp/b512; done
for md in native exact; do for a in "--prompt-ids @/tmp/p512" "--batch-file /tmp/b512"; do
  timeout 25 $F run $M --device cuda --mode $md --ignore-eos $a -n 64 --ctx 1024 > /tmp/fl.txt 2>&1
  echo "gemma3-27b-L6 $md ${a%% *} 512+64 rc=$? $(grep -E '^prefill|rror|rule' /tmp/fl.txt | head -2 | cut -c1-200)"
done; done
