#!/usr/bin/env bash
# Issue 28's llama.cpp side by side (bench/moe.md): llama.cpp runs no NVFP4 experts (type 40 has no
# per-expert scale2; convert --layout gguf-ggml keeps an NVFP4 MoE's HF names, ggml_moe.c), so the same
# bf16 weights go to llama.cpp as its own Q4_K qwen3moe GGUF (4.5 bits a weight, as NVFP4):
# synth qwen3-30b-a3b --layers 8 --seed 1 (bf16), quantize --to q4_k, then llama-bench pp512 and tg128 at
# depth 512 and 4096 (fa 1, -r 2), and fp4lane's tg/pp cells on the NVFP4 model of the same seed
# (/tmp/q3m, or synth --to nvfp4). $LLB: the llama-bench binary (the lead sets it; nothing runs
# without it). Takes ~4 minutes (the bf16 model is 11 GB; quantize is one thread). Logs under
# $OUT/nativemoe_llb/. From the repository root with gpuwork/nativemoe carried:
#   LLB=/tmp/llbin/llama-bench bash dev/gpu/nativemoe/run_llb.sh
set -u
OUT=${OUT:-device-out}; L=$OUT/nativemoe_llb; mkdir -p "$L"; S="$L/summary.txt"; : > "$S"
say() { echo "$*" | tee -a "$S"; }
if [ -z "${LLB:-}" ] || [ ! -x "$LLB" ]; then
  say "LLB unset or not executable: llama.cpp cells skipped"; exit 0; fi
W=$(mktemp -d); tar xJf gpuwork/nativemoe/bin.tar.xz -C "$W"
export LD_LIBRARY_PATH=$W/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} CUDA_MODULE_LOADING=EAGER
F=$W/build-cuda/fp4lane; t00=$SECONDS
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat $W/BUILT.txt; } \
  > "$L/env.txt"
G=/tmp/nm_q4k.gguf
if [ ! -e $G ]; then
  rm -rf /tmp/nmbf
  timeout 150 $F synth /tmp/nmbf --shape qwen3-30b-a3b --layers 8 --seed 1 > "$L/synth_bf16.txt" 2>&1
  say "synth bf16 rc=$? at $((SECONDS - t00)) s"
  timeout 300 $F quantize /tmp/nmbf $G --to q4_k > "$L/quantize.txt" 2>&1
  say "quantize --to q4_k rc=$? at $((SECONDS - t00)) s $(stat -c %s $G 2>/dev/null)"
  rm -rf /tmp/nmbf
fi
lb() { echo "== llama-bench $*" >> "$L/llb.txt"
  timeout 150 "$LLB" "$@" -ngl 99 -fa 1 -r 2 -o md 2>&1 | grep -E "^\||rror" >> "$L/llb.txt"; }
lb -m $G -p 512 -n 0; lb -m $G -p 0 -n 128 -d 512,4096
grep -E "pp512|tg128|rror" "$L/llb.txt" | tee -a "$S"
M=/tmp/q3m
[ -e $M/config.json ] || { M=/tmp/nmq3m; [ -e $M/config.json ] ||
  timeout 150 $F synth $M --shape qwen3-30b-a3b --layers 8 --seed 1 --to nvfp4 > /dev/null 2>&1; }
export FP4LANE_CUDA_UNPROVEN=1
python3 -c 'import random; r=random.Random(2)
print(",".join(str(r.randrange(150000)) for _ in range(4096)))' > /tmp/nm4096
cut -d, -f1-512 /tmp/nm4096 > /tmp/nm512
for md in exact native; do for p in 512 4096; do
  timeout 100 $F run $M --device cuda --mode $md --prompt-ids @/tmp/nm$p -n 128 --ignore-eos --ctx 4352 2>&1 |
    grep -E "^prefill|rror|refus" | sed "s/^/fp4lane $md prompt $p: /" | cut -c1-200 | tee -a "$S"
done; done
rm -rf "$W"
say "run_llb.sh done in $((SECONDS - t00)) s"
