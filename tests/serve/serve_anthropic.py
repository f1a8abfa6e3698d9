"""Anthropic's Messages API on tessera serve (raw HTTP): /v1/messages
answers as the chat path does (same greedy text, usage equal to its token
counts), streamed as Anthropic's event sequence with the same text,
stop_sequences and max_tokens as stop reasons, count_tokens equal to the
chat path's prompt count, x-api-key, Anthropic-shaped errors for bad input
(and the server serving on after them), and a tool_use / tool_result round
trip with SmolLM2-135M, streamed and not."""
import json
import os
import tempfile

from dialect_common import (PAINT_SCHEMA, SMOL, WEATHER_SCHEMA, chat_reply, expect_status, expect_survives,
                            jsonschema_module, named_events, thinking_server)
from serve_common import Server, expect, main, model_cache_file

MSGS = "/v1/messages"
SYSTEM = "You are a storyteller."
USER = [{"role": "user", "content": "Tell me a story."}]
CHAT_MSGS = [{"role": "system", "content": SYSTEM}] + USER


def text_of(msg):
    return "".join(b["text"] for b in msg["content"] if b["type"] == "text")


def check_message(m, what):
    expect(m["type"] == "message" and m["role"] == "assistant" and m["id"].startswith("msg_"), what + ": %r" % m)
    expect(m["stop_reason"] in ("end_turn", "max_tokens", "stop_sequence", "tool_use"), what + ": stop_reason")
    expect(set(m["usage"]) >= {"input_tokens", "output_tokens", "cache_read_input_tokens",
                               "cache_creation_input_tokens"}, what + ": usage %r" % m["usage"])
    expect(all(isinstance(v, int) and v >= 0 for v in m["usage"].values()), what + ": usage %r" % m["usage"])


def prompt_of(usage):
    """The whole prompt of an Anthropic usage: input_tokens counts only what
    a cached prefix (cache_read_input_tokens) did not cover."""
    return usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"]


