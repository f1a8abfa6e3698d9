"""tessera tokenize against llama.cpp: the token ids of every golden prompt
of stories260K (with BOS), the pieces, --no-bos, -f, --parse-special, and
llama.cpp's SentencePiece test vectors read from files."""
import json
import os
import tempfile

from cli_common import SHARED, STORIES, Checker, require, run, crashed

GOLDEN = os.path.join(SHARED, "golden", "stories260K.jsonl")
SPM = os.path.join(SHARED, "vocab", "ggml-vocab-llama-spm.gguf")
require(STORIES, GOLDEN, SPM, SPM + ".inp", SPM + ".out")
c = Checker("tokenize_golden")
tmp = tempfile.mkdtemp(prefix="tessera-tok-")


def ids_of(out):
    """Parse the --ids output "[1, 2, 3]"."""
    s = out.strip()
    if not (s.startswith("[") and s.endswith("]")):
        return None
    body = s[1:-1].strip()
    return [int(x) for x in body.split(",")] if body else []


def unescape(piece):
    """Undo the escapes tokenize prints (\\n \\t \\r \\xNN \\\\)."""
    b, out, i = piece.encode("utf-8"), bytearray(), 0
    simple = {ord("n"): 10, ord("t"): 9, ord("r"): 13, 0x5C: 0x5C}
    while i < len(b):
        if b[i] == 0x5C and i + 1 < len(b) and b[i + 1] in simple:
            out.append(simple[b[i + 1]])
            i += 2
        elif b[i] == 0x5C and i + 3 < len(b) and b[i + 1] == ord("x"):
            out.append(int(b[i + 2:i + 4], 16))
            i += 4
        else:
            out.append(b[i])
            i += 1
    return bytes(out)


def pieces_of(out):
    """Parse "id -> 'piece'" lines into ([ids], [piece bytes]); None if malformed."""
    ids, pieces = [], []
    for line in out.splitlines():
        head, sep, rest = line.partition(" -> '")
        if not sep or not rest.endswith("'"):
            return None
        ids.append(int(head))
        pieces.append(unescape(rest[:-1]))
    return ids, pieces


prompts = [json.loads(line) for line in open(GOLDEN, encoding="utf-8") if line.strip()]
c.check(len(prompts) >= 4, f"only {len(prompts)} golden prompts")
for g in prompts:
    prompt, want = g["prompt"], g["tokens"]
    rc, out, err = run(["tokenize", "-m", STORIES, "-p", prompt, "--ids"])
    c.check(rc == 0 and not crashed(rc, err), f"{prompt!r}: rc {rc}: {err.strip()}")
    c.check(ids_of(out) == want, f"{prompt!r}: ids {out.strip()} != golden {want}")

    rc, out, err = run(["tokenize", "-m", STORIES, "-p", prompt, "--ids", "--no-bos"])
    c.check(ids_of(out) == want[1:], f"{prompt!r} --no-bos: {out.strip()} != {want[1:]}")

    path = os.path.join(tmp, "prompt.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write(prompt)
    rc, out, err = run(["tokenize", "-m", STORIES, "-f", path, "--ids"])
    c.check(ids_of(out) == want, f"{prompt!r} via -f: {out.strip()} != {want}")

    # Default output: one "id -> 'piece'" line per token; after BOS the
    # pieces spell the prompt with SentencePiece's leading space.
    rc, out, err = run(["tokenize", "-m", STORIES, "-p", prompt])
    parsed = pieces_of(out)
    if not c.check(parsed is not None, f"{prompt!r}: malformed output {out[:200]!r}"):
        continue
    ids, pieces = parsed
    c.check(ids == want, f"{prompt!r}: listed ids {ids} != {want}")
    c.check(pieces[:1] == [b"<s>"], f"{prompt!r}: first piece {pieces[:1]} is not <s>")
    text = b"".join(pieces[1:])
    c.check(text == (" " + prompt).encode(), f"{prompt!r}: pieces spell {text!r}")

# Special-token text is only a token with --parse-special.
rc, out, err = run(["tokenize", "-m", STORIES, "-p", "<s>Once", "--ids", "--no-bos",
                    "--parse-special"])
got = ids_of(out)
c.check(got is not None and got[:1] == [1], f"--parse-special: {out.strip()} does not start with 1")
rc, out, err = run(["tokenize", "-m", STORIES, "-p", "<s>Once", "--ids", "--no-bos"])
got = ids_of(out)
c.check(got is not None and 1 not in got, f"without --parse-special: {out.strip()} contains BOS")

# llama.cpp's SentencePiece vectors, each passed through a file (exact bytes,
# newlines and tabs included), without BOS.
inputs = open(SPM + ".inp", encoding="utf-8").read().split("\n__ggml_vocab_test__\n")
outputs = open(SPM + ".out", encoding="utf-8").read().split("\n")
if inputs and inputs[-1] == "":
    inputs.pop()
c.check(len(inputs) <= len(outputs), f"{len(inputs)} inputs, {len(outputs)} outputs")
for i, text in enumerate(inputs):
    path = os.path.join(tmp, "vector.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    rc, out, err = run(["tokenize", "-m", SPM, "-f", path, "--ids", "--no-bos"])
    want = [int(x) for x in outputs[i].split()]
    c.check(rc == 0 and ids_of(out) == want,
            f"spm vector {i} {text[:30]!r}: rc {rc} {out.strip()[:120]} != {want[:20]} {err.strip()}")
    # The pieces, escapes undone, spell the input (after SentencePiece's
    # leading space): one line per token whatever bytes the token holds.
    rc, out, err = run(["tokenize", "-m", SPM, "-f", path, "--no-bos"])
    parsed = pieces_of(out)
    c.check(parsed is not None and parsed[0] == want,
            f"spm vector {i} {text[:30]!r}: pieces listing malformed or ids differ")
    if parsed is not None and text:
        spelled = b"".join(parsed[1])
        c.check(spelled == (" " + text).encode(),
                f"spm vector {i}: pieces spell {spelled[:60]!r}, input {text[:60]!r}")

for p in os.listdir(tmp):
    os.unlink(os.path.join(tmp, p))
os.rmdir(tmp)
c.finish()
