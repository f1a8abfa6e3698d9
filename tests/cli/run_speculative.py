"""tessera run with speculative decoding and with Self-Extend, end to end on
stories260K (greedy, 2 threads' worth of work on one):

- -md (stories260K drafting for itself; synth-s-Q4_0 drafting for synth-s-f32,
  tests/data's same weights rounded) and --spec-type ngram-simple print the
  same text as plain decoding, and --verbose reports drafted and accepted
  tokens (all accepted in the self-draft);
- tessera chat -md gives the plain reply;
- -r stops the speculative text where it stops the plain one; -i/-if,
  --mmproj and --prompt-cache-all with speculation, and -i and --mmproj with
  --grp-attn-n, are refused naming the flags (chat -md --mmproj too);
- a draft whose vocabulary differs (tessera-synth's --vocab 300, made here) is
  one error naming the sizes; bad --spec-type and --grp-attn-w values name the
  flag;
- --grp-attn-n 4 --grp-attn-w 64 on a prompt of 200 tokens (-b 32) runs to
  the end past the trained context."""
import os
import re
import subprocess
import tempfile

from cli_common import BIN, STORIES, Checker, best_cpu_device, crashed, require, run, test_data

require(STORIES)
c = Checker("run_speculative")
CPU = best_cpu_device()
S_F32, S_Q4 = test_data("models/synth-s-f32.gguf"), test_data("models/synth-s-Q4_0.gguf")


def gen(model, extra, prompt="Once upon a time", n="48"):
    return run(["run", "-m", model, "--device", CPU, "-t", "1", "-p", prompt, "-n", n, "--temp", "0",
                "-c", "256", "--no-echo", "--verbose"] + extra)


def stats(err):
    m = re.search(r"drafted (\d+), accepted (\d+)", err)
    return (int(m.group(1)), int(m.group(2))) if m else (-1, -1)


rep = "The cat sat on the mat. The dog sat on the log. " * 3 + "The cat sat on the"
for model, extra, prompt, what in [
        (STORIES, ["-md", STORIES, "--draft-p-min", "0"], "Once upon a time", "self-draft"),
        (S_F32, ["-md", S_Q4, "--draft-max", "4", "--draft-p-min", "0"], "Once upon a time", "Q4_0 draft"),
        (STORIES, ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "3"], rep, "n-grams")]:
    rc0, plain, err0 = gen(model, [], prompt)
    rc1, fast, err1 = gen(model, extra, prompt)
    drafted, accepted = stats(err1)
    c.check(rc0 == 0 and rc1 == 0 and not crashed(rc1, err1), f"{what}: rc {rc0} {rc1}: {err1[-300:]!r}")
    c.check(plain == fast and plain.strip(), f"{what}: text differs:\n{plain!r}\n{fast!r}")
    c.check(drafted > 0 and accepted >= 0, f"{what}: drafted {drafted}, accepted {accepted}")
    if what == "self-draft":
        c.check(accepted == drafted, f"self-draft accepted {accepted} of {drafted}")
    print(f"{what}: same {len(plain)} bytes, drafted {drafted}, accepted {accepted}")

# tessera chat: the reply through speculative steps is the plain one.
CHAT = ["chat", "-m", STORIES, "--device", CPU, "-t", "1", "-p", "Tell me a story", "-n", "48", "--temp", "0",
        "--verbose"]
rc0, plain, _ = run(CHAT)
rc1, fast, err = run(CHAT + ["-md", STORIES, "--draft-p-min", "0"])
c.check(rc0 == 0 and rc1 == 0 and plain == fast and plain.strip(), f"chat -md: rc {rc0} {rc1}:\n{plain!r}\n{fast!r}")
c.check(stats(err)[0] > 0, f"chat -md: {err[-300:]!r}")

with tempfile.TemporaryDirectory() as d:
    small = os.path.join(d, "small.gguf")
    synth = os.path.join(os.path.dirname(BIN), "tools", "tessera-synth")
    if os.access(synth, os.X_OK):
        subprocess.run([synth, "-q", "-o", small, "--vocab-from", STORIES, "--dim", "64", "--layers", "1",
                        "--heads", "2", "--ffn", "64", "--ctx", "256", "--vocab", "300"], check=True)
        rc, out, err = gen(STORIES, ["-md", small])
        c.check(rc != 0 and not crashed(rc, err) and "300 tokens, the target's 512" in err,
                f"vocabulary mismatch: rc {rc}: {err[-300:]!r}")

# -r halts the speculative text where it halts the plain one (a step's tokens
# past the reverse prompt are not printed).
rc0, plain, _ = gen(STORIES, [])
rev = plain.strip()[16:22]
rc0, plain_r, err0 = gen(STORIES, ["-r", rev])
rc1, fast_r, err1 = gen(STORIES, ["-r", rev, "-md", STORIES, "--draft-p-min", "0"])
c.check(rc0 == 0 and rc1 == 0 and plain_r == fast_r and plain_r.rstrip().endswith(rev)
        and len(plain_r) < len(plain), f"-r {rev!r}: rc {rc0} {rc1}:\n{plain_r!r}\n{fast_r!r}")

# What does not combine is refused before loading anything, naming the flags.
for extra, needle in [(["-md", STORIES, "-i"], "speculative decoding works without -i"),
                      (["--spec-type", "ngram-simple", "-if"], "speculative decoding works without -if"),
                      (["-md", STORIES, "--mmproj", "x.gguf"], "speculative decoding works without --mmproj"),
                      (["--grp-attn-n", "4", "--grp-attn-w", "64", "-i"], "--grp-attn-n works without -i"),
                      (["--grp-attn-n", "4", "--grp-attn-w", "64", "--mmproj", "x.gguf"],
                       "--grp-attn-n works without --mmproj"),
                      (["-md", STORIES, "--prompt-cache", "x.bin", "--prompt-cache-all"],
                       "speculative decoding works without --prompt-cache-all")]:
    rc, out, err = gen(STORIES, extra)
    c.check(rc == 2 and needle in err, f"{extra}: rc {rc}: {err!r}")
rc, out, err = run(CHAT + ["-md", STORIES, "--mmproj", "x.gguf"])
c.check(rc != 0 and not crashed(rc, err) and "works without --mmproj" in err, f"chat -md --mmproj: rc {rc}: {err!r}")

rc, out, err = gen(STORIES, ["--spec-type", "eagle"])
c.check(rc == 2 and "--spec-type" in err, f"--spec-type eagle: rc {rc}: {err!r}")
rc, out, err = gen(STORIES, ["--grp-attn-n", "4", "--grp-attn-w", "30"])
c.check(rc == 2 and "--grp-attn-w 30" in err, f"--grp-attn-w 30: rc {rc}: {err!r}")

long_prompt = " ".join(["Once upon a time there was a girl."] * 25)
rc, out, err = gen(STORIES, ["--grp-attn-n", "4", "--grp-attn-w", "64", "-b", "32", "-c", "512"], long_prompt, "64")
m = re.search(r"generation: .* / (\d+) tokens", err)
c.check(rc == 0 and m and int(m.group(1)) == 64, f"Self-Extend: rc {rc}: {err[-300:]!r}")
c.finish()
