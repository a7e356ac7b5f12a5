#!/usr/bin/env python3
"""Variants of candidates' generated code, to see where a fused epilogue's time goes.

For each candidate JSON of IN_DIR (`tessel sample --out`, trace_variants.py), writes OUT_DIR/
VARIANT/<name>.json with the code changed by hand, for `tessel measure --candidate` (add
--skip-verify for the variants that change the result: no-erf, no-bias, no-erfc, no-bias-erfc).
Session 6 used it on codegen version 1 (erff, plain bias loads) to find what to change; session 7
on version 2 (tessel_erfc_narrow, bias read through __ldg), which no-bias, no-erfc and
no-bias-erfc apply to. bench/RESULTS.md has both tables.

Variants:
  erf-nr      1 + erf(y) as Numerical Recipes' erfcc(-y): one rcp, one exp, 10 FMAs (two MUFU)
  erf-fit     1 + erf(y) as 2 - exp2(P(|y|)) / exp2(P(|y|)), P of degree 10 on [0, 4] (one MUFU)
  no-erf      1 + erf(y) as 1 + y (a bound: what the erf costs)
  no-bias     __half2float(bias[i]) (v2: __half2float(__ldg(&bias[i]))) as 0 (a bound: what
              the bias costs)
  no-erfc     v2: tessel_erfc_narrow(z) as 1 - z (a bound: what the narrow erfc costs)
  no-bias-erfc  v2: both of the above (a bound: the epilogue's stores and conversions alone)
  ldg-bias    bias[i] read through __ldg
  plain-loads scalar __ldg(&x[i]) back to x[i] (the code before codegen version 2)

Usage: bench/experiments/epilogue_variants.py IN_DIR OUT_DIR VARIANT...
"""
import json
import os
import re
import sys

ONE_PLUS_ERF = {
    'erf-nr': r'''
__device__ __forceinline__ float tessel_one_plus_erf(float y) {
  const float z = -y, a = fabsf(z);
  const float t = __fdividef(1.0f, fmaf(0.5f, a, 1.0f));
  float p = fmaf(t, 0.17087277f, -0.82215223f);
  p = fmaf(t, p, 1.48851587f); p = fmaf(t, p, -1.13520398f); p = fmaf(t, p, 0.27886807f);
  p = fmaf(t, p, -0.18628806f); p = fmaf(t, p, 0.09678418f); p = fmaf(t, p, 0.37409196f);
  p = fmaf(t, p, 1.00002368f); p = fmaf(t, p, -1.26551223f);
  const float r = t * exp2f(1.44269504f * fmaf(-a, a, p));
  return z >= 0.0f ? r : 2.0f - r;
}
''',
    'erf-fit': r'''
__device__ __forceinline__ float tessel_one_plus_erf(float y) {
  const float s = fminf(fabsf(y), 4.0f);
  float p = -4.816449746e-07f;
  p = fmaf(p, s, 1.100391728e-05f); p = fmaf(p, s, -1.075897162e-04f);
  p = fmaf(p, s, 5.650869571e-04f); p = fmaf(p, s, -1.444125664e-03f);
  p = fmaf(p, s, -1.286934596e-03f); p = fmaf(p, s, 2.905166149e-02f);
  p = fmaf(p, s, -1.490417123e-01f); p = fmaf(p, s, -9.182310700e-01f);
  p = fmaf(p, s, -1.627933264e+00f); p = fmaf(p, s, 7.777139217e-07f);
  float e;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(p));
  return y <= 0.0f ? e : 2.0f - e;
}
''',
    'no-erf': '''
__device__ __forceinline__ float tessel_one_plus_erf(float y) { return 1.0f + y; }
''',
}


def replace_bracketed(code, key, fn, closing=')'):
    """Replaces each `key` + `...]` + closing by fn(index text)."""
    out, i = [], 0
    while True:
        j = code.find(key, i)
        if j < 0:
            return ''.join(out) + code[i:]
        out.append(code[i:j])
        k, depth = j + len(key), 1
        while depth:
            depth += {'[': 1, ']': -1}.get(code[k], 0)
            k += 1
        if closing and code[k:k + len(closing)] != closing:
            sys.exit(f'unexpected code after {code[j:k]}')
        out.append(fn(code[j + len(key):k - 1]))
        i = k + len(closing)


def plain_loads(code):
    out, i = [], 0
    for m in re.finditer(r'__ldg\(&([A-Za-z_][A-Za-z0-9_]*)\[', code):
        if m.start() < i:
            continue
        out.append(code[i:m.start()])
        k, depth = m.end(), 1
        while depth:
            depth += {'[': 1, ']': -1}.get(code[k], 0)
            k += 1
        out.append(m.group(1) + '[' + code[m.end():k - 1] + ']')
        i = k + 1  # the closing parenthesis of __ldg
    return ''.join(out) + code[i:]


def variant(code, v):
    if v in ONE_PLUS_ERF:
        if '1.0f + erff(' not in code:
            return None
        code = code.replace('#include <cuda_fp16.h>\n', '#include <cuda_fp16.h>\n' + ONE_PLUS_ERF[v], 1)
        return code.replace('1.0f + erff(', 'tessel_one_plus_erf(')
    if v == 'no-bias':
        if '__half2float(__ldg(&bias[' in code:
            return replace_bracketed(code, '__half2float(__ldg(&bias[', lambda i: '0.0f', '))')
        return replace_bracketed(code, '__half2float(bias[', lambda i: '0.0f')
    if v == 'no-erfc':
        if 'tessel_erfc_narrow(' not in code:
            return None
        code = code.replace('__device__ __forceinline__ float tessel_erfc_narrow(float z) {',
                            '__device__ __forceinline__ float tessel_erfc_bound(float z) { '
                            'return 1.0f - z; }\n'
                            '__device__ __forceinline__ float tessel_erfc_narrow(float z) {', 1)
        head, sep, body = code.partition('extern "C" __global__')
        return head + sep + body.replace('tessel_erfc_narrow(', 'tessel_erfc_bound(')
    if v == 'no-bias-erfc':
        code = variant(code, 'no-erfc')
        return variant(code, 'no-bias') if code else None
    if v == 'ldg-bias':
        return replace_bracketed(code, '__half2float(bias[',
                                 lambda i: f'__half2float(__ldg(&bias[{i}]))')
    if v == 'plain-loads':
        return plain_loads(code)
    sys.exit(f'unknown variant {v}')


def main():
    src, dst, variants = sys.argv[1], sys.argv[2], sys.argv[3:]
    for v in variants:
        os.makedirs(os.path.join(dst, v), exist_ok=True)
        for f in sorted(os.listdir(src)):
            if not f.endswith('.json'):
                continue
            c = json.load(open(os.path.join(src, f)))
            code = variant(c['code'], v)
            if code is None or code == c['code']:
                continue
            c['code'] = code
            json.dump(c, open(os.path.join(dst, v, f), 'w'))


if __name__ == '__main__':
    main()
