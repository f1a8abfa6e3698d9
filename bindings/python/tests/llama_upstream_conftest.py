"""conftest.py for llama-cpp-python's own tests run against tessera.llama_cpp
(test_llama_upstream.py copies it into the sdist's tests/ folder): inside
that pytest run only, `llama_cpp` is the drop-in, hf_hub_download gives the
model in TESSERA_LLAMA_MODEL instead of downloading, and the tests that need
llama-cpp-python's internals are skipped with the reason (NOT_APPLICABLE)."""
import os
import sys
import types

import pytest

from tessera import llama_cpp
from tessera.llama_cpp import llama, llama_grammar, llama_types

MODEL = os.environ["TESSERA_LLAMA_MODEL"]

sys.modules["llama_cpp"] = llama_cpp
sys.modules["llama_cpp.llama"] = llama
sys.modules["llama_cpp.llama_grammar"] = llama_grammar
sys.modules["llama_cpp.llama_types"] = llama_types
# imported at the top of test_llama.py; used only by a test skipped below
sys.modules["llama_cpp._internals"] = llama_cpp._internals = types.ModuleType("llama_cpp._internals")

hub = types.ModuleType("huggingface_hub")
hub.hf_hub_download = lambda repo_id, filename, **kw: MODEL
sys.modules["huggingface_hub"] = hub

# test_llama.py imports numpy and scipy without using them in the tests
# that apply; stand-ins where they are not installed
for name in ("numpy", "scipy", "scipy.special"):
    try:
        __import__(name)
    except ImportError:
        mod = types.ModuleType(name)
        if name == "scipy.special":
            mod.log_softmax = None
        sys.modules[name] = mod

# whole files: their module imports what the drop-in does not offer
# (llama_cpp.llama_chat_format, llama_cpp.llama_speculative)
collect_ignore = ["test_llama_chat_format.py", "test_llama_speculative.py"]

NOT_APPLICABLE = {
    "test_llama_cpp_tokenization":
        "it asserts Llama._ctx.ctx, llama.cpp's context pointer (its other assertions run in "
        "test_llama_compat.py::test_vocab_only_tokenization)",
    "test_real_model": "llama_cpp._internals and the ctypes llama.h functions (llama_model_default_params)",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        why = NOT_APPLICABLE.get(item.name)
        if why:
            item.add_marker(pytest.mark.skip(reason="not applicable: " + why))
