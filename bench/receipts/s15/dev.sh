#!/usr/bin/env bash
# Session 15 on the device: each helper's staged call (gpuwork/NAME: bin.tar.xz, tree.tar.xz, READY) run from
# its own branch's tree, one after the other, each under its own time limit; each one's $OUT folder comes
# back as one archive NAME.tgz, the summaries in summary.txt.
#   bash bench/receipts/s15/dev.sh NAME:SECONDS...
set -u
R=$PWD; S=$OUT/summary-${1%%:*}.txt
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc; } | tee $S
for a in "$@"; do
  n=${a%%:*}; t=${a#*:}; D=/tmp/tree-$n; O=/tmp/o-$n; rm -rf $D $O; mkdir -p $D $O
  xz -dc gpuwork/$n/tree.tar.xz | tar x -C $D
  mkdir -p $D/gpuwork $D/tests $D/models; cp -r gpuwork/$n $D/gpuwork/
  ln -sfn $R/tests/data $D/tests/data; ln -sfn $R/models/tiny $D/models/tiny
  echo "== $n ($(cat gpuwork/$n/READY | cut -c1-80)) limit $t s" | tee -a $S
  t0=$(date +%s)
  (cd $D && OUT=$O timeout -k 5 $t bash dev/gpu/$n/run.sh) > $O/stdout.txt 2>&1
  echo "== $n rc=$? in $(( $(date +%s) - t0 )) s" | tee -a $S
  tail -40 $O/stdout.txt | tee -a $S
  tar czf $OUT/$n.tgz -C $O .; rm -rf $D
done
ls -la $OUT
