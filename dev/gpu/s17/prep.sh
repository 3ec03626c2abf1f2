#!/usr/bin/env bash
# Session 17, on the device from the repository root with gpuwork/s17 carried: unpack stage.sh's tar into
# /tmp/s17 (once per machine) and give each staged run.sh the layout it reads (symlinks into /tmp/s17).
set -u
U=/tmp/s17
if [ ! -f $U/BUILT.txt ]; then rm -rf $U; mkdir -p $U; tar xJf gpuwork/s17/bin.tar.xz -C $U; fi
chmod +x $U/build-dev/fp4lane $U/build-dev/probe $U/build-dev/tests/gpu/* $U/build-dev/dev/cuda/* 2>/dev/null
lay() { # dir, name of the build folder inside it
  mkdir -p "$1"; rm -rf "$1/$2" "$1/lib"; ln -s $U/build-dev "$1/$2"; ln -s $U/lib "$1/lib"
  cp $U/BUILT.txt "$1/"; }
lay /tmp/mla build-cuda; lay gpuwork/decode build-cuda; lay gpuwork/imma2 build-dev
lay gpuwork/firsttok new; rm -rf gpuwork/firsttok/old; ln -s $U/build-dev gpuwork/firsttok/old
lay /tmp/s16 build-dev; mkdir -p /tmp/s16/bin
ln -sf $U/build-dev/fp4lane /tmp/s16/bin/fp4lane; ln -sf $U/build-dev/libfp4lane_cuda.so /tmp/s16/bin/
head -1 $U/BUILT.txt
