"""Helpers of the Anthropic Messages and OpenAI Responses tests
(serve_anthropic.py, serve_responses.py, serve_dialect_sdk.py): named
server-sent events, the chat path's greedy reply to compare with, and
re-running a test under the build's venv with the client SDKs."""
import copy
import json
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
import testvenv  # noqa: E402
from serve_common import Server, expect, skip

SMOL = "SmolLM2-135M-Instruct.Q4_1.gguf"
WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
# A schema whose every valid answer is short: a grammar made from it ends the reply.
PAINT_SCHEMA = {"type": "object", "properties": {"color": {"type": "string", "enum": ["red", "green", "blue"]},
                                                 "bright": {"type": "boolean"}},
                "required": ["color", "bright"], "additionalProperties": False}


def named_events(srv, path, body, headers=None, timeout=300):
    """POST body with stream: true; [(event name, data object)] in order.
    Every block must be 'event: NAME' then 'data: JSON' whose type is NAME."""
    st, hd, data = srv.request("POST", path, dict(body, stream=True), headers, timeout)
    expect(st == 200, "%s stream: status %d %r" % (path, st, data[:300]))
    expect(hd.get("content-type", "").startswith("text/event-stream"), "stream content type %r" % hd)
    out = []
    for block in data.decode("utf-8").split("\n\n"):
        if not block.strip():
            continue
        lines = block.split("\n")
        expect(len(lines) == 2 and lines[0].startswith("event: ") and lines[1].startswith("data: "),
               "SSE block is not 'event:' + 'data:': %r" % block[:200])
        name, obj = lines[0][7:], json.loads(lines[1][6:])
        expect(obj.get("type") == name, "event %r carries type %r" % (name, obj.get("type")))
        out.append((name, obj))
    return out


def chat_reply(srv, messages, max_tokens, headers=None, **extra):
    """The chat path's greedy reply to the same conversation: (message, usage, finish_reason)."""
    body = dict({"messages": messages, "max_tokens": max_tokens, "temperature": 0}, **extra)
    st, obj = srv.json("POST", "/v1/chat/completions", body, headers, timeout=300)
    expect(st == 200, "chat: %d %r" % (st, obj))
    return obj["choices"][0]["message"], obj["usage"], obj["choices"][0]["finish_reason"]


# A ChatML template whose generation prompt opens the reasoning: the whole
# reply of stories260K is reasoning (the chat path's reasoning_content).
THINK_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                  "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}")


def thinking_server(tmpdir):
    """A Server (not started) rendering with THINK_TEMPLATE."""
    path = os.path.join(tmpdir, "think.jinja")
    with open(path, "w") as f:
        f.write(THINK_TEMPLATE)
    return Server("--chat-template-file", path)


def jsonschema_module():
    """The jsonschema module, or a skip saying it is missing."""
    try:
        import jsonschema
    except ImportError:
        skip("the jsonschema module is missing (pip install jsonschema)")
    return jsonschema


def expect_status(srv, path, body, status, what, headers=None):
    """A request answered with status; returns the parsed body."""
    st, obj = srv.json("POST", path, body, headers)
    expect(st == status, "%s: status %d (want %d): %r" % (what, st, status, obj))
    return obj


ODD_VALUES = [None, 0, -1, 1e300, "", "x" * 3000, [], {}, True, [None], {"type": None}, [{"type": "text"}],
              [{"type": "tool_use"}], [{"type": "tool_result", "content": [{"type": "image"}]}]]


def mutations(body, n, seed):
    """n copies of body, each with one value somewhere replaced by an odd
    one, a key dropped, or a junk key added."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        b = copy.deepcopy(body)
        node = b
        while True:  # walk down to a random container
            kids = list(node.items()) if isinstance(node, dict) else list(enumerate(node))
            kids = [(k, v) for k, v in kids if isinstance(v, (dict, list)) and v]
            if not kids or rng.random() < 0.4:
                break
            node = rng.choice(kids)[1]
        keys = list(node.keys()) if isinstance(node, dict) else list(range(len(node)))
        what = rng.random()
        if keys and what < 0.7:
            node[rng.choice(keys)] = copy.deepcopy(rng.choice(ODD_VALUES))
        elif keys and what < 0.85:
            del node[rng.choice(keys)]
        elif isinstance(node, dict):
            node["junk%d" % rng.randrange(9)] = copy.deepcopy(rng.choice(ODD_VALUES))
        out.append(b)
    return out


def expect_survives(srv, path, body, n=60, seed=1):
    """Mutated bodies are answered 200 or 400 with a JSON body (never a
    crash or a 500), and a good request still works afterwards."""
    for b in mutations(body, n, seed):
        st, _, data = srv.request("POST", path, b)
        expect(st in (200, 400), "%s %r: status %d %r" % (path, b, st, data[:200]))
        json.loads(data.decode("utf-8"))
    st, _, data = srv.request("POST", path, body)
    expect(st == 200, "%s after mutated requests: %d %r" % (path, st, data[:200]))


def rerun_in_venv(packages):
    """Return when this interpreter imports every package; else install the
    missing ones into the build's venv (made if needed) and re-run this
    script there, exiting with its status. Skips when pip cannot."""
    testvenv.rerun_with("serve-venv", packages, skip)
