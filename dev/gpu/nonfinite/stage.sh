#!/usr/bin/env bash
# The crafted +inf KV cache on CUDA (test_gpu_generate (d)): builds here what run.sh carries to the
# device, into the git-ignored gpuwork/nonfinite/bin.tar.xz: test_gpu_generate, test_gpu_runtime and
# test_gpu_attention, libfp4lane_cuda.so, the fp4lane CLI (test_gpu_generate runs it), and the shared
# libraries a bare device machine lacks (libmicrohttpd pulls gnutls and its own). Built in build-dev
# (B=build-cuda reuses that build: the same flags); packed under build-dev/ either way.
#   bash dev/gpu/nonfinite/stage.sh
set -e
cd "$(git rev-parse --show-toplevel)"
B=${B:-build-dev}
T="$B/tests/gpu/test_gpu_generate $B/tests/gpu/test_gpu_runtime $B/tests/gpu/test_gpu_attention"
make -j2 BUILD=$B $B/fp4lane $B/libfp4lane_cuda.so $T
S=$(mktemp -d); mkdir -p $S/f/build-dev/tests/gpu $S/f/lib gpuwork/nonfinite
cp $B/fp4lane $B/libfp4lane_cuda.so $S/f/build-dev/
for t in $T; do cp $t $S/f/build-dev/tests/gpu/; done
for so in $(ldd $B/fp4lane $B/libfp4lane_cuda.so $T | awk '$2=="=>" && $3 ~ /^\// {print $1}' | sort -u); do
  case $so in libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libstdc++.so*|libgcc_s.so*) continue;;
    ld-linux*|libcuda.so*|libcudart.so*|libnvidia*) continue;; esac
  p=$(ldconfig -p | awk -v n=$so '$1==n{print $NF; exit}'); [ -n "$p" ] && cp -L "$p" $S/f/lib/
done
{ git rev-parse HEAD; git status --short | head -5; date -u; } > $S/f/BUILT.txt
(cd $S/f && tar cJf - .) > gpuwork/nonfinite/bin.tar.xz
ls $S/f/lib; rm -rf $S; ls -la gpuwork/nonfinite
