#!/usr/bin/env bash
# Session 12 (wide): builds what run.sh carries, on the project VM (no GPU needed): gpuwork/s12w/bin.tar.xz
# (git-ignored) with f/attn_lab (dev/cuda: session 12's staged variants 10-15 AND session 12 (wide)'s ring
# variants 16-21, one binary) and f/tests/gpu/test_gpu_attention, built in build-wide from this worktree's
# HEAD (f/BUILT.txt), plus the ptxas report of attn_lab's attention kernels (f/ptxas.txt).
#   bash bench/receipts/s12-wide/stage.sh      (about 5 minutes on 2 vCPUs from a clean build-wide)
set -e
cd "$(git rev-parse --show-toplevel)"
B=$PWD/build-wide
make -j2 BUILD=build-wide build-wide/libfp4lane_cuda.a build-wide/tests/gpu/test_gpu_attention
rm -f $B/dev/cuda/attn_lab
make -C dev/cuda BUILD=$B $B/dev/cuda/attn_lab
S=$(mktemp -d); mkdir -p $S/f/tests/gpu gpuwork/s12w
cp $B/dev/cuda/attn_lab $S/f/ && cp $B/tests/gpu/test_gpu_attention $S/f/tests/gpu/
{ git rev-parse HEAD; git status --short | head -5; date -u; } > $S/f/BUILT.txt
(cd $S && tar cJf - f) > gpuwork/s12w/bin.tar.xz
rm -rf $S; ls -la gpuwork/s12w; xz -dc gpuwork/s12w/bin.tar.xz | tar tvf -
