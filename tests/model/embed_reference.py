"""The encoders against an independent reference: small synthetic f32 bert,
nomic-bert and reranker files (tessera-synth, seeded) are read by a GGUF
parser of its own and run in double precision in plain Python, from the
architectures' published definitions (BERT: learned positions, post
LayerNorms, GELU; Nomic Embed: NeoX rotary positions, fused qkv, SwiGLU; a
BERT sequence classifier's pooler (tanh) and classifier). Tessera's vectors
(`tessera embed`, every pooling) must have cosine >= 0.99999 with the
reference's and its rerank scores must be within 1e-3 (measured: 7.6e-5 and 9.2e-5, the
fp16 table of GELU). The token ids come
from `tessera tokenize` (the WordPiece tokenizer has its own tests).

usage: embed_reference.py TESSERA_SYNTH"""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

BIN = os.environ.get("TESSERA_BIN", "")
SHAPE = ["--dim", "64", "--layers", "2", "--heads", "4", "--ffn", "128", "--ctx", "128"]
PROMPTS = ["the cat sat on the mat.", "what is the capital of france? paris is."]


# ------------------------------------------------------------ GGUF (f32 only)

def read_gguf(path):
    with open(path, "rb") as f:
        data = f.read()
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return v[0]

    def string():
        nonlocal pos
        n = take("Q")
        s = data[pos:pos + n].decode("utf-8")
        pos += n
        return s

    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("I"), take("Q")
            return [value(et) for _ in range(n)]
        return take(scalar[t])

    assert data[:4] == b"GGUF", path
    pos = 4
    take("I")
    n_tensors, n_kv = take("Q"), take("Q")
    meta = {}
    for _ in range(n_kv):
        k = string()
        meta[k] = value(take("I"))
    infos = []
    for _ in range(n_tensors):
        name = string()
        dims = [take("Q") for _ in range(take("I"))]
        dtype, off = take("I"), take("Q")
        infos.append((name, dims, dtype, off))
    align = meta.get("general.alignment", 32)
    base = (pos + align - 1) // align * align
    tensors = {}
    for name, dims, dtype, off in infos:
        assert dtype == 0, "%s is not f32" % name
        n = 1
        for d in dims:
            n *= d
        flat = struct.unpack_from("<%df" % n, data, base + off)
        if len(dims) == 1:
            tensors[name] = list(flat)
        else:  # rows of ne0
            tensors[name] = [list(flat[r * dims[0]:(r + 1) * dims[0]]) for r in range(dims[1])]
    return meta, tensors


# ------------------------------------------------------------ the graph

def linear(w, b, x):
    y = [sum(wi * xi for wi, xi in zip(row, x)) for row in w]
    return [a + c for a, c in zip(y, b)] if b else y


def layer_norm(x, w, b, eps):
    m = sum(x) / len(x)
    v = sum((a - m) ** 2 for a in x) / len(x)
    return [(a - m) / math.sqrt(v + eps) * wi + bi for a, wi, bi in zip(x, w, b)]


def gelu(x):
    return 0.5 * x * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def silu(x):
    return x / (1.0 + math.exp(-x))


def rope_neox(v, p, n_heads, d, base):
    out = list(v)
    half = d // 2
    for h in range(n_heads):
        for i in range(half):
            theta = p * base ** (-2.0 * i / d)
            a, b = v[h * d + i], v[h * d + i + half]
            out[h * d + i] = a * math.cos(theta) - b * math.sin(theta)
            out[h * d + i + half] = a * math.sin(theta) + b * math.cos(theta)
    return out


def attention(q, k, v, n_heads, d):
    out = [[0.0] * (n_heads * d) for _ in q]
    for h in range(n_heads):
        s = slice(h * d, (h + 1) * d)
        for t, qt in enumerate(q):
            sc = [sum(a * b for a, b in zip(qt[s], kj[s])) / math.sqrt(d) for kj in k]
            mx = max(sc)
            e = [math.exp(x - mx) for x in sc]
            z = sum(e)
            for j, vj in enumerate(v):
                for i in range(d):
                    out[t][h * d + i] += e[j] / z * vj[h * d + i]
    return out


