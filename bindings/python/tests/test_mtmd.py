"""Images in chat() and the llama-cpp-python drop-in, on tests/mtmd's
synthetic LLaVA pair (TESSERA_MM_DIR: the build folder holding it,
TESSERA_MM_DATA: tests/data/mm): an image given as bytes, as a path and as
a data: URI gives exactly the greedy text of `tessera run --mmproj ...
--image ...` on the same prompt (the chat template's, with <__media__>
where the image is); Llama(chat_handler=Llava15ChatHandler(clip_model_path=
...)) the same; without a projector an image part is an error naming it,
and so are a truncated image and a remote URL."""
import base64
import json
import os
import subprocess

import pytest

import tessera
from tessera import _chat
from tessera.llama_cpp import Llama
from tessera.llama_cpp.llama_chat_format import Llava15ChatHandler

MM = os.environ.get("TESSERA_MM_DIR", "")
DATA = os.environ.get("TESSERA_MM_DATA", "")
MODEL = os.path.join(MM, "synth-llava-f32.gguf")
PROJ = os.path.join(MM, "mmproj-synth-llava-f32.gguf")
SQ = os.path.join(DATA, "sq56.png")
WIDE = os.path.join(DATA, "wide.png")
N = 16

pytestmark = pytest.mark.skipif(not all(os.path.exists(p) for p in (MODEL, PROJ, SQ, WIDE)),
                                reason="the synthetic LLaVA pair (TESSERA_MM_DIR, TESSERA_MM_DATA) is absent")


def messages(image_part):
    return [{"role": "user", "content": [image_part, {"type": "text", "text": "Once upon a time"}]}]


def run_text(model, msgs, image):
    """`tessera run`'s greedy text after the conversation's prompt with the image."""
    variables = {"messages": _chat._template_messages(msgs), "add_generation_prompt": True}
    text, has_bos = model._m.apply_template(json.dumps(variables))
    assert "<__media__>" in text and not has_bos
    out = subprocess.run([os.environ["TESSERA_BIN"], "run", "-m", MODEL, "--mmproj", PROJ, "--image", image,
                          "-p", text, "-n", str(N), "--temp", "0", "--no-echo", "--no-escape", "-c", "512"],
                         capture_output=True, check=True).stdout
    return out.decode("utf-8", errors="replace")[:-1]


@pytest.fixture(scope="module")
def vlm():
    return tessera.Model(MODEL, mmproj=PROJ, n_ctx=512)


def test_chat_image_three_ways(vlm):
    with open(SQ, "rb") as f:
        png = f.read()
    uri = "data:image/png;base64," + base64.b64encode(png).decode()
    want = run_text(vlm, messages({"type": "image_url", "image_url": {"url": uri}}), SQ)
    assert want
    for part in ({"type": "image_url", "image_url": {"url": uri}}, {"type": "image_url", "image_url": SQ},
                 {"type": "image", "image": png}, {"type": "input_image", "image_url": "file://" + SQ}):
        r = vlm.chat(messages(part), max_tokens=N, temperature=0)
        assert r["choices"][0]["message"]["content"] == want, part["type"]
        assert r["usage"]["prompt_tokens"] > 16  # the image's 16 rows count
    # another image: its own text, not the first one's
    want_wide = run_text(vlm, messages({"type": "image", "image": WIDE}), WIDE)
    got = vlm.chat(messages({"type": "image", "image": WIDE}), max_tokens=N, temperature=0)
    assert got["choices"][0]["message"]["content"] == want_wide
    # streamed: the same text in pieces
    pieces = [c["choices"][0]["delta"].get("content", "") or ""
              for c in vlm.chat(messages({"type": "image", "image": png}), max_tokens=N, temperature=0, stream=True)]
    assert "".join(pieces) == want


