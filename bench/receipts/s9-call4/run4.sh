#!/usr/bin/env bash
# Session 9, device call 4: why the frag kernel is slower than the item kernel at one column.
# gpuwork/s9d/bin.tar.xz: f/ = 0b9bd4d + gemv_lab --shape. 1. SASS of frag_kernel<16,1,3,1> and
# a16_item_kernel<0,8,3,1,1> (opcode counts); 2. ncu (SpeedOfLight, WarpStateStats, SchedulerStats)
# of both on 28672x4096 at one column; 3. the lab: frag .90-.97 at the decode shapes, 1, 2, 8 columns.
set -u
G=gpuwork/s9d; tar xJf $G/bin.tar.xz -C $G; F=$G/f
export LD_LIBRARY_PATH=$PWD/gpuwork/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/log.txt
CUOBJ=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
echo "cuobjdump=$CUOBJ ncu=$NCU" >> $OUT/log.txt
for k in _Z11frag_kernelILi16ELi1ELi3ELi1EEvPKhlilPKflifPfi; do
  $CUOBJ -sass -fun $k $F/libfp4lane_cuda.so > $OUT/frag_sass.txt 2>&1; done
$CUOBJ -sass $F/libfp4lane_cuda.so 2>/dev/null | awk '/Function : .*a16_item_kernelILb0ELi8ELi3ELi1ELb1E/{p=1} p&&/Function :/&&!/a16_item_kernelILb0ELi8ELi3ELi1ELb1E/{p=0} p' > $OUT/item_sass.txt
python3 - $OUT/frag_sass.txt $OUT/item_sass.txt >> $OUT/log.txt <<'PY'
import re, sys, collections
for f in sys.argv[1:]:
    ops = [m.group(1) for m in (re.search(r'/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)', l) for l in open(f)) if m]
    c = collections.Counter(o.split('.')[0] for o in ops)
    print(f, len(ops), c.most_common(30))
PY
echo "sass t=$SECONDS" >> $OUT/log.txt
for kv in a16_item:native.route frag_kernel:native.92; do
  timeout 150 $NCU --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy \
    -k regex:${kv%%:*} --launch-skip 3 --launch-count 1 $F/gemv_lab --decode --shape 2 --cols 1 --vars ${kv#*:} >> $OUT/ncu.txt 2>&1
  echo "ncu $kv rc=$? t=$SECONDS" >> $OUT/log.txt; done
V=native.route,exact.route,native.90,native.91,native.92,native.93,native.94,native.95,native.96,native.97
timeout 200 $F/gemv_lab --decode --cols 1,2,8 --vars $V > $OUT/lab.txt 2>&1; echo "lab rc=$? t=$SECONDS" >> $OUT/log.txt
