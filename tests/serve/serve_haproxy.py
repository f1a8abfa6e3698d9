"""Two tessera serve replicas behind HAProxy with docs/haproxy.cfg, all on
loopback (docs/deploy.md). Checks: /health through the proxy; the same
X-Session-Id always reaches the same replica; under a bounded load, one
replica gets SIGTERM mid-run and no request is lost: every one gets 200,
whole, except those generating on that replica, which end cut (200,
finish_reason "length"); requests it had queued or that met its closed
port are retried on the other replica by HAProxy. Skipped without haproxy."""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time

from serve_common import HOST, Failure, Server, expect, free_port, main, skip

HAPROXY = shutil.which("haproxy") or ("/usr/sbin/haproxy" if os.path.exists("/usr/sbin/haproxy") else None)
N_LOAD = 16
CFG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "haproxy.cfg")


class Proxy:
    def __init__(self, r1, r2):
        self.port = free_port()
        env = dict(os.environ, TESSERA_LB_ADDR="%s:%d" % (HOST, self.port), TESSERA_R1="%s:%d" % (HOST, r1),
                   TESSERA_R2="%s:%d" % (HOST, r2))
        self.dir = tempfile.mkdtemp(prefix="tessera-haproxy-")
        self.proc = subprocess.Popen([HAPROXY, "-db", "-f", CFG], env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        threading.Thread(target=self._drain, daemon=True).start()
        self.log = []

    def _drain(self):
        for line in self.proc.stdout:
            self.log.append(line)

    def request(self, body, session=None, path="/v1/completions", timeout=120):
        import http.client
        c = http.client.HTTPConnection(HOST, self.port, timeout=timeout)
        h = {"Content-Type": "application/json"}
        if session:
            h["X-Session-Id"] = session
        try:
            if body is None:
                c.request("GET", path, headers=h)
            else:
                c.request("POST", path, body=json.dumps(body), headers=h)
            r = c.getresponse()
            return r.status, r.getheader("X-Replica"), r.read()
        finally:
            c.close()

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


def wait_both_up(px):
    """Until the proxy answers and both replicas have passed their checks."""
    deadline = time.time() + 30
    seen = set()
    while time.time() < deadline and len(seen) < 2:
        try:
            st, who, _ = px.request(None, path="/health", timeout=5)
            if st == 200:
                seen.add(who)
        except OSError:
            pass
        time.sleep(0.1)
    expect(len(seen) == 2, "both replicas not reachable through haproxy: %r\n%s" % (seen, "".join(px.log)))


def test_haproxy():
    if not HAPROXY:
        skip("haproxy is not installed (Debian package haproxy)")
    args = ("--parallel", "2", "--queue", "4", "-c", "4096", "--shutdown-grace", "0")
    with Server(*args) as r1, Server(*args) as r2:
        px = Proxy(r1.port, r2.port)
        try:
            wait_both_up(px)
            # Affinity: each key sticks to one replica.
            homes = {}
            for i in range(24):
                key = "conv-%d" % (i % 6)
                st, who, data = px.request({"prompt": "Once", "max_tokens": 2, "cache_prompt": True}, key)
                expect(st == 200, "affinity request: %d %r" % (st, data[:200]))
                expect(homes.setdefault(key, who) == who, "%s went to %s and %s" % (key, homes[key], who))
            expect(len(set(homes.values())) == 2, "all keys on one replica: %r" % homes)

            # Load, and SIGTERM on replica r1 in the middle of it.
            results, lock = [], threading.Lock()
            body = {"prompt": "Once upon a time", "max_tokens": 200, "logit_bias": {"2": -100}}

            def client(i):
                try:
                    out = px.request(body, "load-%d" % i)
                except OSError as ex:
                    out = ("lost", None, str(ex).encode())
                with lock:
                    results.append(out)

            threads = []
            for i in range(N_LOAD):
                t = threading.Thread(target=client, args=(i,))
                t.start()
                threads.append(t)
                time.sleep(0.05)
                if i == N_LOAD // 2:
                    r1.proc.send_signal(signal.SIGTERM)
            for t in threads:
                t.join(300)
            expect(len(results) == N_LOAD, "%d of %d requests returned" % (len(results), N_LOAD))
            cut = whole = 0
            for st, who, data in results:
                expect(st == 200, "a request was lost: %s from %s: %r\n%s" % (st, who, data[:200], "".join(px.log[-20:])))
                obj = json.loads(data)
                n = obj["usage"]["completion_tokens"]
                if n == 200:
                    whole += 1
                else:
                    expect(who == "r1" and obj["choices"][0]["finish_reason"] == "length",
                           "a cut request not on the stopped replica: %s %r" % (who, obj["usage"]))
                    cut += 1
            print("  %d whole, %d cut on the stopped replica (at most its 2 slots)" % (whole, cut))
            expect(cut <= 2, "%d requests cut, r1 has 2 slots" % cut)
            r1.proc.wait(60)
            expect(r1.proc.returncode == 0, "r1 exit status %d" % r1.proc.returncode)
            # After it: everything goes to r2.
            st, who, _ = px.request({"prompt": "Once", "max_tokens": 2}, "conv-0")
            expect(st == 200 and who == "r2", "after r1 stopped: %d from %s" % (st, who))
        finally:
            px.stop()


if __name__ == "__main__":
    main([("two replicas behind haproxy: health, affinity, one stopped under load", test_haproxy)])
