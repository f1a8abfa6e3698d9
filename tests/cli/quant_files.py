"""Helpers of the whole-file quantization tests (standard library only):
a GGUF header reader giving each tensor's type and bytes, a synthetic
importance matrix for a model, and a per-tensor comparison of two
quantized files."""
import os
import random
import struct
import sys

from cli_common import BIN, STORIES, peer_tool, require

# ggml's type numbers, as the GGUF tensor infos hold them
TYPE_NAMES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 9: "Q8_1",
              10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 15: "Q8_K", 16: "IQ2_XXS",
              17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S", 20: "IQ4_NL", 21: "IQ3_S", 22: "IQ2_S",
              23: "IQ4_XS", 30: "BF16", 34: "TQ1_0", 35: "TQ2_0", 39: "MXFP4"}
_SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


def quantize_tools():
    """(the peer's llama-quantize, our tessera-synth), or a skip (77)
    naming the one that is not built."""
    require(STORIES)
    lq = peer_tool("llama-quantize")
    if not lq:
        print("skip: the peer's llama-quantize is not built (../shared/peer/build-more.sh llama-quantize)")
        sys.exit(77)
    synth = os.path.join(os.path.dirname(BIN), "tools", "tessera-synth")
    if not os.access(synth, os.X_OK):
        print(f"skip: {synth} is not built")
        sys.exit(77)
    return lq, synth


def read_tensors(path):
    """(metadata dict, [(name, type name, ne tuple, data bytes)] in file
    order) of a GGUF file. A tensor's bytes run to the next tensor's offset
    (alignment padding included, which both writers fill with zeros)."""
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

    def rval(t):
        if t in _SCALAR:
            return rd(_SCALAR[t])[0]
        if t == 8:
            return rstr()
        at, n = rd("IQ")
        return [rval(at) for _ in range(n)]

    magic, _, n_tensors, n_kv = rd("4sIQQ")
    if magic != b"GGUF":
        raise ValueError(f"{path}: not a GGUF file")
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
        infos.append((name, TYPE_NAMES.get(dtype, str(dtype)), ne, off))
    align = kv.get("general.alignment", 32)
    base = (pos[0] + align - 1) // align * align
    ends = sorted(off for _, _, _, off in infos)[1:] + [len(g) - base]
    end_of = dict(zip(sorted(off for _, _, _, off in infos), ends))
    return kv, [(n, ty, ne, g[base + off:base + end_of[off]]) for n, ty, ne, off in infos]


def _gguf_str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def write_synthetic_imatrix(model, out, seed=7):
    """An importance matrix in llama.cpp's GGUF format for every matrix of
    model's layers (2-D or 3-D `blk.*.weight` tensors, one row of sums per
    expert): seeded log-uniform sums over 1e-3..1e2 and per-matrix token
    counts of 16..64, so every quantizer that takes a matrix sees uneven
    column weights and per-expert means. Returns the entry count."""
    _, tensors = read_tensors(model)
    rng = random.Random(seed)
    entries = []
    for name, _, ne, _ in tensors:
        if not name.startswith("blk.") or not name.endswith(".weight") or len(ne) < 2:
            continue
        n_mat = ne[2] if len(ne) > 2 else 1
        sums = [10 ** rng.uniform(-3, 2) for _ in range(ne[0] * n_mat)]
        counts = [float(rng.randint(16, 64)) for _ in range(n_mat)]
        entries.append((name, ne[0], n_mat, sums, counts))
    entries.sort()
    kv = [("general.type", 8, _gguf_str("imatrix")),
          ("imatrix.datasets", 9, struct.pack("<IQ", 8, 1) + _gguf_str("synthetic")),
          ("imatrix.chunk_count", 4, struct.pack("<I", 1)),
          ("imatrix.chunk_size", 4, struct.pack("<I", 64))]
    infos, blobs, off = [], [], 0
    for name, ne0, n_mat, sums, counts in entries:
        for suffix, shape, vals in ((".in_sum2", (ne0, n_mat), sums), (".counts", (1, n_mat), counts)):
            data = struct.pack(f"<{len(vals)}f", *vals)
            infos.append(_gguf_str(name + suffix) + struct.pack("<I", 2) + struct.pack("<QQ", *shape) +
                         struct.pack("<IQ", 0, off))
            pad = (-len(data)) % 32
            blobs.append(data + b"\0" * pad)
            off += len(data) + pad
    head = b"GGUF" + struct.pack("<IQQ", 3, len(infos), len(kv))
    head += b"".join(_gguf_str(k) + struct.pack("<I", t) + v for k, t, v in kv)
    head += b"".join(infos)
    head += b"\0" * ((-len(head)) % 32)
    with open(out, "wb") as f:
        f.write(head + b"".join(blobs))
    return len(entries)


def compare_files(want, got):
    """Differences of two quantized files, tensor by tensor: a list of
    strings (empty when every tensor has the same type and bytes and the
    metadata is the same)."""
    kv_w, tw = read_tensors(want)
    kv_g, tg = read_tensors(got)
    problems = []
    keys = sorted(set(kv_w) | set(kv_g))
    for k in keys:
        if kv_w.get(k) != kv_g.get(k) and k != "quantize.imatrix.file":
            problems.append(f"key {k}: {str(kv_w.get(k))[:40]} != {str(kv_g.get(k))[:40]}")
    got_by_name = {n: (ty, data) for n, ty, _, data in tg}
    if [n for n, _, _, _ in tw] != [n for n, _, _, _ in tg]:
        problems.append("the tensors are not the same or not in the same order")
    for name, ty, _, data in tw:
        if name not in got_by_name:
            continue
        gty, gdata = got_by_name[name]
        if gty != ty:
            problems.append(f"{name}: {gty}, llama-quantize {ty}")
        elif gdata != data:
            problems.append(f"{name}: {ty} bytes differ")
    return problems
