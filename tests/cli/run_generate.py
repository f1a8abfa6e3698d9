"""tessera run end to end: greedy text equals llama.cpp's golden
continuation for every stories260K prompt, timings go to stderr, -f reads
the prompt from a file, micro-batches (-b) and the F32 KV cache give the
same text, sampling with a seed is reproducible, and a context too small
for the prompt is one clear error."""
import json
import os
import tempfile

from cli_common import SHARED, STORIES, Checker, require, run, crashed

GOLDEN = os.path.join(SHARED, "golden", "stories260K.jsonl")
require(STORIES, GOLDEN)
c = Checker("run_generate")

cases = []
with open(GOLDEN, "rb") as f:
    for line in f:
        if line.strip():
            cases.append(json.loads(line.decode("utf-8", errors="replace")))

for i, g in enumerate(cases):
    n = len(g["greedy"])
    rc, out, err = run(["run", "-m", STORIES, "-p", g["prompt"], "-n", str(n), "--temp", "0", "-t", "1"])
    c.check(rc == 0 and not crashed(rc, err), f"case {i}: exit {rc}: {err.strip()[-300:]}")
    want = g["prompt"] + g["greedy_text"]
    # greedy_text may end in the middle of a UTF-8 sequence; compare bytes we trust
    got = out.rstrip("\n")
    c.check(got.startswith(want.rstrip("\ufffd")) or got == want,
            f"case {i}: output differs\n got: {got!r}\nwant: {want!r}")
    c.check("tokens/s" in err and "load time" in err, f"case {i}: no timings on stderr: {err!r}")
    c.check("tokens/s" not in out, f"case {i}: timings leaked into stdout")

g = cases[3]
n = str(len(g["greedy"]))
base = ["-m", STORIES, "-n", n, "--temp", "0", "-t", "1"]
rc, ref_out, err = run(["run", "-p", g["prompt"]] + base)

# The prompt from a file.
tmp = tempfile.mkdtemp(prefix="tessera-run-")
prompt_file = os.path.join(tmp, "prompt.txt")
with open(prompt_file, "w", encoding="utf-8") as f:
    f.write(g["prompt"])
rc, out, err = run(["run", "-f", prompt_file] + base)
c.check(rc == 0 and out == ref_out, f"-f: exit {rc}, output {out!r}")

# Micro-batches of 4 tokens and an F32 cache: same greedy text.
rc, out, err = run(["run", "-p", g["prompt"], "-b", "4"] + base)
c.check(rc == 0 and out == ref_out, f"-b 4: exit {rc}, output {out!r}")
rc, out, err = run(["run", "-p", g["prompt"], "--kv-type", "f32"] + base)
c.check(rc == 0 and out.startswith(g["prompt"]), f"--kv-type f32: exit {rc}: {err.strip()[-200:]}")

# --no-echo prints only the continuation.
rc, out, err = run(["run", "-p", g["prompt"], "--no-echo"] + base)
c.check(rc == 0 and ref_out.endswith(out) and not out.startswith(g["prompt"]), f"--no-echo: {out!r}")

# Sampling: the same seed gives the same text, and a different one differs.
samp = ["run", "-m", STORIES, "-p", "Once upon a time", "-n", "40", "--temp", "1.0", "--top-k", "0",
        "--top-p", "1", "--min-p", "0"]
rc1, out1, _ = run(samp + ["--seed", "7"])
rc2, out2, _ = run(samp + ["--seed", "7"])
rc3, out3, _ = run(samp + ["--seed", "8"])
c.check(rc1 == 0 and rc2 == 0 and out1 == out2, "same seed, different text")
c.check(rc3 == 0 and out3 != out1, "different seeds gave the same 40-token text")

# -n -1 stops at the end of the context with a note, not an error.
rc, out, err = run(["run", "-m", STORIES, "-p", "Once upon a time", "-n", "-1", "--temp", "0", "-c", "24"])
c.check(rc == 0 and ("context full" in err or len(out) > len("Once upon a time")),
        f"-n -1 -c 24: exit {rc}: {err.strip()[-200:]}")

# A prompt longer than the context: one clear error.
rc, out, err = run(["run", "-m", STORIES, "-p", g["prompt"], "-c", "8"])
lines = [l for l in err.splitlines() if l.strip() and "tokens/s" not in l and "load time" not in l
         and not l.startswith("prompt:") and not l.startswith("generation:")]
c.check(rc != 0 and not crashed(rc, err) and any("-c" in l for l in lines),
        f"-c 8: exit {rc}, stderr {err!r}")

c.finish()
