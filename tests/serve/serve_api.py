"""tessera serve end to end over raw HTTP (standard library only):
greedy output equals `tessera run`, streamed equals non-streamed, concurrent
requests equal the same requests alone, every malformed request gets its
status and OpenAI error body, and the server stays healthy."""
import json
import random
import socket
import threading
import time

from serve_common import (HOST, Failure, Server, error_body, expect, main, run_greedy, stream_text)

PROMPTS = ["Once upon a time", "The little dog", "Lily and Tom went to the park", "One day, a big bear",
           "The sun was", "Sam had a red ball", "In the garden there was", "Mom said"]
N_TOKENS = 40


def complete(srv, prompt, n=N_TOKENS, **kw):
    # cache_prompt is on by default (as llama-server); off here unless asked,
    # so that a finished request must leave no cell of the cache in use.
    body = {"prompt": prompt, "max_tokens": n, "temperature": 0, "cache_prompt": False}
    body.update(kw)
    st, obj = srv.json("POST", "/v1/completions", body)
    expect(st == 200, "completion status %d: %r" % (st, obj))
    return obj


def test_completions_equal_run():
    with Server("--parallel", "2") as srv:
        for p in PROMPTS[:4]:
            want = run_greedy(p, N_TOKENS)
            obj = complete(srv, p)
            ch = obj["choices"][0]
            expect(obj["object"] == "text_completion", "object " + obj["object"])
            expect(ch["text"] == want, "prompt %r: server %r, run %r" % (p, ch["text"], want))
            expect(ch["finish_reason"] == "length", "finish_reason " + str(ch["finish_reason"]))
            u = obj["usage"]
            expect(u["completion_tokens"] == N_TOKENS and u["prompt_tokens"] > 0 and
                   u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"], "usage %r" % u)
            events, done = srv.stream("/v1/completions", {"prompt": p, "max_tokens": N_TOKENS, "temperature": 0})
            expect(done, "stream did not end with [DONE]")
            expect(stream_text(events, False) == want, "streamed %r != run %r" % (stream_text(events, False), want))
            expect(events[-1]["choices"][0]["finish_reason"] == "length", "last event finish_reason")


def test_chat_uses_template():
    """Chat greedy equals `tessera run` on the ChatML rendering (stories260K
    has no template: the ChatML fallback), streamed and not."""
    with Server() as srv:
        msgs = [{"role": "system", "content": "Be short."}, {"role": "user", "content": "Tell me a story."}]
        rendered = ("<|im_start|>system\nBe short.<|im_end|>\n<|im_start|>user\nTell me a story.<|im_end|>\n"
                    "<|im_start|>assistant\n")
        want = run_greedy(rendered, 24)
        st, obj = srv.json("POST", "/v1/chat/completions", {"messages": msgs, "max_tokens": 24, "temperature": 0})
        expect(st == 200, "chat status %d %r" % (st, obj))
        expect(obj["object"] == "chat.completion", "object")
        msg = obj["choices"][0]["message"]
        expect(msg["role"] == "assistant" and msg["content"] == want, "chat %r != run %r" % (msg, want))
        events, done = srv.stream("/v1/chat/completions", {"messages": msgs, "max_tokens": 24, "temperature": 0,
                                                           "stream_options": {"include_usage": True}})
        expect(done, "chat stream without [DONE]")
        expect(events[0]["choices"][0]["delta"].get("role") == "assistant", "first chunk has no role")
        expect(all(e["object"] == "chat.completion.chunk" for e in events), "chunk object")
        expect(stream_text(events, True) == want, "chat stream %r != %r" % (stream_text(events, True), want))
        expect(events[-1]["choices"] == [] and events[-1]["usage"]["completion_tokens"] == 24, "usage chunk")
        # content given as text parts renders the same
        parts = [{"role": "system", "content": [{"type": "text", "text": "Be short."}]},
                 {"role": "user", "content": [{"type": "text", "text": "Tell me "}, {"type": "text", "text": "a story."}]}]
        st, obj = srv.json("POST", "/v1/chat/completions", {"messages": parts, "max_tokens": 24, "temperature": 0})
        expect(st == 200 and obj["choices"][0]["message"]["content"] == want, "text parts differ")


def test_concurrent_equals_alone():
    with Server("--parallel", "8") as srv:
        alone = [complete(srv, p)["choices"][0]["text"] for p in PROMPTS]
        results = [None] * len(PROMPTS)
        streamed = [None] * len(PROMPTS)

        def worker(i):
            try:
                if i % 2:
                    results[i] = complete(srv, PROMPTS[i])["choices"][0]["text"]
                else:
                    ev, _ = srv.stream("/v1/completions",
                                       {"prompt": PROMPTS[i], "max_tokens": N_TOKENS, "temperature": 0,
                                        "cache_prompt": False})
                    results[i] = stream_text(ev, False)
            except Exception as ex:  # reported below
                results[i] = "error: %r" % ex

        for rnd in range(2):
            threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(PROMPTS))]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
            for i, p in enumerate(PROMPTS):
                expect(results[i] == alone[i], "round %d prompt %r: concurrent %r, alone %r" %
                       (rnd, p, results[i], alone[i]))
        st, text = srv.request("GET", "/metrics")[0], srv.request("GET", "/metrics")[2].decode()
        expect(st == 200, "metrics status")
        m = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                k, v = line.rsplit(" ", 1)
                m[k] = float(v)
        expect(m["tessera_slots_total"] == 8, "slots_total")
        expect(m["tessera_tokens_generated_total"] >= 3 * 8 * N_TOKENS, "tokens generated %r" % m)
        # batching happened: more tokens than decode calls
        expect(m["tessera_batch_tokens_total"] > m["tessera_decode_steps_total"] * 1.5,
               "no batching: %d tokens in %d steps" % (m["tessera_batch_tokens_total"], m["tessera_decode_steps_total"]))
        expect(m['tessera_requests_total{status="2xx"}'] >= 24, "requests counter")
        expect(m["tessera_slots_busy"] == 0 and m["tessera_kv_cells_used"] == 0, "slots not freed: %r" % m)


