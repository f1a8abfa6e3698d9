"""Model memory flags: --no-mmap reads the weights into memory and gives the
same greedy text as the mapping; --mlock locks them, and a refusal (a
process without CAP_IPC_LOCK under a 64 KiB RLIMIT_MEMLOCK) is one warning
naming the limit, not an error; -ngl takes auto or a count."""
import os
import shutil
import subprocess

from cli_common import BIN, Checker, crashed, real_model, require, run

require()
model = real_model()
c = Checker("run_memory")
gen = ["run", "-m", model, "-p", "The capital of France is", "-n", "12", "--temp", "0", "-t", "2"]

rc, mapped, err = run(gen)
c.check(rc == 0 and not crashed(rc, err), f"mapped: exit {rc}: {err[-300:]}")
for extra in (["--no-mmap"], ["--mlock"], ["--no-mmap", "--mlock"], ["-ngl", "auto"], ["-ngl", "0"]):
    rc, out, err = run(gen + extra)
    c.check(rc == 0 and not crashed(rc, err), f"{extra}: exit {rc}: {err[-300:]}")
    c.check(out == mapped, f"{extra}: text differs from the mapped run: {out!r} vs {mapped!r}")

# A refused mlock: drop CAP_IPC_LOCK (root ignores the limit) and cap it.
setpriv = shutil.which("setpriv")
# AddressSanitizer's mlock interceptor does nothing and succeeds
asan = b"libasan" in subprocess.run(["ldd", BIN], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout
if asan:
    print("note: AddressSanitizer build: mlock is a no-op there, the refused-mlock case is not run")
elif setpriv or os.geteuid() != 0:
    pre = [setpriv, "--inh-caps=-ipc_lock", "--bounding-set=-ipc_lock"] if os.geteuid() == 0 else []
    cmd = pre + ["bash", "-c", 'ulimit -l 64 && exec "$0" "$@"', BIN] + gen + ["--mlock"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    out, err = p.stdout.decode(), p.stderr.decode()
    warn = [l for l in err.splitlines() if "--mlock" in l]
    c.check(p.returncode == 0 and not crashed(p.returncode, err), f"refused mlock: exit {p.returncode}: {err[-300:]}")
    c.check(len(warn) == 1 and "warning" in warn[0] and "RLIMIT_MEMLOCK is 64 KiB" in warn[0],
            f"refused mlock: want one warning naming the limit, got {warn!r}")
    c.check(out == mapped, f"refused mlock: text differs: {out!r}")
else:
    print("note: root without setpriv: the refused-mlock case is not run")

rc, out, err = run(gen + ["-ngl", "many"])
c.check(rc == 2 and "-ngl expects auto or an integer" in err, f"-ngl many: exit {rc}: {err!r}")
c.finish()
