#!/usr/bin/env bash
# int8mma (issue 32 item 2): builds what run.sh carries into gpuwork/int8mma/bin.tar.xz (git-ignored):
# build-dev's GPU tests, libfp4lane_cuda.so, the fp4lane CLI and the shared libraries a bare device
# machine lacks (bench/receipts/s13-house/stage.sh's list).
#   bash dev/gpu/int8mma/stage.sh
set -e
cd "$(git rev-parse --show-toplevel)"
B=build-dev
make -j2 BUILD=$B all cuda
S=$(mktemp -d); mkdir -p $S/f/$B/tests/gpu $S/f/lib gpuwork/int8mma
cp $B/fp4lane $B/libfp4lane_cuda.so $S/f/$B/
cp $(find $B/tests/gpu -maxdepth 1 -type f -name 'test_gpu_*' ! -name '*.d' ! -name '*.o') $S/f/$B/tests/gpu/
# every shared library of the CLI and the tests but the C runtime's own and the CUDA runtime (the
# device's: earlier sessions' stages carried none) — libmicrohttpd pulls gnutls
ldd $B/fp4lane $S/f/$B/tests/gpu/* | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|libcudart|ld-linux[^/]*)\.so' |
  while read -r p; do cp -L "$p" $S/f/lib/; done
{ git rev-parse HEAD; git status --short | head -5; date -u; } > $S/f/BUILT.txt
(cd $S/f && tar cJf - .) > gpuwork/int8mma/bin.tar.xz
rm -rf $S; ls -la gpuwork/int8mma
