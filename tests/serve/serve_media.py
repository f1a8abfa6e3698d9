"""Images in requests to tessera serve --mmproj, on the synthetic LLaVA pair
(tests/mtmd builds it; tests/data/mm/README.md): the same image through
OpenAI chat (image_url data: URL), /completion's multimodal_data, Anthropic
image blocks and Responses input_image gives exactly the greedy text of
`tessera run --mmproj ... --image ...` on the same prompt (the chat
template's, from /apply-template); a second request with the same image
reuses the slot's cache past the image, another image does not (and gets
its own `tessera run` text); hostile images (truncated PNG, a lying JPEG,
huge dimensions) are 400s naming the part and the next request is served;
a remote URL, a sound, a marker count that differs are 400s; /props and
/v1/models report vision. Without --mmproj an image is a 400 naming the
flag. If llama-server is built (../shared/peer build-more.sh), the same
/completion request there gives the same text (skipped otherwise).

Usage: serve_media.py MM_BUILD_DIR MM_DATA_DIR"""
import base64
import os
import struct
import subprocess
import sys
import tempfile
import time
import zlib

from serve_common import BIN, Server, error_body, expect, main, skip

BUILD = sys.argv[1] if len(sys.argv) > 1 else ""
DATA = sys.argv[2] if len(sys.argv) > 2 else ""
MODEL = os.path.join(BUILD, "synth-llava-f32.gguf")
PROJ = os.path.join(BUILD, "mmproj-synth-llava-f32.gguf")
SQ = os.path.join(DATA, "sq56.png")
WIDE = os.path.join(DATA, "wide.png")
N = 16


def b64(path_or_bytes):
    if isinstance(path_or_bytes, bytes):
        return base64.b64encode(path_or_bytes).decode()
    with open(path_or_bytes, "rb") as f:
        return base64.b64encode(f.read()).decode()


def data_url(path, mime="image/png"):
    return "data:%s;base64,%s" % (mime, b64(path))


def run_text(prompt, *images, model=MODEL, proj=PROJ):
    """What `tessera run` writes after the prompt with the images (greedy)."""
    flags = [a for img in images for a in ("--image", img)]
    out = subprocess.run([BIN, "run", "-m", model, "--mmproj", proj, "-p", prompt, "-n", str(N), "--temp", "0",
                          "-t", "1", "-dev", "ref", "--no-echo", "--no-escape"] + flags,
                         capture_output=True, timeout=120)
    expect(out.returncode == 0, "tessera run failed: " + out.stderr.decode(errors="replace"))
    text = out.stdout.decode("utf-8", errors="replace")
    expect(text.endswith("\n"), "run output does not end with a newline")
    return text[:-1]


def chat_body(image_url, text="Once upon a time", **kw):
    body = {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": image_url}},
                                                      {"type": "text", "text": text}]}],
            "max_tokens": N, "temperature": 0}
    body.update(kw)
    return body


def completion_body(images, prompt="<__media__>Once upon a time"):
    return {"prompt": {"prompt_string": prompt, "multimodal_data": images}, "n_predict": N, "temperature": 0}


def server(*extra):
    return Server("-dev", "ref", "--mmproj", PROJ, "--parallel", "1", "-c", "512",
                  "--slot-save-path", tempfile.mkdtemp(prefix="tessera-serve-media-"), *extra, model=MODEL)


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)


def huge_png():
    """A well-formed PNG header claiming 100000 x 100000 pixels."""
    ihdr = struct.pack(">IIBBBBB", 100000, 100000, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", zlib.compress(b"\0" * 64)) +
            png_chunk(b"IEND", b""))


