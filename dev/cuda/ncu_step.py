#!/usr/bin/env python3
"""ncu_step.py -- per-kernel time of one decode step from an ncu CSV.

  ncu --clock-control none --cache-control none \
      --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size --csv --print-units base \
      fp4lane run MODEL --device cuda --prompt-ids @P -n 3 --ignore-eos > step.csv
  python3 dev/cuda/ncu_step.py step.csv

Takes the kernels from the last embedding lookup on (the last decode step, a graph replay: ncu
profiles each node on its own, so these are isolated durations, not the step's overlapped
timeline), sums them by kernel name and launch shape, and lists the step's first 16 kernels."""
import csv, sys, collections
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
h = rows[0]; rows = rows[1:]
I = {k: h.index(k) for k in ("ID", "Kernel Name", "Metric Name", "Metric Value", "Grid Size", "Block Size")}
k = collections.OrderedDict()
for r in rows:
    d = k.setdefault(int(r[I["ID"]]),
                     {"name": r[I["Kernel Name"]], "grid": r[I["Grid Size"]], "blk": r[I["Block Size"]]})
    d[r[I["Metric Name"]]] = r[I["Metric Value"]].replace(",", "")
ks = list(k.values())
print("kernels", len(ks))
names = [x["name"] for x in ks]
emb = [i for i, n in enumerate(names) if "embed" in n.lower()]
print("embed idx", emb[-6:])
last = ks[emb[-1]:]
print("last step kernels", len(last))
tot = sum(float(x["gpu__time_duration.sum"]) for x in last)
print("sum ns %.0f" % tot)
agg = collections.OrderedDict()
for x in last:
    key = x["name"][:60] + " " + x["grid"] + "x" + x["blk"]
    if "launch__registers_per_thread" in x:  # with --metrics ...,launch__registers_per_thread
        key += " r%s" % x["launch__registers_per_thread"]
    if "launch__shared_mem_per_block_dynamic" in x:
        key += " smem %s" % x["launch__shared_mem_per_block_dynamic"]
    a = agg.setdefault(key, [0, 0.0, 0.0])
    a[0] += 1; a[1] += float(x["gpu__time_duration.sum"])
    a[2] += float(x.get("dram__bytes_read.sum", "0") or 0)  # with --metrics ...,dram__bytes_read.sum
for key, (c, t, b) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
    bw = " %6.0f MB %5.2f TB/s" % (b / 1e6, b / t / 1e3) if b else ""
    print("%8.1f us %4d  %6.2f us/each%s  %s" % (t / 1e3, c, t / c / 1e3, bw, key))
# first layer sequence
print("--- first 16 of the step")
for x in last[:16]:
    print("%7.2f %s %s %s" % (float(x["gpu__time_duration.sum"]) / 1e3, x["name"][:70], x["grid"], x["blk"]))
