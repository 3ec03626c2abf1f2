#!/usr/bin/env bash
# issue 31 (hfref), second call: the NVFP4 reference of the committed tests/data/hf/gemma3 (the first
# call's dequant phase failed on it: fixed in hf_reference.py's routers()). Its bf16 checkpoint as
# committed, this build's `fp4lane quantize --layout modelopt`, then `hf_reference.py dequant`:
# $OUT/hfref/gemma3_nvfp4.tgz (logits_nvfp4.npy, stats_nvfp4.json) and a log; < 60 s.
#   bash dev/gpu/hfref/run2.sh      (gpuwork/hfref carried)
set -u
OUT=${OUT:-device-out}; R="$OUT/hfref"; mkdir -p "$R"
W=gpuwork/hfref
tar xJf $W/bin.tar.xz -C $W
H=/tmp/hfref2; N=/tmp/hfref2_nv; rm -rf $H $N; mkdir -p $H
cp -r tests/data/hf/gemma3 $H/
timeout 40 env LD_LIBRARY_PATH=$PWD/$W/lib $W/fp4lane quantize $H/gemma3 $H/gemma3/nvfp4 --layout modelopt \
  > "$R/run2.txt" 2>&1
echo "quantize rc=$?" | tee -a "$R/run2.txt"
timeout 60 python3 dev/ref/hf_reference.py dequant $H $N gemma3 >> "$R/run2.txt" 2>&1
echo "dequant rc=$?" | tee -a "$R/run2.txt"
grep -E "^gemma3|failed:|Error" "$R/run2.txt" | cut -c1-300
[ -d $N/gemma3 ] && tar czf "$R/gemma3_nvfp4.tgz" -C $N gemma3
ls -la "$R"
