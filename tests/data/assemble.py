#!/usr/bin/env python3
"""Lay out the tests' reference files in a build-tree folder shaped like
../shared (models/, golden/, vocab/, templates/) plus tests/data's own
synthetic models and goldens at its top, and check every file by sha256.

  assemble.py copy SRC OUT STAMP
      copy each file SHA256SUMS lists that SRC holds to OUT (same relative
      path); a file whose bytes differ from its listed sha256 is an error.
  assemble.py synth SRC OUT SYNTH [WRAPPER...]
      make each model synth-models.txt names with the tessera-synth binary
      SYNTH (run through WRAPPER in cross builds) into OUT/NAME.gguf and
      check its sha256: the goldens were made from exactly those bytes.
  assemble.py remake SRC OUT SYNTH [WRAPPER...]
      the same without the check (tests/data/make-synth.sh, when
      tessera-synth's output changes on purpose).
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


def check(path, rel, sums):
    want = sums.get(rel)
    if want is None:
        sys.exit(f"assemble: {rel} is not listed in tests/data/SHA256SUMS")
    got = sha256(path)
    if got != want:
        sys.exit(f"assemble: {path}: sha256 {got}, SHA256SUMS lists {want} for {rel}")


def copy_all(src, out, stamp):
    sums = read_sums(src)
    made = {name + ".gguf" for name, _ in read_recipes(src)}
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


def make_synth(src, out, synth, wrapper, verify=True):
    sums = read_sums(src)
    vocab = os.path.join(src, VOCAB)
    check(vocab, VOCAB, sums)
    os.makedirs(out, exist_ok=True)
    for name, options in read_recipes(src):
        rel = name + ".gguf"
        path = os.path.join(out, rel)
        cmd = wrapper + [synth, "-q", "-o", path, "--vocab-from", vocab] + options
        run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if run.returncode != 0:
            sys.exit(f"assemble: {shlex.join(cmd)} failed ({run.returncode}):\n{run.stdout}")
        if verify and sums.get(rel) != sha256(path):
            os.replace(path, path + ".bad")
            sys.exit(f"assemble: tessera-synth made {path}.bad, whose sha256 is not the one "
                     f"SHA256SUMS lists for {rel}: its goldens were made from other bytes. If "
                     "tessera-synth's output changed on purpose, remake the models and goldens "
                     "with tests/data/make-synth.sh and update SHA256SUMS.")


def write_sums(src, out):
    made = [name + ".gguf" for name, _ in read_recipes(src)]
    rels = []
    for top in ("models", "golden", "vocab", "templates"):
        rels += [top + "/" + f for f in os.listdir(os.path.join(src, top))]
    rels += [f for f in os.listdir(src) if f.startswith("synth-") and f.endswith((".gguf", ".jsonl"))]
    lines = [(sha256(os.path.join(src, r)), r) for r in rels if r not in made]
    lines += [(sha256(os.path.join(out, r)), r) for r in made]
    with open(os.path.join(src, "SHA256SUMS"), "w", encoding="utf-8") as f:
        f.writelines(f"{h}  {r}\n" for h, r in sorted(lines, key=lambda x: x[1]))


def main(argv):
    if len(argv) == 5 and argv[1] == "copy":
        copy_all(argv[2], argv[3], argv[4])
    elif len(argv) >= 5 and argv[1] in ("synth", "remake"):
        make_synth(argv[2], argv[3], argv[4], argv[5:], verify=argv[1] == "synth")
    elif len(argv) == 4 and argv[1] == "sums":
        write_sums(argv[2], argv[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
