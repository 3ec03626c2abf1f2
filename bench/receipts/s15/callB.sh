#!/usr/bin/env bash
# Session 15, call B: session 13's prepared call (every GPU test of main at bc7ac3b, CPU exact = CUDA exact
# through the CLI, compute-sanitizer, the MoE references of main's dev/ref/hf_reference.py) in the background
# beside cudagemma's and serve3's staged calls. Everything comes back as res.tar.NN (15 MB parts).
#   carry: gpuwork/{s13,cudagemma,serve3}
set -u
D=bench/receipts/s15; FINAL=$OUT; A=/tmp/A; rm -rf $A; mkdir -p $A/s13
OUT=$A/s13 timeout -k 5 420 bash bench/receipts/s13-house/run.sh > $A/s13/stdout.txt 2>&1 & SB=$!
OUT=$A bash $D/dev.sh cudagemma:260 serve3:150
wait $SB; echo "s13 rc=$?"; cat $A/s13/summary.txt
ls -la $A; tar cf - -C $A . | split -b 15M -d - $FINAL/res.tar.; ls -la $FINAL
