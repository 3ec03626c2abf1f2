#!/bin/sh
# bench/spec.sh [ROUNDS] — speculative vs plain decode on models/tiny, CPU exact (bench/runtime.md,
# "Speculative decoding"). Drafts: models/tiny's first 2, 4 and 6 layers (bench/spec_draft.py) and
# models/tiny itself (every proposal accepted: the cost of drafting with no gain from rejection).
# Plain and speculative runs alternate; each prints its decode tok/s and acceptance.
set -eu
R=${1:-3}
B=${FP4_BUILD:-build}/fp4lane
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
for L in 2 4 6; do python3 bench/spec_draft.py models/tiny "$D/tiny-l$L" "$L"; done
P="The history of the city"
run() {
  l=$("$B" run models/tiny -p "$P" -n 128 --ignore-eos "$@" 2>&1 >/dev/null | tail -1)
  echo "decode $(echo "$l" | sed -E 's/.*decode [0-9]+ tok ([0-9.]+) tok\/s.*/\1/') tok/s," \
       "prefill $(echo "$l" | sed -E 's/^prefill [0-9]+ tok ([0-9.]+) tok\/s.*/\1/') tok/s" \
       "$(echo "$l" | grep -oE 'draft-n .*' || true)"
}
echo "commit $(git rev-parse --short HEAD), $(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq "$R"); do
  echo "round $i"
  echo "  plain:            $(run)"
  for L in 2 4 6; do
    for K in 2 4; do echo "  draft l$L k$K:      $(run --draft "$D/tiny-l$L" --draft-n "$K")"; done
  done
  echo "  draft self k4:    $(run --draft models/tiny --draft-n 4)"
  echo "  plain:            $(run)"
done
echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
