#!/usr/bin/env bash
# issue 31's Gemma 3 speed cells on the device (called by run.sh with the bundle unpacked in $X):
# gemma3-27b's widths with its first $LAYERS layers (synth --to nvfp4, then convert to a gguf-ggml
# type-40 file), fp4lane's CUDA runtime and llama.cpp's llama-bench (sm_90a, gpuwork/llcpp) on the
# SAME GGUF: decode batch 1 and 8 at context 512 and 16384, prefill 512. Lines to $O/bench.txt.
set -u
: "${X:?}" "${O:?}" "${LAYERS:=8}"
B=$X/build-cuda; F=$B/fp4lane; R=$O/bench.txt; M=/tmp/g27b
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
  cat $X/BUILT.txt; } > $R
t0=$(date +%s); rm -rf $M $M.gguf
timeout 240 $F synth $M --shape gemma3-27b --layers $LAYERS --to nvfp4 >> $R 2>&1
timeout 120 $F convert $M $M.gguf --layout gguf-ggml >> $R 2>&1
echo "model: gemma3-27b widths, $LAYERS layers, made in $(( $(date +%s) - t0 )) s," \
  "$(du -h $M.gguf | cut -f1)" | tee -a $R
ids() { seq 0 $(( $1 - 1 )) | awk -v s=$2 '{printf "%s%d", (NR>1 ? "," : ""), ($1*7919+s*131)%262208}'; }
ids 512 1 > /tmp/p512; ids 16384 1 > /tmp/p16k
: > /tmp/b512; : > /tmp/b16k
for s in 1 2 3 4 5 6 7 8; do
  ids 512 $s >> /tmp/b512; echo >> /tmp/b512; ids 16384 $s >> /tmp/b16k; echo >> /tmp/b16k
done
export FP4LANE_CUDA_UNPROVEN=1 CUDA_MODULE_LOADING=EAGER
timeout 60 $F compare $M --a "--mode exact --threads 16" --b "--mode exact --device cuda" \
  --prompt-ids $(ids 12 3) --max-drift 0 > /tmp/cmp27.txt 2>&1
echo "compare gemma3-27b-L$LAYERS exact cpu vs cuda rc=$? $(tail -1 /tmp/cmp27.txt)" | tee -a $R
rm -rf $M
fl() { # name, then run's options
  local n=$1; shift
  timeout 100 $F run $M.gguf --device cuda --ignore-eos "$@" > /tmp/fl.txt 2>&1
  echo "fp4lane $n rc=$? $(grep -E '^prefill' /tmp/fl.txt | cut -d, -f1-3)" | tee -a $R
}
LB=$(find $X/llb -name llama-bench -type f 2>/dev/null | head -1)
LBL=$(find $X/llb -name 'lib*.so*' -printf '%h\n' 2>/dev/null | sort -u | tr '\n' ':')
lb() {
  [ -n "$LB" ] && LD_LIBRARY_PATH=$LBL${LD_LIBRARY_PATH:-} timeout 90 $LB -m $M.gguf -ngl 99 -fa 1 -r 2 "$@" \
    -o md 2>&1 | grep -E "^\||rror" | tee -a $R
}
fl "native b1 ctx512" --mode native --prompt-ids @/tmp/p512 -n 128 --ctx 1024
fl "native b8 ctx512" --mode native --batch-file /tmp/b512 -n 128 --ctx 1024
fl "native b1 ctx16384" --mode native --prompt-ids @/tmp/p16k -n 128 --ctx 16640
fl "native b8 ctx16384" --mode native --batch-file /tmp/b16k -n 64 --ctx 16640
fl "exact b1 ctx512" --mode exact --prompt-ids @/tmp/p512 -n 128 --ctx 1024
lb -p 512 -n 0
lb -p 0 -n 128 -d 512,16384
fl "native b1 ctx512 (again)" --mode native --prompt-ids @/tmp/p512 -n 128 --ctx 1024
[ -z "$LB" ] && echo "no llama-bench in $X/llb" | tee -a $R
exit 0
