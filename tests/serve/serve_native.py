"""llama-server's native API and the drop-in behaviours of tessera serve,
over raw HTTP with stories260K:
/completion with every prompt shape, n_predict, return_tokens, n_probs
(post_sampling_probs too), id_slot, streams and timings; /tokenize and /detokenize; /infill; the field
policy (unknown fields ignored and logged, known unhonourable ones a 400);
CORS; /v1/completions prompt lists; /v1/models aliases and /v1/models/{id};
/props params; server-side sampling defaults; --no-webui, --no-slots, a
--host list, --slot-save-path made; chat_template_kwargs, date_string and
add_generation_prompt in the template; text parts joined with a newline;
ignore_eos; post_sampling_probs on chat; Vertex AI's /predict; a streamed list
of prompts on /completion.
Bad input is one clear 4xx and the server goes on serving."""
import json
import math
import os
import socket
import sys
import tempfile

from serve_common import MODEL, Failure, Server, error_body, expect, free_port, main

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
from gguf_edit import write_fim_model  # noqa: E402


def fim_model(tmp):
    """stories260K with FIM tokens (gguf_edit.write_fim_model)."""
    return write_fim_model(MODEL, os.path.join(tmp, "stories260K-fim.gguf"))

PROMPT = "Once upon a time"


def post(srv, path, body, status=200):
    st, obj = srv.json("POST", path, body)
    expect(st == status, "%s %r: status %d (want %d) %r" % (path, body, st, status, obj))
    return obj


def tokenize(srv, text, **kw):
    return post(srv, "/tokenize", dict(kw, content=text))["tokens"]


def bad(srv, path, body, status, param, what):
    st, obj = srv.json("POST", path, body)
    expect(st == status, "%s: status %d, want %d: %r" % (what, st, status, obj))
    e = error_body(obj, what)
    expect(param is None or e["param"] == param, "%s: param %r, want %r" % (what, e["param"], param))
    return e


def test_completion_shapes():
    with Server("--parallel", "2", "--temp", "0") as srv:
        one = post(srv, "/completion", {"prompt": PROMPT, "n_predict": 8, "return_tokens": True})
        for k in ("content", "tokens", "id_slot", "stop", "stop_type", "timings", "tokens_predicted",
                  "tokens_evaluated", "generation_settings", "prompt", "has_new_line", "truncated"):
            expect(k in one, "/completion result lacks %s: %r" % (k, one))
        expect(one["stop"] is True and one["stop_type"] == "limit", "stop fields %r" % one)
        expect(len(one["tokens"]) == 8 and one["timings"]["predicted_n"] == 8, "8 tokens: %r" % one)
        n_prompt = len(tokenize(srv, PROMPT, add_special=True))
        expect(one["timings"]["prompt_n"] + one["timings"]["cache_n"] == n_prompt == one["tokens_evaluated"],
               "prompt counts %r vs %d" % (one["timings"], n_prompt))
        expect(one["prompt"].startswith("<s>"), "the prompt text shows BOS: %r" % one["prompt"])
        # the generated ids detokenize to the content; the same request as token ids gives the same
        detok = post(srv, "/detokenize", {"tokens": one["tokens"]})["content"]
        expect(detok == one["content"], "detokenized %r != content %r" % (detok, one["content"]))
        ids = tokenize(srv, PROMPT, add_special=True)
        again = post(srv, "/completion", {"prompt": ids, "n_predict": 8})
        expect(again["content"] == one["content"], "token prompt %r != %r" % (again["content"], one["content"]))
        mixed = post(srv, "/completion", {"prompt": [ids[0], PROMPT], "n_predict": 8})  # BOS id, then text
        expect(isinstance(mixed, dict) and mixed["content"] == one["content"], "mixed prompt %r" % mixed)
        many = post(srv, "/completion", {"prompt": [ids, PROMPT], "n_predict": 8})
        expect(isinstance(many, list) and len(many) == 2 and [m["index"] for m in many] == [0, 1],
               "a list of prompts answers a list: %r" % many)
        expect(many[0]["content"] == many[1]["content"] == one["content"], "list contents %r" % many)
        # response_fields keeps only those ("a/b" reaches into objects)
        few = post(srv, "/completion", {"prompt": PROMPT, "n_predict": 4,
                                        "response_fields": ["content", "generation_settings/n_predict"]})
        expect(set(few) == {"content", "generation_settings/n_predict"} and few["generation_settings/n_predict"] == 4,
               "response_fields %r" % few)


