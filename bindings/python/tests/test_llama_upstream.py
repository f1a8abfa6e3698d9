"""llama-cpp-python's own unit tests (from its PyPI sdist) run against
tessera.llama_cpp, in a pytest of their own: llama_upstream_conftest.py maps
`llama_cpp` to the drop-in there, points their model at SmolLM2 and skips
what needs llama-cpp-python's internals, saying why.

The sdist is read from ~/.cache/tessera/llama-cpp-python (or the folder in
TESSERA_LLAMA_CPP_SDIST_DIR); nothing is fetched. To get it:
    pip download --no-deps --no-binary :all: llama-cpp-python==0.3.16 \\
        -d ~/.cache/tessera/llama-cpp-python
"""
import glob
import os
import shutil
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET

import pytest

from conftest import MODEL

HERE = os.path.dirname(os.path.abspath(__file__))
SDIST_DIR = os.environ.get("TESSERA_LLAMA_CPP_SDIST_DIR",
                           os.path.expanduser("~/.cache/tessera/llama-cpp-python"))
VERSION = "0.3.16"

# What each test of 0.3.16 gives against the drop-in. "skipped" ones cannot
# apply (the reason is in llama_upstream_conftest.py); "failed" ones apply
# and fail for the reason given.
EXPECTED = {
    "test_llama.py::test_llama_cpp_version": "passed",
    "test_llama.py::test_llama_cpp_tokenization": "skipped",
    "test_llama.py::test_real_model": "skipped",
    "test_llama.py::test_real_llama": "failed",  # see KNOWN_FAILURES
    "test_llama.py::test_real_llama_embeddings": "passed",
    "test_llama_grammar.py::test_grammar_from_string": "passed",
    "test_llama_grammar.py::test_composed_pydantic_grammar": "passed",
    "test_llama_grammar.py::test_grammar_anyof": "passed",
}
KNOWN_FAILURES = {
    "test_llama.py::test_real_llama":
        "its first assertion wants the text Qwen2-0.5B samples under llama.cpp's RNG with seed 1337 "
        "(' over the lazy dog'); SmolLM2 under tessera's sampler gives ' over a lazy dog'. With that "
        "text made SmolLM2's the whole test passes (run below)",
}
# files not collected at all (their imports are llama-cpp-python internals)
NOT_COLLECTED = {
    "test_llama_chat_format.py": "llama_cpp.llama_chat_format: llama-cpp-python's Python chat formatters "
                                 "(tessera renders the model's template in C)",
    "test_llama_speculative.py": "llama_cpp.llama_speculative (prompt-lookup speculative decoding)",
}


def _sdist():
    """The sdist from the cache, fetched from PyPI the first time (as
    serve_compat fetches llama.cpp's server tests). Without it the test is
    skipped with exit 77, which meson counts as skipped, not passed."""
    pattern = os.path.join(SDIST_DIR, f"llama_cpp_python-{VERSION}.tar.gz")
    if not glob.glob(pattern):
        os.makedirs(SDIST_DIR, exist_ok=True)
        r = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                            "--timeout", "20", "--no-deps", "--no-binary", ":all:", f"llama-cpp-python=={VERSION}",
                            "-d", SDIST_DIR], capture_output=True, text=True)
        if r.returncode != 0 or not glob.glob(pattern):
            pytest.exit(f"skip: llama-cpp-python {VERSION}'s sdist is not in {SDIST_DIR} and pip could not fetch "
                        f"it: {(r.stderr.strip().splitlines() or ['pip failed'])[-1]}", returncode=77)
    return sorted(glob.glob(pattern))[0]


def test_llama_cpp_python_unit_tests(tmp_path):
    top = f"llama_cpp_python-{VERSION}/"
    wanted = ("tests/", "vendor/llama.cpp/models/ggml-vocab-llama-spm.gguf")
    with tarfile.open(_sdist()) as tar:
        members = [m for m in tar.getmembers()
                   if m.isfile() and m.name.startswith(top) and m.name[len(top):].startswith(wanted)]
        for m in members:
            m.name = m.name[len(top):]
        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tar.extractall(tmp_path, members=members, **safe)
    shutil.copy(os.path.join(HERE, "llama_upstream_conftest.py"), tmp_path / "tests" / "conftest.py")
    env = dict(os.environ, TESSERA_LLAMA_MODEL=MODEL)
    report = tmp_path / "report.xml"
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA",
                          f"--junitxml={report}", "tests"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    outcomes = {}
    for case in ET.parse(report).iter("testcase"):
        name = case.get("classname").split(".")[-1] + ".py::" + case.get("name")
        kinds = [c.tag for c in case if c.tag in ("failure", "error", "skipped")]
        outcomes[name] = {"failure": "failed", "error": "failed", "skipped": "skipped"}.get(
            kinds[0] if kinds else None, "passed")
    counts = {k: sum(v == k for v in outcomes.values()) for k in ("passed", "failed", "skipped")}
    print(f"llama-cpp-python {VERSION} tests against tessera.llama_cpp: {counts['passed']} passed, "
          f"{counts['failed']} failed, {counts['skipped']} not applicable (+ {len(NOT_COLLECTED)} files "
          f"not collected: {', '.join(NOT_COLLECTED)})")
    assert outcomes == EXPECTED, run.stdout[-6000:]

    # test_real_llama again, its first expected text made SmolLM2's: the
    # rest of it (a GBNF grammar, a logits processor, save_state/load_state
    # and the seed sequence) must then pass
    src = (tmp_path / "tests" / "test_llama.py").read_text(encoding="utf-8")
    assert src.count('== " over the lazy dog"') == 1
    (tmp_path / "tests" / "test_llama_smollm2.py").write_text(
        src.replace('== " over the lazy dog"', '== " over a lazy dog"'), encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                          "tests/test_llama_smollm2.py::test_real_llama"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-6000:]
