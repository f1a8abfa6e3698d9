"""tessera serve driven by the official `openai` Python client: greedy
completions and chat (streamed and not) equal `tessera run`, errors come
back as the client's typed exceptions, the request fields (logprobs, n,
stop, seed, logit_bias, an unknown field) as the client sends them, and a
full tool round trip (call -> tool result -> answer) with SmolLM2-135M,
streamed and not. The client is imported if it is
installed, else installed into a venv under the build directory; when that
cannot reach PyPI the test is skipped and says why."""
import os
import sys

import json
import math

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
import testvenv  # noqa: E402
from serve_common import Failure, Server, check_env, expect, main, model_cache_file, run_greedy, skip


def ensure_openai():
    """Re-run this script under a Python that has openai; returns only when
    this interpreter already has it."""
    testvenv.rerun_with("serve-venv", ["openai"], skip)


def client(srv, key="none"):
    import openai
    return openai.OpenAI(base_url="http://127.0.0.1:%d/v1" % srv.port, api_key=key, max_retries=0, timeout=60)


def test_completions():
    with Server("--parallel", "2") as srv:
        c = client(srv)
        for p in ["Once upon a time", "The little dog"]:
            want = run_greedy(p, 30)
            r = c.completions.create(model="stories260K", prompt=p, max_tokens=30, temperature=0)
            expect(r.choices[0].text == want, "openai completion %r != run %r" % (r.choices[0].text, want))
            expect(r.usage.completion_tokens == 30, "usage %r" % r.usage)
            text = "".join(ch.choices[0].text for ch in
                           c.completions.create(model="m", prompt=p, max_tokens=30, temperature=0, stream=True)
                           if ch.choices)
            expect(text == want, "openai streamed completion %r != %r" % (text, want))
        models = c.models.list()
        expect(models.data[0].id == "stories260K.gguf", "models %r" % models)


def test_chat():
    with Server() as srv:
        c = client(srv)
        rendered = "<|im_start|>user\nTell me a story.<|im_end|>\n<|im_start|>assistant\n"
        want = run_greedy(rendered, 24)
        msgs = [{"role": "user", "content": "Tell me a story."}]
        r = c.chat.completions.create(model="m", messages=msgs, max_tokens=24, temperature=0, seed=1)
        expect(r.choices[0].message.content == want, "chat %r != %r" % (r.choices[0].message.content, want))
        expect(r.choices[0].finish_reason == "length", "finish_reason")
        chunks = list(c.chat.completions.create(model="m", messages=msgs, max_tokens=24, temperature=0,
                                                stream=True, stream_options={"include_usage": True}))
        text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
        expect(text == want, "chat stream %r != %r" % (text, want))
        expect(chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 24, "usage chunk")


def test_errors():
    import openai
    with Server("--api-key", "k1") as srv:
        try:
            client(srv, "wrong").chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
            raise Failure("wrong key accepted")
        except openai.AuthenticationError as ex:
            expect(ex.status_code == 401, "status")
        c = client(srv, "k1")
        try:
            c.chat.completions.create(model="m", messages=[], max_tokens=2)
            raise Failure("empty messages accepted")
        except openai.BadRequestError as ex:
            expect(ex.status_code == 400 and "messages" in str(ex), "bad request %r" % ex)
        try:
            c.completions.create(model="m", prompt=" ".join(["dog"] * 400), max_tokens=2)
            raise Failure("long prompt accepted")
        except openai.BadRequestError as ex:
            expect(ex.code == "context_length_exceeded", "code %r" % ex.code)
        r = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], max_tokens=2)
        expect(r.usage.completion_tokens <= 2, "after errors")


def test_fields():
    import openai
    with Server("--parallel", "2") as srv:
        c = client(srv)
        msgs = [{"role": "user", "content": "Tell me a story."}]
        r = c.chat.completions.create(model="m", messages=msgs, max_tokens=8, temperature=0, logprobs=True,
                                      top_logprobs=4)
        content = r.choices[0].logprobs.content
        expect(len(content) == 8 and "".join(t.token for t in content) == r.choices[0].message.content,
               "logprob tokens do not spell the text")
        for t in content:
            expect(sum(math.exp(a.logprob) for a in t.top_logprobs) <= 1 + 1e-5, "top probabilities over 1")
            expect(t.top_logprobs[0].token == t.token and abs(t.top_logprobs[0].logprob - t.logprob) < 1e-6,
                   "greedy token is not the most likely: %r" % t)
            expect(bytes(t.bytes).decode("utf-8", "replace") == t.token, "bytes")
        two = c.chat.completions.create(model="m", messages=msgs, max_tokens=10, n=2, seed=11, temperature=1.0)
        expect([ch.index for ch in two.choices] == [0, 1], "n=2 indexes %r" % [ch.index for ch in two.choices])
        again = c.chat.completions.create(model="m", messages=msgs, max_tokens=10, n=2, seed=11, temperature=1.0)
        expect([ch.message.content for ch in two.choices] == [ch.message.content for ch in again.choices],
               "seed does not reproduce")
        try:
            c.chat.completions.create(model="m", messages=msgs, max_tokens=2, n=3)
            raise Failure("n above the slot count accepted")
        except openai.BadRequestError as ex:
            expect(ex.param == "n", "n error param %r" % ex.param)
        full = c.completions.create(model="m", prompt="Once upon a time", max_tokens=30, temperature=0).choices[0].text
        stop = full[10:15]
        cut = c.completions.create(model="m", prompt="Once upon a time", max_tokens=30, temperature=0, stop=[stop])
        expect(cut.choices[0].text == full[:full.index(stop)], "stop %r: %r" % (stop, cut.choices[0].text))
        lp = c.completions.create(model="m", prompt="Once upon a time", max_tokens=1, temperature=0, logprobs=2)
        top = lp.choices[0].logprobs.top_logprobs[0]
        best, second = sorted(top, key=lambda k: -top[k])
        ids = c.completions.create(model="m", prompt="Once upon a time", max_tokens=1, temperature=0,
                                   logit_bias={"432": -100})  # 432: stories260K's greedy first token
        expect(lp.choices[0].text == best and ids.choices[0].text == second,
               "logit_bias ban: %r then %r, want %r" % (best, ids.choices[0].text, second))
        try:
            c.chat.completions.create(model="m", messages=msgs, max_tokens=2, extra_body={"mirostat": 3})
            raise Failure("mirostat 3 accepted")
        except openai.BadRequestError as ex:
            expect(ex.param == "mirostat" and "mirostat" in str(ex), "bad mirostat error %r" % ex)


