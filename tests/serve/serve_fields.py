"""The request fields beyond the basics, over raw HTTP with stories260K:
n choices (choice i is the single request with seed + i), seed
reproducibility, stop strings (cut also when streamed), logprobs (checked
against the log-softmax of llama.cpp's logits in ../shared/golden),
logit_bias banning the greedy token, frequency penalty, and streamed output
equal to the non-streamed one for each of these."""
import json
import math
import os

from serve_common import SHARED, Server, expect, main, stream_text

CHAT = "/v1/chat/completions"
COMPL = "/v1/completions"
MSGS = [{"role": "user", "content": "Tell me a story."}]


def post(srv, path, body):
    st, obj = srv.json("POST", path, body)
    expect(st == 200, "%s %r: status %d %r" % (path, body, st, obj))
    return obj


def texts(obj, chat):
    return [c["message"]["content"] if chat else c["text"] for c in sorted(obj["choices"], key=lambda c: c["index"])]


def streamed(srv, path, body, n):
    events, done = srv.stream(path, body)
    expect(done, "no [DONE]")
    chat = path == CHAT
    out = [[] for _ in range(n)]
    finish = [None] * n
    for e in events:
        for ch in e.get("choices", []):
            i = ch["index"]
            out[i].append((ch["delta"].get("content") or "") if chat else ch.get("text", ""))
            if ch.get("finish_reason"):
                expect(finish[i] is None, "two finish_reasons for choice %d" % i)
                finish[i] = ch["finish_reason"]
    expect(all(finish), "a choice without finish_reason: %r" % finish)
    return ["".join(o) for o in out], events


def test_n_and_seed():
    with Server("--parallel", "3") as srv:
        for path in (CHAT, COMPL):
            chat = path == CHAT
            base = {"max_tokens": 12, "temperature": 1.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0}
            base.update({"messages": MSGS} if chat else {"prompt": "Once upon a time"})
            three = post(srv, path, dict(base, n=3, seed=7))
            expect(len(three["choices"]) == 3, "n=3 gave %d choices" % len(three["choices"]))
            got = texts(three, chat)
            # choice i samples with seed + i: equal to the single request with that seed
            for i in range(3):
                one = texts(post(srv, path, dict(base, seed=7 + i)), chat)[0]
                expect(one == got[i], "%s choice %d %r != seed %d alone %r" % (path, i, got[i], 7 + i, one))
            expect(len(set(got)) > 1, "three sampled choices all equal: %r" % got)
            expect(three["usage"]["completion_tokens"] == 36, "usage over choices %r" % three["usage"])
            again = texts(post(srv, path, dict(base, n=3, seed=7)), chat)
            expect(again == got, "same seed, different text: %r vs %r" % (again, got))
            st, _ = streamed(srv, path, dict(base, n=3, seed=7), 3)
            expect(st == got, "streamed n=3 %r != %r" % (st, got))


def test_stop():
    with Server() as srv:
        body = {"prompt": "Once upon a time", "max_tokens": 40, "temperature": 0}
        full = post(srv, COMPL, body)["choices"][0]["text"]
        # A stop string that spans several tokens, from the middle of the text.
        mid = len(full) // 2
        stop = full[mid:mid + 7]
        expect(len(stop) == 7, "greedy text too short: %r" % full)
        want = full[:full.index(stop)]
        got = post(srv, COMPL, dict(body, stop=[stop, "zzzz"]))
        expect(got["choices"][0]["text"] == want, "stop %r: %r, want %r" % (stop, got["choices"][0]["text"], want))
        expect(got["choices"][0]["finish_reason"] == "stop", "finish %r" % got["choices"][0]["finish_reason"])
        st, events = streamed(srv, COMPL, dict(body, stop=stop), 1)
        expect(st[0] == want, "streamed stop: %r, want %r" % (st[0], want))
        expect(all(stop not in (ch.get("text") or "") for e in events for ch in e["choices"]), "stop string sent")
        # with logprobs, no token past the cut is reported
        lp = post(srv, COMPL, dict(body, stop=stop, logprobs=1))["choices"][0]["logprobs"]
        expect("".join(lp["tokens"]).startswith(want) and len("".join(lp["tokens"])) < len(want) + 8,
               "logprob tokens %r vs text %r" % (lp["tokens"], want))


def golden():
    with open(os.path.join(SHARED, "golden", "stories260K.jsonl")) as f:
        return [json.loads(line) for line in f]


def log_softmax(row):
    m = max(row)
    lse = m + math.log(sum(math.exp(x - m) for x in row))
    return [x - lse for x in row]


