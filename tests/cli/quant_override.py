"""tessera quantize's per-tensor overrides against llama-quantize (skipped
when the peer's llama-quantize is not built): --output-tensor-type,
--token-embedding-type, --leave-output-tensor and --tensor-type
PATTERN=TYPE (repeatable).

- per-tensor types: `tessera quantize --dry-run` names the type
  `llama-quantize --dry-run` does for every tensor, with each flag (and
  --tensor-type-file, entries separated by spaces or newlines) alone
  and together, on synth-s (dense, untied), a tied-embedding llama, a
  llama with rows of 96 (the fallback table: an override of Q4_K there is
  Q5_0, but --output-tensor-type is taken as given), and a MoE hybrid;
  the cases show the rules docs/quantize.md states (a --tensor-type match
  is not counted by the mixture's per-layer counters, the first match
  wins, the pattern is a regular expression lower-cased first, the two
  named flags win over --tensor-type, --leave-output-tensor over all);
- whole files: a few of those quantized by both tools, byte-identical
  (metadata included);
- bad values (unknown type, malformed PATTERN=TYPE, bad pattern) are one
  clear error naming the flag, exit 2, nothing written; an override the
  input cannot take (Q6_K output on rows of 96, IQ2_XXS without a matrix)
  fails before writing, naming the tensor and the flag, where
  llama-quantize fails too."""
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_common import STORIES, Checker, run, test_data  # noqa: E402
from quant_files import compare_files, quantize_tools, write_synthetic_imatrix  # noqa: E402
from quant_moe import dry_runs  # noqa: E402

# models made here by tessera-synth (seconds): name -> options
MADE = {
    "tied": ["--arch", "llama", "--dim", "256", "--heads", "8", "--kv-heads", "2", "--ctx", "256", "--layers", "4",
             "--ffn", "512", "--tied"],
    "r96": ["--arch", "llama", "--dim", "96", "--heads", "4", "--kv-heads", "2", "--ctx", "256", "--layers", "4",
            "--ffn", "256"],
}
S = "synth-s"
MOE = "qwen35moe"
TWO = ["--tensor-type", "attn_v=q8_0", "--tensor-type", r"blk\.[01]\.ffn_down=q5_k"]

