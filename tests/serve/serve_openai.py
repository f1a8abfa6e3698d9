"""tessera serve driven by the official `openai` Python client: greedy
completions and chat (streamed and not) equal `tessera run`, errors come
back as the client's typed exceptions. The client is imported if it is
installed, else installed into a venv under the build directory; when that
cannot reach PyPI the test is skipped and says why."""
import os
import subprocess
import sys

from serve_common import Failure, Server, check_env, expect, main, run_greedy, skip

VENV = os.path.join(os.environ.get("TESSERA_BUILD_ROOT", "."), "serve-venv")


def venv_python():
    return os.path.join(VENV, "bin", "python3")


def ensure_openai():
    """Re-run this script under a Python that has openai; returns only when
    this interpreter already has it."""
    try:
        import openai  # noqa: F401
        return
    except ImportError:
        pass
    if os.environ.get("TESSERA_SERVE_IN_VENV"):
        skip("openai is not importable even in " + VENV)
    py = venv_python()
    if not os.path.exists(py):
        r = subprocess.run([sys.executable, "-m", "venv", VENV], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            skip("cannot create a venv for the openai client: " + (r.stderr.strip().splitlines() or ["?"])[-1])
    r = subprocess.run([py, "-c", "import openai"], capture_output=True)
    if r.returncode != 0:
        r = subprocess.run([py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                            "--timeout", "20", "openai"], capture_output=True, text=True, timeout=240)
        if r.returncode != 0:
            last = (r.stderr.strip().splitlines() or ["pip failed"])[-1]
            skip("pip cannot install openai (no PyPI?): " + last)
    env = dict(os.environ, TESSERA_SERVE_IN_VENV="1")
    r = subprocess.run([py, os.path.abspath(__file__)], env=env, timeout=280)
    sys.exit(r.returncode)


def client(srv, key="none"):
    import openai
    return openai.OpenAI(base_url="http://127.0.0.1:%d/v1" % srv.port, api_key=key, max_retries=0, timeout=60)


def test_completions():
    with Server("--parallel", "2") as srv:
        c = client(srv)
        for p in ["Once upon a time", "The little dog"]:
            want = run_greedy(p, 30)
            r = c.completions.create(model="stories260K", prompt=p, max_tokens=30, temperature=0)
            expect(r.choices[0].text == want, "openai completion %r != run %r" % (r.choices[0].text, want))
            expect(r.usage.completion_tokens == 30, "usage %r" % r.usage)
            text = "".join(ch.choices[0].text for ch in
                           c.completions.create(model="m", prompt=p, max_tokens=30, temperature=0, stream=True)
                           if ch.choices)
            expect(text == want, "openai streamed completion %r != %r" % (text, want))
        models = c.models.list()
        expect(models.data[0].id == "stories260K.gguf", "models %r" % models)


def test_chat():
    with Server() as srv:
        c = client(srv)
        rendered = "<|im_start|>user\nTell me a story.<|im_end|>\n<|im_start|>assistant\n"
        want = run_greedy(rendered, 24)
        msgs = [{"role": "user", "content": "Tell me a story."}]
        r = c.chat.completions.create(model="m", messages=msgs, max_tokens=24, temperature=0, seed=1)
        expect(r.choices[0].message.content == want, "chat %r != %r" % (r.choices[0].message.content, want))
        expect(r.choices[0].finish_reason == "length", "finish_reason")
        chunks = list(c.chat.completions.create(model="m", messages=msgs, max_tokens=24, temperature=0,
                                                stream=True, stream_options={"include_usage": True}))
        text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
        expect(text == want, "chat stream %r != %r" % (text, want))
        expect(chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 24, "usage chunk")


def test_errors():
    import openai
    with Server("--api-key", "k1") as srv:
        try:
            client(srv, "wrong").chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
            raise Failure("wrong key accepted")
        except openai.AuthenticationError as ex:
            expect(ex.status_code == 401, "status")
        c = client(srv, "k1")
        try:
            c.chat.completions.create(model="m", messages=[], max_tokens=2)
            raise Failure("empty messages accepted")
        except openai.BadRequestError as ex:
            expect(ex.status_code == 400 and "messages" in str(ex), "bad request %r" % ex)
        try:
            c.completions.create(model="m", prompt=" ".join(["dog"] * 400), max_tokens=2)
            raise Failure("long prompt accepted")
        except openai.BadRequestError as ex:
            expect(ex.code == "context_length_exceeded", "code %r" % ex.code)
        r = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], max_tokens=2)
        expect(r.usage.completion_tokens <= 2, "after errors")


if __name__ == "__main__":
    check_env()
    ensure_openai()
    main([
        ("openai client: completions equal tessera run", test_completions),
        ("openai client: chat, streamed and not", test_chat),
        ("openai client: typed errors", test_errors),
    ])
