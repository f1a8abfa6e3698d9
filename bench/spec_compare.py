#!/usr/bin/env python3
"""spec_compare.py — speculative decoding's speed-up, Tessera and llama.cpp
side by side (issue 45's proof).

For each pair (target with a draft model, or target with n-gram lookup) it
measures, in rounds that alternate the engines (ours plain, ours
speculative, theirs plain, theirs speculative, ...), the generation rate of
greedy decoding with and without speculation, and prints per engine the
median speed-up (speculative / plain t/s) with its range over the rounds
and the acceptance rate. Ours is `tessera run --verbose` (its "generation:"
and "speculative:" lines); llama.cpp's is llama-server (the `timings` of a
/completion request: predicted_per_second, draft_n, draft_n_accepted), one
server per configuration, started once.

  bench/spec_compare.py --target T.gguf (--draft D.gguf | --ngram)
        --prompt FILE [-n 128] [-t 2] [--rounds 3] [--draft-max 16]
        [--draft-p-min 0.75] [--build build] [--llama-bin DIR]

With --cpu-time each run is also timed by CPU seconds (the process's, for
ours; llama-server's across the request, from /proc) so a loaded machine's
share of the CPU cancels out of the ratio.
"""
import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

PEER = os.path.expanduser("~/.cache/tessera-peer/llama_cpp_python-0.3.36/vendor/llama.cpp/build/bin")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def proc_cpu(pid):
    """CPU seconds (user + system) of a process and its threads."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ours(a, spec):
    cmd = [os.path.join(a.build, "tessera"), "run", "-m", a.target, "-f", a.prompt, "-n", str(a.n), "--temp", "0",
           "-t", str(a.t), "--verbose"]
    if spec and a.draft:
        cmd += ["-md", a.draft, "--draft-max", str(a.draft_max), "--draft-p-min", str(a.draft_p_min)]
    elif spec:
        cmd += ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", str(a.ngram_n),
                "--spec-ngram-simple-size-m", str(a.draft_max)]
    t0 = os.times()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stderr
    t1 = os.times()
    m = re.search(r"generation:\s+([0-9.]+) ms / (\d+) tokens", out)
    if not m:
        sys.exit("spec_compare: no generation line from %s:\n%s" % (" ".join(cmd), out[-2000:]))
    r = {"tps": int(m.group(2)) / (float(m.group(1)) / 1000), "n": int(m.group(2)),
         "cpu": (t1.children_user + t1.children_system) - (t0.children_user + t0.children_system)}
    m = re.search(r"drafted (\d+), accepted (\d+)", out)
    if m:
        r["drafted"], r["accepted"] = int(m.group(1)), int(m.group(2))
    return r


class Server:
    def __init__(self, a, spec):
        self.port = free_port()
        cmd = [os.path.join(a.llama_bin, "llama-server"), "-m", a.target, "-t", str(a.t), "--port", str(self.port),
               "-np", "1", "--no-warmup", "-c", "4096"]
        if spec and a.draft:
            # -md alone loads the draft but speculates only with the type named
            cmd += ["-md", a.draft, "-td", str(a.t), "--spec-type", "draft-simple", "--spec-draft-n-max",
                    str(a.draft_max), "--draft-p-min", str(a.draft_p_min)]
        elif spec:
            cmd += ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", str(a.ngram_n),
                    "--spec-ngram-simple-size-m", str(a.draft_max)]
        self.p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(1200):
            try:
                urllib.request.urlopen("http://127.0.0.1:%d/health" % self.port, timeout=5).read()
                return
            except Exception:
                if self.p.poll() is not None:
                    sys.exit("spec_compare: llama-server exited: %s" % " ".join(cmd))
                time.sleep(0.5)
        sys.exit("spec_compare: llama-server did not come up")

    def run(self, a):
        body = json.dumps({"prompt": open(a.prompt).read(), "n_predict": a.n, "temperature": 0,
                           "cache_prompt": False}).encode()
        req = urllib.request.Request("http://127.0.0.1:%d/completion" % self.port, body,
                                     {"Content-Type": "application/json"})
        c0 = proc_cpu(self.p.pid)
        t = json.loads(urllib.request.urlopen(req, timeout=3600).read())["timings"]
        r = {"tps": t["predicted_per_second"], "n": t["predicted_n"], "cpu": proc_cpu(self.p.pid) - c0}
        if "draft_n" in t:
            r["drafted"], r["accepted"] = t["draft_n"], t["draft_n_accepted"]
        return r

    def close(self):
        self.p.terminate()
        self.p.wait()


def summary(name, rows):
    plain, spec = rows["plain"], rows["spec"]
    sp = [s["tps"] / p["tps"] for p, s in zip(plain, spec)]
    # CPU seconds per generated token, plain over speculative (prompt included for both)
    cp = [(p["cpu"] / p["n"]) / (s["cpu"] / s["n"]) for p, s in zip(plain, spec)]
    dr = sum(s.get("drafted", 0) for s in spec)
    ac = sum(s.get("accepted", 0) for s in spec)
    print("%-10s plain %6.2f t/s, speculative %6.2f t/s (medians): speed-up x%.2f median (%.2f-%.2f); "
          "by CPU time x%.2f (%.2f-%.2f); acceptance %d/%d = %.3f"
          % (name, statistics.median(p["tps"] for p in plain), statistics.median(s["tps"] for s in spec),
             statistics.median(sp), min(sp), max(sp), statistics.median(cp), min(cp), max(cp), ac, dr,
             ac / dr if dr else 0))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", required=True)
    ap.add_argument("--draft")
    ap.add_argument("--ngram", action="store_true")
    ap.add_argument("--prompt", required=True)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--draft-max", type=int, default=16)
    ap.add_argument("--draft-p-min", type=float, default=0.75)
    ap.add_argument("--ngram-n", type=int, default=12)
    ap.add_argument("--build", default="build")
    ap.add_argument("--llama-bin", default=PEER)
    ap.add_argument("--only", choices=["tessera", "llama"], help="one engine only")
    a = ap.parse_args()
    if bool(a.draft) == a.ngram:
        sys.exit("spec_compare: give --draft FILE or --ngram")
    print("# %s, %d CPUs, load average %s" % (a.target, os.cpu_count(), open("/proc/loadavg").read().strip()))
    engines = ["tessera", "llama"] if not a.only else [a.only]
    servers = {}
    if "llama" in engines:
        servers = {"plain": Server(a, False), "spec": Server(a, True)}
    rows = {e: {"plain": [], "spec": []} for e in engines}
    try:
        for i in range(a.rounds):
            for e in engines:
                for mode in ("plain", "spec"):
                    r = ours(a, mode == "spec") if e == "tessera" else servers[mode].run(a)
                    rows[e][mode].append(r)
                    print("round %d %-8s %-6s %6.2f t/s %4d tokens %6.2f CPU s%s" % (
                        i + 1, e, mode, r["tps"], r["n"], r["cpu"],
                        "  accepted %d/%d" % (r["accepted"], r["drafted"]) if "drafted" in r else ""), flush=True)
    finally:
        for s in servers.values():
            s.close()
    print("# load average at the end %s" % open("/proc/loadavg").read().strip())
    for e in engines:
        summary(e, rows[e])


if __name__ == "__main__":
    main()
