"""Semantically hostile models (issue 19): well-formed GGUF files whose
content makes no sense must be refused by the loader, and `tessera inspect
--validate` must say so (exit 1, one line naming the key or tensor at fault)
while it accepts the untouched file. Each is made from stories260K with
gguf_edit.py; `tessera run` refuses them with the same message."""
import math
import os
import struct
import tempfile

from cli_common import STORIES, Checker, crashed, require, run
from gguf_edit import ARRAY, Gguf

require(STORIES)
c = Checker("validate_hostile")
tmp = tempfile.mkdtemp(prefix="tessera-hostile-")

F32, I32, STR = 6, 5, 8


def variant(name, edit):
    g = Gguf(STORIES)
    edit(g)
    path = os.path.join(tmp, name + ".gguf")
    g.write(path)
    return path


def set_token_arrays(g, n):
    """n tokens (padded with new ones or cut), scores and types to match."""
    et, toks = g.get("tokenizer.ggml.tokens")
    toks = (toks + [b"<extra_%d>" % i for i in range(max(0, n - len(toks)))])[:n]
    g.set("tokenizer.ggml.tokens", ARRAY, (et, toks))
    for key, fill in (("tokenizer.ggml.scores", 0.0), ("tokenizer.ggml.token_type", 1)):
        v = g.get(key)
        if v:
            g.set(key, ARRAY, (v[0], (v[1] + [fill] * n)[:n]))


def set_elem(key, i, value):
    def edit(g):
        et, items = g.get(key)
        items = list(items)
        items[i] = value
        g.set(key, ARRAY, (et, items))
    return edit


def poison_tensor(name):
    """Fill an F32 tensor with NaN: the file loads, the logits cannot be finite."""
    def edit(g):
        for tname, dims, dtype, off in g.tensors:
            if tname == name.encode():
                assert dtype == 0, "expected an F32 tensor"
                n = 1
                for d in dims:
                    n *= d
                data = bytearray(g.data)
                data[off:off + 4 * n] = struct.pack("<f", math.nan) * n
                g.data = bytes(data)
                return
        raise KeyError(name)
    return edit


# (file, words the error line must contain)
cases = [
    (variant("vocab600", lambda g: set_token_arrays(g, 600)), ["tokenizer.ggml.tokens", "token_embd.weight", "600"]),
    (variant("vocab500", lambda g: set_token_arrays(g, 500)), ["tokenizer.ggml.tokens", "512"]),
    (variant("type999", set_elem("tokenizer.ggml.token_type", 7, 999)), ["token_type", "999"]),
    (variant("type-7", set_elem("tokenizer.ggml.token_type", 300, -7)), ["token_type", "-7"]),
    (variant("score-nan", set_elem("tokenizer.ggml.scores", 42, math.nan)), ["tokenizer.ggml.scores", "42"]),
    (variant("score-inf", set_elem("tokenizer.ggml.scores", 0, -math.inf)), ["tokenizer.ggml.scores"]),
    (variant("bos-out", lambda g: g.set("tokenizer.ggml.bos_token_id", 4, 9999)), ["bos_token_id", "9999"]),
    (variant("nan-weights", poison_tensor("output_norm.weight")), ["not finite"]),
    # Refused by the hyperparameter checks, or at the latest by the finite-logits check.
    (variant("eps-neg", lambda g: g.set("llama.attention.layer_norm_rms_epsilon", F32, -1.0)), []),
    (variant("heads7", lambda g: g.set("llama.attention.head_count", 4, 7)), ["head_count"]),
]

rc, out, err = run(["inspect", "--validate", STORIES])
c.check(rc == 0 and "valid" in out, "the untouched model: exit %d %r %r" % (rc, out, err))
rebuilt = variant("unchanged", lambda g: None)
rc, out, err = run(["inspect", "--validate", rebuilt])
c.check(rc == 0, "the rewritten but unchanged model: exit %d %r" % (rc, err))

for path, words in cases:
    for args in (["inspect", "--validate", path], ["run", "-m", path, "-p", "Once", "-n", "4", "--no-echo"]):
        rc, out, err = run(args)
        lines = [l for l in err.splitlines() if l.strip()]
        last = lines[-1] if lines else ""
        c.check(rc == 1 and not crashed(rc, err), "%s: exit %d, stderr %r" % (args, rc, err[-300:]))
        for w in words:
            c.check(w in last, "%s: %r does not name %r" % (args[:2] + [os.path.basename(path)], last, w))
        if args[0] == "run":
            c.check(out.strip() == "", "%s: generated text from a broken model: %r" % (os.path.basename(path), out[:80]))

rc, out, err = run(["inspect", "--validate", "--json", cases[0][0]])
c.check(rc == 1 and '"valid": false' in out and "token_embd.weight" in out, "--json: %d %r" % (rc, out))
c.finish()
