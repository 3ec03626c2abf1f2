#!/usr/bin/env bash
# Session 10, the load to the first token (branch load-fast). gpuwork/s10/bin.tar.xz: f/ = the
# branch's build (fp4lane, libfp4lane_cuda.so, tests/gpu/test_gpu_*), o/ = main's (49a3d0d), laid
# out as s9-call5's. The upload no longer walks a type-40 view's blocks on the host (the repack
# kernel checks the scale bytes on the device), copies every weight through two pinned 32 MiB
# buffers filled on several threads while the other one's copy runs, and writes fused q/k/v and
# gate/up parts straight into the fused tensor; ModelOpt rows take the same path.
# 1. GPU tests: ggml_repack (staging: chunk sizes, session reuse, fused, NaN refusals), dequant
#    (the public upload's refusals), runtime (ggml_defer_case: deferred vs eager vs CPU bits),
#    generate; memcheck of ggml_repack and runtime, quick. 2. the llama3-8b-shaped type-40 GGUF
#    and ModelOpt directory (synth --seed 1), page cache warm; 3. run --timing -n 1 on a 512-token
#    prompt, old and new alternating, 3 rounds, exact and native, both files. Writes tests.txt,
#    load.txt (the timing lines) and load_summary.txt (one line per run: file mode binary load
#    first-token VmHWM).
set -u
G=gpuwork/s10; tar xJf $G/bin.tar.xz -C $G; F=$G/f; O=$G/o
export LD_LIBRARY_PATH=$PWD/gpuwork/lib:${LD_LIBRARY_PATH:-}
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; nproc; } > $OUT/tests.txt
( $F/fp4lane synth /tmp/s8 --shape llama3-8b --threads 12 --seed 1 > /dev/null 2>&1
  $F/fp4lane quantize /tmp/s8 /tmp/l8nv.gguf --layout gguf-ggml > /dev/null 2>&1
  $F/fp4lane quantize /tmp/s8 /tmp/l8mo --layout modelopt > /dev/null 2>&1; rm -rf /tmp/s8
  echo "model t=$SECONDS"; ls -la /tmp/l8nv.gguf; du -sh /tmp/l8mo ) > /tmp/model.txt 2>&1 &
export FP4_BUILD=$F
for t in ggml_repack dequant runtime generate; do timeout 170 $F/tests/gpu/test_gpu_$t > /tmp/t_$t.txt 2>&1
  echo "test_gpu_$t rc=$? t=$SECONDS" >> $OUT/tests.txt; grep -E "passed, |FAIL|CHECK" /tmp/t_$t.txt | head -12 >> $OUT/tests.txt; done
grep -E "stager|fused|refusal|F16" /tmp/t_ggml_repack.txt | head -40 > $OUT/ggml_repack.txt
FP4_GPU_QUICK=1 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 10 $F/tests/gpu/test_gpu_ggml_repack > /tmp/san.txt 2>&1
echo "memcheck ggml_repack-quick rc=$? t=$SECONDS" >> $OUT/tests.txt; grep -E "passed, |ERROR SUMMARY" /tmp/san.txt | head -3 >> $OUT/tests.txt
FP4_GPU_QUICK=1 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 10 $F/tests/gpu/test_gpu_runtime > /tmp/san2.txt 2>&1
echo "memcheck runtime-quick rc=$? t=$SECONDS" >> $OUT/tests.txt; grep -E "passed, |ERROR SUMMARY" /tmp/san2.txt | head -3 >> $OUT/tests.txt
wait; cat /tmp/model.txt >> $OUT/tests.txt
python3 -c 'import random
r = random.Random(100); print(",".join(str(r.randrange(128000)) for _ in range(512)))' > /tmp/p512
cat /tmp/l8nv.gguf /tmp/l8mo/* > /dev/null # page cache warm
for rep in 1 2 3; do for f in /tmp/l8nv.gguf /tmp/l8mo; do for m in exact native; do for b in $O $F; do
  [ $SECONDS -gt 560 ] && break 4
  echo "== $b $m $f round $rep"
  timeout 60 $b/fp4lane run $f --device cuda --mode $m --prompt-ids @/tmp/p512 -n 1 --ignore-eos --ctx 4096 --timing 2>&1 | grep -E "timing:|prefill|rror"
done; done; done; done > $OUT/load.txt 2>&1
awk '/^== /{b=$2; m=$3; f=$4} /timing: load/{gsub(",",""); print f, m, b, "load", $3, "first", $7, "VmHWM", $15, $16}' $OUT/load.txt > $OUT/load_summary.txt
echo "load t=$SECONDS" >> $OUT/tests.txt
