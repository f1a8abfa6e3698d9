#!/usr/bin/env python3
"""The CPU plugins' step plan (backends/cpu-common/cpu_steps.h: small nodes
on one thread, products sharing one activation conversion, fewer barriers)
against the straightforward one (TESSERA_CPU_PLAIN_STEPS=1: every node on
every thread, a barrier after each): test_step_graph's decode script writes
every logit it gets to a file under each, and the files must be the same
bytes. Usage: step_plan.py TEST_STEP_GRAPH MODE DEVICE"""
import os
import subprocess
import sys
import tempfile

exe, mode, device = sys.argv[1:4]
outs = []
with tempfile.TemporaryDirectory() as tmp:
    for plain in ('0', '1'):
        path = os.path.join(tmp, 'trace-' + plain)
        env = dict(os.environ, TESSERA_CPU_PLAIN_STEPS=plain, TESSERA_AVX_FORCE_THREADS='1',
                   TESSERA_NEON_FORCE_THREADS='1')
        r = subprocess.run([exe, mode, device, '--trace', path], env=env, capture_output=True, text=True)
        if r.returncode == 77:
            print(r.stdout.strip() or 'skipped')
            sys.exit(77)
        print(r.stdout.strip())
        if r.returncode != 0:
            print('test_step_graph failed (TESSERA_CPU_PLAIN_STEPS=%s):\n%s%s' % (plain, r.stdout, r.stderr))
            sys.exit(1)
        with open(path, 'rb') as f:
            outs.append(f.read())
if not outs[0] or outs[0] != outs[1]:
    n = min(len(outs[0]), len(outs[1]))
    first = next((i for i in range(n) if outs[0][i] != outs[1][i]), n)
    print('planned and plain steps differ: %d and %d bytes, first difference at byte %d' %
          (len(outs[0]), len(outs[1]), first))
    sys.exit(1)
print('planned and plain steps: the same %d bytes of logits' % len(outs[0]))