def test_small_batches():
    """-b 4: prompts go in over several steps, mixed with other slots'
    generated tokens; alone the server still equals `tessera run -b 4`."""
    long_prompts = ["Lily and Tom went to the park to play with a ball and a kite",
                    "Once upon a time there was a little girl who liked to sing",
                    "The big dog ran after the red ball in the green garden"]
    with Server("--parallel", "3", "-b", "4") as srv:
        alone = []
        for p in long_prompts:
            want = run_greedy(p, 24, ["-b", "4"])
            got = complete(srv, p, 24)["choices"][0]["text"]
            expect(got == want, "-b 4 alone %r != run -b 4 %r" % (got, want))
            alone.append(got)
        out = [None] * 3

        def worker(i):
            out[i] = complete(srv, long_prompts[i], 24)["choices"][0]["text"]

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        expect(out == alone, "-b 4 concurrent %r != alone %r" % (out, alone))


def test_cache_prompt():
    """cache_prompt: a request with the same prefix reuses a slot's cached
    tokens (usage says how many) and still equals `tessera run`; requests
    without it neither use nor keep caches."""
    with Server("--parallel", "2") as srv:
        p = "Lily and Tom went to the park to play with a ball"
        want = run_greedy(p, 24)
        a = complete(srv, p, 24, cache_prompt=True)
        n_prompt = a["usage"]["prompt_tokens"]
        expect(a["choices"][0]["text"] == want and a["usage"]["prompt_tokens_details"]["cached_tokens"] == 0,
               "first cache_prompt request: %r" % a)
        expect(metric(srv, "tessera_kv_cells_used") == n_prompt + 23, "cache not kept: %r cells" %
               metric(srv, "tessera_kv_cells_used"))
        # a plain request takes the other, empty slot: the cache survives
        expect(complete(srv, "The sun was", 8)["usage"]["prompt_tokens_details"]["cached_tokens"] == 0, "plain")
        expect(metric(srv, "tessera_kv_cells_used") == n_prompt + 23, "plain request touched the cache")
        b = complete(srv, p, 24, cache_prompt=True)
        expect(b["usage"]["prompt_tokens_details"]["cached_tokens"] == n_prompt - 1, "reuse %r" % b["usage"])
        expect(b["choices"][0]["text"] == want, "with the cache %r != run %r" % (b["choices"][0]["text"], want))
        # a longer prompt that starts the same: the prompt and reply tokens are reused
        c = complete(srv, p + want + " Then", 8, cache_prompt=True)
        expect(c["usage"]["prompt_tokens_details"]["cached_tokens"] >= n_prompt, "continuation %r" % c["usage"])
        expect(c["choices"][0]["text"] == run_greedy(p + want + " Then", 8), "continuation text differs")
        st, obj = srv.json("POST", "/v1/completions", {"prompt": p, "cache_prompt": "yes"})
        expect(st == 400 and obj["error"]["param"] == "cache_prompt", "cache_prompt type")


