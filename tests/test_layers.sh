#!/usr/bin/env bash
# test_layers.sh — the folder graph reads one way (docs/ARCHITECTURE.md): tests/layers.py on the
# tree and on $FP4_BUILD's objects, after its self-test proves it catches a planted violation of
# each kind. Prints "N passed, N failed" (tests/run_tests.sh adds it to the total).
set -u
cd "$(dirname "$0")/.."
pass=0; fail=0
if python3 tests/layers.py --self-test; then pass=$((pass+1)); else fail=$((fail+1)); fi
if python3 tests/layers.py . "${FP4_BUILD:-build}"; then pass=$((pass+1)); else fail=$((fail+1)); fi
# docs/SPEC.md and docs/ARCHITECTURE.md are the repository's copies of the contract
for f in SPEC.md; do
  if [ -f ../shared/$f ] && ! cmp -s ../shared/$f docs/$f; then
    echo "docs/$f differs from ../shared/$f: copy the shared contract in (cp ../shared/$f docs/)" >&2
    fail=$((fail+1))
  else pass=$((pass+1)); fi
done
echo "$pass passed, $fail failed"
