"""tessera perplexity on story.txt with stories260K, context 128: llama.cpp
reports PPL = 4.0412 over 10 chunks; we must be within 0.001. Also with
micro-batches of 32 (-b 32), which must not change the result."""
import os
import re

from cli_common import SHARED, STORIES, Checker, require, run, crashed

STORY = os.path.join(SHARED, "golden", "story.txt")
require(STORIES, STORY)
c = Checker("perplexity_story")

for extra in [[], ["-b", "32"]]:
    rc, out, err = run(["perplexity", "-m", STORIES, "-f", STORY, "-c", "128"] + extra)
    c.check(rc == 0 and not crashed(rc, err), f"{extra}: exit {rc}: {err.strip()[-300:]}")
    chunks = re.findall(r"^\[(\d+)\] ([0-9.]+)$", out, re.M)
    c.check(len(chunks) == 10, f"{extra}: expected 10 chunk lines, got {len(chunks)}: {out!r}")
    m = re.search(r"PPL = ([0-9.]+)", out)
    ppl = float(m.group(1)) if m else -1.0
    print(f"perplexity {' '.join(extra) or '(-b 128)'}: PPL = {ppl:.4f} (llama.cpp 4.0412)")
    c.check(abs(ppl - 4.0412) <= 0.001, f"{extra}: PPL {ppl} is not within 0.001 of 4.0412")

c.finish()
