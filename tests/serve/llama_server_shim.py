#!/usr/bin/env python3
"""Stands in for `llama-server` under llama.cpp's own server tests: it only
rewrites the command line and then becomes `tessera serve` (exec).

- llama-server flags become ours: the same spelling is passed on, a few are
  renamed, and the ones that select something Tessera always does (or has no
  notion of) are dropped; see FLAGS below.
- the test model ids (--hf-repo / --hf-file / --model-url) become local
  files: stories260K from ../shared/models, SmolLM2 and Gemma 3 from the
  model cache; the embedding and reranking models (bert-bge-small,
  jina-reranker) small synthetic bert files that tessera-synth writes into
  the build directory on first use, and stories260K-infill stories260K with
  three unused byte tokens renamed to FIM tokens (as serve_native.py's), and
  the split stories15M-q8_0-00001-of-00003 stories260K split into 3 files by
  `tessera gguf-split`.
  A model with no local stand-in ends the start with a message naming it
  (the test then fails as it would without the file).

Environment: TESSERA_BIN (the tessera binary), TESSERA_SHARED (../shared),
TESSERA_MODEL_CACHE (default ~/.cache/tessera/models), TESSERA_BUILD_ROOT
(where tools/tessera-synth is and the stand-ins go)."""
import os
import subprocess
import sys

SHARED = os.environ.get("TESSERA_SHARED", "")
CACHE = os.environ.get("TESSERA_MODEL_CACHE") or os.path.expanduser("~/.cache/tessera/models")

BUILD = os.environ.get("TESSERA_BUILD_ROOT", "")
STANDINS = os.path.join(BUILD, "compat-models")

# Synthetic stand-ins: tessera-synth arguments (seeded, so every start gets the
# same file). Small (dim 64, 2 layers) so that a test's hundreds of embeddings
# take milliseconds; 1024 learned positions for the suite's -c 1024 preset.
# The extra words give the WordPiece vocabulary the words of the suite's usage
# sentences, so that they count the tokens bge-small's vocabulary does
# ("i believe the meaning of life is": 7 words, "this is a test": 4).
SYNTH_SHAPE = ["--arch", "bert", "--dim", "64", "--layers", "2", "--heads", "4", "--ffn", "128", "--ctx", "1024"]
SYNTH = {
    "bert-bge-small.gguf": SYNTH_SHAPE + ["--seed", "11", "--wpm-words", "believe,meaning,life,this,test"],
    "jina-reranker.gguf": SYNTH_SHAPE + ["--seed", "12", "--reranker", "--wpm-words", "machine,learning"],
}


def synth_standin(name):
    """The stand-in file NAME, written by tessera-synth on first use."""
    path = os.path.join(STANDINS, name)
    if not os.path.exists(path):
        os.makedirs(STANDINS, exist_ok=True)
        exe = os.path.join(BUILD, "tools", "tessera-synth")
        # -o writes OUT.tmp and renames it: a concurrent start sees no half file
        r = subprocess.run([exe, "-q", "-o", path] + SYNTH[name], capture_output=True, text=True)
        if r.returncode != 0:
            sys.stderr.write("llama_server_shim: %s: %s\n" % (exe, r.stderr.strip()))
            sys.exit(1)
    return path


def fim_standin():
    """stories260K with <0x01>..<0x03> (ids 4..6, unused) renamed to
    <fim_prefix>, <fim_suffix>, <fim_middle> and made control tokens: what
    the suite's stories260K-infill is, a stories260K with FIM tokens."""
    path = os.path.join(STANDINS, "stories260K-infill.gguf")
    if not os.path.exists(path):
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
        from gguf_edit import write_fim_model
        os.makedirs(STANDINS, exist_ok=True)
        write_fim_model(os.path.join(SHARED, "models", "stories260K.gguf"), path)
    return path


