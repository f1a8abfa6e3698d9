"""-ngl auto and -c fitted to the devices' memory (tessera_params_fit), with
the host tests' "testdev" accelerator reporting a small memory
(TESTDEV_MEMORY_KIB): the layers that fit are offloaded and the text is
the golden's; a device too small for any layer gets none; an explicit -ngl
that does not fit is one error naming the device and the sizes; --verbose
prints the decision and one memory line per device."""
import json
import os
import re
import subprocess

from cli_common import BIN, SHARED, SKIP, STORIES, Checker, crashed, require

GOLDEN = os.path.join(SHARED, "golden", "stories260K.jsonl")
require(STORIES, GOLDEN)
plugdir = os.path.join(os.environ.get("TESSERA_BUILD_ROOT", ""), "tests", "host")
if not os.path.exists(os.path.join(plugdir, "libtessera-backend-testdev.so")):
    print(f"skip: the testdev plugin is not built in {plugdir}")
    raise SystemExit(SKIP)
c = Checker("run_fit")
with open(GOLDEN, "rb") as f:
    g = json.loads(f.readline().decode("utf-8", errors="replace"))
gen = ["run", "-m", STORIES, "-p", g["prompt"], "-n", str(len(g["greedy"])), "--temp", "0", "--verbose",
       "--plugin-dir", plugdir, "--device", "testdev0,ref"]
want = g["prompt"] + g["greedy_text"]


def with_memory(kib, extra=()):
    env = dict(os.environ, TESTDEV_MEMORY_KIB=str(kib))
    p = subprocess.run([BIN] + gen + list(extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                       timeout=120)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


layers = {}
for kib in (100, 2000, 1 << 20):
    rc, out, err = with_memory(kib)
    m = re.search(r"fit: testdev0: (\d+) of 5 layers, ([0-9.]+) MiB .* of ([0-9.]+) MiB available", err)
    c.check(rc == 0 and not crashed(rc, err), f"{kib} KiB: exit {rc}: {err[-400:]}")
    c.check(m is not None, f"{kib} KiB: no fit decision in --verbose:\n{err[-600:]}")
    if not m:
        continue
    n, need, avail = int(m.group(1)), float(m.group(2)), float(m.group(3))
    layers[kib] = n
    c.check(need <= avail, f"{kib} KiB: the decision needs {need} MiB of {avail}")
    c.check(out.rstrip("\n") == want, f"{kib} KiB, {n} layers: text differs: {out!r}")
    mem = re.findall(r"tessera: memory (\S+): weights ([0-9.]+) MiB, KV \S+ ([0-9.]+) MiB, compute ([0-9.]+) MiB", err)
    devs = [d for d, *_ in mem]
    c.check("ref" in devs, f"{kib} KiB: no memory line for ref: {mem}")
    c.check(("testdev0" in devs) == (n > 0), f"{kib} KiB, {n} layers: memory lines {mem}")
    for d, w, kv, comp in mem:
        if d == "testdev0":
            # testdev cannot write the cache: its layers' KV stays in host memory
            c.check(float(w) > 0, f"{kib} KiB: testdev0 holds {n} layers but {w} MiB of weights")
print("layers fitted by memory:", layers)
c.check(layers.get(100) == 0, f"100 KiB: want 0 layers, got {layers.get(100)}")
c.check(0 < layers.get(2000, -1) < 5, f"2000 KiB: want some but not all layers, got {layers.get(2000)}")
c.check(layers.get(1 << 20) == 5, f"1 GiB: want all 5 layers, got {layers.get(1 << 20)}")

rc, out, err = with_memory(2000, ["-ngl", "5"])
c.check(rc == 1 and not crashed(rc, err), f"-ngl 5 in 2000 KiB: want exit 1, got {rc}: {err[-300:]}")
c.check(re.search(r"device testdev0: -ngl 5 \(5 layers\) with -c \d+ needs [0-9.]+ MiB \(weights [0-9.]+, KV "
                  r"[0-9.]+, compute [0-9.]+\), [0-9.]+ MiB available; \d layers fit", err) is not None,
        f"-ngl 5 in 2000 KiB: no error naming the device and sizes: {err!r}")
rc, out, err = with_memory(2000, ["-ngl", "1"])
c.check(rc == 0 and out.rstrip("\n") == want, f"-ngl 1 in 2000 KiB: exit {rc}, text {out!r}: {err[-300:]}")
c.finish()
