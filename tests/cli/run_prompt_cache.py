"""tessera run --prompt-cache FILE (llama.cpp's flag): the first run writes
the state after the prompt, a second run with the same prompt evaluates no
prompt token, a longer prompt sharing a prefix evaluates only its suffix,
and the text is the same as without the cache (greedy and seeded);
--prompt-cache-ro leaves the file alone; a cache file from another model, a
corrupt or a truncated one is named on stderr and ignored (the run goes on
and evaluates the whole prompt)."""
import os
import re
import tempfile

from cli_common import BIN, SHARED, STORIES, Checker, best_cpu_device, crashed, require, run, test_data

OTHER = test_data("synth-smollm3-f32.gguf")
require(STORIES, OTHER)
c = Checker("run_prompt_cache")
CPU = best_cpu_device()
P1 = "Once upon a time, there was a little girl"
P2 = P1 + " who liked to play"


def gen(prompt, cache=None, extra=(), model=STORIES):
    args = ["run", "-m", model, "--device", CPU, "-t", "1", "-p", prompt, "-n", "16", "--verbose"] + list(extra)
    if cache:
        args += ["--prompt-cache", cache]
    rc, out, err = run(args)
    c.check(rc == 0 and not crashed(rc, err), f"run {prompt!r} cache {cache}: rc {rc}: {err[-400:]!r}")
    m = re.search(r"prompt cache: (\d+) of (\d+) prompt tokens reused, (\d+) evaluated", err)
    return out, (tuple(int(x) for x in m.groups()) if m else None), err


with tempfile.TemporaryDirectory() as tmp:
    cache = os.path.join(tmp, "prompt.bin")
    for extra in (["--temp", "0"], ["--temp", "0.8", "--seed", "3"]):
        if os.path.exists(cache):
            os.remove(cache)
        plain1, _, _ = gen(P1, extra=extra)
        out, n, err = gen(P1, cache, extra)
        c.check(n is not None and n[0] == 0 and n[2] == n[1], f"{extra}: first run reused {n}")
        c.check(os.path.exists(cache), "the first run wrote no cache file")
        c.check(out == plain1, f"{extra}: first run's text differs: {out!r} vs {plain1!r}")
        out, n, err = gen(P1, cache, extra)
        c.check(n is not None and n[0] == n[1] and n[2] == 0, f"{extra}: the same prompt again evaluated {n}")
        c.check(out == plain1, f"{extra}: cached run's text differs: {out!r} vs {plain1!r}")
        c.check(re.search(r"prompt: .* / 0 tokens", err), f"the report counts evaluated tokens: {err[-300:]!r}")
        plain2, _, _ = gen(P2, extra=extra)
        n1 = n[1]
        out, n, err = gen(P2, cache, extra)
        c.check(n is not None and n[0] == n1 and n[2] == n[1] - n1 and n[2] > 0,
                f"{extra}: the longer prompt reused/evaluated {n} (the shorter has {n1} tokens)")
        c.check(out == plain2, f"{extra}: longer prompt's text differs: {out!r} vs {plain2!r}")

    # --prompt-cache-ro: used, not rewritten.
    before = open(cache, "rb").read()
    out, n, err = gen(P1 + " and a dog", cache, ["--temp", "0", "--prompt-cache-ro"])
    c.check(n is not None and n[0] > 0, f"-ro did not use the cache: {n}")
    c.check(open(cache, "rb").read() == before, "--prompt-cache-ro rewrote the file")

    # Files it cannot use: named, ignored, the whole prompt evaluated.
    plain1, _, _ = gen(P1, extra=["--temp", "0"])
    other = os.path.join(tmp, "other.bin")
    gen(P1, other, ["--temp", "0"], model=OTHER)
    bad = os.path.join(tmp, "bad.bin")
    data = bytearray(before)
    data[len(data) // 2] ^= 0x40
    cases = [(other, "saved for"), (bad, "checksum")]
    with open(bad, "wb") as f:
        f.write(data)
    cut = os.path.join(tmp, "cut.bin")
    with open(cut, "wb") as f:
        f.write(before[:-100])
    cases.append((cut, "truncated"))
    garbage = os.path.join(tmp, "garbage.bin")
    with open(garbage, "wb") as f:
        f.write(b"\x00\x01 not a state file" * 3)
    cases.append((garbage, "not a Tessera state file"))
    for path, needle in cases:
        out, n, err = gen(P1, path, ["--temp", "0"])
        c.check(re.search(r"prompt cache not used: state file .*" + needle, err),
                f"{os.path.basename(path)}: no clear message with {needle!r}: {err[-400:]!r}")
        c.check(n is not None and n[0] == 0, f"{os.path.basename(path)}: reused {n}")
        c.check(out == plain1, f"{os.path.basename(path)}: text differs: {out!r} vs {plain1!r}")

    rc, out, err = run(["run", "-m", STORIES, "-p", "x", "--prompt-cache-ro"])
    c.check(rc == 2 and "--prompt-cache-ro needs --prompt-cache" in err, f"-ro alone: rc {rc} {err!r}")
c.finish()
