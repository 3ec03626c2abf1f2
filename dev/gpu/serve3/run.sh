#!/usr/bin/env bash
# run.sh — on the device, from the repository root with gpuwork/serve3 carried (stage.sh made its
# bin.tar.xz): `fp4lane serve --device cuda` proven. dev/gpu/serve3/conc.py serves models/tiny
# and sends 24 different requests alone, then all at once: in exact mode every concurrent answer
# must equal its alone twin, and the CUDA server's answers must equal the CPU server's byte for
# byte; SIGTERM while a request runs must drain (it finishes whole, a new one gets 503, exit 0).
# Native mode on CUDA: every answer whole (not promised batch-invariant). Then, when llama-server
# is staged (stage.sh found llama.cpp's bundle in gpuwork/serve3), a small rehearsal of bench/serve/run.sh
# (llama-160m shape, short lengths) for the speed call. Logs under $OUT/serve3/, summary on stdout.
# With gpuwork/serve3/PLAN holding "bench": the speed call instead (bench/serve.md): the llama3-8b
# shape (synth --seed 1, quantize --layout gguf-ggml), bench/serve/run.sh with fp4lane serve and
# llama-server on the same GGUF, 1/8/32/64 clients, 512/128 prompt/answer; within 8 minutes.
# PLAN "both": the checks, then the speed call (its model made during the checks); about 8 minutes.
set -u
OUT=${OUT:-device-out}; O=$OUT/serve3; mkdir -p "$O"
G=gpuwork/serve3; X=/tmp/serve3; rm -rf $X; mkdir -p $X
tar xJf $G/bin.tar.xz -C $X
printf '#!/bin/sh\nLD_LIBRARY_PATH=%s/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec %s/bin/fp4lane "$@"\n' \
  $X $X >$X/fp4
mkdir -p $X/w; cp $X/fp4 $X/w/fp4lane  # bench/serve/run.sh's BIN_DIR
chmod +x $X/fp4 $X/w/fp4lane $X/bin/fp4lane
F=$X/fp4
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; cat $X/BUILT.txt
  nproc; } | tee "$O/env.txt"
