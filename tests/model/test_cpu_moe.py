"""Experts placed per device (issue 43): -ot/--override-tensor, --cpu-moe and
--n-cpu-moe on a synthetic qwen3moe file (tests/data), with every layer on
vulkan0 (lavapipe) and the experts in host memory computed by cpu-avx0.
usage: test_cpu_moe.py [MODEL N_LAYER]: another file of tests/data (e.g.
one with a shared expert, which must stay in its layer's GPU split).

  - the text is ref's, whichever weights stay on the host;
  - no weight is copied in a step (the experts are read where they live);
  - -ot with llama.cpp's --cpu-moe pattern places exactly as --cpu-moe;
  - the memory fit counts the experts on the host (--verbose's fit line);
  - a step is at most one GPU split and one CPU split per layer, plus the
    output's: checked when every op has a kernel on those two devices
    (else the splits around the missing ones are the fallback's, and that
    part exits 77 naming them);
  - a bad -ot / --n-cpu-moe is one clear error."""
import os
import re
import subprocess
import sys

BIN = os.environ.get("TESSERA_BIN", "")
MODEL = os.path.join(os.environ.get("TESSERA_TEST_DATA", ""),
                     sys.argv[1] if len(sys.argv) > 1 else "synth-qwen3moe-f32.gguf")
N_LAYER = int(sys.argv[2]) if len(sys.argv) > 2 else 2
for p in (BIN, MODEL):
    if not p or not os.path.exists(p):
        print(f"skip: {p!r} is missing")
        sys.exit(77)

failures = 0


def check(cond, msg):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", msg)
    return cond


def run(*args):
    p = subprocess.run([BIN, "run", "-m", MODEL, "-p", "Once upon a time there was", "-n", "6", "--temp", "0",
                        "--no-echo"] + list(args), capture_output=True, timeout=300)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


devs = subprocess.run([BIN, "devices"], capture_output=True, text=True, timeout=120).stdout
if "vulkan0" not in devs or "cpu-avx0" not in devs:
    print("skip: vulkan0 and cpu-avx0 are both needed")
    sys.exit(77)
GPU = ["-dev", "vulkan0,cpu-avx0", "-ngl", "99"]


def generation_block(err):
    """The --explain block of the one-token graph: its split and copy lines."""
    blocks = err.split("tessera: placement of the generation graph")
    if len(blocks) < 2:
        return None
    lines = blocks[-1].splitlines()
    out = []
    for line in lines[1:]:
        if line.startswith("compute buffers"):
            break
        out.append(line)
    return out


rc, want, err = run("-dev", "ref")
check(rc == 0 and want.strip(), f"ref run: {rc} {err[-300:]}")

splits, gpu_weights = {}, {}
for name, flags in [("--cpu-moe", ["--cpu-moe"]),
                    ("-ot", ["-ot", r"\.ffn_(up|down|gate)_exps=CPU"]),
                    ("-ot, comma list", ["-ot", r"blk\.0\.ffn_(up|down|gate)_exps=CPU,blk\.1\.ffn_.*_exps=cpu"]),
                    ("--n-cpu-moe 1", ["--n-cpu-moe", "1"]),
                    ("none", [])]:
    rc, out, err = run(*GPU, "--explain", "--verbose", *flags)
    if not check(rc == 0, f"{name}: rc {rc}: {err[-400:]}"):
        continue
    check(out == want, f"{name}: text {out!r}, ref's {want!r}")
    m = re.search(r"memory vulkan0: weights ([0-9.]+) MiB", err)
    if check(m, f"{name}: no memory line for vulkan0"):
        gpu_weights[name] = float(m.group(1))
    block = generation_block(err)
    if not check(block, f"{name}: no --explain block for the generation graph"):
        continue
    copies = [l for l in block if l.strip().startswith("copy ")]
    weights = [l for l in copies if re.search(r"copy '(blk\.|token_embd|output)", l)]
    check(not weights, f"{name}: weights copied in a step: {weights}")
    splits[name] = [l for l in block if l.startswith("split ")]
    print(f"{name}: {len(splits[name])} splits, {len(copies)} copies")

# The same rules, the same placement; the experts' bytes leave the GPU.
print(f"vulkan0 weights (MiB): {gpu_weights}")
if len(gpu_weights) == 5 and len(splits) == 5:
    check(splits["--cpu-moe"] == splits["-ot"], "-ot with --cpu-moe's pattern places differently")
    check(splits["--cpu-moe"] == splits["-ot, comma list"], "-ot's comma list places differently")
    g = gpu_weights
    check(g["--cpu-moe"] == g["-ot"] == g["-ot, comma list"] < g["--n-cpu-moe 1"] < g["none"],
          f"the experts did not leave vulkan0 as asked: {g}")

# The fit counts the experts in host memory: less on the GPU, more on the host.
fits = {}
for name, flags in [("none", []), ("--cpu-moe", ["--cpu-moe"])]:
    rc, out, err = run("-dev", "vulkan0,cpu-avx0", "--verbose", *flags)
    m = re.search(r"fit: vulkan0: .*?weights ([0-9.]+).*?cpu-avx0: .*?weights ([0-9.]+)", err)
    if check(rc == 0 and m, f"fit {name}: no fit line in {err[:400]!r}"):
        fits[name] = (float(m.group(1)), float(m.group(2)))
if len(fits) == 2:
    print(f"fit (GPU, host weights MiB): {fits}")
    check(fits["--cpu-moe"][0] < fits["none"][0] and fits["--cpu-moe"][1] > fits["none"][1],
          f"--cpu-moe did not move the experts' bytes to the host in the fit: {fits}")

# Bad rules: one error naming the rule, exit 1 or 2, no crash.
for flags, words in [(["-ot", "([=CPU"], ["([=CPU", "pattern"]),
                     (["-ot", "exps=nosuch0"], ["nosuch0", "vulkan0"]),
                     (["-ot", "noequals"], ["PATTERN=DEVICE"]),
                     (["-ot", "exps=opencl0"], ["opencl0"]),
                     (["--n-cpu-moe", "-1"], ["--n-cpu-moe"])]:
    rc, out, err = run(*GPU, *flags)
    check(rc in (1, 2) and all(w in err for w in words) and len(err.strip().splitlines()) <= 3,
          f"{flags}: rc {rc}, want an error naming {words}, got {err.strip()[-300:]!r}")

# The split shape: per layer one GPU split (attention, router) and one CPU
# split (experts), plus the output's, when every op has a kernel there.
if "--cpu-moe" in splits:
    rc, out, err = run(*GPU, "--explain", "--cpu-moe")
    fb = sorted(set(re.findall(r"fallback: (\w+) '[^']*' -> ref", err)))
    s = splits["--cpu-moe"]
    print("\n".join(s))
    if fb:
        print(f"skip: the split shape needs kernels of {', '.join(fb)} on vulkan0 / cpu-avx0 (ref runs them now)")
        if failures:
            print(f"{failures} failure(s)")
            sys.exit(1)
        sys.exit(77)
    check(len(s) <= 2 * N_LAYER + 1, f"--cpu-moe: {len(s)} splits, want at most {2 * N_LAYER + 1}")
    devs = [re.match(r"split \d+: ([\w-]+),", l).group(1) for l in s]
    check(devs == ["vulkan0", "cpu-avx0"] * N_LAYER + ["vulkan0"],
          f"splits on {devs}: want vulkan0 (attention, router) and cpu-avx0 (experts) per layer, then vulkan0")

if failures:
    print(f"{failures} failure(s)")
    sys.exit(1)
print("all checks passed")
