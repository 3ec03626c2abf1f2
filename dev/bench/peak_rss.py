#!/usr/bin/env python3
"""peak_rss.py -- run a command, poll /proc/PID/status every 5 ms, and print its wall time and the
peaks of RssAnon and RssFile (what the command wrote is printed after, filtered to the lines that
hold 'timing', 'prefill' or 'rror': fp4lane run's --timing line, its summary and errors).

  python3 dev/bench/peak_rss.py build/fp4lane run MODEL --prompt-ids @P -n 1
"""
import subprocess
import sys
import time

p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
ma = mf = 0
t0 = time.time()
while p.poll() is None:
    try:
        for line in open(f"/proc/{p.pid}/status"):
            if line.startswith("RssAnon:"):
                ma = max(ma, int(line.split()[1]))
            if line.startswith("RssFile:"):
                mf = max(mf, int(line.split()[1]))
    except OSError:
        pass
    time.sleep(0.005)
out = p.stdout.read().decode(errors="replace")
print(f"wall {time.time()-t0:.2f} s, peak RssAnon {ma/1024:.0f} MiB, peak RssFile {mf/1024:.0f} MiB, "
      f"rc {p.returncode}")
print("\n".join(line for line in out.splitlines() if any(k in line for k in ("timing", "prefill", "rror"))))
