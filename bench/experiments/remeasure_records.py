#!/usr/bin/env python3
"""Re-measures records of a tuning log standalone and compares with what the log holds.

For the ok, confirmed records of one workload (by rank of their logged median: the best, and a
spread of others), rebuilds each candidate from its trace (`tessel lower --emit json`), measures
it with `tessel measure` (a fresh process, the same timing method) and prints logged median,
standalone median and their ratio, for the event times and for the CUPTI kernel times. A ratio below 1 for the best alone points at selection (the
best of many noisy medians is biased low); below 1 for every rank points at a difference between
the worker's measuring child and a standalone measurement.

Usage (GPU host, repository root, tessel bundle in .gpu/):
  python3 bench/experiments/remeasure_records.py LOG.db [RECORDS=8]
"""
import json
import re
import sqlite3
import subprocess
import sys
import tempfile

db = sys.argv[1]
count = int(sys.argv[2]) if len(sys.argv) > 2 else 8
c = sqlite3.connect(db)
rows = c.execute(
    "SELECT w.spec, r.median_ms, r.trace, r.kernel_median_ms FROM records r JOIN workloads w ON w.key = "
    "r.workload_key WHERE r.status = 'ok' AND r.timing_kind = 1 ORDER BY r.median_ms").fetchall()
if not rows:
    sys.exit("no confirmed ok records")
picks = sorted({round(i * (len(rows) - 1) / max(1, count - 1)) for i in range(count)})
print(f"{'rank':>5} {'logged_ms':>10} {'standalone_ms':>14} {'ratio':>6}   "
      f"{'cupti_logged':>12} {'cupti_standalone':>16} {'ratio':>6}")
tmp = tempfile.mkdtemp()
for rank in picks:
    spec, logged, trace, klogged = rows[rank]
    open(f"{tmp}/t.json", "w").write(trace)
    cand = subprocess.run([".gpu/run", "tessel", "lower", "-w", spec, "-t", "cuda", "--trace",
                           f"{tmp}/t.json", "--emit", "json"], capture_output=True, text=True)
    if cand.returncode != 0:
        print(f"{rank:>5} {logged:>10.5f} {'lower failed':>14}")
        continue
    open(f"{tmp}/c.json", "w").write(cand.stdout)
    meds, kmeds = [], []
    for _ in range(2):
        out = subprocess.run([".gpu/run", "tessel", "measure", "-c", f"{tmp}/c.json",
                              "--max-repeats", "1000"], capture_output=True, text=True).stdout
        m = re.search(r"^median_ms: (\S+)", out, re.M)
        k = re.search(r"^kernel_median_ms: (\S+)", out, re.M)
        if m:
            meds.append(float(m.group(1)))
        if k:
            kmeds.append(float(k.group(1)))
    if not meds:
        print(f"{rank:>5} {logged:>10.5f} {'measure failed':>14}")
        continue
    s = min(meds)
    line = f"{rank:>5} {logged:>10.5f} {s:>14.5f} {logged / s:>6.3f}"
    if kmeds and klogged:
        ks = min(kmeds)
        line += f"   {klogged:>12.5f} {ks:>16.5f} {klogged / ks:>6.3f}"
    print(line)
