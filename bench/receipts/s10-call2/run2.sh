#!/usr/bin/env bash
# Session 10, device call 2. gpuwork/s10b/bin.tar.xz: f/ = branch normfuse at dfdf9bc (758acca + 62986ad + the parallel type-40 check at open)
# switch (normfuse with every x/t load first and the norm weights before the PDL wait; tile-fastpath;
# head-mma 5696741: bf16.dense.mma, native BF16 at 2+ columns on the tensor cores, off with
# FP4LANE_CUDA_NO_DENSE_MMA=1; load-fast 8a6171c: upload without a host walk of the blocks, scale
# bytes checked on the device, two pinned 32 MiB staging buffers); o/ = session 9 call 6's binaries
# (the CUDA code and loader of main 49a3d0d).
# 1. GPU tests + memcheck (dense, ggml_repack quick); 2. lab --head; 3. models (type-40 GGUF,
# ModelOpt dir); 4. bench normfuse vs NO_NORMFUSE (exact, native); 5. load old/new; 6. 8 sequences:
# bench dense.mma vs NO_DENSE_MMA, run --batch-file.
set -u
G=gpuwork/s10b; tar xJf $G/bin.tar.xz -C $G; F=$G/f; O=$G/o
export LD_LIBRARY_PATH=$PWD/gpuwork/lib:${LD_LIBRARY_PATH:-}
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; date -u; } > $OUT/tests.txt
( $F/fp4lane synth /tmp/s8 --shape llama3-8b --threads 12 --seed 1 > /dev/null 2>&1
  $F/fp4lane quantize /tmp/s8 /tmp/l8nv.gguf --layout gguf-ggml > /dev/null 2>&1; echo "gguf t=$SECONDS"
  $F/fp4lane quantize /tmp/s8 /tmp/l8mo --layout modelopt > /dev/null 2>&1; rm -rf /tmp/s8
  echo "model t=$SECONDS" ) > /tmp/model.txt 2>&1 &
export FP4_BUILD=$F
for t in normfuse dense dense_pinned ggml_repack dequant fp8 native exact runtime generate; do timeout 170 $F/tests/gpu/test_gpu_$t > /tmp/t_$t.txt 2>&1
  echo "test_gpu_$t rc=$? t=$SECONDS" >> $OUT/tests.txt; grep -E "passed, |FAIL|CHECK" /tmp/t_$t.txt | head -12 >> $OUT/tests.txt; done
grep -iE "nrmse|mma" /tmp/t_dense.txt | head -40 > $OUT/dense_nrmse.txt
for t in dense ggml_repack; do FP4_GPU_QUICK=1 timeout 100 compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 10 $F/tests/gpu/test_gpu_$t > /tmp/san_$t.txt 2>&1
  echo "memcheck $t-quick rc=$? t=$SECONDS" >> $OUT/tests.txt; grep -E "passed, |ERROR SUMMARY" /tmp/san_$t.txt | head -3 >> $OUT/tests.txt; done
timeout 90 $F/gemv_lab --head --cols 1,2,4,8,16 --vars head.route,head.dense,head.1,head.2,head.3,head.4,head.5,head.6,cublas > $OUT/lab_head.txt 2>&1
echo "lab rc=$? t=$SECONDS" >> $OUT/tests.txt
wait; cat /tmp/model.txt >> $OUT/tests.txt
python3 -c 'import random
for s in range(8):
    r = random.Random(100 + s); print(",".join(str(r.randrange(128000)) for _ in range(512)))' > /tmp/b8
head -1 /tmp/b8 > /tmp/p512
cat /tmp/l8nv.gguf /tmp/l8mo/* > /dev/null
for m in exact native; do
  timeout 60 $F/fp4lane bench /tmp/l8nv.gguf --a "--device cuda --mode $m --ctx 4096" \
    --b "--device cuda --mode $m --ctx 4096 FP4LANE_CUDA_NO_NORMFUSE=1" --pairs 3 --prefix 512 --tokens 64 --order abba \
    --json $OUT/bench_normfuse_$m.json > $OUT/bench_$m.txt 2>&1; echo "bench $m rc=$? t=$SECONDS" >> $OUT/tests.txt
done
for rep in 1 2; do for f in /tmp/l8nv.gguf /tmp/l8mo; do for m in exact native; do for b in $O $F; do
  [ $SECONDS -gt 420 ] && break 4
  echo "== $b $m $f round $rep"
  timeout 60 $b/fp4lane run $f --device cuda --mode $m --prompt-ids @/tmp/p512 -n 1 --ignore-eos --ctx 4096 --timing 2>&1 | grep -E "timing:|prefill|rror"
done; done; done; done > $OUT/load.txt 2>&1
echo "load t=$SECONDS" >> $OUT/tests.txt
left=$((570 - SECONDS))
[ $left -gt 40 ] && timeout $((left - 5)) $F/fp4lane bench /tmp/l8nv.gguf --a "--device cuda --mode native --ctx 4096" \
  --b "--device cuda --mode native --ctx 4096 FP4LANE_CUDA_NO_DENSE_MMA=1" --seqs 8 --pairs 2 --prefix 512 --tokens 64 --order abba \
  --json $OUT/bench_head8.json > $OUT/bench_head8.txt 2>&1; echo "bench head8 rc=$? t=$SECONDS" >> $OUT/tests.txt
for rep in 1 2; do [ $SECONDS -gt 575 ] && break; echo "== batch8 native"
  timeout 30 $F/fp4lane run /tmp/l8nv.gguf --device cuda --mode native --batch-file /tmp/b8 -n 64 --ignore-eos --ctx 4096 2>&1 | grep -E "tok/s|rror" | tail -3; done > $OUT/runs.txt
echo "end t=$SECONDS" >> $OUT/tests.txt
