#!/usr/bin/env python3
"""tessera convert: a Hugging Face model directory to one GGUF file.

usage: tessera_convert.py MODEL_DIR -o OUT.gguf [--outtype f32|f16|bf16|q8_0]

Reads config.json, the weights (model.safetensors, or the shards that
model.safetensors.index.json names), the tokenizer (tokenizer.model:
SentencePiece; tokenizer.json: BPE) with tokenizer_config.json and its chat
template, and writes the GGUF Tessera and llama.cpp run. Architectures:
LlamaForCausalLM and MistralForCausalLM (llama), Qwen2ForCausalLM (qwen2),
Qwen3ForCausalLM (qwen3).

The safetensors files are read here, not through a library: the 8-byte
header length, the JSON header, every tensor's dtype, shape and byte range
checked against the file (as Tessera reads GGUF), so a truncated or
inconsistent shard is one error naming the file and the tensor. Needs
PyPI's numpy and gguf (the writer, the Q8_0 quantizer, the special tokens
and chat template of tokenizer_config.json), and sentencepiece for a
tokenizer.model. Any error is one line on stderr and exit status 1.

Differences from llama.cpp's convert_hf_to_gguf.py (tests/convert checks
the rest is the same): general.size_label and the general.* keys of the
model card (license, tags, base models...) are not written, and tensors
are written in the order of the source files (shard by shard, each
file's tensors sorted by name, as safetensors lists them), which is llama.cpp's order too.
"""
import json
import os
import struct
import sys

try:
    import numpy as np
    import gguf
except ImportError as e:  # one clear line, not a traceback
    sys.exit(f"tessera convert: needs PyPI's numpy and gguf ({e}); pip install numpy gguf")


class ConvertError(Exception):
    pass


# ------------------------------------------------------------ safetensors

ST_DTYPES = {"F32": (np.float32, 4), "F16": (np.float16, 2), "BF16": (np.uint16, 2), "F64": (np.float64, 8)}


class SafeTensors:
    """One .safetensors file, mapped and checked; tensors as numpy arrays."""

    def __init__(self, path):
        self.path = path
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise ConvertError(f"{path}: not a safetensors file ({size} bytes, shorter than its header length)")
            (n,) = struct.unpack("<Q", head)
            if n > size - 8 or n > 100 << 20:
                raise ConvertError(f"{path}: header length {n} is past the end of the file ({size} bytes)")
            try:
                header = json.loads(f.read(n).decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as e:
                raise ConvertError(f"{path}: the header is not JSON ({e})")
        if not isinstance(header, dict):
            raise ConvertError(f"{path}: the header is not a JSON object")
        self.data_start = 8 + n
        data_size = size - self.data_start
        self.map = np.memmap(path, dtype=np.uint8, mode="r", offset=self.data_start, shape=(data_size,)) \
            if data_size > 0 else np.zeros(0, np.uint8)
        self.tensors = {}
        spans = []
        for name, info in header.items():
            if name == "__metadata__":
                continue
            if not isinstance(info, dict) or not {"dtype", "shape", "data_offsets"} <= info.keys():
                raise ConvertError(f"{path}: tensor '{name}' has no dtype, shape or data_offsets")
            dt = info["dtype"]
            if dt not in ST_DTYPES:
                raise ConvertError(f"{path}: tensor '{name}' has dtype {dt}, which tessera convert does not read "
                                   f"({', '.join(ST_DTYPES)})")
            shape = info["shape"]
            if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape) or len(shape) > 4:
                raise ConvertError(f"{path}: tensor '{name}' has a bad shape {shape!r}")
            begin, end = info["data_offsets"]
            count = int(np.prod(shape)) if shape else 1
            if not (0 <= begin <= end <= data_size) or end - begin != count * ST_DTYPES[dt][1]:
                raise ConvertError(f"{path}: tensor '{name}' ({dt} {shape}) has bytes {begin}..{end}, which do not "
                                   f"fit its size or the file's {data_size} data bytes")
            self.tensors[name] = (dt, shape, begin, end)
            spans.append((begin, end, name))
        spans.sort()
        for (b0, e0, n0), (b1, e1, n1) in zip(spans, spans[1:]):
            if b1 < e0:
                raise ConvertError(f"{path}: tensors '{n0}' and '{n1}' overlap")

    def names_in_order(self):
        return sorted(self.tensors)  # by name, as safetensors lists them (and llama.cpp converts)

    def get(self, name):
        dt, shape, begin, end = self.tensors[name]
        raw = self.map[begin:end].view(ST_DTYPES[dt][0]).reshape(shape)
        if dt == "BF16":
            return (raw.astype(np.uint32) << 16).view(np.float32), dt
        return np.asarray(raw), dt


