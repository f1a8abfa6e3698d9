"""Helpers shared by the end-to-end CLI tests: paths from the test
environment, running the tessera binary through pipes, and checks."""
import os
import re
import subprocess
import sys

SKIP = 77

SHARED = os.environ.get("TESSERA_SHARED", "")
BIN = os.environ.get("TESSERA_BIN", "")
STORIES = os.path.join(SHARED, "models", "stories260K.gguf")
# tests/data as the build lays it out: its synthetic models are made there
TEST_DATA = os.environ.get("TESSERA_TEST_DATA", "")


def test_data(name):
    """Path of one of tests/data's files in the build tree."""
    return os.path.join(TEST_DATA, name)


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


def real_model(name="SmolLM2-135M-Instruct.Q4_1.gguf"):
    """Path of a real model fetched by scripts/fetch-models.sh (from
    TESSERA_MODEL_CACHE or ~/.cache/tessera/models). A missing model is a
    failure, not a skip: the suite is meant to run with it."""
    cache = os.environ.get("TESSERA_MODEL_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "tessera", "models")
    path = os.path.join(cache, name)
    if not os.path.exists(path):
        print(f"FAIL: {path} is missing: run scripts/fetch-models.sh", file=sys.stderr)
        sys.exit(1)
    return path


def best_cpu_device():
    """The fastest CPU device this build has (cpu-avx0, cpu-neon0, else ref),
    so tests do not land on a software GPU such as llvmpipe."""
    rc, out, _ = run(["devices"])
    for name in ("cpu-avx0", "cpu-neon0"):
        if re.search(rf"^\s*\d+\s+{name}\s", out, re.M):
            return name
    return "ref"


def peer_tool(name):
    """Path of a tool of the peer llama.cpp build (../shared/peer/build.sh,
    build-more.sh), or None when it is not built here."""
    import glob
    peer = os.environ.get("TESSERA_PEER_DIR", os.path.expanduser("~/.cache/tessera-peer"))
    bins = glob.glob(os.path.join(peer, "llama_cpp_python-*", "vendor", "llama.cpp", "build", "bin", name))
    return bins[0] if bins else None


def peer_completion():
    """The peer's llama-completion, or None."""
    return peer_tool("llama-completion")


def peer_text(binary, args, ours, tries=8):
    """llama-completion's text for args, judged against ours. On a busy
    machine llama-completion now and then exits before its last bytes
    reach the pipe (exit status 0, the text cut anywhere, at times empty:
    seen under CI's load and reproduced with a few runs at once), so a run
    whose text is a strict prefix of ours is run again, up to tries times;
    callers that can ask it for more tokens than we made do so, and a text
    that begins with ours counts as ours. Returns ours when a run matched,
    else the first text that differs otherwise, else the longest cut one."""
    want = ours.strip()
    longest = ""
    for _ in range(tries):
        r = subprocess.run([binary] + args, stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
        theirs = r.stdout.decode("utf-8", "replace")
        if r.returncode == 0 and theirs.strip().startswith(want):
            return ours
        if r.returncode != 0 or not want.startswith(theirs.strip()):
            return theirs
        if len(theirs) > len(longest):
            longest = theirs
    return longest
