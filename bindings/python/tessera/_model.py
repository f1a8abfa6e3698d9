"""Model, Session and Stream: loading, tokens, text generation, state."""
import codecs
import json
import os
import threading
import warnings
import weakref

try:
    from . import _tessera
except ImportError as _first:
    try:
        import _tessera
    except ImportError:
        # the package's own extension failed to load: say why (a missing
        # shared library, a wrong Python), not that a fallback is absent
        raise _first from None

from . import _chat, _check

SEED_RANDOM = 0xFFFFFFFF

SAMPLING = ("temperature", "top_k", "top_p", "min_p", "typical_p", "repeat_penalty", "repeat_last_n",
            "frequency_penalty", "presence_penalty", "seed", "logit_bias", "grammar", "json_schema",
            "dry_multiplier", "dry_base", "dry_allowed_length", "dry_penalty_last_n", "dry_sequence_breakers",
            "xtc_probability", "xtc_threshold", "top_n_sigma", "dynatemp_range", "dynatemp_exponent", "mirostat",
            "mirostat_tau", "mirostat_eta", "samplers")
# llama.cpp's sampler names, the values "samplers" may list
SAMPLER_NAMES = ("penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature")
SESSION_ARGS = ("n_ctx", "n_batch", "n_threads", "flash_attn", "type_k", "type_v", "prefix_cache")
POOLINGS = ("none", "mean", "cls", "last", "rank")


class ModelNotFoundError(_tessera.TesseraError, FileNotFoundError):
    """The model file does not exist (the message is the engine's)."""


BUSY = "Session is in use by another thread; use one Session per thread (Model.generate and chat do that)"