def test_default_max_tokens():
    """-n N: the length of a reply whose request sends no max_tokens (as
    llama-server's -n); a request's own max_tokens wins."""
    with Server("-n", "5") as srv:
        p = "Lily and Tom went to the park to play with a ball"
        want = run_greedy(p, 5)
        st, obj = srv.json("POST", "/v1/completions", {"prompt": p, "temperature": 0})
        expect(st == 200 and obj["usage"]["completion_tokens"] == 5 and obj["choices"][0]["finish_reason"] == "length"
               and obj["choices"][0]["text"] == want, "-n 5, no max_tokens: %r" % obj)
        st, obj = srv.json("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": p}],
                                                             "temperature": 0})
        expect(st == 200 and obj["usage"]["completion_tokens"] <= 5, "-n 5, chat: %r" % obj)
        expect(complete(srv, p, 9)["usage"]["completion_tokens"] == 9, "max_tokens 9 under -n 5")


def raw_exchange(port, head, body=b"", timeout=20):
    """Send raw bytes, return the status code of the reply."""
    s = socket.create_connection((HOST, port), timeout=timeout)
    try:
        s.sendall(head + body)
        data = b""
        while b"\r\n" not in data:
            try:
                chunk = s.recv(4096)
            except socket.timeout:
                return None
            if not chunk:
                break
            data += chunk
        return int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.") else None
    finally:
        s.close()


def test_body_limits():
    with Server("--max-body", "4096") as srv:
        # a huge declared length is answered at once, without reading it
        t0 = time.time()
        st = raw_exchange(srv.port, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                                    b"Content-Length: 100000000000\r\n\r\n")
        expect(st == 413 and time.time() - t0 < 5, "huge Content-Length: status %r" % st)
        # a client that waits for "100 Continue" gets the 413 before sending
        st = raw_exchange(srv.port, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                                    b"Content-Length: 10000\r\n\r\n", timeout=5)
        expect(st == 413, "Expect: 100-continue over the limit: status %r" % st)
        # a chunked body over the limit
        chunk = b"x" * 3000
        body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(3)) + b"0\r\n\r\n"
        st = raw_exchange(srv.port, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                                    b"Transfer-Encoding: chunked\r\n\r\n", body)
        expect(st == 413, "chunked 9000 bytes: status %r" % st)
        expect_error(srv, "/v1/completions", {"prompt": "x" * 5000}, 413, what="5000-byte body")
        st, obj = srv.json("POST", "/v1/completions", {"prompt": "Once", "max_tokens": 2})
        expect(st == 200, "small body after 413s: %d" % st)
        # garbage that is not HTTP at all
        st = raw_exchange(srv.port, b"\x00\xff GARBAGE / HTTP/9.9\r\n\r\n", timeout=2)
        expect(st in (None, 400, 404, 405, 501, 505), "garbage request: %r" % st)
        st, obj = srv.json("GET", "/health")
        expect(st == 200, "unhealthy after bad bodies")


