#!/usr/bin/env bash
# session 5, call 4: D = main + att_native.cuh (native decode attention, one split-K launch)
set -u
G=gpuwork/s5d; tar xJf $G/bin.tar.xz -C $G; L5=gpuwork/s5/lib
export LD_LIBRARY_PATH=$PWD/$L5:${LD_LIBRARY_PATH:-}
C=$G/d; export CUDA_MODULE_LOADING=EAGER FP4_BUILD=$G/d
O=$OUT/o; mkdir -p $O; T=$O/timeline.txt
mark() { echo "$1 t=$SECONDS" | tee -a $T; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $O/env.txt 2>&1; date -u >> $O/env.txt
timeout 150 $C/tests/gpu/test_gpu_attention > $O/attention.txt 2>&1; mark "attention rc=$?"
grep -E "passed, " $O/attention.txt; grep -E "CHECK|FAIL" $O/attention.txt | head -20; grep "gemm attention" $O/attention.txt | head -30
( $C/fp4lane synth /tmp/rt_l8 --shape llama3-8b --threads 14 --seed 1 > $O/synth.txt 2>&1
  $C/fp4lane quantize /tmp/rt_l8 /tmp/rt_l8nv --layout modelopt >> $O/synth.txt 2>&1
  echo "synth+quantize rc=$? t=$SECONDS" >> $T; rm -rf /tmp/rt_l8 ) &
SYN=$!
( timeout 150 $C/tests/gpu/test_gpu_runtime > $O/runtime.txt 2>&1; echo "runtime rc=$? t=$SECONDS" >> $T
  FP4LANE_CUDA_ATT_NATIVE=0 timeout 150 $C/tests/gpu/test_gpu_runtime > $O/runtime_an0.txt 2>&1; echo "runtime an0 rc=$? t=$SECONDS" >> $T
  FP4LANE_CUDA_GEMM=0 timeout 150 $C/tests/gpu/test_gpu_runtime > $O/runtime_gemm0.txt 2>&1; echo "runtime gemm0 rc=$? t=$SECONDS" >> $T ) &
TR=$!
( timeout 100 $C/tests/gpu/test_gpu_generate > $O/generate.txt 2>&1; echo "generate rc=$? t=$SECONDS" >> $T
  FP4_GPU_QUICK=1 timeout 150 compute-sanitizer --error-exitcode 1 --print-limit 20 $C/tests/gpu/test_gpu_attention > $O/san_att.txt 2>&1; echo "sanitize attention rc=$? t=$SECONDS" >> $T
  FP4_GPU_QUICK=1 timeout 120 compute-sanitizer --error-exitcode 1 --print-limit 20 $C/tests/gpu/test_gpu_runtime > $O/san_rt.txt 2>&1; echo "sanitize runtime rc=$? t=$SECONDS" >> $T ) &
TN=$!
wait $TR $TN; mark "tests done"
for f in $O/*.txt; do r=$(grep -E 'passed, |ERROR SUMMARY' $f | tail -2 | tr '\n' ' '); [ -n "$r" ] && echo "$(basename $f): $r"; done
grep -h "CHECK failed\|FAIL" $O/runtime*.txt $O/generate.txt | head -12
grep -h "nvfp4 native cuda vs" $O/runtime.txt $O/runtime_an0.txt
echo "bit-identical (runtime): $(grep -c ' 0 differ in bits' $O/runtime.txt)"
wait $SYN; mark "model ready"
python3 -c 'import random; r=random.Random(1); print(",".join(str(r.randrange(128000)) for _ in range(3968)))' > /tmp/p3968
cut -d, -f1-512 /tmp/p3968 > /tmp/p512
python3 -c 'import random
for s in range(8):
    r = random.Random(100 + s); print(",".join(str(r.randrange(128000)) for _ in range(512)))' > /tmp/b8
run() { local tag=$1; shift; echo "== $tag $*" >> $O/bench.txt
  timeout 40 $C/fp4lane run /tmp/rt_l8nv --device cuda "$@" --ignore-eos --ctx 4096 2>&1 | grep -E "memory plan|prefill|rror|refus|Killed" >> $O/bench.txt; }
for rep in 1 2; do for p in 512 3968; do for an in 0 1; do
  FP4LANE_CUDA_ATT_NATIVE=$an run "native an=$an p$p r$rep" --mode native --prompt-ids @/tmp/p$p -n 128; done; done; done
for an in 0 1; do FP4LANE_CUDA_ATT_NATIVE=$an run "native an=$an seq8" --mode native --batch-file /tmp/b8 -n 128; done
run "exact p512" --mode exact --prompt-ids @/tmp/p512 -n 128
mark "runs"; grep -E "^==|prefill" $O/bench.txt | sed 's/, first token.*//'
for an in 0 1; do FP4LANE_CUDA_ATT_NATIVE=$an FP4LANE_CUDA_PROFILE=$O/prof_an${an}_3968.txt timeout 30 $C/fp4lane run /tmp/rt_l8nv --device cuda --mode native --prompt-ids @/tmp/p3968 -n 33 --ignore-eos --ctx 4096 > /dev/null 2>&1; done
grep -H "attention\|per step" $O/prof_an*_3968.txt | head -8
rm -rf /tmp/rt_l8 /tmp/rt_l8nv; mark end; (cd $OUT && tar cJf s5d.tar.xz o && rm -rf o)
