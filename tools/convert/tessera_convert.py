#!/usr/bin/env python3
"""tessera convert: a Hugging Face model directory to one GGUF file.

usage: tessera_convert.py MODEL_DIR -o OUT.gguf [--outtype f32|f16|bf16|q8_0] [--vocab-only] [--mmproj]

--mmproj writes the vision tower and projector of a vision-language
checkpoint (Qwen2-VL's, Qwen2.5-VL's, Mistral 3's Pixtral, Qwen3.5's) as
llama.cpp's mmproj file instead of the text model.

Reads config.json, the weights (model.safetensors, or the shards that
model.safetensors.index.json names), the tokenizer (tokenizer.model:
SentencePiece; tokenizer.json: byte-level BPE, its pre-tokenizer named from
its pre_tokenizer and normalizer) with tokenizer_config.json and its chat
template, and writes the GGUF Tessera and llama.cpp run. Architectures:
Llama, Mistral and Mixtral (llama), Qwen2, Qwen3, Qwen2-MoE, Qwen3-MoE,
OLMoE, Gemma 3 (text), Phi-3, Granite, Granite MoE (and MoE-shared),
SmolLM3, gpt-oss (also with OpenAI's MXFP4 experts), LFM2, Mamba-2,
Granite 4.0-H (granitehybrid), BERT (uncased or cased) and Nomic Embed
encoders (WordPiece tokenizer.json, sentence-transformers pooling),
Mistral 3's text model (mistral3), Qwen3.5 (qwen35, qwen35moe; also the
text model of the published vision-language checkpoints), Qwen2-VL and
Qwen2.5-VL's text model (qwen2vl), Qwen3-Next (qwen3next). See
docs/convert.md.

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
import logging
import os
import struct
import sys

try:
    import numpy as np
    import gguf
except ImportError as e:  # one clear line, not a traceback
    sys.exit(f"tessera convert: {sys.executable} has no {e.name} ({e}): the converter needs PyPI's numpy and "
             f"gguf, and sentencepiece for a tokenizer.model: pip install numpy gguf sentencepiece (or set "
             f"TESSERA_PYTHON to a Python that has them)")


class ConvertError(Exception):
    pass


# ------------------------------------------------------------ safetensors

ST_DTYPES = {"F32": (np.float32, 4), "F16": (np.float16, 2), "BF16": (np.uint16, 2), "F64": (np.float64, 8),
             "U8": (np.uint8, 1)}  # U8: MXFP4 blocks and scales only (gpt-oss), refused elsewhere


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
            if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape) or len(shape) > 8:
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

# Hugging Face class -> GGUF architecture
ARCHS = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "llama",
    "MixtralForCausalLM": "llama",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "Qwen2MoeForCausalLM": "qwen2moe",
    "Qwen2VLForConditionalGeneration": "qwen2vl",  # the text model; the vision tower is the mmproj's
    "Qwen2_5_VLForConditionalGeneration": "qwen2vl",
    "Qwen3NextForCausalLM": "qwen3next",
    "Qwen3MoeForCausalLM": "qwen3moe",
    "OlmoeForCausalLM": "olmoe",
    "Gemma3ForCausalLM": "gemma3",
    "Phi3ForCausalLM": "phi3",
    "GraniteForCausalLM": "granite",
    "GraniteMoeForCausalLM": "granitemoe",
    "GraniteMoeSharedForCausalLM": "granitemoe",
    "SmolLM3ForCausalLM": "smollm3",
    "GptOssForCausalLM": "gpt-oss",
    "Lfm2ForCausalLM": "lfm2",
    "Mamba2ForCausalLM": "mamba2",
    "GraniteMoeHybridForCausalLM": "granitehybrid",
    "BertModel": "bert",
    "NomicBertModel": "nomic-bert",
    "Mistral3ForConditionalGeneration": "mistral3",  # the text model; the vision tower is the mmproj's
    "Qwen3_5ForCausalLM": "qwen35",
    "Qwen3_5MoeForCausalLM": "qwen35moe",
    # Qwen3.5 as published (with its vision tower): the text model
    "Qwen3_5ForConditionalGeneration": "qwen35",
    "Qwen3_5MoeForConditionalGeneration": "qwen35moe",
}
# vision-language classes: the text model's config is text_config, its
# tensors under TEXT_PREFIXES (or model.*); the vision tower's, under
# VISION_PREFIXES, are skipped: they are the mmproj's (--mmproj, MMPROJ)
VLM = {"Mistral3ForConditionalGeneration", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
       "Qwen2VLForConditionalGeneration", "Qwen2_5_VLForConditionalGeneration"}
# ... whose config may give the text model at its top level (text_config)
TEXT_AT_TOP = {"Qwen2VLForConditionalGeneration", "Qwen2_5_VLForConditionalGeneration"}
QWEN35 = ("qwen35", "qwen35moe")
# a vision-language checkpoint: its text model's tensors under these
# prefixes (transformers 4's and the published files', transformers 5's)
TEXT_PREFIXES = (("language_model.model.", "model."), ("language_model.lm_head.", "lm_head."),
                 ("model.language_model.", "model."))
# the vision towers' tensors: Pixtral's and Mistral 3's projector, then
# Qwen2-VL's, Qwen2.5-VL's and Qwen3.5's tower and merger (QWEN_VISION)
QWEN_VISION = ("visual.", "model.visual.")
VISION_PREFIXES = ("vision_tower.", "multi_modal_projector.", "model.vision_tower.",
                   "model.multi_modal_projector.") + QWEN_VISION
# encoders: no causal mask, a pooling type, WordPiece vocabularies
ENCODERS = {"bert", "nomic-bert"}
# architectures whose q/k rows llama.cpp stores in interleaved (non-NeoX) order
PERMUTE_QK = {"llama", "granite", "granitemoe", "granitehybrid", "smollm3", "mistral3"}

LAYER_MAP = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.qkv_proj.weight": "attn_qkv.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
    "mlp.gate_up_proj.weight": "ffn_up.weight",  # phi3: gate|up in one matrix, as GGUF keeps it
    # mixture of experts: routers and shared experts (the experts are stacked, below)
    "mlp.gate.weight": "ffn_gate_inp.weight",
    "block_sparse_moe.gate.weight": "ffn_gate_inp.weight",
    "block_sparse_moe.router.layer.weight": "ffn_gate_inp.weight",
    "mlp.shared_expert.gate_proj.weight": "ffn_gate_shexp.weight",
    "mlp.shared_expert.up_proj.weight": "ffn_up_shexp.weight",
    "mlp.shared_expert.down_proj.weight": "ffn_down_shexp.weight",
    "mlp.shared_expert_gate.weight": "ffn_gate_inp_shexp.weight",
    "shared_mlp.output_linear.weight": "ffn_down_shexp.weight",
    # gpt-oss: biased attention output, sinks, a biased router
    "self_attn.o_proj.bias": "attn_output.bias",
    "self_attn.sinks": "attn_sinks.weight",
    "mlp.router.weight": "ffn_gate_inp.weight",
    "mlp.router.bias": "ffn_gate_inp.bias",
    # lfm2: its own names for the norms, the attention and the FFN
    "operator_norm.weight": "attn_norm.weight",
    "ffn_norm.weight": "ffn_norm.weight",
    "self_attn.q_layernorm.weight": "attn_q_norm.weight",
    "self_attn.k_layernorm.weight": "attn_k_norm.weight",
    "self_attn.out_proj.weight": "attn_output.weight",
    "feed_forward.w1.weight": "ffn_gate.weight",
    "feed_forward.w2.weight": "ffn_down.weight",
    "feed_forward.w3.weight": "ffn_up.weight",
    "conv.conv.weight": "shortconv.conv.weight",
    "conv.in_proj.weight": "shortconv.in_proj.weight",
    "conv.out_proj.weight": "shortconv.out_proj.weight",
    # mamba2's mixer (granitehybrid's mamba layers: the same under mamba.)
    "mixer.A_log": "ssm_a",
    "mixer.D": "ssm_d",
    "mixer.conv1d.bias": "ssm_conv1d.bias",
    "mixer.conv1d.weight": "ssm_conv1d.weight",
    "mixer.dt_bias": "ssm_dt.bias",
    "mixer.in_proj.weight": "ssm_in.weight",
    "mixer.norm.weight": "ssm_norm.weight",
    "mixer.out_proj.weight": "ssm_out.weight",
    "norm.weight": "attn_norm.weight",
}
# gemma3's four norms per block
GEMMA3_LAYER_MAP = {
    "post_attention_layernorm.weight": "post_attention_norm.weight",
    "pre_feedforward_layernorm.weight": "ffn_norm.weight",
    "post_feedforward_layernorm.weight": "post_ffw_norm.weight",
}
# Qwen3.5: the gated delta net's tensors (linear_attn.*), and its second
# norm, after attention
QWEN35_LINEAR_MAP = {
    "A_log": "ssm_a", "conv1d.weight": "ssm_conv1d.weight", "dt_bias": "ssm_dt.bias",
    "in_proj_a.weight": "ssm_alpha.weight", "in_proj_b.weight": "ssm_beta.weight",
    "in_proj_qkv.weight": "attn_qkv.weight", "in_proj_z.weight": "attn_gate.weight",
    "norm.weight": "ssm_norm.weight", "out_proj.weight": "ssm_out.weight",
}
QWEN35_LAYER_MAP = {"post_attention_layernorm.weight": "post_attention_norm.weight"}
# gpt-oss's second norm is the one after attention, not the FFN's
GPTOSS_LAYER_MAP = {"post_attention_layernorm.weight": "post_attention_norm.weight"}
# one expert's matrix -> the stacked GGUF tensor
EXPERT_MAP = {"gate_proj": "ffn_gate_exps", "up_proj": "ffn_up_exps", "down_proj": "ffn_down_exps",
              "w1": "ffn_gate_exps", "w3": "ffn_up_exps", "w2": "ffn_down_exps"}
# a matrix holding gate and up one after the other (rows), split in two
SPLIT_MAP = {"block_sparse_moe.input_linear.weight": ("ffn_gate_exps.weight", "ffn_up_exps.weight"),
             "shared_mlp.input_linear.weight": ("ffn_gate_shexp.weight", "ffn_up_shexp.weight")}
# BERT's layers (encoder.layer.N.REST) and embeddings; the pooler is not kept
BERT_LAYER_MAP = {
    "attention.self.query.weight": "attn_q.weight", "attention.self.query.bias": "attn_q.bias",
    "attention.self.key.weight": "attn_k.weight", "attention.self.key.bias": "attn_k.bias",
    "attention.self.value.weight": "attn_v.weight", "attention.self.value.bias": "attn_v.bias",
    "attention.output.dense.weight": "attn_output.weight", "attention.output.dense.bias": "attn_output.bias",
    "attention.output.LayerNorm.weight": "attn_output_norm.weight",
    "attention.output.LayerNorm.bias": "attn_output_norm.bias",
    "intermediate.dense.weight": "ffn_up.weight", "intermediate.dense.bias": "ffn_up.bias",
    "output.dense.weight": "ffn_down.weight", "output.dense.bias": "ffn_down.bias",
    "output.LayerNorm.weight": "layer_output_norm.weight", "output.LayerNorm.bias": "layer_output_norm.bias",
}
BERT_GLOBAL_MAP = {
    "embeddings.word_embeddings.weight": "token_embd.weight",
    "embeddings.position_embeddings.weight": "position_embd.weight",
    "embeddings.token_type_embeddings.weight": "token_types.weight",
    "embeddings.LayerNorm.weight": "token_embd_norm.weight", "embeddings.LayerNorm.bias": "token_embd_norm.bias",
}
# Nomic Embed's own checkpoints (nomic-ai's modelling code, as published)
NOMIC_LAYER_MAP = {
    "attn.Wqkv.weight": "attn_qkv.weight", "attn.out_proj.weight": "attn_output.weight",
    "mlp.fc11.weight": "ffn_up.weight", "mlp.fc12.weight": "ffn_gate.weight", "mlp.fc2.weight": "ffn_down.weight",
    "norm1.weight": "attn_output_norm.weight", "norm1.bias": "attn_output_norm.bias",
    "norm2.weight": "layer_output_norm.weight", "norm2.bias": "layer_output_norm.bias",
}
NOMIC_GLOBAL_MAP = {
    "embeddings.word_embeddings.weight": "token_embd.weight",
    "embeddings.token_type_embeddings.weight": "token_types.weight",
    "emb_ln.weight": "token_embd_norm.weight", "emb_ln.bias": "token_embd_norm.bias",
}
# its config's keys -> transformers' names for them
NOMIC_KEYS = {"n_embd": "hidden_size", "n_layer": "num_hidden_layers", "n_head": "num_attention_heads",
              "n_inner": "intermediate_size", "max_trained_positions": "max_position_embeddings",
              "layer_norm_epsilon": "layer_norm_eps"}
GLOBAL_MAP = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
              "lm_head.weight": "output.weight",
              "model.embedding_norm.weight": "token_embd_norm.weight",  # lfm2's last norm
              "backbone.embeddings.weight": "token_embd.weight", "backbone.norm_f.weight": "output_norm.weight"}
# tensors llama.cpp keeps in f32 whatever the output type
KEEP_F32 = ("ffn_gate_inp.weight", "ffn_gate_inp_shexp.weight", ".bias", "ssm_a", "ssm_d", "ssm_norm.weight",
            "ssm_conv1d.weight", "shortconv.conv.weight", "position_embd.weight", "token_types.weight")


def unpermute(w, n_head):
    """Hugging Face's q/k rows (rotate-half order) back into llama's
    interleaved pairs, as GGUF's llama stores them."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


