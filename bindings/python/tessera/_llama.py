"""Llama: llama-cpp-python's high-level class over Tessera.

Scripts written for llama-cpp-python run with one line changed:

    from tessera import Llama            # was: from llama_cpp import Llama
    # or: from tessera import llama_cpp  (llama_cpp.Llama, LlamaGrammar, ...)

The constructor takes llama-cpp-python's keywords; the methods return its
dicts field for field (the OpenAI shapes: "cmpl-..." text_completion,
"chatcmpl-..." chat.completion and their stream chunks, embedding lists).
What the engine cannot honour is refused with a ValueError naming the
setting, never silently changed; settings that change nothing here (thread
pools for batches, NUMA, perf counters) are accepted and logged.

Differences worth knowing: logprobs need no logits_all=True (they are
computed from the row each token was sampled from), with echo the prompt's
token i is scored by the logits after tokens < i (OpenAI's meaning), and
sampling uses Tessera's sampler, so a seed gives the same text run to run
but not the text llama.cpp gives for that seed.
"""
import array
import fnmatch
import glob
import json
import logging
import os
import random
import sys
import tempfile
import time
import uuid

try:
    from . import _tessera
except ImportError:  # the build tree's tests put _tessera on sys.path
    import _tessera

from . import _chat
from ._model import Model

__all__ = ["Llama", "LlamaGrammar", "LlamaState", "LlamaRAMCache", "LogitsProcessorList",
           "StoppingCriteriaList", "LLAMA_DEFAULT_SEED"]

log = logging.getLogger("tessera.llama_cpp")

LLAMA_DEFAULT_SEED = 0xFFFFFFFF
# llama.cpp's pooling types (llama_cpp.LLAMA_POOLING_TYPE_*) and the names
# the engine takes
LLAMA_POOLING_TYPE_UNSPECIFIED, LLAMA_POOLING_TYPE_NONE, LLAMA_POOLING_TYPE_MEAN = -1, 0, 1
LLAMA_POOLING_TYPE_CLS, LLAMA_POOLING_TYPE_LAST, LLAMA_POOLING_TYPE_RANK = 2, 3, 4
_POOLING = {-1: "unspecified", 0: "none", 1: "mean", 2: "cls", 3: "last", 4: "rank"}

# Constructor keywords that change nothing here: accepted, logged when set
# to something other than llama-cpp-python's default.
_IGNORED = {
    "split_mode": 1, "main_gpu": 0, "n_ubatch": 512, "n_threads_batch": None,
    "offload_kqv": True, "op_offload": None, "swa_full": None, "no_perf": False,
    "numa": False, "rpc_servers": None, "check_tensors": False, "mul_mat_q": True,
    "use_direct_io": False, "last_n_tokens_size": 64, "lora_scale": 1.0, "spm_infill": False,
}
# Keywords the engine cannot honour: refused unless left at the default.
_REFUSED = {
    "tensor_split": (None, "splitting layers over several GPUs by ratio"),
    "kv_overrides": (None, "overriding GGUF metadata"),
    "rope_scaling_type": (-1, "rope scaling"),
    "rope_freq_base": (0.0, "a rope base other than the file's"),
    "rope_freq_scale": (0.0, "rope frequency scaling"),
    "yarn_ext_factor": (-1.0, "YaRN"),
    "yarn_attn_factor": (1.0, "YaRN"),
    "yarn_beta_fast": (32.0, "YaRN"),
    "yarn_beta_slow": (1.0, "YaRN"),
    "yarn_orig_ctx": (0, "YaRN"),
    "lora_base": (None, "LoRA adapters"),
    "lora_path": (None, "LoRA adapters"),
    "draft_model": (None, "speculative decoding with a draft model"),
    "tokenizer": (None, "an external tokenizer (the GGUF file's vocabulary is used)"),
}


# llama-cpp-python's named chat formats that are one line per turn: how
# the system message is placed ("top": the first one, always, even empty;
# "inline": each where it stands; None: dropped), each role's turn, the
# prompt that asks for the reply, and the stop string. Other roles (tool)
# are left out, as there.
_CHAT_FORMATS = {
    "chatml": ("top", {"system": "<|im_start|>system\n{}<|im_end|>\n",
                       "user": "<|im_start|>user\n{}<|im_end|>\n",
                       "assistant": "<|im_start|>assistant\n{}<|im_end|>\n"},
               "<|im_start|>assistant\n", "<|im_end|>"),
    "llama-3": ("inline", {r: f"<|start_header_id|>{r}<|end_header_id|>\n\n{{}}<|eot_id|>"
                           for r in ("system", "user", "assistant")},
                "<|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|>"),
    "gemma": (None, {"user": "<start_of_turn>user\n{}<end_of_turn>\n",
                     "assistant": "<start_of_turn>model\n{}<end_of_turn>\n"},
              "<start_of_turn>model\n", "<end_of_turn>\n"),
    "zephyr": ("top", {"system": "<|system|>\n{}</s>\n", "user": "<|user|>\n\n{}</s>\n",
                       "assistant": "<|assistant|>\n\n{}</s>\n"},
               "<|assistant|>\n\n", "</s>"),
    "mistral-instruct": (None, {"user": "[INST] {}", "assistant": " [/INST]{}</s>"}, " [/INST]", "</s>"),
}