def test_completion_probs_stream_slot():
    with Server("--parallel", "2", "--temp", "0") as srv:
        res = post(srv, "/completion", {"prompt": PROMPT, "n_predict": 5, "n_probs": 3})
        probs = res["completion_probabilities"]
        expect(len(probs) == 5, "5 entries: %r" % probs)
        for p in probs:
            expect(p["logprob"] <= 0 and len(p["top_logprobs"]) == 3 and isinstance(p["bytes"], list), "entry %r" % p)
            expect(p["id"] == p["top_logprobs"][0]["id"], "greedy picks the most likely: %r" % p)
        events, done = srv.stream("/completion", {"prompt": PROMPT, "n_predict": 5, "n_probs": 3})
        expect(not done, "/completion streams end without [DONE]")
        expect(events[-1]["stop"] is True and all(e["stop"] is False for e in events[:-1]), "stop flags")
        text = "".join(e["content"] for e in events)
        expect(text == res["content"], "stream %r != %r" % (text, res["content"]))
        expect(all(len(e["completion_probabilities"]) == 1 for e in events[:-1]), "one token per event")
        expect(events[-1]["timings"]["predicted_n"] == 5, "final event statistics %r" % events[-1])
        for slot in (0, 1):
            r = post(srv, "/completion", {"prompt": PROMPT, "n_predict": 2, "id_slot": slot})
            expect(r["id_slot"] == slot, "id_slot %d ran in %r" % (slot, r["id_slot"]))
        bad(srv, "/completion", {"prompt": PROMPT, "id_slot": 2}, 400, "id_slot", "id_slot out of range")


def test_post_sampling_probs():
    """post_sampling_probs: prob/top_probs are the sampler's distribution after
    its filters, renormalized: with top-k 3 at temperature 1 the three most
    likely tokens' model probabilities scaled to sum 1."""
    with Server() as srv:
        body = {"prompt": PROMPT, "n_predict": 6, "n_probs": 5, "seed": 7, "temperature": 1.0, "top_k": 3,
                "top_p": 1.0, "min_p": 0.0}
        pre = post(srv, "/completion", body)["completion_probabilities"]
        res = post(srv, "/completion", dict(body, post_sampling_probs=True))
        expect(res["generation_settings"]["post_sampling_probs"] is True, "settings %r" % res["generation_settings"])
        got = res["completion_probabilities"]
        expect(len(got) == 6 and len(pre) == 6, "6 entries each: %r" % got)
        for a, b in zip(pre, got):
            expect(a["id"] == b["id"], "the same seed draws the same tokens: %r %r" % (a, b))
            expect("logprob" not in b and "top_logprobs" not in b, "probs, not logprobs: %r" % b)
            top = b["top_probs"]
            expect(len(top) == 3, "top-k 3 leaves 3 of the 5 asked: %r" % top)
            z = sum(math.exp(t["logprob"]) for t in a["top_logprobs"][:3])
            for t, m in zip(top, a["top_logprobs"][:3]):
                expect(t["id"] == m["id"] and abs(t["prob"] - math.exp(m["logprob"]) / z) < 1e-4,
                       "renormalized: %r vs %r" % (t, m))
            expect(abs(sum(t["prob"] for t in top) - 1.0) < 1e-4, "sums to 1: %r" % top)
            expect([t["prob"] for t in top if t["id"] == b["id"]] == [b["prob"]], "the pick's prob %r" % b)
        greedy = post(srv, "/completion", {"prompt": PROMPT, "n_predict": 3, "n_probs": 4, "temperature": 0,
                                           "post_sampling_probs": True})["completion_probabilities"]
        expect(all(e["prob"] == 1.0 and [t["prob"] for t in e["top_probs"]] == [1.0] for e in greedy),
               "greedy: the pick alone, probability 1: %r" % greedy)
        events, _ = srv.stream("/completion", dict(body, post_sampling_probs=True, stream=True))
        streamed = [e["completion_probabilities"][0] for e in events if e.get("completion_probabilities")]
        expect([e["id"] for e in streamed] == [e["id"] for e in got] and all("top_probs" in e for e in streamed),
               "stream: the same entries %r" % streamed)
        bad(srv, "/completion", dict(body, post_sampling_probs="yes"), 400, "post_sampling_probs", "not a bool")


def test_tokenizer_endpoints():
    with Server() as srv:
        text = "Hello world 媽"
        plain = tokenize(srv, text)
        withp = tokenize(srv, text, with_pieces=True)
        expect([t["id"] for t in withp] == plain, "with_pieces ids %r vs %r" % (withp, plain))
        expect(all("piece" in t for t in withp), "pieces %r" % withp)
        bos = tokenize(srv, text, add_special=True)
        expect(bos[0] == 1 and bos[1:] == plain, "add_special adds BOS: %r" % bos)
        expect(post(srv, "/detokenize", {"tokens": plain})["content"].strip() == text, "round trip")
        bad(srv, "/detokenize", {"tokens": [1, 10 ** 9]}, 400, "tokens", "token out of range")
        bad(srv, "/tokenize", {"content": 5}, 400, "content", "content not a string")
        # /apply-template honours add_generation_prompt
        msgs = [{"role": "user", "content": "hi"}]
        on = post(srv, "/apply-template", {"messages": msgs})["prompt"]
        off = post(srv, "/apply-template", {"messages": msgs, "add_generation_prompt": False})["prompt"]
        expect(on.startswith(off) and len(on) > len(off), "add_generation_prompt: %r vs %r" % (on, off))


