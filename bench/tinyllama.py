#!/usr/bin/env python3
"""tinyllama.py — issue 5's comparison in one command.

Generates the synthetic TinyLlama-1.1B-shaped models that are missing (Q4_0,
Q8_0, Q4_K_M, F16; see README.md), measures the memory bandwidth with membw,
runs `tessera bench` (pp512 and tg128, 2 threads, 3 repetitions by default)
and prints, per model: tokens/s with spread, the ratio to llama.cpp's figures
from the issue (2-core AMD EPYC, llama-bench), and tg as a fraction of the
bandwidth ceiling (bandwidth / model bytes) next to llama.cpp's fraction on
its machine (55 GB/s).

Usage: bench/tinyllama.py [--build build] [--models DIR] [--types Q4_0,...]
                          [-p 512] [-n 128] [-t 2] [-r 3] [--device cpu-avx0]
Run it on an otherwise idle machine (it prints the load average before and
after).
"""
import argparse
import json
import os
import subprocess
import sys

SHAPE = ["--dim", "2048", "--layers", "22", "--heads", "32", "--kv-heads", "4",
         "--ffn", "5632", "--vocab", "32000", "--ctx", "2048"]
# llama.cpp on the machine: pp512, tg128 tokens/s
LLAMA = {"Q4_0": (99.0, 51.7), "Q8_0": (88.0, 28.2), "Q4_K_M": (60.0, 40.9), "F16": (76.0, 23.0)}
LLAMA_BW = 55e9
# the bar: pp >= 1.3x; tg >= 1.2x on quantized models, >= 1x on F16
BAR = {"Q4_0": (1.3, 1.2), "Q8_0": (1.3, 1.2), "Q4_K_M": (1.3, 1.2), "F16": (1.3, 1.0)}


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, **kw)


def loadavg():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--models", default="models")
    ap.add_argument("--types", default="Q4_0,Q8_0,Q4_K_M,F16")
    ap.add_argument("--vocab-from", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared",
                                                         "models", "stories260K.gguf"))
    ap.add_argument("-p", default="512")
    ap.add_argument("-n", default="128")
    ap.add_argument("-t", default="2")
    ap.add_argument("-r", default="3")
    ap.add_argument("--device", default=None)
    a = ap.parse_args()

    os.makedirs(a.models, exist_ok=True)
    types = a.types.split(",")
    paths = []
    for t in types:
        path = os.path.join(a.models, "tinyllama-%s.gguf" % t)
        if not os.path.exists(path):
            print("generating %s ..." % path, file=sys.stderr)
            run([os.path.join(a.build, "tools", "tessera-synth"), "-o", path, "--vocab-from", a.vocab_from]
                + SHAPE + ["--type", t])
        paths.append(path)

    membw = os.path.join(a.build, "membw")
    src = os.path.join(os.path.dirname(__file__), "membw.c")
    run(["cc", "-O2", "-mavx2", "-pthread", src, "-o", membw])
    out = run([membw, a.t, "512"], capture_output=True).stdout
    bw = float(out.split(":")[-1].split("GB/s")[0]) * 1e9
    print(out.strip())

    print("load average before: %s" % loadavg())
    cmd = [os.path.join(a.build, "tessera"), "bench", "-p", a.p, "-n", a.n, "-t", a.t, "-r", a.r, "-o", "json"]
    for p in paths:
        cmd += ["-m", p]
    if a.device:
        cmd += ["--device", a.device]
    rows = json.loads(run(cmd, capture_output=True).stdout)
    print("load average after: %s" % loadavg())

    print("| weights | test | t/s | llama.cpp | ratio | bar | tg / bandwidth ceiling (llama.cpp's): ratio |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for t, path in zip(types, paths):
        for r in rows:
            if r["model_path"] != path:
                continue
            pp = r["n_prompt"] > 0
            ref = LLAMA.get(t, (0, 0))[0 if pp else 1]
            bar = BAR.get(t, (0, 0))[0 if pp else 1]
            ratio = r["avg_ts"] / ref if ref else 0
            frac = ""
            if not pp:
                ours = r["avg_ts"] * r["model_size"] / bw
                theirs = ref * r["model_size"] / LLAMA_BW if ref else 0
                frac = "%.0f%% (%.0f%%): %.2fx" % (100 * ours, 100 * theirs, ours / theirs if theirs else 0)
            print("| %s | %s | %.2f ± %.2f | %.1f | %.2f | %.1f | %s |" % (
                t, r["test"], r["avg_ts"], r["stddev_ts"], ref, ratio, bar, frac))


if __name__ == "__main__":
    main()