# (model, mixture, flags): dry runs compared tensor by tensor
PLANS = [
    (S, "Q4_K_M", ["--output-tensor-type", "q8_0"]),
    (S, "Q4_K_M", ["--token-embedding-type", "iq4_nl"]),
    (S, "Q4_K_M", ["--leave-output-tensor"]),
    (S, "Q4_K_M", ["--tensor-type", "attn_v=q5_0"]),
    # blk.0-1's attn_v not counted: blk.2-3 fall out of use_more_bits
    (S, "Q4_K_M", ["--tensor-type", r"blk\.[01]\.attn_v=q8_0"]),
    (S, "Q4_K_M", TWO),
    (S, "Q3_K_M", ["--tensor-type", r"blk\.0\.ffn_down=q8_0", "--tensor-type", "ffn_(up|gate)=q5_k"]),
    # the first match wins, in the order given
    (S, "Q4_K_M", ["--tensor-type", "blk.0.attn_v=q5_1", "--tensor-type", "attn_v=q8_0"]),
    (S, "Q4_K_M", ["--tensor-type", "attn_v=q8_0", "--tensor-type", "blk.0.attn_v=q5_1"]),
    # lower-cased: ATTN matches attn, and \W becomes \w; \d is a digit
    (S, "Q4_K_M", ["--tensor-type", r"ATTN\Wv=Q8_0", "--tensor-type", r"blk\.\d\.ffn_up=f16"]),
    # the named flags win over --tensor-type; leaving the output wins over both
    (S, "Q4_K_M", ["--tensor-type", "output=q8_0", "--output-tensor-type", "q5_0"]),
    (S, "Q4_K_M", ["--leave-output-tensor", "--output-tensor-type", "q5_0", "--tensor-type", "output=q5_0"]),
    (S, "Q4_K_M", ["--tensor-type", "token_embd=q5_1", "--token-embedding-type", "q8_0"]),
    (S, "Q4_0", ["--pure", "--output-tensor-type", "q8_0", "--token-embedding-type", "q5_0",
                 "--tensor-type", "ffn_up=q5_1"]),
    (S, "Q4_K_M", ["--pure", "--leave-output-tensor"]),
    (S, "IQ4_XS", ["--tensor-type", "attn_q=iq2_xxs", "--tensor-type", "attn_k=tq1_0"]),
    # norms and routers are never touched
    (S, "Q4_K_M", ["--tensor-type", "norm=q8_0"]),
    (MOE, "Q4_K_M", ["--tensor-type", "ffn_gate_inp=q8_0", "--tensor-type", "ssm_conv1d=q8_0"]),
    # a tied embedding is the output: --output-tensor-type applies to it,
    # --token-embedding-type wins, --leave-output-tensor does not touch it
    ("tied", "Q4_K_M", ["--output-tensor-type", "q8_0"]),
    ("tied", "Q4_K_M", ["--token-embedding-type", "q5_0", "--output-tensor-type", "q8_0"]),
    ("tied", "Q4_K_M", ["--leave-output-tensor"]),
    # rows of 96: --tensor-type falls back as the mixtures do, the named
    # flags do not
    ("r96", "Q4_K_M", ["--tensor-type", "attn_q=q6_k", "--tensor-type", "output=q6_k",
                       "--tensor-type", "token_embd=iq2_xxs"]),
    ("r96", "Q4_K_M", ["--tensor-type", "attn_q=q4_k", "--tensor-type", "ffn_down=iq4_xs",
                       "--output-tensor-type", "q6_k", "--token-embedding-type", "q2_k"]),
    ("r96", "IQ4_XS", ["--tensor-type", "ffn=q3_k", "--tensor-type", "attn_k=tq1_0"]),
    (MOE, "Q4_K_M", ["--tensor-type", r"blk\.0\.attn_qkv=q8_0", "--tensor-type", "exps=q5_k"]),
    (MOE, "Q3_K_M", ["--tensor-type", r"blk\.[0-3]\.ffn_down=q8_0", "--output-tensor-type", "q4_k"]),
    # --tensor-type-file's entries take its place in the command line's order
    (S, "Q4_K_M", ["--tensor-type-file", "{FILE}", "--tensor-type", "attn_v=f16"]),
    (S, "Q4_K_M", ["--tensor-type", "attn_v=f16", "--tensor-type-file", "{FILE}"]),
    (S, "Q4_K_M", ["--tensor-type-file", "{EMPTY}"]),
]
# the --tensor-type-file of the cases ({FILE}); {EMPTY} is an empty file
TYPE_FILE = "blk.0.attn_v=q5_1 ffn_down=q8_0\n\n  attn_v=q5_0\n"


# (model, mixture, flags): whole files compared byte for byte
FILES = [
    (S, "Q4_K_M", ["--output-tensor-type", "q8_0", "--token-embedding-type", "q5_0"]),
    (S, "Q4_K_M", TWO),
    (S, "Q3_K_M", ["--leave-output-tensor", "--tensor-type", "attn_output=iq4_xs"]),
    (S, "Q4_0", ["--pure", "--tensor-type", "ffn_up=q5_1", "--output-tensor-type", "q6_k"]),
    ("tied", "Q5_K_M", ["--output-tensor-type", "q8_0"]),
    ("r96", "Q4_K_M", ["--tensor-type", "attn_q=q6_k", "--tensor-type", "ffn_down=iq4_xs",
                       "--token-embedding-type", "q8_0"]),
    (MOE, "Q4_K_M", ["--tensor-type", "exps=q5_k", "--tensor-type", r"blk\.0\.attn_qkv=q8_0"]),
    (S, "Q4_K_M", ["--tensor-type-file", "{FILE}", "--output-tensor-type", "q8_0"]),
    # grid types chosen by override, weighed by a matrix
    (S, "Q4_K_M", ["--imatrix", "{IMATRIX}", "--tensor-type", r"blk\.0\.attn_q=iq2_xxs",
                   "--tensor-type", r"blk\.1\.attn_k=iq3_s", "--output-tensor-type", "iq4_xs"]),
]

