"""tessera serve fits its context to memory for every slot: with -c 0 each
of --parallel 2 slots gets the training context (4096 for synth-s, so 8192
in all) when the devices hold it; when the "testdev" accelerator
(TESTDEV_MEMORY_KIB) holds every layer at 4096 positions but not at 8192,
the automatic context gives way (halved, not below 4096) before any layer
leaves the device; an explicit -c that does not fit is one error."""
import os
import re
import subprocess

from serve_common import BIN, SHARED, Server, check_env, expect, main, skip

# ../shared's, or the one the build makes from tests/data (same shape)
SYNTH = os.path.join(SHARED, "models", "synth-s-Q4_0.gguf")
PLUGDIR = os.path.join(os.environ.get("TESSERA_BUILD_ROOT", ""), "tests", "host")
DEV = ["--plugin-dir", PLUGDIR, "--device", "testdev0,ref", "--verbose"]
FIT = re.compile(r"fit: testdev0: (\d+) of (\d+) layers, ([0-9.]+) MiB .*; ref: -c (\d+)( \(auto\))?")


def need_mib(n_ctx):
    """What every layer on testdev0 needs at n_ctx, from the fit's own report."""
    env = dict(os.environ, TESTDEV_MEMORY_KIB=str(1 << 22))
    r = subprocess.run([BIN, "run", "-m", SYNTH, "-p", "hi", "-n", "1", "-c", str(n_ctx)] + DEV,
                       capture_output=True, text=True, errors="replace", timeout=120, env=env)
    m = FIT.search(r.stderr)
    expect(r.returncode == 0 and m, "run -c %d: exit %d: %s" % (n_ctx, r.returncode, r.stderr[-300:]))
    expect(m.group(1) == m.group(2), "run -c %d with 4 GiB: not every layer fits: %s" % (n_ctx, m.group(0)))
    return float(m.group(3))


def serve_fit(kib, *extra):
    os.environ["TESTDEV_MEMORY_KIB"] = str(kib)
    with Server("--parallel", "2", *DEV, *extra, model=SYNTH) as srv:
        err = "".join(srv.stderr_lines)
    m = FIT.search(err)
    expect(m, "no fit decision for %d KiB: %s" % (kib, err[-400:]))
    return int(m.group(1)), int(m.group(2)), int(m.group(4)), m.group(5) is not None


def test_context_gives_way():
    small, big = need_mib(4096), need_mib(8192)
    # 95% of the device is the fit's budget: between the two needs
    kib = int((small + big) / 2 / 0.95 * 1024)
    layers, total, n_ctx, auto = serve_fit(1 << 22)
    expect((layers, n_ctx, auto) == (total, 8192, True),
           "4 GiB: want every layer and -c 8192 (auto), got %d of %d, -c %d" % (layers, total, n_ctx))
    layers, total, n_ctx, auto = serve_fit(kib)
    expect((layers, n_ctx, auto) == (total, 4096, True),
           "%d KiB (every layer needs %.1f MiB at 4096, %.1f at 8192): want every layer and -c 4096, "
           "got %d of %d, -c %d" % (kib, small, big, layers, total, n_ctx))


def test_explicit_context_is_checked():
    os.environ["TESTDEV_MEMORY_KIB"] = "100"
    r = subprocess.run([BIN, "serve", "-m", SYNTH, "--port", "0", "--parallel", "2", "-c", "8192", "-ngl", "4"] + DEV,
                       capture_output=True, text=True, errors="replace", timeout=120)
    expect(r.returncode == 1 and "device testdev0: -ngl 4" in r.stderr and "-c 8192" in r.stderr,
           "-c 8192 -ngl 4 in 100 KiB: exit %d: %s" % (r.returncode, r.stderr[-300:]))


if __name__ == "__main__":
    if not os.path.exists(os.path.join(PLUGDIR, "libtessera-backend-testdev.so")):
        skip("the testdev plugin is not built in " + PLUGDIR)
    if not os.path.exists(SYNTH):
        skip("model missing: %s (the build makes it from tests/data)" % SYNTH)
    main([("context gives way", test_context_gives_way), ("explicit context", test_explicit_context_is_checked)])
