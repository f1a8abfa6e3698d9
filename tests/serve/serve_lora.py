"""llama-server's LoRA adapters on tessera serve: GET/POST /lora-adapters
and a request's `lora` field ([{id, scale}], unlisted adapters 0), with
--lora and --lora-scaled. The greedy tokens equal llama.cpp's with the same
adapters and scales (tests/data synth-lora-*.jsonl, made with
llama_set_adapters_lora), whichever way the scales are given, one request
after another and two at once with different scales (a step decodes one
set of scales; the other waits its turn), without reloading anything; a
cached prompt prefix is reused only with the same scales; bad ids and
values are 400s; --lora-init-without-apply starts at scale 0. With -md
(the base model drafting, without adapters) the tokens are the same, two
requests with different scales at once included."""
import json
import os
import threading

from serve_common import TEST_DATA, Server, expect, main, skip

BASE = os.path.join(TEST_DATA, "synth-lora-base-f32.gguf")
R4 = os.path.join(TEST_DATA, "synth-lora-r4-f32.gguf")
R8 = os.path.join(TEST_DATA, "synth-lora-r8-f16.gguf")


def golden(name):
    with open(os.path.join(TEST_DATA, name), "rb") as f:
        return [json.loads(line.decode("utf-8", "replace")) for line in f if line.strip()]


def complete(srv, case, lora=None, n=16):
    body = {"prompt": case["tokens"], "n_predict": n, "temperature": 0, "return_tokens": True,
            "cache_prompt": True}
    if lora is not None:
        body["lora"] = lora
    st, obj = srv.json("POST", "/completion", body)
    expect(st == 200, "completion: %d %r" % (st, obj))
    return obj["tokens"], obj["timings"]["cache_n"]


def same_greedy(got, case, what):
    expect(got == case["greedy"][:len(got)] and len(got) == len(case["greedy"]),
           "%s: greedy %s, llama.cpp %s" % (what, got, case["greedy"]))


def server(*extra):
    return Server("-dev", "ref", "--parallel", "2", "-c", "512", "--lora", R4, "--lora-scaled", R8, "0", *extra,
                  model=BASE)


def test_list_and_request_scales():
    r4, half, two = golden("synth-lora-r4.jsonl"), golden("synth-lora-r4-half.jsonl"), golden("synth-lora-two.jsonl")
    with server() as srv:
        st, obj = srv.json("GET", "/lora-adapters")
        expect(st == 200 and [a["id"] for a in obj] == [0, 1] and [a["scale"] for a in obj] == [1, 0]
               and obj[0]["path"] == R4 and obj[1]["path"] == R8, "GET /lora-adapters: %r" % obj)
        # the server's scales (r4 at 1), then per request, back and forth
        for c in range(3):
            same_greedy(complete(srv, r4[c])[0], r4[c], "server scales, case %d" % c)
        for c in range(3):
            same_greedy(complete(srv, half[c], [{"id": 0, "scale": 0.5}])[0], half[c], "lora 0.5, case %d" % c)
            same_greedy(complete(srv, two[c], [{"id": 0, "scale": 1}, {"id": 1, "scale": 0.75}])[0], two[c],
                        "two adapters, case %d" % c)
            same_greedy(complete(srv, r4[c], [{"id": 0, "scale": 1.0}])[0], r4[c], "lora 1, case %d" % c)


def test_cache_knows_scales():
    half, r4 = golden("synth-lora-r4-half.jsonl"), golden("synth-lora-r4.jsonl")
    with server("--parallel", "1") as srv:
        toks, cached = complete(srv, r4[2])
        same_greedy(toks, r4[2], "first")
        toks, cached = complete(srv, half[2], [{"id": 0, "scale": 0.5}])
        same_greedy(toks, half[2], "other scales after a cached prefix")
        expect(cached == 0, "a prefix computed at scale 1 was reused at 0.5 (cache_n %d)" % cached)
        toks, cached = complete(srv, half[2], [{"id": 0, "scale": 0.5}])
        same_greedy(toks, half[2], "same scales again")
        expect(cached > 0, "the prefix at the same scales was not reused (cache_n %d)" % cached)


