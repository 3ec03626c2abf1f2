#!/usr/bin/env bash
# bench/runtime.sh — CPU decode throughput of `fp4lane run` on a small Llama-shaped model written
# here (seeded bf16, then fp4lane's NVFP4 ModelOpt quantization and the Q4_K control lane).
#   bench/runtime.sh [REPS]      (after `make`; prints the table rows for bench/runtime.md)
# Shape: hidden 1024, 16 heads x 64, 4 KV heads, ffn 2816, vocab 32000, 8 layers; 32 prompt ids,
# 64 generated (greedy, --ignore-eos). Rows: median of REPS runs (default 5) of the summary line.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-5}
B=${BUILD:-build}
W=$(mktemp -d "${TMPDIR:-/tmp}/fp4lane-bench-rt-XXXXXX")
trap 'rm -rf "$W"' EXIT
cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -Itests -o "$W/rt_model" bench/rt_model.c tests/rt_fixture.c tests/check.c \
   "$B/libfp4lane.a" -ljansson -lcrypto -lpthread -lm -ldl
"$W/rt_model" "$W/bf16" 1024 16 4 2816 32000 8 2048
"$B/fp4lane" quantize "$W/bf16" "$W/nvfp4" --layout modelopt >/dev/null
"$B/fp4lane" quantize "$W/bf16" "$W/q4k.gguf" --to q4_k --layout gguf >/dev/null
ids=$(seq -s, 1 32)
echo "| lane | mode | threads | prefill tok/s | decode tok/s | routes |"
echo "|---|---|---|---|---|---|"
for lane in nvfp4 bf16 q4k.gguf; do
  for mode in exact native; do
    for th in 1 2; do
      pre=(); dec=()
      for r in $(seq "$REPS"); do
        line=$("$B/fp4lane" run "$W/$lane" --prompt-ids "$ids" -n 64 --ignore-eos --mode $mode --threads $th | tail -n 1)
        pre+=("$(sed -E 's/.*prefill [0-9]+ tok ([0-9.]+) tok\/s.*/\1/' <<<"$line")")
        dec+=("$(sed -E 's/.*decode [0-9]+ tok ([0-9.]+) tok\/s.*/\1/' <<<"$line")")
        routes=$(sed -E 's/.*routes: //' <<<"$line")
      done
      med() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
      echo "| ${lane%.gguf} | $mode | $th | $(med "${pre[@]}") | $(med "${dec[@]}") | $routes |"
    done
  done
done