# bad values: (flags, what the one error line must name)
BAD = [
    (["--tensor-type", "attn_q=foo"], ["--tensor-type", "foo"]),
    (["--tensor-type", "attn_q"], ["--tensor-type", "attn_q", "PATTERN=TYPE"]),
    (["--tensor-type", "=q8_0"], ["--tensor-type", "=q8_0"]),
    (["--tensor-type", "attn_q="], ["--tensor-type", "attn_q="]),
    (["--tensor-type", "(attn=q8_0"], ["--tensor-type", "(attn"]),
    (["--tensor-type", "attn_v=q8_0", "--tensor-type", "ffn=Q4_K_M"], ["--tensor-type", "Q4_K_M"]),
    (["--output-tensor-type", "foo"], ["--output-tensor-type", "foo"]),
    (["--token-embedding-type", "q4_k_m"], ["--token-embedding-type", "q4_k_m"]),
    (["--tensor-type-file", "{ABSENT}"], ["--tensor-type-file", "absent.txt", "No such file"]),
    (["--tensor-type-file", "{BAD}"], ["--tensor-type-file", "bad.txt", "attn_v=foo"]),
]


def main():
    lq, synth = quantize_tools()
    models = {S: test_data("models/synth-s-f32.gguf"), MOE: test_data("synth-qwen35moe-f32.gguf")}
    for path in models.values():
        if not os.path.exists(path):
            print(f"skip: {path} is missing (made by the build)")
            sys.exit(77)
    c = Checker("quant_override")
    tmp = tempfile.mkdtemp(prefix="tessera-quant-override-")
    try:
        for name, opts in MADE.items():
            models[name] = os.path.join(tmp, name + ".gguf")
            p = subprocess.run([synth, "-q", "-o", models[name], "--vocab-from", STORIES, "--type", "F32",
                                "--seed", "3"] + opts, capture_output=True, text=True, timeout=120)
            if not c.check(p.returncode == 0, f"tessera-synth {name}: {p.stderr[-300:]}"):
                c.finish()
        files = {"{FILE}": os.path.join(tmp, "types.txt"), "{EMPTY}": os.path.join(tmp, "empty.txt"),
                 "{BAD}": os.path.join(tmp, "bad.txt"), "{ABSENT}": os.path.join(tmp, "absent.txt"),
                 "{IMATRIX}": os.path.join(tmp, "synth-s.imatrix.gguf")}
        write_synthetic_imatrix(models[S], files["{IMATRIX}"])
        for key, text in (("{FILE}", TYPE_FILE), ("{EMPTY}", ""), ("{BAD}", "attn_q=q8_0\nattn_v=foo\n")):
            with open(files[key], "w") as f:
                f.write(text)
        def subst(flags):
            return [files.get(a, a) for a in flags]
        PLANS[:] = [(m, mix, subst(flags)) for m, mix, flags in PLANS]
        FILES[:] = [(m, mix, subst(flags)) for m, mix, flags in FILES]
        BAD[:] = [(subst(flags), names) for flags, names in BAD]
        t0 = time.time()
        check_plans(c, lq, models)
        t1 = time.time()
        check_files(c, tmp, lq, models)
        t2 = time.time()
        check_errors(c, tmp, lq, models)
        print(f"quant_override: {t1 - t0:.1f} s for the dry runs, {t2 - t1:.1f} s for the whole files")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    c.finish()