def test_same_text_every_shape():
    with open(SQ, "rb") as f:
        png = f.read()
    with server() as srv:
        # the chat template's prompt, with the marker where the image goes
        st, tpl = srv.json("POST", "/apply-template", chat_body(data_url(SQ)))
        expect(st == 200 and "<__media__>" in tpl.get("prompt", ""), "apply-template: %d %r" % (st, tpl))
        want_chat = run_text(tpl["prompt"], SQ)
        want_plain = run_text("<__media__>Once upon a time", SQ)
        expect(want_chat and want_plain, "tessera run gave no text")

        st, obj = srv.json("POST", "/v1/chat/completions", chat_body(data_url(SQ)))
        expect(st == 200, "chat: %d %r" % (st, obj))
        got = obj["choices"][0]["message"]["content"]
        expect(got == want_chat, "chat with the image: %r, tessera run %r" % (got, want_chat))

        st, obj = srv.json("POST", "/completion", completion_body([b64(png)]))
        expect(st == 200, "completion: %d %r" % (st, obj))
        expect(obj["content"] == want_plain, "multimodal_data: %r, tessera run %r" % (obj["content"], want_plain))
        n_prompt = obj["timings"]["prompt_n"] + obj["timings"]["cache_n"]

        # the same image again: the slot's cache is reused past the image
        st, obj = srv.json("POST", "/completion", completion_body([b64(png)]))
        expect(st == 200 and obj["content"] == want_plain, "second completion: %d %r" % (st, obj))
        t = obj["timings"]
        expect(t["cache_n"] == n_prompt - 1 and t["prompt_n"] == 1,
               "the same image again was not reused: cache_n %d prompt_n %d of %d" %
               (t["cache_n"], t["prompt_n"], n_prompt))

        # another image (same size in tokens): reuse stops before it, and
        # the text is that image's own
        want_wide = run_text("<__media__>Once upon a time", WIDE)
        st, obj = srv.json("POST", "/completion", completion_body([b64(WIDE)]))
        expect(st == 200, "wide: %d %r" % (st, obj))
        expect(obj["timings"]["cache_n"] <= 1, "another image reused the first one's cache: cache_n %d" %
               obj["timings"]["cache_n"])
        expect(obj["content"] == want_wide, "another image: %r, tessera run %r" % (obj["content"], want_wide))
        if want_wide != want_plain:
            expect(obj["content"] != want_plain, "another image gave the first image's text")

        # Anthropic: an image block, the same conversation as the chat one
        body = {"model": "m", "max_tokens": N, "temperature": 0,
                "messages": [{"role": "user", "content": [
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(png)}},
                    {"type": "text", "text": "Once upon a time"}]}]}
        st, obj = srv.json("POST", "/v1/messages", body)
        expect(st == 200, "anthropic: %d %r" % (st, obj))
        text = "".join(b.get("text", "") for b in obj["content"] if b["type"] == "text")
        expect(text == want_chat, "anthropic image block: %r, tessera run %r" % (text, want_chat))

        # Responses: input_image
        body = {"model": "m", "max_output_tokens": N, "temperature": 0,
                "input": [{"role": "user", "content": [{"type": "input_image", "image_url": data_url(SQ)},
                                                       {"type": "input_text", "text": "Once upon a time"}]}]}
        st, obj = srv.json("POST", "/v1/responses", body)
        expect(st == 200, "responses: %d %r" % (st, obj))
        text = "".join(c.get("text", "") for o in obj["output"] if o["type"] == "message" for c in o["content"])
        expect(text == want_chat, "responses input_image: %r, tessera run %r" % (text, want_chat))

        # the chat request again: its image and prefix come from the cache
        st, obj = srv.json("POST", "/v1/chat/completions", chat_body(data_url(SQ)))
        expect(st == 200 and obj["choices"][0]["message"]["content"] == want_chat, "chat again: %r" % obj)
        expect(obj["timings"]["prompt_n"] == 1, "chat again was not reused: %r" % obj["timings"])


