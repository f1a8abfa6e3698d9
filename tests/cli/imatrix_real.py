"""tessera imatrix on SmolLM2-135M (Q4_1) against llama-imatrix on the same
model and text (4 chunks of 256 tokens of the GPL): the same entries and
token counts, and every weight's sums within 3% (relative L2 over its
columns; the two engines round the quantized products differently, and
ffn_down's inputs, silu(gate) * up, amplify that most: 1.5% measured).
Skipped when the peer's llama-imatrix is not built."""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_common import SHARED, SKIP, Checker, real_model, require, run  # noqa: E402
from imatrix_common import compare, peer_tool, text_head  # noqa: E402

TEXT = os.path.join(SHARED, "golden", "gpl3-12k.txt")


def main():
    require(TEXT)
    model = real_model()
    li = peer_tool("llama-imatrix")
    if not li:
        print("skip: the peer's llama-imatrix is not built")
        sys.exit(SKIP)
    c = Checker("imatrix_real")
    tmp = tempfile.mkdtemp(prefix="tessera-imatrix-real-")
    try:
        text = text_head(TEXT, tmp, 12000)
        args = ["-m", model, "-f", text, "-c", "256", "--chunks", "4", "-t", "2"]
        ours, theirs = os.path.join(tmp, "ours.gguf"), os.path.join(tmp, "theirs.gguf")
        rc, _, err = run(["imatrix"] + args + ["-o", ours], timeout=600)
        c.check(rc == 0, f"tessera imatrix failed ({rc}): {err[-400:]}")
        p = subprocess.run([li] + args + ["-o", theirs, "--no-ppl"], capture_output=True, timeout=600)
        c.check(p.returncode == 0, f"llama-imatrix failed: {p.stderr[-300:]}")
        if rc == 0 and p.returncode == 0:
            problems, worst_el, worst_l2 = compare(ours, theirs)
            c.check(not problems, f"entries or counts differ: {problems[:3]}")
            print(f"imatrix_real: worst weight (relative L2) {worst_l2:.2e}, worst element {worst_el:.2e}")
            c.check(worst_l2 <= 0.03, f"a weight's sums differ by {worst_l2:.2e} (relative L2; allowed 3e-2)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    c.finish()


if __name__ == "__main__":
    main()
