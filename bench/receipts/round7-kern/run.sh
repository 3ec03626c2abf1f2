#!/usr/bin/env bash
# round 7 (kern): lab + GPU tests of the row-team kernels; binaries built on the CPU machine
set -u
G=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$G/lib:${LD_LIBRARY_PATH:-}
OUT=${OUT:-$G/out}; mkdir -p "$OUT"
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; } > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
# lab0: no programmatic dependent launch anywhere (old 1-column kernels, the team kernel plainly)
timeout 70 "$G/gemv_lab" --vars exact.7,exact.17,exact.31,native.15,native.31 --cols 1 > "$OUT/lab0.txt" 2>&1
echo "lab0 rc=$?"
V1=exact.route,exact.7,exact.32,exact.33,exact.34,exact.35,exact.36,exact.40
V1=$V1,native.route,native.15,native.32,native.33,native.34,native.35,native.36
timeout 110 "$G/gemv_lab" --vars "$V1" --cols 1,8,16 > "$OUT/lab1.txt" 2>&1; echo "lab1 rc=$?"
for t in test_gpu_exact test_gpu_native test_gpu_dense test_gpu_w4a4 test_gpu_dequant test_gpu_errors; do
  [ $SECONDS -gt 240 ] && { echo "skip $t (time)"; continue; }
  timeout 50 "$G/$t" > "$OUT/$t.txt" 2>&1; echo "$t rc=$? $(grep -E 'passed' "$OUT/$t.txt" | tail -1)"
  grep -m 5 -E "CHECK failed|want |FAIL" "$OUT/$t.txt"
done
if command -v compute-sanitizer > /dev/null; then
  for t in test_gpu_exact test_gpu_native; do
    [ $SECONDS -gt 255 ] && { echo "skip sanitize $t (time)"; continue; }
    FP4_GPU_QUICK=1 timeout 20 compute-sanitizer --error-exitcode 1 "$G/$t" > "$OUT/san_$t.txt" 2>&1
    echo "sanitize $t rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/san_$t.txt" | tail -1)"
  done
fi
for f in lab0 lab1; do
  echo "--- $f"; grep -E "^ceil|^\| [0-9]" "$OUT/$f.txt" | cut -d'|' -f2-6 | tr -s ' '; tail -1 "$OUT/$f.txt"
done
