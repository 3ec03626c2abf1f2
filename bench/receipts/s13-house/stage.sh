#!/usr/bin/env bash
# Session 13 (House II): builds what run.sh carries, on the project VM: gpuwork/s13/bin.tar.xz
# (git-ignored) — build-dev's GPU tests (test_gpu_runtime / test_gpu_generate included: they link
# libfp4lane.a, so they need jansson's header, which only this machine has), libfp4lane_cuda.so,
# the fp4lane CLI, and the shared libraries they need that a bare device machine lacks.
#   bash bench/receipts/s13-house/stage.sh
set -e
cd "$(git rev-parse --show-toplevel)"
B=build-dev
make -j2 BUILD=$B all cuda
S=$(mktemp -d); mkdir -p $S/f/$B/tests/gpu $S/f/lib gpuwork/s13
cp $B/fp4lane $B/libfp4lane_cuda.so $S/f/$B/
cp $(find $B/tests/gpu -maxdepth 1 -type f -name 'test_gpu_*' ! -name '*.d' ! -name '*.o') $S/f/$B/tests/gpu/
for so in libjansson.so.4 libutf8proc.so.2 libpcre2-8.so.0 libcrypto.so.3; do
  p=$(ldconfig -p | awk -v n=$so '$1==n{print $NF; exit}'); cp -L "$p" $S/f/lib/
done
{ git rev-parse HEAD; git status --short | head -5; date -u; } > $S/f/BUILT.txt
(cd $S/f && tar cJf - .) > gpuwork/s13/bin.tar.xz
rm -rf $S; ls -la gpuwork/s13
