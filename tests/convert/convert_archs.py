"""tessera convert on every architecture and BPE tokenizer it converts,
against llama.cpp's convert_hf_to_gguf.py and the Hugging Face model.

- Tokenizers: tokenizer.json BPE vocabularies of real models (GPT-2,
  Llama 3, Qwen2, StarCoder from the vocabulary files of llama.cpp's source
  tree, SmolLM2 from its GGUF when the models cache has it), each written
  back into a Hugging Face tokenizer.json with the model's pre-tokenizer,
  normalizer and post-processor: `tessera convert --vocab-only` and the
  peer's converter write the same keys (tokenizer.ggml.pre, tokens, types,
  merges, special ids, add_bos/add_eos); and `tessera tokenize` on our file
  gives the Hugging Face tokenizer's tokens for llama.cpp's tokenizer test
  texts (the .inp files beside those vocabularies).
- Architectures: a tiny random model of each (made here by transformers:
  2-4 layers, hidden 64): the same keys and the same tensors byte for byte,
  in the same order, as the peer's converter at f16 and bf16; and the
  logits of our f32 file on the ref device equal to the Hugging Face
  model's (top-8 at every position within the tolerance printed with each,
  greedy continuation the same up to near ties), for prompts tokenized by
  tessera (so that this checks the weights and hyperparameters, the
  tokenizer being checked above), f32 KV cache.
- Encoders (bert, nomic-bert): the same keys and tensors as the peer's converter, and
  instead of logits `tessera embed` (every pooling, unnormalised) against
  the transformers model's pooled last hidden state, on tokens that must be
  the Hugging Face tokenizer's (bert-base-uncased's WordPiece vocabulary,
  and a cased one: bertcased).
- gpt-oss with MXFP4 experts as OpenAI ships them (gptossmxfp4): the same
  file as the peer's (experts MXFP4), the experts dequantizing to exactly
  transformers', logits within the Q8_0 activations' rounding of
  transformers' and close to llama.cpp's on the same file (golden_gen).
- Vision towers (MMPROJ: qwen2vl, qwen25vl, mistral3's Pixtral,
  qwen35vl's): `tessera convert --mmproj` against the peer's `--mmproj`
  file (f16, bf16; keys in the same order). Qwen2-VL's and Qwen2.5-VL's
  (MTMD_MMPROJ): tessera runs our f32 one with an image beside our text
  model, and the greedy tokens after the image are llama.cpp libmtmd's
  on the same pair (tests/data/mm/mtmd_ref.cpp, built here against the
  peer's libmtmd); the others: Tessera's mmproj loader on it.
- Bad input: a tokenizer.json whose pre-tokenizer tessera convert does not
  know, a WordPiece normaliser that is not BERT's, a Nomic config with
  partial rotary dimensions, M-RoPE sections that do not fill a qwen2vl
  head, a Qwen3-Next with dense layers, granitehybrid layer_types that
  do not cover every layer, a quantization other than gpt-oss's mxfp4
  and --mmproj without preprocessor_config.json are one line and exit 1
  (tests/convert/convert_hf.py checks the rest: a missing shard, a dtype
  mismatch, a U8 tensor, an unknown architecture).

Needs numpy, gguf, sentencepiece, torch and transformers in the Python that
runs it ($TESSERA_CONVERT_PYTHON, else this one) and llama.cpp's source tree
($TESSERA_PEER_LLAMA_CPP, else ../shared/peer's cache): without them it
skips (77). The peer's converter runs in this process (runpy), once per
file, so torch is imported once.
usage: convert_archs.py TEST_GOLDEN [ARCH|tok...]"""
import contextlib
import json
import os
import runpy
import subprocess
import sys
import tempfile

import convert_env as env
from convert_env import ROOT, PY, PEER, check

env.reexec()
try:
    import numpy as np
    import gguf  # noqa: F401
    import sentencepiece as spm
    import torch
    import transformers as T
except ImportError as e:
    env.skip(f"{e} (set TESSERA_CONVERT_PYTHON to a Python with numpy, gguf, sentencepiece, torch and "
             f"transformers)")
if not os.path.exists(env.PEER_SCRIPT):
    env.skip(f"no llama.cpp source tree at {PEER} (its convert_hf_to_gguf.py is the reference)")

BIN = os.environ["TESSERA_BIN"]
TEST_GOLDEN = sys.argv[1]
ONLY = set(sys.argv[2:])
VOCABS = os.path.join(PEER, "models")
SMOLLM2 = os.path.expanduser("~/.cache/tessera/models/SmolLM2-135M-Instruct.Q4_1.gguf")


# ------------------------------------------------------------ tokenizers

R_LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
            r"|\s*[\r\n]+|\s+(?!\S)|\s+")
R_QWEN35 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
            r"|\s*[\r\n]+|\s+(?!\S)|\s+")
R_QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
           r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def byte_level(use_regex):
    return {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": use_regex}


def split(rx):
    return {"type": "Split", "pattern": {"Regex": rx}, "behavior": "Isolated", "invert": False}


DIGITS = {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True}, byte_level(True)]}
# the published tokenizer.json of each model, as far as it matters here:
# name -> (vocabulary GGUF, normalizer, pre_tokenizer, BOS added by the
# post-processor, BPE ignore_merges, clean_up_tokenization_spaces)
TOKENIZERS = {
    "gpt2": ("ggml-vocab-gpt-2.gguf", None, byte_level(True), False, False, True),
    "llamabpe": ("ggml-vocab-llama-bpe.gguf", None,
                 {"type": "Sequence", "pretokenizers": [split(R_LLAMA3), byte_level(False)]}, True, True, True),
    "qwen": ("ggml-vocab-qwen2.gguf", {"type": "NFC"},
             {"type": "Sequence", "pretokenizers": [split(R_QWEN2), byte_level(False)]}, False, False, False),
    "starcoder": ("ggml-vocab-starcoder.gguf", None, DIGITS, False, False, True),
    "smollm": (SMOLLM2, None, DIGITS, False, False, False),
    "qwen35": ("ggml-vocab-qwen35.gguf", None,  # no NFC: llama.cpp's .out keeps "e" + U+0301 apart
               {"type": "Sequence", "pretokenizers": [split(R_QWEN35), byte_level(False)]}, False, False, False),
}
EXPECT_PRE = {"gpt2": "gpt-2", "llamabpe": "llama-bpe", "qwen": "qwen2", "starcoder": "starcoder", "smollm": "smollm",
              "qwen35": "qwen35"}


