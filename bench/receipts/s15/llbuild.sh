#!/usr/bin/env bash
# Session 15 on the device: llama.cpp's llama-bench and llama-server (node-llama-cpp 3.22.1's bundle, trimmed:
# gpuwork/llcpp/src.tar.xz) built for sm_90a, brought back as $OUT/llb.tar.xz.NN (15 MB parts).
set -u
mkdir -p /tmp/llsrc && tar xJf gpuwork/llcpp/src.tar.xz -C /tmp/llsrc
t0=$(date +%s)
cmake -S /tmp/llsrc/src -B /tmp/llb -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90a -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
  -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=OFF \
  -DBUILD_SHARED_LIBS=OFF -DGGML_CCACHE=OFF > /tmp/llcfg.txt 2>&1 &&
  nice cmake --build /tmp/llb --target llama-bench llama-server -j 12 > /tmp/llbuild.txt 2>&1
echo "llama.cpp build rc=$? in $(( $(date +%s) - t0 )) s" > $OUT/llbuild.txt
tail -4 /tmp/llcfg.txt /tmp/llbuild.txt >> $OUT/llbuild.txt 2>&1
if [ -x /tmp/llb/bin/llama-bench ]; then
  ldd /tmp/llb/bin/llama-bench /tmp/llb/bin/llama-server >> $OUT/llbuild.txt 2>&1
  tar cf - -C /tmp/llb/bin llama-bench llama-server | xz -T8 -6 > /tmp/llb.tar.xz
  ls -la /tmp/llb.tar.xz >> $OUT/llbuild.txt; cp /tmp/llb.tar.xz $OUT/
fi
