"""What run, chat and bench report about themselves (issue 18, items 5-6):
token counts are the tokens (a 1-token prompt is 1, -n 32 is 32), the end
of text is marked, -c above the training context warns, -ngl that cannot
place layers says what to do (once), --explain comes before the text, and
bench errors once with nothing on stdout and names the devices it used."""
import csv
import io
import re
import subprocess

from cli_common import BIN, STORIES, Checker, best_cpu_device, crashed, require, run

require(STORIES)
c = Checker("run_report")
CPU = best_cpu_device()
R = ["run", "-m", STORIES, "--device", CPU, "-t", "1"]


def counts(err):
    p = re.search(r"prompt: .* / (\d+) tokens", err)
    g = re.search(r"generation: .* / (\d+) tokens", err)
    return (int(p.group(1)) if p else None, int(g.group(1)) if g else None)


# An empty prompt is BOS alone: 1 token, not 0.
rc, out, err = run(R + ["-p", "", "-n", "4", "--temp", "0"])
c.check(rc == 0 and counts(err)[0] == 1, f"1-token prompt reported {counts(err)}: {err[-300:]!r}")
# -n 32 generates and reports 32 (EOS banned so it cannot stop early).
rc, out, err = run(R + ["-p", "Once upon", "-n", "32", "--logit-bias", "2-inf"])
c.check(rc == 0 and counts(err) == (3, 32), f"-n 32 reported {counts(err)}: {err[-300:]!r}")
# EOS: the text ends with a marker on stderr; stdout holds only the text.
rc, out, err = run(R + ["-p", "Once", "-n", "8", "--logit-bias", "2+100"])
c.check(rc == 0 and "[end of text]" in err and "[end of text]" not in out and counts(err)[1] == 0,
        f"EOS: rc {rc}, out {out!r}, err {err[-300:]!r}")
rc, out, err = run(R + ["-p", "Once", "-n", "4", "--logit-bias", "2-inf"])
c.check(rc == 0 and "[end of text]" not in err, "a reply cut by -n is marked as the end of text")

# -c above the training context (128) warns, naming both numbers.
rc, out, err = run(R + ["-p", "Once", "-n", "2", "-c", "256"])
c.check(rc == 0 and re.search(r"warning: -c 256 exceeds the model's training context of 128", err),
        f"-c 256: rc {rc}, {err!r}")
rc, out, err = run(R + ["-p", "Once", "-n", "2", "-c", "128"])
c.check("warning" not in err, f"-c 128 warned: {err!r}")

# -ngl without a usable GPU: one note saying what to do, no second warning.
rc, out, err = run(["run", "-m", STORIES, "-p", "Once", "-n", "2", "-t", "1", "-ngl", "99"])
notes = [l for l in err.splitlines() if "-ngl 99" in l]
c.check(rc == 0 and not crashed(rc, err), f"-ngl 99: rc {rc}: {err[-300:]!r}")
rc_d, devs, _ = run(["devices"])
has_gpu = re.search(r"^\s*\d+\s+\S+\s+GPU\s", devs, re.M) is not None
cpu_impl_only = has_gpu and all("CPU implementation" in l for l in devs.splitlines() if re.match(r"^\s*\d+\s+\S+\s+GPU\s", l))
if cpu_impl_only:
    c.check(len(notes) == 1 and "--device" in notes[0] and "CPU implementation" in notes[0],
            f"-ngl 99 with only a CPU-implemented GPU: {notes!r}")
elif not has_gpu:
    c.check(len(notes) == 1 and "no GPU" in notes[0], f"-ngl 99 with no GPU: {notes!r}")

# --explain: the placement of both graphs is written before any text, so a
# terminal showing stdout and stderr together is not interleaved.
p = subprocess.run([BIN] + R + ["-p", "Once upon", "-n", "6", "--explain"], stdout=subprocess.PIPE,
                   stderr=subprocess.STDOUT, timeout=120)
both = p.stdout.decode("utf-8", "replace")
last_place = both.rfind("compute buffers:")
text_at = both.find("Once upon")
c.check(p.returncode == 0 and "generation graph" in both and 0 <= last_place < text_at,
        f"--explain interleaved with the text: {both[:600]!r}")

# bench: a bad model is one error line and no table header on stdout.
rc, out, err = run(["bench", "-m", "/etc/passwd", "-p", "8", "-n", "0", "-r", "1"])
c.check(rc != 0 and out == "" and len(err.strip().splitlines()) == 1 and err.count("/etc/passwd") == 1,
        f"bench bad model: rc {rc}, out {out!r}, err {err!r}")
# bench names the devices it used, not "default".
rc, out, err = run(["bench", "-m", STORIES, "-p", "8", "-n", "0", "-r", "1", "-t", "1", "-o", "csv"])
rows = list(csv.DictReader(io.StringIO(out)))
c.check(rc == 0 and len(rows) == 1 and rows[0]["devices"] not in ("", "default"),
        f"bench devices column: rc {rc}, {out!r}")
c.finish()
