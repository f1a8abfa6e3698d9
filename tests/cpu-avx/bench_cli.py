#!/usr/bin/env python3
"""tessera bench end to end: every output format on a small shared model,
the numbers are positive and consistent, and bad flags are one-line errors."""
import csv
import io
import json
import os
import subprocess
import sys

BIN = os.environ["TESSERA_BIN"]
# ../shared's, or the one the build makes from tests/data (same shape)
MODEL = os.path.join(os.environ["TESSERA_SHARED"], "models", "synth-s-Q4_0.gguf")
failures = 0


def check(cond, what):
    global failures
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures += 1


def bench(*args):
    return subprocess.run([BIN, "bench", *args], capture_output=True, text=True, timeout=300)


if not os.path.exists(MODEL):
    print("SKIP: " + MODEL + " is missing")
    sys.exit(77)

r = bench("--help")
check(r.returncode == 0 and "-p, --n-prompt" in r.stdout and "-o, --output" in r.stdout, "--help lists the flags")

r = bench("-m", MODEL, "-p", "16,8", "-n", "4", "-t", "1,2", "-r", "2", "-o", "json")
check(r.returncode == 0, "json run exits 0 (stderr: %s)" % r.stderr.strip()[-200:])
rows = json.loads(r.stdout) if r.returncode == 0 else []
check(len(rows) == 6, "json: 2 thread counts x (pp16, pp8, tg4) = 6 rows, got %d" % len(rows))
for row in rows:
    ok = (len(row["samples_ts"]) == 2 and all(s > 0 for s in row["samples_ts"])
          and abs(row["avg_ts"] - sum(row["samples_ts"]) / 2) < 1e-3 * row["avg_ts"] + 1e-3
          and row["stddev_ts"] >= 0 and row["model_n_params"] > 0
          and row["memory_bytes"] > row["model_size"])  # weights, KV and compute buffers
    check(ok, "json row %s t=%d: mean of 2 positive samples, stddev >= 0" % (row["test"], row["n_threads"]))

# -d: both tests start at that context depth, named as llama-bench names them
r = bench("-m", MODEL, "-p", "4", "-n", "2", "-d", "0,24", "-t", "1", "-r", "1", "-o", "json")
rows = json.loads(r.stdout) if r.returncode == 0 else []
names = [(row["test"], row["n_depth"]) for row in rows]
check(names == [("pp4", 0), ("tg2", 0), ("pp4 @ d24", 24), ("tg2 @ d24", 24)]
      and all(row["avg_ts"] > 0 for row in rows), "-d 0,24: pp4, tg2, pp4 @ d24, tg2 @ d24 (got %s)" % names)

# -d with a sliding-window model (window 16): each repetition's tg runs past
# the window, so rewinding to the depth must refill what the window dropped
SWA = os.path.join(os.environ["TESSERA_TEST_DATA"], "synth-gemma3-swa16-f32.gguf")
r = bench("-m", SWA, "-p", "0", "-n", "1200", "-d", "40", "-t", "1", "-r", "2", "-o", "json")
rows = json.loads(r.stdout) if r.returncode == 0 else []
check(len(rows) == 1 and rows[0]["avg_ts"] > 0,
      "-d 40 -n 1200 -r 2 on a window-16 model (its window cells hold fewer than 1240): both repetitions run (stderr: %s)" % r.stderr.strip()[-200:])

r = bench("-m", MODEL, "-p", "8", "-n", "0", "-r", "1", "-o", "csv", "--device", "ref")
lines = list(csv.DictReader(io.StringIO(r.stdout)))
check(r.returncode == 0 and len(lines) == 1 and lines[0]["n_prompt"] == "8" and float(lines[0]["avg_ts"]) > 0
      and lines[0]["devices"] == "ref", "csv: one pp8 row on ref")

r = bench("-m", MODEL, "-p", "0", "-n", "3", "-r", "1")
check(r.returncode == 0 and "| tg3 |" in r.stdout and "± " in r.stdout, "md: a tg3 row with mean ± sd")
check("| memory |" in r.stdout, "md: a memory column")

