"""The opencl plugin end to end through the tessera binary (PoCL in CI):
- full and partial offload (--device opencl0,CPU -ngl N) reproduce the
  stories260K greedy golden, and --explain shows the layers on opencl0;
- perplexity with 3 offloaded layers is llama.cpp's 4.0412;
- copies instead of mapped memory (TESSERA_OPENCL_NO_MAP=1) give the same text;
- a kernel build failure (TESSERA_OPENCL_INJECT_BUILD_ERROR=1) prints the
  build log once and the run falls back to the CPU with the same text;
- TESSERA_OPENCL_DEVICE_TYPE=gpu on a machine with only a CPU driver, or a
  misspelt type: opencl is rejected with the reason;
- no ICD (OCL_ICD_VENDORS pointing at an empty folder): opencl is listed as
  rejected with the reason, a run on the CPU is unaffected, and asking
  for opencl0 is a one-line error."""
import os
import re
import tempfile

from ocl_common import STORIES, STORY, Checker, first_golden, require_opencl, run

cpu = require_opencl()
g = first_golden()
want = g["prompt"] + g["greedy_text"]
n = str(len(g["greedy"]))
gen = ["run", "-m", STORIES, "-p", g["prompt"], "-n", n, "--temp", "0"]
c = Checker("opencl_cli")

for ngl in ["99", "2"]:
    rc, out, err = run(gen + ["--device", f"opencl0,{cpu}", "-ngl", ngl, "--explain"])
    c.check(rc == 0, f"-ngl {ngl}: exit {rc}: {err.strip()[-400:]}")
    c.check(out.rstrip("\n") == want, f"-ngl {ngl}: text differs: {out!r}")
    on_ocl = sum(int(b) - int(a) + 1 for a, b in re.findall(r"split \d+: opencl0, nodes (\d+)\.\.(\d+)", err))
    print(f"-ngl {ngl}: {on_ocl} nodes of the prompt graph and the generation graphs ran on opencl0")
    c.check(on_ocl > (100 if ngl == "99" else 20), f"-ngl {ngl}: only {on_ocl} nodes on opencl0:\n{err[:1500]}")
    c.check("building the kernels failed" not in err, f"-ngl {ngl}: a build failure: {err[-800:]}")

rc, out, err = run(["perplexity", "-m", STORIES, "-f", STORY, "-c", "128", "-ngl", "3",
                    "--device", f"opencl0,{cpu}"])
m = re.search(r"PPL = ([0-9.]+)", out)
ppl = float(m.group(1)) if m else -1.0
print(f"perplexity with 3 layers on opencl0: {ppl:.4f} (llama.cpp 4.0412)")
c.check(rc == 0 and abs(ppl - 4.0412) <= 0.001, f"perplexity {ppl}: {err.strip()[-400:]}")

rc, out, err = run(gen + ["--device", f"opencl0,{cpu}", "-ngl", "99"], env={"TESSERA_OPENCL_NO_MAP": "1"})
c.check(rc == 0 and out.rstrip("\n") == want, f"NO_MAP: exit {rc}, text {out!r}: {err[-400:]}")
rc, out, err = run(["devices"], env={"TESSERA_OPENCL_NO_MAP": "1"})
c.check(re.search(r"opencl0 .*\n.*host-visible: no", out) is not None, f"NO_MAP: opencl0 still host-visible:\n{out}")
# ABI 1.1: CL_DEVICE_MAX_MEM_ALLOC_SIZE is the device's largest allocation
c.check(re.search(r"opencl0 .*\n.*\n\s+largest allocation: [0-9.]+ (bytes|MiB|GiB);", out) is not None,
        f"opencl0 does not report its largest allocation:\n{out}")

rc, out, err = run(gen + ["--device", f"opencl0,{cpu}", "-ngl", "99"],
                   env={"TESSERA_OPENCL_INJECT_BUILD_ERROR": "1"})
c.check(rc == 0, f"build failure: exit {rc}: {err[-400:]}")
c.check(out.rstrip("\n") == want, f"build failure: the CPU fallback's text differs: {out!r}")
c.check(err.count("building the kernels failed") == 1, f"build failure: not reported exactly once:\n{err[-1500:]}")
c.check("Build log:" in err and "error" in err.split("Build log:")[-1],
        f"build failure: no build log:\n{err[-1500:]}")

# Devices of another type than asked for: none, with the reason.
rc, out, err = run(["devices"])
if re.search(r"^\s*\d+\s+opencl0\s+accelerator", out, re.M):
    rc, out, err = run(["devices"], env={"TESSERA_OPENCL_DEVICE_TYPE": "gpu"})
    c.check(re.search(r"libtessera-backend-opencl\.so: rejected: .*no GPU device", out + err) is not None,
            f"TESSERA_OPENCL_DEVICE_TYPE=gpu: opencl not rejected with a reason:\n{out}{err}")
rc, out, err = run(["devices"], env={"TESSERA_OPENCL_DEVICE_TYPE": "gpus"})
c.check(re.search(r"rejected: .*TESSERA_OPENCL_DEVICE_TYPE='gpus' is not one of", out + err) is not None,
        f"a bad TESSERA_OPENCL_DEVICE_TYPE is not named:\n{out}{err}")

with tempfile.TemporaryDirectory() as empty:
    no_icd = {"OCL_ICD_VENDORS": empty}
    rc, out, err = run(["devices"], env=no_icd)
    c.check(re.search(r"libtessera-backend-opencl\.so: rejected: .*no OpenCL platform", out + err) is not None,
            f"no ICD: opencl not rejected with a reason:\n{out}{err}")
    rc, out, err = run(gen + ["--device", cpu], env=no_icd)
    c.check(rc == 0 and out.rstrip("\n") == want, f"no ICD: exit {rc}, text {out!r}: {err[-400:]}")
    rc, out, err = run(gen + ["--device", "opencl0", "-ngl", "99"], env=no_icd)
    lines = [l for l in err.strip().splitlines() if l.strip()]
    c.check(rc != 0 and len(lines) == 1 and "opencl0" in lines[0],
            f"no ICD, --device opencl0: exit {rc}, want one line naming opencl0:\n{err}")
    if lines:
        print("no ICD, --device opencl0:", lines[-1])
c.finish()
