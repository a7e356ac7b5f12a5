#!/usr/bin/env python3
"""Same-trace pairs of mma.sync candidates, their shared copies padded and XOR-swizzled.

Samples SPEC on sm_90 (`tessel sample`), keeps the first COUNT candidates of the mma.sync sketch
(code with tessel_mma_m16n8k16), and writes each twice, re-lowered (`tessel lower --trace`) with
the sketch's layout decision set to padded rows (OUT_DIR/pad/) and to the widest swizzle
(OUT_DIR/swz/), under the name TAG_<candidate>.json. Measure the pairs with
`bench/ab_candidates.sh OUT_DIR/pad OUT_DIR/swz` (old / new > 1: the swizzle is faster).
Session 8's A/B (bench/RESULTS.md) used 8 pairs of matmul 4096^3 f16, 6 of bias + GELU 2048 x
8192 x 2048 and 6 of the 3 x 3 NHWC convolution of issue 17, seed 21.

Usage: bench/experiments/layout_pairs.py TESSEL SPEC TAG COUNT OUT_DIR [SEED]
"""
import json
import os
import subprocess
import sys
import tempfile

from trace_variants import lower


def layout_decision(trace):
    """The sample_categorical whose value the storage_swizzle annotations take, or None."""
    fed = {i['inputs'][1] for i in trace['insts']
           if i['kind'] == 'annotate_stage' and i['attrs'].get('key') == 'storage_swizzle'
           and len(i['inputs']) > 1}
    found = [i for i in trace['insts']
             if i['kind'] == 'sample_categorical' and fed & set(i.get('outputs', []))]
    return found[0] if len(found) == 1 else None


def main():
    if len(sys.argv) not in (6, 7):
        sys.exit(__doc__)
    tessel, spec, tag, count, out_dir = sys.argv[1:6]
    seed = sys.argv[6] if len(sys.argv) == 7 else '21'
    with tempfile.TemporaryDirectory() as samples:
        subprocess.run([tessel, 'sample', '-w', spec, '-t', 'cuda', '--arch', 'sm_90', '-n', '200',
                        '--seed', seed, '--out', samples], check=True, capture_output=True)
        made = 0
        for name in sorted(os.listdir(samples)):
            if not name.endswith('.json') or made >= int(count):
                continue
            cand = json.load(open(os.path.join(samples, name)))
            if 'tessel_mma_m16n8k16' not in cand['code']:
                continue
            trace = cand['trace']
            decision = layout_decision(trace)
            if decision is None:
                continue
            pair = {}
            for label, index in (('pad', 0), ('swz', 1)):
                decision['decision'] = index
                out = lower(tessel, cand, trace)
                text = out.stdout if out.returncode == 0 else None
                if text is None or (label == 'swz') != ('tessel_swizzle_' in json.loads(text)['code']):
                    break  # no width fits (the swizzle falls back to the padding): no pair
                pair[label] = text
            if len(pair) != 2:
                continue
            for label, text in pair.items():
                os.makedirs(os.path.join(out_dir, label), exist_ok=True)
                with open(os.path.join(out_dir, label, f'{tag}_{name}'), 'w') as f:
                    f.write(text)
            made += 1
        print(f'{tag}: {made} pairs')


if __name__ == '__main__':
    main()
