"""One Session shared by two threads: the second thread's call fails at
once with a clear RuntimeError and the first thread's stream runs on to the
right end. And the default thread count: the CPUs divided among the
sessions generating at the same moment."""
import os
import threading

import pytest

import tessera
from tessera import _model

PROMPT = "The capital of France is"
N = 24


def cpus():
    return len(os.sched_getaffinity(0))


def test_second_thread_gets_clear_error_and_first_stream_completes(model):
    want = model.session(n_ctx=256).generate(PROMPT, max_tokens=N, temperature=0)
    session = model.session(n_ctx=256)
    stream = session.generate(PROMPT, max_tokens=N, temperature=0, stream=True)
    pieces = [next(stream)]  # the first thread is mid-stream
    errors = []

    def intruder():
        for call in (lambda: session.generate("Hello", max_tokens=4),
                     lambda: session.chat([{"role": "user", "content": "Hi"}], max_tokens=4),
                     session.reset,
                     lambda: session.save_state(os.devnull),
                     session.close):
            try:
                call()
                errors.append(None)
            except RuntimeError as e:
                errors.append(str(e))
    t = threading.Thread(target=intruder)
    t.start()
    t.join()
    assert len(errors) == 5 and all(e and "in use by another thread" in e and "one Session per thread" in e
                                    for e in errors), errors
    pieces += list(stream)
    assert "".join(pieces) == want and stream.finish_reason == "length" and stream.n_generated == N
    # finished: now another thread may use it
    done = []
    t = threading.Thread(target=lambda: done.append(session.generate(PROMPT, max_tokens=N, temperature=0)))
    t.start()
    t.join()
    assert done == [want]
    session.close()


def test_rejected_while_the_other_thread_is_inside_a_call(model):
    """The first thread inside a long prompt decode (GIL released): the
    second thread's call is refused at once, the first one's result stands."""
    session = model.session(n_ctx=1024)
    long_prompt = model.tokenize("hello world " * 150)
    inside, errors, results = threading.Event(), [], []

    def first():
        stream = session.generate(long_prompt, max_tokens=8, temperature=0, stream=True)
        results.append("".join(stream))

    real_start = session._ctx.start

    class Spy:  # says when the first thread is inside the C call
        def __getattr__(self, name):
            return getattr(ctx, name)

        def start(self, *a, **kw):
            inside.set()
            return real_start(*a, **kw)
    ctx = session._ctx
    session._ctx = Spy()
    t = threading.Thread(target=first)
    t.start()
    assert inside.wait(30)
    try:
        session.generate("Hi", max_tokens=2)
    except RuntimeError as e:
        errors.append(str(e))
    t.join()
    session._ctx = ctx
    want = model.session(n_ctx=1024).generate(long_prompt, max_tokens=8, temperature=0)
    assert errors and "in use by another thread" in errors[0]
    assert results == [want]
    session.close()


def test_stream_may_be_handed_to_another_thread(model):
    session = model.session(n_ctx=256)
    want = session.generate(PROMPT, max_tokens=N, temperature=0)
    stream = session.generate(PROMPT, max_tokens=N, temperature=0, stream=True)
    first = next(stream)
    rest = []
    t = threading.Thread(target=lambda: rest.extend(stream))
    t.start()
    t.join()
    assert first + "".join(rest) == want
    session.close()


def test_closed_stream_frees_the_session(model):
    session = model.session(n_ctx=256)
    stream = session.generate(PROMPT, max_tokens=N, temperature=0, stream=True)
    next(stream)
    stream.close()
    got = []
    t = threading.Thread(target=lambda: got.append(session.generate(PROMPT, max_tokens=2, temperature=0)))
    t.start()
    t.join()
    assert len(got) == 1
    session.close()


def test_default_threads_divide_the_cpus(model):
    """n_threads=None: alone a session takes every CPU of the process's
    affinity mask; two generating at once take half each; when one
    finishes the other takes them all again."""
    a, b = model.session(n_ctx=256), model.session(n_ctx=256)
    pinned = model.session(n_ctx=256, n_threads=1)
    sa = a.generate(PROMPT, max_tokens=6, temperature=0, stream=True)
    next(sa)
    assert a.n_threads == cpus()
    sb = b.generate(PROMPT, max_tokens=6, temperature=0, stream=True)
    next(sb)
    next(sa)
    assert a.n_threads == b.n_threads == max(1, cpus() // 2)
    list(sa)
    next(sb)
    assert b.n_threads == cpus()
    list(sb)
    # an explicit count stays as given
    pinned.generate(PROMPT, max_tokens=2)
    assert pinned.n_threads == 1
    for s in (a, b, pinned):
        s.close()


def test_default_threads_in_two_python_threads(model):
    """Model.generate from two threads at once (a Session each): both
    answers right, each decoding with its share."""
    want = model.generate(PROMPT, max_tokens=N, temperature=0)
    seen, got = [], []
    barrier = threading.Barrier(2)

    def work():
        s = model._thread_session()
        barrier.wait()
        stream = model.generate(PROMPT, max_tokens=N, temperature=0, stream=True)
        text = ""
        for piece in stream:
            text += piece
            seen.append(s.n_threads)
        got.append(text)
    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [want, want]
    if cpus() >= 2:
        assert min(seen) == cpus() // 2, seen


def test_n_threads_everywhere(model):
    m = tessera.Model(model.path, n_ctx=128, n_threads=1)
    assert m._thread_session().n_threads == 1
    assert m.session(n_threads=2).n_threads == 2
    assert tessera.Session(m, n_threads=1).n_threads == 1
    assert m.embed("a cat", pooling="mean") and all(c.n_threads == 1 for c in m._local.embed_ctx.values())
    assert _model._cpus() == cpus()


def test_closed_session_says_so(model):
    s = model.session(n_ctx=64)
    s.close()
    s.close()  # twice is fine
    for call in (lambda: s.generate("Hi", max_tokens=1), lambda: s.n_ctx, lambda: s.tokens, s.reset):
        with pytest.raises(RuntimeError, match="Session is closed"):
            call()
