#!/usr/bin/env bash
# Session 16, call 2 (right after call 1, on the same warm machine: /tmp/l8.gguf, /tmp/q3m*, /tmp/llbin kept):
# one sitting, same GGUF files: llama.cpp's llama-bench beside fp4lane (llama3-8b NVFP4 type 40: pp512, tg128
# at depth 512 and 3968; the qwen3-30b-a3b shape with 8 layers: the same cells), then bench/serve/run.sh
# (fp4lane serve beside llama-server, 1/8/32/64 clients, 512/128 tokens) on the 8B file.
set -u
G=gpuwork/s16; X=/tmp/s16; rm -rf $X; mkdir -p $X; tar xJf $G/bin.tar.xz -C $X
export LD_LIBRARY_PATH=$X/lib CUDA_MODULE_LOADING=EAGER
F=$X/bin/fp4lane; O=$OUT; S=$O/summary.txt; t00=$SECONDS; LB=/tmp/llbin/llama-bench; \
  LS=/tmp/llbin/llama-server
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat $X/BUILT.txt; } | tee \
  $O/env.txt
for f in /tmp/l8.gguf /tmp/q3m.gguf /tmp/q3m/config.json $LB $LS /tmp/p512 /tmp/p3968; do
  [ -e $f ] || echo "MISSING $f (not the same machine as call 1?)" | tee -a $S; done
[ -e /tmp/l8.gguf ] && [ -x $LB ] || exit 1
fl() { echo "== fp4lane $*" >> $O/side.txt
  timeout 120 $F run "$@" --device cuda --ignore-eos 2>&1 | grep -E "^prefill|rror|refus" >> $O/side.txt; }
lb() { echo "== llama-bench $*" >> $O/side.txt
  timeout 150 $LB "$@" -ngl 99 -fa 1 -r 1 -o md 2>&1 | grep -E "^\||rror" >> $O/side.txt; }
for rep in 1 2; do
  lb -m /tmp/l8.gguf -p 512 -n 0; lb -m /tmp/l8.gguf -p 0 -n 128 -d 512,3968
  for md in native exact; do
    fl /tmp/l8.gguf --mode $md --prompt-ids @/tmp/p512 -n 128 --ctx 4096
    fl /tmp/l8.gguf --mode $md --prompt-ids @/tmp/p3968 -n 128 --ctx 4096
  done
done
echo "8B side by side done at $((SECONDS - t00)) s" | tee -a $S
if [ -e /tmp/q3m.gguf ]; then
  q=$(python3 -c 'import random; r=random.Random(2)
print(",".join(str(r.randrange(150000)) for _ in range(3968)))')
  echo "$q" > /tmp/q3968; cut -d, -f1-512 /tmp/q3968 > /tmp/q512
  : > /tmp/qb512; for s in 1 2 3 4 5 6 7 8; do cat /tmp/q512 >> /tmp/qb512; done
  lb -m /tmp/q3m.gguf -p 512 -n 0; lb -m /tmp/q3m.gguf -p 0 -n 128 -d 512,3968
  for m in /tmp/q3m.gguf /tmp/q3m; do
    fl $m --mode exact --prompt-ids @/tmp/q512 -n 128 --ctx 4096
    fl $m --mode exact --prompt-ids @/tmp/q3968 -n 128 --ctx 4096
    fl $m --mode exact --batch-file /tmp/qb512 -n 128 --ctx 1024
  done
  echo "MoE side by side done at $((SECONDS - t00)) s" | tee -a $S
fi
cat $O/side.txt
mkdir -p $X/w; printf '#!/bin/sh\nLD_LIBRARY_PATH=%s/lib exec %s/bin/fp4lane "$@"\n' $X $X > $X/w/fp4lane
chmod +x $X/w/fp4lane
( unset LD_LIBRARY_PATH; CLIENTS="1 8 32 64" PROMPT=512 ANSWER=128 MODE=native PER_CLIENT=2 CELL_TIMEOUT=60 \
  OUT=$O/serve timeout 330 bash bench/serve/run.sh $X/w /tmp/l8.gguf /tmp/l8.gguf $LS > $O/serve.txt 2>&1
  echo "serve bench rc=$?" )  | tee -a $S
cat $O/serve/serve.md $O/serve/run_decode.txt 2>&1 | tee -a $S
(cd $O && tar czf serve_logs.tgz serve serve.txt && rm -rf serve serve.txt)
echo "call2 done in $((SECONDS - t00)) s" | tee -a $S
