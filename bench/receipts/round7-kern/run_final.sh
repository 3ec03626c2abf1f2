#!/usr/bin/env bash
# kern round 7, final check of branch kern HEAD (binaries built on the CPU machine): GPU tests, then the
# production routes timed beside main's kernels (exact.7 / native.15 at 1 column)
set -u
G=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$G/out}; mkdir -p "$OUT"
for t in test_gpu_exact test_gpu_native test_gpu_dense test_gpu_w4a4 test_gpu_dequant test_gpu_errors; do
  timeout 50 "$G/$t" > "$OUT/$t.txt" 2>&1; echo "$t rc=$? $(grep -E 'passed' "$OUT/$t.txt" | tail -1)"
done
timeout 120 "$G/gemv_lab" --vars exact.route,exact.7,native.route,native.15 --cols 1,8,16 > "$OUT/lab.txt" 2>&1
echo "lab rc=$?"; grep -E "^ceil|^\| [0-9]" "$OUT/lab.txt" | cut -d'|' -f2-6 | tr -s ' '; tail -1 "$OUT/lab.txt"