def _format_chat(name, messages):
    """(prompt text, stop string) of messages in the chat format name."""
    system, turns, reply, stop = _CHAT_FORMATS[name]
    text = ""
    if system == "top":
        first = next((m for m in messages if m["role"] == "system"), {})
        text = turns["system"].format(_chat._text_of(first.get("content")) or "")
    for m in messages:
        if m["role"] in turns and (m["role"] != "system" or system == "inline"):
            text += turns[m["role"]].format(_chat._text_of(m.get("content")) or "")
    return text + reply, stop


def _refuse(what, why):
    raise ValueError(f"{what}: not supported by tessera's llama_cpp drop-in ({why})")


class LlamaGrammar:
    """A GBNF grammar for create_completion(grammar=...)."""

    def __init__(self, *args, _grammar=None, **kwargs):
        self._grammar = _grammar

    @classmethod
    def from_string(cls, grammar, verbose=True):
        if not isinstance(grammar, str) or "root" not in grammar:
            raise ValueError("LlamaGrammar.from_string: a GBNF grammar with a root rule")
        return cls(_grammar=grammar)

    @classmethod
    def from_file(cls, file, verbose=True):
        with open(os.fspath(file), encoding="utf-8") as f:
            return cls.from_string(f.read(), verbose)

    @classmethod
    def from_json_schema(cls, json_schema, verbose=True):
        if not isinstance(json_schema, str):
            json_schema = json.dumps(json_schema)
        return cls(_grammar=_tessera.json_schema_to_gbnf(json_schema))

    @property
    def grammar(self):
        return self._grammar


class LlamaState:
    """What save_state returns and load_state takes: the KV cache and its
    tokens (llama_state, the engine's state file's bytes) and the seed."""

    def __init__(self, input_ids, scores, n_tokens, llama_state, llama_state_size, seed):
        self.input_ids = input_ids
        self.scores = scores
        self.n_tokens = n_tokens
        self.llama_state = llama_state
        self.llama_state_size = llama_state_size
        self.seed = seed


class LlamaRAMCache:
    """Accepted by Llama.set_cache: turns on reuse of the common prompt
    prefix (the engine's prefix cache holds one sequence)."""

    def __init__(self, capacity_bytes=2 << 30):
        self.capacity_bytes = capacity_bytes


LlamaCache = LlamaRAMCache


class LogitsProcessorList(list):
    def __call__(self, input_ids, scores):
        for p in self:
            scores = p(input_ids, scores)
        return scores


class StoppingCriteriaList(list):
    def __call__(self, input_ids, logits):
        return any(c(input_ids, logits) for c in self)


class _ModelHolder:
    """What tessera._chat's helpers take in place of a Session: .model."""

    def __init__(self, model):
        self.model = model


def _metadata_strings(meta):
    """GGUF metadata as llama.cpp's llama_model_meta_val_str gives it (what
    llama-cpp-python's Llama.metadata holds): every value a string."""
    def text(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, float):
            return f"{v:f}"
        return str(v)
    return {k: text(v) for k, v in meta.items()}


def _numpy():
    """numpy where it is installed (and is numpy), else None."""
    try:
        import numpy
    except ImportError:
        return None
    return numpy if hasattr(numpy, "frombuffer") else None


def _float_array(row):
    """A row of float32 logits (bytes) as numpy gives it, else array.array."""
    np = _numpy()
    return np.frombuffer(row, dtype=np.float32).copy() if np else array.array("f", row)


def _int_array(ids):
    np = _numpy()
    return np.array(ids, dtype=np.intc) if np else array.array("i", ids)


def _float_bytes(scores):
    if isinstance(scores, array.array) and scores.typecode == "f":
        return scores.tobytes()
    if hasattr(scores, "astype"):  # numpy
        return scores.astype("float32").tobytes()
    return array.array("f", scores).tobytes()


def _new_id(prefix):
    return prefix + str(uuid.uuid4())


def _utf8_complete(b):
    """Length of the longest prefix of b that does not end inside a UTF-8
    sequence."""
    n = len(b)
    for back in range(1, min(4, n) + 1):
        c = b[n - back]
        if c & 0xC0 == 0x80:  # continuation byte: look further back
            continue
        need = 1 if c < 0x80 else 2 if c >> 5 == 6 else 3 if c >> 4 == 14 else 4 if c >> 3 == 30 else 1
        return n if back >= need else n - back
    return n