def test_infill():
    with Server() as srv:  # stories260K has no FIM tokens
        e = bad(srv, "/infill", {"input_prefix": "a", "input_suffix": "b"}, 400, "input_prefix", "no FIM tokens")
        expect("fill-in-the-middle" in e["message"], "message %r" % e["message"])
        expect(post(srv, "/completion", {"prompt": PROMPT, "n_predict": 1})["content"], "serves after the 400")
    tmp = tempfile.mkdtemp(prefix="tessera-fim-")
    with Server("--temp", "0", model=fim_model(tmp)) as srv:
        body = {"input_prefix": "Once upon", "input_suffix": " the end.", "prompt": " a",
                "input_extra": [{"filename": "a.txt", "text": "Lily"}], "n_predict": 4, "return_tokens": True}
        res = post(srv, "/infill", body)
        # the prompt is BOS, FIM_PRE prefix prompt FIM_SUF suffix FIM_MID (llama-server's layout;
        # the extra chunk is left out: this vocabulary has no file-separator token)
        want = [1] + [4] + tokenize(srv, "Once upon") + tokenize(srv, " a") + [5] + \
            tokenize(srv, " the end.") + [6]
        expect(res["tokens_evaluated"] == len(want), "infill prompt %d tokens, want %d" % (res["tokens_evaluated"], len(want)))
        same = post(srv, "/completion", {"prompt": want, "n_predict": 4})
        expect(same["content"] == res["content"], "infill = its prompt as ids: %r vs %r" % (res["content"], same["content"]))
        bad(srv, "/infill", {"input_prefix": 3}, 400, "input_prefix", "prefix not a string")
        bad(srv, "/infill", {"input_extra": [{"text": 1}]}, 400, "text", "extra text not a string")


def test_field_policy():
    with Server("--parallel", "2") as srv:
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "user": "u", "store": True,
                "metadata": {"a": "b"}, "service_tier": "auto", "reasoning_effort": "low",
                "prompt_cache_key": "k", "verbosity": "low", "frobnicate": {"x": [1]}}
        obj = post(srv, "/v1/chat/completions", body)
        expect(obj["usage"]["completion_tokens"] <= 2, "unknown fields ignored: %r" % obj)
        post(srv, "/v1/completions", {"prompt": PROMPT, "max_tokens": 2, "n_predict": 5, "top_k": 3,
                                      "repeat_penalty": 1.1, "cache_prompt": False, "id_slot": 1,
                                      "samplers": ["top_k", "temperature"]})
        bad(srv, "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "mirostat": 3}, 400,
            "mirostat", "mirostat 3")
        bad(srv, "/v1/completions", {"prompt": "x", "tools": [{"type": "function"}]}, 400, "tools",
            "a chat field on completions")
        bad(srv, "/v1/completions", {"prompt": "x", "samplers": ["nope"]}, 400, "samplers", "unknown sampler")
    log = "".join(srv.stderr_lines)
    expect("ignored=" in log and "frobnicate" in log and "service_tier" in log,
           "the request log names the ignored fields:\n" + log)


def test_prompt_lists():
    with Server("--parallel", "2", "--temp", "0") as srv:
        obj = post(srv, "/v1/completions", {"prompt": [PROMPT, "The little dog"], "max_tokens": 4})
        ch = sorted(obj["choices"], key=lambda c: c["index"])
        expect([c["index"] for c in ch] == [0, 1], "one choice per prompt: %r" % obj)
        for i, p in enumerate([PROMPT, "The little dog"]):
            alone = post(srv, "/v1/completions", {"prompt": p, "max_tokens": 4})["choices"][0]["text"]
            expect(ch[i]["text"] == alone, "prompt %d: %r != %r" % (i, ch[i]["text"], alone))
        expect(obj["usage"]["completion_tokens"] == 8, "usage summed %r" % obj["usage"])
        two = post(srv, "/v1/completions", {"prompt": [PROMPT, "The little dog"], "max_tokens": 2, "n": 2,
                                            "temperature": 1, "seed": 3})
        expect(sorted(c["index"] for c in two["choices"]) == [0, 1, 2, 3], "n x prompts indexes %r" % two)
        bad(srv, "/v1/completions", {"prompt": [PROMPT, PROMPT], "stream": True}, 400, "stream", "streamed list")