def check_plans(c, lq, models):
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda j: dry_runs(lq, models[j[0]], j[1], None, j[2]), PLANS))
    n_tensors = n_same = n_moved = 0
    for (name, mix, flags), (want, got, rc, err) in zip(PLANS, results):
        label = f"{name} {mix} {' '.join(flags)}"
        if not c.check(want and rc == 0 and got, f"{label}: a dry run failed (rc {rc}): {err[-300:]}"):
            continue
        diffs = [f"{t}: ours {got.get(t)}, llama-quantize {ty}" for t, ty in want.items() if got.get(t) != ty]
        c.check(set(want) == set(got), f"{label}: the dry runs list other tensors")
        c.check(not diffs, f"{label}: {len(diffs)} tensors differ: {diffs[:4]}")
        n_tensors += len(want)
        n_same += len(want) - len(diffs)
    # the flags must change something, or the comparison proves little
    base = {n: dry_runs(lq, models[n], "Q4_K_M", None, [])[0] for n in (S, "tied", "r96")}
    for (name, mix, flags), (want, _, _, _) in zip(PLANS, results):
        if mix == "Q4_K_M" and name in base and want and want != base[name]:
            n_moved += 1
    c.check(n_moved >= 15, f"only {n_moved} Q4_K_M cases differ from the plain mixture's plan")
    print(f"quant_override: dry runs: {len(PLANS)} cases ({n_moved} of the Q4_K_M ones move tensors), "
          f"{n_same}/{n_tensors} tensors of the same type")


def check_files(c, tmp, lq, models):
    n = 0
    for i, (name, mix, flags) in enumerate(FILES):
        label = f"{name} {mix} {' '.join(flags)}"
        want, got = os.path.join(tmp, f"want{i}.gguf"), os.path.join(tmp, f"got{i}.gguf")
        p = subprocess.run([lq] + flags + [models[name], want, mix, "2"], capture_output=True, text=True,
                           timeout=300)
        if not c.check(p.returncode == 0, f"llama-quantize {label}: {p.stderr[-300:]}"):
            continue
        rc, _, err = run(["quantize", "-q", "-t", "2"] + flags + [models[name], got, mix], timeout=300)
        if not c.check(rc == 0, f"tessera quantize {label} failed ({rc}): {err[-300:]}"):
            continue
        problems = compare_files(want, got)
        c.check(not problems, f"{label}: not identical to llama-quantize's file: {problems[:4]}")
        n += 1
        os.unlink(want)
        os.unlink(got)
    print(f"quant_override: {n}/{len(FILES)} whole files identical to llama-quantize's")


def check_errors(c, tmp, lq, models):
    out = os.path.join(tmp, "bad.gguf")
    for flags, names in BAD:
        for dry in (True, False):
            args = ["quantize"] + (["--dry-run"] if dry else ["-q"]) + flags + [models[S]]
            args += ([] if dry else [out]) + ["Q4_K_M"]
            rc, text, err = run(args)
            lines = err.strip().splitlines()
            c.check(rc == 2 and len(lines) == 1 and err.startswith("tessera quantize: ") and
                    all(s in err for s in names) and "Traceback" not in err,
                    f"{' '.join(flags)}{' (dry run)' if dry else ''}: rc {rc}, want 2 and one line naming "
                    f"{names}: {err[-300:]}")
            c.check(not os.path.exists(out) and not (dry and text.strip()),
                    f"{' '.join(flags)}: something was written")
    # overrides the input cannot take: both tools fail; ours before writing,
    # naming the tensor and the flag
    for name, flags, names in (
            ("r96", ["--output-tensor-type", "q6_k"], ["output.weight", "--output-tensor-type", "row length 96"]),
            (S, ["--tensor-type", "attn_q=iq2_xxs"], ["blk.0.attn_q.weight", "--tensor-type 'attn_q=iq2_xxs'",
                                                      "importance matrix"])):
        p = subprocess.run([lq] + flags + [models[name], out + ".lq", "Q4_K_M", "2"], capture_output=True,
                           text=True, timeout=300)
        c.check(p.returncode != 0, f"llama-quantize {' '.join(flags)} on {name} succeeded")
        rc, _, err = run(["quantize", "-q"] + flags + [models[name], out, "Q4_K_M"])
        c.check(rc == 1 and all(s in err for s in names) and not os.path.exists(out) and
                not [f for f in os.listdir(tmp) if "tmp" in f],
                f"{' '.join(flags)} on {name}: rc {rc}, want 1 naming {names}, nothing written: {err[-300:]}")
        # the dry run plans it, as llama-quantize --dry-run does
        want, got, rc, err = dry_runs(lq, models[name], "Q4_K_M", None, flags)
        c.check(rc == 0 and want and want == got, f"--dry-run {' '.join(flags)} on {name}: rc {rc}: {err[-200:]}")


if __name__ == "__main__":
    main()
