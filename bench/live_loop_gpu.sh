#!/usr/bin/env bash
# The live loop on a GPU host (issue 21): trials per second and the timeline of a cold job over
# the live_timeline bench's default f16 mix (8 workloads, every kernel under 1 ms), screening on;
# then each task's best record measured again standalone (`tessel measure`, three times, the
# median of the three medians) to check that the best the search kept is as precise as a full
# measurement: best / standalone (by the CUPTI kernel median the log ranks by, and by events),
# and the coefficients of variation of the record's and the standalone kernel repeats.
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

# The record's latency is what the log ranks by (latency_ms: the CUPTI kernel median where there
# is one); the standalone runs are the old full measurement (1000 repeats or 200 ms, no precision
# stop), three times, and their kernel medians and event medians are compared with the record's.
print(f"\n{'workload':<46} {'rec_ms':>8} {'n':>4} {'cv%':>5} {'standalone kernel ms (3)':>26} "
      f"{'ratio':>6} {'cv%':>5} | {'rec ev':>8} {'standalone ev':>8} {'ratio':>6}")
for db in sorted(glob.glob(f"{out}/logs/**/*.db", recursive=True)):
    c = sqlite3.connect(db)
    rows = c.execute("SELECT w.spec, r.latency_ms, r.kernel_repeats_ms, r.repeats_ms, r.median_ms "
                     "FROM records r JOIN workloads w ON w.key = r.workload_key WHERE "
                     "r.status = 'ok' AND r.timing_kind = 1 ORDER BY r.latency_ms").fetchall()
    seen = set()
    for spec, best, kreps, reps, ev in rows:
        if spec in seen:
            continue
        seen.add(spec)
        kreps = json.loads(kreps) or json.loads(reps)
        rec_cv = cv(kreps)[0]
        subprocess.run([".gpu/run", "tessel", "best", "--db", db, "-w", spec, "--target", "cuda",
                        "--emit", "json"], stdout=open(f"{out}/best.json", "w"),
                       stderr=subprocess.DEVNULL, check=False)
        kmeds, evs, cvs = [], [], []
        for _ in range(3):
            t = subprocess.run([".gpu/run", "tessel", "measure", "--candidate", f"{out}/best.json",
                                "--max-repeats", "1000", "--median-precision", "0"],
                               capture_output=True, text=True).stdout
            m = re.search(r"^median_ms: (\S+)", t, re.M)
            k = re.search(r"^kernel_median_ms: (\S+)", t, re.M)
            r = re.search(r"^kernel_repeats_ms \(\d+\): (.*)$", t, re.M) or \
                re.search(r"^repeats_ms \(\d+\): (.*)$", t, re.M)
            if not m or not r:
                continue
            evs.append(float(m.group(1)))
            kmeds.append(float(k.group(1)) if k else float(m.group(1)))
            cvs.append(cv([float(x) for x in r.group(1).split()])[0])
        if not kmeds:
            print(f"{spec[:46]:<46} {best:>8.5f} {'failed':>10}")
            continue
        kmed, evmed = statistics.median(kmeds), statistics.median(evs)
        runs = " ".join(f"{x:.5f}" for x in kmeds)
        print(f"{spec[:46]:<46} {best:>8.5f} {len(kreps):>4} {rec_cv:>5.2f} {runs:>26} "
              f"{best / kmed:>6.3f} {statistics.median(cvs):>5.2f} | {ev:>8.5f} {evmed:>8.5f} "
              f"{ev / evmed:>6.3f}")
PY