def test_cors_and_models():
    with Server("--api-key", "k", "--alias", "zeta,alpha", "--tags", "chat,small") as srv:
        st, hd, _ = srv.request("OPTIONS", "/v1/chat/completions", None,
                                {"Origin": "https://app.example", "Access-Control-Request-Method": "POST",
                                 "Access-Control-Request-Headers": "Authorization, Content-Type"})
        expect(st == 200 and hd.get("access-control-allow-origin") == "https://app.example",
               "preflight without a key: %d %r" % (st, hd))
        expect("authorization" in hd.get("access-control-allow-headers", "").lower() and
               "POST" in hd.get("access-control-allow-methods", ""), "preflight headers %r" % hd)
        auth = {"Authorization": "Bearer k", "Origin": "https://app.example"}
        st, hd, data = srv.request("GET", "/v1/models", None, auth)
        expect(st == 200 and hd.get("access-control-allow-origin") == "https://app.example", "CORS on GET %r" % hd)
        m = json.loads(data)["data"][0]
        expect(m["id"] == "alpha" and set(m["aliases"]) == {"zeta", "alpha"} and m["tags"] == ["chat", "small"],
               "aliases and tags %r" % m)
        st, one = srv.json("GET", "/v1/models/zeta", headers=auth)
        expect(st == 200 and one["id"] == "alpha", "/v1/models/zeta %d %r" % (st, one))
        st, miss = srv.json("GET", "/v1/models/nope", headers=auth)
        expect(st == 404 and error_body(miss, "404")["code"] == "model_not_found", "unknown model %d %r" % (st, miss))
        st, _ = srv.json("GET", "/v1/models", headers={"X-Api-Key": "k"})
        expect(st == 200, "X-Api-Key accepted: %d" % st)
    with Server("--cors-origin", "localhost") as srv:
        for origin, allowed in (("http://localhost:3000", True), ("http://localhost.evil.com", False)):
            st, hd, _ = srv.request("OPTIONS", "/completion", None, {"Origin": origin})
            expect(st == 200 and (hd.get("access-control-allow-origin") == origin) == allowed,
                   "--cors-origin localhost, %s: %r" % (origin, hd))


def test_server_options():
    tmp = tempfile.mkdtemp(prefix="tessera-native-")
    slot_dir = os.path.join(tmp, "slots")
    tmpl = os.path.join(tmp, "t.jinja")
    with open(tmpl, "w") as f:
        f.write("{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"
                "{% if flag is defined %}flag={{ flag }} {% endif %}date={{ date_string }}"
                "{% if add_generation_prompt %}\n[assistant]{% endif %}")
    try:  # the second address, where the machine has IPv6 loopback
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
        hosts = "127.0.0.1,::1"
    except OSError:
        hosts = "127.0.0.1"
    args = ("--temp", "0", "--seed", "42", "--no-webui", "--no-slots", "--slot-save-path", slot_dir,
            "--host", hosts, "--chat-template-file", tmpl, "-n", "6")
    with Server(*args) as srv:
        expect(os.path.isdir(slot_dir), "--slot-save-path was made")
        st, _, _ = srv.request("GET", "/")
        expect(st == 404, "--no-webui: GET / is %d" % st)
        st, _ = srv.json("GET", "/slots")
        expect(st == 501, "--no-slots: GET /slots is %d" % st)
        props = srv.json("GET", "/props")[1]
        params = props["default_generation_settings"]["params"]
        expect(params["seed"] == 42 and params["temperature"] == 0, "/props params %r" % params)
        a = post(srv, "/completion", {"prompt": PROMPT})
        b = post(srv, "/completion", {"prompt": PROMPT})
        expect(a["content"] == b["content"] and a["tokens_predicted"] == 6, "--temp 0 and -n as defaults")
        expect(a["generation_settings"]["seed"] == 42, "--seed default %r" % a["generation_settings"])
        parts = [{"type": "text", "text": "What is"}, {"type": "text", "text": "the best book"}]
        p = post(srv, "/apply-template", {"messages": [{"role": "user", "content": parts}],
                                          "chat_template_kwargs": {"flag": "yes"}})["prompt"]
        expect("What is\nthe best book" in p, "text parts joined with a newline: %r" % p)
        expect("flag=yes" in p and "date=" in p and "date=\n" not in p, "kwargs and date_string: %r" % p)
        st, hd, _ = srv.request("GET", "/health")
        expect(st == 200, "health %d" % st)
    log = "".join(srv.stderr_lines)
    expect(hosts == "127.0.0.1" or "also on ::1" in log, "the second address is listened on:\n" + log)


