"""tessera chat driven through a pipe with stories260K (no chat template:
ChatML fallback with a note). Two turns, the second reusing the cached
prefix; same seed, same output; /exit and EOF end the chat."""
import re

from cli_common import STORIES, Checker, require, run, crashed

require(STORIES)
c = Checker("chat_pipe")

BASE = ["chat", "-m", STORIES, "-n", "16", "--seed", "42", "--verbose"]
TWO_TURNS = "Hello\nTell me a story about a dog.\n"


def turns(err):
    """The [prompt: N tokens, R reused from the cache, D decoded] lines."""
    return [tuple(int(x) for x in m)
            for m in re.findall(r"\[prompt: (\d+) tokens, (\d+) reused from the cache, (\d+) decoded\]", err)]


rc, out, err = run(BASE, TWO_TURNS)
c.check(not crashed(rc, err), f"crashed (rc {rc}): {err[-500:]}")
c.check(rc == 0, f"exit status {rc}: {err.strip()[-300:]}")
c.check(out.strip() != "", "printed no reply at all")
c.check("ChatML" in err, f"no note about the ChatML fallback on stderr: {err[:300]!r}")
t = turns(err)
c.check(len(t) == 2, f"expected 2 turns, saw {len(t)}: {err[-500:]!r}")
if len(t) == 2 and "[dropped" not in err:
    first, second = t
    c.check(first[1] == 0 and first[2] == first[0], f"first turn {first}: nothing to reuse yet")
    # The second rendering starts with the first turn's prompt, so at least
    # that much is reused and only the rest is decoded.
    c.check(second[1] >= first[0] - 1, f"second turn {second} reused less than {first[0] - 1}")
    c.check(second[1] + second[2] == second[0], f"second turn {second} does not add up")

rc2, out2, err2 = run(BASE, TWO_TURNS)
c.check(rc2 == 0 and out2 == out, "the same seed gave a different conversation")

# Greedy replies are reproducible too, and a system message is accepted.
g = ["chat", "-m", STORIES, "-n", "12", "--temp", "0", "--system", "You tell stories."]
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
                    "--system", "Be brief."], TWO_TURNS)
c.check(rc == 0 and not crashed(rc, err), f"--chat-template llama2: rc {rc}: {err[-300:]}")

# Replies longer than the context are cut, not fatal: the oldest turns go.
long_chat = "".join(f"Message number {i} about a cat and a dog.\n" for i in range(6))
rc, out, err = run(["chat", "-m", STORIES, "--seed", "3", "-n", "-1"], long_chat)
c.check(rc == 0 and not crashed(rc, err), f"long chat: rc {rc}: {err[-300:]}")
c.finish()
