#!/usr/bin/env python3
"""End to end: SmolLM2-135M-Instruct generates under JSON Schemas (and the
json_object grammar) at temperature 0 and above; every output must parse as
JSON and validate against its schema with python3-jsonschema (formats
checked too), and generation must have ended because the grammar was
complete, not because tokens ran out.

The model comes from TESSERA_MODEL_CACHE or ~/.cache/tessera/models; when it
is missing the test FAILS and says to run scripts/fetch-models.sh.
"""
import json
import os
import subprocess
import sys
import tempfile
import uuid
import datetime

try:
    import jsonschema
except ImportError:
    print("grammar_smollm2: python3-jsonschema is missing (scripts/setup.sh installs it)", file=sys.stderr)
    sys.exit(1)

MODEL_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"

SCHEMAS = [
    ("person", "Describe a person named Alice who is 30 years old, as JSON.", {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 20},
            "age": {"type": "integer"},
            "email": {"type": "string", "maxLength": 30},
        },
        "required": ["name", "age"],
        "additionalProperties": False,
    }),
    ("enum-bool-null", "Pick a color and say whether you like it, as JSON.", {
        "type": "object",
        "properties": {
            "color": {"enum": ["red", "green", "blue"]},
            "like": {"type": "boolean"},
            "note": {"type": ["string", "null"], "maxLength": 24},
        },
        "required": ["color", "like", "note"],
    }),
    ("array-of-objects", "List two fruits with an id each, as JSON.", {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {"id": {"type": "integer"}, "fruit": {"type": "string", "maxLength": 12}},
            "required": ["id", "fruit"],
            "additionalProperties": False,
        },
        "minItems": 1,
        "maxItems": 3,
    }),
    ("refs-anyof-formats", "Record a meeting on a date with an id, as JSON.", {
        "$defs": {
            "day": {"type": "string", "format": "date"},
            "ident": {"anyOf": [{"type": "string", "format": "uuid"}, {"type": "integer"}]},
        },
        "type": "object",
        "properties": {
            "title": {"type": "string", "minLength": 1, "maxLength": 24},
            "day": {"$ref": "#/$defs/day"},
            "id": {"$ref": "#/$defs/ident"},
            "tags": {"type": "array", "items": {"const": "work"}, "maxItems": 2},
        },
        "required": ["title", "day", "id"],
        "additionalProperties": False,
    }),
]

RUNS = [(0.0, 1), (0.9, 7)]  # (temperature, seed)


def model_path():
    cache = os.environ.get("TESSERA_MODEL_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "tessera", "models")
    path = os.path.join(cache, MODEL_NAME)
    if not os.path.exists(path):
        print(f"grammar_smollm2: {path} is missing: run scripts/fetch-models.sh", file=sys.stderr)
        sys.exit(1)
    return path


def chatml(user):
    return ("<|im_start|>system\nYou are a helpful assistant that answers in JSON.<|im_end|>\n"
            f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n")


def generate(gen, model, tmp, mode, spec, prompt, temp, seed, n_predict=512):
    pf = os.path.join(tmp, "prompt.txt")
    with open(pf, "w") as f:
        f.write(prompt)
    sf = os.path.join(tmp, "spec")
    with open(sf, "w") as f:
        f.write(spec)
    p = subprocess.run([gen, model, pf, mode, sf, str(temp), str(seed), str(n_predict)],
                       capture_output=True, timeout=900)
    err = p.stderr.decode("utf-8", "replace")
    if p.returncode != 0:
        raise AssertionError(f"grammar_gen failed ({p.returncode}): {err.strip()}")
    stats = dict(zip(*[iter(err.strip().splitlines()[-1].split())] * 2))
    return p.stdout.decode("utf-8"), stats


def main():
    build = os.environ["TESSERA_BUILD_ROOT"]
    gen = os.path.join(build, "tests", "grammar", "grammar_gen")
    model = model_path()
    checker = jsonschema.FormatChecker()
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        cases = [(name, prompt, schema, temp, seed) for name, prompt, schema in SCHEMAS for temp, seed in RUNS]
        cases += [("json_object", "Reply with a JSON object with one key, \"city\": the capital of France.", None, t, s)
                  for t, s in [(0.0, 1)]]  # (sampled free-form JSON from a 135M model can nest until -n: the schemas cover temperature > 0)
        for name, prompt, schema, temp, seed in cases:
            mode = "schema" if schema is not None else "json"
            try:
                text, stats = generate(gen, model, tmp, mode, json.dumps(schema), chatml(prompt), temp, seed)
                if stats.get("complete") != "1":
                    raise AssertionError(f"stopped before the grammar was complete: {text!r}")
                value = json.loads(text)
                if schema is None:
                    if not isinstance(value, dict):
                        raise AssertionError(f"json_object gave a {type(value).__name__}")
                else:
                    jsonschema.validate(value, schema, format_checker=checker)
                    if name == "refs-anyof-formats":
                        datetime.date.fromisoformat(value["day"])
                        if isinstance(value["id"], str):
                            uuid.UUID(value["id"])
                print(f"ok   {name} temp {temp}: {stats['tokens']} tokens: {text!r}")
            except Exception as e:  # noqa: BLE001 - report every case
                failures += 1
                print(f"FAIL {name} temp {temp}: {e}")
    print(f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
