"""Shared fixtures: the real model (skipped when absent) and `tessera run`."""
import os
import subprocess

import pytest

MODELS = os.environ.get("TESSERA_MODEL_CACHE", os.path.expanduser("~/.cache/tessera/models"))
MODEL = os.path.join(MODELS, "SmolLM2-135M-Instruct.Q4_1.gguf")
GEMMA = os.path.join(MODELS, "gemma-3-270m-q4_k_m.gguf")


def pytest_collection_modifyitems(config, items):
    if not os.path.exists(MODEL):
        # meson reads exit code 77 as skipped; pytest's "all skipped" is 5
        pytest.exit(f"skip: {MODEL} absent (scripts/fetch-models.sh)", returncode=77)


@pytest.fixture(scope="session")
def model():
    import tessera
    return tessera.Model(MODEL, n_ctx=1024)


def tessera_run(prompt, n, *flags):
    """`tessera run`'s continuation of prompt (stdout less the echoed prompt):
    greedy, unless flags set the sampler."""
    out = subprocess.run([os.environ["TESSERA_BIN"], "run", "-m", MODEL, "-p", prompt, "-n", str(n),
                          "--temp", "0", "-c", "1024"] + list(flags), capture_output=True, check=True).stdout
    text = out.decode("utf-8")
    assert text.startswith(prompt) and text.endswith("\n")
    return text[len(prompt):-1]  # the CLI ends its output with a newline
