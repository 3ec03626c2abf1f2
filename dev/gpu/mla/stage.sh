#!/usr/bin/env bash
# issue 31 (DeepSeek-V3 on CUDA: latent attention and the group-limited routing): builds here what
# run.sh carries to the device, into the git-ignored gpuwork/mla/bin.tar.xz: test_gpu_deepseek, the
# runtime and MoE GPU tests (the step's layer and MoE code moved), libfp4lane_cuda.so, the fp4lane
# CLI and the shared libraries a bare device machine lacks.
#   bash dev/gpu/mla/stage.sh
set -e
cd "$(git rev-parse --show-toplevel)"
B=build-cuda
make -j2 BUILD=$B all cuda
S=$(mktemp -d); mkdir -p $S/f/$B/tests/gpu $S/f/lib gpuwork/mla
cp $B/fp4lane $B/libfp4lane_cuda.so $S/f/$B/
for t in test_gpu_deepseek test_gpu_runtime test_gpu_moe test_gpu_gemma; do
  cp $B/tests/gpu/$t $S/f/$B/tests/gpu/
done
for so in libjansson.so.4 libutf8proc.so.2 libpcre2-8.so.0 libcrypto.so.3 libmicrohttpd.so.12 \
    libgnutls.so.30 libp11-kit.so.0 libidn2.so.0 libunistring.so.2 libtasn1.so.6 libnettle.so.8 \
    libhogweed.so.6 libgmp.so.10 libffi.so.8; do
  p=$(ldconfig -p | awk -v n=$so '$1==n{print $NF; exit}'); cp -L "$p" $S/f/lib/
done
{ git rev-parse HEAD; git status --short | head -5; date -u; } > $S/f/BUILT.txt
(cd $S/f && tar cJf - .) > gpuwork/mla/bin.tar.xz
rm -rf $S; ls -la gpuwork/mla
