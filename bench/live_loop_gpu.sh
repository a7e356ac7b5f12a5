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
import glob, json, re, sqlite3, statistics, subprocess, sys
out = sys.argv[1]

def cv(v):  # percent; and the robust one, 1.4826 MAD / median, which one stray repeat leaves be
    med = statistics.median(v)
    mad = statistics.median(abs(x - med) for x in v)
    return 100 * statistics.pstdev(v) / statistics.mean(v), 100 * 1.4826 * mad / med

print(f"\n{'workload':<52} {'best_ms':>8} {'rec_cv%':>7} {'measure_ms (3 runs)':>28} "
      f"{'ratio':>6} {'cv%':>6} {'rcv%':>5}")
for db in sorted(glob.glob(f"{out}/logs/**/*.db", recursive=True)):
    c = sqlite3.connect(db)
    rows = c.execute("SELECT w.spec, r.median_ms, r.repeats_ms FROM records r JOIN workloads w "
                     "ON w.key = r.workload_key WHERE r.status = 'ok' AND r.timing_kind = 1 "
                     "ORDER BY r.median_ms").fetchall()
    seen = set()
    for spec, best, reps in rows:
        if spec in seen:
            continue
        seen.add(spec)
        rec_cv = cv(json.loads(reps))[1]
        subprocess.run([".gpu/run", "tessel", "best", "--db", db, "-w", spec, "--target", "cuda",
                        "--emit", "json"], stdout=open(f"{out}/best.json", "w"),
                       stderr=subprocess.DEVNULL, check=False)
        meds, cvs, rcvs = [], [], []
        for _ in range(3):
            t = subprocess.run([".gpu/run", "tessel", "measure", "--candidate", f"{out}/best.json",
                                "--max-repeats", "1000"], capture_output=True, text=True).stdout
            m = re.search(r"^median_ms: (\S+)", t, re.M)
            r = re.search(r"^repeats_ms \(\d+\): (.*)$", t, re.M)
            if not m or not r:
                continue
            a, b = cv([float(x) for x in r.group(1).split()])
            meds.append(float(m.group(1)))
            cvs.append(a)
            rcvs.append(b)
        if not meds:
            print(f"{spec[:52]:<52} {best:>8.5f} {'failed':>10}")
            continue
        med = statistics.median(meds)
        runs = " ".join(f"{x:.5f}" for x in meds)
        print(f"{spec[:52]:<52} {best:>8.5f} {rec_cv:>7.2f} {runs:>28} {best / med:>6.3f} "
              f"{statistics.median(cvs):>6.2f} {statistics.median(rcvs):>5.2f}")
PY
