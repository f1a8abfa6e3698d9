"""tessera-synth: writes models of every supported architecture, of a
requested shape and type, that load and run, with the keys and tensors of
that architecture; the same seed gives the same bytes; an F32 and a Q8_0
file from one seed hold the same weights up to quantization, so their greedy
texts start alike; --set/--unset edit keys; bad requests are clear errors."""
import os
import struct
import subprocess
import tempfile

from synth_env import BIN, SYNTH, VOCAB, WRAP, check, finish


def synth(out, *args):
    p = subprocess.run(WRAP + [SYNTH, "-q", "-o", out, "--vocab-from", VOCAB] + list(args),
                       capture_output=True, text=True, timeout=120)
    return p.returncode, p.stderr


def run(*args):
    p = subprocess.run([BIN] + list(args), capture_output=True, timeout=120)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def read_header(path):
    """(name -> (ggml type, shape), key -> value) from a GGUF v3 header."""
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

    fixed = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q",
             12: "<d"}

    def val(t):
        nonlocal o
        if t == 8:
            return s()
        if t == 9:
            et, n = struct.unpack_from("<IQ", b, o)
            o += 12
            return [val(et) for _ in range(n)]
        (v,) = struct.unpack_from(fixed[t], b, o)
        o += struct.calcsize(fixed[t])
        return v

    kvs = {}
    for _ in range(n_kv):
        k = s()
        (t,) = struct.unpack_from("<I", b, o)
        o += 4
        kvs[k] = val(t)
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
    return out, kvs


def tensor_types(path):
    return read_header(path)[0]


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

# The other architectures: their own keys and tensors, and they run.
# (arch, extra args, tensors that must be there, tensors that must not, keys)
small = ["--dim", "128", "--layers", "4", "--heads", "4", "--kv-heads", "2", "--ffn", "192", "--vocab", "600"]
archs = [
    ("qwen3", ["--head-dim", "48"], {"blk.0.attn_q_norm.weight": [48], "blk.0.attn_q.weight": [128, 192],
                                     "blk.0.attn_output.weight": [192, 128]},
     ["blk.0.attn_q.bias"], {"qwen3.attention.key_length": 48}),
    ("gemma3", ["--tied"], {"blk.3.post_attention_norm.weight": [128], "blk.3.post_ffw_norm.weight": [128],
                            "blk.3.attn_k_norm.weight": [32]},
     ["output.weight"], {"gemma3.attention.sliding_window": 512, "gemma3.attention.key_length": 32}),
    ("phi3", ["--rope-dims", "24"], {"blk.0.attn_qkv.weight": [128, 256], "blk.0.ffn_up.weight": [128, 384]},
     ["blk.0.attn_q.weight", "blk.0.ffn_gate.weight"], {"phi3.rope.dimension_count": 24}),
    ("smollm3", [], {"blk.3.attn_q.weight": [128, 128], "blk.3.ffn_gate.weight": [128, 192]}, [],
     {"smollm3.block_count": 4}),
    ("granite", [], {"blk.0.attn_v.weight": [128, 64]}, [],
     {"granite.embedding_scale": 12.0, "granite.logit_scale": 8.0, "granite.attention.scale": 1 / 32}),
    ("mistral3", ["--head-dim", "48", "--ctx", "256"], {"blk.0.attn_q.weight": [128, 192]}, [],
     {"mistral3.rope.scaling.type": "yarn", "mistral3.rope.scaling.factor": 16.0,
      "mistral3.rope.scaling.original_context_length": 16, "mistral3.rope.scaling.yarn_log_multiplier": 1.0,
      "mistral3.attention.temperature_scale": 0.1, "mistral3.attention.key_length": 48}),
]
for arch, extra, have, lack, keys in archs:
    path = os.path.join(tmp, arch + ".gguf")
    rc, err = synth(path, *small, "--arch", arch, "--type", "Q8_0", *extra)
    if not check(rc == 0, f"synth {arch}: {err}"):
        continue
    tt, kv = read_header(path)
    check(kv.get("general.architecture") == arch, f"{arch}: general.architecture {kv.get('general.architecture')}")
    for name, want in have.items():
        check(name in tt and tt[name][1] == want, f"{arch}: {name} {tt.get(name)}, want shape {want}")
    for name in lack:
        check(name not in tt, f"{arch}: {name} should not be written")
    check(all(t == 0 for n, (t, ne) in tt.items() if len(ne) == 1), f"{arch}: 1-D tensors stay F32")
    check(tt["blk.0.ffn_down.weight"][0] == 8, f"{arch}: 2-D tensors in Q8_0")
    for k, v in keys.items():
        got = kv.get(k)
        ok = abs(got - v) < 1e-6 if isinstance(v, float) and isinstance(got, float) else got == v
        check(ok, f"{arch}: {k} = {got!r}, want {v!r}")
    rc, out, err = run("run", "-m", path, "-p", "Once upon a time", "-n", "8", "--temp", "0")
    check(rc == 0 and "tokens/s" in err, f"run {arch}: {rc} {err[-300:]}")

