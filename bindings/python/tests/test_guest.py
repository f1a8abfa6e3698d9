"""The library is a guest in the Python process: after loading a model and
generating, Python's own signal handling is as it was. SIGINT keeps
Python's handler (KeyboardInterrupt from os.kill and signal.raise_signal),
and the process-wide handlers of SIGSEGV, SIGBUS and SIGILL (read with
sigaction(2) through ctypes: faulthandler, a sanitizer or the host
application may own them) are the ones Python had. Each check runs in a
fresh interpreter, so what this pytest process did before cannot hide it."""
import os
import subprocess
import sys

from conftest import MODEL

SCRIPT = r'''
import ctypes, os, signal, sys

libc = ctypes.CDLL(None, use_errno=True)


class Sigaction(ctypes.Structure):  # struct sigaction of glibc on Linux
    _fields_ = [("handler", ctypes.c_void_p), ("mask", ctypes.c_ulong * 16),
                ("flags", ctypes.c_int), ("restorer", ctypes.c_void_p)]


def handlers():
    out = {}
    for name in ("SIGINT", "SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE", "SIGABRT", "SIGTERM"):
        sa = Sigaction()
        if libc.sigaction(getattr(signal, name), None, ctypes.byref(sa)) != 0:
            raise OSError(ctypes.get_errno(), "sigaction")
        out[name] = (sa.handler or 0, sa.flags)
    return out


python_sigint = signal.getsignal(signal.SIGINT)
before = handlers()
import tessera
model = tessera.Model(sys.argv[1], n_ctx=256)
text = model.generate("The capital of France is", max_tokens=8, temperature=0)
assert text, "no text generated"
model.embed("a cat", pooling="mean")
after = handlers()
bad = [f"{k}: {before[k]} -> {after[k]}" for k in before if before[k] != after[k]]
print("changed:", "; ".join(bad) if bad else "none")
print("getsignal same:", signal.getsignal(signal.SIGINT) is python_sigint)
for how in ("kill", "raise_signal"):
    try:
        if how == "kill":
            os.kill(os.getpid(), signal.SIGINT)
        else:
            signal.raise_signal(signal.SIGINT)
        for _ in range(1000):  # the handler runs at the next bytecode boundary
            pass
        print(how, ": no KeyboardInterrupt")
    except KeyboardInterrupt:
        print(how, ": KeyboardInterrupt")
'''


def run():
    # The child inherits LD_PRELOAD: under the sanitizer build the extension
    # needs the ASan runtime loaded first. Its handlers, if any, are in
    # place before the child's first look, so they count as the process's.
    out = subprocess.run([sys.executable, "-c", SCRIPT, MODEL], capture_output=True, timeout=300)
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    return out.stdout.decode()


def test_sigint_stays_pythons():
    out = run()
    assert "getsignal same: True" in out, out
    assert "kill : KeyboardInterrupt" in out, out
    assert "raise_signal : KeyboardInterrupt" in out, out


def test_no_signal_handler_changed():
    """Fails while core installs its crash guard (core/src/host/host_guard.c
    sets SIGSEGV/SIGBUS/SIGILL handlers on the first plugin call); the
    change that removes it makes this pass."""
    out = run()
    assert "changed: none" in out, out
