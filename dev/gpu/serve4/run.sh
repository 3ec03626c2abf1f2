#!/usr/bin/env bash
# serve4's device call (issue 30, Deliver 6): fp4lane serve on the llama3-8b NVFP4 shape (session 16's
# recipe: synth --seed 1, quantize --layout gguf-ggml; a file of its size already in /tmp is reused),
# driven by bench/serve/loadgen.py (512-token prompts, 128-token answers) at 1 client (16 requests) and
# 32 (one warm-up and one measured request each, ~16 s): main's server (BASE in BUILT.txt; measured
# first, so that whatever a first cell gains is not this tree's), this tree's (default) and `fp4lane
# run`'s decode first, then this tree's with --step-prefill 128, --step-tokens 512, --prefix-cache 0 and
# --step-prefill 64 while time is left. The servers (--parallel 32, about 9 GB of the GPU each) are
# loaded together and measured one after another (an idle server does no GPU work). From the repository
# root with gpuwork/serve4 carried; logs in $OUT/serve4/; every command under timeout, the whole call
# within T_ALL seconds.
# Rehearsal without a GPU: MODEL=models/tiny DEVICE=cpu PROMPT=300 ANSWER=64 CTX=400 OUT=/tmp/x bash ...
set -u
G=gpuwork/serve4; X=/tmp/serve4; O=$OUT/serve4; S=$O/summary.txt; M=${MODEL:-/tmp/l8.gguf}; D=${DEVICE:-cuda}
P=${PROMPT:-512} A=${ANSWER:-128} C=${CTX:-704}
T_ALL=${T_ALL:-165}; t00=$SECONDS
rm -rf $X; mkdir -p $X $O; tar xJf $G/bin.tar.xz -C $X
export LD_LIBRARY_PATH=$X/lib CUDA_MODULE_LOADING=EAGER
F=$X/bin/fp4lane
left() { echo $((T_ALL - (SECONDS - t00))); }
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done' EXIT
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; cat $X/BUILT.txt
  nproc; } > $O/env.txt 2>&1
head -n 3 $O/env.txt | tee $S
if [ -z "${MODEL:-}" ] && [ "$(stat -c %s $M 2>/dev/null)" != 6030403328 ]; then
  t0=$SECONDS; rm -rf /tmp/s8 $M
  timeout 110 $F synth /tmp/s8 --shape llama3-8b --threads "$(nproc)" --seed 1 > $O/make.txt 2>&1 &&
    timeout $(($(left) - 70)) $F quantize /tmp/s8 $M --layout gguf-ggml >> $O/make.txt 2>&1
  echo "model rc=$? in $((SECONDS - t0)) s, $(stat -c %s $M 2>/dev/null) bytes" | tee -a $S; rm -rf /tmp/s8
else
  echo "model: $M reused" | tee -a $S
fi
[ -e $M ] || exit 1
# NAME BIN PORT ARGS...: a server; all start at once
declare -A port spid
start() {
  local name=$1 bin=$2; port[$name]=$3; shift 3
  timeout $(($(left) + 5)) $bin serve $M --device $D --mode native --parallel 32 --ctx $C --queue 1024 \
    --name bench --port ${port[$name]} "$@" 2> $O/$name.log &
  spid[$name]=$!; pids+=($!)
}
get() { # NAME PATH: the server's answer on stdout
  timeout 5 python3 -c "import urllib.request as u, sys
print(u.urlopen(sys.argv[1], timeout=4).read().decode())" "http://127.0.0.1:${port[$1]}$2" 2>/dev/null
}
start new $F 8101
start main $X/bin/fp4lane_main 8102
start sp128 $F 8103 --step-prefill 128
start nopfx $F 8104 --prefix-cache 0
start sp64 $F 8105 --step-prefill 64
start st512 $F 8106 --step-tokens 512
SERVERS="new main sp128 nopfx sp64 st512"
for n in $SERVERS; do
  for _ in $(seq 180); do
    kill -0 ${spid[$n]} 2>/dev/null && [ "$(left)" -gt 20 ] || break
    get $n /health | grep -q '"ok"' && break
    sleep 0.5
  done
  get $n /health | grep -q '"ok"' || { echo "$n: not up"; tail -3 $O/$n.log; } | tee -a $S
