"""tessera run with --mmproj and --image on the synthetic LLaVA, Gemma 3,
Qwen2.5-VL and SmolVLM (idefics3: an image in 7 tiles) pairs: the greedy text
after the image is llama.cpp's (libmtmd's greedy ids of
tests/data/mm/synth-llava-sq56.json, synth-gemma3-sq224.json,
synth-qwen2vl-sq224.json / -wide.json and synth-idefics3-wide.json, spelled
with the model's own vocabulary), and after a sound with --audio on the
Ultravox and Voxtral pairs (synth-ultravox-tones3.json, -tones31.json,
synth-voxtral-tones3.json, -tones31.json); and the media flags' errors: one
clear line naming the flag or the file, a non-zero exit, no crash."""
import json
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.join(os.environ.get("TESSERA_SOURCE_ROOT", "."), "tests", "cli"))
from cli_common import Checker, crashed, require, run  # noqa: E402
from gguf_edit import Gguf  # noqa: E402

build, data = sys.argv[1], sys.argv[2]
MODEL = os.path.join(build, "synth-llava-f32.gguf")
PROJ = os.path.join(build, "mmproj-synth-llava-f32.gguf")
IMG = os.path.join(data, "sq56.png")
require(MODEL, PROJ, IMG)
c = Checker("run_mtmd_cli")


def spell(ids, model=MODEL):
    """SentencePiece pieces to text: U+2581 is a space, <0xNN> a byte."""
    toks = Gguf(model).get("tokenizer.ggml.tokens")[1]
    out = b""
    for i in ids:
        t = toks[i].decode() if isinstance(toks[i], bytes) else toks[i]
        m = re.fullmatch(r"<0x([0-9A-Fa-f]{2})>", t)
        out += bytes([int(m.group(1), 16)]) if m else t.replace("\u2581", " ").encode()
    return out.decode("utf-8", errors="replace")


G3 = (os.path.join(build, "synth-gemma3-f32.gguf"), os.path.join(build, "mmproj-synth-gemma3-f32.gguf"),
      os.path.join(data, "sq224.png"), "synth-gemma3-sq224.json")
require(*G3[:3])
# Qwen2.5-VL: M-RoPE grid positions, the text after the image (prompt and
# every generated token) turned from t0 + max(cells across, down)
Q2M, Q2P = os.path.join(build, "synth-qwen2vl-f32.gguf"), os.path.join(build, "mmproj-synth-qwen2vl-f32.gguf")
Q2 = [(Q2M, Q2P, os.path.join(data, "sq224.png"), "synth-qwen2vl-sq224.json"),
      (Q2M, Q2P, os.path.join(data, "wide300.png"), "synth-qwen2vl-wide.json")]
require(Q2M, Q2P)

I3 = (os.path.join(build, "synth-idefics3-f32.gguf"), os.path.join(build, "mmproj-synth-idefics3-f32.gguf"),
      os.path.join(data, "wide300.png"), "synth-idefics3-wide.json")
require(*I3[:3])
for model, proj, img, golden in [(MODEL, PROJ, IMG, "synth-llava-sq56.json"), G3] + Q2 + [I3]:
    gold = json.load(open(os.path.join(data, golden)))
    want = spell(gold["greedy"], model)
    for dev in ["ref", "cpu-avx0"]:
        rc, out, err = run(["run", "-m", model, "--mmproj", proj, "--image", img, "-p", "Once upon a time",
                            "-n", str(len(gold["greedy"])), "--temp", "0", "-dev", dev, "--no-echo"])
        if dev != "ref" and "cpu-avx0" in err and rc != 0:
            continue  # no such device in this build
        c.check(rc == 0, f"{golden} {dev}: exit {rc}: {err}")
        c.check(out.rstrip("\n") == want, f"{golden} {dev}: {out!r} is not llama.cpp's {want!r}")

tmp = tempfile.mkdtemp(prefix="tessera-mtmd-cli-")
cut = os.path.join(tmp, "cut.png")
with open(IMG, "rb") as f:
    png = f.read()
