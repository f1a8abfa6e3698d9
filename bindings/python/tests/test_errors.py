"""Bad arguments to every public function and constructor: each raises
TypeError (a wrong kind of value) or ValueError (a value out of range)
naming the parameter as the Python API spells it and what it takes, never
an internal name (_sampling_args, a C format's wrap-around) or a CLI flag."""
import re
import warnings

import pytest

import tessera
from conftest import MODEL

# what no message may show: the binding's internals and the CLI's flags
INTERNAL = re.compile(r"_sampling_args|_tessera|4294967291|KeyError|dictionary update|(^|\s)-{1,2}[a-z]")


def check(exc_type, words, fn, *args, **kw):
    """fn(*args, **kw) raises exc_type with each of words in its message."""
    with pytest.raises(exc_type) as e:
        fn(*args, **kw)
    msg = str(e.value)
    for w in words:
        assert w in msg, f"{w!r} not in {msg!r}"
    assert not INTERNAL.search(msg), msg
    return msg


MODEL_CASES = [
    ("path", 42, TypeError, ["path", "str"]),
    ("n_ctx", -5, ValueError, ["n_ctx", "positive int"]),
    ("n_ctx", 0, ValueError, ["n_ctx", "positive int"]),
    ("n_ctx", 1.5, TypeError, ["n_ctx", "1.5"]),
    ("n_ctx", "2048", TypeError, ["n_ctx"]),
    ("n_batch", 0, ValueError, ["n_batch", "positive int"]),
    ("n_threads", 0, ValueError, ["n_threads", "positive int or None"]),
    ("n_threads", -2, ValueError, ["n_threads"]),
    ("flash_attn", "yes", ValueError, ["flash_attn", "True, False or 'auto'", "'yes'"]),
    ("flash_attn", 1, ValueError, ["flash_attn"]),
    ("type_k", "q9_9", ValueError, ["type_k", "q9_9", "f16"]),
    ("type_v", 8, TypeError, ["type_v", "str"]),
    ("n_gpu_layers", -3, ValueError, ["n_gpu_layers", "'auto'"]),
    ("n_gpu_layers", "all", TypeError, ["n_gpu_layers", "'auto'"]),
    ("devices", 3, TypeError, ["devices", "list of str"]),
    ("devices", ["cpu-avx0", 5], TypeError, ["devices[1]"]),
    ("devices", "cpu-avx0,", ValueError, ["devices", "empty name"]),
    ("devices", "nosuchdevice0", ValueError, ["devices", "unknown device 'nosuchdevice0'", "available", "ref"]),
    ("devices", ["ref", "ref"], ValueError, ["devices", "'ref' is listed twice"]),
    ("prefix_cache", "no", TypeError, ["prefix_cache", "True or False"]),
    ("use_mmap", None, TypeError, ["use_mmap", "True or False"]),
    ("use_mlock", "yes", TypeError, ["use_mlock"]),
]


@pytest.mark.parametrize("name,value,exc,words", MODEL_CASES, ids=[f"{c[0]}={c[1]!r}" for c in MODEL_CASES])
def test_model_constructor(name, value, exc, words):
    if name == "path":
        check(exc, words, tessera.Model, value)
    else:
        check(exc, words, tessera.Model, MODEL, **{name: value})


def test_model_unknown_keyword():
    check(TypeError, ["n_ctxx"], tessera.Model, MODEL, n_ctxx=5)


def test_n_gpu_layers_without_gpu_warns_in_python_words():
    if any(d["kind"] != "CPU" for d in tessera.devices() if d["name"].startswith("cpu-avx")):
        pytest.skip("cpu-avx0 is not a CPU device here")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = tessera.Model(MODEL, devices="cpu-avx0", n_gpu_layers=99, n_ctx=64)
    msgs = [str(w.message) for w in caught]
    assert any("n_gpu_layers=99" in s and "no GPU" in s for s in msgs), msgs
    assert not any("-ngl" in s for s in msgs)
    assert m.generate("Hi", max_tokens=2, temperature=0)


SESSION_CASES = [c for c in MODEL_CASES if c[0] in ("n_ctx", "n_batch", "n_threads", "flash_attn", "type_k",
                                                     "type_v", "prefix_cache")]


@pytest.mark.parametrize("name,value,exc,words", SESSION_CASES, ids=[f"{c[0]}={c[1]!r}" for c in SESSION_CASES])
def test_session_arguments(model, name, value, exc, words):
    check(exc, words, model.session, **{name: value})
    check(exc, words, tessera.Session, model, **{name: value})


