#!/usr/bin/env bash
# device_run.sh — one batched session on the GPU machine: build, GPU tests, compute-sanitizer,
# the lab, SASS. Logs go to $OUT (or ./device-out). Stages: all (default) or a comma list of
# build,test,sanitize,lab,sass. LAB_ARGS passes through to the lab.
set -u
OUT=${OUT:-device-out}
mkdir -p "$OUT"
STAGES=${1:-build,test,sanitize,lab,sass}
B=build-dev
J=$(nproc)
has() { case ",$STAGES," in *",$1,"*) return 0 ;; esac; return 1; }
{
  date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv
  nvcc --version | tail -2; git rev-parse --short HEAD 2>/dev/null
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
if has build; then
  make BUILD=$B cuda -j"$J" > "$OUT/build.txt" 2>&1 ||
    { tail -40 "$OUT/build.txt"; echo BUILD FAILED; exit 1; }
  make -C dev/cuda -j"$J" BUILD="$PWD/$B" "$PWD/$B/dev/cuda/gemv_lab" >> "$OUT/build.txt" 2>&1 ||
    { tail -20 "$OUT/build.txt"; echo LAB BUILD FAILED; }
  echo "build ok"
fi
if has test; then
  timeout 240 make BUILD=$B test-gpu > "$OUT/test-gpu.txt" 2>&1; echo "test-gpu rc=$?"
  grep -E "^(ok|FAIL)|passed, " "$OUT/test-gpu.txt" | tail -8
  grep -m 12 -E "CHECK failed|want " "$OUT/test-gpu.txt"
fi
if has sanitize; then
  timeout 300 make BUILD=$B test-gpu-sanitize > "$OUT/sanitize.txt" 2>&1; echo "sanitize rc=$?"
  grep -E "ERROR SUMMARY|passed, |== sanitize" "$OUT/sanitize.txt" | tail -12
fi
if has lab; then
  timeout 420 "$B/dev/cuda/gemv_lab" ${LAB_ARGS:-} > "$OUT/lab.txt" 2>&1; echo "lab rc=$?"
  cat "$OUT/lab.txt"
fi
if has sass; then # every production kernel: one .sass per src/cuda object
  make BUILD=$B sass > "$OUT/sass.txt" 2>&1; echo "sass rc=$?"; cat "$OUT/sass.txt"
  tar czf "$OUT/sass.tgz" -C "$B" sass
fi
