#!/usr/bin/env python3
"""Commit messages the way the kernel writes them: a subject of at most 72
characters, a blank line, then a body that says why (docs/style.md).

  check-commits.py --range BASE..HEAD   every commit in the range (the suite
                                        runs this over the commits since the
                                        rule came in)
  check-commits.py --message FILE       one message (scripts/hooks/commit-msg;
                                        install: git config core.hooksPath
                                        scripts/hooks)

Merge commits need only the subject rule. Lines starting with '#' (git's
template) are not part of a message. Exit 0 when all pass, 1 naming each
commit and rule at fault, 77 (skipped) outside a git checkout or where the
range's base is not in the history (a shallow clone)."""
import argparse
import subprocess
import sys

SUBJECT_MAX = 72


def problems(message, merge=False):
    lines = [ln for ln in message.splitlines() if not ln.startswith("#")]
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines or not lines[0].strip():
        return ["no subject"]
    out = []
    if len(lines[0]) > SUBJECT_MAX:
        out.append(f"subject is {len(lines[0])} characters (at most {SUBJECT_MAX})")
    if merge:
        return out
    if len(lines) > 1 and lines[1].strip():
        out.append("no blank line after the subject")
    if not any(ln.strip() for ln in lines[2:]):
        out.append("no body: say why in it")
    return out


def git(*args):
    return subprocess.run(["git", *args], capture_output=True, text=True)


def check_range(rng):
    if git("rev-parse", "--git-dir").returncode != 0:
        print("skip: not a git checkout")
        return 77
    base = rng.split("..")[0]
    if git("cat-file", "-e", base + "^{commit}").returncode != 0:
        print(f"skip: {base} is not in this history (a shallow clone?)")
        return 77
    log = git("log", "--format=%H %P", rng)
    bad = 0
    n = 0
    for line in log.stdout.split("\n"):
        if not line.strip():
            continue
        sha, *parents = line.split()
        n += 1
        msg = git("log", "-1", "--format=%B", sha).stdout
        for p in problems(msg, merge=len(parents) > 1):
            print(f"{sha[:12]} {msg.splitlines()[0][:60]!r}: {p}")
            bad += 1
    print(f"{n} commits in {rng}, {bad} problems")
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--range", help="BASE..HEAD")
    g.add_argument("--message", help="a commit message file")
    a = ap.parse_args()
    if a.range:
        return check_range(a.range)
    with open(a.message, encoding="utf-8", errors="replace") as f:
        errs = problems(f.read())
    for e in errs:
        print(f"commit message: {e}", file=sys.stderr)
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
