"""llama_cpp's names over Tessera, for scripts written for llama-cpp-python:

    from tessera import llama_cpp        # was: import llama_cpp
    from tessera.llama_cpp import Llama  # was: from llama_cpp import Llama

Only the high-level API (Llama, LlamaGrammar, LlamaState, LlamaRAMCache,
the LLAMA_* constants it takes); not the ctypes bindings of llama.h
(llama_cpp.llama_*) nor its internals. This package is tessera.llama_cpp:
it never shadows a real llama_cpp install.
"""
from .. import __version__ as _tessera_version
from .._llama import (  # noqa: F401
    LLAMA_DEFAULT_SEED, LLAMA_POOLING_TYPE_CLS, LLAMA_POOLING_TYPE_LAST, LLAMA_POOLING_TYPE_MEAN,
    LLAMA_POOLING_TYPE_NONE, LLAMA_POOLING_TYPE_RANK, LLAMA_POOLING_TYPE_UNSPECIFIED, Llama, LlamaCache,
    LlamaGrammar, LlamaRAMCache, LlamaState, LogitsProcessorList, StoppingCriteriaList)

from .llama_types import *  # noqa: F401,F403  (llama_cpp re-exports its types too)

# the llama-cpp-python release whose API this follows, with tessera's version
__version__ = "0.3.16+tessera." + _tessera_version.replace("-", ".")