def stream_text(events):
    """The text of a streamed message, checking the event order on the way."""
    names = [n for n, _ in events]
    expect(names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"], "order %r" % names)
    open_block, text = None, []
    for name, e in events[1:-2]:
        if name == "content_block_start":
            expect(open_block is None, "a block started inside another: %r" % names)
            open_block = e["index"]
        elif name == "content_block_delta":
            expect(e["index"] == open_block, "delta outside its block")
            if e["delta"]["type"] == "text_delta":
                text.append(e["delta"]["text"])
        elif name == "content_block_stop":
            expect(e["index"] == open_block, "stop of a block not open")
            open_block = None
        else:
            expect(name == "ping", "unexpected event %r" % name)
    expect(open_block is None, "a block left open")
    return "".join(text)


def test_messages():
    with Server() as srv:
        want, usage, finish = chat_reply(srv, CHAT_MSGS, 24)
        body = {"model": "m", "system": SYSTEM, "messages": USER, "max_tokens": 24, "temperature": 0}
        m = expect_status(srv, MSGS, body, 200, "messages")
        check_message(m, "messages")
        expect(text_of(m) == want["content"], "messages %r != chat %r" % (text_of(m), want["content"]))
        expect(prompt_of(m["usage"]) == usage["prompt_tokens"] and m["usage"]["cache_read_input_tokens"] > 0 and
               m["usage"]["output_tokens"] == usage["completion_tokens"], "usage %r vs %r" % (m["usage"], usage))
        expect(m["stop_reason"] == {"length": "max_tokens", "stop": "end_turn"}[finish], "stop_reason %r" % m)
        # system as text blocks reads the same
        blocks = dict(body, system=[{"type": "text", "text": SYSTEM}])
        expect(text_of(expect_status(srv, MSGS, blocks, 200, "system blocks")) == want["content"], "system blocks")
        # streamed: the same text, usage in message_start and message_delta
        events = named_events(srv, MSGS, body)
        expect(stream_text(events) == want["content"], "stream %r != %r" % (stream_text(events), want["content"]))
        start, delta = events[0][1]["message"], events[-2][1]
        expect(prompt_of(start["usage"]) == usage["prompt_tokens"] and start["content"] == [], "start %r" % start)
        expect(delta["delta"]["stop_reason"] == m["stop_reason"] and
               delta["usage"]["output_tokens"] == m["usage"]["output_tokens"], "message_delta %r" % delta)
        # a stop sequence from inside the text: cut there, named
        text = want["content"]
        stop = text[len(text) // 2:len(text) // 2 + 4]
        cut = text[:text.index(stop)]
        s = expect_status(srv, MSGS, dict(body, stop_sequences=[stop]), 200, "stop_sequences")
        expect(s["stop_reason"] == "stop_sequence" and s["stop_sequence"] == stop and text_of(s) == cut,
               "stop %r: %r" % (stop, s))
        ev = named_events(srv, MSGS, dict(body, stop_sequences=[stop]))
        expect(stream_text(ev) == cut and ev[-2][1]["delta"]["stop_sequence"] == stop, "streamed stop %r" % (ev[-2],))
        # max_tokens 1: stop_reason max_tokens
        one = expect_status(srv, MSGS, dict(body, max_tokens=1), 200, "max_tokens 1")
        expect(one["stop_reason"] == "max_tokens" and one["usage"]["output_tokens"] == 1, "max_tokens %r" % one)


def test_count_tokens():
    with Server() as srv:
        _, usage, _ = chat_reply(srv, CHAT_MSGS, 1)
        n = expect_status(srv, MSGS + "/count_tokens", {"model": "m", "system": SYSTEM, "messages": USER}, 200, "count")
        expect(n == {"input_tokens": usage["prompt_tokens"]}, "count_tokens %r, chat %r" % (n, usage))
        turns = USER + [{"role": "assistant", "content": [{"type": "text", "text": "Once"}]},
                        {"role": "user", "content": [{"type": "text", "text": "Go on."}]}]
        chat_turns = USER + [{"role": "assistant", "content": "Once"}, {"role": "user", "content": "Go on."}]
        _, usage, _ = chat_reply(srv, chat_turns, 1)
        n = expect_status(srv, MSGS + "/count_tokens", {"model": "m", "messages": turns}, 200, "count turns")
        expect(n["input_tokens"] == usage["prompt_tokens"], "count_tokens %r, chat %r" % (n, usage))
        e = expect_status(srv, MSGS + "/count_tokens", {"model": "m"}, 400, "count without messages")
        expect(e["type"] == "error" and "messages" in e["error"]["message"], "count error %r" % e)


def test_api_key():
    with Server("--api-key", "s3cret") as srv:
        body = {"model": "m", "messages": USER, "max_tokens": 2}
        expect_status(srv, MSGS, body, 200, "x-api-key", {"x-api-key": "s3cret", "anthropic-version": "2023-06-01"})
        expect_status(srv, MSGS, body, 200, "bearer", {"Authorization": "Bearer s3cret"})
        for h in ({}, {"x-api-key": "nope"}, {"x-api-key": "s3cre"}):
            e = expect_status(srv, MSGS, body, 401, "key %r" % h, h)
            expect(e["type"] == "error" and e["error"]["type"] == "authentication_error", "401 shape %r" % e)
        st, _ = srv.json("POST", "/v1/chat/completions", {"messages": USER, "max_tokens": 2}, {"x-api-key": "s3cret"})
        expect(st == 200, "x-api-key on the chat path: %d" % st)


BAD = [
    ({"messages": USER}, "max_tokens"),
    ({"max_tokens": 4}, "messages"),
    ({"max_tokens": 4, "messages": "hi"}, "messages"),
    ({"max_tokens": 4, "messages": [{"role": "system", "content": "x"}]}, "messages[0]"),
    ({"max_tokens": 4, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]}]},
     "messages[0].content[0]"),
    ({"max_tokens": 4, "messages": [{"role": "user", "content": [{"type": "text"}]}]}, "messages[0].content[0]"),
    ({"max_tokens": 4, "messages": USER, "tools": [{"type": "web_search_20250305", "name": "web_search"}]},
     "tools[0]"),
    ({"max_tokens": 4, "messages": USER, "tools": [{"name": "f"}]}, "tools[0]"),
    ({"max_tokens": 4, "messages": USER, "tool_choice": {"type": "sometimes"}}, "tool_choice"),
    ({"max_tokens": 4, "messages": USER, "tools": [{"name": "f", "input_schema": {"type": "object"}}],
      "tool_choice": {"type": "tool", "name": "g"}}, "tool_choice"),
    ({"max_tokens": 4, "messages": USER, "mcp_servers": [{"type": "url", "url": "http://x", "name": "x"}]},
     "mcp_servers"),
    ({"max_tokens": 4, "messages": USER, "stop_sequences": ["a", "b", "c", "d", "e"]}, "stop_sequences"),
    ({"max_tokens": 0, "messages": USER}, "max_tokens"),
    ({"max_tokens": 4, "messages": USER, "temperature": "hot"}, "temperature"),
]


