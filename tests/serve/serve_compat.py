"""llama.cpp's own server tests (tools/server/tests/unit/*.py in the peer
source, read from there at test time, never copied here) against tessera
serve: pytest runs them with LLAMA_SERVER_BIN_PATH pointing at
llama_server_shim.py, which only rewrites the command line (llama-server
flags to ours, the test model ids to local files).

Usage: serve_compat.py fast|all [FILE...]
  fast: the files listed in FAST, without the tests marked slow (CI)
  all:  every file, slow tests included (the slow suite)

Prints passed/failed/skipped per file and the total. Fails when a file
passes fewer tests than its floor in FLOORS (measured; raise them as more
passes), so that a regression in a shape a client relies on is caught.
Skips (77) when the peer source, or pytest in a venv under the build
directory (installed from PyPI on first use), is not available.

Environment: TESSERA_PEER_SRC (the llama.cpp tree; default: the one
../shared/peer/build.sh unpacks under ~/.cache/tessera-peer)."""
import glob
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

from serve_common import check_env, free_port, skip

HERE = os.path.dirname(os.path.abspath(__file__))
VENV = os.path.join(os.environ.get("TESSERA_BUILD_ROOT", "."), "compat-venv")
REQUIREMENTS = ["pytest~=8.3.3", "requests~=2.32.3", "filelock~=3.16", "openai~=2.14.0",
                "prometheus-client~=0.20.0", "wget~=3.2"]

# Files whose non-slow tests run in CI (the API shapes of features we have).
FAST = ["test_basic.py", "test_completion.py", "test_chat_completion.py", "test_tokenize.py",
        "test_security.py", "test_slot_save.py", "test_metrics.py", "test_ctx_shift.py",
        "test_compat_anthropic.py", "test_compat_oai_responses.py",
        # on synthetic stand-ins the shim writes (about 50 s for the three)
        "test_embedding.py", "test_rerank.py", "test_infill.py",
        # stories260K, a few seconds each
        "test_template.py", "test_tool_call.py", "test_ignore_eos.py", "test_compat_gcp.py",
        # router mode: a child per model, its queue tests hold a model 2 s (about 50 s)
        "test_router.py"]

# Non-slow tests passing per file, measured 2026-11-28 (docs/serve.md lists
# them; test_chat_completion, test_template, test_metrics and test_ctx_shift
# re-measured after the prefill, __verbose, progress and metrics work): a run
# must reach these. Files of 20 or more
# passes keep one in hand for a test that depends on timing (test_metrics too:
# 10 of 10 measured, its counters read right after requests end).
FLOORS = {"test_basic.py": 7, "test_completion.py": 26, "test_chat_completion.py": 38, "test_tokenize.py": 3,
          "test_security.py": 20, "test_slot_save.py": 3, "test_template.py": 34, "test_tool_call.py": 6,
          "test_metrics.py": 9, "test_ctx_shift.py": 5, "test_vision_api.py": 8, "test_compat_anthropic.py": 24,
          "test_compat_oai_responses.py": 1, "test_embedding.py": 32, "test_rerank.py": 12, "test_infill.py": 7,
          "test_ignore_eos.py": 2, "test_compat_gcp.py": 2,
          # 15 of 17 measured 2026-11-29 (3 runs); one in hand for its queue tests' timing
          "test_router.py": 14}

# With the slow tests (mode all), where they add passes: test_tool_call's run
# the SmolLM2 stand-in for the instruct models (measured 2026-11-28, 60 of 202;
# one in hand). Other files: FLOORS.
FLOORS_ALL = {"test_tool_call.py": 59}


def peer_tests_dir():
    src = os.environ.get("TESSERA_PEER_SRC")
    if not src:
        found = sorted(glob.glob(os.path.expanduser("~/.cache/tessera-peer/llama_cpp_python-*/vendor/llama.cpp")))
        src = found[-1] if found else ""
    d = os.path.join(src, "tools", "server", "tests")
    if not src or not os.path.exists(os.path.join(d, "utils.py")):
        skip("llama.cpp's server tests are not there (TESSERA_PEER_SRC, or run ../shared/peer/build.sh): " + d)
    return d


