"""chat(): a conversation through the model's Jinja chat template, with
tools and response formats, answered in the OpenAI API's shapes."""
import base64
import binascii
import json
import os
import time
import uuid

from . import _check

# OpenAI content part types that carry something other than text
MEDIA_PARTS = {"image_url": "image_url parts need a multimodal projector",
               "input_image": "input_image parts need a multimodal projector",
               "image": "image parts need a multimodal projector",
               "input_audio": "input_audio parts need an audio projector",
               "audio": "audio parts need an audio projector",
               "file": "file parts need a document reader",
               "input_file": "input_file parts need a document reader"}
IMAGE_PARTS = ("image_url", "input_image", "image")
AUDIO_PARTS = ("input_audio", "audio")
MEDIA_MARKER = "<__media__>"
CHAT_ARGS = ("tools", "tool_choice", "response_format", "max_tokens", "stop", "stream", "chat_template_kwargs")


def check_messages(messages, projector=None):
    """messages as the OpenAI API shapes them: a list of dicts with a role
    and content (a str, None, or a list of text parts; image parts too with
    a projector). A part the model cannot take (an image without a
    projector, audio) is an error naming it, never dropped."""
    if isinstance(messages, (str, bytes, dict)) or not isinstance(messages, (list, tuple)):
        raise TypeError("messages must be a list of dicts like {'role': 'user', 'content': 'Hi'}, "
                        f"not {_check._show(messages)}")
    if not messages:
        raise ValueError("messages is empty: give at least one {'role': ..., 'content': ...}")
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            raise TypeError(f"{where} must be a dict like {{'role': 'user', 'content': 'Hi'}}, not {_check._show(m)}")
        if not isinstance(m.get("role"), str) or not m["role"]:
            raise ValueError(f"{where} needs a 'role' ('system', 'user', 'assistant' or 'tool')")
        content = m.get("content")
        if content is None or isinstance(content, str):
            continue
        if not isinstance(content, (list, tuple)):
            raise TypeError(f"{where}.content must be a str, a list of parts or None, not {_check._show(content)}")
        for j, part in enumerate(content):
            at = f"{where}.content[{j}]"
            kind = part.get("type") if isinstance(part, dict) else None
            if kind in IMAGE_PARTS and projector is not None and projector.info()["vision"]:
                continue  # its bytes are read (and checked) by image_bytes
            if kind in AUDIO_PARTS and projector is not None and projector.info()["audio"]:
                continue  # and a sound's by audio_bytes
            if kind in MEDIA_PARTS:
                if projector is not None:
                    raise ValueError(f"{at}: the loaded projector ({projector.info()['projector_type']}) takes no "
                                     f"{kind} parts{' (it has no audio encoder)' if 'audio' in kind else ''}")
                raise ValueError(f"{at}: {MEDIA_PARTS[kind]}; this model takes text only: load one with "
                                 "Model(..., mmproj='mmproj-MODEL.gguf') (tessera.Llama: "
                                 "chat_handler=Llava15ChatHandler(clip_model_path=...))")
            if kind != "text":
                raise ValueError(f"{at} must be a dict {{'type': 'text', 'text': ...}}, not {_check._show(part)}")
            if not isinstance(part.get("text"), str):
                raise TypeError(f"{at}.text must be a str, not {_check._show(part.get('text'))}")


def check_media(messages, projector):
    """Only the media parts of messages (the llama-cpp-python drop-in reads
    the rest leniently): images need a vision projector, anything else
    (audio, files) is refused naming the part."""
    for i, m in enumerate(messages or []):
        content = m.get("content") if isinstance(m, dict) else None
        if not isinstance(content, (list, tuple)):
            continue
        for j, part in enumerate(content):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind not in MEDIA_PARTS:
                continue
            at = f"messages[{i}].content[{j}]"
            if kind in IMAGE_PARTS and projector is not None and projector.info()["vision"]:
                continue
            if kind in AUDIO_PARTS and projector is not None and projector.info()["audio"]:
                continue
            if projector is not None:
                raise ValueError(f"{at}: the loaded projector ({projector.info()['projector_type']}) takes no "
                                 f"{kind} parts{' (it has no audio encoder)' if 'audio' in kind else ''}")
            raise ValueError(f"{at}: {MEDIA_PARTS[kind]}; this model takes text only: give "
                             "chat_handler=Llava15ChatHandler(clip_model_path='mmproj-MODEL.gguf')")