def test_bad_input():
    with Server("-c", "1024", "--parallel", "1") as srv:  # room for the tools' system text
        for body, field in BAD:
            e = expect_status(srv, MSGS, dict(body, model="m"), 400, "bad %r" % body)
            expect(e["type"] == "error" and e["error"]["type"] == "invalid_request_error", "shape %r" % e)
            expect(field in e["error"]["message"], "%r: message does not name %s: %r" % (body, field, e))
        # media in llama-server's words (it answers 500 without a projector; a 400 here)
        for kind, block in (("image", {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                                   "data": "AAAA"}}),
                            ("document", {"type": "document", "source": {"type": "text", "media_type": "text/plain",
                                                                         "data": "d"}})):
            body = {"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": [
                {"type": "text", "text": "what is this?"}, block]}]}
            e = expect_status(srv, MSGS, body, 400, kind + " block")
            expect(e["error"]["message"].startswith(kind + " input is not supported: 'messages[0].content[1]'"),
                   "%s block: %r" % (kind, e))
        st, _, data = srv.request("POST", MSGS, b"{not json")
        expect(st == 400 and json.loads(data)["type"] == "error", "bad JSON: %d %r" % (st, data))
        st, _, data = srv.request("GET", MSGS)
        expect(st == 405 and json.loads(data)["type"] == "error", "GET: %d %r" % (st, data))
        # no messages: one empty user turn, as llama-server answers it
        m = expect_status(srv, MSGS, {"messages": [], "max_tokens": 2}, 200, "empty messages")
        check_message(m, "empty messages")
        e = expect_status(srv, MSGS, {"messages": [], "system": "s"}, 400, "empty messages without max_tokens")
        expect("max_tokens" in e["error"]["message"], "%r" % e)
        # an unknown field is ignored, and named in the request log (ignored=...)
        m = expect_status(srv, MSGS, {"messages": USER, "max_tokens": 2, "frobnicate": 1}, 200, "unknown field")
        expect(m["usage"]["output_tokens"] <= 2, "after bad input %r" % m)
        expect(srv.wait_log(lambda line: "ignored=frobnicate" in line), "unknown field not in the request log")
        tools = [{"name": "f", "description": "d", "input_schema": {"type": "object"}}]
        turns = USER + [{"role": "assistant", "content": [{"type": "text", "text": "a"},
                                                          {"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
                        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "r"},
                                                     {"type": "text", "text": "go on"}]}]
        expect_survives(srv, MSGS, {"system": [{"type": "text", "text": "s"}], "messages": turns, "tools": tools,
                                    "tool_choice": {"type": "auto"}, "max_tokens": 2, "stop_sequences": ["x"]})


