#!/usr/bin/env bash
# Runs each test binary or script, FP4_TEST_JOBS (default: the core count) at a time, prints one line
# per test in the order given (its output's tail when it fails), and ends with the summed
# "N passed, N failed" line. Every test makes its own temporary names, ports and sockets, so any two
# run side by side. The slowest ones (measured in CI) start first, so none is left running alone at
# the end.
set -u
first="test_text_oracle test_runtime_step test_serve.sh test_hostile_cost test_text_unigram test_llama_interop
test_runtime_spec test_cli test_run_text test_runtime_deepseek test_outfile test_tok_jscan"
jobs=${FP4_TEST_JOBS:-$(nproc 2>/dev/null || echo 1)}
case $jobs in '' | *[!0-9]* | 0) jobs=1 ;; esac
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fp4-tests-XXXXXX")
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT INT TERM

tests=("$@")
order=()
for f in $first; do
  for i in "${!tests[@]}"; do [ "$(basename "${tests[$i]}")" = "$f" ] && order+=("$i"); done
done
for i in "${!tests[@]}"; do
  case " $first " in *" $(basename "${tests[$i]}") "*) ;; *) order+=("$i") ;; esac
done

# one test: its output, exit status and milliseconds into $tmp/I.{out,rc,ms}
one() {
  local t0
  t0=$(date +%s%N)
  "${tests[$1]}" > "$tmp/$1.out" 2>&1
  echo $? > "$tmp/$1.rc"
  echo $(( ($(date +%s%N) - t0) / 1000000 )) > "$tmp/$1.ms"
}
running=0
for i in "${order[@]}"; do
  if [ "$running" -ge "$jobs" ]; then wait -n; running=$((running - 1)); fi
  one "$i" &
  running=$((running + 1))
done
wait

tp=0; tf=0; bad=0
for i in "${!tests[@]}"; do
  t=${tests[$i]}
  rc=$(cat "$tmp/$i.rc" 2>/dev/null || echo 255)
  ms=$(cat "$tmp/$i.ms" 2>/dev/null || echo 0)
  secs="$((ms / 1000)).$(printf '%03d' $((ms % 1000)) | cut -c1)s"
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$tmp/$i.out" | tail -n 1)
  if [ -z "$line" ] || [ "$rc" -ne 0 ]; then
    tail -n 30 "$tmp/$i.out"
    echo "FAIL $(basename "$t") (exit $rc, $secs)"; bad=$((bad+1))
  else
    echo "ok   $(basename "$t"): $line ($secs)"
  fi
  if [ -n "$line" ]; then
    p=${line%% passed*}; f=${line#*, }; f=${f%% failed*}
    tp=$((tp+p)); tf=$((tf+f))
  fi
  [ "$rc" -ne 0 ] && [ -z "$line" ] && tf=$((tf+1))
done
echo "$tp passed, $tf failed"
[ $tf -eq 0 ] && [ $bad -eq 0 ]
