#!/usr/bin/env python3
"""Which SASS opcodes a PTX instruction adds, by differential compilation (how sass_count.py's
INFERRED opcodes were found, session 12).

Each probe compiles a small sm_90a kernel (nvcc -cubin -O3) with and without one PTX instruction
and prints the change in each opcode's count (opcode = the low 9 bits of an instruction's first
8 bytes; sass_count.py reads the cubin). The opcode a probe adds once is that instruction's; its
name comes from the instruction's known SASS counterpart, to be confirmed against a cuobjdump
listing where one is available. Runs on the build VM (nvcc, no GPU): a few seconds a probe.

Usage: bench/experiments/sass_calibrate.py   (in a scratch folder: writes k.cu and k.cubin)
"""
import collections
import importlib.util
import os
import struct
import subprocess

_spec = importlib.util.spec_from_file_location(
    'sass_count', os.path.join(os.path.dirname(os.path.abspath(__file__)), 'sass_count.py'))
sc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sc)


def ops(body, arch='sm_90a', pre=''):
    src = pre + '''
extern "C" __global__ void k(float* out, const float* in, unsigned long long* bar, const void* tmap) {
  __shared__ __align__(1024) unsigned char sm[32768];
  __shared__ long long mb[2];
  float a = in[threadIdx.x], b = in[threadIdx.x + 1], r = 0.f;
  unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(sm));
  unsigned m = static_cast<unsigned>(__cvta_generic_to_shared(mb));
''' + body + '''
  out[threadIdx.x] = r + a + b;
}'''
    open('k.cu', 'w').write(src)
    p = subprocess.run(['nvcc', '-gencode', f'arch=compute_{arch[3:]},code={arch}', '-cubin', '-O3', '-o', 'k.cubin', 'k.cu'], capture_output=True, text=True)
    if p.returncode: print(p.stderr[:2000]); return None
    c = collections.Counter()
    for _, text in sc.text_sections('k.cubin'):
        for i in range(0, len(text), 16):
            w = struct.unpack_from('<Q', text, i)[0]; c[w & 0x1ff] += 1
    return c
base = ops('')
def probe(name, body, pre=''):
    c = ops(body, pre=pre)
    if c is None: print(name, 'failed'); return
    d = {f'{k:#x}': c[k] - base[k] for k in set(c) | set(base) if c[k] != base[k]}
    print(f'{name:28s}', d)
probe('add.f32', 'asm volatile("add.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));')
probe('min.f32', 'asm volatile("min.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));')
probe('ex2.approx', 'asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(a));')
probe('rcp.approx', 'asm volatile("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(a));')
probe('fence.acq_rel.gpu', 'asm volatile("fence.acq_rel.gpu;" ::: "memory");')
probe('fence.proxy.async', 'asm volatile("fence.proxy.async.shared::cta;" ::: "memory");')
probe('mbarrier.arrive', 'asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(m) : "memory");')
probe('mbarrier.init', 'asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(m) : "memory");')
probe('mbarrier.expect_tx', 'asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], 64;" :: "r"(m) : "memory");')
probe('mbarrier.try_wait', 'unsigned d; asm volatile("{\\n.reg .pred p;\\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\\nselp.u32 %0, 1, 0, p;\\n}" : "=r"(d) : "r"(m) : "memory"); r = d;')
probe('wgmma.fence', 'asm volatile("wgmma.fence.sync.aligned;" ::: "memory");')
probe('wgmma.commit', 'asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");')
probe('wgmma.wait 1', 'asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");')
probe('setmaxnreg.inc', 'asm volatile("setmaxnreg.inc.sync.aligned.u32 232;" ::: "memory");')
probe('cp.async.bulk.tensor.2d', 'asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];" :: "r"(s), "l"(tmap), "r"(m), "r"(0), "r"(0) : "memory");')
probe('cp.async.bulk (1d)', 'asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], 256, [%2];" :: "r"(s), "l"(in), "r"(m) : "memory");')
probe('stmatrix.x4', 'unsigned v = __float_as_uint(a); asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" :: "r"(s), "r"(v), "r"(v), "r"(v), "r"(v) : "memory");')
probe('cp.async.bulk.tensor store', 'asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" :: "l"(tmap), "r"(s), "r"(0), "r"(0) : "memory"); asm volatile("cp.async.bulk.commit_group;" ::: "memory"); asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");')
probe('red.release.gpu', 'asm volatile("red.release.gpu.global.add.u32 [%0], 1;" :: "l"(bar) : "memory");')
probe('ld.acquire.gpu', 'unsigned d; asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(d) : "l"(bar) : "memory"); r = d;')
probe('atom.add', 'r = atomicAdd(reinterpret_cast<unsigned*>(bar), 1u);')
probe('fdividef', 'r = __fdividef(a, b);')
probe('IEEE div', 'r = a / b;')
probe('expf', 'r = expf(a);')
probe('elect.sync', 'unsigned d; asm volatile("{\\n.reg .pred p;\\nelect.sync %0|p, 0xffffffff;\\n}" : "=r"(d)); r = d;')
wg = '''unsigned long long da = s >> 4, db = (s + 4096) >> 4; float d0=a,d1=a,d2=a,d3=a;
asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
asm volatile("{\\n.reg .pred p;\\nsetp.ne.b32 p, %6, 0;\\nwgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, 0;\\n}" : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "l"(da), "l"(db), "r"(1));
asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
r = d0 + d1 + d2 + d3;'''
probe('wgmma m64n8k16 (+fence,commit,wait)', wg)
second = wg.split('\n')[2]
probe('two wgmma', wg.replace('r = d0', second + '\nr = d0'))
