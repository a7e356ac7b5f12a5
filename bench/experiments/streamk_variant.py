#!/usr/bin/env python3
"""A hand-made stream-K variant of a persistent wgmma candidate (an experiment, session 12).

Usage: bench/experiments/streamk_variant.py IN.json OUT.json BLOCKS

IN.json: a persistent cooperative wgmma candidate with a producer plane (bulk copies,
pipeline_producer 2, two warpgroups along m: `trace_variants.py` sets one), whose blocks take tile
r * G0 + b in round r. OUT.json runs BLOCKS blocks: data-parallel rounds (tile r * BLOCKS + b) for
all but the last one to two waves of tiles, then the remaining tiles' k steps split evenly over the
blocks. A block whose range starts inside a tile stores its f32 partial (coalesced, __stcg) and
raises a flag per warp (st.release.gpu); the block holding the tile's first k steps waits for it
(ld.acquire.gpu), adds it, and runs the tile's write-back. Partials and flags are module globals
(zero at load; each flag is reset by its reader), so launches must not overlap. With BLOCKS equal
to the candidate's block count, every block takes whole tiles: the cost of the loop structure alone.
The code is rewritten textually: the k steps a tile must be a multiple of the stages (the slots are
then `k % stages` in the generated code).
"""
import json, re, sys

src, dst, G = sys.argv[1], sys.argv[2], int(sys.argv[3])
c = json.load(open(src))
code = c['code']
lines = code.split('\n')
G0 = c['kernels'][0]['grid'][0]
R = 'm_0_0_0_n_0_0_m_0_0_1_f_0'
B = 'm_0_0_0_n_0_0_m_0_0_1_f_1_0'
rounds = int(re.search(r'for \(int %s = 0; %s < (\d+);' % (R, R), code).group(1))
KS = int(re.search(r'for \(int k_0_0 = 0; k_0_0 < (\d+);', code).group(1))
T = rounds * G0
stages = int(re.search(r'software_pipeline=(\d+)', code).group(1))
head = code[:code.index('extern "C"')]
def grab(pat):
    return [l for l in lines if pat in l]
tma = grab('tessel_tma_load_2d(&')
expect = grab('tessel_mbarrier_expect_tx(&')[0]
wg = [l for l in lines if 'tessel_wgmma_m64' in l and '&C_fragment' in l][0]
# the epilogue: from 'const int lane_1' to the end of the consumer's round body
i0 = next(i for i, l in enumerate(lines) if 'const int lane_1 = threadIdx.x;' in l)
depth, i1 = 0, i0 + 1
body = []
for l in lines[i0 + 1:]:
    if l.strip() == '}' and depth == 0:
        break
    depth += l.count('{') - l.count('}')
    body.append(l)
epi = '\n'.join(body)
sig_end = code.index('{', code.index('extern "C"'))
sig = code[code.index('extern "C"'):sig_end]
pre_start = sig_end + 1
pre_end = code.index('  if (threadIdx.y >= 8) {')
pre = code[pre_start:pre_end]
slot = lambda s: s.replace('k_0_0 %% %d' % stages, '(j %% %d)' % stages)
if KS % stages:
    sys.exit(f'{KS} k steps a tile are not a multiple of the {stages} stages: the generated code '
             'indexes its slots by the step across rounds, which this script does not rewrite')
