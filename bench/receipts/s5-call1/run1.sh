#!/usr/bin/env bash
# session 5, call 1: A = main 40a6856 (GEMM route final form, opt-in), B = s5merge eaa20b7 (main + attn)
set -u
G=gpuwork/s5; tar xJf $G/bin.tar.xz -C $G
export LD_LIBRARY_PATH=$PWD/$G/lib:${LD_LIBRARY_PATH:-}
A=$G/a; B=$G/b; export CUDA_MODULE_LOADING=EAGER
R=$OUT/rt; mkdir -p $R; T=$OUT/timeline.txt; L=$R/bench.txt
mark() { echo "$1 t=$SECONDS" | tee -a $T; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $OUT/env.txt 2>&1; date -u >> $OUT/env.txt
( $A/fp4lane synth /tmp/rt_l8 --shape llama3-8b --threads 14 --seed 1 > $OUT/synth.txt 2>&1
  $A/fp4lane quantize /tmp/rt_l8 /tmp/rt_l8nv --layout modelopt >> $OUT/synth.txt 2>&1
  echo "synth+quantize rc=$? t=$SECONDS" >> $T; rm -rf /tmp/rt_l8 ) &
SYN=$!
( FP4_BUILD=$A FP4LANE_CUDA_GEMM=1 timeout 120 $A/tests/gpu/test_gpu_native > $OUT/a_native_gemm1.txt 2>&1; echo "A native gemm1 rc=$? t=$SECONDS" >> $T
  FP4_BUILD=$A FP4LANE_CUDA_GEMM=0 timeout 120 $A/tests/gpu/test_gpu_native > $OUT/a_native_gemm0.txt 2>&1; echo "A native gemm0 rc=$? t=$SECONDS" >> $T
  FP4_BUILD=$A FP4LANE_CUDA_GEMM=1 timeout 150 $A/tests/gpu/test_gpu_runtime > $OUT/a_runtime_gemm1.txt 2>&1; echo "A runtime gemm1 rc=$? t=$SECONDS" >> $T
  FP4_BUILD=$A FP4LANE_CUDA_GEMM=1 FP4_GPU_QUICK=1 timeout 100 compute-sanitizer --error-exitcode 1 --print-limit 20 $A/tests/gpu/test_gpu_native > $OUT/a_san_native.txt 2>&1; echo "A sanitize native gemm1 rc=$? t=$SECONDS" >> $T ) &
TA=$!
( export FP4_BUILD=$B
  timeout 60 $B/tests/gpu/test_gpu_attention > $OUT/b_attention.txt 2>&1; echo "B attention rc=$? t=$SECONDS" >> $T
  timeout 150 $B/tests/gpu/test_gpu_runtime > $OUT/b_runtime.txt 2>&1; echo "B runtime rc=$? t=$SECONDS" >> $T
  timeout 100 $B/tests/gpu/test_gpu_generate > $OUT/b_generate.txt 2>&1; echo "B generate rc=$? t=$SECONDS" >> $T
  OUT=$OUT/bcmp timeout 60 bash bench/runtime_cuda.sh $B compare > $OUT/b_compare.txt 2>&1; echo "B compare rc=$? t=$SECONDS" >> $T
  FP4_GPU_QUICK=1 timeout 60 compute-sanitizer --error-exitcode 1 --print-limit 20 $B/tests/gpu/test_gpu_attention > $OUT/b_san_att.txt 2>&1; echo "B sanitize attention rc=$? t=$SECONDS" >> $T
  FP4_GPU_QUICK=1 timeout 90 compute-sanitizer --error-exitcode 1 --print-limit 20 $B/tests/gpu/test_gpu_runtime > $OUT/b_san_rt.txt 2>&1; echo "B sanitize runtime rc=$? t=$SECONDS" >> $T ) &
TB=$!
wait $TA $TB; mark "tests done"
for f in $OUT/a_*.txt $OUT/b_*.txt; do echo "$(basename $f): $(grep -E 'passed, |ERROR SUMMARY' $f | tail -2 | tr '\n' ' ')"; done
grep -h "CHECK failed\|FAIL" $OUT/a_*.txt $OUT/b_*.txt | head -10; grep -h "^compare" $OUT/bcmp/tests.txt | head
echo "bit-identical (B runtime): $(grep -c ' 0 differ in bits' $OUT/b_runtime.txt)"
wait $SYN; mark "model ready"
timeout 45 $B/attn_lab 200 > $OUT/attn_lab.txt 2>&1; mark "attn_lab rc=$?"; tail -20 $OUT/attn_lab.txt
python3 -c 'import random; r=random.Random(1); print(",".join(str(r.randrange(128000)) for _ in range(3968)))' > /tmp/p3968
cut -d, -f1-512 /tmp/p3968 > /tmp/p512; cut -d, -f1-4 /tmp/p3968 > /tmp/p4
python3 -c 'import random
for s in range(8):
    r = random.Random(100 + s); print(",".join(str(r.randrange(128000)) for _ in range(512)))' > /tmp/b8
head -1 /tmp/b8 > /tmp/b1
run() { local d=$1 tag=$2; shift 2; echo "== $tag [$d] $*" >> $L
  timeout 40 $d/fp4lane run /tmp/rt_l8nv --device cuda "$@" --ignore-eos --ctx 4096 2>&1 | grep -E "memory plan|prefill|rror|refus|Killed" >> $L; }
for mode in native exact; do for p in 512 3968; do for d in $A $B; do
  run $d "$mode p$p" --mode $mode --prompt-ids @/tmp/p$p -n 128; done; done; done
mark "bench"
for p in 512 3968; do FP4LANE_CUDA_GEMM=1 run $A "native-gemm p$p" --mode native --prompt-ids @/tmp/p$p -n 1
  FP4LANE_CUDA_GEMM=1 run $A "native-gemm p$p" --mode native --prompt-ids @/tmp/p$p -n 1
  run $A "native-tile p$p" --mode native --prompt-ids @/tmp/p$p -n 1; done
FP4LANE_CUDA_GEMM=1 run $A "native-gemm-decode p512" --mode native --prompt-ids @/tmp/p512 -n 128
mark "prefill"
for d in $A $B; do run $d "native seq1" --mode native --batch-file /tmp/b1 -n 128; run $d "native seq8" --mode native --batch-file /tmp/b8 -n 128; done
mark "batch"
grep -E "^==|prefill" $L | sed 's/, first token.*//' | cut -c1-150
for p in 512 3968; do for d in $A $B; do tag=native_${p}_$(basename $d)
  FP4LANE_CUDA_PROFILE=$R/prof_$tag.txt timeout 30 $d/fp4lane run /tmp/rt_l8nv --device cuda --mode native \
    --prompt-ids @/tmp/p$p -n 33 --ignore-eos --ctx 4096 > /dev/null 2>&1; done; done
for p in 512; do FP4LANE_CUDA_GEMM=1 FP4LANE_CUDA_PROFILE=$R/prof_prefill_gemm_$p.txt timeout 30 $A/fp4lane run /tmp/rt_l8nv --device cuda --mode native --prompt-ids @/tmp/p$p -n 1 --ignore-eos --ctx 4096 > /dev/null 2>&1
  FP4LANE_CUDA_PROFILE=$R/prof_prefill_tile_$p.txt timeout 30 $A/fp4lane run /tmp/rt_l8nv --device cuda --mode native --prompt-ids @/tmp/p$p -n 1 --ignore-eos --ctx 4096 > /dev/null 2>&1; done
mark "profile"; for f in $R/prof_*.txt; do echo "--- $(basename $f)"; cat $f; done | cut -c1-120 | head -120
# per-kernel durations of decode steps (eager), ncu: prompt of 4 ids, steps 2-3 (after prefill + 1 decode)
FP4LANE_CUDA_PROFILE=/tmp/np.txt timeout 150 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv \
  --launch-skip 900 --launch-count 900 $A/fp4lane run /tmp/rt_l8nv --device cuda --mode native --prompt-ids @/tmp/p4 -n 4 --ignore-eos --ctx 4096 \
  > $OUT/ncu_native.csv 2> $OUT/ncu_err.txt; mark "ncu rc=$?"
python3 - $OUT/ncu_native.csv <<'PY' || true
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows: print("no ncu rows"); sys.exit()
h = rows[0]; ki = h.index("Kernel Name"); vi = h.index("Metric Value"); ui = h.index("Metric Unit")
agg = collections.OrderedDict(); tot = 0; n = 0
for r in rows[1:]:
    v = float(r[vi].replace(",", "")); v = v / 1000 if r[ui] == "nsecond" else v
    k = r[ki].split("(")[0][:60]; a = agg.setdefault(k, [0, 0.0]); a[0] += 1; a[1] += v; tot += v; n += 1
print(f"ncu kernels {n}, sum {tot:.1f} us (~2 steps)")
for k, (c, s) in sorted(agg.items(), key=lambda x: -x[1][1]): print(f"{s:9.1f} us {c:5d}x {s/c:7.2f} us  {k}")
PY
rm -rf /tmp/rt_l8 /tmp/rt_l8nv; mark end