S=$O/summary.txt; : >$S
PLAN=$(cat $G/PLAN 2>/dev/null || echo conc)
finish() { # few files come back: the summary, the environment, the rest in one archive
  tail -n 3 $O/*.log >$O/serve_logs_tail.txt 2>/dev/null
  (cd $O && tar czf /tmp/serve3_logs.tgz --exclude summary.txt --exclude env.txt . &&
   find . -mindepth 1 ! -name summary.txt ! -name env.txt -delete && mv /tmp/serve3_logs.tgz logs.tgz)
  grep -q 'FAIL\|DIFFER\|rc=[1-9]' $S && echo "serve3: SOME CHECK FAILED" || echo "serve3: all ok"
}
llb() { # llama-server, staged in bin.tar.xz (stage.sh): sets LS, and LLD (libraries beside it, if any)
  LS=$X/llama/llama-server; LLD=$X/llama
  [ -x $LS ] || { echo "[llama-server] not staged" | tee -a $S; return 1; }
  local v; v=$(timeout 20 $LS --version 2>&1 | grep -m1 -i version)
  echo "[llama-server] $v" | tee -a $S
}
# the speed call's model: the llama3-8b shape, synthesized and quantized to llama.cpp's NVFP4 GGUF
SHAPE=${SHAPE:-llama3-8b}  # SHAPE, CLIENTS, DEVICE: to rehearse it small without a GPU
GG=/tmp/l8.gguf
make_model() {
  local M=/tmp/l8 t0=$SECONDS; rm -rf $M $GG
  timeout 150 $F synth $M --shape $SHAPE --seed 1 --threads 16 >$O/make.txt 2>&1 &&
    timeout 150 $F quantize $M $GG --layout gguf-ggml >>$O/make.txt 2>&1
  echo "[synth+quantize $SHAPE rc=$? $((SECONDS - t0)) s, $(stat -c %s $GG) bytes]" | tee -a $S; rm -rf $M
}
bench() { # bench/serve/run.sh on $GG: fp4lane serve beside llama-server (when staged)
  llb || LS=none
  local t0=$SECONDS
  CLIENTS=${CLIENTS:-1 8 32 64}
  CLIENTS=$CLIENTS PROMPT=512 ANSWER=128 MODE=native PER_CLIENT=2 CELL_TIMEOUT=75 OUT=$O/bench \
    LLAMA_LD=$LLD timeout 330 bash bench/serve/run.sh $X/w $GG $GG "$LS" >$O/bench.txt 2>&1
  echo "[bench rc=$? in $((SECONDS - t0)) s]" | tee -a $S
  cat $O/bench/serve.md $O/bench/run_decode.txt $O/bench/gpu_mem.txt 2>&1 | tee -a $S
  grep -hiE "error|fail" $O/bench/*.log | head -5 | tee -a $S
  [ "$(grep -c '^| fp4lane' $O/bench/serve.md)" = "$(echo $CLIENTS | wc -w)" ] ||
    echo "[bench rows FAIL]" | tee -a $S
}
if [ "$PLAN" = bench ]; then
  make_model; bench; finish; exit 0
fi
MK=
if [ "$PLAN" = both ]; then make_model & MK=$!; fi  # the model is made while the checks run
conc() { # NAME ARGS...: conc.py on models/tiny, its lines into the summary
  local n=$1; shift
  timeout 150 python3 dev/gpu/serve3/conc.py $F models/tiny --answers $O/$n.json --log $O/$n.log "$@" \
    >$O/$n.txt 2>&1
  local rc=$?
  echo "[$n rc=$rc] $(grep -E '^conc: (FAIL|[0-9]+ req|SIGTERM|ok|FAILED)' $O/$n.txt | tr '\n' ' ')" |
    tee -a $S
  [ $rc = 0 ] || tail -n 4 $O/$n.log | tee -a $S
}
conc cpu_exact -- --device cpu --mode exact --parallel 8 --threads 8
conc cuda_exact -- --device cuda --mode exact --parallel 8
if cmp -s $O/cpu_exact.json $O/cuda_exact.json; then r=identical; else r=DIFFER; fi
echo "[cpu vs cuda exact answers] $r ($(stat -c %s $O/cuda_exact.json) bytes)" | tee -a $S
conc cuda_exact_p3_nocache -- --device cuda --mode exact --parallel 3 --prefix-cache 0
cmp -s $O/cpu_exact.json $O/cuda_exact_p3_nocache.json && r=identical || r=DIFFER
echo "[cpu vs cuda exact (--parallel 3, no prefix cache)] $r" | tee -a $S
conc cuda_native --no-exact -- --device cuda --mode native --parallel 8
if [ -n "$MK" ]; then
  wait $MK; bench
# the rehearsal of the speed call (bench/serve/run.sh) on a small shape, when llama-server is staged
elif llb; then
  M=/tmp/s3m; rm -rf $M $M.gguf
  timeout 60 $F synth $M --shape llama-160m --seed 1 >$O/make.txt 2>&1 &&
    timeout 60 $F quantize $M $M.gguf --layout gguf-ggml >>$O/make.txt 2>&1
  echo "[synth+quantize llama-160m rc=$?]" | tee -a $S
  CLIENTS="1 8" PROMPT=64 ANSWER=16 MODE=native OUT=$O/rehearsal PER_CLIENT=2 CELL_TIMEOUT=30 \
    LLAMA_LD=$LLD timeout 100 bash bench/serve/run.sh $X/w $M.gguf $M.gguf "$LS" >$O/rehearsal.txt 2>&1
  echo "[rehearsal rc=$?]" | tee -a $S; cat $O/rehearsal/serve.md $O/rehearsal/run_decode.txt | tee -a $S
  grep -hiE "error|fail" $O/rehearsal/*.log | head -5 | tee -a $S
fi
finish
