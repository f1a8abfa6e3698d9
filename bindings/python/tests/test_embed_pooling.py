"""Model.embed under each pooling: different texts give different vectors,
and the default (pooling=None: the file's pooling_type, none when it has
none) gives what `tessera embed` prints with its default, row for row."""
import json
import math
import os
import subprocess

import pytest

import tessera
from conftest import GEMMA, MODEL

# The CLI prints the same floats through JSON (%.9g), both L2-normalised; a
# cosine of 1 - 1e-6 allows the last digits and nothing more.
COSINE_MIN = 0.999999
# Two texts' vectors count as different below this cosine (identical
# vectors, the bug, give 1.0 to the last digit).
SAME = 0.99999

TEXTS = ["a cat", "the stock market"]


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


@pytest.fixture(scope="module", params=[MODEL, GEMMA], ids=["smollm2", "gemma3"])
def any_model(request):
    if not os.path.exists(request.param):
        pytest.skip(f"{request.param} absent (scripts/fetch-models.sh)")
    return tessera.Model(request.param, n_ctx=256)


def cli_embed(path, text, *extra):
    out = subprocess.run([os.environ["TESSERA_BIN"], "embed", "-m", path, "-p", text, "-c", "256",
                          "--embd-output-format", "json", *extra], capture_output=True, check=True).stdout
    return [d["embedding"] for d in json.loads(out)["data"]]


def test_default_equals_cli(any_model):
    """pooling=None gives `tessera embed`'s rows (its default pooling):
    before the fix it gave only the first token's row."""
    for text in TEXTS:
        want = cli_embed(any_model.path, text)
        got = any_model.embed(text)
        if len(want) > 1:  # pooling none: one row per token
            assert isinstance(got[0], list) and len(got) == len(want) == len(any_model.tokenize(text))
        else:
            got = [got]
        for row, (g, w) in enumerate(zip(got, want)):
            c = cosine(g, w)
            assert c > COSINE_MIN, f"{text!r} row {row}: cosine {c:.9f} to tessera embed's"


def test_default_differs_between_texts(any_model):
    a, b = any_model.embed(TEXTS)
    # whatever the shape, the texts' vectors are not one vector
    assert json.dumps(a) != json.dumps(b)
    flat_a = a if not isinstance(a[0], list) else a[-1]
    flat_b = b if not isinstance(b[0], list) else b[-1]
    assert cosine(flat_a, flat_b) < SAME


@pytest.mark.parametrize("pooling", ["mean", "last"])
def test_pooled_texts_differ(any_model, pooling):
    a, b = any_model.embed(TEXTS, pooling=pooling)
    assert len(a) == len(b) == any_model.n_embd
    assert cosine(a, b) < SAME, f"pooling {pooling}: the two texts give one vector"
    assert cosine(a, cli_embed(any_model.path, TEXTS[0], "--pooling", pooling)[0]) > COSINE_MIN


def test_none_pooling_rows_differ(any_model):
    a, b = any_model.embed(TEXTS, pooling="none")
    assert len(a) == len(any_model.tokenize(TEXTS[0])) and len(b) == len(any_model.tokenize(TEXTS[1]))
    # the last token has seen the whole text
    assert cosine(a[-1], b[-1]) < SAME


def test_cls_pooling(any_model):
    """cls takes the first token's row. On a causal decoder that row sees
    only the first token: texts with different first tokens differ; with a
    BOS first (Gemma 3) every text gives the BOS row, as in llama.cpp."""
    a, b = any_model.embed(TEXTS, pooling="cls")
    first = [any_model.tokenize(t)[0] for t in TEXTS]
    if first[0] != first[1]:
        assert cosine(a, b) < SAME
    else:
        assert any_model.metadata["adds_bos"]
        assert cosine(a, b) > COSINE_MIN
    # a text and the same text with more words: the first row is the same
    assert cosine(a, any_model.embed(TEXTS[0] + " sat on the mat", pooling="cls")) > COSINE_MIN
