"""Tessera: run GGUF language models from Python.

    import tessera
    model = tessera.Model("SmolLM2-135M-Instruct.Q4_1.gguf", n_ctx=2048)
    print(model.generate("The capital of France is", max_tokens=16, temperature=0))
    for piece in model.generate("Once upon a time", max_tokens=32, stream=True):
        print(piece, end="", flush=True)
    reply = model.chat([{"role": "user", "content": "Hi!"}])
    print(reply["choices"][0]["message"]["content"])

A thin layer over the engine's C API (the _tessera extension module);
decoding releases the GIL, so several threads may generate at once, each
with its own context (Model does that for you, one Session per thread).

The engine's warnings (and, with TESSERA_VERBOSE=1 or 2, its info and debug
lines) go to the logger "tessera" of Python's logging, which like any
library's has only a NullHandler until the application configures logging
(logging.basicConfig() shows them on stderr).
"""
import atexit as _atexit
import logging as _logging
import os as _os

try:
    from . import _tessera
except ImportError as _first:  # the build tree's tests put _tessera on sys.path
    try:
        import _tessera
    except ImportError:
        # the package's own extension failed to load: say why (a missing
        # shared library, a wrong Python), not that a fallback is absent
        raise _first from None

from ._model import Model, Session, Stream, ModelNotFoundError  # noqa: E402
from ._llama import Llama  # noqa: E402  (llama-cpp-python's class; tessera.llama_cpp has the rest)

TesseraError = _tessera.TesseraError
_logging.getLogger("tessera").addHandler(_logging.NullHandler())
_atexit.register(_tessera.log_detach)
__version__ = _tessera.version()

__all__ = ["Model", "Session", "Stream", "TesseraError", "ModelNotFoundError", "devices", "__version__"]


def devices():
    """The compute devices the engine found, as dicts: name (what Model's
    devices= takes), kind ("CPU", "GPU", "accelerator"), description,
    plugin (the file it came from), memory_total, memory_free (bytes)."""
    _init()
    return _tessera.devices()


_initialized = False


def _init():
    """Find the backend plugins once: the package's own plugins/ folder
    (an installed wheel), then the engine's usual places
    (TESSERA_PLUGIN_PATH, beside the executable, the install libdir)."""
    global _initialized
    if _initialized:
        return
    here = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "plugins")
    dirs = [here] if _os.path.isdir(here) else []
    verbosity = int(_os.environ.get("TESSERA_VERBOSE", "0") or 0)
    _tessera.init(dirs, verbosity)
    _initialized = True
