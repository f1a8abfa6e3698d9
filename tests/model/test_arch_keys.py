"""The keys of granite, mistral3, smollm3, the mixture-of-experts files
(qwen3moe, olmoe, granitemoe, llama with experts), qwen2vl's M-RoPE sections
and the recurrent hybrids (lfm2, mamba2, granitehybrid, qwen35, qwen35moe,
qwen3next):
each missing, malformed
or out-of-range key is one clear error naming the key (a non-zero exit, not
a crash), and the keys change the numbers they should (a model differs when
one of its multipliers, its temperature or its rope switch changes)."""
import os
import shutil
import subprocess
import tempfile

from synth_env import BIN, SYNTH, VOCAB, WRAP, check, finish

tmp = tempfile.mkdtemp(prefix="tessera-arch-keys-")
SHAPE = ["--dim", "64", "--layers", "4", "--heads", "4", "--kv-heads", "2", "--ffn", "128", "--ctx", "128"]


def synth(arch, *edits):
    path = os.path.join(tmp, f"{arch}-{abs(hash(edits))}.gguf")
    p = subprocess.run(WRAP + [SYNTH, "-q", "-o", path, "--vocab-from", VOCAB, "--arch", arch] + SHAPE +
                       list(edits), capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, f"synth {arch} {edits}: {p.stderr}")
    return path


def run(path, n=6):
    """Greedy text of a fixed long prompt (positions past the small original
    context of the mistral3 files, so the temperature matters)."""
    p = subprocess.run([BIN, "run", "-m", path, "-p", "Once upon a time there was a little girl named Lily who",
                        "-n", str(n), "--temp", "0", "--no-echo", "--device", "ref"],
                       capture_output=True, timeout=120)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


