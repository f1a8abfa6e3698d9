"""Helpers shared by the end-to-end CLI tests: paths from the test
environment, running the tessera binary through pipes, and checks."""
import os
import subprocess
import sys

SKIP = 77

SHARED = os.environ.get("TESSERA_SHARED", "")
BIN = os.environ.get("TESSERA_BIN", "")
STORIES = os.path.join(SHARED, "models", "stories260K.gguf")


class Checker:
    """Collects failures so one run reports all of them."""

    def __init__(self, name):
        self.name = name
        self.failures = 0

    def check(self, cond, msg):
        if not cond:
            self.failures += 1
            print(f"{self.name}: FAIL: {msg}", file=sys.stderr)
        return cond

    def finish(self):
        if self.failures:
            print(f"{self.name}: {self.failures} check(s) failed", file=sys.stderr)
            sys.exit(1)
        print(f"{self.name}: all checks passed")
        sys.exit(0)


def require(*paths):
    """Skip (exit 77) when the binary or a reference file is missing."""
    if not BIN or not os.access(BIN, os.X_OK):
        print(f"skip: tessera binary not found (TESSERA_BIN={BIN!r})")
        sys.exit(SKIP)
    for p in paths:
        if not os.path.exists(p):
            print(f"skip: reference file {p} is missing")
            sys.exit(SKIP)


def run(args, stdin_text=None, timeout=120):
    """Run tessera with args; stdin is a pipe (closed at once when no text
    is given). Returns (returncode, stdout, stderr) as text."""
    p = subprocess.run(
        [BIN] + args,
        input=(stdin_text or "").encode("utf-8"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        timeout=timeout,
    )
    out = p.stdout.decode("utf-8", errors="replace")
    err = p.stderr.decode("utf-8", errors="replace")
    return p.returncode, out, err


def crashed(rc, err):
    """A signal, a sanitizer report or an assertion: never acceptable."""
    return rc < 0 or "Sanitizer" in err or "runtime error" in err or "Assertion" in err
