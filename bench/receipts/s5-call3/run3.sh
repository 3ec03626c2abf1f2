#!/usr/bin/env bash
# session 5, call 3: C = main + att_gemm.cuh (native prefill attention through cuBLAS), GEMM on by default
set -u
G=gpuwork/s5c; tar xJf $G/bin.tar.xz -C $G; L5=gpuwork/s5/lib
export LD_LIBRARY_PATH=$PWD/$L5:${LD_LIBRARY_PATH:-}
C=$G/c; export CUDA_MODULE_LOADING=EAGER FP4_BUILD=$G/c
O=$OUT/o; mkdir -p $O; T=$O/timeline.txt
mark() { echo "$1 t=$SECONDS" | tee -a $T; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $O/env.txt 2>&1; date -u >> $O/env.txt
( $C/fp4lane synth /tmp/rt_l8 --shape llama3-8b --threads 14 --seed 1 > $O/synth.txt 2>&1
  $C/fp4lane quantize /tmp/rt_l8 /tmp/rt_l8nv --layout modelopt >> $O/synth.txt 2>&1
  echo "synth+quantize rc=$? t=$SECONDS" >> $T; rm -rf /tmp/rt_l8 ) &
SYN=$!
timeout 90 $C/tests/gpu/test_gpu_attention > $O/attention.txt 2>&1; mark "attention rc=$?"
grep -E "gemm attention|passed, |CHECK" $O/attention.txt | head -40
( timeout 150 $C/tests/gpu/test_gpu_runtime > $O/runtime.txt 2>&1; echo "runtime rc=$? t=$SECONDS" >> $T
  FP4LANE_CUDA_GEMM=0 timeout 150 $C/tests/gpu/test_gpu_runtime > $O/runtime_gemm0.txt 2>&1; echo "runtime gemm0 rc=$? t=$SECONDS" >> $T
  FP4LANE_CUDA_ATT_GEMM=0 timeout 150 $C/tests/gpu/test_gpu_runtime > $O/runtime_att0.txt 2>&1; echo "runtime att0 rc=$? t=$SECONDS" >> $T ) &
TR=$!
( timeout 120 $C/tests/gpu/test_gpu_native > $O/native.txt 2>&1; echo "native rc=$? t=$SECONDS" >> $T
  FP4LANE_CUDA_GEMM=0 timeout 120 $C/tests/gpu/test_gpu_native > $O/native_gemm0.txt 2>&1; echo "native gemm0 rc=$? t=$SECONDS" >> $T
  timeout 100 $C/tests/gpu/test_gpu_generate > $O/generate.txt 2>&1; echo "generate rc=$? t=$SECONDS" >> $T
  FP4_GPU_QUICK=1 timeout 90 compute-sanitizer --error-exitcode 1 --print-limit 20 $C/tests/gpu/test_gpu_attention > $O/san_att.txt 2>&1; echo "sanitize attention rc=$? t=$SECONDS" >> $T ) &
TN=$!
wait $TR $TN; mark "tests done"
for f in $O/*.txt; do r=$(grep -E 'passed, |ERROR SUMMARY' $f | tail -2 | tr '\n' ' '); [ -n "$r" ] && echo "$(basename $f): $r"; done
grep -h "CHECK failed\|FAIL\|max |dlogit|\|of the largest" $O/runtime*.txt | head -12
echo "bit-identical (runtime): $(grep -c ' 0 differ in bits' $O/runtime.txt)"
wait $SYN; mark "model ready"
for ag in 0 1; do FP4LANE_CUDA_ATT_GEMM=$ag timeout 120 $C/fp4lane bench /tmp/rt_l8nv --a "--device cuda --mode native --ctx 4096" --b "--device cuda --mode native --ctx 4096" --pairs 2 --prefix 512 --tokens 4 --json $O/bench512_att$ag.json > $O/bench512_att$ag.txt 2>&1; mark "bench512 att=$ag rc=$?"; grep -E "prefill|decode " $O/bench512_att$ag.txt | head -3; done
for ag in 0 1; do FP4LANE_CUDA_ATT_GEMM=$ag timeout 150 $C/fp4lane bench /tmp/rt_l8nv --a "--device cuda --mode native --ctx 4096" --b "--device cuda --mode native --ctx 4096" --pairs 2 --prefix 3968 --tokens 4 --json $O/bench3968_att$ag.json > $O/bench3968_att$ag.txt 2>&1; mark "bench3968 att=$ag rc=$?"; grep -E "prefill|decode |rror" $O/bench3968_att$ag.txt | head -3; done
python3 -c 'import random; r=random.Random(1); print(",".join(str(r.randrange(128000)) for _ in range(3968)))' > /tmp/p3968
cut -d, -f1-512 /tmp/p3968 > /tmp/p512
run() { local tag=$1; shift; echo "== $tag $*" >> $O/bench.txt
  timeout 40 $C/fp4lane run /tmp/rt_l8nv --device cuda "$@" --ignore-eos --ctx 4096 2>&1 | grep -E "memory plan|prefill|rror|refus|Killed" >> $O/bench.txt; }
for mode in native exact; do for p in 512 3968; do run "$mode p$p" --mode $mode --prompt-ids @/tmp/p$p -n 128; done; done
mark "runs"; grep -E "^==|prefill" $O/bench.txt | sed 's/, first token.*//'
FP4LANE_CUDA_PROFILE=$O/prof_prefill_3968.txt timeout 30 $C/fp4lane run /tmp/rt_l8nv --device cuda --mode native --prompt-ids @/tmp/p3968 -n 1 --ignore-eos --ctx 4096 > /dev/null 2>&1
sed -n '/prefill/,$p' $O/prof_prefill_3968.txt
rm -rf /tmp/rt_l8 /tmp/rt_l8nv; (cd $OUT && tar cJf s5c.tar.xz o && rm -rf o); mark end
