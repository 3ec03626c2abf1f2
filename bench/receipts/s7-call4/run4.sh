#!/usr/bin/env bash
# Session 7, device call 4: the session's final tree (QIN with its three launch shapes, the device
# argmax over 64 blocks a row) — every GPU test, compute-sanitizer, the routes in the lab — and the
# session as a whole: `fp4lane run` of the final tree (f) against session 6's head c4c01ec (old),
# alternating, one sitting. Binaries: gpuwork/s7d/bin.tar.xz (f/ and old/). Writes tests.txt,
# lab.txt, runs.txt.
set -u
G=gpuwork/s7d; tar xJf $G/bin.tar.xz -C $G; F=$G/f; O=$G/old
export LD_LIBRARY_PATH=$PWD/gpuwork/s5/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/tests.txt
( $F/fp4lane synth /tmp/s8 --shape llama3-8b --threads 12 --seed 1 > /dev/null 2>&1
  $F/fp4lane quantize /tmp/s8 /tmp/l8nv.gguf --layout gguf-ggml > /dev/null 2>&1; rm -rf /tmp/s8
  echo "model t=$SECONDS" ) > /tmp/model.txt 2>&1 &
export FP4_BUILD=$F
for t in exact native argmax runtime generate attention; do timeout 150 $F/tests/gpu/test_gpu_$t > /tmp/t_$t.txt 2>&1
  echo "test_gpu_$t rc=$? t=$SECONDS" >> $OUT/tests.txt; grep -E "passed, |FAIL|CHECK" /tmp/t_$t.txt | head -8 >> $OUT/tests.txt; done
for t in exact native argmax; do FP4_GPU_QUICK=1 timeout 100 compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 10 $F/tests/gpu/test_gpu_$t > /tmp/san.txt 2>&1
  echo "memcheck $t-quick rc=$? t=$SECONDS" >> $OUT/tests.txt; tail -2 /tmp/san.txt >> $OUT/tests.txt; done
for q in 0 1; do echo "== FP4LANE_CUDA_NO_QIN=$q"; FP4LANE_CUDA_NO_QIN=$q timeout 60 $F/gemv_lab --decode --cols 1 --vars native.route,exact.route; done > $OUT/lab.txt 2>&1
wait; cat /tmp/model.txt >> $OUT/tests.txt
python3 -c 'import random
for s in range(8):
    r = random.Random(100 + s); print(",".join(str(r.randrange(128000)) for _ in range(512)))' > /tmp/b8
head -1 /tmp/b8 > /tmp/p512
python3 -c 'import random
r = random.Random(7); print(",".join(str(r.randrange(128000)) for _ in range(3968)))' > /tmp/p3968
R() { echo "== $*"; timeout 60 "$@" 2>&1 | tail -1 | cut -c1-150; }
{
for rep in 1 2 3; do for mode in exact native; do for b in $O $F; do
  R $b/fp4lane run /tmp/l8nv.gguf --device cuda --mode $mode --prompt-ids @/tmp/p512 -n 128 --ignore-eos --ctx 4096
done; done; done
for rep in 1 2; do for mode in exact native; do for b in $O $F; do
  R $b/fp4lane run /tmp/l8nv.gguf --device cuda --mode $mode --prompt-ids @/tmp/p3968 -n 128 --ignore-eos --ctx 4096
done; done; done
for rep in 1 2; do for b in $O $F; do
  R $b/fp4lane run /tmp/l8nv.gguf --device cuda --mode native --batch-file /tmp/b8 -n 128 --ignore-eos --ctx 4096
done; done
} > $OUT/runs.txt
echo "end t=$SECONDS" >> $OUT/tests.txt
