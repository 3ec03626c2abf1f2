#!/usr/bin/env bash
# firsttok (issue 32 item 3, "first token") on the device, from the repository root with
# gpuwork/firsttok carried (stage.sh): test_gpu_runtime quick (its warm_case: warmed and unwarmed
# engines' native logits byte for byte), probe.c (each
# stage of cuBLAS's load: wall time, RssAnon, RssFile), then on the llama3-8b shape (synth --to
# nvfp4, page cache warm) `fp4lane run --timing` of a 512-token prompt, -n 1, three rounds of old
# (main's libfp4lane_cuda.so) and new (this tree's) per mode, each under peak.py (peak RssAnon
# polled every 5 ms); native once more with FP4LANE_CUDA_NO_WARM=1 and with FP4LANE_CUDA_GEMM=0, and
# under CUDA_MODULE_DATA_LOADING=LAZY (the driver's loading of library data: cuBLASLt's kernels);
# `fp4lane bench` for the steady prefill (its JSON keeps the first, warm-up, prefill of the
# process). The default (lazy) module loading, as a user gets it. Logs under $OUT/firsttok/,
# summary on stdout.
set -u
G=gpuwork/firsttok; OUT=${OUT:-device-out}; O=$OUT/firsttok; mkdir -p "$O"
tar xJf $G/bin.tar.xz -C $G
N=$G/new; OLD=$PWD/$G/old/libfp4lane_cuda.so; F=$N/fp4lane
chmod +x $F $N/probe $N/tests/gpu/* 2>/dev/null
[ -d tests/data/hf/llama ] || cp -r $G/data/llama tests/data/hf/ # the slimmed tree lacks it
export FP4_BUILD=$N LD_LIBRARY_PATH=$PWD/$G/lib:${LD_LIBRARY_PATH:-}
unset CUDA_MODULE_LOADING FP4LANE_CUDA_LIB
S=$O/summary.txt
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.total --format=csv,noheader
  echo "cores $(nproc)"; cat $G/BUILT.txt; } | tee "$O/env.txt"
M=/tmp/ft_l8
( t0=$(date +%s.%N); timeout 150 $F synth $M --shape llama3-8b --to nvfp4 --threads 14 --seed 1 \
    > $O/make.txt 2>&1
  echo "synth rc=$? $(awk -v a=$t0 -v b=$(date +%s.%N) 'BEGIN{printf "%.1f s", b-a}')" >> $O/make.txt ) &
MK=$!
res() { echo "$1 rc=$2 $(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$3" | tail -1)" | tee -a $S
  [ "$2" = 0 ] || grep -m 6 -E "CHECK|FAIL|differ|ERROR|rror" "$3" | tee -a $S; }
FP4_GPU_QUICK=1 timeout 100 $N/tests/gpu/test_gpu_runtime > $O/t_runtime.txt 2>&1
res "test_gpu_runtime (quick)" $? $O/t_runtime.txt
wait $MK; tail -1 $O/make.txt | tee -a $S
for l in $(ldconfig -p | awk '/libcublas(Lt)?\.so\.13 /{print $NF}'); do cat "$l" > /dev/null; done
for v in "" CUDA_MODULE_DATA_LOADING=LAZY CUDA_MODULE_DATA_LOADING=EAGER CUDA_MODULE_LOADING=EAGER ""; do
  echo "== probe ${v:-default}" >> $O/probe.txt; env $v timeout 30 $N/probe >> $O/probe.txt 2>&1
done
cat $O/probe.txt | tee -a $S
if [ -f $M/config.json ]; then
  cat $M/* > /dev/null
  python3 -c 'print(",".join(str((p*37+11)%1000+1) for p in range(512)))' > /tmp/ft_p512
  PR="--prompt-ids @/tmp/ft_p512"
  one() { # label, then env words; the run's figures into run.txt and the summary
    local lab=$1; shift
    echo "== $lab" >> $O/run.txt
    env "$@" timeout 40 python3 dev/gpu/firsttok/peak.py $F run $M --device cuda --mode $MODE --ctx 4096 \
      $PR -n 1 --timing > $O/one.txt 2>&1
    cat $O/one.txt >> $O/run.txt
    local t=$(grep -o 'load [0-9.]* s, first token [0-9.]* s' $O/one.txt) m=$(grep -o 'VmHWM.*' $O/one.txt)
    local p=$(grep -o 'prefill [0-9]* tok [0-9.]* tok/s' $O/one.txt)
    echo "$lab: $(head -1 $O/one.txt | cut -d, -f1,2) | $t | $m | $p" | tee -a $S
  }
  for r in 1 2 3; do
    for MODE in exact native; do
      one "round $r $MODE old" FP4LANE_CUDA_LIB=$OLD
      one "round $r $MODE new" FP4LANE_CUDA_LIB=$PWD/$N/libfp4lane_cuda.so
    done
  done
  MODE=native
  one "native new NO_WARM=1" FP4LANE_CUDA_LIB=$PWD/$N/libfp4lane_cuda.so FP4LANE_CUDA_NO_WARM=1
  one "native new GEMM=0" FP4LANE_CUDA_LIB=$PWD/$N/libfp4lane_cuda.so FP4LANE_CUDA_GEMM=0
  LZ=CUDA_MODULE_DATA_LOADING=LAZY
  one "native new DATA_LOADING=LAZY 1" FP4LANE_CUDA_LIB=$PWD/$N/libfp4lane_cuda.so $LZ
  one "native old DATA_LOADING=LAZY" FP4LANE_CUDA_LIB=$OLD $LZ
  one "native new DATA_LOADING=LAZY 2" FP4LANE_CUDA_LIB=$PWD/$N/libfp4lane_cuda.so $LZ
  MODE=exact; one "exact new DATA_LOADING=LAZY" FP4LANE_CUDA_LIB=$PWD/$N/libfp4lane_cuda.so $LZ
  MODE=native; PR="-p The_capital_of_France_is" # a short prompt: no step on the GEMM route
  one "native old, short prompt" FP4LANE_CUDA_LIB=$OLD
  one "native new, short prompt" FP4LANE_CUDA_LIB=$PWD/$N/libfp4lane_cuda.so
  one "native new LAZY, short prompt" FP4LANE_CUDA_LIB=$PWD/$N/libfp4lane_cuda.so $LZ
  for MODE in native exact; do
    A="--device cuda --mode $MODE --ctx 4096"
    FP4LANE_CUDA_LIB=$PWD/$N/libfp4lane_cuda.so timeout 60 $F bench $M --a "$A" --b "$A" --pairs 1 \
      --prefix 512 --tokens 4 --json $O/bench_$MODE.json > $O/bench_$MODE.txt 2>&1
    echo "bench $MODE (new) rc=$?" | tee -a $S; grep -iE "prefill" $O/bench_$MODE.txt | head -2 | tee -a $S
    python3 - "$O/bench_$MODE.json" <<'PY' 2>&1 | tee -a $S
import json, sys
j = json.load(open(sys.argv[1]))
cells = j.get("cells") or j.get("results", {}).get("cells") or []
a = [c for c in cells if c.get("side") == "A"]
if a:
    print("  bench %s: side A's first (warm-up) prefill %.1f ms, its later ones %s ms" % (
        sys.argv[1].split("_")[-1], 1e3 * a[0]["prefill_s"], [round(1e3 * c["prefill_s"], 1) for c in a[1:]]))
PY
  done
fi
rm -rf $M
echo "total ${SECONDS} s" | tee -a $S
tar czf "$O/logs.tgz" -C "$O" $(cd "$O" && ls *.txt *.json 2>/dev/null) 2>/dev/null &&
  (cd "$O" && ls | grep -vE '^(logs.tgz|summary.txt)$' | xargs rm -f)
