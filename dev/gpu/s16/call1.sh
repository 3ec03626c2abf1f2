#!/usr/bin/env bash
# Session 16, call 1 (the baseline, main's merged tree): llama.cpp's llama-bench and llama-server built for
# sm_90a
# in the background (kept in /tmp/llbin for the next call); the llama3-8b GGUF (synth --seed 1, quantize
# --layout gguf-ggml: the side-by-side recipe) and the qwen3-30b-a3b shape with 8 layers (NVFP4 + its GGUF)
# made
# meanwhile; the GPU tests of the merged tree (Gemma 3, MoE, exact, runtime, generate, native); then the
# per-op profiles (FP4LANE_CUDA_PROFILE) of the 8B decode and prefill steps, first tokens of cold runs, and
# the
# read ceiling (a torch device-to-device copy). From the repository root, gpuwork/s16 and gpuwork/llcpp
# carried.
set -u
G=gpuwork/s16; X=/tmp/s16; rm -rf $X; mkdir -p $X; tar xJf $G/bin.tar.xz -C $X
export LD_LIBRARY_PATH=$X/lib FP4_BUILD=$X/build-dev CUDA_MODULE_LOADING=EAGER
F=$X/bin/fp4lane; T=$X/build-dev/tests/gpu; O=$OUT; S=$O/summary.txt; t00=$SECONDS
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,memory.total \
  --format=csv,noheader; cat $X/BUILT.txt; nproc; } > $O/env.txt 2>&1; cat $O/env.txt
( t0=$SECONDS; mkdir -p /tmp/llsrc && tar xJf gpuwork/llcpp/src.tar.xz -C /tmp/llsrc &&
  cmake -S /tmp/llsrc/src -B /tmp/llb -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
   -DCMAKE_CUDA_ARCHITECTURES=90a -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
   -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=OFF \
   -DBUILD_SHARED_LIBS=OFF -DGGML_CCACHE=OFF > /tmp/llcfg.txt 2>&1 &&
  nice cmake --build /tmp/llb --target llama-bench llama-server -j 10 > /tmp/llbuild.txt 2>&1
  echo "llama.cpp build rc=$? in $((SECONDS - t0)) s"; tail -3 /tmp/llbuild.txt
  mkdir -p /tmp/llbin && cp /tmp/llb/bin/llama-bench /tmp/llb/bin/llama-server /tmp/llbin/ ) > \
  $O/llbuild.txt 2>&1 &
LP=$!
( t0=$SECONDS; timeout 200 $F synth /tmp/s8 --shape llama3-8b --threads 5 --seed 1 > /dev/null 2>&1 &&
  timeout 150 $F quantize /tmp/s8 /tmp/l8.gguf --layout gguf-ggml > /dev/null 2>&1
  echo "llama3-8b gguf rc=$? in $((SECONDS - t0)) s $(stat -c %s /tmp/l8.gguf)"; rm -rf /tmp/s8; t0=$SECONDS
  timeout 200 $F synth /tmp/q3m --shape qwen3-30b-a3b --layers 8 --threads 5 --seed 1 --to nvfp4 > \
  /dev/null 2>&1 &&
  timeout 100 $F convert /tmp/q3m /tmp/q3m.gguf --layout gguf-ggml > /dev/null 2>&1
  echo "qwen3-30b-a3b-L8 nvfp4 + gguf rc=$? in $((SECONDS - t0)) s $(stat -c %s /tmp/q3m.gguf)" ) > \
  $O/make.txt 2>&1 &
MP=$!
res() { echo "$1 rc=$2 $(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$3" | tail -1)" | tee -a $S
  [ "$2" = 0 ] || grep -m 6 -E "CHECK|FAIL|differ|ERROR" "$3" | tee -a $S; }
export FP4LANE_CUDA_UNPROVEN=1
timeout 60 $T/test_gpu_gemma > $O/t_gemma.txt 2>&1; res test_gpu_gemma $? $O/t_gemma.txt
timeout 90 $T/test_gpu_moe > $O/t_moe.txt 2>&1; res test_gpu_moe $? $O/t_moe.txt
grep -iE "native" $O/t_moe.txt | head -12 | tee -a $S
timeout 90 $T/test_gpu_exact > $O/t_exact.txt 2>&1; res test_gpu_exact $? $O/t_exact.txt
timeout 90 $T/test_gpu_native > $O/t_native.txt 2>&1; res test_gpu_native $? $O/t_native.txt
FP4_GPU_QUICK=1 timeout 120 $T/test_gpu_runtime > $O/t_runtime.txt 2>&1; res "test_gpu_runtime (quick)" \
  $? $O/t_runtime.txt
