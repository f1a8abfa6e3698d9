"""Hostile clients on tessera serve, over raw loopback sockets (issue 19):
a garbage request line gets an immediate 400; headers or a body that never
finish get 408 after their deadline; a Content-Length shorter than the body
is a 400 and the connection is closed (the rest is never read as a request);
slow clients holding every connection (and the per-IP limit) do not lock out
GET /health and GET /metrics; a client over its per-IP limit gets 429 while
another address is served. Every wait is bounded by a socket timeout."""
import json
import os
import socket
import time

from serve_common import HOST, Failure, Server, expect, main

# Short deadlines so that the test does not wait for the defaults.
HARDEN = ["--header-timeout", "2", "--body-timeout", "2"]
if os.environ.get("SERVE_HOSTILE_NO_FLAGS"):  # to reproduce on a server without them
    HARDEN = []


def connect(port, source=None, timeout=30):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    if source:
        s.bind((source, 0))
    s.connect((HOST, port))
    return s


def read_all(s):
    """Everything until the server closes (or the socket times out: Failure)."""
    data = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return data
            data += chunk
    except socket.timeout:
        raise Failure("no close from the server after %r" % data[:200])


def status_of(data):
    expect(data.startswith(b"HTTP/1."), "not an HTTP response: %r" % data[:100])
    return int(data.split(b" ", 2)[1])


def responses_in(data):
    return data.count(b"HTTP/1.1 ") + data.count(b"HTTP/1.0 ")


def test_garbage_request_line():
    with Server(*HARDEN) as srv:
        for line in (b"\x00\x01\x02 GARBAGE\r\n\r\n", b"GET\r\n\r\n", b"\xff\xfe / HTTP/1.1\r\n\r\n",
                     b"GET / HTTP/9.9\r\n\r\n", b"G\x00T / HTTP/1.1\r\nHost: x\r\n\r\n"):
            s = connect(srv.port, timeout=10)
            t0 = time.time()
            s.sendall(line)
            data = read_all(s)
            s.close()
            expect(data, "%r: no answer" % line)
            st = status_of(data)
            expect(st in (400, 505), "%r: status %d" % (line, st))
            print("  %r -> %d in %.2f s" % (line, st, time.time() - t0))
        st, _, _ = srv.request("GET", "/health")
        expect(st == 200, "health after garbage: %d" % st)


def test_slow_headers_408():
    with Server(*HARDEN) as srv:
        s = connect(srv.port)
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
        data = read_all(s)
        s.close()
        expect(data and status_of(data) == 408, "slow headers: %r" % data[:200])


def test_short_body_408():
    with Server(*HARDEN) as srv:
        s = connect(srv.port)
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"prompt\":")
        data = read_all(s)
        s.close()
        expect(data and status_of(data) == 408, "short body: %r" % data[:200])
        expect(responses_in(data) == 1, "more than one response: %r" % data[:400])


def test_long_body_closes():
    with Server(*HARDEN) as srv:
        s = connect(srv.port)
        # The first 10 bytes are bad JSON (400); the rest would parse as a request.
        body = b'{"prompt":' + b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n" + body)
        data = read_all(s)
        s.close()
        expect(status_of(data) == 400, "Content-Length shorter than the body: %r" % data[:200])
        expect(responses_in(data) == 1, "the rest of the body was read as a request: %r" % data[:600])


def test_lockout():
    """90 clients send a request line and a header, then nothing; while they
    hold every connection /health and /metrics still answer."""
    with Server("--parallel", "1", "--queue", "1", "--max-conns", "40", "--max-conns-per-ip", "30",
                "--header-timeout", "20", "--body-timeout", "20") as srv:
        slow = []
        try:
            for _ in range(90):
                s = connect(srv.port)
                s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
                slow.append(s)
            time.sleep(0.5)
            for path in ("/health", "/metrics", "/health"):
                s = connect(srv.port, timeout=10)
                s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path.encode())
                try:
                    data = read_all(s)
                except (socket.timeout, Failure):
                    raise Failure("GET %s timed out while slow clients hold the server" % path)
                finally:
                    s.close()
                expect(status_of(data) == 200, "GET %s under lock-out: %r" % (path, data[:200]))
                if path == "/metrics":
                    expect(b"tessera_connections_refused_total" in data, "no refused counter: %r" % data[-300:])
            # A generation request over the limits is refused, not held.
            s = connect(srv.port, timeout=10)
            body = json.dumps({"prompt": "Once", "max_tokens": 2}).encode()
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            data = read_all(s)
            s.close()
            expect(status_of(data) in (429, 503), "generation under lock-out: %r" % data[:200])
        finally:
            for s in slow:
                s.close()
        # Once they are gone the server serves normally.
        deadline = time.time() + 30
        while True:
            st, _, data = srv.request("POST", "/v1/completions", {"prompt": "Once", "max_tokens": 2})
            if st == 200 or time.time() > deadline:
                break
            time.sleep(0.2)
        expect(st == 200, "after the lock-out: %d %r" % (st, data[:200]))


def test_per_ip_limit():
    with Server("--max-conns-per-ip", "3", *HARDEN[:0]) as srv:
        held = [connect(srv.port) for _ in range(3)]
        for s in held:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")  # keep-alive: stays open
        for s in held:
            expect(s.recv(4096).startswith(b"HTTP/1.1 200"), "keep-alive health")
        s = connect(srv.port, timeout=10)
        s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = read_all(s)
        s.close()
        expect(status_of(data) == 429, "4th connection from 127.0.0.1: %r" % data[:200])
        s = connect(srv.port, source="127.0.0.2", timeout=10)
        s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = read_all(s)
        s.close()
        expect(status_of(data) == 200, "from 127.0.0.2: %r" % data[:200])
        for s in held:
            s.close()


if __name__ == "__main__":
    main([
        ("garbage request lines get 400 at once", test_garbage_request_line),
        ("headers that never end get 408", test_slow_headers_408),
        ("a body shorter than Content-Length gets 408", test_short_body_408),
        ("a body longer than Content-Length: 400 and close", test_long_body_closes),
        ("90 slow clients do not lock out /health and /metrics", test_lockout),
        ("per-IP connection limit", test_per_ip_limit),
    ])