def _sampling_args(where, sampling, n_vocab, n_ctx, json_object=False):
    """Every sampler setting of the engine (llama.cpp's names and defaults;
    temperature <= 0 is greedy), checked, as the keywords Context.start
    takes. where names the caller in the error of an unknown keyword."""
    _check.keywords(where, sampling, ("max_tokens", "stream", "stop") + SAMPLING)
    kw = dict(temperature=0.8, top_k=40, top_p=0.95, min_p=0.05, typical_p=1.0, repeat_penalty=1.0,
              repeat_last_n=64, frequency_penalty=0.0, presence_penalty=0.0, seed=None, logit_bias=None,
              grammar=None, json_schema=None)
    kw.update(sampling)
    out = dict(temperature=_check.real("temperature", kw["temperature"],
                                       what="a number (0 or less: greedy)"),
               top_k=_check.integer("top_k", kw["top_k"], 0, what="an int >= 0 (0: off)"),
               top_p=_check.real("top_p", kw["top_p"], 0.0, 1.0),
               min_p=_check.real("min_p", kw["min_p"], 0.0, 1.0),
               typical_p=_check.real("typical_p", kw["typical_p"], 0.0, 1.0),
               repeat_penalty=_check.real("repeat_penalty", kw["repeat_penalty"], 0.0,
                                          what="a number > 0 (1.0: off)"),
               frequency_penalty=_check.real("frequency_penalty", kw["frequency_penalty"]),
               presence_penalty=_check.real("presence_penalty", kw["presence_penalty"]))
    if out["repeat_penalty"] == 0:
        raise ValueError("repeat_penalty must be a number > 0 (1.0: off), not 0.0")
    last_n = _check.integer("repeat_last_n", kw["repeat_last_n"], -1,
                            what="an int >= 0, or -1 for the whole context")
    out["repeat_last_n"] = n_ctx if last_n == -1 else last_n
    seed = _check.integer("seed", kw["seed"], -1, 0xFFFFFFFF, none_ok=True,
                          what="an int from 0 to 2**32-1, or None or -1 for a random seed")
    out["seed"] = SEED_RANDOM if seed is None or seed == -1 else seed
    bias = kw["logit_bias"]
    if bias is not None and not hasattr(bias, "items"):
        raise TypeError(f"logit_bias must be a dict {{token id: bias}} or None, not {_check._show(bias)}")
    out["logit_bias"] = [(_check.integer("logit_bias key", t, 0, n_vocab - 1,
                                         what=f"a token id (an int from 0 to {n_vocab - 1})"),
                          _check.real(f"logit_bias[{t}]", b, what="a number (-inf bans the token)"))
                         for t, b in (bias or {}).items()]
    # llama.cpp's other samplers: given only when asked for (the engine's defaults are llama.cpp's)
    if "dry_multiplier" in kw:
        out["dry_multiplier"] = _check.real("dry_multiplier", kw["dry_multiplier"], 0.0, what="a number >= 0 (0: off)")
    if "dry_base" in kw:
        out["dry_base"] = _check.real("dry_base", kw["dry_base"], 0.0, what="a number > 0")
    if "dry_allowed_length" in kw:
        out["dry_allowed_length"] = _check.integer("dry_allowed_length", kw["dry_allowed_length"], 0)
    if "dry_penalty_last_n" in kw:
        dn = _check.integer("dry_penalty_last_n", kw["dry_penalty_last_n"], -1,
                            what="an int >= 0, or -1 for the whole context")
        out["dry_penalty_last_n"] = n_ctx if dn == -1 else dn
    if kw.get("dry_sequence_breakers") is not None:
        br = kw["dry_sequence_breakers"]
        if not isinstance(br, (list, tuple)) or not all(isinstance(b, str) and b for b in br):
            raise TypeError(f"dry_sequence_breakers must be a list of non-empty str, not {_check._show(br)}")
        out["dry_sequence_breakers"] = list(br)
    for name in ("xtc_probability", "xtc_threshold"):
        if name in kw:
            out[name] = _check.real(name, kw[name], 0.0, 1.0)
    for name in ("top_n_sigma", "dynatemp_range", "dynatemp_exponent", "mirostat_tau", "mirostat_eta"):
        if name in kw:
            out[name] = _check.real(name, kw[name], None if name == "top_n_sigma" else 0.0)
    if "mirostat" in kw:
        out["mirostat"] = _check.integer("mirostat", kw["mirostat"], 0, 2, what="0 (off), 1 or 2")
    if kw.get("samplers") is not None:
        names = kw["samplers"]
        if isinstance(names, str):
            names = [n for n in names.replace(",", ";").split(";") if n]
        if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
            raise TypeError(f"samplers must be a list of sampler names, not {_check._show(names)}")
        for n in names:
            if n not in SAMPLER_NAMES:
                raise ValueError(f"samplers: {n!r} is no sampler (names: {', '.join(SAMPLER_NAMES)})")
        out["samplers"] = ";".join(names)
    out["grammar"] = _check.text("grammar", kw["grammar"], none_ok=True)
    schema = kw["json_schema"]
    if isinstance(schema, str):
        try:
            json.loads(schema)
        except ValueError as e:
            raise ValueError(f"json_schema is not valid JSON: {e}") from None
    elif isinstance(schema, dict):
        schema = json.dumps(schema)
    elif schema is not None:
        raise TypeError(f"json_schema must be a dict, a JSON string or None, not {_check._show(schema)}")
    out["json_schema"] = schema
    if sum(x is not None and x is not False for x in (out["grammar"], schema, json_object or None)) > 1:
        raise ValueError("give at most one of grammar=, json_schema= and a JSON response_format")
    out["json_object"] = bool(json_object)
    return out


