"""A quantized KV cache on the OpenCL device, through the CLI:
`tessera run --device opencl0,CPU -ngl 99 -fa on -ctk T -ctv T --explain`
for T in q8_0 and q4_0 on MODEL (argument: a file under ../shared/models or in
the model cache of scripts/fetch-models.sh, or an absolute path; the
synthetic synth-s-f32 by default, head size 32).
--verbose and --explain must show flash attention with a T cache held on
opencl0, every layer (from attn_norm-0) in an opencl0 split of the prompt
and the generation graph, no FLASH_ATTN and no CPY (the cache writes)
falling back to the CPU, and no K or V cache copied in from the host; and
the run must generate the tokens asked for. Whether the tokens are the CPU's is test_ocl_kv's
'model' check (it has the near-tie rule)."""
import os
import re
import sys

from ocl_common import SHARED, Checker, require_opencl, run

cpu = require_opencl()
arg = sys.argv[1] if len(sys.argv) > 1 else "synth-s-f32.gguf"
model = arg if os.path.isabs(arg) else os.path.join(SHARED, "models", arg)
if not os.path.exists(model):  # a real model: scripts/fetch-models.sh's cache
    cache = os.environ.get("TESSERA_MODEL_CACHE") or os.path.expanduser("~/.cache/tessera/models")
    model = os.path.join(cache, arg)
if not os.path.exists(model):
    print(f"skip: no model {arg} in {SHARED}/models or the model cache")
    sys.exit(77)
c = Checker("opencl_kv_cli")
n = 8
for t in ["q8_0", "q4_0"]:
    # a prompt of several tokens in any vocabulary: a prompt graph besides the generation graph
    rc, out, err = run(["run", "-m", model, "-p", "The cache holds the keys and the values", "-n", str(n),
                        "--temp", "0", "--verbose", "--device", f"opencl0,{cpu}", "-ngl", "99", "-fa", "on",
                        "-ctk", t, "-ctv", t, "--explain"], timeout=900)
    if not c.check(rc == 0, f"{t}: exit {rc}: {err.strip()[-800:]}"):
        continue
    c.check("flash attention on" in err, f"{t}: the context does not use flash attention: {err[:600]}")
    mem = re.search(rf"^tessera: memory opencl0: .*KV {t} ([0-9.]+) MiB", err, re.M)
    c.check(mem is not None and float(mem.group(1)) > 0, f"{t}: no {t} KV cache on opencl0: {err[:800]}")
    fallbacks = re.findall(r"^fallback: (\w+) '([^']*)' -> ([\w-]+): (.*)$", err, re.M)
    attn = [f for f in fallbacks if f[0].lower() in ("flash_attn", "cpy")]
    c.check(not attn, f"{t}: attention nodes fell back: {attn[:4]}")
    copies = re.findall(r"^  copy '([kv]_cache[^']*)' (\S+) -> (\S+)", err, re.M)
    c.check(not copies, f"{t}: the K/V cache is copied to the device: {copies[:4]}")
    splits = re.findall(r"^split \d+: ([\w-]+), nodes (\d+)\.\.(\d+) \(\d+: '([^']*)' \.\. '([^']*)'\)", err, re.M)
    # the layers' split; at -ngl 99 it is the whole graph, from the embedding lookup on
    layers = [sp for sp in splits if sp[0] == "opencl0" and (sp[3] == "attn_norm-0" or sp[3].startswith("get_rows"))]
    c.check(len(layers) == 2, f"{t}: the prompt and generation graphs do not run every layer on opencl0:\n{err[:1500]}")
    gen = re.search(r"^generation: .* / (\d+) tokens", err, re.M)
    c.check(gen is not None and int(gen.group(1)) == n,
            f"{t}: not {n} tokens generated: {gen.group(0) if gen else err[-400:]}")
    print(f"{t}: {mem.group(0) if mem else 'no memory line'}; layers on opencl0 in "
          f"{len(layers)} graphs; {len(fallbacks)} fallbacks ({', '.join(sorted({f[0] for f in fallbacks})) or 'none'})")
c.finish()
