"""tessera serve's router mode (--models-dir, --models-preset): two small
models (stories260K and the synthetic granite of the build's tests/data) in
a directory, each served by its own child started on first use. Checks the
/models statuses, the HF-style ORG/REPO:QUANT name of a file two directories
down, unload, LRU eviction with --models-max 1, unknown and missing model
names, a streamed chat through the router, a killed child reported (failed,
exit_code) and started again on next use, a hung load stopped by
--models-load-timeout, --no-models-autoload, the preset
and its reload, --api-key, and that no child outlives the router."""
import os
import signal
import subprocess
import tempfile
import threading
import time

from serve_common import BIN, HOST, MODEL, TEST_DATA, Failure, Server, error_body, expect, main, skip

OTHER = os.path.join(TEST_DATA, "synth-granite-f32.gguf")
CHAT = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 8, "temperature": 0}


class Router(Server):
    """A `tessera serve --models-dir DIR ...` on a free port."""

    def __init__(self, *args):
        super().__init__()
        self.args = [BIN, "serve", "--host", HOST, "--port", "0", "-t", "1", "-c", "256", "--parallel", "1"] + list(args)

    def children(self):
        out = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True)
        return [int(p) for p in out.stdout.split()]

    def status(self, model):
        st, obj = self.json("GET", "/models")
        expect(st == 200, "GET /models: %d" % st)
        for m in obj["data"]:
            if m["id"] == model:
                return m["status"]
        raise Failure("%s not in /models: %r" % (model, [m["id"] for m in obj["data"]]))

    def wait_status(self, model, want, timeout=60):
        end = time.time() + timeout
        while time.time() < end:
            s = self.status(model)
            if s["value"] == want:
                return s
            time.sleep(0.05)
        raise Failure("%s did not become %s: %r" % (model, want, s))

    def chat(self, model, **kw):
        return self.json("POST", "/v1/chat/completions", dict(CHAT, model=model, **kw))


def models_dir(tmp):
    d = os.path.join(tmp, "models")
    os.makedirs(os.path.join(d, "ggml-org", "tiny-GGUF"))
    os.symlink(MODEL, os.path.join(d, "stories260K.gguf"))
    os.symlink(OTHER, os.path.join(d, "granite.gguf"))
    os.symlink(MODEL, os.path.join(d, "ggml-org", "tiny-GGUF", "Q8_0.gguf"))
    return d


def test_lazy_lru_unload():
    with tempfile.TemporaryDirectory() as tmp, Router("--models-dir", models_dir(tmp), "--models-max", "1") as r:
        st, obj = r.json("GET", "/v1/models")
        ids = sorted(m["id"] for m in obj["data"])
        expect(st == 200 and ids == ["ggml-org/tiny-GGUF:Q8_0", "granite", "stories260K"], "models: %r" % ids)
        expect(all(m["status"]["value"] == "unloaded" for m in obj["data"]), "loaded before use: %r" % obj)
        expect(r.children() == [], "children before use")
        st, obj = r.json("GET", "/props")
        expect(st == 200 and obj["role"] == "router" and obj["max_instances"] == 1 and obj["models_autoload"] is True
               and obj["build_info"].startswith("b"), "router /props: %r" % obj)

        st, obj = r.chat("stories260K")
        expect(st == 200 and obj["model"] == "stories260K" and obj["choices"][0]["message"]["content"],
               "chat on first use: %d %r" % (st, obj))
        expect(r.status("stories260K")["value"] == "loaded", "stories260K not loaded after use")
        expect(r.status("granite")["value"] == "unloaded", "granite loaded unasked")
        expect(len(r.children()) == 1, "one child: %r" % r.children())
        st, obj = r.json("GET", "/props?model=stories260K")
        expect(st == 200 and "default_generation_settings" in obj, "the child's /props: %r" % obj)

        # --models-max 1: granite's first use stops stories260K
        st, obj = r.json("POST", "/v1/completions", {"model": "granite", "prompt": "Once", "max_tokens": 4})
        expect(st == 200 and obj["model"] == "granite", "completion on granite: %d %r" % (st, obj))
        expect(r.status("stories260K")["value"] == "unloaded", "LRU: stories260K still loaded")
        expect(r.status("granite")["value"] == "loaded", "granite not loaded")

        st, obj = r.json("POST", "/models/unload", {"model": "granite"})
        expect(st == 200 and obj.get("success") is True, "unload: %d %r" % (st, obj))
        r.wait_status("granite", "unloaded", 5)
        st, obj = r.json("POST", "/models/unload", {"model": "granite"})
        expect(st == 400, "unload of an unloaded model: %d" % st)

        # the HF-style name, loaded by /models/load
        st, obj = r.json("POST", "/models/load", {"model": "ggml-org/tiny-GGUF:Q8_0"})
        expect(st == 200 and obj.get("success") is True, "load: %d %r" % (st, obj))
        r.wait_status("ggml-org/tiny-GGUF:Q8_0", "loaded")
        end = time.time() + 10
        while r.children() and time.time() < end:  # the evicted children exit
            if len(r.children()) == 1:
                break
            time.sleep(0.05)
        expect(len(r.children()) == 1, "children after three loads with --models-max 1: %r" % r.children())