def test_output_format():
    jsonschema = jsonschema_module()
    with Server() as srv:
        body = {"messages": [{"role": "user", "content": "Pick a color."}], "max_tokens": 60,
                "output_config": {"effort": "low", "format": {"type": "json_schema", "schema": PAINT_SCHEMA}}}
        for temp in (0, 0.8):
            m = expect_status(srv, MSGS, dict(body, temperature=temp), 200, "output_config")
            expect(m["stop_reason"] == "end_turn", "output_config did not end: %r" % m)
            jsonschema.validate(json.loads(text_of(m)), PAINT_SCHEMA)
        e = expect_status(srv, MSGS, dict(body, output_config={"format": {"type": "regex"}}), 400, "bad format")
        expect("output_config.format" in e["error"]["message"], "bad format %r" % e)


def test_thinking():
    with tempfile.TemporaryDirectory() as tmp, thinking_server(tmp) as srv:
        want, usage, _ = chat_reply(srv, USER, 12)
        expect(want.get("reasoning_content") and not want["content"], "no reasoning to test with: %r" % want)
        body = {"messages": USER, "max_tokens": 12, "temperature": 0}
        m = expect_status(srv, MSGS, body, 200, "thinking")
        expect([b["type"] for b in m["content"]] == ["thinking"] and
               m["content"][0]["thinking"] == want["reasoning_content"], "thinking %r vs %r" % (m, want))
        events = named_events(srv, MSGS, body)
        stream_text(events)  # the order
        blocks = [e["content_block"]["type"] for n, e in events if n == "content_block_start"]
        thought = "".join(e["delta"]["thinking"] for n, e in events
                          if n == "content_block_delta" and e["delta"]["type"] == "thinking_delta")
        expect(blocks == ["thinking"] and thought == want["reasoning_content"], "streamed %r %r" % (blocks, thought))


# A template that shows an assistant's reasoning_content, and (because it
# names its tools) gets the messages as given, as Qwen3's does.
HISTORY_TEMPLATE = ("{% if tools %}<|im_start|>system\ntools: {% for t in tools %}{{ t.function.name }} {% endfor %}"
                    "<|im_end|>\n{% endif %}{% for m in messages %}<|im_start|>{{ m.role }}\n"
                    "{% if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>\n{% endif %}"
                    "{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
                    "{% endif %}")


def test_thinking_history():
    """A thinking block of an earlier turn reaches the template as that
    message's reasoning_content (an agent's reasoning between tool calls)."""
    tools = [{"name": "list_files", "input_schema": {"type": "object"}}]
    thought = "I should look at the files first."
    use = {"type": "tool_use", "id": "call_1", "name": "list_files", "input": {}}
    turns = [USER[0], {"role": "assistant", "content": [{"type": "thinking", "thinking": thought, "signature": "x"},
                                                       use]},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "a.txt"}]}]
    plain = [turns[0], {"role": "assistant", "content": [use]}, turns[2]]
    chat = [USER[0], {"role": "assistant", "content": "", "reasoning_content": thought, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "a.txt"}]
    chat_tools = [{"type": "function", "function": {"name": "list_files", "parameters": {"type": "object"}}}]
    count = MSGS + "/count_tokens"
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "history.jinja")
        with open(path, "w") as f:
            f.write(HISTORY_TEMPLATE)
        with Server("--chat-template-file", path, "-c", "1024", "--parallel", "1") as srv:
            n0 = expect_status(srv, count, {"messages": plain, "tools": tools}, 200, "count without")["input_tokens"]
            n1 = expect_status(srv, count, {"messages": turns, "tools": tools}, 200, "count with")["input_tokens"]
            _, usage, _ = chat_reply(srv, chat, 1, tools=chat_tools)
            expect(n1 > n0 and n1 == usage["prompt_tokens"], "thinking history: %d tokens, without %d, chat %r"
                   % (n1, n0, usage))
            m = expect_status(srv, MSGS, {"messages": turns, "tools": tools, "max_tokens": 2}, 200, "with thinking")
            expect(prompt_of(m["usage"]) == n1, "usage %r vs count %d" % (m["usage"], n1))
            bad = [{"role": "assistant", "content": [{"type": "thinking"}]}]
            e = expect_status(srv, count, {"messages": USER + bad}, 400, "thinking block without text")
            expect("messages[1].content[0]" in e["error"]["message"], "%r" % e)


