#!/usr/bin/env python3
"""Sums the guest instructions qemu-aarch64 executed between arm_count.c's
markers, by class, per (32-weight block x row x column). Arguments: nm
output, the -d in_asm,exec,nochain log, arm_count's case list. Prints a
markdown table. See bench/arm_count.sh."""
import re
import sys
from collections import Counter

syms_path, trace_path, cases_path = sys.argv[1:4]
addr = {}
for line in open(syms_path):
    f = line.split()
    if len(f) == 3:
        addr[f[2]] = int(f[0], 16)
begin, end = addr['mark_begin'], addr['mark_end']

def klass(mn, ops, word):
    if mn == '.byte':  # qemu 7.2's disassembler does not know the v8.2+ ones
        if (word & 0xbfe0fc00) == 0x0e809400 or (word & 0xbfc0f400) == 0x0f80e000:
            return 'dot'  # sdot (vector, by element)
        if (word & 0xffe0fc00) == 0x4e80a400:
            return 'dot'  # smmla
        return 'other'  # e.g. SVE in libc's string functions
    if mn in ('sdot', 'udot', 'usdot', 'sudot', 'smmla', 'ummla', 'usmmla'):
        return 'dot'
    if mn in ('smull', 'smull2', 'smlal', 'smlal2', 'sadalp', 'saddlp', 'umull', 'umull2'):
        return 'dot'  # the neon level's products: widening multiply, pairwise add
    if mn.startswith('ld'):
        return 'load'
    if mn.startswith('st'):
        return 'store'
    if mn.startswith('b') and mn in ('b', 'bl', 'blr', 'br') or mn.startswith('b.') or mn in ('cbz', 'cbnz', 'tbz', 'tbnz', 'ret'):
        return 'branch'
    if mn.startswith('f') or mn in ('scvtf', 'ucvtf'):
        return 'float'
    if ops.startswith('v'):
        return 'simd-int'
    return 'scalar'

CLASSES = ['load', 'dot', 'simd-int', 'float', 'scalar', 'branch', 'store', 'other']
tb = {}  # pc -> [class, ...]
cur = None
counts, counting, n_begin = {}, None, -1
insn = re.compile(r'^0x([0-9a-f]+):\s+([0-9a-f]{8})\s+(\S+)\s*(.*)$')
trace = re.compile(r'^Trace \d+: \S+ \[[0-9a-f]+/([0-9a-f]+)/')
for line in open(trace_path, errors='replace'):
    m = insn.match(line)
    if m:
        pc = int(m.group(1), 16)
        if cur is None:
            cur = pc
            tb[cur] = []
        tb[cur].append(klass(m.group(3), m.group(4).strip(), int(m.group(2), 16)))
        continue
    if line.startswith('IN:') or line.startswith('---') or not line.strip():
        cur = None
        continue
    m = trace.match(line)
    if m:
        cur = None
        pc = int(m.group(1), 16)
        if pc == begin:
            n_begin += 1
            counting = Counter()
            counts[n_begin] = counting
        elif pc == end:
            counting = None
        elif counting is not None:
            counting.update(tb[pc])

print('| level | type | kernel | per | total | ' + ' | '.join(CLASSES) + ' |')
print('|---|---|---|---|---|' + '---|' * len(CLASSES))
for line in open(cases_path):
    i, level, ty, kind, units = line.split()
    c = counts[int(i)]
    u = int(units)
    per = {'dot-nc1': '32w x 1 col', 'dot-nc4': '32w x 1 col (of 4)', 'tile2x2': '32w x (row, col)'}[kind]
    cells = ' | '.join('%.1f' % (c[k] / u) for k in CLASSES)
    print(f'| {level} | {ty} | {kind} | {per} | {sum(c.values()) / u:.1f} | {cells} |')
