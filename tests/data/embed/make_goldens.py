#!/usr/bin/env python3
"""Makes the embedding goldens of this folder with llama.cpp's
llama-embedding (../shared/peer/build-more.sh llama-embedding builds it).

    tests/data/embed/make_goldens.py BUILD_DIR LLAMA_EMBEDDING

run from the repository root. Each golden records the model (a file of
scripts/fetch-models.sh's cache, or the tessera-synth arguments that
regenerate a synthetic one, seeded), its sha256, the prompts, the exact
llama-embedding command and its vectors as little-endian f16 in base64
(a few KB; f16 rounding moves a cosine by ~1e-7, far below the test's 1e-4),
or its rerank scores as numbers. Flash attention off (-fa off): llama.cpp's
plain path, as ../shared/peer/golden_gen and tessera's default; its own -fa
on and off differ by cosine 0.99905 on SmolLM2 (measured). tests/model/embed_golden.py compares
tessera's vectors with them."""
import base64
import hashlib
import json
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.environ.get("TESSERA_MODEL_CACHE") or os.path.expanduser("~/.cache/tessera/models")
PROMPTS = ["The cat sat on the mat.", "What is the capital of France? Paris is."]
RERANK = ["what is the capital of france\tparis is the capital of france",
          "what is the capital of france\tthe cat sat on the mat",
          "what is the capital of france\thello world"]
SHAPE = ["--dim", "64", "--layers", "2", "--heads", "4", "--ffn", "128", "--ctx", "128"]

# name: (model file or None, tessera-synth args or None, pooling, prompts);
# names ending -f32: the model dequantized (llama-quantize --allow-requantize
# MODEL OUT F32), which takes llama.cpp's 8-bit rounding of activations out
CASES = {
    "smollm2-f32-mean": ("SmolLM2-135M-Instruct.Q4_1.gguf", None, "mean", PROMPTS),
    "smollm2-f32-last": ("SmolLM2-135M-Instruct.Q4_1.gguf", None, "last", PROMPTS),
    "gemma3-f32-mean": ("gemma-3-270m-q4_k_m.gguf", None, "mean", PROMPTS),
    "gemma3-f32-last": ("gemma-3-270m-q4_k_m.gguf", None, "last", PROMPTS),
    "smollm2-mean": ("SmolLM2-135M-Instruct.Q4_1.gguf", None, "mean", PROMPTS),
    "smollm2-last": ("SmolLM2-135M-Instruct.Q4_1.gguf", None, "last", PROMPTS),
    "gemma3-mean": ("gemma-3-270m-q4_k_m.gguf", None, "mean", PROMPTS),
    "gemma3-last": ("gemma-3-270m-q4_k_m.gguf", None, "last", PROMPTS),
    "synth-bert-cls": (None, ["--arch", "bert", "--seed", "7"] + SHAPE, "cls", PROMPTS),
    "synth-bert-mean": (None, ["--arch", "bert", "--seed", "7"] + SHAPE, "mean", PROMPTS),
    "synth-nomic-bert-mean": (None, ["--arch", "nomic-bert", "--seed", "8"] + SHAPE, "mean", PROMPTS),
    "synth-bert-rerank": (None, ["--arch", "bert", "--reranker", "--seed", "9"] + SHAPE, "rank", RERANK),
}


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def f16_base64(v):
    return base64.b64encode(struct.pack("<%de" % len(v), *v)).decode()


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    build, llama = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix="embed-goldens-")
    only = os.environ.get("ONLY", "")
    for name, (file, synth, pooling, prompts) in CASES.items():
        if only and only not in name:
            continue
        if synth:
            model = os.path.join(tmp, name + ".gguf")
            subprocess.run([os.path.join(build, "tools", "tessera-synth"), "-q", "-o", model] + synth, check=True)
        else:
            model = os.path.join(CACHE, file)
        dequantize = "F32" if "-f32-" in name else None
        if dequantize:
            f32 = os.path.join(tmp, name + ".gguf")
            subprocess.run([os.path.join(os.path.dirname(llama), "llama-quantize"), "--allow-requantize", model, f32,
                            dequantize], check=True, capture_output=True)
            model = f32
        n_ctx = 128 if synth else 512  # (the synthetic encoders learned 128 positions)
        cmd = ["llama-embedding", "-m", os.path.basename(model), "--pooling", pooling, "--embd-normalize",
               "-1" if pooling == "rank" else "2", "--embd-output-format", "json", "-t", "2", "-c", str(n_ctx), "-fa", "off",
               "-p", "\n".join(prompts)]
        # (stdbuf -o0, and up to 20 tries: this llama-embedding sometimes exits 0
        # without having written its output to a pipe)
        for attempt in range(20):
            out = subprocess.run(["stdbuf", "-o0", llama, "-m", model] + cmd[3:], capture_output=True, text=True)
            if out.returncode != 0:
                sys.exit("%s failed:\n%s" % (" ".join(cmd), out.stderr[-3000:]))
            try:  # anything before the JSON is log text
                data = json.JSONDecoder().raw_decode(out.stdout[out.stdout.index("{"):])[0]["data"]
                if len(data) == len(prompts):
                    break
            except ValueError:
                pass
        else:
            sys.exit("%s: no complete output in 20 tries" % " ".join(cmd))
        vectors = [d["embedding"] for d in sorted(data, key=lambda d: d["index"])]
        golden = {"model": file, "synth": synth, "dequantize": dequantize, "sha256": sha256(model),
                  "pooling": pooling, "n_ctx": n_ctx,
                  "embd_normalize": -1 if pooling == "rank" else 2, "prompts": prompts,
                  "command": " ".join(json.dumps(c) if (" " in c or "\n" in c) else c for c in cmd),
                  "llama.cpp": "llama-cpp-python 0.3.36's vendored llama.cpp (October 2026), CPU, 2 threads, flash attention off"}
        if dequantize:
            golden["dequantize_command"] = "llama-quantize --allow-requantize %s %s %s" % (
                file, os.path.basename(model), dequantize)
        if pooling == "rank":
            golden["scores"] = [v[0] for v in vectors]
        else:
            golden["f16_base64"] = [f16_base64(v) for v in vectors]
        with open(os.path.join(HERE, name + ".json"), "w") as f:
            json.dump(golden, f, indent=1)
            f.write("\n")
        print("wrote", name, len(vectors), "vectors of", len(vectors[0]))
        if dequantize:
            os.remove(model)  # a GB


if __name__ == "__main__":
    main()
