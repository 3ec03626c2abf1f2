#!/usr/bin/env bash
# round 8 (gpukern), call 2: the item kernels (.61..67) beside the call-1 best and the old routes'
# kernels, one sitting; the GPU tests of the route (primary ITEM_NW 16 / ITEM_NST 2 in the library the
# lab links) and test_gpu_exact / test_gpu_native of the two alternate route configs (alt/r12x3, r8x4)
set -u
G=$(cd "$(dirname "$0")" && pwd)
[ -f "$G/bin.tar.xz" ] && tar xJf "$G/bin.tar.xz" -C "$G"
export LD_LIBRARY_PATH=$G/lib:${LD_LIBRARY_PATH:-}
OUT=${OUT:-$G/out}; mkdir -p "$OUT"
LIM=${LIM:-188}
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv; } > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
[ -f "$G/lab_stream.o" ] && command -v cuobjdump > /dev/null &&
  cuobjdump -sass "$G/lab_stream.o" 2>/dev/null | xz -6 > "$OUT/lab_stream.sass.xz"
timeout 30 "$G/gemv_lab" --quick --vars exact.route,exact.61,exact.62,native.route,native.61,native.62 --cols 1 \
  > "$OUT/quick.txt" 2>&1
rc=$?; echo "quick rc=$rc t=$SECONDS"; grep -E "^\| [0-9]|failures" "$OUT/quick.txt" | cut -d'|' -f2-7 | tr -s ' '
[ $rc -ne 0 ] && { tail -5 "$OUT/quick.txt"; exit 1; }
V=exact.route,exact.7,exact.30,exact.56,exact.57,exact.61,exact.62,exact.63,exact.64,exact.65,exact.66,exact.69
V=$V,native.route,native.15,native.56,native.57,native.61,native.62,native.63,native.64,native.65,native.66,native.67
timeout 100 "$G/gemv_lab" --vars "${VARS:-$V}" --cols "${COLS:-1,8,16}" > "$OUT/lab.txt" 2>&1
echo "lab rc=$? t=$SECONDS"
: > "$OUT/tests.txt"
run_t() { # dir test
  [ $SECONDS -gt $((LIM - 12)) ] && { echo "skip $1/$2 (time)" | tee -a "$OUT/tests.txt"; return; }
  echo "== $1/$2" >> "$OUT/tests.txt"
  FP4_BUILD=$G/lib timeout $((LIM - SECONDS)) "$G/$1/$2" >> "$OUT/tests.txt" 2>&1
  echo "$1/$2 rc=$? $(grep -E 'passed' "$OUT/tests.txt" | tail -1) t=$SECONDS"
}
for t in test_gpu_exact test_gpu_native; do run_t . $t; done
for a in alt/r12x3 alt/r8x4; do for t in test_gpu_exact test_gpu_native; do run_t $a $t; done; done
for t in test_gpu_w4a4 test_gpu_dense test_gpu_runtime test_gpu_errors test_gpu_dequant test_gpu_dense_pinned \
         test_gpu_fp8 test_gpu_generate; do run_t . $t; done
grep -m 10 -E "CHECK failed|want |FAIL|error while" "$OUT/tests.txt"
for t in test_gpu_exact test_gpu_native; do
  [ $SECONDS -gt $((LIM - 10)) ] && { echo "skip sanitize $t (time)"; continue; }
  FP4_GPU_QUICK=1 timeout $((LIM - SECONDS)) compute-sanitizer --error-exitcode 1 --print-limit 20 "$G/$t" \
    > "$OUT/san_$t.txt" 2>&1
  echo "sanitize $t rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/san_$t.txt" | tail -1) t=$SECONDS"
done
echo "--- lab"; grep -E "^ceil|^\| [0-9]" "$OUT/lab.txt" | cut -d'|' -f2-6 | tr -s ' '; tail -1 "$OUT/lab.txt"
