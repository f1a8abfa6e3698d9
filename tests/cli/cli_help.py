"""Every subcommand of the binary answers --help with exit 0 and a usage
text on stdout; the top-level --help lists the subcommands."""
import re

from cli_common import Checker, require, run, crashed

require()
c = Checker("cli_help")

rc, out, err = run(["--help"])
c.check(rc == 0, f"tessera --help exited {rc}")
commands = re.findall(r"^  (\w+)\s", out[out.find("commands:"):], re.M)
c.check(len(commands) >= 8, f"tessera --help lists only {commands}")

for cmd in commands:
    for flag in ("--help", "-h"):
        rc, out, err = run([cmd, flag])
        c.check(not crashed(rc, err), f"tessera {cmd} {flag} crashed (rc {rc}): {err[-300:]}")
        c.check(rc == 0, f"tessera {cmd} {flag} exited {rc}: {err.strip()[:200]}")
        c.check("usage" in out.lower(), f"tessera {cmd} {flag} printed no usage on stdout")

rc, out, err = run(["no-such-command"])
c.check(rc != 0 and "no-such-command" in err, f"unknown command: rc {rc}, stderr {err!r}")
c.finish()