def test_slot_save_with_image():
    """As llama-server does: a slot holding an image is saved and restored;
    after a restore the same image reuses the restored cache past it (the
    text is the image's own), another image reuses nothing past BOS (and
    gets its own text). A slot file with an image restored into a server
    without --mmproj is a 400 naming the flag, and a Qwen-VL slot (M-RoPE
    positions) a 400 on save that does not show the server's folder."""
    want_sq = run_text("<__media__>Once upon a time", SQ)
    want_wide = run_text("<__media__>Once upon a time", WIDE)
    slot_dir = tempfile.mkdtemp(prefix="tessera-serve-media-slots-")
    with Server("-dev", "ref", "--mmproj", PROJ, "--parallel", "1", "-c", "512", "--slot-save-path", slot_dir,
                model=MODEL) as srv:
        st, obj = srv.json("POST", "/completion", completion_body([b64(SQ)]))
        expect(st == 200 and obj["content"] == want_sq, "completion: %d %r" % (st, obj))
        n_prompt = obj["timings"]["prompt_n"] + obj["timings"]["cache_n"]
        st, obj = srv.json("POST", "/slots/0?action=save", {"filename": "sq.bin"})
        expect(st == 200 and obj["n_saved"] >= n_prompt, "saving a slot with an image: %d %r" % (st, obj))
        n_saved = obj["n_saved"]
        for img, want in ((SQ, want_sq), (WIDE, want_wide), (SQ, want_sq)):
            st, obj = srv.json("POST", "/slots/0?action=erase")
            expect(st == 200, "erase: %d %r" % (st, obj))
            st, obj = srv.json("POST", "/slots/0?action=restore", {"filename": "sq.bin"})
            expect(st == 200 and obj["n_restored"] == n_saved, "restore: %d %r" % (st, obj))
            st, obj = srv.json("POST", "/completion", completion_body([b64(img)]))
            expect(st == 200 and obj["content"] == want, "%s after a restore: %d %r, tessera run %r" %
                   (os.path.basename(img), st, obj.get("content"), want))
            t = obj["timings"]
            if img == SQ:
                expect(t["cache_n"] == n_prompt - 1 and t["prompt_n"] == 1,
                       "the saved image was not reused after a restore: %r" % t)
            else:
                expect(t["cache_n"] <= 1, "another image reused the restored one: %r" % t)
    with Server("-dev", "ref", "--parallel", "1", "-c", "512", "--slot-save-path", slot_dir, model=MODEL) as srv:
        st, obj = srv.json("POST", "/slots/0?action=restore", {"filename": "sq.bin"})
        expect(st == 400 and "--mmproj" in error_body(obj, "restore without --mmproj")["message"],
               "restore without --mmproj: %d %r" % (st, obj))
        st, obj = srv.json("POST", "/completion", {"prompt": "Once upon a time", "n_predict": 2})
        expect(st == 200, "served after the refused restore: %d %r" % (st, obj))
    # a Qwen-VL image's M-RoPE grid positions are not in a state: a 400 saying so
    qm, qp = os.path.join(BUILD, "synth-qwen2vl-f32.gguf"), os.path.join(BUILD, "mmproj-synth-qwen2vl-f32.gguf")
    with Server("-dev", "ref", "--mmproj", qp, "--parallel", "1", "-c", "512", "--slot-save-path", slot_dir,
                model=qm) as srv:
        st, obj = srv.json("POST", "/completion", dict(completion_body([b64(SQ)]), n_predict=2))
        expect(st == 200, "qwen completion: %d %r" % (st, obj))
        st, obj = srv.json("POST", "/slots/0?action=save", {"filename": "q.bin"})
        msg = error_body(obj, "saving a Qwen-VL slot")["message"] if st != 200 else ""
        expect(st == 400 and "M-RoPE" in msg and slot_dir not in msg, "saving a Qwen-VL slot: %d %r" % (st, obj))


