#!/usr/bin/env python3
"""Print the names of the tests one of scripts/test.sh's extra passes runs.

Usage: scripts/select_tests.py PASS < tests.json   (meson introspect --tests)
  repository  the second pass on the repository's own reference files
              (meson test --setup repository): the CPU tests of suites unit
              and model that read reference files. Left out: the GPU and
              conformance tests (they read no reference file the CPU tests
              do not, and take the longest), suite cli (its scripts read
              stories260K, which the repository holds too, and start
              servers), the bindings, the per-level reruns of a test
              (the unforced run reads the same files) and the tests that
              read only models they make themselves.
  sanitize    the suite under ASan+UBSan, less 'slow': every CPU test, and
              of the GPU plugins (lavapipe, PoCL: the time is the drivers'
              JIT code, which the sanitizers do not see) a representative
              set that drives each plugin's host code through loading,
              whole-graph and split runs, the KV cache, states, LoRA and
              the encoders; their full lists run in the main pass.
CI's time (.ci/run, 2 cores) is why these are subsets; run the passes in
full (meson test -C build-sanitize --no-suite slow) before resolving an issue.
"""
import json
import re
import sys

# Tests that read only models they make themselves, or repeat another
# test's files at a forced CPU level: nothing the repository pass checks.
REPOSITORY_SKIP = re.compile(r"-avx2|-avx512|novnni|avxvnni|cpu-moe|imatrix|arch-keys|_ppl")

SANITIZE_GPU = {
    "vulkan-plugin", "vulkan-devices", "vulkan-out-of-memory",
    "vulkan-golden-synth-s-Q4_0-ngl99", "vulkan-golden-synth-s-f32-ngl2",
    "vulkan-kv-q8_0-synth-s-f32", "vulkan-whole-graph-synth-qwen3moe",
    "golden-synth-qwen3moe-f32-vulkan0", "state-synth-lfm2-vulkan0",
    "lora-golden-r4-vulkan0",
    "opencl_plugin", "opencl_cli", "opencl-golden-synth-s-Q4_0-ngl99",
    "opencl-golden-stories260K-ngl2", "opencl-kv-model-synth-s-q8_0",
    "golden-synth-qwen3moe-f32-opencl0", "state-synth-lfm2-opencl0",
    "lora-golden-r4-opencl0", "clip_opencl0",
}


def suites(t):
    return {s.split(":")[-1] for s in t["suite"]}


def is_gpu(name):
    return "vulkan" in name or "opencl" in name


def repository(t):
    s, n = suites(t), t["name"]
    return bool(s & {"unit", "model"}) and not s & {"slow", "conformance", "fuzz", "cli", "bindings"} \
        and not is_gpu(n) and not any(w in n for w in ("compat", "python_", "java_", "c_install")) \
        and not REPOSITORY_SKIP.search(n)


def sanitize(t):
    s, n = suites(t), t["name"]
    if s & {"slow", "fuzz"}:
        return False
    return not is_gpu(n) or n in SANITIZE_GPU


def main():
    passes = {"repository": repository, "sanitize": sanitize}
    if len(sys.argv) != 2 or sys.argv[1] not in passes:
        sys.exit(__doc__)
    keep = passes[sys.argv[1]]
    for t in json.load(sys.stdin):
        if keep(t):
            print(t["name"])


if __name__ == "__main__":
    main()
