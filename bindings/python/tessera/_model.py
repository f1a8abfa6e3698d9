"""Model, Session and Stream: loading, tokens, text generation, state."""
import codecs
import json
import os
import threading

try:
    from . import _tessera
except ImportError:
    import _tessera

from . import _chat

SEED_RANDOM = 0xFFFFFFFF


class ModelNotFoundError(_tessera.TesseraError, FileNotFoundError):
    """The model file does not exist (the message is the engine's)."""


def _sampling_args(temperature=0.8, top_k=40, top_p=0.95, min_p=0.05, typical_p=1.0,
                   repeat_penalty=1.0, repeat_last_n=64, frequency_penalty=0.0,
                   presence_penalty=0.0, seed=None, logit_bias=None, grammar=None,
                   json_schema=None, json_object=False):
    """Every sampler setting of the engine (llama.cpp's names and defaults;
    temperature <= 0 is greedy), as the keywords Context.start takes."""
    if json_schema is not None and not isinstance(json_schema, str):
        json_schema = json.dumps(json_schema)
    if sum(x is not None and x is not False for x in (grammar, json_schema, json_object or None)) > 1:
        raise ValueError("give at most one of grammar=, json_schema= and a JSON response_format")
    bias = [(int(t), float(b)) for t, b in (logit_bias or {}).items()]
    return dict(temperature=float(temperature), top_k=int(top_k), top_p=float(top_p),
                min_p=float(min_p), typical_p=float(typical_p), repeat_penalty=float(repeat_penalty),
                repeat_last_n=int(repeat_last_n), frequency_penalty=float(frequency_penalty),
                presence_penalty=float(presence_penalty),
                seed=SEED_RANDOM if seed is None else int(seed) & 0xFFFFFFFF,
                logit_bias=bias, grammar=grammar, json_schema=json_schema,
                json_object=bool(json_object))


class Stream:
    """An iterator of text pieces from one generation. After it ends,
    finish_reason is "stop" (end of generation or a stop string) or
    "length" (max_tokens or the context), and n_prompt / n_generated count
    tokens. Starting another generation on the same Session ends it."""

    def __init__(self, session, generation, stop):
        self._session = session
        self._generation = generation
        self._stop = [s for s in (stop or []) if s]
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._held = ""
        self._done = False
        self.finish_reason = None
        self.n_prompt = 0
        self.n_generated = 0
        self.tokens = []

    def __iter__(self):
        return self

    def __next__(self):
        while not self._done:
            if self._session._generation != self._generation:
                raise RuntimeError("a later generate() on this Session ended this stream")
            token, piece = self._session._ctx.next()
            if token is None:
                return self._finish(piece, self._decoder.decode(b"", final=True))
            self.tokens.append(token)
            self.n_generated += 1
            out = self._emit(self._decoder.decode(piece))
            if out:
                return out
        raise StopIteration

    def _emit(self, text):
        """Text that is safe to give out: none of a stop string, nor a tail
        that could still become one."""
        text = self._held + text
        if not self._stop:
            self._held = ""
            return text
        for s in self._stop:
            at = text.find(s)
            if at >= 0:
                self._done, self.finish_reason, self._held = True, "stop", ""
                return text[:at]
        keep = 0
        for s in self._stop:
            for k in range(min(len(s) - 1, len(text)), 0, -1):
                if text.endswith(s[:k]):
                    keep = max(keep, k)
                    break
        self._held = text[len(text) - keep:] if keep else ""
        return text[:len(text) - keep]

    def _finish(self, reason, tail):
        self._done = True
        self.finish_reason = reason
        out = self._held + tail
        self._held = ""
        if out:
            return out
        raise StopIteration

    def text(self):
        """The rest of the generation as one string."""
        return "".join(self)


