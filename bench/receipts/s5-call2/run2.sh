#!/usr/bin/env bash
# session 5, call 2: B' tests (attention test fixed), the lab at the decode shapes (HBM vs L2-resident),
# the GEMM prefill route in steady state (fp4lane bench, warm-up discarded)
set -u
G=gpuwork/s5; G2=gpuwork/s5b; tar xJf $G/bin.tar.xz -C $G; tar xJf $G2/bin.tar.xz -C $G2
cp $G2/b/tests/gpu/* $G/b/tests/gpu/
export LD_LIBRARY_PATH=$PWD/$G/lib:${LD_LIBRARY_PATH:-}
A=$G/a; B=$G/b; export CUDA_MODULE_LOADING=EAGER
O=$OUT/o; mkdir -p $O; T=$O/timeline.txt
mark() { echo "$1 t=$SECONDS" | tee -a $T; }
( $A/fp4lane synth /tmp/rt_l8 --shape llama3-8b --threads 14 --seed 1 > $O/synth.txt 2>&1
  $A/fp4lane quantize /tmp/rt_l8 /tmp/rt_l8nv --layout modelopt >> $O/synth.txt 2>&1
  echo "synth+quantize rc=$? t=$SECONDS" >> $T; rm -rf /tmp/rt_l8 ) &
SYN=$!
( export FP4_BUILD=$B
  timeout 90 $B/tests/gpu/test_gpu_attention > $O/b_attention.txt 2>&1; echo "B attention rc=$? t=$SECONDS" >> $T
  timeout 150 $B/tests/gpu/test_gpu_runtime > $O/b_runtime.txt 2>&1; echo "B runtime rc=$? t=$SECONDS" >> $T
  FP4_GPU_QUICK=1 timeout 90 compute-sanitizer --error-exitcode 1 --print-limit 20 $B/tests/gpu/test_gpu_attention > $O/b_san_att.txt 2>&1; echo "B sanitize attention rc=$? t=$SECONDS" >> $T ) &
TB=$!
for l in "" --l2; do timeout 60 $G2/gemv_lab --decode $l --cols 1,8 --vars native.route,exact.route,cublas.9 > $O/lab_decode$l.txt 2>&1; mark "lab $l rc=$?"; done
wait $TB; for f in $O/b_*.txt; do echo "$(basename $f): $(grep -E 'passed, |ERROR SUMMARY' $f | tail -2 | tr '\n' ' ')"; done
grep -h "CHECK failed\|FAIL" $O/b_*.txt | head; echo "bit-identical (B runtime): $(grep -c ' 0 differ in bits' $O/b_runtime.txt)"
grep -h "^|\|ceilings" $O/lab_decode*.txt
wait $SYN; mark "model ready"
for g in 0 1; do FP4LANE_CUDA_GEMM=$g timeout 100 $A/fp4lane bench /tmp/rt_l8nv --a "--device cuda --mode native" --b "--device cuda --mode native" --pairs 2 --prefix 512 --tokens 4 --json $O/bench_gemm$g.json > $O/bench_gemm$g.txt 2>&1; mark "bench gemm=$g rc=$?"; cat $O/bench_gemm$g.txt | tail -12; done
python3 -c 'import random; r=random.Random(1); print(",".join(str(r.randrange(128000)) for _ in range(3968)))' > /tmp/p3968
FP4LANE_CUDA_GEMM=1 FP4LANE_CUDA_PROFILE=$O/prof_prefill_gemm_3968.txt timeout 30 $A/fp4lane run /tmp/rt_l8nv --device cuda --mode native --prompt-ids @/tmp/p3968 -n 1 --ignore-eos --ctx 4096 > $O/prof_run.txt 2>&1
mark "profile"; sed -n '/prefill/,$p' $O/prof_prefill_gemm_3968.txt
rm -rf /tmp/rt_l8 /tmp/rt_l8nv; (cd $OUT && tar cJf s5b.tar.xz o && rm -rf o); mark end
