#!/usr/bin/env bash
# gpustep run 3: attention v2 (new) vs b3e6cf7 (base): the new step's GPU tests (stop on failure),
# then base/new pairs at the llama3-8b shape, then the eager profile at context 4096.
set -u
G=gpuwork/gpustep
export LD_LIBRARY_PATH=$PWD/$G/lib:${LD_LIBRARY_PATH:-}
chmod +x $G/base/fp4lane $G/new/fp4lane $G/new/tests/gpu/*
export FP4_BUILD=$G/new CUDA_MODULE_LOADING=EAGER
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
fail=0
for t in test_gpu_runtime test_gpu_dense_pinned; do
  timeout 100 $G/new/tests/gpu/$t > "$OUT/$t.txt" 2>&1; rc=$?; echo "$t rc=$rc"; [ $rc = 0 ] || fail=1
done
grep -hE "passed, |CHECK failed|differ in bits \(" "$OUT"/test_gpu_*.txt | grep -v " 0 differ" | head -20
grep -c " 0 differ in bits" "$OUT/test_gpu_runtime.txt" | sed 's/^/bit-identical comparisons: /'
[ $fail = 0 ] || exit 1
date -u
M=/tmp/rt_l8; Q=/tmp/rt_l8nv; L=$OUT/bench.txt
$G/new/fp4lane synth $M --shape llama3-8b --threads "$(nproc)" --seed 1 >> "$L" 2>&1
$G/new/fp4lane quantize $M $Q --layout modelopt >> "$L" 2>&1; echo "quantize rc=$?"; rm -rf $M
python3 -c 'import random; r=random.Random(1); print(",".join(str(r.randrange(128000)) for _ in range(3968)))' \
  > /tmp/p3968
cut -d, -f1-512 /tmp/p3968 > /tmp/p512
date -u
one() {
  echo "== $2 $3 [$1]" >> "$L"
  timeout 60 $G/$1/fp4lane run $Q --device cuda --mode $2 --prompt-ids @/tmp/p$3 -n 128 --ignore-eos --ctx 4096 \
    2>&1 | grep -E "prefill|rror" >> "$L"
}
for cfg in "native 3968" "exact 3968" "native 512" "exact 512"; do
  for d in base new; do one $d $cfg; done
done
grep -E "^==|prefill" "$L" | cut -c1-100
for d in base new; do
  FP4LANE_CUDA_PROFILE=$OUT/prof_native_3968_$d.txt timeout 60 $G/$d/fp4lane run $Q --device cuda --mode native \
    --prompt-ids @/tmp/p3968 -n 33 --ignore-eos --ctx 4096 > /dev/null 2>&1
done
tail -n +1 "$OUT"/prof_*
date -u
