#!/usr/bin/env bash
# firsttok (issue 32 item 3, "first token") on the device, from the repository root with
# gpuwork/firsttok carried (stage.sh); about 150 s. test_gpu_runtime's warm_case (warmed and unwarmed
# engines' native logits byte for byte), probe.c (each stage of cuBLAS's load: wall time, RssAnon,
# RssFile; the driver's CUDA_MODULE_DATA_LOADING unset / LAZY), then on the llama3-8b shape (synth
# --to nvfp4, page cache warm) `fp4lane run --timing` of a 512-token prompt, -n 1, under peak_rss.py
# (peak RssAnon polled every 5 ms): old (main's CLI and libfp4lane_cuda.so) and new (this tree's, the
# warm on), new also with the driver's data loading EAGER and LAZY, and without the warm; a short
# prompt (no step on the GEMM route);
# `fp4lane bench` native for the steady prefill. The default (lazy) module loading, as a user gets
# it. Logs under $OUT/firsttok/, summary on stdout.
set -u
G=gpuwork/firsttok; OUT=${OUT:-device-out}; O=$OUT/firsttok; mkdir -p "$O"
[ -f $G/bin.tar.xz ] && tar xJf $G/bin.tar.xz -C $G # else laid out by dev/gpu/s17/prep.sh
N=$G/new; F=$N/fp4lane; FO=$G/old/fp4lane
chmod +x $F $FO $N/probe $N/tests/gpu/* 2>/dev/null
[ -d tests/data/hf/llama ] || cp -r $G/data/llama tests/data/hf/ # the slimmed tree lacks it
export FP4_BUILD=$N LD_LIBRARY_PATH=$PWD/$G/lib:${LD_LIBRARY_PATH:-}
unset CUDA_MODULE_LOADING CUDA_MODULE_DATA_LOADING FP4LANE_CUDA_LIB
S=$O/summary.txt
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.total --format=csv,noheader
  echo "cores $(nproc)"; cat $G/BUILT.txt; } | tee "$O/env.txt"
M=/tmp/ft_l8
( t0=$(date +%s.%N); timeout 110 $F synth $M --shape llama3-8b --to nvfp4 --threads 14 --seed 1 \
    > $O/make.txt 2>&1
  echo "synth rc=$? $(awk -v a=$t0 -v b=$(date +%s.%N) 'BEGIN{printf "%.1f s", b-a}')" >> $O/make.txt ) &
MK=$!
FP4_GPU_WARM_ONLY=1 timeout 40 $N/tests/gpu/test_gpu_runtime > $O/t_warm.txt 2>&1
echo "test_gpu_runtime warm_case rc=$? $(grep -E '^[0-9]+ passed, [0-9]+ failed$' $O/t_warm.txt | tail -1)" |
  tee -a $S; grep -m 4 -E "CHECK|FAIL|rror" $O/t_warm.txt | tee -a $S
for l in $(ldconfig -p | awk '/libcublas(Lt)?\.so\.13 /{print $NF}'); do cat "$l" > /dev/null; done
for v in "" CUDA_MODULE_DATA_LOADING=LAZY; do
  echo "== probe ${v:-default}" >> $O/probe.txt; env $v timeout 20 $N/probe >> $O/probe.txt 2>&1
done
cat $O/probe.txt | tee -a $S
wait $MK; tail -1 $O/make.txt | tee -a $S
if [ -f $M/config.json ]; then
  cat $M/* > /dev/null
  python3 -c 'print(",".join(str((p*37+11)%1000+1) for p in range(512)))' > /tmp/ft_p512
  PR="--prompt-ids @/tmp/ft_p512"
  one() { # label, CLI, then env words; the run's figures into run.txt and the summary
    local lab=$1 cli=$2; shift 2
    echo "== $lab" >> $O/run.txt
    env "$@" timeout 25 python3 dev/bench/peak_rss.py $cli run $M --device cuda --mode $MODE \
      --ctx 4096 $PR -n 1 --timing > $O/one.txt 2>&1
    cat $O/one.txt >> $O/run.txt
    local t=$(grep -o 'load [0-9.]* s, first token [0-9.]* s' $O/one.txt) m=$(grep -o 'VmHWM.*' $O/one.txt)
    local p=$(grep -o 'prefill [0-9]* tok [0-9.]* tok/s' $O/one.txt)
    echo "$lab: $(head -1 $O/one.txt | cut -d, -f1,2) | $t | $m | $p" | tee -a $S
  }
  MODE=native
  OL=FP4LANE_CUDA_LIB=$PWD/$G/old/libfp4lane_cuda.so
  W=FP4LANE_CUDA_WARM=1 # the warm's switch while it is off by default (a build of 0f8accf: on, ignored)
  for r in 1 2; do one "native old $r" $FO $OL; one "native new $r" $F $W; done
  one "native new, data loading EAGER" $F $W CUDA_MODULE_DATA_LOADING=EAGER
  one "native new, data loading LAZY" $F $W CUDA_MODULE_DATA_LOADING=LAZY
  one "native new, no warm" $F FP4LANE_CUDA_NO_WARM=1 FP4LANE_CUDA_WARM=0
  MODE=exact
  one "exact old" $FO $OL; one "exact new" $F $W
  MODE=native; PR="-p The_capital_of_France_is" # a short prompt: no step on the GEMM route
  one "native old, short prompt" $FO $OL
  one "native new, short prompt" $F $W
  A="--device cuda --mode native --ctx 4096"
  env $W timeout 40 $F bench $M --a "$A" --b "$A" --pairs 1 --prefix 512 --tokens 2 --json $O/bench.json \
    > $O/bench.txt 2>&1
  echo "bench native (new) rc=$?" | tee -a $S; grep -iE "prefill" $O/bench.txt | head -1 | tee -a $S
  python3 - "$O/bench.json" <<'PY' 2>&1 | tee -a $S
import json, sys
a = [c for c in json.load(open(sys.argv[1])).get("cells", []) if c.get("side") == "A"]
if a:
    ms = [round(1e3 * c["prefill_s"], 1) for c in a]
    print("  side A's prefills (the first is the warm-up): %s ms" % ms)
PY
fi
rm -rf $M
echo "total ${SECONDS} s" | tee -a $S
tar czf "$O/logs.tgz" -C "$O" $(cd "$O" && ls *.txt *.json 2>/dev/null) 2>/dev/null &&
  (cd "$O" && ls | grep -vE '^(logs.tgz|summary.txt)$' | xargs rm -f)
