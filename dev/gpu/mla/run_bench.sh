#!/usr/bin/env bash
# issue 31's DeepSeek speed cells, a device call of their own (from the repository root with
# gpuwork/mla carried, after stage.sh): bench.sh on deepseek-v3's widths with 4 layers (3 dense, one
# of 256 experts; synth also makes the MTP layer). Logs under $OUT/mla/, the cells on stdout.
set -u
OUT=${OUT:-device-out}; O=$OUT/mla; mkdir -p "$O"
X=/tmp/mla; rm -rf $X; mkdir -p $X
tar xJf gpuwork/mla/bin.tar.xz -C $X
export LD_LIBRARY_PATH=$X/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
X=$X O=$O LAYERS=4 timeout 280 bash dev/gpu/mla/bench.sh
echo "bench rc=$?"; grep -E "^(fp4lane|compare|model)" "$O/bench.txt"
