#!/usr/bin/env bash
# session 6, call 1: (a) ncu per-kernel durations of decode steps (main, native + exact);
# (b) attnative v2 test + attention lab; (c) host memory peak and first token at load (item 7);
# (d) same-sitting decode reference figures.
set -u
G=gpuwork/s6a; tar xJf $G/bin.tar.xz -C $G; export LD_LIBRARY_PATH=$PWD/gpuwork/s5/lib:${LD_LIBRARY_PATH:-}
M=$G/m; A=$G/an; O=$OUT/o; mkdir -p $O
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; } > $O/env.txt 2>&1
( $M/fp4lane synth /tmp/rt_l8 --shape llama3-8b --threads 12 --seed 1 > $O/synth.txt 2>&1
  $M/fp4lane quantize /tmp/rt_l8 /tmp/rt_l8nv --layout modelopt >> $O/synth.txt 2>&1; rm -rf /tmp/rt_l8; echo "model t=$SECONDS" ) &
SYN=$!
FP4_GPU_QUICK=1 timeout 60 $A/test_gpu_attention > $O/attention_quick.txt 2>&1; echo "an attention quick rc=$? t=$SECONDS"
grep -E "passed, |CHECK" $O/attention_quick.txt | head -8
timeout 40 $A/attn_lab 200 > $O/attn_lab.txt 2>&1; echo "attn_lab rc=$? t=$SECONDS"; cat $O/attn_lab.txt | tail -30
wait $SYN
python3 -c 'import random; r=random.Random(1); print(",".join(str(r.randrange(128000)) for _ in range(3968)))' > /tmp/p3968
cut -d, -f1-512 /tmp/p3968 > /tmp/p512
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1); echo "ncu=$NCU"
nc() { local tag=$1; shift; timeout 170 $NCU --clock-control none --cache-control none --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size --csv --print-units base "$@" > $O/ncu_$tag.csv 2> $O/ncu_$tag.err; echo "ncu $tag rc=$? t=$SECONDS lines=$(wc -l < $O/ncu_$tag.csv)"; }
nc native512 $M/fp4lane run /tmp/rt_l8nv --device cuda --mode native --prompt-ids @/tmp/p512 -n 3 --ignore-eos --ctx 4096
nc exact512 $M/fp4lane run /tmp/rt_l8nv --device cuda --mode exact --prompt-ids @/tmp/p512 -n 3 --ignore-eos --ctx 4096
cat > /tmp/peak.py <<'PY'
import subprocess, sys, time
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
ma = mf = 0; t0 = time.time()
while p.poll() is None:
    try:
        for l in open(f"/proc/{p.pid}/status"):
            if l.startswith("RssAnon:"): ma = max(ma, int(l.split()[1]))
            if l.startswith("RssFile:"): mf = max(mf, int(l.split()[1]))
    except OSError: pass
    time.sleep(0.005)
out = p.stdout.read().decode(errors="replace")
print(f"wall {time.time()-t0:.2f} s, peak RssAnon {ma/1024:.0f} MiB, peak RssFile {mf/1024:.0f} MiB, rc {p.returncode}")
print("\n".join(l for l in out.splitlines() if "prefill" in l or "rror" in l))
PY
for rep in 1 2; do for mode in exact native; do
  echo "== peak $mode rep $rep"; python3 /tmp/peak.py $M/fp4lane run /tmp/rt_l8nv --device cuda --mode $mode --prompt-ids @/tmp/p512 -n 1 --ignore-eos --ctx 4096
done; done 2>&1 | tee $O/peak.txt
for rep in 1 2; do for mode in native exact; do for p in 512 3968; do
  echo "== $mode p$p r$rep"; timeout 40 $M/fp4lane run /tmp/rt_l8nv --device cuda --mode $mode --prompt-ids @/tmp/p$p -n 128 --ignore-eos --ctx 4096 2>&1 | grep -E "prefill|rror"
done; done; done 2>&1 | tee $O/decode.txt
echo "end t=$SECONDS"
rm -rf /tmp/rt_l8nv; (cd $OUT && tar cJf s6a.tar.xz o && rm -rf o)