# Mixture of experts: the router (kept F32), the experts stacked in 3-D, the
# family's keys; each runs.
moe = [
    ("qwen3moe", ["--head-dim", "48", "--expert-ffn", "64", "--experts", "4", "--experts-used", "2"],
     {"blk.0.ffn_gate_inp.weight": (0, [128, 4]), "blk.1.ffn_gate_exps.weight": (8, [128, 64, 4]),
      "blk.1.ffn_down_exps.weight": (8, [64, 128, 4]), "blk.0.attn_q_norm.weight": (0, [48])},
     {"qwen3moe.expert_count": 4, "qwen3moe.expert_used_count": 2, "qwen3moe.expert_feed_forward_length": 64}),
    ("olmoe", ["--kv-heads", "4"],
     {"blk.0.ffn_up_exps.weight": (8, [128, 192, 8]), "blk.0.attn_k_norm.weight": (0, [128])},
     {"olmoe.expert_count": 8, "olmoe.expert_used_count": 2}),
    ("granitemoe", ["--shared-ffn", "96"],
     {"blk.3.ffn_gate_shexp.weight": (8, [128, 96]), "blk.3.ffn_down_shexp.weight": (8, [96, 128]),
      "blk.3.ffn_down_exps.weight": (8, [192, 128, 8])},
     {"granitemoe.expert_shared_feed_forward_length": 96, "granitemoe.embedding_scale": 12.0}),
    ("llama", ["--experts", "4", "--experts-used", "1"], {"blk.0.ffn_gate_exps.weight": (8, [128, 192, 4])},
     {"llama.expert_count": 4, "llama.expert_used_count": 1}),
    # gate and up as one tensor, gate rows then up rows (any MoE family reads it)
    ("qwen3moe", ["--expert-ffn", "64", "--experts", "4", "--gate-up-exps"],
     {"blk.1.ffn_gate_up_exps.weight": (8, [128, 128, 4]), "blk.1.ffn_down_exps.weight": (8, [64, 128, 4])},
     {"qwen3moe.expert_feed_forward_length": 64}),
]
for arch, extra, have, keys in moe:
    path = os.path.join(tmp, arch + "-moe.gguf")
    rc, err = synth(path, *small, "--arch", arch, "--type", "Q8_0", *extra)
    if not check(rc == 0, f"synth {arch}: {err}"):
        continue
    tt, kv = read_header(path)
    for name, want in have.items():
        check(tt.get(name) == want, f"{arch}: {name} {tt.get(name)}, want (type, shape) {want}")
    check("blk.0.ffn_gate.weight" not in tt, f"{arch}: a dense FFN beside the experts")
    if "--gate-up-exps" in extra:
        check("blk.1.ffn_gate_exps.weight" not in tt and "blk.1.ffn_up_exps.weight" not in tt,
              f"{arch}: separate gate/up experts beside ffn_gate_up_exps")
    for k, v in keys.items():
        check(kv.get(k) == v, f"{arch}: {k} = {kv.get(k)!r}, want {v!r}")
    rc, out, err = run("run", "-m", path, "-p", "Once upon a time", "-n", "8", "--temp", "0")
    check(rc == 0 and "tokens/s" in err, f"run {arch}: {rc} {err[-300:]}")

# --set and --unset.
ed = os.path.join(tmp, "edited.gguf")
rc, err = synth(ed, *shape, "--set", "llama.rope.freq_base=500.0", "--set", "llama.context_length=77",
                "--set", "general.name=edited", "--set", "x.flag=true", "--set", "x.neg=-3",
                "--unset", "llama.attention.head_count_kv")
tt, kv = read_header(ed)
check(rc == 0 and kv.get("llama.rope.freq_base") == 500.0 and kv.get("llama.context_length") == 77 and
      kv.get("general.name") == "edited" and kv.get("x.flag") is True and kv.get("x.neg") == -3 and
      "llama.attention.head_count_kv" not in kv, f"--set/--unset: {rc} {err} {kv}")

# Bad requests.
bad = os.path.join(tmp, "bad.gguf")
for args, word in [(["--dim", "100", "--heads", "8"], "--heads"),
                   (["--type", "Q4_K", "--dim", "128", "--heads", "4"], "Q4_K"),
                   (["--type", "IQ2_XXS"], "IQ2_XXS"),
                   (["--arch", "gpt2"], "gpt2"),
                   (["--head-dim", "33"], "head size 33"),
                   (["--rope-dims", "80"], "--rope-dims"),
                   (["--set", "novalue"], "KEY=VALUE"),
                   (["--unset", "llama.no_such_key"], "llama.no_such_key"),
                   (["--layers", "zero"], "--layers"),
                   (["--arch", "qwen2", "--experts", "4"], "qwen2 has no experts"),
                   (["--experts-used", "2"], "need --experts"),
                   (["--arch", "olmoe", "--experts", "2", "--experts-used", "3"], "--experts-used 3"),
                   (["--arch", "olmoe", "--expert-ffn", "64"], "--expert-ffn"),
                   (["--arch", "olmoe", "--kv-heads", "2"], "--kv-heads must equal"),
                   (["--arch", "qwen3moe", "--shared-ffn", "64"], "no shared expert"),
                   (["--gate-up-exps"], "needs --experts"),
                   (["--arch", "qwen2", "--gate-up-exps"], "qwen2 has no experts"),
                   (["--arch", "gpt-oss", "--gate-up-exps"], "gpt-oss")]:
    rc, err = synth(bad, *args)
    check(rc != 0 and word in err and not os.path.exists(bad), f"{args}: rc {rc}, {err!r}")
    check(not os.path.exists(bad + ".tmp"), f"{args}: temp file left behind")

finish()
