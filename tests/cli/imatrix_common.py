"""Helpers of the importance-matrix tests: the peer's llama-imatrix and
llama-quantize, a reader of GGUF imatrix files (standard library only), and
the comparison of two matrices."""
import math
import os
import struct

from cli_common import peer_tool  # noqa: F401 (the tests import it from here)


def text_head(src_path, tmp, n_chars):
    """The first n_chars characters of src_path as tmp/gpl.txt; its path."""
    text = os.path.join(tmp, "gpl.txt")
    with open(src_path, encoding="utf-8") as f:
        src = f.read()
    with open(text, "w", encoding="utf-8") as f:
        f.write(src[:n_chars])
    return text


def read_gguf(path):
    """(metadata dict, {tensor name: tuple of floats}) of an F32-only GGUF."""
    with open(path, "rb") as f:
        g = f.read()
    pos = [0]

    def rd(fmt):
        v = struct.unpack_from("<" + fmt, g, pos[0])
        pos[0] += struct.calcsize("<" + fmt)
        return v

    def rstr():
        (n,) = rd("Q")
        s = g[pos[0]:pos[0] + n].decode("utf-8", "replace")
        pos[0] += n
        return s

    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def rval(t):
        if t in scalar:
            return rd(scalar[t])[0]
        if t == 8:
            return rstr()
        at, n = rd("IQ")
        return [rval(at) for _ in range(n)]

    magic, _, n_tensors, n_kv = rd("4sIQQ")
    assert magic == b"GGUF", path
    kv = {}
    for _ in range(n_kv):
        k = rstr()
        (t,) = rd("I")
        kv[k] = rval(t)
    infos = []
    for _ in range(n_tensors):
        name = rstr()
        (nd,) = rd("I")
        ne = rd("Q" * nd)
        dtype, off = rd("IQ")
        assert dtype == 0, f"{path}: {name} is not F32"
        infos.append((name, math.prod(ne), off))
    align = kv.get("general.alignment", 32)
    base = (pos[0] + align - 1) // align * align
    return kv, {n: struct.unpack_from(f"<{c}f", g, base + off) for n, c, off in infos}


def compare(ours, theirs):
    """Compare two imatrix files: (problems, worst per-element relative
    difference, worst per-weight relative L2 difference)."""
    _, a = read_gguf(ours)
    _, b = read_gguf(theirs)
    problems = []
    if set(a) != set(b):
        problems.append(f"tensors differ: {sorted(set(a) ^ set(b))[:6]}")
    worst_el = worst_l2 = 0.0
    for name in sorted(set(a) & set(b)):
        if name.endswith(".counts"):
            if a[name] != b[name]:
                problems.append(f"{name}: {a[name][:4]} != {b[name][:4]}")
            continue
        x, y = a[name], b[name]
        num = math.sqrt(sum((p - q) ** 2 for p, q in zip(x, y)))
        den = math.sqrt(sum(q * q for q in y)) or 1.0
        worst_l2 = max(worst_l2, num / den)
        worst_el = max(worst_el, max(abs(p - q) / max(abs(q), 1e-30) for p, q in zip(x, y)))
    return problems, worst_el, worst_l2
