#!/usr/bin/env python3
"""tessera serve: response_format and grammar over raw HTTP.

Default (stories260K, fast): json_schema on /v1/chat/completions and
/v1/completions, streamed and not, gives JSON that validates
(python3-jsonschema) and ends with finish_reason "stop"; "grammar" (GBNF)
constrains /v1/completions; every malformed response_format, schema or
grammar is a 400 whose "param" names the field; the server stays healthy.

--smollm2: json_object and json_schema with SmolLM2-135M-Instruct on chat
completions (the model FAILS the test when missing: run
scripts/fetch-models.sh)."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "serve"))
import serve_common  # noqa: E402
from serve_common import Failure, Server, error_body, expect, main  # noqa: E402

try:
    import jsonschema
except ImportError:
    print("serve_response_format: python3-jsonschema is missing (scripts/setup.sh installs it)")
    sys.exit(1)

# Bounded output (no free strings), so even a 260K-parameter model finishes.
SMALL = {"type": "object",
         "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer"},
                        "pet": {"enum": ["cat", "dog"]}},
         "required": ["ok", "n", "pet"], "additionalProperties": False}


def rf_schema(schema):
    return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": True}}


def chat_body(content, **kw):
    body = {"messages": [{"role": "user", "content": content}], "max_tokens": 200}
    body.update(kw)
    return body


def check_json(text, schema, what):
    try:
        value = json.loads(text)
    except ValueError:
        raise Failure("%s: not JSON: %r" % (what, text))
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError as e:
        raise Failure("%s: %r does not validate: %s" % (what, text, e.message))
    return value


def test_json_schema_chat_and_completions():
    with Server() as srv:
        for temp, seed in ((0, 1), (0.9, 5), (1.3, 9)):
            st, obj = srv.json("POST", "/v1/chat/completions",
                               chat_body("Tell me a story", temperature=temp, seed=seed,
                                         response_format=rf_schema(SMALL)))
            expect(st == 200, "chat status %d: %r" % (st, obj))
            ch = obj["choices"][0]
            expect(ch["finish_reason"] == "stop", "finish_reason %r: %r" % (ch["finish_reason"], ch))
            check_json(ch["message"]["content"], SMALL, "chat temp %s" % temp)
            st, obj = srv.json("POST", "/v1/completions",
                               {"prompt": "Once upon a time", "max_tokens": 200, "temperature": temp,
                                "seed": seed, "response_format": rf_schema(SMALL)})
            expect(st == 200, "completion status %d: %r" % (st, obj))
            check_json(obj["choices"][0]["text"], SMALL, "completion temp %s" % temp)
        # tuples: prefixItems (2020-12) and items as a list (draft-04), with more items after
        for tuple_schema in ({"type": "array", "prefixItems": [{"type": "integer"}, {"enum": ["cat", "dog"]}],
                              "items": {"type": "boolean"}, "maxItems": 4},
                             {"$schema": "http://json-schema.org/draft-04/schema#",
                              "items": [{"type": "integer"}, {"type": "boolean"}], "additionalItems": False}):
            for temp, seed in ((0, 1), (1.0, 4)):
                st, obj = srv.json("POST", "/v1/chat/completions",
                                   chat_body("Write an example", temperature=temp, seed=seed,
                                             response_format=rf_schema(tuple_schema)))
                expect(st == 200, "tuple status %d: %r" % (st, obj))
                v = check_json(obj["choices"][0]["message"]["content"], tuple_schema, "tuple temp %s" % temp)
                expect(isinstance(v, list) and len(v) >= 2, "every tuple item generated: %r" % v)
        events, done = srv.stream("/v1/chat/completions",
                                  chat_body("Hi", temperature=0.7, seed=3, response_format=rf_schema(SMALL)))
        expect(done, "stream did not end with [DONE]")
        text = "".join(c["delta"].get("content") or "" for e in events for c in e["choices"])
        check_json(text, SMALL, "streamed chat")


def test_grammar_field():
    with Server() as srv:
        gbnf = 'root ::= ("yes" | "no") " " [0-9]{1,3} "."'
        for temp in (0, 1.0):
            st, obj = srv.json("POST", "/v1/completions", {"prompt": "The dog", "max_tokens": 50,
                                                           "temperature": temp, "seed": 2, "grammar": gbnf})
            expect(st == 200, "status %d: %r" % (st, obj))
            text = obj["choices"][0]["text"]
            head, _, num = text.partition(" ")
            expect(head in ("yes", "no") and num.endswith(".") and num[:-1].isdigit() and 1 <= len(num) <= 4,
                   "grammar output %r" % text)
            expect(obj["choices"][0]["finish_reason"] == "stop", "finish_reason %r" % obj)


# root ::= c1 "x", c1 ::= c2 "x", ..., c800 ::= [a]
CHAIN_800 = "".join('%s ::= c%d "x"\n' % ("c%d" % i if i else "root", i + 1) for i in range(800)) + "c800 ::= [a]\n"
# every "a" multiplies the parses by 8 (which letters will close it), so the matcher gives up after a few
BRANCHING_8 = "root ::= " + " | ".join('"a" root "%s"' % c for c in "bcdefghi") + ' | "' + "a" * 40 + '"'


def test_bad_requests():
    bad = [
        ({"response_format": "json"}, "response_format"),
        ({"response_format": {"type": "yaml"}}, "response_format.type"),
        ({"response_format": {"type": "json_schema"}}, "response_format.json_schema"),
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}},
         "response_format.json_schema.schema"),
        ({"response_format": rf_schema({"type": "string", "pattern": "^a"})}, "response_format.json_schema.schema"),
        ({"response_format": rf_schema({"$ref": "#/$defs/nope"})}, "response_format.json_schema.schema"),
        ({"response_format": rf_schema({"type": "strng"})}, "response_format.json_schema.schema"),
        ({"response_format": {"type": "json_object", "schema": {"type": 5}}}, "response_format.schema"),
        ({"grammar": "root ::= (\"a\""}, "grammar"),
        ({"grammar": "root ::= root \"a\""}, "grammar"),
        ({"grammar": 42}, "grammar"),
        ({"grammar": "root ::= \"a\"", "response_format": {"type": "json_object"}}, "grammar"),
        # grammars that parse but are too ambiguous to match are the request's fault too: one whose
        # start alone expands past the matcher's bounds (a chain of 800 rules), and one whose parses
        # multiply with every "a" the model must write
        ({"grammar": CHAIN_800}, "grammar"),
        ({"grammar": BRANCHING_8, "max_tokens": 60}, "grammar"),
    ]
    with Server() as srv:
        for path, base in (("/v1/chat/completions", chat_body("hi")),
                           ("/v1/completions", {"prompt": "hi", "max_tokens": 5})):
            for extra, param in bad:
                body = dict(base, **extra)
                what = "%s %.100r" % (path, extra)  # the chain grammar is 11 KB
                st, obj = srv.json("POST", path, body)
                expect(st == 400, "%s: status %d %r" % (what, st, obj))
                e = error_body(obj, what)
                expect(e["param"] == param, "%s: param %r, want %r (%s)" % (what, e["param"], param, e["message"]))
                if extra.get("grammar") in (CHAIN_800, BRANCHING_8):
                    expect("too ambiguous" in e["message"] and e["type"] == "invalid_request_error",
                           "%s: %r" % (what, e))
        # text is no constraint; the server still answers.
        st, obj = srv.json("POST", "/v1/completions", {"prompt": "hi", "max_tokens": 5,
                                                       "response_format": {"type": "text"}})
        expect(st == 200, "text format: status %d" % st)
        expect(srv.alive(), "server died")


def smollm2_model():
    cache = os.environ.get("TESSERA_MODEL_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "tessera", "models")
    path = os.path.join(cache, "SmolLM2-135M-Instruct.Q4_1.gguf")
    if not os.path.exists(path):
        raise Failure("%s is missing: run scripts/fetch-models.sh" % path)
    return path


def test_smollm2_json_object_and_schema():
    serve_common.MODEL = smollm2_model()
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 16},
                                                "age": {"type": "integer"}},
              "required": ["name", "age"], "additionalProperties": False}
    with Server("-c", "2048", threads=2) as srv:
        for temp in (0, 0.8):
            st, obj = srv.json("POST", "/v1/chat/completions",
                               chat_body("Reply with a JSON object with one key, \"city\": the capital of France.",
                                         max_tokens=400, temperature=temp, seed=11,
                                         response_format={"type": "json_object"}), timeout=900)
            expect(st == 200, "json_object status %d: %r" % (st, obj))
            ch = obj["choices"][0]
            expect(ch["finish_reason"] == "stop", "json_object did not finish: %r" % ch)
            value = check_json(ch["message"]["content"], {"type": "object"}, "json_object temp %s" % temp)
            expect(isinstance(value, dict), "json_object gave %r" % value)
            st, obj = srv.json("POST", "/v1/chat/completions",
                               chat_body("Describe a person named Bob, 40 years old.", max_tokens=200,
                                         temperature=temp, seed=11, response_format=rf_schema(schema)),
                               timeout=900)
            expect(st == 200, "json_schema status %d: %r" % (st, obj))
            check_json(obj["choices"][0]["message"]["content"], schema, "json_schema temp %s" % temp)


if __name__ == "__main__":
    if "--smollm2" in sys.argv:
        main([("smollm2 json_object and json_schema", test_smollm2_json_object_and_schema)])
    else:
        main([("json_schema on chat and completions", test_json_schema_chat_and_completions),
              ("grammar field", test_grammar_field),
              ("malformed formats are 400 naming the field", test_bad_requests)])
