#!/usr/bin/env bash
# Session 12 (wide), ONE device call (PREPARED, NOT RUN: no device was lent). attn_lab carries both session 12
# kernels: the staged 1-column variants 10-15 (lab_attn_stage.cuh, bench/gpu.md "Session 12") and the ring
# variants 16-21 for 2-8 columns (lab_attn_wide.cuh, "Session 12 (wide)"), beside the step's kernels; so this
# call also does what bench/receipts/s12-attn/run.sh would. Every output is compared bit for bit with the old
# kernels (the timing cells, the 1-column check pass at 33 positions, the wide check pass at 2/4/8 columns
# whose positions differ within a launch; exit 1 on a difference). Binaries: gpuwork/s12w/bin.tar.xz from
# stage.sh (project VM).
#   run(command="bash bench/receipts/s12-wide/run.sh", carry=["gpuwork/s12w"], timeout_s=600)
# Steps, most wanted first; each later one only while the call's clock allows (the whole < 9 minutes):
# smoke (attn_lab 1 quick; a hang skips 14, then 11 and 14, then 10-15, then 16-21 too), attn_lab 200 (all
# variants, 1/2/4/8 columns x 5 positions, both check passes, pairs), compute-sanitizer memcheck of attn_lab
# quick (the ring variants with 1 call a cell, then 10-15 with 3), attn_lab 200 wide (the 2-8-column cells
# again: run-to-run spread), ncu of attn_lab 1 ncu (the
# cluster and ring kernels at 2/4/8 columns, 511 and 3967: isolated us, DRAM bytes, % of peak),
# test_gpu_attention (production routes: unchanged on this branch), racecheck of the wide variants.
# Back in $OUT: tests.txt (each step's exit status and time), summary.txt (tables), out.tar.gz (all logs).
set -u
G=gpuwork/s12w; tar xJf $G/bin.tar.xz -C $G; F=$G/f; W=/tmp/out; mkdir -p $W
export FP4_BUILD=$F
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; date -u; cat $F/BUILT.txt; } \
  > $W/tests.txt
step() { echo "$1 rc=$2 t=$SECONDS" >> $W/tests.txt; }
SK=""
for try in "" "14" "11,14" "10,11,12,13,14,15" "10,11,12,13,14,15,16,17,18,19,20,21"; do
  ATTN_LAB_SKIP=$try timeout 45 $F/attn_lab 1 quick > $W/smoke.txt 2>&1; rc=$?
  step "smoke attn_lab 1 quick (skip: ${try:-none})" $rc
  if [ $rc -ne 124 ] && [ $rc -ne 137 ]; then SK=$try; break; fi
done
export ATTN_LAB_SKIP=$SK
grep -E "check pass|identical|FAIL|differ" $W/smoke.txt | head -6 >> $W/tests.txt
timeout 120 $F/attn_lab 200 > $W/attn_lab.txt 2>&1; step "attn_lab 200" $?
grep -E "check pass|identical|FAIL" $W/attn_lab.txt | head -4 >> $W/tests.txt
# memcheck: the ring variants (and old, the reference) first, then session 12's staged ones while time allows
MC="compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 20"
ATTN_LAB_SKIP=${SK:+$SK,}3,4,5,10,11,12,13,14,15 timeout 120 $MC $F/attn_lab 1 quick > $W/memcheck.txt 2>&1
step "memcheck attn_lab 1 quick (0, 16-21)" $?
grep -E "ERROR SUMMARY|identical|FAIL|check pass" $W/memcheck.txt | head -4 >> $W/tests.txt
if [ $SECONDS -lt 250 ]; then
  ATTN_LAB_SKIP=${SK:+$SK,}16,17,18,19,20,21 timeout 120 $MC $F/attn_lab 3 quick > $W/memcheck_s12.txt 2>&1
  step "memcheck attn_lab 3 quick (0, 3, 4, 5, 10-15)" $?
  grep -E "ERROR SUMMARY|identical|FAIL|check pass" $W/memcheck_s12.txt | head -4 >> $W/tests.txt
fi
if [ $SECONDS -lt 330 ]; then
  timeout 60 $F/attn_lab 200 wide > $W/attn_lab_wide2.txt 2>&1; step "attn_lab 200 wide (second run)" $?
fi
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ] && [ $SECONDS -lt 360 ]; then
  M=gpu__time_duration.sum,launch__grid_size,dram__bytes_read.sum
  M=$M,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed
  timeout 90 $NCU --clock-control none -k regex:"atw_kernel|att_cluster_kernel|stk_att_" --csv \
    --print-units base --metrics $M $F/attn_lab 1 ncu > $W/ncu.csv 2> $W/ncu.err; step "ncu attn_lab 1 ncu" $?
fi
if [ $SECONDS -lt 420 ]; then
  timeout 90 $F/tests/gpu/test_gpu_attention > $W/test_gpu_attention.txt 2>&1; step test_gpu_attention $?
  grep -E "passed, |FAIL|CHECK|cluster attention cases" $W/test_gpu_attention.txt | head -8 >> $W/tests.txt
