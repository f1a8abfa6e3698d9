"""OpenAI's Responses API on tessera serve (raw HTTP): /v1/responses answers
as the chat path does (same greedy text, usage from its token counts), its
stream is the documented event sequence whose deltas join to the same text,
llama-server's return_progress and timings_per_token ride on the stream,
text.format with a JSON schema gives output that the schema validates,
function tools round-trip (function_call, function_call_output) with
SmolLM2-135M, /v1/responses/input_tokens counts what /v1/responses would
read, and bad input is a 400 naming the field."""
import json
import tempfile

from dialect_common import (PAINT_SCHEMA, SMOL, WEATHER_SCHEMA, chat_reply, expect_status, expect_survives,
                            jsonschema_module, named_events, thinking_server)
from serve_common import Server, expect, main, model_cache_file

RESP = "/v1/responses"
INSTR = "You are a storyteller."
CHAT_MSGS = [{"role": "system", "content": INSTR}, {"role": "user", "content": "Tell me a story."}]


def output_text(resp):
    return "".join(p["text"] for it in resp["output"] if it["type"] == "message" for p in it["content"]
                   if p["type"] == "output_text")


def check_response(resp, what):
    expect(resp["object"] == "response" and resp["id"].startswith("resp_"), what + ": %r" % resp)
    u = resp["usage"]
    expect(u["total_tokens"] == u["input_tokens"] + u["output_tokens"], what + ": usage %r" % u)


def check_echo(resp, want, what):
    """The response object repeats the request's settings (OpenAI's Response has them all)."""
    got = {k: resp.get(k, "<missing>") for k in want}
    expect(got == want, "%s: settings %r, want %r" % (what, got, want))


# what a request that sets nothing gets back (the server's sampling defaults: the library's)
DEFAULTS = {"instructions": None, "max_output_tokens": None, "temperature": 0.8, "top_p": 0.95, "tools": [],
            "tool_choice": "auto", "parallel_tool_calls": True, "text": {"format": {"type": "text"}},
            "truncation": "disabled", "previous_response_id": None, "store": False, "metadata": {},
            "reasoning": {"effort": None, "summary": None}, "user": None}

TEXT_ORDER = ["response.created", "response.in_progress", "response.output_item.added",
              "response.content_part.added"]
TEXT_END = ["response.output_text.done", "response.content_part.done", "response.output_item.done"]


