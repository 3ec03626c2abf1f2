#!/usr/bin/env bash
# stage.sh — builds here what dev/gpu/serve3/run.sh carries to the device: gpuwork/serve3/bin.tar.xz
# (git-ignored): the fp4lane CLI, libfp4lane_cuda.so beside it, and the shared libraries they need
# that a bare device machine lacks (jansson, PCRE2, utf8proc, OpenSSL's libcrypto, libmicrohttpd
# and what it links: GnuTLS and its helpers), under lib/ (run.sh puts them on the path of fp4lane
# alone, through bin/fp4: the device's Python keeps its own libraries), and llama-server when
# gpuwork/serve3 holds llama.cpp's bundle.
#   bash dev/gpu/serve3/stage.sh
set -e
cd "$(git rev-parse --show-toplevel)"
B=${B:-build-dev}
make -j2 BUILD=$B $B/fp4lane $B/libfp4lane_cuda.so
S=$(mktemp -d); mkdir -p $S/f/bin $S/f/lib gpuwork/serve3
cp $B/fp4lane $B/libfp4lane_cuda.so $S/f/bin/
for so in $(ldd $B/fp4lane $B/libfp4lane_cuda.so | awk '$2=="=>"{print $1}' | sort -u); do
  case $so in libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|libpthread.so*|libdl.so*|librt.so*) continue;; esac
  p=$(ldconfig -p | awk -v n=$so '$1==n{print $NF; exit}'); cp -L "$p" $S/f/lib/
done
# llama.cpp's llama-server (static, built for sm_90a on the device: gpuwork/llcpp's llb.tar.xz.*, copied
# into gpuwork/serve3), when it is here: the speed call runs it beside fp4lane serve
if ls gpuwork/serve3/llb.tar.xz.* >/dev/null 2>&1; then
  mkdir -p $S/f/llama; cat gpuwork/serve3/llb.tar.xz.* | xz -d | tar x -C $S/f/llama llama-server
fi
{ git rev-parse HEAD; git status --short | head -5; date -u; } > $S/f/BUILT.txt
(cd $S/f && tar cJf - .) > gpuwork/serve3/bin.tar.xz
rm -rf $S; ls -la gpuwork/serve3
