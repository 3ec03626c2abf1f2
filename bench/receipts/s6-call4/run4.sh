#!/usr/bin/env bash
# session 6, call 4 (final): every GPU test of e01ac57 (+ sanitizer on the attention and runtime tests),
# the attention lab, decode with the cluster attention on (default) / off (FP4LANE_CUDA_ATT_CLUSTER=0)
# / one block per SM (FP4LANE_CUDA_ATT_CLUSTER_BPS=1), 8 sequences, and llama.cpp's llama-bench on the
# same NVFP4 GGUF in the same sitting (built here from node-llama-cpp@3.22.1's bundle, trimmed).
# Results go straight to $OUT (a call that runs out of time still returns what it wrote).
set -u
G=gpuwork/s6d; tar xJf $G/bin.tar.xz -C $G; F=$G/f
export LD_LIBRARY_PATH=$PWD/gpuwork/s5/lib:${LD_LIBRARY_PATH:-}
T=$OUT/tests.txt; D=$OUT/decode.txt; S=$OUT/side.txt; BL=$OUT/build.txt
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; nproc; } > $T 2>&1
( tar xJf gpuwork/llcpp/src.tar.xz -C /tmp; t0=$(date +%s)
  cmake -S /tmp/src -B /tmp/llb -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
  -DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=OFF -DGGML_CCACHE=OFF > /tmp/llcfg.txt 2>&1 && \
  cmake --build /tmp/llb --target llama-bench -j 11 > /tmp/llbuild.txt 2>&1
  echo "llama-bench build rc=$? in $(( $(date +%s) - t0 )) s"; tail -3 /tmp/llbuild.txt; tail -5 /tmp/llcfg.txt ) > $BL 2>&1 &
BP=$!
( $F/fp4lane synth /tmp/s8 --shape llama3-8b --threads 5 --seed 1 > /tmp/synth.txt 2>&1; echo "synth rc=$?"
  $F/fp4lane quantize /tmp/s8 /tmp/l8nv.gguf --layout gguf-ggml > /tmp/q.txt 2>&1; echo "quantize nvfp4 gguf rc=$? t=$SECONDS"
  rm -rf /tmp/s8 ) > /tmp/models.txt 2>&1 &
MP=$!
export FP4_BUILD=$F
tr() { local name=$1; shift; echo "== $name $(date -u +%T)" >> $T; timeout "$@" > /tmp/t.txt 2>&1; local rc=$?
  grep -E "passed, |CHECK failed|cluster attention cases|ERROR SUMMARY" /tmp/t.txt | head -6 >> $T; echo "rc=$rc t=$SECONDS" >> $T; }
tr attention 200 $F/tests/gpu/test_gpu_attention
tr runtime 200 $F/tests/gpu/test_gpu_runtime
tr runtime-gemm0 200 env FP4LANE_CUDA_GEMM=0 $F/tests/gpu/test_gpu_runtime
tr runtime-cl0 200 env FP4LANE_CUDA_ATT_CLUSTER=0 $F/tests/gpu/test_gpu_runtime
tr runtime-bps1 200 env FP4LANE_CUDA_ATT_CLUSTER_BPS=1 $F/tests/gpu/test_gpu_runtime
tr generate 120 $F/tests/gpu/test_gpu_generate
for t in native exact w4a4 dense dense_pinned dequant errors fp8; do tr $t 120 $F/tests/gpu/test_gpu_$t; done
tr native-gemm0 120 env FP4LANE_CUDA_GEMM=0 $F/tests/gpu/test_gpu_native
timeout 60 $F/attn_lab 200 > $OUT/lab.txt 2>&1; echo "attn_lab rc=$? t=$SECONDS" >> $T
cat $T
wait $MP; cat /tmp/models.txt >> $T; echo "models t=$SECONDS" >> $T
python3 -c 'import random; r=random.Random(1); print(",".join(str(r.randrange(128000)) for _ in range(3968)))' > /tmp/p3968
cut -d, -f1-512 /tmp/p3968 > /tmp/p512
python3 -c 'import random
for s in range(8):
    r = random.Random(100 + s); print(",".join(str(r.randrange(128000)) for _ in range(512)))' > /tmp/b8
M=/tmp/l8nv.gguf
run() { local tag=$1; shift; echo "== $tag $*"
  timeout 40 $F/fp4lane run $M --device cuda "$@" --ignore-eos --ctx 4096 2>&1 | grep -E "prefill|rror" | sed 's/, threads.*//'; }
for rep in 1 2; do for mode in exact native; do for p in 512 3968; do
  run "cl $mode p$p r$rep" --mode $mode --prompt-ids @/tmp/p$p -n 128
  FP4LANE_CUDA_ATT_CLUSTER=0 run "cl0 $mode p$p r$rep" --mode $mode --prompt-ids @/tmp/p$p -n 128
done; done; done >> $D 2>&1
for p in 512 3968; do FP4LANE_CUDA_ATT_CLUSTER_BPS=1 run "bps1 native p$p" --mode native --prompt-ids @/tmp/p$p -n 128; done >> $D 2>&1
for mode in native exact; do run "cl $mode seq8" --mode $mode --batch-file /tmp/b8 -n 128; done >> $D 2>&1
echo "decode done t=$SECONDS" >> $D
while kill -0 $BP 2>/dev/null && [ $SECONDS -lt 400 ]; do sleep 5; done
cat $BL >> $S; LB=/tmp/llb/bin/llama-bench
if [ -x $LB ]; then for rep in 1 2; do
  echo "== rep $rep llama-bench nvfp4 t=$SECONDS" >> $S
  timeout 60 $LB -m $M -ngl 99 -fa 1 -r 1 -p 512 -n 0 -o md 2>&1 | grep -E "^\|" >> $S
  timeout 90 $LB -m $M -ngl 99 -fa 1 -r 1 -p 0 -n 128 -d 512,3968 -o md 2>&1 | grep -E "^\|" >> $S
  for mode in exact native; do for p in 512 3968; do run "fp4lane $mode p$p rep $rep" --mode $mode --prompt-ids @/tmp/p$p -n 128; done; done >> $S 2>&1
done; else echo "no llama-bench at t=$SECONDS" >> $S; fi
left=$(( 570 - SECONDS )); [ $left -gt 30 ] && tr sanitize-attention $left env FP4_GPU_QUICK=1 compute-sanitizer --error-exitcode 1 --print-limit 20 $F/tests/gpu/test_gpu_attention
left=$(( 575 - SECONDS )); [ $left -gt 20 ] && tr sanitize-runtime $left env FP4_GPU_QUICK=1 compute-sanitizer --error-exitcode 1 --print-limit 20 $F/tests/gpu/test_gpu_runtime
echo "end t=$SECONDS" >> $S; tail -8 $T; cat $D $S | grep -E "^==|prefill|llama|t=" | head -80
