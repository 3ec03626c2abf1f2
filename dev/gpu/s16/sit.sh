#!/usr/bin/env bash
# Session 16: one device call running helpers' staged calls in turn:
#   bash dev/gpu/s16/sit.sh [lead] NAME[:SECS]...
# (dev/gpu/NAME/run.sh with gpuwork/NAME carried; "lead" = dev/gpu/s16/lead.sh). Each one's stdout goes to
# $OUT/NAME.out and its $OUT/NAME/ folder into $OUT/NAME.tgz, so few files come back; summary on stdout.
set -u
for a in "$@"; do
  n=${a%%:*}; lim=${SIT_TIMEOUT:-280}; [ "$a" != "$n" ] && lim=${a#*:}  # NAME:SECONDS
  t0=$SECONDS
  if [ "$n" = lead ]; then s=dev/gpu/s16/lead.sh; else s=dev/gpu/$n/run.sh; fi
  echo "=== $n ($(date -u +%H:%M:%S))"
  timeout $lim bash $s > $OUT/$n.out 2>&1; rc=$?
  tail -n ${SIT_TAIL:-25} $OUT/$n.out | cut -c1-300
  echo "=== $n rc=$rc in $((SECONDS - t0)) s"
  [ -d $OUT/$n ] && (cd $OUT && tar czf $n.tgz $n && rm -rf $n)
done
[ -d $OUT/hfref ] && (cd $OUT && tar czf hfref.tgz hfref && rm -rf hfref)
ls $OUT
