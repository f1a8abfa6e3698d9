"""The engine's log reaches Python's logging on the logger "tessera": with
TESSERA_VERBOSE=2 its debug lines (plugins probed at init) arrive as DEBUG
records, one line each without the newline, on the main thread by the
interpreter's pending calls (no flush needed), also while two threads
generate at once; with logging not configured nothing is printed (the
package's NullHandler), as a library's log should be. Each case runs in a
fresh interpreter: the engine initialises once per process."""
import os
import subprocess
import sys

from conftest import MODEL

SCRIPT = r'''
import logging, sys, threading
records = []


class Keep(logging.Handler):
    def emit(self, record):
        records.append((record.name, record.levelno, record.getMessage(), threading.current_thread().name))


if sys.argv[2] == "configured":
    logging.getLogger("tessera").addHandler(Keep())
    logging.getLogger("tessera").setLevel(logging.DEBUG)
import tessera
model = tessera.Model(sys.argv[1], n_ctx=256)
texts = []
workers = [threading.Thread(target=lambda: texts.append(model.generate("Hi", max_tokens=4, temperature=0)))
           for _ in range(2)]
for w in workers:
    w.start()
for w in workers:
    w.join()
assert len(texts) == 2 and texts[0] == texts[1], texts
for _ in range(10000):  # a few bytecodes: the interpreter runs its pending calls
    pass
if sys.argv[2] == "configured":
    probed = [r for r in records if "device(s) probed" in r[2]]
    assert probed, records
    assert all(r[0] == "tessera" and r[1] == logging.DEBUG for r in probed), probed
    assert all(not r[2].endswith("\n") for r in records), records
    assert all(r[3] == "MainThread" for r in records), records
print("ok", len(records))
'''


def run(mode):
    env = dict(os.environ, TESSERA_VERBOSE="2")
    return subprocess.run([sys.executable, "-c", SCRIPT, MODEL, mode], capture_output=True, text=True, env=env,
                          timeout=300)


def test_debug_lines_reach_logging():
    p = run("configured")
    assert p.returncode == 0 and p.stdout.startswith("ok"), p.stdout + p.stderr
    assert int(p.stdout.split()[1]) > 0


def test_nothing_printed_without_configuration():
    p = run("silent")
    assert p.returncode == 0 and p.stdout.startswith("ok"), p.stdout + p.stderr
    assert "probed" not in p.stderr and "tessera:" not in p.stderr, p.stderr
