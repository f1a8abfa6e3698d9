"""A pytest plugin for llama.cpp's server tests run against tessera serve
(serve_compat.py loads it with -p): the session fixture that downloads every
preset model (ServerPreset.load_all) has nothing to do here, since
llama_server_shim.py maps the test model ids to local files; it becomes a
no-op so that a preset without a local stand-in fails only its own tests.

utils.TMP_DIR (where test_router writes its preset files) is the suite's
tests/tmp, which upstream exists because the model downloads (LLAMA_CACHE=tmp,
relative to the tests directory they run in) make it: here it is tmp in the
scratch directory the tests run in, made before the test files import it."""
import os


def pytest_sessionstart(session):
    import utils  # the suite's utils.py, importable once its conftest is loaded

    utils.ServerPreset.load_all = staticmethod(lambda: None)
    utils.TMP_DIR = os.path.join(os.getcwd(), "tmp")
    os.makedirs(utils.TMP_DIR, exist_ok=True)
