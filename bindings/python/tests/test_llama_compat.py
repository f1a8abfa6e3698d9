"""tessera.Llama / tessera.llama_cpp: llama-cpp-python's API over the real
model (SmolLM2), its shapes field for field, and a script written for
llama-cpp-python run unchanged but for its import line."""
import json
import os
import subprocess
import sys

import pytest

from conftest import MODEL

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def llm():
    from tessera.llama_cpp import Llama
    with Llama(model_path=MODEL, n_ctx=512, seed=7, verbose=False) as m:
        yield m


def test_script_written_for_llama_cpp_python():
    path = os.path.join(HERE, "llama_cpp_script.py")
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    # only the import line says tessera
    assert [ln for ln in lines if "tessera" in ln and not ln.startswith(("(", "prints", '"""', "llama-cpp"))] == \
        ["from tessera.llama_cpp import Llama  # was: from llama_cpp import Llama"]
    out = subprocess.run([sys.executable, path, MODEL], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    steps = {r["step"]: r for r in map(json.loads, out.stdout.splitlines())}

    c = steps["completion"]
    assert c["id"].startswith("cmpl-") and c["object"] == "text_completion"
    assert c["text"].startswith("The capital of France is") and "Paris" in c["text"]
    assert c["finish_reason"] == "stop"
    assert c["usage"]["total_tokens"] == c["usage"]["prompt_tokens"] + c["usage"]["completion_tokens"]
    n = len(c["tokens"])
    assert n == len(c["text_offset"]) == len(c["token_logprobs"]) == len(c["top_logprobs"])
    assert "".join(c["tokens"]) == c["text"]
    assert c["text_offset"] == [len("".join(c["tokens"][:i])) for i in range(n)]
    assert c["token_logprobs"][0] is None and c["top_logprobs"][0] is None  # echo: nothing before it
    for tok, lp, top in zip(c["tokens"][1:], c["token_logprobs"][1:], c["top_logprobs"][1:]):
        assert lp <= 0 and top[tok] == lp and 3 <= len(top) <= 4

    t = steps["tool"]
    assert t["id"].startswith("chatcmpl-") and t["object"] == "chat.completion"
    assert t["name"] == "get_weather" and isinstance(t["arguments"].get("city"), str)
    assert t["finish_reason"] == "tool_calls"

    s = steps["stream"]
    assert s["object"] == "text_completion" and s["n_chunks"] > 2 and s["finish_reason"] == "length"
    s = steps["chat_stream"]
    assert s["object"] == "chat.completion.chunk" and s["first"] == {"role": "assistant"} and s["text"]

    e = steps["embedding"]
    assert e["object"] == "list" and e["n"] == 2 and e["dim"] == 576 and e["usage"]["prompt_tokens"] > 0

    k = steps["tokenize"]
    assert k["round_trip"] and k["n_vocab"] == 49152 and k["n_ctx"] == 1024


def test_completion_shape_and_greedy_text(llm):
    prompt = "The capital of France is"
    out = llm(prompt, max_tokens=6, temperature=0)
    assert list(out) == ["id", "object", "created", "model", "choices", "usage"]
    assert out["model"] == MODEL and isinstance(out["created"], int)
    choice = out["choices"][0]
    assert list(choice) == ["text", "index", "logprobs", "finish_reason"]
    assert choice["index"] == 0 and choice["logprobs"] is None and choice["finish_reason"] == "length"
    assert out["usage"] == {"prompt_tokens": 5, "completion_tokens": 6, "total_tokens": 11}
    # the engine's own greedy continuation
    assert choice["text"] == llm._model.generate(prompt, max_tokens=6, temperature=0)
    # and the token generator's
    got = []
    for tok in llm.generate(llm.tokenize(prompt.encode()), temp=0):
        got.append(tok)
        if len(got) == 6:
            break
    assert llm.detokenize(got).decode() == choice["text"]


def test_logprobs_without_echo_and_with_it(llm):
    prompt = "The capital of France is"
    out = llm(prompt, max_tokens=1, temperature=0, logprobs=2)
    lp = out["choices"][0]["logprobs"]
    assert lp["tokens"] == [" Paris"] and lp["text_offset"] == [len(prompt)]
    # greedy: the token taken is the most likely
    assert lp["token_logprobs"][0] == max(lp["top_logprobs"][0].values())
    # with echo the prompt's tokens are scored too: " Paris" after the prompt
    # has the log-probability it had when generated (up to rounding: the
    # echo decodes the prompt keeping every row of logits, other kernels)
    echo = llm(prompt + " Paris", max_tokens=1, temperature=0, logprobs=2, echo=True)
    elp = echo["choices"][0]["logprobs"]
    i = elp["tokens"].index(" Paris")
    assert abs(elp["token_logprobs"][i] - lp["token_logprobs"][0]) < 0.1
    assert set(elp["top_logprobs"][i]) == set(lp["top_logprobs"][0])
    assert echo["choices"][0]["text"].startswith(prompt + " Paris")


def test_stream_matches_whole_and_stops(llm):
    args = dict(max_tokens=24, temperature=0, stop=[" skyscrapers", "\n\n"])
    whole = llm("Once upon a time", **args)
    chunks = list(llm("Once upon a time", stream=True, **args))
    assert all(c["object"] == "text_completion" and c["id"] == chunks[0]["id"] for c in chunks)
    assert "".join(c["choices"][0]["text"] for c in chunks) == whole["choices"][0]["text"]
    assert [c["choices"][0]["finish_reason"] for c in chunks][-1] == whole["choices"][0]["finish_reason"]
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])
    assert "skyscrapers" not in whole["choices"][0]["text"]
    # streamed logprobs: the same tokens and offsets as the whole completion's
    whole = llm("Once upon a time", logprobs=1, **args)["choices"][0]["logprobs"]
    parts = [c["choices"][0]["logprobs"] for c in llm("Once upon a time", stream=True, logprobs=1, **args)]
    parts = [p for p in parts if p]
    assert sum((p["tokens"] for p in parts), []) == whole["tokens"]
    assert sum((p["text_offset"] for p in parts), []) == whole["text_offset"]
    assert llm("Once upon a time", max_tokens=4, temperature=0, suffix=" THE END")["choices"][0]["text"].endswith(" THE END")


