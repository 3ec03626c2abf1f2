#!/usr/bin/env bash
# Session 11, device call 2. gpuwork/s11b/bin.tar.xz: f/ = branch s11 after call 1 (native QIN back
# on .82; the frag route's split-K for long rows, frag_parts; the wide cluster attention's table by
# position, att_wide; attn_lab at 5 positions), o/ = main df92d76 (session 10's kernels).
# 1. tests; 2. lab frag .92 at 2-8 columns, old/new; 3. attn_lab; 4. 8 sequences: bench (att_wide
# on / FP4LANE_CUDA_ATT_CLUSTER_WIDE=0), runs old/new; 5. one sequence, runs old/new.
set -u
G=gpuwork/s11b; tar xJf $G/bin.tar.xz -C $G; F=$G/f; O=$G/o; W=/tmp/out; mkdir -p $W
export LD_LIBRARY_PATH=$PWD/gpuwork/lib:${LD_LIBRARY_PATH:-}
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; date -u; } > $W/tests.txt
( $F/fp4lane synth /tmp/s8 --shape llama3-8b --threads 12 --seed 1 > /dev/null 2>&1
  $F/fp4lane quantize /tmp/s8 /tmp/l8nv.gguf --layout gguf-ggml > /dev/null 2>&1; rm -rf /tmp/s8
  echo "model t=$SECONDS" ) > /tmp/model.txt 2>&1 &
export FP4_BUILD=$F
for t in native attention runtime generate; do timeout 120 $F/tests/gpu/test_gpu_$t > /tmp/t_$t.txt 2>&1
  echo "test_gpu_$t rc=$? t=$SECONDS" >> $W/tests.txt; grep -E "passed, |FAIL|CHECK|differ" /tmp/t_$t.txt | grep -v " 0 differ" | head -8 >> $W/tests.txt; done
FP4LANE_CUDA_FRAG=1 timeout 100 $F/tests/gpu/test_gpu_runtime > /tmp/t_rf.txt 2>&1; echo "FRAG=1 test_gpu_runtime rc=$? t=$SECONDS" >> $W/tests.txt; grep -E "passed, |FAIL" /tmp/t_rf.txt | head -4 >> $W/tests.txt
grep -E "^frag .*14336|^frag .*14320|^frag .*28672" /tmp/t_native.txt > $W/frag_nrmse.txt
FP4_GPU_QUICK=1 timeout 100 compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 10 $F/tests/gpu/test_gpu_native > /tmp/san.txt 2>&1
echo "memcheck native-quick rc=$? t=$SECONDS" >> $W/tests.txt; grep -E "passed, |ERROR SUMMARY" /tmp/san.txt | head -3 >> $W/tests.txt
for rep in 1 2; do for b in $O $F; do echo "== $b"; FP4_BUILD=$b timeout 90 $b/gemv_lab --decode --cols 2,4,8 --vars native.92 | grep -E "native.92|FAIL"; done; done > $W/lab_frag.txt 2>&1
echo "lab frag t=$SECONDS" >> $W/tests.txt
timeout 90 $F/attn_lab 200 > $W/attn_lab.txt 2>&1; echo "attn_lab rc=$? t=$SECONDS" >> $W/tests.txt
wait; cat /tmp/model.txt >> $W/tests.txt; cat /tmp/l8nv.gguf > /dev/null
python3 -c 'import random
for s in range(8):
    r = random.Random(100 + s); print(",".join(str(r.randrange(128000)) for _ in range(512)))' > /tmp/b8
head -1 /tmp/b8 > /tmp/p512
timeout 120 $F/fp4lane bench /tmp/l8nv.gguf --a "--device cuda --mode native --ctx 4096" \
  --b "--device cuda --mode native --ctx 4096 FP4LANE_CUDA_ATT_CLUSTER_WIDE=0" --seqs 8 --pairs 3 --prefix 512 --tokens 64 --order abba \
  --json $W/bench_wide8.json > $W/bench_wide8.txt 2>&1; echo "bench wide8 rc=$? t=$SECONDS" >> $W/tests.txt
for rep in 1 2 3; do for b in $O $F; do echo "== $b batch8 native"
  FP4_BUILD=$b timeout 30 $b/fp4lane run /tmp/l8nv.gguf --device cuda --mode native --batch-file /tmp/b8 -n 64 --ignore-eos --ctx 4096 2>&1 | grep -E "tok/s|rror" | tail -2
done; done > $W/runs8.txt 2>&1; echo "runs8 t=$SECONDS" >> $W/tests.txt
for rep in 1 2 3; do for b in $O $F; do for m in exact native; do echo "== $b $m"
  FP4_BUILD=$b timeout 30 $b/fp4lane run /tmp/l8nv.gguf --device cuda --mode $m --prompt-ids @/tmp/p512 -n 128 --ignore-eos --ctx 4096 2>&1 | grep -E "tok/s|rror" | tail -2
done; done; done > $W/runs1.txt 2>&1; echo "runs1 t=$SECONDS" >> $W/tests.txt
echo "end t=$SECONDS" >> $W/tests.txt
tar czf $OUT/out.tar.gz -C $W .; cat $W/tests.txt; grep -v "memory plan" $W/bench_wide8.txt | tail -12; cut -c1-60 $W/runs8.txt $W/runs1.txt; cat $W/lab_frag.txt $W/frag_nrmse.txt; grep -E "step|cluster of (2|4|8) " $W/attn_lab.txt | grep -E "\| (2|4|8) \|"; grep -E "FAIL|identical" $W/attn_lab.txt
