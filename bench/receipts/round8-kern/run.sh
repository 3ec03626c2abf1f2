#!/usr/bin/env bash
# round 8 (gpukern): the stream kernels in the lab (1 column), the routes at 1/8/16 columns, the GPU
# tests of the route that runs them; binaries built on the CPU machine, carried as gpuwork/gpukern
set -u
G=$(cd "$(dirname "$0")" && pwd)
[ -f "$G/bin.tar.xz" ] && tar xJf "$G/bin.tar.xz" -C "$G"
export LD_LIBRARY_PATH=$G/lib:${LD_LIBRARY_PATH:-}
OUT=${OUT:-$G/out}; mkdir -p "$OUT"
LIM=${LIM:-185}
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv; } > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
[ -f "$G/lab_stream.o" ] && command -v cuobjdump > /dev/null &&
  cuobjdump -sass "$G/lab_stream.o" 2>/dev/null | xz -6 > "$OUT/lab_stream.sass.xz"
# a quick check of the stream kernels first: a hang or a wrong bit ends the call here
timeout 30 "$G/gemv_lab" --quick --vars exact.route,exact.50,exact.58,native.route,native.50 --cols 1 \
  > "$OUT/quick.txt" 2>&1
rc=$?; echo "quick rc=$rc"; grep -E "^\| [0-9]|failures" "$OUT/quick.txt" | cut -d'|' -f2-7 | tr -s ' '
[ $rc -ne 0 ] && { tail -5 "$OUT/quick.txt"; exit 1; }
V=exact.route,exact.7,exact.30,exact.50,exact.51,exact.52,exact.53,exact.54,exact.55,exact.56,exact.57,exact.58,exact.60
V=$V,native.route,native.15,native.50,native.51,native.52,native.53,native.54,native.55,native.56,native.57,native.58
timeout 110 "$G/gemv_lab" --vars "${VARS:-$V}" --cols "${COLS:-1,8,16}" > "$OUT/lab.txt" 2>&1; echo "lab rc=$?"
: > "$OUT/tests.txt"
for t in test_gpu_exact test_gpu_native test_gpu_w4a4 test_gpu_dense test_gpu_runtime test_gpu_errors \
         test_gpu_dequant test_gpu_dense_pinned test_gpu_fp8 test_gpu_generate; do
  [ $SECONDS -gt $((LIM - 15)) ] && { echo "skip $t (time)" | tee -a "$OUT/tests.txt"; continue; }
  echo "== $t" >> "$OUT/tests.txt"
  FP4_BUILD=$G/lib timeout $((LIM - SECONDS)) "$G/$t" >> "$OUT/tests.txt" 2>&1
  echo "$t rc=$? $(grep -E 'passed' "$OUT/tests.txt" | tail -1)"
done
grep -m 10 -E "CHECK failed|want |FAIL" "$OUT/tests.txt"
if command -v compute-sanitizer > /dev/null; then
  for t in test_gpu_exact test_gpu_native; do
    [ $SECONDS -gt $((LIM - 12)) ] && { echo "skip sanitize $t (time)"; continue; }
    FP4_GPU_QUICK=1 timeout $((LIM - SECONDS)) compute-sanitizer --error-exitcode 1 --print-limit 20 "$G/$t" \
      > "$OUT/san_$t.txt" 2>&1
    echo "sanitize $t rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/san_$t.txt" | tail -1)"
  done
fi
echo "--- lab"; grep -E "^ceil|^\| [0-9]" "$OUT/lab.txt" | cut -d'|' -f2-7 | tr -s ' '; tail -1 "$OUT/lab.txt"