def test_named_templates():
    msgs = {"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "hi"}]}
    want = {"command-r": "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>hi<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|>"
                         "<|CHATBOT_TOKEN|>",
            "phi4": "<|im_start|>user<|im_sep|>hi<|im_end|><|im_start|>assistant<|im_sep|>",
            "vicuna": "S\n\nUSER: hi\nASSISTANT:",
            # a template given as its text (no Jinja in it: printed as is, as llama-server does)
            "This is not a chat template, it is": "This is not a chat template, it is"}
    for name, tail in want.items():
        with Server("--chat-template", name) as srv:
            p = post(srv, "/apply-template", msgs)["prompt"]
            expect(p.endswith(tail), "--chat-template %s: %r" % (name, p))
    # llama-server's built-ins write no BOS text (the exact command-r prompt of
    # its test_apply_chat_template); the tokenizer adds BOS, once
    for name in ("command-r", "llama3", "gemma", "mistral", "llama4", "deepseek3"):
        with Server("--chat-template", name, "-c", "1024") as srv:
            p = post(srv, "/apply-template", msgs)["prompt"]
            expect(not p.startswith("<s>"), "--chat-template %s writes the BOS text: %r" % (name, p))
            toks = tokenize(srv, p, add_special=True, parse_special=True)
            bos = toks[0]
            expect(toks.count(bos) == 1 and bos == tokenize(srv, "<s>", parse_special=True)[0],
                   "%s: BOS once, first: %r" % (name, toks[:4]))
            r = post(srv, "/v1/chat/completions", dict(msgs, max_tokens=1))
            expect(r["usage"]["prompt_tokens"] == len(toks), "%s: the model reads %d tokens, the template's text "
                   "with BOS is %d" % (name, r["usage"]["prompt_tokens"], len(toks)))
    with Server("--chat-template", "command-r") as srv:
        p = post(srv, "/apply-template", {"messages": [{"role": "system", "content": "You are a test."},
                                                       {"role": "user", "content": "Hi there"}]})["prompt"]
        expect(p == "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are a test.<|END_OF_TURN_TOKEN|>"
               "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hi there<|END_OF_TURN_TOKEN|>"
               "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>", "command-r: %r" % p)


def test_prefill_verbose_errors():
    """A final assistant message is continued (llama-server's prefill, vLLM's
    continue_final_message); verbose gives __verbose with the prompt as read;
    a prompt over the slot is llama-server's exceed_context_size_error with
    OpenAI's code; input_tokens counts a chat request's prompt."""
    conv = [{"role": "system", "content": "Book"}, {"role": "user", "content": "What is the best book"}]
    with Server("--chat-template", "llama3", "--parallel", "2", "-c", "512") as srv:
        head = post(srv, "/apply-template", {"messages": conv})["prompt"]
        for content, tail in (("Whill", "Whill"), ([{"type": "text", "text": "Wh"}, {"type": "text", "text": "ill"}],
                                                    "Wh\n\nill")):
            p = post(srv, "/apply-template", {"messages": conv + [{"role": "assistant", "content": content}]})["prompt"]
            expect(p == head + tail, "prefill %r: %r (want %r + %r)" % (content, p, head, tail))
            p = post(srv, "/apply-template", {"messages": conv + [{"role": "assistant", "content": content}],
                                              "add_generation_prompt": False, "continue_final_message": True})["prompt"]
            expect(p == head + tail, "continue_final_message %r: %r" % (content, p))
        # add_generation_prompt false alone renders the assistant turn whole (closed)
        p = post(srv, "/apply-template", {"messages": conv + [{"role": "assistant", "content": "Whill"}],
                                          "add_generation_prompt": False})["prompt"]
        expect(p.endswith("Whill<|eot_id|>"), "no prefill without the generation prompt: %r" % p)
        r = post(srv, "/v1/chat/completions", {"messages": conv + [{"role": "assistant", "content": "Once"}],
                                               "max_tokens": 4, "temperature": 0, "verbose": True})
        v = r.get("__verbose", {})
        expect(v.get("prompt", "").endswith("assistant<|end_header_id|>\n\nOnce"), "__verbose prompt %r" % v)
        expect(v.get("n_prompt_tokens") == r["usage"]["prompt_tokens"], "__verbose n_prompt_tokens %r" % v)
        expect(not r["choices"][0]["message"]["content"].startswith("Once"), "the prefill is not in the reply")
        r = post(srv, "/v1/chat/completions", {"messages": conv, "max_tokens": 2})
        expect("__verbose" not in r and "timings" in r, "no __verbose unless asked, llama-server's timings: %r" % r)
        n = post(srv, "/v1/chat/completions/input_tokens", {"messages": conv})["input_tokens"]
        expect(n == r["usage"]["prompt_tokens"], "input_tokens %d, usage %r" % (n, r["usage"]))
        two = conv + [{"role": "assistant", "content": "a"}, {"role": "assistant", "content": "b"}]
        bad(srv, "/v1/chat/completions", {"messages": two}, 400, "messages", "two final assistant messages")
        bad(srv, "/v1/chat/completions", {"messages": conv + [{"role": "assistant", "content": "a"}],
                                          "add_generation_prompt": True, "continue_final_message": True},
            400, "continue_final_message", "continue_final_message with add_generation_prompt")
        bad(srv, "/v1/chat/completions", {"messages": conv, "continue_final_message": True}, 400,
            "continue_final_message", "continue_final_message without an assistant message")
        e = bad(srv, "/v1/chat/completions", {"messages": conv * 40}, 400, "messages", "over the slot")
        expect(e["type"] == "exceed_context_size_error" and e["code"] == "context_length_exceeded" and
               e["n_ctx"] == 256 and e["n_prompt_tokens"] > 256 and "exceeds the available context size" in e["message"],
               "context error %r" % e)
        st, obj = srv.json("GET", "/health")
        expect(st == 200, "health after the errors")


def test_progress_metrics_slots():
    """return_progress: one prompt_progress per batch, from the cached tokens
    to the whole prompt; timings_per_token; llamacpp:* metrics beside ours;
    a slot holds -c / parallel tokens, prompt and output together (truncated);
    --kv-unified lets one slot use the whole cache."""
    prompt = " ".join(["the little dog ran home"] * 8)
    with Server("-b", "16", "--parallel", "1", "-c", "128") as srv:
        n_prompt = len(tokenize(srv, prompt, add_special=True))
        for cached in (False, True):
            events, _ = srv.stream("/completion", {"prompt": prompt, "n_predict": 2, "return_progress": True,
                                                  "timings_per_token": True})
            marks = [e["prompt_progress"] for e in events if "prompt_progress" in e]
            expect(marks and marks[0]["processed"] == marks[0]["cache"] and marks[-1]["processed"] == n_prompt and
                   all(m["total"] == n_prompt for m in marks), "progress %r (prompt %d)" % (marks, n_prompt))
            expect(all(b["processed"] > a["processed"] for a, b in zip(marks, marks[1:])), "progress grows %r" % marks)
            want = 2 if cached else 1 + (n_prompt + 15) // 16
            expect(len(marks) == want, "%d progress events, want %d (cached %s): %r" % (len(marks), want, cached, marks))
            expect(all("timings" in e for e in events), "timings_per_token: timings in every event")
        st, hd, body = srv.request("GET", "/metrics")
        text = body.decode()
        expect(st == 200 and hd.get("process-start-time-unix", "").isdigit(), "metrics header %r" % hd)
        vals = dict(line.split(" ", 1) for line in text.splitlines() if line and not line.startswith("#") and "{" not in line)
        expect(float(vals["llamacpp:prompt_tokens_total"]) == float(vals["tessera_prompt_tokens_total"]) and
               float(vals["llamacpp:tokens_predicted_total"]) == 4 and
               float(vals["llamacpp:prompt_tokens_cached_total"]) == n_prompt - 1 and
               float(vals["llamacpp:n_decode_total"]) == float(vals["tessera_decode_steps_total"]),
               "llamacpp metrics %r" % {k: v for k, v in vals.items() if k.startswith("llamacpp")})
        r = post(srv, "/completion", {"prompt": "Once", "n_predict": -1, "temperature": 0})
        expect(r["tokens_evaluated"] + r["tokens_predicted"] == 128 and r["truncated"] and r["stop_type"] == "limit",
               "a full slot: %d + %d tokens, truncated %r" % (r["tokens_evaluated"], r["tokens_predicted"], r["truncated"]))
        slots = srv.json("GET", "/slots")[1]
        expect(slots[0]["next_token"][0]["n_remain"] == -1, "idle slot next_token %r" % slots[0])
    with Server("--parallel", "2", "-c", "128", "--kv-unified") as srv:
        r = post(srv, "/completion", {"prompt": "Once", "n_predict": 100, "temperature": 0})
        expect(r["tokens_predicted"] == 100, "--kv-unified: one slot past -c / parallel: %d" % r["tokens_predicted"])
        # both slots at once need more cells than the cache has: the step that finds none fails (500).
        # A reply of 120 tokens takes ~25 ms here, so two requests started together may still not
        # overlap (the first done before the second's prompt): up to 5 tries, each must be right.
        import threading
        for attempt in range(5):
            out = [None, None]
            together = threading.Barrier(2)

            def go(k):
                together.wait()
                out[k] = srv.json("POST", "/completion", {"prompt": "Once", "n_predict": 120, "temperature": 0,
                                                           "cache_prompt": False})
            ts = [threading.Thread(target=go, args=(k,)) for k in range(2)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            expect(all(o[0] == 200 or (o[0] == 500 and "context size has been exceeded" in o[1]["error"]["message"])
                       for o in out), "--kv-unified overflow, try %d: %r" % (attempt, out))
            if any(o[0] == 500 for o in out):
                break
        expect(any(o[0] == 500 for o in out), "--kv-unified overflow: 5 tries of two requests at once never "
               "overflowed: %r" % out)
        expect(srv.json("GET", "/health")[0] == 200, "health after the overflow")


def test_ignore_eos():
    """ignore_eos bans every end-of-generation token (bias -inf), so that a
    reply that would end at once runs to n_predict; generation_settings
    lists the bans (bias null: -inf), as llama-server's."""
    with Server("--temp", "0") as srv:
        eos = {"prompt": PROMPT, "n_predict": 8, "logit_bias": [[2, 30]], "return_tokens": True}
        ends = post(srv, "/completion", eos)
        expect(ends["stop_type"] == "eos" and ends["tokens_predicted"] <= 1, "EOS pushed up ends it: %r" % ends)
        expect(ends["generation_settings"]["logit_bias"] == [{"bias": 30, "token": 2}] and
               ends["generation_settings"]["ignore_eos"] is False, "settings %r" % ends["generation_settings"])
        runs = post(srv, "/completion", dict(eos, ignore_eos=True))
        expect(runs["stop_type"] == "limit" and runs["tokens_predicted"] == 8 and 2 not in runs["tokens"],
               "ignore_eos runs to n_predict: %r" % runs)
        bias = runs["generation_settings"]["logit_bias"]
        expect({"bias": None, "token": 2} in bias and runs["generation_settings"]["ignore_eos"] is True,
               "the ban is reported: %r" % bias)
        plain = post(srv, "/completion", {"prompt": PROMPT, "n_predict": 4, "ignore_eos": False})
        expect(plain["generation_settings"]["logit_bias"] == [], "no bans unasked: %r" % plain["generation_settings"])
        chat = post(srv, "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 6,
                                                  "logit_bias": {"2": 100}, "ignore_eos": True})
        expect(chat["usage"]["completion_tokens"] == 6 and chat["choices"][0]["finish_reason"] == "length",
               "chat honours ignore_eos: %r" % chat)
        bad(srv, "/completion", {"prompt": PROMPT, "ignore_eos": "yes"}, 400, "ignore_eos", "ignore_eos not a bool")


def test_chat_post_sampling_probs():
    """post_sampling_probs on /v1/chat/completions: logprobs.content entries
    carry prob/top_probs (the sampler's distribution after its filters), as
    llama-server's; the same seed draws the same tokens as without it."""
    with Server() as srv:
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "logprobs": True,
                "top_logprobs": 5, "seed": 3, "temperature": 1.0, "top_k": 3, "top_p": 1.0, "min_p": 0.0}
        pre = post(srv, "/v1/chat/completions", body)["choices"][0]["logprobs"]["content"]
        got = post(srv, "/v1/chat/completions", dict(body, post_sampling_probs=True))["choices"][0]["logprobs"]
        got = got["content"]
        expect(len(got) == len(pre) == 4, "4 entries each: %r" % got)
        for a, b in zip(pre, got):
            expect(a["id"] == b["id"] and a["token"] == b["token"], "the same draws: %r %r" % (a, b))
            expect("logprob" not in b and len(b["top_probs"]) == 3, "top-k 3 leaves 3 probs: %r" % b)
            z = sum(math.exp(t["logprob"]) for t in a["top_logprobs"][:3])
            for t, m in zip(b["top_probs"], a["top_logprobs"][:3]):
                expect(t["id"] == m["id"] and abs(t["prob"] - math.exp(m["logprob"]) / z) < 1e-4,
                       "renormalized: %r vs %r" % (t, m))
        events, _ = srv.stream("/v1/chat/completions", dict(body, post_sampling_probs=True))
        streamed = [e for ev in events for c in ev["choices"] if c.get("logprobs") for e in c["logprobs"]["content"]]
        expect([e["id"] for e in streamed] == [e["id"] for e in got] and all("prob" in e for e in streamed),
               "stream: the same entries %r" % streamed)
        bad(srv, "/v1/completions", {"prompt": PROMPT, "post_sampling_probs": True}, 400, "post_sampling_probs",
            "not a field of /v1/completions")


