#!/usr/bin/env python3
"""Counts a cubin's SASS instructions by opcode, and those of each loop body, without cuobjdump.

The build VM has nvcc and ptxas but no cuobjdump or nvdisasm; this reads the ELF's .text.<kernel>
sections directly. sm_90 instructions are 16 bytes; the low 9 bits of the first 8 bytes name the
opcode. The table below was read off `cuobjdump -sass` listings of mma.sync GEMMs (Tessel's and
CUTLASS's) on the H100 host (session 11): 49 opcodes, no two mnemonics sharing a code. Session
12 inferred 22 more by differential compilation here (a kernel compiled with and without one PTX
instruction: wgmma.mma_async, cp.async.bulk.tensor, mbarrier.arrive, ex2.approx, ...; the opcode
it adds named after that instruction's SASS counterpart); session 13 confirmed 13 of them
(HGMMA, UTMALDG, SYNCS, WARPGROUP, MUFU, ...) against cuobjdump listings and added 8 more seen
there; session 14 UTMASTG (by counts against a listing). INFERRED keeps the 8 not yet seen in a
listing. Opcodes in neither print as op_0xNNN.
A loop is a backward BRA: its body runs from the branch target to the branch (the offset, in
4-byte units, is bits 16-23 and 34-63 of the first word, relative to the next instruction).

Usage: nvcc -arch=sm_90 -cubin -O3 -o k.cubin k.cu && bench/experiments/sass_count.py k.cubin
"""
import collections
import struct
import sys

OPCODES = {
    0x2: 'MOV', 0x3: 'P2R', 0x5: 'CS2R', 0x7: 'SEL', 0xb: 'FSETP', 0xc: 'ISETP', 0x10: 'IADD3',
    0x11: 'LEA', 0x12: 'LOP3', 0x16: 'PRMT', 0x19: 'SHF', 0x20: 'FMUL', 0x23: 'FFMA',
    0x24: 'IMAD', 0x25: 'IMAD', 0x30: 'HADD2', 0x36: 'VIADD', 0x3b: 'LDSM', 0x3c: 'HMMA',
    0x3e: 'F2FP', 0x48: 'VIMNMX', 0x82: 'UMOV', 0x87: 'USEL', 0x8c: 'UISETP', 0x90: 'UIADD3',
    0x91: 'ULEA', 0x92: 'ULOP3', 0x99: 'USHF', 0xa4: 'UIMAD', 0xa5: 'UIMAD', 0xb9: 'ULDC',
    0xca: 'R2UR', 0x106: 'I2F', 0x118: 'NOP', 0x119: 'S2R', 0x11a: 'DEPBAR', 0x11d: 'BAR',
    0x147: 'BRA', 0x14d: 'EXIT', 0x180: 'LD', 0x181: 'LDG', 0x182: 'LDC', 0x184: 'LDS',
    0x186: 'STG', 0x188: 'STS', 0x189: 'SHFL', 0x1ae: 'LDGSTS', 0x1af: 'LDGDEPBAR',
    0x1c3: 'S2UR',
    # Session 13: read off `cuobjdump -sass` listings of sm_90a wgmma, bulk-copy and mma.sync
    # kernels (NVIDIA H200 host, CUDA 13.0), each line's mnemonic against its encoding's low 9
    # bits. The first 13 were INFERRED below (session 12) and are now confirmed.
    0x9: 'FMNMX', 0x1c: 'PLOP3', 0x21: 'FADD', 0x2f: 'ELECT', 0x108: 'MUFU', 0x141: 'BSYNC',
    0x145: 'BSSY', 0x192: 'MEMBAR', 0x1a7: 'SYNCS', 0x1b4: 'UTMALDG', 0x1c5: 'WARPGROUP',
    0x1c6: 'FENCE', 0x1f0: 'HGMMA',
    0x4: 'R2P', 0x8: 'FSEL', 0x27: 'IMAD', 0x96: 'UPRMT', 0x146: 'YIELD', 0x148: 'WARPSYNC',
    0x1b2: 'SYNCS', 0x1c8: 'USETMAXREG',
}
# Session 14: the bulk tensor store's code, 0x1b5, counted 4 in each of five tuned bests, as many as
# `cuobjdump -sass` listed UTMASTG in the same cubins on the H200 host.
OPCODES[0x1b5] = 'UTMASTG'
# Differential compilation (bench/experiments/sass_calibrate.py; nvcc -gencode
# arch=compute_90a,code=sm_90a -cubin -O3, CUDA 13.0), not yet seen in a listing: the PTX each
# was added by. CALL/RET come from an IEEE division's slow path, FCHK from its check.
INFERRED = {
    0x44: 'STSM',  # stmatrix.sync.aligned.m8n8.x4
    0x102: 'FCHK',
    0x144: 'CALL', 0x150: 'RET',
    0x18e: 'RED',  # red.release.gpu
    0x1a8: 'ATOMG',  # atom.global.add
    0x1b7: 'UTMACMDFLUSH',  # cp.async.bulk.commit_group
    0x1ba: 'UBLKCP',  # cp.async.bulk (one-dimensional)
}
assert not set(INFERRED) & set(OPCODES)
OPCODES.update(INFERRED)
INTEGER = {'IMAD', 'LEA', 'LOP3', 'SHF', 'IADD3', 'VIADD', 'SEL', 'PRMT', 'MOV', 'UIADD3', 'ULEA',
           'ULOP3', 'USHF', 'UIMAD', 'USEL', 'UMOV'}


def text_sections(path):
    """(kernel name, bytes) of each .text.<kernel> section of an ELF64 cubin."""
    d = open(path, 'rb').read()
    if d[:4] != b'\x7fELF' or d[4] != 2:
        sys.exit(f'{path}: not a 64-bit ELF cubin (nvcc -cubin)')
    shoff = struct.unpack_from('<Q', d, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from('<HHH', d, 0x3a)
    secs = [struct.unpack_from('<IIQQQQIIQQ', d, shoff + i * shentsize) for i in range(shnum)]
    names = secs[shstrndx][4]
    for s in secs:
        name = d[names + s[0]:d.index(b'\0', names + s[0])].decode()
        if name.startswith('.text.'):
            yield name[len('.text.'):], d[s[4]:s[4] + s[5]]


def summary(ops):
    c = collections.Counter(ops)
    integer = sum(n for op, n in c.items() if op in INTEGER)
    top = ' '.join(f'{op} {n}' for op, n in c.most_common(14))
    return f'{len(ops)} instructions, {integer} integer arithmetic: {top}'


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for path in sys.argv[1:]:
        for kernel, text in text_sections(path):
            words = [struct.unpack_from('<Q', text, i)[0] for i in range(0, len(text), 16)]
            ops = [OPCODES.get(w & 0x1ff, f'op_{w & 0x1ff:#x}') for w in words]
            print(f'{path} {kernel}: {summary(ops)}')
            for i, (w, op) in enumerate(zip(words, ops)):
                if op != 'BRA':
                    continue
                hi = w >> 34
                if hi & (1 << 29):
                    hi -= 1 << 30
                target = i * 16 + 16 + 4 * ((hi << 8) | ((w >> 16) & 0xff))
                if 0 <= target < i * 16:
                    print(f'  loop {target:#x}..{i * 16:#x}: {summary(ops[target // 16:i + 1])}')


if __name__ == '__main__':
    main()
