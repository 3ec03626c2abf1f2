#!/usr/bin/env bash
# Session 15 on the device: transformers' own tiny MoE models (main's dev/ref/hf_reference.py: qwen3_moe,
# qwen3_moe_fused, mixtral), their NVFP4 twins by fp4lane quantize (the CLI of gpuwork/hfref's build) and the
# twins' f64 logits; $OUT/moeref/{NAME.tgz, log.txt}.
set -u
O=$OUT/moeref; mkdir -p $O; X=/tmp/moebin; rm -rf $X; mkdir -p $X
tar xJf gpuwork/hfref/bin.tar.xz -C $X
F="env LD_LIBRARY_PATH=$X/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} $X/fp4lane"
M="qwen3_moe qwen3_moe_fused mixtral"; H=/tmp/moe_hf; N=/tmp/moe_nv; rm -rf $H $N
timeout 150 python3 dev/ref/hf_reference.py make $H $M > $O/log.txt 2>&1; echo "moe make rc=$?" | tee -a $O/log.txt
for m in $M; do [ -d $H/$m ] || continue
  timeout 60 $F quantize $H/$m $H/$m/nvfp4 --layout modelopt >> $O/log.txt 2>&1
  echo "quantize $m rc=$?" | tee -a $O/log.txt; done
timeout 120 python3 dev/ref/hf_reference.py dequant $H $N $M >> $O/log.txt 2>&1
echo "moe dequant rc=$?" | tee -a $O/log.txt
for m in $M; do [ -d $N/$m ] && cp $N/$m/* $H/$m/; [ -d $H/$m ] && tar czf $O/$m.tgz -C $H $m; done
cp $H/versions.json $O/ 2>/dev/null; grep -E "rc=|Error|error" $O/log.txt | head -20