def test_sampling_fields():
    with Server() as srv:
        base = {"prompt": "Once upon a time", "max_tokens": 20}
        a = complete(srv, base["prompt"], 20, temperature=0.9, seed=42, top_k=20, top_p=0.9, min_p=0.02)
        b = complete(srv, base["prompt"], 20, temperature=0.9, seed=42, top_k=20, top_p=0.9, min_p=0.02)
        expect(a["choices"][0]["text"] == b["choices"][0]["text"], "same seed, different text")
        g = complete(srv, base["prompt"], 20)["choices"][0]["text"]
        # a stop string cuts the text before it, finish_reason stop
        stop = g[10:14]
        s = complete(srv, base["prompt"], 20, stop=[stop, "zzzz"])
        expect(s["choices"][0]["text"] == g[:g.index(stop)] and s["choices"][0]["finish_reason"] == "stop",
               "stop %r: %r vs %r" % (stop, s["choices"][0]["text"], g))
        ev, _ = srv.stream("/v1/completions", {"prompt": base["prompt"], "max_tokens": 20, "temperature": 0,
                                               "stop": stop})
        expect(stream_text(ev, False) == g[:g.index(stop)], "streamed stop")
        # logit_bias -100 bans the greedy first token: the text changes
        first = complete(srv, base["prompt"], 1)["choices"][0]["text"]
        banned_text = None
        for tid in range(3, 512):
            r = complete(srv, base["prompt"], 1, logit_bias={str(tid): -100})
            if r["choices"][0]["text"] != first:
                banned_text = tid
                break
        expect(banned_text is not None, "no logit_bias changed the first token")
        # penalties are accepted and change a greedy repetition-prone output
        p = complete(srv, base["prompt"], 40, presence_penalty=1.5, frequency_penalty=1.5)
        expect(p["choices"][0]["text"] != complete(srv, base["prompt"], 40)["choices"][0]["text"],
               "penalties changed nothing")
        # token-id prompts work
        expect(complete(srv, [1, 400, 401], 5)["usage"]["prompt_tokens"] == 3, "token prompt")


def expect_error(srv, path, body, status, param=None, what="", code=None, headers=None):
    st, obj = srv.json("POST", path, body, headers)
    expect(st == status, "%s: status %d, want %d: %r" % (what, st, status, obj))
    e = error_body(obj, what)
    if param is not None:
        expect(e["param"] == param, "%s: param %r, want %r" % (what, e["param"], param))
    if code is not None:
        expect(e["code"] == code, "%s: code %r, want %r" % (what, e["code"], code))
    return e


