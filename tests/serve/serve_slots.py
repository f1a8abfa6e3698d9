"""llama-server's slot save/restore on tessera serve: --slot-save-path DIR
and POST /slots/{id}?action=save|restore|erase with {"filename": NAME}. A
slot saved, erased and restored into another slot serves the same prompt
again from its cache (cached_tokens) with the same greedy text; bad file
names (path separators, "..") are 400, a missing file 404, a corrupt file
or one saved by another model a clear 400, a bad slot or action 400, and
without --slot-save-path save/restore are 501 while erase works."""
import os
import tempfile

from serve_common import MODEL, TEST_DATA, Server, error_body, expect, main, skip

OTHER = os.path.join(TEST_DATA, "synth-smollm3-f32.gguf")
PROMPT = "Once upon a time, there was a little girl named"
REQ = {"prompt": PROMPT, "max_tokens": 8, "temperature": 0}


def slots(srv):
    st, obj = srv.json("GET", "/slots")
    expect(st == 200, "GET /slots: %d" % st)
    return obj


def action(srv, slot, act, filename=None, body=None):
    if body is None:
        body = {} if filename is None else {"filename": filename}
    return srv.json("POST", "/slots/%s?action=%s" % (slot, act), body)


def bad(srv, status, needle, slot, act, filename=None, body=None):
    st, obj = action(srv, slot, act, filename, body)
    e = error_body(obj, "%s %s %r" % (slot, act, filename))
    expect(st == status and needle in e["message"],
           "slot %s %s %r: status %d %r, want %d with %r" % (slot, act, filename, st, e["message"], status, needle))


def n_past(obj, i):
    for s in obj:
        if s.get("id") == i:
            return s.get("n_past")
    raise AssertionError("no slot %d in %r" % (i, obj))


def test_save_erase_restore():
    with tempfile.TemporaryDirectory() as d:
        with Server("--parallel", "2", "-c", "256", "--slot-save-path", d) as srv:
            st, first = srv.json("POST", "/v1/completions", REQ)
            expect(st == 200, "completion: %d %r" % (st, first))
            text = first["choices"][0]["text"]
            held = n_past(slots(srv), 0)
            expect(held and held > 0, "slot 0 holds nothing after a request: %r" % slots(srv))
            st, obj = action(srv, 0, "save", "a.bin")
            expect(st == 200 and obj.get("n_saved") == held and obj.get("filename") == "a.bin"
                   and obj.get("n_written", 0) > 0 and "save_ms" in obj.get("timings", {}),
                   "save: %d %r (slot held %d)" % (st, obj, held))
            expect(os.path.getsize(os.path.join(d, "a.bin")) == obj["n_written"], "n_written is not the file size")
            st, obj = action(srv, 0, "erase")
            expect(st == 200 and obj.get("n_erased") == held, "erase: %d %r" % (st, obj))
            expect(n_past(slots(srv), 0) == 0, "slot 0 after erase: %r" % slots(srv))
            st, obj = action(srv, 1, "restore", "a.bin")
            expect(st == 200 and obj.get("n_restored") == held and "restore_ms" in obj.get("timings", {}),
                   "restore into slot 1: %d %r" % (st, obj))
            expect(n_past(slots(srv), 1) == held, "slot 1 after restore: %r" % slots(srv))
            st, again = srv.json("POST", "/v1/completions", REQ)
            expect(st == 200 and again["choices"][0]["text"] == text,
                   "after restore: %r, before: %r" % (again["choices"][0]["text"], text))
            cached = again["usage"].get("prompt_tokens_details", {}).get("cached_tokens")
            expect(cached == again["usage"]["prompt_tokens"] - 1,
                   "the restored slot's prefix was not reused: cached %r of %r" % (cached, again["usage"]))

            # Names that leave the directory, missing files, bad slots and actions.
            for name in ["../a.bin", "x/../a.bin", "/etc/passwd", "..", "a\\b", ""]:
                bad(srv, 400, "filename", 0, "save", name)
                bad(srv, 400, "filename", 0, "restore", name)
            bad(srv, 404, "no saved slot", 0, "restore", "missing.bin")
            bad(srv, 400, "filename", 0, "save", body={"file": "a.bin"})
            bad(srv, 400, "no slot", 2, "save", "a.bin")
            bad(srv, 400, "no slot", "abc", "erase")
            bad(srv, 400, "unknown action", 0, "load", "a.bin")
            st, _, _ = srv.request("GET", "/slots/0?action=save")
            expect(st == 405, "GET /slots/0: %d" % st)

            # Corrupt and foreign files: a clear 400, the slot left as it was.
            data = bytearray(open(os.path.join(d, "a.bin"), "rb").read())
            data[len(data) // 2] ^= 1
            open(os.path.join(d, "bad.bin"), "wb").write(data)
            bad(srv, 400, "checksum", 1, "restore", "bad.bin")
            expect(n_past(slots(srv), 1) == held, "a refused restore changed slot 1")
            with Server("--parallel", "1", "-c", "128", "--slot-save-path", d, model=OTHER) as other:
                st, _ = other.json("POST", "/v1/completions", REQ)
                expect(st == 200, "completion on the other model: %d" % st)
                st, obj = action(other, 0, "save", "other.bin")
                expect(st == 200, "save on the other model: %d %r" % (st, obj))
            bad(srv, 400, "saved for", 0, "restore", "other.bin")


def test_without_path():
    with Server("--parallel", "1") as srv:
        bad(srv, 501, "--slot-save-path", 0, "save", "a.bin")
        bad(srv, 501, "--slot-save-path", 0, "restore", "a.bin")
        st, obj = action(srv, 0, "erase")
        expect(st == 200 and obj.get("n_erased") == 0, "erase without a path: %d %r" % (st, obj))


if not os.path.exists(OTHER):
    skip("model missing: %s (the build makes it from tests/data)" % OTHER)
main([("save, erase, restore into another slot", test_save_erase_restore),
      ("without --slot-save-path", test_without_path)])