WEATHER = [{"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
ADD = {"type": "function", "function": {
    "name": "add", "description": "Add two integers",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                   "required": ["a", "b"], "additionalProperties": False}}}
CACHE = {"cache_prompt": True}  # one slot: each request reuses the last one's prefix


def streamed_reply(stream):
    """content, tool calls {index: [id, name, arguments]}, finish_reason of a streamed chat reply."""
    content, calls, finish = [], {}, None
    for ch in stream:
        for choice in ch.choices:
            d = choice.delta
            content.append(d.content or "")
            for tc in d.tool_calls or []:
                cur = calls.setdefault(tc.index, ["", "", ""])
                cur[0] += tc.id or ""
                cur[1] += (tc.function.name or "") if tc.function else ""
                cur[2] += (tc.function.arguments or "") if tc.function else ""
            finish = choice.finish_reason or finish
    return "".join(content), calls, finish


def test_tool_round_trip():
    smol = model_cache_file("SmolLM2-135M-Instruct.Q4_1.gguf")
    with Server("-c", "2048", "--parallel", "1", model=smol) as srv:
        c = client(srv)
        c.timeout = 600
        msgs = [{"role": "user", "content": "What is the weather in Paris?"}]
        named = {"type": "function", "function": {"name": "get_weather"}}
        r = c.chat.completions.create(model="m", messages=msgs, tools=WEATHER, tool_choice=named, max_tokens=48,
                                      temperature=0, extra_body=CACHE)
        ch = r.choices[0]
        expect(ch.finish_reason == "tool_calls", "finish %r, message %r" % (ch.finish_reason, ch.message))
        call = ch.message.tool_calls[0]
        expect(call.type == "function" and call.function.name == "get_weather", "call %r" % call)
        # The grammar holds the arguments to the schema and ends the output after the call.
        args = json.loads(call.function.arguments)
        expect(isinstance(args, dict) and isinstance(args.get("city"), str), "arguments %r" % call.function.arguments)
        expect(r.usage.completion_tokens < 48, "generation did not end with the call: %r" % r.usage)
        text, calls, finish = streamed_reply(c.chat.completions.create(
            model="m", messages=msgs, tools=WEATHER, tool_choice=named, max_tokens=48, temperature=0, stream=True,
            extra_body=CACHE))
        expect(finish == "tool_calls" and calls[0][1] == "get_weather" and calls[0][2] == call.function.arguments,
               "streamed call %r / %r, want %r" % (calls, finish, call))
        # The result goes back as a tool message; the model answers in text.
        msgs2 = msgs + [ch.message.model_dump(exclude_none=True),
                        {"role": "tool", "tool_call_id": call.id, "content": '{"temperature_c": 18, "sky": "sunny"}'}]
        a = c.chat.completions.create(model="m", messages=msgs2, tools=WEATHER, max_tokens=24, temperature=0,
                                      extra_body=CACHE)
        answer = a.choices[0]
        expect(not answer.message.tool_calls and answer.message.content, "no text answer: %r" % answer.message)
        text, calls, finish = streamed_reply(c.chat.completions.create(
            model="m", messages=msgs2, tools=WEATHER, max_tokens=24, temperature=0, stream=True, extra_body=CACHE))
        expect(text == answer.message.content and not calls and finish == answer.finish_reason,
               "streamed answer %r / %r, want %r" % (text, finish, answer.message.content))
        # tool_choice "required" with two tools: a call to one of them, arguments per its schema.
        r = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "What is 2 plus 3?"}],
                                      tools=WEATHER + [ADD], tool_choice="required", max_tokens=48, temperature=0.7,
                                      seed=5, extra_body=CACHE)
        call = r.choices[0].message.tool_calls[0]
        args = json.loads(call.function.arguments)
        if call.function.name == "add":
            expect(sorted(args) == ["a", "b"] and all(isinstance(v, int) for v in args.values()), "add %r" % args)
        else:
            expect(call.function.name == "get_weather" and isinstance(args.get("city"), str), "call %r" % call)
        expect(r.choices[0].finish_reason == "tool_calls", "required: finish %r" % r.choices[0].finish_reason)


if __name__ == "__main__":
    check_env()
    ensure_openai()
    main([
        ("openai client: completions equal tessera run", test_completions),
        ("openai client: chat, streamed and not", test_chat),
        ("openai client: typed errors", test_errors),
        ("openai client: logprobs, n, seed, stop, logit_bias, unknown field", test_fields),
        ("openai client: tool round trip with SmolLM2, streamed and not", test_tool_round_trip),
    ])