def venv_python():
    py = os.path.join(VENV, "bin", "python3")
    if not os.path.exists(py):
        r = subprocess.run([sys.executable, "-m", "venv", VENV], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            skip("cannot create a venv for pytest: " + (r.stderr.strip().splitlines() or ["?"])[-1])
    r = subprocess.run([py, "-c", "import pytest, requests, filelock, openai, prometheus_client, wget"],
                       capture_output=True)
    if r.returncode != 0:
        r = subprocess.run([py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--timeout", "20"]
                           + REQUIREMENTS, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            skip("pip cannot install the suite's requirements (no PyPI?): "
                 + (r.stderr.strip().splitlines() or ["pip failed"])[-1])
    return py


def counts(junit):
    """{file: [passed, failed, skipped]} from pytest's JUnit XML."""
    out = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("classname", "").split(".")[-1] + ".py"
        c = out.setdefault(name, [0, 0, 0])
        if case.find("skipped") is not None:
            c[2] += 1
        elif case.find("failure") is not None or case.find("error") is not None:
            c[1] += 1
        else:
            c[0] += 1
    return out


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "fast"
    if mode == "all" and os.environ.get("TESSERA_COMPAT_ALL") != "1":
        # every file with its slow tests takes far longer than CI's budget
        skip("the whole compatibility suite runs only with TESSERA_COMPAT_ALL=1 (it takes tens of minutes)")
    check_env()
    tests = peer_tests_dir()
    files = sys.argv[2:] or (FAST if mode == "fast" else
                              sorted(os.path.basename(f) for f in glob.glob(os.path.join(tests, "unit", "test_*.py"))))
    py = venv_python()
    env = dict(os.environ,
               LLAMA_SERVER_BIN_PATH=os.path.join(HERE, "llama_server_shim.py"),
               PORT=str(free_port()),
               TESSERA_COMPAT_TESTS=tests,
               PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""),
               TESSERA_SHARED=os.path.abspath(os.environ.get("TESSERA_SHARED", "../shared")))
    with tempfile.TemporaryDirectory(prefix="tessera-compat-") as tmp:
        junit = os.path.join(tmp, "junit.xml")
        cmd = [py, "-m", "pytest", "-p", "llama_compat_plugin", "-p", "no:cacheprovider", "-q",
               "--rootdir", tests, "-c", os.path.join(tests, "pytest.ini"), "--junitxml", junit,
               "-o", "junit_family=xunit1", "-rN"]
        if mode == "fast":
            cmd += ["-m", "not slow"]
        else:  # and the tests that skip themselves unless SLOW_TESTS is set (test_infill's Qwen one)
            env["SLOW_TESTS"] = "1"
        cmd += [os.path.join(tests, "unit", f) for f in files]
        # the tests write (slot files, logs) relative to the working directory: a scratch one,
        # three levels down as tools/server/tests is, so that the chat templates they name
        # as ../../../models/templates/X.jinja (and check exist) are the peer tree's
        work = os.path.join(tmp, "tools", "server", "tests")
        os.makedirs(work)
        os.symlink(os.path.join(tests, "..", "..", "..", "models"), os.path.join(tmp, "models"))
        r = subprocess.run(cmd, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=7000)
        if os.environ.get("TESSERA_COMPAT_VERBOSE"):
            print(r.stdout)
        if not os.path.exists(junit):
            print(r.stdout[-4000:])
            print("FAIL: pytest wrote no report (exit %d)" % r.returncode)
            return 1
        per_file = counts(junit)
    total = [0, 0, 0]
    low = []
    print("%-28s %6s %6s %7s" % ("file", "passed", "failed", "skipped"))
    for f in sorted(per_file):
        p, fl, s = per_file[f]
        total = [total[0] + p, total[1] + fl, total[2] + s]
        floor = FLOORS_ALL.get(f, FLOORS.get(f, 0)) if mode == "all" else FLOORS.get(f, 0)
        print("%-28s %6d %6d %7d%s" % (f, p, fl, s, "  (floor %d)" % floor if floor else ""))
        if p < floor:
            low.append("%s: %d passed, floor %d" % (f, p, floor))
    print("%-28s %6d %6d %7d  of %d" % ("total", total[0], total[1], total[2], sum(total)))
    if low:
        print("FAIL: fewer tests pass than before:\n  " + "\n  ".join(low))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
