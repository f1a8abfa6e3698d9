"""Ctrl-C during tessera run: generation stops cleanly, the text so far and
the timings are printed, the exit status is 130, nothing crashes."""
import os
import select
import signal
import subprocess
import time

from cli_common import BIN, SHARED, Checker, require, crashed

MODEL = os.path.join(SHARED, "models", "synth-s-f32.gguf")
require(MODEL)
c = Checker("run_interrupt")

# -n -1 with --context-shift never ends by itself (a full context drops
# old tokens and goes on), so the run is still generating when the signal
# comes however fast the machine: it goes out once text past the prompt
# has arrived, not after a fixed sleep.
p = subprocess.Popen([BIN, "run", "-m", MODEL, "-p", "Once upon a time", "-n", "-1", "-c", "256",
                      "--context-shift", "--temp", "0", "-t", "1", "--device", "ref"],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
first = b""
deadline = time.time() + 120
while len(first) <= len("Once upon a time") and time.time() < deadline and p.poll() is None:
    ready, _, _ = select.select([p.stdout], [], [], 1.0)
    if ready:
        chunk = os.read(p.stdout.fileno(), 4096)
        if not chunk:
            break
        first += chunk
still_running = p.poll() is None
p.send_signal(signal.SIGINT)
out, err = p.communicate(timeout=60)
out = (first + out).decode("utf-8", "replace")
err = err.decode("utf-8", "replace")
c.check(still_running, "generation ended before the interrupt; nothing was tested")
c.check(p.returncode == 130 and not crashed(p.returncode, err), f"exit {p.returncode}: {err[-300:]}")
c.check("interrupted" in err and "tokens/s" in err, f"no timings after Ctrl-C: {err!r}")
c.check(out.startswith("Once upon a time") and len(out) > len("Once upon a time"), f"stdout {out[:80]!r}")
c.finish()
