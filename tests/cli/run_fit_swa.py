"""The memory fit counts a sliding-window layer's window, not the whole
context (tessera_params_fit): on Gemma 3 270M at -c 32768 the fit's KV
figure is the context's own ("KV f16 111.0 MiB"; 576.0 before the window
was counted), with --swa-full both are the whole 576.0, and with q8_0 K/V
both are 59.0."""
import re

from cli_common import BIN, Checker, crashed, real_model, run

c = Checker("run_fit_swa")
GEMMA = real_model("gemma-3-270m-q4_k_m.gguf")
base = ["run", "-m", GEMMA, "-p", "Hi", "-n", "1", "-c", "32768", "-t", "1", "--verbose"]
for extra, want in (([], 111.0), (["--swa-full"], 576.0), (["-ctk", "q8_0", "-ctv", "q8_0", "-fa", "on"], 59.0)):
    rc, out, err = run(base + extra, timeout=600)
    fit = re.search(r"fit: \S+: -c 32768, [0-9.]+ MiB \(weights [0-9.]+, KV ([0-9.]+),", err)
    mem = re.search(r"tessera: memory \S+: weights [0-9.]+ MiB, KV \S+ ([0-9.]+) MiB", err)
    c.check(rc == 0 and not crashed(rc, err) and fit and mem, f"{extra}: rc {rc}: {err[-400:]!r}")
    if fit and mem:
        print(f"{extra}: fit KV {fit.group(1)} MiB, context KV {mem.group(1)} MiB")
        c.check(abs(float(fit.group(1)) - want) < 0.05 and abs(float(mem.group(1)) - want) < 0.05,
                f"{extra}: fit KV {fit.group(1)}, context KV {mem.group(1)}, want {want}")
c.finish()
