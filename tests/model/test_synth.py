"""tessera-synth: writes llama and qwen2 models of a requested shape and
type that load and run; the same seed gives the same bytes; an F32 and a
Q8_0 file from one seed hold the same weights up to quantization, so their
greedy texts start alike; bad shapes are clear errors."""
import os
import struct
import subprocess
import sys
import tempfile

SHARED = os.environ.get("TESSERA_SHARED", "")
BIN = os.environ.get("TESSERA_BIN", "")
SYNTH = sys.argv[1] if len(sys.argv) > 1 else ""
# cross builds: run the target's tessera-synth through the emulator
WRAP = os.environ.get("TESSERA_EXE_WRAPPER", "").split()
VOCAB = os.path.join(SHARED, "models", "stories260K.gguf")
for p in (BIN, SYNTH, VOCAB):
    if not p or not os.path.exists(p):
        print(f"skip: {p!r} is missing")
        sys.exit(77)

failures = 0


def check(cond, msg):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", msg)
    return cond


def synth(out, *args):
    p = subprocess.run(WRAP + [SYNTH, "-q", "-o", out, "--vocab-from", VOCAB] + list(args),
                       capture_output=True, text=True, timeout=120)
    return p.returncode, p.stderr


def run(*args):
    p = subprocess.run([BIN] + list(args), capture_output=True, timeout=120)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def tensor_types(path):
    """name -> (ggml type, shape) from a GGUF v3 header."""
    with open(path, "rb") as f:
        b = f.read(1 << 20)
    o = 8
    n_t, n_kv = struct.unpack_from("<QQ", b, o)
    o += 16

    def s():
        nonlocal o
        (n,) = struct.unpack_from("<Q", b, o)
        o += 8 + n
        return b[o - n:o].decode()

    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def val(t):
        nonlocal o
        if t == 8:
            s()
        elif t == 9:
            et, n = struct.unpack_from("<IQ", b, o)
            o += 12
            for _ in range(n):
                val(et)
        else:
            o += sizes[t]

    for _ in range(n_kv):
        s()
        (t,) = struct.unpack_from("<I", b, o)
        o += 4
        val(t)
    out = {}
    for _ in range(n_t):
        name = s()
        (nd,) = struct.unpack_from("<I", b, o)
        o += 4
        ne = struct.unpack_from("<" + "Q" * nd, b, o)
        o += 8 * nd
        t, _off = struct.unpack_from("<IQ", b, o)
        o += 12
        out[name] = (t, list(ne))
    return out


tmp = tempfile.mkdtemp(prefix="tessera-synth-")
shape = ["--dim", "256", "--layers", "2", "--heads", "8", "--kv-heads", "2", "--ffn", "512", "--vocab", "600"]
f32 = os.path.join(tmp, "f32.gguf")
q8 = os.path.join(tmp, "q8.gguf")
rc, err = synth(f32, *shape, "--seed", "5")
check(rc == 0, f"synth F32: {err}")
rc, err = synth(q8, *shape, "--seed", "5", "--type", "Q8_0")
check(rc == 0, f"synth Q8_0: {err}")
again = os.path.join(tmp, "again.gguf")
synth(again, *shape, "--seed", "5")
check(open(f32, "rb").read() == open(again, "rb").read(), "same seed gave different files")

tt = tensor_types(q8)
check(tt["token_embd.weight"] == (8, [256, 600]), f"token_embd {tt.get('token_embd.weight')}")
check(tt["blk.1.attn_k.weight"] == (8, [256, 64]), f"attn_k {tt.get('blk.1.attn_k.weight')}")
check(tt["blk.0.ffn_norm.weight"][0] == 0, "norms stay F32")
check("output.weight" in tt, "untied output present")

outs = []
for path in (f32, q8):
    rc, out, err = run("run", "-m", path, "-p", "Once upon a time", "-n", "12", "--temp", "0", "--no-echo")
    check(rc == 0 and "tokens/s" in err, f"run {path}: {rc} {err[-300:]}")
    outs.append(out)
print(f"F32: {outs[0]!r}\nQ8_0: {outs[1]!r}")
check(outs[0][:4] == outs[1][:4], "F32 and Q8_0 of one seed diverge at once")

# qwen2 (biases, NeoX rope), tied output, K-quant mixture.
qw = os.path.join(tmp, "qwen2.gguf")
rc, err = synth(qw, *shape, "--arch", "qwen2", "--tied", "--type", "Q4_K_M")
check(rc == 0, f"synth qwen2: {err}")
tt = tensor_types(qw)
check("blk.0.attn_q.bias" in tt and "output.weight" not in tt, "qwen2 biases / tied output")
check(tt["blk.1.attn_v.weight"][0] == 14 and tt["blk.0.attn_q.weight"][0] == 12, "Q4_K_M mixture types")
rc, out, err = run("run", "-m", qw, "-p", "Once upon a time", "-n", "8", "--temp", "0")
check(rc == 0, f"run qwen2: {rc} {err[-300:]}")

# Bad requests.
bad = os.path.join(tmp, "bad.gguf")
for args, word in [(["--dim", "100", "--heads", "8"], "--heads"),
                   (["--type", "Q4_K", "--dim", "128", "--heads", "4"], "Q4_K"),
                   (["--type", "IQ2_XXS"], "IQ2_XXS"),
                   (["--arch", "gpt2"], "gpt2"),
                   (["--layers", "zero"], "--layers")]:
    rc, err = synth(bad, *args)
    check(rc != 0 and word in err and not os.path.exists(bad), f"{args}: rc {rc}, {err!r}")
    check(not os.path.exists(bad + ".tmp"), f"{args}: temp file left behind")

if failures:
    print(f"{failures} failure(s)")
    sys.exit(1)
print("all checks passed")
