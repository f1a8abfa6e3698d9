"""Helpers shared by the opencl plugin's Python tests (standard library only)."""
import json
import os
import re
import subprocess
import sys

SKIP = 77
SHARED = os.environ.get("TESSERA_SHARED", "")
BIN = os.environ.get("TESSERA_BIN", "")
BUILD = os.environ.get("TESSERA_BUILD_ROOT", "")
STORIES = os.path.join(SHARED, "models", "stories260K.gguf")
GOLDEN = os.path.join(SHARED, "golden", "stories260K.jsonl")
STORY = os.path.join(SHARED, "golden", "story.txt")


def run(args, env=None, timeout=300):
    """(exit code, stdout, stderr) of tessera ARGS, with extra environment."""
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([BIN] + args, capture_output=True, env=e, timeout=timeout)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def require_opencl():
    """Skip (exit 77) unless the binary, the data and an OpenCL device exist;
    returns the CPU device to pair with opencl0."""
    for p in (BIN, STORIES, GOLDEN, STORY):
        if not p or not os.path.exists(p):
            print(f"skip: {p!r} is missing")
            sys.exit(SKIP)
    rc, out, err = run(["devices"])
    if not re.search(r"^\s*\d+\s+opencl0\s", out, re.M):
        reason = re.search(r"libtessera-backend-opencl\.so: (.*)", out + err)
        print("skip: no OpenCL device:", reason.group(1) if reason else out + err)
        sys.exit(SKIP)
    return "cpu-avx0" if re.search(r"^\s*\d+\s+cpu-avx0\s", out, re.M) else "ref"


def first_golden():
    with open(GOLDEN, "rb") as f:
        return json.loads(f.readline().decode("utf-8", errors="replace"))


class Checker:
    def __init__(self, name):
        self.name, self.failures, self.checks = name, 0, 0

    def check(self, cond, msg):
        self.checks += 1
        if not cond:
            self.failures += 1
            print("FAIL:", msg)
        return cond

    def finish(self):
        print(f"{self.name}: {self.checks - self.failures}/{self.checks} checks passed")
        sys.exit(1 if self.failures else 0)