def test_bad_images(vlm):
    with open(SQ, "rb") as f:
        png = f.read()
    with pytest.raises(ValueError, match="image 0"):
        vlm.chat(messages({"type": "image", "image": png[:len(png) // 2]}), max_tokens=2)
    with pytest.raises(ValueError, match=r"messages\[0\].content\[0\].*not fetched"):
        vlm.chat(messages({"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}), max_tokens=2)
    with pytest.raises(ValueError, match=r"messages\[0\].content\[0\].*cannot read"):
        vlm.chat(messages({"type": "image", "image": "/nonexistent/a.png"}), max_tokens=2)
    with pytest.raises(ValueError, match="no audio encoder"):
        vlm.chat(messages({"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}), max_tokens=2)
    # and it still answers
    assert vlm.chat(messages({"type": "image", "image": png}), max_tokens=2, temperature=0)["choices"]


def test_without_projector():
    m = tessera.Model(MODEL, n_ctx=512)
    with pytest.raises(ValueError, match=r"messages\[0\].content\[0\].*mmproj"):
        m.chat(messages({"type": "image", "image": SQ}), max_tokens=2)
    with pytest.raises(tessera.TesseraError, match="mmproj"):
        tessera.Model(MODEL, mmproj=MODEL)


def test_llama_drop_in(vlm):
    msgs = messages({"type": "image_url", "image_url": {"url": "data:image/png;base64," +
                                                        base64.b64encode(open(SQ, "rb").read()).decode()}})
    want = run_text(vlm, msgs, SQ)
    llm = Llama(MODEL, chat_handler=Llava15ChatHandler(clip_model_path=PROJ), n_ctx=512, verbose=False)
    r = llm.create_chat_completion(messages=msgs, temperature=0, max_tokens=N)
    # llama-cpp-python's text drops bytes that are not UTF-8 (the synthetic
    # model writes some) where tessera run writes U+FFFD
    assert r["choices"][0]["message"]["content"] == want.replace("\ufffd", "")
    text = Llama(MODEL, n_ctx=512, verbose=False)
    with pytest.raises(ValueError, match=r"messages\[0\].content\[0\].*clip_model_path"):
        text.create_chat_completion(messages=msgs, max_tokens=2)


def test_next_turn_reuses_the_image(vlm):
    """A session with prefix_cache: the next turn of a conversation showing
    the same image decodes only its new text (the image's rows and the
    first turn stay in the cache: usage's cached_tokens), and gives the
    text a fresh session gives; another image ends the reused prefix
    before it."""
    s = vlm.session(n_ctx=512, prefix_cache=True)
    first = messages({"type": "image", "image": SQ})
    r1 = s.chat(first, max_tokens=4, temperature=0)
    u1 = r1["usage"]
    assert u1["prompt_tokens_details"]["cached_tokens"] == 0
    second = first + [{"role": "assistant", "content": r1["choices"][0]["message"]["content"]},
                      {"role": "user", "content": "And then?"}]
    r2 = s.chat(second, max_tokens=N, temperature=0)
    u2 = r2["usage"]
    decoded = u2["prompt_tokens"] - u2["prompt_tokens_details"]["cached_tokens"]
    # the first prompt (its 16 image rows among them) is reused; what is
    # decoded is at most the text past it (the reply as the template writes
    # it and the new message)
    assert u2["prompt_tokens_details"]["cached_tokens"] >= u1["prompt_tokens"] > 16
    print("turn 1: %d prompt; turn 2: %d prompt, %d cached, %d decoded" %
          (u1["prompt_tokens"], u2["prompt_tokens"], u2["prompt_tokens_details"]["cached_tokens"], decoded))
    assert 0 < decoded <= u2["prompt_tokens"] - u1["prompt_tokens"]
    fresh = vlm.session(n_ctx=512).chat(second, max_tokens=N, temperature=0)
    assert r2["choices"][0]["message"]["content"] == fresh["choices"][0]["message"]["content"]
    # the same conversation with another image: nothing past the image's start is reused
    other = [dict(m) for m in second]
    other[0] = messages({"type": "image", "image": WIDE})[0]
    r3 = s.chat(other, max_tokens=N, temperature=0)
    assert r3["usage"]["prompt_tokens_details"]["cached_tokens"] < 16
    fresh = vlm.session(n_ctx=512).chat(other, max_tokens=N, temperature=0)
    assert r3["choices"][0]["message"]["content"] == fresh["choices"][0]["message"]["content"]
