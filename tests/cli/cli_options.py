"""The one option table (cli/cli_opts.c) seen from outside: every
subcommand's --help is generated (lists --help and --version), the unknown
option error is spelled the same everywhere, --flag=value works, bad values
name the flag and the value, the shared flags mean the same in run and
chat, and -p escapes are processed as llama.cpp does."""
import os
import re

from cli_common import STORIES, Checker, require, run, crashed

require(STORIES)
c = Checker("cli_options")

rc, out, _ = run(["--help"])
commands = re.findall(r"^  (\w+)\s", out[out.find("commands:"):], re.M)
c.check(len(commands) >= 10, f"tessera --help lists only {commands}")
# a build without libmicrohttpd/libcjson (the aarch64 cross build) has serve
# only as a stub that says so: its options are not there to check
SERVE = os.environ.get("TESSERA_SERVE_BUILT") != "0"
if not SERVE:
    rc, out, err = run(["serve", "--help"])
    c.check(rc == 0 and "has no HTTP server" in out, f"serve --help without the server built: rc {rc}, {out!r}")
    rc, out, err = run(["serve", "-m", STORIES])
    c.check(rc == 2 and "not built in" in err, f"serve without the server built: rc {rc}, {err!r}")
    commands = [cmd for cmd in commands if cmd != "serve"]

for cmd in commands:
    rc, out, err = run([cmd, "--help"])
    c.check(rc == 0 and out.startswith(f"usage: tessera {cmd}"), f"{cmd} --help: rc {rc}, {out[:80]!r}")
    c.check("--version" in out and "-h, --help" in out, f"{cmd} --help does not list --help and --version")
    rc, out, err = run([cmd, "--version"])
    c.check(rc == 0 and out.startswith("tessera "), f"{cmd} --version: rc {rc}, {out!r}")
    # One spelling of the unknown-option error, on one line, exit 2.
    rc, out, err = run([cmd, "--no-such-flag=3"])
    want = f"tessera {cmd}: unknown option '--no-such-flag' (see 'tessera {cmd} --help')"
    c.check(rc == 2 and err.strip() == want and out == "", f"{cmd} unknown option: rc {rc}, {err!r}")

# The shared flags are listed by every command that runs a model.
for cmd in ["run", "chat"]:
    rc, out, _ = run([cmd, "--help"])
    for flag in ["-m, --model", "-n, --n-predict", "-c, --ctx-size", "-b, --batch-size", "-t, --threads",
                 "-ngl, --n-gpu-layers", "-dev, --device", "--temp", "--top-k", "--top-p", "--min-p", "--typical",
                 "--repeat-penalty", "--repeat-last-n", "--presence-penalty", "--frequency-penalty",
                 "--logit-bias", "--seed", "--chat-template", "--system", "--verbose", "--plugin-dir"]:
        if cmd == "run" and flag in ("--system", "--chat-template"):
            continue
        c.check(flag in out, f"{cmd} --help lacks {flag}")
    # --plugin-dir described once, the same way everywhere.
    c.check(out.count("--plugin-dir") == 1, f"{cmd} --help lists --plugin-dir {out.count('--plugin-dir')} times")
for cmd in ["perplexity", "bench", "devices"] + (["serve"] if SERVE else []):
    rc, out, _ = run([cmd, "--help"])
    c.check("also look for backend plugins in DIR (repeatable)" in out, f"{cmd}: --plugin-dir text differs")

# Defaults in --help are read from the values: run generates 128 by default.
rc, out, _ = run(["run", "--help"])
# (the option's text may wrap over several indented lines)
c.check(re.search(r"--n-predict N.*(\n {20,}.*)*\(default: 128\)", out) is not None, "run --help: -n default not 128")