def hf_tokenizer(name, d):
    """A tokenizer.json and tokenizer_config.json for the vocabulary of
    TOKENIZERS[name] (tokens, types and merges from its GGUF); returns the
    model's vocab_size and special ids."""
    src, norm, pre, bos, ignore_merges, clean = TOKENIZERS[name]
    src = src if os.path.isabs(src) else os.path.join(VOCABS, src)
    f = {x.name: x for x in gguf.GGUFReader(src).fields.values()}
    toks = f["tokenizer.ggml.tokens"].contents()
    types = f["tokenizer.ggml.token_type"].contents()
    ids = {k: f[f"tokenizer.ggml.{k}_token_id"].contents() for k in ("bos", "eos", "unknown", "padding")
           if f"tokenizer.ggml.{k}_token_id" in f}
    vocab, added = {}, []
    for i, (t, ty) in enumerate(zip(toks, types)):
        if ty == 4 and t.startswith("[PAD"):  # padding rows a converter added
            continue
        vocab[t] = i
        if ty in (3, 4):
            added.append({"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": ty == 4, "special": ty == 3})
    if bos:
        b = toks[ids["bos"]]
        tok_b, seq = {"SpecialToken": {"id": b, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}
        post = {"type": "TemplateProcessing", "single": [tok_b, seq],
                "pair": [tok_b, seq, {"SpecialToken": {"id": b, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
                "special_tokens": {b: {"id": b, "ids": [ids["bos"]], "tokens": [b]}}}
    else:
        post = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    tj = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": norm,
          "pre_tokenizer": pre, "post_processor": post, "decoder": byte_level(True),
          "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                    "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                    "ignore_merges": ignore_merges, "vocab": vocab,
                    "merges": [m.split(" ", 1) for m in f["tokenizer.ggml.merges"].contents()]}}
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as fo:
        json.dump(tj, fo, ensure_ascii=False)
    cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": clean,
           "add_bos_token": bos}
    for k in ids:
        cfg[{"unknown": "unk", "padding": "pad"}.get(k, k) + "_token"] = toks[ids[k]]
    with open(os.path.join(d, "tokenizer_config.json"), "w") as fo:
        json.dump(cfg, fo)
    return len(toks), ids


# a cased vocabulary: BGE's with [unused0]... replaced by these pieces (and
# the normaliser keeps case), so that the prompts' capitals have tokens of
# their own, some whole words, some split
CASED_PIECES = ["The", "Tessera", "T", "G", "##GU", "##F", "GGUF", "##ess", "##era", "Model", "M", "D", "##on",
                "Caf\u00e9", "\u00c9", "##t"]


def wordpiece_tokenizer(d, pooling):
    """bert-base-uncased's WordPiece vocabulary (BGE's: 30522 pieces, from
    llama.cpp's ggml-vocab-bert-bge.gguf, where a word's first piece has a
    U+2581 and a continuation no "##") as an uncased BERT tokenizer.json,
    and a sentence-transformers Pooling module (POOLING: cls or mean; with
    "-cased", a cased tokenizer: CASED_PIECES in the vocabulary, the
    normaliser's lowercase and do_lower_case false)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    pooling, _, cased = pooling.partition("-")
    f = {x.name: x for x in gguf.GGUFReader(os.path.join(VOCABS, "ggml-vocab-bert-bge.gguf")).fields.values()}
    toks = f["tokenizer.ggml.tokens"].contents()
    vocab = {(t[1:] if t.startswith("\u2581") else t if len(t) > 2 and t[0] == "[" and t[-1] == "]" else "##" + t): i
             for i, t in enumerate(toks)}
    if cased:
        for k, piece in enumerate(CASED_PIECES):
            vocab[piece] = vocab.pop(f"[unused{k}]")
    tk = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tk.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None,
                                               lowercase=not cased)
    tk.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tk.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    tk.decoder = decoders.WordPiece(prefix="##")
    T.BertTokenizerFast(tokenizer_object=tk, unk_token="[UNK]", sep_token="[SEP]", pad_token="[PAD]",
                        cls_token="[CLS]", mask_token="[MASK]", do_lower_case=not cased).save_pretrained(d)
    os.makedirs(os.path.join(d, "1_Pooling"), exist_ok=True)
    with open(os.path.join(d, "modules.json"), "w") as fo:
        json.dump([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                   {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}], fo)
    with open(os.path.join(d, "1_Pooling", "config.json"), "w") as fo:
        json.dump({"word_embedding_dimension": 64, "pooling_mode_cls_token": pooling == "cls",
                   "pooling_mode_mean_tokens": pooling == "mean"}, fo)
    return len(toks), {"padding": vocab["[PAD]"]}


def spm_tokenizer(d):
    """A 512-piece SentencePiece BPE trained on docs/*.md."""
    os.makedirs(d)
    corpus = os.path.join(d, "corpus.txt")
    with open(corpus, "w") as out:
        for fn in sorted(os.listdir(os.path.join(ROOT, "docs"))):
            if fn.endswith(".md"):
                out.write(open(os.path.join(ROOT, "docs", fn), encoding="utf-8").read())
    spm.SentencePieceTrainer.train(input=corpus, model_prefix=os.path.join(d, "tokenizer"), vocab_size=512,
                                   model_type="bpe", byte_fallback=True, character_coverage=0.995,
                                   num_threads=1, minloglevel=2)
    os.unlink(corpus)
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "LlamaTokenizer", "bos_token": "<s>", "eos_token": "</s>",
                   "unk_token": "<unk>", "add_bos_token": True, "add_eos_token": False}, f)


# ------------------------------------------------------------ converters

def ours(d, out, outtype, *extra):
    r = env.tessera_convert(d, out, outtype, *extra)
    return check(r.returncode == 0, f"tessera convert {os.path.basename(d)} {outtype}: {r.stderr.strip()[-500:]}")


def peer(d, out, outtype, *extra, log=None, pre=None):
    """llama.cpp's converter, run in this process with its output to LOG.
    PRE: the pre-tokenizer name it is to write where its list of known
    vocabularies (by the hash of a check text's tokens) has none, instead
    of stopping there (its get_vocab_base_pre answers PRE where it would
    raise NotImplementedError; everything else is its own)."""
    argv, path = sys.argv, sys.path[:]
    sys.argv = ["convert_hf_to_gguf.py", d, "--outtype", outtype, "--outfile", out, *extra]
    sys.path[:0] = [PEER, os.path.join(PEER, "gguf-py")]
    saved = {k: v for k, v in sys.modules.items() if k == "gguf" or k.startswith("gguf.")}
    for k in saved:  # the peer's gguf-py, not PyPI's, while it runs
        del sys.modules[k]
    patched = []
    if pre:
        import importlib
        base = importlib.import_module("conversion.base")
        for cls in list(vars(base).values()):
            if isinstance(cls, type) and "get_vocab_base_pre" in vars(cls):
                orig = vars(cls)["get_vocab_base_pre"]

                def answer(self, tokenizer, _orig=orig):
                    try:
                        return _orig(self, tokenizer)
                    except NotImplementedError:
                        return pre
                cls.get_vocab_base_pre = answer
                patched.append((cls, orig))
        check(patched, "the peer's converter has no get_vocab_base_pre to answer for")
    fd1, fd2 = os.dup(1), os.dup(2)
    ok, why = True, ""
    with open(log, "a") as lf:
        os.dup2(lf.fileno(), 1)
        os.dup2(lf.fileno(), 2)
        try:
            with contextlib.redirect_stdout(lf), contextlib.redirect_stderr(lf):
                runpy.run_path(env.PEER_SCRIPT, run_name="__main__")
        except SystemExit as e:
            ok, why = e.code in (0, None), f"exit {e.code}"
        except Exception as e:  # noqa: BLE001 - any failure of the peer is reported
            ok, why = False, repr(e)[:300]
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(fd1, 1)
            os.dup2(fd2, 2)
            os.close(fd1)
            os.close(fd2)
            sys.argv, sys.path[:] = argv, path
            for cls, orig in patched:
                cls.get_vocab_base_pre = orig
            for k in [k for k in sys.modules if k == "gguf" or k.startswith("gguf.")]:
                del sys.modules[k]
            sys.modules.update(saved)
    return check(ok, f"convert_hf_to_gguf.py {os.path.basename(d)} {outtype}: {why} (log {log})")


# tensors that may differ from llama.cpp's by 1 ulp of f32: qwen35's
# ssm_a = -exp(A_log), which the peer computes with torch's f32 exp (not
# correctly rounded) and tessera convert in f64, rounded once
ULP_TENSORS = {"qwen35": "ssm_a", "qwen35moe": "ssm_a", "qwen35vl": "ssm_a", "qwen3next": "ssm_a"}


# keys compared otherwise: qwen35moe's tokenizer (Qwen3.5's regex on a
# 151936-piece vocabulary) gets tokenizer.ggml.pre qwen2 from the peer,
# whose hash of its check text cannot tell qwen2's and qwen35's splitting
# apart on that vocabulary; tessera convert names it from the regex
# (qwen35), which test_archs checks instead
# the pre-tokenizer name llama.cpp's converter is given where it knows no
# name for a vocabulary (peer(pre=)): the cased BERT vocabulary's hash is
# not in its list, so it would stop; "jina-v2-en" is the name it gives the
# same vocabulary uncased and the one tessera convert writes for both
PEER_PRE = {"bertcased": "jina-v2-en"}
PEER_DIFFERS = {"qwen35moe": {"tokenizer.ggml.pre": "qwen35"}, "qwen35vl": {"tokenizer.ggml.pre": "qwen35"}}


def compare(a, b, what, name=None):
    r = env.compare_gguf(a, b, *PEER_DIFFERS.get(name, {}))
    print(f"{what}: {r.stdout.strip().splitlines()[-1] if r.stdout.strip() else r.stderr[-300:]}", flush=True)
    ok = r.returncode == 0
    if not ok and name in ULP_TENSORS:
        problems = [x for x in r.stdout.splitlines() if not x.startswith(tuple("0123456789"))]
        ulp = [x for x in problems if x.startswith("tensor ") and x.split(":")[0].endswith("." + ULP_TENSORS[name])
               and float(x.rsplit(" ", 1)[1]) <= 2.4e-7]
        ok = bool(problems) and len(ulp) == len(problems)
        if ok:
            print(f"{what}: {len(ulp)} {ULP_TENSORS[name]} tensor(s) within 1 ulp of f32 of llama.cpp's (torch's exp)")
    return check(ok, f"{what} against llama.cpp's converter:\n{r.stdout[-2000:]}")


def tessera_ids(model, text, tmp, bos=True):
    p = os.path.join(tmp, "text.txt")
    with open(p, "w", encoding="utf-8") as f:
        f.write(text)
    r = subprocess.run([BIN, "tokenize", "-m", model, "-f", p, "--ids"] + ([] if bos else ["--no-bos"]),
                       capture_output=True, text=True)
    if not check(r.returncode == 0, f"tessera tokenize {model}: {r.stderr[-300:]}"):
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_tokenizers(tmp, log):
    for name, (src, *_) in TOKENIZERS.items():
        if ONLY and name not in ONLY and "tok" not in ONLY:
            continue
        srcp = src if os.path.isabs(src) else os.path.join(VOCABS, src)
        if not os.path.exists(srcp):
            print(f"note: {name}: no {srcp}, not checked")
            continue
        d = os.path.join(tmp, f"tok{name}")
        n, ids = hf_tokenizer(name, d)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": n,
                       "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
                       "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 256,
                       "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "bos_token_id": ids.get("bos"),
                       "eos_token_id": ids.get("eos")}, f)
        a, b = d + "-ours.gguf", d + "-peer.gguf"
        if not ours(d, a, "f16", "--vocab-only"):
            continue
        # (qwen35: the peer names it by a hash that cannot tell it from
        # qwen2 on this vocabulary, PEER_DIFFERS; its tokenization is
        # checked below all the same)
        if name != "qwen35":
            if not peer(d, b, "f16", "--vocab-only", log=log):
                continue
            compare(a, b, f"tokenizer {name} (vocab only)")
        if name == "gpt2":  # an unknown pre-tokenizer is one error naming it
            tjp = os.path.join(d, "tokenizer.json")
            keep = open(tjp, encoding="utf-8").read()
            tj = json.loads(keep)
            tj["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [split(r"\p{L}+|\s+"), byte_level(False)]}
            with open(tjp, "w", encoding="utf-8") as fo:
                json.dump(tj, fo, ensure_ascii=False)
            r = subprocess.run([BIN, "convert", d, "-o", d + "-bad.gguf", "--vocab-only"], capture_output=True,
                               text=True, env=dict(os.environ, TESSERA_PYTHON=PY))
            check(r.returncode == 1 and "BPE pre-tokenizer" in r.stderr and "tokenizer.json" in r.stderr
                  and r.stderr.count("\n") == 1 and not os.path.exists(d + "-bad.gguf"),
                  f"unknown pre-tokenizer: rc {r.returncode}: {r.stderr[-400:]!r}")
            with open(tjp, "w", encoding="utf-8") as fo:
                fo.write(keep)
        pre = {x.name: x for x in gguf.GGUFReader(a).fields.values()}["tokenizer.ggml.pre"].contents()
        check(pre == EXPECT_PRE[name], f"tokenizer {name}: pre-tokenizer '{pre}', expected '{EXPECT_PRE[name]}'")
        # the tokenization: llama.cpp's test texts through both tokenizers
        inp = os.path.join(VOCABS, os.path.basename(srcp) + ".inp")
        inp = inp if os.path.exists(inp) else os.path.join(VOCABS, "ggml-vocab-gpt-2.gguf.inp")
        texts = [t.strip("\n") for t in open(inp, encoding="utf-8").read().split("__ggml_vocab_test__")]
        text = "\n".join(t for t in texts if t.strip()) + "\nThe model 12345 runs: don't, WON'T 'll  x\t y\n\n"
        hf = T.AutoTokenizer.from_pretrained(d).encode(text, add_special_tokens=False)
        got = tessera_ids(a, text, tmp, bos=False)
        if got is not None:
            first = next((i for i, (x, y) in enumerate(zip(got, hf)) if x != y), min(len(got), len(hf)))
            check(got == hf, f"tokenizer {name}: tessera's {len(got)} tokens differ from Hugging Face's {len(hf)} "
                             f"at {first}: {got[first:first + 6]} vs {hf[first:first + 6]}")
            print(f"tokenizer {name}: pre '{pre}', {len(text)} characters, {len(hf)} tokens, "
                  f"{'the same' if got == hf else 'DIFFERENT'} in tessera and Hugging Face", flush=True)


# ------------------------------------------------------------ architectures

BASE = dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=256, bos_token_id=1, eos_token_id=2, pad_token_id=0,
            tie_word_embeddings=False)
MOE = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32)
GRANITE = dict(embedding_multiplier=12.0, residual_multiplier=0.22, attention_multiplier=0.0078125,
               logits_scaling=8.0)
# name -> (config class, model class, config, tokenizer, weights dtype, top-8 tolerance)
# The tolerance: f32 weights and an f32 KV cache on both sides, so only the
# order of f32 sums differs: measured 1.5e-7 to 4.1e-6 (granite's logits are
# divided by 8); gemma3 to 9.0e-4, its GELU (tanh form) computed differently.
ARCHS = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", dict(), "spm", "float32", 1e-4),
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM",
               dict(head_dim=16, query_pre_attn_scalar=16, sliding_window=32, tie_word_embeddings=True),
               "spm", "float32", 2e-3),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", dict(partial_rotary_factor=0.75), "spm", "float32", 1e-4),
    "granite": ("GraniteConfig", "GraniteForCausalLM", GRANITE, "spm", "float32", 1e-4),
    "smollm3": ("SmolLM3Config", "SmolLM3ForCausalLM", dict(num_hidden_layers=4, tie_word_embeddings=True),
                "spm", "bfloat16", 1e-4),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM", dict(num_local_experts=4, num_experts_per_tok=2),
                "spm", "float32", 1e-4),
    "granitemoe": ("GraniteMoeConfig", "GraniteMoeForCausalLM",
                   dict(GRANITE, num_local_experts=4, num_experts_per_tok=2, intermediate_size=32), "spm",
                   "float32", 1e-4),
    "granitemoeshared": ("GraniteMoeSharedConfig", "GraniteMoeSharedForCausalLM",
                         dict(num_local_experts=4, num_experts_per_tok=2, intermediate_size=32,
                              shared_intermediate_size=64), "spm", "float32", 1e-4),
    "qwenmoe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM", dict(MOE, shared_expert_intermediate_size=64),
                "smollm", "float32", 1e-4),
    "qwenthreemoe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", dict(MOE, head_dim=24, norm_topk_prob=True),
                     "smollm", "bfloat16", 1e-4),
    "olmoe": ("OlmoeConfig", "OlmoeForCausalLM",
              dict(num_experts=4, num_experts_per_tok=2, intermediate_size=32), "smollm", "float32", 1e-4),
    # Qwen2-VL's and Qwen2.5-VL's text model (qwen2vl: M-RoPE, its sections
    # uneven so that a wrong split would show in the keys; text-only
    # prompts, whose temporal, height and width positions are all the
    # token's); the vision tower is there and not converted (QWEN_VL_VISION)
    "qwen2vl": ("Qwen2VLConfig", "Qwen2VLForConditionalGeneration",
                dict(rope_parameters={"rope_type": "default", "rope_theta": 1e6, "mrope_section": [2, 3, 3]}),
                "spm", "float32", 1e-4),
    "qwen25vl": ("Qwen2_5_VLConfig", "Qwen2_5_VLForConditionalGeneration",
                 dict(rope_parameters={"rope_type": "default", "rope_theta": 1e6, "mrope_section": [4, 2, 2]}),
                 "spm", "bfloat16", 1e-4),
    # Qwen3-Next: qwen35moe's layers but for the delta net's fused
    # projections (in_proj_qkvz, in_proj_ba, per key head) and value heads
    # grouped by key head; 6 value heads on 2 key heads, every 4th layer
    # attends; run with --no-mtp, as llama.cpp's converter needs here.
    # Measured 6.1e-5 (transformers' chunked delta rule against Tessera's)
    "qwen3next": ("Qwen3NextConfig", "Qwen3NextForCausalLM",
                  dict(MOE, num_hidden_layers=4, head_dim=16, linear_key_head_dim=16, linear_value_head_dim=16,
                       linear_num_key_heads=2, linear_num_value_heads=6, shared_expert_intermediate_size=64),
                  "smollm", "float32", 2e-4),
    # YaRN (factor 32 from 4096), sinks, biased experts with gate and up
    # interleaved in one tensor, a sliding window every other layer
    "gptoss": ("GptOssConfig", "GptOssForCausalLM",
               dict(num_local_experts=4, num_experts_per_tok=2, intermediate_size=32, head_dim=16,
                    sliding_window=32, max_position_embeddings=131072), "smollm", "bfloat16", 1e-4),
    # the same as OpenAI ships it: the experts' matrices in MXFP4
    # (*_blocks, *_scales; random codes and scales, mxfp4_experts), the
    # rest bf16; llama.cpp's converter writes those experts as MXFP4
    "gptossmxfp4": ("GptOssConfig", "GptOssForCausalLM",
                    dict(num_local_experts=4, num_experts_per_tok=2, intermediate_size=64, head_dim=16,
                         sliding_window=32, max_position_embeddings=131072), "smollm", "bfloat16", 0.05),
    # short convolutions and attention with q/k norms; the FFN width
    # adjusted (2/3 of 192, rounded up to 64) as in LFM2's own configs
    "lfm2": ("Lfm2Config", "Lfm2ForCausalLM",
             dict(num_hidden_layers=4, layer_types=["conv", "full_attention", "conv", "full_attention"],
                  intermediate_size=192, block_auto_adjust_ff_dim=True, block_multiple_of=64), "smollm",
             "float32", 1e-4),
    "mamba2": ("Mamba2Config", "Mamba2ForCausalLM",
               dict(state_size=16, num_heads=8, head_dim=16, expand=2, n_groups=2, chunk_size=16), "smollm",
               "float32", 1e-4),
    # Mamba-2 and attention layers, experts and a shared expert, granite's
    # multipliers
    "granitehybrid": ("GraniteMoeHybridConfig", "GraniteMoeHybridForCausalLM",
                      dict(GRANITE, num_hidden_layers=4, layer_types=["mamba", "attention", "mamba", "attention"],
                           mamba_n_heads=8, mamba_d_head=16, mamba_d_state=16, mamba_n_groups=2, mamba_expand=2,
                           mamba_chunk_size=16, num_local_experts=4, num_experts_per_tok=2, intermediate_size=32,
                           shared_intermediate_size=64), "smollm", "float32", 1e-4),
    # an encoder (BGE's shape): learned positions and token types, post
    # norms, GELU; bert-base-uncased's WordPiece vocabulary, CLS pooling.
    # Embeddings (every pooling) measured 1.6e-3 from transformers': GELU
    # from an fp16 table (Tessera's, as llama.cpp's) on activations of 1-4
    # made by these std-0.15 weights (6.6e-6 with transformers' own 0.02)
    "bert": ("BertConfig", "BertModel", dict(type_vocab_size=2, max_position_embeddings=128), "wordpiece-cls",
             "float32", 3e-3),
    # and a cased one (bert-base-cased's kind: lowercase and do_lower_case
    # false); llama.cpp's converter does not know its vocabulary's hash
    # (PEER_PRE)
    "bertcased": ("BertConfig", "BertModel", dict(type_vocab_size=2, max_position_embeddings=128),
                  "wordpiece-mean-cased", "float32", 3e-3),
    # Nomic Embed as nomic-ai publishes it (its own config keys and tensor
    # names: fused Wqkv, fc11/fc12/fc2), rotary positions, SwiGLU, the
    # vocabulary padded to a multiple of 64; mean pooling
    "nomic": ("NomicBertConfig", "NomicBertModel",
              dict(max_position_embeddings=2048, rope_parameters={"rope_theta": 1000.0, "rope_type": "default"}),
              "wordpiece-mean", "float32", 1e-4),
    # Mistral3ForConditionalGeneration's text model (the vision tower and
    # projector are there and not converted): Ministral 3's (YaRN with
    # mscale_all_dim, Llama 4's query temperature from position 8 on, so
    # that the prompts reach it) and Mistral Small 3.1's (plain rope)
    "ministral3": ("Mistral3Config", "Mistral3ForConditionalGeneration",
                   dict(model_type="ministral3", head_dim=16, max_position_embeddings=128,
                        rope_parameters={"rope_type": "yarn", "rope_theta": 1e6, "factor": 16.0,
                                         "original_max_position_embeddings": 8, "beta_fast": 32.0, "beta_slow": 1.0,
                                         "mscale": 1.0, "mscale_all_dim": 1.0, "llama_4_scaling_beta": 0.1}),
                   "smollm", "float32", 1e-4),
    "mistral3": ("Mistral3Config", "Mistral3ForConditionalGeneration",
                 dict(model_type="mistral", head_dim=16, rope_parameters={"rope_type": "default", "rope_theta": 1e6}),
                 "smollm", "bfloat16", 1e-4),
    # Qwen3.5: gated delta net layers and a gated full attention layer,
    # partial rope; 6 value heads on 2 key heads, so that the reordering
    # of value heads (grouped -> tiled) is not its own inverse. The
    # converter is run with --no-mtp (tessera convert writes no MTP head)
    "qwen35": ("Qwen3_5TextConfig", "Qwen3_5ForCausalLM",
               dict(num_hidden_layers=4, head_dim=16, linear_key_head_dim=16, linear_value_head_dim=16,
                    linear_num_key_heads=2, linear_num_value_heads=6), "smollm", "float32", 1e-4),
    # Qwen3.5 as published, with its vision tower (Qwen3_5ForConditionalGeneration):
    # the text model converts as qwen35, the tower is the mmproj's
    # (transformers gives a qwen3_5 directory Qwen3.5's own tokenizer
    # class, so Qwen3.5's vocabulary, as qwen35moe below; tied)
    "qwen35vl": ("Qwen3_5Config", "Qwen3_5ForConditionalGeneration",
                 dict(num_hidden_layers=4, head_dim=16, linear_key_head_dim=16, linear_value_head_dim=16,
                      linear_num_key_heads=2, linear_num_value_heads=6, tie_word_embeddings=True), "qwen35",
                 "bfloat16", 1e-4),
    # and its mixture of experts, with a shared expert; transformers gives
    # a qwen3_5_moe directory Qwen3.5's own tokenizer class, whatever
    # tokenizer_config says, so its tokenizer is Qwen3.5's splitting (on
    # the 151936 pieces of llama.cpp's ggml-vocab-qwen35.gguf; tied, so
    # that the embedding is there once)
    "qwen35moe": ("Qwen3_5MoeTextConfig", "Qwen3_5MoeForCausalLM",
                  dict(MOE, num_hidden_layers=4, head_dim=16, linear_key_head_dim=16, linear_value_head_dim=16,
                       linear_num_key_heads=2, linear_num_value_heads=6, shared_expert_intermediate_size=64,
                       tie_word_embeddings=True), "qwen35", "bfloat16", 2e-4),
}
# the test_golden mode per architecture ("strict" where not named): MXFP4
# experts are computed on activations rounded to Q8_0 blocks (Tessera's and
# llama.cpp's MXFP4 dot product), so the logits of an MXFP4 file move by
# that rounding (measured 0.027 at most) and near ties may flip
GOLDEN_MODE = {"gptossmxfp4": "quant"}
# llama.cpp converter options per architecture
PEER_ARGS = {"qwen35": ["--no-mtp"], "qwen35moe": ["--no-mtp"], "qwen35vl": ["--no-mtp"], "qwen3next": ["--no-mtp"]}
# Qwen2-VL's image processor config, as published (the mmproj's mean and
# deviation)
QWEN_VL_PREPROCESSOR = {"min_pixels": 3136, "max_pixels": 12845056, "patch_size": 14, "temporal_patch_size": 2,
                        "merge_size": 2, "image_mean": [0.48145466, 0.4578275, 0.40821073],
                        "image_std": [0.26862954, 0.26130258, 0.27577711],
                        "image_processor_type": "Qwen2VLImageProcessor", "processor_class": "Qwen2VLProcessor"}
# vision-language checkpoints whose vision tower is converted with --mmproj
# too (against the peer's --mmproj file), with the preprocessor_config.json
# each needs: Qwen2-VL's (qwen2vl, qwen25vl), Mistral Small 3.1's (CLIP's
# normalisation) and Qwen3.5's
MMPROJ = {"qwen2vl": QWEN_VL_PREPROCESSOR, "qwen25vl": QWEN_VL_PREPROCESSOR,
          "mistral3": {"image_mean": [0.48145466, 0.4578275, 0.40821073],
                       "image_std": [0.26862954, 0.26130258, 0.27577711], "patch_size": {"height": 16, "width": 16},
                       "image_processor_type": "PixtralImageProcessor", "processor_class": "PixtralProcessor"},
          "qwen35vl": {"image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "patch_size": 16,
                       "temporal_patch_size": 2, "merge_size": 2, "image_processor_type": "Qwen2VLImageProcessorFast"}}
# the towers whose images Tessera computes: against llama.cpp's libmtmd
MTMD_MMPROJ = {"qwen2vl", "qwen25vl"}
# tiny vision towers for the Qwen2-VL and Qwen2.5-VL checkpoints (config
# class -> vision_config)
QWEN_VL_VISION = {
    "Qwen2VLConfig": dict(depth=3, embed_dim=32, hidden_size=64, num_heads=2, mlp_ratio=2, patch_size=14,
                          spatial_merge_size=2, temporal_patch_size=2),
    "Qwen2_5_VLConfig": dict(depth=3, hidden_size=32, out_hidden_size=64, num_heads=2, intermediate_size=64,
                             patch_size=14, spatial_merge_size=2, temporal_patch_size=2, window_size=56,
                             fullatt_block_indexes=[1]),
}


def _bad_sections(cfg):
    cfg["text_config"]["rope_parameters"]["mrope_section"] = [2, 3, 2]


def _dense_layers(cfg):
    cfg["mlp_only_layers"] = [1]


# a config Tessera cannot run, after the logits: how to spoil it, and the
# key the one-line error must name
BAD_CONFIGS = {"qwen2vl": (_bad_sections, "'mrope_section'"), "qwen3next": (_dense_layers, "'mlp_only_layers'")}
# a tiny Pixtral vision tower for the Mistral 3 checkpoints
# (3 blocks: llama.cpp's converter maps the projector's linear_1 and
# linear_2 only where the tower has that many; SiLU as Mistral Small 3.1's)
PIXTRAL = dict(model_type="pixtral", hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=2,
               image_size=64, patch_size=16, head_dim=16, hidden_act="silu")
# and for Qwen3.5's (its merger's output: the text model's width)
QWEN35_VISION = dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64,
                     num_position_embeddings=16, patch_size=16, spatial_merge_size=2, temporal_patch_size=2)
# nomic-ai's config.json for Nomic Embed v1.5, sizes aside
NOMIC_CONFIG = {
    "activation_function": "swiglu", "attn_pdrop": 0.0, "causal": False, "dense_seq_output": True, "embd_pdrop": 0.0,
    "fused_bias_fc": True, "fused_dropout_add_ln": True, "layer_norm_epsilon": 1e-12, "max_trained_positions": 2048,
    "mlp_fc1_bias": False, "mlp_fc2_bias": False, "n_positions": 8192, "pad_vocab_size_multiple": 64,
    "parallel_block": False, "parallel_block_tied_norm": False, "prenorm": False, "qkv_proj_bias": False,
    "reorder_and_upcast_attn": False, "resid_pdrop": 0.0, "rotary_emb_base": 1000, "rotary_emb_fraction": 1.0,
    "rotary_emb_interleaved": False, "rotary_emb_scale_base": None, "rotary_scaling_factor": None,
    "scale_attn_by_inverse_layer_idx": False, "scale_attn_weights": True, "summary_type": "cls_index",
    "type_vocab_size": 2, "use_cache": True, "use_flash_attn": True, "use_rms_norm": False, "use_xentropy": True}
# transformers' Nomic tensor names -> nomic-ai's (which the published
# checkpoints have; q, k and v are one Wqkv there)
NOMIC_NAMES = [("self_attn.o_proj", "attn.out_proj"), ("mlp.up_proj", "mlp.fc11"), ("mlp.gate_proj", "mlp.fc12"),
               ("mlp.down_proj", "mlp.fc2"), ("post_attention_layernorm", "norm1"), ("post_mlp_layernorm", "norm2"),
               ("embeddings.LayerNorm", "emb_ln")]


def save_nomic(m, d, kw):
    """A transformers NomicBertModel saved as nomic-ai's checkpoints are:
    their tensor names and config keys (with transformers' keys beside
    them: transformers 5, and so llama.cpp's converter, reads only those,
    and takes its defaults, 12 layers of 768, without them)."""
    from safetensors.torch import save_file
    sd = m.state_dict()
    out = {}
    for k, v in sd.items():
        if ".self_attn.k_proj." in k or ".self_attn.v_proj." in k:
            continue
        if ".self_attn.q_proj." in k:
            pre = k.split("self_attn.")[0]
            v, k = torch.cat([sd[f"{pre}self_attn.{x}_proj.weight"] for x in "qkv"]), pre + "attn.Wqkv.weight"
        for a, b in NOMIC_NAMES:
            k = k.replace(a, b)
        out[("encoder." if k.startswith("layers.") else "") + k] = v.contiguous()
    save_file(out, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    cfg = dict(NOMIC_CONFIG, architectures=["NomicBertModel"], model_type="nomic_bert", n_embd=kw["hidden_size"],
               n_head=kw["num_attention_heads"], n_layer=kw["num_hidden_layers"], n_inner=kw["intermediate_size"],
               vocab_size=kw["vocab_size"], pad_token_id=kw["pad_token_id"])
    cfg.update({k: kw[k] for k in ("hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size",
                                   "max_position_embeddings", "rope_parameters")})
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)


def mxfp4_experts(d, seed):
    """gpt-oss's experts as OpenAI's checkpoints hold them: for each
    projection (x @ W, W [expert, in, out] in transformers' bf16 layout),
    NAME_blocks [expert, out, in / 32, 16] (U8: 32 FP4 E2M1 codes per
    block, two a byte, the even element in the low nibble) and
    NAME_scales [expert, out, in / 32] (U8: E8M0, 2^(s - 127)), with
    quant_method mxfp4 in the config. The codes and scales are random
    (scales 2^-9..2^-3); the Hugging Face reference is transformers'
    dequantization of these bytes."""
    from safetensors.torch import load_file, save_file
    p = os.path.join(d, "model.safetensors")
    sd = load_file(p)
    g = torch.Generator().manual_seed(seed)
    for k in [k for k in sd if k.endswith(("mlp.experts.gate_up_proj", "mlp.experts.down_proj"))]:
        n_exp, n_in, n_out = sd.pop(k).shape
        sd[k + "_blocks"] = torch.randint(0, 256, (n_exp, n_out, n_in // 32, 16), dtype=torch.uint8, generator=g)
        sd[k + "_scales"] = torch.randint(120, 124, (n_exp, n_out, n_in // 32), dtype=torch.uint8, generator=g)
    save_file(sd, p, metadata={"format": "pt"})
    p = os.path.join(d, "config.json")
    with open(p) as f:
        cfg = json.load(f)
    cfg["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": [
        "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}
    with open(p, "w") as f:
        json.dump(cfg, f, indent=2)


def make_model(name, d, tokd, seed):
    cc, mc, extra, tok, dtype, _ = ARCHS[name]
    kw = dict(BASE, **extra)
    if tok.startswith("wordpiece-"):
        n, ids = wordpiece_tokenizer(d, tok.split("-", 1)[1])
        kw = {k: v for k, v in kw.items() if k not in ("num_key_value_heads", "bos_token_id", "eos_token_id",
                                                        "tie_word_embeddings")}
        kw.update(vocab_size=n if name != "nomic" else (n + 63) // 64 * 64, pad_token_id=ids["padding"])
    elif tok != "spm":
        n, ids = hf_tokenizer(tok, d)
        kw.update(vocab_size=n, bos_token_id=ids.get("bos"), eos_token_id=ids.get("eos"),
                  pad_token_id=ids.get("padding", ids.get("eos")))
    torch.manual_seed(seed)
    if cc == "Mistral3Config":
        conf = T.Mistral3Config(text_config=kw, vision_config=PIXTRAL, image_token_index=10,
                                tie_word_embeddings=False)
    elif cc in QWEN_VL_VISION:
        conf = getattr(T, cc)(text_config=kw, vision_config=QWEN_VL_VISION[cc], tie_word_embeddings=False)
    elif cc in ("Qwen3_5Config", "Qwen3_5MoeConfig"):
        conf = getattr(T, cc)(text_config=kw, vision_config=QWEN35_VISION,
                              tie_word_embeddings=kw["tie_word_embeddings"])
    else:
        conf = getattr(T, cc)(**kw)
    m = getattr(T, mc)(conf)
    with torch.no_grad():
        for pn, p in m.named_parameters():
            if "norm" in pn.lower() and not pn.endswith("bias"):  # around 1 (gemma: around 0, it adds the 1)
                p.copy_(torch.randn_like(p) * 0.1 + (0 if name == "gemma3" else 1))
            else:
                p.normal_(0, 0.15)
    m = m.to(getattr(torch, dtype))
    if name == "nomic":
        save_nomic(m, d, kw)
    else:
        m.save_pretrained(d)
    del m
    if name == "gptossmxfp4":
        mxfp4_experts(d, seed)
    if name in MMPROJ:
        with open(os.path.join(d, "preprocessor_config.json"), "w") as f:
            json.dump(MMPROJ[name], f)
    if name == "mistral3":
        # Mistral 3's image tokens, which llama.cpp's converter looks up
        # ([IMG_BREAK]) for the mmproj: three of SmolLM2's special tokens
        # renamed (10 is image_token_index)
        p = os.path.join(d, "tokenizer.json")
        with open(p, encoding="utf-8") as f:
            tj = json.load(f)
        new = {10: "[IMG]", 11: "[IMG_BREAK]", 12: "[IMG_END]"}
        old = {i: t for t, i in tj["model"]["vocab"].items() if i in new}
        for i, t in new.items():
            del tj["model"]["vocab"][old[i]]
            tj["model"]["vocab"][t] = i
        for a in tj["added_tokens"]:
            a["content"] = new.get(a["id"], a["content"])
        with open(p, "w", encoding="utf-8") as f:
            json.dump(tj, f, ensure_ascii=False)
    if name == "granitehybrid":
        # Granite 4's own config.json says mamba/attention, which
        # transformers 5 saves as linear_attention/full_attention and
        # llama.cpp's converter does not read (every layer recurrent)
        p = os.path.join(d, "config.json")
        with open(p) as f:
            cfg = json.load(f)
        cfg["layer_types"] = extra["layer_types"]
        with open(p, "w") as f:
            json.dump(cfg, f, indent=2)
    if tok == "spm":
        for fn in ("tokenizer.model", "tokenizer_config.json"):
            with open(os.path.join(tokd, fn), "rb") as src, open(os.path.join(d, fn), "wb") as dst:
                dst.write(src.read())


def hf_golden(d, model_file, path, prompts, tmp):
    """A golden file (tests/model/golden.h) from the Hugging Face model in
    D, loaded in f32 (not cast from bf16, which would keep the rope
    frequencies rounded to bf16), on the tokens tessera makes of each
    prompt."""
    cfg = T.AutoConfig.from_pretrained(d)
    if getattr(cfg, "model_type", "") == "gpt_oss":
        # GGUF has no key for YaRN without truncation (gpt-oss's
        # truncate: false): llama.cpp and Tessera round the correction
        # range to whole dimensions, so the reference does too (5.8e-3
        # apart at this size without it)
        cfg.rope_parameters["truncate"] = True
    # the models AutoModelForCausalLM does not load (model_type -> class)
    mc = {"mistral3": T.Mistral3ForConditionalGeneration, "qwen3_5": T.Qwen3_5ForConditionalGeneration,
          "qwen2_vl": T.Qwen2VLForConditionalGeneration, "qwen2_5_vl": T.Qwen2_5_VLForConditionalGeneration}.get(
        getattr(cfg, "model_type", ""), T.AutoModelForCausalLM)
    m = mc.from_pretrained(d, config=cfg, dtype=torch.float32).eval()
    with open(path, "w") as f:
        for p in prompts:
            ids = tessera_ids(model_file, p, tmp)
            if ids is None:
                return False
            with torch.no_grad():
                lg = m(torch.tensor([ids])).logits[0].numpy()
                g = m.generate(torch.tensor([ids]), max_new_tokens=8, do_sample=False, output_scores=True,
                               return_dict_in_generate=True, attention_mask=torch.ones(1, len(ids), dtype=torch.long))
            greedy = g.sequences[0][len(ids):].tolist()
            margin = []
            for s in g.scores:
                top2 = torch.topk(s[0].float(), 2).values
                margin.append(float(top2[0] - top2[1]))
            top = [[[int(j), float(row[j])] for j in np.argsort(-row, kind="stable")[:8]] for row in lg]
            f.write(json.dumps({"prompt": p, "tokens": ids, "top_logits": top, "all_logits": None, "greedy": greedy,
                                "greedy_margin": margin, "greedy_pieces": [], "greedy_text": ""}) + "\n")
    return True


def check_embeddings(name, d, model_file, prompts, tol, tmp):
    """An encoder: tessera's tokens of each prompt equal the Hugging Face
    tokenizer's, and `tessera embed` (ref, no normalisation) the Hugging
    Face model's pooled last hidden state within TOL, with the pooling the
    model's modules.json says and with every other one GGUF has."""
    tok = T.AutoTokenizer.from_pretrained(d)
    m = T.AutoModel.from_pretrained(d, dtype=torch.float32).eval()
    worst = {}
    for p in prompts:
        ids = tessera_ids(model_file, p, tmp)
        if ids is None:
            return
        hf_ids = tok(p)["input_ids"]
        check(ids == hf_ids, f"{name}: tessera's tokens {ids} of {p!r} are not Hugging Face's {hf_ids}")
        with torch.no_grad():
            h = m(torch.tensor([hf_ids])).last_hidden_state[0].double().numpy()
        for pool, ref in (("cls", h[0]), ("mean", h.mean(0)), ("last", h[-1])):
            r = subprocess.run([BIN, "embed", "-m", model_file, "-p", p, "--pooling", pool, "--embd-normalize", "-1",
                                "--embd-output-format", "array", "-dev", "ref"], capture_output=True, text=True)
            if not check(r.returncode == 0, f"{name}: tessera embed --pooling {pool}: {r.stderr[-300:]}"):
                return
            got = np.array(json.loads(r.stdout)[0])
            diff = float(np.abs(got - ref).max())
            worst[pool] = max(worst.get(pool, 0.0), diff)
            check(diff <= tol, f"{name}: {pool} pooling of {p!r}: largest difference {diff:.3g} from Hugging "
                               f"Face's, over {tol}")
    print(f"{name}: tokens as Hugging Face's; embeddings within "
          + ", ".join(f"{k} {v:.2g}" for k, v in worst.items()) + f" of Hugging Face's (tolerance {tol})", flush=True)


def check_mxfp4(d, model_file):
    """The MXFP4 experts of our file, dequantized (gguf-py), are exactly
    the experts transformers dequantizes from the checkpoint's blocks and
    scales (x @ W, gate and up interleaved by column)."""
    m = T.AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32)
    got = {t.name: t for t in gguf.GGUFReader(model_file).tensors}
    n = 0
    for il, layer in enumerate(m.model.layers):
        ex = layer.mlp.experts
        gu, down = ex.gate_up_proj.detach().numpy(), ex.down_proj.detach().numpy()
        for what, want in (("gate", gu[:, :, 0::2]), ("up", gu[:, :, 1::2]), ("down", down)):
            t = got[f"blk.{il}.ffn_{what}_exps.weight"]
            if not check(t.tensor_type == gguf.GGMLQuantizationType.MXFP4,
                         f"{t.name} is {t.tensor_type.name}, expected MXFP4"):
                return
            w = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type).reshape(want.shape[0], want.shape[2], -1)
            n += check(np.array_equal(w, want.swapaxes(1, 2)),
                       f"{t.name} dequantized differs from transformers' by {np.abs(w - want.swapaxes(1, 2)).max()}")
    print(f"gptossmxfp4: {n} MXFP4 expert tensors dequantize to transformers' experts exactly", flush=True)
    del m


def golden_llama(name, model_file, tmp):
    """llama.cpp itself on our file (the peer's golden_gen: its CPU path,
    f16 KV), against Tessera on the same file (ref, f16 KV): where the
    reference is transformers at another activation rounding (MXFP4
    experts against Q8_0 activations), this shows the file computes as in
    llama.cpp: within 1e-3 (mode quant: an activation's Q8_0 rounding can
    flip between llama.cpp's SIMD quantizer and Tessera's ref; measured
    1.4e-4), every greedy token but near ties."""
    gg = os.path.join(PEER, "build", "bin", "golden_gen")
    if not os.path.exists(gg):
        print(f"note: {name}: no {gg}, not compared with llama.cpp's logits")
        return
    prompts, out = os.path.join(tmp, "prompts.jsonl"), os.path.join(tmp, f"{name}-llama.jsonl")
    with open(prompts, "w") as f:
        for p in ("The model runs on every device", "Tessera reads GGUF files"):
            f.write(json.dumps({"prompt": p, "special": False}) + "\n")
    r = subprocess.run([gg, model_file, prompts, out, "8"], capture_output=True, text=True)
    if not check(r.returncode == 0, f"{name}: golden_gen: {r.stderr[-500:]}"):
        return
    r = subprocess.run([TEST_GOLDEN, name, "quant", "1e-3", "--model", model_file, "--golden", out, "--device", "ref"],
                       capture_output=True, text=True)
    lines = [x.replace(" on ref", " on ref against llama.cpp") for x in r.stdout.splitlines()
             if x.startswith(("ok", "FAIL"))]
    print("\n".join(lines), flush=True)
    check(r.returncode == 0, f"{name}: logits against llama.cpp's on the same file:\n{r.stdout[-1500:]}")


def png(path, w, h):
    """A small RGB PNG (a gradient), written with zlib alone."""
    import struct
    import zlib
    rows = b"".join(b"\0" + b"".join(bytes((x * 255 // w, y * 255 // h, (x * y) % 256)) for x in range(w))
                    for y in range(h))

    def chunk(t, data):
        return struct.pack(">I", len(data)) + t + data + struct.pack(">I", zlib.crc32(t + data))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


_MTMD_REF = []


def mtmd_ref(tmp):
    """tests/data/mm/mtmd_ref.cpp (our program on llama.cpp's libmtmd)
    built once against the peer's tree, or None where that cannot be done
    ($TESSERA_MTMD_REF names a built one)."""
    if not _MTMD_REF:
        exe = os.environ.get("TESSERA_MTMD_REF") or os.path.join(tmp, "mtmd_ref")
        b = os.path.join(PEER, "build", "bin")
        if not os.path.exists(exe) and os.path.exists(os.path.join(b, "libmtmd.so")):
            subprocess.run(["g++", "-O1", "-std=c++17", os.path.join(ROOT, "tests", "data", "mm", "mtmd_ref.cpp"),
                            "-I" + os.path.join(PEER, "include"), "-I" + os.path.join(PEER, "ggml", "include"),
                            "-I" + os.path.join(PEER, "tools", "mtmd"), "-L" + b, "-lmtmd", "-lllama", "-lggml",
                            "-lggml-base", "-Wl,-rpath," + b, "-o", exe], capture_output=True)
        _MTMD_REF.append(exe if os.path.exists(exe) else None)
    return _MTMD_REF[0]


def spell_spm(ids, model):
    """SentencePiece pieces to bytes: U+2581 a space, <0xNN> a byte."""
    toks = {x.name: x for x in gguf.GGUFReader(model).fields.values()}["tokenizer.ggml.tokens"].contents()
    out = b""
    for i in ids:
        t = toks[i]
        out += bytes([int(t[3:5], 16)]) if len(t) == 6 and t.startswith("<0x") and t.endswith(">") else \
            t.replace("\u2581", " ").encode()
    return out


def mtmd_image(name, d, text_f32, tmp):
    """Our f32 mmproj loaded by tessera's clip loader beside our text
    model: `tessera run --image` encodes an image (one row per 28 x 28
    cell) and continues greedily after it, as llama.cpp's libmtmd does on
    the same pair (mtmd_ref, where it can be built)."""
    mm = f"{d}-mmproj-ours-f32.gguf"
    if not ours(d, mm, "f32", "--mmproj"):
        return
    img = os.path.join(ROOT, "tests", "data", "mm", "sq224.png")
    r = subprocess.run([BIN, "run", "-m", text_f32, "--mmproj", mm, "--image", img, "-p", "The model", "-n", "4",
                        "--temp", "0", "-dev", "ref", "--no-echo"], capture_output=True, text=True, errors="replace")
    m = [x for x in r.stderr.splitlines() if x.startswith("prompt:")]
    n_prompt = int(m[-1].split("/")[1].split()[0]) if m else 0
    # sq224.png: 8 x 8 cells of 28 pixels, so 64 image rows and the text's tokens
    check(r.returncode == 0 and n_prompt >= 64 + 2, f"{name}: tessera run --mmproj (ours) --image sq224.png: rc "
                                                    f"{r.returncode}, {n_prompt} prompt tokens: {r.stderr[-600:]}")
    print(f"{name} mmproj: tessera run --image loads it: {n_prompt} prompt tokens with the image", flush=True)
    ref = mtmd_ref(tmp)
    if ref is None:
        print(f"note: {name} mmproj: no mtmd_ref (g++ and the peer's libmtmd), not compared with llama.cpp's libmtmd")
    else:
        js = os.path.join(tmp, f"{name}-mtmd.json")
        rr = subprocess.run([ref, text_f32, mm, img, "<__media__>Once upon a time", "8", js], capture_output=True,
                            text=True, errors="replace")
        r = subprocess.run([BIN, "run", "-m", text_f32, "--mmproj", mm, "--image", img, "-p", "Once upon a time",
                            "-n", "8", "--temp", "0", "-dev", "ref", "--no-echo"], capture_output=True)
        if check(rr.returncode == 0 and r.returncode == 0, f"{name}: mtmd_ref rc {rr.returncode} "
                                                           f"{rr.stderr[-300:]}, tessera rc {r.returncode}"):
            want = spell_spm(json.load(open(js))["greedy"], text_f32)
            check(r.stdout.rstrip(b"\n") == want, f"{name}: tessera's greedy text after sq224.png {r.stdout!r} is "
                                                  f"not llama.cpp libmtmd's {want!r}")
            print(f"{name} mmproj: 8 greedy tokens after the image as llama.cpp libmtmd's: "
                  f"{'yes' if r.stdout.rstrip(bytes([10])) == want else 'NO'}", flush=True)
    os.unlink(mm)

def test_mmproj(name, d, text_model, tmp, log):
    """The vision tower with --mmproj: the same keys (in the same order)
    and tensors as the peer's --mmproj file at f16 and bf16; then, for
    the towers Tessera computes (MTMD_MMPROJ), an image's greedy tokens
    against llama.cpp libmtmd's (mtmd_image), for the others whether
    Tessera's mmproj loader takes it, beside our text model, on an image
    (its projector type may not be one Tessera computes yet: that is said,
    and must be the loader's one error naming the key)."""
    for outtype in ("f16", "bf16"):
        a, b = f"{d}-ours-mmproj-{outtype}.gguf", f"{d}-peer-mmproj-{outtype}.gguf"
        if ours(d, a, outtype, "--mmproj") and peer(d, b, outtype, "--mmproj", log=log):
            compare(a, b, f"{name} mmproj {outtype}")
            ka, kb = ([k for k in gguf.GGUFReader(f).fields if k != "general.size_label"] for f in (a, b))
            check(ka == kb, f"{name} mmproj {outtype}: keys in another order than llama.cpp's:\n{ka}\n{kb}")
        keep = outtype == "f16" and name not in MTMD_MMPROJ and os.path.exists(a)  # for the loader, below
        for fn in ((b,) if keep else (a, b)):
            if os.path.exists(fn):
                os.unlink(fn)
    # no preprocessor_config.json: one error naming it
    pp = os.path.join(d, "preprocessor_config.json")
    os.rename(pp, pp + ".away")
    r = env.tessera_convert(d, f"{d}-bad.gguf", "f16", "--mmproj")
    os.rename(pp + ".away", pp)
    check(r.returncode == 1 and "preprocessor_config.json" in r.stderr and r.stderr.count("\n") == 1
          and not os.path.exists(f"{d}-bad.gguf"), f"{name} --mmproj without preprocessor_config.json: "
                                                  f"rc {r.returncode}: {r.stderr[-400:]!r}")
    if name in MTMD_MMPROJ:
        mtmd_image(name, d, text_model, tmp)
        return
    a = f"{d}-ours-mmproj-f16.gguf"
    if not os.path.exists(a):
        return
    img = os.path.join(tmp, "image.png")
    png(img, 64, 64)
    r = subprocess.run([BIN, "run", "-m", text_model, "--mmproj", a, "--image", img, "-p", "Describe it.", "-n", "2",
                        "-dev", "ref"], capture_output=True, text=True)
    pt = {x.name: x for x in gguf.GGUFReader(a).fields.values()}["clip.projector_type"].contents()
    if r.returncode == 0:
        print(f"{name} mmproj: Tessera's loader takes it ({pt}) and runs an image through it", flush=True)
    else:
        check("clip.projector_type" in r.stderr and f'"{pt}" is not supported' in r.stderr,
              f"{name} mmproj: tessera run --mmproj: rc {r.returncode}: {r.stderr[-600:]}")
        print(f"{name} mmproj: Tessera's mmproj loader does not compute projector type {pt} yet "
              f"(one error naming clip.projector_type)", flush=True)
    os.unlink(a)


def test_archs(tmp, log):
    tokd = os.path.join(tmp, "spm")
    spm_tokenizer(tokd)
    for k, name in enumerate(ARCHS):
        if ONLY and name not in ONLY:
            continue
        d = os.path.join(tmp, name)
        make_model(name, d, tokd, 60 + k)
        for outtype in ("f16", "bf16"):
            a, b = f"{d}-ours-{outtype}.gguf", f"{d}-peer-{outtype}.gguf"
            if ours(d, a, outtype) and peer(d, b, outtype, *PEER_ARGS.get(name, []), log=log, pre=PEER_PRE.get(name)):
                compare(a, b, f"{name} {outtype}", name)
                got = {x.name: x for x in gguf.GGUFReader(a).fields.values()}
                for k, v in PEER_DIFFERS.get(name, {}).items():
                    check(got[k].contents() == v, f"{name} {outtype}: {k} is {got[k].contents()!r}, expected {v!r}")
            for fn in (a, b):
                if os.path.exists(fn):
                    os.unlink(fn)
        f32 = f"{d}-ours-f32.gguf"
        if not ours(d, f32, "f32"):
            continue
        if name in MMPROJ:
            test_mmproj(name, d, f32, tmp, log)
        if ARCHS[name][3].startswith("wordpiece"):
            prompts = ["The model runs on every device", "Tessera reads GGUF files, don't it?"]
            if name == "bertcased":  # capitals with pieces of their own, accents kept
                prompts.append("Model D: THE Caf\u00e9 \u00c9t\u00e9, the GGUF of Tessera")
                lc = {x.name: x for x in gguf.GGUFReader(f32).fields.values()}["tokenizer.ggml.normalizer.lowercase"]
                check(lc.contents() is False, f"bertcased: tokenizer.ggml.normalizer.lowercase is {lc.contents()}")
            check_embeddings(name, d, f32, prompts, ARCHS[name][5], tmp)
            os.unlink(f32)
            # a normaliser that is not BERT's: one error naming tokenizer.json
            p = os.path.join(d, "tokenizer.json")
            with open(p, encoding="utf-8") as f:
                tj = json.load(f)
            tj["normalizer"] = {"type": "Lowercase"}
            with open(p, "w", encoding="utf-8") as f:
                json.dump(tj, f, ensure_ascii=False)
            r = env.tessera_convert(d, f"{d}-bad.gguf", "f16")
            check(r.returncode == 1 and "not a BERT tokenizer's" in r.stderr and "tokenizer.json" in r.stderr
                  and r.stderr.count("\n") == 1 and not os.path.exists(f"{d}-bad.gguf"),
                  f"{name} with a Lowercase normalizer: rc {r.returncode}: {r.stderr[-400:]!r}")
            if name == "nomic":  # what Tessera's nomic-bert does not compute: one error naming the key
                p = os.path.join(d, "config.json")
                with open(p) as f:
                    cfg = json.load(f)
                cfg["rotary_emb_fraction"] = 0.5
                with open(p, "w") as f:
                    json.dump(cfg, f)
                r = env.tessera_convert(d, f"{d}-bad.gguf", "f16")
                check(r.returncode == 1 and "'rotary_emb_fraction'" in r.stderr and "config.json" in r.stderr
                      and r.stderr.count("\n") == 1 and not os.path.exists(f"{d}-bad.gguf"),
                      f"nomic with rotary_emb_fraction 0.5: rc {r.returncode}: {r.stderr[-400:]!r}")
            continue
        if name == "gptossmxfp4":
            check_mxfp4(d, f32)
        g = os.path.join(tmp, f"{name}.jsonl")
        if not hf_golden(d, f32, g, ["The model runs on every device", "Tessera reads GGUF files"], tmp):
            continue
        tol = ARCHS[name][5]
        r = subprocess.run([TEST_GOLDEN, name, GOLDEN_MODE.get(name, "strict"), str(tol), "--model", f32, "--golden", g,
                            "--device", "ref", "-ctk", "f32", "-ctv", "f32"],
                           capture_output=True, text=True)
        lines = [x for x in r.stdout.splitlines() if x.startswith(("ok", "FAIL"))]
        print("\n".join(lines), flush=True)
        check(r.returncode == 0, f"{name}: logits against the Hugging Face model (tolerance {tol}):\n"
                                 f"{r.stdout[-1500:]}{r.stderr[-500:]}")
        if name == "gptossmxfp4":
            golden_llama(name, f32, tmp)
        os.unlink(f32)
        if name in BAD_CONFIGS:
            spoil, key = BAD_CONFIGS[name]
            p = os.path.join(d, "config.json")
            with open(p) as f:
                cfg = json.load(f)
            spoil(cfg)
            with open(p, "w") as f:
                json.dump(cfg, f)
            r = env.tessera_convert(d, f"{d}-bad.gguf", "f16")
            check(r.returncode == 1 and key in r.stderr and "config.json" in r.stderr
                  and r.stderr.count("\n") == 1 and not os.path.exists(f"{d}-bad.gguf"),
                  f"{name} with a config naming {key} wrongly: rc {r.returncode}: {r.stderr[-400:]!r}")
        if name == "gptossmxfp4":  # another quantization: one error naming the key
            p = os.path.join(d, "config.json")
            with open(p) as f:
                cfg = json.load(f)
            cfg["quantization_config"]["quant_method"] = "gptq"
            with open(p, "w") as f:
                json.dump(cfg, f)
            r = env.tessera_convert(d, f"{d}-bad.gguf", "f16")
            check(r.returncode == 1 and "quant_method 'gptq'" in r.stderr and "config.json" in r.stderr
                  and r.stderr.count("\n") == 1 and not os.path.exists(f"{d}-bad.gguf"),
                  f"gpt-oss with quant_method gptq: rc {r.returncode}: {r.stderr[-400:]!r}")
        if name == "granitehybrid":  # layer_types that do not say every layer's kind: one error naming the key
            p = os.path.join(d, "config.json")
            with open(p) as f:
                cfg = json.load(f)
            cfg["layer_types"] = ["mamba", "attention", "mamba"]
            with open(p, "w") as f:
                json.dump(cfg, f)
            r = env.tessera_convert(d, f"{d}-bad.gguf", "f16")
            check(r.returncode == 1 and "'layer_types'" in r.stderr and "config.json" in r.stderr
                  and r.stderr.count("\n") == 1 and not os.path.exists(f"{d}-bad.gguf"),
                  f"granitehybrid with 3 layer_types for 4 layers: rc {r.returncode}: {r.stderr[-400:]!r}")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "peer.log")
        try:
            test_tokenizers(tmp, log)
            test_archs(tmp, log)
        finally:
            if env.failures and os.path.exists(log):
                print("--- the peer converter's log (last lines) ---")
                print(open(log, errors="replace").read()[-3000:])
    env.finish()


main()
