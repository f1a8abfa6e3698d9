#!/usr/bin/env python3
"""tessera run / chat with --grammar, --grammar-file, --json-schema and
--json-schema-file on stories260K: outputs follow the grammar (JSON ones
validate with python3-jsonschema) at temperature 0 and above, and every bad
grammar, schema or flag combination is one error line naming the flag and a
non-zero exit."""
import json
import os
import re
import subprocess
import sys
import tempfile

try:
    import jsonschema
except ImportError:
    print("cli_grammar: python3-jsonschema is missing (scripts/setup.sh installs it)")
    sys.exit(1)

BIN = os.environ.get("TESSERA_BIN", "")
MODEL = os.path.join(os.environ.get("TESSERA_SHARED", ""), "models", "stories260K.gguf")
SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}, "size": {"enum": ["big", "small"]},
                                           "n": {"type": "integer"}},
          "required": ["ok", "size"], "additionalProperties": False}

failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL " + what)
    return cond


def tessera(*args):
    # under qemu TESSERA_BIN is cross/exe-wrapper.sh, which starts the emulator itself
    cmd = [BIN] + list(args)
    p = subprocess.run(cmd, capture_output=True, timeout=300)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def main():
    if not BIN or not os.path.exists(MODEL):
        print("SKIP: TESSERA_BIN or %s missing" % MODEL)
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        gfile = os.path.join(tmp, "g.gbnf")
        with open(gfile, "w") as f:
            f.write('# a sentence of 3 to 6 lower-case words\nroot ::= word{3,6} "."\nword ::= " " [a-z]+\n')
        sfile = os.path.join(tmp, "s.json")
        with open(sfile, "w") as f:
            json.dump(SCHEMA, f)
        words = re.compile(r"^( [a-z]+){3,6}\.$")
        for temp, seed in (("0", "1"), ("0.9", "5"), ("1.5", "8")):
            base = ["-m", MODEL, "--no-echo", "-n", "120", "--temp", temp, "--seed", seed]
            rc, out, err = tessera("run", *base, "-p", "Once upon a time", "--grammar-file", gfile)
            check(rc == 0 and words.match(out.rstrip("\n")), "run --grammar-file temp %s: rc %d %r %s" %
                  (temp, rc, out, err[-300:]))
            rc, out, err = tessera("run", *base, "-p", "The dog", "--grammar", 'root ::= ("yes" | "no") "!"')
            check(rc == 0 and out.rstrip("\n") in ("yes!", "no!"), "run --grammar temp %s: %r" % (temp, out))
            for flag, value in (("--json-schema", json.dumps(SCHEMA)), ("--json-schema-file", sfile),
                                ("-j", json.dumps(SCHEMA)), ("-jf", sfile)):  # llama.cpp's short forms
                rc, out, err = tessera("run", *base, "-p", "Lily", flag, value)
                try:
                    jsonschema.validate(json.loads(out), SCHEMA)
                    ok = rc == 0
                except ValueError as e:
                    ok = False
                    err += " (%s)" % e
                except jsonschema.ValidationError as e:
                    ok = False
                    err += " (%s)" % e.message
                check(ok, "run %s temp %s: rc %d %r %s" % (flag, temp, rc, out, err[-300:]))
            rc, out, err = tessera("chat", "-m", MODEL, "-p", "hi", "-n", "120", "--temp", temp, "--seed", seed,
                                   "--json-schema-file", sfile)
            try:
                jsonschema.validate(json.loads(out), SCHEMA)
                ok = rc == 0
            except (ValueError, jsonschema.ValidationError) as e:
                ok = False
                err += " (%s)" % e
            check(ok, "chat --json-schema-file temp %s: rc %d %r %s" % (temp, rc, out, err[-300:]))

        bad = [
            (["--grammar", "root ::= foo"], "--grammar: grammar: line 1, column 10: undefined rule 'foo'"),
            (["--grammar", 'root ::= root "a"'], "left-recursive"),
            (["--grammar", 'root ::= "a'], "line 1, column 10: unterminated string literal"),
            (["--grammar-file", os.path.join(tmp, "nope.gbnf")], "cannot open grammar file"),
            (["--json-schema", '{"type": "string", "pattern": "a"}'],
             "--json-schema: json schema: #: the keyword 'pattern' is not supported"),
            (["--json-schema", "{"], "--json-schema: json schema: not valid JSON"),
            (["--json-schema-file", gfile], "--json-schema-file '%s': json schema: not valid JSON" % gfile),
            (["--grammar", 'root ::= "a"', "--json-schema", "{}"], "give only one of --grammar and --json-schema"),
        ]
        for extra, want in bad:
            for cmd in ("run", "chat"):
                rc, out, err = tessera(cmd, "-m", MODEL, "-p", "x", "-n", "4", *extra)
                lines = [l for l in err.splitlines() if l.startswith("tessera %s:" % cmd) and "note:" not in l]
                check(rc != 0 and len(lines) == 1 and want in lines[0],
                      "%s %s: rc %d, want one error with %r, got %r" % (cmd, extra, rc, want, err[-400:]))
    print("%d failure(s)" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
