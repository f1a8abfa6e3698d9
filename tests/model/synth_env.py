"""What the tessera-synth tests share: the paths they need (exit 77 when one
is missing), check() that counts failures, and finish()."""
import os
import sys

SHARED = os.environ.get("TESSERA_SHARED", "")
BIN = os.environ.get("TESSERA_BIN", "")
SYNTH = sys.argv[1] if len(sys.argv) > 1 else ""
# cross builds: run the target's tessera-synth through the emulator
WRAP = os.environ.get("TESSERA_EXE_WRAPPER", "").split()
VOCAB = os.path.join(SHARED, "models", "stories260K.gguf")
for p in (BIN, SYNTH, VOCAB):
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


def finish():
    if failures:
        print(f"{failures} failure(s)")
        sys.exit(1)
    print("all checks passed")