timeout 90 $T/test_gpu_generate > $O/t_generate.txt 2>&1; res test_gpu_generate $? $O/t_generate.txt
rm -rf /tmp/tg; timeout 10 $F synth /tmp/tg --shape tiny-gemma3 --to nvfp4 > /dev/null 2>&1
timeout 10 $F convert /tmp/tg /tmp/tg.gguf --layout gguf-ggml > /dev/null 2>&1
for m in /tmp/tg /tmp/tg.gguf; do
  timeout 20 $F compare $m --a "--mode exact" --b "--mode exact --device cuda" \
    --prompt-ids $(seq -s, 1 7 600 | cut -d, -f1-80) --max-drift 0 > /tmp/c.txt 2>&1
  echo "compare tiny-gemma3 $m exact cpu vs cuda rc=$? $(tail -1 /tmp/c.txt | cut -c1-160)" | tee -a $S
done
unset FP4LANE_CUDA_UNPROVEN
echo "tests done at $((SECONDS - t00)) s" | tee -a $S
python3 - > $O/ceiling.txt 2>&1 <<'PY'
import torch
n = 4 << 30; a = torch.empty(n, dtype=torch.uint8, device="cuda"); b = torch.empty_like(a)
for _ in range(3): b.copy_(a)
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
best = 1e9
for _ in range(10):
    s.record(); b.copy_(a); e.record(); torch.cuda.synchronize(); best = min(best, s.elapsed_time(e))
print("d2d copy 4 GiB: %.3f ms, %.0f GB/s read+write" % (best, 2 * n / best / 1e6))
PY
cat $O/ceiling.txt | tee -a $S
wait $MP; cat $O/make.txt | tee -a $S
python3 -c 'import random; r=random.Random(1)
print(",".join(str(r.randrange(128000)) for _ in range(3968)))' > /tmp/p3968
cut -d, -f1-512 /tmp/p3968 > /tmp/p512
: > /tmp/b512; for s in 1 2 3 4 5 6 7 8; do cat /tmp/p512 >> /tmp/b512; done
for md in native exact; do
  for c in "p512 --prompt-ids @/tmp/p512" "p3968 --prompt-ids @/tmp/p3968" "b512 --batch-file /tmp/b512"; do
    tag=${c%% *}; a=${c#* }
    FP4LANE_CUDA_PROFILE=$O/prof_${md}_$tag.txt timeout 60 $F run /tmp/l8.gguf --device cuda --mode $md \
  $a -n 33 \
      --ignore-eos --ctx 4096 > /tmp/r.txt 2>&1
    echo "profile $md $tag rc=$? $(grep -E '^prefill|rror' /tmp/r.txt | head -2 | cut -c1-200)" | tee -a $S
    timeout 60 $F run /tmp/l8.gguf --device cuda --mode $md $a -n 129 --ignore-eos --ctx 4096 > \
  /tmp/r.txt 2>&1
    echo "graph $md $tag rc=$? $(grep -E '^prefill|rror' /tmp/r.txt | head -2 | cut -c1-200)" | tee -a $S
  done
done
cat /tmp/l8.gguf > /dev/null
for md in exact native; do for i in 1 2 3; do
  python3 - $F run /tmp/l8.gguf --device cuda --mode $md -p "The capital of France is" -n 1 >> \
  $O/firsttok.txt 2>&1 <<'PY'
import resource, subprocess, sys, time
t = time.time(); p = subprocess.run(sys.argv[1:], capture_output=True, text=True); dt = time.time() - t
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
st = [l for l in (p.stdout + p.stderr).splitlines() if l.startswith("prefill")]
print("first token: %s wall %.2f s, max RSS %.0f MB, rc %d | %s" % (sys.argv[7], dt, ru.ru_maxrss / \
  1024, p.returncode, st[:1]))
PY
done; done
cat $O/firsttok.txt | tee -a $S
wait $LP; cat $O/llbuild.txt | tee -a $S
echo "call1 done in $((SECONDS - t00)) s" | tee -a $S