def test_session_needs_a_model():
    check(TypeError, ["model", "tessera.Model"], tessera.Session, "model.gguf")


def test_session_unknown_keyword(model):
    msg = check(TypeError, ["n_gpu_layers"], model.session, n_gpu_layers=3)
    assert "n_ctx" in msg  # names what it takes


SAMPLING_CASES = [
    ("temperature", "hot", TypeError, ["temperature", "number"]),
    ("temperature", float("nan"), ValueError, ["temperature"]),
    ("top_k", -1, ValueError, ["top_k", ">= 0"]),
    ("top_k", 2.5, TypeError, ["top_k"]),
    ("top_p", 1.5, ValueError, ["top_p", "from 0.0 to 1.0"]),
    ("min_p", -0.1, ValueError, ["min_p"]),
    ("typical_p", 2, ValueError, ["typical_p"]),
    ("repeat_penalty", 0, ValueError, ["repeat_penalty", "> 0"]),
    ("repeat_penalty", -1.0, ValueError, ["repeat_penalty"]),
    ("repeat_last_n", -2, ValueError, ["repeat_last_n", "-1"]),
    ("frequency_penalty", "x", TypeError, ["frequency_penalty"]),
    ("presence_penalty", None, TypeError, ["presence_penalty"]),
    ("seed", -5, ValueError, ["seed", "random"]),
    ("seed", 2**32, ValueError, ["seed"]),
    ("seed", "42", TypeError, ["seed"]),
    ("logit_bias", [1, 2], TypeError, ["logit_bias", "dict"]),
    ("logit_bias", {10**9: 1.0}, ValueError, ["logit_bias", "token id"]),
    ("logit_bias", {"a": 1.0}, TypeError, ["logit_bias"]),
    ("logit_bias", {5: "big"}, TypeError, ["logit_bias[5]"]),
    ("grammar", 5, TypeError, ["grammar", "str"]),
    ("json_schema", "{not json", ValueError, ["json_schema", "JSON"]),
    ("json_schema", 5, TypeError, ["json_schema"]),
    ("max_tokens", -1, ValueError, ["max_tokens", ">= 0"]),
    ("max_tokens", 2.0, TypeError, ["max_tokens"]),
    ("stop", 5, TypeError, ["stop", "list of str"]),
    ("stop", ["a", 5], TypeError, ["stop[1]"]),
    ("stream", "yes", TypeError, ["stream", "True or False"]),
]


@pytest.mark.parametrize("name,value,exc,words", SAMPLING_CASES,
                         ids=[f"{c[0]}={c[1]!r}" for c in SAMPLING_CASES])
def test_generate_and_chat_arguments(model, name, value, exc, words):
    check(exc, words, model.generate, "Hello", **{name: value})
    check(exc, words, model.chat, [{"role": "user", "content": "Hello"}], **{name: value})
    with model.session(n_ctx=64) as s:
        check(exc, words, s.generate, "Hello", **{name: value})


def test_generate_unknown_keyword(model):
    msg = check(TypeError, ["'echo'", "temperature"], model.generate, "Hello", echo=True)
    assert msg.startswith("generate()")
    msg = check(TypeError, ["'echo'", "tools"], model.chat, [{"role": "user", "content": "Hi"}], echo=True)
    assert msg.startswith("chat()")


def test_generate_prompt(model):
    check(TypeError, ["prompt", "str or a list of token ids"], model.generate, 42)
    check(TypeError, ["prompt[1]", "token id"], model.generate, [1, "x"])
    check(ValueError, ["prompt[0]", "from 0 to"], model.generate, [-1])
    check(ValueError, ["prompt[0]", "from 0 to"], model.generate, [model.n_vocab])
    check(ValueError, ["prompt", "empty"], model.generate, [])
    with model.session(n_ctx=64) as s:
        check(ValueError, ["tokens[0]", "from 0 to"], s.generate_tokens, [-1])
        check(TypeError, ["tokens", "list of token ids"], s.generate_tokens, "text")
        check(TypeError, ["'echo'"], s.generate_tokens, [1], echo=1)


def test_grammar_with_schema(model):
    check(ValueError, ["at most one"], model.generate, "x", grammar='root ::= "a"', json_schema={"type": "string"})