def test_gcp_predict():
    """AIP_MODE=PREDICTION (Vertex AI): POST /predict (AIP_PREDICT_ROUTE)
    answers {"instances"} with {"predictions"}, each the whole response of
    its endpoint (chat or completions), on AIP_HTTP_PORT; an instance the
    endpoint refuses fails the call with its 4xx; AIP_HEALTH_ROUTE answers
    as /health."""
    saved = dict(os.environ)
    port = free_port()
    os.environ.update(AIP_MODE="PREDICTION", AIP_HTTP_PORT=str(port))
    try:
        with Server("--parallel", "2", "--temp", "0") as srv:
            expect(srv.port == port, "AIP_HTTP_PORT %d: listening on %d" % (port, srv.port))
            chat = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}
            alone_chat = post(srv, "/v1/chat/completions", chat)["choices"][0]["message"]["content"]
            alone_text = post(srv, "/v1/completions", {"prompt": PROMPT, "max_tokens": 5})["choices"][0]["text"]
            res = post(srv, "/predict", {"instances": [
                dict(chat, **{"@requestFormat": "chatCompletions"}),
                {"@requestFormat": "completions", "prompt": PROMPT, "max_tokens": 5},
                {"prompt": PROMPT, "max_tokens": 5}], "parameters": {}})
            preds = res["predictions"]
            expect(len(preds) == 3, "one prediction per instance: %r" % res)
            expect(preds[0]["object"] == "chat.completion" and preds[0]["choices"][0]["message"]["content"] ==
                   alone_chat, "chat instance = /v1/chat/completions: %r" % preds[0])
            expect(preds[1]["object"] == "text_completion" and preds[1]["choices"][0]["text"] == alone_text ==
                   preds[2]["choices"][0]["text"], "completion instances: %r" % preds[1:])
            bad(srv, "/predict", {"instances": []}, 400, "instances", "no instances")
            bad(srv, "/predict", {"instances": [{"@requestFormat": "embeddings", "input": "x"}]}, 400,
                "instances[0].@requestFormat", "unknown format")
            bad(srv, "/predict", {"instances": [dict(chat, stream=True)]}, 400, "instances[0].stream", "streamed")
            bad(srv, "/predict", {"instances": [chat, {"messages": "x"}]}, 400, "messages", "a bad instance")
            expect(len(post(srv, "/predict", {"instances": [chat]})["predictions"]) == 1, "serves after the 400s")
        route = "/v1/endpoints/7/deployedModels/9"  # Vertex AI's own routes
        os.environ.update(AIP_PREDICT_ROUTE=route + ":predict", AIP_HEALTH_ROUTE=route, AIP_HTTP_PORT=str(free_port()))
        with Server() as srv:
            expect(srv.json("GET", route) == (200, {"status": "ok"}), "AIP_HEALTH_ROUTE answers as /health")
            res = post(srv, route + ":predict", {"instances": [{"prompt": PROMPT, "max_tokens": 2}]})
            expect(res["predictions"][0]["usage"]["completion_tokens"] == 2, "AIP_PREDICT_ROUTE: %r" % res)
            expect(srv.json("POST", "/predict", {"instances": []})[0] == 404, "/predict is AIP_PREDICT_ROUTE's now")
        os.environ["AIP_HTTP_PORT"] = "http"
        try:
            with Server() as srv:
                raise Failure("a bad AIP_HTTP_PORT started a server")
        except Failure as e:
            expect("AIP_HTTP_PORT 'http'" in str(e), "a bad AIP_HTTP_PORT is named: %s" % e)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    with Server() as srv:  # without AIP_MODE there is no /predict
        st, _ = srv.json("POST", "/predict", {"instances": [{"prompt": PROMPT}]})
        expect(st == 404, "no /predict outside Vertex AI mode: %d" % st)