def test_errors():
    chat = "/v1/chat/completions"
    ok_msgs = [{"role": "user", "content": "hi"}]
    with Server("--parallel", "2") as srv:
        expect_error(srv, chat, "{bad json", 400, what="malformed JSON")
        expect_error(srv, chat, "", 400, what="empty body")
        expect_error(srv, chat, "[1, 2]", 400, what="array body")
        expect_error(srv, chat, b"\xff\xfe\x00garbage", 400, what="binary body")
        expect_error(srv, chat, "[" * 5000, 400, what="deep nesting")
        expect_error(srv, chat, {"max_tokens": 3}, 400, "messages", "missing messages")
        expect_error(srv, chat, {"messages": "hi"}, 400, "messages", "messages a string")
        expect_error(srv, chat, {"messages": []}, 400, "messages", "messages empty")
        expect_error(srv, chat, {"messages": [{"role": "wizard", "content": "x"}]}, 400, "messages", "bad role")
        expect_error(srv, chat, {"messages": [{"role": "user", "content": 5}]}, 400, "messages", "content number")
        expect_error(srv, chat, {"messages": [{"content": "x"}]}, 400, "messages", "no role")
        expect_error(srv, chat, {"messages": ok_msgs, "max_tokens": "ten"}, 400, "max_tokens", "max_tokens string")
        expect_error(srv, chat, {"messages": ok_msgs, "max_tokens": 1.5}, 400, "max_tokens", "max_tokens float")
        expect_error(srv, chat, {"messages": ok_msgs, "max_tokens": 0}, 400, "max_tokens", "max_tokens 0")
        expect_error(srv, chat, {"messages": ok_msgs, "temperature": "hot"}, 400, "temperature", "temperature")
        expect_error(srv, chat, {"messages": ok_msgs, "temperature": -1}, 400, "temperature", "negative temp")
        expect_error(srv, chat, {"messages": ok_msgs, "top_p": 2}, 400, "top_p", "top_p range")
        expect_error(srv, chat, {"messages": ok_msgs, "top_k": [1]}, 400, "top_k", "top_k list")
        expect_error(srv, chat, {"messages": ok_msgs, "stream": "yes"}, 400, "stream", "stream string")
        expect_error(srv, chat, {"messages": ok_msgs, "stop": 7}, 400, "stop", "stop number")
        expect_error(srv, chat, {"messages": ok_msgs, "stop": ["a", "b", "c", "d", "e"]}, 400, "stop", "5 stops")
        expect_error(srv, chat, {"messages": ok_msgs, "seed": "x"}, 400, "seed", "seed string")
        expect_error(srv, chat, {"messages": ok_msgs, "logit_bias": [[1.5, 1]]}, 400, "logit_bias", "bias key")
        expect_error(srv, chat, {"messages": ok_msgs, "logit_bias": {"99999": 1}}, 400, "logit_bias", "bias id")
        expect_error(srv, chat, {"messages": ok_msgs, "logit_bias": {"5": "x"}}, 400, "logit_bias", "bias value")
        expect_error(srv, chat, {"messages": ok_msgs, "presence_penalty": 9}, 400, "presence_penalty", "presence")
        expect_error(srv, chat, {"messages": ok_msgs, "n": 3}, 400, "n", "n > 1")
        expect_error(srv, chat, {"messages": ok_msgs, "model": 5}, 400, "model", "model number")
        expect_error(srv, "/v1/completions", {"max_tokens": 3}, 400, "prompt", "missing prompt")
        expect_error(srv, "/v1/completions", {"prompt": [1, 99999]}, 400, "prompt", "token out of range")
        expect_error(srv, "/v1/completions", {"prompt": {"a": 1}}, 400, "prompt", "prompt object")
        long_prompt = " ".join(["the little dog ran home"] * 200)
        expect_error(srv, "/v1/completions", {"prompt": long_prompt}, 400, "prompt", "prompt too long",
                     code="context_length_exceeded")
        expect_error(srv, chat, {"messages": [{"role": "user", "content": long_prompt}]}, 400, "messages",
                     "chat too long", code="context_length_exceeded")
        big = json.dumps({"messages": ok_msgs, "pad": "x" * (2 << 20)})
        expect_error(srv, chat, big, 413, what="2 MiB body")
        # an unknown field is ignored (and named in the request log, see test_field_policy); a known one
        # that cannot be honoured, or one of another endpoint, is a 400 naming it
        expect_error(srv, chat, {"messages": ok_msgs, "functions": []}, 400, "functions", "legacy functions")
        expect_error(srv, "/v1/completions", {"prompt": "x", "tools": []}, 400, "tools", "tools on completions")
        expect_error(srv, "/v1/completions", {"prompt": "x", "echo": True}, 400, "echo", "echo true")
        expect_error(srv, chat, {"messages": ok_msgs, "top_logprobs": 2}, 400, "top_logprobs", "without logprobs")
        expect_error(srv, chat, {"messages": ok_msgs, "logprobs": True, "top_logprobs": 21}, 400, "top_logprobs",
                     "top_logprobs > 20")
        expect_error(srv, chat, {"messages": ok_msgs, "tool_choice": "required"}, 400, "tool_choice",
                     "required without tools")
        expect_error(srv, chat, {"messages": ok_msgs, "tools": [{"type": "function", "function": {"name": "f"}}],
                                 "tool_choice": {"type": "function", "function": {"name": "g"}}}, 400,
                     "tool_choice", "named tool not offered")
        expect_error(srv, chat, {"messages": ok_msgs, "tools": [{"type": "function"}]}, 400, "tools", "tool without name")
        # a forced call is held to the tool's schema by a grammar: one it cannot follow is a 400 naming the tool
        e = expect_error(srv, chat, {"messages": ok_msgs, "tool_choice": "required", "tools": [
            {"type": "function", "function": {"name": "f", "parameters": {
                "type": "object", "properties": {"s": {"type": "string", "pattern": "^a"}}}}}]}, 400, "tools",
            "unsupported schema keyword")
        expect("'f'" in e["message"] and "pattern" in e["message"], "schema error message %r" % e["message"])
        expect_error(srv, chat, {"messages": ok_msgs, "tool_choice": "required", "response_format": {"type": "json_object"},
                                 "tools": [{"type": "function", "function": {"name": "f"}}]}, 400, "tool_choice",
                     "forced call plus response_format")
        st, obj = srv.json("POST", chat, {"messages": ok_msgs, "max_tokens": 2, "user": "me", "tools": None,
                                          "model": "anything", "store": False, "metadata": {"a": "b"},
                                          "stream_options": None, "parallel_tool_calls": True,
                                          "response_format": {"type": "text"}})
        expect(st == 200 and obj["usage"]["completion_tokens"] <= 2, "harmless fields: %d %r" % (st, obj))
        st, obj = srv.json("GET", "/v1/nothing")
        expect(st == 404, "unknown path %d" % st)
        error_body(obj, "404")
        st, obj = srv.json("GET", chat)
        expect(st == 405, "GET on chat %d" % st)
        error_body(obj, "405")
        st, obj = srv.json("GET", "/v1/models")
        expect(st == 200 and obj["data"][0]["id"] == "stories260K.gguf", "models %r" % obj)
        # bounded fuzz: mutated valid bodies never crash the server
        rng = random.Random(1234)
        seed_body = json.dumps({"messages": ok_msgs, "max_tokens": 2, "temperature": 0.5, "stop": ["x"],
                                "logit_bias": {"3": 1}, "top_k": 5}).encode()
        for _ in range(150):
            b = bytearray(seed_body)
            for _ in range(rng.randint(1, 6)):
                op = rng.randint(0, 2)
                i = rng.randrange(len(b))
                if op == 0:
                    b[i] = rng.randrange(256)
                elif op == 1:
                    del b[i]
                else:
                    b.insert(i, rng.choice(b'{}[]",:0-9e.\\'))
            st, _, _ = srv.request("POST", chat, bytes(b))
            expect(st in (200, 400), "fuzzed body got status %d: %r" % (st, bytes(b)))
        st, obj = srv.json("GET", "/health")
        expect(st == 200 and obj["status"] == "ok", "unhealthy after errors")
        expect(srv.alive(), "server died")
        m = srv.request("GET", "/metrics")[2].decode()
        expect('tessera_requests_total{status="4xx"}' in m, "4xx counter missing")


