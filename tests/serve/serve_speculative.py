"""Speculative decoding in tessera serve (-md, --spec-type ngram-simple):
greedy completions are the text `tessera run` prints without speculation,
on two slots at once; the response's timings carry llama-server's draft_n and
draft_n_accepted (stories260K drafting for itself: all accepted), and /metrics
llamacpp:spec_decode_num_draft_tokens_total / _accepted_tokens_total /
_drafts_total count them. A request asking for logprobs decodes as usual
(no draft fields) and a draft model with another vocabulary stops the server
with an error naming it."""
import os
import subprocess
import tempfile
import threading

from serve_common import BIN, MODEL, Server, expect, main, run_greedy

PROMPT = "Once upon a time, there was a little girl named"


def metric(text, name):
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def complete(srv, body, out, i):
    out[i] = srv.json("POST", "/completion", body)


def test_draft():
    want = run_greedy(PROMPT, 24)
    with Server("--parallel", "2", "-c", "256", "-md", MODEL, "--draft-p-min", "0", "--draft-max", "4") as srv:
        body = {"prompt": PROMPT, "n_predict": 24, "temperature": 0}
        res = [None, None]
        th = [threading.Thread(target=complete, args=(srv, body, res, i)) for i in range(2)]
        for t in th:
            t.start()
        for t in th:
            t.join()
        for st, obj in res:
            expect(st == 200, "completion: %d %r" % (st, obj))
            expect(obj["content"] == want, "text %r, tessera run says %r" % (obj["content"], want))
            t = obj["timings"]
            expect(t.get("draft_n", 0) > 0 and t.get("draft_n_accepted") == t.get("draft_n"),
                   "timings: %r" % t)
        drafted = sum(o["timings"]["draft_n"] for _, o in res)
        st, _, data = srv.request("GET", "/metrics")
        text = data.decode()
        expect(metric(text, "llamacpp:spec_decode_num_draft_tokens_total") == drafted,
               "metrics drafted %r, timings %d" % (metric(text, "llamacpp:spec_decode_num_draft_tokens_total"),
                                                  drafted))
        expect(metric(text, "llamacpp:spec_decode_num_accepted_tokens_total") == drafted, "accepted")
        expect(metric(text, "llamacpp:spec_decode_num_drafts_total") > 0, "drafts")
        st, obj = srv.json("POST", "/completion", dict(body, n_probs=2))
        expect(st == 200 and "draft_n" not in obj["timings"], "logprobs request: %d %r" % (st, obj.get("timings")))
        expect(obj["content"] == want, "logprobs request text %r" % obj["content"])


def test_ngram():
    rep = "The cat sat on the mat. The dog sat on the log. " * 3 + "The cat sat on the"
    want = run_greedy(rep, 24)
    with Server("--parallel", "1", "-c", "256", "--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "3") as srv:
        st, obj = srv.json("POST", "/completion", {"prompt": rep, "n_predict": 24, "temperature": 0})
        expect(st == 200 and obj["content"] == want, "n-grams: %d %r, want %r" % (st, obj.get("content"), want))
        expect(obj["timings"].get("draft_n", 0) > 0, "n-gram timings %r" % obj["timings"])


def test_mismatch():
    with tempfile.TemporaryDirectory() as d:
        small = os.path.join(d, "small.gguf")
        synth = os.path.join(os.path.dirname(BIN), "tools", "tessera-synth")
        subprocess.run([synth, "-q", "-o", small, "--vocab-from", MODEL, "--dim", "64", "--layers", "1", "--heads",
                        "2", "--ffn", "64", "--ctx", "256", "--vocab", "300"], check=True)
        p = subprocess.run([BIN, "serve", "-m", MODEL, "--port", "0", "-md", small], capture_output=True, text=True,
                           timeout=60)
        expect(p.returncode != 0 and "300 tokens, the target's 512" in p.stderr, "mismatch: %r" % p.stderr[-300:])


main([("draft model, two slots", test_draft), ("n-grams", test_ngram), ("vocabulary mismatch", test_mismatch)])
