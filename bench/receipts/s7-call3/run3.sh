#!/usr/bin/env bash
# Session 7, device call 3: the 1-column item kernel's shapes for the decode step's 4096-wide
# projections (lab variants .72-.76, and .82-.86 quantizing their own input), and the per-kernel
# breakdown of one decode step (ncu) after QIN and the device argmax. Binaries: gpuwork/s7c.
set -u
G=gpuwork/s7c; tar xJf $G/bin.tar.xz -C $G; F=$G/f
export LD_LIBRARY_PATH=$PWD/gpuwork/s5/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/tests.txt
( $F/fp4lane synth /tmp/s8 --shape llama3-8b --threads 12 --seed 1 > /dev/null 2>&1
  $F/fp4lane quantize /tmp/s8 /tmp/l8nv.gguf --layout gguf-ggml > /dev/null 2>&1; rm -rf /tmp/s8
  echo "model t=$SECONDS" ) > /tmp/model.txt 2>&1 &
V=exact.72,exact.73,exact.74,exact.75,exact.76,exact.82,exact.83,exact.84,exact.85,exact.86,native.72,native.73,native.74,native.75,native.76,native.82,native.83,native.84,native.85,native.86,exact.route,native.route
for rep in 1 2; do timeout 120 $F/gemv_lab --decode --cols 1 --vars $V; done > $OUT/lab.txt 2>&1
echo "lab t=$SECONDS" >> $OUT/tests.txt
wait; cat /tmp/model.txt >> $OUT/tests.txt
python3 -c 'import random
r = random.Random(100); print(",".join(str(r.randrange(128000)) for _ in range(512)))' > /tmp/p512
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for mode in native exact; do
  timeout 150 $NCU --clock-control none --cache-control none \
    --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size --csv --print-units base \
    $F/fp4lane run /tmp/l8nv.gguf --device cuda --mode $mode --prompt-ids @/tmp/p512 -n 3 --ignore-eos --ctx 4096 \
    > /tmp/ncu_$mode.csv 2>/dev/null; echo "ncu $mode rc=$? t=$SECONDS" >> $OUT/tests.txt
  { echo "== $mode"; python3 dev/cuda/ncu_step.py /tmp/ncu_$mode.csv; } >> $OUT/ncu_step.txt 2>&1
done
echo "end t=$SECONDS" >> $OUT/tests.txt
