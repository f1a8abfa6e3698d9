"""A GPU plugin whose devices the defaults leave out (a software GPU such as
lavapipe or PoCL, ranked below the CPU backend) is probed in a child
process and never started in a default run: its driver stack (Mesa's
Vulkan drivers, PoCL, LLVM) is not in the process's memory map while it
generates (the small plugin file itself is, for its table). Named with
--device, it starts on first use and computes."""
import json
import subprocess

from cli_common import BIN, SKIP, STORIES, Checker, crashed, require, run

require(STORIES)
rc, out, err = run(["devices", "--json"])
devs = json.loads(out)["devices"] if rc == 0 else []
cpu = max((d["priority"] for d in devs if d["kind"] == "CPU" and d["name"] != "ref"), default=None)
slow = [d for d in devs if d["kind"] != "CPU" and cpu is not None and d["priority"] < cpu]
if not slow:
    print("skip: no GPU-like device ranked below the CPU backend (nothing to defer)")
    raise SystemExit(SKIP)
c = Checker("run_plugins_deferred")

p = subprocess.Popen([BIN, "run", "-m", STORIES, "-p", "Once", "-n", "-1", "-t", "1", "--temp", "0"],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
try:
    first = p.stdout.read(8)  # generating: discovery and loading are over
    with open(f"/proc/{p.pid}/maps") as f:
        maps = f.read()
finally:
    p.kill()
    p.communicate()
c.check(len(first) > 0, "the default run printed nothing")
for lib in ("libLLVM", "libpocl", "libvulkan_"):
    c.check(lib not in maps, f"{lib} is mapped in a default run: " +
            " ".join(sorted({l.split()[-1] for l in maps.splitlines() if lib in l})))

# Named, the deferred device starts and computes.
d = slow[0]
rc, out, err = run(["run", "-m", STORIES, "-p", "Once", "-n", "4", "--temp", "0", "-ngl", "99",
                    "--device", d["name"] + ",ref", "--explain"])
c.check(rc == 0 and not crashed(rc, err), f"--device {d['name']}: exit {rc}: {err[-400:]}")
c.check(f"{d['name']}, nodes" in err, f"--device {d['name']}: nothing ran on it:\n{err[-800:]}")
c.finish()
