#!/usr/bin/env python3
"""Tessera's Jinja engine against Python's jinja2, byte for byte.

For every template in ../shared/templates and every conversation in
conversations.json, render with jinja2 set up as Hugging Face transformers
does (sandboxed, trim_blocks, lstrip_blocks, loopcontrols, its tojson,
raise_exception, strftime_now) and with Tessera (the jinja_render test
binary); the texts must be equal, and a template that raises in jinja2 must
fail in Tessera too. Prints the count of matching pairs.

usage: compare_jinja.py RENDERER [TEMPLATE_DIR]
Exit 0: all pairs match; 1: a mismatch; 77: jinja2 or the templates absent.
"""
import json
import os
import shlex
import subprocess
import sys
import tempfile
from datetime import datetime

HERE = os.path.dirname(os.path.abspath(__file__))

try:
    import jinja2
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    print("SKIP: python3-jinja2 is not installed (scripts/setup.sh installs it)")
    sys.exit(77)


def hf_environment():
    """The environment transformers' chat_template_utils builds."""

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                          separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def reference(env, source, variables):
    """(text, None) or (None, error message)."""
    try:
        return env.from_string(source).render(**variables), None
    except Exception as e:  # jinja2 errors and Python errors inside filters alike
        return None, f"{type(e).__name__}: {e}"


def tessera(renderer, template_path, variables, tmpdir):
    path = os.path.join(tmpdir, "vars.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(variables, f, ensure_ascii=False)
    # cross builds: the renderer is a foreign binary, run it through the emulator
    wrapper = shlex.split(os.environ.get("TESSERA_EXE_WRAPPER", ""))
    p = subprocess.run(wrapper + [renderer, template_path, path], capture_output=True, timeout=120)
    if p.returncode == 0:
        return p.stdout.decode("utf-8"), None
    if p.returncode != 1 or not p.stderr.startswith(b"template line") and b"JSON" not in p.stderr:
        # anything but a clean template error is a bug (crash, sanitizer report)
        return None, "CRASH rc=%d: %s" % (p.returncode, p.stderr.decode("utf-8", "replace")[-2000:])
    return None, p.stderr.decode("utf-8", "replace").strip()


def first_diff(a, b):
    n = min(len(a), len(b))
    i = next((k for k in range(n) if a[k] != b[k]), n)
    return i, a[max(0, i - 40):i + 40], b[max(0, i - 40):i + 40]


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    renderer = sys.argv[1]
    tdir = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        os.environ.get("TESSERA_SHARED", os.path.join(HERE, "..", "..", "..", "shared")), "templates")
    if not os.path.isdir(tdir):
        print(f"SKIP: no template directory {tdir}")
        return 77
    with open(os.path.join(HERE, "conversations.json"), encoding="utf-8") as f:
        conversations = json.load(f)
    env = hf_environment()
    templates = sorted(t for t in os.listdir(tdir) if t.endswith(".jinja"))
    total = matched = both_raise = 0
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in templates:
            path = os.path.join(tdir, name)
            with open(path, encoding="utf-8") as f:
                source = f.read()
            for conv in conversations:
                total += 1
                want, want_err = reference(env, source, conv["vars"])
                got, got_err = tessera(renderer, path, conv["vars"], tmp)
                pair = f"{name} x {conv['name']}"
                if got_err and got_err.startswith("CRASH"):
                    failures.append(f"{pair}: {got_err}")
                elif want_err is not None:
                    if got_err is not None:
                        matched += 1
                        both_raise += 1
                    else:
                        failures.append(f"{pair}: jinja2 raised ({want_err}) but Tessera rendered")
                elif got_err is not None:
                    failures.append(f"{pair}: Tessera failed ({got_err}), jinja2 rendered")
                elif got != want:
                    i, w, g = first_diff(want, got)
                    failures.append(f"{pair}: differs at char {i}\n  jinja2:  {w!r}\n  tessera: {g!r}")
                else:
                    matched += 1
        # small templates for one corner of jinja2 each
        sys.path.insert(0, HERE)
        from jinja_cases import CASES
        case_ok = 0
        for name, source, variables in CASES:
            path = os.path.join(tmp, "case.jinja")
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(source)
            want, want_err = reference(env, source, variables)
            got, got_err = tessera(renderer, path, variables, tmp)
            pair = f"case {name}"
            if got_err and got_err.startswith("CRASH"):
                failures.append(f"{pair}: {got_err}")
            elif want_err is not None:
                if got_err is not None:
                    case_ok += 1
                else:
                    failures.append(f"{pair}: jinja2 raised ({want_err}) but Tessera rendered {got!r}")
            elif got_err is not None:
                failures.append(f"{pair}: Tessera failed ({got_err}), jinja2 rendered {want!r}")
            elif got != want:
                failures.append(f"{pair}:\n  jinja2:  {want!r}\n  tessera: {got!r}")
            else:
                case_ok += 1
    for f in failures:
        print("MISMATCH", f)
    print(f"{case_ok}/{len(CASES)} feature cases match")
    print(f"{matched}/{total} template x conversation pairs match "
          f"({len(templates)} templates x {len(conversations)} conversations; "
          f"{both_raise} of them raise in both)")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
