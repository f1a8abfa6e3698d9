"""A Python with some PyPI packages for a test: this interpreter when it
imports them all, else a venv under the build directory (made once,
pip-installed into once; later runs find the packages there and pay one
`python -c import` per check).

    import testvenv  # tests/harness on sys.path (not "venv": that is the standard library's)
    py = testvenv.python_with("convert-venv", ["numpy", "gguf"], skip=skip)
    testvenv.rerun_with("serve-venv", ["openai"], skip=skip)

`skip(why)` is the caller's way of skipping (exit 77 with the reason);
it is called when the venv cannot be made or pip cannot install (no
PyPI), and must not return."""
import os
import subprocess
import sys

# the marker rerun_with sets, so that a script re-run in the venv that
# still misses a package skips instead of re-running itself again
RERUN_MARK = "TESSERA_TEST_IN_VENV"


def build_root():
    return os.environ.get("TESSERA_BUILD_ROOT", ".")


def venv_path(name):
    return os.path.join(build_root(), name)


def importable(python, module):
    return subprocess.run([python, "-c", "import " + module], capture_output=True).returncode == 0


def has_all(python, modules):
    """Whether PYTHON imports every module (one interpreter start)."""
    return subprocess.run([python, "-c", "import " + ", ".join(modules)], capture_output=True).returncode == 0


def _last_line(text, default):
    return (text.strip().splitlines() or [default])[-1]


def python_with(name, modules, skip, pip_names=None, timeout=600):
    """The path of a Python that imports every module of MODULES: this
    one, or the build directory's venv NAME (made, and the missing ones
    installed: PIP_NAMES maps a module to its PyPI name where they
    differ)."""
    if has_all(sys.executable, modules):
        return sys.executable
    vdir = venv_path(name)
    py = os.path.join(vdir, "bin", "python3")
    if not os.path.exists(py):
        r = subprocess.run([sys.executable, "-m", "venv", vdir], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            skip(f"cannot create the venv {vdir}: {_last_line(r.stderr, 'python3 -m venv failed')}")
    missing = [m for m in modules if not importable(py, m)]
    if missing:
        names = [(pip_names or {}).get(m, m) for m in missing]
        r = subprocess.run([py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--timeout", "20"]
                           + names, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            skip(f"pip cannot install {' '.join(names)} into {vdir} (no PyPI?): {_last_line(r.stderr, 'pip failed')}")
    return py


def rerun_with(name, modules, skip, pip_names=None, timeout=1700):
    """Return when this interpreter imports every module; else re-run this
    script (same arguments) in the venv NAME that has them, exiting with
    its status."""
    if has_all(sys.executable, modules):
        return
    if os.environ.get(RERUN_MARK):
        missing = [m for m in modules if not importable(sys.executable, m)]
        skip(f"{', '.join(missing)} not importable even in {sys.executable}")
    py = python_with(name, modules, skip, pip_names)
    env = dict(os.environ, **{RERUN_MARK: "1"})
    sys.exit(subprocess.run([py, os.path.abspath(sys.argv[0])] + sys.argv[1:], env=env, timeout=timeout).returncode)