with open(cut, "wb") as f:
    f.write(png[: len(png) // 2])
P = ["-m", MODEL, "-p", "hi"]
cases = [
    (["run"] + P + ["--image", IMG], "--mmproj"),
    (["run"] + P + ["--audio", IMG], "--mmproj"),
    (["run"] + P + ["--mmproj", PROJ, "--image", os.path.join(tmp, "none.png")], "none.png"),
    (["run"] + P + ["--mmproj", PROJ, "--image", cut], "cut.png"),
    (["run"] + P + ["--mmproj", MODEL, "--image", IMG], "not an mmproj"),
    (["run"] + P + ["--mmproj", os.path.join(tmp, "none.gguf"), "--image", IMG], "none.gguf"),
    (["run", "-m", MODEL, "-p", "<__media__> and <__media__>", "--mmproj", PROJ, "--image", IMG], "markers"),
    (["run"] + P + ["--mmproj", PROJ, "--prompt-cache", os.path.join(tmp, "pc")], "--prompt-cache"),
    (["run"] + P + ["--mmproj", PROJ, "--image", IMG, "--image", IMG] + ["--image", IMG] * 15, "at most 16"),
]
for args, word in cases:
    rc, out, err = run(args)
    lines = [l for l in err.splitlines() if l.strip()]
    c.check(rc != 0 and not crashed(rc, err) and lines and word in lines[-1], f"{args}: exit {rc}, {err!r}")
    c.check(len(lines) <= 2, f"{args}: more than a line or two of error: {err!r}")
# chat: /image attaches an image to the next message; --image to the first
CHAT = ["chat", "-m", MODEL, "--mmproj", PROJ, "--chat-template", "vicuna", "-n", "4", "--temp", "0",
        "-dev", "ref", "--verbose"]
rc, out, err = run(CHAT, stdin_text=f"/image {IMG}\nWhat is this?\n")
c.check(rc == 0 and "attached to the next message" in out + err and "[image: 16 positions" in err,
        f"chat /image: exit {rc}: {out!r} {err!r}")
rc, out, err = run(CHAT + ["--image", IMG, "-p", "What is this?"])
c.check(rc == 0 and "[image: 16 positions" in err, f"chat --image -p: exit {rc}: {err!r}")
rc, out, err = run(CHAT, stdin_text=f"/image {os.path.join(tmp, 'none.png')}\n/image {cut}\n")
c.check(rc == 0 and "none.png" in err and "cut.png" in err and not crashed(rc, err), f"chat bad /image: {err!r}")
# a reply with stray bytes (this vocabulary's byte tokens at seed 3) goes
# back into the template as U+FFFD: the second turn is answered
rc, out, err = run(["chat", "-m", MODEL, "--chat-template", "vicuna", "-n", "24", "--temp", "1", "--seed", "3",
                    "-dev", "ref"], stdin_text="Hello there\nAnd again\n")
c.check(rc == 0 and err.count("tokens in") == 2 and "invalid UTF-8" not in err,
        f"chat: a second turn after a reply of invalid UTF-8: exit {rc}: {err[-300:]!r}")
rc, out, err = run(["chat", "-m", MODEL, "--chat-template", "vicuna", "-dev", "ref"], stdin_text=f"/image {IMG}\n")
c.check(rc == 0 and "--mmproj" in err, f"chat /image without --mmproj: {err!r}")
rc, out, err = run(["chat", "-m", MODEL, "--image", IMG, "-p", "hi"])
c.check(rc != 0 and "--mmproj" in err and not crashed(rc, err), f"chat --image without --mmproj: {err!r}")

# bench: each image's encode time, every repetition an encode of the graph
# (no cache), beside the text tests or alone
rc, out, err = run(["bench", "-m", MODEL, "--mmproj", PROJ, "--image", IMG, "--image", G3[2], "-p", "0", "-n", "0",
                    "-t", "1", "-r", "2", "-o", "json", "-dev", "ref"])
rows = json.loads(out) if rc == 0 else []
c.check(rc == 0 and [r["media"] for r in rows] == ["sq56.png", "sq224.png"] and
        all(r["test"] == "encode" and r["n_tokens"] == 16 and len(r["samples_ms"]) == 2 and
            all(ms > 0 for ms in r["samples_ms"]) for r in rows) and
        (rows[0]["width"], rows[0]["height"]) == (56, 56), f"bench --mmproj -o json: exit {rc}: {out!r} {err!r}")
rc, out, err = run(["bench", "-m", MODEL, "--mmproj", PROJ, "--image", IMG, "-p", "8", "-n", "2", "-t", "1", "-r", "1"])
c.check(rc == 0 and "| pp8 |" in out and "encode ms" in out and "| sq56.png | 56x56 | 16 |" in out,
        f"bench --mmproj with text tests: exit {rc}: {out!r} {err!r}")
for args, word in [(["--image", IMG], "--mmproj"), (["--mmproj", PROJ], "--image"),
                   (["--mmproj", PROJ, "--image", IMG, "-o", "csv"], "CSV"),
                   (["--mmproj", PROJ, "--image", cut], "cut.png")]:
    rc, out, err = run(["bench", "-m", MODEL, "-p", "0", "-n", "0", "-r", "1"] + args)
    c.check(rc != 0 and not crashed(rc, err) and word in err, f"bench {args}: exit {rc}: {err!r}")

# Ultravox and Voxtral: --audio, the greedy text after the sound is
# llama.cpp's (up to the first near-tie: a gap under 0.01 between its best
# two logits); Voxtral's prompt has [BEGIN_AUDIO] before the sound
UV = (os.path.join(build, "synth-ultravox-f32.gguf"), os.path.join(build, "mmproj-synth-ultravox-f32.gguf"))
VX = (os.path.join(build, "synth-voxtral-f32.gguf"), os.path.join(build, "mmproj-synth-voxtral-f32.gguf"))
require(*UV, *VX)
for secs in ["3", "31"]:
    wav = os.path.join(tmp, f"tones{secs}.wav")
    rc = os.system(f"python3 '{os.path.join(data, 'make_wav.py')}' '{wav}' {secs}")
    c.check(rc == 0, f"make_wav.py {secs}: {rc}")
    for fam, pair in [("ultravox", UV), ("voxtral", VX)]:
        gold = json.load(open(os.path.join(data, f"synth-{fam}-tones{secs}.json")))
        n = len(gold["greedy"])
        for i, m in enumerate(gold["greedy_margin"]):
            if m < 0.01:
                n = i + 1  # this token is still llama.cpp's best, the next may not be
                break
        want = spell(gold["greedy"][:n], pair[0])
        for dev in ["ref", "cpu-avx0"] if secs == "3" else ["cpu-avx0"]:
            rc, out, err = run(["run", "-m", pair[0], "--mmproj", pair[1], "--audio", wav, "-p",
                                "<__media__>Once upon a time", "-n", str(n), "--temp", "0", "-dev", dev,
                                "--no-echo", "-c", "1024"])
            if dev != "ref" and "cpu-avx0" in err and rc != 0:
                continue
            c.check(rc == 0, f"{fam} {secs} s {dev}: exit {rc}: {err}")
            c.check(out.rstrip("\n") == want, f"{fam} {secs} s {dev}: {out!r} is not llama.cpp's {want!r}")
WAV3 = os.path.join(tmp, "tones3.wav")
with open(WAV3, "rb") as f:
    wav = f.read()
cutwav = os.path.join(tmp, "cut.wav")
with open(cutwav, "wb") as f:
    f.write(wav[: len(wav) // 2])
UP = ["-m", UV[0], "-p", "hi", "--mmproj", UV[1]]
for args, word in [
    (["run"] + UP + ["--audio", cutwav], "cut.wav"),
    (["run"] + UP + ["--image", IMG], "an image"),
    (["run"] + P + ["--mmproj", PROJ, "--audio", WAV3], "a sound"),
    (["run"] + UP + ["--audio", WAV3, "-c", "256"], "context"),
    (["run"] + P + ["--mmproj", VX[1], "--audio", WAV3], "mm.a.mlp.2.weight"),  # 64 wide, the model 128
]:
    rc, out, err = run(args)
    lines = [l for l in err.splitlines() if l.strip()]
    c.check(rc != 0 and not crashed(rc, err) and lines and word in lines[-1], f"{args}: exit {rc}, {err!r}")
rc, out, err = run(["chat", "-m", UV[0], "--mmproj", UV[1], "--chat-template", "vicuna", "-n", "4", "--temp", "0",
                    "-dev", "cpu-avx0", "-c", "1024", "--verbose"], stdin_text=f"/audio {WAV3}\nWhat is this?\n")
c.check(rc == 0 and "attached to the next message" in out + err and "[audio: 375 positions" in err,
        f"chat /audio: exit {rc}: {out!r} {err!r}")

rc, out, err = run(["run", "--help"])
c.check(rc == 0 and "--mmproj" in out and "--image" in out and "--no-mmproj-offload" in out, "run --help")
rc, out, err = run(["chat", "--help"])
c.check(rc == 0 and "--mmproj" in out and "--image" in out, "chat --help")
c.finish()
