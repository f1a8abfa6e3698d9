#!/usr/bin/env python3
"""The cpu-avx products end to end against the ref oracle: perplexity of
every synth-s model over story.txt in chunks of 64 tokens, so prompts go
through the packed-panel GEMMs (N >= 16) and generation-sized products
through the dot kernels. Both devices quantize activations the same way, so
the two perplexities differ only by summation order, which these random-
weight models amplify: measured 0.01-0.5% (the GEMM and the dot kernels
differ from each other by as much), checked at 2%. A wrong scale, min or
column tile moves whole rows of logits and the perplexity by far more."""
import os
import re
import subprocess
import sys

BIN = os.environ["TESSERA_BIN"]
SHARED = os.environ["TESSERA_SHARED"]
TEXT = os.path.join(SHARED, "golden", "story.txt")
TYPES = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K_S", "Q4_K_S", "Q5_K_S", "Q6_K",
         "Q4_K_M-mix", "F16", "BF16"]
TOL = 2e-2
failures = 0


def ppl(model, device):
    r = subprocess.run([BIN, "perplexity", "-m", model, "-f", TEXT, "-c", "64", "--chunks", "2", "-t", "2",
                        "--device", device], capture_output=True, text=True, timeout=300)
    m = re.search(r"Final estimate: PPL = ([0-9.]+)", r.stdout + r.stderr)
    if r.returncode != 0 or not m:
        return None, (r.stderr.strip().splitlines() or ["no output"])[-1]
    return float(m.group(1)), ""


devs = subprocess.run([BIN, "devices"], capture_output=True, text=True, timeout=60).stdout
if "cpu-avx0" not in devs:
    print("SKIP: no cpu-avx0 device (plugin not built or CPU without AVX2)")
    sys.exit(77)
if not os.path.exists(TEXT):
    print("SKIP: " + TEXT + " is missing")
    sys.exit(77)

# The synth-s files: ../shared's, or the ones the build makes from tests/data.
models = {t: os.path.join(SHARED, "models", "synth-s-%s.gguf" % t) for t in TYPES}
missing = [m for m in models.values() if not os.path.exists(m)]
if len(missing) == len(models):
    print("SKIP: no synth-s model in %s (the build makes them from tests/data): %s is missing"
          % (os.path.join(SHARED, "models"), os.path.basename(missing[0])))
    sys.exit(77)
for m in missing:
    print("not run: %s is missing" % m)

for t, model in models.items():
    if model in missing:
        continue
    ref, err1 = ppl(model, "ref")
    avx, err2 = ppl(model, "cpu-avx0")
    if ref is None or avx is None:
        print("FAIL %-11s perplexity failed: %s" % (t, err1 or err2))
        failures += 1
        continue
    rel = abs(avx - ref) / ref
    ok = rel <= TOL
    print("%s %-11s ref %.4f cpu-avx0 %.4f rel %.2g (tol %g)" % ("ok  " if ok else "FAIL", t, ref, avx, rel, TOL))
    failures += not ok

print("%d failed" % failures)
sys.exit(1 if failures else 0)