def _cpus():
    """The CPUs this process may run on (its affinity mask, as taskset or a
    container's cpuset leave it)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


# Contexts of this process (Sessions, embedding contexts) that may decode
# at once; those with n_threads=None share the CPUs among the busy ones.
_contexts = weakref.WeakSet()
_contexts_lock = threading.Lock()


def _thread_share():
    """Default n_threads: the CPUs divided among the contexts busy now (a
    call running or a stream not yet finished), at least 1."""
    with _contexts_lock:
        busy = sum(1 for c in list(_contexts) if c._busy_now())
    return max(1, _cpus() // max(1, busy))


def _context_args(n_ctx, n_batch, n_threads, flash_attn, type_k, type_v):
    """The checked settings of a context."""
    return dict(n_ctx=_check.integer("n_ctx", n_ctx, 1, 2**31 - 1, none_ok=True,
                                     what="a positive int (tokens) or None"),
                n_batch=_check.integer("n_batch", n_batch, 1),
                n_threads=_check.integer("n_threads", n_threads, 1, none_ok=True,
                                         what="a positive int or None (the CPUs shared among busy sessions)"),
                flash_attn={False: 0, True: 1, "auto": 2}[_check.choice("flash_attn", flash_attn,
                                                                        (True, False, "auto"))],
                type_k=_kv_type("type_k", type_k),
                type_v=_kv_type("type_v", type_v))


def _kv_type(name, value):
    """A KV cache type name (None: f16), lower case as the engine names them."""
    if _check.text(name, value, none_ok=True) is None:
        return None
    names = _tessera.kv_types()
    if value.lower() not in names:
        raise ValueError(f"{name} must be one of {', '.join(names)} or None, not {value!r}")
    return value.lower()


class Stream:
    """An iterator of text pieces from one generation. After it ends,
    finish_reason is "stop" (end of generation or a stop string) or
    "length" (max_tokens or the context), and n_prompt / n_generated count
    tokens (n_cached: of the prompt's, those the session's prefix cache
    held, so not decoded again). Starting another generation on the same Session ends it; while
    it runs, another thread cannot use its Session (RuntimeError), though
    the stream itself may be handed to another thread to finish."""

    def __init__(self, session, generation, stop):
        self._session = session
        self._generation = generation
        self._stop = stop
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._held = ""
        self._done = False
        self.finish_reason = None
        self.n_prompt = 0
        self.n_cached = 0
        self.n_generated = 0
        self.tokens = []

    def __iter__(self):
        return self

    def __next__(self):
        while not self._done:
            session = self._session
            if session._generation != self._generation:
                raise RuntimeError("a later generate() on this Session ended this stream")
            session._claim(stream=self)
            try:
                session._tune_threads()
                token, piece = session._ctx.next()
            finally:
                session._release()
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

    def close(self):
        """End the generation here: its Session is free for other threads."""
        if not self._done:
            self._done = True
            self.finish_reason = self.finish_reason or "stop"


class Session:
    """One context (KV cache + sampler) over a Model: use one per thread; a
    second thread calling it while the first generates gets RuntimeError.
    n_threads None (the default): the CPUs divided among the sessions
    generating at that moment, re-divided as they start and finish.
    prefix_cache=True: a prompt that starts like what the cache holds (a
    chat's next turn) decodes only what is new; the output may then differ
    in rounding from a fresh decode (a token alone and in a batch go through
    different kernels), so it is off by default."""

    def __init__(self, model, n_ctx=None, n_batch=512, n_threads=None, flash_attn=False,
                 type_k=None, type_v=None, prefix_cache=False):
        if not isinstance(model, Model):
            raise TypeError(f"model must be a tessera.Model, not {_check._show(model)}")
        args = _context_args(n_ctx, n_batch, n_threads, flash_attn, type_k, type_v)
        self.prefix_cache = _check.flag("prefix_cache", prefix_cache)
        self.model = model
        self._fixed_threads = args["n_threads"]
        self._guard = threading.Lock()
        self._in_call = False
        self._holder = None
        self._stream = None
        self._generation = 0
        self._ctx = None
        self._threads = self._fixed_threads or _thread_share()
        n_ctx = model._default_n_ctx if args["n_ctx"] is None else args["n_ctx"]
        self._ctx = _tessera.Context(model._m, n_ctx, args["n_batch"], self._threads, args["flash_attn"],
                                     args["type_k"], args["type_v"])
        with _contexts_lock:
            _contexts.add(self)

    def _open_ctx(self):
        if self._ctx is None:
            raise RuntimeError("Session is closed")
        return self._ctx

    @property
    def n_ctx(self):
        return self._open_ctx().n_ctx()

    @property
    def n_threads(self):
        """The CPU threads its decoding uses now."""
        return self._threads

    @property
    def tokens(self):
        """The tokens the cache holds."""
        return self._open_ctx().tokens()

    # ---- one thread at a time
    def _live_stream(self):
        s = self._stream() if self._stream is not None else None
        return s is not None and not s._done

    def _busy_now(self):
        return self._in_call or self._live_stream()

    def _claim(self, stream=None):
        """Take the Session for one call from this thread: RuntimeError when
        another thread is in a call, or (unless this call iterates the
        current stream) holds a stream that has not finished."""
        me = threading.get_ident()
        with self._guard:
            if self._ctx is None:
                raise RuntimeError("Session is closed")
            if self._in_call or (stream is None and self._holder not in (None, me) and self._live_stream()):
                raise RuntimeError(BUSY)
            self._in_call = True
            self._holder = me

    def _release(self):
        with self._guard:
            self._in_call = False

    def _tune_threads(self):
        """With n_threads None, follow the share of the CPUs (under _claim)."""
        if self._fixed_threads is None:
            n = _thread_share()
            if n != self._threads:
                self._ctx.set_threads(n)
                self._threads = n

    def set_loras(self, adapters):
        """The LoRA adapters the next generations use: {adapter: scale} (or
        [(adapter, scale)]), adapters from Model.load_lora; {} none. The
        cache keeps what it holds: reset() (or a new prompt without
        prefix_cache) forgets tokens computed with other adapters."""
        pairs = list(adapters.items()) if isinstance(adapters, dict) else list(adapters)
        ids = []
        for a, scale in pairs:
            if not isinstance(a, LoraAdapter) or a.model is not self.model:
                raise TypeError(f"set_loras takes adapters of this session's model (Model.load_lora), "
                                f"not {_check._show(a)}")
            ids.append((a.id, _check.real("scale", scale)))
        self._call("set_loras", ids)

    def _call(self, method, *args):
        self._claim()
        try:
            return getattr(self._ctx, method)(*args)
        finally:
            self._release()

    # ---- generation
    def generate_tokens(self, tokens, max_tokens=128, stop=None, _json_object=False, _where="generate()",
                        _name="tokens", _chunks=None, **sampling):
        """Generate from prompt tokens (a list of ids): a Stream of text pieces."""
        if _chunks is None:  # with chunks: their tokens, media rows negative
            tokens = _check.tokens(_name, tokens, self.model.n_vocab)
        if not tokens:
            raise ValueError(f"{_name} is empty: give some text or token ids")
        max_tokens = _check.integer("max_tokens", max_tokens, 0, none_ok=True,
                                    what="an int >= 0, or None for the rest of the context")
        if isinstance(stop, str):
            stop = [stop]
        elif stop is not None:
            if isinstance(stop, bytes) or not isinstance(stop, (list, tuple)):
                raise TypeError(f"stop must be a str, a list of str or None, not {_check._show(stop)}")
            for i, s in enumerate(stop):
                _check.text(f"stop[{i}]", s)
        args = _sampling_args(_where, sampling, self.model.n_vocab, self.n_ctx, json_object=_json_object)
        self._claim()
        try:
            self._generation += 1
            stream = Stream(self, self._generation, [s for s in (stop or []) if s])
            self._stream = weakref.ref(stream)
            self._tune_threads()
            n_decoded = self._ctx.start(tokens, -1 if max_tokens is None else max_tokens,
                                        reuse_prefix=self.prefix_cache, chunks=_chunks, **args)
        except BaseException:
            stream._done = True
            raise
        finally:
            self._release()
        stream.n_prompt = len(tokens)
        stream.n_cached = len(tokens) - n_decoded
        return stream

    def generate(self, prompt, max_tokens=128, stream=False, stop=None, **sampling):
        """Continue prompt (str, or a list of token ids). Returns the text,
        or with stream=True an iterator of pieces (a Stream)."""
        stream = _check.flag("stream", stream)
        if isinstance(prompt, str):
            tokens = self.model.tokenize(prompt, parse_special=True)
        elif isinstance(prompt, (list, tuple)):
            tokens = prompt
        else:
            raise TypeError(f"prompt must be a str or a list of token ids, not {_check._show(prompt)}")
        it = self.generate_tokens(tokens, max_tokens=max_tokens, stop=stop, _name="prompt", **sampling)
        return it if stream else it.text()

    def chat(self, messages, **kw):
        """Model.chat on this session's context."""
        return _chat.chat(self, messages, **kw)

    def save_state(self, path):
        """Save the cache and its tokens to a file (tessera_state_save_file)."""
        self._call("save_state", _check.path("path", path))

    def load_state(self, path):
        """Load a file saved by save_state (same model and settings)."""
        return self._call("load_state", _check.path("path", path))

    def reset(self):
        self._call("reset")

    def close(self):
        if self._ctx is None:
            return
        self._claim()
        try:
            self._ctx.close()
        finally:
            self._release()
        with self._guard:
            self._ctx = None
        with _contexts_lock:
            _contexts.discard(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _EmbedContext:
    """An embedding context of one thread (Model.embed), counted among the
    busy contexts while it embeds."""

    def __init__(self, model, pooling):
        self.n_threads = model._session_args["n_threads"]
        self._in_call = False
        self._threads = self.n_threads or _thread_share()
        self._ctx = _tessera.Context(model._m, model._default_n_ctx, model._session_args["n_batch"],
                                     self._threads, embeddings=True, pooling=pooling)
        self.pooling = self._ctx.pooling()
        with _contexts_lock:
            _contexts.add(self)

    def _busy_now(self):
        return self._in_call

    def embed(self, tokens, norm):
        self._in_call = True
        try:
            if self.n_threads is None:
                n = _thread_share()
                if n != self._threads:
                    self._ctx.set_threads(n)
                    self._threads = n
            return self._ctx.embed(tokens, norm)
        finally:
            self._in_call = False


class LoraAdapter:
    """A LoRA adapter loaded for one Model (Model.load_lora); freed with it."""

    def __init__(self, model, id, path):
        self.model, self.id, self.path = model, id, path

    def __repr__(self):
        return f"LoraAdapter({self.path!r})"


class Model:
    """A GGUF model. devices: "cpu-avx0", "vulkan0,cpu-avx0" or a list
    (None: the default order); n_gpu_layers: "auto" or a count;
    tensor_overrides: ["PATTERN=DEVICE", ...] (llama.cpp's -ot: the weights
    whose name matches PATTERN go to DEVICE, "CPU" or the GPU); cpu_moe=True
    or n_cpu_moe=N: the experts of every / the first N layers stay in host
    memory (--cpu-moe, --n-cpu-moe); n_ctx: the
    context of each Session (None: the training context, at most 4096);
    n_threads: None (the CPUs divided among the sessions generating at
    once) or a count; mmproj: the model's multimodal projector (an mmproj
    GGUF, as `tessera run --mmproj`), after which chat() takes image parts
    (bytes, a file path or a data: URI; mmproj_offload=False keeps the
    encoder on the CPU). The generate/chat/embed/save_state methods use one
    Session per calling thread."""

    def __init__(self, path, *, devices=None, n_gpu_layers="auto", n_ctx=None, n_batch=512,
                 n_threads=None, flash_attn=False, type_k=None, type_v=None, prefix_cache=False,
                 use_mmap=True, use_mlock=False, tensor_overrides=None, cpu_moe=False, n_cpu_moe=0,
                 mmproj=None, mmproj_offload=True):
        from . import _init
        self.path = _check.path("path", path)
        devices = _device_list(devices)
        if n_gpu_layers is None or (isinstance(n_gpu_layers, str) and n_gpu_layers == "auto"):
            ngl = -1
        else:
            ngl = _check.integer("n_gpu_layers", n_gpu_layers, 0, what="'auto' or an int >= 0")
        args = _context_args(n_ctx, n_batch, n_threads, flash_attn, type_k, type_v)
        prefix_cache = _check.flag("prefix_cache", prefix_cache)
        use_mmap = _check.flag("use_mmap", use_mmap)
        use_mlock = _check.flag("use_mlock", use_mlock)
        if tensor_overrides is not None:
            if isinstance(tensor_overrides, str) or not all(isinstance(o, str) for o in tensor_overrides):
                raise TypeError("tensor_overrides must be a list of 'PATTERN=DEVICE' strings, not "
                                f"{_check._show(tensor_overrides)}")
            tensor_overrides = list(tensor_overrides)
        n_cpu_moe = _check.integer("n_cpu_moe", n_cpu_moe, 0, what="an int >= 0")
        if _check.flag("cpu_moe", cpu_moe):
            n_cpu_moe = 2**31 - 1  # TESSERA_CPU_MOE_ALL
        _init()
        if devices:
            _check_device_names(devices)
        if ngl > 0 and not _has_gpu(devices):
            names = devices or ",".join(d["name"] for d in _tessera.devices())
            warnings.warn(f"n_gpu_layers={ngl} has no effect: there is no GPU among the devices "
                          f"({names}); the model runs on the CPU", RuntimeWarning, stacklevel=2)
            ngl = 0
        try:
            self._m = _tessera.Model(self.path, devices, ngl, use_mmap, use_mlock, tensor_overrides, n_cpu_moe)
        except _tessera.TesseraError as e:
            if not os.path.exists(self.path):
                raise ModelNotFoundError(str(e)) from None
            if "(--no-mmap)" in str(e):  # the engine's words for use_mmap=False
                raise _tessera.TesseraError(str(e).replace("(--no-mmap)", "(use_mmap=False)")) from None
            raise
        self.metadata = self._m.info()
        # mmproj: the model's multimodal projector (llama.cpp's mmproj GGUF,
        # --mmproj): chat() then takes image parts
        self.mmproj = None if mmproj is None else _check.path("mmproj", mmproj)
        self._proj = None
        if self.mmproj is not None:
            self._proj = _tessera.Projector(self._m, self.mmproj, not _check.flag("mmproj_offload", mmproj_offload))
        train = self.metadata["n_ctx_train"] or 4096
        self._default_n_ctx = min(train, 4096) if args["n_ctx"] is None else args["n_ctx"]
        self._session_args = dict(n_batch=args["n_batch"], n_threads=args["n_threads"], flash_attn=flash_attn,
                                  type_k=type_k, type_v=type_v, prefix_cache=prefix_cache)
        self._local = threading.local()

    def load_lora(self, path):
        """A LoRA adapter of this model (a GGUF adapter as llama.cpp's
        convert_lora_to_gguf.py writes it), for Session.set_loras."""
        path = _check.path("path", path)
        return LoraAdapter(self, self._m.load_lora(path), path)

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
        return self._m.meta(_check.text("key", key))

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
        elif not isinstance(text, (bytes, bytearray)):
            raise TypeError(f"text must be a str or bytes, not {_check._show(text)}")
        return self._m.tokenize(bytes(text), _check.flag("add_special", add_special),
                                _check.flag("parse_special", parse_special))

    def detokenize(self, tokens, remove_special=False, render_special=False):
        tokens = _check.tokens("tokens", tokens, self.n_vocab)
        return self._m.detokenize(tokens, _check.flag("remove_special", remove_special),
                                  _check.flag("render_special", render_special)).decode("utf-8", "replace")

    def token_to_piece(self, token, render_special=False):
        token = _check.integer("token", token, 0, self.n_vocab - 1,
                               what=f"a token id (an int from 0 to {self.n_vocab - 1})")
        return self._m.piece(token, _check.flag("render_special", render_special))

    # ---- sessions
    def session(self, **kw):
        """A Session of your own (a context); keyword overrides: n_ctx,
        n_batch, n_threads, flash_attn, type_k, type_v, prefix_cache."""
        _check.keywords("Model.session()", kw, SESSION_ARGS)
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
        """Embedding vectors of a text or a list of texts, through an
        embedding context of this thread, as `tessera embed` gives them:
        pooling "mean", "cls", "last" (one list of floats per text), "none"
        (a list of rows per text, one per token), "rank" (a reranker's
        scores), or None for the file's pooling_type (none when the file
        has none). normalize: True (L2, as OpenAI's embeddings are), False,
        or a p as llama.cpp numbers them (-1 none, 0 max-abs, 1
        taxicab, 2 Euclidean, p > 2 the p-norm)."""
        single = isinstance(texts, str)
        if not single:
            if isinstance(texts, (bytes, dict)) or not isinstance(texts, (list, tuple)):
                raise TypeError(f"texts must be a str or a list of str, not {_check._show(texts)}")
            for i, t in enumerate(texts):
                _check.text(f"texts[{i}]", t)
        if pooling is not None:
            _check.choice("pooling", pooling, POOLINGS + (None,))
        if isinstance(normalize, bool):
            norm = 2 if normalize else -1
        else:
            norm = _check.integer("normalize", normalize, -1,
                                  what="True, False or an int >= -1 (-1 none, 0 max-abs, 1 taxicab, "
                                       "2 Euclidean, p > 2 the p-norm)")
        key = pooling or "unspecified"
        ctxs = getattr(self._local, "embed_ctx", None)
        if ctxs is None:
            ctxs = self._local.embed_ctx = {}
        ctx = ctxs.get(key)
        if ctx is None:
            ctx = ctxs[key] = _EmbedContext(self, key)
        out = []
        for text in [texts] if single else texts:
            floats, dim = ctx.embed(self.tokenize(text), norm)
            rows = [floats[i:i + dim] for i in range(0, len(floats), dim)]
            # the pooling the engine used, not the argument: None may mean none
            out.append(rows if ctx.pooling == "none" else rows[0])
        return out[0] if single else out


def _device_list(devices):
    """devices= as the engine's comma-separated text, or None."""
    if devices is None:
        return None
    if isinstance(devices, str):
        names = devices.split(",")
    elif isinstance(devices, (list, tuple)):
        names = list(devices)
        for i, d in enumerate(names):
            _check.text(f"devices[{i}]", d)
    else:
        raise TypeError(f"devices must be a str ('cpu-avx0', 'vulkan0,cpu-avx0'), a list of str or None, "
                        f"not {_check._show(devices)}")
    names = [d.strip() for d in names]
    if not all(names):
        raise ValueError(f"devices has an empty name: {devices!r} (see tessera.devices() for the names)")
    return ",".join(names)


def _check_device_names(devices):
    """Each name one the engine found (tessera.devices()), once."""
    found = [d["name"] for d in _tessera.devices()]
    names = devices.split(",")
    for i, name in enumerate(names):
        if name not in found:
            raise ValueError(f"devices: unknown device {name!r} (available: {', '.join(found)})")
        if name in names[:i]:
            raise ValueError(f"devices: {name!r} is listed twice")


def _has_gpu(devices):
    """Whether a non-CPU device would hold layers: one named in devices, or
    any the engine found when devices is None."""
    found = _tessera.devices()
    names = devices.split(",") if devices else None
    return any(d["kind"] != "CPU" and (names is None or d["name"] in names) for d in found)
