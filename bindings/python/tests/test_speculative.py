"""Speculative decoding through the extension (Context.speculate, the core's
tessera_spec_step): stories260K on ref drafting for itself, and n-grams,
give the tokens plain next() gives, greedy; spec_stats counts the drafts
(all accepted in the self-draft); a draft of another vocabulary (SmolLM2's)
is refused naming it.

On ref because its logits of a token are the same bits whether it is
decoded alone or in a batch; the CPU plugin's are not (SmolLM2 Q4_1 on
cpu-avx0: up to 0.67 apart, so drafting for itself kept 9 of 16 drafts and
the greedy text parted from plain decoding's at the fifth token)."""
import os

import pytest

import _tessera
from conftest import MODEL

STORIES = os.path.join(os.environ.get("TESSERA_SHARED", ""), "models", "stories260K.gguf")


def tokens_of(ctx, prompt, n, draft=None, ngram=False):
    ctx.start(prompt, n, temperature=0.0)
    if draft is not None or ngram:
        ctx.speculate(draft, p_min=0.0, ngram_n=2)
    out = []
    while True:
        t, _ = ctx.next()
        if t is None:
            return out
        out.append(t)


def test_speculate_same_tokens():
    if not os.path.exists(STORIES):
        pytest.skip("stories260K absent")
    m = _tessera.Model(STORIES, "ref")
    prompt = m.tokenize(b"Once upon a time, there was a little girl. Once upon a time,", True, False)
    plain = tokens_of(_tessera.Context(m, 512), prompt, 32)
    tgt, dft = _tessera.Context(m, 512), _tessera.Context(m, 512)
    assert tokens_of(tgt, prompt, 32, draft=dft) == plain
    steps, drafted, accepted = tgt.spec_stats()
    assert drafted > 0 and accepted == drafted
    ng = _tessera.Context(m, 512)
    assert tokens_of(ng, prompt, 32, ngram=True) == plain
    assert ng.spec_stats()[1] > 0


def test_speculate_refuses_other_vocabulary():
    if not os.path.exists(STORIES):
        pytest.skip("stories260K absent")
    m, other = _tessera.Model(MODEL, "ref"), _tessera.Model(STORIES, "ref")
    ctx, d = _tessera.Context(m, 256), _tessera.Context(other, 256)
    with pytest.raises(Exception, match="vocabulary|tokenizer|BOS"):
        ctx.speculate(d)
