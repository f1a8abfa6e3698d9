"""tessera serve's slots and prompt cache on a recurrent hybrid (tests/data's
synth-lfm2-f32: a state per slot that cannot be rolled back part way,
docs/architectures.md; the one synthetic hybrid whose greedy text
tokenizes back to its tokens, which the extending prompts below need: the
others' random weights emit lone bytes):
  - a prompt that extends what a slot holds reuses it (cached_tokens) and
    gives the text of a fresh server;
  - the same prompt again cannot reuse the state (it would need the last
    position decoded again): cached_tokens 0 and the same text;
  - a slot saved, erased and restored into the other slot serves an
    extending prompt from the restored state with a fresh server's text;
  - two requests at once on two slots give each its text alone;
  - --context-shift is turned off with a warning (a state cannot shift): a
    full slot ends the reply with finish_reason length."""
import os
import tempfile
import threading

from serve_common import TEST_DATA, Server, expect, main, skip

MODELS = [os.path.join(TEST_DATA, "synth-lfm2-f32.gguf")]
PROMPT = "Once upon a time, there was a little girl named"


def complete(srv, prompt, n=8):
    st, obj = srv.json("POST", "/v1/completions", {"prompt": prompt, "max_tokens": n, "temperature": 0})
    expect(st == 200, "completion of %r: %d %r" % (prompt, st, obj))
    return obj["choices"][0]["text"], obj["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0)


def fresh(model, prompt):
    with Server("--parallel", "1", "-c", "256", model=model) as srv:
        return complete(srv, prompt)[0]


def check_model(model):
    name = os.path.basename(model)
    first_text = fresh(model, PROMPT)
    longer = PROMPT + first_text + " and"
    longer_text = fresh(model, longer)
    with tempfile.TemporaryDirectory() as d:
        with Server("--parallel", "2", "-c", "256", "--slot-save-path", d, model=model) as srv:
            text, cached = complete(srv, PROMPT)
            expect(text == first_text and cached == 0, "%s: first request %r (cached %r), fresh %r" %
                   (name, text, cached, first_text))
            text, cached = complete(srv, longer)
            expect(text == longer_text and cached > 0, "%s: an extending prompt: %r, cached %r; fresh %r" %
                   (name, text, cached, longer_text))
            text, cached = complete(srv, longer)
            expect(text == longer_text and cached == 0,
                   "%s: the same prompt again: %r, cached %r (want 0: no partial rollback); fresh %r" %
                   (name, text, cached, longer_text))
            # the slot now holds `longer` and its reply: save, erase, restore into the other slot
            st, obj = srv.json("POST", "/slots/0?action=save", {"filename": "s.bin"})
            expect(st == 200 and obj.get("n_saved", 0) > 0, "%s: save: %d %r" % (name, st, obj))
            st, obj = srv.json("POST", "/slots/0?action=erase", {})
            expect(st == 200, "%s: erase: %d %r" % (name, st, obj))
            st, obj = srv.json("POST", "/slots/1?action=restore", {"filename": "s.bin"})
            expect(st == 200, "%s: restore into slot 1: %d %r" % (name, st, obj))
            again = longer + longer_text + " then"
            want = fresh(model, again)
            text, cached = complete(srv, again)
            expect(text == want and cached > 0, "%s: after a restore: %r, cached %r; fresh %r" %
                   (name, text, cached, want))
            # two at once
            got = {}

            def one(p):
                got[p] = complete(srv, p)[0]
            ts = [threading.Thread(target=one, args=(p,)) for p in (PROMPT, longer)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            expect(got.get(PROMPT) == first_text and got.get(longer) == longer_text,
                   "%s: two slots at once: %r" % (name, got))
    # --context-shift: turned off at load with a warning (as llama-server
    # does for memory that cannot shift), so a full slot ends the reply at
    # the context's end ("length", truncated), never an error.
    with Server("--parallel", "1", "-c", "32", "--context-shift", model=model) as srv:
        warned = srv.wait_log(lambda line: "--context-shift is off" in line and "recurrent state" in line)
        expect(warned, "%s: no warning that --context-shift is off: %r" % (name, srv.stderr_lines[-5:]))
        st, obj = srv.json("POST", "/v1/completions", {"prompt": PROMPT, "max_tokens": 64, "temperature": 0})
        choice = (obj.get("choices") or [{}])[0] if isinstance(obj, dict) else {}
        expect(st == 200 and choice.get("finish_reason") == "length" and
               obj["usage"]["prompt_tokens"] + obj["usage"]["completion_tokens"] <= 32,
               "%s: --context-shift on a full slot: %d %r" % (name, st, obj))


def test_hybrids():
    for m in MODELS:
        if not os.path.exists(m):
            skip("%s is not built (tests/data)" % m)
        check_model(m)


if __name__ == "__main__":
    main([("slots and prompt cache on lfm2", test_hybrids)])
