#!/usr/bin/env bash
# The live loop on a GPU host (issue 21): trials per second and the timeline of a cold job over
# the live_timeline bench's default f16 mix (8 workloads, every kernel under 1 ms), screening on;
# then each task's best record measured again standalone (`tessel measure`, three times, the
# median of the three medians) to check that the best the search kept is as precise as a full
# measurement: best / standalone, and the standalone repeats' coefficient of variation.
#
# Usage (repository root, tessel bundle in .gpu/ with tessel and tessel_bench_live_timeline):
#   bench/live_loop_gpu.sh [TRIALS] [OUTDIR]
set -uo pipefail
trials=${1:-200}
out=${2:-$(mktemp -d)}
mkdir -p "$out/logs"
.gpu/run tessel_bench_live_timeline --target=cuda --trials="$trials" --keep="$out/logs" \
  > "$out/timeline.txt" 2>&1
cat "$out/timeline.txt"
python3 - "$out" <<'PY'
import glob, re, sqlite3, statistics, subprocess, sys
out = sys.argv[1]
print(f"\n{'workload':<64} {'best_ms':>9} {'measure_ms':>10} {'ratio':>6} {'cv_%':>5}")
for db in sorted(glob.glob(f"{out}/logs/**/*.db", recursive=True)):
    c = sqlite3.connect(db)
    rows = c.execute("SELECT w.spec, min(r.median_ms) FROM records r JOIN workloads w "
                     "ON w.key = r.workload_key WHERE r.status = 'ok' AND r.timing_kind = 1 "
                     "GROUP BY w.spec").fetchall()
    for spec, best in rows:
        subprocess.run([".gpu/run", "tessel", "best", "--db", db, "-w", spec, "--target", "cuda",
                        "--emit", "json"], stdout=open(f"{out}/best.json", "w"),
                       stderr=subprocess.DEVNULL, check=False)
        meds, cvs = [], []
        for _ in range(3):
            t = subprocess.run([".gpu/run", "tessel", "measure", "--candidate", f"{out}/best.json"],
                               capture_output=True, text=True).stdout
            m = re.search(r"^median_ms: (\S+)", t, re.M)
            r = re.search(r"^repeats_ms \(\d+\): (.*)$", t, re.M)
            if not m or not r:
                continue
            v = [float(x) for x in r.group(1).split()]
            meds.append(float(m.group(1)))
            cvs.append(100 * statistics.pstdev(v) / statistics.mean(v))
        if not meds:
            print(f"{spec[:64]:<64} {best:>9.5f} {'failed':>10}")
            continue
        med, cv = statistics.median(meds), statistics.median(cvs)
        print(f"{spec[:64]:<64} {best:>9.5f} {med:>10.5f} {best / med:>6.3f} {cv:>5.2f}")
PY
