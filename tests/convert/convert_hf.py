"""tessera convert against llama.cpp's convert_hf_to_gguf.py and the
Hugging Face model, on tiny random models made here: llama (untied, one
file), qwen2 (tied embeddings, q/k/v biases, one file), qwen3 (q/k norms,
head size 24, BF16 weights in 3 shards with an index), each with a
SentencePiece tokenizer trained here on docs/*.md.

- Every --outtype (f32, f16, bf16, q8_0) converts, and the file runs.
- With transformers and torch (and the peer llama.cpp source tree for its
  converter, $TESSERA_PEER_LLAMA_CPP or ../shared/peer's cache): the same
  keys with the same values (general.size_label aside) and the same tensors
  byte for byte, in the same order, as convert_hf_to_gguf.py; the prompt's
  tokens and the top-8 logits at every position within 3e-3 of the Hugging
  Face model's (test_golden on a golden made from them; 1.3e-3 measured:
  torch's f32 sums and ours differ in order; qwen2 1e-2, 6.5e-3 measured:
  its tied embedding makes logits ~10x larger), greedy the same.
- Bad input is one line and exit 1: a missing shard, a tensor whose bytes
  do not fit its dtype, an unknown architecture, no config.json.

Needs numpy, gguf and sentencepiece in the Python that runs it:
$TESSERA_CONVERT_PYTHON, else this one, else (when this one lacks them, as
CI's does) a venv under the build directory that pip fills once
(convert-venv: numpy, gguf, sentencepiece, safetensors); skips (77) when
PyPI cannot be reached for it.
usage: convert_hf.py TEST_GOLDEN"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import convert_env as env
from convert_env import ROOT, PY, check

env.reexec(env.CONVERTER_MODULES)
try:
    import numpy as np
    import gguf  # noqa: F401
    import sentencepiece as spm
except ImportError as e:
    env.skip(f"{e} (set TESSERA_CONVERT_PYTHON to a Python with numpy, gguf and sentencepiece)")
try:
    import torch
    import transformers
except ImportError:
    torch = transformers = None

BIN = os.environ["TESSERA_BIN"]
TEST_GOLDEN = sys.argv[1]


def bf16(x):
    u = np.asarray(x, np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def write_safetensors(path, tensors, dtype):
    header, blobs, off = {}, [], 0
    for name, arr in tensors.items():
        data = bf16(arr).tobytes() if dtype == "BF16" else np.asarray(arr, np.float32).tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def make_model(d, arch, tok_dir, seed):
    rng = np.random.default_rng(seed)
    E, F, L, H, KV, V = 64, 128, 2, 4, 2, 512
    D = 24 if arch == "qwen3" else E // H
    cfg = {"architectures": [{"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                              "qwen3": "Qwen3ForCausalLM"}[arch]],
           "model_type": arch, "vocab_size": V, "hidden_size": E, "intermediate_size": F,
           "num_hidden_layers": L, "num_attention_heads": H, "num_key_value_heads": KV,
           "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "rope_theta": 10000.0 if arch != "qwen2" else 1e6,
           "tie_word_embeddings": arch == "qwen2", "hidden_act": "silu", "bos_token_id": 1, "eos_token_id": 2,
           "torch_dtype": "bfloat16" if arch == "qwen3" else "float32"}
    if arch == "qwen3":
        cfg["head_dim"] = D
    t = {"model.embed_tokens.weight": rng.normal(0, 0.5, (V, E)), "model.norm.weight": 1 + rng.normal(0, 0.1, E)}
    if arch != "qwen2":
        t["lm_head.weight"] = rng.normal(0, 0.1, (V, E))
    for i in range(L):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = 1 + rng.normal(0, 0.1, E)
        t[p + "post_attention_layernorm.weight"] = 1 + rng.normal(0, 0.1, E)
        for n, rows in (("q", H * D), ("k", KV * D), ("v", KV * D)):
            t[p + f"self_attn.{n}_proj.weight"] = rng.normal(0, E ** -0.5, (rows, E))
            if arch == "qwen2":
                t[p + f"self_attn.{n}_proj.bias"] = rng.normal(0, 0.1, rows)
        t[p + "self_attn.o_proj.weight"] = rng.normal(0, (H * D) ** -0.5, (E, H * D))
        if arch == "qwen3":
            t[p + "self_attn.q_norm.weight"] = 1 + rng.normal(0, 0.1, D)
            t[p + "self_attn.k_norm.weight"] = 1 + rng.normal(0, 0.1, D)
        t[p + "mlp.gate_proj.weight"] = rng.normal(0, E ** -0.5, (F, E))
        t[p + "mlp.up_proj.weight"] = rng.normal(0, E ** -0.5, (F, E))
        t[p + "mlp.down_proj.weight"] = rng.normal(0, F ** -0.5, (E, F))
    t = {k: np.asarray(v, np.float32) for k, v in t.items()}
    os.makedirs(d)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    dtype = "BF16" if arch == "qwen3" else "F32"
    if arch == "qwen3":  # three shards and their index
        names = list(t)
        parts = [names[0::3], names[1::3], names[2::3]]
        wm = {}
        for k, part in enumerate(parts):
            fn = f"model-{k + 1:05d}-of-00003.safetensors"
            write_safetensors(os.path.join(d, fn), {n: t[n] for n in part}, dtype)
            wm.update({n: fn for n in part})
        with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": wm}, f)
    else:
        write_safetensors(os.path.join(d, "model.safetensors"), t, dtype)
    for fn in ("tokenizer.model", "tokenizer_config.json"):
        shutil.copy(os.path.join(tok_dir, fn), d)


def make_tokenizer(d):
    corpus = os.path.join(d, "corpus.txt")
    with open(corpus, "w") as out:
        for fn in sorted(os.listdir(os.path.join(ROOT, "docs"))):
            if fn.endswith(".md"):
                out.write(open(os.path.join(ROOT, "docs", fn), encoding="utf-8").read())
    spm.SentencePieceTrainer.train(input=corpus, model_prefix=os.path.join(d, "tokenizer"), vocab_size=512,
                                   model_type="bpe", byte_fallback=True, character_coverage=0.995,
                                   num_threads=1, minloglevel=2)
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "LlamaTokenizer", "bos_token": "<s>", "eos_token": "</s>",
                   "unk_token": "<unk>", "add_bos_token": True, "add_eos_token": False,
                   "chat_template": "{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"}, f)


def convert(d, out, outtype, *extra):
    return env.tessera_convert(d, out, outtype, *extra)


def hf_golden(d, path, prompts):
    """A golden file (tests/model/golden.h) from the Hugging Face model."""
    # the SentencePiece tokenizer of all three (AutoTokenizer would take
    # Qwen2's class for a qwen2 directory, whatever tokenizer_config says)
    tok = transformers.LlamaTokenizer.from_pretrained(d)
    m = transformers.AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32)
    with open(path, "w") as f:
        for p in prompts:
            ids = tok(p)["input_ids"]
            with torch.no_grad():
                lg = m(torch.tensor([ids])).logits[0].numpy()
                greedy = m.generate(torch.tensor([ids]), max_new_tokens=8, do_sample=False,
                                    attention_mask=torch.ones(1, len(ids), dtype=torch.long))[0][len(ids):].tolist()
            top = [[[int(j), float(row[j])] for j in np.argsort(-row, kind="stable")[:8]] for row in lg]
            f.write(json.dumps({"prompt": p, "tokens": ids, "top_logits": top, "all_logits": None,
                                "greedy": greedy, "greedy_margin": [], "greedy_pieces": [], "greedy_text": ""}) + "\n")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        tokd = os.path.join(tmp, "tok")
        os.makedirs(tokd)
        make_tokenizer(tokd)
        for k, arch in enumerate(["llama", "qwen2", "qwen3"]):
            d = os.path.join(tmp, arch)
            make_model(d, arch, tokd, 50 + k)
            for outtype in ("f32", "f16", "bf16", "q8_0"):
                out = os.path.join(tmp, f"{arch}-{outtype}.gguf")
                r = convert(d, out, outtype)
                if not check(r.returncode == 0, f"{arch} {outtype}: {r.stderr.strip()}"):
                    continue
                run = subprocess.run([BIN, "run", "-m", out, "-p", "The model", "-n", "4", "--temp", "0", "-dev",
                                      "ref"], capture_output=True, text=True, errors="replace")
                check(run.returncode == 0, f"{arch} {outtype}: tessera run: {run.stderr.strip()[-300:]}")
                ref = os.path.join(tmp, f"ref-{arch}-{outtype}.gguf")
                if transformers is not None and os.path.exists(env.PEER_SCRIPT):
                    rr = subprocess.run([PY, env.PEER_SCRIPT, d, "--outtype", outtype, "--outfile", ref],
                                        capture_output=True, text=True,
                                        env=dict(os.environ, PYTHONPATH=os.path.join(env.PEER, "gguf-py")))
                    if check(rr.returncode == 0, f"{arch} {outtype}: convert_hf_to_gguf.py: {rr.stderr[-300:]}"):
                        cmp = env.compare_gguf(out, ref)
                        check(cmp.returncode == 0, f"{arch} {outtype} against llama.cpp's:\n{cmp.stdout}")
                        print(f"{arch} {outtype}: {cmp.stdout.strip()}")
            if transformers is not None:
                g = os.path.join(tmp, f"{arch}.jsonl")
                hf_golden(d, g, ["The model runs on every device", "Tessera reads GGUF files"])
                tol = "1e-2" if arch == "qwen2" else "3e-3"  # qwen2's tied std-0.5 embedding: logits ~10x larger
                r = subprocess.run([TEST_GOLDEN, arch, "strict", tol, "--model", os.path.join(tmp, f"{arch}-f32.gguf"),
                                    "--golden", g, "--device", "ref"], capture_output=True, text=True)
                lines = [x for x in r.stdout.splitlines() if x.startswith(("ok", "FAIL"))]
                print("\n".join(lines))
                check(r.returncode == 0, f"{arch}: logits against the Hugging Face model:\n{r.stdout[-1500:]}")
            else:
                print("note: transformers/torch absent: no comparison with llama.cpp's converter or Hugging Face")

        # bad input: one line, exit 1, naming what is wrong
        def bad(d, needle, what, *extra):
            r = convert(d, os.path.join(tmp, "bad.gguf"), "f16", *extra)
            check(r.returncode == 1 and needle in r.stderr and r.stderr.count("\n") == 1
                  and not os.path.exists(os.path.join(tmp, "bad.gguf")), f"{what}: rc {r.returncode}: {r.stderr!r}")
        q = os.path.join(tmp, "qwen3")
        os.rename(os.path.join(q, "model-00002-of-00003.safetensors"), os.path.join(tmp, "moved"))
        bad(q, "shard 'model-00002-of-00003.safetensors' is missing", "missing shard")
        lm = os.path.join(tmp, "llama", "model.safetensors")
        with open(lm, "r+b") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            h = f.read(n)
            f.seek(8)
            f.write(h.replace(b'"F32"', b'"F16"', 1))
        bad(os.path.join(tmp, "llama"), "do not fit its size", "dtype mismatch")
        # a U8 tensor outside gpt-oss's MXFP4 experts (a quantized checkpoint)
        with open(lm, "r+b") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            h = json.loads(f.read(n))
        emb = h["model.embed_tokens.weight"]
        u8 = {"model.embed_tokens.weight": {"dtype": "U8", "shape": emb["shape"][:1] + [emb["shape"][1] * 4],
                                            "data_offsets": emb["data_offsets"]}}
        hb = json.dumps(u8).encode()
        with open(lm, "rb") as f:
            f.seek(8 + n)
            body = f.read()
        with open(lm, "wb") as f:
            f.write(struct.pack("<Q", len(hb)) + hb + body)
        bad(os.path.join(tmp, "llama"), "'model.embed_tokens.weight' has dtype U8", "a U8 tensor")
        cfgp = os.path.join(tmp, "qwen2", "config.json")
        cfg = json.load(open(cfgp))
        cfg["architectures"] = ["FooForCausalLM"]
        json.dump(cfg, open(cfgp, "w"))
        bad(os.path.join(tmp, "qwen2"), "FooForCausalLM", "unknown architecture")
        bad(tmp, "no config.json", "not a model directory")
        # --mmproj of a model without a vision tower tessera convert knows
        bad(os.path.join(tmp, "qwen3"), "Qwen3ForCausalLM has no vision tower", "--mmproj of a text model", "--mmproj")
    env.finish()


main()
