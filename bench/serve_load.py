#!/usr/bin/env python3
"""Load benchmark for `tessera serve` (standard library only).

For each --parallel value it starts `tessera serve` on a free loopback port,
sends a bounded load from this (second) process: REQUESTS completions with
CONCURRENCY client threads, each a greedy /v1/completions call of MAX_TOKENS
tokens; then it prints requests/s, generated tokens/s, p50/p99 latency, and the server's CPU time per generated token
(robust on a busy machine, where wall-clock numbers are not).

    bench/serve_load.py --bin build/tessera -m ../shared/models/stories260K.gguf
    bench/serve_load.py --bin build/tessera -m model.gguf --parallel 1 8 \\
        --requests 200 --concurrency 8 --max-tokens 64 -t 1

Everything stays on 127.0.0.1; each request has a 120 s timeout.
"""
import argparse
import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time

PROMPTS = ["Once upon a time", "The little dog", "Lily and Tom went to the park", "One day, a big bear",
           "The sun was", "Sam had a red ball", "In the garden there was", "Mom said"]


def start_server(args, parallel):
    cmd = [args.bin, "serve", "-m", args.model, "--host", "127.0.0.1", "--port", "0", "--parallel", str(parallel),
           "--queue", str(max(args.concurrency, 1) * 2)]
    if args.threads:
        cmd += ["-t", str(args.threads)]
    if args.ctx:
        cmd += ["-c", str(args.ctx)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        if "http://" in line:
            port = int(line.split("http://", 1)[1].split()[0].rsplit(":", 1)[1])
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
            return proc, port
    proc.kill()
    sys.exit("serve_load: the server did not start: " + proc.stderr.read())


def cpu_seconds(pid):
    """User + system CPU time of a process (Linux /proc): unlike wall time it
    hardly depends on what else the machine is running."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def one_request(port, i, max_tokens):
    body = json.dumps({"prompt": PROMPTS[i % len(PROMPTS)], "max_tokens": max_tokens, "temperature": 0,
                       "logit_bias": {"2": -100}})  # no early end: every request generates max_tokens
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    t0 = time.perf_counter()
    try:
        c.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
    finally:
        c.close()
    dt = time.perf_counter() - t0
    if r.status != 200:
        return dt, 0, r.status
    return dt, json.loads(data)["usage"]["completion_tokens"], 200


def run_load(args, parallel):
    proc, port = start_server(args, parallel)
    try:
        # warm-up: one request alone
        one_request(port, 0, 4)
        lat, toks, errors = [], [0], {}
        lock = threading.Lock()
        next_i = [0]

        def worker():
            while True:
                with lock:
                    i = next_i[0]
                    if i >= args.requests:
                        return
                    next_i[0] += 1
                dt, n, status = one_request(port, i, args.max_tokens)
                with lock:
                    if status == 200:
                        lat.append(dt)
                        toks[0] += n
                    else:
                        errors[status] = errors.get(status, 0) + 1

        cpu0 = cpu_seconds(proc.pid)
        t0 = time.perf_counter()
        threads = [threading.Thread(target=worker) for _ in range(args.concurrency)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        cpu = cpu_seconds(proc.pid) - cpu0
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    lat.sort()

    def pct(p):
        return lat[min(len(lat) - 1, int(round(p / 100.0 * (len(lat) - 1))))] * 1e3 if lat else float("nan")

    return {"parallel": parallel, "ok": len(lat), "errors": errors, "wall_s": wall,
            "req_per_s": len(lat) / wall, "tok_per_s": toks[0] / wall,
            "cpu_ms_per_tok": 1e3 * cpu / toks[0] if toks[0] else float("nan"), "p50_ms": pct(50), "p99_ms": pct(99)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.environ.get("TESSERA_BIN", "build/tessera"))
    ap.add_argument("-m", "--model", default=os.path.join(os.environ.get("TESSERA_SHARED", "../shared"),
                                                          "models", "stories260K.gguf"))
    ap.add_argument("--parallel", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("-t", "--threads", type=int, default=0, help="server CPU threads (default: all)")
    ap.add_argument("-c", "--ctx", type=int, default=0, help="server -c (default: its own)")
    ap.add_argument("--json", action="store_true", help="print one JSON line per run")
    args = ap.parse_args()
    if not (1 <= args.requests <= 100000 and 1 <= args.concurrency <= 256):
        sys.exit("serve_load: --requests 1..100000, --concurrency 1..256")
    print("serve_load: %d requests, %d concurrent, %d tokens each, model %s" %
          (args.requests, args.concurrency, args.max_tokens, os.path.basename(args.model)))
    try:
        print("load average before: %.1f (%d CPUs)" % (os.getloadavg()[0], os.cpu_count()))
    except OSError:
        pass
    print("%9s %6s %8s %10s %10s %10s %14s %s" % ("parallel", "ok", "req/s", "tokens/s", "p50 ms", "p99 ms",
                                                 "server cpu ms/tok", "errors"))
    for p in args.parallel:
        r = run_load(args, p)
        if args.json:
            print(json.dumps(r))
        else:
            print("%9d %6d %8.2f %10.1f %10.1f %10.1f %17.3f %s" %
                  (r["parallel"], r["ok"], r["req_per_s"], r["tok_per_s"], r["p50_ms"], r["p99_ms"],
                   r["cpu_ms_per_tok"], r["errors"] or "-"))


if __name__ == "__main__":
    main()