def test_text():
    with Server() as srv:
        want, usage, finish = chat_reply(srv, CHAT_MSGS, 24)
        body = {"model": "m", "instructions": INSTR, "input": "Tell me a story.", "max_output_tokens": 24,
                "temperature": 0}
        r = expect_status(srv, RESP, body, 200, "responses")
        check_response(r, "responses")
        expect(output_text(r) == want["content"], "responses %r != chat %r" % (output_text(r), want["content"]))
        expect(r["usage"]["input_tokens"] == usage["prompt_tokens"] and
               r["usage"]["output_tokens"] == usage["completion_tokens"], "usage %r vs %r" % (r["usage"], usage))
        cut = finish == "length"
        expect(r["status"] == ("incomplete" if cut else "completed"), "status %r" % r["status"])
        if cut:
            expect(r["incomplete_details"] == {"reason": "max_output_tokens"}, "details %r" % r["incomplete_details"])
        check_echo(r, dict(DEFAULTS, instructions=INSTR, max_output_tokens=24, temperature=0), "responses")
        bare = expect_status(srv, RESP, {"input": "Hi.", "max_output_tokens": 1}, 200, "bare")
        check_echo(bare, dict(DEFAULTS, max_output_tokens=1), "bare")
        set_all = {"top_p": 0.5, "parallel_tool_calls": False, "metadata": {"k": "v"}, "user": "u1",
                   "reasoning": {"effort": "low"}, "truncation": "auto", "tool_choice": "none"}
        r3 = expect_status(srv, RESP, dict(body, **set_all), 200, "settings")
        check_echo(r3, dict(DEFAULTS, instructions=INSTR, max_output_tokens=24, temperature=0, **set_all), "settings")
        # the same conversation as message items
        items = [{"role": "system", "content": INSTR},
                 {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Tell me a story."}]}]
        r2 = expect_status(srv, RESP, dict(body, instructions=None, input=items), 200, "input items")
        expect(output_text(r2) == want["content"], "items %r != %r" % (output_text(r2), want["content"]))
        # streamed: events in order, sequence numbers 0.., deltas join to the text
        events = named_events(srv, RESP, body)
        names = [n for n, _ in events]
        expect(names[:4] == TEXT_ORDER, "opening %r" % names[:5])
        expect(names[-4:-1] == TEXT_END and names[-1] == ("response.incomplete" if cut else "response.completed"),
               "closing %r" % names[-5:])
        expect(set(names[4:-4]) == {"response.output_text.delta"}, "middle %r" % sorted(set(names[4:-4])))
        expect([e["sequence_number"] for _, e in events] == list(range(len(events))), "sequence numbers")
        deltas = "".join(e["delta"] for n, e in events if n == "response.output_text.delta")
        expect(deltas == output_text(r), "stream %r != %r" % (deltas, output_text(r)))
        expect(events[-4][1]["text"] == deltas, "output_text.done %r" % events[-4][1])
        final = events[-1][1]["response"]
        expect(output_text(final) == deltas and final["usage"] == r["usage"], "final response %r" % final)
        item_id = events[2][1]["item"]["id"]
        expect(all(e["item_id"] == item_id for n, e in events[3:-1] if "item_id" in e), "item ids")
        expect(final["output"] == [events[-2][1]["item"]], "output_item.done %r, final %r" % (events[-2], final))
        expect(final["output"][0]["id"] == item_id, "final item id")
        created = events[0][1]["response"]
        expect(created["status"] == "in_progress" and created["usage"] is None and created["output"] == [],
               "response.created %r" % created)
        check_echo(created, dict(DEFAULTS, instructions=INSTR, max_output_tokens=24, temperature=0), "created")
        check_echo(final, dict(DEFAULTS, instructions=INSTR, max_output_tokens=24, temperature=0), "final")


def test_telemetry():
    """llama-server's stream telemetry on /v1/responses, as on its chat path:
    return_progress is a response.in_progress event per prompt batch with
    prompt_progress beside the response; timings_per_token puts timings on
    every delta and on the terminal event. Without them, neither."""
    inp = " ".join(["the little dog ran home"] * 8)
    with Server("-b", "16", "--parallel", "1", "-c", "256") as srv:
        body = {"input": inp, "max_output_tokens": 6, "temperature": 0}
        events = named_events(srv, RESP, dict(body, return_progress=True, timings_per_token=True))
        names = [n for n, _ in events]
        expect(names[:2] == ["response.created", "response.in_progress"], "opening %r" % names[:3])
        marks = [e["prompt_progress"] for n, e in events if "prompt_progress" in e]
        expect(len(marks) >= 2 and all(n == "response.in_progress" for n, e in events if "prompt_progress" in e),
               "progress events %r" % names)
        expect(all(m["total"] > 0 and m["processed"] >= m["cache"] for m in marks) and
               marks[-1]["processed"] == marks[-1]["total"], "progress marks %r" % marks)
        expect(all(e["response"]["status"] == "in_progress" for n, e in events if "prompt_progress" in e),
               "progress events carry the response in progress")
        deltas = [e for n, e in events if n == "response.output_text.delta"]
        expect(deltas and all("prompt_per_second" in e["timings"] and "predicted_per_second" in e["timings"]
                              for e in deltas), "timings on every delta %r" % deltas[:2])
        last = events[-1][1]
        expect(last["timings"]["predicted_n"] == last["response"]["usage"]["output_tokens"],
               "terminal event's timings %r" % last)
        plain = named_events(srv, RESP, body)
        expect(not [e for _, e in plain if "prompt_progress" in e or "timings" in e], "no telemetry unasked")
        expect("".join(e["delta"] for e in deltas) ==
               "".join(e["delta"] for n, e in plain if n == "response.output_text.delta"), "same text either way")


def test_json_schema():
    jsonschema = jsonschema_module()
    with Server() as srv:
        fmt = {"type": "json_schema", "name": "paint", "schema": PAINT_SCHEMA, "strict": True}
        body = {"input": "Pick a color.", "max_output_tokens": 60, "text": {"format": fmt}}
        for seed_temp in (0, 0.8):
            r = expect_status(srv, RESP, dict(body, temperature=seed_temp), 200, "json_schema")
            expect(r["status"] == "completed", "json_schema did not complete: %r" % r)
            jsonschema.validate(json.loads(output_text(r)), PAINT_SCHEMA)
            expect(r["text"] == {"format": fmt} and r["temperature"] == seed_temp, "echo %r" % r)
        events = named_events(srv, RESP, dict(body, temperature=0))
        text = "".join(e["delta"] for n, e in events if n == "response.output_text.delta")
        jsonschema.validate(json.loads(text), PAINT_SCHEMA)
        no_schema = dict(body, text={"format": {"type": "json_schema", "name": "x"}})
        e = expect_status(srv, RESP, no_schema, 400, "no schema")
        expect(e["error"]["param"] == "text.format.schema", "param %r" % e)
        e = expect_status(srv, RESP, dict(body, text={"format": {"type": "json_schema", "name": "x",
                                                                 "schema": {"type": "wobbly"}}}), 400, "bad schema")
        expect(e["error"]["param"].startswith("text.format"), "bad schema param %r" % e)


def test_reasoning():
    with tempfile.TemporaryDirectory() as tmp, thinking_server(tmp) as srv:
        want, usage, _ = chat_reply(srv, [{"role": "user", "content": "hi"}], 12)
        expect(want.get("reasoning_content") and not want["content"], "no reasoning to test with: %r" % want)
        body = {"input": "hi", "max_output_tokens": 12, "temperature": 0}
        r = expect_status(srv, RESP, body, 200, "reasoning")
        expect([it["type"] for it in r["output"]] == ["reasoning"] and
               r["output"][0]["content"][0]["text"] == want["reasoning_content"], "reasoning %r vs %r" % (r, want))
        events = named_events(srv, RESP, body)
        thought = "".join(e["delta"] for n, e in events if n == "response.reasoning_text.delta")
        expect(thought == want["reasoning_content"], "streamed %r" % thought)
        final = events[-1][1]["response"]["output"]
        expect([(it["type"], it["content"]) for it in final] == [(it["type"], it["content"]) for it in r["output"]],
               "final %r" % events[-1][1])


BAD = [
    ({}, "input"),
    ({"input": []}, "input"),
    ({"input": 7}, "input"),
    ({"input": [{"type": "message", "role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
     "input[0].content"),
    ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0]"),
    ({"input": [{"type": "message", "role": "wizard", "content": "x"}]}, "input[0]"),
    ({"input": "x", "store": True}, "store"),
    ({"input": "x", "previous_response_id": "resp_1"}, "previous_response_id"),
    ({"input": "x", "background": True}, "background"),
    ({"input": "x", "tools": [{"type": "web_search"}]}, "tools[0]"),
    ({"input": "x", "text": {"format": {"type": "yaml"}}}, "text.format.type"),
    ({"input": "x", "max_output_tokens": 0}, "max_output_tokens"),
    ({"input": "x", "temperature": -1}, "temperature"),
    ({"input": "x", "tool_choice": {"type": "function"}}, "tool_choice"),
]


def test_bad_input():
    with Server("-c", "1024", "--parallel", "1") as srv:  # room for the tools' system text
        for body, param in BAD:
            e = expect_status(srv, RESP, body, 400, "bad %r" % body)
            expect(e["error"]["param"] == param, "%r: param %r, want %r" % (body, e["error"].get("param"), param))
        st, _, _ = srv.request("POST", RESP, b"[1, 2")
        expect(st == 400, "bad JSON %d" % st)
        r = expect_status(srv, RESP, {"input": "x", "max_output_tokens": 2, "store": False, "verbosity_knob": 1,
                                      "reasoning": {"effort": "low"}, "metadata": {"k": "v"}}, 200, "unknown field")
        expect(r["usage"]["output_tokens"] <= 2, "after bad input %r" % r)
        expect(srv.wait_log(lambda line: "ignored=" in line and "verbosity_knob" in line), "unknown field not in the request log")
        items = [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
                 {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
                 {"type": "function_call_output", "call_id": "c1", "output": "r"}]
        expect_survives(srv, RESP, {"instructions": "i", "input": items, "max_output_tokens": 2,
                                    "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
                                    "text": {"format": {"type": "json_schema", "name": "n", "schema": {"type": "object"}}}})


def test_input_tokens():
    """POST /v1/responses/input_tokens counts the prompt that /v1/responses
    makes of the same body (instructions, input items, tools), generating
    nothing: OpenAI's {"object": "response.input_tokens", "input_tokens": N}."""
    count = RESP + "/input_tokens"
    with Server("-c", "1024", "--parallel", "1") as srv:  # room for the tools' system text
        _, usage, _ = chat_reply(srv, CHAT_MSGS, 1)
        n = expect_status(srv, count, {"model": "m", "instructions": INSTR, "input": "Tell me a story."}, 200, "count")
        expect(n == {"object": "response.input_tokens", "input_tokens": usage["prompt_tokens"]},
               "input_tokens %r, chat's prompt %r" % (n, usage))
        alone = expect_status(srv, "/responses/input_tokens", {"input": "Tell me a story."}, 200, "without /v1")
        expect(0 < alone["input_tokens"] < n["input_tokens"], "without instructions %r, with %r" % (alone, n))
        items = [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
                 {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
                 {"type": "function_call_output", "call_id": "c1", "output": "r"}]
        body = {"instructions": "i", "input": items, "tools": [{"type": "function", "name": "f",
                                                                  "parameters": {"type": "object"}}]}
        counted = expect_status(srv, count, body, 200, "count items and tools")
        r = expect_status(srv, RESP, dict(body, max_output_tokens=1), 200, "the same body generating")
        expect(counted["input_tokens"] == r["usage"]["input_tokens"],
               "input_tokens %r, the response's usage %r" % (counted, r["usage"]))
        for bad, param in [({"model": "m"}, "input"), ({"input": "x", "previous_response_id": "resp_1"},
                                                       "previous_response_id")]:
            e = expect_status(srv, count, bad, 400, "count %r" % bad)
            expect(e["error"]["param"] == param, "%r: param %r, want %r" % (bad, e["error"].get("param"), param))
        st, _, _ = srv.request("GET", count)
        expect(st == 405, "GET %s: %d" % (count, st))


def test_tools():
    smol = model_cache_file(SMOL)
    tools = [{"type": "function", "name": "get_weather", "description": "Get the current weather in a city",
              "parameters": WEATHER_SCHEMA, "strict": True}]
    ask = [{"role": "user", "content": "What is the weather in Paris?"}]
    with Server("-c", "2048", "--parallel", "1", model=smol) as srv:
        body = {"input": ask, "tools": tools, "tool_choice": {"type": "function", "name": "get_weather"},
                "max_output_tokens": 48, "temperature": 0}
        r = expect_status(srv, RESP, body, 200, "forced call")
        check_response(r, "forced call")
        check_echo(r, {"tools": tools, "tool_choice": body["tool_choice"]}, "forced call")
        calls = [it for it in r["output"] if it["type"] == "function_call"]
        expect(len(calls) == 1 and calls[0]["name"] == "get_weather" and calls[0]["call_id"], "output %r" % r["output"])
        args = json.loads(calls[0]["arguments"])
        expect(isinstance(args.get("city"), str), "arguments %r" % calls[0])
        events = named_events(srv, RESP, body)
        names = [n for n, _ in events]
        expect(names[-4:] == ["response.function_call_arguments.delta", "response.function_call_arguments.done",
                              "response.output_item.done", "response.completed"], "call events %r" % names)
        item = events[-2][1]["item"]
        expect(events[-3][1]["arguments"] == calls[0]["arguments"] and item["arguments"] == calls[0]["arguments"]
               and item["name"] == "get_weather" and item["id"].startswith("fc_") and item["call_id"],
               "streamed call %r vs %r" % (item, calls[0]))
        expect(events[-1][1]["response"]["output"] == [item], "final output %r" % events[-1][1]["response"])
        # the call and its output go back as items; the model answers in text
        turn = ask + [{"type": "function_call", "call_id": calls[0]["call_id"], "name": "get_weather",
                       "arguments": calls[0]["arguments"]},
                      {"type": "function_call_output", "call_id": calls[0]["call_id"],
                       "output": '{"temperature_c": 18, "sky": "sunny"}'}]
        a = expect_status(srv, RESP, {"input": turn, "tools": tools, "max_output_tokens": 24, "temperature": 0}, 200,
                          "function_call_output")
        expect(output_text(a) and not [it for it in a["output"] if it["type"] == "function_call"], "answer %r" % a)


if __name__ == "__main__":
    main([
        ("responses: chat path's text and usage, input items, streamed events", test_text),
        ("responses: return_progress and timings_per_token in the stream", test_telemetry),
        ("responses: text.format json_schema validates", test_json_schema),
        ("responses: a reasoning reply is a reasoning item, streamed and not", test_reasoning),
        ("responses: bad input is a 400 naming the field; unknown fields ignored", test_bad_input),
        ("responses: input_tokens counts the prompt of the same body", test_input_tokens),
        ("responses: function call round trip with SmolLM2", test_tools),
    ])
