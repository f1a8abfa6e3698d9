"""What issue 18 asked of the server, with stories260K: one log line per
request on stderr (text and --log-format json: time, method, path, status,
tokens in/out, ms), cache_prompt on by default, the chat page at / with no
external assets, /v1/models with a real `created` and `owned_by`, and
llama-server's /props and /slots."""
import json
import os
import re

from serve_common import MODEL, Server, expect, main

CHAT = {"messages": [{"role": "user", "content": "Once upon a time"}], "max_tokens": 8, "temperature": 0}


def log_lines(srv, pattern):
    return [l for l in srv.stderr_lines if re.search(pattern, l)]


def test_text_log():
    with Server() as srv:
        st, _ = srv.json("POST", "/v1/chat/completions", CHAT)
        expect(st == 200, "chat status %d" % st)
        srv.request("GET", "/no/such/path")
        srv.stream("/v1/completions", {"prompt": "Once", "max_tokens": 5, "temperature": 0})
        srv.request("GET", "/health")
    text = "".join(srv.stderr_lines)
    when = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"
    expect(re.search(when + r" POST /v1/chat/completions 200 in=\d+ out=8 [\d.]+ms", text),
           "no log line for the chat request:\n" + text)
    expect(re.search(when + r" GET /no/such/path 404 [\d.]+ms", text), "no log line for the 404:\n" + text)
    expect(re.search(when + r" POST /v1/completions 200 in=2 out=5 [\d.]+ms", text),
           "no log line for the stream (written when it ends):\n" + text)
    expect(len(log_lines(srv, r" GET /health 200 ")) == 1, "one line per request:\n" + text)


def test_json_log():
    with Server("--log-format", "json") as srv:
        srv.json("POST", "/v1/chat/completions", CHAT)
        srv.request("GET", '/x"y')
    entries = []
    for l in srv.stderr_lines:
        if l.startswith("{"):
            entries.append(json.loads(l))
    expect(len(entries) == 2, "json log: %d lines: %r" % (len(entries), srv.stderr_lines))
    # a line is written once its response is sent, so the GET's may come first
    e = [x for x in entries if x.get("method") == "POST"][0]
    for k in ("time", "method", "path", "status", "tokens_in", "tokens_out", "ms"):
        expect(k in e, "json log line lacks %s: %r" % (k, e))
    expect(e["method"] == "POST" and e["status"] == 200 and e["tokens_out"] == 8 and e["tokens_in"] > 0,
           "json log values: %r" % e)
    g = [x for x in entries if x.get("method") == "GET"][0]
    expect(g["path"] == '/x"y' and g["status"] == 404, "escaped path: %r" % g)
    with Server("--log-format", "off") as srv:
        srv.request("GET", "/health")
    expect(not log_lines(srv, r"GET /health"), "--log-format off still logs")


def test_cache_prompt_default():
    with Server("-np", "1") as srv:
        body = {"messages": [{"role": "user", "content": "Tell me a story about a cat and a dog."}],
                "max_tokens": 4, "temperature": 0}
        st, a = srv.json("POST", "/v1/chat/completions", body)
        st2, b = srv.json("POST", "/v1/chat/completions", body)
        cached = b["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0)
        expect(st == 200 and st2 == 200 and cached > 0,
               "the second identical request reused nothing: %r" % b.get("usage"))
        st3, c = srv.json("POST", "/v1/chat/completions", dict(body, cache_prompt=False))
        expect(c["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0) == 0,
               "cache_prompt false still reused: %r" % c.get("usage"))


def test_page_and_info():
    with Server("-np", "2", "-c", "256", "--alias", "stories") as srv:
        st, hd, page = srv.request("GET", "/")
        html = page.decode("utf-8")
        expect(st == 200 and hd.get("content-type", "").startswith("text/html"), "GET /: %d %r" % (st, hd))
        expect("<textarea" in html and "/v1/chat/completions" in html and "stream: true" in html,
               "the page is not the chat page")
        expect(not re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", html), "the page loads external assets")
        st, _, _ = srv.request("POST", "/")
        expect(st == 405, "POST / status %d" % st)
        st, models = srv.json("GET", "/v1/models")
        m = models["data"][0]
        expect(m["id"] == "stories" and m["created"] == int(os.stat(MODEL).st_mtime),
               "created is not the model file's time: %r" % m)
        expect(isinstance(m["owned_by"], str) and m["owned_by"], "owned_by: %r" % m)
        st, props = srv.json("GET", "/props")
        expect(st == 200 and props["total_slots"] == 2 and props["default_generation_settings"]["n_ctx"] == 128
               and props["model_path"] == MODEL, "/props: %r" % props)
        st, slots = srv.json("GET", "/slots")
        expect(st == 200 and [s["id"] for s in slots] == [0, 1] and all(s["n_ctx"] == 128 for s in slots)
               and not any(s["is_processing"] for s in slots), "/slots: %r" % slots)
    with Server("--api-key", "k") as srv:
        st, _, _ = srv.request("GET", "/props")
        expect(st == 401, "/props without the key: %d" % st)
        st, _, _ = srv.request("GET", "/")
        expect(st == 200, "the page needs no key (it asks for one): %d" % st)


main([("text log", test_text_log), ("json log", test_json_log), ("cache_prompt default", test_cache_prompt_default),
      ("page and info", test_page_and_info)])
