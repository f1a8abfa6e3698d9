"""tessera chat driven through a pipe with stories260K (no chat template:
ChatML fallback with a note). Two turns, the second reusing the cached
prefix; same seed, same output; /exit and EOF end the chat."""
import re
import signal
import subprocess
import time

from cli_common import BIN, STORIES, Checker, require, run, crashed

require(STORIES)
c = Checker("chat_pipe")

# These run on the ref backend: they test the chat, not the backends, and ref
# is always there and quick on this model (a software GPU such as llvmpipe,
# which the default device order may pick, is not). -c 256: room for both
# turns, so the second reuses the first from the cache.
BASE = ["chat", "-m", STORIES, "-c", "256", "-n", "16", "--seed", "42", "--verbose",
        "--device", "ref"]
TWO_TURNS = "Hello\nTell me a story about a dog.\n"


def turns(err):
    """The [prompt: N tokens, R reused from the cache, D decoded] lines."""
    pattern = r"\[prompt: (\d+) tokens, (\d+) reused from the cache, (\d+) decoded\]"
    return [tuple(int(x) for x in m) for m in re.findall(pattern, err)]


# One short turn on the default devices.
rc, out, err = run(["chat", "-m", STORIES, "-n", "4", "--seed", "1"], "Hello\n")
c.check(rc == 0 and not crashed(rc, err), f"default devices: rc {rc}: {err[-300:]}")

rc, out, err = run(BASE, TWO_TURNS)
c.check(not crashed(rc, err), f"crashed (rc {rc}): {err[-500:]}")
c.check(rc == 0, f"exit status {rc}: {err.strip()[-300:]}")
c.check(out.strip() != "", "printed no reply at all")
c.check("ChatML" in err, f"no note about the ChatML fallback on stderr: {err[:300]!r}")
t = turns(err)
c.check(len(t) == 2, f"expected 2 turns, saw {len(t)}: {err[-500:]!r}")
if len(t) == 2:
    first, second = t
    c.check(first[1] == 0 and first[2] == first[0], f"first turn {first}: nothing to reuse yet")
    # ChatML renders the first turn and the reply exactly as generated, so
    # the second turn reuses (nearly) all of it and decodes only the rest.
    c.check(second[1] >= first[0] + 8, f"second turn {second} reused less than {first[0] + 8}")
    c.check(second[1] + second[2] == second[0], f"second turn {second} does not add up")

rc2, out2, err2 = run(BASE, TWO_TURNS)
c.check(rc2 == 0 and out2 == out, "the same seed gave a different conversation")

# Greedy replies are reproducible too, and a system message is accepted.
g = ["chat", "-m", STORIES, "-n", "12", "--temp", "0", "--system", "You tell stories.",
     "--device", "ref"]
rc, out_a, err = run(g, TWO_TURNS)
rc_b, out_b, _ = run(g, TWO_TURNS)
c.check(rc == 0 and rc_b == 0 and out_a == out_b and out_a.strip() != "",
        f"greedy chat: rc {rc}/{rc_b}, outputs {out_a!r} / {out_b!r}")

# /exit ends the chat: the line after it is never answered.
rc, out, err = run(BASE, "Hi\n/exit\nAre you there?\n")
c.check(rc == 0 and len(turns(err)) == 1, f"/exit: rc {rc}, {len(turns(err))} turns")

# A last line without a newline is still a message; empty lines are not.
rc, out, err = run(BASE, "\n\nOnce upon a time")
c.check(rc == 0 and len(turns(err)) == 1, f"unterminated line: rc {rc}, {len(turns(err))} turns")

# No input at all: a clean exit with nothing printed on stdout.
rc, out, err = run(BASE, "")
c.check(rc == 0 and out == "", f"empty input: rc {rc}, stdout {out!r}")

# Another template family, chosen by name, through the same model.
rc, out, err = run(["chat", "-m", STORIES, "-n", "8", "--seed", "1", "--chat-template", "llama2",
                    "--device", "ref",
                    "--system", "Be brief."], TWO_TURNS)
c.check(rc == 0 and not crashed(rc, err), f"--chat-template llama2: rc {rc}: {err[-300:]}")

# Replies longer than the context are cut, not fatal, and the oldest turns
# make room for the next message. EOS (id 2) is banned so every reply runs
# into the 64-token context; zephyr's short markup leaves room for a turn.
rc, out, err = run(["chat", "-m", STORIES, "--seed", "3", "-n", "-1", "-c", "64", "--verbose",
                    "--device", "ref",
                    "--chat-template", "zephyr", "--logit-bias", "2-inf"],
                   "Cat number 1 sat.\nCat number 2 ran.\nCat number 3 hid.\n")
c.check(rc == 0 and not crashed(rc, err), f"full context: rc {rc}: {err[-300:]}")
c.check(len(turns(err)) == 3, f"full context: {len(turns(err))} turns answered, expected 3")
c.check(err.count("[context full: 64 tokens") == 3,
        f"full context: replies not cut: {err[-400:]!r}")
c.check(re.search(r"\[dropped the \d+ oldest turns? to fit the context", err) is not None, f"full context: no turn dropped: {err[-400:]!r}")

# A message that cannot fit even alone is refused with a note; the chat goes on.
rc, out, err = run(["chat", "-m", STORIES, "-c", "32", "-n", "4", "--verbose", "--device", "ref"],
                   "word " * 100 + "\nHi\n")
c.check(rc == 0 and "does not fit the context of 32 tokens" in err,
        f"oversized message: rc {rc}: {err[-300:]!r}")

# Ctrl-C stops the reply, not the chat. EOS (id 2) is banned so the reply
# would otherwise run until the 4096-token context is full.
proc = subprocess.Popen([BIN, "chat", "-m", STORIES, "-c", "4096", "--logit-bias", "2-inf",
                         "--device", "ref",
                         "--seed", "5"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE)
proc.stdin.write(b"Once upon a time\n")
proc.stdin.flush()
started = time.monotonic()
first = proc.stdout.read(1)  # the reply has begun
proc.send_signal(signal.SIGINT)
try:
    proc.stdin.write(b"/exit\n")
    proc.stdin.flush()
except BrokenPipeError:
    pass
try:
    out, err = proc.communicate(timeout=60)
except subprocess.TimeoutExpired:
    proc.kill()
    out, err = proc.communicate()
elapsed = time.monotonic() - started
err = err.decode("utf-8", "replace")
c.check(first != b"", "Ctrl-C test: no reply started")
c.check(proc.returncode == 0, f"Ctrl-C during a reply: exit status {proc.returncode}: {err[-300:]}")
c.check("[interrupted]" in err, f"Ctrl-C during a reply: no [interrupted] note: {err[-300:]!r}")
c.check("context full" not in err, f"Ctrl-C did not stop the reply ({elapsed:.1f} s)")
c.finish()
