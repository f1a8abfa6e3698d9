"""tessera serve with Jinja chat templates: POST /apply-template (as
llama-server) returns exactly what Python's jinja2 renders for the same
messages and tools with the --chat-template-file template, chat requests go
through that template, and a conversation the template refuses is a 400
naming the template line."""
import json
import os
import time
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "serve"))
from serve_common import SHARED, Server, error_body, expect, main, run_greedy  # noqa: E402

try:
    from compare_jinja import hf_environment, reference  # noqa: E402  (skips when jinja2 is absent)
except SystemExit:
    raise

TEMPLATES = os.path.join(SHARED, "templates")
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city — «now»",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
MESSAGES = [
    {"role": "system", "content": "Use tools."},
    {"role": "user", "content": "Weather in Köln?"},
    {"role": "assistant", "content": "",
     "tool_calls": [{"id": "c1", "type": "function",
                     "function": {"name": "get_weather", "arguments": {"city": "Köln"}}}]},
    {"role": "user", "content": "And tomorrow?"},
]


def jinja2_render(template, messages, tools=None):
    with open(os.path.join(TEMPLATES, template), encoding="utf-8") as f:
        source = f.read()
    # tessera serve gives every render today's date_string, as llama-server does
    variables = {"messages": messages, "add_generation_prompt": True, "bos_token": "<s>", "eos_token": "</s>",
                 "date_string": time.strftime("%d %b %Y")}
    if tools is not None:
        variables["tools"] = tools
    return reference(hf_environment(), source, variables)


def test_apply_template_equals_jinja2():
    for template in ("Qwen-Qwen2.5-7B-Instruct.jinja", "meta-llama-Llama-3.1-8B-Instruct.jinja",
                     "HuggingFaceTB-SmolLM3-3B.jinja"):
        with Server("--chat-template-file", os.path.join(TEMPLATES, template)) as srv:
            for tools in (TOOLS, None):
                body = {"messages": MESSAGES}
                if tools is not None:
                    body["tools"] = tools
                want, err = jinja2_render(template, MESSAGES, tools)
                expect(err is None, "%s: jinja2 raised %s" % (template, err))
                st, obj = srv.json("POST", "/apply-template", body)
                expect(st == 200, "%s: status %d %r" % (template, st, obj))
                expect(obj.get("prompt") == want, "%s (tools %s):\n server %r\n jinja2 %r" %
                       (template, tools is not None, obj.get("prompt"), want))


def test_chat_uses_the_template_file():
    short = os.path.join(os.environ.get("TESSERA_BUILD_ROOT", "/tmp"), "serve_template_short.jinja")
    with open(short, "w") as f:
        f.write("{% for m in messages %}{{ m.role|upper }}: {{ m.content }}\n{% endfor %}"
                "{% if add_generation_prompt %}ASSISTANT:{% endif %}")
    msgs = [{"role": "user", "content": "Tell me a story."}]
    with Server("--chat-template-file", short) as srv:
        st, obj = srv.json("POST", "/apply-template", {"messages": msgs})
        expect(st == 200 and obj["prompt"] == "USER: Tell me a story.\nASSISTANT:", "apply-template %r" % obj)
        want = run_greedy(obj["prompt"], 16)
        st, obj = srv.json("POST", "/v1/chat/completions", {"messages": msgs, "max_tokens": 16, "temperature": 0})
        expect(st == 200, "chat status %d %r" % (st, obj))
        got = obj["choices"][0]["message"]["content"]
        expect(got == want, "chat %r != run on the rendering %r" % (got, want))


def token_count(text):
    """Tokens of text as the server tokenizes a rendered chat prompt."""
    import subprocess
    from serve_common import BIN, MODEL
    path = os.path.join(os.environ.get("TESSERA_BUILD_ROOT", "/tmp"), "serve_template_prompt.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    out = subprocess.run([BIN, "tokenize", "-m", MODEL, "-f", path, "--ids", "--parse-special"],
                         capture_output=True, text=True, timeout=60)
    expect(out.returncode == 0, "tokenize: " + out.stderr)
    return len(json.loads(out.stdout))


def test_chat_tools_through_the_template():
    """A template that writes the tools itself (Qwen2.5) gets the request's
    tools and messages: the chat prompt is exactly /apply-template's."""
    with Server("-c", "4096", "--chat-template-file", os.path.join(TEMPLATES, "Qwen-Qwen2.5-7B-Instruct.jinja")) as srv:
        body = {"messages": MESSAGES + [{"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c2", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Bonn\"}"}}]},
                    {"role": "tool", "tool_call_id": "c2", "content": "12 C"}],
                "tools": TOOLS}
        st, obj = srv.json("POST", "/apply-template", body)
        expect(st == 200, "apply-template %d %r" % (st, obj))
        prompt = obj["prompt"]
        expect("<tools>" in prompt and "<tool_response>\n12 C\n</tool_response>" in prompt,
               "tools or tool result missing from %r" % prompt)
        st, obj = srv.json("POST", "/v1/chat/completions", dict(body, max_tokens=1, temperature=0))
        expect(st == 200, "chat with tools %d %r" % (st, obj))
        want = token_count(prompt)
        expect(obj["usage"]["prompt_tokens"] == want,
               "chat prompt has %d tokens, /apply-template's %d" % (obj["usage"]["prompt_tokens"], want))


def test_refusals():
    # Qwen3.5's template refuses a conversation without a user message
    with Server("--chat-template-file", os.path.join(TEMPLATES, "Qwen3.5-4B.jinja")) as srv:
        msgs = [{"role": "system", "content": "Only a system message."}]
        for path in ("/apply-template", "/v1/chat/completions"):
            st, obj = srv.json("POST", path, {"messages": msgs, "max_tokens": 4})
            expect(st == 400, "%s: status %d %r" % (path, st, obj))
            e = error_body(obj, path)
            expect("template line" in e["message"] and "No user query found" in e["message"],
                   "%s: message %r" % (path, e["message"]))
        st, obj = srv.json("GET", "/apply-template")
        expect(st == 405, "GET /apply-template: %d" % st)
        st, obj = srv.json("POST", "/apply-template", "not json")
        expect(st == 400, "bad body: %d" % st)
        st, obj = srv.json("POST", "/apply-template", {"messages": []})
        expect(st == 400 and "messages" in error_body(obj, "empty")["message"], "empty messages: %r" % obj)
        expect(srv.alive(), "server died")


if __name__ == "__main__":
    main([("/apply-template equals jinja2", test_apply_template_equals_jinja2),
          ("chat through --chat-template-file", test_chat_uses_the_template_file),
          ("chat with tools through a tools template", test_chat_tools_through_the_template),
          ("refusals are 400 naming the line", test_refusals)])
