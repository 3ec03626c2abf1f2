#!/usr/bin/env bash
# Session 15, call 4 (warm): serve3's staged call (serve --device cuda) beside session 13's prepared call
# (main's GPU tests at bc7ac3b; its MoE references part is skipped by the time limit if it comes to it).
set -u
D=bench/receipts/s15; FINAL=$OUT; A=/tmp/A4; rm -rf $A; mkdir -p $A/s13
S13_NO_MOE=1 OUT=$A/s13 timeout -k 5 280 bash bench/receipts/s13-house/run.sh > $A/s13/stdout.txt 2>&1 & SB=$!
OUT=$A bash $D/dev.sh serve3:200
wait $SB; echo "s13 rc=$?"; cat $A/s13/summary.txt
tar cf - -C $A . | split -b 15M -d - $FINAL/res.tar.; ls -la $FINAL
