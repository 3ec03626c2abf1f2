#!/usr/bin/env bash
# cpu_fallback.sh — runs the CPU-path tests on emulated CPUs without AVX-512 (qemu-user, Debian
# package qemu-user): -cpu Haswell (AVX2, no AVX-512) must pick the avx2 path, -cpu Nehalem (no
# AVX) the portable one, and every test must pass there. A dev check, not part of `make test`
# (emulation is slow).
#
#   dev/check/cpu_fallback.sh [build-dir]      # default: build (make BUILD=... the tests first)
set -u
build=${1:-build}
command -v qemu-x86_64 >/dev/null || { echo "qemu-x86_64 not found (apt-get install qemu-user)"; exit 1; }
tests="test_cpu_paths test_contract test_kquant test_ggml_oracle"
bad=0
for pair in Haswell:avx2 Nehalem:portable; do
  cpu=${pair%%:*} want=${pair#*:}
  for t in $tests; do
    out=$(qemu-x86_64 -cpu "$cpu" "$build/tests/$t" 2>/dev/null); rc=$?
    line=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n 1)
    if [ "$t" = test_cpu_paths ] && ! printf '%s\n' "$out" | grep -q "best $want, in use $want"; then
      echo "FAIL $cpu $t: expected the $want path"; bad=1
    fi
    case "$line" in *" 0 failed") [ $rc -eq 0 ] && { echo "ok   $cpu ($want) $t: $line"; continue; } ;; esac
    echo "FAIL $cpu ($want) $t (exit $rc): $line"; bad=1
  done
done
exit $bad
