#!/usr/bin/env python3
"""A wgmma kernel's write-back through shared memory and bulk tensor stores, made by hand from a
generated candidate, to measure whether TMA stores pay before the compiler learns them.

The generated write-back (codegen's QuadStores) has each warp store its 16 rows x N columns with
`tessel_quad_store_f16`: the four lanes of a row trade their columns (shuffles), then each stores
16 bytes. The variant instead has each consumer warp write its values into a staging buffer of
its own (two 16 x 64 chunks, 128-byte swizzled, 4 KB a warp), then one lane issue
`cp.async.bulk.tensor.2d.global.shared::cta` for each 64-column chunk (a tensor map over the
output, box 16 x 64). Before a chunk's buffer is written again the lane waits until at most one
store group still reads shared memory (`cp.async.bulk.wait_group.read 1`); the kernel's consumers
wait for all of them at the end.

Only the form this was written for is accepted (bulk copies with a producer plane, one warpgroup
column, a 16-bit output whose write-back is one quad store in a loop over rows h and column groups
g); anything else stops with a message.

Usage: bench/experiments/tma_store_variant.py IN.json OUT.json
"""
import json
import re
import sys

HELPERS = r'''
__device__ __forceinline__ void tessel_stage_f16(half* s, int row, int q, int g2, float a0, float a1, float b0, float b1, float c0, float c1, float d0, float d1) {
  const float v[8] = {a0, a1, b0, b1, c0, c1, d0, d1};
  unsigned char* base = reinterpret_cast<unsigned char*>(s) + row * 128;
  #pragma unroll
  for (int t = 0; t < 4; ++t) {
    const int chunk = (g2 * 4 + t) ^ (row & 7);
    __half2 h = __floats2half2_rn(v[2 * t], v[2 * t + 1]);
    *reinterpret_cast<__half2*>(base + chunk * 16 + q * 4) = h;
  }
}
__device__ __forceinline__ void tessel_tma_store_2d(const tessel_tensor_map* map, const void* src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];"
               :: "l"(reinterpret_cast<unsigned long long>(map)),
                  "r"(static_cast<unsigned>(__cvta_generic_to_shared(src))), "r"(c0), "r"(c1)
               : "memory");
}
__device__ __forceinline__ void tessel_bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
__device__ __forceinline__ void tessel_bulk_wait_read_1() { asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory"); }
__device__ __forceinline__ void tessel_bulk_wait_read_0() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }
__device__ __forceinline__ void tessel_fence_proxy_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
'''


def fail(why):
    sys.exit(f'tma_store_variant: {why}')


def split_args(text):
    """The top-level comma-separated arguments of a call's argument text."""
    out, depth, cur = [], 0, ''
    for ch in text:
        if ch in '([':
            depth += 1
        elif ch in ')]':
            depth -= 1
        if ch == ',' and depth == 0:
            out.append(cur.strip())
            cur = ''
        else:
            cur += ch
    out.append(cur.strip())
    return out


