#!/usr/bin/env bash
# issue 31's DeepSeek speed cells on the device (called by run.sh with the bundle unpacked in $X):
# deepseek-v3's widths with its first $LAYERS layers (synth --to nvfp4: the first 3 dense, the rest
# 256 routed experts + 1 shared), fp4lane's CUDA runtime: decode batch 1 and 8 at context 512, batch
# 1 at 4096, prefill 512, exact and native. Lines to $O/bench.txt.
set -u
: "${X:?}" "${O:?}" "${LAYERS:=4}"
B=$X/build-cuda; F=$B/fp4lane; R=$O/bench.txt; M=/tmp/ds4
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat $X/BUILT.txt; } > $R
t0=$(date +%s); rm -rf $M
timeout 150 $F synth $M --shape deepseek-v3 --layers $LAYERS --to nvfp4 --threads 16 >> $R 2>&1
echo "model: deepseek-v3 widths, $LAYERS layers, made in $(( $(date +%s) - t0 )) s," \
  "$(du -sh $M | cut -f1)" | tee -a $R
ids() { seq 0 $(( $1 - 1 )) | awk -v s=$2 '{printf "%s%d", (NR>1 ? "," : ""), ($1*7919+s*131)%129280}'; }
ids 512 1 > /tmp/p512; ids 4096 1 > /tmp/p4k
: > /tmp/b512
for s in 1 2 3 4 5 6 7 8; do ids 512 $s >> /tmp/b512; echo >> /tmp/b512; done
export FP4LANE_CUDA_UNPROVEN=1 CUDA_MODULE_LOADING=EAGER
timeout 60 $F compare $M --a "--mode exact --threads 16" --b "--mode exact --device cuda" \
  --prompt-ids $(ids 8 3) --max-drift 0 > /tmp/cmpds.txt 2>&1
echo "compare deepseek-v3-L$LAYERS exact cpu vs cuda rc=$? $(tail -1 /tmp/cmpds.txt)" | tee -a $R
fl() { # name, then run's options
  local n=$1; shift
  timeout 60 $F run $M --device cuda --ignore-eos "$@" > /tmp/fl.txt 2>&1
  echo "fp4lane $n rc=$? $(grep -E '^prefill' /tmp/fl.txt | cut -d, -f1-3)" \
    "$(grep -m1 -iE 'error|refused' /tmp/fl.txt)" | tee -a $R
}
for mode in exact native; do
  fl "$mode b1 ctx512" --mode $mode --prompt-ids @/tmp/p512 -n 64 --ctx 1024
  fl "$mode b8 ctx512" --mode $mode --batch-file /tmp/b512 -n 32 --ctx 1024
  fl "$mode b1 ctx4096" --mode $mode --prompt-ids @/tmp/p4k -n 32 --ctx 4608
done
rm -rf $M
exit 0
