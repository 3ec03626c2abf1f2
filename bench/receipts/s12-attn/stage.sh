#!/usr/bin/env bash
# Session 12: builds what run.sh carries, on the project VM (no GPU needed): gpuwork/s12/bin.tar.xz
# (git-ignored) with f/attn_lab (dev/cuda, session 12's staged variants 10-13) and
# f/tests/gpu/test_gpu_attention, built in build-attn from this worktree's HEAD (f/BUILT.txt).
#   bash bench/receipts/s12-attn/stage.sh      (about 10 minutes on 2 vCPUs from a clean build-attn)
set -e
cd "$(git rev-parse --show-toplevel)"
B=$PWD/build-attn
make -j2 BUILD=build-attn build-attn/libfp4lane_cuda.a build-attn/tests/gpu/test_gpu_attention
make -C dev/cuda BUILD=$B $B/dev/cuda/attn_lab
S=$(mktemp -d); mkdir -p $S/f/tests/gpu gpuwork/s12
cp $B/dev/cuda/attn_lab $S/f/ && cp $B/tests/gpu/test_gpu_attention $S/f/tests/gpu/
{ git rev-parse HEAD; git status --short | head -5; date -u; } > $S/f/BUILT.txt
(cd $S && tar cJf - f) > gpuwork/s12/bin.tar.xz
rm -rf $S; ls -la gpuwork/s12; xz -dc gpuwork/s12/bin.tar.xz | tar tvf -