def test_api_key():
    with Server("--api-key", "s3cret") as srv:
        body = {"prompt": "Once", "max_tokens": 2}
        expect_error(srv, "/v1/completions", body, 401, what="no key", code="invalid_api_key")
        expect_error(srv, "/v1/completions", body, 401, what="wrong key", headers={"Authorization": "Bearer nope"})
        expect_error(srv, "/v1/completions", body, 401, what="prefix key", headers={"Authorization": "Bearer s3cre"})
        expect_error(srv, "/v1/completions", body, 401, what="basic", headers={"Authorization": "Basic s3cret"})
        st, obj = srv.json("GET", "/v1/models")
        expect(st == 401, "models without key %d" % st)
        st, obj = srv.json("POST", "/v1/completions", body, {"Authorization": "Bearer s3cret"})
        expect(st == 200, "right key %d %r" % (st, obj))
        st, obj = srv.json("GET", "/health")
        expect(st == 200, "health needs no key")


def read_first_event(sock_file):
    """Read one SSE event from a raw HTTP/1.1 stream (after the headers)."""
    line = sock_file.readline()
    expect(line.startswith(b"HTTP/1.1 200"), "stream status line %r" % line)
    while sock_file.readline() not in (b"\r\n", b""):
        pass
    data = b""
    while b"data: " not in data:
        chunk = sock_file.readline()
        expect(chunk, "stream closed early")
        data += chunk
    return data


