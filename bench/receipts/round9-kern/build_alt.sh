#!/usr/bin/env bash
# round 9 (gpukern): the candidate route builds for a device call (none was lent in round 9). Each
# recompiles a16_exact.o and a16_native.o with the -D flags given, archives a copy of
# libfp4lane_cuda.a with them and links test_gpu_exact / test_gpu_native against it into
# $DST/alt/<name>/; the candidate "t1" also gets its libfp4lane_cuda.so in $DST/alt/t1/lib/ (for
# test_gpu_runtime / test_gpu_generate: FP4_BUILD=alt/t1/lib). Run from the worktree root after
# `make -j2 BUILD=build-gpu cuda`. The macros: src/cuda/a16_exact.cu (ITEM_*), a16_native.cu (NITEM_*).
set -eu
B=build-gpu DST=${DST:?}
NVF="-O3 -std=c++17 -lineinfo -Iinclude -Isrc --fmad=false -Xcompiler -fPIC,-fvisibility=hidden
 -gencode arch=compute_90a,code=sm_90a -gencode arch=compute_80,code=compute_80"
FMT="$B/src/format/codec.o $B/src/format/contract.o $B/src/format/contract_avx512.o $B/src/format/contract_x86.o
 $B/src/format/cpu_path.o $B/src/format/kquant.o $B/src/format/kquant_avx2.o $B/src/format/kquant_avx512.o
 $B/src/format/kquant_dot.o $B/src/format/nvfp4.o $B/src/format/status.o $B/src/format/threads.o"
CPU="$B/src/cpu/project.o $B/src/cpu/native.o $B/src/model/dequant.o $FMT"
CU_REST="dense dense_pinned dequant device dispatch error fp8 kquant q8k w4a4"
mkdir -p "$DST/alt"; : > "$DST/alt/flags.txt"
alt() { # name flags...
  local n=$1; shift
  local o=$B/alt/$n; mkdir -p "$o" "$DST/alt/$n"
  nvcc $NVF "$@" -c src/cuda/a16_exact.cu -o "$o/a16_exact.o"
  nvcc $NVF "$@" -c src/cuda/a16_native.cu -o "$o/a16_native.o"
  cp $B/libfp4lane_cuda.a "$o/lib.a"
  ar rcs "$o/lib.a" "$o/a16_exact.o" "$o/a16_native.o"
  for t in test_gpu_exact test_gpu_native; do
    nvcc $NVF -Itests -o "$DST/alt/$n/$t" tests/gpu/$t.cu $B/tests/gpu/check.o "$o/lib.a" $CPU \
      -L/usr/local/cuda/lib64 -lcudart -lpthread -lm
  done
  if [ "$n" = t1 ]; then
    mkdir -p "$DST/alt/$n/lib"
    nvcc -shared -o "$DST/alt/$n/lib/libfp4lane_cuda.so" "$o/a16_exact.o" "$o/a16_native.o" \
      $(for c in $CU_REST; do echo $B/src/cuda/$c.o; done) $B/src/runtime/step_cuda.o $FMT $B/src/model/dequant.o \
      -Xlinker --version-script=$B/libfp4lane_cuda.map -Xlinker --no-undefined -Xlinker -z -Xlinker nodelete \
      -lpthread -lm
  fi
  echo "alt/$n: $*" >> "$DST/alt/flags.txt"
}
# t1, the candidate: exact lookup words from shared memory, 3 stages on short runs (lab exact.72 on the
# 4096-wide shapes, exact.71 on the others); native 1 column on the item kernel <false, 8, 3, TAB 1>
# (lab native.72) where it fits one wave
alt t1 -DITEM_TAB=1 -DITEM_SHORT_STAGES=16 -DNITEM_ON=1 -DNITEM_TAB=1
alt t0 -DITEM_TAB=0 -DITEM_SHORT_STAGES=16 -DNITEM_ON=1 -DNITEM_TAB=0 # t1 with round 8's fp4_pin'd words
alt t1n4 -DITEM_TAB=1 -DNITEM_ON=1              # exact: 4 stages everywhere (lab exact.71)
alt t1n3 -DITEM_TAB=1 -DITEM_NST=3 -DNITEM_ON=1 # exact: 3 stages everywhere (lab exact.72)
alt t0n3 -DITEM_NST=3 -DNITEM_ON=1 -DNITEM_TAB=0 # exact: lab exact.64 everywhere; native: lab native.64