def check_tools(tools, tool_choice):
    if tools is not None:
        if not isinstance(tools, (list, tuple)):
            raise TypeError(f"tools must be a list of {{'type': 'function', 'function': {{...}}}} or None, "
                            f"not {_check._show(tools)}")
        for i, t in enumerate(tools):
            fn = t.get("function") if isinstance(t, dict) else None
            if not isinstance(t, dict) or t.get("type", "function") != "function" or not isinstance(fn, dict):
                raise ValueError(f"tools[{i}] must be {{'type': 'function', 'function': {{'name': ..., "
                                 f"'parameters': ...}}}}, not {_check._show(t)}")
            if not isinstance(fn.get("name"), str) or not fn["name"]:
                raise ValueError(f"tools[{i}].function needs a 'name' (a str)")
    if isinstance(tool_choice, str):
        _check.choice("tool_choice", tool_choice, ("auto", "none", "required"))
    elif isinstance(tool_choice, dict):
        if not isinstance(tool_choice.get("function"), dict) or \
                not isinstance(tool_choice["function"].get("name"), str):
            raise ValueError("tool_choice as a dict must be {'type': 'function', 'function': {'name': ...}}")
        if not tools:
            raise ValueError("tool_choice names a function, but no tools were given")
    else:
        raise TypeError("tool_choice must be 'auto', 'none', 'required' or "
                        f"{{'type': 'function', 'function': {{'name': ...}}}}, not {_check._show(tool_choice)}")


def image_bytes(part, where):
    """The bytes of an image part: {"type": "image_url", "image_url": {"url":
    URL}} (or the URL as a str), {"type": "input_image", "image_url": URL},
    or {"type": "image", "image": ...}; a URL is a data: URI (base64), a
    file path or file:// URL; "image" may also be bytes or a path. A remote
    http(s) URL is refused, never fetched."""
    kind = part.get("type")
    if kind == "image_url":
        src = part.get("image_url")
        src = src.get("url") if isinstance(src, dict) else src
    elif kind == "input_image":
        src = part.get("image_url")
    else:
        src = part.get("image", part.get("data"))
    if isinstance(src, (bytes, bytearray, memoryview)):
        return bytes(src)
    if isinstance(src, os.PathLike):
        src = os.fspath(src)
    if not isinstance(src, str) or not src:
        raise TypeError(f"{where}: an image part needs a data: URI, a file path or bytes, not {_check._show(src)}")
    low = src[:8].lower()
    if low.startswith("http:") or low.startswith("https:"):
        raise ValueError(f"{where}: remote image URLs are not fetched: give the bytes, a file path or a data: URI")
    if low.startswith("data:"):
        meta, comma, data = src[5:].partition(",")
        if not comma or not meta.lower().endswith(";base64"):
            raise ValueError(f"{where}: a data: URI must be base64 (data:image/png;base64,...)")
        try:
            return base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"{where}: the data: URI is not base64") from None
    if low.startswith("file://"):
        src = src[7:]
    try:
        with open(src, "rb") as f:
            return f.read()
    except OSError as e:
        raise ValueError(f"{where}: cannot read the image file {src!r}: {e.strerror}") from None


def audio_bytes(part, where):
    """The bytes of a sound part: OpenAI's {"type": "input_audio",
    "input_audio": {"data": BASE64, "format": "wav"}} (WAV, MP3, FLAC), or
    {"type": "audio", "audio": BYTES_OR_PATH}."""
    if part.get("type") == "input_audio":
        src = part.get("input_audio")
        data = src.get("data") if isinstance(src, dict) else None
        if not isinstance(data, str) or not data:
            raise TypeError(f"{where}: input_audio must be {{'data': BASE64, 'format': 'wav'|'mp3'|'flac'}}, "
                            f"not {_check._show(src)}")
        try:
            return base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"{where}: input_audio.data is not base64") from None
    src = part.get("audio", part.get("data"))
    if isinstance(src, (bytes, bytearray, memoryview)):
        return bytes(src)
    if isinstance(src, os.PathLike):
        src = os.fspath(src)
    if not isinstance(src, str) or not src:
        raise TypeError(f"{where}: an audio part needs bytes or a file path, not {_check._show(src)}")
    try:
        with open(src, "rb") as f:
            return f.read()
    except OSError as e:
        raise ValueError(f"{where}: cannot read the audio file {src!r}: {e.strerror}") from None