def test_chat_shapes_and_response_format(llm):
    msgs = [{"role": "user", "content": "Describe a cat as JSON."}]
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "legs": {"type": "integer"}},
              "required": ["name", "legs"]}
    out = llm.create_chat_completion(msgs, temperature=0, max_tokens=64,
                                     response_format={"type": "json_object", "schema": schema})
    assert list(out) == ["id", "object", "created", "model", "choices", "usage"]
    assert out["id"].startswith("chatcmpl-") and out["object"] == "chat.completion"
    choice = out["choices"][0]
    assert choice["message"]["role"] == "assistant" and choice["finish_reason"] == "stop"
    assert set(json.loads(choice["message"]["content"])) >= {"name", "legs"}
    out = llm.create_chat_completion(msgs, temperature=0, max_tokens=64, response_format={
        "type": "json_schema", "json_schema": {"name": "cat", "schema": schema}})
    assert isinstance(json.loads(out["choices"][0]["message"]["content"])["legs"], int)
    out = llm.create_chat_completion([{"role": "user", "content": "Hi"}], temperature=0, max_tokens=4,
                                     logprobs=True, top_logprobs=2)
    content = out["choices"][0]["logprobs"]["content"]
    assert content and set(content[0]) == {"token", "logprob", "bytes", "top_logprobs"}


