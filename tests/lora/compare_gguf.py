#!/usr/bin/env python3
"""Compare two GGUF files key by key and tensor by tensor (PyPI's gguf and
numpy): the keys and values each has, then each tensor's type, shape and
values (byte-equal, or the largest difference after dequantizing).

usage: compare_gguf.py A.gguf B.gguf [--ignore KEY]... [--tol T]
Exit 0 when every key and tensor agrees (values within T, default 0)."""
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


def kv(reader):
    out = {}
    for f in reader.fields.values():
        if f.name.startswith("GGUF."):
            continue
        try:
            v = f.contents()
        except Exception:  # older gguf: raw parts
            v = [bytes(p).hex() for p in f.parts]
        out[f.name] = v
    return out


def main():
    args = sys.argv[1:]
    ignore, tol, files = set(), 0.0, []
    i = 0
    while i < len(args):
        if args[i] == "--ignore":
            ignore.add(args[i + 1]); i += 2
        elif args[i] == "--tol":
            tol = float(args[i + 1]); i += 2
        else:
            files.append(args[i]); i += 1
    a, b = GGUFReader(files[0]), GGUFReader(files[1])
    bad = 0
    ka, kb = kv(a), kv(b)
    for k in sorted(set(ka) | set(kb)):
        if k in ignore:
            continue
        if k not in ka or k not in kb:
            print(f"key {k}: only in {'A' if k in ka else 'B'}"); bad += 1
        elif ka[k] != kb[k]:
            va, vb = str(ka[k])[:80], str(kb[k])[:80]
            print(f"key {k}: {va} != {vb}"); bad += 1
    ta = {t.name: t for t in a.tensors}
    tb = {t.name: t for t in b.tensors}
    if [t.name for t in a.tensors] != [t.name for t in b.tensors]:
        print("tensor order differs"); bad += 1
    worst = 0.0
    n_equal = 0
    for name in sorted(set(ta) | set(tb)):
        if name not in ta or name not in tb:
            print(f"tensor {name}: only in {'A' if name in ta else 'B'}"); bad += 1; continue
        x, y = ta[name], tb[name]
        if x.tensor_type != y.tensor_type or list(x.shape) != list(y.shape):
            print(f"tensor {name}: {x.tensor_type.name} {list(x.shape)} != {y.tensor_type.name} {list(y.shape)}")
            bad += 1; continue
        if bytes(x.data.tobytes()) == bytes(y.data.tobytes()):
            n_equal += 1; continue
        dx = dequantize(x.data, x.tensor_type).astype(np.float64)
        dy = dequantize(y.data, y.tensor_type).astype(np.float64)
        d = float(np.max(np.abs(dx - dy)))
        worst = max(worst, d)
        if d > tol:
            print(f"tensor {name}: max difference {d:.3g}"); bad += 1
    print(f"{len(ka)} / {len(kb)} keys, {len(ta)} / {len(tb)} tensors, {n_equal} byte-equal, "
          f"largest difference of the others {worst:.3g}; {bad} problem(s)")
    sys.exit(1 if bad else 0)


main()
