#!/usr/bin/env bash
# Session 11, device call 1. gpuwork/s11a/bin.tar.xz: f/ = branch s11 (pinned-l2 merged: the exact
# head's weight loads with the L2's 256-byte fetch; the item kernel's chunk rotation by the item's
# index in the matrix, native QIN on exact's shapes; cluster attention of 4 and 2 blocks, the step's
# FP4LANE_CUDA_ATT_CLUSTER_WIDE; pf_lab), o/ = main df92d76 (session 10's kernels).
# 1. tests; 2. lab decode 1 column and head, old/new alternating; 3. attn_lab; 4. pf_lab (the L2
# prefetch of gate/up while the HBM is idle); 5. decode, old/new alternating, one sequence;
# 6. 8 sequences with the wide cluster attention.
set -u
G=gpuwork/s11a; tar xJf $G/bin.tar.xz -C $G; F=$G/f; O=$G/o; W=/tmp/out; mkdir -p $W
export LD_LIBRARY_PATH=$PWD/gpuwork/lib:${LD_LIBRARY_PATH:-}
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; date -u; } > $W/tests.txt
( $F/fp4lane synth /tmp/s8 --shape llama3-8b --threads 12 --seed 1 > /dev/null 2>&1
  $F/fp4lane quantize /tmp/s8 /tmp/l8nv.gguf --layout gguf-ggml > /dev/null 2>&1; rm -rf /tmp/s8
  echo "model t=$SECONDS" ) > /tmp/model.txt 2>&1 &
export FP4_BUILD=$F
for t in native exact attention dense_pinned runtime generate fp8; do timeout 120 $F/tests/gpu/test_gpu_$t > /tmp/t_$t.txt 2>&1
  echo "test_gpu_$t rc=$? t=$SECONDS" >> $W/tests.txt; grep -E "passed, |FAIL|CHECK|differ" /tmp/t_$t.txt | head -8 >> $W/tests.txt; done
grep "cluster attention cases" /tmp/t_attention.txt >> $W/tests.txt
for rep in 1 2; do for b in $O $F; do echo "== $b"; FP4_BUILD=$b timeout 90 $b/gemv_lab --decode --cols 1 --vars native.route,exact.route | grep -E "route|shape|ceiling"; done; done > $W/lab_decode.txt 2>&1
echo "lab decode t=$SECONDS" >> $W/tests.txt
for rep in 1 2; do for b in $O $F; do echo "== $b"; FP4_BUILD=$b timeout 60 $b/gemv_lab --head --cols 1,2 --vars head.exact,head.route | grep "head\."; done; done > $W/lab_head.txt 2>&1
echo "lab head t=$SECONDS" >> $W/tests.txt
timeout 60 $F/attn_lab 200 > $W/attn_lab.txt 2>&1; echo "attn_lab rc=$? t=$SECONDS" >> $W/tests.txt
for m in exact native; do timeout 60 $F/pf_lab --mode $m; done > $W/pf_lab.txt 2>&1; echo "pf_lab rc=$? t=$SECONDS" >> $W/tests.txt
wait; cat /tmp/model.txt >> $W/tests.txt; cat /tmp/l8nv.gguf > /dev/null
python3 -c 'import random
for s in range(8):
    r = random.Random(100 + s); print(",".join(str(r.randrange(128000)) for _ in range(512)))' > /tmp/b8
head -1 /tmp/b8 > /tmp/p512
for rep in 1 2 3; do for b in $O $F; do for m in exact native; do echo "== $b $m"
  FP4_BUILD=$b timeout 30 $b/fp4lane run /tmp/l8nv.gguf --device cuda --mode $m --prompt-ids @/tmp/p512 -n 128 --ignore-eos --ctx 4096 2>&1 | grep -E "tok/s|rror" | tail -2
done; done; done > $W/runs1.txt 2>&1; echo "runs1 t=$SECONDS" >> $W/tests.txt
for rep in 1 2; do for wv in 0 2 4 8; do echo "== wide $wv"
  FP4LANE_CUDA_ATT_CLUSTER_WIDE=$wv timeout 30 $F/fp4lane run /tmp/l8nv.gguf --device cuda --mode native --batch-file /tmp/b8 -n 64 --ignore-eos --ctx 4096 2>&1 | grep -E "tok/s|rror" | tail -2
done; done > $W/runs8.txt 2>&1; echo "runs8 t=$SECONDS" >> $W/tests.txt
echo "end t=$SECONDS" >> $W/tests.txt
tar czf $OUT/out.tar.gz -C $W .; cat $W/tests.txt; cat $W/runs1.txt $W/runs8.txt; grep -E "route" $W/lab_decode.txt; cat $W/lab_head.txt; cat $W/pf_lab.txt; grep -E "cluster of (4|2)|step|FAIL|identical" $W/attn_lab.txt
