#!/usr/bin/env bash
# session 5, call 5: E = main + native 1-16 columns on the exact kernels (nvfp4.a16.native.int);
# before = C (3f51f88, gpuwork/s5c); TTFT with the default (lazy) module loading
set -u
tar xJf gpuwork/s5c/bin.tar.xz -C gpuwork/s5c; tar xJf gpuwork/s5e/bin.tar.xz -C gpuwork/s5e
export LD_LIBRARY_PATH=$PWD/gpuwork/s5/lib:${LD_LIBRARY_PATH:-}
C=gpuwork/s5c/c; E=gpuwork/s5e/e
O=$OUT/o; mkdir -p $O; T=$O/timeline.txt
mark() { echo "$1 t=$SECONDS" | tee -a $T; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $O/env.txt 2>&1; date -u >> $O/env.txt
( $E/fp4lane synth /tmp/rt_l8 --shape llama3-8b --threads 14 --seed 1 > $O/synth.txt 2>&1
  $E/fp4lane quantize /tmp/rt_l8 /tmp/rt_l8nv --layout modelopt >> $O/synth.txt 2>&1
  echo "synth+quantize rc=$? t=$SECONDS" >> $T; rm -rf /tmp/rt_l8 ) &
SYN=$!
export FP4_BUILD=$E
( timeout 120 $E/tests/gpu/test_gpu_native > $O/native.txt 2>&1; echo "native rc=$? t=$SECONDS" >> $T
  FP4LANE_CUDA_GEMM=0 timeout 120 $E/tests/gpu/test_gpu_native > $O/native_gemm0.txt 2>&1; echo "native gemm0 rc=$? t=$SECONDS" >> $T
  timeout 100 $E/tests/gpu/test_gpu_generate > $O/generate.txt 2>&1; echo "generate rc=$? t=$SECONDS" >> $T ) &
TN=$!
( timeout 150 $E/tests/gpu/test_gpu_runtime > $O/runtime.txt 2>&1; echo "runtime rc=$? t=$SECONDS" >> $T
  timeout 100 $E/tests/gpu/test_gpu_exact > $O/exact.txt 2>&1; echo "exact rc=$? t=$SECONDS" >> $T ) &
TR=$!
wait $TN $TR; mark "tests done"
for f in $O/*.txt; do r=$(grep -E 'passed, ' $f | tail -1); [ -n "$r" ] && echo "$(basename $f): $r"; done
grep -h "CHECK failed" $O/*.txt | head -8; grep -h "nvfp4 native cuda vs" $O/runtime.txt
echo "bit-identical (runtime): $(grep -c ' 0 differ in bits' $O/runtime.txt)"
wait $SYN; mark "model ready"
python3 -c 'import random; r=random.Random(1); print(",".join(str(r.randrange(128000)) for _ in range(3968)))' > /tmp/p3968
cut -d, -f1-512 /tmp/p3968 > /tmp/p512
python3 -c 'import random
for s in range(8):
    r = random.Random(100 + s); print(",".join(str(r.randrange(128000)) for _ in range(512)))' > /tmp/b8
run() { local d=$1 tag=$2; shift 2; echo "== $tag [$d] $*" >> $O/bench.txt
  timeout 40 $d/fp4lane run /tmp/rt_l8nv --device cuda "$@" --ignore-eos --ctx 4096 2>&1 | grep -E "memory plan|prefill|rror|refus|Killed" >> $O/bench.txt; }
export CUDA_MODULE_LOADING=EAGER
for rep in 1 2; do for d in $C $E; do run $d "native p512 r$rep" --mode native --prompt-ids @/tmp/p512 -n 128; done; done
for d in $C $E; do run $d "native p3968" --mode native --prompt-ids @/tmp/p3968 -n 128; done
for d in $C $E; do run $d "native seq8" --mode native --batch-file /tmp/b8 -n 128; done
run $E "exact p512" --mode exact --prompt-ids @/tmp/p512 -n 128
unset CUDA_MODULE_LOADING
run $E "native p512 lazy" --mode native --prompt-ids @/tmp/p512 -n 128
run $E "exact p512 lazy" --mode exact --prompt-ids @/tmp/p512 -n 128
mark "runs"; grep -E "^==|prefill" $O/bench.txt | sed 's/, device cuda.*//'
rm -rf /tmp/rt_l8 /tmp/rt_l8nv; mark end; (cd $OUT && tar cJf s5e.tar.xz o && rm -rf o)