def test_logprobs():
    with Server() as srv:
        for g in golden()[:3]:
            want = log_softmax(g["all_logits"][-1])
            r = post(srv, COMPL, {"prompt": g["prompt"], "max_tokens": 4, "temperature": 0, "logprobs": 5})
            lp = r["choices"][0]["logprobs"]
            expect(len(lp["tokens"]) == 4 and len(lp["token_logprobs"]) == 4 and len(lp["top_logprobs"]) == 4,
                   "legacy logprobs shape %r" % lp)
            expect("".join(lp["tokens"]) == r["choices"][0]["text"], "tokens do not spell the text")
            first = g["greedy"][0]
            expect(abs(lp["token_logprobs"][0] - want[first]) < 2e-3,
                   "%r: first token logprob %g, llama.cpp logits give %g" % (g["prompt"], lp["token_logprobs"][0],
                                                                         want[first]))
            top5 = sorted(range(len(want)), key=lambda i: -want[i])[:5]
            got_top = sorted(lp["top_logprobs"][0].values(), reverse=True)
            for a, b in zip(got_top, [want[i] for i in top5]):
                expect(abs(a - b) < 2e-3, "top logprobs %r vs %r" % (got_top, [want[i] for i in top5]))
            for i, top in enumerate(lp["top_logprobs"]):
                expect(sum(math.exp(v) for v in top.values()) <= 1 + 1e-5, "top probabilities sum over 1")
                expect(abs(max(top.values()) - lp["token_logprobs"][i]) < 1e-6, "greedy token is not the top one")
        # chat shape: token, logprob, bytes, top_logprobs; the chosen greedy token is the first alternative
        r = post(srv, CHAT, {"messages": MSGS, "max_tokens": 6, "temperature": 0, "logprobs": True, "top_logprobs": 3})
        content = r["choices"][0]["logprobs"]["content"]
        expect(len(content) == 6, "chat logprobs entries %d" % len(content))
        expect("".join(e["token"] for e in content) == r["choices"][0]["message"]["content"], "chat tokens != text")
        for e in content:
            expect(bytes(e["bytes"]).decode("utf-8", "replace") == e["token"], "bytes %r vs %r" % (e["bytes"], e["token"]))
            expect(len(e["top_logprobs"]) == 3 and e["top_logprobs"][0]["token"] == e["token"] and
                   abs(e["top_logprobs"][0]["logprob"] - e["logprob"]) < 1e-6, "chat top %r" % e)
            expect(e["logprob"] <= 0 and sum(math.exp(t["logprob"]) for t in e["top_logprobs"]) <= 1 + 1e-5,
                   "chat probabilities %r" % e)
        plain = post(srv, CHAT, {"messages": MSGS, "max_tokens": 2, "logprobs": False})
        expect(plain["choices"][0]["logprobs"] is None, "logprobs without asking")
        events, done = srv.stream(CHAT, {"messages": MSGS, "max_tokens": 6, "temperature": 0, "logprobs": True,
                                         "top_logprobs": 3})
        sent = [e2 for e in events for ch in e["choices"] if ch.get("logprobs") for e2 in ch["logprobs"]["content"]]
        expect([e["token"] for e in sent] == [e["token"] for e in content], "streamed logprobs differ")


def test_bias_and_penalties():
    with Server() as srv:
        body = {"prompt": "Once upon a time", "max_tokens": 1, "temperature": 0, "logprobs": 2}
        r = post(srv, COMPL, body)
        top = r["choices"][0]["logprobs"]["top_logprobs"][0]
        best, second = sorted(top, key=lambda k: -top[k])
        g = golden()[0]
        greedy_id = g["greedy"][0]
        banned = post(srv, COMPL, dict(body, logit_bias={str(greedy_id): -100}))
        expect(banned["choices"][0]["text"] == second,
               "banning %d (%r): got %r, want the second best %r" % (greedy_id, best, banned["choices"][0]["text"],
                                                                   second))
        plain = post(srv, COMPL, dict(body, max_tokens=40, logprobs=None))["choices"][0]["text"]
        pen = post(srv, COMPL, dict(body, max_tokens=40, logprobs=None, frequency_penalty=2.0))["choices"][0]["text"]
        expect(pen != plain, "frequency_penalty 2 changed nothing: %r" % plain)
        pres = post(srv, COMPL, dict(body, max_tokens=40, logprobs=None, presence_penalty=2.0))["choices"][0]["text"]
        expect(pres != plain, "presence_penalty 2 changed nothing: %r" % plain)


if __name__ == "__main__":
    main([
        ("n choices are seed + i, reproducible, streamed equal", test_n_and_seed),
        ("stop strings cut, also streamed", test_stop),
        ("logprobs equal llama.cpp's log-softmax", test_logprobs),
        ("logit_bias bans, penalties change the output", test_bias_and_penalties),
    ])