def test_bad_names():
    with tempfile.TemporaryDirectory() as tmp, Router("--models-dir", models_dir(tmp)) as r:
        st, obj = r.chat("no-such/model")
        e = error_body(obj, "unknown model")
        expect(st == 404 and "no-such/model" in e["message"], "unknown model: %d %r" % (st, obj))
        st, obj = r.json("POST", "/v1/chat/completions", CHAT)
        error_body(obj, "no model")
        expect(st == 400, "no model: %d" % st)
        st, obj = r.json("POST", "/models/load", {"model": "nope"})
        expect(st == 404, "load of an unknown model: %d" % st)
        expect(r.children() == [], "a child for a bad name")


def test_stream_and_killed_child():
    with tempfile.TemporaryDirectory() as tmp, Router("--models-dir", models_dir(tmp)) as r:
        events, done = r.stream("/v1/chat/completions", dict(CHAT, model="stories260K", max_tokens=12))
        text = "".join((e["choices"][0]["delta"].get("content") or "") for e in events if e.get("choices"))
        expect(done and text and all(e["model"] == "stories260K" for e in events), "stream: %r" % events[:3])
        kids = r.children()
        expect(len(kids) == 1, "one child: %r" % kids)
        os.kill(kids[0], signal.SIGKILL)
        s = r.wait_status("stories260K", "unloaded", 10)
        expect(s.get("failed") is True and s.get("exit_code") == 128 + 9, "killed child's status: %r" % s)
        expect(r.wait_log(lambda l: "[stories260K]" in l), "no [stories260K] lines in the router's log")
        st, obj = r.chat("stories260K")
        expect(st == 200 and obj["choices"][0]["message"]["content"], "after the kill: %d %r" % (st, obj))
        s = r.status("stories260K")
        expect(s["value"] == "loaded" and "failed" not in s, "restarted: %r" % s)


def test_load_timeout():
    """A child whose load hangs (its model file a FIFO no one writes: open(2)
    blocks) is stopped after --models-load-timeout, the waiting request gets
    a 503, the model reads failed, and the others still load."""
    with tempfile.TemporaryDirectory() as tmp:
        d = models_dir(tmp)
        os.mkfifo(os.path.join(d, "hang.gguf"))
        with Router("--models-dir", d, "--models-load-timeout", "2") as r:
            t0 = time.time()
            st, obj = r.chat("hang")
            took = time.time() - t0
            expect(st == 503 and took < 30, "a hung load: %d after %.1f s: %r" % (st, took, obj))
            expect(r.wait_log(lambda l: "--models-load-timeout" in l and "hang" in l), "no timeout line in the log")
            s = r.wait_status("hang", "unloaded", 10)
            expect(s.get("failed") is True, "hung child's status: %r" % s)
            st, obj = r.chat("stories260K")
            expect(st == 200, "another model after the timeout: %d %r" % (st, obj))


