"""The samplers llama.cpp users set, from the command line: every flag in
--help with llama.cpp's spelling, bad values one line naming the flag and
exit 2, a seed giving the same text twice, and, where the peer llama.cpp
build of ../shared/peer is present, the same text as its llama-completion
for the same flags and seed on stories260K (f32: the two engines' logits
agree to float rounding, and the samplers draw alike)."""
import glob
import os

from cli_common import STORIES, Checker, require, run, crashed

require(STORIES)
c = Checker("cli_samplers")

FLAGS = ["--samplers", "--sampler-seq, --sampling-seq", "--top-nsigma, --top-n-sigma", "--xtc-probability",
         "--xtc-threshold", "--dry-multiplier", "--dry-base", "--dry-allowed-length", "--dry-penalty-last-n",
         "--dry-sequence-breaker", "--dynatemp-range", "--dynatemp-exp", "--mirostat", "--mirostat-lr",
         "--mirostat-ent"]
for cmd in ["run", "chat"]:
    rc, out, _ = run([cmd, "--help"])
    for flag in FLAGS:
        c.check(flag in out, f"{cmd} --help lacks {flag}")
rc, out, _ = run(["run", "--help"])
c.check("penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature" in out and "edskypmxt" in out,
        "run --help: llama.cpp's default order not shown")

M = ["-m", STORIES]
GEN = ["run"] + M + ["-n", "24", "--no-echo", "-p", "Once upon a time"]
# Bad values: one line naming the flag (and the value), exit 2.
for args, flag, value in [(["--mirostat", "3"], "--mirostat", "3"), (["--xtc-probability", "2"], "--xtc-probability", "2"),
                          (["--samplers", "top_k;warp"], "--samplers", "warp"),
                          (["--sampling-seq", "kq"], "--sampling-seq", "q"),
                          (["--dry-base", "-1"], "--dry-base", "-1"),
                          (["--dry-penalty-last-n", "-2"], "--dry-penalty-last-n", "-2"),
                          (["--dry-sequence-breaker", ""], "--dry-sequence-breaker", ""),
                          (["--top-n-sigma", "x"], "--top-n-sigma", "x")]:
    rc, out, err = run(GEN + args)
    lines = err.strip().splitlines()
    c.check(not crashed(rc, err) and rc == 2 and len(lines) == 1 and flag in lines[0] and value in lines[0],
            f"{args}: rc {rc}, stderr {err!r}")

CONFIGS = [["--seed", "42"], ["--seed", "7", "--mirostat", "2"], ["--seed", "7", "--mirostat", "1", "--mirostat-ent", "3"],
           ["--seed", "3", "--dry-multiplier", "0.8", "--top-k", "0"],
           ["--seed", "11", "--xtc-probability", "0.9", "--xtc-threshold", "0.1", "--dry-multiplier", "1.0",
            "--dry-allowed-length", "1", "--repeat-penalty", "1.2"],
           ["--seed", "5", "--dynatemp-range", "0.5", "--top-n-sigma", "1.5"],
           ["--seed", "9", "--samplers", "top_k;temperature", "--top-k", "5"],
           ["--seed", "12", "--sampling-seq", "kxt", "--top-k", "20", "--xtc-probability", "1"],
           ["--seed", "13", "--dry-multiplier", "2", "--dry-sequence-breaker", "none", "--dry-penalty-last-n", "128"]]
texts = {}
for cfg in CONFIGS:
    rc1, a, err = run(GEN + cfg)
    rc2, b, _ = run(GEN + cfg)
    c.check(rc1 == 0 and rc2 == 0 and a == b and a.strip(), f"{cfg}: rc {rc1}/{rc2}, {a!r} / {b!r} {err[-200:]!r}")
    texts[" ".join(cfg)] = a
c.check(len(set(texts.values())) > len(texts) // 2, f"the settings change little: {texts}")

# Side by side with llama.cpp's llama-completion, when the peer build is here.
peer = os.environ.get("TESSERA_PEER_DIR", os.path.expanduser("~/.cache/tessera-peer"))
bins = glob.glob(os.path.join(peer, "llama_cpp_python-*", "vendor", "llama.cpp", "build", "bin", "llama-completion"))
if not bins:
    print("cli_samplers: no llama-completion under", peer, "(../shared/peer/build.sh): the comparison is skipped")
else:
    import subprocess
    same = 0
    for cfg in CONFIGS:
        r = subprocess.run([bins[0], "-m", STORIES, "-n", "24", "-p", "Once upon a time", "-no-cnv",
                            "--no-display-prompt", "-t", "2"] + cfg, capture_output=True, timeout=120)
        theirs = r.stdout.decode("utf-8", "replace")
        ours = texts[" ".join(cfg)]
        if c.check(r.returncode == 0 and theirs.strip() == ours.strip(),
                   f"{cfg}: llama-completion wrote {theirs!r}, tessera {ours!r}"):
            same += 1
    print(f"cli_samplers: {same} of {len(CONFIGS)} settings give llama-completion's text")

c.finish()
