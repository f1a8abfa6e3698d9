"""tessera run --context-shift (llama.cpp's flag) on stories260K with -c 64:
without it a full context stops the run ("context full") before -n; with it
the run drops half of what follows --keep and generates all 300 tokens
through several shifts, and the text after the first shift does not fall
into a loop: at least 30% distinct words (measured 0.36-0.40 for --keep 0,
4, -1) and no word repeated more than 3 times in a row. This guards the
loop; that the shifted keys are right is test_kv_shift's proof (a shift
without re-rotation writes made-up words here, distinct 0.66, which this
ratio does not catch). tessera chat -p: 300 tokens through the shifts too.
A recurrent hybrid turns the flag off with a warning, and refuses
--grp-attn-n (Self-Extend) with an error.""" 
import os
import re

from cli_common import STORIES, Checker, best_cpu_device, crashed, require, run, test_data

require(STORIES)
c = Checker("run_context_shift")
CPU = best_cpu_device()
BASE = ["run", "-m", STORIES, "--device", CPU, "-t", "1", "-p", "Once upon a time", "-n", "300", "-c", "64",
        "--temp", "0", "--verbose"]


def generated(err):
    m = re.search(r"generation: .* / (\d+) tokens", err)
    return int(m.group(1)) if m else -1


rc, out, err = run(BASE)
c.check(rc == 0 and "context full" in err and 0 < generated(err) < 300,
        f"without --context-shift: rc {rc}, {generated(err)} tokens: {err[-300:]!r}")

for keep in ("0", "4", "-1"):
    rc, out, err = run(BASE + ["--context-shift", "--keep", keep])
    shifts = err.count("[context shift:")
    c.check(rc == 0 and not crashed(rc, err) and generated(err) == 300,
            f"--keep {keep}: rc {rc}, {generated(err)} tokens: {err[-300:]!r}")
    c.check(shifts >= 3, f"--keep {keep}: {shifts} shifts")
    words = re.findall(r"\w+", out)
    tail = words[len(words) // 4:]  # the first shift comes after ~60 of 300 tokens
    ratio = len(set(tail)) / max(1, len(tail))
    longest = max((len(list(g)) for g in __import__("itertools").groupby(tail)), default=0)
    c.check(ratio >= 0.3 and longest <= 3, f"--keep {keep}: distinct {ratio:.2f}, longest run {longest}: {out!r}")
    print(f"--keep {keep}: {shifts} shifts, {len(tail)} words after the first, distinct {ratio:.2f}, "
          f"longest repeat {longest}")

# tessera chat: the reply goes on through shifts of the conversation's cache
# (the cached token list follows the cache, so the reply stays one turn).
CHAT = ["chat", "-m", STORIES, "--device", CPU, "-t", "1", "-p", "Once upon a time", "-n", "300", "-c", "64",
        "--temp", "0", "--verbose"]
rc, out, err = run(CHAT)
c.check(rc == 0 and "context full" in err, f"chat without --context-shift: rc {rc}: {err[-300:]!r}")
rc, out, err = run(CHAT + ["--context-shift"])
shifts = err.count("[context shift:")
c.check(rc == 0 and not crashed(rc, err) and "[300 tokens in" in err and shifts >= 3,
        f"chat --context-shift: rc {rc}, {shifts} shifts: {err[-300:]!r}")

# A recurrent hybrid (tests/data's synth-lfm2) cannot shift: --context-shift
# is turned off with a warning and a full context stops the run, in run and
# in chat, as without the flag.
lfm2 = test_data("synth-lfm2-f32.gguf")
if os.path.exists(lfm2):
    for cmd in ("run", "chat"):
        rc, out, err = run([cmd, "-m", lfm2, "-t", "1", "-p", "Once upon a time", "-n", "100", "-c", "64",
                            "--temp", "0", "--context-shift"])
        c.check(rc == 0 and not crashed(rc, err) and "--context-shift is off" in err and "context full" in err,
                f"{cmd} on lfm2 with --context-shift: rc {rc}: {err[-300:]!r}")
    # Self-Extend regroups positions the state cannot: refused before any work.
    rc, out, err = run(["run", "-m", lfm2, "-t", "1", "-p", "Once upon a time", "-n", "8", "-c", "64",
                        "--temp", "0", "--grp-attn-n", "2", "--grp-attn-w", "16"])
    c.check(rc == 1 and not crashed(rc, err) and "--grp-attn-n" in err and "recurrent state" in err and not out,
            f"run on lfm2 with --grp-attn-n 2: rc {rc}: {err[-300:]!r}")
else:
    print(f"run_context_shift: {lfm2} is not built: the hybrid case is skipped")

rc, out, err = run(BASE + ["--context-shift", "--keep", "x"])
c.check(rc != 0 and "--keep" in err, f"--keep x: rc {rc}: {err!r}")
c.finish()
