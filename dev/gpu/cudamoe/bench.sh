#!/usr/bin/env bash
# Issue 28's GPU benchmark (bench/moe.md), called by run.sh: qwen3-30b-a3b's widths in 8 of its 48
# layers (synth --shape qwen3-30b-a3b-l8: the whole model's 61 GB of bf16 values do not fit a device
# run), one bf16 checkpoint quantized two ways: NVFP4 (ModelOpt) for fp4lane, Q4_K GGUF (llama.cpp's
# qwen3moe form) for llama.cpp, which runs no NVFP4 experts and fp4lane no Q4_K experts on CUDA.
# fp4lane: `fp4lane bench` exact (A) vs native (B), decode after a 512- and a 4096-token prefix, 1 and 8
# sequences; llama.cpp: llama-bench -ngl 99 -fa 1, tg64 at depth 512 and 4096, pp512.
#   bash dev/gpu/cudamoe/bench.sh BUILD_DIR LLAMA_BENCH LOG_DIR TMP_DIR
set -u
B=$1; LB=$2; L=$3; T=$4
say() { echo "$*" | tee -a "$L/summary.txt"; }
secs() { grep -E '^real' "$1" | tail -1; }
( time timeout 50 $B/fp4lane synth $T/bf --shape ${SHAPE:-qwen3-30b-a3b-l8} --seed 1 ) > "$L/b_synth.txt" 2>&1
say "bench: synth bf16 rc=$? $(secs $L/b_synth.txt)"
( time timeout 50 $B/fp4lane quantize $T/bf $T/nv --layout modelopt ) > "$L/b_quant_nv.txt" 2>&1
say "bench: quantize nvfp4 rc=$? $(secs $L/b_quant_nv.txt)"
( time timeout 50 $B/fp4lane quantize $T/bf $T/q4k.gguf --to q4_k ) > "$L/b_quant_q4k.txt" 2>&1
say "bench: quantize q4_k rc=$? $(secs $L/b_quant_q4k.txt)"
rm -rf "$T/bf"
if [ -f "$LB" ] && [ -x "$LB" ]; then
  timeout 40 "$LB" -m $T/q4k.gguf -ngl 99 -fa 1 -r 2 -p 512 -n 0 > "$L/b_llama_pp.txt" 2>&1
  say "llama-bench pp512 rc=$?"; grep -E '^\|' "$L/b_llama_pp.txt" | tail -2 | tee -a "$L/summary.txt"
  timeout 60 "$LB" -m $T/q4k.gguf -ngl 99 -fa 1 -r 2 -p 0 -n 64 -d 512,4096 > "$L/b_llama_tg.txt" 2>&1
  say "llama-bench tg64 rc=$?"; grep -E '^\|' "$L/b_llama_tg.txt" | tail -3 | tee -a "$L/summary.txt"
else say "llama-bench: not found ($LB)"; fi
for cfg in 512:1:2 512:8:2 4096:1:1 4096:8:1; do
  IFS=: read -r ctx n pairs <<< "$cfg"
  timeout 60 $B/fp4lane bench $T/nv --a "--mode exact --device cuda --ctx $((ctx + 128))" \
    --b "--mode native --device cuda --ctx $((ctx + 128))" --pairs $pairs --warmup 1 --prefix $ctx \
    --tokens 64 --seqs $n > "$L/b_fp4_${ctx}_$n.txt" 2>&1
  say "fp4lane bench ctx $ctx seqs $n rc=$? $(grep -E 'decode|prefill' "$L/b_fp4_${ctx}_$n.txt" | head -2 |
    tr '\n' ' ')"
done
