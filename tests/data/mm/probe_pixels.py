#!/usr/bin/env python3
# probe_pixels.py TEMPLATE OUT — tests/data/mm/README.md says how it was used.
# A LLaVA (mlp) mmproj whose rows are the preprocessed pixels: patch 4,
# width 48 = 4*4*3, identity patch embedding, no pre-norm, zero blocks,
# projector identity (through a GELU made linear by an offset of 20).
import sys, numpy as np
from probe_edit import copy_mmproj

OFF = 20.0


def edit(n, a):
    if n.startswith('v.pre_ln') or n.startswith('v.post_ln'): return None
    a = a.astype(np.float32)
    if n == 'v.patch_embd.weight':  # (D, 3, p, p)
        a[:] = 0
        D, C, P, _ = a.shape
        for c in range(C):
            for y in range(P):
                for x in range(P):
                    a[(c * P + y) * P + x, c, y, x] = 1
    elif n in ('v.class_embd', 'v.position_embd.weight', 'v.patch_embd.bias') or \
            any(k in n for k in ('attn_out', 'ffn_down')):
        a[:] = 0
    elif n == 'mm.0.weight':  # (hidden, D)
        a[:] = 0
        for i in range(a.shape[1]): a[i, i] = 1
    elif n == 'mm.0.bias':
        a[:] = OFF
    elif n == 'mm.2.weight':  # (out, hidden)
        a[:] = 0
        for i in range(48): a[i, i] = 1
    elif n == 'mm.2.bias':
        a[:] = 0
        a[:48] = -OFF
    return a


copy_mmproj(sys.argv[1], sys.argv[2], edit)