def encode(meta, w, tokens):
    arch = meta["general.architecture"]
    nomic = arch == "nomic-bert"
    E, L, H = meta[arch + ".embedding_length"], meta[arch + ".block_count"], meta[arch + ".attention.head_count"]
    eps, D = meta[arch + ".attention.layer_norm_epsilon"], E // H
    base = meta.get(arch + ".rope.freq_base", 10000.0)
    x = []
    for p, t in enumerate(tokens):
        e = [a + b for a, b in zip(w["token_embd.weight"][t], w["token_types.weight"][0])]
        if not nomic:
            e = [a + b for a, b in zip(e, w["position_embd.weight"][p])]
        x.append(layer_norm(e, w["token_embd_norm.weight"], w["token_embd_norm.bias"], eps))
    for il in range(L):
        g = lambda n: w.get("blk.%d.%s" % (il, n))
        if nomic:
            qkv = [linear(g("attn_qkv.weight"), None, xt) for xt in x]
            q = [rope_neox(r[:E], p, H, D, base) for p, r in enumerate(qkv)]
            k = [rope_neox(r[E:2 * E], p, H, D, base) for p, r in enumerate(qkv)]
            v = [r[2 * E:] for r in qkv]
        else:
            q = [linear(g("attn_q.weight"), g("attn_q.bias"), xt) for xt in x]
            k = [linear(g("attn_k.weight"), g("attn_k.bias"), xt) for xt in x]
            v = [linear(g("attn_v.weight"), g("attn_v.bias"), xt) for xt in x]
        a = attention(q, k, v, H, D)
        x = [layer_norm([s + o for s, o in zip(xt, linear(g("attn_output.weight"), g("attn_output.bias"), at))],
                        g("attn_output_norm.weight"), g("attn_output_norm.bias"), eps) for xt, at in zip(x, a)]
        nx = []
        for xt in x:
            up = linear(g("ffn_up.weight"), g("ffn_up.bias"), xt)
            if nomic:
                h = [silu(gt) * u for gt, u in zip(linear(g("ffn_gate.weight"), None, xt), up)]
            else:
                h = [gelu(u) for u in up]
            f = linear(g("ffn_down.weight"), g("ffn_down.bias"), h)
            nx.append(layer_norm([s + o for s, o in zip(xt, f)], g("layer_output_norm.weight"),
                                 g("layer_output_norm.bias"), eps))
        x = nx
    return x


def pool(rows, pooling):
    if pooling == "mean":
        return [sum(c) / len(rows) for c in zip(*rows)]
    return rows[0] if pooling == "cls" else rows[-1]


def l2(v):
    n = math.sqrt(sum(a * a for a in v))
    return [a / n for a in v]


# ------------------------------------------------------------ tessera

def tessera_tokens(model, text):
    out = subprocess.run([BIN, "tokenize", "-m", model, "-p", text, "--ids"], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("FAIL tessera tokenize: " + out.stderr)
    return [int(t) for t in out.stdout.strip().strip("[]").split(",")]


def tessera_embed(model, pooling, lines):
    out = subprocess.run([BIN, "embed", "-m", model, "--pooling", pooling, "--embd-normalize",
                          "-1" if pooling == "rank" else "2", "--embd-output-format", "json", "-t", "1", "-p",
                          "\n".join(lines)], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        sys.exit("FAIL tessera embed: " + out.stderr)
    return [d["embedding"] for d in json.loads(out.stdout)["data"]]


def cosine(a, b):
    return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def main():
    if len(sys.argv) != 2 or not BIN:
        sys.exit(__doc__)
    tmp = tempfile.mkdtemp(prefix="embed-ref-")
    failed = 0
    cases = [("bert", ["--arch", "bert", "--seed", "7"], ["cls", "mean", "last"]),
             ("nomic-bert", ["--arch", "nomic-bert", "--seed", "8"], ["mean", "cls", "last"])]
    for name, args, poolings in cases:
        model = os.path.join(tmp, name + ".gguf")
        subprocess.run([sys.argv[1], "-q", "-o", model] + SHAPE + args, check=True)
        meta, w = read_gguf(model)
        rows = [encode(meta, w, tessera_tokens(model, p)) for p in PROMPTS]
        for pooling in poolings:
            ours = tessera_embed(model, pooling, PROMPTS)
            for i, r in enumerate(rows):
                c = cosine(ours[i], l2(pool(r, pooling)))
                ok = c >= 0.99999
                failed += not ok
                print("%s %s %s prompt %d: cosine %.8f with the reference" % ("ok  " if ok else "FAIL", name,
                                                                               pooling, i, c))
    model = os.path.join(tmp, "rerank.gguf")
    subprocess.run([sys.argv[1], "-q", "-o", model, "--arch", "bert", "--reranker", "--seed", "9"] + SHAPE,
                   check=True)
    meta, w = read_gguf(model)
    pairs = [("what is the capital of france", d) for d in ("paris is the capital of france", "the cat sat")]
    ours = tessera_embed(model, "rank", ["%s\t%s" % p for p in pairs])
    for i, (q, d) in enumerate(pairs):
        qt, dt = tessera_tokens(model, q), tessera_tokens(model, d)
        toks = qt + dt[1:]  # [CLS] q [SEP] d [SEP], llama.cpp's layout for WordPiece
        cls = encode(meta, w, toks)[0]
        h = [math.tanh(a) for a in linear(w["cls.weight"], w["cls.bias"], cls)]
        score = linear(w["cls.output.weight"], w["cls.output.bias"], h)[0]
        diff = abs(ours[i][0] - score)
        failed += not diff <= 1e-3
        print("%s rerank pair %d: score %.6f, reference %.6f, difference %.1e" % ("ok  " if diff <= 1e-3 else "FAIL",
                                                                                 i, ours[i][0], score, diff))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
