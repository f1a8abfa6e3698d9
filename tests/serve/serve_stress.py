"""A bounded storm on tessera serve: 120 requests from 16 client threads at
once, streamed and not, chat and completion, some malformed, some whose
client hangs up mid-way, with 4 slots and a queue of 10 (so some may get 503).
Every answer must be a well-formed 200, 400 or 503; afterwards no slot,
queue place or KV cell is left in use, the server answers normally and it
exits cleanly on SIGTERM (no sanitizer report)."""
import json
import random
import socket
import threading
import time

from serve_common import HOST, Failure, Server, expect, main

N_REQUESTS = 120
N_CLIENTS = 16


def metrics(srv):
    m = {}
    for line in srv.request("GET", "/metrics")[2].decode().splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            m[k] = float(v)
    return m


def hang_up(port, body, after):
    """Send a request, read `after` bytes of the answer, then close."""
    s = socket.create_connection((HOST, port), timeout=30)
    try:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %d\r\n\r\n"
                  % len(body) + body)
        got = b""
        while len(got) < after:
            chunk = s.recv(after - len(got))
            if not chunk:
                break
            got += chunk
    finally:
        s.close()


def test_storm():
    with Server("--parallel", "4", "--queue", "10", "-c", "1024") as srv:
        rng = random.Random(99)
        plan = []
        for i in range(N_REQUESTS):
            kind = rng.choice(["complete", "complete", "chat", "stream", "chat-stream", "bad", "hangup", "hangup"])
            plan.append((kind, rng.randint(1, 48), rng.random()))
        lock = threading.Lock()
        statuses = {}
        errors = []
        next_i = [0]

        def one(kind, n, x):
            if kind == "hangup":
                body = json.dumps({"prompt": "Once upon a time", "max_tokens": 200, "stream": x < 0.5,
                                   "logit_bias": {"2": -100}}).encode()
                hang_up(srv.port, body, int(x * 300))
                return "hangup"
            if kind == "bad":
                body = rng_bad(x)
                st, _, data = srv.request("POST", "/v1/chat/completions", body)
                expect(st in (400, 503), "bad body %r: status %d" % (body[:60], st))
                json.loads(data)["error"]["message"]
                return st
            chat = kind.startswith("chat")
            path = "/v1/chat/completions" if chat else "/v1/completions"
            body = {"max_tokens": n, "temperature": x, "seed": int(x * 1000)}
            if chat:
                body["messages"] = [{"role": "user", "content": "Tell me about a cat %d" % n}]
            else:
                body["prompt"] = "The dog %d" % n
            if kind.endswith("stream"):
                body["stream"] = True
            st, hd, data = srv.request("POST", path, body)
            expect(st in (200, 503), "%s: status %d %r" % (kind, st, data[:200]))
            if st == 200 and body.get("stream"):
                expect(data.rstrip().endswith(b"data: [DONE]"), "%s: stream without [DONE]" % kind)
            elif st == 200:
                obj = json.loads(data)
                expect(obj["usage"]["completion_tokens"] <= n, "%s: more tokens than asked" % kind)
            else:
                expect(json.loads(data)["error"]["code"] == "server_busy", "503 body")
            return st

        def rng_bad(x):
            samples = [b"{", b"null", b'{"messages": 5}', b'{"messages": [{"role": "user", "content": "x"}], '
                       b'"max_tokens": -4}', b"\xff" * 50, b'{"messages": [{"role": "user", "content": "x"}], '
                       b'"logit_bias": {"1": "x"}}']
            return samples[int(x * len(samples)) % len(samples)]

        def client():
            while True:
                with lock:
                    i = next_i[0]
                    if i >= len(plan):
                        return
                    next_i[0] += 1
                try:
                    st = one(*plan[i])
                except Failure as ex:
                    with lock:
                        errors.append(str(ex))
                    continue
                except OSError as ex:  # a connection refused or reset is a failure too
                    with lock:
                        errors.append("%s: %r" % (plan[i][0], ex))
                    continue
                with lock:
                    statuses[st] = statuses.get(st, 0) + 1

        threads = [threading.Thread(target=client) for _ in range(N_CLIENTS)]
        t0 = time.time()
        for t in threads:
            t.start()
        for t in threads:
            t.join(240)
        expect(not any(t.is_alive() for t in threads), "clients still running after 240 s")
        expect(not errors, "%d bad answers, first: %s" % (len(errors), errors[:3]))
        print("statuses %s in %.1f s" % (statuses, time.time() - t0))
        expect(statuses.get(200, 0) > 0, "no request succeeded")
        expect(srv.alive(), "server died")
        deadline = time.time() + 10
        while time.time() < deadline:
            m = metrics(srv)
            if m["tessera_slots_busy"] == 0 and m["tessera_requests_queued"] == 0:
                break
            time.sleep(0.05)
        expect(m["tessera_slots_busy"] == 0 and m["tessera_requests_queued"] == 0, "slots or queue left: %r" % m)
        # cache_prompt is on by default: idle slots keep their last prompt and
        # reply for the next request; every other cell must be free.
        st, slots = srv.json("GET", "/slots")
        kept = sum(sl["n_past"] for sl in slots) if st == 200 else -1
        expect(m["tessera_kv_cells_used"] == kept,
               "KV cells left in use: %r, the idle slots keep %r" % (m["tessera_kv_cells_used"], kept))
        st, obj = srv.json("POST", "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 8,
                                                       "temperature": 0})
        expect(st == 200 and obj["usage"]["completion_tokens"] == 8, "after the storm: %d %r" % (st, obj))


if __name__ == "__main__":
    main([("storm of 120 mixed requests from 16 clients", test_storm)])