def split_standin():
    """stories260K split into 3 files by `tessera gguf-split` (the suite's
    stories15M-q8_0-00001-of-00003 is a stories model split in 3): its first
    file. Written in a private directory and moved in last file first, so a
    concurrent start that sees the first file sees them all."""
    prefix = os.path.join(STANDINS, "stories15M-q8_0")
    first = prefix + "-00001-of-00003.gguf"
    if not os.path.exists(first):
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
        from gguf_edit import Gguf
        src = os.path.join(SHARED, "models", "stories260K.gguf")
        per = (len(Gguf(src).tensors) + 2) // 3
        tmp = os.path.join(STANDINS, "split.tmp-%d" % os.getpid())
        os.makedirs(tmp, exist_ok=True)
        r = subprocess.run([os.environ.get("TESSERA_BIN", "tessera"), "gguf-split", "--split-max-tensors",
                            str(per), src, os.path.join(tmp, "stories15M-q8_0")], capture_output=True, text=True)
        if r.returncode != 0:
            sys.stderr.write("llama_server_shim: tessera gguf-split: %s\n" % r.stderr.strip())
            sys.exit(1)
        for k in (3, 2, 1):
            name = "stories15M-q8_0-%05d-of-00003.gguf" % k
            os.replace(os.path.join(tmp, name), os.path.join(STANDINS, name))
        os.rmdir(tmp)
    return first


# Router mode (llama-server --models-dir/--models-preset/--models-max, or its
# router preset under test_router.py): the models its tests name, as
# ORG/REPO:QUANT, in a directory laid out as tessera serve --models-dir names
# them (ORG/REPO/QUANT.gguf), each a link to the stand-in of MODELS below.
ROUTER_MODELS = {
    "ggml-org/tinygemma3-GGUF/Q8_0.gguf": "tinygemma3",
    "ggml-org/test-model-stories260K/F32.gguf": "stories260K",
    "ggml-org/test-model-stories260K-infill/F32.gguf": "stories260K-infill",
}
ROUTER_FLAGS = ("--models-dir", "--models-preset", "--models-max", "--no-models-autoload")
# The preset repository test_router_remote_preset fetches (ggml-org/test-preset-ci): a
# local stand-in with its two model names, on the stand-ins above.
REMOTE_PRESET = ("[tinygemma3-preset]\nhf-repo = ggml-org/tinygemma3-GGUF\n\n"
                 "[stories260K-test]\nhf-repo = ggml-org/test-model-stories260K\n")


def router_dir():
    d = os.path.join(STANDINS, "router-models")
    for rel, key in ROUTER_MODELS.items():
        link = os.path.join(d, rel)
        if os.path.lexists(link):
            continue
        target = model_for([key])
        os.makedirs(os.path.dirname(link), exist_ok=True)
        tmp = "%s.tmp-%d" % (link, os.getpid())
        os.symlink(target, tmp)
        os.replace(tmp, link)  # a concurrent start sees the link or none
    return d


def remote_preset():
    path = os.path.join(STANDINS, "test-preset-ci.ini")
    if not os.path.exists(path):
        tmp = "%s.tmp-%d" % (path, os.getpid())
        with open(tmp, "w") as f:
            f.write(REMOTE_PRESET)
        os.replace(tmp, path)
    return path


def router_mode(argv, ids):
    if any(a in ROUTER_FLAGS for a in argv):
        return True
    if any(i and "test-preset-ci" in i for i in ids):
        return True
    return not ids and "test_router.py" in os.environ.get("PYTEST_CURRENT_TEST", "")


# (substring of "repo file", local file or a function making it): the first match wins.
MODELS = [
    ("stories15M-q8_0-00001-of-00003", split_standin),
    ("stories260K-infill", fim_standin),
    ("bert-bge-small", lambda: synth_standin("bert-bge-small.gguf")),
    ("jina-reranker", lambda: synth_standin("jina-reranker.gguf")),
    ("stories260K", os.path.join(SHARED, "models", "stories260K.gguf")),
    ("tinygemma3", os.path.join(CACHE, "gemma-3-270m-q4_k_m.gguf")),
    # chat models of the slow tool-call and template tests: the small
    # instruct model we have (answers differ, the API shapes do not)
    ("Instruct", os.path.join(CACHE, "SmolLM2-135M-Instruct.Q4_1.gguf")),
    ("SmolLM", os.path.join(CACHE, "SmolLM2-135M-Instruct.Q4_1.gguf")),
]