# (arch, edits, words the error must contain)
bad = [
    ("granite", ["--unset", "granite.logit_scale"], ["granite.logit_scale", "not found"]),
    ("granite", ["--unset", "granite.embedding_scale"], ["granite.embedding_scale", "not found"]),
    ("granite", ["--unset", "granite.residual_scale"], ["granite.residual_scale", "not found"]),
    ("granite", ["--unset", "granite.attention.scale"], ["granite.attention.scale", "not found"]),
    ("granite", ["--set", "granite.logit_scale=0.0"], ["granite.logit_scale", "positive"]),
    ("granite", ["--set", "granite.residual_scale=-0.5"], ["granite.residual_scale", "positive"]),
    ("granite", ["--set", "granite.attention.scale=nan"], ["granite.attention.scale", "finite"]),
    ("granite", ["--set", "granite.embedding_scale=12"], ["granite.embedding_scale"]),  # u32, not f32
    ("granite", ["--set", "granite.rope.scaling.finetuned=yes"], ["granite.rope.scaling.finetuned"]),
    ("mistral3", ["--set", "mistral3.attention.temperature_scale=-0.1"],
     ["mistral3.attention.temperature_scale", "negative"]),
    ("mistral3", ["--set", "mistral3.attention.temperature_scale=inf"],
     ["mistral3.attention.temperature_scale", "finite"]),
    ("mistral3", ["--set", "mistral3.rope.scaling.yarn_log_multiplier=-1.0"],
     ["mistral3.rope.scaling.yarn_log_multiplier", "negative"]),
    ("mistral3", ["--set", "mistral3.rope.scaling.original_context_length=0"],
     ["mistral3.rope.scaling.original_context_length"]),
    ("mistral3", ["--set", "mistral3.rope.scaling.type=ntk"], ["mistral3.rope.scaling.type", "ntk"]),
    ("mistral3", ["--set", "mistral3.rope.scaling.factor=-2.0"], ["factor", "negative"]),
    # mixture of experts: missing and contradicting keys, tensors that disagree with them
    ("qwen3moe", ["--unset", "qwen3moe.expert_count"], ["qwen3moe.expert_count", "not found"]),
    ("qwen3moe", ["--unset", "qwen3moe.expert_used_count"], ["qwen3moe.expert_used_count", "not found"]),
    ("qwen3moe", ["--set", "qwen3moe.expert_count=4"], ["blk.0.ffn_gate_inp.weight", "shape"]),
    ("qwen3moe", ["--set", "qwen3moe.expert_feed_forward_length=40"], ["blk.0.ffn_gate_exps.weight", "shape"]),
    ("olmoe", ["--kv-heads", "4", "--set", "olmoe.expert_used_count=0"], ["olmoe.expert_used_count"]),
    ("granitemoe", ["--set", "granitemoe.expert_used_count=9"], ["expert_used_count 9", "expert_count 8"]),
    ("granitemoe", ["--set", "granitemoe.expert_shared_feed_forward_length=32"],
     ["blk.0.ffn_gate_shexp.weight", "missing"]),
    ("qwen2moe", ["--unset", "qwen2moe.expert_shared_feed_forward_length"],
     ["qwen2moe.expert_shared_feed_forward_length", "not found"]),
    ("llama", ["--experts", "8", "--unset", "llama.expert_used_count"], ["llama.expert_used_count", "not found"]),
    ("llama", ["--set", "llama.expert_used_count=2"], ["expert_used_count", "without expert_count"]),
    # gpt-oss: its window is required; a sink per head
    ("gpt-oss", ["--unset", "gpt-oss.attention.sliding_window"], ["gpt-oss.attention.sliding_window", "not found"]),
    ("gpt-oss", ["--set", "gpt-oss.attention.head_count=2", "--set", "gpt-oss.attention.key_length=32",
                 "--set", "gpt-oss.attention.value_length=32"], ["blk.0.attn_sinks.weight", "shape"]),
    ("smollm3", ["--unset", "smollm3.block_count"], ["smollm3.block_count"]),
    ("smollm3", ["--set", "smollm3.attention.head_count=3"], ["head_count"]),
    # recurrent hybrids (issue 43)
    ("lfm2", ["--unset", "lfm2.shortconv.l_cache"], ["lfm2.shortconv.l_cache", "not found"]),
    ("lfm2", ["--set", "lfm2.shortconv.l_cache=1"], ["lfm2.shortconv.l_cache", "2..64"]),
    # a scalar head_count_kv: every block attends, so block 0's attention is missing
    ("lfm2", ["--set", "lfm2.attention.head_count_kv=2"], ["blk.0.attn_q.weight"]),
    ("lfm2", ["--set", "lfm2.attention.head_count_kv=abc"], ["lfm2.attention.head_count_kv"]),
    ("mamba2", ["--unset", "mamba2.ssm.state_size"], ["mamba2.ssm.state_size", "not found"]),
    ("mamba2", ["--set", "mamba2.ssm.group_count=3"], ["ssm.group_count", "whole heads"]),
    ("mamba2", ["--set", "mamba2.ssm.state_size=17"], ["blk.0.ssm_in.weight"]),
    ("granitehybrid", ["--set", "granitehybrid.logit_scale=0.0"], ["granitehybrid.logit_scale", "positive"]),
    ("granitehybrid", ["--unset", "granitehybrid.ssm.conv_kernel"], ["granitehybrid.ssm.conv_kernel", "not found"]),
    ("qwen35", ["--unset", "qwen35.full_attention_interval"], ["qwen35.full_attention_interval", "not found"]),
    ("qwen35", ["--set", "qwen35.full_attention_interval=0"], ["qwen35.full_attention_interval"]),
    ("qwen35", ["--set", "qwen35.ssm.group_count=3"], ["ssm.group_count", "multiple"]),
    ("qwen35", ["--set", "qwen35.ssm.state_size=17"], ["blk.0.attn_qkv.weight"]),
    ("qwen35moe", ["--unset", "qwen35moe.expert_shared_feed_forward_length"],
     ["qwen35moe.expert_shared_feed_forward_length", "not found"]),
    ("qwen35moe", ["--unset", "qwen35moe.expert_count"], ["qwen35moe.expert_count", "not found"]),
    ("qwen3next", ["--unset", "qwen3next.ssm.group_count"], ["qwen3next.ssm.group_count", "not found"]),
    ("qwen3next", ["--unset", "qwen3next.expert_shared_feed_forward_length"],
     ["qwen3next.expert_shared_feed_forward_length", "not found"]),
    # v heads as wide as q/k heads, as llama.cpp reads the file
    ("qwen3next", ["--set", "qwen3next.ssm.inner_size=64"], ["qwen3next.ssm.inner_size", "ssm.state_size"]),
    # 4 v heads of 32: the sizes agree, the fused projection does not
    ("qwen3next", ["--set", "qwen3next.ssm.time_step_rank=4", "--set", "qwen3next.ssm.state_size=32"],
     ["blk.0.ssm_in.weight"]),
    # interval 3 in the file, 4 without the key: block 2 attends, not a DeltaNet
    ("qwen3next", ["--unset", "qwen3next.full_attention_interval"], ["blk.2.ssm_in.weight"]),
]
for arch, edits, words in bad:
    rc, out, err = run(synth(arch, *edits))
    check(rc > 0 and all(w in err for w in words) and "Traceback" not in err and len(err.strip().splitlines()) <= 3,
          f"{arch} {edits}: rc {rc}, want an error naming {words}, got {err.strip()[-400:]!r}")

