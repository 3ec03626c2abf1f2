#!/usr/bin/env bash
# run.sh — fp4lane serve beside llama.cpp's llama-server on the GPU machine, one sitting, driven by
# our load generator (bench/serve/loadgen.py) on loopback: 1, 8, 32 and 64 concurrent clients, each
# request a PROMPT-token prompt and ANSWER tokens (default 512/128); aggregate tok/s, TTFT p50/p99,
# inter-token p50/p99, into $OUT/serve.md (bench/serve.md's table) and $OUT/serve.jsonl. Then
# `fp4lane run`'s decode speed on the same model, the 1-client reference (target: within 5 %).
# Prepared for the device; not run in this repository yet (bench/serve.md says so).
#
# usage, from the repository root:
#   bash bench/serve/run.sh BIN_DIR MODEL GGUF LLAMA_SERVER
# BIN_DIR: fp4lane and libfp4lane_cuda.so (`make cuda`); MODEL: the NVFP4 checkpoint (llama3-8b
# shape, with its tokenizer); GGUF: the same weights for llama.cpp (its NVFP4 type, or Q4_K_M for
# the other column); LLAMA_SERVER: llama-server built from the bundle of `make llama-src`
# (third_party/llama.cpp-src: cmake -B b -DGGML_CUDA=ON && cmake --build b --target llama-server).
# Env: CLIENTS (default "1 8 32 64"), PROMPT, ANSWER, CTX (per sequence, default PROMPT+ANSWER+64),
# MODE (exact|native, default native: the speed lane; exact for the batch-invariant one), OUT,
# REQUESTS (measured requests per cell) or PER_CLIENT (per client, at least 8; default 4), CELL_TIMEOUT
# (seconds per cell, default 1800), DEVICE (cuda;
# cpu to rehearse without a GPU), LLAMA_LD (LD_LIBRARY_PATH for llama-server alone; LLAMA_SERVER
# "none" skips it).
set -u
B=$1 MODEL=$2 GGUF=$3 LLAMA=$4
CLIENTS=${CLIENTS:-1 8 32 64} PROMPT=${PROMPT:-512} ANSWER=${ANSWER:-128} MODE=${MODE:-native}
DEVICE=${DEVICE:-cuda} REQ="${REQUESTS:+--requests $REQUESTS} ${PER_CLIENT:+--per-client $PER_CLIENT}"
CELL_TIMEOUT=${CELL_TIMEOUT:-1800}
CTX=${CTX:-$((PROMPT + ANSWER + 64))}
OUT=${OUT:-device-out}
mkdir -p "$OUT"
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done' EXIT
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc; } >"$OUT/serve_env.txt" 2>&1
wait_up() { # URL LOG: up to 4 minutes (the model's upload), while the server lives
  for _ in $(seq 480); do
    kill -0 "${pids[-1]}" 2>/dev/null || break
    python3 -c "import urllib.request as u,sys; u.urlopen(sys.argv[1] + '/health', timeout=2)" "$1" 2>/dev/null \
      && return 0
    sleep 0.5
  done
  echo "not up: $1" >&2; tail -20 "$2" >&2; return 1
}
stop() { # PID: SIGTERM, then SIGKILL after 30 s
  kill -TERM "$1" 2>/dev/null
  for _ in $(seq 60); do kill -0 "$1" 2>/dev/null || break; sleep 0.5; done
  kill -9 "$1" 2>/dev/null; wait "$1" 2>/dev/null
}
mem() { echo "$1: $(nvidia-smi --query-gpu=memory.used --format=csv,noheader 2>&1)" >>"$OUT/gpu_mem.txt"; }
table() { echo "| server | clients | ok | tokens | tok/s | TTFT p50 s | TTFT p99 s | ITL p50 s | ITL p99 s | stream tok/s p50 |"
          echo "|---|---|---|---|---|---|---|---|---|---|"; }
{ echo "prompt $PROMPT, answer $ANSWER, mode $MODE, $(head -n 2 "$OUT/serve_env.txt" | tail -n 1)"; table; } \
  >"$OUT/serve.md"
max=0; for c in $CLIENTS; do [ "$c" -gt "$max" ] && max=$c; done
# fp4lane: one sequence per client at the most clients, the same context per sequence
"$B/fp4lane" serve "$MODEL" --device "$DEVICE" --mode "$MODE" --parallel "$max" --ctx "$CTX" --port 8091 \
  --queue 1024 --name bench 2>"$OUT/fp4lane_serve.log" &
pids+=($!)
if wait_up http://127.0.0.1:8091 "$OUT/fp4lane_serve.log"; then
  for c in $CLIENTS; do
    timeout $((CELL_TIMEOUT + 30)) python3 bench/serve/loadgen.py --time-limit "$CELL_TIMEOUT" \
      http://127.0.0.1:8091 --clients "$c" --prompt "$PROMPT" \
      --answer "$ANSWER" $REQ --label fp4lane --json "$OUT/serve.jsonl" >>"$OUT/serve.md"
    mem "fp4lane $c"
  done
  python3 -c "import urllib.request as u; print(u.urlopen('http://127.0.0.1:8091/metrics').read().decode())" \
    >"$OUT/fp4lane_metrics.txt" 2>&1
fi
stop "${pids[-1]}"
# llama-server: the same slots and context per slot (its -c is the total), continuous batching on
if [ "$LLAMA" != none ]; then
  LD_LIBRARY_PATH=${LLAMA_LD:-${LD_LIBRARY_PATH:-}} "$LLAMA" -m "$GGUF" -ngl 999 -np "$max" -c $((CTX * max)) \
    --cont-batching --port 8092 >"$OUT/llama_server.log" 2>&1 &
  pids+=($!)
  if wait_up http://127.0.0.1:8092 "$OUT/llama_server.log"; then
    for c in $CLIENTS; do
      timeout $((CELL_TIMEOUT + 30)) python3 bench/serve/loadgen.py --time-limit "$CELL_TIMEOUT" \
        http://127.0.0.1:8092 --clients "$c" --prompt "$PROMPT" \
        --answer "$ANSWER" $REQ --label llama-server --extra '{"ignore_eos": true}' --json "$OUT/serve.jsonl" \
        >>"$OUT/serve.md"
      mem "llama-server $c"
    done
  fi
  stop "${pids[-1]}"
fi
# the 1-client reference: fp4lane run's own decode speed on the same model and lengths
ids=$(python3 -c "print(','.join(str(1000 + i % 5000) for i in range($PROMPT)))")
"$B/fp4lane" run "$MODEL" --device "$DEVICE" --mode "$MODE" --ctx "$CTX" --prompt-ids "$ids" -n "$ANSWER" \
  --ignore-eos 2>&1 | tail -n 1 | tee "$OUT/run_decode.txt"
cat "$OUT/serve.md"
