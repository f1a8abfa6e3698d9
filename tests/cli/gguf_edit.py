"""Read a GGUF v2/v3 file, change its metadata, write it back with the same
tensors: the hostile-model tests make files that are well formed but mean
nonsense (a negative epsilon, more tokens than embedding rows, NaN scores).
Written from the GGUF specification, independent of Tessera's reader."""
import os
import struct

# type id -> struct format of a scalar
SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
STRING, ARRAY = 8, 9


class Reader:
    def __init__(self, data):
        self.d, self.o = data, 0

    def take(self, fmt):
        v = struct.unpack_from("<" + fmt, self.d, self.o)
        self.o += struct.calcsize("<" + fmt)
        return v[0]

    def string(self):
        n = self.take("Q")
        s = self.d[self.o:self.o + n]
        self.o += n
        return s

    def value(self, t):
        if t == STRING:
            return self.string()
        if t == ARRAY:
            et, n = self.take("I"), self.take("Q")
            return (et, [self.value(et) for _ in range(n)])
        return self.take(SCALAR[t])


def put_value(out, t, v):
    if t == STRING:
        out += struct.pack("<Q", len(v)) + v
    elif t == ARRAY:
        et, items = v
        out += struct.pack("<IQ", et, len(items))
        for x in items:
            put_value(out, et, x)
    else:
        out += struct.pack("<" + SCALAR[t], v)


class Gguf:
    def __init__(self, path):
        data = open(path, "rb").read()
        r = Reader(data)
        assert r.take("4s") == b"GGUF"
        self.version = r.take("I")
        n_t, n_kv = r.take("Q"), r.take("Q")
        self.kv = []  # [key(str), type, value]
        for _ in range(n_kv):
            k = r.string().decode()
            t = r.take("I")
            self.kv.append([k, t, r.value(t)])
        self.tensors = []  # [name(bytes), dims, dtype, offset]
        for _ in range(n_t):
            name = r.string()
            nd = r.take("I")
            dims = [r.take("Q") for _ in range(nd)]
            self.tensors.append([name, dims, r.take("I"), r.take("Q")])
        align = self.get("general.alignment") or 32
        start = (r.o + align - 1) // align * align
        self.data = data[start:]

    def get(self, key):
        for k, t, v in self.kv:
            if k == key:
                return v
        return None

    def set(self, key, t, v):
        for e in self.kv:
            if e[0] == key:
                e[1], e[2] = t, v
                return
        self.kv.append([key, t, v])

    def write(self, path):
        out = bytearray(b"GGUF" + struct.pack("<IQQ", self.version, len(self.tensors), len(self.kv)))
        for k, t, v in self.kv:
            out += struct.pack("<Q", len(k)) + k.encode() + struct.pack("<I", t)
            put_value(out, t, v)
        for name, dims, dtype, off in self.tensors:
            out += struct.pack("<Q", len(name)) + name + struct.pack("<I", len(dims))
            out += b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", dtype, off)
        align = self.get("general.alignment") or 32
        out += b"\0" * ((align - len(out) % align) % align)
        open(path, "wb").write(bytes(out) + self.data)


def write_fim_model(src, dst):
    """src (stories260K) with three unused byte tokens (<0x01>..<0x03>, ids
    4..6) renamed to <fim_prefix>, <fim_suffix>, <fim_middle> and made
    control tokens, written to dst through dst.tmp (a concurrent reader never
    sees half a file): a small model whose vocabulary has FIM tokens."""
    g = Gguf(src)
    et, toks = g.get("tokenizer.ggml.tokens")
    tt, types = g.get("tokenizer.ggml.token_type")
    for i, name in zip((4, 5, 6), (b"<fim_prefix>", b"<fim_suffix>", b"<fim_middle>")):
        toks[i] = name
        types[i] = 3  # control
    g.set("tokenizer.ggml.tokens", 9, (et, toks))
    g.set("tokenizer.ggml.token_type", 9, (tt, types))
    g.write(dst + ".tmp")
    os.replace(dst + ".tmp", dst)
    return dst
