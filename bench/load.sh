#!/usr/bin/env bash
# bench/load.sh — time from `fp4lane run` to the first token, warm page cache, and the memory it
# takes: bench/load.sh MODEL [REPS] [RUN OPTIONS...]   (after `make`)
# The model's files are read once first (cat > /dev/null) so every run finds them in the page
# cache; each rep then runs `fp4lane run MODEL --prompt-ids 1 -n 1 --timing` under /usr/bin/time.
# Per rep: process wall time and max RSS (/usr/bin/time), and run's own --timing line (load =
# model open + engine create, first token = from run's entry to the first emitted token; VmHWM,
# and RssAnon / RssFile at the end with the engine alive). For a model the synth makes:
#   fp4lane synth /tmp/l8 --shape llama3-8b && fp4lane quantize /tmp/l8 /tmp/l8nv --layout modelopt
set -euo pipefail
cd "$(dirname "$0")/.."
M=$1; REPS=${2:-3}; shift; [ $# -gt 0 ] && shift
B=${BUILD:-build}
if [ -d "$M" ]; then cat "$M"/* > /dev/null; else cat "$M" > /dev/null; fi
for r in $(seq "$REPS"); do
  out=$(/usr/bin/time -f 'time: %e s wall, %M KB max RSS' "$B/fp4lane" run "$M" --prompt-ids 1 -n 1 --timing "$@" 2>&1 >/dev/null)
  echo "rep $r: $(grep '^timing:' <<<"$out" | sed 's/^timing: //'); $(grep '^time:' <<<"$out" | sed 's/^time: //')"
done