def test_streamed_prompt_list():
    """/completion streams a list of prompts: they run at once and their
    events come one prompt after the other, each naming its index and
    ending with its own stop event, the same text as without stream."""
    with Server("--parallel", "2", "--temp", "0") as srv:
        prompts = [PROMPT, "The little dog", tokenize(srv, "Lily", add_special=True)]
        whole = post(srv, "/completion", {"prompt": prompts, "n_predict": 5})
        events, done = srv.stream("/completion", {"prompt": prompts, "n_predict": 5})
        expect(not done, "/completion streams end without [DONE]")
        order = [e["index"] for e in events]
        expect(order == sorted(order) and set(order) == {0, 1, 2}, "one prompt after the other: %r" % order)
        for k in range(3):
            mine = [e for e in events if e["index"] == k]
            expect([e["stop"] for e in mine].count(True) == 1 and mine[-1]["stop"] is True,
                   "prompt %d ends with one stop event: %r" % (k, mine))
            text = "".join(e["content"] for e in mine)
            expect(text == whole[k]["content"], "prompt %d streamed %r, whole %r" % (k, text, whole[k]["content"]))
            expect(mine[-1]["tokens_predicted"] == 5, "prompt %d statistics %r" % (k, mine[-1]))
        probs, _ = srv.stream("/completion", {"prompt": prompts[:2], "n_predict": 3, "n_probs": 2})
        expect(sum(len(e.get("completion_probabilities", [])) for e in probs) == 6, "n_probs per prompt %r" % probs)
        bad(srv, "/v1/completions", {"prompt": [PROMPT, PROMPT], "stream": True}, 400, "stream",
            "a streamed list on /v1/completions")