# Bad values: one line naming the flag and the value, exit 2, for every type.
M = ["-m", STORIES]
bad = [
    (["run"] + M + ["-p", "x", "-n", "ten"], "-n", "ten"),
    (["run"] + M + ["-p", "x", "--ctx-size=abc"], "--ctx-size", "abc"),
    (["run"] + M + ["-p", "x", "--temp", "nan"], "--temp", "nan"),
    (["run"] + M + ["-p", "x", "--top-p=1.5"], "--top-p", "1.5"),
    (["run"] + M + ["-p", "x", "--seed", "-5"], "--seed", "-5"),
    (["run"] + M + ["-p", "x", "--kv-type", "q8"], "--kv-type", "q8"),
    (["run"] + M + ["-p", "x", "--logit-bias", "3*2"], "--logit-bias", "3*2"),
    (["chat"] + M + ["--repeat-last-n", "-2"], "--repeat-last-n", "-2"),
    (["bench"] + M + ["-t", "0,2"], "-t", "0,2"),
    (["perplexity"] + M + ["-f", "x", "-b", "0"], "-b", "0"),
    (["tokenize"] + M + ["-p"], "-p", "needs a value"),
    (["run"] + M + ["-p", "x", "--verbose=yes"], "--verbose", "takes no value"),
    (["quantize", "a", "b", "Q4_0", "-t", "many"], "-t", "many"),
    (["inspect", "-x"], "-x", "unknown option"),
]
if SERVE:
    bad.append((["serve"] + M + ["--port", "70000"], "--port", "70000"))
for args, flag, value in bad:
    rc, out, err = run(args)
    lines = err.strip().splitlines()
    c.check(not crashed(rc, err), f"{args}: crashed")
    c.check(rc == 2 and len(lines) == 1 and flag in lines[0] and value in lines[0],
            f"{args}: rc {rc}, stderr {err!r}")

# Values llama.cpp accepts: --seed -1 (random), --temp -1 (greedy) in run as
# in chat, --flag=value, and the sampling flags chat had and run lacked.
GEN = ["run"] + M + ["--device", "ref", "-n", "4", "--no-echo"]
rc, out, err = run(GEN + ["-p", "Once", "--seed=-1", "--temp=-1", "--ctx-size=64", "--typical=0.9",
                          "--presence-penalty", "0.5", "--frequency-penalty=0.5", "--logit-bias=13+1",
                          "--repeat-last-n=-1"])
c.check(rc == 0 and out.strip() != "", f"run with llama.cpp-style values: rc {rc}, {err[-300:]!r}")
# --temp <= 0 is greedy: the same text twice whatever the seed.
rc1, a, _ = run(GEN + ["-p", "Once upon", "--temp", "-1", "--seed", "1"])
rc2, b, _ = run(GEN + ["-p", "Once upon", "--temp=0", "--seed=2"])
c.check(rc1 == 0 and rc2 == 0 and a == b and a.strip(), f"greedy differs: {a!r} / {b!r}")
# --ctx-size=N takes effect: a prompt longer than the context is refused.
rc, out, err = run(GEN + ["-p", "one two three four five six seven eight nine ten", "-c=8"])
c.check(rc == 2 and "-c" in err, f"-c=8 is not a flag spelling: rc {rc}")
rc, out, err = run(GEN + ["-p", "one two three four five six seven eight nine ten", "--ctx-size=8"])
c.check(rc == 1 and "context only 8" in err, f"--ctx-size=8 not applied: rc {rc}, {err!r}")

# -dev is llama.cpp's short spelling of --device, in every command that takes a device list.
rc, out, err = run(["run"] + M + ["-dev", "ref", "-n", "2", "--no-echo", "-p", "Once"])
c.check(rc == 0 and out.strip() != "", f"run -dev ref: rc {rc}, {err[-300:]!r}")
rc, out, err = run(["devices", "-dev", "ref"])
c.check(rc == 0 and "ref" in out, f"devices -dev ref: rc {rc}, {err[-300:]!r}")
rc, out, err = run(["bench"] + M + ["-dev", "ref", "-p", "0", "-n", "2", "-r", "1"])
c.check(rc == 0 and "ref" in out, f"bench -dev ref: rc {rc}, {err[-300:]!r}")
rc, out, err = run(["run"] + M + ["-dev", "no-such-device", "-n", "2", "-p", "Once"])
c.check(rc != 0 and not crashed(rc, err) and "no-such-device" in err, f"run -dev unknown: rc {rc}, {err!r}")

# Escapes in -p, as llama.cpp: \n \t \\ \" \' \xNN processed; unknown ones kept.
ECHO = ["run"] + M + ["--device", "ref", "-n", "0"]
rc, out, err = run(ECHO + ["-p", r"a\nb\tc\\d\"e\'f\x41g\qh"])
c.check(rc == 0 and out == "a\nb\tc\\d\"e'fAg\\qh\n", f"escapes: rc {rc}, {out!r} {err[-200:]!r}")
rc, out, err = run(ECHO + ["-p", r"a\nb", "--no-escape"])
c.check(rc == 0 and out == "a\\nb\n", f"--no-escape: rc {rc}, {out!r}")

c.finish()
