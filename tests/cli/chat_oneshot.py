"""One-shot chat with a real chat model (SmolLM2-135M-Instruct, ChatML):
`tessera chat -m M -p QUESTION` answers through the template and exits;
`tessera run -cnv -st` / `--system` do the same as llama.cpp; plain `run`
continues the text instead. Greedy, so the answers are reproducible."""
import os
import re
import tempfile

from cli_common import Checker, best_cpu_device, crashed, real_model, require, run

require()
MODEL = real_model()
c = Checker("chat_oneshot")
DEV = ["--device", best_cpu_device(), "-t", "1", "-c", "512", "--temp", "0"]
Q = "What is the capital of France?"
# SmolLM2's template writes its own default system prompt when the
# conversation has none (as transformers renders it); with that one the 135M
# model's greedy answer is not "Paris": the answering turns give --system.
SYS = ["--system", "Answer in one word."]

rc, out, err = run(["chat", "-m", MODEL, "-p", Q, "-n", "32"] + SYS + DEV, timeout=300)
c.check(rc == 0 and not crashed(rc, err), f"chat -p: rc {rc}: {err[-300:]!r}")
c.check("Paris" in out, f"chat -p did not answer the question: {out!r}")
c.check("<|im_start|>" not in out and "<|im_end|>" not in out, f"template markup in the answer: {out!r}")
c.check(out.endswith("\n") and out.count("\n") <= 3, f"one answer, then exit: {out!r}")
answer = out

# run -cnv -st: the same turn as chat -p (same template, same greedy tokens).
rc, out, err = run(["run", "-m", MODEL, "-cnv", "-st", "-p", Q, "-n", "32"] + SYS + DEV, timeout=300)
c.check(rc == 0 and out == answer, f"run -cnv -st differs from chat -p: rc {rc}, {out!r} vs {answer!r}")
# -st alone asks for conversation mode; --system too (and applies it).
rc, out, err = run(["run", "-m", MODEL, "-st", "-p", Q, "-n", "32"] + SYS + DEV, timeout=300)
c.check(rc == 0 and out == answer, f"run -st: rc {rc}, {out!r}")
rc, out, err = run(["run", "-m", MODEL, "-st", "-p", Q, "-n", "32", "--verbose"] + DEV, timeout=300)
plain = re.findall(r"\[prompt: (\d+) tokens", err)
rc, out, err = run(["run", "-m", MODEL, "-st", "-p", Q, "-n", "32", "--verbose", "--system",
                    "Answer in one word."] + DEV, timeout=300)
with_sys = re.findall(r"\[prompt: (\d+) tokens", err)
# --system replaces the template's default system prompt (which is longer)
c.check(rc == 0 and "Paris" in out and plain and with_sys and int(with_sys[0]) + 5 <= int(plain[0]),
        f"--system did not replace the default system prompt: {plain} vs {with_sys} tokens, {out!r}")
# run -cnv with the question on stdin (no -p): one turn per line, like chat.
rc, out, err = run(["run", "-m", MODEL, "-cnv", "-n", "32"] + SYS + DEV, stdin_text=Q + "\n", timeout=300)
c.check(rc == 0 and out == answer, f"run -cnv from stdin: rc {rc}, {out!r}")

# Plain run continues the text: no answer through the template.
rc, out, err = run(["run", "-m", MODEL, "-p", Q, "-n", "8", "--no-echo"] + DEV, timeout=300)
c.check(rc == 0 and out != answer, f"plain run answered like a chat: {out!r}")

# -n cuts the one-shot reply and says so; -p escapes reach the model.
rc, out, err = run(["chat", "-m", MODEL, "-p", Q, "-n", "3"] + DEV, timeout=300)
c.check(rc == 0 and "[cut: the reply reached -n 3 tokens]" in err, f"-n 3: no cut marker: {err!r}")
c.check(len(out.strip()) > 0, "-n 3 printed nothing")

# -f FILE is the question too; conflicting and bad flags are clean errors.
tmp = tempfile.mkdtemp(prefix="tessera-oneshot-")
qfile = os.path.join(tmp, "q.txt")
with open(qfile, "w") as f:
    f.write(Q)
rc, out, err = run(["chat", "-m", MODEL, "-f", qfile, "-n", "32"] + SYS + DEV, timeout=300)
c.check(rc == 0 and out == answer, f"chat -f: rc {rc}, {out!r}")
for args, word in [(["run", "-m", MODEL, "-cnv", "-no-cnv"], "-no-cnv"),
                   (["run", "-m", MODEL, "-no-cnv", "--system", "x", "-p", "y"], "--system"),
                   (["run", "-m", MODEL, "-st"], "-st"),
                   (["chat", "-m", MODEL, "-p", "a", "-f", qfile], "-f")]:
    rc, out, err = run(args)
    c.check(rc == 2 and word in err and len(err.strip().splitlines()) == 1, f"{args}: rc {rc}, {err!r}")
c.finish()
