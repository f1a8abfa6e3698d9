"""What convert_hf.py and convert_archs.py share: the Python that has the
converter's and the references' packages ($TESSERA_CONVERT_PYTHON, which
the test re-executes itself in), llama.cpp's source tree with its
convert_hf_to_gguf.py, both converters' command lines, and the count of
failed checks."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
PY = os.environ.get("TESSERA_CONVERT_PYTHON") or sys.executable
PEER = os.environ.get("TESSERA_PEER_LLAMA_CPP") or os.path.expanduser(
    "~/.cache/tessera-peer/llama_cpp_python-0.3.36/vendor/llama.cpp")
PEER_SCRIPT = os.path.join(PEER, "convert_hf_to_gguf.py")
failures = 0
# what the converter and convert_hf.py import (pip installs them by these names)
CONVERTER_MODULES = ["numpy", "gguf", "sentencepiece", "safetensors"]

sys.path.insert(0, os.path.join(HERE, "..", "harness"))
import testvenv  # noqa: E402


def reexec(modules=None):
    """Run the calling test in $TESSERA_CONVERT_PYTHON when that is not
    this Python (once: the environment marks the second start). With
    MODULES and no $TESSERA_CONVERT_PYTHON, a Python that lacks one of them
    (CI's) runs the test in the build directory's convert-venv instead,
    made and pip-installed into once per build directory."""
    global PY
    if modules and not os.environ.get("TESSERA_CONVERT_PYTHON") and not os.environ.get("TESSERA_CONVERT_REEXEC"):
        py = testvenv.python_with("convert-venv", modules, skip)
        if py != sys.executable:
            PY = os.environ["TESSERA_CONVERT_PYTHON"] = py
    if os.path.abspath(PY) != os.path.abspath(sys.executable) and os.environ.get("TESSERA_CONVERT_REEXEC") != "1":
        os.environ["TESSERA_CONVERT_REEXEC"] = "1"
        os.execv(PY, [PY] + sys.argv)


def skip(why):
    print(f"skip: {why}")
    sys.exit(77)


def check(cond, msg):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", msg, flush=True)
    return cond


def finish():
    print(f"{failures} failure(s)")
    sys.exit(1 if failures else 0)


def tessera_convert(d, out, outtype, *extra):
    """`tessera convert D -o OUT --outtype T` with this Python as the
    converter's."""
    return subprocess.run([os.environ["TESSERA_BIN"], "convert", d, "-o", out, "--outtype", outtype, *extra],
                          capture_output=True, text=True, env=dict(os.environ, TESSERA_PYTHON=PY))


def compare_gguf(a, b, *ignore):
    """tests/lora/compare_gguf.py on two files, general.size_label (which
    tessera convert does not write) and the keys IGNORE aside."""
    return subprocess.run([PY, os.path.join(ROOT, "tests", "lora", "compare_gguf.py"), a, b, "--ignore",
                           "general.size_label"] + [x for k in ignore for x in ("--ignore", k)],
                          capture_output=True, text=True)
