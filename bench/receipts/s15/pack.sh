#!/usr/bin/env bash
# Session 15: copies a helper's staged device call into /work/main/gpuwork/NAME (git-ignored): its bin.tar.xz
# and READY, plus tree.tar.xz = its branch's tracked files (tests/data, models/tiny, bench/receipts, fuzz/corpus left out: main's are there).
#   bash bench/receipts/s15/pack.sh NAME...
set -eu
cd /work/main
for n in "$@"; do
  w=/work/wt-$n; mkdir -p gpuwork/$n; rm -f gpuwork/$n/tree.tar.xz
  cp $w/gpuwork/$n/bin.tar.xz $w/gpuwork/$n/READY gpuwork/$n/
  for f in PLAN; do [ -f $w/gpuwork/$n/$f ] && cp $w/gpuwork/$n/$f gpuwork/$n/; done
  git -C $w archive --format=tar HEAD -- . ':(exclude)tests/data' ':(exclude)models/tiny' ':(exclude)bench/receipts' ':(exclude)fuzz/corpus' | xz -T2 -6 > gpuwork/$n/tree.tar.xz
  echo "$n: $(cat gpuwork/$n/READY | cut -c1-60) $(du -sh gpuwork/$n | cut -f1)"
done
