#!/usr/bin/env bash
# bench/io.sh — quantize/convert throughput and peak memory on a generated bf16 checkpoint, and the
# cost of loading (validating) the result. Usage: bench/io.sh [SIZE_MB] (default 1024).
# Writes nothing into the repo; prints one line per operation. Peak anonymous memory is polled from
# /proc every 5 ms (file-backed pages of the read-only mappings are page cache, not allocations).
set -euo pipefail
cd "$(dirname "$0")/.."
size=${1:-1024}
work=${TMPDIR:-/tmp}/fp4lane-io-bench
rm -rf "$work"; mkdir -p "$work"
make -s all
make -s build/dev/ref/gen_checkpoint && cp build/dev/ref/gen_checkpoint "$work/gen"
"$work/gen" "$work/bf16" "$size"
peak() { # CMD... -> "wall_s peak_anon_KB peak_rss_KB"
  local t0 t1 pa=0 pr=0 a r
  t0=$(date +%s.%N); "$@" >/dev/null & local pid=$!
  while kill -0 $pid 2>/dev/null; do
    a=$(awk '/RssAnon/{print $2}' /proc/$pid/status 2>/dev/null || true); r=$(awk '/VmRSS/{print $2}' /proc/$pid/status 2>/dev/null || true)
    [ -n "$a" ] && [ "$a" -gt "$pa" ] && pa=$a; [ -n "$r" ] && [ "$r" -gt "$pr" ] && pr=$r; sleep 0.005
  done; wait $pid; t1=$(date +%s.%N)
  echo "$(echo "$t1 - $t0" | bc) $pa $pr"
}
in_mb=$(du -sm "$work/bf16" | cut -f1)
F=build/fp4lane
run() { local what=$1 mb=$2; shift 2; read -r s a r < <(peak "$@"); printf '%-40s %8.2f s %8.1f MB/s  peak anon %6d MB  peak rss %6d MB\n' "$what" "$s" "$(echo "$mb / $s" | bc -l)" $((a/1024)) $((r/1024)); }
run "quantize bf16 -> modelopt" "$in_mb" $F quantize "$work/bf16" "$work/mo" --layout modelopt
run "quantize bf16 -> gguf" "$in_mb" $F quantize "$work/bf16" "$work/q.gguf" --layout gguf
q_mb=$(du -sm "$work/q.gguf" | cut -f1)
run "convert gguf -> modelopt" "$q_mb" $F convert "$work/q.gguf" "$work/mo2" --layout modelopt
run "convert gguf -> gguf-ggml" "$q_mb" $F convert "$work/q.gguf" "$work/g.gguf" --layout gguf-ggml
run "convert gguf -> compressed-tensors" "$q_mb" $F convert "$work/q.gguf" "$work/ct" --layout ct
run "convert modelopt -> gguf" "$q_mb" $F convert "$work/mo" "$work/q2.gguf" --layout gguf
run "validate gguf (load)" "$q_mb" $F validate "$work/q.gguf"
run "validate gguf-ggml (load, deferred)" "$q_mb" $F validate "$work/g.gguf"
run "validate modelopt (load)" "$q_mb" $F validate "$work/mo"
rm -rf "$work"
