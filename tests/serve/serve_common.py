"""Helpers for the tessera serve tests: start a server on a free loopback
port (--port 0, the port is read from its banner), talk raw HTTP to it with
http.client, stop it and check it exited cleanly (no sanitizer report)."""
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

BIN = os.environ.get("TESSERA_BIN", "")
SHARED = os.environ.get("TESSERA_SHARED", "")
MODEL = os.path.join(SHARED, "models", "stories260K.gguf")
# tests/data as the build lays it out: its synthetic models are made there
TEST_DATA = os.environ.get("TESSERA_TEST_DATA", "")
HOST = "127.0.0.1"


def free_port():
    """A loopback port free now, for a server that must be given one (not
    `tessera serve`, which takes --port 0): it may be taken before use."""
    s = socket.socket()
    s.bind((HOST, 0))
    port = s.getsockname()[1]
    s.close()
    return port


def skip(why):
    print("SKIP: " + why)
    sys.exit(77)


def model_cache_file(name):
    """A real model fetched by scripts/fetch-models.sh (TESSERA_MODEL_CACHE or
    ~/.cache/tessera/models); a test that needs it fails when it is missing."""
    cache = os.environ.get("TESSERA_MODEL_CACHE") or os.path.expanduser("~/.cache/tessera/models")
    path = os.path.join(cache, name)
    if not os.path.exists(path):
        raise Failure("%s is missing: run scripts/fetch-models.sh" % path)
    return path


def check_env():
    if not BIN or not os.path.exists(BIN):
        skip("TESSERA_BIN is not set or missing")
    if not os.path.exists(MODEL):
        skip("model missing: " + MODEL)
    if os.environ.get("TESSERA_SERVE_BUILT") == "0":
        skip("tessera serve is not built in (libmicrohttpd or libcjson missing for this build)")
    out = subprocess.run([BIN, "serve", "--help"], capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        skip("tessera serve --help failed: " + out.stderr.strip())


class Failure(Exception):
    pass


def expect(cond, what):
    if not cond:
        raise Failure(what)


class Server:
    """A running `tessera serve`; use as a context manager."""

    def __init__(self, *args, threads=1, model=None):
        self.args = [BIN, "serve", "-m", model or MODEL, "--host", HOST, "--port", "0", "-t", str(threads)] + list(args)
        self.proc = None
        self.port = None
        self.stderr_lines = []

    def __enter__(self):
        self.proc = subprocess.Popen(self.args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 60
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.stderr_lines.append(line)
            if "http://" in line:
                self.port = int(line.split("http://", 1)[1].split()[0].rsplit(":", 1)[1])
                break
        if self.port is None:
            self.proc.kill()
            rest = self.proc.stderr.read()
            raise Failure("server did not start: " + "".join(self.stderr_lines) + rest)
        threading.Thread(target=self._drain, daemon=True).start()
        return self

    def _drain(self):
        for line in self.proc.stderr:
            self.stderr_lines.append(line)

    def __exit__(self, et, ev, tb):
        self.stop(check=et is None)
        return False

    def alive(self):
        return self.proc.poll() is None

    def stop(self, check=True):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                if check:
                    raise Failure("server did not stop on SIGTERM")
        time.sleep(0.1)
        err = "".join(self.stderr_lines)
        if check:
            expect(self.proc.returncode == 0, "server exit status %s:\n%s" % (self.proc.returncode, err))
            expect("Sanitizer" not in err and "runtime error" not in err, "sanitizer report:\n" + err)

    def wait_log(self, pred, timeout=10):
        """True once a stderr line matches pred: the request log line is
        written after the response is sent, so it may come a moment later."""
        end = time.time() + timeout
        while time.time() < end:
            if any(pred(line) for line in list(self.stderr_lines)):
                return True
            time.sleep(0.05)
        return False

    def conn(self, timeout=60):
        return http.client.HTTPConnection(HOST, self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, timeout=60):
        """(status, headers dict, body bytes). body: dict (sent as JSON), str or bytes."""
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode()
        c = self.conn(timeout)
        try:
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            data = r.read()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, data
        finally:
            c.close()

    def json(self, method, path, body=None, headers=None, timeout=60):
        st, hd, data = self.request(method, path, body, headers, timeout)
        try:
            obj = json.loads(data.decode("utf-8"))
        except ValueError:
            raise Failure("%s %s: status %d, body is not JSON: %r" % (method, path, st, data[:200]))
        return st, obj

    def stream(self, path, body, headers=None, timeout=60):
        """POST with stream: true; returns the list of decoded events and
        whether [DONE] came last."""
        body = dict(body, stream=True)
        st, hd, data = self.request("POST", path, body, headers, timeout)
        expect(st == 200, "%s stream: status %d %r" % (path, st, data[:300]))
        expect(hd.get("content-type", "").startswith("text/event-stream"), "stream content type " + str(hd))
        events, done = [], False
        for block in data.decode("utf-8").split("\n\n"):
            if not block.strip():
                continue
            expect(block.startswith("data: "), "SSE block without 'data: ': %r" % block[:100])
            payload = block[len("data: "):]
            expect(not done, "events after [DONE]")
            if payload == "[DONE]":
                done = True
                continue
            events.append(json.loads(payload))
        return events, done


def stream_text(events, chat):
    out = []
    for e in events:
        for ch in e.get("choices", []):
            out.append(ch["delta"].get("content", "") or "" if chat else ch.get("text", ""))
    return "".join(out)


def run_greedy(prompt, n, extra=()):
    """What `tessera run` prints after the prompt, greedy, n tokens."""
    out = subprocess.run([BIN, "run", "-m", MODEL, "-p", prompt, "-n", str(n), "--temp", "0", "-t", "1",
                          "--no-echo"] + list(extra), capture_output=True, timeout=120)
    expect(out.returncode == 0, "tessera run failed: " + out.stderr.decode(errors="replace"))
    text = out.stdout.decode("utf-8")
    expect(text.endswith("\n"), "run output does not end with a newline")
    return text[:-1]


def error_body(obj, what):
    expect(isinstance(obj, dict) and isinstance(obj.get("error"), dict), what + ": no error object: %r" % obj)
    e = obj["error"]
    for k in ("message", "type", "param", "code"):
        expect(k in e, what + ": error has no '%s': %r" % (k, e))
    expect(isinstance(e["message"], str) and e["message"], what + ": empty message")
    return e


def main(tests):
    check_env()
    failed = 0
    for name, fn in tests:
        t0 = time.time()
        try:
            fn()
            print("ok   %s (%.1f s)" % (name, time.time() - t0))
        except Failure as ex:
            failed += 1
            print("FAIL %s: %s" % (name, ex))
        except Exception as ex:  # a crash of the test itself is a failure too
            failed += 1
            print("FAIL %s: %s: %s" % (name, type(ex).__name__, ex))
    sys.exit(1 if failed else 0)