def test_no_autoload_api_key():
    with tempfile.TemporaryDirectory() as tmp, \
            Router("--models-dir", models_dir(tmp), "--no-models-autoload", "--api-key", "sk-r") as r:
        auth = {"Authorization": "Bearer sk-r"}
        st, _, _ = r.request("GET", "/health")
        expect(st == 200, "/health with --api-key: %d" % st)
        st, obj = r.json("GET", "/models")
        expect(st == 401 and error_body(obj, "no key")["type"] == "authentication_error", "no key: %d" % st)
        st, obj = r.json("POST", "/v1/chat/completions", dict(CHAT, model="granite"), headers=auth)
        expect(st == 400 and "not loaded" in error_body(obj, "not loaded")["message"], "no autoload: %d" % st)
        st, obj = r.json("POST", "/models/load", {"model": "granite"}, headers=auth)
        expect(st == 200, "load: %d" % st)
        end = time.time() + 60
        while r.json("GET", "/models", headers=auth)[1]["data"][1]["status"]["value"] != "loaded":
            expect(time.time() < end, "granite did not load")
            time.sleep(0.05)
        st, obj = r.json("POST", "/v1/chat/completions", dict(CHAT, model="granite"), headers=auth)
        expect(st == 200, "after load: %d %r" % (st, obj))


def test_preset_reload():
    with tempfile.TemporaryDirectory() as tmp:
        ini = os.path.join(tmp, "models.ini")
        with open(ini, "w") as f:
            f.write("[*]\nn-predict = 3\n\n[tiny]\nmodel = %s\nctx-size = 128\n\n[tiny-hf]\n"
                    "hf-repo = ggml-org/tiny-GGUF\n" % MODEL)
        with Router("--models-dir", models_dir(tmp), "--models-preset", ini) as r:
            s = r.status("tiny")
            expect(s["args"] == ["--n-predict", "3", "--ctx-size", "128"], "preset args: %r" % s)
            st, obj = r.json("POST", "/v1/completions", {"model": "tiny", "prompt": "Once"})
            expect(st == 200 and obj["usage"]["completion_tokens"] == 3, "preset -n 3: %d %r" % (st, obj))
            st, obj = r.json("POST", "/v1/completions", {"model": "tiny-hf", "prompt": "Once", "max_tokens": 2})
            expect(st == 200, "hf-repo model: %d %r" % (st, obj))
            with open(ini, "w") as f:
                f.write("[other]\nmodel = %s\n" % OTHER)
            st, obj = r.json("GET", "/models?reload=1")
            ids = {m["id"] for m in obj["data"]}
            expect("other" in ids and "tiny" not in ids and "granite" in ids, "after reload: %r" % ids)
            kids = r.children()
        for k in kids:  # the router stopped its children
            expect(not os.path.exists("/proc/%d" % k) or "zombie" in open("/proc/%d/status" % k).read().lower(),
                   "child %d outlived the router" % k)


def test_sigterm_drains():
    """SIGTERM: a request being answered finishes, then the children stop."""
    os.environ["TESSERA_ROUTER_DEBUG_HOLD_MS"] = "1500"  # the request is still running at the signal
    try:
        with tempfile.TemporaryDirectory() as tmp:
            r = Router("--models-dir", models_dir(tmp)).__enter__()
            st, _ = r.json("POST", "/models/load", {"model": "stories260K"})
            r.wait_status("stories260K", "loaded")
            kids = r.children()
            got = []
            t = threading.Thread(target=lambda: got.append(r.chat("stories260K")))
            t.start()
            time.sleep(0.5)
            r.proc.send_signal(signal.SIGTERM)
            t.join(30)
            expect(got and got[0][0] == 200, "the running request at SIGTERM: %r" % got)
            r.stop()
            for k in kids:
                expect(not os.path.exists("/proc/%d" % k) or "zombie" in open("/proc/%d/status" % k).read().lower(),
                       "child %d outlived the router" % k)
    finally:
        del os.environ["TESSERA_ROUTER_DEBUG_HOLD_MS"]


if __name__ == "__main__":
    if not os.path.exists(OTHER):
        skip("synthetic model missing: " + OTHER)
    main([("lazy load, /models, LRU, unload", test_lazy_lru_unload),
          ("bad model names", test_bad_names),
          ("stream, killed child restarted", test_stream_and_killed_child),
          ("a hung load stopped by --models-load-timeout", test_load_timeout),
          ("no autoload, api key", test_no_autoload_api_key),
          ("preset and reload", test_preset_reload),
          ("SIGTERM lets a running request finish", test_sigterm_drains)])
