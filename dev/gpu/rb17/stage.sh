#!/usr/bin/env bash
# Session 17's rebased nativemoe17 + tpcuda17 in one device call: builds here what run.sh carries (the
# device has no -dev headers) into the git-ignored gpuwork/rb17/bin.tar.xz: build-cuda's CLI,
# libfp4lane_cuda.so, test_gpu_moe, test_gpu_runtime and test_gpu_tp, and the shared libraries a bare
# device lacks (ldd of each; libc, libstdc++ and the CUDA runtime stay the device's).
#   bash dev/gpu/rb17/stage.sh            (BUILD=build-cuda by default)
set -e
cd "$(git rev-parse --show-toplevel)"
B=${BUILD:-build-cuda}
T="test_gpu_moe test_gpu_runtime test_gpu_tp"
make -j2 BUILD=$B all $B/libfp4lane_cuda.so $(for t in $T; do echo $B/tests/gpu/$t; done) > /dev/null
S=$(mktemp -d); mkdir -p $S/f/build-cuda/tests/gpu $S/f/lib gpuwork/rb17
cp $B/fp4lane $B/libfp4lane_cuda.so $S/f/build-cuda/
for t in $T; do cp $B/tests/gpu/$t $S/f/build-cuda/tests/gpu/; done
for so in $(ldd $B/fp4lane $B/libfp4lane_cuda.so $(for t in $T; do echo $B/tests/gpu/$t; done) |
            awk '$2=="=>"{print $1}' | sort -u); do
  case $so in libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|libpthread.so*|libdl.so*|librt.so*) continue;; esac
  case $so in libcuda.so*|libcudart.so*|libcublas*|libnccl*) continue;; esac
  p=$(ldconfig -p | awk -v n=$so '$1==n{print $NF; exit}'); [ -n "$p" ] && cp -L "$p" $S/f/lib/
done
{ git rev-parse HEAD; git status --short | head -5; date -u; } > $S/f/BUILT.txt
(cd $S/f && tar cJf - .) > gpuwork/rb17/bin.tar.xz
cp dev/gpu/rb17/run.sh gpuwork/rb17/run.sh # a copy, should the device's tree lack the script
rm -rf $S; ls -la gpuwork/rb17; du -sh gpuwork/rb17