def test_tokenize_is_bytes(llm):
    toks = llm.tokenize(b"Hello World")
    assert llm.detokenize(toks) == b"Hello World"
    with pytest.raises(TypeError):
        llm.tokenize("a str")
    assert llm.tokenize(b"<|im_end|>", special=True) == [llm.token_eos()]
    assert len(llm.tokenize(b"<|im_end|>")) > 1
    assert llm.detokenize([llm.token_eos()]) == b""
    assert llm.detokenize([llm.token_eos()], special=True) == b"<|im_end|>"
    assert llm.n_vocab() == 49152 and llm.n_ctx() == 512 and llm.token_bos() == 1
    # metadata: every scalar of the file, as strings (llama.cpp's meta_val_str)
    assert llm.metadata["general.architecture"] == "llama"
    assert llm.metadata["llama.context_length"] == "8192"
    assert llm.metadata["tokenizer.ggml.add_bos_token"] == "false"
    assert llm.metadata["tokenizer.chat_template"].startswith("{%")


def test_state_round_trip(llm):
    from tessera.llama_cpp import LlamaState
    llm.set_seed(1337)
    state = llm.save_state()
    assert isinstance(state, LlamaState) and state.seed == 1337 and state.llama_state_size == len(state.llama_state)
    args = dict(max_tokens=8, temperature=1.0)
    first = llm("Pick a number from 1 to 10:", **args)["choices"][0]["text"]
    llm("Pick a number from 1 to 10:", **args)
    llm.load_state(state)
    assert llm("Pick a number from 1 to 10:", **args)["choices"][0]["text"] == first
    llm.reset()
    assert llm.n_tokens == 0


def test_refused_and_ignored_settings(tmp_path):
    from tessera.llama_cpp import Llama
    for kw in ({"lora_path": "x.gguf"}, {"rope_freq_base": 5e5},
               {"chat_format": "llama-2"}, {"pooling_type": 9}):
        with pytest.raises(ValueError):
            Llama(MODEL, verbose=False, **kw)
    with pytest.raises(TypeError, match="no_such"):
        Llama(MODEL, verbose=False, no_such=1)
    with pytest.raises(ValueError, match="does not exist"):
        Llama(str(tmp_path / "absent.gguf"), verbose=False)
    llm = Llama(MODEL, n_ubatch=64, n_threads_batch=1, numa=False, verbose=False)  # accepted
    with pytest.raises(ValueError, match="mirostat"):
        llm("x", mirostat_mode=3)
    with pytest.raises(RuntimeError, match="embedding=True"):
        llm.embed("x")
    with pytest.raises(ValueError, match="exceed context window"):
        llm("word " * 600)
    llm.close()
    # from_pretrained: only what the Hugging Face cache already holds
    with pytest.raises(FileNotFoundError, match="does not download"):
        Llama.from_pretrained("nobody/nothing", "*.gguf", cache_dir=str(tmp_path), verbose=False)
    snap = tmp_path / "models--org--smol" / "snapshots" / "0123"
    snap.mkdir(parents=True)
    (snap / "smol.Q4_1.gguf").symlink_to(MODEL)
    with Llama.from_pretrained("org/smol", "*Q4_1.gguf", cache_dir=str(tmp_path), verbose=False) as m:
        assert m.n_vocab() == 49152


def test_module_names():
    import tessera
    from tessera import llama_cpp
    assert tessera.Llama is llama_cpp.Llama
    assert llama_cpp.__version__.startswith("0.3.")
    g = llama_cpp.LlamaGrammar.from_json_schema({"type": "integer"})
    assert "root" in g._grammar
    assert "llama_cpp" not in sys.modules or sys.modules["llama_cpp"] is not llama_cpp
    from tessera.llama_cpp.llama_types import ChatCompletionRequestUserMessage
    assert llama_cpp.ChatCompletionRequestUserMessage is ChatCompletionRequestUserMessage
    assert ChatCompletionRequestUserMessage(role="user", content="Hi") == {"role": "user", "content": "Hi"}