class TensorMap:
    """Hugging Face tensors in, GGUF tensors out: names, the few changes of
    layout llama.cpp's files have, and the experts stacked into one tensor
    per projection (given when the last of them is read)."""

    def __init__(self, arch, cfg, n_layer, n_head, n_kv, n_expert, vlm=False):
        self.arch, self.cfg, self.n_layer, self.n_head, self.n_kv, self.n_expert, self.vlm = \
            arch, cfg, n_layer, n_head, n_kv, n_expert, vlm
        self.experts = {}  # gguf name -> {expert: array}

    def __call__(self, hf, data):
        if self.arch in ENCODERS:
            return self.encoder(hf, data)
        if self.vlm:
            if hf.startswith(VISION_PREFIXES):
                return []
            for a, b in TEXT_PREFIXES:
                if hf.startswith(a):
                    hf = b + hf[len(a):]
                    break
        if hf in GLOBAL_MAP:
            return self.fix(GLOBAL_MAP[hf], data)
        if hf.endswith("rotary_emb.inv_freq"):
            return []  # recomputed from rope_theta
        if self.arch in QWEN35 + ("qwen3next",) and hf.startswith("mtp."):
            return []  # the multi-token prediction head (llama.cpp's --no-mtp file)
        parts = hf.split(".", 3)
        if len(parts) == 4 and parts[0] in ("model", "backbone") and parts[1] == "layers" and parts[2].isdigit() \
                and int(parts[2]) < self.n_layer:
            il, rest = int(parts[2]), parts[3]
            if rest.startswith("mamba."):  # granitehybrid
                rest = "mixer." + rest[len("mamba."):]
            if rest.startswith("mixer."):
                return self.ssm(f"blk.{il}.{LAYER_MAP.get(rest, rest)}", data, hf)
            if self.arch == "gemma3" and rest in GEMMA3_LAYER_MAP:
                return self.fix(f"blk.{il}.{GEMMA3_LAYER_MAP[rest]}", data)
            if self.arch in QWEN35 and rest.startswith("linear_attn."):
                return self.delta_net(il, rest[len("linear_attn."):], data, hf)
            if self.arch == "qwen3next" and rest.startswith("linear_attn."):
                return self.qwen3next_delta_net(il, rest[len("linear_attn."):], data, hf)
            if self.arch in QWEN35 + ("qwen3next",) and rest in QWEN35_LAYER_MAP:
                return self.fix(f"blk.{il}.{QWEN35_LAYER_MAP[rest]}", data)
            if self.arch == "gpt-oss" and rest in GPTOSS_LAYER_MAP:
                return self.fix(f"blk.{il}.{GPTOSS_LAYER_MAP[rest]}", data)
            if self.arch == "gpt-oss" and rest.startswith("mlp.experts."):
                return self.gptoss_experts(il, rest[len("mlp.experts."):], data, hf)
            if rest in LAYER_MAP:
                return self.fix(f"blk.{il}.{LAYER_MAP[rest]}", data)
            if rest in SPLIT_MAP:
                half = data.shape[-2] // 2
                return [(f"blk.{il}.{SPLIT_MAP[rest][0]}", data[..., :half, :]),
                        (f"blk.{il}.{SPLIT_MAP[rest][1]}", data[..., half:, :])]
            if rest == "block_sparse_moe.output_linear.weight":
                return [(f"blk.{il}.ffn_down_exps.weight", data)]
            e = rest.split(".")  # mlp.experts.E.gate_proj.weight, block_sparse_moe.experts.E.w1.weight
            if len(e) == 5 and e[0] in ("mlp", "block_sparse_moe") and e[1] == "experts" and e[2].isdigit() \
                    and e[3] in EXPERT_MAP and e[4] == "weight":
                return self.expert(f"blk.{il}.{EXPERT_MAP[e[3]]}.weight", int(e[2]), data, hf)
        raise ConvertError(f"tensor '{hf}' has no GGUF name in tessera convert's table for {self.arch}")

    def encoder(self, hf, data):
        """BERT's tensors (BertModel's names, or a task model's under
        bert.); the pooler and any task head are not kept, as in
        llama.cpp's files."""
        name = hf[len("bert."):] if hf.startswith("bert.") else hf
        if name.startswith(("pooler.", "cls.")):
            return []
        if self.arch == "nomic-bert":
            if name in NOMIC_GLOBAL_MAP:
                return [(NOMIC_GLOBAL_MAP[name], data)]
            parts = name.split(".", 3)
            if len(parts) == 4 and parts[:2] == ["encoder", "layers"] and parts[2].isdigit() \
                    and int(parts[2]) < self.n_layer and parts[3] in NOMIC_LAYER_MAP:
                return [(f"blk.{parts[2]}.{NOMIC_LAYER_MAP[parts[3]]}", data)]
            raise ConvertError(f"tensor '{hf}' has no GGUF name in tessera convert's table for nomic-bert "
                               f"(it reads nomic-ai's checkpoints: encoder.layers.N.attn.Wqkv...)")
        if name in BERT_GLOBAL_MAP:
            return [(BERT_GLOBAL_MAP[name], data)]
        parts = name.split(".", 3)
        if len(parts) == 4 and parts[:2] == ["encoder", "layer"] and parts[2].isdigit() \
                and int(parts[2]) < self.n_layer and parts[3] in BERT_LAYER_MAP:
            return [(f"blk.{parts[2]}.{BERT_LAYER_MAP[parts[3]]}", data)]
        if name.endswith("position_ids"):
            return []
        raise ConvertError(f"tensor '{hf}' has no GGUF name in tessera convert's table for {self.arch}")

    def gptoss_experts(self, il, what, data, hf):
        """gpt-oss's experts, one tensor per projection for all experts:
        gate_up_proj [expert, in, 2 * ff] with gate and up interleaved
        (columns 0, 2, 4... gate), down_proj [expert, ff, out], as x @ W;
        GGUF stores [expert, out, in] and gate and up apart."""
        p = f"blk.{il}."
        if data.ndim < 2 or data.shape[0] != self.n_expert:
            raise ConvertError(f"tensor '{hf}' has shape {list(data.shape)}, expected {self.n_expert} experts first")
        if what == "gate_up_proj" and data.ndim == 3:
            return [(p + "ffn_gate_exps.weight", data[:, :, 0::2].swapaxes(1, 2)),
                    (p + "ffn_up_exps.weight", data[:, :, 1::2].swapaxes(1, 2))]
        if what == "gate_up_proj_bias" and data.ndim == 2:
            return [(p + "ffn_gate_exps.bias", data[:, 0::2]), (p + "ffn_up_exps.bias", data[:, 1::2])]
        if what == "down_proj" and data.ndim == 3:
            return [(p + "ffn_down_exps.weight", data.swapaxes(1, 2))]
        if what == "down_proj_bias" and data.ndim == 2:
            return [(p + "ffn_down_exps.bias", data)]
        raise ConvertError(f"tensor '{hf}' ({list(data.shape)}) has no GGUF name in tessera convert's table "
                           f"for gpt-oss")

    def ssm(self, name, data, hf):
        """A Mamba-2 mixer's tensors as llama.cpp's files hold them: A as
        -exp(A_log), A and D one column per head, the conv's weight without
        its middle axis, the gated norm one row per group."""
        if name.endswith("ssm_a"):
            return [(name, -np.exp(data.astype(np.float64)).astype(np.float32).reshape(-1, 1))]
        if name.endswith("ssm_d"):
            return [(name, data.reshape(-1, 1))]
        if name.endswith("ssm_conv1d.weight") and data.ndim == 3 and data.shape[1] == 1:
            return [(name, data[:, 0, :])]
        if name.endswith("ssm_norm.weight"):
            g = self.cfg.get("n_groups", self.cfg.get("mamba_n_groups", 1))
            if not isinstance(g, int) or g <= 0 or data.size % g:
                raise ConvertError(f"tensor '{hf}': {data.size} values do not split into {g!r} groups")
            return [(name, data.reshape(g, -1))]
        if name.endswith(("ssm_conv1d.bias", "ssm_dt.bias", "ssm_in.weight", "ssm_out.weight")):
            return [(name, data)]
        raise ConvertError(f"tensor '{hf}' has no GGUF name in tessera convert's table for {self.arch}")

    def delta_net(self, il, what, data, hf):
        """Qwen3.5's gated delta net as llama.cpp's files hold it: A as
        -exp(A_log), the conv's weight without its middle axis, and the
        value heads reordered from grouped by key head (transformers':
        key head k's r value heads together) to tiled (value head j uses
        key head j mod n_k, as a repeat of the key heads gives)."""
        if what not in QWEN35_LINEAR_MAP:
            raise ConvertError(f"tensor '{hf}' has no GGUF name in tessera convert's table for qwen35")
        cfg, where = self.cfg, "config.json"
        nk, nv = cfg_int(cfg, "linear_num_key_heads", where), cfg_int(cfg, "linear_num_value_heads", where)
        dk, dv = cfg_int(cfg, "linear_key_head_dim", where), cfg_int(cfg, "linear_value_head_dim", where)
        if nv % nk:
            raise ConvertError(f"{where}: linear_num_value_heads {nv} is not a multiple of linear_num_key_heads {nk}")
        r = nv // nk
        perm = np.array([(j % nk) * r + j // nk for j in range(nv)])
        name = f"blk.{il}.{QWEN35_LINEAR_MAP[what]}"

        def heads(x, axis, first, size):  # reorder NV heads of SIZE starting at FIRST along AXIS
            x = np.moveaxis(x, axis, 0)
            if x.shape[0] < first + nv * size:
                raise ConvertError(f"tensor '{hf}' has shape {list(data.shape)}, too small for {nv} value heads "
                                   f"of {size}")
            v = x[first:first + nv * size].reshape(nv, size, *x.shape[1:])[perm].reshape(nv * size, *x.shape[1:])
            return np.moveaxis(np.concatenate([x[:first], v, x[first + nv * size:]]), 0, axis)
        qk = 2 * nk * dk
        if what == "A_log":
            # correctly rounded; llama.cpp's converter takes torch's f32 exp,
            # which can be 1 ulp away (tests/convert allows that, here only)
            return [(name, heads(-np.exp(data.astype(np.float64)).astype(np.float32), 0, 0, 1))]
        if what in ("dt_bias", "in_proj_a.weight", "in_proj_b.weight"):
            return [(name, heads(data, 0, 0, 1))]
        if what == "in_proj_qkv.weight":
            return [(name, heads(data, 0, qk, dv))]
        if what == "conv1d.weight":
            if data.ndim != 3 or data.shape[1] != 1:
                raise ConvertError(f"tensor '{hf}' has shape {list(data.shape)}, expected [channels, 1, width]")
            return [(name, heads(data[:, 0, :], 0, qk, dv))]
        if what == "in_proj_z.weight":
            return [(name, heads(data, 0, 0, dv))]
        if what == "out_proj.weight":
            return [(name, heads(data, 1, 0, dv))]
        return [(name, data)]  # the gated norm, one head's width

    def qwen3next_delta_net(self, il, what, data, hf):
        """Qwen3-Next's gated delta net as llama.cpp's files hold it:
        in_proj_qkvz, whose rows are per key head q, k, then v and z of
        its value heads, split into attn_qkv (every head's q, then k, then
        v) and attn_gate (z); beta and alpha stay in one tensor (ssm_ba),
        the value heads stay grouped by key head; A as -exp(A_log), the
        conv's weight without its middle axis."""
        cfg, where = self.cfg, "config.json"
        nk, nv = cfg_int(cfg, "linear_num_key_heads", where), cfg_int(cfg, "linear_num_value_heads", where)
        dk, dv = cfg_int(cfg, "linear_key_head_dim", where), cfg_int(cfg, "linear_value_head_dim", where)
        name = f"blk.{il}."
        if what == "in_proj_qkvz.weight":
            r = nv // nk
            if data.ndim != 2 or data.shape[0] != nk * (2 * dk + 2 * r * dv):
                raise ConvertError(f"tensor '{hf}' has shape {list(data.shape)}, expected {nk} key heads of "
                                   f"q, k ({dk}) and {r} value heads' v and z ({dv}) each")
            g = data.reshape(nk, 2 * dk + 2 * r * dv, -1)
            cuts = np.cumsum([dk, dk, r * dv])
            q, k, v, z = (x.reshape(-1, data.shape[1]) for x in np.split(g, cuts, axis=1))
            return [(name + "attn_qkv.weight", np.concatenate([q, k, v])), (name + "attn_gate.weight", z)]
        if what == "A_log":  # correctly rounded, as qwen35's (tests/convert allows torch's 1 ulp)
            return [(name + "ssm_a", -np.exp(data.astype(np.float64)).astype(np.float32))]
        if what == "conv1d.weight":
            if data.ndim != 3 or data.shape[1] != 1:
                raise ConvertError(f"tensor '{hf}' has shape {list(data.shape)}, expected [channels, 1, width]")
            return [(name + "ssm_conv1d.weight", data[:, 0, :])]
        plain = {"in_proj_ba.weight": "ssm_ba.weight", "dt_bias": "ssm_dt.bias", "norm.weight": "ssm_norm.weight",
                 "out_proj.weight": "ssm_out.weight"}
        if what in plain:
            return [(name + plain[what], data)]
        raise ConvertError(f"tensor '{hf}' has no GGUF name in tessera convert's table for qwen3next")

    def fix(self, name, data):
        if self.arch in PERMUTE_QK and name.endswith(("attn_q.weight", "attn_k.weight")):
            data = unpermute(data, self.n_head if "attn_q" in name else self.n_kv)
        if name.endswith("shortconv.conv.weight") and data.ndim == 3 and data.shape[1] == 1:
            data = data[:, 0, :]  # lfm2's conv [channels, 1, width]
        if self.arch in ("gemma3", "qwen3next") + QWEN35 and "norm" in name:
            data = data + np.float32(1)  # Gemma and Qwen3.5 scale by (1 + w); GGUF stores 1 + w
        return [(name, data)]

    def expert(self, name, e, data, hf):
        if not self.n_expert or e >= self.n_expert:
            raise ConvertError(f"tensor '{hf}': expert {e}, but the config has {self.n_expert} experts")
        got = self.experts.setdefault(name, {})
        if e in got:
            raise ConvertError(f"tensor '{hf}' appears twice")
        got[e] = data
        if len(got) < self.n_expert:
            return []
        del self.experts[name]
        return [(name, np.stack([got[i] for i in range(self.n_expert)]))]

    def finish(self):
        for name, got in self.experts.items():
            missing = sorted(set(range(self.n_expert)) - set(got))
            raise ConvertError(f"the weights have no tensor for expert {missing[0]} of '{name}'")


def cfg_int(cfg, key, where, default=None):
    v = cfg.get(key, default)
    if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
        raise ConvertError(f"{where}: '{key}' is {v!r}, expected a positive integer")
    return v


def cfg_num(cfg, key, where, default):
    v = cfg.get(key, default)
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        raise ConvertError(f"{where}: '{key}' is {v!r}, expected a number")
    return float(v)


def rope_params(cfg):
    """transformers 5 keeps rope_theta and the scaling in rope_parameters
    (per layer type for gemma3); older configs at the top level."""
    rp = cfg.get("rope_parameters") or {}
    if "full_attention" in rp or "sliding_attention" in rp:
        return rp
    out = dict(cfg.get("rope_scaling") or {})
    out["rope_theta"] = cfg.get("rope_theta", 10000.0)
    out.update(rp)
    return out


YARN_ARCHS = {"gpt-oss", "mistral3"}


def write_yarn(w, rp, where):
    """YaRN's keys, in llama.cpp's order: the beta pair only when the
    config gives it."""
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(cfg_num(rp, "factor", where, None))
    w.add_rope_scaling_orig_ctx_len(cfg_int(rp, "original_max_position_embeddings", where))
    if "beta_fast" in rp:
        w.add_rope_scaling_yarn_beta_fast(cfg_num(rp, "beta_fast", where, None))
    if "beta_slow" in rp:
        w.add_rope_scaling_yarn_beta_slow(cfg_num(rp, "beta_slow", where, None))


def write_hparams(w, arch, cfg, where):  # noqa: C901
    n_embd = cfg_int(cfg, "hidden_size", where)
    if arch == "mamba2":
        return write_mamba2(w, cfg, where, cfg_int(cfg, "num_hidden_layers", where), n_embd)
    if arch in ENCODERS:
        return write_encoder(w, arch, cfg, where, n_embd)
    n_head = cfg_int(cfg, "num_attention_heads", where)
    n_kv = cfg_int(cfg, "num_key_value_heads", where, n_head)
    n_layer = cfg_int(cfg, "num_hidden_layers", where)
    head_dim = cfg.get("head_dim") or n_embd // n_head
    n_expert = cfg.get("num_local_experts") or cfg.get("num_experts") or 0
    if arch in ("qwen2moe", "qwen3moe", "olmoe", "granitemoe") and not n_expert:
        raise ConvertError(f"{where}: {arch} needs 'num_experts' (or 'num_local_experts')")
    rp = rope_params(cfg)
    if arch == "gemma3":
        rp_full, rp_swa = rp.get("full_attention", rp), rp.get("sliding_attention", {})
    else:
        rp_full, rp_swa = rp, {}
    rtype = rp_full.get("rope_type", rp_full.get("type"))
    if rtype not in (None, "default") and not (arch == "gemma3" and rtype == "linear") \
            and not (arch == "qwen2vl" and rtype == "mrope") \
            and not (arch in YARN_ARCHS and rtype == "yarn"):
        raise ConvertError(f"{where}: rope scaling '{rtype}' is not converted by tessera convert yet")

    if arch in ("lfm2", "granitehybrid"):
        w.add_block_count(n_layer)
        w.add_context_length(SSM_CONTEXT if arch == "granitehybrid" else
                             cfg_int(cfg, "max_position_embeddings", where))
        w.add_embedding_length(n_embd)
        w.add_feed_forward_length(lfm2_ff(cfg, where) if arch == "lfm2" else
                                  cfg_int(cfg, "intermediate_size", where))
        w.add_head_count(n_head)
        w.add_head_count_kv([n_kv if t in ATTN_LAYER else 0 for t in layer_types(cfg, arch, n_layer, where)])
        w.add_rope_freq_base(cfg_num(rp_full, "rope_theta", where, 10000.0))
        w.add_layer_norm_rms_eps(cfg_num(cfg, "norm_eps" if arch == "lfm2" else "rms_norm_eps", where, 1e-5))
        if n_expert:
            w.add_expert_count(n_expert)
            w.add_expert_used_count(cfg_int(cfg, "num_experts_per_tok", where))
        return n_head, n_kv, n_expert, head_dim

    if arch == "phi3":
        w.add_context_length(cfg_int(cfg, "max_position_embeddings", where))
        w.add_rope_scaling_orig_ctx_len(cfg_int(cfg, "original_max_position_embeddings", where,
                                                cfg["max_position_embeddings"]))
        w.add_embedding_length(n_embd)
        w.add_feed_forward_length(cfg_int(cfg, "intermediate_size", where))
        w.add_block_count(n_layer)
        w.add_head_count(n_head)
        w.add_head_count_kv(n_kv)
        w.add_layer_norm_rms_eps(cfg_num(cfg, "rms_norm_eps", where, 1e-5))
        prf = cfg_num(rp, "partial_rotary_factor", where, cfg.get("partial_rotary_factor", 1.0))
        w.add_rope_dimension_count(int(prf * head_dim))
        w.add_rope_freq_base(cfg_num(rp, "rope_theta", where, 10000.0))
        return n_head, n_kv, n_expert, head_dim

    w.add_block_count(n_layer)
    w.add_context_length(cfg_int(cfg, "max_position_embeddings", where))
    w.add_embedding_length(n_embd)
    w.add_feed_forward_length(cfg_int(cfg, "intermediate_size", where))
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv)
    if arch == "qwen2vl":
        w.add_rope_dimension_sections(qwen2vl_sections(rp_full, where, head_dim))
    if rtype == "yarn":
        write_yarn(w, rp_full, where)
    w.add_rope_freq_base(cfg_num(rp_full, "rope_theta", where, 10000.0))
    if arch == "gemma3":
        w.add_rope_freq_base_swa(cfg_num(rp_swa, "rope_theta", where, 10000.0))
    w.add_layer_norm_rms_eps(cfg_num(cfg, "rms_norm_eps", where, 1e-6))
    if n_expert:
        w.add_expert_count(n_expert)
        w.add_expert_used_count(cfg_int(cfg, "num_experts_per_tok", where))
    if arch in ("qwen2moe", "qwen3moe"):
        w.add_expert_feed_forward_length(cfg_int(cfg, "moe_intermediate_size", where))
    if arch == "qwen2moe":
        w.add_expert_shared_feed_forward_length(cfg_int(cfg, "shared_expert_intermediate_size", where))
    # llama.cpp writes the head size for llama unless the config says null
    # (Mixtral's), for the others only when the config gives it
    if (arch == "llama" and not ("head_dim" in cfg and cfg["head_dim"] is None)) or arch in ("gemma3", "gpt-oss") or \
            (cfg.get("head_dim") and arch in ("qwen2", "qwen3", "qwen3moe", "qwen2moe", "olmoe", "mistral3",
                                             "qwen3next") + QWEN35):
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    return n_head, n_kv, n_expert, head_dim


# the context length llama.cpp writes for Mamba-2 layers, whatever the config says
SSM_CONTEXT = 1 << 20
# a layer with attention in layer_types (lfm2, granitehybrid; transformers 5
# spells granite's "attention" full_attention and its "mamba" linear_attention)
ATTN_LAYER = ("full_attention", "attention")
OTHER_LAYER = ("conv", "mamba", "linear_attention")


def layer_types(cfg, arch, n_layer, where):
    lt = cfg.get("layer_types")
    if lt is None and arch == "lfm2" and isinstance(cfg.get("full_attn_idxs"), list):
        lt = ["full_attention" if i in cfg["full_attn_idxs"] else "conv" for i in range(n_layer)]
    if not isinstance(lt, list) or len(lt) != n_layer or not all(t in ATTN_LAYER + OTHER_LAYER for t in lt):
        raise ConvertError(f"{where}: 'layer_types' is {lt!r}, expected {n_layer} of "
                           f"{', '.join(ATTN_LAYER + OTHER_LAYER)}")
    return lt


def lfm2_ff(cfg, where):
    """LFM2's feed-forward width: block_ff_dim, adjusted (2/3, the
    multiplier, rounded up to block_multiple_of) as transformers does when
    block_auto_adjust_ff_dim is set."""
    ff = cfg_int(cfg, "block_ff_dim", where, cfg.get("intermediate_size"))
    if cfg.get("block_auto_adjust_ff_dim"):
        ff = int(2 * ff / 3)
        if cfg.get("block_ffn_dim_multiplier") is not None:
            ff = int(cfg_num(cfg, "block_ffn_dim_multiplier", where, 1.0) * ff)
        mult = cfg_int(cfg, "block_multiple_of", where, 256)
        ff = mult * ((ff + mult - 1) // mult)
    return ff


def nomic_config(cfg, where):
    """Nomic Embed's config (n_embd, n_layer...: nomic-ai's modelling
    code) in transformers' names where it does not give those too; what
    Tessera's nomic-bert does not compute is one error naming the key."""
    out = dict(cfg)
    for k, hf in NOMIC_KEYS.items():
        if hf not in out and k in cfg:
            out[hf] = cfg[k]
    if "rope_parameters" not in out and "rotary_emb_base" in cfg:
        out["rope_theta"] = cfg["rotary_emb_base"]
    wrong = [(k, want) for k, want in (("activation_function", "swiglu"), ("rotary_emb_fraction", 1.0),
                                       ("rotary_emb_interleaved", False), ("prenorm", False), ("qkv_proj_bias", False),
                                       ("mlp_fc1_bias", False), ("mlp_fc2_bias", False), ("rotary_scaling_factor", None),
                                       ("moe_every_n_layers", None), ("use_rms_norm", False))
             if k in cfg and cfg[k] != want]
    if wrong:
        k, want = wrong[0]
        raise ConvertError(f"{where}: '{k}' is {cfg[k]!r}; tessera convert converts Nomic Embed models with "
                           f"{json.dumps(want)} there")
    return out


def write_encoder(w, arch, cfg, where, n_embd):
    n_head = cfg_int(cfg, "num_attention_heads", where)
    w.add_block_count(cfg_int(cfg, "num_hidden_layers", where))
    w.add_context_length(cfg_int(cfg, "max_position_embeddings", where))
    w.add_embedding_length(n_embd)
    w.add_feed_forward_length(cfg_int(cfg, "intermediate_size", where))
    w.add_head_count(n_head)
    if arch == "nomic-bert":
        w.add_rope_freq_base(cfg_num(rope_params(cfg), "rope_theta", where, 10000.0))
        w.add_layer_norm_eps(cfg_num(cfg, "layer_norm_eps", where, 1e-12))
        w.add_key_length(n_embd // n_head)
        w.add_value_length(n_embd // n_head)
        return n_head, n_head, 0, n_embd // n_head
    w.add_layer_norm_eps(cfg_num(cfg, "layer_norm_eps", where, 1e-12))
    if cfg.get("hidden_act", "gelu") not in ("gelu",):
        raise ConvertError(f"{where}: hidden_act '{cfg.get('hidden_act')}' of a BERT model is not converted by "
                           f"tessera convert (gelu)")
    if cfg.get("position_embedding_type", "absolute") != "absolute":
        raise ConvertError(f"{where}: position_embedding_type '{cfg.get('position_embedding_type')}' is not "
                           f"converted by tessera convert (absolute)")
    return n_head, n_head, 0, n_embd // n_head


# sentence-transformers' pooling modes -> llama.cpp's pooling types
POOLING_MODES = (("pooling_mode_mean_tokens", gguf.PoolingType.MEAN), ("pooling_mode_cls_token", gguf.PoolingType.CLS),
                 ("pooling_mode_lasttoken", gguf.PoolingType.LAST))


def pooling_type(d):
    """The pooling of a sentence-transformers model (modules.json names
    its Pooling module, whose config.json says the mode), or None."""
    mp = os.path.join(d, "modules.json")
    if not os.path.exists(mp):
        return None
    try:
        with open(mp, encoding="utf-8") as f:
            modules = json.load(f)
        pool = [m for m in modules if str(m.get("type", "")).endswith(".Pooling")]
    except (ValueError, AttributeError, TypeError) as e:
        raise ConvertError(f"{mp}: not a sentence-transformers modules list ({e})")
    if not pool:
        return None
    cp = os.path.join(d, str(pool[0].get("path", "")), "config.json")
    try:
        with open(cp, encoding="utf-8") as f:
            pc = json.load(f)
    except (OSError, ValueError) as e:
        raise ConvertError(f"{cp}: the Pooling module's config cannot be read ({e})")
    for key, t in POOLING_MODES:
        if pc.get(key):
            return t
    raise ConvertError(f"{cp}: a pooling mode tessera convert does not know "
                       f"(it knows {', '.join(k for k, _ in POOLING_MODES)})")


def write_mamba2(w, cfg, where, n_layer, n_embd):
    n_heads = cfg_int(cfg, "num_heads", where)
    w.add_context_length(SSM_CONTEXT)
    w.add_embedding_length(n_embd)
    w.add_feed_forward_length(0)
    w.add_head_count(0)
    w.add_block_count(n_layer)
    w.add_ssm_conv_kernel(cfg_int(cfg, "conv_kernel", where, 4))
    w.add_ssm_inner_size(cfg_int(cfg, "expand", where, 2) * n_embd)
    w.add_ssm_state_size(cfg_int(cfg, "state_size", where))
    w.add_ssm_time_step_rank(n_heads)
    w.add_ssm_group_count(cfg_int(cfg, "n_groups", where, 1))
    w.add_layer_norm_rms_eps(cfg_num(cfg, "layer_norm_epsilon", where, 1e-5))
    return 0, 0, 0, 0


def write_qwen35(w, arch, cfg, where, head_dim):
    """Qwen3.5's gated delta net and its layer pattern, and its partial
    multi-section rope (text positions: every section the same)."""
    nl = cfg_int(cfg, "num_hidden_layers", where)
    w.add_ssm_conv_kernel(cfg_int(cfg, "linear_conv_kernel_dim", where, 4))
    w.add_ssm_state_size(cfg_int(cfg, "linear_key_head_dim", where))
    w.add_ssm_group_count(cfg_int(cfg, "linear_num_key_heads", where))
    w.add_ssm_time_step_rank(cfg_int(cfg, "linear_num_value_heads", where))
    w.add_ssm_inner_size(cfg_int(cfg, "linear_value_head_dim", where) * cfg_int(cfg, "linear_num_value_heads", where))
    lt = cfg.get("layer_types")
    if not isinstance(lt, list) or len(lt) != nl or not all(t in ("linear_attention", "full_attention") for t in lt):
        raise ConvertError(f"{where}: 'layer_types' is {lt!r}, expected {nl} of linear_attention, full_attention")
    w.add_array(f"{arch}.attention.recurrent_layers", [t == "linear_attention" for t in lt])
    w.add_full_attention_interval(cfg_int(cfg, "full_attention_interval", where, 4))
    rp = rope_params(cfg)
    w.add_rope_dimension_count(int(cfg_num(rp, "partial_rotary_factor", where, 1.0) * head_dim))
    sections = rp.get("mrope_section", [11, 11, 10])  # Qwen3.5's published sections when the config has none
    if not isinstance(sections, list) or not all(isinstance(x, int) for x in sections) or len(sections) > 4:
        raise ConvertError(f"{where}: 'mrope_section' is {sections!r}, expected up to 4 integers")
    w.add_rope_dimension_sections(sections + [0] * (4 - len(sections)))


def text_config(cfg, name, where):
    """A vision-language checkpoint's text model's config: text_config,
    its tying as the whole model says unless it says; Qwen2-VL's and
    Qwen2.5-VL's published configs (transformers 4) keep it at the top
    level instead (transformers 5 writes text_config)."""
    text = cfg.get("text_config")
    if text is None and name in TEXT_AT_TOP:
        return cfg
    if not isinstance(text, dict):
        raise ConvertError(f"{where}: a {name} without a 'text_config' object")
    text = dict(text)
    text.setdefault("tie_word_embeddings", cfg.get("tie_word_embeddings", False))
    return text


def qwen2vl_sections(rp, where, head_dim):
    """M-RoPE's sections (rotated pairs per temporal, height, width
    position), padded to 4 as llama.cpp writes them."""
    s = rp.get("mrope_section")
    if not isinstance(s, list) or not 3 <= len(s) <= 4 or not all(isinstance(x, int) and x >= 0 for x in s) \
            or 2 * sum(s) != head_dim:
        raise ConvertError(f"{where}: 'mrope_section' is {s!r}, expected 3 section sizes that add up to half the "
                           f"head size {head_dim}")
    return s + [0] * (4 - len(s))


def qwen3next_layer_types(cfg, where):
    """Which Qwen3-Next layers attend: layer_types, else every
    full_attention_interval-th; Tessera (like llama.cpp) takes it from the
    interval, so layer_types must follow it."""
    nl = cfg_int(cfg, "num_hidden_layers", where)
    every = cfg_int(cfg, "full_attention_interval", where, 4)
    pattern = ["full_attention" if (i + 1) % every == 0 else "linear_attention" for i in range(nl)]
    lt = cfg.get("layer_types", pattern)
    if lt != pattern:
        raise ConvertError(f"{where}: 'layer_types' is {lt!r}; tessera convert converts Qwen3-Next models whose "
                           f"every {every}th layer (full_attention_interval) attends and no other")
    return lt


def write_qwen3next(w, cfg, where, head_dim):
    """Qwen3-Next's experts, gated delta net and partial rope, in
    llama.cpp's order; what Tessera's qwen3next does not compute (dense
    layers among the experts, value heads wider than key heads) is one
    error naming the key."""
    if cfg.get("mlp_only_layers") or cfg.get("decoder_sparse_step", 1) != 1:
        k = "mlp_only_layers" if cfg.get("mlp_only_layers") else "decoder_sparse_step"
        raise ConvertError(f"{where}: '{k}' is {cfg[k]!r}; tessera convert converts Qwen3-Next models with "
                           f"experts in every layer")
    if cfg_int(cfg, "linear_value_head_dim", where) != cfg_int(cfg, "linear_key_head_dim", where):
        raise ConvertError(f"{where}: 'linear_value_head_dim' {cfg['linear_value_head_dim']} is not "
                           f"'linear_key_head_dim' {cfg['linear_key_head_dim']} (Tessera's and llama.cpp's "
                           f"qwen3next size a value head as a key head)")
    w.add_expert_feed_forward_length(cfg_int(cfg, "moe_intermediate_size", where))
    w.add_expert_shared_feed_forward_length(cfg_int(cfg, "shared_expert_intermediate_size", where))
    nv = cfg_int(cfg, "linear_num_value_heads", where)
    if nv % cfg_int(cfg, "linear_num_key_heads", where):
        raise ConvertError(f"{where}: linear_num_value_heads {nv} is not a multiple of linear_num_key_heads "
                           f"{cfg['linear_num_key_heads']}")
    w.add_ssm_conv_kernel(cfg_int(cfg, "linear_conv_kernel_dim", where, 4))
    w.add_ssm_state_size(cfg_int(cfg, "linear_key_head_dim", where))
    w.add_ssm_group_count(cfg_int(cfg, "linear_num_key_heads", where))
    w.add_ssm_time_step_rank(nv)
    w.add_ssm_inner_size(cfg_int(cfg, "linear_value_head_dim", where) * nv)
    lt = qwen3next_layer_types(cfg, where)
    w.add_array("qwen3next.attention.recurrent_layers", [t == "linear_attention" for t in lt])
    w.add_full_attention_interval(cfg_int(cfg, "full_attention_interval", where, 4))
    prf = cfg_num(rope_params(cfg), "partial_rotary_factor", where, cfg.get("partial_rotary_factor", 1.0))
    w.add_rope_dimension_count(int(prf * head_dim))


def write_hparams_after(w, arch, cfg, where, n_vocab, n_head, head_dim):
    """The keys llama.cpp writes after general.file_type."""
    if arch in ENCODERS:
        w.add_causal_attention(False)
        pt = pooling_type(os.path.dirname(where))
        if pt is not None:
            w.add_pooling_type(pt)
    if arch in ("llama", "granite", "granitemoe", "granitehybrid", "smollm3", "mistral3"):
        w.add_vocab_size(n_vocab)
        w.add_rope_dimension_count(head_dim)
    if arch == "qwen35moe":
        w.add_expert_feed_forward_length(cfg_int(cfg, "moe_intermediate_size", where))
        w.add_expert_shared_feed_forward_length(cfg_int(cfg, "shared_expert_intermediate_size", where))
    if arch in QWEN35:
        write_qwen35(w, arch, cfg, where, head_dim)
    if arch == "qwen3next":
        write_qwen3next(w, cfg, where, head_dim)
    if arch == "mistral3":
        # YaRN's mscale_all_dim, and Llama 4's query temperature (Ministral 3)
        rp = rope_params(cfg)
        if rp.get("rope_type", rp.get("type")) == "yarn" and rp.get("mscale_all_dim") is not None:
            w.add_float32(f"{arch}.rope.scaling.yarn_log_multiplier", cfg_num(rp, "mscale_all_dim", where, None))
        if rp.get("llama_4_scaling_beta") is not None:
            w.add_float32(f"{arch}.attention.temperature_scale", cfg_num(rp, "llama_4_scaling_beta", where, None))
    if arch == "lfm2":
        w.add_vocab_size(n_vocab)
        w.add_shortconv_l_cache(cfg_int(cfg, "conv_L_cache", where))
    if arch in ("granite", "granitemoe", "granitehybrid"):
        w.add_attention_scale(cfg_num(cfg, "attention_multiplier", where, 1.0))
        w.add_embedding_scale(cfg_num(cfg, "embedding_multiplier", where, 1.0))
        w.add_residual_scale(cfg_num(cfg, "residual_multiplier", where, 1.0))
        w.add_logit_scale(cfg_num(cfg, "logits_scaling", where, 1.0))
        if cfg.get("shared_intermediate_size"):
            w.add_expert_shared_feed_forward_length(cfg_int(cfg, "shared_intermediate_size", where))
    if arch == "granitehybrid":
        w.add_ssm_conv_kernel(cfg_int(cfg, "mamba_d_conv", where, 4))
        w.add_ssm_state_size(cfg_int(cfg, "mamba_d_state", where))
        w.add_ssm_group_count(cfg_int(cfg, "mamba_n_groups", where, 1))
        w.add_ssm_inner_size(cfg_int(cfg, "mamba_expand", where, 2) * cfg_int(cfg, "hidden_size", where))
        w.add_ssm_time_step_rank(cfg_int(cfg, "mamba_n_heads", where))
        w.add_rope_scaling_finetuned(False)
    if arch == "gemma3":
        w.add_sliding_window(cfg_int(cfg, "sliding_window", where))
    if arch == "phi3":
        w.add_sliding_window(cfg.get("sliding_window") or 0)
    if arch == "gpt-oss":
        w.add_sliding_window(cfg_int(cfg, "sliding_window", where))
        w.add_expert_feed_forward_length(cfg_int(cfg, "intermediate_size", where))


# ------------------------------------------------------------ tokenizer

def write_vocab(w, d, n_vocab, arch, cfg):
    spm = os.path.join(d, "tokenizer.model")
    if arch in ENCODERS:
        w.add_token_type_count(cfg.get("type_vocab_size", 2))
        norm = write_wordpiece(w, d, n_vocab)
        # (GGUF has no key for [CLS]: gguf-py would say so on stderr)
        logging.getLogger("gguf.vocab").setLevel(logging.ERROR)
        special = gguf.SpecialVocab(d, load_merges=False, n_vocab=n_vocab)
    elif os.path.exists(spm):
        write_spm(w, spm, n_vocab, arch)
        special = gguf.SpecialVocab(d, load_merges=False, n_vocab=n_vocab)
    elif os.path.exists(os.path.join(d, "tokenizer.json")):
        post = write_bpe(w, d, n_vocab)
        special = gguf.SpecialVocab(d, load_merges=True, n_vocab=n_vocab)
        if (post or {}).get("type") in (None, "ByteLevel"):
            # a post-processor that adds no token: no BOS, no EOS (as
            # llama.cpp's gguf-py says where PyPI's 0.19 says nothing)
            for k in ("bos", "eos"):
                special.add_special_token.setdefault(k, False)
    else:
        raise ConvertError(f"{d}: no tokenizer.model and no tokenizer.json")
    special.add_to_gguf(w, quiet=True)
    if arch in ENCODERS:
        # the BertNormalizer's switches as tokenizer.json has them (not
        # tokenizer_config.json's do_lower_case), as llama.cpp writes them;
        # strip_accents only when given (else it follows lowercase)
        w.add_bool("tokenizer.ggml.normalizer.lowercase", bool(norm.get("lowercase", True)))
        if norm.get("strip_accents") is not None:
            w.add_bool("tokenizer.ggml.normalizer.strip_accents", bool(norm["strip_accents"]))
    if arch == "gemma3" and os.path.exists(spm):
        w.add_add_space_prefix(False)


def write_spm(w, path, n_vocab, arch):
    try:
        from sentencepiece import SentencePieceProcessor
    except ImportError:
        raise ConvertError(f"{path}: reading a SentencePiece tokenizer needs PyPI's sentencepiece, which "
                           f"{sys.executable} lacks: pip install sentencepiece (or set TESSERA_PYTHON)")
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


def write_wordpiece(w, d, n_vocab):
    """A BERT WordPiece vocabulary (tokenizer.json) as GGUF keeps it: a
    word's first piece marked with U+2581, a continuation without its
    "##", the special added tokens as they are. Uncased or cased (the
    BertNormalizer's lowercase); returns the normalizer."""
    path = os.path.join(d, "tokenizer.json")
    try:
        with open(path, encoding="utf-8") as f:
            tj = json.load(f)
    except FileNotFoundError:
        raise ConvertError(f"{d}: no tokenizer.json (a BERT model's WordPiece vocabulary)")
    except ValueError as e:
        raise ConvertError(f"{path}: not JSON ({e})")
    model = tj.get("model") if isinstance(tj, dict) else None
    if not isinstance(model, dict) or model.get("type") != "WordPiece" or not isinstance(model.get("vocab"), dict):
        raise ConvertError(f"{path}: model {str((model or {}).get('type'))!r} is not a WordPiece vocabulary "
                           f"(a BERT model's)")
    norm = tj.get("normalizer") or {}
    pre = tj.get("pre_tokenizer") or {}
    if norm.get("type") != "BertNormalizer" or pre.get("type") != "BertPreTokenizer" \
            or not isinstance(norm.get("lowercase", True), bool) \
            or not isinstance(norm.get("strip_accents"), (bool, type(None))):
        raise ConvertError(f"{path}: normalizer {json.dumps(norm)[:120]} and pre-tokenizer {json.dumps(pre)[:80]} "
                           f"are not a BERT tokenizer's (tessera convert knows BertNormalizer, cased or not, and "
                           f"BertPreTokenizer)")
    prefix = model.get("continuing_subword_prefix") or "##"
    special = {a.get("id") for a in tj.get("added_tokens") or [] if a.get("special")}
    T = gguf.TokenType
    tokens = [None] * n_vocab
    types = [T.NORMAL] * n_vocab
    for tok, i in model["vocab"].items():
        if not isinstance(i, int) or not 0 <= i < n_vocab:
            raise ConvertError(f"{path}: token {tok!r} has id {i!r}, outside the model's vocab_size {n_vocab}")
        if i in special:
            tokens[i], types[i] = tok, T.CONTROL
        elif tok.startswith(prefix):
            tokens[i] = tok[len(prefix):]
        else:
            tokens[i] = "\u2581" + tok
    for i, t in enumerate(tokens):
        if t is None:
            tokens[i], types[i] = f"\u2581[PAD{i}]", T.UNUSED
    w.add_tokenizer_model("bert")
    # llama.cpp's converter names this vocabulary's pre-tokenizer by a hash
    # of its tokens; an uncased BERT WordPiece (bert-base-uncased's, BGE's)
    # comes out as jina-v2-en, a name that changes nothing in the
    # tokenization (WordPiece's splitting is the model type's; the casing
    # is tokenizer.ggml.normalizer.*'s), so a cased one gets it too
    w.add_tokenizer_pre("jina-v2-en")
    w.add_token_list(tokens)
    w.add_token_types(types)
    return norm


# BPE pre-tokenizers. llama.cpp's converter names a tokenizer.json's
# pre-tokenizer by hashing the tokens of a check text and looking the hash
# up in a list of known models; a new model is refused until added. Here
# the name comes from what the tokenizer does: the regular expressions of
# its pre_tokenizer (and the normalizer they need) give the family of
# splitting, and the family's name is the one llama.cpp uses whose other
# switches (tessera's core/src/vocab/pretok_table.h: whether spaces are
# cleaned up when decoding, whether a word that is a token skips the merges)
# match tokenizer_config.json's clean_up_tokenization_spaces and the BPE
# model's ignore_merges. tests/convert checks the result against llama.cpp's
# converter on real vocabularies, and the tokenization against the
# tokenizer's own.
RX_CONTRACTIONS_CI = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)"
PRE_SPLITS = {  # Split regex (ByteLevel after it without its own regex) -> family
    RX_CONTRACTIONS_CI + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+":
        "llama3",
    RX_CONTRACTIONS_CI + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+":
        "qwen2",
    RX_CONTRACTIONS_CI + r"|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+"
                         r"|\s+(?!\S)|\s+": "qwen35",
}
# family, cleans spaces, ignores merges -> llama.cpp's name (the first that fits)
PRE_NAMES = [
    ("gpt2", True, False, "gpt-2"),
    ("gpt2", False, False, "trillion"),
    ("starcoder", True, False, "starcoder"),
    ("starcoder", False, False, "smollm"),
    ("llama3", True, True, "llama-bpe"),
    ("llama3", True, False, "smaug-bpe"),
    ("qwen2", False, False, "qwen2"),
    ("qwen2", True, False, "stablelm2"),
    ("qwen35", False, False, "qwen35"),
]


def _is_byte_level(p, use_regex):
    return isinstance(p, dict) and p.get("type") == "ByteLevel" and bool(p.get("use_regex", True)) == use_regex \
        and not p.get("add_prefix_space", False)


def bpe_family(tj, where):
    """The splitting family of a tokenizer.json, or a ConvertError saying
    what it has."""
    pre = tj.get("pre_tokenizer") or {}
    steps = pre.get("pretokenizers") if pre.get("type") == "Sequence" else [pre]
    steps = steps or []
    fam = None
    if len(steps) == 1 and _is_byte_level(steps[0], True):
        fam = "gpt2"
    elif len(steps) == 2 and steps[0].get("type") == "Digits" and steps[0].get("individual_digits") \
            and _is_byte_level(steps[1], True):
        fam = "starcoder"
    elif len(steps) == 2 and steps[0].get("type") == "Split" and _is_byte_level(steps[1], False) \
            and steps[0].get("behavior") == "Isolated" and not steps[0].get("invert"):
        fam = PRE_SPLITS.get((steps[0].get("pattern") or {}).get("Regex"))
    if fam is None:
        raise ConvertError(f"{where}: the BPE pre-tokenizer {json.dumps(pre)[:300]} is not one tessera convert "
                           f"knows (GPT-2 byte level, StarCoder/SmolLM digits, Llama 3, Qwen2, Qwen3.5)")
    norm = tj.get("normalizer")
    if norm is not None and norm.get("type") != "NFC":
        raise ConvertError(f"{where}: the normalizer {json.dumps(norm)[:200]} of a byte-level BPE tokenizer is "
                           f"not one tessera convert knows")
    return fam


def bpe_pre_name(tj, tcfg, where):
    fam = bpe_family(tj, where)
    clean = tcfg.get("clean_up_tokenization_spaces", True) is not False
    ignore_merges = bool((tj.get("model") or {}).get("ignore_merges", False))
    fits = [n for f, c, im, n in PRE_NAMES if f == fam and c == clean and im == ignore_merges] or \
           [n for f, c, im, n in PRE_NAMES if f == fam]
    return fits[0]


def write_bpe(w, d, n_vocab):
    path = os.path.join(d, "tokenizer.json")
    try:
        with open(path, encoding="utf-8") as f:
            tj = json.load(f)
    except ValueError as e:
        raise ConvertError(f"{path}: not JSON ({e})")
    model = tj.get("model") if isinstance(tj, dict) else None
    if not isinstance(model, dict) or model.get("type") != "BPE" or not isinstance(model.get("vocab"), dict):
        raise ConvertError(f"{path}: model {str((model or {}).get('type'))!r} is not a BPE vocabulary "
                           f"(tessera convert reads BPE tokenizer.json and SentencePiece tokenizer.model)")
    if model.get("byte_fallback"):
        raise ConvertError(f"{path}: a SentencePiece-style BPE tokenizer.json (byte_fallback) without "
                           f"tokenizer.model is not converted by tessera convert yet")
    tcfg = {}
    cp = os.path.join(d, "tokenizer_config.json")
    if os.path.exists(cp):
        try:
            with open(cp, encoding="utf-8") as f:
                tcfg = json.load(f)
        except ValueError as e:
            raise ConvertError(f"{cp}: not JSON ({e})")
    pre = bpe_pre_name(tj, tcfg, path)
    T = gguf.TokenType
    tokens = [None] * n_vocab
    types = [T.NORMAL] * n_vocab
    for tok, i in model["vocab"].items():
        if not isinstance(i, int) or not 0 <= i < n_vocab:
            raise ConvertError(f"{path}: token {tok!r} has id {i!r}, outside the model's vocab_size {n_vocab}")
        tokens[i] = tok
    for a in tj.get("added_tokens") or []:
        i = a.get("id")
        if not isinstance(i, int) or not 0 <= i < n_vocab:
            raise ConvertError(f"{path}: added token {a.get('content')!r} has id {i!r}, outside the model's "
                               f"vocab_size {n_vocab}")
        tokens[i] = a["content"]
        types[i] = T.CONTROL if a.get("special") else T.USER_DEFINED
    for i, t in enumerate(tokens):
        if t is None:  # the model's rows past the tokenizer's tokens
            tokens[i] = f"[PAD{i}]"
            types[i] = T.UNUSED
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    return tj.get("post_processor")


# ------------------------------------------------------------ main

OUTTYPES = {"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
            "bf16": gguf.LlamaFileType.MOSTLY_BF16, "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}


def read_config(d):
    where = os.path.join(d, "config.json")
    try:
        with open(where, encoding="utf-8") as f:
            cfg = json.load(f)
    except FileNotFoundError:
        raise ConvertError(f"{d}: no config.json (not a Hugging Face model directory)")
    except ValueError as e:
        raise ConvertError(f"{where}: not JSON ({e})")
    if not isinstance(cfg, dict):
        raise ConvertError(f"{where}: not a JSON object")
    names = cfg.get("architectures") or []
    if len(names) != 1 or names[0] not in ARCHS:
        raise ConvertError(f"{where}: architecture {names!r} is not one tessera convert knows "
                           f"({', '.join(sorted(ARCHS))})")
    return cfg, where, names


def convert(d, out, outtype, vocab_only=False):
    cfg, where, names = read_config(d)
    arch = ARCHS[names[0]]
    if arch == "nomic-bert":
        cfg = nomic_config(cfg, where)
    mxfp4 = quantization(cfg, arch, where)
    if names[0] in VLM:
        cfg = text_config(cfg, names[0], where)
    n_layer = cfg_int(cfg, "num_hidden_layers", where)
    n_vocab = cfg_int(cfg, "vocab_size", where)
    shards = [] if vocab_only else open_weights(d)
    w = gguf.GGUFWriter(out, arch)
    w.add_type(gguf.GGUFType.MODEL)
    w.add_name(os.path.basename(os.path.normpath(d)).replace("-", " ").title().replace(" ", "-"))
    n_head, n_kv, n_expert, head_dim = write_hparams(w, arch, cfg, where)
    # llama.cpp's file type for MXFP4 experts beside f32/f16/bf16 tensors
    w.add_file_type(gguf.LlamaFileType.MOSTLY_MXFP4_MOE if mxfp4 and outtype != "q8_0" else OUTTYPES[outtype])
    write_hparams_after(w, arch, cfg, where, n_vocab, n_head, head_dim)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    write_vocab(w, d, n_vocab, arch, cfg)
    seen = set()
    tmap = TensorMap(arch, cfg, n_layer, n_head, n_kv, n_expert, vlm=names[0] in VLM)
    tied = cfg.get("tie_word_embeddings", arch in ("gemma3",)) is True
    if mxfp4:
        # the MXFP4 experts first, as llama.cpp's converter writes them
        for name, data in mxfp4_experts(shards, n_layer, n_expert):
            seen.add(name)
            w.add_tensor(name, data, raw_shape=data.shape, raw_dtype=gguf.GGMLQuantizationType.MXFP4)
    for st in shards:
        for hf in st.names_in_order():
            if mxfp4 and hf.endswith(MXFP4_SUFFIXES):
                continue
            data, dt = st.get(hf)
            if dt == "U8":
                raise ConvertError(f"{st.path}: tensor '{hf}' has dtype U8, which tessera convert reads only as "
                                   f"gpt-oss's MXFP4 experts (*_blocks, *_scales with quant_method mxfp4)")
            for name, data in tmap(hf, data.astype(np.float32)):
                if name in seen:
                    raise ConvertError(f"{st.path}: tensor '{hf}' gives '{name}' a second time")
                seen.add(name)
                if name == "output.weight" and tied:
                    continue
                add_tensor(w, name, data, outtype)
    tmap.finish()
    if not vocab_only:
        for n in needed(arch, cfg, n_layer, where):
            if n not in seen:
                raise ConvertError(f"{d}: the weights have no tensor for '{n}'")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def quantization(cfg, arch, where):
    """Whether the checkpoint's experts are MXFP4 (gpt-oss as OpenAI
    ships it); any other quantized checkpoint is one error."""
    q = cfg.get("quantization_config")
    if q is None:
        return False
    method = q.get("quant_method") if isinstance(q, dict) else None
    if method == "mxfp4" and arch == "gpt-oss":
        return True
    raise ConvertError(f"{where}: quantization_config quant_method {method!r} is not converted by tessera convert "
                       f"(it reads unquantized checkpoints, and gpt-oss's mxfp4 experts)")


# an MXFP4 projection: NAME_blocks (U8 [expert, out, in / 32, 16]: 32 FP4
# E2M1 codes a block, two a byte, the even element in the low nibble) and
# NAME_scales (U8 [expert, out, in / 32]: E8M0, 2^(s - 127)), OpenAI's
# layout; gate_up_proj holds gate and up rows interleaved (gate even)
MXFP4_SUFFIXES = ("_blocks", "_scales")
MXFP4_PROJ = {"gate_up_proj": ("ffn_gate_exps.weight", "ffn_up_exps.weight"), "down_proj": ("ffn_down_exps.weight",)}


def mxfp4_experts(shards, n_layer, n_expert):
    """gpt-oss's MXFP4 experts as GGML's MXFP4 blocks, in the order of
    their _blocks tensors (shard by shard, by name): the E8M0 scale byte,
    then 16 bytes holding element j in the low nibble and j + 16 in the
    high one. The codes and scales are copied, not requantized."""
    where = {}
    for st in shards:
        for hf in st.tensors:
            where[hf] = st
    for st in shards:
        for hf in st.names_in_order():
            if not hf.endswith("_blocks"):
                continue
            base = hf[:-len("_blocks")]
            parts = base.split(".")
            if not (len(parts) == 6 and parts[:2] == ["model", "layers"] and parts[2].isdigit()
                    and int(parts[2]) < n_layer and parts[3:5] == ["mlp", "experts"] and parts[5] in MXFP4_PROJ):
                raise ConvertError(f"{st.path}: tensor '{hf}' is not one of gpt-oss's MXFP4 experts "
                                   f"(model.layers.N.mlp.experts.gate_up_proj_blocks, down_proj_blocks)")
            il, proj = int(parts[2]), parts[5]
            sc = base + "_scales"
            if sc not in where:
                raise ConvertError(f"{st.path}: tensor '{hf}' has no '{sc}' in the weights")
            bdt, bshape, _, _ = st.tensors[hf]
            sdt, sshape, _, _ = where[sc].tensors[sc]
            if bdt != "U8" or sdt != "U8" or len(bshape) != 4 or bshape[3] != 16 or sshape != bshape[:3] \
                    or bshape[0] != n_expert:
                raise ConvertError(f"{st.path}: tensors '{hf}' ({bdt} {bshape}) and '{sc}' ({sdt} {sshape}) are not "
                                   f"MXFP4 blocks [{n_expert} experts, rows, blocks, 16] and their scales "
                                   f"[{n_expert}, rows, blocks], U8")
            blocks, _ = st.get(hf)
            scales, _ = where[sc].get(sc)
            codes = np.stack([blocks & 15, blocks >> 4], -1).reshape(*bshape[:3], 32)
            q = np.concatenate([scales[..., None], codes[..., :16] | (codes[..., 16:] << 4)], -1)
            q = q.astype(np.uint8).reshape(bshape[0], bshape[1], bshape[2] * 17)
            names = MXFP4_PROJ[proj]
            if len(names) == 2:
                if bshape[1] % 2:
                    raise ConvertError(f"{st.path}: tensor '{hf}' has {bshape[1]} rows, not gate and up pairs")
                yield f"blk.{il}.{names[0]}", np.ascontiguousarray(q[:, 0::2])
                yield f"blk.{il}.{names[1]}", np.ascontiguousarray(q[:, 1::2])
            else:
                yield f"blk.{il}.{names[0]}", q


def needed(arch, cfg, n_layer, where):
    """Tensors without which the file would not load: the embedding, the
    last norm and each layer's first matrix."""
    first = {"phi3": "attn_qkv", "mamba2": "ssm_in", "nomic-bert": "attn_qkv"}.get(arch, "attn_q")
    kinds = [first] * n_layer
    if arch in QWEN35:
        kinds = ["attn_qkv" if t == "linear_attention" else "attn_q" for t in cfg.get("layer_types") or []]
    if arch == "qwen3next":
        kinds = ["attn_qkv" if t == "linear_attention" else "attn_q" for t in qwen3next_layer_types(cfg, where)]
    if arch in ("lfm2", "granitehybrid"):
        kinds = [first if t in ATTN_LAYER else ("shortconv.in_proj" if t == "conv" else "ssm_in")
                 for t in layer_types(cfg, arch, n_layer, where)]
    return ["token_embd.weight", "token_embd_norm.weight" if arch in ("lfm2",) + tuple(ENCODERS) else "output_norm.weight"] + \
        [f"blk.{i}.{k}.weight" for i, k in enumerate(kinds)]


# ------------------------------------------------------------ mmproj

# vision-language class -> the mmproj's clip.projector_type
MMPROJ = {"Qwen2VLForConditionalGeneration": "qwen2vl_merger", "Qwen2_5_VLForConditionalGeneration": "qwen2.5vl_merger",
          "Mistral3ForConditionalGeneration": "pixtral", "Qwen3_5ForConditionalGeneration": "qwen3vl_merger",
          "Qwen3_5MoeForConditionalGeneration": "qwen3vl_merger"}
QWEN2VL_MMPROJ = ("qwen2vl_merger", "qwen2.5vl_merger")
# Pixtral's tower and Mistral 3's projector (vision_tower., multi_modal_projector.)
PIXTRAL_GLOBAL_MAP = {
    "multi_modal_projector.linear_1.weight": "mm.1.weight", "multi_modal_projector.linear_1.bias": "mm.1.bias",
    "multi_modal_projector.linear_2.weight": "mm.2.weight", "multi_modal_projector.linear_2.bias": "mm.2.bias",
    "multi_modal_projector.norm.weight": "mm.input_norm.weight",
    "multi_modal_projector.patch_merger.merging_layer.weight": "mm.patch_merger.weight",
    "vision_tower.ln_pre.weight": "v.pre_ln.weight", "vision_tower.patch_conv.weight": "v.patch_embd.weight",
}
PIXTRAL_LAYER_MAP = {
    "attention.q_proj.weight": "attn_q.weight", "attention.k_proj.weight": "attn_k.weight",
    "attention.v_proj.weight": "attn_v.weight", "attention.o_proj.weight": "attn_out.weight",
    "attention_norm.weight": "ln1.weight", "ffn_norm.weight": "ln2.weight",
    "feed_forward.gate_proj.weight": "ffn_gate.weight", "feed_forward.up_proj.weight": "ffn_up.weight",
    "feed_forward.down_proj.weight": "ffn_down.weight",
}
# Qwen2-VL's and Qwen2.5-VL's tower (visual.): ViT blocks, the 2x2 merger
# (ln_q, mlp.0, mlp.2); q, k and v one matrix there, three in the file
QWEN2VL_GLOBAL_MAP = {
    "merger.ln_q.weight": "v.post_ln.weight", "merger.ln_q.bias": "v.post_ln.bias",
    "merger.mlp.0.weight": "mm.0.weight", "merger.mlp.0.bias": "mm.0.bias",
    "merger.mlp.2.weight": "mm.2.weight", "merger.mlp.2.bias": "mm.2.bias",
}
QWEN2VL_LAYER_MAP = {
    "attn.qkv.weight": "attn_qkv.weight", "attn.qkv.bias": "attn_qkv.bias",  # split in VisionMap.convert
    "attn.proj.weight": "attn_out.weight", "attn.proj.bias": "attn_out.bias",
    "norm1.weight": "ln1.weight", "norm1.bias": "ln1.bias", "norm2.weight": "ln2.weight", "norm2.bias": "ln2.bias",
    "mlp.fc1.weight": "ffn_up.weight", "mlp.fc1.bias": "ffn_up.bias",  # Qwen2-VL's GELU MLP
    "mlp.fc2.weight": "ffn_down.weight", "mlp.fc2.bias": "ffn_down.bias",
    "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.gate_proj.bias": "ffn_gate.bias",  # Qwen2.5-VL's SiLU-gated
    "mlp.up_proj.weight": "ffn_up.weight", "mlp.up_proj.bias": "ffn_up.bias",
    "mlp.down_proj.weight": "ffn_down.weight", "mlp.down_proj.bias": "ffn_down.bias",
}
# Qwen3.5's vision tower (visual.): ViT blocks, learned positions, the 2x2 merger
QWEN3VL_GLOBAL_MAP = {
    "merger.linear_fc1.weight": "mm.0.weight", "merger.linear_fc1.bias": "mm.0.bias",
    "merger.linear_fc2.weight": "mm.2.weight", "merger.linear_fc2.bias": "mm.2.bias",
    "merger.norm.weight": "v.post_ln.weight", "merger.norm.bias": "v.post_ln.bias",
    "patch_embed.proj.bias": "v.patch_embd.bias", "pos_embed.weight": "v.position_embd.weight",
}
QWEN3VL_LAYER_MAP = {
    "attn.qkv.weight": "attn_qkv.weight", "attn.qkv.bias": "attn_qkv.bias",
    "attn.proj.weight": "attn_out.weight", "attn.proj.bias": "attn_out.bias",
    "mlp.linear_fc1.weight": "ffn_up.weight", "mlp.linear_fc1.bias": "ffn_up.bias",
    "mlp.linear_fc2.weight": "ffn_down.weight", "mlp.linear_fc2.bias": "ffn_down.bias",
    "norm1.weight": "ln1.weight", "norm1.bias": "ln1.bias", "norm2.weight": "ln2.weight", "norm2.bias": "ln2.bias",
}
# the image size llama.cpp writes for a Qwen2-VL vision_config without one
QWEN2VL_IMAGE_SIZE = 560


def preprocessor(d):
    """image_mean and image_std of preprocessor_config.json."""
    p = os.path.join(d, "preprocessor_config.json")
    try:
        with open(p, encoding="utf-8") as f:
            pc = json.load(f)
    except FileNotFoundError:
        raise ConvertError(f"{d}: no preprocessor_config.json (the image normalisation an mmproj needs)")
    except ValueError as e:
        raise ConvertError(f"{p}: not JSON ({e})")
    out = []
    for k in ("image_mean", "image_std"):
        v = pc.get(k) if isinstance(pc, dict) else None
        if not isinstance(v, list) or len(v) != 3 or not all(isinstance(x, (int, float)) for x in v):
            raise ConvertError(f"{p}: '{k}' is {v!r}, expected 3 numbers")
        out.append([float(x) for x in v])
    return out


class VisionMap:
    """A vision-language checkpoint's vision tower and projector tensors
    -> the mmproj's (v.*, mm.*); the text model's are skipped."""

    def __init__(self, kind, vc, n_layer):
        self.kind, self.vc, self.n_layer = kind, vc, n_layer
        self.maps = (QWEN2VL_GLOBAL_MAP, QWEN2VL_LAYER_MAP) if kind in QWEN2VL_MMPROJ else \
            (QWEN3VL_GLOBAL_MAP, QWEN3VL_LAYER_MAP)

    def __call__(self, hf):
        if self.kind == "pixtral":
            name = hf[len("model."):] if hf.startswith(("model.vision_tower.", "model.multi_modal_projector.")) else hf
            if not name.startswith(("vision_tower.", "multi_modal_projector.")):
                return None
            if name in PIXTRAL_GLOBAL_MAP:
                return PIXTRAL_GLOBAL_MAP[name]
            parts = name.split(".", 4)  # vision_tower.transformer.layers.N.REST
            if len(parts) == 5 and parts[1:3] == ["transformer", "layers"] and parts[3].isdigit() \
                    and int(parts[3]) < self.n_layer and parts[4] in PIXTRAL_LAYER_MAP:
                return f"v.blk.{parts[3]}.{PIXTRAL_LAYER_MAP[parts[4]]}"
        else:
            if not hf.startswith(QWEN_VISION):
                return None
            name = hf.split("visual.", 1)[1]
            gmap, lmap = self.maps
            if name in gmap:
                return gmap[name]
            if name == "patch_embed.proj.weight":
                return "v.patch_embd.weight"
            parts = name.split(".", 2)  # blocks.N.REST
            if len(parts) == 3 and parts[0] == "blocks" and parts[1].isdigit() and int(parts[1]) < self.n_layer \
                    and parts[2] in lmap:
                return f"v.blk.{parts[1]}.{lmap[parts[2]]}"
        raise ConvertError(f"tensor '{hf}' has no mmproj name in tessera convert's table for {self.kind}")

    def convert(self, name, data, hf):
        if self.kind == "pixtral" and name.endswith(("attn_q.weight", "attn_k.weight")):
            return [(name, unpermute(data, self.vc["num_attention_heads"]))]  # 2-D rope in llama's pairs
        if name == "v.patch_embd.weight" and self.kind != "pixtral":
            # [out, channels, time 2, h, w]: one convolution per frame of the pair
            if data.ndim != 5 or data.shape[2] != 2:
                raise ConvertError(f"tensor '{hf}' has shape {list(data.shape)}, expected [out, 3, 2, h, w]")
            return [(name, data[:, :, 0]), (name + ".1", data[:, :, 1])]
        if self.kind in QWEN2VL_MMPROJ and ".attn_qkv." in name:
            if data.shape[0] % 3:
                raise ConvertError(f"tensor '{hf}' has {data.shape[0]} rows, not q, k and v of one size")
            return [(name.replace("attn_qkv", x), part) for x, part in zip(("attn_q", "attn_k", "attn_v"),
                                                                          np.split(data, 3))]
        return [(name, data)]


def mmproj_pixtral(cfg, vc, where, vwhere):
    """Mistral 3's Pixtral tower: its hyperparameters and the keys it
    writes after clip.projector_type."""
    tc = cfg.get("text_config")
    if not isinstance(tc, dict):
        raise ConvertError(f"{where}: a Mistral3ForConditionalGeneration without a 'text_config' object")
    hp = dict(n_layer=cfg_int(vc, "num_hidden_layers", vwhere), n_embd=cfg_int(vc, "hidden_size", vwhere),
              n_ff=cfg_int(vc, "intermediate_size", vwhere), n_head=cfg_int(vc, "num_attention_heads", vwhere),
              patch=cfg_int(vc, "patch_size", vwhere), image_size=cfg_int(vc, "image_size", vwhere),
              proj_dim=cfg_int(tc, "hidden_size", f"{where}: text_config"))
    act = vc.get("hidden_act", "gelu")
    if act not in ("gelu", "silu"):
        raise ConvertError(f"{vwhere}: hidden_act {act!r} of a Pixtral tower is not converted by tessera "
                           f"convert (gelu, silu)")
    merge = cfg_int(cfg, "spatial_merge_size", where, 2)

    def keys(w):
        # Pixtral's RMS norms (1e-5, fixed in its modelling code)
        w.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-5)
        w.add_bool("clip.use_silu" if act == "silu" else "clip.use_gelu", True)  # the FFN's activation
        w.add_uint32("clip.vision.spatial_merge_size", merge)
    return hp, keys


def mmproj_qwen2vl(vc, v25, vwhere):
    """Qwen2-VL's or Qwen2.5-VL's tower: its hyperparameters (named
    differently in the two) and the keys after clip.projector_type."""
    for k in ("spatial_merge_size", "temporal_patch_size"):
        if vc.get(k, 2) != 2:
            raise ConvertError(f"{vwhere}: '{k}' is {vc[k]!r}; tessera convert converts vision towers with 2 there")
    n_embd = cfg_int(vc, "hidden_size" if v25 else "embed_dim", vwhere)
    hp = dict(n_layer=cfg_int(vc, "depth", vwhere), n_embd=n_embd,
              n_ff=cfg_int(vc, "intermediate_size", vwhere) if v25 else n_embd * cfg_int(vc, "mlp_ratio", vwhere, 4),
              n_head=cfg_int(vc, "num_heads", vwhere), patch=cfg_int(vc, "patch_size", vwhere, 14),
              image_size=cfg_int(vc, "image_size", vwhere, QWEN2VL_IMAGE_SIZE),
              proj_dim=cfg_int(vc, "out_hidden_size" if v25 else "hidden_size", vwhere))
    n_wa = None
    if v25:
        if vc.get("hidden_act", "silu") != "silu":
            raise ConvertError(f"{vwhere}: 'hidden_act' is {vc['hidden_act']!r}; tessera convert converts "
                               f"Qwen2.5-VL vision towers with silu")
        # windowed attention but in every n-th block: the full ones n-1, 2n-1...
        full = vc.get("fullatt_block_indexes")
        if not isinstance(full, list) or not full or not all(isinstance(i, int) for i in full) or \
                full != list(range(full[0], full[0] + (full[0] + 1) * len(full), full[0] + 1)):
            raise ConvertError(f"{vwhere}: 'fullatt_block_indexes' is {full!r}, expected every n-th block "
                               f"(n-1, 2n-1, ...)")
        n_wa = full[0] + 1

    def keys(w):
        if v25:
            w.add_bool("clip.use_silu", True)
            w.add_uint32("clip.vision.n_wa_pattern", n_wa)
        w.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-6)  # the towers' LayerNorm/RMSNorm eps
    return hp, keys


def mmproj_qwen3vl(vc, vwhere):
    """Qwen3.5's tower (Qwen3-VL's without deepstack): its
    hyperparameters and the keys after clip.projector_type."""
    patch, n_pos = cfg_int(vc, "patch_size", vwhere), cfg_int(vc, "num_position_embeddings", vwhere)
    side = int(round(n_pos ** 0.5))
    if side * side != n_pos:
        raise ConvertError(f"{vwhere}: num_position_embeddings {n_pos} is not a square grid")
    if vc.get("deepstack_visual_indexes"):
        raise ConvertError(f"{vwhere}: deepstack_visual_indexes {vc['deepstack_visual_indexes']!r}: "
                           f"Qwen3-VL's deepstack layers are not converted by tessera convert (Qwen3.5 has none)")
    hp = dict(n_layer=cfg_int(vc, "depth", vwhere), n_embd=cfg_int(vc, "hidden_size", vwhere),
              n_ff=cfg_int(vc, "intermediate_size", vwhere), n_head=cfg_int(vc, "num_heads", vwhere),
              patch=patch, image_size=side * patch, proj_dim=cfg_int(vc, "out_hidden_size", vwhere))
    merge = cfg_int(vc, "spatial_merge_size", vwhere, 2)

    def keys(w):
        w.add_bool("clip.use_gelu", True)
        w.add_uint32("clip.vision.spatial_merge_size", merge)
        w.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-6)  # the ViT's LayerNorms (fixed)
        w.add_array("clip.vision.is_deepstack_layers", [False] * hp["n_layer"])
    return hp, keys


def convert_mmproj(d, out, outtype):
    """The vision tower and projector of a vision-language checkpoint as
    llama.cpp's mmproj file (convert_hf_to_gguf.py --mmproj): clip.* keys,
    v.*/mm.* tensors. The tower's kind (MMPROJ) by the checkpoint's class."""
    cfg, where, names = read_config(d)
    kind = MMPROJ.get(names[0])
    if kind is None:
        raise ConvertError(f"{where}: {names[0]} has no vision tower tessera convert writes as an mmproj "
                           f"(it does for {', '.join(sorted(MMPROJ))})")
    vc = cfg.get("vision_config")
    if not isinstance(vc, dict):
        raise ConvertError(f"{where}: a {names[0]} without a 'vision_config' object (the vision tower's)")
    vwhere = f"{where}: vision_config"
    mean, std = preprocessor(d)
    if kind == "pixtral":
        hp, kind_keys = mmproj_pixtral(cfg, vc, where, vwhere)
    elif kind in QWEN2VL_MMPROJ:
        hp, kind_keys = mmproj_qwen2vl(vc, kind == "qwen2.5vl_merger", vwhere)
    else:
        hp, kind_keys = mmproj_qwen3vl(vc, vwhere)
    n_layer = hp["n_layer"]
    shards = open_weights(d)
    w = gguf.GGUFWriter(out, "clip")
    w.add_type(gguf.GGUFType.MMPROJ)
    w.add_name(os.path.basename(os.path.normpath(d)).replace("-", " ").title().replace(" ", "-"))
    w.add_file_type(OUTTYPES[outtype])
    w.add_bool("clip.has_vision_encoder", True)
    w.add_uint32("clip.vision.projection_dim", hp["proj_dim"])
    w.add_uint32("clip.vision.image_size", hp["image_size"])
    w.add_uint32("clip.vision.patch_size", hp["patch"])
    w.add_uint32("clip.vision.embedding_length", hp["n_embd"])
    w.add_uint32("clip.vision.feed_forward_length", hp["n_ff"])
    w.add_uint32("clip.vision.block_count", n_layer)
    w.add_uint32("clip.vision.attention.head_count", hp["n_head"])
    w.add_array("clip.vision.image_mean", mean)
    w.add_array("clip.vision.image_std", std)
    w.add_string("clip.projector_type", kind)
    kind_keys(w)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    vmap, seen = VisionMap(kind, vc, n_layer), set()
    for st in shards:
        for hf in st.names_in_order():
            name = vmap(hf)
            if name is None:
                continue
            data, dt = st.get(hf)
            if dt == "U8":
                raise ConvertError(f"{st.path}: tensor '{hf}' has dtype U8, which tessera convert does not read "
                                   f"in a vision tower")
            for name, data in vmap.convert(name, data.astype(np.float32), hf):
                if name in seen:
                    raise ConvertError(f"{st.path}: tensor '{hf}' gives '{name}' a second time")
                seen.add(name)
                if "patch_embd" in name or "patch_merger" in name:
                    # kept f16 at f16, else f32, as llama.cpp's mmproj files have them
                    data = data.astype(np.float16) if outtype == "f16" and data.ndim > 1 else data
                    w.add_tensor(name, np.ascontiguousarray(data))
                else:
                    add_tensor(w, name, data, outtype)
    first = "v.blk.{}.attn_qkv.weight" if kind == "qwen3vl_merger" else "v.blk.{}.attn_q.weight"
    needs = ["v.patch_embd.weight", "mm.1.weight" if kind == "pixtral" else "mm.0.weight", "mm.2.weight"]
    for n in needs + [first.format(i) for i in range(n_layer)]:
        if n not in seen:
            raise ConvertError(f"{d}: the weights have no tensor for '{n}' of the vision tower")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def add_tensor(w, name, data, outtype):
    if data.ndim <= 1 or outtype == "f32" or name.endswith(KEEP_F32):
        w.add_tensor(name, np.ascontiguousarray(data, np.float32))
    elif outtype == "f16":
        w.add_tensor(name, data.astype(np.float16))
    else:
        qt = gguf.GGMLQuantizationType.BF16 if outtype == "bf16" else gguf.GGMLQuantizationType.Q8_0
        if qt == gguf.GGMLQuantizationType.Q8_0 and data.shape[-1] % 32:
            w.add_tensor(name, data.astype(np.float16))  # rows that are not whole Q8_0 blocks
            return
        q = gguf.quants.quantize(np.ascontiguousarray(data), qt)
        w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=qt)


def main(argv):
    args, out, outtype, vocab_only, mmproj = [], None, "f16", False, False
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        if a in ("-o", "--outfile", "--output") and i + 1 < len(argv):
            out = argv[i + 1]
            i += 2
        elif a == "--vocab-only":
            vocab_only = True
            i += 1
        elif a == "--mmproj":
            mmproj = True
            i += 1
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
        if mmproj:
            convert_mmproj(args[0], tmp, outtype)
        else:
            convert(args[0], tmp, outtype, vocab_only)
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