done
echo "servers up at $((SECONDS - t00)) s; GPU memory used: $(nvidia-smi --query-gpu=memory.used \
  --format=csv,noheader 2>&1)" | tee -a $S
{ echo "| server | clients | ok | tokens | tok/s | TTFT p50 s | TTFT p99 s | ITL p50 s | ITL p99 s |" \
    "stream tok/s p50 |"; } > $O/serve.md
echo "|---|---|---|---|---|---|---|---|---|---|" >> $O/serve.md
cell() { # NAME CLIENTS
  local n=$1 c=$2 k="--per-client 1" lim=16
  [ "$c" = 1 ] && lim=9
  [ "$(left)" -gt $((lim + 4)) ] || { echo "$n $c clients: skipped (time)" | tee -a $S; return; }
  kill -0 ${spid[$n]} 2>/dev/null || { echo "$n $c clients: no server" | tee -a $S; return; }
  [ "$c" = 1 ] && k="--requests 16"
  get $n /metrics > $O/m.$n.$c.before
  timeout $((lim + 5)) python3 $X/loadgen.py http://127.0.0.1:${port[$n]} --clients $c --prompt $P \
    --answer $A $k --time-limit $lim --label $n --json $O/serve.jsonl >> $O/serve.md 2>> $O/loadgen.err
  get $n /metrics > $O/m.$n.$c.after
}
# per cell, from the servers' counters (warm-up included): the engine's steps with and without prompt
# columns (count, mean columns, mean ms), the prefix cache's store time per stored prompt
steps() {
  python3 - $O <<'PY'
import glob, os, re, sys
def read(p):
    d = {}
    for line in open(p):
        m = re.match(r'^(fp4lane_[a-z_]+)(\{[^}]*\})? ([0-9.e+-]+)$', line)
        if m: d[m.group(1) + (m.group(2) or '')] = float(m.group(3))
    return d
for a in sorted(glob.glob(sys.argv[1] + '/m.*.after')):
    b = a[:-6] + '.before'
    if not os.path.exists(b): continue
    x, y = read(b), read(a)
    dd = lambda k: y.get(k, 0) - x.get(k, 0)
    out = [os.path.basename(a)[2:-6]]
    for k in ('decode', 'prompt'):
        n = dd('fp4lane_engine_steps_total{step="%s"}' % k)
        cols = dd('fp4lane_engine_columns_total{step="%s"}' % k)
        secs = dd('fp4lane_engine_seconds_total{step="%s"}' % k)
        if n: out.append('%s steps %d: %.1f cols, %.2f ms' % (k, n, cols / n, 1e3 * secs / n))
    st = dd('fp4lane_prefix_cache_seconds_total{op="store"}')
    nb = dd('fp4lane_prefix_cache_stored_blocks_total')
    if nb: out.append('prefix store %.1f ms per 32 blocks' % (1e3 * st / nb * 32))
    print('; '.join(out))
PY
}
runs() {
  local ids
  ids=$(python3 -c "print(','.join(str(1000 + i % 5000) for i in range($P)))")
  [ "$(left)" -gt 16 ] || { echo "run: skipped (time)" | tee -a $S; return; }
  timeout 15 $F run $M --device $D --mode native --ctx $C --prompt-ids "$ids" -n $A --ignore-eos 2>&1 |
    tail -n 1 | tee -a $S
}
cell main 1; cell new 1; runs; cell main 32; cell new 32; cell sp128 32; cell st512 32; cell nopfx 1
cell nopfx 32; cell sp64 32
for n in $SERVERS; do get $n /metrics > $O/$n.metrics; done
for n in $SERVERS; do kill -TERM ${spid[$n]} 2>/dev/null; done
for _ in $(seq 20); do
  alive=0; for n in $SERVERS; do kill -0 ${spid[$n]} 2>/dev/null && alive=1; done
  [ $alive = 0 ] && break; sleep 0.5
done
cat $O/serve.md | tee -a $S
steps 2>&1 | tee -a $S
grep -h "prefix_cache_seconds_total\|prefix_cache_stored_blocks_total" $O/new.metrics | tee -a $S
echo "serve4 done in $((SECONDS - t00)) s" | tee -a $S
