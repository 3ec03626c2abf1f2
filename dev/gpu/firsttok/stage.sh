#!/usr/bin/env bash
# firsttok (issue 32 item 3): builds what run.sh carries into gpuwork/firsttok/bin.tar.xz (git-ignored):
# new/ = this tree's fp4lane CLI, libfp4lane_cuda.so, test_gpu_runtime (its warm_case) and probe.c
# (cudart static, as the library links it); old/ = the libfp4lane_cuda.so and CLI of OLD_REV (default
# main): its step objects, env.o and tools/fp4lane.o compiled from OLD_REV's sources, linked with this
# build's other objects (the same sources where OLD_REV..HEAD touches only src/cuda/step, env.* and
# the CLI's main: checked);
# data/ = tests/data/hf/llama (test_gpu_runtime reads it; the slimmed device tree lacks it); lib/ =
# the shared libraries a bare device lacks.
#   bash dev/gpu/firsttok/stage.sh
set -e
cd "$(git rev-parse --show-toplevel)"
B=build-cuda; OLD_REV=${OLD_REV:-main}; G=gpuwork/firsttok
make -j2 BUILD=$B all cuda
chg=$(git diff --name-only $OLD_REV HEAD -- src include tools |
  grep -vE '^(src/cuda/(step/|env\.(cu|h)$)|tools/fp4lane\.c$)' || true)
[ -z "$chg" ] || { echo "stage: $OLD_REV..HEAD changes $chg beyond what old/ rebuilds" >&2; exit 1; }
T=$(mktemp -d); mkdir -p $T/src $T/o
git archive $OLD_REV src include tools | tar -x -C $T/src
NV="nvcc -O3 -std=c++17 -lineinfo -I$T/src/include -I$T/src/src --fmad=false
    -Xcompiler -fPIC,-fvisibility=hidden -gencode arch=compute_90a,code=sm_90a
    -gencode arch=compute_80,code=compute_80 -DFP4_CU_BUILD_CC=90"
for f in $T/src/src/cuda/step/*.cu $T/src/src/cuda/env.cu; do
  $NV -c $f -o $T/o/$(basename ${f%.cu}).o
done
printf '{ global: fp4_rt_cuda_backend; local: *; };\n' > $T/map
nvcc -shared -o $T/libfp4lane_cuda.so $(ls $B/src/cuda/*.o | grep -v '/env\.o$') $T/o/*.o \
  $(ls $B/src/common/*.o $B/src/format/*.o) -Xlinker --version-script=$T/map -Xlinker --no-undefined \
  -Xlinker -z -Xlinker nodelete -lpthread -lm
# the old CLI: OLD_REV's tools/fp4lane.c (its main) compiled and linked as make does, with this build's rest
make -s -n -B BUILD=$B $B/fp4lane 2>/dev/null | grep -E -- " -c tools/fp4lane\.c " |
  sed "s# -c tools/fp4lane\.c # -c $T/src/tools/fp4lane.c #; s# -o $B/tools/fp4lane\.o# -o $T/o/cli.o#" | sh
make -s -n -B BUILD=$B $B/fp4lane 2>/dev/null | grep -E -- " -o $B/fp4lane " |
  sed "s# -o $B/fp4lane # -o $T/fp4lane #; s# $B/tools/fp4lane\.o # $T/o/cli.o #" | sh
gcc -O2 -Wall -Werror -I/usr/local/cuda/include dev/gpu/firsttok/probe.c -o $T/probe \
  -L/usr/local/cuda/lib64 -lcudart_static -ldl -lpthread -lrt
S=$T/f; mkdir -p $S/new/tests/gpu $S/old $S/lib $S/data $G
cp $B/fp4lane $B/libfp4lane_cuda.so $T/probe $S/new/
cp $B/tests/gpu/test_gpu_runtime $S/new/tests/gpu/
cp $T/libfp4lane_cuda.so $T/fp4lane $S/old/
cp -r tests/data/hf/llama $S/data/
ldd $B/fp4lane $S/new/tests/gpu/* | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|libcudart|ld-linux[^/]*)\.so' |
  while read -r p; do cp -L "$p" $S/lib/; done
{ git rev-parse HEAD; git status --short | head -5; echo "old: $(git rev-parse $OLD_REV)"; date -u; } \
  > $S/BUILT.txt
(cd $S && tar cJf - .) > $G/bin.tar.xz
rm -rf $T; ls -la $G