def test_forced_tool_call_native_template():
    """A template that writes the tools itself in Llama 3's syntax: a forced
    call (tool_choice required or named) is prefilled and constrained Hermes
    style, so it is read back as Hermes and comes out as tool_calls (it was
    left in content, read as Llama 3's bare JSON)."""
    tmpl = ("{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n{{ m.content }}<|eot_id|>"
            "{% endfor %}{% if tools %}{% for t in tools %}{{ t.function.name }} \"parameters\"{% endfor %}{% endif %}"
            "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}")
    tool = {"type": "function", "function": {"name": "check", "parameters": {
        "type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}}}
    with Server("--temp", "0", "--chat-template", tmpl, "-c", "1024", "--parallel", "1") as srv:
        for choice in ("required", {"type": "function", "function": {"name": "check"}}):
            body = {"messages": [{"role": "user", "content": "hi"}], "tools": [tool], "tool_choice": choice,
                    "max_tokens": 400}
            msg = post(srv, "/v1/chat/completions", body)["choices"][0]["message"]
            calls = msg.get("tool_calls") or []
            expect(len(calls) == 1 and calls[0]["function"]["name"] == "check" and not msg["content"],
                   "tool_choice %r: one call, no text: %r" % (choice, msg))
            expect(isinstance(json.loads(calls[0]["function"]["arguments"])["ok"], bool), "arguments %r" % calls)


main([
    ("/completion shapes, token and mixed prompts, lists, response_fields", test_completion_shapes),
    ("n_probs, streams, id_slot", test_completion_probs_stream_slot),
    ("post_sampling_probs", test_post_sampling_probs),
    ("/tokenize, /detokenize, /apply-template", test_tokenizer_endpoints),
    ("/infill", test_infill),
    ("field policy", test_field_policy),
    ("/v1/completions prompt lists", test_prompt_lists),
    ("CORS, models, aliases", test_cors_and_models),
    ("server options and template context", test_server_options),
    ("named templates and a template as text", test_named_templates),
    ("prefill, continue_final_message, __verbose, context errors, input_tokens", test_prefill_verbose_errors),
    ("return_progress, llamacpp metrics, full slots, --kv-unified", test_progress_metrics_slots),
    ("a streamed list of prompts", test_streamed_prompt_list),
    ("ignore_eos", test_ignore_eos),
    ("post_sampling_probs on chat", test_chat_post_sampling_probs),
    ("Vertex AI /predict (AIP_MODE=PREDICTION)", test_gcp_predict),
    ("a forced tool call under a template with its own syntax", test_forced_tool_call_native_template),
])