class Session:
    """One context (KV cache + sampler) over a Model: use one per thread.
    prefix_cache=True: a prompt that starts like what the cache holds (a
    chat's next turn) decodes only what is new; the output may then differ
    in rounding from a fresh decode (a token alone and in a batch go through
    different kernels), so it is off by default."""

    def __init__(self, model, n_ctx=None, n_batch=512, n_threads=0, flash_attn=False,
                 type_k=None, type_v=None, prefix_cache=False):
        self.model = model
        self.prefix_cache = bool(prefix_cache)
        n_ctx = model._default_n_ctx if n_ctx is None else int(n_ctx)
        fa = {False: 0, True: 1, "auto": 2}[flash_attn]
        self._ctx = _tessera.Context(model._m, n_ctx, n_batch, n_threads, fa, type_k, type_v)
        self._generation = 0

    @property
    def n_ctx(self):
        return self._ctx.n_ctx()

    @property
    def tokens(self):
        """The tokens the cache holds."""
        return self._ctx.tokens()

    def generate_tokens(self, tokens, max_tokens=128, stop=None, **sampling):
        """Generate from prompt tokens: a Stream of text pieces."""
        args = _sampling_args(**sampling)
        self._generation += 1
        stream = Stream(self, self._generation, [stop] if isinstance(stop, str) else stop)
        self._ctx.start(list(tokens), -1 if max_tokens is None else int(max_tokens),
                        reuse_prefix=self.prefix_cache, **args)
        stream.n_prompt = len(tokens)
        return stream

    def generate(self, prompt, max_tokens=128, stream=False, stop=None, **sampling):
        """Continue prompt (str, or a list of token ids). Returns the text,
        or with stream=True an iterator of pieces (a Stream)."""
        tokens = prompt if isinstance(prompt, (list, tuple)) else self.model.tokenize(prompt, parse_special=True)
        it = self.generate_tokens(tokens, max_tokens=max_tokens, stop=stop, **sampling)
        return it if stream else it.text()

    def chat(self, messages, **kw):
        """Model.chat on this session's context."""
        return _chat.chat(self, messages, **kw)

    def save_state(self, path):
        """Save the cache and its tokens to a file (tessera_state_save_file)."""
        self._ctx.save_state(os.fspath(path))

    def load_state(self, path):
        """Load a file saved by save_state (same model and settings)."""
        return self._ctx.load_state(os.fspath(path))

    def reset(self):
        self._ctx.reset()

    def close(self):
        self._ctx.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Model:
    """A GGUF model. devices: "cpu-avx0", "vulkan0,cpu-avx0" or a list
    (None: the default order); n_gpu_layers: "auto" or a count; n_ctx: the
    context of each Session (None: the training context, at most 4096).
    The generate/chat/save_state methods use one Session per calling thread."""

    def __init__(self, path, *, devices=None, n_gpu_layers="auto", n_ctx=None, n_batch=512,
                 n_threads=0, flash_attn=False, type_k=None, type_v=None, prefix_cache=False,
                 use_mmap=True, use_mlock=False):
        from . import _init
        _init()
        self.path = os.fspath(path)
        if isinstance(devices, (list, tuple)):
            devices = ",".join(devices)
        ngl = -1 if n_gpu_layers in ("auto", None) else int(n_gpu_layers)
        try:
            self._m = _tessera.Model(self.path, devices, ngl, bool(use_mmap), bool(use_mlock))
        except _tessera.TesseraError as e:
            if not os.path.exists(self.path):
                raise ModelNotFoundError(str(e)) from None
            raise
        self.metadata = self._m.info()
        train = self.metadata["n_ctx_train"] or 4096
        self._default_n_ctx = min(train, 4096) if n_ctx is None else int(n_ctx)
        self._session_args = dict(n_batch=n_batch, n_threads=n_threads, flash_attn=flash_attn,
                                  type_k=type_k, type_v=type_v, prefix_cache=prefix_cache)
        self._local = threading.local()

    # ---- metadata
    arch = property(lambda self: self.metadata["arch"])
    description = property(lambda self: self.metadata["description"])
    n_vocab = property(lambda self: self.metadata["n_vocab"])
    n_ctx_train = property(lambda self: self.metadata["n_ctx_train"])
    n_embd = property(lambda self: self.metadata["n_embd"])
    n_layer = property(lambda self: self.metadata["n_layer"])
    n_params = property(lambda self: self.metadata["n_params"])
    size_bytes = property(lambda self: self.metadata["size_bytes"])
    devices = property(lambda self: self.metadata["devices"].split(","))

    def meta(self, key):
        """A string value of the GGUF metadata (e.g. "general.name"), or None."""
        return self._m.meta(key)

    @property
    def chat_template(self):
        """The Jinja chat template in use (the model's, or ChatML)."""
        return self._m.template_source()

    def __repr__(self):
        return f"tessera.Model({self.path!r}: {self.description})"

    # ---- tokens
    def tokenize(self, text, add_special=True, parse_special=False):
        if isinstance(text, str):
            text = text.encode("utf-8")
        return self._m.tokenize(text, add_special, parse_special)

    def detokenize(self, tokens, remove_special=False, render_special=False):
        return self._m.detokenize(list(tokens), remove_special, render_special).decode("utf-8", "replace")

    def token_to_piece(self, token, render_special=False):
        return self._m.piece(int(token), render_special)

    # ---- sessions
    def session(self, **kw):
        """A Session of your own (a context); keyword overrides: n_ctx,
        n_batch, n_threads, flash_attn, type_k, type_v, prefix_cache."""
        args = dict(self._session_args, n_ctx=self._default_n_ctx)
        args.update(kw)
        return Session(self, **args)

    def _thread_session(self):
        s = getattr(self._local, "session", None)
        if s is None:
            s = self._local.session = self.session()
        return s

    def generate(self, prompt, max_tokens=128, stream=False, stop=None, **sampling):
        """Continue prompt; text, or with stream=True an iterator of pieces.
        Sampling: temperature, top_k, top_p, min_p, typical_p,
        repeat_penalty, repeat_last_n, frequency_penalty, presence_penalty,
        seed, logit_bias ({token: bias}), grammar (GBNF), json_schema
        (dict or JSON text)."""
        return self._thread_session().generate(prompt, max_tokens=max_tokens, stream=stream,
                                               stop=stop, **sampling)

    def chat(self, messages, **kw):
        """Answer a conversation through the model's chat template, in the
        OpenAI API's shapes: a chat.completion dict, or with stream=True an
        iterator of chat.completion.chunk dicts. tools=, tool_choice=,
        response_format=, max_tokens=, stop= and the sampling settings."""
        return _chat.chat(self._thread_session(), messages, **kw)

    create_chat_completion = chat  # llama-cpp-python's name

    def save_state(self, path):
        self._thread_session().save_state(path)

    def load_state(self, path):
        return self._thread_session().load_state(path)

    def embed(self, texts, pooling=None, normalize=True):
        """Embedding vectors of a text or a list of texts (one list of floats
        each), through an embedding context of this thread: pooling "mean",
        "cls", "last" or "none" (one vector per token), None for the file's
        pooling_type; normalize: True (L2, as OpenAI's embeddings are), False,
        or llama.cpp's --embd-normalize number."""
        single = isinstance(texts, (str, bytes))
        norm = 2 if normalize is True else -1 if normalize is False else int(normalize)
        key = pooling or "unspecified"
        ctxs = getattr(self._local, "embed_ctx", None)
        if ctxs is None:
            ctxs = self._local.embed_ctx = {}
        ctx = ctxs.get(key)
        if ctx is None:
            ctx = ctxs[key] = _tessera.Context(self._m, self._default_n_ctx, self._session_args["n_batch"],
                                               self._session_args["n_threads"], embeddings=True, pooling=key)
        out = []
        for text in [texts] if single else texts:
            floats, dim = ctx.embed(self.tokenize(text), norm)
            rows = [floats[i:i + dim] for i in range(0, len(floats), dim)]
            out.append(rows if pooling == "none" else rows[0])
        return out[0] if single else out
