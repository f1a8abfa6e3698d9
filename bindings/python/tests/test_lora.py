"""LoRA adapters through the Python package: Model.load_lora and
Session.set_loras give llama.cpp's greedy tokens of the synthetic model
with its adapters (tests/data synth-lora-*.jsonl, llama_set_adapters_lora),
at scale 1 and 0.5, and none again after set_loras({})."""
import json
import os

import pytest

import tessera

DATA = os.environ.get("TESSERA_TEST_DATA", "")
BASE = os.path.join(DATA, "synth-lora-base-f32.gguf")
R4 = os.path.join(DATA, "synth-lora-r4-f32.gguf")


def golden(name):
    with open(os.path.join(DATA, name), "rb") as f:
        return [json.loads(line.decode("utf-8", "replace")) for line in f if line.strip()]


@pytest.mark.skipif(not os.path.exists(BASE), reason="tests/data's synthetic LoRA files are not built")
def greedy(s, case):
    st = s.generate_tokens(case["tokens"], max_tokens=16, temperature=0)
    for _ in st:
        pass
    return st.tokens


def test_lora_scales_match_llama_cpp():
    m = tessera.Model(BASE, devices="ref", n_ctx=256)
    a = m.load_lora(R4)
    s = tessera.Session(m)
    first = golden("synth-lora-r4.jsonl")[0]
    base = greedy(s, first)
    for name, scale in [("synth-lora-r4.jsonl", 1.0), ("synth-lora-r4-half.jsonl", 0.5)]:
        case = golden(name)[0]
        s.set_loras({a: scale})
        s.reset()
        assert greedy(s, case) == case["greedy"]
    assert base != first["greedy"]
    s.set_loras({})
    s.reset()
    assert greedy(s, first) == base
    with pytest.raises(TypeError):
        s.set_loras({"x": 1.0})
    with pytest.raises(tessera.TesseraError):
        m.load_lora(BASE)  # a model, not an adapter