def open_weights(d):
    """[(file, SafeTensors)] of model d: the index's shards or model.safetensors."""
    index = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(index):
        try:
            with open(index, encoding="utf-8") as f:
                weight_map = json.load(f)["weight_map"]
        except (ValueError, KeyError, TypeError) as e:
            raise ConvertError(f"{index}: not a safetensors index ({e})")
        files = sorted(set(weight_map.values()))
        for fn in files:
            if os.path.basename(fn) != fn or not os.path.exists(os.path.join(d, fn)):
                raise ConvertError(f"{index}: shard '{fn}' is missing from {d}")
        shards = [SafeTensors(os.path.join(d, fn)) for fn in files]
        for name, fn in weight_map.items():
            if name not in shards[files.index(fn)].tensors:
                raise ConvertError(f"{index}: tensor '{name}' is not in its shard {fn}")
        return shards
    single = os.path.join(d, "model.safetensors")
    if not os.path.exists(single):
        raise ConvertError(f"{d}: no model.safetensors and no model.safetensors.index.json "
                           f"(tessera convert reads safetensors weights only)")
    return [SafeTensors(single)]


# ------------------------------------------------------------ architectures

ARCHS = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "llama",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
}

LAYER_MAP = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}
GLOBAL_MAP = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
              "lm_head.weight": "output.weight"}


def gguf_name(hf, n_layer):
    if hf in GLOBAL_MAP:
        return GLOBAL_MAP[hf]
    parts = hf.split(".", 3)
    if len(parts) == 4 and parts[0] == "model" and parts[1] == "layers" and parts[2].isdigit():
        il = int(parts[2])
        if il < n_layer and parts[3] in LAYER_MAP:
            return f"blk.{il}.{LAYER_MAP[parts[3]]}"
    if hf.endswith("rotary_emb.inv_freq"):
        return None  # recomputed from rope_theta
    raise ConvertError(f"tensor '{hf}' has no GGUF name in tessera convert's table")