# A mistral3 file with per-matrix scales (FP8-style) is refused by name:
# "blk.0.attn_q.weight" renamed in place to "blk.10.attn_q.scale" (same
# length) in a 12-layer file.
path = os.path.join(tmp, "scales.gguf")
p = subprocess.run(WRAP + [SYNTH, "-q", "-o", path, "--vocab-from", VOCAB, "--arch", "mistral3", "--dim", "32",
                           "--layers", "12", "--heads", "2", "--ffn", "32"], capture_output=True, text=True, timeout=120)
check(p.returncode == 0, f"synth scales: {p.stderr}")
with open(path, "r+b") as f:
    b = f.read(1 << 20)
    at = b.find(b"blk.0.attn_q.weight")
    check(at > 0, "attn_q.weight not found in the header")
    f.seek(at)
    f.write(b"blk.10.attn_q.scale")
rc, out, err = run(path)
check(rc > 0 and "blk.10.attn_q.scale" in err and "not supported" in err, f"scales: rc {rc}, {err.strip()[-300:]!r}")

# The keys act: the same weights with one key changed give another text.
# (The logit scale cannot change a greedy text: the goldens check it.)
# Granite's muP attention scale 1/D makes attention nearly uniform on random
# weights, and its embedding multiplier 12 drowns the attention output, so
# the rope switch is tested with both at 1.
sharp = ["--set", "granite.attention.scale=1.0", "--set", "granite.embedding_scale=1.0"]
pairs = [
    ("granite", [], ["--set", "granite.residual_scale=0.5"]),
    ("granite", [], ["--set", "granite.embedding_scale=1.0"]),
    ("granite", [], ["--set", "granite.attention.scale=1.0"]),
    ("granite", sharp, sharp + ["--set", "granite.rope.scaling.finetuned=false"]),
    ("mistral3", ["--set", "mistral3.rope.scaling.original_context_length=4"],
     ["--set", "mistral3.rope.scaling.original_context_length=4", "--set", "mistral3.attention.temperature_scale=2.0"]),
    ("smollm3", [], ["--arch", "llama"]),  # llama ropes layer 3, smollm3 does not
]
for arch, a, b in pairs:
    if b[:2] == ["--arch", "llama"]:
        pb = synth("llama", *a)
    else:
        pb = synth(arch, *b)
    ra, ta, ea = run(synth(arch, *a), 12)
    rb, tb, eb = run(pb, 12)
    check(ra == 0 and rb == 0, f"{arch}: runs failed: {ea[-300:]} {eb[-300:]}")
    check(ta != tb, f"{arch}: {b} changed nothing ({ta!r})")

# qwen3next without full_attention_interval attends every 4th block, as
# llama.cpp reads such a file: the same text as the key at 4; the key at 2
# over the same tensors reads them as other blocks (block 1's attention
# missing), so the key is read when present.
four = ["--attn-every", "4"]
r4, t4, e4 = run(synth("qwen3next", *four), 12)
rn, tn, en = run(synth("qwen3next", *four, "--unset", "qwen3next.full_attention_interval"), 12)
r2, t2, e2 = run(synth("qwen3next", *four, "--set", "qwen3next.full_attention_interval=2"), 12)
check(r4 == 0 and rn == 0 and t4 == tn, f"qwen3next: no interval is not 4: {t4!r} vs {tn!r} {en[-300:]}")
check(r2 > 0 and "blk.1.attn_q.weight" in e2, f"qwen3next: interval 2 over interval-4 tensors: {e2[-300:]!r}")

shutil.rmtree(tmp, ignore_errors=True)
finish()