class Llama:
    """llama-cpp-python's Llama over a Tessera model (see the module doc)."""

    def __init__(self, model_path, *, n_gpu_layers=0, vocab_only=False, use_mmap=True,
                 use_mlock=False, seed=LLAMA_DEFAULT_SEED, n_ctx=512, n_batch=512, n_threads=None,
                 pooling_type=LLAMA_POOLING_TYPE_UNSPECIFIED, logits_all=False, embedding=False,
                 flash_attn=False, type_k=None, type_v=None, chat_format=None, chat_handler=None,
                 verbose=True, **kwargs):
        self.verbose = bool(verbose)
        for key, value in kwargs.items():
            if key in _REFUSED:
                default, why = _REFUSED[key]
                if value not in (default, None) and value != {}:
                    _refuse(f"Llama({key}={value!r})", why)
            elif key in _IGNORED:
                if value != _IGNORED[key]:
                    self._log(f"Llama({key}={value!r}) is accepted and has no effect here")
            else:
                raise TypeError(f"Llama() got an unexpected keyword argument '{key}'")
        if pooling_type not in _POOLING:
            raise ValueError(f"pooling_type {pooling_type}: one of {sorted(_POOLING)}")
        if chat_format is not None and chat_format not in _CHAT_FORMATS and chat_handler is None:
            _refuse(f"chat_format={chat_format!r}",
                    "the model's own chat template (chat_format=None) or one of "
                    f"{', '.join(sorted(_CHAT_FORMATS))} are; or give a chat_handler")
        if isinstance(type_k, int) or isinstance(type_v, int):
            _refuse("type_k/type_v as ggml type numbers", "give a name: 'f16', 'q8_0', ...")
        self.model_path = os.fspath(model_path)
        self._closed = False
        self._embed_ctx = None
        self._ctx = None
        self.chat_format = chat_format
        self.chat_handler = chat_handler
        self.cache = None
        self._seed = int(seed) if seed else LLAMA_DEFAULT_SEED
        self.n_batch = int(n_batch)
        self._n_ctx = int(n_ctx)
        self._pooling = pooling_type
        if not os.path.exists(self.model_path):  # llama-cpp-python's error
            raise ValueError(f"Model path does not exist: {self.model_path}")
        if vocab_only:  # the tokenizer alone: tokenize, detokenize and the token ids
            self._tok = _tessera.Vocab(self.model_path)
            self._model = None
            meta = _tessera.gguf_metadata(self.model_path)
            self._bos = meta.get("tokenizer.ggml.bos_token_id", -1)
            self._eos = meta.get("tokenizer.ggml.eos_token_id", -1)
            self._n_vocab = self._tok.n_tokens()
            self.metadata = _metadata_strings(meta)
            return
        # the Model for its weights and vocabulary; the contexts are this
        # class's own (_tessera.Context: generation, and embeddings)
        self._model = Model(self.model_path, n_gpu_layers="auto" if n_gpu_layers == -1 else int(n_gpu_layers),
                            use_mmap=use_mmap, use_mlock=use_mlock)
        info = self._model.metadata
        if not n_ctx:  # 0: the model's training context
            self._n_ctx = info["n_ctx_train"] or 4096
        self._tok = self._model._m
        self._bos, self._eos, self._n_vocab = info["bos"], info["eos"], info["n_vocab"]
        self._logits_all = bool(logits_all)
        self._embedding = bool(embedding)
        self._repeat_last_n = int(kwargs.get("last_n_tokens_size", 64))
        if flash_attn not in (False, True, "auto"):
            raise ValueError(f"flash_attn must be True, False or 'auto', not {flash_attn!r}")
        self._ctx_args = (self.n_batch, int(n_threads or 0), {False: 0, True: 1, "auto": 2}[flash_attn])
        self._ctx = _tessera.Context(self._tok, self._n_ctx, *self._ctx_args, type_k, type_v)
        self._prefix_cache = False
        self._holder = _ModelHolder(self._model)  # what _chat's helpers read (.model)
        # llama-cpp-python's multimodal handlers (Llava15ChatHandler(clip_model_path=...)):
        # the mmproj is loaded beside the model and image parts go through the model's template
        self._proj = None
        clip = getattr(chat_handler, "clip_model_path", None)
        if clip is not None:
            if not os.path.exists(os.fspath(clip)):
                raise ValueError(f"Clip model path does not exist: {os.fspath(clip)}")
            self._proj = _tessera.Projector(self._tok, os.fspath(clip))
        self.metadata = _metadata_strings(_tessera.gguf_metadata(self.model_path))
        if self.verbose:
            print(f"tessera: {self.model_path}: {self._model.description}; n_ctx {self.n_ctx()}",
                  file=sys.stderr)

    def _log(self, msg):
        log.info(msg)
        if self.verbose:
            print(f"tessera: {msg}", file=sys.stderr)

    # ------------------------------------------------------------- offline
    @classmethod
    def from_pretrained(cls, repo_id, filename, additional_files=None, local_dir=None,
                        local_dir_use_symlinks="auto", cache_dir=None, **kwargs):
        """The file matching filename (a glob) of repo_id, found offline: in
        local_dir, or in the Hugging Face cache (cache_dir, HF_HUB_CACHE,
        HF_HOME/hub, ~/.cache/huggingface/hub) where huggingface_hub put it.
        Nothing is downloaded: a clear FileNotFoundError otherwise."""
        if additional_files:
            _refuse("from_pretrained(additional_files=...)", "split models load from their first part")
        places = []
        if local_dir:
            places.append(os.fspath(local_dir))
        hub = [cache_dir, os.environ.get("HF_HUB_CACHE"),
               os.path.join(os.environ["HF_HOME"], "hub") if os.environ.get("HF_HOME") else None,
               os.path.expanduser("~/.cache/huggingface/hub")]
        folder = "models--" + repo_id.replace("/", "--")
        for h in hub:
            if h:
                places += sorted(glob.glob(os.path.join(os.fspath(h), folder, "snapshots", "*")))
        for place in places:
            for root, _dirs, files in os.walk(place):
                for f in sorted(files):
                    rel = os.path.relpath(os.path.join(root, f), place)
                    if fnmatch.fnmatch(rel, filename) or fnmatch.fnmatch(f, filename):
                        return cls(model_path=os.path.join(root, f), **kwargs)
        raise FileNotFoundError(
            f"Llama.from_pretrained({repo_id!r}, {filename!r}): no such file in the local Hugging Face "
            f"cache ({', '.join(p for p in hub if p)}) nor local_dir; tessera does not download: fetch it "
            f"first (huggingface-cli download {repo_id} {filename}) and pass model_path=")

    # ------------------------------------------------------------- tokens
    def tokenize(self, text, add_bos=True, special=False):
        """Token ids of text (bytes, UTF-8); add_bos adds BOS where the
        vocabulary asks for it; special parses special-token strings."""
        if isinstance(text, str):
            raise TypeError("Llama.tokenize takes bytes (text.encode('utf-8'))")
        return self._tok.tokenize(bytes(text), bool(add_bos), bool(special))

    def detokenize(self, tokens, prev_tokens=None, special=False):
        """The bytes of tokens (special: control tokens give their text); a
        leading space after BOS is dropped, as llama-cpp-python does."""
        out = b"".join(self._tok.piece(int(t), bool(special)) for t in tokens)
        if tokens and tokens[0] == self.token_bos() and out[:1] == b" ":
            out = out[1:]
        return out

    def n_ctx(self):
        return self._ctx.n_ctx() if self._ctx is not None else self._n_ctx

    def n_vocab(self):
        return self._n_vocab

    def n_embd(self):
        return self._need_model().n_embd

    def token_bos(self):
        return self._bos

    def token_eos(self):
        return self._eos

    def _need_model(self):
        if self._model is None:
            raise RuntimeError("this Llama was created with vocab_only=True: it only tokenizes")
        if self._closed:
            raise RuntimeError("this Llama is closed")
        return self._model

    def token_nl(self):
        return self.tokenize(b"\n", add_bos=False)[-1]

    def pooling_type(self):
        return self._pooling

    @property
    def n_tokens(self):
        return len(self._ctx.tokens()) if self._ctx is not None else 0

    @property
    def input_ids(self):
        return list(self._ctx.tokens()) if self._ctx is not None else []

    @property
    def _input_ids(self):
        return self.input_ids

    # ------------------------------------------------------------- state
    def set_seed(self, seed):
        self._seed = int(seed)

    def set_cache(self, cache):
        """A LlamaRAMCache (or any cache object) turns on prompt-prefix
        reuse; None turns it off."""
        self.cache = cache
        self._prefix_cache = cache is not None

    def reset(self):
        self._need_model()
        self._ctx.reset()

    def save_state(self):
        self._need_model()
        fd, path = tempfile.mkstemp(prefix="tessera-state-")
        os.close(fd)
        try:
            self._ctx.save_state(path)
            with open(path, "rb") as f:
                data = f.read()
        finally:
            os.unlink(path)
        return LlamaState(input_ids=self.input_ids, scores=None, n_tokens=self.n_tokens,
                          llama_state=data, llama_state_size=len(data), seed=self._seed)

    def load_state(self, state):
        self._need_model()
        fd, path = tempfile.mkstemp(prefix="tessera-state-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(state.llama_state)
            self._ctx.load_state(path)
        finally:
            os.unlink(path)
        self._seed = state.seed

    def close(self):
        if self._closed:
            return
        self._closed = True
        if self._ctx is not None:
            self._ctx.close()
        if self._embed_ctx is not None:
            self._embed_ctx.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # ------------------------------------------------------------- sampling
    def _sampling(self, seed, temperature, top_p, top_k, min_p, typical_p, repeat_penalty,
                  frequency_penalty, presence_penalty, tfs_z, mirostat_mode, logits_processor,
                  stopping_criteria, grammar, logit_bias, mirostat_tau=5.0, mirostat_eta=0.1, **constraint):
        if mirostat_mode not in (0, 1, 2, None):
            raise ValueError(f"mirostat_mode must be 0 (off), 1 or 2, not {mirostat_mode!r}")
        if tfs_z not in (None, 1.0):
            self._log(f"tfs_z={tfs_z} has no effect (llama.cpp removed tail-free sampling)")
        if seed is not None:
            self.set_seed(seed)
        else:  # llama-cpp-python's sequence: each call draws the next seed
            self.set_seed(random.Random(self._seed).randint(0, 2 ** 32))
        if isinstance(grammar, LlamaGrammar):
            grammar = grammar._grammar
        schema = constraint.get("json_schema")
        if schema is not None and not isinstance(schema, str):
            schema = json.dumps(schema)
        # Context.start's keywords (llama.cpp's sampler settings)
        return dict(temperature=float(temperature), top_k=int(top_k), top_p=float(top_p), min_p=float(min_p),
                    typical_p=float(typical_p), repeat_penalty=float(repeat_penalty),
                    repeat_last_n=self._repeat_last_n, frequency_penalty=float(frequency_penalty),
                    presence_penalty=float(presence_penalty), seed=self._seed & 0xFFFFFFFF,
                    logit_bias=[(int(t), float(b)) for t, b in (logit_bias or {}).items()],
                    grammar=grammar, json_schema=schema, json_object=bool(constraint.get("json_object")),
                    mirostat=int(mirostat_mode or 0), mirostat_tau=float(mirostat_tau),
                    mirostat_eta=float(mirostat_eta))

    def _run(self, tokens, max_tokens, stop, args, top_k_lp=None, logits_processor=None,
             stopping_criteria=None, chunks=None):
        """Generate from tokens: yields (token, piece bytes, logprob entry or
        None) per token, then ('end', finish_reason). A logits_processor
        (llama-cpp-python's: (input_ids, scores) -> scores, numpy arrays
        where numpy is installed, else array.array) rewrites each row of
        logits before sampling; stopping_criteria(input_ids, scores) -> True
        ends the generation ("stop")."""
        ctx = self._ctx
        ctx.start(list(tokens), int(max_tokens), reuse_prefix=self._prefix_cache, chunks=chunks, **args)
        ids = list(tokens)
        last = [None]

        def process(row):
            scores = _float_array(row)
            if logits_processor:
                scores = logits_processor(_int_array(ids), scores)
            last[0] = scores
            return _float_bytes(scores)

        hooked = bool(logits_processor or stopping_criteria)
        while True:
            tok, piece = ctx.next_with(process) if hooked else ctx.next()
            if tok is None:
                yield "end", piece, None
                return
            lp = ctx.logprobs(tok, top_k_lp) if top_k_lp is not None else None
            ids.append(tok)
            yield tok, piece, lp
            if stopping_criteria and stopping_criteria(_int_array(ids), last[0]):
                yield "end", "stop", None
                return

    def _prompt_tokens(self, prompt):
        if isinstance(prompt, (list, tuple)):
            return [int(t) for t in prompt]
        toks = self._model._m.tokenize(prompt.encode("utf-8"), True, True)
        if not toks:
            bos = self.token_bos()
            toks = [bos] if bos >= 0 else []
        if not toks:
            raise ValueError("the prompt gives no tokens")
        return toks

    def _max_tokens(self, max_tokens, n_prompt):
        if n_prompt >= self.n_ctx():
            raise ValueError(f"Requested tokens ({n_prompt}) exceed context window of {self.n_ctx()}")
        room = self.n_ctx() - n_prompt
        return room if max_tokens is None or max_tokens <= 0 else min(int(max_tokens), room)

    def generate(self, tokens, top_k=40, top_p=0.95, min_p=0.05, typical_p=1.0, temp=0.80,
                 repeat_penalty=1.0, reset=True, frequency_penalty=0.0, presence_penalty=0.0, tfs_z=1.0,
                 mirostat_mode=0, mirostat_tau=5.0, mirostat_eta=0.1, penalize_nl=True,
                 logits_processor=None, stopping_criteria=None, grammar=None):
        """Token ids sampled after tokens, one at a time, until an
        end-of-generation token (not yielded), a stopping criterion or the
        end of the context: llama-cpp-python's generate(), whose callers
        break out of the loop themselves."""
        self._need_model()
        args = self._sampling(self._seed, temp, top_p, top_k, min_p, typical_p, repeat_penalty,
                              frequency_penalty, presence_penalty, tfs_z, mirostat_mode, None, None,
                              grammar, None, mirostat_tau, mirostat_eta)
        for tok, _piece, _lp in self._run(list(tokens), -1, [], args, None, logits_processor, stopping_criteria):
            if tok == "end":
                return
            yield tok

    # ------------------------------------------------------------- completion
    def create_completion(self, prompt, suffix=None, max_tokens=16, temperature=0.8, top_p=0.95,
                          min_p=0.05, typical_p=1.0, logprobs=None, echo=False, stop=[],
                          frequency_penalty=0.0, presence_penalty=0.0, repeat_penalty=1.0, top_k=40,
                          stream=False, seed=None, tfs_z=1.0, mirostat_mode=0, mirostat_tau=5.0,
                          mirostat_eta=0.1, model=None, stopping_criteria=None, logits_processor=None,
                          grammar=None, logit_bias=None):
        """A text completion: a text_completion dict, or with stream=True an
        iterator of its chunks. suffix is appended to the completion's text
        (no fill-in-the-middle); logprobs=k gives each token's log-probability
        and the k most likely alternatives."""
        self._need_model()
        args = self._sampling(seed, temperature, top_p, top_k, min_p, typical_p, repeat_penalty,
                              frequency_penalty, presence_penalty, tfs_z, mirostat_mode, logits_processor,
                              stopping_criteria, grammar, logit_bias, mirostat_tau, mirostat_eta)
        tokens = self._prompt_tokens(prompt)
        prompt_text = prompt if isinstance(prompt, str) else self.detokenize(tokens).decode("utf-8", "replace")
        limit = self._max_tokens(max_tokens, len(tokens))
        stop = [stop] if isinstance(stop, str) else [s for s in (stop or []) if s]
        k = None if logprobs is None else max(0, int(logprobs))
        base = {"id": _new_id("cmpl-"), "object": "text_completion", "created": int(time.time()),
                "model": model if model is not None else self.model_path}
        prompt_lp = None
        if k is not None and echo:
            prompt_lp = self._ctx.prompt_logprobs(tokens, k)
        gen = self._run(tokens, limit, stop, args, k, logits_processor, stopping_criteria)
        if stream:
            return self._completion_chunks(gen, base, tokens, prompt_text, echo, suffix, stop, k, prompt_lp)
        return self._completion(gen, base, tokens, prompt_text, echo, suffix, stop, k, prompt_lp)

    def __call__(self, prompt, *args, **kwargs):
        return self.create_completion(prompt, *args, **kwargs)

    def _lp_entry(self, tok, lp, k):
        """(token text, logprob, {text: logprob} of the top k plus the token)."""
        text = self.detokenize([tok]).decode("utf-8", "ignore")
        top = {}
        for t, v in lp[1][:k]:
            top.setdefault(self.detokenize([t]).decode("utf-8", "ignore"), v)
        top[text] = lp[0]
        return text, lp[0], top

    def _prompt_lp(self, tokens, prompt_lp, k):
        """Logprobs lists of the prompt's tokens (BOS left out; the first one
        has none: nothing came before it)."""
        out = {"tokens": [], "text_offset": [], "token_logprobs": [], "top_logprobs": []}
        offset = 0
        bos = self.token_bos()
        for i, tok in enumerate(tokens):
            if i == 0 and tok == bos:
                continue
            text = self.detokenize([tok]).decode("utf-8", "ignore")
            out["tokens"].append(text)
            out["text_offset"].append(offset)
            offset += len(text)
            if i == 0 or (i == 1 and tokens[0] == bos):
                out["token_logprobs"].append(None)
                out["top_logprobs"].append(None)
            else:
                _, lp, top = self._lp_entry(tok, prompt_lp[i - 1], k)
                out["token_logprobs"].append(lp)
                out["top_logprobs"].append(top)
        return out, offset

    def _completion(self, gen, base, tokens, prompt_text, echo, suffix, stop, k, prompt_lp):
        data = b""
        kept = []  # (token, start byte, logprob)
        n_generated = 0
        finish = "length"
        stop_b = [s.encode("utf-8") for s in stop]
        for tok, piece, lp in gen:
            if tok == "end":
                finish = piece
                break
            n_generated += 1
            kept.append((tok, len(data), lp))
            data += piece
            hits = [data.find(s) for s in stop_b if s in data]
            if hits:
                data = data[:min(hits)]
                kept = [e for e in kept if e[1] < len(data)]
                finish = "stop"
                break
        text = data.decode("utf-8", "ignore")
        logprobs = None
        if k is not None:
            if echo:
                logprobs, offset = self._prompt_lp(tokens, prompt_lp, k)
            else:
                logprobs = {"tokens": [], "text_offset": [], "token_logprobs": [], "top_logprobs": []}
                offset = len(prompt_text)
            for tok, start, lp in kept:
                t, v, top = self._lp_entry(tok, lp, k)
                logprobs["tokens"].append(t)
                logprobs["text_offset"].append(offset + len(data[:start].decode("utf-8", "ignore")))
                logprobs["token_logprobs"].append(v)
                logprobs["top_logprobs"].append(top)
        if echo:
            text = prompt_text + text
        if suffix is not None:
            text += suffix
        return dict(base, choices=[{"text": text, "index": 0, "logprobs": logprobs, "finish_reason": finish}],
                    usage={"prompt_tokens": len(tokens), "completion_tokens": n_generated,
                           "total_tokens": len(tokens) + n_generated})

    def _completion_chunks(self, gen, base, tokens, prompt_text, echo, suffix, stop, k, prompt_lp):
        def chunk(text, logprobs=None, finish=None):
            return dict(base, choices=[{"text": text, "index": 0, "logprobs": logprobs, "finish_reason": finish}])

        offset = len(prompt_text)
        if echo:
            lps = None
            if k is not None:
                lps, offset = self._prompt_lp(tokens, prompt_lp, k)
            yield chunk(prompt_text, lps)
        stop_b = [s.encode("utf-8") for s in stop]
        held = b""       # generated, not yet given out
        held_toks = []   # (token, logprob) whose bytes are (partly) in held
        finish = "length"
        for tok, piece, lp in gen:
            if tok == "end":
                finish = piece
                break
            held += piece
            held_toks.append((tok, lp))
            hits = [held.find(s) for s in stop_b if s in held]
            if hits:
                held = held[:min(hits)]
                finish = "stop"
                break
            # keep back a tail that could begin a stop string, and a split character
            keep = 0
            for s in stop_b:
                for n in range(min(len(s) - 1, len(held)), 0, -1):
                    if held.endswith(s[:n]):
                        keep = max(keep, n)
                        break
            safe = _utf8_complete(held[:len(held) - keep])
            if safe == 0 or keep:
                continue
            text = held[:safe].decode("utf-8", "ignore")
            lps = None
            if k is not None:
                lps = {"tokens": [], "text_offset": [], "token_logprobs": [], "top_logprobs": []}
                at = offset
                for t, l in held_toks:
                    tt, v, top = self._lp_entry(t, l, k)
                    lps["tokens"].append(tt)
                    lps["text_offset"].append(at)
                    at += len(tt)
                    lps["token_logprobs"].append(v)
                    lps["top_logprobs"].append(top)
            held_toks = []
            held = held[safe:]
            offset += len(text)
            yield chunk(text, lps)
        tail = held.decode("utf-8", "ignore") + (suffix or "")
        if tail:
            yield chunk(tail)
        yield chunk("", None, finish)

    # ------------------------------------------------------------- chat
    def create_chat_completion(self, messages, functions=None, function_call=None, tools=None,
                               tool_choice=None, temperature=0.2, top_p=0.95, top_k=40, min_p=0.05,
                               typical_p=1.0, stream=False, stop=[], seed=None, response_format=None,
                               max_tokens=None, presence_penalty=0.0, frequency_penalty=0.0,
                               repeat_penalty=1.0, tfs_z=1.0, mirostat_mode=0, mirostat_tau=5.0,
                               mirostat_eta=0.1, model=None, logits_processor=None, grammar=None,
                               logit_bias=None, logprobs=None, top_logprobs=None):
        """A chat.completion dict (or with stream=True its chunks) through the
        model's chat template: tools / tool_choice (the reply's calls parsed
        into message.tool_calls), response_format json_object / json_schema."""
        self._need_model()
        _chat.check_media(messages, self._proj)
        if self.chat_handler is not None and self._proj is None:
            return self.chat_handler(
                llama=self, messages=messages, functions=functions, function_call=function_call,
                tools=tools, tool_choice=tool_choice, temperature=temperature, top_p=top_p, top_k=top_k,
                min_p=min_p, typical_p=typical_p, logprobs=logprobs, top_logprobs=top_logprobs,
                stream=stream, stop=stop, seed=seed, response_format=response_format,
                max_tokens=max_tokens, presence_penalty=presence_penalty,
                frequency_penalty=frequency_penalty, repeat_penalty=repeat_penalty, tfs_z=tfs_z,
                mirostat_mode=mirostat_mode, mirostat_tau=mirostat_tau, mirostat_eta=mirostat_eta,
                model=model, logits_processor=logits_processor, grammar=grammar, logit_bias=logit_bias)
        if functions and not tools:  # the legacy form of tools
            tools = [{"type": "function", "function": f} for f in functions]
            if isinstance(function_call, dict):
                tool_choice = {"type": "function", "function": {"name": function_call["name"]}}
            elif function_call in ("none", "auto"):
                tool_choice = function_call
        if tool_choice is None:
            tool_choice = "auto"
        if tool_choice == "none":
            tools = None
        constraint = _chat._constraint(response_format, tools, tool_choice)
        if grammar is not None and constraint:
            raise ValueError("give at most one of grammar= and a JSON response_format / forced tool call")
        args = self._sampling(seed, temperature, top_p, top_k, min_p, typical_p, repeat_penalty,
                              frequency_penalty, presence_penalty, tfs_z, mirostat_mode, logits_processor,
                              None, grammar, logit_bias, mirostat_tau, mirostat_eta, **constraint)
        stop = [stop] if isinstance(stop, str) else [s for s in (stop or []) if s]
        chunks = None
        if self.chat_format is not None and self._proj is None:  # a named format: its text, its stop string
            text, format_stop = _format_chat(self.chat_format, messages)
            tokens = self._model._m.tokenize(text.encode("utf-8"), True, True)
            stop.append(format_stop)
        else:
            tokens, chunks = _chat._prompt(self._model._m, self._proj, messages, tools, None)
        limit = self._max_tokens(max_tokens, len(tokens))
        k = (int(top_logprobs or 0)) if logprobs else None
        base = {"id": _new_id("chatcmpl-"), "object": "chat.completion", "created": int(time.time()),
                "model": model if model is not None else self.model_path}
        gen = self._run(tokens, limit, stop, args, k, logits_processor, chunks=chunks)
        if stream:
            return self._chat_chunks(gen, base, tokens, stop, k, tools)
        comp = self._completion(gen, {}, tokens, "", False, None, stop, k, None)
        choice = comp["choices"][0]
        msg = _chat._message(self._holder, choice["text"], tools)
        finish = "tool_calls" if msg.get("tool_calls") else choice["finish_reason"]
        if msg.get("tool_calls") and len(msg["tool_calls"]) == 1:
            # llama-cpp-python also gives a lone call as the legacy function_call
            msg["function_call"] = dict(msg["tool_calls"][0]["function"])
        return dict(base, choices=[{"index": 0, "message": msg,
                              "logprobs": self._chat_lp(choice["logprobs"]), "finish_reason": finish}],
                    usage=comp["usage"])

    @staticmethod
    def _chat_lp(lp):
        """A completion's logprobs in the chat form (OpenAI's content list)."""
        if lp is None:
            return None
        content = []
        for t, v, top in zip(lp["tokens"], lp["token_logprobs"], lp["top_logprobs"]):
            content.append({"token": t, "logprob": v, "bytes": list(t.encode("utf-8")),
                            "top_logprobs": [{"token": a, "logprob": b, "bytes": list(a.encode("utf-8"))}
                                             for a, b in sorted((top or {}).items(), key=lambda x: -x[1])]})
        return {"content": content}

    def _chat_chunks(self, gen, base, tokens, stop, k, tools):
        def chunk(delta, finish=None, lp=None):
            return dict(base, object="chat.completion.chunk",
                        choices=[{"index": 0, "delta": delta, "logprobs": lp, "finish_reason": finish}])

        yield chunk({"role": "assistant"})
        pieces = self._completion_chunks(gen, {}, tokens, "", False, None, stop, k, None)
        if tools:  # a call is known only at the end: one delta with it all
            text, finish = "", "length"
            for c in pieces:
                text += c["choices"][0]["text"]
                finish = c["choices"][0]["finish_reason"] or finish
            msg = _chat._message(self._holder, text, tools)
            msg.pop("role")
            if msg.get("tool_calls"):
                for i, call in enumerate(msg["tool_calls"]):
                    call["index"] = i
                finish = "tool_calls"
            yield chunk(msg)
            yield chunk({}, finish)
            return
        for c in pieces:
            ch = c["choices"][0]
            if ch["finish_reason"] is not None:
                yield chunk({}, ch["finish_reason"])
            elif ch["text"]:
                yield chunk({"content": ch["text"]}, None, self._chat_lp(ch["logprobs"]))

    # ------------------------------------------------------------- embeddings
    def embed(self, input, normalize=False, truncate=True, return_count=False):
        """Embedding vector(s) of a string or a list of strings: one list of
        floats per input (with pooling NONE, one per token). normalize: L2."""
        self._need_model()
        if not self._embedding:
            raise RuntimeError("Llama model must be created with embedding=True to call this method")
        if self._embed_ctx is None:
            self._embed_ctx = _tessera.Context(self._tok, self.n_ctx(), *self._ctx_args[:2],
                                               embeddings=True, pooling=_POOLING[self._pooling])
        single = isinstance(input, str)
        out, total = [], 0
        for text in [input] if single else input:
            toks = self._model._m.tokenize(text.encode("utf-8"), True, True)
            if len(toks) > self.n_ctx():
                if not truncate:
                    raise ValueError(f"Requested tokens ({len(toks)}) exceed context window of {self.n_ctx()}")
                toks = toks[:self.n_ctx()]
            total += len(toks)
            floats, dim = self._embed_ctx.embed(toks, 2 if normalize else -1)
            rows = [floats[i:i + dim] for i in range(0, len(floats), dim)]
            out.append(rows[0] if len(rows) == 1 and self._pooling != LLAMA_POOLING_TYPE_NONE else rows)
        result = out[0] if single else out
        return (result, total) if return_count else result

    def create_embedding(self, input, model=None):
        """An OpenAI embeddings response: {"object": "list", "data": [...]}."""
        embeds, total = self.embed(input if isinstance(input, list) else [input], return_count=True)
        return {"object": "list",
                "data": [{"object": "embedding", "embedding": e, "index": i} for i, e in enumerate(embeds)],
                "model": model if model is not None else self.model_path,
                "usage": {"prompt_tokens": total, "total_tokens": total}}
