#!/usr/bin/env python3
"""Lay out the tests' reference files in a build-tree folder shaped like
../shared (models/, golden/, vocab/, templates/) plus tests/data's own
synthetic models and goldens at its top, and check every file by sha256.

  assemble.py copy SRC OUT STAMP
      copy each file SHA256SUMS lists that SRC holds to OUT (same relative
      path); a file whose bytes differ from its listed sha256 is an error.
  assemble.py synth SRC OUT DIR SYNTH [WRAPPER...]
      make each model synth-models.txt names in folder DIR ("." for the
      top, "models" for NAMEs that start with models/) with the
      tessera-synth binary SYNTH (run through WRAPPER in cross builds) into
      OUT/NAME.gguf and check its sha256: the goldens were made from
      exactly those bytes.
  assemble.py quantize SRC OUT TESSERA [WRAPPER...]
      make each model quantized-models.txt names with `TESSERA quantize`
      from a model made above (with an importance matrix stored in SRC
      where the line names one, checked by sha256 first), and check its
      sha256: SHA256SUMS lists the bytes llama.cpp's llama-quantize makes
      from the same source, so a mismatch means tessera quantize is no
      longer byte-exact.
  assemble.py remake SRC OUT SYNTH
      synth for every folder without the check (tests/data/make-synth.sh,
      when tessera-synth's output changes on purpose; it makes the
      quantized models with llama-quantize itself).
  assemble.py sums SRC OUT
      rewrite SRC/SHA256SUMS: every file stored under SRC's models/, golden/,
      vocab/, templates/ and its synth-*.jsonl, synth-*.gguf and prompts, and
      the made models as they are in OUT.

Standard library only; run by tests/data/meson.build at build time.
"""
import hashlib
import os
import shlex
import shutil
import subprocess
import sys

