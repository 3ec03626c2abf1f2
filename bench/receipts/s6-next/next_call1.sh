#!/usr/bin/env bash
# PREPARED, NOT RUN (session 6 ran out of device time): the first device call of the next session.
#  1. compute-sanitizer memcheck over the cluster attention (attn_lab quick);
#  2. ncu per-kernel breakdown of one 8-sequence decode step, native and exact (8 sequences decode
#     at 2.3-2.5x one; the lab's kernel times do not explain the ~9 ms step);
#  3. the GPU load of a type-40 GGUF after the repack change (first token, host memory peak).
# Package on the project VM: make -j2 BUILD=build-gpu cuda build-gpu/fp4lane &&
#   make -C dev/cuda BUILD=$PWD/build-gpu $PWD/build-gpu/dev/cuda/attn_lab; then
#   mkdir -p /tmp/stn/f/tests/gpu && cp build-gpu/fp4lane build-gpu/libfp4lane_cuda.so build-gpu/dev/cuda/attn_lab /tmp/stn/f/
#   && cp build-gpu/tests/gpu/test_gpu_{attention,runtime,generate} /tmp/stn/f/tests/gpu/
#   && (cd /tmp/stn && tar cJf $OLDPWD/gpuwork/next/bin.tar.xz f); the libraries as gpuwork/s5/lib
#   (libutf8proc.so.2, libpcre2-8.so.0, libjansson.so.4, libcrypto.so.3); carry both; about 400 s.
# Six files come back: tests.txt, ncu_seq8.txt, load_gguf.txt, bench_cluster.txt and the two receipts.
set -u
G=gpuwork/next; tar xJf $G/bin.tar.xz -C $G; F=$G/f
export LD_LIBRARY_PATH=$PWD/gpuwork/s5/lib:${LD_LIBRARY_PATH:-}
( $F/fp4lane synth /tmp/s8 --shape llama3-8b --threads 12 --seed 1 > /dev/null 2>&1
  $F/fp4lane quantize /tmp/s8 /tmp/l8nv.gguf --layout gguf-ggml > /dev/null 2>&1; rm -rf /tmp/s8
  echo "model t=$SECONDS" ) > /tmp/model.txt 2>&1 &
# 0. the GPU tests of the session's last tree (the attention helpers were shared after the device
#    time was spent: stk_block_head_max, stk_butterfly32 -- compiled, never run)
export FP4_BUILD=$F
for t in attention runtime generate; do timeout 200 $F/tests/gpu/test_gpu_$t > /tmp/t.txt 2>&1
  echo "test_gpu_$t rc=$? t=$SECONDS" >> $OUT/tests.txt; grep -E "passed, |CHECK|cluster" /tmp/t.txt | head >> $OUT/tests.txt; done
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 20 $F/attn_lab 1 quick > /tmp/san.txt 2>&1
echo "memcheck rc=$? t=$SECONDS" >> $OUT/tests.txt; tail -5 /tmp/san.txt >> $OUT/tests.txt
wait; cat /tmp/model.txt >> $OUT/tests.txt
python3 -c 'import random
for s in range(8):
    r = random.Random(100 + s); print(",".join(str(r.randrange(128000)) for _ in range(512)))' > /tmp/b8
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for mode in native exact; do
  timeout 150 $NCU --clock-control none --cache-control none \
    --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size --csv --print-units base \
    $F/fp4lane run /tmp/l8nv.gguf --device cuda --mode $mode --batch-file /tmp/b8 -n 3 --ignore-eos --ctx 4096 \
    > /tmp/ncu_$mode.csv 2>/dev/null
  { echo "== $mode"; python3 dev/cuda/ncu_step.py /tmp/ncu_$mode.csv; } >> $OUT/ncu_seq8.txt 2>&1
done
cut -d, -f1-512 <(head -1 /tmp/b8) > /tmp/p512
for rep in 1 2; do for mode in exact native; do
  python3 dev/peak_rss.py $F/fp4lane run /tmp/l8nv.gguf --device cuda --mode $mode --prompt-ids @/tmp/p512 -n 1 --ignore-eos --ctx 4096
done; done > $OUT/load_gguf.txt 2>&1
echo "end t=$SECONDS" >> $OUT/load_gguf.txt
# 4. the cluster attention on / off as a receipt (fp4lane bench's NAME=VALUE words), context 512
for mode in exact native; do
  timeout 200 $F/fp4lane bench /tmp/l8nv.gguf --a "--device cuda --mode $mode --ctx 4096" \
    --b "--device cuda --mode $mode --ctx 4096 FP4LANE_CUDA_ATT_CLUSTER=0" --pairs 5 --prefix 512 --tokens 32 \
    --json $OUT/bench_cluster_$mode.json >> $OUT/bench_cluster.txt 2>&1
done