def main():
    src, dst = sys.argv[1], sys.argv[2]
    cand = json.load(open(src))
    code = cand['code']
    kern = cand['kernels'][0]
    if len(cand['kernels']) != 1 or kern['block'][2] != 1:
        fail('one kernel of one warpgroup column only')
    plane = re.search(r'if \(threadIdx\.y >= (\d+)\) \{\n\s*tessel_setmaxnreg_dec', code)
    if not plane:
        fail('no producer plane')
    out_index = next(i for i, b in enumerate(cand['buffers']) if b['role'] == 'output')
    out = cand['buffers'][out_index]
    if out['dtype'] not in ('f16', 'bf16') or len(out['shape']) != 2:
        fail('a 2-d f16/bf16 output only')
    ncols = out['shape'][1]
    loop = re.search(
        r'( *)const int lane_1 = threadIdx\.x;\n\s*#pragma unroll\n\s*for \(int m_1_h = 0; m_1_h < 2; '
        r'\+\+m_1_h\) \{\n\s*#pragma unroll\n\s*for \(int (\w+) = 0; \2 < (\d+); \+\+\2\) \{\n\s*'
        r'tessel_quad_store_f16\((.*)\);\n\s*\}\n\s*\}\n', code)
    if not loop:
        fail('no quad-store write-back loop of the expected form')
    indent, g, groups, args = loop.group(1), loop.group(2), int(loop.group(3)), loop.group(4)
    if groups % 2:
        fail('the warp\'s columns are not whole 64-column chunks')
    a = split_args(args)
    addr, values = a[0], a[3:]
    m = re.fullmatch(r'&' + out['name'] + r'\[\((.*)\) \* ' + str(ncols) + r' \+ (.*)\]', addr)
    if not m or len(values) != 8:
        fail(f'unexpected store address {addr[:80]}')

    def at_zero(e):
        for v in ('m_1_h', 'lane_1', g):
            e = re.sub(r'\b' + v + r'\b', '0', e)
        return e
    row0, col0 = at_zero(m.group(1)), at_zero(m.group(2))
    nmaps = len(kern['tensor_maps'])
    warp = 'threadIdx.y'
    body = f'''{indent}const int lane_1 = threadIdx.x;
{indent}half* const tessel_stage = reinterpret_cast<half*>(tessel_smem + TESSEL_STAGE_AT) + ({warp}) * 2048;
{indent}#pragma unroll
{indent}for (int tessel_c = 0; tessel_c < {groups // 2}; ++tessel_c) {{
{indent}  if (lane_1 == 0) tessel_bulk_wait_read_1();
{indent}  __syncwarp();
{indent}  half* const tessel_s = tessel_stage + tessel_c % 2 * 1024;
{indent}  #pragma unroll
{indent}  for (int {g} = tessel_c * 2; {g} < tessel_c * 2 + 2; ++{g}) {{
{indent}    #pragma unroll
{indent}    for (int m_1_h = 0; m_1_h < 2; ++m_1_h) {{
{indent}      tessel_stage_f16(tessel_s, m_1_h * 8 + lane_1 / 4, lane_1 % 4, {g} % 2, {", ".join(values)});
{indent}    }}
{indent}  }}
{indent}  tessel_fence_proxy_async_shared();
{indent}  __syncwarp();
{indent}  if (lane_1 == 0) {{
{indent}    tessel_tma_store_2d(&tessel_tmap_{nmaps}, tessel_s, {col0} + tessel_c * 64, {row0});
{indent}    tessel_bulk_commit();
{indent}  }}
{indent}}}
'''
    code = code[:loop.start()] + body + code[loop.end():]
    # The consumers' last stores finish reading shared memory before the block exits.
    end = code.rstrip().rfind('\n  }\n}')
    if end < 0:
        fail('no end of the consumers\' branch')
    code = code[:end] + '\n    tessel_bulk_wait_read_0();' + code[end:]
    # The output's tensor map, a parameter after the others.
    last = f'const __grid_constant__ tessel_tensor_map tessel_tmap_{nmaps - 1}'
    if last not in code:
        fail('no tensor-map parameters')
    code = code.replace(last, last + f',\n    const __grid_constant__ tessel_tensor_map tessel_tmap_{nmaps}')
    stage_at = (kern['dynamic_shared_bytes'] + 1023) // 1024 * 1024
    consumers = int(plane.group(1))
    code = code.replace('TESSEL_STAGE_AT', str(stage_at))
    anchor = 'extern "C" __global__'
    code = code.replace(anchor, HELPERS + '\n' + anchor, 1)
    kern['dynamic_shared_bytes'] = stage_at + consumers * 4096
    kern['tensor_maps'].append({'box': [16, 64], 'buffer': out_index, 'swizzle_bytes': 128})
    cand['code'] = code
    json.dump(cand, open(dst, 'w'), indent=1)
    print(f'{dst}: shared {kern["dynamic_shared_bytes"]} bytes, {groups // 2} chunks a warp')


if __name__ == '__main__':
    main()
