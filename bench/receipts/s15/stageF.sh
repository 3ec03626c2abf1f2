#!/usr/bin/env bash
# Session 15, the last call: the merged tree's (wt-int) GPU tests and CLI into /work/main/gpuwork/int/bin.tar.xz
set -e
cd "$(git rev-parse --show-toplevel)"; B=build-dev; S=$(mktemp -d); mkdir -p $S/f/$B/tests/gpu $S/f/lib
cp $B/fp4lane $B/libfp4lane_cuda.so $S/f/$B/
for t in gemma moe runtime exact generate; do cp $B/tests/gpu/test_gpu_$t $S/f/$B/tests/gpu/; done
for so in libjansson.so.4 libutf8proc.so.2 libpcre2-8.so.0 libcrypto.so.3 libmicrohttpd.so.12 libgnutls.so.30 \
  libp11-kit.so.0 libidn2.so.0 libunistring.so.2 libtasn1.so.6 libnettle.so.8 libhogweed.so.6 libgmp.so.10; do
  p=$(ldconfig -p | awk -v n=$so '$1==n{print $NF; exit}'); cp -L "$p" $S/f/lib/
done
{ git rev-parse HEAD; date -u; } > $S/f/BUILT.txt
mkdir -p /work/main/gpuwork/int; (cd $S/f && tar cJf - .) > /work/main/gpuwork/int/bin.tar.xz
rm -rf $S; ls -la /work/main/gpuwork/int
