"""Sounds in chat(), on tests/mtmd's synthetic Ultravox and Voxtral pairs
(TESSERA_MM_DIR: the build folder holding them, TESSERA_MM_DATA:
tests/data/mm, whose make_wav.py writes the sound): an input_audio part
(base64) and an audio part (bytes, a path) give exactly the greedy text of
`tessera run --mmproj ... --audio ...` on the same prompt; a truncated WAV,
bad base64 and an image for this audio-only projector are errors naming
the part."""
import base64
import json
import os
import subprocess
import sys

import pytest

import tessera
from tessera import _chat

MM = os.environ.get("TESSERA_MM_DIR", "")
DATA = os.environ.get("TESSERA_MM_DATA", "")
FAMILIES = ["ultravox", "voxtral"]
N = 8


def pair(family):
    return os.path.join(MM, "synth-%s-f32.gguf" % family), os.path.join(MM, "mmproj-synth-%s-f32.gguf" % family)


pytestmark = pytest.mark.skipif(
    not all(os.path.exists(p) for f in FAMILIES for p in pair(f) + (os.path.join(DATA, "make_wav.py"),)),
    reason="the synthetic Ultravox and Voxtral pairs (TESSERA_MM_DIR, TESSERA_MM_DATA) are absent")


@pytest.fixture(scope="module")
def wav(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("audio") / "tones3.wav")
    subprocess.run([sys.executable, os.path.join(DATA, "make_wav.py"), path, "3"], check=True)
    return path


@pytest.fixture(scope="module", params=FAMILIES)
def alm(request):
    model = tessera.Model(pair(request.param)[0], mmproj=pair(request.param)[1], n_ctx=1024)
    model.family = request.param
    return model


def messages(part):
    return [{"role": "user", "content": [part, {"type": "text", "text": "Once upon a time"}]}]


def run_text(model, msgs, wav):
    variables = {"messages": _chat._template_messages(msgs), "add_generation_prompt": True}
    text, has_bos = model._m.apply_template(json.dumps(variables))
    assert "<__media__>" in text and not has_bos
    path, proj = pair(model.family)
    out = subprocess.run([os.environ["TESSERA_BIN"], "run", "-m", path, "--mmproj", proj, "--audio", wav,
                          "-p", text, "-n", str(N), "--temp", "0", "--no-echo", "--no-escape", "-c", "1024"],
                         capture_output=True, check=True).stdout
    return out.decode("utf-8", errors="replace")[:-1]


def test_chat_audio(alm, wav):
    with open(wav, "rb") as f:
        data = f.read()
    part = {"type": "input_audio", "input_audio": {"data": base64.b64encode(data).decode(), "format": "wav"}}
    want = run_text(alm, messages(part), wav)
    assert want
    for p in (part, {"type": "audio", "audio": data}, {"type": "audio", "audio": wav}):
        r = alm.chat(messages(p), max_tokens=N, temperature=0)
        assert r["choices"][0]["message"]["content"] == want, p["type"]
        assert r["usage"]["prompt_tokens"] > 375  # one 30 s window's 375 rows


def test_bad_audio(alm, wav):
    with open(wav, "rb") as f:
        data = f.read()
    with pytest.raises(ValueError, match="wav"):
        alm.chat(messages({"type": "audio", "audio": data[:len(data) // 3]}), max_tokens=2)
    with pytest.raises(ValueError, match=r"messages\[0\].content\[0\].*base64"):
        alm.chat(messages({"type": "input_audio", "input_audio": {"data": "@@@", "format": "wav"}}), max_tokens=2)
    with pytest.raises(ValueError, match=r"messages\[0\].content\[0\].*" + alm.family):
        alm.chat(messages({"type": "image", "image": b"\x89PNG\r\n\x1a\n"}), max_tokens=2)