fi
if [ $SECONDS -lt 450 ]; then
  ATTN_LAB_SKIP=${SK:+$SK,}3,4,5,10,11,12,13,14,15 timeout 60 compute-sanitizer --tool racecheck --error-exitcode 1 \
    --print-limit 10 $F/attn_lab 1 quick > $W/racecheck.txt 2>&1; step "racecheck attn_lab 1 quick (0, 16-21)" $?
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|hazard" $W/racecheck.txt | head -4 >> $W/tests.txt
fi
python3 - "$W" > $W/summary.txt 2>&1 <<'PY'
import csv, re, sys, collections
w = sys.argv[1]
def lab(path):
    t = collections.defaultdict(dict)
    try:
        for line in open(path, errors="replace"):
            m = re.match(r"\| (.+?) \| (\d+) \| (\d+) \| ([\d.]+) \|$", line.strip())
            if m: t[(m.group(1), int(m.group(2)))][int(m.group(3))] = float(m.group(4))
    except OSError:
        pass
    return t
runs = [lab(w + "/attn_lab.txt"), lab(w + "/attn_lab_wide2.txt")]
pos = [511, 767, 1023, 2047, 3967]
def cell(key, p):
    a = [r.get(key, {}).get(p) for r in runs]
    return " / ".join("-" if x is None else "%.2f" % x for x in a)
print("attn_lab, us per layer (run 1 / run 2: attn_lab 200, attn_lab 200 wide)")
print("| variant | cols | " + " | ".join(map(str, pos)) + " |\n|---|---|" + "---|" * len(pos))
want = ("old", "4 stages (step)", "cluster of 8 (att", "cluster of 4 (s", "cluster of 2 (s", "wide ring")
for cols in (2, 4, 8, 1):
    for key in runs[0]:
        if key[1] != cols or key[0].startswith("pair:"): continue
        if cols == 1 and not re.search(r"cluster of 16 \(att|staged, cluster of 16|bucket|ring, cluster of 16", key[0]):
            continue
        if cols > 1 and not any(s in key[0] for s in want): continue
        print("| %s | %d | %s |" % (key[0], cols, " | ".join(cell(key, p) for p in pos)))
# the step's choice now (att_wide in step_cuda.cu) against the best ring variant, run 1
def step_now(cols, p):
    if cols == 2 and p <= 767: return "cluster of 8 (att_cluster.cuh)"
    if 3 <= cols <= 4 and p <= 767: return "cluster of 4 (session 11)"
    if 5 <= cols <= 8 and p <= 639: return "cluster of 2 (session 11)"
    return "new, 4 stages (step)"
print("\nthe step's attention now (att_wide) against the best wide ring variant (run 1)")
for cols in (2, 4, 8):
    for p in pos:
        now = runs[0].get((step_now(cols, p), cols), {}).get(p)
        ring = [(v.get(p), k[0]) for k, v in runs[0].items()
                if k[1] == cols and k[0].startswith("wide ring") and v.get(p)]
        if now is None or not ring: continue
        best = min(ring)
        print("cols %d pos %4d: step %.2f (%s), ring %.2f (%s): %.2fx" % (cols, p, now, step_now(cols, p)[:22],
              best[0], best[1][:32], now / best[0]))
print("\npairs (attention + the o projection; 1 column exact, 8 columns native), run 1")
for key, v in runs[0].items():
    if key[0].startswith("pair:"):
        print("| %s | %d | %s |" % (key[0], key[1], " | ".join("%.2f" % v[p] if p in v else "-" for p in pos)))
print()
for f in ("attn_lab.txt", "attn_lab_wide2.txt"):
    try:
        for line in open(w + "/" + f, errors="replace"):
            if re.search(r"shared memory|check|differ|identical|FAIL|skipped|failed", line):
                print(f + ": " + line.rstrip())
    except OSError:
        pass
try:
    rows = list(csv.reader(open(w + "/ncu.csv", errors="replace")))
    hdr = next(i for i, r in enumerate(rows) if "Kernel Name" in r and "Metric Name" in r)
    h = rows[hdr]; K, M, V, ID = h.index("Kernel Name"), h.index("Metric Name"), h.index("Metric Value"), h.index("ID")
    per = collections.OrderedDict()
    for r in rows[hdr + 1:]:
        if len(r) > V: per.setdefault((r[ID], r[K]), {})[r[M]] = r[V].replace(",", "")
    print("\nncu (isolated; attn_lab 1 ncu: columns 2, 4, 8 at 511 then 3967, a warm-up and a timed launch each; "
          "grid = CS x groups): kernel, grid, us, DRAM MB, DRAM %, SM %")
    for (i, k), m in per.items():
        print("%s | %s | %.2f | %.1f | %s | %s" % (k[:48], m.get("launch__grid_size", "?"),
              float(m.get("gpu__time_duration.sum", "nan")) / 1e3, float(m.get("dram__bytes_read.sum", "nan")) / 1e6,
              m.get("dram__throughput.avg.pct_of_peak_sustained_elapsed", "?")[:5],
              m.get("sm__throughput.avg.pct_of_peak_sustained_elapsed", "?")[:5]))
except Exception as e:
    print("ncu: no table (%s)" % e)
PY
echo "end t=$SECONDS" >> $W/tests.txt
tar czf $OUT/out.tar.gz -C $W .; cp $W/summary.txt $W/tests.txt $OUT/; cat $W/tests.txt $W/summary.txt
