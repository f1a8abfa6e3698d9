"""tessera run and tessera perplexity with bad flags, missing or non-GGUF
files: one clear error line naming the thing at fault, non-zero exit, no
crash; --help exits 0 and documents the flags."""
import os
import tempfile

from cli_common import SHARED, STORIES, Checker, require, run, crashed

STORY = os.path.join(SHARED, "golden", "story.txt")
require(STORIES, STORY)
c = Checker("run_bad_input")

tmp = tempfile.mkdtemp(prefix="tessera-run-bad-")
truncated = os.path.join(tmp, "truncated.gguf")
with open(STORIES, "rb") as f:
    data = f.read()
with open(truncated, "wb") as f:
    f.write(data[: len(data) // 2])
missing = os.path.join(tmp, "missing.gguf")
P = ["-p", "hi"]

cases = [
    (["run", "--bogus"], "--bogus"),
    (["run", "-p", "hi"], "-m"),
    (["run", "-m", STORIES], "-p"),
    (["run", "-m", STORIES, "-p"], "-p"),
    (["run", "-m", STORIES, "-p", "a", "-f", "b"], "-f"),
    (["run", "-m", missing] + P, missing),
    (["run", "-m", "/etc/passwd"] + P, "/etc/passwd"),
    (["run", "-m", truncated] + P, truncated),
    (["run", "-m", STORIES, "-f", os.path.join(tmp, "none.txt")], "none.txt"),
    (["run", "-m", STORIES, "-n", "ten"] + P, "-n"),
    (["run", "-m", STORIES, "-t", "0"] + P, "-t"),
    (["run", "-m", STORIES, "-c", "-4"] + P, "-c"),
    (["run", "-m", STORIES, "--temp", "hot"] + P, "--temp"),
    (["run", "-m", STORIES, "--top-p", "2"] + P, "--top-p"),
    (["run", "-m", STORIES, "--kv-type", "q4"] + P, "--kv-type"),
    (["run", "-m", STORIES, "-ctk", "q3_k"] + P, "-ctk"),
    (["run", "-m", STORIES, "--cache-type-v", "f8"] + P, "--cache-type-v"),
    (["run", "-m", STORIES, "-fa", "maybe"] + P, "-fa"),
    (["run", "-m", STORIES, "-ctv", "q8_0", "-fa", "off"] + P, "needs flash attention (-fa on)"),
    (["run", "-m", STORIES, "-ctk", "q4_0", "-fa", "on"] + P, "multiple of 32"),
    (["run", "-m", STORIES, "--device", "nosuchdev0"] + P, "nosuchdev0"),
    (["run", "-m", STORIES, "-ngl", "x"] + P, "-ngl"),
    (["perplexity", "--bogus"], "--bogus"),
    (["perplexity", "-f", STORY], "-m"),
    (["perplexity", "-m", STORIES], "-f"),
    (["perplexity", "-m", missing, "-f", STORY], missing),
    (["perplexity", "-m", "/etc/passwd", "-f", STORY], "/etc/passwd"),
    (["perplexity", "-m", STORIES, "-f", os.path.join(tmp, "none.txt")], "none.txt"),
    (["perplexity", "-m", STORIES, "-f", STORY, "-c", "abc"], "-c"),
    (["perplexity", "-m", STORIES, "-f", STORY, "-ctv", "q4_0"], "-fa on"),
    (["perplexity", "-m", STORIES, "-f", STORY, "-c", "4096"], "4096"),
]
for args, word in cases:
    rc, out, err = run(args)
    lines = [l for l in err.splitlines() if l.strip()]
    ok = rc != 0 and not crashed(rc, err) and len(lines) >= 1 and word in lines[-1]
    c.check(ok, f"{args}: exit {rc}, stderr {err!r}")
    c.check(len(lines) <= 2, f"{args}: more than a line or two of error: {err!r}")

for cmd in ["run", "perplexity"]:
    rc, out, err = run([cmd, "--help"])
    c.check(rc == 0 and "usage: tessera " + cmd in out and "-m" in out, f"{cmd} --help: exit {rc}")

c.finish()
