#!/usr/bin/env bash
# Session 15, the one call: in front cudamoe's then cudagemma's staged calls (GPU); beside them hfref's
# (transformers references, CPU) and the MoE references (moeref.sh).
# Everything comes back as res.tar.NN (15 MB parts).   carry: gpuwork/{cudamoe,hfref,cudagemma}
set -u
D=bench/receipts/s15; FINAL=$OUT; A=/tmp/A; rm -rf $A; mkdir -p $A
( OUT=$A bash $D/dev.sh hfref:170 > /dev/null 2>&1; OUT=$A timeout 170 bash $D/moeref.sh > /dev/null 2>&1 ) &
BG=$!
OUT=$A bash $D/dev.sh cudamoe:250 cudagemma:240
wait $BG; cat $A/summary-hfref.txt; cat $A/moeref/log.txt | grep -E "rc=" 
ls -la $A; tar cf - -C $A . | split -b 15M -d - $FINAL/res.tar.; ls -la $FINAL
