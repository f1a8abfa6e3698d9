"""tessera imatrix on every device of this build: the activations are
observed in the step graph (kept as outputs and read back like the logits),
so a GPU plugin must give the matrix the reference backend gives. On
synth-s-f32 with all layers on the device (-ngl 99), one chunk of 64 tokens:
the same entries and counts as on ref, every sum within 1e-3 relative
(measured: lavapipe 3.9e-4, PoCL 2.6e-4, cpu-avx 3.6e-4). Devices absent here are skipped."""
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_common import SHARED, SKIP, Checker, require, run  # noqa: E402
from imatrix_common import compare, text_head  # noqa: E402

MODEL = os.path.join(SHARED, "models", "synth-s-f32.gguf")
TEXT = os.path.join(SHARED, "golden", "gpl3-12k.txt")


def main():
    require(MODEL, TEXT)
    rc, out, _ = run(["devices"])
    devices = [d for d in re.findall(r"^\s*\d+\s+(\S+)\s", out, re.M) if d != "ref"]
    if not devices:
        print("skip: no device but ref")
        sys.exit(SKIP)
    c = Checker("imatrix_devices")
    tmp = tempfile.mkdtemp(prefix="tessera-imatrix-dev-")
    try:
        text = text_head(TEXT, tmp, 2000)
        args = ["imatrix", "-m", MODEL, "-f", text, "-c", "64", "--chunks", "1", "-t", "2"]
        ref = os.path.join(tmp, "ref.gguf")
        rc, _, err = run(args + ["--device", "ref", "-o", ref], timeout=600)
        if c.check(rc == 0, f"on ref: {err[-300:]}"):
            for dev in devices:
                got = os.path.join(tmp, f"{dev}.gguf")
                rc, _, err = run(args + ["--device", dev, "-ngl", "99", "-o", got], timeout=600)
                if not c.check(rc == 0, f"on {dev}: {err[-300:]}"):
                    continue
                problems, worst_el, _ = compare(got, ref)
                c.check(not problems, f"{dev}: entries or counts differ from ref: {problems[:3]}")
                c.check(worst_el <= 1e-3, f"{dev}: a sum differs from ref's by {worst_el:.2e}")
                print(f"imatrix_devices: {dev}: worst element {worst_el:.2e} against ref")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    c.finish()


if __name__ == "__main__":
    main()
