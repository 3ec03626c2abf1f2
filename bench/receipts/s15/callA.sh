#!/usr/bin/env bash
# Session 15, call A: llama.cpp built in the background (llbuild.sh) and hfref's transformers references
# (CPU) beside it; in front, cudamoe's staged call. Everything comes back as res.tar.NN (15 MB parts).
#   carry: gpuwork/{llcpp,cudamoe,hfref}
set -u
D=bench/receipts/s15; FINAL=$OUT; A=/tmp/A; rm -rf $A; mkdir -p $A
OUT=$A bash $D/llbuild.sh & LB=$!
OUT=$A bash $D/dev.sh hfref:200 > /dev/null 2>&1 & HB=$!
OUT=$A bash $D/dev.sh cudamoe:250
wait $HB; cat $A/summary-hfref.txt
wait $LB; head -3 $A/llbuild.txt
ls -la $A; tar cf - -C $A . | split -b 15M -d - $FINAL/res.tar.; ls -la $FINAL