def _media_of(messages):
    """The bytes of every image and sound part, in order ([] without any)."""
    out = []
    for i, m in enumerate(messages):
        content = m.get("content")
        if isinstance(content, (list, tuple)):
            for j, p in enumerate(content):
                if isinstance(p, dict) and p.get("type") in IMAGE_PARTS:
                    out.append(image_bytes(p, f"messages[{i}].content[{j}]"))
                elif isinstance(p, dict) and p.get("type") in AUDIO_PARTS:
                    out.append(audio_bytes(p, f"messages[{i}].content[{j}]"))
    return out


def _text_of(content):
    """OpenAI content: a string, or a list of parts of which the text ones count."""
    if content is None or isinstance(content, str):
        return content
    media = IMAGE_PARTS + AUDIO_PARTS
    return "".join(MEDIA_MARKER if p.get("type") in media else p.get("text", "")
                   for p in content if isinstance(p, dict) and (p.get("type") == "text" or p.get("type") in media))


def _template_messages(messages):
    """Messages as chat templates expect them (transformers' convention):
    text content, tool-call arguments as objects rather than JSON text."""
    out = []
    for m in messages:
        m = dict(m)
        # null content (an assistant turn of tool calls) as "": most
        # templates concatenate it
        m["content"] = _text_of(m.get("content")) or ""
        calls = []
        for c in m.get("tool_calls") or []:
            c = json.loads(json.dumps(c))
            fn = c.get("function", {})
            if isinstance(fn.get("arguments"), str):
                try:
                    fn["arguments"] = json.loads(fn["arguments"])
                except ValueError:
                    pass
            calls.append(c)
        if calls:
            m["tool_calls"] = calls
        out.append(m)
    return out


def _forced_call_schema(tools, tool_choice):
    """tool_choice "required" or {"type": "function", "function": {"name"}}:
    a JSON Schema allowing only a call {"name", "arguments"} to an offered
    tool (the bare JSON call every template's parser accepts)."""
    if isinstance(tool_choice, dict):
        wanted = tool_choice.get("function", {}).get("name")
        tools = [t for t in tools if t.get("function", {}).get("name") == wanted]
        if not tools:
            raise ValueError(f"tool_choice names '{wanted}', which is not among the tools")
    options = []
    for t in tools:
        fn = t["function"]
        options.append({"type": "object",
                        "properties": {"name": {"const": fn["name"]},
                                       "arguments": fn.get("parameters") or {"type": "object"}},
                        "required": ["name", "arguments"], "additionalProperties": False})
    return options[0] if len(options) == 1 else {"anyOf": options}


def _constraint(response_format, tools, tool_choice):
    """The sampling keywords a response_format or a forced tool call asks for."""
    if tools and (tool_choice == "required" or isinstance(tool_choice, dict)):
        if response_format and response_format.get("type") not in (None, "text"):
            raise ValueError("tool_choice forces a tool call; it cannot be combined with response_format")
        return {"json_schema": _forced_call_schema(tools, tool_choice)}
    if response_format is not None and not isinstance(response_format, dict):
        raise TypeError("response_format must be a dict like {'type': 'json_object'} or None, "
                        f"not {_check._show(response_format)}")
    kind = (response_format or {}).get("type", "text")
    if kind == "text":
        return {}
    if kind == "json_object":
        schema = response_format.get("schema")
        return {"json_schema": schema} if schema else {"json_object": True}
    if kind == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema")
        if schema is None:
            raise ValueError("response_format json_schema needs json_schema.schema")
        return {"json_schema": schema}
    raise ValueError(f"response_format type must be 'text', 'json_object' or 'json_schema', not {kind!r}")


def session_sampling():
    from ._model import SAMPLING
    return SAMPLING


def _prompt(model_m, projector, messages, tools, extra):
    """The conversation through the chat template: (tokens, chunks), chunks
    (the prompt split at its images by the projector) None without images;
    each image part is <__media__> in the text, where its rows go."""
    variables = dict(extra or {})
    variables.update(messages=_template_messages(messages), add_generation_prompt=True)
    if tools:
        variables["tools"] = tools
    text, has_bos = model_m.apply_template(json.dumps(variables, ensure_ascii=False))
    media = _media_of(messages) if projector is not None else []
    if media:
        try:
            chunks = projector.tokenize(text, media, not has_bos)
        except ValueError as e:  # the engine names the image ("image N") and what is wrong
            raise ValueError(f"chat: {e}") from None
        return chunks.tokens(), chunks
    return model_m.tokenize(text.encode("utf-8"), not has_bos, True), None


