"""A pytest plugin for llama.cpp's server tests run against tessera serve
(serve_compat.py loads it with -p): the session fixture that downloads every
preset model (ServerPreset.load_all) has nothing to do here, since
llama_server_shim.py maps the test model ids to local files; it becomes a
no-op so that a preset without a local stand-in fails only its own tests."""


def pytest_sessionstart(session):
    import utils  # the suite's utils.py, importable once its conftest is loaded

    utils.ServerPreset.load_all = staticmethod(lambda: None)
