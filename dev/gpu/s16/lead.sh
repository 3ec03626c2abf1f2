#!/usr/bin/env bash
# Session 16, the lead's part of a later sitting (gpuwork/s16 carried, staged with the library inside
# FP4_BUILD this time): test_gpu_gemma, test_gpu_runtime (quick) and test_gpu_generate with FP4_GPU_REQUIRE=1
# (a missing library fails instead of skipping), CPU vs CUDA exact compares of tiny-gemma3 (HF and gguf-ggml),
# and, with gpuwork/hfref and tests/data/hf/gemma3 carried, Gemma 3's NVFP4 transformers reference.
set -u
G=gpuwork/s16; X=/tmp/s16; if [ -f $G/bin.tar.xz ]; then # else laid out by dev/gpu/s17/prep.sh
  rm -rf $X; mkdir -p $X; tar xJf $G/bin.tar.xz -C $X; cp $X/bin/libfp4lane_cuda.so $X/build-dev/
fi
export LD_LIBRARY_PATH=$X/lib FP4_BUILD=$X/build-dev CUDA_MODULE_LOADING=EAGER FP4_GPU_REQUIRE=1
F=$X/bin/fp4lane; T=$X/build-dev/tests/gpu; O=$OUT/lead; mkdir -p $O; S=$O/summary.txt
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat $X/BUILT.txt; } \
  | tee $O/env.txt
res() { echo "$1 rc=$2 $(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$3" | tail -1)" | tee -a $S
  [ "$2" = 0 ] || grep -m 6 -E "CHECK|FAIL|differ|ERROR" "$3" | tee -a $S; }
timeout 90 $T/test_gpu_gemma > $O/t_gemma.txt 2>&1; res test_gpu_gemma $? $O/t_gemma.txt
grep -iE "native|skipped" $O/t_gemma.txt | head -8 | tee -a $S
FP4_GPU_QUICK=1 timeout 120 $T/test_gpu_runtime > $O/t_runtime.txt 2>&1
res "test_gpu_runtime (quick)" $? $O/t_runtime.txt
timeout 90 $T/test_gpu_generate > $O/t_generate.txt 2>&1; res test_gpu_generate $? $O/t_generate.txt
rm -rf /tmp/tg; timeout 10 $F synth /tmp/tg --shape tiny-gemma3 --to nvfp4 > /dev/null 2>&1
timeout 10 $F convert /tmp/tg /tmp/tg.gguf --layout gguf-ggml > /dev/null 2>&1
for m in /tmp/tg /tmp/tg.gguf; do
  FP4LANE_CUDA_UNPROVEN=1 timeout 30 $F compare $m --a "--mode exact" --b "--mode exact --device cuda" \
    --prompt-ids $(seq -s, 1 5 500 | cut -d, -f1-90) --max-drift 0 > /tmp/c.txt 2>&1
  echo "compare tiny-gemma3 $m exact cpu vs cuda rc=$? $(tail -1 /tmp/c.txt | cut -c1-160)" | tee -a $S
done
if [ -f gpuwork/hfref/bin.tar.xz ] && [ -d tests/data/hf/gemma3 ]; then
  timeout 120 bash dev/gpu/hfref/run2.sh > $O/hfref.txt 2>&1; echo "hfref run2 rc=$?" | tee -a $S
  tail -5 $O/hfref.txt | tee -a $S
fi
