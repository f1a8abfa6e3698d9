"""tessera serve driven by the official client SDKs of its other APIs:
`anthropic` (client.messages.create, .stream, .count_tokens, a forced
tool_use with SmolLM2) and `openai` (client.responses.create, streamed and
not, with a JSON schema; client.responses.input_tokens.count). Greedy text equals the chat path's. The SDKs are
imported if installed, else installed into a venv under the build directory;
without PyPI the test is skipped and says why."""
import json

from dialect_common import SMOL, WEATHER_SCHEMA, chat_reply, rerun_in_venv
from serve_common import Failure, Server, check_env, expect, main, model_cache_file

USER = [{"role": "user", "content": "Tell me a story."}]
GREEDY = {"temperature": 0}  # the newest anthropic SDK has no temperature argument; the API still takes it


def anthropic_client(srv, key="none"):
    import anthropic
    return anthropic.Anthropic(base_url="http://127.0.0.1:%d" % srv.port, api_key=key, max_retries=0, timeout=300)


def openai_client(srv):
    import openai
    return openai.OpenAI(base_url="http://127.0.0.1:%d/v1" % srv.port, api_key="none", max_retries=0, timeout=300)


def test_anthropic():
    import anthropic
    import jsonschema
    with Server("--api-key", "k1") as srv:
        c = anthropic_client(srv, "k1")
        want, usage, _ = chat_reply(srv, USER, 24, {"Authorization": "Bearer k1"})
        m = c.messages.create(model="m", max_tokens=24, messages=USER, extra_body=GREEDY)
        expect(m.type == "message" and m.content[0].text == want["content"], "message %r, chat %r" % (m, want))
        # Anthropic's input_tokens counts the prompt past the cached prefix;
        # with the cache fields it is the whole prompt the chat path counts
        prompt = m.usage.input_tokens + m.usage.cache_read_input_tokens + m.usage.cache_creation_input_tokens
        expect(prompt == usage["prompt_tokens"], "usage %r vs %r" % (m.usage, usage))
        with c.messages.stream(model="m", max_tokens=24, messages=USER, extra_body=GREEDY) as s:
            streamed = "".join(s.text_stream)
            final = s.get_final_message()
        expect(streamed == m.content[0].text and final.stop_reason == m.stop_reason, "stream %r != %r" %
               (streamed, m.content[0].text))
        expect(final.usage.output_tokens == m.usage.output_tokens, "usage %r vs %r" % (final.usage, m.usage))
        n = c.messages.count_tokens(model="m", messages=USER)
        expect(n.input_tokens == prompt, "count_tokens %r vs %r" % (n, m.usage))
        schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
                  "additionalProperties": False}
        j = c.messages.create(model="m", max_tokens=40, messages=[{"role": "user", "content": "Answer."}],
                              output_config={"format": {"type": "json_schema", "schema": schema}}, extra_body=GREEDY)
        jsonschema.validate(json.loads(j.content[0].text), schema)
        try:
            anthropic_client(srv, "wrong").messages.create(model="m", max_tokens=2, messages=USER)
            raise Failure("wrong key accepted")
        except anthropic.AuthenticationError as ex:
            expect(ex.status_code == 401, "status %r" % ex.status_code)
        try:
            c.messages.create(model="m", max_tokens=2, messages=[{"role": "system", "content": "x"}])
            raise Failure("bad role accepted")
        except anthropic.BadRequestError as ex:
            expect("messages[0]" in str(ex), "bad request %r" % ex)


def test_anthropic_tool():
    smol = model_cache_file(SMOL)
    with Server("-c", "2048", "--parallel", "1", model=smol) as srv:
        c = anthropic_client(srv)
        tools = [{"name": "get_weather", "description": "Get the weather", "input_schema": WEATHER_SCHEMA}]
        ask = [{"role": "user", "content": "What is the weather in Paris?"}]
        m = c.messages.create(model="m", max_tokens=48, messages=ask, tools=tools, extra_body=GREEDY,
                              tool_choice={"type": "tool", "name": "get_weather"})
        use = [b for b in m.content if b.type == "tool_use"][0]
        expect(m.stop_reason == "tool_use" and isinstance(use.input.get("city"), str), "tool_use %r" % m)
        with c.messages.stream(model="m", max_tokens=48, messages=ask, tools=tools, extra_body=GREEDY,
                               tool_choice={"type": "tool", "name": "get_weather"}) as s:
            final = s.get_final_message()
        suse = [b for b in final.content if b.type == "tool_use"][0]
        expect(suse.input == use.input and suse.name == use.name, "streamed tool_use %r vs %r" % (suse, use))
        a = c.messages.create(model="m", max_tokens=16, tools=tools, messages=ask + [
            {"role": "assistant", "content": m.content},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "sunny, 18 C"}]}])
        expect(a.content and a.content[0].type == "text", "answer %r" % a)


def test_responses():
    import jsonschema
    with Server() as srv:
        c = openai_client(srv)
        want, usage, _ = chat_reply(srv, USER, 24)
        r = c.responses.create(model="m", input="Tell me a story.", max_output_tokens=24, temperature=0)
        expect(r.output_text == want["content"], "responses %r != chat %r" % (r.output_text, want["content"]))
        expect(r.usage.input_tokens == usage["prompt_tokens"], "usage %r vs %r" % (r.usage, usage))
        n = c.responses.input_tokens.count(model="m", input="Tell me a story.")
        expect(n.object == "response.input_tokens" and n.input_tokens == usage["prompt_tokens"],
               "input_tokens.count %r, chat's prompt %r" % (n, usage))
        kinds, deltas, final = [], [], None
        for ev in c.responses.create(model="m", input="Tell me a story.", max_output_tokens=24, temperature=0,
                                     stream=True):
            kinds.append(ev.type)
            if ev.type == "response.output_text.delta":
                deltas.append(ev.delta)
            if ev.type in ("response.completed", "response.incomplete"):
                final = ev.response
        expect(kinds[0] == "response.created" and final is not None, "events %r" % kinds)
        expect("".join(deltas) == r.output_text == final.output_text, "streamed %r" % deltas)
        schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
                  "additionalProperties": False}
        j = c.responses.create(model="m", input="Answer.", max_output_tokens=40, temperature=0,
                               text={"format": {"type": "json_schema", "name": "answer", "schema": schema,
                                                "strict": True}})
        jsonschema.validate(json.loads(j.output_text), schema)


if __name__ == "__main__":
    check_env()
    rerun_in_venv(["anthropic", "openai", "jsonschema"])
    main([
        ("anthropic SDK: messages, stream, count_tokens, output_config, errors", test_anthropic),
        ("anthropic SDK: forced tool_use and tool_result with SmolLM2", test_anthropic_tool),
        ("openai SDK: responses, streamed, json_schema, input_tokens.count", test_responses),
    ])