def metric(srv, name):
    for line in srv.request("GET", "/metrics")[2].decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise Failure("metric %s missing" % name)


def test_busy_and_disconnect():
    """One slot and a queue of one: a long stream holds the slot, the next
    request waits, the one after gets 503; the client of the long stream
    hangs up and its slot is free at once for the queued request."""
    with Server("--parallel", "1", "--queue", "1", "-c", "4096") as srv:
        body = json.dumps({"prompt": "Once upon a time", "max_tokens": 4000, "temperature": 0,
                           "stream": True, "logit_bias": {"2": -100}}).encode()
        s = socket.create_connection((HOST, srv.port), timeout=30)
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body) + body)
        f = s.makefile("rb")
        read_first_event(f)
        expect(metric(srv, "tessera_slots_busy") == 1, "slot not busy")
        # the queue takes one request, the next gets 503
        queued = {}

        def wait_queued():
            queued["r"] = srv.json("POST", "/v1/completions", {"prompt": "Tom", "max_tokens": 5, "temperature": 0})

        t = threading.Thread(target=wait_queued)
        t.start()
        deadline = time.time() + 10
        while metric(srv, "tessera_requests_queued") < 1 and time.time() < deadline:
            time.sleep(0.01)
        expect(metric(srv, "tessera_requests_queued") == 1, "request not queued")
        expect_error(srv, "/v1/completions", {"prompt": "x", "max_tokens": 2}, 503, what="all busy",
                     code="server_busy")
        expect(t.is_alive(), "queued request finished while the slot was held")
        t0 = time.time()
        f.close()
        s.close()  # the client goes away
        t.join(20)
        expect(not t.is_alive() and queued["r"][0] == 200, "queued request did not run after the disconnect")
        expect(time.time() - t0 < 5, "slot freed only after %.1f s" % (time.time() - t0))
        expect(metric(srv, "tessera_requests_cancelled_total") == 1, "cancel not counted")
        # a non-streamed request whose client hangs up frees its slot too
        body = json.dumps({"prompt": "Once upon a time", "max_tokens": 4000, "temperature": 0,
                           "logit_bias": {"2": -100}}).encode()
        s = socket.create_connection((HOST, srv.port), timeout=30)
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        deadline = time.time() + 10
        while metric(srv, "tessera_slots_busy") < 1 and time.time() < deadline:
            time.sleep(0.01)
        s.close()
        deadline = time.time() + 5
        while metric(srv, "tessera_slots_busy") > 0 and time.time() < deadline:
            time.sleep(0.01)
        expect(metric(srv, "tessera_slots_busy") == 0, "non-streamed disconnect kept the slot")
        expect(metric(srv, "tessera_requests_cancelled_total") == 2, "second cancel not counted")
        # a queued request whose client leaves gives its queue place back at once
        body = json.dumps({"prompt": "Once upon a time", "max_tokens": 4000, "temperature": 0, "stream": True,
                           "logit_bias": {"2": -100}}).encode()
        hold = socket.create_connection((HOST, srv.port), timeout=30)
        hold.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        hold_f = hold.makefile("rb")
        read_first_event(hold_f)
        q = socket.create_connection((HOST, srv.port), timeout=30)
        small = b'{"prompt": "Tom", "max_tokens": 3}'
        q.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(small) + small)
        deadline = time.time() + 10
        while metric(srv, "tessera_requests_queued") < 1 and time.time() < deadline:
            time.sleep(0.01)
        expect(metric(srv, "tessera_requests_queued") == 1, "second request not queued")
        q.close()
        deadline = time.time() + 5
        while metric(srv, "tessera_requests_queued") > 0 and time.time() < deadline:
            time.sleep(0.01)
        expect(metric(srv, "tessera_requests_queued") == 0, "a left request kept its queue place")
        expect(metric(srv, "tessera_slots_busy") == 1, "the long stream lost its slot")
        hold_f.close()
        hold.close()
        st, obj = srv.json("GET", "/health")
        expect(st == 200, "unhealthy at the end")