VOCAB = "models/stories260K.gguf"


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def read_sums(src):
    """{relative path: sha256} from SRC/SHA256SUMS (sha256sum's format)."""
    sums = {}
    with open(os.path.join(src, "SHA256SUMS"), encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            parts = line.split()
            if len(parts) != 2 or len(parts[0]) != 64:
                sys.exit(f"assemble: {src}/SHA256SUMS line {n}: expected 'SHA256  PATH', got {line!r}")
            sums[parts[1]] = parts[0]
    return sums


def read_recipes(src):
    """[(name, [tessera-synth options])] from SRC/synth-models.txt."""
    recipes = []
    with open(os.path.join(src, "synth-models.txt"), encoding="utf-8") as f:
        for line in f:
            words = shlex.split(line, comments=True)
            if words:
                recipes.append((words[0], words[1:]))
    return recipes


def read_quantized(src):
    """[(name, source name, type, pure, imatrix or None)] from
    SRC/quantized-models.txt: NAME FROM TYPE [--pure] [--imatrix FILE], FILE
    relative to SRC."""
    recipes = []
    with open(os.path.join(src, "quantized-models.txt"), encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            words = shlex.split(line, comments=True)
            if not words:
                continue
            opts, pure, imatrix = words[3:], False, None
            while opts and len(words) >= 3:
                if opts[0] == "--pure" and not pure:
                    pure, opts = True, opts[1:]
                elif opts[0] == "--imatrix" and len(opts) >= 2 and imatrix is None:
                    imatrix, opts = opts[1], opts[2:]
                else:
                    break
            if len(words) < 3 or opts:
                sys.exit(f"assemble: {src}/quantized-models.txt line {n}: expected "
                         f"'NAME FROM TYPE [--pure] [--imatrix FILE]', got {line!r}")
            recipes.append((words[0], words[1], words[2], pure, imatrix))
    return recipes


def made_names(src):
    """Every file the build makes (relative to OUT), not stored."""
    return ({name + ".gguf" for name, _ in read_recipes(src)} |
            {name + ".gguf" for name, _, _, _, _ in read_quantized(src)})


def check(path, rel, sums):
    want = sums.get(rel)
    if want is None:
        sys.exit(f"assemble: {rel} is not listed in tests/data/SHA256SUMS")
    got = sha256(path)
    if got != want:
        sys.exit(f"assemble: {path}: sha256 {got}, SHA256SUMS lists {want} for {rel}")


def copy_all(src, out, stamp):
    sums = read_sums(src)
    made = made_names(src)
    for rel in sorted(sums):
        if rel in made:
            continue
        from_path = os.path.join(src, rel)
        if not os.path.isfile(from_path):
            sys.exit(f"assemble: {from_path} is listed in SHA256SUMS but missing")
        check(from_path, rel, sums)
        to_path = os.path.join(out, rel)
        os.makedirs(os.path.dirname(to_path), exist_ok=True)
        shutil.copyfile(from_path, to_path + ".tmp")
        os.replace(to_path + ".tmp", to_path)
    with open(stamp, "w", encoding="utf-8") as f:
        f.write(f"{len(sums) - len(made)} files copied from {src} and checked\n")


def run_tool(cmd, cwd=None):
    run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=cwd)
    if run.returncode != 0:
        sys.exit(f"assemble: {shlex.join(cmd)} failed ({run.returncode}):\n{run.stdout}")


def make_synth(src, out, folder, synth, wrapper, verify=True):
    sums = read_sums(src)
    vocab = os.path.join(src, VOCAB)
    check(vocab, VOCAB, sums)
    for name, options in read_recipes(src):
        if folder is not None and os.path.dirname(name) != ("" if folder == "." else folder):
            continue
        rel = name + ".gguf"
        path = os.path.join(out, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        run_tool(wrapper + [synth, "-q", "-o", path, "--vocab-from", vocab] + options)
        if verify and sums.get(rel) != sha256(path):
            os.replace(path, path + ".bad")
            sys.exit(f"assemble: tessera-synth made {path}.bad, whose sha256 is not the one "
                     f"SHA256SUMS lists for {rel}: its goldens were made from other bytes. If "
                     "tessera-synth's output changed on purpose, remake the models and goldens "
                     "with tests/data/make-synth.sh and update SHA256SUMS.")


def make_quantized(src, out, tessera, wrapper, verify=True):
    sums = read_sums(src)
    for name, source, qtype, pure, imatrix in read_quantized(src):
        rel = name + ".gguf"
        path = os.path.join(out, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        flags = ["--pure"] if pure else []
        if imatrix:
            # run in SRC with the path as written: the file's name is
            # written into the model (quantize.imatrix.file), as
            # llama-quantize was given it there (make-synth.sh)
            check(os.path.join(src, imatrix), imatrix, sums)
            flags += ["--imatrix", imatrix]
        tool = os.path.abspath(tessera) if os.sep in tessera else tessera
        run_tool(wrapper + [tool, "quantize", "-q", "-t", "2"] + flags +
                 [os.path.abspath(os.path.join(out, source + ".gguf")), os.path.abspath(path), qtype], cwd=src)
        if verify and sums.get(rel) != sha256(path):
            os.replace(path, path + ".bad")
            sys.exit(f"assemble: `tessera quantize {shlex.join(flags + [source + '.gguf', qtype])}` "
                     f"made {path}.bad, whose sha256 is not the one SHA256SUMS lists "
                     f"for {rel} (llama.cpp's llama-quantize of the same source): tessera "
                     "quantize is no longer byte-exact for this type, and the goldens were made "
                     "from llama.cpp's bytes. tests/tensor/test_quantize_cli.c shows which "
                     "tensors differ (run it with ../shared beside the checkout).")


def write_sums(src, out):
    made = sorted(made_names(src))
    rels = []
    for top in ("models", "golden", "vocab", "templates"):
        rels += [top + "/" + f for f in os.listdir(os.path.join(src, top))]
    rels = [r for r in rels if r.endswith((".gguf", ".jsonl", ".inp", ".out", ".txt", ".jinja"))]
    rels += [f for f in os.listdir(src) if f.startswith("synth-") and f.endswith((".gguf", ".jsonl"))]
    lines = [(sha256(os.path.join(src, r)), r) for r in rels if r not in made]
    lines += [(sha256(os.path.join(out, r)), r) for r in made]
    with open(os.path.join(src, "SHA256SUMS"), "w", encoding="utf-8") as f:
        f.writelines(f"{h}  {r}\n" for h, r in sorted(lines, key=lambda x: x[1]))


def main(argv):
    if len(argv) == 5 and argv[1] == "copy":
        copy_all(argv[2], argv[3], argv[4])
    elif len(argv) >= 6 and argv[1] == "synth":
        make_synth(argv[2], argv[3], argv[4], argv[5], argv[6:])
    elif len(argv) >= 5 and argv[1] == "quantize":
        make_quantized(argv[2], argv[3], argv[4], argv[5:])
    elif len(argv) == 5 and argv[1] == "remake":
        make_synth(argv[2], argv[3], None, argv[4], [], verify=False)
    elif len(argv) == 4 and argv[1] == "sums":
        write_sums(argv[2], argv[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
