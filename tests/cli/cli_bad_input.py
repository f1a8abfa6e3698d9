"""Bad flags, missing files, non-GGUF and truncated files: tokenize and
chat each print one clear error line naming the thing at fault and exit
non-zero, without crashing."""
import os
import tempfile

from cli_common import STORIES, Checker, require, run, crashed

require(STORIES)
c = Checker("cli_bad_input")

tmp = tempfile.mkdtemp(prefix="tessera-cli-")
truncated = os.path.join(tmp, "truncated.gguf")
with open(STORIES, "rb") as f:
    data = f.read()
with open(truncated, "wb") as f:
    f.write(data[: len(data) // 3])
missing = os.path.join(tmp, "missing.gguf")

# (arguments, a word the error line must contain)
cases = [
    (["tokenize", "--bogus"], "--bogus"),
    (["tokenize", "-m", STORIES, "-p", "hi", "--no-such-flag"], "--no-such-flag"),
    (["tokenize", "-p", "hi"], "-m"),
    (["tokenize", "-m", STORIES], "-p"),
    (["tokenize", "-m", STORIES, "-p", "a", "-f", "b"], "-f"),
    (["tokenize", "-m", STORIES, "-p"], "-p"),
    (["tokenize", "-m", missing, "-p", "hi"], missing),
    (["tokenize", "-m", "/etc/passwd", "-p", "hi"], "/etc/passwd"),
    (["tokenize", "-m", truncated, "-p", "hi"], truncated),
    (["tokenize", "-m", STORIES, "-f", os.path.join(tmp, "none.txt")], "none.txt"),
    (["chat", "--bogus"], "--bogus"),
    (["chat"], "-m"),
    (["chat", "-m", missing], missing),
    (["chat", "-m", "/etc/passwd"], "/etc/passwd"),
    (["chat", "-m", truncated], truncated),
    (["chat", "-m", STORIES, "--temp", "warm"], "--temp"),
    (["chat", "-m", STORIES, "--top-k", "4x"], "--top-k"),
    (["chat", "-m", STORIES, "--seed", "-5"], "--seed"),
    (["chat", "-m", STORIES, "--top-p", "nan"], "--top-p"),
    (["chat", "-m", STORIES, "--logit-bias", "12"], "--logit-bias"),
    (["chat", "-m", STORIES, "--logit-bias", "99999+1"], "99999"),
    (["chat", "-m", STORIES, "--top-p", "-0.5"], "top-p"),
    (["chat", "-m", STORIES, "--chat-template", "no-such-template"], "no-such-template"),
    (["chat", "-m", STORIES, "-c"], "-c"),
]

for args, word in cases:
    rc, out, err = run(args, stdin_text="hello\n")
    what = "tessera " + " ".join(args)
    lines = [l for l in err.splitlines() if l.strip()]
    if not c.check(not crashed(rc, err), f"{what}: crashed (rc {rc}): {err[-400:]}"):
        continue
    c.check(rc != 0, f"{what}: exit status 0")
    c.check(len(lines) == 1, f"{what}: expected one error line, got {len(lines)}: {err!r}")
    c.check(word in err, f"{what}: error does not name {word!r}: {err.strip()!r}")
    c.check(out == "", f"{what}: printed on stdout: {out[:200]!r}")

for p in os.listdir(tmp):
    os.unlink(os.path.join(tmp, p))
os.rmdir(tmp)
c.finish()
