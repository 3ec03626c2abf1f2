#!/usr/bin/env bash
# Session 15, call 2 (warm after the first): cudamoe's and cudagemma's staged calls again with libmicrohttpd
# carried (their CLI needs it; the device lacks it), so their CLI compares and speed probes run.
set -u
export LD_LIBRARY_PATH=$PWD/gpuwork/libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
D=bench/receipts/s15; FINAL=$OUT; A=/tmp/A2; rm -rf $A; mkdir -p $A
OUT=$A bash $D/dev.sh cudamoe:250 cudagemma:260
ls -la $A; tar cf - -C $A . | split -b 15M -d - $FINAL/res.tar.; ls -la $FINAL
