#!/usr/bin/env bash
# Session 7, device call 2. Binaries built on the project VM (main after 5753341 + the QIN row limit):
# gpuwork/s7b/bin.tar.xz (fp4lane, libfp4lane_cuda.so, gemv_lab, five GPU tests); libraries
# gpuwork/s5/lib. Writes tests.txt, lab.txt, bench.txt, runs.txt and receipts.tar (the JSON receipts).
set -u
G=gpuwork/s7b; tar xJf $G/bin.tar.xz -C $G; F=$G/f
export LD_LIBRARY_PATH=$PWD/gpuwork/s5/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/tests.txt
( $F/fp4lane synth /tmp/s8 --shape llama3-8b --threads 12 --seed 1 > /dev/null 2>&1
  $F/fp4lane quantize /tmp/s8 /tmp/l8nv.gguf --layout gguf-ggml > /dev/null 2>&1; rm -rf /tmp/s8
  echo "model t=$SECONDS" ) > /tmp/model.txt 2>&1 &
export FP4_BUILD=$F
for t in argmax exact native runtime generate; do timeout 150 $F/tests/gpu/test_gpu_$t > /tmp/t_$t.txt 2>&1
  echo "test_gpu_$t rc=$? t=$SECONDS" >> $OUT/tests.txt; grep -E "passed, |FAIL|CHECK" /tmp/t_$t.txt | head -8 >> $OUT/tests.txt; done
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 10 $F/tests/gpu/test_gpu_argmax > /tmp/san1.txt 2>&1
echo "memcheck argmax rc=$? t=$SECONDS" >> $OUT/tests.txt; tail -2 /tmp/san1.txt >> $OUT/tests.txt
FP4_GPU_QUICK=1 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 10 $F/tests/gpu/test_gpu_runtime > /tmp/san2.txt 2>&1
echo "memcheck runtime-quick rc=$? t=$SECONDS" >> $OUT/tests.txt; tail -2 /tmp/san2.txt >> $OUT/tests.txt
for q in 0 1 0; do echo "== FP4LANE_CUDA_NO_QIN=$q"; FP4LANE_CUDA_NO_QIN=$q timeout 60 $F/gemv_lab --decode --cols 1 --vars native.route,exact.route; done > $OUT/lab.txt 2>&1
wait; cat /tmp/model.txt >> $OUT/tests.txt
mkdir -p /tmp/rc
B() { name=$1; shift; timeout 150 $F/fp4lane bench /tmp/l8nv.gguf "$@" --json /tmp/rc/$name.json >> $OUT/bench.txt 2>&1; echo "bench $name rc=$? t=$SECONDS" >> $OUT/bench.txt; }
for mode in exact native; do
  B argmax_$mode --a "--device cuda --mode $mode --ctx 4096" --b "--device cuda --mode $mode --ctx 4096 FP4LANE_CUDA_NO_ARGMAX=1" --pairs 5 --prefix 512 --tokens 64
  B qin_$mode --a "--device cuda --mode $mode --ctx 4096" --b "--device cuda --mode $mode --ctx 4096 FP4LANE_CUDA_NO_QIN=1" --pairs 5 --prefix 512 --tokens 64
done
for mode in native exact; do
  B ctx3968_$mode --a "--device cuda --mode $mode --ctx 4096" --b "--device cuda --mode $mode --ctx 4096 FP4LANE_CUDA_NO_ARGMAX=1" --pairs 3 --prefix 3968 --tokens 64
done
(cd /tmp/rc && tar cf $OUT/receipts.tar *.json)
python3 -c 'import random
for s in range(8):
    r = random.Random(100 + s); print(",".join(str(r.randrange(128000)) for _ in range(512)))' > /tmp/b8
head -1 /tmp/b8 > /tmp/b1
for rep in 1 2; do for a in 0 1; do for f in b8 b1; do
  echo "== $f NO_ARGMAX=$a rep $rep"; FP4LANE_CUDA_NO_ARGMAX=$a timeout 60 $F/fp4lane run /tmp/l8nv.gguf --device cuda --mode native --batch-file /tmp/$f -n 128 --ignore-eos --ctx 4096 2>&1 | tail -1 | cut -c1-200
done; done; done > $OUT/runs.txt 2>&1
echo "end t=$SECONDS" >> $OUT/tests.txt