def test_two_at_once():
    half, two = golden("synth-lora-r4-half.jsonl"), golden("synth-lora-two.jsonl")
    with server() as srv:
        out = {}

        def go(key, case, lora):
            out[key] = complete(srv, case, lora)[0]
        ts = [threading.Thread(target=go, args=("half", half[1], [{"id": 0, "scale": 0.5}])),
              threading.Thread(target=go, args=("two", two[1], [{"id": 0, "scale": 1}, {"id": 1, "scale": 0.75}]))]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        same_greedy(out.get("half"), half[1], "concurrent 0.5")
        same_greedy(out.get("two"), two[1], "concurrent two adapters")


def test_post_and_errors():
    half = golden("synth-lora-r4-half.jsonl")
    with server("--lora-init-without-apply") as srv:
        st, obj = srv.json("GET", "/lora-adapters")
        expect(st == 200 and [a["scale"] for a in obj] == [0, 0], "--lora-init-without-apply: %r" % obj)
        st, obj = srv.json("POST", "/lora-adapters", [{"id": 0, "scale": 0.5}])
        expect(st == 200 and obj == {"success": True}, "POST /lora-adapters: %d %r" % (st, obj))
        st, obj = srv.json("GET", "/lora-adapters")
        expect([a["scale"] for a in obj] == [0.5, 0], "after POST: %r" % obj)
        same_greedy(complete(srv, half[0])[0], half[0], "server scale 0.5 from POST")
        for body, needle in [([{"id": 2, "scale": 1}], "no adapter with id 2"), ({"x": 1}, "must be an array"),
                             ([{"id": 0}], "with numbers"), ("not json", "not JSON")]:
            st, obj = srv.json("POST", "/lora-adapters", body)
            expect(st == 400 and needle in json.dumps(obj), "POST %r: %d %r" % (body, st, obj))
        st, obj = srv.json("POST", "/completion", {"prompt": "x", "n_predict": 1, "lora": [{"id": -1, "scale": 1}]})
        expect(st == 400 and "lora" in json.dumps(obj), "request lora id -1: %d %r" % (st, obj))
        st, obj = srv.json("POST", "/v1/completions", {"prompt": "x", "max_tokens": 1, "lora": "all"})
        expect(st == 400 and "lora" in json.dumps(obj), "request lora 'all': %d %r" % (st, obj))


def test_speculative():
    # -md BASE: the draft has no adapters, each slot's target verifies with
    # its request's scales, so the greedy tokens stay llama.cpp's (drafts
    # of the plain model get rejected where the adapters change the text)
    r4, half, two = golden("synth-lora-r4.jsonl"), golden("synth-lora-r4-half.jsonl"), golden("synth-lora-two.jsonl")
    with server("-md", BASE, "--draft-p-min", "0", "--draft-max", "4") as srv:
        drafted = [0]

        def go(out, key, case, lora):
            body = {"prompt": case["tokens"], "n_predict": len(case["greedy"]), "temperature": 0,
                    "return_tokens": True, "lora": lora}
            st, obj = srv.json("POST", "/completion", body)
            out[key] = obj.get("tokens") if st == 200 else (st, obj)
            if st == 200:
                drafted[0] += obj["timings"].get("draft_n", 0)
        for c in range(3):
            out = {}
            ts = [threading.Thread(target=go, args=(out, "r4", r4[c], [{"id": 0, "scale": 1}])),
                  threading.Thread(target=go, args=(out, "two", two[c], [{"id": 0, "scale": 1},
                                                                          {"id": 1, "scale": 0.75}]))]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            go(out, "half", half[c], [{"id": 0, "scale": 0.5}])
            same_greedy(out.get("r4"), r4[c], "speculative, lora 1, case %d" % c)
            same_greedy(out.get("two"), two[c], "speculative, two adapters at once, case %d" % c)
            same_greedy(out.get("half"), half[c], "speculative, lora 0.5, case %d" % c)
        expect(drafted[0] > 0, "no tokens were drafted")


if not all(os.path.exists(p) for p in (BASE, R4, R8)):
    skip("the synthetic LoRA files are missing (tests/data)")
main([("list and per-request scales", test_list_and_request_scales), ("cache knows scales", test_cache_knows_scales),
      ("two at once", test_two_at_once), ("POST and errors", test_post_and_errors),
      ("speculative decoding", test_speculative)])