def test_chat_messages(model):
    check(TypeError, ["messages", "list of dicts"], model.chat, "hello")
    check(TypeError, ["messages", "list of dicts"], model.create_chat_completion, "hello")
    with model.session(n_ctx=64) as s:
        check(TypeError, ["messages", "list of dicts"], s.chat, "hello")
        check(TypeError, ["'echo'"], s.chat, [{"role": "user", "content": "Hi"}], echo=True)
    check(TypeError, ["messages", "list of dicts"], model.chat, {"role": "user", "content": "hi"})
    check(ValueError, ["messages", "empty"], model.chat, [])
    check(TypeError, ["messages[0]", "dict"], model.chat, ["hello"])
    check(ValueError, ["messages[1]", "'role'"], model.chat, [{"role": "user", "content": "a"}, {"content": "b"}])
    check(TypeError, ["messages[0].content", "str, a list of parts or None"], model.chat,
          [{"role": "user", "content": 5}])
    check(ValueError, ["messages[0].content[0]", "'type': 'text'"], model.chat,
          [{"role": "user", "content": [{"type": "video", "url": "x"}]}])
    check(TypeError, ["messages[0].content[0].text"], model.chat,
          [{"role": "user", "content": [{"type": "text", "text": 5}]}])


@pytest.mark.parametrize("part,words", [
    ({"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
     ["messages[0].content[1]: image_url parts need a multimodal projector", "text only"]),
    ({"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
     ["messages[0].content[1]: input_audio parts need an audio projector", "text only"]),
])
def test_chat_media_part_is_an_error_not_dropped(model, part, words):
    msgs = [{"role": "user", "content": [{"type": "text", "text": "What is this?"}, part]}]
    check(ValueError, words, model.chat, msgs, max_tokens=1)
    check(ValueError, words, model.chat, msgs, max_tokens=1, stream=True)


def test_chat_text_parts_still_work(model):
    msgs = [{"role": "user", "content": [{"type": "text", "text": "Say hi."}]}]
    reply = model.chat(msgs, max_tokens=4, temperature=0)
    assert reply["choices"][0]["message"]["content"]


def test_chat_tools_and_formats(model):
    msgs = [{"role": "user", "content": "hi"}]
    check(TypeError, ["tools", "list"], model.chat, msgs, tools={"name": "f"})
    check(ValueError, ["tools[0]", "'function'"], model.chat, msgs, tools=[{"type": "web_search"}])
    check(ValueError, ["tools[0].function", "'name'"], model.chat, msgs, tools=[{"type": "function", "function": {}}])
    check(ValueError, ["tool_choice", "'auto', 'none' or 'required'"], model.chat, msgs, tool_choice="always")
    check(TypeError, ["tool_choice"], model.chat, msgs, tool_choice=3)
    check(ValueError, ["tool_choice", "no tools"], model.chat, msgs, tool_choice={"type": "function",
                                                                                    "function": {"name": "f"}})
    check(TypeError, ["response_format", "dict"], model.chat, msgs, response_format="json")
    check(ValueError, ["response_format type", "'yaml'"], model.chat, msgs, response_format={"type": "yaml"})
    check(TypeError, ["chat_template_kwargs", "dict"], model.chat, msgs, chat_template_kwargs=["x"])


def test_tokens_functions(model):
    check(TypeError, ["text", "str or bytes"], model.tokenize, 5)
    check(TypeError, ["add_special", "True or False"], model.tokenize, "a", add_special="yes")
    check(TypeError, ["parse_special"], model.tokenize, "a", parse_special=None)
    check(TypeError, ["tokens", "list of token ids"], model.detokenize, "abc")
    check(ValueError, ["tokens[1]", "from 0 to"], model.detokenize, [1, -4])
    check(TypeError, ["remove_special"], model.detokenize, [1], remove_special="x")
    check(TypeError, ["render_special"], model.detokenize, [1], render_special="x")
    check(ValueError, ["token", "from 0 to"], model.token_to_piece, model.n_vocab)
    check(TypeError, ["token"], model.token_to_piece, "a")
    check(TypeError, ["render_special"], model.token_to_piece, 1, render_special=2)
    check(TypeError, ["key", "str"], model.meta, 5)


def test_embed_arguments(model):
    check(TypeError, ["texts", "str or a list of str"], model.embed, 5)
    check(TypeError, ["texts[1]", "str"], model.embed, ["a", 5])
    check(ValueError, ["pooling", "'mean'", "'sideways'"], model.embed, "a", pooling="sideways")
    check(ValueError, ["normalize", ">= -1"], model.embed, "a", normalize=-7)
    check(TypeError, ["normalize"], model.embed, "a", normalize="l2")


def test_state_paths(model):
    check(TypeError, ["path", "os.PathLike"], model.save_state, 5)
    check(TypeError, ["path", "os.PathLike"], model.load_state, None)
