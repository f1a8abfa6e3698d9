"""-ngl: layers offloaded to a device whose memory the host cannot see (the
host tests' "testdev" accelerator plugin: F32 ADD/MUL/MUL_MAT only, buffers
not host-visible). Weights of the last N layers are uploaded there, the rest
falls back to ref with copies; greedy text and perplexity must not change."""
import json
import os
import re

from cli_common import SHARED, STORIES, Checker, require, run, crashed, SKIP

GOLDEN = os.path.join(SHARED, "golden", "stories260K.jsonl")
STORY = os.path.join(SHARED, "golden", "story.txt")
require(STORIES, GOLDEN, STORY)
plugdir = os.path.join(os.environ.get("TESSERA_BUILD_ROOT", ""), "tests", "host")
if not os.path.exists(os.path.join(plugdir, "libtessera-backend-testdev.so")):
    print(f"skip: the testdev plugin is not built in {plugdir}")
    raise SystemExit(SKIP)
c = Checker("run_offload")
dev = ["--plugin-dir", plugdir, "--device", "testdev0,ref"]

with open(GOLDEN, "rb") as f:
    g = json.loads(f.readline().decode("utf-8", errors="replace"))
for ngl in ["1", "5", "99"]:
    rc, out, err = run(["run", "-m", STORIES, "-p", g["prompt"], "-n", str(len(g["greedy"])), "--temp", "0",
                        "-ngl", ngl] + dev)
    c.check(rc == 0 and not crashed(rc, err), f"-ngl {ngl}: exit {rc}: {err.strip()[-300:]}")
    c.check(out.rstrip("\n") == g["prompt"] + g["greedy_text"], f"-ngl {ngl}: text differs: {out!r}")

rc, out, err = run(["perplexity", "-m", STORIES, "-f", STORY, "-c", "128", "-ngl", "3"] + dev)
m = re.search(r"PPL = ([0-9.]+)", out)
ppl = float(m.group(1)) if m else -1.0
print(f"perplexity with 3 offloaded layers: {ppl:.4f}")
c.check(rc == 0 and abs(ppl - 4.0412) <= 0.001, f"-ngl 3 perplexity {ppl}: {err.strip()[-300:]}")
# Op offload (TESSERA_OP_OFFLOAD=N): products of N or more tokens whose
# weights stay in host memory run on testdev0 with the weight copied in;
# the numbers must not change. The perplexity chunks are 128 tokens.
os.environ["TESSERA_OP_OFFLOAD"] = "32"
rc, out, err = run(["perplexity", "-m", STORIES, "-f", STORY, "-c", "128", "-ngl", "1", "--explain"] + dev)
m = re.search(r"PPL = ([0-9.]+)", out)
ppl = float(m.group(1)) if m else -1.0
print(f"perplexity with 1 offloaded layer and op offload from 32 tokens: {ppl:.4f}")
c.check(rc == 0 and abs(ppl - 4.0412) <= 0.001, f"op offload perplexity {ppl}: {err.strip()[-300:]}")
c.check(re.search(r"copy 'blk\.0\.attn_q\.weight' host -> testdev0", err) is not None,
        f"op offload: layer 0's weights are not uploaded:\n{err[:2000]}")
os.environ["TESSERA_OP_OFFLOAD"] = "1"
rc, out, err = run(["run", "-m", STORIES, "-p", g["prompt"], "-n", str(len(g["greedy"])), "--temp", "0",
                    "-ngl", "1"] + dev)
c.check(rc == 0 and out.rstrip("\n") == g["prompt"] + g["greedy_text"],
        f"op offload from 1 token: text differs: {out!r}: {err.strip()[-300:]}")
del os.environ["TESSERA_OP_OFFLOAD"]
c.finish()
