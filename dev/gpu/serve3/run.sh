#!/usr/bin/env bash
# run.sh — on the device, from the repository root with gpuwork/serve3 carried (stage.sh made its
# bin.tar.xz): `fp4lane serve --device cuda` proven. dev/gpu/serve3/conc.py serves models/tiny
# and sends 24 different requests alone, then all at once: in exact mode every concurrent answer
# must equal its alone twin, and the CUDA server's answers must equal the CPU server's byte for
# byte; SIGTERM while a request runs must drain (it finishes whole, a new one gets 503, exit 0).
# Native mode on CUDA: every answer whole (not promised batch-invariant). Then, when the
# llama.cpp bundle is carried (gpuwork/serve3/llb.tar.xz.*), a small rehearsal of bench/serve/run.sh
# (llama-160m shape, short lengths) for the speed call. Logs under $OUT/serve3/, summary on stdout.
set -u
OUT=${OUT:-device-out}; O=$OUT/serve3; mkdir -p "$O"
G=gpuwork/serve3; X=/tmp/serve3; rm -rf $X; mkdir -p $X
tar xJf $G/bin.tar.xz -C $X
printf '#!/bin/sh\nLD_LIBRARY_PATH=%s/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec %s/bin/fp4lane "$@"\n' $X $X >$X/fp4
mkdir -p $X/w; cp $X/fp4 $X/w/fp4lane  # bench/serve/run.sh's BIN_DIR
chmod +x $X/fp4 $X/w/fp4lane $X/bin/fp4lane
F=$X/fp4
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; cat $X/BUILT.txt; nproc; } \
  | tee "$O/env.txt"
S=$O/summary.txt; : >$S
conc() { # NAME ARGS...: conc.py on models/tiny, its lines into the summary
  local n=$1; shift
  timeout 150 python3 dev/gpu/serve3/conc.py $F models/tiny --answers $O/$n.json --log $O/$n.log "$@" \
    >$O/$n.txt 2>&1
  local rc=$?
  echo "[$n rc=$rc] $(grep -E '^conc: (FAIL|[0-9]+ req|SIGTERM|ok|FAILED)' $O/$n.txt | tr '\n' ' ')" | tee -a $S
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
# the rehearsal of the speed call (bench/serve/run.sh) on a small shape, when llama.cpp is carried
if ls $G/llb.tar.xz.* >/dev/null 2>&1; then
  L=/tmp/llb; rm -rf $L; mkdir -p $L; (cd $L && cat $OLDPWD/$G/llb.tar.xz.* | xz -d | tar x)
  LS=$(find $L -name llama-server -type f | head -1)
  echo "[llama-server] $LS" | tee -a $S
  M=/tmp/s3m; rm -rf $M $M.gguf
  timeout 60 $F synth $M --shape llama-160m --seed 1 >$O/make.txt 2>&1 &&
    timeout 60 $F quantize $M $M.gguf --layout gguf-ggml >>$O/make.txt 2>&1
  echo "[synth+quantize llama-160m rc=$?]" | tee -a $S
  LD_LIBRARY_PATH=$(dirname "$LS"):$(dirname "$LS")/../lib timeout 20 "$LS" --version >>$O/make.txt 2>&1
  CLIENTS="1 8" PROMPT=64 ANSWER=16 MODE=native OUT=$O/rehearsal REQUESTS=16 \
    LLAMA_LD=$(dirname "$LS"):$(dirname "$LS")/../lib timeout 100 bash bench/serve/run.sh $X/w $M.gguf $M.gguf "$LS" \
    >$O/rehearsal.txt 2>&1
  echo "[rehearsal rc=$?]" | tee -a $S; grep '^|' $O/rehearsal/serve.md | tee -a $S
fi
tail -n 3 $O/*.log >$O/serve_logs_tail.txt 2>&1
grep -q 'FAIL\|DIFFER\|rc=[1-9]' $S && echo "serve3: SOME CHECK FAILED" || echo "serve3: all ok"