def _prompt_tokens(session, messages, tools, extra):
    return _prompt(session.model._m, None, messages, tools, extra)[0]


def _message(session, text, tools):
    """The assistant message of a reply: content, reasoning, tool calls."""
    msg = {"role": "assistant", "content": text}
    if not tools:
        return msg
    names = [t.get("function", {}).get("name", "") for t in tools]
    parsed = json.loads(session.model._m.parse_reply(text, names))
    msg["content"] = parsed["content"] if parsed["content"] or not parsed["tool_calls"] else None
    if parsed.get("reasoning_content"):
        msg["reasoning_content"] = parsed["reasoning_content"]
    if parsed["tool_calls"]:
        msg["tool_calls"] = [{"id": c["id"] or "call_" + uuid.uuid4().hex[:24], "type": "function",
                              "function": {"name": c["name"], "arguments": c["arguments"]}}
                             for c in parsed["tool_calls"]]
    return msg


def chat(session, messages, tools=None, tool_choice="auto", response_format=None,
         max_tokens=None, stop=None, stream=False, chat_template_kwargs=None, **sampling):
    _check.keywords("chat()", sampling, CHAT_ARGS + session_sampling())
    projector = getattr(session.model, "_proj", None)
    check_messages(messages, projector)
    check_tools(tools, tool_choice)
    stream = _check.flag("stream", stream)
    if chat_template_kwargs is not None and not isinstance(chat_template_kwargs, dict):
        raise TypeError(f"chat_template_kwargs must be a dict or None, not {_check._show(chat_template_kwargs)}")
    max_tokens = _check.integer("max_tokens", max_tokens, 0, none_ok=True,
                                what="an int >= 0, or None for the rest of the context")
    if tool_choice == "none":
        tools = None
    constraint = _constraint(response_format, tools, tool_choice)
    if "json_schema" in constraint:
        if sampling.get("json_schema") is not None:
            raise ValueError("give json_schema= or a JSON response_format / forced tool call, not both")
        sampling["json_schema"] = constraint["json_schema"]
    elif constraint:
        sampling["_json_object"] = True
    tokens, chunks = _prompt(session.model._m, projector, messages, tools, chat_template_kwargs)
    # a prompt longer than the context: 0 here, and the engine's n_ctx error
    limit = max(0, session.n_ctx - len(tokens)) if max_tokens is None else max_tokens
    it = session.generate_tokens(tokens, max_tokens=limit, stop=stop, _where="chat()", _chunks=chunks, **sampling)
    base = {"id": "chatcmpl-" + uuid.uuid4().hex[:24], "created": int(time.time()),
            "model": os.path.basename(session.model.path)}
    if stream:
        return _chunks(session, it, tools, base)
    text = it.text()
    msg = _message(session, text, tools)
    finish = "tool_calls" if msg.get("tool_calls") else it.finish_reason
    return dict(base, object="chat.completion",
                choices=[{"index": 0, "message": msg, "logprobs": None, "finish_reason": finish}],
                usage={"prompt_tokens": it.n_prompt, "completion_tokens": it.n_generated,
                       "total_tokens": it.n_prompt + it.n_generated,
                       "prompt_tokens_details": {"cached_tokens": it.n_cached}})


def _chunks(session, it, tools, base):
    """chat.completion.chunk dicts: content as it comes; with tools the reply
    is held to the end (a call is known only then) and sent as one delta."""
    def chunk(delta, finish=None):
        return dict(base, object="chat.completion.chunk",
                    choices=[{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}])
    yield chunk({"role": "assistant", "content": ""})
    if tools:
        msg = _message(session, it.text(), tools)
        msg.pop("role")
        if msg.get("tool_calls"):
            for i, c in enumerate(msg["tool_calls"]):
                c["index"] = i
        yield chunk(msg)
        yield chunk({}, "tool_calls" if msg.get("tool_calls") else it.finish_reason)
        return
    for piece in it:
        yield chunk({"content": piece})
    yield chunk({}, it.finish_reason)
