#!/usr/bin/env bash
# round 9 (gpukern): the planned device call — NOT RUN in round 9 (no device machine was lent; see
# bench/gpu.md Round 9). The lab over main's old 1-column kernels (exact.7/.30, native.15 = the
# native route), round 8's exact route kernel (exact.61 = exact.route) and the round-9 variants (.64,
# .71, .72; exact.69/.79 the kernels alone) at 1 column, the routes at 1/8/16 columns; then the GPU
# tests of the candidate route build alt/t1 (exact: lookup words from shared memory, 3 stages on short
# runs, 4 else; native: item kernel <false, 8, 3, TAB 1> at 1 column) — test_gpu_exact / native,
# and test_gpu_runtime / generate on its libfp4lane_cuda.so — test_gpu_exact / native of the other
# alternate builds (alt/*: flags in alt/flags.txt), compute-sanitizer (quick shapes) on alt/t1's
# exact and native tests, the SASS counts of the lab's item kernels, a short table last.
# Package: binaries of build-gpu (gemv_lab, lab_stream.o, the tests, lib/ with libfp4lane_cuda.so and
# libjansson/libutf8proc/libpcre2-8/libcrypto) and build_alt.sh's alt/ in bin.tar.xz beside this script
# in gpuwork/gpukern (carry it); one call of timeout_s 170.
set -u
G=$(cd "$(dirname "$0")" && pwd)
[ -f "$G/bin.tar.xz" ] && tar xJf "$G/bin.tar.xz" -C "$G"
export LD_LIBRARY_PATH=$G/lib:${LD_LIBRARY_PATH:-}
OUT=${OUT:-$G/out}; mkdir -p "$OUT"
LIM=${LIM:-160}
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv; } > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
timeout 25 "$G/gemv_lab" --quick --vars exact.route,exact.71,exact.72,native.route,native.71,native.72 --cols 1 \
  > "$OUT/quick.txt" 2>&1
rc=$?; echo "quick rc=$rc t=$SECONDS"; grep -E "^\| [0-9]|failures" "$OUT/quick.txt" | cut -d'|' -f2-6 | tr -s ' '
[ $rc -eq 124 ] && { tail -5 "$OUT/quick.txt"; exit 1; } # a hang ends the call; a FAIL row does not
V=exact.route,exact.7,exact.30,exact.61,exact.64,exact.71,exact.72,exact.69,exact.79
V=$V,native.route,native.15,native.64,native.71,native.72
timeout 70 "$G/gemv_lab" --vars "$V" --cols 1,8,16 > "$OUT/lab.txt" 2>&1
echo "lab rc=$? t=$SECONDS"
: > "$OUT/tests.txt"
run_t() { # dir test
  [ $SECONDS -gt $((LIM - 8)) ] && { echo "skip $1/$2 (time)" | tee -a "$OUT/tests.txt"; return; }
  echo "== $1/$2" >> "$OUT/tests.txt"
  FP4_BUILD=$G/lib timeout $((LIM - SECONDS)) "$G/$1/$2" >> "$OUT/tests.txt" 2>&1
  echo "$1/$2 rc=$? $(grep -E 'passed' "$OUT/tests.txt" | tail -1) t=$SECONDS"
}
run_l() { # dir test lib-dir
  [ $SECONDS -gt $((LIM - 8)) ] && { echo "skip $1/$2 (time)" | tee -a "$OUT/tests.txt"; return; }
  echo "== $1/$2 (FP4_BUILD=$3)" >> "$OUT/tests.txt"
  FP4_BUILD=$G/$3 timeout $((LIM - SECONDS)) "$G/$1/$2" >> "$OUT/tests.txt" 2>&1
  echo "$1/$2 rc=$? $(grep -E 'passed' "$OUT/tests.txt" | tail -1) t=$SECONDS"
}
for t in test_gpu_exact test_gpu_native; do run_t alt/t1 $t; done
for t in test_gpu_runtime test_gpu_generate; do run_l . $t alt/t1/lib; done
for t in test_gpu_w4a4 test_gpu_errors; do run_t . $t; done
for a in t0 t1n4 t1n3 t0n3; do for t in test_gpu_exact test_gpu_native; do run_t alt/$a $t; done; done
grep -m 10 -E "CHECK failed|want |FAIL|error while" "$OUT/tests.txt"
for t in test_gpu_exact test_gpu_native; do
  [ $SECONDS -gt $((LIM - 10)) ] && { echo "skip sanitize $t (time)"; continue; }
  FP4_GPU_QUICK=1 timeout $((LIM - SECONDS)) compute-sanitizer --error-exitcode 1 --print-limit 20 "$G/alt/t1/$t" \
    > "$OUT/san_$t.txt" 2>&1
  echo "sanitize alt/t1/$t rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/san_$t.txt" | tail -1) t=$SECONDS"
done
if [ -f "$G/lab_stream.o" ] && command -v cuobjdump > /dev/null && [ $SECONDS -lt $((LIM - 3)) ]; then
  cuobjdump -sass "$G/lab_stream.o" 2> /dev/null > "$OUT/lab_stream.sass"
  awk '/Function :/ {f=$3} /^        \/\*[0-9a-f]+\*\// {n[f]++; if ($0 ~ /IMAD.U32 R[0-9]+, RZ, RZ, UR/) u[f]++}
       END {for (f in n) if (f ~ /item/) print f, n[f], "instr", u[f]+0, "UR copies"}' "$OUT/lab_stream.sass" | sort
  xz -6 "$OUT/lab_stream.sass"
fi
echo "--- lab (t=$SECONDS)"; grep -E "^ceil|^\| [0-9]" "$OUT/lab.txt" | cut -d'|' -f2-6 | tr -s ' '; tail -1 "$OUT/lab.txt"
