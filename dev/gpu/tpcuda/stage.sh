#!/usr/bin/env bash
# issue 33 (the split CUDA step): builds here what run.sh carries to the device, into the git-ignored
# gpuwork/tpcuda/bin.tar.xz: test_gpu_tp, libfp4lane_cuda.so, the fp4lane CLI, and the shared
# libraries a bare device machine lacks (test_gpu_tp links libfp4lane.a: jansson's header is here).
#   bash dev/gpu/tpcuda/stage.sh            (BUILD=build-cuda by default)
set -e
cd "$(git rev-parse --show-toplevel)"
B=${BUILD:-build-cuda}
make -j2 BUILD=$B all $B/libfp4lane_cuda.so $B/tests/gpu/test_gpu_tp
S=$(mktemp -d); mkdir -p $S/f/build-cuda/tests/gpu $S/f/lib gpuwork/tpcuda
cp $B/fp4lane $B/libfp4lane_cuda.so $S/f/build-cuda/
cp $B/tests/gpu/test_gpu_tp $S/f/build-cuda/tests/gpu/
for so in libjansson.so.4 libutf8proc.so.2 libpcre2-8.so.0 libcrypto.so.3 libmicrohttpd.so.12 \
    libgnutls.so.30 libp11-kit.so.0 libidn2.so.0 libunistring.so.2 libtasn1.so.6 libnettle.so.8 \
    libhogweed.so.6 libgmp.so.10 libffi.so.8; do
  p=$(ldconfig -p | awk -v n=$so '$1==n{print $NF; exit}'); cp -L "$p" $S/f/lib/
done
{ git rev-parse HEAD; git status --short | head -5; date -u; } > $S/f/BUILT.txt
(cd $S/f && tar cJf - .) > gpuwork/tpcuda/bin.tar.xz
rm -rf $S; ls -la gpuwork/tpcuda