def unpermute(w, n_head):
    """Hugging Face's q/k rows (rotate-half order) back into llama's
    interleaved pairs, as GGUF's llama stores them."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def cfg_int(cfg, key, where, default=None):
    v = cfg.get(key, default)
    if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
        raise ConvertError(f"{where}: '{key}' is {v!r}, expected a positive integer")
    return v


def write_hparams(w, arch, cfg, where):  # noqa: C901
    n_embd = cfg_int(cfg, "hidden_size", where)
    n_head = cfg_int(cfg, "num_attention_heads", where)
    n_kv = cfg_int(cfg, "num_key_value_heads", where, n_head)
    head_dim = cfg.get("head_dim") or n_embd // n_head
    w.add_block_count(cfg_int(cfg, "num_hidden_layers", where))
    w.add_context_length(cfg_int(cfg, "max_position_embeddings", where))
    w.add_embedding_length(n_embd)
    w.add_feed_forward_length(cfg_int(cfg, "intermediate_size", where))
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv)
    rp = cfg.get("rope_parameters") or {}  # transformers 5 keeps rope_theta there
    w.add_rope_freq_base(float(rp.get("rope_theta", cfg.get("rope_theta", 10000.0))))
    w.add_layer_norm_rms_eps(float(cfg.get("rms_norm_eps", 1e-6)))
    if arch == "llama" or cfg.get("head_dim"):  # qwen2, qwen3: only when the config says it, as llama.cpp
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    rs = cfg.get("rope_scaling") or (rp if rp.get("rope_type") not in (None, "default") else None)
    if rs and rs.get("rope_type", rs.get("type")) not in (None, "default"):
        raise ConvertError(f"{where}: rope_scaling {rs!r} is not converted by tessera convert yet")
    return n_head, n_kv


# ------------------------------------------------------------ tokenizer

def write_vocab(w, d, n_vocab):
    spm = os.path.join(d, "tokenizer.model")
    if os.path.exists(spm):
        write_spm(w, spm, n_vocab)
        special = gguf.SpecialVocab(d, load_merges=False, n_vocab=n_vocab)
    elif os.path.exists(os.path.join(d, "tokenizer.json")):
        write_bpe(w, d, n_vocab)
        special = gguf.SpecialVocab(d, load_merges=True, n_vocab=n_vocab)
    else:
        raise ConvertError(f"{d}: no tokenizer.model and no tokenizer.json")
    special.add_to_gguf(w, quiet=True)


def write_spm(w, path, n_vocab):
    try:
        from sentencepiece import SentencePieceProcessor
    except ImportError:
        raise ConvertError(f"{path}: reading a SentencePiece tokenizer needs PyPI's sentencepiece")
    sp = SentencePieceProcessor()
    if not sp.Load(path):
        raise ConvertError(f"{path}: not a SentencePiece model")
    tokens, scores, types = [], [], []
    T = gguf.TokenType
    for i in range(sp.vocab_size()):
        tokens.append(sp.IdToPiece(i).encode("utf-8"))
        scores.append(sp.GetScore(i))
        t = T.NORMAL
        if sp.IsUnknown(i):
            t = T.UNKNOWN
        elif sp.IsControl(i):
            t = T.CONTROL
        elif sp.IsUnused(i):
            t = T.UNUSED
        elif sp.IsByte(i):
            t = T.BYTE
        types.append(t)
    for i in range(len(tokens), n_vocab):  # the model's rows past the tokenizer's pieces
        tokens.append(f"[PAD{i}]".encode())
        scores.append(-1000.0)
        types.append(T.UNUSED)
    if len(tokens) > n_vocab:
        raise ConvertError(f"{path}: {len(tokens)} pieces, more than the model's vocab_size {n_vocab}")
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)


def write_bpe(w, d, n_vocab):
    raise ConvertError(f"{d}: a BPE tokenizer (tokenizer.json without tokenizer.model) is not converted by "
                       f"tessera convert yet")


# ------------------------------------------------------------ main

OUTTYPES = {"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
            "bf16": gguf.LlamaFileType.MOSTLY_BF16, "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}


def convert(d, out, outtype):
    where = os.path.join(d, "config.json")
    try:
        with open(where, encoding="utf-8") as f:
            cfg = json.load(f)
    except FileNotFoundError:
        raise ConvertError(f"{d}: no config.json (not a Hugging Face model directory)")
    except ValueError as e:
        raise ConvertError(f"{where}: not JSON ({e})")
    names = cfg.get("architectures") or []
    if len(names) != 1 or names[0] not in ARCHS:
        raise ConvertError(f"{where}: architecture {names!r} is not one tessera convert knows "
                           f"({', '.join(sorted(ARCHS))})")
    arch = ARCHS[names[0]]
    n_layer = cfg_int(cfg, "num_hidden_layers", where)
    n_vocab = cfg_int(cfg, "vocab_size", where)
    shards = open_weights(d)
    w = gguf.GGUFWriter(out, arch)
    w.add_type(gguf.GGUFType.MODEL)
    w.add_name(os.path.basename(os.path.normpath(d)).replace("-", " ").title().replace(" ", "-"))
    n_head, n_kv = write_hparams(w, arch, cfg, where)
    w.add_file_type(OUTTYPES[outtype])
    if arch == "llama":
        w.add_vocab_size(n_vocab)
        w.add_rope_dimension_count(cfg.get("head_dim") or cfg["hidden_size"] // n_head)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    write_vocab(w, d, n_vocab)
    seen = set()
    for st in shards:
        for hf in st.names_in_order():
            name = gguf_name(hf, n_layer)
            if name is None:
                continue
            if name in seen:
                raise ConvertError(f"{st.path}: tensor '{hf}' appears in two shards")
            seen.add(name)
            data, dt = st.get(hf)
            data = data.astype(np.float32)
            if arch == "llama" and name.endswith(("attn_q.weight", "attn_k.weight")):
                data = unpermute(data, n_head if "attn_q" in name else n_kv)
            if name == "output.weight" and cfg.get("tie_word_embeddings") is True:
                continue
            if data.ndim <= 1 or outtype == "f32":
                w.add_tensor(name, np.ascontiguousarray(data, np.float32))
            elif outtype == "f16":
                w.add_tensor(name, data.astype(np.float16))
            else:
                qt = gguf.GGMLQuantizationType.BF16 if outtype == "bf16" else gguf.GGMLQuantizationType.Q8_0
                if qt == gguf.GGMLQuantizationType.Q8_0 and data.shape[-1] % 32:
                    w.add_tensor(name, data.astype(np.float16))  # rows that are not whole Q8_0 blocks
                    continue
                q = gguf.quants.quantize(data, qt)
                w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=qt)
    for need in ["token_embd.weight", "output_norm.weight"] + [f"blk.{i}.attn_q.weight" for i in range(n_layer)]:
        if need not in seen:
            raise ConvertError(f"{d}: the weights have no tensor for '{need}'")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main(argv):
    args, out, outtype = [], None, "f16"
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        if a in ("-o", "--outfile", "--output") and i + 1 < len(argv):
            out = argv[i + 1]
            i += 2
        elif a == "--outtype" and i + 1 < len(argv):
            outtype = argv[i + 1].lower()
            i += 2
        elif a.startswith("-"):
            print(f"tessera convert: unknown option '{a}' (see --help)", file=sys.stderr)
            return 2
        else:
            args.append(a)
            i += 1
    if len(args) != 1 or not out:
        print("tessera convert: usage: tessera convert MODEL_DIR -o OUT.gguf [--outtype f32|f16|bf16|q8_0]",
              file=sys.stderr)
        return 2
    if outtype not in OUTTYPES:
        print(f"tessera convert: --outtype expects f32, f16, bf16 or q8_0, got '{outtype}'", file=sys.stderr)
        return 2
    tmp = out + ".tmp"
    try:
        convert(args[0], tmp, outtype)
        os.replace(tmp, out)
    except ConvertError as e:
        print(f"tessera convert: {e}", file=sys.stderr)
        if os.path.exists(tmp):
            os.unlink(tmp)
        return 1
    except OSError as e:
        print(f"tessera convert: {e}", file=sys.stderr)
        if os.path.exists(tmp):
            os.unlink(tmp)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