# llama-server flag -> (our flag or None to drop it, takes a value)
FLAGS = {
    "--port": ("--port", True), "--host": ("--host", True),
    "--temp": ("--temp", True), "--seed": ("--seed", True),
    "--model": ("-m", True), "-m": ("-m", True),
    "--alias": ("--alias", True),
    "--ctx-size": ("-c", True), "-c": ("-c", True),
    "--parallel": ("--parallel", True), "-np": ("--parallel", True),
    "--batch-size": ("-b", True), "-b": ("-b", True),
    "--threads": ("-t", True), "-t": ("-t", True),
    "--n-gpu-layers": ("-ngl", True), "-ngl": ("-ngl", True),
    "--n-predict": ("-n", True), "-n": ("-n", True),
    "--slot-save-path": ("--slot-save-path", True),
    "--api-key": ("--api-key", True),
    "--chat-template": ("--chat-template", True),
    "--chat-template-file": ("--chat-template-file", True),
    "--reasoning-format": ("--reasoning-format", True), "--reasoning": ("--reasoning", True),
    "--cors-origins": ("--cors-origin", True), "--cors-origin": ("--cors-origin", True),
    "-ctk": ("-ctk", True), "-ctv": ("-ctv", True), "-fa": ("-fa", True),
    "--context-shift": ("--context-shift", False),
    "--swa-full": ("--swa-full", False),
    "--metrics": ("--metrics", False),
    "--slots": ("--slots", False), "--no-slots": ("--no-slots", False),
    "--no-ui": ("--no-webui", False), "--no-webui": ("--no-webui", False),
    # what Tessera always does, or has no notion of
    "--ubatch-size": (None, True), "-ub": (None, True),
    "--cont-batching": (None, False), "--kv-unified": ("--kv-unified", False), "-kvu": ("--kv-unified", False),
    "--offline": (None, False), "--jinja": (None, False), "--no-jinja": (None, False),
    "--verbose": ("--verbose", False), "--tags": ("--tags", True),
    "--no-mmproj": (None, False),
    "--embedding": ("--embeddings", False), "--embeddings": ("--embeddings", False),
    "--reranking": ("--reranking", False), "--rerank": ("--reranking", False),
    "--pooling": ("--pooling", True),
}


def model_for(ids):
    key = " ".join(i for i in ids if i)
    for sub, path in MODELS:
        if sub in key:
            return path() if callable(path) else path
    return None


def translate(argv):
    out, ids, have_model = [], [], False
    i = 0
    while i < len(argv):
        a = argv[i]
        val = argv[i + 1] if i + 1 < len(argv) else None
        if a in ("--hf-repo", "-hf", "--hf-file", "-hff", "--model-url", "-mu"):
            ids.append(val)
            i += 2
            continue
        if a == "--chat-template-file" and val and not os.path.isabs(val) and not os.path.exists(val):
            # the suite names its template files relative to its own directory
            val = os.path.join(os.environ.get("TESSERA_COMPAT_TESTS", "."), val)
            argv = argv[:i + 1] + [val] + argv[i + 2:]
        if a in FLAGS:
            ours, takes = FLAGS[a]
            if ours == "-m":
                have_model = True
            if ours:
                out.append(ours)
                if takes:
                    out.append(val)
            i += 2 if takes else 1
            continue
        out.append(a)  # unknown to this table: tessera answers it (an error naming it)
        i += 1
    if "--metrics" not in argv:  # llama-server's default: no /metrics
        out.append("--no-metrics")
    if not have_model and router_mode(argv, ids):
        out = ["--models-dir", router_dir()] + out
        if any(i and "test-preset-ci" in i for i in ids):
            out += ["--models-preset", remote_preset()]
        # llama-server's LLAMA_SERVER_DEBUG_FAKE_TIMING makes a request hold its model a while,
        # which the router's queue tests rely on; the router's test hook does the same
        if os.environ.get("LLAMA_SERVER_DEBUG_FAKE_TIMING"):
            os.environ.setdefault("TESSERA_ROUTER_DEBUG_HOLD_MS", "2000")
    elif not have_model:
        # no model at all (the suite's router preset, used by the CORS tests too): stories260K
        path = model_for(ids) if ids else os.path.join(SHARED, "models", "stories260K.gguf")
        if not path or not os.path.exists(path):
            sys.stderr.write("llama_server_shim: no local file for the test model %r%s\n"
                             % (" ".join(i for i in ids if i) or "(none)", " (%s missing)" % path if path else ""))
            sys.exit(1)
        out = ["-m", path] + out
    return out


def main():
    binary = os.environ.get("TESSERA_BIN")
    if not binary:
        sys.stderr.write("llama_server_shim: TESSERA_BIN is not set\n")
        sys.exit(1)
    args = [binary, "serve"] + translate(sys.argv[1:])
    sys.stderr.write("llama_server_shim: %s\n" % " ".join(args))
    sys.stderr.flush()
    os.execv(binary, args)


if __name__ == "__main__":
    main()
