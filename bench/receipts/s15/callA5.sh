#!/usr/bin/env bash
# Session 15, call 5 (warm): main's test_gpu_generate and the CLI compares of session 13's call, with
# libmicrohttpd carried (the CLI links it since the server landed; s13's staging predates that).
set -u
export LD_LIBRARY_PATH=$PWD/gpuwork/libs
tar xJf gpuwork/s13/bin.tar.xz; export LD_LIBRARY_PATH=$PWD/lib:$LD_LIBRARY_PATH FP4_BUILD=build-dev
timeout 200 build-dev/tests/gpu/test_gpu_generate > $OUT/generate.txt 2>&1
echo "test_gpu_generate rc=$? $(grep -E '^[0-9]+ passed' $OUT/generate.txt | tail -1)"; grep -m 8 "CHECK" $OUT/generate.txt
for m in models/tiny tests/data/hf/qwen3/nvfp4 tests/data/hf/llama31; do
  timeout 60 build-dev/fp4lane compare "$m" --a "--mode exact" --b "--mode exact --device cuda" \
    --prompt-ids 1,5,9,200,33,7,81,4 --max-drift 0 > /tmp/cmp.txt 2>&1
  echo "compare $m exact cpu vs cuda rc=$? $(tail -1 /tmp/cmp.txt)"
done