def test_image_in_tiles():
    """SmolVLM (idefics3): one image is 7 media chunks (3x2 tiles and the
    global view) with text between them; the server decodes them as `tessera
    run` does and reuses its cache past all of them."""
    model, proj = os.path.join(BUILD, "synth-idefics3-f32.gguf"), os.path.join(BUILD, "mmproj-synth-idefics3-f32.gguf")
    wide300 = os.path.join(DATA, "wide300.png")
    if not all(os.path.exists(p) for p in (model, proj, wide300)):
        return
    want = run_text("<__media__>Once upon a time", wide300, model=model, proj=proj)
    with Server("-dev", "ref", "--mmproj", proj, "--parallel", "1", "-c", "512", model=model) as srv:
        st, obj = srv.json("POST", "/completion", completion_body([b64(wide300)]))
        expect(st == 200 and obj["content"] == want, "idefics3 completion: %d %r, tessera run %r" % (st, obj, want))
        n_prompt = obj["timings"]["prompt_n"] + obj["timings"]["cache_n"]
        expect(n_prompt == 134, "idefics3 prompt: %d positions, llama.cpp's 134" % n_prompt)
        st, obj = srv.json("POST", "/completion", completion_body([b64(wide300)]))
        t = obj["timings"]
        expect(st == 200 and obj["content"] == want and t["cache_n"] == n_prompt - 1 and t["prompt_n"] == 1,
               "idefics3 again, its tiles from the cache: %d %r" % (st, obj))
        st, obj = srv.json("POST", "/v1/chat/completions", chat_body(data_url(wide300)))
        expect(st == 200 and obj["choices"][0]["message"]["content"], "idefics3 chat: %d %r" % (st, obj))