def test_vocab_only_tokenization():
    """llama-cpp-python's test_llama_cpp_tokenization, less its check of
    Llama._ctx.ctx (llama.cpp's context pointer), on the same vocabulary."""
    from tessera.llama_cpp import Llama
    shared = os.environ.get("TESSERA_SHARED", os.path.join(HERE, "..", "..", "..", "..", "shared"))
    vocab = os.path.join(shared, "vocab", "ggml-vocab-llama-spm.gguf")
    if not os.path.exists(vocab):
        pytest.skip(f"{vocab} absent")
    llama = Llama(model_path=vocab, vocab_only=True, verbose=False)
    text = b"Hello World"
    tokens = llama.tokenize(text)
    assert tokens[0] == llama.token_bos()
    assert tokens == [1, 15043, 2787]
    assert llama.detokenize(tokens) == text
    tokens = llama.tokenize(text, add_bos=False)
    assert tokens == [15043, 2787]
    assert llama.detokenize(tokens) != text
    text = b"Hello World</s>"
    tokens = llama.tokenize(text)
    assert tokens[-1] != llama.token_eos()
    assert tokens == [1, 15043, 2787, 829, 29879, 29958]
    tokens = llama.tokenize(text, special=True)
    assert tokens[-1] == llama.token_eos()
    assert tokens == [1, 15043, 2787, 2]
    tokens = llama.tokenize(b"", add_bos=True, special=True)
    assert tokens == [llama.token_bos()]
    assert llama.detokenize(tokens) == b""
    assert llama.metadata["tokenizer.ggml.add_bos_token"] == "true" and llama.n_vocab() == 32000
    with pytest.raises(RuntimeError, match="vocab_only"):
        llama("Hello")


def test_logits_processor_and_stopping_criteria(llm):
    from tessera.llama_cpp import LogitsProcessorList, StoppingCriteriaList
    target = llm.tokenize(b" banana", add_bos=False)[0]
    seen = []

    def favour(input_ids, scores):
        seen.append(len(input_ids))
        scores[target] += 1000
        return scores

    out = llm("My favourite fruit is", max_tokens=3, temperature=0,
              logits_processor=LogitsProcessorList([favour]))
    assert out["choices"][0]["text"] == " banana" * 3
    n = len(llm.tokenize(b"My favourite fruit is"))
    assert seen == [n, n + 1, n + 2]  # input_ids: the prompt and what came since
    m = len(llm.tokenize(b"Once upon a time"))
    out = llm("Once upon a time", max_tokens=20, temperature=0,
              stopping_criteria=StoppingCriteriaList([lambda ids, scores: len(ids) >= m + 4]))
    assert out["choices"][0]["finish_reason"] == "stop" and out["usage"]["completion_tokens"] == 4


def test_chat_format_chatml_and_chat_handler():
    from tessera.llama_cpp import Llama
    with Llama(MODEL, n_ctx=512, chat_format="chatml", verbose=False) as llm:
        out = llm.create_chat_completion([{"role": "user", "content": "Say hi"}], temperature=0, max_tokens=8)
        assert out["choices"][0]["message"]["content"]
        # llama-cpp-python's ChatML: an empty system turn, not the template's default one
        assert out["usage"]["prompt_tokens"] == len(llm.tokenize(
            b"<|im_start|>system\n<|im_end|>\n<|im_start|>user\nSay hi<|im_end|>\n<|im_start|>assistant\n",
            special=True))
    from tessera._llama import _format_chat
    msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"},
            {"role": "assistant", "content": "A"}, {"role": "user", "content": "V"}]
    assert _format_chat("mistral-instruct", msgs) == ("[INST] U [/INST]A</s>[INST] V [/INST]", "</s>")
    assert _format_chat("gemma", msgs)[0] == ("<start_of_turn>user\nU<end_of_turn>\n<start_of_turn>model\nA"
                                              "<end_of_turn>\n<start_of_turn>user\nV<end_of_turn>\n"
                                              "<start_of_turn>model\n")
    assert _format_chat("llama-3", msgs[:2])[0] == (
        "<|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nU<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n")
    calls = []

    def handler(llama, messages, **kw):
        calls.append((llama, messages, kw["temperature"], kw["stream"]))
        return {"handled": True}

    with Llama(MODEL, n_ctx=512, chat_handler=handler, verbose=False) as llm:
        assert llm.create_chat_completion([{"role": "user", "content": "x"}], temperature=0.5) == {"handled": True}
        assert calls == [(llm, [{"role": "user", "content": "x"}], 0.5, False)]
