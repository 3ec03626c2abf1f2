#!/usr/bin/env bash
# Session 12, device call 1 (PREPARED, NOT RUN in session 12: no device was lent). The staged cluster
# attention of dev/cuda/lab_attn_stage.cuh (bench/gpu.md "Session 12"): attn_lab variants 10-15 beside
# the step's cluster of 16 (variant 5), every output compared bit for bit with the old kernels, a
# check pass at 33 positions, pairs with the o projection; compute-sanitizer memcheck (and
# racecheck) of `attn_lab 3 quick`;
# test_gpu_attention (the production routes, unchanged); ncu of the cluster kernels (DRAM bytes and
# throughput, isolated durations). Binaries: gpuwork/s12/bin.tar.xz from stage.sh (project VM).
#   run(command="bash bench/receipts/s12-attn/run.sh", carry=["gpuwork/s12"], timeout_s=600)
# Files back in $OUT: out.tar.gz (everything) and summary.txt (the table below).
set -u
G=gpuwork/s12; tar xJf $G/bin.tar.xz -C $G; F=$G/f; W=/tmp/out; mkdir -p $W
export FP4_BUILD=$F
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; date -u; cat $F/BUILT.txt; } > $W/tests.txt
step() { echo "$1 rc=$2 t=$SECONDS" >> $W/tests.txt; }
# a smoke run first: a variant that hangs (an mbarrier that never completes) is skipped from then on
SK=""
for try in "" "14" "11,14" "10,11,12,13,14,15"; do
  ATTN_LAB_SKIP=$try timeout 60 $F/attn_lab 1 quick > $W/smoke.txt 2>&1; rc=$?
  step "smoke attn_lab 1 quick (skip: ${try:-none})" $rc
  if [ $rc -ne 124 ] && [ $rc -ne 137 ]; then SK=$try; break; fi
done
export ATTN_LAB_SKIP=$SK
grep -E "check pass|identical|FAIL|differ" $W/smoke.txt | head -4 >> $W/tests.txt
timeout 100 $F/attn_lab 200 > $W/attn_lab.txt 2>&1; step "attn_lab 200" $?
timeout 150 $F/tests/gpu/test_gpu_attention > $W/test_gpu_attention.txt 2>&1; step test_gpu_attention $?
grep -E "passed, |FAIL|CHECK|cluster attention cases" $W/test_gpu_attention.txt | head -8 >> $W/tests.txt
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 20 $F/attn_lab 3 quick \
  > $W/memcheck.txt 2>&1; step "memcheck attn_lab 3 quick" $?
grep -E "ERROR SUMMARY|identical|FAIL|check pass" $W/memcheck.txt | head -4 >> $W/tests.txt
timeout 100 $F/attn_lab 200 > $W/attn_lab2.txt 2>&1; step "attn_lab 200 (second run)" $?
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ] && [ $SECONDS -lt 380 ]; then
  timeout 120 $NCU --clock-control none -k regex:"ats_kernel|att_cluster_kernel" --csv --print-units base \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed \
    $F/attn_lab 2 quick > $W/ncu.csv 2> $W/ncu.err; step ncu $?
fi
if [ $SECONDS -lt 470 ]; then
  timeout 110 compute-sanitizer --tool racecheck --error-exitcode 1 --print-limit 10 $F/attn_lab 1 quick \
    > $W/racecheck.txt 2>&1; step "racecheck attn_lab 1 quick" $?
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|hazard" $W/racecheck.txt | head -4 >> $W/tests.txt
fi
python3 - "$W" > $W/summary.txt 2>&1 <<'PY'
import csv, re, sys, collections
w = sys.argv[1]
def lab(path):
    t = collections.defaultdict(dict)
    for line in open(path, errors="replace"):
        m = re.match(r"\| (.+?) \| (\d+) \| (\d+) \| ([\d.]+) \|", line)
        if m: t[(m.group(1), int(m.group(2)))][int(m.group(3))] = float(m.group(4))
    return t
runs = [lab(w + "/attn_lab.txt"), lab(w + "/attn_lab2.txt")]
pos = [511, 767, 1023, 2047, 3967]
print("attn_lab, us per layer (run 1 / run 2)")
print("| variant | cols | " + " | ".join(map(str, pos)) + " |")
for key in runs[0]:
    if key[1] > 2 and "session 12" not in key[0] and "of 16 (att" not in key[0]: continue
    cells = []
    for p in pos:
        a = [r.get(key, {}).get(p) for r in runs]
        cells.append(" / ".join("-" if x is None else "%.2f" % x for x in a))
    print("| %s | %d | %s |" % (key[0], key[1], " | ".join(cells)))
for line in open(w + "/attn_lab.txt", errors="replace"):
    if re.search(r"shared memory|check|differ|identical|FAIL", line): print(line.rstrip())
try:
    rows = list(csv.reader(open(w + "/ncu.csv", errors="replace")))
    hdr = next(i for i, r in enumerate(rows) if "Kernel Name" in r and "Metric Name" in r)
    h = rows[hdr]; K, M, V = h.index("Kernel Name"), h.index("Metric Name"), h.index("Metric Value")
    ID = h.index("ID")
    per = collections.OrderedDict()
    for r in rows[hdr + 1:]:
        if len(r) <= V: continue
        per.setdefault((r[K], r[ID]), {})[r[M]] = r[V].replace(",", "")
    seq = collections.defaultdict(list)
    for (k, i), m in per.items(): seq[k].append(m)
    print("\nncu (isolated, attn_lab 2 quick: 5 positions x 3 launches, the last of each): "
          "us, DRAM MB, DRAM % of peak, SM % of peak")
    for k, ms in seq.items():
        cells = []
        for pi in range(5):
            if 3 * pi + 2 < len(ms):
                m = ms[3 * pi + 2]
                cells.append("%.2f us %.1f MB %s%% %s%%" % (float(m.get("gpu__time_duration.sum", "nan")) / 1e3,
                             float(m.get("dram__bytes_read.sum", "nan")) / 1e6,
                             m.get("dram__throughput.avg.pct_of_peak_sustained_elapsed", "?")[:5],
                             m.get("sm__throughput.avg.pct_of_peak_sustained_elapsed", "?")[:5]))
        print("%s: %s" % (k[:60], " | ".join(cells)))
except Exception as e:
    print("ncu: no table (%s)" % e)
PY
echo "end t=$SECONDS" >> $W/tests.txt
tar czf $OUT/out.tar.gz -C $W .; cp $W/summary.txt $W/tests.txt $OUT/; cat $W/tests.txt $W/summary.txt