R_dp = T // G - 1
Tsk = T - R_dp * G
Psk = -(-Tsk * KS // G)
if Psk < KS:
    sys.exit(f'{Psk} k steps a block, fewer than a tile\'s {KS}: a tile would span three blocks')
NSEG = R_dp + -(-Psk // KS) + 1
seg = f'''
    // segment s: a data-parallel round, or a piece of the stream-K tail
    int t, kb, ke, j0;
    if (s < {R_dp}) {{ t = s * {G} + blockIdx.x; kb = 0; ke = {KS}; j0 = s * {KS}; }}
    else {{
      const int it0 = blockIdx.x * {Psk}, it1 = min(it0 + {Psk}, {Tsk * KS});
      const int tt = it0 / {KS} + (s - {R_dp});
      kb = max(it0 - tt * {KS}, 0); ke = min(it1 - tt * {KS}, {KS});
      if (kb >= ke) break;
      t = {R_dp * G} + tt; j0 = {R_dp * KS} + tt * {KS} + kb - it0;
    }}
    const int {R} = t / {G0};
    const int {B} = t % {G0};
'''
prod = '\n'.join(slot(l) for l in tma)
out = head + sig + '{\n' + pre + f'''
  if (threadIdx.y >= 8) {{
    tessel_setmaxnreg_dec_40();
    if (threadIdx.x == 0 && threadIdx.y == 8) {{
      for (int s = 0; s < {NSEG}; ++s) {{
{seg}
        for (int k_0_0 = kb; k_0_0 < ke; ++k_0_0) {{
          const int j = j0 + k_0_0 - kb;
          if (j >= {stages}) tessel_mbarrier_wait(&tessel_k_0_0_empty[j % {stages}], (j / {stages} + 1) % 2);
{slot(expect)}
{prod}
        }}
      }}
    }}
  }} else {{
    tessel_setmaxnreg_inc_232();
    const int m_0_1 = threadIdx.y;
    const int lane = threadIdx.x;
    __align__(16) float C_fragment[128];
    for (int s = 0; s < {NSEG}; ++s) {{
{seg}
      #pragma unroll
      for (int i = 0; i < 128; ++i) C_fragment[i] = 0.0f;
      for (int k_0_0 = kb; k_0_0 < ke; ++k_0_0) {{
        const int j = j0 + k_0_0 - kb;
        tessel_mbarrier_wait(&tessel_k_0_0_full[j % {stages}], j / {stages} % 2);
        tessel_wgmma_fence();
        #pragma unroll
        for (int k_0_1 = 0; k_0_1 < 4; ++k_0_1) {{
{slot(wg)}
        }}
        tessel_wgmma_commit();
        tessel_wgmma_wait_1();
        if (k_0_0 > kb) tessel_mbarrier_arrive(&tessel_k_0_0_empty[(j + {stages - 1}) % {stages}]);
      }}
      tessel_wgmma_wait_0();
      tessel_mbarrier_arrive(&tessel_k_0_0_empty[(j0 + ke - kb - 1) % {stages}]);
      float4* const ws = tessel_sk_ws + (blockIdx.x * 8 + m_0_1) * 1024 + lane;
      if (kb > 0) {{  // the tile's end: publish the partial for the block before
        #pragma unroll
        for (int i = 0; i < 32; ++i) __stcg(&ws[i * 32], make_float4(C_fragment[4 * i], C_fragment[4 * i + 1], C_fragment[4 * i + 2], C_fragment[4 * i + 3]));
        __syncwarp();
        if (lane == 0) {{ __threadfence(); asm volatile("st.release.gpu.global.u32 [%0], 1;" :: "l"(&tessel_sk_flags[blockIdx.x * 8 + m_0_1]) : "memory"); }}
        continue;
      }}
      if (ke < {KS}) {{  // the tile's start: add the rest, from the block after
        if (lane == 0) {{
          unsigned* f = &tessel_sk_flags[(blockIdx.x + 1) * 8 + m_0_1];
          unsigned v = 0;
          do {{ asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(f) : "memory"); }} while (v == 0);
          *f = 0;
        }}
        __syncwarp();
        const float4* const wn = tessel_sk_ws + ((blockIdx.x + 1) * 8 + m_0_1) * 1024 + lane;
        #pragma unroll
        for (int i = 0; i < 32; ++i) {{ const float4 p = __ldcg(&wn[i * 32]); C_fragment[4 * i] += p.x; C_fragment[4 * i + 1] += p.y; C_fragment[4 * i + 2] += p.z; C_fragment[4 * i + 3] += p.w; }}
      }}
      const int lane_1 = threadIdx.x;
{epi}
    }}
  }}
}}
'''
out = out.replace(head, head + f'__device__ float4 tessel_sk_ws[{G * 8 * 1024}];\n__device__ unsigned tessel_sk_flags[{G * 8 + 8}];\n', 1)
c['code'] = out
c['kernels'][0]['grid'][0] = G
json.dump(c, open(dst, 'w'), indent=1)
print(f'T={T} KS={KS} G0={G0} rounds={rounds} -> G={G} R_dp={R_dp} Tsk={Tsk} Psk={Psk} NSEG={NSEG}')