def test_stop_while_streaming():
    """SIGTERM while a long stream runs: the stream ends, the server exits 0."""
    srv = Server("--parallel", "1", "-c", "4096")
    with srv:
        body = json.dumps({"prompt": "Once upon a time", "max_tokens": 4000, "temperature": 0,
                           "stream": True, "logit_bias": {"2": -100}}).encode()
        s = socket.create_connection((HOST, srv.port), timeout=30)
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        f = s.makefile("rb")
        read_first_event(f)
        t0 = time.time()
        srv.stop()  # raises when the exit status is not 0
        expect(time.time() - t0 < 20, "stopping took %.1f s" % (time.time() - t0))
        rest = f.read()  # EOF must come: the server closed the stream
        expect(b"[DONE]" in rest or rest == b"" or b"0\r\n\r\n" in rest, "stream tail %r" % rest[-200:])
        s.close()


def test_context_shift():
    """--context-shift: a slot that fills (-c 128 over 2 slots: 64 positions
    each) drops half of what follows the prompt and generates all 150
    tokens, in both slots at once; the text before the first shift is the
    greedy run's. Without the flag the reply is cut at the slot's size."""
    n = 150
    with Server("--parallel", "2", "-c", "128") as srv:
        obj = complete(srv, PROMPTS[0], n=n)
        u = obj["usage"]
        expect(obj["choices"][0]["finish_reason"] == "length" and u["completion_tokens"] < n and
               u["total_tokens"] <= 65,  # 64 positions, and the last token sampled needs none
               "without --context-shift: %r" % u)
    with Server("--parallel", "2", "-c", "128", "--context-shift", "--keep", "-1") as srv:
        want = run_greedy(PROMPTS[0], 40)
        out = [None, None]

        def go(k):
            out[k] = complete(srv, PROMPTS[k], n=n)

        ts = [threading.Thread(target=go, args=(k,)) for k in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        for k in range(2):
            ch, u = out[k]["choices"][0], out[k]["usage"]
            expect(u["completion_tokens"] == n and ch["finish_reason"] == "length",
                   "slot %d with --context-shift: %r" % (k, u))
        expect(out[0]["choices"][0]["text"].startswith(want),
               "before the shift %r != run %r" % (out[0]["choices"][0]["text"][:len(want)], want))
        st, health = srv.json("GET", "/health")
        expect(st == 200, "health after shifts: %d" % st)


if __name__ == "__main__":
    main([
        ("--context-shift in the slots", test_context_shift),
        ("completions equal tessera run, streamed and not", test_completions_equal_run),
        ("chat uses the template, streamed and not", test_chat_uses_template),
        ("concurrent requests equal the same alone", test_concurrent_equals_alone),
        ("prompts over several steps (-b 4)", test_small_batches),
        ("cache_prompt reuses a slot's prefix", test_cache_prompt),
        ("-n: max_tokens of requests without one", test_default_max_tokens),
        ("sampling fields: seed, stop, logit_bias, penalties", test_sampling_fields),
        ("body limits: declared, chunked, garbage", test_body_limits),
        ("malformed requests: status and OpenAI error body", test_errors),
        ("--api-key", test_api_key),
        ("busy slots 503, disconnect frees the slot", test_busy_and_disconnect),
        ("SIGTERM while streaming", test_stop_while_streaming),
    ])
