#!/usr/bin/env bash
# Runs each test binary, sums their "N passed, N failed" lines, ends with the total line.
set -u
tp=0; tf=0; bad=0
for t in "$@"; do
  t0=$(date +%s%N)
  out=$("$t" 2>&1); rc=$?
  secs=$(( ($(date +%s%N) - t0) / 1000000 ))
  secs="$((secs / 1000)).$(printf '%03d' $((secs % 1000)) | cut -c1)s"
  line=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n 1)
  if [ -z "$line" ] || [ $rc -ne 0 ]; then
    printf '%s\n' "$out" | tail -n 30
    echo "FAIL $(basename "$t") (exit $rc, $secs)"; bad=$((bad+1))
  else
    echo "ok   $(basename "$t"): $line ($secs)"
  fi
  if [ -n "$line" ]; then
    p=${line%% passed*}; f=${line#*, }; f=${f%% failed*}
    tp=$((tp+p)); tf=$((tf+f))
  fi
  [ $rc -ne 0 ] && [ -z "$line" ] && tf=$((tf+1))
done
echo "$tp passed, $tf failed"
[ $tf -eq 0 ] && [ $bad -eq 0 ]
