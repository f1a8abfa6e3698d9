"""tessera run with LoRA adapters: --lora and --lora-scaled change the
output as llama.cpp's do (the goldens are test_golden's; here the flags
themselves), --lora-scaled FILE 0 is the base model, and every bad adapter
is one clear error naming the file and the tensor or key (exit 1), a bad
flag a usage error (exit 2).

usage: lora_cli.py TESSERA_SYNTH"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
from cli_common import Checker, require, run, test_data  # noqa: E402

SYNTH = sys.argv[1]
BASE = test_data("synth-lora-base-f32.gguf")
R4 = test_data("synth-lora-r4-f32.gguf")
R8 = test_data("synth-lora-r8-f16.gguf")
SHAPE = ["--dim", "128", "--layers", "2", "--heads", "4", "--kv-heads", "2", "--ffn", "192", "--ctx", "256"]
VOCAB = test_data("models/stories260K.gguf")


def greedy(*extra):
    return run(["run", "-m", BASE, "-p", "Once upon a time", "-n", "12", "--temp", "0", "-dev", "ref", *extra])


def synth(path, *opts):
    subprocess.run([SYNTH, "-q", "-o", path, "--vocab-from", VOCAB, *opts], check=True)


def main():
    require(BASE, R4, R8, VOCAB)
    c = Checker("lora_cli")
    rc, base, err = greedy()
    c.check(rc == 0, f"base run failed: {err}")
    rc, lora, err = greedy("--lora", R4)
    c.check(rc == 0 and lora != base, f"--lora did not change the output (rc {rc}): {err}")
    rc, same, err = greedy("--lora-scaled", R4, "1")
    c.check(rc == 0 and same == lora, "--lora-scaled FILE 1 differs from --lora FILE")
    rc, zero, err = greedy("--lora-scaled", R4, "0")
    c.check(rc == 0 and zero == base, "--lora-scaled FILE 0 differs from the base model")
    rc, colon, err = greedy("--lora-scaled", R4 + ":0")
    c.check(rc == 0 and colon == base, "--lora-scaled FILE:0 (llama.cpp's spelling) differs from the base model")
    rc, two, err = greedy("--lora", R4, "--lora-scaled", R8, "0.75")
    rc2, two_list, err = greedy("--lora-scaled", f"{R4}:1,{R8}:0.75")
    c.check(rc2 == 0 and two_list == two, "--lora-scaled A:1,B:0.75 differs from --lora A --lora-scaled B 0.75")
    c.check(rc == 0 and two not in (base, lora), f"two adapters: rc {rc}, output same as one or none: {err}")

    with tempfile.TemporaryDirectory() as tmp:
        # --prompt-cache knows the adapters: a cache saved with one set is
        # not used with another (llama.cpp's file would be; its logits not)
        pc = os.path.join(tmp, "prompt.cache")
        rc, first, err = greedy("--lora", R4, "--prompt-cache", pc)
        c.check(rc == 0 and first == lora and os.path.exists(pc), f"--prompt-cache with --lora: rc {rc}: {err}")
        rc, again, err = greedy("--lora", R4, "--prompt-cache", pc)
        c.check(rc == 0 and again == lora and "prompt cache not used" not in err, f"same adapters: {err}")
        rc, other, err = greedy("--lora-scaled", R4, "0.5", "--prompt-cache", pc)
        c.check(rc == 0 and "prompt cache not used" in err and "LoRA" in err, f"other scale used the cache: {err}")
        rc, plain, err = greedy("--prompt-cache", pc)
        c.check(rc == 0 and plain == base and "prompt cache not used" in err, f"no adapter used the cache: {err}")
        cases = [
            # (name, tessera-synth options, what the error must say)
            ("shape", SHAPE[:1] + ["96"] + SHAPE[2:] + ["--lora-rank", "4"], "has shape"),
            ("arch", SHAPE + ["--arch", "qwen2", "--lora-rank", "4"], "general.architecture"),
            ("layers", SHAPE[:2] + ["--layers", "3"] + SHAPE[4:] + ["--lora-rank", "4"],
             "blk.2.attn_q.weight.lora_a' adapts 'blk.2.attn_q.weight', which the llama model does not have"),
            ("not-adapter", SHAPE, "general.type"),
        ]
        for name, opts, want in cases:
            path = os.path.join(tmp, name + ".gguf")
            synth(path, *opts)
            rc, out, err = greedy("--lora", path)
            c.check(rc == 1 and want in err and path in err and err.count("\n") <= 2,
                    f"{name}: rc {rc}, wanted one error with {want!r} naming the file, got {err!r}")
        # a file that is not GGUF at all
        bad = os.path.join(tmp, "junk.gguf")
        with open(bad, "wb") as f:
            f.write(b"not a gguf file at all")
        rc, out, err = greedy("--lora", bad)
        c.check(rc == 1 and bad in err, f"junk adapter: rc {rc}: {err!r}")
        rc, out, err = greedy("--lora", os.path.join(tmp, "missing.gguf"))
        c.check(rc == 1 and "missing.gguf" in err, f"missing adapter: rc {rc}: {err!r}")
    # flags: --lora-scaled needs FILE and SCALE, SCALE a number
    rc, out, err = run(["run", "-m", BASE, "-p", "x", "--lora-scaled", R4])
    c.check(rc == 2 and "--lora-scaled" in err, f"--lora-scaled without SCALE: rc {rc}: {err!r}")
    rc, out, err = run(["run", "-m", BASE, "-p", "x", "--lora-scaled", R4, "half"])
    c.check(rc == 2 and "--lora-scaled" in err, f"--lora-scaled FILE half: rc {rc}: {err!r}")
    rc, out, err = run(["run", "-m", BASE, "-p", "x", "--lora-scaled", R4 + ":half"])
    c.check(rc == 2 and "'half'" in err, f"--lora-scaled FILE:half: rc {rc}: {err!r}")
    rc, out, err = run(["run", "--help"])
    c.check(rc == 0 and "--lora-scaled FILE SCALE" in out, "run --help does not list --lora-scaled FILE SCALE")
    c.finish()


main()
