#!/usr/bin/env bash
# Session 17: one device call running staged parts in turn, after prep.sh:
#   bash dev/gpu/s17/sit.sh NAME[:SECS]...
# NAME: gpuall (s17/gpuall.sh), lead (s16/lead.sh) or a helper's dev/gpu/NAME/run.sh. Each one's stdout goes
# to $OUT/NAME.out and its $OUT/NAME/ folder into $OUT/NAME.tgz (few files come back); summary on stdout.
set -u
export OUT=${OUT:-device-out}; mkdir -p $OUT
bash dev/gpu/s17/prep.sh
for a in "$@"; do
  n=${a%%:*}; lim=${SIT_TIMEOUT:-280}; [ "$a" != "$n" ] && lim=${a#*:}
  case $n in gpuall) s=dev/gpu/s17/gpuall.sh;; lead) s=dev/gpu/s16/lead.sh;; *) s=dev/gpu/$n/run.sh;; esac
  t0=$SECONDS; echo "=== $n ($(date -u +%H:%M:%S))"
  timeout $lim bash $s > $OUT/$n.out 2>&1; rc=$?
  tail -n ${SIT_TAIL:-30} $OUT/$n.out | cut -c1-300
  echo "=== $n rc=$rc in $((SECONDS - t0)) s"
  [ -d $OUT/$n ] && (cd $OUT && tar czf $n.tgz $n && rm -rf $n)
done
[ -d $OUT/hfref ] && (cd $OUT && tar czf hfref.tgz hfref && rm -rf hfref)
ls $OUT
