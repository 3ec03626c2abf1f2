#!/usr/bin/env bash
# issue 31 (hfref) on the device machine, from the repository root with gpuwork/hfref carried: the
# Gemma 3 and DeepSeek-V3 reference checkpoints made by transformers itself (dev/ref/hf_reference.py
# make: random-init models, bf16 safetensors, float64 logits and routing), their NVFP4 twins by this
# build's `fp4lane quantize --layout modelopt`, then the twins' dequantized logits (hf_reference.py
# dequant). Brings back one tarball per model and the logs (5 files); a short summary on stdout.
#   bash dev/gpu/hfref/run.sh
set -u
OUT=${OUT:-device-out}; R="$OUT/hfref"; mkdir -p "$R"
W=gpuwork/hfref
tar xJf $W/bin.tar.xz -C $W
# the bundled libraries for the CLI alone (python and torch keep the device's own)
FP="env LD_LIBRARY_PATH=$PWD/$W/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} $W/fp4lane"
L=$(mktemp -d)
{ date -u; cat $W/BUILT.txt; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -2
  timeout 60 python3 -c "import torch, transformers, numpy, safetensors; print('torch', torch.__version__,
'transformers', transformers.__version__, 'numpy', numpy.__version__, 'safetensors', safetensors.__version__)"
} > "$L/env.txt" 2>&1
M="gemma3 deepseek_v3 deepseek_v3_nolora"; Q="gemma3 deepseek_v3"
H=/tmp/hfref_make; N=/tmp/hfref_nv; rm -rf $H $N
timeout 110 python3 dev/ref/hf_reference.py make $H $M > "$L/make.txt" 2>&1
echo "make rc=$?" | tee "$L/summary.txt"
P="^(gemma3|deepseek)|failed:|Error|error"
grep -E "$P" "$L/make.txt" | cut -c1-400 | head -12 | tee -a "$L/summary.txt"
for m in $Q; do
  [ -d $H/$m ] || continue
  timeout 60 $FP quantize $H/$m $H/$m/nvfp4 --layout modelopt > "$L/quantize_$m.txt" 2>&1
  echo "quantize $m rc=$? $(tail -1 "$L/quantize_$m.txt" | cut -c1-200)" | tee -a "$L/summary.txt"
done
timeout 90 python3 dev/ref/hf_reference.py dequant $H $N $Q > "$L/dequant.txt" 2>&1
echo "dequant rc=$?" | tee -a "$L/summary.txt"
grep -E "$P" "$L/dequant.txt" | cut -c1-400 | head -8 | tee -a "$L/summary.txt"
for m in $Q; do [ -d $N/$m ] && cp $N/$m/* $H/$m/; done
for m in $M; do [ -d $H/$m ] && tar czf "$R/$m.tgz" -C $H $m; done
cp $H/versions*.json "$L/" 2>/dev/null
cp "$L/summary.txt" "$R/summary.txt"
tar czf "$R/logs.tgz" -C "$L" .
rm -rf "$L"; ls -la "$R"