def test_two_slots_at_once():
    """Two images in two slots decoded side by side (a medium goes into its
    slot's own sequence): each gets its own image's text."""
    import threading
    want = {SQ: run_text("<__media__>Once upon a time", SQ), WIDE: run_text("<__media__>Once upon a time", WIDE)}
    with Server("-dev", "ref", "--mmproj", PROJ, "--parallel", "2", "-c", "1024", model=MODEL) as srv:
        for _ in range(2):
            got = {}

            def one(path):
                got[path] = srv.json("POST", "/completion", completion_body([b64(path)]))

            ts = [threading.Thread(target=one, args=(p,)) for p in (SQ, WIDE)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            for path in (SQ, WIDE):
                st, obj = got[path]
                expect(st == 200 and obj["content"] == want[path],
                       "%s beside another image: %r, tessera run %r" % (os.path.basename(path), obj, want[path]))


def test_bad_media():
    with open(SQ, "rb") as f:
        png = f.read()
    lying_jpeg = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"\x13\x37" * 200
    with server() as srv:
        for name, raw in [("truncated PNG", png[:len(png) // 2]), ("lying JPEG", lying_jpeg),
                          ("huge PNG", huge_png())]:
            mime = "image/jpeg" if "JPEG" in name else "image/png"
            st, obj = srv.json("POST", "/v1/chat/completions",
                               chat_body("data:%s;base64,%s" % (mime, b64(raw))))
            e = error_body(obj, name)
            expect(st == 400 and "messages[0].content[0]" in e["message"], "%s: %d %r" % (name, st, e))
            st, obj = srv.json("POST", "/completion", completion_body([b64(raw)]))
            e = error_body(obj, name + " (multimodal_data)")
            expect(st == 400 and "multimodal_data[0]" in e["message"], "%s multimodal_data: %d %r" % (name, st, e))
            # and the server keeps serving
            st, obj = srv.json("POST", "/v1/chat/completions", chat_body(data_url(SQ)))
            expect(st == 200 and obj["choices"][0]["message"]["content"], "after %s: %d %r" % (name, st, obj))
        # Anthropic and Responses name their own fields
        body = {"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(png[:100])}}]}]}
        st, obj = srv.json("POST", "/v1/messages", body)
        expect(st == 400 and "messages[0].content[0]" in str(obj), "anthropic bad image: %d %r" % (st, obj))
        body = {"model": "m", "input": [{"role": "user", "content": [
            {"type": "input_image", "image_url": "data:image/png;base64," + b64(png[:100])}]}]}
        st, obj = srv.json("POST", "/v1/responses", body)
        expect(st == 400 and "content[0]" in str(obj), "responses bad image: %d %r" % (st, obj))
        # a remote URL is never fetched
        st, obj = srv.json("POST", "/v1/chat/completions", chat_body("http://127.0.0.1:1/cat.png"))
        e = error_body(obj, "remote")
        expect(st == 400 and "not fetched" in e["message"] and "messages[0].content[0]" in e["message"],
               "remote URL: %d %r" % (st, e))
        # a sound: no audio encoder
        wav = (b"RIFF" + struct.pack("<I", 36 + 320) + b"WAVEfmt " + struct.pack("<IHHIIHH", 16, 1, 1, 16000, 32000,
                                                                                   2, 16) +
               b"data" + struct.pack("<I", 320) + b"\0" * 320)
        body = {"messages": [{"role": "user", "content": [
            {"type": "input_audio", "input_audio": {"data": b64(wav), "format": "wav"}}]}], "max_tokens": 4}
        st, obj = srv.json("POST", "/v1/chat/completions", body)
        e = error_body(obj, "audio")
        expect(st == 400 and "no audio encoder" in e["message"], "input_audio: %d %r" % (st, e))
        # markers and media must match in number
        for prompt, imgs in [("<__media__><__media__>hi", [b64(png)]), ("hi", [b64(png)])]:
            st, obj = srv.json("POST", "/completion", completion_body(imgs, prompt))
            e = error_body(obj, "count")
            expect(st == 400 and "markers" in e["message"], "marker count %r: %d %r" % (prompt, st, e))
        st, obj = srv.json("POST", "/completion", completion_body(["@@@@"]))
        expect(st == 400 and "base64" in str(obj), "bad base64: %d %r" % (st, obj))
        # two images in one prompt, in the order given
        two = "<__media__> and <__media__>"
        st, obj = srv.json("POST", "/completion", completion_body([b64(png), b64(WIDE)], two))
        want = run_text(two, SQ, WIDE)
        expect(st == 200 and obj["content"] == want, "two images: %r, tessera run %r" % (obj, want))
        expect(obj["prompt"] == "<s>" + two, "the prompt with its markers: %r" % obj["prompt"])
        st, obj = srv.json("GET", "/health")
        expect(st == 200, "health after the bad requests: %d" % st)
        # capabilities
        st, props = srv.json("GET", "/props")
        expect(st == 200 and props.get("modalities") == {"vision": True, "audio": False, "video": False}, "props: %r" % props)
        st, models = srv.json("GET", "/v1/models")
        caps = [c for m in models.get("models", []) for c in m.get("capabilities", [])]
        expect(st == 200 and "multimodal" in caps, "/v1/models capabilities: %r" % models)


def test_without_projector():
    with Server("-dev", "ref", "--parallel", "1", "-c", "512", model=MODEL) as srv:
        st, obj = srv.json("POST", "/v1/chat/completions", chat_body(data_url(SQ)))
        e = error_body(obj, "no projector")
        expect(st == 400 and "--mmproj" in e["message"] and "messages[0].content[0]" in e["message"],
               "no projector: %d %r" % (st, e))
        st, obj = srv.json("POST", "/completion", completion_body([b64(SQ)]))
        expect(st == 400 and "--mmproj" in str(obj), "multimodal_data without a projector: %d %r" % (st, obj))
        st, props = srv.json("GET", "/props")
        expect(props.get("modalities") == {"vision": False, "audio": False, "video": False}, "props: %r" % props)
        st, models = srv.json("GET", "/v1/models")
        caps = [c for m in models.get("models", []) for c in m.get("capabilities", [])]
        expect("multimodal" not in caps, "/v1/models without a projector: %r" % models)
    with server("--allow-remote-media") as srv:
        st, obj = srv.json("POST", "/v1/chat/completions", chat_body("https://127.0.0.1:1/cat.png"))
        e = error_body(obj, "remote allowed")
        expect(st == 400 and "not built" in e["message"], "--allow-remote-media: %d %r" % (st, e))
    out = subprocess.run([BIN, "serve", "-m", MODEL, "--mmproj", PROJ, "--image", SQ, "--port", "0"],
                         capture_output=True, text=True, timeout=60)
    expect(out.returncode != 0 and "--image" in out.stderr, "serve --image: %d %r" % (out.returncode, out.stderr))
    out = subprocess.run([BIN, "serve", "-m", MODEL, "--mmproj", MODEL, "--port", "0", "-dev", "ref"],
                         capture_output=True, text=True, timeout=60)
    expect(out.returncode != 0 and "--mmproj" in out.stderr, "serve --mmproj MODEL: %d %r" % (out.returncode,
                                                                                           out.stderr))


def peer_server():
    peer = os.environ.get("TESSERA_PEER_BIN") or os.path.expanduser(
        "~/.cache/tessera-peer/llama_cpp_python-0.3.36/vendor/llama.cpp/build/bin")
    exe = os.path.join(peer, "llama-server")
    return exe if os.access(exe, os.X_OK) else None


def test_llama_server_side_by_side():
    """The same image through llama-server (--mmproj): the same greedy text
    on chat and on /completion (its marker is /props' media_marker), the
    same field shapes of /props and /v1/models."""
    exe = peer_server()
    if not exe:
        print("  (llama-server not built: side-by-side check skipped)")
        return
    import http.client
    import json
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    proc = subprocess.Popen([exe, "-m", MODEL, "--mmproj", PROJ, "--port", str(port), "-t", "1", "-np", "1",
                             "-c", "512", "--no-warmup"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def peer(method, path, body=None):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        c.request(method, path, json.dumps(body) if body is not None else None, {"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, json.loads(r.read())

    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                if peer("GET", "/health")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.2)
        st, props = peer("GET", "/props")
        expect(st == 200, "llama-server /props: %d" % st)
        with server() as srv:
            st, ours = srv.json("GET", "/props")
            expect(set(props["modalities"]) == set(ours["modalities"]) and "media_marker" in ours,
                   "/props modalities: llama-server %r, tessera %r" % (props["modalities"], ours))
            st, pm = peer("GET", "/v1/models")
            st, om = srv.json("GET", "/v1/models")
            expect(set(pm["models"][0]) == set(om["models"][0]) and
                   pm["models"][0]["capabilities"] == om["models"][0]["capabilities"],
                   "/v1/models: llama-server %r, tessera %r" % (pm["models"][0], om["models"][0]))
            st, theirs = peer("POST", "/v1/chat/completions", chat_body(data_url(SQ)))
            expect(st == 200, "llama-server chat: %d %r" % (st, theirs))
            st, mine = srv.json("POST", "/v1/chat/completions", chat_body(data_url(SQ)))
            a, b = theirs["choices"][0]["message"]["content"], mine["choices"][0]["message"]["content"]
            expect(a == b, "chat with the image: llama-server %r, tessera %r" % (a, b))
            expect(theirs["usage"]["prompt_tokens"] == mine["usage"]["prompt_tokens"],
                   "prompt tokens: llama-server %r, tessera %r" % (theirs["usage"], mine["usage"]))
        st, comp = peer("POST", "/completion",
                        completion_body([b64(SQ)], props["media_marker"] + "Once upon a time"))
        expect(st == 200, "llama-server completion: %d %r" % (st, comp))
        want = run_text("<__media__>Once upon a time", SQ)
        expect(comp["content"] == want, "llama-server %r, tessera %r" % (comp["content"], want))
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    for p in (MODEL, PROJ, SQ, WIDE):
        if not os.path.exists(p):
            skip("missing " + p)
    main([("same_text_every_shape", test_same_text_every_shape), ("two_slots_at_once", test_two_slots_at_once),
          ("bad_media", test_bad_media), ("image_in_tiles", test_image_in_tiles),
          ("slot_save_with_image", test_slot_save_with_image),
          ("without_projector", test_without_projector),
          ("llama_server_side_by_side", test_llama_server_side_by_side)])