def tool_use_of(m):
    uses = [b for b in m["content"] if b["type"] == "tool_use"]
    expect(len(uses) == 1, "one tool_use block: %r" % m)
    return uses[0]


def test_tool_round_trip():
    smol = model_cache_file(SMOL)
    tools = [{"name": "get_weather", "description": "Get the current weather in a city",
              "input_schema": WEATHER_SCHEMA}]
    ask = [{"role": "user", "content": "What is the weather in Paris?"}]
    with Server("-c", "2048", "--parallel", "1", model=smol) as srv:
        body = {"model": "m", "messages": ask, "tools": tools, "max_tokens": 48, "temperature": 0,
                "tool_choice": {"type": "tool", "name": "get_weather"}}
        m = expect_status(srv, MSGS, body, 200, "forced tool")
        check_message(m, "forced tool")
        use = tool_use_of(m)
        expect(m["stop_reason"] == "tool_use" and use["name"] == "get_weather" and use["id"].startswith("toolu_"),
               "tool_use %r" % m)
        expect(isinstance(use["input"], dict) and isinstance(use["input"].get("city"), str), "input %r" % use)
        # streamed: a tool_use block whose input_json_delta parts are the same input
        events = named_events(srv, MSGS, body)
        starts = [e["content_block"] for n, e in events if n == "content_block_start"]
        parts = [e["delta"]["partial_json"] for n, e in events
                 if n == "content_block_delta" and e["delta"]["type"] == "input_json_delta"]
        expect(starts[-1]["type"] == "tool_use" and starts[-1]["name"] == "get_weather" and
               starts[-1]["id"].startswith("toolu_"), "streamed block %r" % starts)
        expect(json.loads("".join(parts)) == use["input"], "streamed input %r != %r" % (parts, use["input"]))
        expect(events[-2][1]["delta"]["stop_reason"] == "tool_use", "streamed stop %r" % (events[-2],))
        # any: some offered tool is called
        anyc = expect_status(srv, MSGS, dict(body, tool_choice={"type": "any"}), 200, "tool_choice any")
        expect(anyc["stop_reason"] == "tool_use" and tool_use_of(anyc)["name"] == "get_weather", "any %r" % anyc)
        # the result goes back in a tool_result block; the model answers in text
        turns = ask + [{"role": "assistant", "content": m["content"]},
                       {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"],
                                                     "content": '{"temperature_c": 18, "sky": "sunny"}'}]}]
        a = expect_status(srv, MSGS, {"messages": turns, "tools": tools, "max_tokens": 24, "temperature": 0}, 200,
                          "tool result")
        expect(a["stop_reason"] in ("end_turn", "max_tokens") and text_of(a), "answer %r" % a)
        expect(not [b for b in a["content"] if b["type"] == "tool_use"], "answer calls again %r" % a)
        n = expect_status(srv, MSGS + "/count_tokens", {"messages": turns, "tools": tools}, 200, "count turns")
        expect(n["input_tokens"] == prompt_of(a["usage"]), "count %r vs %r" % (n, a["usage"]))


if __name__ == "__main__":
    main([
        ("messages: chat path's text and usage, streamed, stop_sequences, max_tokens", test_messages),
        ("messages: count_tokens equals the chat path's prompt", test_count_tokens),
        ("messages: x-api-key and Bearer, 401 as Anthropic's error", test_api_key),
        ("messages: bad input is a 400 naming the field; unknown fields ignored", test_bad_input),
        ("messages: output_config.format JSON schema validates", test_output_format),
        ("messages: a reasoning reply is a thinking block, streamed and not", test_thinking),
        ("messages: earlier thinking blocks reach the template as reasoning_content", test_thinking_history),
        ("messages: tool_use / tool_result round trip with SmolLM2", test_tool_round_trip),
    ])
