"""Host<->device copies per decoded token with every layer on a GPU
(issue 17: "keep device-resident norm weights on the device; -ngl 99 copies
them back every graph"). With -ngl 99 on vulkan0 the generation graph of
each model must copy no weight at all, only the token's inputs: its
embedding row (and that row's first norm, computed beside it on the CPU),
the positions and the masks, a few KiB. Skipped without a Vulkan device."""
import os
import re

from cli_common import SHARED, STORIES, Checker, best_cpu_device, crashed, require, run

# synth-s and synth-qwen3: ../shared's, or the ones the build makes from
# tests/data.
MODELS = [STORIES] + [os.path.join(SHARED, "models", m) for m in ("synth-s-Q4_0.gguf", "synth-qwen3-f32.gguf")]
require(*MODELS)
rc, out, _ = run(["devices"])
if not re.search(r"^\s*\d+\s+vulkan0\s", out, re.M):
    print("skip: no Vulkan device (vulkan0) on this machine")
    raise SystemExit(77)
cpu = best_cpu_device()
c = Checker("run_copies_per_token")
for model in MODELS:
    name = os.path.basename(model)
    rc, out, err = run(["run", "-m", model, "-p", "Once upon", "-n", "2", "--device", f"vulkan0,{cpu}", "-ngl", "99",
                        "--explain"], timeout=300)
    c.check(rc == 0 and not crashed(rc, err), f"{name}: exit {rc}: {err[-500:]}")
    gen = err[err.find("placement of the generation graph"):]
    gen = gen[:gen.find("compute buffers:")]
    copies = re.findall(r"^  copy '([^']*)' (\S+) -> (\S+), ([0-9.]+) (B|KiB|MiB)$", gen, re.M)
    scale = {"B": 1, "KiB": 1024, "MiB": 1 << 20}
    total = sum(float(n) * scale[u] for _, _, _, n, u in copies)
    print(f"{name}: {len(copies)} copies per token, {total / 1024:.2f} KiB: "
          + ", ".join(f"{t} {a}->{b}" for t, a, b, _, _ in copies))
    c.check(gen and copies, f"{name}: no generation graph placement:\n{err[-1500:]}")
    weights = [t for t, _, _, _, _ in copies if t.endswith(".weight")]
    c.check(not weights, f"{name}: weights copied every token: {weights}")
    c.check(len(copies) <= 6 and total <= 16 * 1024, f"{name}: {len(copies)} copies, {total:.0f} bytes per token")
c.finish()
