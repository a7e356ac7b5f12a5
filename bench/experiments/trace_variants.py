#!/usr/bin/env python3
"""Variants of one candidate's trace for same-trace A/B runs (bench/ab_candidates.sh).

Takes a candidate JSON (`tessel sample --out`, or a tuned record's candidate), sets decisions of
its sample_categorical instructions, picked by their candidate lists, and writes one re-lowered
candidate per variant (`tessel lower --trace ... --emit json`) into OUT_DIR/<variant>/<name>.json.

Usage:
  bench/experiments/trace_variants.py TESSEL CANDIDATE OUT_DIR NAME \
      'base:4,8=8;8,16,24,32=32' 'grid:0,132,264=0' 'persist:0,132,264=132'
Each variant is LABEL:SETTINGS, SETTINGS a ';'-separated list of CANDIDATES=VALUE, CANDIDATES
the comma-separated candidate list of the instruction, with '#N' for its N-th instruction (from
1; default the first), and VALUE the candidate to take; or tile#N=F1,F2,... for the factors of
the N-th sample_perfect_tile (a decision that must follow a changed loop extent; an innermost
factor above the instruction's max_innermost raises that bound, so that a variant can try a
factor the space does not draw). Each variant starts from the candidate's trace; a first variant
labelled 'base' is the exception: its settings apply under every other variant's, and it writes
nothing itself.
"""
import json
import os
import subprocess
import sys
import tempfile


def apply(trace, settings):
    for item in filter(None, settings.split(';')):
        cands, value = item.split('=')
        cands, _, nth = cands.partition('#')
        nth = int(nth or 1)
        if cands == 'tile':
            tiles = [i for i in trace['insts'] if i['kind'] == 'sample_perfect_tile']
            if nth > len(tiles):
                sys.exit(f'no sample_perfect_tile #{nth}')
            factors = [int(x) for x in value.split(',')]
            tiles[nth - 1]['decision'] = factors
            attrs = tiles[nth - 1]['attrs']
            attrs['max_innermost'] = max(attrs['max_innermost'], factors[-1])
            continue
        want = [int(x) for x in cands.split(',')]
        for inst in trace['insts']:
            if inst['kind'] == 'sample_categorical' and inst['attrs']['candidates'] == want:
                nth -= 1
                if nth:
                    continue
                inst['decision'] = want.index(int(value))
                break
        else:
            sys.exit(f'no sample_categorical over {want}')


def lower(tessel, cand, trace):
    """`tessel lower` of `trace` for candidate `cand`'s workload and target: the completed process
    (its stdout the re-lowered candidate JSON)."""
    with tempfile.NamedTemporaryFile('w', suffix='.json', delete=False) as f:
        json.dump(trace, f)
    try:
        return subprocess.run([tessel, 'lower', '-w', cand['workload']['spec'], '-t',
                               cand['target']['kind'], '--arch', cand['target']['arch'], '--trace',
                               f.name, '--emit', 'json'], capture_output=True, text=True)
    finally:
        os.unlink(f.name)


def main():
    tessel, cand, out_dir, name = sys.argv[1:5]
    variants = sys.argv[5:]
    c = json.load(open(cand))
    base = c['trace']
    if variants and variants[0].startswith('base:'):
        apply(base, variants[0].split(':', 1)[1])
        variants = variants[1:]
    for v in variants:
        label, settings = v.split(':', 1)
        trace = json.loads(json.dumps(base))
        apply(trace, settings)
        os.makedirs(os.path.join(out_dir, label), exist_ok=True)
        out = lower(tessel, c, trace)
        if out.returncode != 0:
            sys.exit(f'{label}: {out.stderr.strip()}')
        with open(os.path.join(out_dir, label, name + '.json'), 'w') as f:
            f.write(out.stdout)


if __name__ == '__main__':
    main()
