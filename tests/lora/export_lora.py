"""tessera export-lora: the base model with synth-lora-r4 merged (F32)
gives llama.cpp's logits of the base with that adapter applied (the golden
of lora-golden-r4, through test_golden without --lora); a merged F16 model
is F16 and close to them; bad input is one error naming the file.

usage: export_lora.py TEST_GOLDEN TESSERA_SYNTH"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
from cli_common import Checker, require, run, test_data  # noqa: E402

TEST_GOLDEN, SYNTH = sys.argv[1], sys.argv[2]
BASE = test_data("synth-lora-base-f32.gguf")
R4 = test_data("synth-lora-r4-f32.gguf")
GOLDEN = test_data("synth-lora-r4.jsonl")
VOCAB = test_data("models/stories260K.gguf")
SHAPE = ["--dim", "128", "--layers", "2", "--heads", "4", "--kv-heads", "2", "--ffn", "192", "--ctx", "256",
         "--seed", "41"]


def golden(model, tol):
    p = subprocess.run([TEST_GOLDEN, "merged", "strict", tol, "--model", model, "--golden", GOLDEN, "--device", "ref"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    return p.returncode, p.stdout


def main():
    require(BASE, R4, GOLDEN, VOCAB)
    c = Checker("export_lora")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "merged.gguf")
        rc, so, err = run(["export-lora", "-m", BASE, "--lora", R4, "-o", out])
        c.check(rc == 0 and "15 with adapters merged" in err, f"export-lora: rc {rc}: {err}")
        rc, log = golden(out, "1e-3")
        c.check(rc == 0, f"merged F32 model against the adapter's golden:\n{log}")
        # an F16 base: the merged weights stay F16 (rounded once more)
        base16 = os.path.join(tmp, "base-f16.gguf")
        subprocess.run([SYNTH, "-q", "-o", base16, "--vocab-from", VOCAB, "--type", "F16", *SHAPE], check=True)
        out16 = os.path.join(tmp, "merged-f16.gguf")
        rc, so, err = run(["export-lora", "-m", base16, "--lora-scaled", R4, "1.0", "-o", out16])
        c.check(rc == 0, f"export-lora F16: rc {rc}: {err}")
        rc, so, err = run(["inspect", out16])
        c.check(rc == 0 and " blk.0.attn_q.weight " in so and "F16" in so.split(" blk.0.attn_q.weight ")[1][:20],
                "merged F16 weight is not F16")
        c.check("general.file_type" in so and "uint32               1" in so, "general.file_type is not 1")
        # bad input: another model's adapter, no adapter, a missing base
        other = os.path.join(tmp, "other.gguf")
        subprocess.run([SYNTH, "-q", "-o", other, "--vocab-from", VOCAB, "--lora-rank", "4", *SHAPE[:1], "96",
                        *SHAPE[2:]], check=True)
        rc, so, err = run(["export-lora", "-m", BASE, "--lora", other, "-o", os.path.join(tmp, "x.gguf")])
        c.check(rc == 1 and "has shape" in err and other in err and not os.path.exists(os.path.join(tmp, "x.gguf")),
                f"mismatched adapter: rc {rc}: {err!r}")
        rc, so, err = run(["export-lora", "-m", BASE, "-o", os.path.join(tmp, "y.gguf")])
        c.check(rc == 2 and "--lora" in err, f"no adapter: rc {rc}: {err!r}")
        rc, so, err = run(["export-lora", "-m", os.path.join(tmp, "nope.gguf"), "--lora", R4, "-o", out])
        c.check(rc == 1 and "nope.gguf" in err, f"missing base: rc {rc}: {err!r}")
    c.finish()


main()