# -ctk/-ctv/-fa: the cache columns in every format
r = bench("-m", MODEL, "-p", "8", "-n", "2", "-r", "1", "-t", "1", "-ctk", "q8_0", "-ctv", "q4_0", "-fa", "on", "-o", "json")
rows = json.loads(r.stdout) if r.returncode == 0 else []
check(len(rows) == 2 and all((row["type_k"], row["type_v"], row["flash_attn"]) == ("q8_0", "q4_0", "on") and
                             row["avg_ts"] > 0 for row in rows), "json: -ctk q8_0 -ctv q4_0 -fa on rows (%s)" % r.stderr[-200:])
r = bench("-m", MODEL, "-p", "0", "-n", "2", "-r", "1", "-t", "1", "-ctk", "q8_0", "-fa", "on")
check(r.returncode == 0 and "| q8_0 | f16 | on | " in r.stdout and "| tg2 |" in r.stdout, "md: type_k, type_v and fa columns")
r = bench("-m", MODEL, "-p", "8", "-n", "0", "-r", "1", "-t", "1", "-fa", "auto", "-o", "csv")
lines = list(csv.DictReader(io.StringIO(r.stdout)))
check(r.returncode == 0 and len(lines) == 1 and lines[0]["flash_attn"] == "auto" and lines[0]["type_k"] == "f16",
      "csv: flash_attn and cache type columns")

# -mmp 0 (llama-bench's spelling): the weights read into memory, said in json
r = bench("-m", MODEL, "-p", "0", "-n", "2", "-r", "1", "-t", "1", "-mmp", "0", "-o", "json")
rows = json.loads(r.stdout) if r.returncode == 0 else []
check(len(rows) == 1 and rows[0]["use_mmap"] is False and rows[0]["avg_ts"] > 0, "json: -mmp 0 row (%s)" % r.stderr[-200:])
r = bench("-m", MODEL, "-p", "0", "-n", "2", "-r", "1", "-t", "1", "-o", "json")
rows = json.loads(r.stdout) if r.returncode == 0 else []
check(len(rows) == 1 and rows[0]["use_mmap"] is True, "json: mapped by default")
# -lm (llama-bench's newer spelling): none reads, mmap maps, and it wins over -mmp
for lm, mapped in (("none", False), ("mmap", True)):
    r = bench("-m", MODEL, "-p", "0", "-n", "2", "-r", "1", "-t", "1", "-mmp", "1" if not mapped else "0",
              "-lm", lm, "-o", "json")
    rows = json.loads(r.stdout) if r.returncode == 0 else []
    check(len(rows) == 1 and rows[0]["use_mmap"] is mapped, "json: -lm %s row (%s)" % (lm, r.stderr[-200:]))

for args, needle in [(["-m", MODEL, "-ctv", "q4_0", "-p", "4", "-n", "0", "-r", "1"], "-fa on"),
                     (["-m", MODEL, "-ctk", "q7"], "-ctk expects"), (["-m", MODEL, "-fa", "yes"], "-fa expects"),
                     (["-m", MODEL, "-mmp", "2"], "-mmp expects"), (["-m", MODEL, "-lm", "dio"], "-lm expects"),
                     (["-m", MODEL, "-p", "x"], "-p expects"), (["-m", MODEL, "-d", "-1"], "-d expects"), (["-m", MODEL, "-o", "xml"], "got 'xml'"),
                     (["-m", "/nonexistent.gguf"], "/nonexistent.gguf"), ([], "-m MODEL is required"),
                     (["-m", MODEL, "--frobnicate"], "unknown option '--frobnicate'"),
                     (["-m", MODEL, "-r"], "-r needs a value"),
                     (["-m", MODEL, "--device", "nosuchdev9", "-p", "4", "-n", "0", "-r", "1"], "nosuchdev9")]:
    r = bench(*args)
    err = r.stderr.strip()
    check(r.returncode != 0 and needle in err and len(err.splitlines()) == 1,
          "bad input %s: one-line error naming it (%r)" % (args[-1] if args else "(none)", err[:120]))

print("%d failed" % failures)
sys.exit(1 if failures else 0)
